//! End to end: cutting a capture of a real traced run with `read`: time
//! windows (`--from/--to`, seconds after the first event or `NNNns`), types
//! (`-e`), filters on `event` and `ts_ns`, `--rows` of a `--by` table, and
//! `top CAPTURE`; each checked exactly against the whole capture's events
//! and what the test program fired. One run, shared by the tests.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

struct Run {
    capture: PathBuf,
    /// What the test program fired, by thread (no times).
    fired: BTreeMap<u64, Vec<Value>>,
    /// The whole capture read as JSON lines, with times, in order.
    all: Vec<Value>,
}

fn run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        require_root();
        let dir = scratch("cut");
        let (expect, capture) = (dir.join("fired.jsonl"), dir.join("run.styx"));
        let mut prog = TestProg::spawn(Some(&expect));
        let loader = prog.attach_loader(&["-o", "raw", "--output", capture.to_str().unwrap()]);
        prog.fire(300, 2);
        prog.quit();
        let (status, stderr) = loader.finish();
        assert!(status.success(), "loader failed: {}", stderr.join("\n"));
        let all = with_times(&read(&capture, &["-o", "jsonl"]));
        Run {
            capture,
            fired: by_tid(read_jsonl(&expect)),
            all,
        }
    })
}

/// `styx-loader read CAPTURE ARGS…`'s stdout; it must succeed quietly.
fn read(capture: &std::path::Path, args: &[&str]) -> String {
    let (status, stdout, stderr) =
        run_loader(&[&["read", capture.to_str().unwrap()], args].concat());
    assert!(status.success() && stderr.is_empty(), "{args:?}: {stderr}");
    stdout
}

fn with_times(jsonl: &str) -> Vec<Value> {
    jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn ts(e: &Value) -> u64 {
    e["ts_ns"].as_u64().unwrap()
}

/// Two times inside the run, a third and two thirds through its events.
fn bounds(all: &[Value]) -> (u64, u64) {
    let mut times: Vec<u64> = all.iter().map(ts).collect();
    times.sort_unstable();
    (times[times.len() / 3], times[2 * times.len() / 3])
}

/// ns as seconds with 9 decimals, as --from takes them.
fn seconds(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

#[test]
fn read_windows_hold_exactly_the_events_between_their_bounds() {
    let run = run();
    let (a, b) = bounds(&run.all);
    let want: Vec<&Value> = run.all.iter().filter(|e| (a..b).contains(&ts(e))).collect();
    assert!(!want.is_empty() && want.len() < run.all.len());
    let absolute = with_times(&read(
        &run.capture,
        &[
            "--from",
            &format!("{a}ns"),
            "--to",
            &format!("{b}ns"),
            "-o",
            "jsonl",
        ],
    ));
    assert_eq!(absolute.iter().collect::<Vec<_>>(), want);
    // The same window in seconds after the first event, and mixed.
    let first = ts(&run.all[0]);
    let (from, to) = (seconds(a - first), seconds(b - first));
    let relative = with_times(&read(
        &run.capture,
        &["--from", &from, "--to", &to, "-o", "jsonl"],
    ));
    assert_eq!(relative, absolute);
    let mixed = with_times(&read(
        &run.capture,
        &["--from", &from, "--to", &format!("{b}ns"), "-o", "jsonl"],
    ));
    assert_eq!(mixed, absolute);
    // Windows side by side split the capture: no event twice, none lost.
    let before = read(&run.capture, &["--to", &format!("{a}ns"), "-o", "jsonl"]);
    let after = read(&run.capture, &["--from", &format!("{a}ns"), "-o", "jsonl"]);
    let split = before.lines().count() + after.lines().count();
    assert_eq!(split, run.all.len());
}

#[test]
fn read_e_keeps_exactly_the_fired_events_of_the_types_named() {
    let run = run();
    let kept = ["mem_read", "marker", "span_end"];
    let got = by_tid(parse_jsonl(&read(
        &run.capture,
        &["-e", "mem_read,marker,span_end", "-o", "jsonl"],
    )));
    let mut want = run.fired.clone();
    for events in want.values_mut() {
        events.retain(|e| kept.contains(&e["event"].as_str().unwrap()));
    }
    assert!(want.values().all(|w| !w.is_empty()));
    assert_eq!(got, want);
    let (status, _, stderr) =
        run_loader(&["read", run.capture.to_str().unwrap(), "-e", "mem_reed"]);
    assert!(!status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("-e 'mem_reed': no such event type") && stderr.contains(" mem_read "));
}

#[test]
fn read_filters_on_event_and_ts_ns() {
    let run = run();
    let (a, _) = bounds(&run.all);
    let filter = format!("ts_ns >= {a} && event == mem_read");
    let got = with_times(&read(&run.capture, &["--filter", &filter, "-o", "jsonl"]));
    let want: Vec<&Value> = (run.all.iter())
        .filter(|e| ts(e) >= a && e["event"] == "mem_read")
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got.iter().collect::<Vec<_>>(), want);
    let others = read(
        &run.capture,
        &["--filter", "event != mem_read", "-o", "jsonl"],
    );
    let mem_reads = run.all.iter().filter(|e| e["event"] == "mem_read").count();
    assert_eq!(others.lines().count(), run.all.len() - mem_reads);
}

/// `--rows N`: the N largest counts of the `--by` table, as the fired
/// events count; `top CAPTURE` prints the same table.
#[test]
fn read_by_rows_and_top_of_a_capture_give_the_largest_counts() {
    let run = run();
    let mut counts: BTreeMap<u64, u64> = BTreeMap::new();
    for e in run
        .fired
        .values()
        .flatten()
        .filter(|e| e["event"] == "mem_write")
    {
        *counts.entry(e["addr"].as_u64().unwrap()).or_default() += 1;
    }
    let mut sorted: Vec<(u64, u64)> = counts.into_iter().collect();
    sorted.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    assert!(sorted.len() > 2, "{sorted:?}");
    let args = ["--by", "addr", "-e", "mem_write", "--rows", "2"];
    let table = read(&run.capture, &args);
    let rows: Vec<(u64, u64)> = table
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("mem_write"))
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let addr = u64::from_str_radix(cols[1].trim_start_matches("0x"), 16).unwrap();
            (addr, cols[2].parse().unwrap())
        })
        .collect();
    assert_eq!(rows, sorted[..2]);
    assert!(
        table.contains(&format!("… {} more keys", sorted.len() - 2)),
        "{table}"
    );
    let jsonl = read(&run.capture, &[&args[..], &["-o", "jsonl"]].concat());
    assert_eq!(jsonl.lines().count(), 2, "{jsonl}");
    let (status, top, stderr) =
        run_loader(&[&["top", run.capture.to_str().unwrap()], &args[..]].concat());
    assert!(status.success(), "{stderr}");
    assert_eq!(top, table);
}
