//! BENCHMARKS.md: the method, the machine, the targets and every table.

use super::consumers::FORMATS;
use super::demo::Variant;
use super::machine::Machine;
use super::stats::Samples;
use super::stream::{Row, Way};
use super::{Plan, Results};
use std::fmt::Write;
use std::time::Duration;

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
    targets(&mut md, results);
    method(&mut md, plan);
    demo(&mut md, plan, results);
    per_event(&mut md, results);
    seeds(&mut md, results);
    consumers(&mut md, plan, results);
    encoding(&mut md, results);
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

fn targets(md: &mut String, r: &Results) {
    let slowdown = &r.demo.detached_slowdown;
    let raw = r.stream.ratio(Way::StyxRaw, Way::BpftraceCount);
    let jsonl = r.stream.ratio(Way::StyxJsonl, Way::BpftraceCount);
    let (raw_row, jsonl_row) = (r.stream.row(Way::StyxRaw), r.stream.row(Way::StyxJsonl));
    let _ = writeln!(md, "## Targets\n");
    let _ = writeln!(md, "| target | measured | |\n|---|---|---|");
    let _ = writeln!(
        md,
        "| detached: demo ≤ 1% slower than with probes compiled out | {} (pairs ranged from {} to {}) | {} |",
        slower(slowdown.median()),
        slower(slowdown.min()),
        slower(slowdown.max()),
        verdict(slowdown.median() <= 1.01)
    );
    for (what, ratio, row) in [
        ("raw capture", raw, raw_row),
        ("JSON lines", jsonl, jsonl_row),
    ] {
        let _ = writeln!(
            md,
            "| attached, streaming every record ({what}): ≤ 1.1× bpftrace `count()` per event, nothing lost at the default 16 MiB ring | {:.2}× ({:.2}–{:.2}), {} of {} events lost | {} |",
            ratio.median(),
            ratio.min(),
            ratio.max(),
            row.lost,
            row.events,
            verdict(ratio.median() <= 1.1 && row.lost == 0)
        );
    }
    let _ = writeln!(md);
}

fn method(md: &mut String, plan: &Plan) {
    let _ = writeln!(
        md,
        "## Method\n\n\
         Each round runs every case once, in the order below; the rounds repeat that. \
         Programs are release builds. Tracers write to `/dev/null`, so disk speed does not count.\n\n\
         - **Demo**: `styx-demo --quiet --repeat N` runs its four 6502 programs N times \
         ({} untraced, {} traced with one type, {} with all) and reports guest instructions per \
         second. Compiled out is the same source built with `--features probes-off`. Attached runs \
         are `styx-loader -o raw --output /dev/null -- styx-demo …`: traced from the first instruction.\n\
         - **Event stream**: `styx-bench` sends (pc, addr, val) memory-read events from a tight \
         loop: {} events per attached run, {} per detached run, each tracer in a session of its own \
         on a fresh process. ns/event is the loop's wall time per event, probe and tracer cost \
         included; the consumer's CPU is the tracer's (or reader process's) CPU time over the run, \
         per event; lost = fired − received (styx-loader also counts ring-buffer drops). \
         bpftrace prints nothing when it has attached, so its script also counts a second \
         probe (`mem_write`) that the workload fires until bpftrace sees it; those events are \
         outside the measured stream.\n\
         - **Consumers**: `styx-events/examples/bench-consumers.rs`, {} events of an emulator-like \
         mix, one pinned core, CPU time of the converting thread.\n",
        plan.demo_repeat,
        plan.demo_repeat_traced_one,
        plan.demo_repeat_traced_all,
        plan.stream_events,
        plan.detached_events,
        plan.consumer_events,
    );
}

fn demo(md: &mut String, plan: &Plan, r: &Results) {
    let off = r.demo.rows[&Variant::CompiledOut].speed.median();
    let _ = writeln!(
        md,
        "## 1. The demo emulator\n\n\
         The demo checks for tracers once per frame of 1024 instructions and runs a plain CPU \
         (the same code as compiled out) until one is attached, then its probed CPU. Compiled \
         out and detached run {} times per round in back-to-back pairs; \"vs compiled out\" for \
         detached is the median of the pairs' ratios. Detached runs the same code as compiled \
         out plus one check per frame, so the pairs differ by code layout and by this machine's \
         noise, which their spread shows.\n\n\
         | probes | M instructions/s | vs compiled out | events | lost |\n|---|---|---|---|---|",
        plan.demo_pairs
    );
    for variant in Variant::ALL {
        let row = &r.demo.rows[&variant];
        let speed = row.speed.median();
        let versus = match variant {
            Variant::CompiledOut => "1".to_string(),
            Variant::Detached => slower(r.demo.detached_slowdown.median()),
            _ => format!("{:.0}× slower", off / speed),
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
    let _ = writeln!(md);
}

/// `| label | ns/event | M events/s | consumer CPU | lost |` cells for a row.
fn stream_cells(way: Way, row: &Row) -> String {
    let rate = 1e3 / row.ns_per_event.median();
    let consumer = if row.consumer_ns_per_event.is_empty() {
        "-".to_string()
    } else {
        row.consumer_ns_per_event.show(0)
    };
    let lost = if matches!(way, Way::Loop | Way::Detached | Way::DetachedNop5) {
        "-".to_string()
    } else {
        format!("{} of {}", row.lost, row.events)
    };
    let decimals = if row.ns_per_event.median() < 10.0 {
        2
    } else {
        0
    };
    format!(
        "| {} | {} | {rate:.2} | {consumer} | {lost} |",
        way.label(),
        row.ns_per_event.show(decimals)
    )
}

const STREAM_HEADER: &str =
    "| way | ns/event | M events/s | consumer CPU, ns/event | lost |\n|---|---|---|---|---|";

fn per_event(md: &mut String, r: &Results) {
    let _ = writeln!(
        md,
        "## 2. Cost per event, attached to the same probe\n\n\
         The styx probe (the `usdt` crate's 1-byte nop) in a tight loop; every tracer attached \
         to it alone.\n\n{STREAM_HEADER}"
    );
    for way in [
        Way::Detached,
        Way::StyxRaw,
        Way::StyxJsonl,
        Way::BpftraceCount,
        Way::BpftracePrintf,
    ] {
        let _ = writeln!(md, "{}", stream_cells(way, r.stream.row(way)));
    }
    let show = |s: &Samples| format!("{:.2}× ({:.2}–{:.2})", s.median(), s.min(), s.max());
    let _ = writeln!(
        md,
        "\nstyx-loader ÷ bpftrace `count()`, per round: raw capture {}, JSON lines {}.\n",
        show(r.stream.ratio(Way::StyxRaw, Way::BpftraceCount)),
        show(r.stream.ratio(Way::StyxJsonl, Way::BpftraceCount)),
    );
}

fn seeds(md: &mut String, r: &Results) {
    let _ = writeln!(
        md,
        "## 3. The seeds' approaches on the same stream\n\n\
         Styx Trace sent 24-byte events through a shared-memory ring (`ipmpsc`) to a reader \
         process; crosvm writes a text line per event to ftrace's `trace_marker` (here in an \
         ftrace instance of its own with a 16 MiB ring, read from `trace_pipe` by another \
         process). Both readers only count.\n\n{STREAM_HEADER}"
    );
    for way in [
        Way::Loop,
        Way::Detached,
        Way::StyxRaw,
        Way::StyxRawNop5,
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
        "## 4. Consumers\n\n\
         A capture of {} events converted on one core; a capture takes {} bytes per event \
         ({} for memory reads alone).\n\n\
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
    let (five_seen, five_runs) = count(&[Way::StyxRawNop5, Way::BpftraceCountNop5]);
    let (one_seen, one_runs) = count(&[Way::StyxRaw, Way::BpftraceCount]);
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
        "## 5. Probe-site encoding\n\n\
         The `usdt` crate's site is a 1-byte `nop`, which the kernel traps with `int3` on every \
         hit. On a 5-byte `nop` Linux 6.18 may rewrite the site after its first hit into a call \
         to a trampoline that enters the kernel with the `uprobe` syscall instead. Same probe, \
         same semaphore, same loop. {}\n\n\
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
        ("styx-loader, raw capture", Way::StyxRaw, Way::StyxRawNop5),
        (
            "bpftrace `count()`",
            Way::BpftraceCount,
            Way::BpftraceCountNop5,
        ),
    ] {
        let ratio = s.ratio(one, five);
        let _ = writeln!(
            md,
            "| {label} | {} | {} | {:.2}× ({:.2}–{:.2}) |",
            s.row(one).ns_per_event.show(0),
            s.row(five).ns_per_event.show(0),
            ratio.median(),
            ratio.min(),
            ratio.max()
        );
    }
    let _ = writeln!(md);
}
