//! End to end: the timeline formats (Chrome trace JSON, Perfetto) of a real
//! traced run, live and converted from a capture.

mod support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use support::*;

/// Traces one run of `rounds` × `threads` with `-o FORMAT --output OUT`
/// and a capture beside it; returns what the test program fired, by thread.
fn trace_run(dir: &Path, format: &str, out: &Path, rounds: u64) -> BTreeMap<u64, Vec<Value>> {
    let expect = dir.join("fired.jsonl");
    let capture = dir.join("run.styx");
    let mut prog = TestProg::spawn(Some(&expect));
    let pid = prog.pid().to_string();
    let loader = Loader::attach(&[
        "--pid",
        &pid,
        "-o",
        format,
        "--output",
        out.to_str().unwrap(),
        "--capture",
        capture.to_str().unwrap(),
    ]);
    prog.fire(rounds, 2);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "loader failed: {}", stderr.join("\n"));
    by_tid(read_jsonl(&expect))
}

fn hex(v: &Value) -> String {
    format!("{:#x}", v.as_u64().expect("a number"))
}

#[test]
fn chrome_trace_has_every_event_with_spans_as_nested_slices() {
    require_root();
    let dir = scratch("chrome");
    let live = dir.join("live.json");
    let fired = trace_run(&dir, "chrome", &live, 300);

    let text = std::fs::read_to_string(&live).unwrap();
    let events: Vec<Value> = serde_json::from_str(&text).expect("one JSON array");
    let (ok, converted, stderr) = {
        let (s, o, e) = run_loader(&[
            "read",
            dir.join("run.styx").to_str().unwrap(),
            "-o",
            "chrome",
        ]);
        (s.success(), o, e)
    };
    assert!(ok, "{stderr}");
    assert!(
        converted == text,
        "read of the capture gives the same Chrome JSON"
    );

    let mut per_thread: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for e in &events {
        if let Some(tid) = e.get("tid").and_then(Value::as_u64) {
            per_thread.entry(tid).or_default().push(e);
        }
    }
    assert_eq!(per_thread.len(), 2);
    for (tid, want) in &fired {
        let got = &per_thread[tid];
        // Slices: every end closes the innermost open begin of its thread,
        // and every fired span_end closes the span_begin with its id.
        let mut open: Vec<u64> = Vec::new();
        let mut ends = 0;
        for e in got {
            match e["ph"].as_str().unwrap() {
                "B" => open.push(e["args"]["id"].as_u64().unwrap()),
                "E" => {
                    open.pop()
                        .unwrap_or_else(|| panic!("thread {tid}: an end with no slice open"));
                    ends += 1;
                }
                _ => {}
            }
        }
        let fired_ends = want.iter().filter(|e| e["event"] == "span_end").count();
        let fired_begins = want.iter().filter(|e| e["event"] == "span_begin").count();
        assert_eq!(ends, fired_ends, "thread {tid}");
        assert_eq!(ends + open.len(), fired_begins, "thread {tid}");

        // Instants: every other event, in order, with its arguments.
        let instants: Vec<&&Value> = got.iter().filter(|e| e["ph"] == "i").collect();
        let others: Vec<&Value> = want
            .iter()
            .filter(|e| e["event"] != "span_begin" && e["event"] != "span_end")
            .collect();
        assert_eq!(instants.len(), others.len(), "thread {tid}");
        for (g, w) in instants.iter().zip(&others) {
            assert_eq!(g["name"], w["event"]);
            if w["event"] == "mem_read" {
                assert_eq!(g["args"]["pc"].as_str().unwrap(), hex(&w["pc"]));
                assert_eq!(g["args"]["addr"].as_str().unwrap(), hex(&w["addr"]));
                assert_eq!(g["args"]["size"], w["size"]);
            }
            if w["event"] == "marker" {
                assert_eq!(g["args"]["text"], w["text"]);
            }
        }
    }
    // Counters: each window's rates add up to the events traced.
    let total: u64 = fired.values().map(|v| v.len() as u64).sum();
    let counted: u64 = events
        .iter()
        .filter(|e| e["ph"] == "C")
        .flat_map(|e| e["args"].as_object().unwrap().values())
        .map(|v| v.as_u64().unwrap() / 100) // per 10 ms window
        .sum();
    assert_eq!(counted, total);
    assert!(events
        .iter()
        .any(|e| e["ph"] == "M" && e["name"] == "process_name"));
}
