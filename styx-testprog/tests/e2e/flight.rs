//! The flight recorder, in both delivery modes: a dump on SIGUSR1, on a
//! trigger and when the target dies of SIGSEGV or SIGABRT holds exactly
//! the last N events of each thread before it (the test program's own
//! record of what it fired says which), in time order; raw dumps read back.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const N: usize = 50;

struct Recording {
    prog: TestProg,
    loader: Loader,
    expect: PathBuf,
    dir: PathBuf,
}

fn record(name: &str, delivery: &str, extra: &[&str]) -> Recording {
    require_root();
    let dir = scratch(name);
    let expect = dir.join("expected.jsonl");
    let prog = TestProg::spawn(Some(&expect));
    let out = dir.join("dump.jsonl");
    let n = N.to_string();
    let mut args = jsonl_to(&out, delivery, &["--flight-recorder", &n]);
    args.extend_from_slice(extra);
    let loader = prog.attach_loader(&args);
    Recording {
        prog,
        loader,
        expect,
        dir,
    }
}

/// The last `N` events of each thread among `fired` (up to `until`, an
/// index per thread, excluded), by thread.
fn last_n(
    fired: &BTreeMap<u64, Vec<Value>>,
    until: impl Fn(u64, &[Value]) -> usize,
) -> BTreeMap<u64, Vec<Value>> {
    fired
        .iter()
        .map(|(&tid, events)| {
            let end = until(tid, events);
            (tid, events[end.saturating_sub(N)..end].to_vec())
        })
        .collect()
}

/// A dump by thread, checking it is in time order.
fn dump(path: &Path) -> BTreeMap<u64, Vec<Value>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let times: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["ts_ns"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "a dump is in time order"
    );
    by_tid(parse_jsonl(&text))
}

#[test]
fn sigusr1_dumps_the_last_n_events_of_each_thread_in_both_delivery_modes() {
    for delivery in ["batched", "per-event"] {
        let Recording {
            mut prog,
            mut loader,
            expect,
            dir,
        } = record(&format!("flight-usr1-{delivery}"), delivery, &[]);
        // Two threads idle with part of a batch each, and the main thread.
        prog.fire_by("park 40 2");
        prog.fire_by("fire-main 30");
        loader.signal(libc::SIGUSR1);
        let line = loader.wait_for_line("dump 1").unwrap();
        assert!(line.contains("(SIGUSR1)"), "{line}");
        let fired = by_tid(read_jsonl(&expect));
        assert_eq!(fired.len(), 3);
        let want = last_n(&fired, |_, events| events.len());
        assert_eq!(dump(&dir.join("dump.1.jsonl")), want, "{delivery}");
        prog.ask("unpark");
        prog.quit();
        let (status, stderr) = loader.finish();
        assert!(status.success(), "{stderr:?}");
        assert!(
            stderr
                .iter()
                .any(|l| l.contains("dump 2 (tracing stopped)")),
            "{stderr:?}"
        );
    }
}

#[test]
fn a_trigger_dumps_the_events_up_to_and_including_it() {
    for delivery in ["batched", "per-event"] {
        let Recording {
            mut prog,
            mut loader,
            expect,
            dir,
        } = record(
            &format!("flight-trigger-{delivery}"),
            delivery,
            &["--trigger", "control: code == 40"],
        );
        prog.fire_by("fire-main 60");
        loader.wait_for_line("dump 1 (trigger: control)").unwrap();
        let fired = by_tid(read_jsonl(&expect));
        let want = last_n(&fired, |_, events| {
            1 + events
                .iter()
                .position(|e| e["event"] == "control" && e["code"] == 40)
                .expect("the trigger was fired")
        });
        assert_eq!(dump(&dir.join("dump.1.jsonl")), want, "{delivery}");
        prog.quit();
        let (status, stderr) = loader.finish();
        assert!(status.success(), "{stderr:?}");
    }
}

#[test]
fn the_targets_death_by_a_signal_dumps_its_last_events_also_those_not_handed_over() {
    for (delivery, how, signal) in [
        ("batched", "segv", "SIGSEGV"),
        ("per-event", "segv", "SIGSEGV"),
        ("batched", "abort", "SIGABRT"),
    ] {
        // Batched types only: the last ones wait in the thread's buffer
        // when it dies (no per-event type flushed them).
        let Recording {
            mut prog,
            mut loader,
            expect,
            dir,
        } = record(
            &format!("flight-{how}-{delivery}"),
            delivery,
            &["-e", "insn_exec,mem_read,mem_write,branch"],
        );
        prog.send_only(&format!("crash 30 {how}"));
        let line = loader.wait_for_line("dump 1").unwrap();
        assert!(line.contains(&format!("killed by {signal}")), "{line}");
        let fired = by_tid(read_jsonl(&expect));
        assert_eq!(fired.values().map(Vec::len).sum::<usize>(), 30 * 4);
        let want = last_n(&fired, |_, events| events.len());
        assert_eq!(dump(&dir.join("dump.1.jsonl")), want, "{delivery} {how}");
        let (status, stderr) = loader.finish();
        assert!(status.success(), "{stderr:?}");
        drop(prog);
    }
}

#[test]
fn raw_dumps_are_captures_read_back_whole() {
    let dir = scratch("flight-raw");
    let expect = dir.join("expected.jsonl");
    require_root();
    let mut prog = TestProg::spawn(Some(&expect));
    let out = dir.join("crash.styx");
    let mut loader = prog.attach_loader(&[
        "-o",
        "raw",
        "--output",
        out.to_str().unwrap(),
        "--flight-recorder",
        "20",
    ]);
    prog.fire(10, 2);
    loader.signal(libc::SIGUSR1);
    loader.wait_for_line("dump 1").unwrap();
    let (status, stdout, stderr) = run_loader(&[
        "read",
        dir.join("crash.1.styx").to_str().unwrap(),
        "-o",
        "jsonl",
    ]);
    assert!(status.success(), "{stderr}");
    assert!(stderr.is_empty(), "a whole capture: {stderr}");
    let fired = by_tid(read_jsonl(&expect));
    let want: BTreeMap<u64, Vec<Value>> = fired
        .iter()
        .map(|(&tid, events)| (tid, events[events.len().saturating_sub(20)..].to_vec()))
        .collect();
    assert_eq!(by_tid(parse_jsonl(&stdout)), want);
    prog.quit();
    let _ = loader.finish();
}

/// Issue 25, 12: a trigger the target matches at will made a dump each
/// time (8,001 files in 1.5 s). Now one per --trigger-holdoff (1 s) at
/// most, and --max-dumps (100) in all; the summary counts the rest.
#[test]
fn a_trigger_the_target_fires_at_will_makes_a_bounded_number_of_dumps() {
    let bounded: [(&[&str], usize, u64, u64); 2] = [
        (&[], 1, 59, 0),
        (&["--trigger-holdoff", "0", "--max-dumps", "3"], 3, 0, 57),
    ];
    for (extra, trigger_dumps, held_off, past_max) in bounded {
        let mut args = vec!["--trigger", "control: code < 1000"];
        args.extend_from_slice(extra);
        let name = format!("flight-triggers-{trigger_dumps}");
        let Recording {
            mut prog,
            loader,
            dir,
            ..
        } = record(&name, "batched", &args);
        // 60 rounds, a control event each: 60 triggers within milliseconds.
        prog.fire_by("fire-main 60");
        prog.quit();
        let (status, stderr) = loader.finish();
        assert!(status.success(), "{stderr:?}");
        let dumps: Vec<&String> = stderr
            .iter()
            .filter(|l| l.contains("flight recorder: dump"))
            .collect();
        assert_eq!(dumps.len(), trigger_dumps + 1, "{stderr:?}");
        let (last, triggered) = dumps.split_last().unwrap();
        assert!(last.contains("(tracing stopped)"), "{last}");
        assert!(triggered.iter().all(|l| l.contains("(trigger: control)")));
        for n in 1..=trigger_dumps + 1 {
            assert!(dir.join(format!("dump.{n}.jsonl")).exists(), "dump {n}");
        }
        assert!(!dir
            .join(format!("dump.{}.jsonl", trigger_dumps + 2))
            .exists());
        let holdoff = if extra.is_empty() { 1 } else { 0 };
        let said = format!(
            "flight recorder: {} triggers did not dump: {held_off} within {holdoff} s of the \
             dump before (--trigger-holdoff), {past_max} after the {} dumps --max-dumps allows",
            held_off + past_max,
            if extra.is_empty() { 100 } else { 3 }
        );
        assert!(
            stderr.iter().any(|l| l.contains(&said)),
            "{said}: {stderr:?}"
        );
    }
}
