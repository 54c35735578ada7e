//! The report's sections on the event stream of styx-bench's tight loop:
//! cost per event (2), event widths before and after, and file captures,
//! the detached probe (3), the seeds' approaches (4), the probe-site
//! encodings (7).

use super::figures::{lost_of, rate, rate_of, table, times};
use super::Facts;
use crate::bench::stream::{Breakdown, Results, Row, Way};
use crate::bench::tracer::Tracer;
use std::fmt::Write;

/// A table of stream rows: `| way | ns/event | M events/s | consumer CPU | lost |`.
fn stream_table(s: &Results, ways: &[Way]) -> String {
    let rows = ways.iter().map(|&way| {
        let row = s.row(way);
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
        [
            way.label().to_string(),
            row.ns_per_event.show(decimals),
            rate(&row.ns_per_event),
            consumer,
            lost,
        ]
    });
    let header = [
        "way",
        "ns/event",
        "M events/s",
        "consumer CPU, ns/event",
        "lost",
    ];
    table(header, rows)
}

/// Section 2: every way of sending the stream, side by side.
pub fn per_event(md: &mut String, s: &Results, breakdown: Option<&Breakdown>, facts: &Facts) {
    let ways = [
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
    ];
    let _ = write!(
        md,
        "## 2. Cost per event in a tight loop: batched and per-event delivery\n\n\
         `styx_probe::mem_read!` in styx-bench's loop (`run nop1 N`), one thread; every tracer \
         attached to it alone. The consumer is styx-loader, bpftrace, or the seed's reader \
         process.\n\n{}",
        stream_table(s, &ways)
    );
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
    if let Some(b) = breakdown {
        let _ = writeln!(
            md,
            "One more batched run to /dev/null, with `kernel.bpf_stats_enabled` on: {:.2} ns per \
             event in the loop; {} batches of {:.0} events, the flush probe's eBPF program \
             {:.0} ns per batch (copying it into the ring), {:.2} ns per event. The trap per \
             batch, a time mark (a `CLOCK_MONOTONIC` read) every ~{} events and appending to \
             the buffer make the rest.\n",
            b.ns_per_event,
            b.batches,
            b.events_per_batch,
            b.kernel_ns_per_batch,
            b.kernel_ns_per_event,
            facts.reads_per_mark,
        );
    }
    let _ = writeln!(md, "{}\n", summaries_against_losses(s));
}

/// Whether styx-loader's summaries counted the events lost by fired − received.
fn summaries_against_losses(s: &Results) -> String {
    let mismatched: Vec<String> = Way::ALL
        .iter()
        .filter(|w| matches!(w.tracer(), Some(Tracer::Styx(_))))
        .filter_map(|w| {
            let row = s.rows.get(w)?;
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
        "styx-loader's summaries counted exactly the events lost by fired − received.".into()
    } else {
        format!(
            "styx-loader's summaries and fired − received disagree: {}.",
            mismatched.join("; ")
        )
    }
}

/// Section 2's narrow events against the u64 ones, and both against the
/// build before the change when `--probe-baseline` gave one.
pub fn widths(md: &mut String, s: &Results, facts: &Facts) {
    let baseline = s.baseline();
    let mut ways = vec![Way::Batched, Way::BatchedNarrow, Way::BatchedDeclared];
    if baseline.is_some() {
        ways.push(Way::BatchedBaseline);
    }
    let _ = write!(
        md,
        "### Event widths: u64 and 16-bit values, before and after\n\n\
         `run nop1-narrow N` sends the same stream as a 16-bit guest fires it, \
         `mem_read!(|| (pc as u16, addr as u16, val))`: each batch item is {} bytes \
         (`styx_common::item`), where `nop1`'s, with a u64 pc and address, is {}. \
         `run nop1-declared N` sends them as a type styx-bench declares, `bench_tick(pc: \
         u16, addr: u16, val: u8)` (`styx_probe::event!`), traced with `-e usdt --probes \
         {}`: its item, a tag, a length byte and the values, is {} bytes. The compared \
         ways run back to back in each round, each first in turn.\n\n{}",
        facts.narrow_read_item_bytes,
        facts.read_item_bytes,
        crate::bench::tracer::DECLARED_PROBE,
        facts.declared_item_bytes,
        stream_table(s, &ways)
    );
    let _ = writeln!(
        md,
        "\nPer round, 16-bit ÷ u64 values: {}; the declared type ÷ the catalogue's \
         16-bit `mem_read`: {}.\n",
        times(s.ratio(Way::BatchedNarrow, Way::Batched), 2),
        times(s.ratio(Way::BatchedDeclared, Way::BatchedNarrow), 2)
    );
    let Some(b) = baseline else {
        let _ = writeln!(
            md,
            "No `--probe-baseline REV` was given: no build from before the change ran, so \
             this run has no before/after figures.\n"
        );
        return;
    };
    let _ = writeln!(
        md,
        "The last row is REV = `{}`'s own styx-bench (`nop1`, its u64 stream) traced by its \
         own styx-loader, built from a whole-tree export of REV. Per round, this tree's \
         16-bit stream ÷ REV's: {}; this tree's u64 stream ÷ REV's: {}.\n",
        b.rev,
        times(b.narrow_over_baseline, 2),
        times(b.u64_over_baseline, 2),
    );
}

/// Section 2's raw captures to a file, against what the disk takes.
pub fn files(md: &mut String, s: &Results) {
    let d = &s.disk;
    let share = |row: &Row| {
        if row.consumer_system_share.is_empty() {
            "-".to_string()
        } else {
            format!("{:.0}%", 100.0 * row.consumer_system_share.median())
        }
    };
    let ways = [
        ("to /dev/null", Way::Batched),
        ("to a file", Way::BatchedFile),
        ("to a file, `--lossless`", Way::BatchedFileLossless),
        (
            "16-bit pc and address, to a file, `--lossless`",
            Way::BatchedNarrowFileLossless,
        ),
    ];
    let rows = ways.map(|(label, way)| {
        let row = s.row(way);
        let received = 100.0 * (row.events - row.lost) as f64 / row.events.max(1) as f64;
        let (bytes, rate) = if row.file_bytes_per_event.is_empty() {
            ("-".to_string(), "-".to_string())
        } else {
            (row.file_bytes_per_event.show(1), row.file_mb_s.show(0))
        };
        [
            label.to_string(),
            rate_of(&row.ns_per_event),
            format!("{received:.1}%"),
            row.consumer_ns_per_event.show(2),
            share(row),
            bytes,
            rate,
        ]
    });
    let header = [
        "batched, raw capture",
        "loop, M events/s",
        "events received",
        "styx-loader CPU, ns per event written",
        "of it in the kernel",
        "bytes per event on disk",
        "MB/s written over the loop's run",
    ];
    let _ = write!(
        md,
        "### Raw captures to a file\n\n\
         The disk under {}, written as the loader writes (256 KiB `write`s): {} MB/s into the \
         page cache, {} ns of CPU per byte in the writing thread (the kernel's write path), \
         {} MB/s to the disk with the `fsync` after.\n\n{}",
        d.place,
        d.buffered_mb_s.show(0),
        d.cpu_ns_per_byte.show(2),
        d.synced_mb_s.show(0),
        table(header, rows),
    );
    let file = s.row(Way::BatchedFile);
    let lossless = s.row(Way::BatchedFileLossless);
    let narrow = s.row(Way::BatchedNarrowFileLossless);
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
         the pace the loader and the capture's workers take its events (the workers delta \
         code batches of one type's events, then compress them): {:.1} M events/s here at \
         {:.1} bytes per event on disk; the same stream as a 16-bit guest fires it, its items \
         in their native widths, {:.1} M events/s at {:.1} bytes per event.\n",
        bytes * 100.0,
        share(file),
        1e3 / cpu,
        d.synced_mb_s.median(),
        d.synced_mb_s.median() / bytes,
        1e3 / lossless.ns_per_event.median(),
        bytes,
        1e3 / narrow.ns_per_event.median(),
        narrow.file_bytes_per_event.median(),
    );
}

/// Section 3: the detached probe, timed and read from the binary.
pub fn detached(md: &mut String, s: &Results, site: &crate::bench::site::Detached) {
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
    if let Some(problem) = &site.problem {
        let _ = writeln!(
            md,
            "The probe site's instructions could not be read: {problem}.\n"
        );
        return;
    }
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

/// Section 4: the seeds' ways of sending events, on the same stream.
pub fn seeds(md: &mut String, s: &Results) {
    let ways = [
        Way::Loop,
        Way::Detached,
        Way::Batched,
        Way::PerEvent,
        Way::PerEventNop5,
        Way::Ipmpsc,
        Way::TraceMarker,
    ];
    let _ = writeln!(
        md,
        "## 4. The seeds' approaches on the same stream\n\n\
         Styx Trace sent 24-byte events through a shared-memory ring (`ipmpsc`) to a reader \
         process; crosvm writes a text line per event to ftrace's `trace_marker` (here in an \
         ftrace instance of its own with a 16 MiB ring, read from `trace_pipe` by another \
         process). Both readers only count.\n\n{}",
        stream_table(s, &ways)
    );
}

/// Whether the kernel optimized the sites: its trampoline mapping, seen in
/// the workload after each attached run.
fn trampolines(s: &Results) -> String {
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

/// Section 7: the 1-byte-nop site against the 5-byte one.
pub fn encoding(md: &mut String, s: &Results) {
    let ns = |way: Way| &s.row(way).ns_per_event;
    let detached = ns(Way::Detached).median() / ns(Way::DetachedNop5).median();
    let mut rows = vec![[
        "detached".to_string(),
        ns(Way::Detached).show(2),
        ns(Way::DetachedNop5).show(2),
        format!("{detached:.2}×"),
    ]];
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
        rows.push([
            label.to_string(),
            ns(one).show(0),
            ns(five).show(0),
            times(s.ratio(one, five), 2),
        ]);
    }
    let header = [
        "",
        "1-byte nop, ns/event",
        "5-byte nop, ns/event",
        "1-byte ÷ 5-byte",
    ];
    let _ = writeln!(
        md,
        "## 7. Probe-site encoding (per-event delivery)\n\n\
         styx-probe's site is a 1-byte `nop`, which the kernel traps with `int3` on every \
         hit. On a 5-byte `nop` Linux 6.18 may rewrite the site after its first hit into a call \
         to a trampoline that enters the kernel with the `uprobe` syscall instead. Same probe \
         name and arguments, same loop; the 5-byte site is a plain USDT site with a 16-bit \
         semaphore of its own, so batched delivery does not attach it, and `%rsp` is moved \
         past the red zone around it (the call writes below `%rsp`). styx-probe stays on the \
         1-byte `nop` whatever this shows: on Linux 6.18 a child forked while such a site is \
         optimized keeps the call but not the trampoline, and dies at its first hit (README, \
         \"Why the site is a 1-byte nop\"). {}\n\n{}",
        trampolines(s),
        table(header, rows),
    );
}
