//! End to end: the timeline formats (Chrome trace JSON, Perfetto) of a real
//! traced run, live and converted from a capture. Each format's run is
//! traced once per test binary and shared by its tests, one claim each.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Events fired by the test program, by thread.
type Fired = BTreeMap<u64, Vec<Value>>;

/// Traces one run of `rounds` × `threads` with `-o FORMAT --output OUT`
/// and a capture beside it; returns what the test program fired, by thread.
fn trace_run(dir: &Path, format: &str, out: &Path, rounds: u64) -> Fired {
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

/// The fired events other than span begins and ends: what shows as instants.
fn others(want: &[Value]) -> Vec<&Value> {
    want.iter()
        .filter(|e| e["event"] != "span_begin" && e["event"] != "span_end")
        .collect()
}

fn total(fired: &Fired) -> u64 {
    fired.values().map(|v| v.len() as u64).sum()
}

mod chrome {
    use super::*;

    /// The run traced live as Chrome JSON, with its capture.
    struct Run {
        dir: PathBuf,
        fired: Fired,
        text: String,
        events: Vec<Value>,
    }

    fn run() -> &'static Run {
        static RUN: OnceLock<Run> = OnceLock::new();
        RUN.get_or_init(|| {
            let dir = scratch("chrome");
            let live = dir.join("live.json");
            let fired = trace_run(&dir, "chrome", &live, 300);
            let text = std::fs::read_to_string(&live).unwrap();
            let events = serde_json::from_str(&text).expect("one JSON array");
            Run {
                dir,
                fired,
                text,
                events,
            }
        })
    }

    /// The events with a thread, by thread.
    fn per_thread(events: &[Value]) -> BTreeMap<u64, Vec<&Value>> {
        let mut per_thread: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
        for e in events {
            if let Some(tid) = e.get("tid").and_then(Value::as_u64) {
                per_thread.entry(tid).or_default().push(e);
            }
        }
        per_thread
    }

    #[test]
    fn chrome_read_of_the_capture_is_the_live_json() {
        require_root();
        let run = run();
        let (status, converted, stderr) = run_loader(&[
            "read",
            run.dir.join("run.styx").to_str().unwrap(),
            "-o",
            "chrome",
        ]);
        assert!(status.success(), "{stderr}");
        assert!(
            converted == run.text,
            "read of the capture gives the same Chrome JSON"
        );
    }

    #[test]
    fn chrome_spans_are_nested_slices() {
        require_root();
        let run = run();
        let per_thread = per_thread(&run.events);
        assert_eq!(per_thread.len(), 2);
        for (tid, want) in &run.fired {
            // Slices: every end closes the innermost open begin of its thread,
            // and every fired span_end closes the span_begin with its id.
            let mut open: Vec<u64> = Vec::new();
            let mut ends = 0;
            for e in &per_thread[tid] {
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
        }
    }

    #[test]
    fn chrome_instants_are_every_other_event_in_order_with_its_arguments() {
        require_root();
        let run = run();
        let per_thread = per_thread(&run.events);
        for (tid, want) in &run.fired {
            let instants: Vec<&&Value> =
                per_thread[tid].iter().filter(|e| e["ph"] == "i").collect();
            let others = others(want);
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
    }

    #[test]
    fn chrome_counter_windows_add_up_to_the_events() {
        require_root();
        let run = run();
        let counted: u64 = run
            .events
            .iter()
            .filter(|e| e["ph"] == "C")
            .flat_map(|e| e["args"].as_object().unwrap().values())
            .map(|v| v.as_u64().unwrap() / 100) // per 10 ms window
            .sum();
        assert_eq!(counted, total(&run.fired));
    }

    #[test]
    fn chrome_names_the_process() {
        require_root();
        assert!(run()
            .events
            .iter()
            .any(|e| e["ph"] == "M" && e["name"] == "process_name"));
    }
}

mod perfetto {
    use super::*;
    use perfetto_protos::trace::Trace;
    use perfetto_protos::trace_packet::TracePacket;
    use perfetto_protos::track_event::track_event::Type;
    use protobuf::Message;

    /// The run traced live as a Perfetto trace, with its capture.
    struct Run {
        dir: PathBuf,
        fired: Fired,
        bytes: Vec<u8>,
        trace: Trace,
    }

    fn run() -> &'static Run {
        static RUN: OnceLock<Run> = OnceLock::new();
        RUN.get_or_init(|| {
            let dir = scratch("perfetto");
            let live = dir.join("live.pftrace");
            let fired = trace_run(&dir, "perfetto", &live, 300);
            let bytes = std::fs::read(&live).unwrap();
            let trace =
                Trace::parse_from_bytes(&bytes).expect("decodes with Perfetto's trace schema");
            Run {
                dir,
                fired,
                bytes,
                trace,
            }
        })
    }

    /// The tracks described: thread tracks' uuid -> tid, counter tracks'
    /// uuid -> name.
    fn tracks(trace: &Trace) -> (BTreeMap<u64, u64>, BTreeMap<u64, String>) {
        let mut thread_tracks: BTreeMap<u64, u64> = BTreeMap::new();
        let mut counter_tracks: BTreeMap<u64, String> = BTreeMap::new();
        for p in trace.packet.iter().filter(|p| p.has_track_descriptor()) {
            let d = p.track_descriptor();
            if d.thread.is_some() {
                thread_tracks.insert(d.uuid(), d.thread.tid() as u64);
            } else if d.counter.is_some() {
                counter_tracks.insert(d.uuid(), d.name().to_string());
            }
        }
        (thread_tracks, counter_tracks)
    }

    /// The track events on thread tracks, by thread.
    fn per_thread(trace: &Trace) -> BTreeMap<u64, Vec<&TracePacket>> {
        let (thread_tracks, _) = tracks(trace);
        let mut per_thread: BTreeMap<u64, Vec<&TracePacket>> = BTreeMap::new();
        for p in trace.packet.iter().filter(|p| p.has_track_event()) {
            let e = p.track_event();
            if e.type_() != Type::TYPE_COUNTER {
                let tid = thread_tracks[&e.track_uuid()];
                per_thread.entry(tid).or_default().push(p);
            }
        }
        per_thread
    }

    #[test]
    fn perfetto_read_of_the_capture_gzipped_is_the_live_trace() {
        require_root();
        let run = run();
        let capture = run.dir.join("run.styx");
        let gz = run.dir.join("read.pftrace.gz");
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
            unzipped == run.bytes,
            "read of the capture gives the same trace"
        );
    }

    #[test]
    fn perfetto_times_are_clock_monotonic() {
        require_root();
        let packets = &run().trace.packet;
        let clock = packets[0].clock_snapshot();
        assert_eq!(clock.primary_trace_clock() as i32, 3, "CLOCK_MONOTONIC");
        assert_eq!(clock.clocks.len(), 2);
        for p in packets.iter().filter(|p| p.has_track_event()) {
            assert_eq!(p.timestamp_clock_id(), 3);
        }
    }

    #[test]
    fn perfetto_tracks_are_the_process_its_threads_and_a_counter_per_type() {
        require_root();
        let run = run();
        let mut process_track = None;
        for p in run.trace.packet.iter().filter(|p| p.has_track_descriptor()) {
            let d = p.track_descriptor();
            if d.process.is_some() {
                assert_eq!(d.process.pid() as u32, trace_pid(&run.fired));
                process_track = Some(d.uuid());
            } else if d.thread.is_some() {
                assert_eq!(
                    d.parent_uuid(),
                    process_track.expect("process described first")
                );
            }
        }
        let (thread_tracks, counter_tracks) = tracks(&run.trace);
        let tids: Vec<u64> = thread_tracks.values().copied().collect();
        assert_eq!(tids, run.fired.keys().copied().collect::<Vec<_>>());
        assert_eq!(counter_tracks.len(), styx_types(), "{counter_tracks:?}");
        assert!(counter_tracks.values().any(|n| n == "mem_read/s"));
    }

    #[test]
    fn perfetto_counter_windows_add_up_to_the_events() {
        require_root();
        let run = run();
        let (_, counter_tracks) = tracks(&run.trace);
        let mut counted = 0;
        for p in run.trace.packet.iter().filter(|p| p.has_track_event()) {
            let e = p.track_event();
            if e.type_() == Type::TYPE_COUNTER {
                assert!(counter_tracks.contains_key(&e.track_uuid()));
                counted += e.counter_value() as u64 / 100; // per 10 ms window
            }
        }
        assert_eq!(
            counted,
            total(&run.fired),
            "counter windows add up to the events"
        );
    }

    #[test]
    fn perfetto_slices_nest_and_close_the_fired_spans() {
        require_root();
        let run = run();
        let per_thread = per_thread(&run.trace);
        for (tid, want) in &run.fired {
            // Every end closes the innermost open slice, later than it
            // began, and it is the span the fired span_end named.
            let mut open: Vec<(u64, u64)> = Vec::new(); // (id, ts)
            let mut closed_ids = Vec::new();
            for p in &per_thread[tid] {
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
                    Type::TYPE_INSTANT => {}
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
        }
    }

    #[test]
    fn perfetto_instants_are_every_other_event_in_order_with_its_arguments() {
        require_root();
        let run = run();
        let per_thread = per_thread(&run.trace);
        for (tid, want) in &run.fired {
            let instants: Vec<_> = per_thread[tid]
                .iter()
                .map(|p| p.track_event())
                .filter(|e| e.type_() == Type::TYPE_INSTANT)
                .collect();
            let others = others(want);
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

    fn trace_pid(fired: &Fired) -> u32 {
        fired.values().next().unwrap()[0]["pid"].as_u64().unwrap() as u32
    }
}
