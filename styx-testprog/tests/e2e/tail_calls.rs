//! Tail calls under function tracing (tests/c/tail_calls.c, run by the
//! loader from its first instruction): `tail` jumps to the traced
//! `callee`, `stub` to the untraced `work` from inside `outer`. Every call
//! gets exactly one exit, none unwound and none "begun before tracing";
//! with `ret` probes a call ends at its jump, with uretprobes when its
//! callee returns.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// tests/c/tail_calls.c, built once per run (-O2: the compiler's tail
/// calls).
pub fn program() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tail_calls");
            let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/tail_calls.c");
            cc(&["-O2", "-o", out.to_str().unwrap(), source]);
            // The compiler made the jumps the tests are about.
            let (status, stdout, stderr) = run_loader(&[
                "list",
                "--functions",
                "^(tail|stub)$",
                out.to_str().unwrap(),
            ]);
            assert!(status.success(), "{stderr}");
            assert!(stdout.contains("2 tail calls"), "{stdout}");
            out
        })
        .clone()
}

/// Runs `rounds` rounds under the loader tracing `functions` (and `extra`
/// options): the function events, in order, and the loader's stderr.
fn trace(dir: &Path, rounds: u32, functions: &str, extra: &[&str]) -> (Vec<Value>, String) {
    let out = dir.join("calls.jsonl");
    let program = program();
    let rounds = rounds.to_string();
    let mut args = vec![
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--functions",
        functions,
    ];
    args.extend_from_slice(extra);
    args.extend(["--", program.to_str().unwrap(), &rounds]);
    let (status, stdout, stderr) = run_loader(&args);
    assert!(status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), format!("done {rounds}"));
    // With their times (read_jsonl drops them).
    let text = std::fs::read_to_string(&out).unwrap();
    let events = text.lines().map(|l| serde_json::from_str(l).unwrap());
    (events.collect(), stderr)
}

/// (event, function, depth, tail_call) per event, `unwound` ones failing.
fn shape(events: &[Value]) -> Vec<(&str, &str, u64, bool)> {
    events
        .iter()
        .map(|e| {
            assert_ne!(e["unwound"], true, "{e}");
            (
                e["event"].as_str().unwrap(),
                e["function"].as_str().unwrap(),
                e["depth"].as_u64().unwrap(),
                e["tail_call"] == true,
            )
        })
        .collect()
}

/// The stderr table's row for `function`, as words: calls, total, self and
/// max (number and unit each), unwound, tail, name.
fn row<'a>(stderr: &'a str, function: &str) -> Vec<&'a str> {
    let line = stderr
        .lines()
        .find(|l| l.ends_with(&format!("  {function}")))
        .unwrap_or_else(|| panic!("no row for {function} in:\n{stderr}"));
    line.split_whitespace().collect()
}

#[test]
fn under_uretprobes_a_traced_tail_call_returns_once_for_each_call() {
    require_root();
    let dir = scratch("tail-calls-uretprobe");
    let rounds = 2000;
    let (events, stderr) = trace(
        &dir,
        rounds,
        "^(tail|callee)$",
        &["--function-exits", "uretprobe"],
    );
    // callee runs inside tail's call, and both return together.
    let once = [
        ("fn_entry", "tail", 0, false),
        ("fn_entry", "callee", 1, false),
        ("fn_exit", "callee", 1, false),
        ("fn_exit", "tail", 0, true),
    ];
    let want: Vec<_> = (0..rounds).flat_map(|_| once).collect();
    assert_eq!(shape(&events), want, "{stderr}");
    for pair in events.chunks(4) {
        let (callee, tail) = (&pair[2]["duration_ns"], &pair[3]["duration_ns"]);
        assert!(tail.as_u64() >= callee.as_u64(), "{pair:?}");
    }
    assert!(!stderr.contains("before tracing began"), "{stderr}");
    // calls, unwound, tail
    let tail = row(&stderr, "tail");
    assert_eq!(
        (tail[0], tail[7], tail[8]),
        ("2000", "0", "2000"),
        "{stderr}"
    );
    assert!(
        stderr.contains("each ends when its callee returns"),
        "{stderr}"
    );

    // With ret probes, the same calls end at tail's jump.
    let (events, stderr) = trace(&dir, 50, "^(tail|callee)$", &[]);
    let once = [
        ("fn_entry", "tail", 0, false),
        ("fn_exit", "tail", 0, true),
        ("fn_entry", "callee", 0, false),
        ("fn_exit", "callee", 0, false),
    ];
    let want: Vec<_> = (0..50).flat_map(|_| once).collect();
    assert_eq!(shape(&events), want, "{stderr}");
    assert!(stderr.contains("each ends at its jump"), "{stderr}");
}

#[test]
fn a_call_that_jumps_to_an_untraced_function_ends_inside_its_caller() {
    require_root();
    let dir = scratch("tail-calls-untraced");
    let once = [
        ("fn_entry", "outer", 0, false),
        ("fn_entry", "stub", 1, false),
        ("fn_exit", "stub", 1, true),
        ("fn_exit", "outer", 0, false),
    ];
    // With ret probes, stub's call ends at its jump to work: before work
    // runs, so before outer returns.
    let (events, stderr) = trace(&dir, 100, "^(outer|stub)$", &[]);
    let want: Vec<_> = (0..100).flat_map(|_| once).collect();
    assert_eq!(shape(&events), want, "{stderr}");
    for round in events.chunks(4) {
        let ts = |e: &Value| e["ts_ns"].as_u64().expect("ts_ns");
        assert!(ts(&round[2]) < ts(&round[3]), "{round:?}");
        let (stub, outer) = (&round[2]["duration_ns"], &round[3]["duration_ns"]);
        assert!(stub.as_u64() < outer.as_u64(), "{round:?}");
    }
    let stub = row(&stderr, "stub");
    assert_eq!((stub[0], stub[7], stub[8]), ("100", "0", "100"), "{stderr}");
    assert!(!stderr.contains("had not returned"), "{stderr}");

    // With uretprobes, stub returns when work does: inside outer still.
    let (events, stderr) = trace(
        &dir,
        100,
        "^(outer|stub)$",
        &["--function-exits", "uretprobe"],
    );
    let once = once.map(|(e, f, d, _)| (e, f, d, false));
    let want: Vec<_> = (0..100).flat_map(|_| once).collect();
    assert_eq!(shape(&events), want, "{stderr}");
    assert!(!stderr.contains("had not returned"), "{stderr}");
}
