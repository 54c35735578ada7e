//! A target that forges the batches it hands over (tests/c/forged_capture.c,
//! a flush site written by hand): one bad batch costs a raw capture nothing
//! after it, and thread ids made up by the thousand cannot grow the flight
//! recorder past its memory.

use crate::support::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/forged_capture.c");

fn build(dir: &Path) -> PathBuf {
    use styx_common::item::{event_tag, TIME_TAG};
    let binary = dir.join("forged_capture");
    let insn = event_tag(styx_common::EventKind::InsnExec, &[8, 8, 1]);
    let defines = [
        format!("-DINSN_EXEC_TAG={insn:#x}"),
        format!("-DTIME_TAG={TIME_TAG}"),
        format!(
            "-DLAYOUT_VERSION={}",
            styx_common::batch::BATCH_LAYOUT_VERSION
        ),
    ];
    cc(&[
        "-O2",
        &defines[0],
        &defines[1],
        &defines[2],
        "-o",
        binary.to_str().unwrap(),
        SOURCE,
    ]);
    binary
}

fn send(prog: &mut TestProg, command: &str) {
    assert_eq!(prog.ask(command).trim(), "ok", "{command}");
}

/// (tid, pc, insn) of each event of a jsonl trace.
fn insns(jsonl: &str) -> Vec<(u64, u64, u64)> {
    parse_jsonl(jsonl)
        .iter()
        .map(|e| {
            assert_eq!(e["event"], "insn_exec", "{e}");
            let n = |f: &str| e[f].as_u64().unwrap();
            (n("tid"), n("pc"), n("insn"))
        })
        .collect()
}

/// What `good TID SEQ N` hands over.
fn good(tid: u64, seq: u64, n: u64) -> Vec<(u64, u64, u64)> {
    (0..n).map(|i| (tid, 0x1000 + i, seq)).collect()
}

/// Issue 25, 9: a batch whose head's counts add up to its length while
/// its second item is none a batch holds was stored whole, and `read`
/// stopped there ("corrupt record … batch item 16 has unknown kind 255"
/// in the item layout of then), every later
/// event lost. Now the loader checks the items before storing a batch
/// whole (the summary says one was malformed), and `read` skips such a
/// record in a capture written before, in one line, reading on.
#[test]
fn a_forged_batch_costs_a_capture_nothing_after_it() {
    require_root();
    let dir = scratch("forged-capture");
    let binary = build(&dir);
    let mut prog = TestProg::start(&binary, &[]);
    let raw = dir.join("run.styx");
    // Blocks stored as they are, so that one can be forged in place below.
    let loader = prog.attach_loader(&[
        "-o",
        "raw",
        "--compression",
        "none",
        "--output",
        raw.to_str().unwrap(),
    ]);
    for command in ["good 7 0 5", "forged 8 0", "good 7 1 5", "good 9 0 3"] {
        send(&mut prog, command);
    }
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    let warnings: Vec<&String> = stderr.iter().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{stderr:?}");
    assert!(
        warnings[0].contains(
            "1 batch records were malformed (first: batch item 10 has unknown tag 0xffff)"
        ),
        "{stderr:?}"
    );
    assert_eq!(summary_of(&stderr).events, 13, "{stderr:?}");

    let want: Vec<_> = [good(7, 0, 5), good(7, 1, 5), good(9, 0, 3)].concat();
    let (status, stdout, read_stderr) = run_loader(&["read", raw.to_str().unwrap(), "-o", "jsonl"]);
    assert!(status.success(), "{read_stderr}");
    assert_eq!(read_stderr, "", "nothing malformed was stored");
    assert_eq!(insns(&stdout), want);

    // The capture as a loader that trusted the head would have written it:
    // its first batch (`good 7 0 5`, first in the first block, after the
    // header) forged in place, its second item's tag made 0xffff.
    let mut bytes = std::fs::read(&raw).unwrap();
    let header_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let block = 16 + header_len;
    assert_eq!(bytes[block], 0, "a block stored as it is");
    let at = block + 16;
    assert_eq!(bytes[at], 0x20, "a BATCH record comes first");
    let mut record = at + 1;
    while bytes[record] & 0x80 != 0 {
        record += 1;
    }
    record += 1;
    let batch_record = std::mem::size_of::<styx_common::batch::BatchRecord>();
    let second_item = record + batch_record + styx_common::item::MARK_BYTES;
    let insn = styx_common::item::event_tag(styx_common::EventKind::InsnExec, &[8, 8, 1]);
    assert_eq!(bytes[second_item..][..2], insn.to_le_bytes());
    bytes[second_item..][..2].copy_from_slice(&[0xff, 0xff]);
    let old = dir.join("old.styx");
    std::fs::write(&old, &bytes).unwrap();
    let (status, stdout, read_stderr) = run_loader(&["read", old.to_str().unwrap(), "-o", "jsonl"]);
    assert!(status.success(), "{read_stderr}");
    let lines: Vec<&str> = read_stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{read_stderr}");
    assert!(
        lines[0].contains(&format!(
            "1 malformed batch records were skipped (the first in the block at byte {block}: \
             batch item 10 has unknown tag 0xffff)"
        )),
        "{read_stderr}"
    );
    assert_eq!(insns(&stdout), want[5..]);
}

/// Issue 25, 6: every thread the flight recorder ever saw kept a ring
/// forever (5.6 GB in 1.2 s for a program making threads). 100,000 made-up
/// thread ids, a batch of 40 events each (~110 MB of records): the
/// recorder keeps to --flight-memory, says what it forgot, and the dump at
/// the end holds the newest threads whole.
#[test]
fn made_up_threads_do_not_grow_the_flight_recorder_past_its_memory() {
    require_root();
    let dir = scratch("forged-flight");
    let binary = build(&dir);
    let mut prog = TestProg::start(&binary, &[]);
    let out = dir.join("dump.jsonl");
    let (first, threads, events_each) = (1_000u64, 100_000u64, 40u64);
    let loader = prog.attach_loader(&[
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--flight-recorder",
        "1000",
        "--flight-memory",
        "8M",
        // Room for every batch, however slow the loader.
        "--ring-size",
        "256M",
    ]);
    send(&mut prog, &format!("tids {first} {threads} {events_each}"));
    prog.quit();
    // Its heap until it exits (the ring and the binary are file pages):
    // the budget and what a dump allocates; kept whole, the batches alone
    // take 110 MB.
    let mut heap_kib = 0;
    let status_file = format!("/proc/{}/status", loader.pid());
    while let Some(kib) = std::fs::read_to_string(&status_file)
        .ok()
        .and_then(|status| {
            let line = status.lines().find_map(|l| l.strip_prefix("RssAnon:"))?;
            line.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
    {
        heap_kib = heap_kib.max(kib);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    assert!(
        heap_kib < 64 << 10,
        "the loader's heap reached {heap_kib} KiB"
    );
    let forgotten = |what: &str| -> u64 {
        let line = stderr.iter().find(|l| l.contains(what));
        line.and_then(|l| {
            l.split(what)
                .next()?
                .split_whitespace()
                .last()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
    };
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("flight recorder: its memory was full (--flight-memory 8 MiB)")),
        "{stderr:?}"
    );

    let dumped = insns(&std::fs::read_to_string(dir.join("dump.1.jsonl")).unwrap());
    let mut by_thread: BTreeMap<u64, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for event in dumped {
        by_thread.entry(event.0).or_default().push(event);
    }
    let held = by_thread.len() as u64;
    assert!(held > 1_000 && held < threads, "{held} threads in the dump");
    // The newest threads, each whole.
    let newest = first + threads - held;
    assert_eq!(by_thread.keys().next(), Some(&newest));
    assert_eq!(by_thread.keys().last(), Some(&(first + threads - 1)));
    for (&tid, events) in &by_thread {
        assert!(
            *events == good(tid, 0, events_each),
            "thread {tid}: {events:?}"
        );
    }
    let summary = summary_of(&stderr);
    assert_eq!(summary.dropped, 0, "{stderr:?}");
    assert_eq!(summary.events, threads * events_each);
    // Every event not dumped was counted as forgotten: to stay within the
    // memory, or (a loader far behind) with a thread gone a while.
    let gone =
        forgotten(" events were forgotten") + events_each * forgotten(" threads were forgotten");
    assert_eq!(gone, summary.events - held * events_each, "{stderr:?}");
}
