//! Function tracing (`--functions`), as root with the real eBPF programs:
//! styx-testprog's `calls` module (a recursion of known depth, a Rust panic
//! caught part way down, threads recursing at once), a C++ program whose
//! exceptions pass through traced frames, and the 6502 demo in Perfetto.
//! Every count and depth is known in advance.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const RECURSION: &str = "^styx_testprog::calls::(recurse|recurse_then_panic)$";

/// Traces styx-testprog's recursions while it runs `commands`: the
/// function events of a jsonl trace (also kept as a capture in `dir`), and
/// what the loader printed on stderr.
fn trace_calls(dir: &Path, commands: &[&str]) -> (Vec<Value>, String) {
    trace_calls_with(dir, commands, &[])
}

/// [`trace_calls`] with more of the loader's options.
fn trace_calls_with(dir: &Path, commands: &[&str], extra: &[&str]) -> (Vec<Value>, String) {
    let out = dir.join("calls.jsonl");
    let capture = dir.join("calls.styx");
    let mut prog = TestProg::spawn(None);
    let mut args = vec![
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--capture",
        capture.to_str().unwrap(),
        "-e",
        "marker",
        "--functions",
        RECURSION,
    ];
    args.extend_from_slice(extra);
    let loader = prog.attach_loader(&args);
    for command in commands {
        let answer = prog.ask(command);
        assert!(
            answer.starts_with("recursed") || answer.starts_with("caught"),
            "{command}: {answer}"
        );
    }
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    let stderr = stderr.join("\n");
    assert!(status.success(), "{stderr}");
    prog.quit();
    (function_events(read_jsonl(&out)), stderr)
}

fn function_events(events: Vec<Value>) -> Vec<Value> {
    events
        .into_iter()
        .filter(|e| e["event"] == "fn_entry" || e["event"] == "fn_exit")
        .collect()
}

/// (event, function's last path segment, depth, unwound) per event.
fn shape(events: &[Value]) -> Vec<(String, String, u64, bool)> {
    events
        .iter()
        .map(|e| {
            let name = e["function"].as_str().unwrap();
            (
                e["event"].as_str().unwrap().to_string(),
                name.rsplit("::").next().unwrap().to_string(),
                e["depth"].as_u64().unwrap(),
                e["unwound"] == true,
            )
        })
        .collect()
}

fn entry(function: &str, depth: u64) -> (String, String, u64, bool) {
    ("fn_entry".into(), function.into(), depth, false)
}

fn exit(function: &str, depth: u64, unwound: bool) -> (String, String, u64, bool) {
    ("fn_exit".into(), function.into(), depth, unwound)
}

/// The table's row for `function`: (calls, unwound).
fn table_row(table: &str, function: &str) -> (u64, u64) {
    let line = table
        .lines()
        .find(|l| l.ends_with(&format!("styx_testprog::calls::{function}")))
        .unwrap_or_else(|| panic!("no row for {function} in:\n{table}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    // calls, total (n unit), self (n unit), max (n unit), unwound, name
    (words[0].parse().unwrap(), words[7].parse().unwrap())
}

#[test]
fn a_recursion_has_its_exact_calls_depths_and_durations() {
    require_root();
    let dir = scratch("functions-recursion");
    let (events, stderr) = trace_calls(&dir, &["recurse 10"]);
    let mut want: Vec<_> = (0..=10).map(|d| entry("recurse", d)).collect();
    want.extend((0..=10).rev().map(|d| exit("recurse", d, false)));
    assert_eq!(shape(&events), want, "{stderr}");
    // Every exit is timed, and an outer call lasts longer than the one it made.
    let durations: Vec<u64> = events
        .iter()
        .filter(|e| e["event"] == "fn_exit")
        .map(|e| e["duration_ns"].as_u64().expect("a duration"))
        .collect();
    assert!(durations.windows(2).all(|w| w[0] < w[1]), "{durations:?}");
    assert_eq!(table_row(&stderr, "recurse"), (11, 0), "{stderr}");

    // The capture read back: the same events, the same table.
    let capture = dir.join("calls.styx");
    let (status, stdout, read_stderr) =
        run_loader(&["read", capture.to_str().unwrap(), "-o", "jsonl"]);
    assert!(status.success(), "{read_stderr}");
    assert_eq!(function_events(parse_jsonl(&stdout)), events);
    let (status, table, read_stderr) =
        run_loader(&["read", capture.to_str().unwrap(), "--summary"]);
    assert!(status.success(), "{read_stderr}");
    assert!(table.starts_with("       calls"), "only the table: {table}");
    assert_eq!(table_row(&table, "recurse"), (11, 0), "{table}");

    // Folded stacks: one per depth, whose self times add up to the
    // outermost call's duration.
    let (status, folded, read_stderr) =
        run_loader(&["read", capture.to_str().unwrap(), "-o", "folded"]);
    assert!(status.success(), "{read_stderr}");
    let stacks: Vec<(usize, u64)> = folded
        .lines()
        .map(|line| {
            let (stack, weight) = line.rsplit_once(' ').expect("STACK WEIGHT");
            assert!(
                stack
                    .split(';')
                    .all(|f| f == "styx_testprog::calls::recurse"),
                "{line}"
            );
            (stack.split(';').count(), weight.parse().unwrap())
        })
        .collect();
    let mut depths: Vec<usize> = stacks.iter().map(|s| s.0).collect();
    depths.sort();
    assert_eq!(depths, (1..=11).collect::<Vec<_>>(), "{folded}");
    let total: u64 = stacks.iter().map(|s| s.1).sum();
    assert_eq!(total, *durations.last().unwrap(), "{folded}");
}

#[test]
fn returns_probed_as_uretprobes_give_the_same_calls() {
    require_root();
    let dir = scratch("functions-uretprobe");
    let (events, stderr) = trace_calls_with(
        &dir,
        &["recurse 10", "recurse-threads 3 2"],
        &["--function-exits", "uretprobe"],
    );
    let threads = by_tid(events);
    assert_eq!(threads.len(), 3, "{stderr}");
    for (tid, events) in &threads {
        let depth = if events.len() == 22 { 10 } else { 3 };
        let mut want: Vec<_> = (0..=depth).map(|d| entry("recurse", d)).collect();
        want.extend((0..=depth).rev().map(|d| exit("recurse", d, false)));
        assert_eq!(shape(events), want, "thread {tid}");
        let timed = |e: &Value| e["event"] == "fn_entry" || e["duration_ns"].is_u64();
        assert!(events.iter().all(timed), "thread {tid}");
    }
}

#[test]
fn a_panic_caught_mid_recursion_closes_its_frames_as_unwound() {
    require_root();
    let dir = scratch("functions-panic");
    // recurse_then_panic(10) down to 5, which panics; caught; then recurse(3).
    let (events, stderr) = trace_calls(&dir, &["panic 10 5 3", "recurse 2"]);
    let mut want: Vec<_> = (0..=5).map(|d| entry("recurse_then_panic", d)).collect();
    // Seen gone at recurse(3)'s entry, innermost first.
    want.extend((0..=5).rev().map(|d| exit("recurse_then_panic", d, true)));
    want.extend((0..=3).map(|d| entry("recurse", d)));
    want.extend((0..=3).rev().map(|d| exit("recurse", d, false)));
    // A later recursion starts at depth 0 again.
    want.extend((0..=2).map(|d| entry("recurse", d)));
    want.extend((0..=2).rev().map(|d| exit("recurse", d, false)));
    assert_eq!(shape(&events), want, "{stderr}");
    assert_eq!(table_row(&stderr, "recurse_then_panic"), (6, 6), "{stderr}");
    assert_eq!(table_row(&stderr, "recurse"), (7, 0), "{stderr}");
}

#[test]
fn threads_recursing_at_once_each_get_their_own_depths() {
    require_root();
    let dir = scratch("functions-threads");
    let (events, stderr) = trace_calls(&dir, &["recurse-threads 20 2"]);
    let threads = by_tid(events);
    assert_eq!(threads.len(), 2, "{stderr}");
    for (tid, events) in &threads {
        let mut want: Vec<_> = (0..=20).map(|d| entry("recurse", d)).collect();
        want.extend((0..=20).rev().map(|d| exit("recurse", d, false)));
        assert_eq!(shape(events), want, "thread {tid}");
    }
    assert_eq!(table_row(&stderr, "recurse"), (42, 0), "{stderr}");
}

/// tests/c/unwind.cpp, built once per run.
fn unwind_program() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("unwind");
            let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/unwind.cpp");
            let status = Command::new("g++")
                .args(["-O1", "-g", "-o", out.to_str().unwrap(), source])
                .status()
                .expect("running g++ (scripts/setup installs it)");
            assert!(status.success(), "g++ failed to build {source}");
            out
        })
        .clone()
}

#[test]
fn cpp_exceptions_through_traced_frames_neither_abort_nor_skew_depths() {
    require_root();
    let program = unwind_program();
    let dir = scratch("functions-cpp");
    let out = dir.join("cpp.jsonl");
    let (status, stdout, stderr) = run_loader(&[
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--functions",
        r"^(thrower|leaf)\(int\)$",
        "--",
        program.to_str().unwrap(),
        "50",
    ]);
    // A uretprobe here would have ended it in std::terminate.
    assert!(status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("caught 50"), "{stdout}");
    let events = function_events(read_jsonl(&out));
    let count = |event: &str, name: &str, unwound: bool| {
        events
            .iter()
            .filter(|e| e["event"] == event && e["function"] == name)
            .filter(|e| (e["unwound"] == true) == unwound)
            .count()
    };
    assert_eq!(count("fn_entry", "thrower(int)", false), 200, "{stderr}");
    assert_eq!(count("fn_exit", "thrower(int)", true), 200, "{stderr}");
    assert_eq!(count("fn_exit", "thrower(int)", false), 0, "{stderr}");
    assert_eq!(count("fn_entry", "leaf(int)", false), 50, "{stderr}");
    assert_eq!(count("fn_exit", "leaf(int)", false), 50, "{stderr}");
    // Each round's throwers are depths 0..3, and leaf, after them, depth 0.
    for e in &events {
        let depth = e["depth"].as_u64().unwrap();
        match e["function"].as_str().unwrap() {
            "leaf(int)" => assert_eq!(depth, 0, "{e}"),
            _ => assert!(depth <= 3, "{e}"),
        }
    }

    // --summary: the table alone, on stdout (beside the program's own line).
    let (status, stdout, stderr) = run_loader(&[
        "--summary",
        "--functions",
        r"^(thrower|leaf)\(int\)$",
        "--",
        program.to_str().unwrap(),
        "5",
    ]);
    assert!(status.success(), "{stdout}\n{stderr}");
    let row = |name: &str| -> Vec<String> {
        let line = stdout
            .lines()
            .find(|l| l.ends_with(&format!("  {name}")))
            .unwrap_or_else(|| panic!("no row for {name} in {stdout}"));
        line.split_whitespace().map(str::to_string).collect()
    };
    // calls, then total/self/max (number and unit each), unwound.
    assert_eq!(
        (
            row("thrower(int)")[0].as_str(),
            row("thrower(int)")[7].as_str()
        ),
        ("20", "20")
    );
    assert_eq!(
        (row("leaf(int)")[0].as_str(), row("leaf(int)")[7].as_str()),
        ("5", "0")
    );
    assert!(!stdout.contains("fn_entry"), "no events: {stdout}");

    // Why returns are not uretprobes by default: the first exception
    // through a uretprobe'd frame ends the program (std::terminate).
    let (status, stdout, stderr) = run_loader(&[
        "--function-exits",
        "uretprobe",
        "--functions",
        r"^thrower\(int\)$",
        "-o",
        "jsonl",
        "--output",
        "/dev/null",
        "--",
        program.to_str().unwrap(),
        "5",
    ]);
    assert!(!status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("terminate called"), "{stderr}");
}

#[test]
fn the_demo_in_perfetto_shows_its_step_and_bus_functions_nested_under_its_spans() {
    use perfetto_protos::track_event::track_event::Type;
    require_root();
    let dir = scratch("functions-demo");
    let out = dir.join("demo.pftrace");
    let (status, stdout, stderr) = run_loader(&[
        "-o",
        "perfetto",
        "--output",
        out.to_str().unwrap(),
        "-e",
        "span_begin,span_end",
        "--functions",
        "styx_demo::.*",
        "--",
        demo_path().to_str().unwrap(),
        "--program",
        "fib",
    ]);
    assert!(status.success(), "{stdout}\n{stderr}");
    let decoded = crate::pftrace::decode(&std::fs::read(&out).unwrap());
    // Walk each thread's slices: ends close the innermost open slice.
    let mut open: BTreeMap<u64, Vec<(String, String)>> = BTreeMap::new(); // track -> (category, name)
    let mut nested: BTreeMap<String, usize> = BTreeMap::new(); // function under a span
    for e in &decoded.events {
        let stack = open.entry(e.track).or_default();
        match e.kind {
            Type::TYPE_SLICE_BEGIN => {
                let category = e.category.clone();
                if category == "function" && stack.iter().any(|(c, _)| c == "cpu") {
                    *nested.entry(e.name.clone()).or_default() += 1;
                }
                stack.push((category, e.name.clone()));
            }
            Type::TYPE_SLICE_END => {
                stack.pop().expect("an end with no slice open");
            }
            _ => {}
        }
    }
    let instructions = crate::demo::instructions_of(&stdout, "fib");
    // One step per instruction, inside the cpu frame span, and bus accesses.
    assert_eq!(
        nested.get("styx_demo::cpu::Stepper::traced_step"),
        Some(&instructions),
        "{nested:?}"
    );
    assert!(
        nested
            .get("styx_demo::bus::traced_read")
            .is_some_and(|&n| n >= instructions),
        "{nested:?}"
    );
}
