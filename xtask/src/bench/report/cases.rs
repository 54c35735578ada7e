//! The report's method, and its sections on whole programs and on what
//! styx does besides streaming: the demo (1), the consumers (5), asking
//! questions (6), function tracing (8), the realistic workload (9), QEMU
//! guests (10).

use super::figures::{slower, table, times, verdict};
use super::Facts;
use crate::bench::c_probes;
use crate::bench::demo::{Capture, IntoFile, Row, Variant};
use crate::bench::qemu::{self, GUEST_ROUNDS, LOGGED_ROUNDS, TRACED_ROUNDS};
use crate::bench::questions::{label, Asked, DELIVERIES, QUESTIONS};
use crate::bench::tracer::{delivery_arg, Question};
use crate::bench::{exact, workload, Plan, Results};
use std::collections::BTreeMap;
use std::fmt::Write;
use styx_common::Delivery;

pub fn method(md: &mut String, plan: &Plan, r: &Results, facts: &Facts) {
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
         compiled-out speed over the run's, then the median over rounds. Each round also \
         traces all types batched into a raw capture file (`/tmp`) as long, with the \
         loader's defaults; after the rounds, one such run of {} repeats (in a full run \
         about the events `cargo xtask demo` records in its second) makes the capture \
         that is converted to Perfetto and read in parallel.\n\
         - **Event stream**: `styx-bench` sends (pc, addr, val) memory-read events \
         (`styx_probe::mem_read!`; `nop1-narrow` the same events with a 16-bit pc and \
         address) from a tight loop, one thread: {} events per batched run to \
         /dev/null, {} per batched run to a file or as JSON lines, {} per per-event or seed \
         run, {} per detached run; each tracer in a session of its own on a fresh process, \
         started with `--pid` and `-e mem_read`; the loop starts as soon as styx-loader says it \
         has attached. ns/event is the loop's wall time per event, \
         probe and tracer cost included (for batched delivery: appending to the thread's \
         buffer, and per {} KiB batch the flush probe's trap and the kernel's copy into the \
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
        plan.demo_repeat_capture,
        plan.batched_events,
        plan.batched_slow_events,
        plan.stream_events,
        plan.detached_events,
        facts.batch_kib,
        r.stream.disk.place,
        plan.disk_bytes >> 20,
        plan.consumer_events,
    );
}

/// Section 1: the 6502 demo compiled out, detached and traced.
pub fn demo(md: &mut String, plan: &Plan, r: &Results) {
    let rows = Variant::ALL.map(|variant| {
        let row = &r.demo.rows[&variant];
        let (versus, events, lost) = match variant {
            Variant::CompiledOut => ("1".to_string(), "-".into(), "-".into()),
            Variant::Detached => (
                slower(r.demo.detached_slowdown.median()),
                "-".into(),
                "-".into(),
            ),
            _ => (
                format!("{} slower", times(&row.slowdown, 1)),
                row.events.to_string(),
                row.lost.to_string(),
            ),
        };
        [variant.label(), row.speed.show(2), versus, events, lost]
    });
    let header = [
        "probes",
        "M instructions/s",
        "vs compiled out",
        "events",
        "lost",
    ];
    let _ = write!(
        md,
        "## 1. The demo emulator\n\n\
         The demo checks for tracers once per frame of 1024 instructions and runs a plain CPU \
         (the same code as compiled out) until one is attached, then its probed CPU. Compiled \
         out and detached run {} times per round in back-to-back pairs; \"vs compiled out\" for \
         detached is the median of the pairs' ratios. Detached runs the same code as compiled \
         out plus one check per frame, so the pairs differ by code layout and by this machine's \
         noise, which their spread shows. With all types traced the demo fires about 7 events \
         per instruction; control events, spans and markers are per-event types even in \
         batched delivery (each one flushes the thread's pending batch first); interrupts \
         (~70,000 a second from its timer) are batched.\n\n{}",
        plan.demo_pairs,
        table(header, rows),
    );
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
    let to_null = &r.demo.rows[&Variant::All(Delivery::Batched)];
    demo_capture(md, &r.demo.into_file, &r.demo.capture, to_null);
}

/// The demo's raw capture: bytes per event on disk, the demo's speed
/// meanwhile against its speed traced to /dev/null (`to_null`), and `read`
/// of the capture on 1, 2 and every core.
fn demo_capture(md: &mut String, file: &IntoFile, c: &Capture, to_null: &Row) {
    let _ = writeln!(
        md,
        "Traced at all types, batched, into a raw capture file with the loader's defaults \
         (blocks compressed on worker threads, zstd or lz4 when they fall behind; \
         `--on-full wait`, blocks they are behind with stored as encoded while the capture \
         stays within {} bytes per event), in each round right \
         after the run to /dev/null and as long: {:.2} bytes per event ({} bytes for {} \
         events written, {} lost); per round the demo ran at {} of its speed traced to \
         /dev/null, where {} of {} events were dropped (a device: `--on-full drop`). The \
         capture's blocks hold each batch record as the ring carried it, compressed with \
         the rest of its block.\n\n\
         The capture of the run after the rounds ({} events, {} lost, {:.2} bytes per \
         event; the demo at {:.1} M \
         instructions/s) converted to Perfetto (`read -o perfetto`): {:.1} bytes per event \
         ({} bytes).\n",
        styx_common::capture::STORED_BUDGET,
        file.bytes_per_event(),
        file.bytes,
        file.events,
        file.lost,
        times(&file.speed_ratio, 2),
        to_null.lost,
        to_null.events + to_null.lost,
        c.events,
        c.lost,
        c.bytes_per_event(),
        c.speed,
        c.perfetto_bytes_per_event(),
        c.perfetto_bytes,
    );
    if c.reads.is_empty() {
        return;
    }
    let rows = c.reads.iter().map(|r| {
        [
            format!("`{}`", r.format),
            match r.threads {
                0 => "every core".into(),
                n => n.to_string(),
            },
            r.rate.show(1),
            format!("{:.2}×", r.rate.median() / c.read_rate(r.format, 1)),
        ]
    });
    let _ = writeln!(
        md,
        "`styx-loader read` of that capture to /dev/null, wall clock (M events/s, median \
         (min–max) of 3; against 1 thread):\n\n{}",
        table(["format", "--threads", "M events/s", "vs 1 thread"], rows)
    );
}

/// Section 5: how fast a capture converts to each format.
pub fn consumers(md: &mut String, plan: &Plan, r: &Results) {
    let c = &r.consumers;
    let rows = c.formats.iter().map(|format| {
        let (styx, target) = c.reference.get(format).cloned().unwrap_or_default();
        [format.clone(), c.rates[format].show(1), styx, target]
    });
    let _ = writeln!(
        md,
        "## 5. Consumers\n\n\
         A capture of {} events (per-event records, delta-coded) converted on one core; a \
         capture takes {} bytes per event ({} for memory reads alone). Batched captures store \
         the batches whole (see 2).\n\n{}",
        plan.consumer_events,
        c.bytes_per_event.show(2),
        c.bytes_per_mem_read.show(2),
        table(["format", "M events/s", "Styx", "target"], rows),
    );
}

/// Section 6: filters, `top` and the flight recorder against streaming.
pub fn questions(md: &mut String, plan: &Plan, results: &Results) {
    let q = &results.questions;
    let mut rows = Vec::new();
    for delivery in DELIVERIES {
        for question in QUESTIONS {
            let Some(row) = q.rows.get(&Asked(delivery, question)) else {
                continue;
            };
            let vs = match q.ratios.get(&Asked(delivery, question)) {
                Some(r) if question != Question::None => times(r, 2),
                _ => "1".into(),
            };
            rows.push([
                delivery_arg(delivery).to_string(),
                label(question).to_string(),
                row.ns_per_event.show(1),
                vs,
                row.loader_ns_per_event.show(1),
                format!("{} of {}", row.dropped, row.events),
            ]);
        }
    }
    let header = [
        "delivery",
        "events",
        "loop ns/event",
        "vs streamed",
        "loader ns/event",
        "lost (reported)",
    ];
    let _ = writeln!(
        md,
        "## 6. Asking questions: filters, top, the flight recorder\n\n\
         styx-bench's loop of `mem_read`s ({} events a run with per-event delivery, {} \
         batched), each way in each round: streamed as a raw capture to /dev/null, every \
         event filtered out (`--filter 'tid == 0'`: in the kernel for per-event delivery, \
         by the loader for batched events), counted (`top --by pc`, the loop's 256 pcs: in \
         the kernel for per-event delivery, nothing streamed; by the loader for batched), and kept by the \
         flight recorder (the loader keeps the last 100,000, dumped once at the end). \
         \"vs streamed\": the loop's time per event over the streamed run's in the same \
         round. Loader CPU is per event fired.\n\n{}",
        plan.stream_events,
        plan.batched_slow_events,
        table(header, rows),
    );
    question_targets(md, results);
}

/// Section 6's targets: filtering out and the flight recorder.
fn question_targets(md: &mut String, results: &Results) {
    let q = &results.questions;
    let loader = |delivery, question| {
        q.rows
            .get(&Asked(delivery, question))
            .map_or("-".into(), |row| row.loader_ns_per_event.show(1))
    };
    if let Some(r) = q
        .ratios
        .get(&Asked(Delivery::PerEvent, Question::FilterAll))
    {
        let _ = writeln!(
            md,
            "Target: filtered-out events cost measurably less than streamed ones: per-event \
             delivery {} ({} of streamed: the eBPF program returns before reserving ring \
             space, and the loader has nothing to read). Batched events are filtered by the \
             loader as it splits them: the emulator's cost is a batched event's either way; \
             the loader's is {} ns per event, against {} stored whole as a raw capture and {} \
             written as JSON lines (section 2): where it cannot keep up with the loop, the ring \
             fills and the drops are counted (`--lossless` makes the emulator wait instead).\n",
            verdict(r.median() < 0.97),
            times(r, 2),
            loader(Delivery::Batched, Question::FilterAll),
            loader(Delivery::Batched, Question::None),
            results
                .stream
                .rows
                .get(&crate::bench::stream::Way::BatchedJsonl)
                .map_or("-".into(), |row| row.consumer_ns_per_event.show(1)),
        );
    }
    if let Some(r) = q
        .ratios
        .get(&Asked(Delivery::PerEvent, Question::FlightRecorder))
    {
        let _ = writeln!(
            md,
            "Target: the flight recorder costs the emulator about what the eBPF program does \
             when streaming: per-event {}, batched {} of streamed (the events still cross \
             the ring into the loader's memory; nothing is formatted or written).\n",
            times(r, 2),
            q.ratios
                .get(&Asked(Delivery::Batched, Question::FlightRecorder))
                .map_or("-".into(), |r| times(r, 2)),
        );
    }
}

/// Section 8: a traced call's cost, styx against bpftrace.
pub fn functions(md: &mut String, plan: &Plan, results: &Results) {
    let f = &results.functions;
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
    ]
    .map(|(what, samples)| [what.to_string(), samples.show(1)]);
    let _ = writeln!(
        md,
        "## 8. Function tracing (`--functions`)\n\n\
         styx-bench's loop of {} calls of `styx_bench_call` (a few instructions, never \
         inlined) a run, each way in each round in one process: untraced; traced by \
         `styx-loader --functions '^styx_bench_call$' -o raw --output /dev/null` (a uprobe \
         on its entry and one on its `ret`, the loader pairing them), and the same with \
         `--function-exits uretprobe`; traced by bpftrace counting `uprobe` and \
         `uretprobe` hits of it; untraced again once all have detached.\n\n{}",
        plan.function_calls,
        table(["", "ns per call"], rows),
    );
    let _ = writeln!(
        md,
        "A traced call (entry and return) costs {} ns more than an untraced one with styx, \
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

/// Section 9: styx-rv compiled out, detached and traced.
pub fn workload(md: &mut String, plan: &Plan, r: &Results) {
    use workload::Variant;
    let w = &r.workload;
    let mut rows = vec![
        [
            Variant::CompiledOut.label().to_string(),
            w.current.compiled_out.show(2),
            "1".to_string(),
            "-".into(),
            "-".into(),
        ],
        [
            Variant::Detached.label().to_string(),
            w.current.detached.show(2),
            slower(w.current.detached_slowdown.median()),
            "-".into(),
            "-".into(),
        ],
    ];
    for (variant, row) in &w.traced {
        rows.push([
            variant.label().to_string(),
            row.speed.show(2),
            format!("{} slower", times(&row.slowdown, 1)),
            row.events.to_string(),
            row.lost.to_string(),
        ]);
    }
    let header = [
        "probes",
        "M instructions/s",
        "vs compiled out",
        "events",
        "lost",
    ];
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
         the round's median compiled-out speed over the run's.\n\n{}",
        plan.rv_repeat,
        plan.rv_repeat_batched_one,
        plan.rv_repeat_batched_all,
        plan.rv_sets,
        table(header, rows),
    );
    if let Some(exact) = &w.exact {
        let _ = writeln!(md, "{}\n", exact_line(exact, w));
    }
    if let Some(b) = &w.baseline {
        baseline(md, b, &w.current, &w.traced);
    }
}

/// Section 9's exact count, or why there is none.
fn exact_line(exact: &Result<exact::Exact, String>, w: &workload::Results) -> String {
    let counts = |c: &exact::Counts| {
        format!(
            "compiled out {:.1}, detached {:.1} ({:+.1}%)",
            c.compiled_out,
            c.detached,
            100.0 * (c.detached_ratio() - 1.0)
        )
    };
    match exact {
        Ok(e) => {
            let mut line = format!(
                "Exactly, host instructions per guest instruction (callgrind; {} less {} runs \
                 of the program): {}",
                exact::MORE,
                exact::FEW,
                counts(&e.current)
            );
            if let (Some(b), Some(base)) = (&e.baseline, &w.baseline) {
                let _ = write!(line, "; with styx-probe at `{}`: {}", base.rev, counts(b));
            }
            line.push_str(
                ". The wall clock of the same instructions moves with where the linker puts \
                 the step loop (two builds of one source have differed by ~10% here); the \
                 count does not.",
            );
            line
        }
        Err(why) => format!("No exact instruction count: {why}."),
    }
}

/// Section 9's before and after: styx-rv built against an older styx-probe.
fn baseline(
    md: &mut String,
    b: &workload::BaselineResults,
    current: &workload::Untraced,
    traced: &BTreeMap<workload::Variant, Row>,
) {
    let rows = [(b.rev.as_str(), &b.untraced), ("this tree", current)].map(|(label, untraced)| {
        let ratio = &untraced.detached_slowdown;
        [
            label.to_string(),
            untraced.compiled_out.show(2),
            untraced.detached.show(2),
            format!(
                "{} (sets from {} to {})",
                slower(ratio.median()),
                slower(ratio.min()),
                slower(ratio.max())
            ),
        ]
    });
    let header = [
        "styx-probe from",
        "compiled out, M instructions/s",
        "detached, M instructions/s",
        "detached vs compiled out",
    ];
    let _ = writeln!(
        md,
        "Before and after: the same styx-rv source built against styx-probe and styx-common \
         as they were at `{}` (commit {}), run in the same sets, alternating with this \
         tree's builds (`cargo xtask bench --probe-baseline {}`).\n\n{}",
        b.rev,
        &b.commit[..b.commit.len().min(12)],
        b.rev,
        table(header, rows),
    );
    let _ = writeln!(
        md,
        "Per set, this tree's detached run took {} as long as {}'s.\n",
        times(&b.current_vs_baseline, 3),
        b.rev,
    );
    let rows = b.traced_vs_baseline.iter().map(|(variant, ratio)| {
        let speed = |rows: &BTreeMap<workload::Variant, Row>| {
            rows.get(variant)
                .map_or("-".into(), |row| row.speed.show(2))
        };
        [
            variant.label().to_string(),
            speed(&b.traced),
            speed(traced),
            times(ratio, 3),
        ]
    });
    let header = [
        "traced",
        &format!("{}, M instructions/s", b.rev),
        "this tree, M instructions/s",
        "this tree's time per run vs the baseline's",
    ];
    let _ = writeln!(
        md,
        "Traced the same way, each round's run of this tree's build next to one of {}'s \
         (which goes first alternating by round):\n\n{}",
        b.rev,
        table(header, rows),
    );
}

/// Section 10: styx-qemu on a CPU-bound guest, `rounds` rounds (also what
/// `cargo xtask bench-qemu` prints).
pub fn qemu(md: &mut String, rounds: usize, q: &qemu::Results) {
    let rows = [
        [
            format!("QEMU without the plugin ({GUEST_ROUNDS} guest rounds)"),
            q.plain.show(3),
            q.plain_wall.show(3),
        ],
        [
            "plugin loaded, nobody tracing".to_string(),
            q.detached.show(3),
            q.detached_wall.show(3),
        ],
        [
            "loaded / without, per round".to_string(),
            times(&q.ratio, 3),
            String::new(),
        ],
        [
            format!(
                "traced, all four v1 types, `--pid --on-full wait`, raw to /dev/null \
                 ({TRACED_ROUNDS} guest rounds): {} M events/s, {} lost, {:.0}× slower per \
                 guest round",
                q.rate.show(1),
                q.lost,
                q.per_round_slowdown(&q.traced, TRACED_ROUNDS)
            ),
            q.traced.show(3),
            String::new(),
        ],
        [
            format!(
                "QEMU's own `-d nochain,exec` block log to /dev/null ({LOGGED_ROUNDS} guest \
                 rounds): {} M blocks/s, {:.0}× slower per guest round",
                q.log_rate.show(1),
                q.per_round_slowdown(&q.logged, LOGGED_ROUNDS)
            ),
            q.logged.show(3),
            String::new(),
        ],
    ];
    let _ = writeln!(
        md,
        "## 10. QEMU guests (styx-qemu)\n\n\
         styx-qemu, the QEMU TCG plugin, under qemu-x86_64 on a CPU-bound static guest (a \
         sieve, an insertion sort and a checksum, `styx-qemu/bench/cpu_guest.c`), {rounds} \
         rounds, QEMU without the plugin and with it loaded alternating which goes first. \
         Figures are the QEMU process's CPU seconds (user + system); M events/s and M \
         blocks/s are over wall time. Traced runs attach with `--pid` while the guest waits \
         for a line, so the guest waits for room rather than lose events.\n\n{}",
        table(["", "CPU s", "wall s"], rows),
    );
}

/// Section 11: `styx_probe.h`'s check in a C loop while nobody traces.
pub fn c_probes(md: &mut String, plan: &Plan, c: &c_probes::Results) {
    let rows = [
        [
            "probes compiled out (`-DSTYX_PROBES_OFF`)".to_string(),
            c.off.show(3),
            "1".to_string(),
        ],
        [
            "static library, detached (one load of the word, a branch)".to_string(),
            c.with_static.show(3),
            times(&c.static_ratio, 2),
        ],
        [
            "shared library, detached (`-DSTYX_PROBE_SHARED`: the word's address first)"
                .to_string(),
            c.with_shared.show(3),
            times(&c.shared_ratio, 2),
        ],
    ];
    let _ = writeln!(
        md,
        "## 11. C emulators (styx_probe.h)\n\n\
         `styx-probe-c/bench/detached_loop.c`: a tight loop of one `STYX_MEM_READ` an \
         iteration (as styx-bench's Rust loop fires `mem_read!`), built with gcc -O2 three \
         ways, {} iterations a run, each build once a round in rotating order. Nobody \
         traces: this is what a C emulator pays per probe for having them.\n\n{}",
        plan.detached_events,
        table(["", "ns per iteration", "vs compiled out"], rows),
    );
}
