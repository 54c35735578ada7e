//! The targets styx is held to, as a table: each a promise with its limit,
//! what a run measured for it and why a missed one was missed. Every row is
//! judged the same way ([`Target::met`]): the measured figure on the right
//! side of the limit, and whatever else it promises (nothing lost) held.

use super::figures::{lost_of, slower, table, times, verdict};
use super::Facts;
use crate::bench::demo::{self, Variant};
use crate::bench::stream::{BaselineStream, Row, Way};
use crate::bench::Results;
use std::fmt::Write;
use styx_common::Delivery;

/// A promise, its limit, and what a run measured against it.
struct Target {
    /// What is promised, the limit written in.
    name: String,
    limit: Limit,
    measured: Measured,
}

/// Where the measured figure must be.
#[derive(Clone, Copy)]
enum Limit {
    AtLeast(f64),
    AtMost(f64),
    /// No figure: the target is only what [`Measured::holds`] says.
    None,
}

struct Measured {
    /// The median held against the limit.
    figure: f64,
    /// Whatever else the target promises (nothing lost, the site's shape).
    holds: bool,
    /// The report's "measured" cell.
    shown: String,
    /// Why the target is missed, when it is.
    why: String,
}

impl Target {
    fn met(&self) -> bool {
        let figure = self.measured.figure;
        let within = match self.limit {
            Limit::AtLeast(bound) => figure >= bound,
            Limit::AtMost(bound) => figure <= bound,
            Limit::None => true,
        };
        within && self.measured.holds
    }
}

/// Tight loop, batched: M events/s.
const LOOP_RATE: f64 = 100.0;
/// bpftrace `count()`'s cost per event over a batched one's.
const BPFTRACE_OVER_BATCHED: f64 = 40.0;
/// styx-loader's CPU per batched event, ns.
const LOADER_NS: f64 = 5.0;
/// Traced demo, batched, over compiled out: every type (issue 27's target;
/// it was 10× before), and `insn_exec` only.
const DEMO_ALL_SLOWDOWN: f64 = 3.0;
const DEMO_ONE_SLOWDOWN: f64 = 3.0;
/// Detached over compiled out: the demo, and styx-rv.
const DEMO_DETACHED: f64 = 1.01;
const RV_DETACHED: f64 = 1.03;
/// Per-event delivery over bpftrace `count()`.
const PER_EVENT_OVER_BPFTRACE: f64 = 1.1;
/// Narrow events' cost per event over the u64 stream's before the change
/// (`--probe-baseline REV`'s build), as a fraction.
const NARROW_OVER_BEFORE: (u32, u32) = (2, 3);
/// A declared type's event over the catalogue's of the same widths, per
/// event (batched).
const DECLARED_OVER_CATALOGUE: f64 = 1.05;
/// The demo's raw capture, all types traced: bytes per event.
const DEMO_CAPTURE_BYTES: f64 = 12.0;
/// That capture converted to a Perfetto trace: bytes per event.
const DEMO_PERFETTO_BYTES: f64 = 20.0;
/// The demo traced at all types into a file with the loader's defaults:
/// its speed over its speed traced to /dev/null, and bytes per event.
const DEMO_FILE_SPEED: f64 = 0.9;
const DEMO_FILE_BYTES: f64 = 4.0;
/// `read` of the demo's capture on 2 threads over 1.
const READ_TWO_THREADS: f64 = 1.8;

/// The table, in the report's order.
fn targets(r: &Results, facts: &Facts) -> Vec<Target> {
    let batched = [
        (Way::Batched, "to /dev/null"),
        (Way::BatchedFile, "to a file"),
    ];
    let mut targets = Vec::new();
    for (way, to) in batched {
        targets.push(Target {
            name: format!(
                "tight loop, batched, raw capture {to}: ≥ {LOOP_RATE:.0} M events/s and nothing lost"
            ),
            limit: Limit::AtLeast(LOOP_RATE),
            measured: loop_rate(r, facts, way),
        });
    }
    targets.push(Target {
        name: format!(
            "tight loop, batched: cost per event ≤ 1/{BPFTRACE_OVER_BATCHED:.0} of bpftrace `count()`'s"
        ),
        limit: Limit::AtLeast(BPFTRACE_OVER_BATCHED),
        measured: versus_bpftrace(r),
    });
    if let Some(before) = r.stream.baseline() {
        let (num, den) = NARROW_OVER_BEFORE;
        targets.push(Target {
            name: format!(
                "narrow events (16-bit pc and address, 8-bit value), tight loop, batched, raw \
                 capture to /dev/null: ≤ {num}/{den} of the cost per event before (`{}`'s u64 \
                 stream, same rounds) and nothing lost",
                before.rev
            ),
            limit: Limit::AtMost(f64::from(num) / f64::from(den)),
            measured: narrow_over_before(r, &before),
        });
    }
    targets.push(Target {
        name: format!(
            "a declared type's event (16-bit pc and address, 8-bit value), tight loop, \
             batched, raw capture to /dev/null: ≤ {DECLARED_OVER_CATALOGUE}× the cost per \
             event of the catalogue's `mem_read` of the same widths (same rounds)"
        ),
        limit: Limit::AtMost(DECLARED_OVER_CATALOGUE),
        measured: declared_over_catalogue(r),
    });
    for (way, to) in batched {
        targets.push(Target {
            name: format!(
                "styx-loader CPU per event, batched raw capture {to}: ≤ {LOADER_NS:.0} ns"
            ),
            limit: Limit::AtMost(LOADER_NS),
            measured: loader_cpu(r, facts, way),
        });
    }
    for (way, stream) in [
        (Way::BatchedFileLossless, "tight loop"),
        (
            Way::BatchedNarrowFileLossless,
            "tight loop as a 16-bit guest fires it (16-bit pc and address, 8-bit value)",
        ),
    ] {
        targets.push(Target {
            name: format!(
                "{stream}, batched, raw capture to a file, `--lossless` (the default into a \
                 file): ≥ {LOOP_RATE:.0} M events/s and nothing lost"
            ),
            limit: Limit::AtLeast(LOOP_RATE),
            measured: lossless(r, way),
        });
    }
    for (traced, limit) in [
        (Variant::All(Delivery::Batched), DEMO_ALL_SLOWDOWN),
        (Variant::One(Delivery::Batched), DEMO_ONE_SLOWDOWN),
    ] {
        targets.push(Target {
            name: format!(
                "demo traced from its first instruction, batched, {}: ≤ {limit:.0}× slower than compiled out",
                traced.traced()
            ),
            limit: Limit::AtMost(limit),
            measured: demo_traced(&r.demo.rows[&traced], traced, limit, facts),
        });
    }
    targets.push(Target {
        name: format!(
            "demo traced at all types, batched, raw capture: ≤ {DEMO_CAPTURE_BYTES:.0} bytes per event"
        ),
        limit: Limit::AtMost(DEMO_CAPTURE_BYTES),
        measured: demo_capture(r),
    });
    targets.push(Target {
        name: format!(
            "the demo's capture as a Perfetto trace: ≤ {DEMO_PERFETTO_BYTES:.0} bytes per event"
        ),
        limit: Limit::AtMost(DEMO_PERFETTO_BYTES),
        measured: demo_perfetto(r),
    });
    targets.push(Target {
        name: format!(
            "demo traced at all types into a file, default options: ≥ {:.0}% of its speed \
             traced to /dev/null (same round), nothing lost",
            DEMO_FILE_SPEED * 100.0
        ),
        limit: Limit::AtLeast(DEMO_FILE_SPEED),
        measured: demo_file_speed(r),
    });
    targets.push(Target {
        name: format!(
            "demo traced at all types into a file, default options: ≤ {DEMO_FILE_BYTES:.0} \
             bytes per event"
        ),
        limit: Limit::AtMost(DEMO_FILE_BYTES),
        measured: demo_file_bytes(r),
    });
    for format in demo::READ_FORMATS {
        targets.push(Target {
            name: format!(
                "`read` of the demo's capture as {format}: ≥ {READ_TWO_THREADS}× faster on 2 \
                 threads than on 1"
            ),
            limit: Limit::AtLeast(READ_TWO_THREADS),
            measured: read_two_threads(r, format),
        });
    }
    targets.extend(detached(r));
    for (way, what) in [
        (Way::PerEvent, "raw capture"),
        (Way::PerEventJsonl, "JSON lines"),
    ] {
        targets.push(Target {
            name: format!(
                "per-event delivery, streaming every record ({what}): ≤ {PER_EVENT_OVER_BPFTRACE}× bpftrace `count()` per event, nothing lost at the default ring"
            ),
            limit: Limit::AtMost(PER_EVENT_OVER_BPFTRACE),
            measured: per_event(r, way),
        });
    }
    targets
}

/// The detached targets: the demo's cost, styx-rv's, the probe site's shape.
fn detached(r: &Results) -> [Target; 3] {
    let percent = |ratio: f64| format!("{:.0}%", (ratio - 1.0) * 100.0);
    let spread = |s: &crate::bench::stats::Samples, of: &str| {
        let (median, min, max) = (slower(s.median()), slower(s.min()), slower(s.max()));
        format!("{median} ({of} ranged from {min} to {max})")
    };
    let demo = &r.demo.detached_slowdown;
    let rv = &r.workload.current.detached_slowdown;
    [
        Target {
            name: format!(
                "detached: demo ≤ {} slower than with probes compiled out",
                percent(DEMO_DETACHED)
            ),
            limit: Limit::AtMost(DEMO_DETACHED),
            measured: Measured {
                figure: demo.median(),
                holds: true,
                shown: spread(demo, "pairs"),
                why: "Detached, the demo runs the same code as compiled out plus one check per \
                      frame of 1024 instructions; the pairs' spread is this machine's noise and \
                      code layout."
                    .into(),
            },
        },
        Target {
            name: format!(
                "realistic workload (styx-rv, see 9): detached ≤ {} slower than compiled out",
                percent(RV_DETACHED)
            ),
            limit: Limit::AtMost(RV_DETACHED),
            measured: Measured {
                figure: rv.median(),
                holds: true,
                shown: spread(rv, "sets"),
                why: workload_why(&r.workload),
            },
        },
        Target {
            name: "detached: the tight loop's probe is a load of its 32-bit semaphore word and a \
                   branch"
                .into(),
            limit: Limit::None,
            measured: site(&r.site),
        },
    ]
}

fn loop_rate(r: &Results, facts: &Facts, way: Way) -> Measured {
    let row = r.stream.row(way);
    let rate = 1e3 / row.ns_per_event.median();
    let why = if way.to_file() {
        let disk = &r.stream.disk;
        let bytes = lossless_bytes(r);
        format!(
            "The loop runs at {rate:.0} M events/s, but one styx-loader thread writing \
             the file keeps up with about {:.0} M events/s ({:.1} ns of CPU per event, \
             {:.0}% in the kernel's write path) and this disk takes {:.0} MB/s, {:.0} M \
             events/s at {bytes:.1} bytes per event; what does not fit in the ring is \
             dropped, and counted. `--lossless` loses nothing by slowing the loop to \
             the loader's pace instead (below).",
            1e3 / row.consumer_ns_per_event.median(),
            row.consumer_ns_per_event.median(),
            100.0 * row.consumer_system_share.median(),
            disk.synced_mb_s.median(),
            disk.synced_mb_s.median() / bytes,
        )
    } else {
        let lost = if row.lost > 0 {
            format!(
                "; events were lost when the loader fell more than a ring (the default 64 MiB, \
                 ~20 ms of events at this rate) behind: on {} it shares \
                 the CPUs with the loop and the kernel",
                facts.this_machine()
            )
        } else {
            String::new()
        };
        format!(
            "{:.2} ns per event (rounds from {:.2} to {:.2}) against the {:.0} ns that \
             {LOOP_RATE:.0} M events/s allows{lost}. {}",
            row.ns_per_event.median(),
            row.ns_per_event.min(),
            row.ns_per_event.max(),
            1e3 / LOOP_RATE,
            batch_cost(r),
        )
    };
    Measured {
        figure: rate,
        holds: row.lost == 0,
        shown: format!(
            "{rate:.1} M events/s ({:.2} ns/event), {} lost",
            row.ns_per_event.median(),
            lost_of(row)
        ),
        why,
    }
}

/// Where a batched event's time goes, when the kernel's eBPF statistics
/// could be had.
fn batch_cost(r: &Results) -> String {
    let Some(b) = &r.breakdown else {
        return String::new();
    };
    format!(
        "Of a batched event's {:.2} ns in the emulator, {:.2} ns is the flush probe's eBPF \
         program copying the batch into the ring ({:.0} ns per batch of {:.0} events, \
         with `kernel.bpf_stats_enabled`, see 2); the rest is the trap per batch, the \
         time marks and appending to the buffer.",
        b.ns_per_event, b.kernel_ns_per_event, b.kernel_ns_per_batch, b.events_per_batch
    )
}

/// Bytes per event of the `--lossless` file capture (the one that lost
/// nothing): what a file capture takes.
fn lossless_bytes(r: &Results) -> f64 {
    r.stream
        .row(Way::BatchedFileLossless)
        .file_bytes_per_event
        .median()
}

fn versus_bpftrace(r: &Results) -> Measured {
    let ratio = r.stream.ratio(Way::BpftraceCount, Way::Batched);
    Measured {
        figure: ratio.median(),
        holds: true,
        shown: format!(
            "1/{:.0} (per round 1/{:.0} to 1/{:.0})",
            ratio.median(),
            ratio.min(),
            ratio.max()
        ),
        why: batch_cost(r),
    }
}

fn loader_cpu(r: &Results, facts: &Facts, way: Way) -> Measured {
    let row = r.stream.row(way);
    let why = if way.to_file() {
        let disk = &r.stream.disk;
        let bytes = row.file_bytes_per_event.median();
        format!(
            "Of it, {:.2} ns is the threads compressing the capture (with `--on-full drop`, \
             this way, they take the blocks they can and the rest are stored). The rest, \
             the loader's own thread, is mostly writing {bytes:.1} bytes per event: this \
             round's plain 256 KiB `write`s to the same disk cost {:.2} ns per byte, {:.1} \
             ns per event at that size.",
            row.compressing_ns_per_event.median(),
            disk.cpu_ns_per_byte.median(),
            disk.cpu_ns_per_byte.median() * bytes,
        )
    } else {
        format!(
            "Stored whole, a batch costs the loader a fixed amount (its head read, one \
             copy into the capture's buffer, its share of the 1 ms polling tick), divided \
             among its ~{} events; that amount moves with the machine, as the loop's own \
             speed does (here {:.1} M events/s).",
            facts.reads_per_batch_roughly(),
            1e3 / row.ns_per_event.median()
        )
    };
    Measured {
        figure: row.consumer_ns_per_event.median(),
        holds: true,
        shown: format!("{} ns", row.consumer_ns_per_event.show(2)),
        why,
    }
}

fn narrow_over_before(r: &Results, before: &BaselineStream) -> Measured {
    let ratio = before.narrow_over_baseline;
    let narrow = r.stream.row(Way::BatchedNarrow);
    let lost = if narrow.lost > 0 {
        format!(
            "; {} of the narrow stream's events were lost (see 2)",
            lost_of(narrow)
        )
    } else {
        String::new()
    };
    Measured {
        figure: ratio.median(),
        holds: narrow.lost == 0,
        shown: format!(
            "{} ({:.2} ns/event against {:.2}), {} lost",
            times(ratio, 2),
            narrow.ns_per_event.median(),
            before.row.ns_per_event.median(),
            lost_of(narrow)
        ),
        why: format!(
            "Per round the narrow stream took {} the time per event of `{}`'s u64 stream, \
             this tree's u64 stream {}{lost}. {}",
            times(ratio, 2),
            before.rev,
            times(before.u64_over_baseline, 2),
            batch_cost(r),
        ),
    }
}

fn demo_capture(r: &Results) -> Measured {
    let capture = &r.demo.capture;
    Measured {
        figure: capture.bytes_per_event(),
        holds: true,
        shown: format!(
            "{:.1} bytes per event ({} events), see 1",
            capture.bytes_per_event(),
            capture.events
        ),
        why: "The capture's blocks hold each batch as the ring carried it (per event its \
              item: a tag, then each value in the width the demo gives it; a time mark every \
              ~1 KiB of items), compressed with zstd's fastest level, or lz4 for a block \
              taken while another waits for a worker (`--compression`)."
            .into(),
    }
}

fn declared_over_catalogue(r: &Results) -> Measured {
    let ratio = r.stream.ratio(Way::BatchedDeclared, Way::BatchedNarrow);
    let (declared, narrow) = (
        r.stream.row(Way::BatchedDeclared),
        r.stream.row(Way::BatchedNarrow),
    );
    Measured {
        figure: ratio.median(),
        holds: true,
        shown: format!(
            "{} ({:.2} ns/event against {:.2}), see 2",
            times(ratio, 2),
            declared.ns_per_event.median(),
            narrow.ns_per_event.median()
        ),
        why: "A declared type's item carries a length byte the catalogue's does not (the \
              loader checks it against the declaration), and its values go through the \
              append routine for their widths as the catalogue's do; what is left is this \
              machine's noise between back-to-back runs."
            .into(),
    }
}

fn demo_file_speed(r: &Results) -> Measured {
    let file = &r.demo.into_file;
    let ratio = &file.speed_ratio;
    Measured {
        figure: ratio.median(),
        holds: file.lost == 0,
        shown: format!(
            "{:.0}% ({:.0}–{:.0}%), {} of {} events lost, see 1",
            ratio.median() * 100.0,
            ratio.min() * 100.0,
            ratio.max() * 100.0,
            file.lost,
            file.events + file.lost
        ),
        why: format!(
            "Into a file the loader waits (`--on-full wait`, nothing lost) where to /dev/null \
             it drops what the ring has no room for (see 1): the run to a file goes at the \
             pace of the loader, which shares the CPU the emulator leaves with the threads \
             compressing the capture, storing as encoded only the blocks they are behind \
             with that keep it within {} bytes per event.",
            styx_common::capture::STORED_BUDGET
        ),
    }
}

fn demo_file_bytes(r: &Results) -> Measured {
    let file = &r.demo.into_file;
    Measured {
        figure: file.bytes_per_event(),
        holds: true,
        shown: format!(
            "{:.2} bytes per event ({} bytes for {} events), see 1",
            file.bytes_per_event(),
            file.bytes,
            file.events
        ),
        why: format!(
            "Blocks the compressing threads are behind with are stored as encoded while \
             the capture stays within {} bytes per event, and so are those they had not \
             compressed 2 ms after the loader began to wait for them: the threads have only \
             the CPU time the emulator and the loader leave (`SCHED_IDLE`), and something \
             else on the machine may take it.",
            styx_common::capture::STORED_BUDGET
        ),
    }
}

fn read_two_threads(r: &Results, format: &str) -> Measured {
    let rate = |threads| r.demo.capture.read_rate(format, threads);
    let ratio = rate(2) / rate(1);
    Measured {
        figure: ratio,
        holds: true,
        shown: format!(
            "{ratio:.2}× ({:.1} against {:.1} M events/s), see 1",
            rate(2),
            rate(1)
        ),
        why: match format {
            "parquet" => "Each worker decodes, gathers and encodes the events of whole row \
                          groups (1 M events) as one thread does; the calling thread reads \
                          the file and appends each group's columns in order, and the \
                          capture's last, short group is encoded by the output's writer \
                          after the rest. On the demo's 19 M-event \
                          capture two threads took ~6% more CPU time than one (by hand, \
                          2026-11-29, `/usr/bin/time`, 5 rounds: 1.82×), on a 123 M-event one \
                          ~3% less (2.04×): on a small capture the last group and the start \
                          weigh more."
                .into(),
            _ => "Blocks are decoded and formatted on worker threads, but reading the file, \
                  handing blocks out and writing the results in order stay on one thread."
                .into(),
        },
    }
}

fn demo_perfetto(r: &Results) -> Measured {
    let capture = &r.demo.capture;
    Measured {
        figure: capture.perfetto_bytes_per_event(),
        holds: true,
        shown: format!(
            "{:.1} bytes per event ({} events), see 1",
            capture.perfetto_bytes_per_event(),
            capture.events
        ),
        why: "Each thread's instruction-level events of one type are a packet sequence whose \
              defaults name their tracks: an event is an instant with its interned name, a \
              time delta and its fields' values as counter values, about 12 bytes of framing \
              and a varint per value."
            .into(),
    }
}

fn lossless(r: &Results, way: Way) -> Measured {
    let row = r.stream.row(way);
    let rate = 1e3 / row.ns_per_event.median();
    let why = if rate < LOOP_RATE {
        format!(
            "The loop waits for the loader and the capture's workers, which share the CPU \
             the loop leaves: {:.1} ns of CPU per event between them (copying, checking, \
             delta coding and compressing), {:.1} bytes per event on disk; to /dev/null the \
             loop ran at {:.1} M events/s.",
            row.consumer_ns_per_event.median(),
            row.file_bytes_per_event.median(),
            1e3 / r.stream.row(Way::Batched).ns_per_event.median(),
        )
    } else {
        String::new()
    };
    Measured {
        figure: rate,
        holds: row.lost == 0,
        shown: format!(
            "{rate:.1} M events/s (rounds {:.1} to {:.1}), {} lost, {:.1} bytes per event on disk",
            1e3 / row.ns_per_event.max(),
            1e3 / row.ns_per_event.min(),
            lost_of(row),
            row.file_bytes_per_event.median()
        ),
        why,
    }
}

fn demo_traced(d: &demo::Row, traced: Variant, limit: f64, facts: &Facts) -> Measured {
    let mut why = Vec::new();
    if d.slowdown.median() > limit {
        why.push(format!(
            "{:.1}× slower than compiled out, above {limit:.0}×",
            d.slowdown.median()
        ));
        if matches!(traced, Variant::All(_)) {
            why.push(
                "the demo then fires ~7 events an instruction. Where its time goes traced so \
                 (perf, by hand, 2026-11-28): ~29% in the events' append routines (~14 \
                 instructions an event: the call, the word, the thread's batch, the stores), \
                 ~15% in the kernel (per 64 KiB batch the flush probe's trap and the copy into \
                 the ring; the traps of spans, markers and control events), ~2% reading the \
                 clock for time marks, ~2% in the rest of styx-probe, and ~52% in the demo's \
                 own probed CPU, which works out every event's values (registers read and \
                 written, operands, addresses): that alone takes ~1.8× the compiled-out \
                 CPU's time. With the append routines made to return at once (a throwaway \
                 build, by hand, 2026-11-29, 5 alternating rounds: every event's values worked \
                 out and its routine called, nothing stored, no batch handed over) the demo ran \
                 2.8× slower than compiled out (23.0 against 64.6 M instructions/s; 3.7× with \
                 the real routines in the same rounds): its instrumented CPU leaves the tracer \
                 0.2× of the compiled-out time, ~0.4 ns for each of ~7 events an instruction, \
                 about what the kernel's copy of a narrow item into the ring costs alone. \
                 Dropping the append's count of the event's type gained nothing; dropping the \
                 store of the batch's new length (so no batch is ever handed over, and the \
                 kernel does nothing) 18%. 3× needs the demo's own traced path cheaper, not \
                 the tracer alone"
                    .to_string(),
            );
        }
    }
    if d.lost > 0 {
        why.push(format!(
            "{} of {} events were dropped because the ring buffer was full (counted in \
             styx-loader's summary): at the demo's event rate the default 64 MiB ring holds \
             ~20 ms of events, and on {} the loader shares the CPUs with \
             the emulator and anything else running; `--ring-size` or `--lossless` avoid it",
            d.lost,
            d.events + d.lost,
            facts.this_machine()
        ));
    }
    Measured {
        figure: d.slowdown.median(),
        holds: d.lost == 0,
        shown: format!(
            "{} slower, {} of {} events lost",
            times(&d.slowdown, 1),
            d.lost,
            d.events + d.lost
        ),
        why: why.join("; ") + ".",
    }
}

/// Why the realistic workload's detached cost is what it is.
fn workload_why(w: &crate::bench::workload::Results) -> String {
    let mut why = String::from(
        "styx-rv checks a semaphore at every probe: per instruction `insn_exec`, the \
         `reg_write` snapshot's `enabled()` gate and `branch` in the step loop, and a \
         `mem_read` at least once (the fetch) in its bus; each check sits inline in the \
         code rrs-lib's interpreter runs, where it also changes what the compiler inlines.",
    );
    if let Some(b) = &w.baseline {
        let _ = write!(
            why,
            " Built against styx-probe at {} the same source ran {} detached.",
            b.rev,
            slower(b.untraced.detached_slowdown.median())
        );
    }
    if let Some(Ok(exact)) = &w.exact {
        let more = |c: &crate::bench::exact::Counts| 100.0 * (c.detached_ratio() - 1.0);
        let _ = write!(
            why,
            " Exactly (callgrind), detached runs {:.1}% more host instructions than compiled out",
            more(&exact.current)
        );
        if let (Some(b), Some(base)) = (&exact.baseline, &w.baseline) {
            let _ = write!(why, " ({:.1}% with styx-probe at {})", more(b), base.rev);
        }
        why.push_str(": the wall clock moves with code layout (see 9).");
    }
    why
}

fn site(site: &crate::bench::site::Detached) -> Measured {
    let shown = match &site.problem {
        Some(problem) => format!("could not be read: {problem}"),
        None => format!(
            "{} instructions: {}, see 3",
            site.listing.len(),
            if site.loads == 2 {
                "the semaphore's address from the GOT, the word, a test and a branch"
            } else if site.hoisted.is_some() {
                "the word (its address loaded from the GOT once, before the loop), a test and a branch"
            } else if site.listing.len() == 2 {
                "a compare of the word in memory with 0 and a branch"
            } else {
                "the word, a test and a branch"
            }
        ),
    };
    Measured {
        figure: f64::NAN,
        holds: site.as_intended(),
        shown,
        why: "See 3 for the instructions.".into(),
    }
}

fn per_event(r: &Results, way: Way) -> Measured {
    let s = &r.stream;
    let ratio = s.ratio(way, Way::BpftraceCount);
    let row: &Row = s.row(way);
    Measured {
        figure: ratio.median(),
        holds: row.lost == 0,
        shown: format!("{}, {} events lost", times(ratio, 2), lost_of(row)),
        why: format!(
            "Per event, both pay the kernel's uprobe trap (bpftrace `count()`: {:.0} ns \
             an event here); styx's eBPF program also reads the clock and reserves and \
             commits a ring record per event, which `count()` does not. The ratio moves \
             with the machine from run to run (per round {:.2}× to {:.2}×).",
            s.row(Way::BpftraceCount).ns_per_event.median(),
            ratio.min(),
            ratio.max()
        ),
    }
}

/// The targets section: the table, then why each missed target was missed.
pub fn write(md: &mut String, r: &Results, facts: &Facts) {
    let targets = targets(r, facts);
    let rows = targets.iter().map(|t| {
        [
            t.name.clone(),
            t.measured.shown.clone(),
            verdict(t.met()).into(),
        ]
    });
    let _ = writeln!(
        md,
        "## Targets\n\n{}",
        table(["target", "measured", ""], rows)
    );
    if r.stream.baseline().is_none() {
        let (num, den) = NARROW_OVER_BEFORE;
        let _ = writeln!(
            md,
            "No `--probe-baseline REV` was given, so the narrow-events target (≤ {num}/{den} of \
             the cost per event before the change, in the same rounds) has no figure in this \
             run.\n"
        );
    }
    let missed: Vec<&Target> = targets.iter().filter(|t| !t.met()).collect();
    if !missed.is_empty() {
        let _ = writeln!(md, "Why the targets marked not met are not:\n");
        for t in missed {
            let _ = writeln!(md, "- *{}*: {}", t.name, t.measured.why.trim());
        }
        let _ = writeln!(md);
    }
}
