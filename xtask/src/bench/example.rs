//! Made-up measurements for testing the report without a benchmark run:
//! every table filled, and each scenario taking the other side of the
//! report's branches (targets met or not, events lost or not, the eBPF
//! breakdown and the probe baseline there or not, the site read or not).

use super::demo::{Capture, IntoFile, Row, Variant};
use super::machine::{CpuUse, Machine};
use super::questions::{Asked, DELIVERIES, QUESTIONS};
use super::stats::Samples;
use super::stream::{Breakdown, Way, BASELINE_RATIOS, RATIOS};
use super::workload::{self, BaselineResults};
use super::{Plan, Results};

/// Which side of the report's branches the results take.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Every target met, nothing lost, no breakdown, no baseline.
    Met,
    /// Every target missed, events lost, with the breakdown and a baseline.
    Missed,
    /// As `Missed`, but the probe site could not be read.
    Unread,
}

pub const SCENARIOS: [Scenario; 3] = [Scenario::Met, Scenario::Missed, Scenario::Unread];

/// Three samples around `median`.
fn around(median: f64) -> Samples {
    let mut s = Samples::default();
    for v in [median * 0.9, median, median * 1.25] {
        s.push(v);
    }
    s
}

pub fn machine() -> Machine {
    Machine {
        date: "2026-01-02 03:04 UTC".into(),
        cpu: "AMD EPYC".into(),
        cpus: 2,
        memory_gib: 23.5,
        virtual_machine: true,
        kernel: "6.18.44-example".into(),
        rustc: "rustc 1.88.0".into(),
        bpftrace: "bpftrace v0.17.0".into(),
    }
}

pub fn results(scenario: Scenario) -> Results {
    let met = scenario == Scenario::Met;
    // Missed targets: slower, costlier, lossy.
    let worse = if met { 1.0 } else { 3.0 };
    let lost = if met { 0 } else { 1234 };
    let mut r = Results::default();
    // The build before a change runs only with a baseline.
    let baseline = !met;
    if baseline {
        r.stream.baseline_rev = Some("3fbb61d".into());
    }
    let ways = Way::ALL
        .into_iter()
        .filter(|&way| baseline || way != Way::BatchedBaseline);
    for (i, way) in ways.enumerate() {
        let row = r.stream.rows.entry(way).or_default();
        let ns = match way {
            Way::Loop | Way::Detached | Way::DetachedNop5 => 0.8 + 0.1 * i as f64,
            Way::Batched
            | Way::BatchedNarrow
            | Way::BatchedBaseline
            | Way::BatchedFile
            | Way::BatchedFileLossless
            | Way::BatchedNarrowFileLossless
            | Way::BatchedJsonl => 5.0 * worse + 0.5 * i as f64,
            _ => 400.0 + 10.0 * i as f64,
        };
        row.ns_per_event = around(ns);
        if !way.untraced() {
            row.consumer_ns_per_event = around(if met { 3.0 } else { 20.0 + i as f64 });
            row.consumer_system_share = around(0.5);
            row.compressing_ns_per_event = around(if met { 1.0 } else { 6.0 });
            row.events = 1_000_000;
            row.lost = lost;
            row.reported_lost = row.lost + u64::from(way == Way::BatchedFile && !met);
            row.trampoline_runs = (i % 3) as u64;
        }
        if way.to_file() {
            row.file_bytes_per_event = around(32.8);
            row.file_mb_s = around(1500.0);
        }
    }
    let baseline_ratios = baseline.then_some(BASELINE_RATIOS);
    let ratios = RATIOS
        .into_iter()
        .chain(baseline_ratios.into_iter().flatten());
    for (i, (a, b)) in ratios.enumerate() {
        let ratio = match (a, b) {
            // Missed: above the 2/3 the narrow stream is held to.
            (Way::BatchedNarrow, Way::BatchedBaseline) => 0.9,
            (Way::Batched, Way::BatchedBaseline) => 1.05,
            (Way::BatchedDeclared, Way::BatchedNarrow) => 0.96 * worse,
            (Way::BpftraceCount, Way::Batched) => 58.0 / worse,
            (Way::PerEvent | Way::PerEventJsonl, Way::BpftraceCount) => 1.0 + 0.1 * worse,
            _ => 1.0 + i as f64,
        };
        r.stream.ratios.insert((a, b), around(ratio));
    }
    r.stream.disk.place = "`/tmp` (/dev/vda ext4)".into();
    r.stream.disk.buffered_mb_s = around(3790.0);
    r.stream.disk.cpu_ns_per_byte = around(0.26);
    r.stream.disk.synced_mb_s = around(1496.0);

    for (i, variant) in Variant::ALL.into_iter().enumerate() {
        let row = r.demo.rows.entry(variant).or_default();
        row.speed = around(40.0 / (i + 1) as f64);
        row.slowdown = around(match variant {
            Variant::All(_) => 2.5 * worse,
            _ => 1.0 + i as f64 * worse,
        });
        row.events = 1_000_000 * i as u64;
        row.lost = lost;
    }
    r.demo.detached_slowdown = around(if met { 0.99 } else { 1.05 });
    let events = 2_345_678;
    r.demo.into_file = IntoFile {
        speed_ratio: around(if met { 0.95 } else { 0.7 }),
        bytes: events * if met { 3 } else { 7 },
        events,
        lost,
    };
    r.demo.capture = Capture {
        bytes: events * if met { 9 } else { 21 },
        events,
        lost,
        perfetto_bytes: events * if met { 17 } else { 25 },
        speed: 20.0,
        reads: crate::bench::demo::READ_FORMATS
            .iter()
            .flat_map(|&format| {
                crate::bench::demo::READ_THREADS
                    .iter()
                    .map(move |&threads| crate::bench::demo::ReadRow {
                        format,
                        threads,
                        rate: around(match threads {
                            1 => 10.0,
                            _ if met => 19.0,
                            _ => 15.0,
                        }),
                    })
            })
            .collect(),
    };

    r.consumers.bytes_per_event = around(7.0);
    r.consumers.bytes_per_mem_read = around(7.01);
    for (i, format) in [
        "read", "jsonl", "text", "chrome", "perfetto", "drcov", "tenet", "parquet",
    ]
    .into_iter()
    .enumerate()
    {
        r.consumers.formats.push(format.into());
        r.consumers
            .rates
            .insert(format.into(), around(10.0 + i as f64));
        r.consumers
            .reference
            .insert(format.into(), (format!("{i}.5"), format!(">= {i}")));
    }

    for delivery in DELIVERIES {
        for (i, question) in QUESTIONS.into_iter().enumerate() {
            let row = r
                .questions
                .rows
                .entry(Asked(delivery, question))
                .or_default();
            row.ns_per_event = around(10.0 + i as f64);
            row.loader_ns_per_event = around(5.0 + i as f64);
            row.events = 350_000;
            row.dropped = lost;
            if i > 0 {
                r.questions.ratios.insert(
                    Asked(delivery, question),
                    around(if met { 0.5 } else { 1.0 }),
                );
            }
        }
    }

    let f = &mut r.functions;
    f.untraced = around(2.5);
    f.untraced_after = around(2.4);
    f.styx = around(300.0);
    f.styx_uretprobe = around(170.0);
    f.bpftrace = around(160.0);
    f.ratio = around(1.81);
    f.ratio_uretprobe = around(1.02);
    f.calls = 1000;
    f.written = 2000 - lost.min(5);
    f.lost = lost.min(5);

    let q = &mut r.qemu;
    q.plain = around(0.49);
    q.plain_wall = around(0.5);
    q.detached = around(0.49 * if met { 1.0 } else { 1.02 });
    q.detached_wall = around(0.5);
    q.ratio = around(if met { 1.0 } else { 1.02 });
    q.traced = around(0.64);
    q.rate = around(80.0);
    q.logged = around(2.13);
    q.log_rate = around(1.5);
    q.lost = lost;

    let c = &mut r.c;
    c.off = around(0.38);
    c.with_static = around(0.5);
    c.with_shared = around(0.5);
    c.static_ratio = around(1.3);
    c.shared_ratio = around(1.3);

    let w = &mut r.workload;
    w.current.compiled_out = around(60.0);
    w.current.detached = around(58.0);
    w.current.detached_slowdown = around(if met { 1.02 } else { 1.37 });
    for variant in [workload::Variant::One, workload::Variant::All] {
        let row = w.traced.entry(variant).or_default();
        row.speed = around(20.0);
        row.slowdown = around(3.0);
        row.events = 5_000_000;
        row.lost = lost;
    }
    // Counted exactly in one scenario, with the baseline; not in another
    // (no valgrind); not at all in the rest.
    w.exact = match scenario {
        Scenario::Met => Some(Err("running valgrind: No such file or directory".into())),
        Scenario::Unread => None,
        _ => Some(Ok(super::exact::Exact {
            current: super::exact::Counts {
                compiled_out: 96.8,
                detached: 116.9,
            },
            baseline: (!met).then_some(super::exact::Counts {
                compiled_out: 96.8,
                detached: 129.3,
            }),
        })),
    };
    if !met {
        w.baseline = Some(BaselineResults {
            rev: "5374bdb".into(),
            commit: "5374bdb0123456789abcdef".into(),
            untraced: workload::Untraced {
                compiled_out: around(61.0),
                detached: around(40.0),
                detached_slowdown: around(1.695),
            },
            current_vs_baseline: around(0.8),
            traced: [workload::Variant::One, workload::Variant::All]
                .into_iter()
                .map(|variant| {
                    let row = Row {
                        speed: around(22.0),
                        slowdown: around(2.7),
                        events: 5_000_000,
                        ..Row::default()
                    };
                    (variant, row)
                })
                .collect(),
            traced_vs_baseline: [workload::Variant::One, workload::Variant::All]
                .into_iter()
                .map(|variant| (variant, around(1.1)))
                .collect(),
        });
        r.breakdown = Some(Breakdown {
            ns_per_event: 16.56,
            batches: 1000,
            events_per_batch: 504.0,
            kernel_ns_per_batch: 1984.0,
            kernel_ns_per_event: 3.94,
        });
    }

    let site = &mut r.site;
    match scenario {
        Scenario::Unread => site.problem = Some("objdump: not found".into()),
        Scenario::Met => {
            site.site = 0x1234;
            site.semaphore = 0x5678;
            site.listing = vec![
                "1230: mov (%rax),%ecx".into(),
                "1232: test %ecx,%ecx".into(),
                "1234: je 1200".into(),
            ];
            site.hoisted = Some("11f0: mov 0x2f00(%rip),%rax".into());
            site.loads = 1;
            site.word_32 = true;
            site.branch = "je".into();
            site.branch_backward = true;
        }
        Scenario::Missed => {
            site.site = 0x1234;
            site.semaphore = 0x5678;
            site.listing = vec![
                "1228: mov 0x2f00(%rip),%rax".into(),
                "122f: movzwl (%rax),%ecx".into(),
                "1232: test %ecx,%ecx".into(),
                "1234: jne 1240".into(),
            ];
            site.loads = 2;
            site.word_32 = false;
            site.branch = "jne".into();
        }
    }

    r.cpu = CpuUse {
        busy: 1753.0,
        steal: 14.8,
        ours: 1700.0,
        wall: 1603.0,
    };
    r
}

pub fn plan(scenario: Scenario) -> Plan {
    Plan::new(scenario != Scenario::Met)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report of each scenario, printed (`cargo test -p xtask report --
    /// --nocapture` shows them), with every section.
    #[test]
    fn report_renders_every_scenario() {
        for scenario in SCENARIOS {
            let md = super::super::report::render(
                &machine(),
                &plan(scenario),
                &results(scenario),
                std::time::Duration::from_secs(1603),
            );
            println!("{md}\n<<<end of report>>>");
            for section in [
                "## Targets",
                "## Method",
                "## 1. ",
                "## 2. ",
                "### Raw captures to a file",
                "## 3. ",
                "## 4. ",
                "## 5. ",
                "## 6. ",
                "## 7. ",
                "## 8. ",
                "## 9. ",
                "## 10. QEMU guests",
                "## Machine",
            ] {
                assert!(md.contains(section), "no {section:?} in\n{md}");
            }
            if let Some(exact) = &results(scenario).workload.exact {
                let says = match exact {
                    Ok(_) => "Exactly, host instructions per guest instruction",
                    Err(_) => "No exact instruction count: running valgrind",
                };
                assert!(md.contains(says), "no {says:?} in\n{md}");
            }
            let missed = md.matches("| **not met** |").count();
            match scenario {
                Scenario::Met => assert_eq!(missed, 0, "{md}"),
                _ => assert_eq!(missed, 23, "{md}"),
            }
        }
    }

    /// The prose quotes the machine it ran on and styx's own definitions,
    /// not the machine and catalogue it was written for.
    #[test]
    fn report_quotes_the_machine_and_styx() {
        let mut machine = machine();
        machine.cpus = 8;
        machine.virtual_machine = false;
        let md = super::super::report::render(
            &machine,
            &plan(Scenario::Missed),
            &results(Scenario::Missed),
            std::time::Duration::from_secs(1),
        );
        assert!(md.contains("on this 8-CPU machine"), "{md}");
        assert!(!md.contains("vCPU"), "{md}");
        // Every catalogue type but `usdt`, which stands for other providers.
        let types = styx_common::EventKind::ALL.len() - 1;
        assert!(md.contains(&format!("all {types} event types")), "{md}");
        let kib = styx_common::batch::BATCH_BYTES / 1024;
        assert!(md.contains(&format!("per {kib} KiB batch")), "{md}");
    }
}
