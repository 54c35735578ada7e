//! End to end: the timeline formats (Chrome trace JSON, Perfetto) of a real
//! traced run, live and converted from a capture.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Traces one run of `rounds` × `threads` with `-o FORMAT --output OUT`
/// and a capture beside it; returns what the test program fired, by thread.
fn trace_run(dir: &Path, format: &str, out: &Path, rounds: u64) -> BTreeMap<u64, Vec<Value>> {
    let expect = dir.join("fired.jsonl");
    let capture = dir.join("run.styx");
    let mut prog = TestProg::spawn(Some(&expect));
    let loader = prog.attach_loader(&[
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

mod perfetto {
    use super::*;
    use perfetto_protos::trace::Trace;
    use perfetto_protos::track_event::track_event::Type;
    use protobuf::Message;

    fn decode(bytes: &[u8]) -> Trace {
        Trace::parse_from_bytes(bytes).expect("decodes with Perfetto's trace schema")
    }

    #[test]
    fn perfetto_trace_decodes_with_the_real_schema_and_slices_nest() {
        require_root();
        let dir = scratch("perfetto");
        let live = dir.join("live.pftrace");
        let fired = trace_run(&dir, "perfetto", &live, 300);
        let bytes = std::fs::read(&live).unwrap();
        let trace = decode(&bytes);

        // The same run read from its capture gives the same trace, and
        // gzipped the same again.
        let capture = dir.join("run.styx");
        let gz = dir.join("read.pftrace.gz");
        let (status, _, stderr) = run_loader(&[
            "read",
            capture.to_str().unwrap(),
            "-o",
            "perfetto",
            "--output",
            gz.to_str().unwrap(),
        ]);
        assert!(status.success(), "{stderr}");
        let mut unzipped = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()),
            &mut unzipped,
        )
        .expect("a gzip file");
        assert!(
            unzipped == bytes,
            "read of the capture gives the same trace"
        );

        let packets = &trace.packet;
        let clock = packets[0].clock_snapshot();
        assert_eq!(clock.primary_trace_clock() as i32, 3, "CLOCK_MONOTONIC");
        assert_eq!(clock.clocks.len(), 2);

        // Tracks: the process, its two threads, a counter per event type.
        let mut thread_tracks: BTreeMap<u64, u64> = BTreeMap::new(); // uuid -> tid
        let mut counter_tracks: BTreeMap<u64, String> = BTreeMap::new();
        let mut process_track = None;
        for p in packets.iter().filter(|p| p.has_track_descriptor()) {
            let d = p.track_descriptor();
            if d.process.is_some() {
                assert_eq!(d.process.pid() as u32, trace_pid(&fired));
                process_track = Some(d.uuid());
            } else if d.thread.is_some() {
                thread_tracks.insert(d.uuid(), d.thread.tid() as u64);
                assert_eq!(
                    d.parent_uuid(),
                    process_track.expect("process described first")
                );
            } else if d.counter.is_some() {
                counter_tracks.insert(d.uuid(), d.name().to_string());
            }
        }
        let tids: Vec<u64> = thread_tracks.values().copied().collect();
        assert_eq!(tids, fired.keys().copied().collect::<Vec<_>>());
        assert_eq!(counter_tracks.len(), styx_types(), "{counter_tracks:?}");
        assert!(counter_tracks.values().any(|n| n == "mem_read/s"));

        let mut counted = 0;
        let mut per_thread: BTreeMap<u64, Vec<&perfetto_protos::trace_packet::TracePacket>> =
            BTreeMap::new();
        for p in packets.iter().filter(|p| p.has_track_event()) {
            let e = p.track_event();
            assert_eq!(p.timestamp_clock_id(), 3);
            if e.type_() == Type::TYPE_COUNTER {
                assert!(counter_tracks.contains_key(&e.track_uuid()));
                counted += e.counter_value() as u64 / 100; // per 10 ms window
            } else {
                let tid = thread_tracks[&e.track_uuid()];
                per_thread.entry(tid).or_default().push(p);
            }
        }
        let total: u64 = fired.values().map(|v| v.len() as u64).sum();
        assert_eq!(counted, total, "counter windows add up to the events");

        for (tid, want) in &fired {
            let got = &per_thread[tid];
            // Every end closes the innermost open slice, later than it
            // began, and it is the span the fired span_end named.
            let mut open: Vec<(u64, u64)> = Vec::new(); // (id, ts)
            let mut closed_ids = Vec::new();
            let mut instants = Vec::new();
            for p in got {
                let e = p.track_event();
                match e.type_() {
                    Type::TYPE_SLICE_BEGIN => {
                        let id = e.debug_annotations[0].uint_value();
                        assert_eq!(e.debug_annotations[0].name(), "id");
                        open.push((id, p.timestamp()));
                    }
                    Type::TYPE_SLICE_END => {
                        let (id, began) = open.pop().expect("an end with no slice open");
                        assert!(p.timestamp() >= began, "slice ends before it begins");
                        closed_ids.push(id);
                    }
                    Type::TYPE_INSTANT => instants.push(e),
                    other => panic!("unexpected {other:?} on a thread track"),
                }
            }
            let fired_end_ids: Vec<u64> = want
                .iter()
                .filter(|e| e["event"] == "span_end")
                .map(|e| e["id"].as_u64().unwrap())
                .collect();
            assert_eq!(closed_ids, fired_end_ids, "thread {tid}");
            let begins = want.iter().filter(|e| e["event"] == "span_begin").count();
            assert_eq!(closed_ids.len() + open.len(), begins, "thread {tid}");

            let others: Vec<&Value> = want
                .iter()
                .filter(|e| e["event"] != "span_begin" && e["event"] != "span_end")
                .collect();
            assert_eq!(instants.len(), others.len(), "thread {tid}");
            for (g, w) in instants.iter().zip(&others) {
                assert_eq!(g.name(), w["event"].as_str().unwrap());
                let arg = |name: &str| {
                    g.debug_annotations
                        .iter()
                        .find(|a| a.name() == name)
                        .unwrap_or_else(|| panic!("no {name} on {}", g.name()))
                };
                match w["event"].as_str().unwrap() {
                    "mem_read" => {
                        assert_eq!(arg("pc").pointer_value(), w["pc"].as_u64().unwrap());
                        assert_eq!(arg("addr").pointer_value(), w["addr"].as_u64().unwrap());
                        assert_eq!(arg("size").uint_value(), w["size"].as_u64().unwrap());
                    }
                    "branch" => {
                        assert_eq!(arg("kind").string_value(), w["kind"].as_str().unwrap());
                        assert_eq!(arg("conditional").bool_value(), w["conditional"] == true);
                    }
                    "marker" => assert_eq!(arg("text").string_value(), w["text"].as_str().unwrap()),
                    _ => {}
                }
            }
        }
    }

    fn trace_pid(fired: &BTreeMap<u64, Vec<Value>>) -> u32 {
        fired.values().next().unwrap()[0]["pid"].as_u64().unwrap() as u32
    }
}
