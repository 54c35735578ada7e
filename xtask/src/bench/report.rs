//! BENCHMARKS.md: the method, the machine, the targets and every table.

use super::consumers::FORMATS;
use super::demo::Variant;
use super::machine::Machine;
use super::stats::Samples;
use super::stream::{Row, Way};
use super::{Plan, Results};
use std::fmt::Write;
use std::time::Duration;
use styx_common::Delivery;

pub fn render(machine: &Machine, plan: &Plan, results: &Results, took: Duration) -> String {
    let mut md = String::new();
    let command = if plan.quick {
        "sudo cargo xtask bench --quick"
    } else {
        "sudo cargo xtask bench"
    };
    let _ = writeln!(md, "# styx benchmarks\n");
    let _ = writeln!(
        md,
        "Measured {} by `{command}` ({} rounds, {:.0} s) on {}, Linux {}. \
         Every figure is the median over the rounds, with the lowest and highest in \
         parentheses; ratios are medians of per-round ratios.\n",
        machine.date,
        plan.rounds,
        took.as_secs_f64(),
        machine_line(machine),
        machine.kernel,
    );
    let cpu = &results.cpu;
    let available = cpu.wall * machine.cpus as f64;
    let others = (cpu.busy - cpu.ours).max(0.0);
    let _ = writeln!(
        md,
        "The machine is shared. Over the run its {} CPUs were busy {:.0} s of {:.0} s: the \
         benchmark's own processes {:.0} s, everything else {:.1} s ({:.1}% of the CPUs: \
         other processes, and kernel threads, among them the writeback of the benchmark's \
         file captures); the hypervisor took {:.1} s more (steal).\n",
        machine.cpus,
        cpu.busy,
        available,
        cpu.ours,
        others,
        100.0 * others / available.max(1e-9),
        cpu.steal,
    );
    targets(&mut md, results);
    method(&mut md, plan, results);
    demo(&mut md, plan, results);
    per_event(&mut md, results);
    files(&mut md, results);
    detached(&mut md, results);
    seeds(&mut md, results);
    consumers(&mut md, plan, results);
    questions(&mut md, plan, results);
    encoding(&mut md, results);
    functions(&mut md, plan, results);
    workload(&mut md, plan, results);
    let _ = writeln!(
        md,
        "## Machine\n\n- {}\n- Linux {}\n- {}\n- {}\n",
        machine_line(machine),
        machine.kernel,
        machine.rustc,
        machine.bpftrace
    );
    md
}

fn machine_line(m: &Machine) -> String {
    format!(
        "{} × {} ({:.1} GiB{})",
        m.cpus,
        m.cpu,
        m.memory_gib,
        if m.virtual_machine {
            ", a virtual machine"
        } else {
            ""
        }
    )
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "**not met**"
    }
}

/// "0.4% slower" / "1.2% faster" for a time ratio (slower / faster run).
fn slower(ratio: f64) -> String {
    let pct = (ratio - 1.0) * 100.0;
    if pct >= 0.0 {
        format!("{pct:.1}% slower")
    } else {
        format!("{:.1}% faster", -pct)
    }
}

/// `1.16× (1.07–1.27)`.
fn times(s: &Samples, decimals: usize) -> String {
    format!(
        "{:.*}× ({:.*}–{:.*})",
        decimals,
        s.median(),
        decimals,
        s.min(),
        decimals,
        s.max()
    )
}

/// M events/s from ns/event: `96.2 (88.1–101.3)`.
fn rate(ns: &Samples) -> String {
    format!(
        "{:.1} ({:.1}–{:.1})",
        1e3 / ns.median(),
        1e3 / ns.max(),
        1e3 / ns.min()
    )
}

fn lost_of(row: &Row) -> String {
    format!("{} of {}", row.lost, row.events)
}

/// Why a traced demo row misses its target.
fn demo_why(d: &super::demo::Row, limit: f64) -> String {
    let mut why = Vec::new();
    if d.slowdown.median() > limit {
        why.push(format!(
            "{:.1}× slower than compiled out, above {limit:.0}×",
            d.slowdown.median()
        ));
    }
    if d.lost > 0 {
        why.push(format!(
            "{} of {} events were dropped because the ring buffer was full (counted in \
             styx-loader's summary): at the demo's event rate the default 64 MiB ring holds \
             ~20 ms of events, and on this 2-vCPU machine the loader shares the CPUs with \
             the emulator and anything else running; `--ring-size` or `--lossless` avoid it",
            d.lost,
            d.events + d.lost
        ));
    }
    why.join("; ") + "."
}

/// One line of the targets table, and why it is not met when it is not.
struct Target {
    target: String,
    measured: String,
    met: bool,
    why: String,
}

fn targets(md: &mut String, r: &Results) {
    let s = &r.stream;
    let batched = s.row(Way::Batched);
    let file = s.row(Way::BatchedFile);
    let lossless = s.row(Way::BatchedFileLossless);
    let versus_bpftrace = s.ratio(Way::BpftraceCount, Way::Batched);
    let disk = &s.disk;
    let bytes = lossless.file_bytes_per_event.median();
    let mut rows = Vec::new();
    let mut row = |target: String, measured: String, met: bool, why: String| {
        rows.push(Target {
            target,
            measured,
            met,
            why,
        })
    };
    let batch_cost = match &r.breakdown {
        Some(b) => format!(
            "Of a batched event's {:.2} ns in the emulator, {:.2} ns is the flush probe's eBPF \
             program copying the batch into the ring ({:.0} ns per batch of {:.0} events, \
             with `kernel.bpf_stats_enabled`, see 2); the rest is the trap per batch, the \
             time marks and appending to the buffer.",
            b.ns_per_event, b.kernel_ns_per_event, b.kernel_ns_per_batch, b.events_per_batch
        ),
        None => String::new(),
    };
    for (what, r, to_file) in [("to /dev/null", batched, false), ("to a file", file, true)] {
        let rate = 1e3 / r.ns_per_event.median();
        let why = if to_file {
            format!(
                "The loop runs at {rate:.0} M events/s, but one styx-loader thread writing \
                 the file keeps up with about {:.0} M events/s ({:.1} ns of CPU per event, \
                 {:.0}% in the kernel's write path) and this disk takes {:.0} MB/s, {:.0} M \
                 events/s at {bytes:.1} bytes per event; what does not fit in the ring is \
                 dropped, and counted. `--lossless` loses nothing by slowing the loop to \
                 the loader's pace instead (below).",
                1e3 / r.consumer_ns_per_event.median(),
                r.consumer_ns_per_event.median(),
                100.0 * r.consumer_system_share.median(),
                disk.synced_mb_s.median(),
                disk.synced_mb_s.median() / bytes,
            )
        } else {
            format!(
                "{:.2} ns per event (rounds from {:.2} to {:.2}) against the 10 ns that \
                 100 M events/s allows{}. {batch_cost}",
                r.ns_per_event.median(),
                r.ns_per_event.min(),
                r.ns_per_event.max(),
                if r.lost > 0 {
                    "; events were lost when the loader fell more than a ring (the default 64 MiB, \
                     ~20 ms of events at this rate) behind: on this 2-vCPU machine it shares \
                     the CPUs with the loop and the kernel"
                } else {
                    ""
                }
            )
        };
        row(
            format!("tight loop, batched, raw capture {what}: ≥ 100 M events/s and nothing lost"),
            format!(
                "{rate:.1} M events/s ({:.2} ns/event), {} lost",
                r.ns_per_event.median(),
                lost_of(r)
            ),
            rate >= 100.0 && r.lost == 0,
            why,
        );
    }
    row(
        "tight loop, batched: cost per event ≤ 1/40 of bpftrace `count()`'s".into(),
        format!(
            "1/{:.0} (per round 1/{:.0} to 1/{:.0})",
            versus_bpftrace.median(),
            versus_bpftrace.min(),
            versus_bpftrace.max()
        ),
        versus_bpftrace.median() >= 40.0,
        batch_cost.clone(),
    );
    for (what, r, to_file) in [("to /dev/null", batched, false), ("to a file", file, true)] {
        let why = if to_file {
            format!(
                "Writing the capture to a file costs the loader {:.0}% of its CPU in the \
                 kernel: this round's plain 256 KiB `write`s to the same disk cost {:.2} ns \
                 per byte, {:.1} ns per event at {bytes:.1} bytes per event, more than the \
                 target by themselves.",
                100.0 * r.consumer_system_share.median(),
                disk.cpu_ns_per_byte.median(),
                disk.cpu_ns_per_byte.median() * bytes,
            )
        } else {
            format!(
                "Stored whole, a batch costs the loader a fixed amount (its head read, one \
                 copy into the capture's buffer, its share of the 1 ms polling tick), divided \
                 among its ~500 events; that amount moves with the machine, as the loop's own \
                 speed does (here {:.1} M events/s).",
                1e3 / r.ns_per_event.median()
            )
        };
        row(
            format!("styx-loader CPU per event, batched raw capture {what}: ≤ 5 ns"),
            format!("{} ns", r.consumer_ns_per_event.show(2)),
            r.consumer_ns_per_event.median() <= 5.0,
            why,
        );
    }
    row(
        "`--lossless` raw capture to a file: nothing lost".into(),
        format!(
            "{}; the loop ran at {:.1} M events/s",
            lost_of(lossless),
            1e3 / lossless.ns_per_event.median()
        ),
        lossless.lost == 0,
        String::new(),
    );
    let demo = &r.demo.rows;
    for (variant, limit) in [
        (Variant::All(Delivery::Batched), 10.0),
        (Variant::One(Delivery::Batched), 3.0),
    ] {
        let d = &demo[&variant];
        let what = variant.traced();
        row(
            format!(
                "demo traced from its first instruction, batched, {what}: ≤ {limit:.0}× slower than compiled out"
            ),
            format!(
                "{} slower, {} of {} events lost",
                times(&d.slowdown, 1),
                d.lost,
                d.events + d.lost
            ),
            d.slowdown.median() <= limit && d.lost == 0,
            demo_why(d, limit),
        );
    }
    let slowdown = &r.demo.detached_slowdown;
    row(
        "detached: demo ≤ 1% slower than with probes compiled out".into(),
        format!(
            "{} (pairs ranged from {} to {})",
            slower(slowdown.median()),
            slower(slowdown.min()),
            slower(slowdown.max())
        ),
        slowdown.median() <= 1.01,
        "Detached, the demo runs the same code as compiled out plus one check per frame \
         of 1024 instructions; the pairs' spread is this machine's noise and code layout."
            .into(),
    );
    let rv = &r.workload.current.detached_slowdown;
    row(
        "realistic workload (styx-rv, see 9): detached ≤ 3% slower than compiled out".into(),
        format!(
            "{} (sets ranged from {} to {})",
            slower(rv.median()),
            slower(rv.min()),
            slower(rv.max())
        ),
        rv.median() <= 1.03,
        workload_why(&r.workload),
    );
    let site = &r.site;
    row(
        "detached: the tight loop's probe is a load of its 32-bit semaphore word and a branch"
            .into(),
        match &site.problem {
            Some(problem) => format!("could not be read: {problem}"),
            None => format!(
                "{} instructions: {}, see 3",
                site.listing.len(),
                if site.loads == 2 {
                    "the semaphore's address from the GOT, the word, a test and a branch"
                } else if site.hoisted.is_some() {
                    "the word (its address loaded from the GOT once, before the loop), a test and a branch"
                } else {
                    "the word, a test and a branch"
                }
            ),
        },
        site.as_intended(),
        "See 3 for the instructions.".into(),
    );
    for (what, way) in [
        ("raw capture", Way::PerEvent),
        ("JSON lines", Way::PerEventJsonl),
    ] {
        let ratio = s.ratio(way, Way::BpftraceCount);
        let r = s.row(way);
        row(
            format!(
                "per-event delivery, streaming every record ({what}): ≤ 1.1× bpftrace `count()` per event, nothing lost at the default ring"
            ),
            format!("{}, {} events lost", times(ratio, 2), lost_of(r)),
            ratio.median() <= 1.1 && r.lost == 0,
            format!(
                "Per event, both pay the kernel's uprobe trap (bpftrace `count()`: {:.0} ns \
                 an event here); styx's eBPF program also reads the clock and reserves and \
                 commits a ring record per event, which `count()` does not. The ratio moves \
                 with the machine from run to run (per round {:.2}× to {:.2}×).",
                s.row(Way::BpftraceCount).ns_per_event.median(),
                ratio.min(),
                ratio.max()
            ),
        );
    }
    let _ = writeln!(md, "## Targets\n");
    let _ = writeln!(md, "| target | measured | |\n|---|---|---|");
    for t in &rows {
        let _ = writeln!(md, "| {} | {} | {} |", t.target, t.measured, verdict(t.met));
    }
    let _ = writeln!(md);
    let unmet: Vec<&Target> = rows.iter().filter(|t| !t.met).collect();
    if !unmet.is_empty() {
        let _ = writeln!(md, "Why the targets marked not met are not:\n");
        for t in unmet {
            let _ = writeln!(md, "- *{}*: {}", t.target, t.why.trim());
        }
        let _ = writeln!(md);
    }
}

fn method(md: &mut String, plan: &Plan, r: &Results) {
    let _ = writeln!(
        md,
        "## Method\n\n\
         Each round runs every case once, in the order below; the rounds repeat that. \
         Programs are release builds, copied to `target/bench/` before the first round. \
         Tracers write to `/dev/null` unless a row says \"to a file\".\n\n\
         - **Demo**: `styx-demo --quiet --repeat N` runs its four 6502 programs N times \
         ({} untraced; traced with `insn_exec` only {} times batched and {} per event; with \
         all types {} batched and {} per event) and reports guest instructions per second. \
         Compiled out is the same source built with `--features probes-off`. Attached runs \
         are `styx-loader -o raw --output /dev/null --delivery D -- styx-demo …`: traced from \
         the first instruction. \"vs compiled out\" for a traced run is the round's median \
         compiled-out speed over the run's, then the median over rounds.\n\
         - **Event stream**: `styx-bench` sends (pc, addr, val) memory-read events \
         (`styx_probe::mem_read!`) from a tight loop, one thread: {} events per batched run to \
         /dev/null, {} per batched run to a file or as JSON lines, {} per per-event or seed \
         run, {} per detached run; each tracer in a session of its own on a fresh process, \
         started with `--pid` and `-e mem_read`; the loop starts as soon as styx-loader says it \
         has attached. ns/event is the loop's wall time per event, \
         probe and tracer cost included (for batched delivery: appending to the thread's \
         buffer, and per 16 KiB batch the flush probe's trap and the kernel's copy into the \
         ring). The consumer's CPU is the tracer's (or reader process's) user + system CPU \
         time from the start of the run until it has gone idle after it (the scheduler's \
         per-thread count, `/proc/PID/task/*/schedstat`), per event it received. lost = \
         fired − received; styx-loader's summary (ring-full drops, failed copies) is \
         checked against it. bpftrace prints nothing when it has attached, so its script \
         also counts a second probe (`mem_write`, a per-event site for bpftrace whatever \
         styx-loader's delivery) that the workload fires until bpftrace sees it; those \
         events are outside the measured stream. The 5-byte-nop site is in a program of its \
         own (`styx-bench-nop5`): bpftrace 0.17 raises only the first site's semaphore of a \
         probe with several sites, and the two sites cannot share one. File captures go to {} and are removed \
         after each run, followed by `sync`; the same round then writes {} MiB there the way \
         the loader does (256 KiB `write`s, then `fsync`) to measure the disk.\n\
         - **Consumers**: `styx-events/examples/bench-consumers.rs`, {} events of an emulator-like \
         mix, one pinned core, CPU time of the converting thread.\n",
        plan.demo_repeat,
        plan.demo_repeat_batched_one,
        plan.demo_repeat_per_event_one,
        plan.demo_repeat_batched_all,
        plan.demo_repeat_per_event_all,
        plan.batched_events,
        plan.batched_slow_events,
        plan.stream_events,
        plan.detached_events,
        r.stream.disk.place,
        plan.disk_bytes >> 20,
        plan.consumer_events,
    );
}

fn demo(md: &mut String, plan: &Plan, r: &Results) {
    let _ = writeln!(
        md,
        "## 1. The demo emulator\n\n\
         The demo checks for tracers once per frame of 1024 instructions and runs a plain CPU \
         (the same code as compiled out) until one is attached, then its probed CPU. Compiled \
         out and detached run {} times per round in back-to-back pairs; \"vs compiled out\" for \
         detached is the median of the pairs' ratios. Detached runs the same code as compiled \
         out plus one check per frame, so the pairs differ by code layout and by this machine's \
         noise, which their spread shows. With all types traced the demo fires about 7 events \
         per instruction; interrupts, control events, spans and markers are per-event types \
         even in batched delivery (each one flushes the thread's pending batch first).\n\n\
         | probes | M instructions/s | vs compiled out | events | lost |\n|---|---|---|---|---|",
        plan.demo_pairs
    );
    for variant in Variant::ALL {
        let row = &r.demo.rows[&variant];
        let versus = match variant {
            Variant::CompiledOut => "1".to_string(),
            Variant::Detached => slower(r.demo.detached_slowdown.median()),
            _ => format!("{} slower", times(&row.slowdown, 1)),
        };
        let (events, lost) = match variant {
            Variant::CompiledOut | Variant::Detached => ("-".to_string(), "-".to_string()),
            _ => (row.events.to_string(), row.lost.to_string()),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {versus} | {events} | {lost} |",
            variant.label(),
            row.speed.show(2)
        );
    }
    let per_event_over_batched = |one: fn(Delivery) -> Variant| {
        r.demo.rows[&one(Delivery::PerEvent)].slowdown.median()
            / r.demo.rows[&one(Delivery::Batched)].slowdown.median()
    };
    let _ = writeln!(
        md,
        "\nBatched delivery runs the demo {:.0}× faster than per-event with `insn_exec` only, \
         {:.0}× with all types.\n",
        per_event_over_batched(Variant::One),
        per_event_over_batched(Variant::All),
    );
}

/// `| label | ns/event | M events/s | consumer CPU | lost |` cells for a row.
fn stream_cells(way: Way, row: &Row) -> String {
    let consumer = if row.consumer_ns_per_event.is_empty() {
        "-".to_string()
    } else if row.consumer_ns_per_event.median() < 10.0 {
        row.consumer_ns_per_event.show(2)
    } else {
        row.consumer_ns_per_event.show(0)
    };
    let lost = if way.untraced() {
        "-".to_string()
    } else {
        lost_of(row)
    };
    let decimals = if row.ns_per_event.median() < 100.0 {
        2
    } else {
        0
    };
    format!(
        "| {} | {} | {} | {consumer} | {lost} |",
        way.label(),
        row.ns_per_event.show(decimals),
        rate(&row.ns_per_event),
    )
}

const STREAM_HEADER: &str =
    "| way | ns/event | M events/s | consumer CPU, ns/event | lost |\n|---|---|---|---|---|";

fn per_event(md: &mut String, r: &Results) {
    let s = &r.stream;
    let _ = writeln!(
        md,
        "## 2. Cost per event in a tight loop: batched and per-event delivery\n\n\
         `styx_probe::mem_read!` in styx-bench's loop (`run nop1 N`), one thread; every tracer \
         attached to it alone. The consumer is styx-loader, bpftrace, or the seed's reader \
         process.\n\n{STREAM_HEADER}"
    );
    for way in [
        Way::Loop,
        Way::Detached,
        Way::Batched,
        Way::BatchedFile,
        Way::BatchedFileLossless,
        Way::BatchedJsonl,
        Way::PerEvent,
        Way::PerEventJsonl,
        Way::BpftraceCount,
        Way::BpftracePrintf,
        Way::Ipmpsc,
    ] {
        let _ = writeln!(md, "{}", stream_cells(way, s.row(way)));
    }
    let _ = writeln!(
        md,
        "\nPer round: bpftrace `count()` ÷ batched (raw, /dev/null) {}; per-event ÷ batched {}; \
         batched ÷ the loop alone {}; per-event ÷ bpftrace `count()`: raw capture {}, JSON \
         lines {}.\n",
        times(s.ratio(Way::BpftraceCount, Way::Batched), 0),
        times(s.ratio(Way::PerEvent, Way::Batched), 0),
        times(s.ratio(Way::Batched, Way::Loop), 1),
        times(s.ratio(Way::PerEvent, Way::BpftraceCount), 2),
        times(s.ratio(Way::PerEventJsonl, Way::BpftraceCount), 2),
    );
    if let Some(b) = &r.breakdown {
        let _ = writeln!(
            md,
            "One more batched run to /dev/null, with `kernel.bpf_stats_enabled` on: {:.2} ns per \
             event in the loop; {} batches of {:.0} events, the flush probe's eBPF program \
             {:.0} ns per batch (copying it into the ring), {:.2} ns per event. The trap per \
             batch, a time mark (a `CLOCK_MONOTONIC` read) every ~32 events and appending to \
             the buffer make the rest.\n",
            b.ns_per_event,
            b.batches,
            b.events_per_batch,
            b.kernel_ns_per_batch,
            b.kernel_ns_per_event,
        );
    }
    let mismatched: Vec<String> = Way::ALL
        .iter()
        .filter(|w| matches!(w.tracer(), Some(super::tracer::Tracer::Styx(_))))
        .filter_map(|&w| {
            let row = s.row(w);
            (row.reported_lost != row.lost).then(|| {
                format!(
                    "{}: {} by fired − received, {} in the summaries",
                    w.label(),
                    row.lost,
                    row.reported_lost
                )
            })
        })
        .collect();
    if mismatched.is_empty() {
        let _ = writeln!(
            md,
            "styx-loader's summaries counted exactly the events lost by fired − received.\n"
        );
    } else {
        let _ = writeln!(
            md,
            "styx-loader's summaries and fired − received disagree: {}.\n",
            mismatched.join("; ")
        );
    }
}

fn files(md: &mut String, r: &Results) {
    let s = &r.stream;
    let d = &s.disk;
    let received = |row: &Row| 100.0 * (row.events - row.lost) as f64 / row.events.max(1) as f64;
    let share = |row: &Row| {
        if row.consumer_system_share.is_empty() {
            "-".to_string()
        } else {
            format!("{:.0}%", 100.0 * row.consumer_system_share.median())
        }
    };
    let _ = writeln!(
        md,
        "### Raw captures to a file\n\n\
         The disk under {}, written as the loader writes (256 KiB `write`s): {} MB/s into the \
         page cache, {} ns of CPU per byte in the writing thread (the kernel's write path), \
         {} MB/s to the disk with the `fsync` after.\n\n\
         | batched, raw capture | loop, M events/s | events received | styx-loader CPU, ns per event written | of it in the kernel | bytes per event on disk | MB/s written over the loop's run |\n\
         |---|---|---|---|---|---|---|",
        d.place,
        d.buffered_mb_s.show(0),
        d.cpu_ns_per_byte.show(2),
        d.synced_mb_s.show(0),
    );
    for (label, way) in [
        ("to /dev/null", Way::Batched),
        ("to a file", Way::BatchedFile),
        ("to a file, `--lossless`", Way::BatchedFileLossless),
    ] {
        let row = s.row(way);
        let (bytes, rate) = if row.file_bytes_per_event.is_empty() {
            ("-".to_string(), "-".to_string())
        } else {
            (row.file_bytes_per_event.show(1), row.file_mb_s.show(0))
        };
        let _ = writeln!(
            md,
            "| {label} | {} | {:.1}% | {} | {} | {bytes} | {rate} |",
            rate_of(&row.ns_per_event),
            received(row),
            row.consumer_ns_per_event.show(2),
            share(row),
        );
    }
    let file = s.row(Way::BatchedFile);
    let lossless = s.row(Way::BatchedFileLossless);
    let bytes = lossless.file_bytes_per_event.median();
    let cpu = file.consumer_ns_per_event.median();
    let _ = writeln!(
        md,
        "\nAt {bytes:.1} bytes per event, 100 M events/s is {:.0} MB/s of capture. The loader \
         writes with one thread; writing a file costs it {cpu:.1} ns of CPU per event ({} of it \
         in the kernel), so it keeps up with at most about {:.0} M events/s however fast the \
         disk, and this disk takes {:.0} MB/s ({:.0} M events/s) once the page cache is full. \
         Without `--lossless` the loop runs at full speed and the ring buffer drops what the \
         loader could not write in time; with it the loop waits for the loader and runs at \
         the pace the loader writes ({:.1} M events/s here).\n",
        bytes * 100.0,
        share(file),
        1e3 / cpu,
        d.synced_mb_s.median(),
        d.synced_mb_s.median() / bytes,
        1e3 / lossless.ns_per_event.median(),
    );
}

/// M events/s from ns/event, median only.
fn rate_of(ns: &Samples) -> String {
    format!("{:.1}", 1e3 / ns.median())
}

fn detached(md: &mut String, r: &Results) {
    let s = &r.stream;
    let site = &r.site;
    let _ = writeln!(
        md,
        "## 3. Detached\n\n\
         The tight loop: the loop alone {} ns per iteration, with the detached probe {} ns \
         (per round, detached ÷ loop alone {}; the 5-byte-nop site {} ns).\n",
        s.row(Way::Loop).ns_per_event.show(2),
        s.row(Way::Detached).ns_per_event.show(2),
        times(s.ratio(Way::Detached, Way::Loop), 2),
        s.row(Way::DetachedNop5).ns_per_event.show(2),
    );
    match &site.problem {
        Some(problem) => {
            let _ = writeln!(
                md,
                "The probe site's instructions could not be read: {problem}.\n"
            );
        }
        None => {
            let hoisted = match &site.hoisted {
                Some(load) => format!(
                    "The semaphore's address is loaded from the GOT once, before the loop \
                     (`{load}`): the semaphore is a static of the styx-probe crate, which a \
                     position-independent executable reaches through the GOT. "
                ),
                None if site.loads == 2 => "The first load takes the semaphore's address \
                     from the GOT: the semaphore is a static of the styx-probe crate, which a \
                     position-independent executable reaches through the GOT. "
                    .to_string(),
                None => String::new(),
            };
            let taken = matches!(site.branch.as_str(), "je" | "jz");
            let branch = match (taken, site.branch_backward) {
                (true, true) => {
                    "is taken while detached: it jumps back to the loop's head \
                     (the compiler placed the probe's body after it, so this branch is also \
                     the loop's back edge)"
                }
                (true, false) => "is taken while detached: it jumps over the probe's body",
                (false, _) => "is not taken while detached",
            };
            let _ = writeln!(
                md,
                "What that probe runs while detached, from styx-bench's disassembly (`objdump -d`; \
                 the site's `nop` at {:#x}, the semaphore word at {:#x}): from the load of the \
                 semaphore to the branch that skips the probe.\n\n\
                 ```\n{}\n```\n\n\
                 {}{} memory load{} on the path, the semaphore read {}; the branch (`{}`) {}.\n",
                site.site,
                site.semaphore,
                site.listing.join("\n"),
                hoisted,
                site.loads,
                if site.loads == 1 { "" } else { "s" },
                if site.word_32 {
                    "as a 32-bit word"
                } else {
                    "**not** as a 32-bit word"
                },
                site.branch,
                branch,
            );
        }
    }
}

fn seeds(md: &mut String, r: &Results) {
    let _ = writeln!(
        md,
        "## 4. The seeds' approaches on the same stream\n\n\
         Styx Trace sent 24-byte events through a shared-memory ring (`ipmpsc`) to a reader \
         process; crosvm writes a text line per event to ftrace's `trace_marker` (here in an \
         ftrace instance of its own with a 16 MiB ring, read from `trace_pipe` by another \
         process). Both readers only count.\n\n{STREAM_HEADER}"
    );
    for way in [
        Way::Loop,
        Way::Detached,
        Way::Batched,
        Way::PerEvent,
        Way::PerEventNop5,
        Way::Ipmpsc,
        Way::TraceMarker,
    ] {
        let _ = writeln!(md, "{}", stream_cells(way, r.stream.row(way)));
    }
    let _ = writeln!(md);
}

fn consumers(md: &mut String, plan: &Plan, r: &Results) {
    let c = &r.consumers;
    let _ = writeln!(
        md,
        "## 5. Consumers\n\n\
         A capture of {} events (per-event records, delta-coded) converted on one core; a \
         capture takes {} bytes per event ({} for memory reads alone). Batched captures store \
         the batches whole (see 2).\n\n\
         | format | M events/s | Styx | target |\n|---|---|---|---|",
        plan.consumer_events,
        c.bytes_per_event.show(2),
        c.bytes_per_mem_read.show(2),
    );
    for format in FORMATS {
        let (styx, target) = c.reference.get(format).cloned().unwrap_or_default();
        let _ = writeln!(
            md,
            "| {format} | {} | {styx} | {target} |",
            c.rates[format].show(1)
        );
    }
    let _ = writeln!(md);
}

/// Whether the kernel optimized the sites: its trampoline mapping, seen in
/// the workload after each attached run.
fn trampolines(s: &super::stream::Results) -> String {
    let count = |ways: &[Way]| {
        ways.iter().fold((0, 0), |(seen, runs), way| {
            let row = s.row(*way);
            (seen + row.trampoline_runs, runs + row.ns_per_event.len())
        })
    };
    let (five_seen, five_runs) = count(&[Way::PerEventNop5, Way::BpftraceCountNop5]);
    let (one_seen, one_runs) = count(&[Way::PerEvent, Way::BpftraceCount]);
    format!(
        "The kernel's `[uprobes-trampoline]` mapping appeared in the workload after \
         {five_seen} of {five_runs} attached 5-byte-nop runs (and {one_seen} of {one_runs} \
         1-byte-nop runs). The call is not faster than the trap on every machine: compare \
         the columns."
    )
}

fn encoding(md: &mut String, r: &Results) {
    let s = &r.stream;
    let _ = writeln!(
        md,
        "## 7. Probe-site encoding (per-event delivery)\n\n\
         styx-probe's site is a 1-byte `nop`, which the kernel traps with `int3` on every \
         hit. On a 5-byte `nop` Linux 6.18 may rewrite the site after its first hit into a call \
         to a trampoline that enters the kernel with the `uprobe` syscall instead. Same probe \
         name and arguments, same loop; the 5-byte site is a plain USDT site with a 16-bit \
         semaphore of its own, so batched delivery does not attach it. {}\n\n\
         | | 1-byte nop, ns/event | 5-byte nop, ns/event | 1-byte ÷ 5-byte |\n|---|---|---|---|",
        trampolines(s)
    );
    let detached =
        s.row(Way::Detached).ns_per_event.median() / s.row(Way::DetachedNop5).ns_per_event.median();
    let _ = writeln!(
        md,
        "| detached | {} | {} | {detached:.2}× |",
        s.row(Way::Detached).ns_per_event.show(2),
        s.row(Way::DetachedNop5).ns_per_event.show(2),
    );
    for (label, one, five) in [
        (
            "styx-loader per-event, raw capture",
            Way::PerEvent,
            Way::PerEventNop5,
        ),
        (
            "bpftrace `count()`",
            Way::BpftraceCount,
            Way::BpftraceCountNop5,
        ),
    ] {
        let ratio = s.ratio(one, five);
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} |",
            s.row(one).ns_per_event.show(0),
            s.row(five).ns_per_event.show(0),
            times(ratio, 2),
        );
    }
    let _ = writeln!(md);
}

/// Filters, `top` and the flight recorder against streaming.
fn questions(md: &mut String, plan: &Plan, results: &Results) {
    use super::questions::{label, DELIVERIES, QUESTIONS};
    use super::tracer::{delivery_arg, Question};
    let q = &results.questions;
    let _ = writeln!(
        md,
        "## 6. Asking questions: filters, top, the flight recorder
"
    );
    let _ = writeln!(
        md,
        "styx-bench's loop of `mem_read`s ({} events a run with per-event delivery, {} \
         batched), each way in each round: streamed as a raw capture to /dev/null, every \
         event filtered out (`--filter 'tid == 0'`: in the kernel for per-event delivery, \
         by the loader for batched events), counted (`top --by pc`, the loop's 256 pcs: in \
         the kernel for per-event delivery, nothing streamed; by the loader for batched), and kept by the \
         flight recorder (the loader keeps the last 100,000, dumped once at the end). \
         \"vs streamed\": the loop's time per event over the streamed run's in the same \
         round. Loader CPU is per event fired.\n",
        plan.stream_events, plan.batched_slow_events
    );
    let _ = writeln!(
        md,
        "| delivery | events | loop ns/event | vs streamed | loader ns/event | lost (reported) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    for delivery in DELIVERIES {
        for question in QUESTIONS {
            let Some(row) = q.rows.get(&(delivery, question)) else {
                continue;
            };
            let vs = match q.ratios.get(&(delivery, question)) {
                Some(r) if question != Question::None => times(r, 2),
                _ => "1".into(),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {vs} | {} | {} of {} |",
                delivery_arg(delivery),
                label(question),
                row.ns_per_event.show(1),
                row.loader_ns_per_event.show(1),
                row.dropped,
                row.events
            );
        }
    }
    let filtered = q.ratios.get(&(Delivery::PerEvent, Question::FilterAll));
    if let Some(r) = filtered {
        let _ = writeln!(
            md,
            "\nTarget: filtered-out events cost measurably less than streamed ones: per-event \
             delivery {} ({} of streamed: the eBPF program returns before reserving ring \
             space, and the loader has nothing to read). Batched events are filtered by the \
             loader as it splits them: the emulator's cost is a batched event's either way; \
             the loader's is {} ns per event, against {} stored whole as a raw capture and {} \
             written as JSON lines (section 2): where it cannot keep up with the loop, the ring \
             fills and the drops are counted (`--lossless` makes the emulator wait instead).\n",
            verdict(r.median() < 0.97),
            times(r, 2),
            q.rows
                .get(&(Delivery::Batched, Question::FilterAll))
                .map_or("-".into(), |row| row.loader_ns_per_event.show(1)),
            q.rows
                .get(&(Delivery::Batched, Question::None))
                .map_or("-".into(), |row| row.loader_ns_per_event.show(1)),
            results
                .stream
                .rows
                .get(&super::stream::Way::BatchedJsonl)
                .map_or("-".into(), |row| row.consumer_ns_per_event.show(1)),
        );
    }
    if let Some(r) = q
        .ratios
        .get(&(Delivery::PerEvent, Question::FlightRecorder))
    {
        let _ = writeln!(
            md,
            "Target: the flight recorder costs the emulator about what the eBPF program does \
             when streaming: per-event {}, batched {} of streamed (the events still cross \
             the ring into the loader's memory; nothing is formatted or written).\n",
            times(r, 2),
            q.ratios
                .get(&(Delivery::Batched, Question::FlightRecorder))
                .map_or("-".into(), |r| times(r, 2)),
        );
    }
}

fn functions(md: &mut String, plan: &Plan, results: &Results) {
    let f = &results.functions;
    let _ = writeln!(md, "## 8. Function tracing (`--functions`)\n");
    let _ = writeln!(
        md,
        "styx-bench's loop of {} calls of `styx_bench_call` (a few instructions, never \
         inlined) a run, each way in each round in one process: untraced; traced by \
         `styx-loader --functions '^styx_bench_call$' -o raw --output /dev/null` (a uprobe \
         on its entry and one on its `ret`, the loader pairing them), and the same with \
         `--function-exits uretprobe`; traced by bpftrace counting `uprobe` and \
         `uretprobe` hits of it; untraced again once all have detached.\n",
        plan.function_calls
    );
    let _ = writeln!(md, "| | ns per call |\n|---|---|");
    let rows = [
        ("untraced", &f.untraced),
        (
            "styx `--functions` (entry + `ret` uprobes, the default)",
            &f.styx,
        ),
        (
            "styx `--functions --function-exits uretprobe`",
            &f.styx_uretprobe,
        ),
        ("bpftrace `uprobe` + `uretprobe`, `count()`", &f.bpftrace),
        ("untraced, after both detached", &f.untraced_after),
    ];
    for (what, samples) in rows {
        let _ = writeln!(md, "| {what} | {} |", samples.show(1));
    }
    let _ = writeln!(
        md,
        "\nA traced call (entry and return) costs {} ns more than an untraced one with styx, \
         {} of bpftrace's cost per call ({} with uretprobes for returns: the kernel \
         single-steps a probed `ret` out of line, a second trap, where a uretprobe returns \
         through its trampoline; styx's default keeps the `ret` probes because a uretprobe \
         makes an exception or panic unwinding through the call abort the program). styx \
         wrote {} function events of the {} expected (2 per call), {} lost. Untraced, \
         nothing is patched: the function's first byte and its `ret` are the compiler's \
         until a tracer attaches, and after it detaches the call costs {} against {} \
         before.\n",
        (f.styx.median() - f.untraced.median()).round(),
        times(&f.ratio, 2),
        times(&f.ratio_uretprobe, 2),
        f.written,
        2 * f.calls,
        f.lost,
        f.untraced_after.show(1),
        f.untraced.show(1),
    );
}

/// Why the realistic workload's detached cost is what it is.
fn workload_why(w: &super::workload::Results) -> String {
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
    why
}

fn workload(md: &mut String, plan: &Plan, r: &Results) {
    use super::workload::Variant;
    let w = &r.workload;
    let _ = writeln!(
        md,
        "## 9. A realistic workload: a RISC-V interpreter probed the README's way\n\n\
         `styx-rv` runs rrs-lib's RV32IM interpreter (from crates.io) on a guest program \
         written in the crate (a prime sieve, an insertion sort with a call per element, an \
         FNV-1a checksum), instrumented as a new user would after reading the README: \
         `insn_exec` per instruction, `mem_read`/`mem_write` in its bus at every access \
         (instruction fetches included), a `reg_write` per register an instruction changed \
         (from a snapshot taken only while `reg_write` is traced) and a `branch` per taken \
         control transfer. Nothing is compiled twice and nothing is checked per frame: \
         detached, every probe's check runs. `styx-rv --quiet --repeat N` runs the program \
         N times ({} untraced; traced with `insn_exec` only {} times, with all types {}); \
         compiled out is the same source with `--features probes-off`. Compiled out and \
         detached run in {} sets of back-to-back runs per round, the order rotating from set \
         to set; \
         \"vs compiled out\" for detached is the median of the sets' ratios, for traced runs \
         the round's median compiled-out speed over the run's.\n\n\
         | probes | M instructions/s | vs compiled out | events | lost |\n|---|---|---|---|---|",
        plan.rv_repeat, plan.rv_repeat_batched_one, plan.rv_repeat_batched_all, plan.rv_sets,
    );
    let untraced = [
        (
            Variant::CompiledOut,
            &w.current.compiled_out,
            "1".to_string(),
        ),
        (
            Variant::Detached,
            &w.current.detached,
            slower(w.current.detached_slowdown.median()),
        ),
    ];
    for (variant, speed, versus) in untraced {
        let _ = writeln!(
            md,
            "| {} | {} | {versus} | - | - |",
            variant.label(),
            speed.show(2)
        );
    }
    for (variant, row) in &w.traced {
        let _ = writeln!(
            md,
            "| {} | {} | {} slower | {} | {} |",
            variant.label(),
            row.speed.show(2),
            times(&row.slowdown, 1),
            row.events,
            row.lost
        );
    }
    let _ = writeln!(md);
    let Some(b) = &w.baseline else {
        return;
    };
    let _ = writeln!(
        md,
        "Before and after: the same styx-rv source built against styx-probe and styx-common \
         as they were at `{}` (commit {}), run in the same sets, alternating with this \
         tree's builds (`cargo xtask bench --probe-baseline {}`).\n\n\
         | styx-probe from | compiled out, M instructions/s | detached, M instructions/s | detached vs compiled out |\n\
         |---|---|---|---|",
        b.rev,
        &b.commit[..b.commit.len().min(12)],
        b.rev,
    );
    for (label, untraced) in [(b.rev.as_str(), &b.untraced), ("this tree", &w.current)] {
        let ratio = &untraced.detached_slowdown;
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {} (sets from {} to {}) |",
            untraced.compiled_out.show(2),
            untraced.detached.show(2),
            slower(ratio.median()),
            slower(ratio.min()),
            slower(ratio.max()),
        );
    }
    let _ = writeln!(
        md,
        "\nPer set, this tree's detached run took {} as long as {}'s.\n",
        times(&b.current_vs_baseline, 3),
        b.rev,
    );
}
