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
    use crate::pftrace::{decode, Decoded, Resolved, Track, CLOCK_MONOTONIC};
    use perfetto_protos::track_event::track_event::Type;
    use styx_common::BranchKind;

    /// The run traced live as a Perfetto trace, with its capture.
    struct Run {
        dir: PathBuf,
        fired: Fired,
        bytes: Vec<u8>,
        decoded: Decoded,
    }

    fn run() -> &'static Run {
        static RUN: OnceLock<Run> = OnceLock::new();
        RUN.get_or_init(|| {
            let dir = scratch("perfetto");
            let live = dir.join("live.pftrace");
            let fired = trace_run(&dir, "perfetto", &live, 300);
            let bytes = std::fs::read(&live).unwrap();
            let decoded = decode(&bytes);
            Run {
                dir,
                fired,
                bytes,
                decoded,
            }
        })
    }

    /// The tracks described: thread tracks' uuid -> tid, the rate counter
    /// tracks' uuid -> name.
    fn tracks(decoded: &Decoded) -> (BTreeMap<u64, u64>, BTreeMap<u64, String>) {
        let threads = (decoded.tracks.iter())
            .filter_map(|(&uuid, t)| Some((uuid, t.tid?)))
            .collect();
        let rates = (decoded.tracks.iter())
            .filter(|(_, t)| t.counter && t.name.ends_with("/s"))
            .map(|(&uuid, t)| (uuid, t.name.clone()))
            .collect();
        (threads, rates)
    }

    /// The track events on thread tracks, by thread, in order.
    fn per_thread(decoded: &Decoded) -> BTreeMap<u64, Vec<&Resolved>> {
        let (thread_tracks, _) = tracks(decoded);
        let mut per_thread: BTreeMap<u64, Vec<&Resolved>> = BTreeMap::new();
        for e in decoded
            .events
            .iter()
            .filter(|e| e.kind != Type::TYPE_COUNTER)
        {
            let tid = thread_tracks[&e.track];
            per_thread.entry(tid).or_default().push(e);
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

    /// Times are deltas on each sequence's incremental clock (whole on
    /// CLOCK_MONOTONIC where one goes back), and resolve to exactly the
    /// capture's times, event for event.
    #[test]
    fn perfetto_times_are_deltas_that_add_up_to_the_events_times() {
        require_root();
        let run = run();
        let packets = &run.decoded.trace.packet;
        let clock = packets[0].clock_snapshot();
        assert_eq!(clock.primary_trace_clock() as u32, CLOCK_MONOTONIC);
        let ids: Vec<u32> = clock.clocks.iter().map(|c| c.clock_id()).collect();
        assert!(
            ids.contains(&CLOCK_MONOTONIC) && ids.contains(&1),
            "{ids:?}"
        );
        assert!(clock
            .clocks
            .iter()
            .any(|c| c.is_incremental() && c.clock_id() >= 64));
        let events: Vec<_> = packets.iter().filter(|p| p.has_track_event()).collect();
        let deltas = events
            .iter()
            .filter(|p| !p.has_timestamp_clock_id())
            .count();
        assert!(
            events
                .iter()
                .all(|p| !p.has_timestamp_clock_id() || p.timestamp_clock_id() == 3),
            "whole times are on CLOCK_MONOTONIC"
        );
        assert!(
            deltas * 10 > events.len() * 9,
            "{deltas} of {} deltas",
            events.len()
        );
        // The capture's own times, per thread: the instants' are the same.
        let jsonl = run.dir.join("times.jsonl");
        let capture = run.dir.join("run.styx");
        let (status, _, stderr) = run_loader(&[
            "read",
            capture.to_str().unwrap(),
            "-o",
            "jsonl",
            "--output",
            jsonl.to_str().unwrap(),
        ]);
        assert!(status.success(), "{stderr}");
        let per_thread = per_thread(&run.decoded);
        // With their times (read_jsonl drops them).
        let text = std::fs::read_to_string(&jsonl).unwrap();
        let read: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        for (tid, read) in by_tid(read) {
            let want: Vec<(&str, u64)> = others(&read)
                .iter()
                .map(|e| (e["event"].as_str().unwrap(), e["ts_ns"].as_u64().unwrap()))
                .collect();
            let got: Vec<(&str, u64)> = per_thread[&tid]
                .iter()
                .filter(|e| e.kind == Type::TYPE_INSTANT)
                .map(|e| (e.name.as_str(), e.ts))
                .collect();
            assert_eq!(got, want, "thread {tid}");
        }
    }

    /// Each name is interned once on its sequence, and a thread's events
    /// of one instruction-level type are a sequence of their own.
    #[test]
    fn perfetto_interns_each_name_once_per_sequence() {
        require_root();
        let run = run();
        let mut interned: BTreeMap<(u32, String), usize> = BTreeMap::new();
        for p in &run.decoded.trace.packet {
            if let Some(data) = p.interned_data.as_ref() {
                let names = data.event_names.iter().map(|n| n.name());
                let categories = data.event_categories.iter().map(|n| n.name());
                let annotations = data.debug_annotation_names.iter().map(|n| n.name());
                for name in names.chain(categories).chain(annotations) {
                    let seq = p.trusted_packet_sequence_id();
                    *interned.entry((seq, name.to_string())).or_default() += 1;
                }
            }
            if p.has_track_event() {
                assert!(!p.track_event().has_name(), "names are interned");
            }
        }
        assert!(interned.values().all(|&n| n == 1), "{interned:?}");
        assert!(interned.contains_key(&(1, "marker".to_string())));
        // mem_read and branch of each thread: one sequence each, its name
        // interned there.
        for kind in ["mem_read", "branch"] {
            let sequences: Vec<u32> = (run.decoded.events.iter())
                .filter(|e| e.name == kind)
                .map(|e| e.sequence)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            assert_eq!(sequences.len(), run.fired.len(), "{kind}: {sequences:?}");
            for seq in sequences {
                assert_eq!(interned.get(&(seq, kind.to_string())), Some(&1));
            }
        }
    }

    #[test]
    fn perfetto_tracks_are_the_process_its_threads_and_counters() {
        require_root();
        let run = run();
        let process = (run.decoded.tracks.iter())
            .find(|(_, t)| t.pid.is_some())
            .expect("a process track");
        assert_eq!(process.1.pid, Some(trace_pid(&run.fired) as u64));
        let (thread_tracks, rate_tracks) = tracks(&run.decoded);
        for uuid in thread_tracks.keys() {
            assert_eq!(run.decoded.tracks[uuid].parent, Some(*process.0));
        }
        let tids: Vec<u64> = thread_tracks.values().copied().collect();
        assert_eq!(tids, run.fired.keys().copied().collect::<Vec<_>>());
        assert_eq!(rate_tracks.len(), styx_types(), "{rate_tracks:?}");
        assert!(rate_tracks.values().any(|n| n == "mem_read/s"));
        // Each thread's fields of its memory reads, under its track.
        for uuid in thread_tracks.keys() {
            let mut fields: Vec<&str> = (run.decoded.tracks.values())
                .filter(|t: &&Track| t.parent == Some(*uuid) && t.name.starts_with("mem_read "))
                .map(|t| t.name.as_str())
                .collect();
            fields.sort();
            assert_eq!(
                fields,
                [
                    "mem_read addr",
                    "mem_read pc",
                    "mem_read size",
                    "mem_read val"
                ]
            );
        }
    }

    #[test]
    fn perfetto_counter_windows_add_up_to_the_events() {
        require_root();
        let run = run();
        let (_, rate_tracks) = tracks(&run.decoded);
        let mut counted = 0;
        for e in run
            .decoded
            .events
            .iter()
            .filter(|e| e.kind == Type::TYPE_COUNTER)
        {
            assert!(rate_tracks.contains_key(&e.track));
            counted += e.counter_value.unwrap() as u64 / 100; // per 10 ms window
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
        let per_thread = per_thread(&run.decoded);
        for (tid, want) in &run.fired {
            // Every end closes the innermost open slice, later than it
            // began, and it is the span the fired span_end named.
            let mut open: Vec<(u64, u64)> = Vec::new(); // (id, ts)
            let mut closed_ids = Vec::new();
            for e in &per_thread[tid] {
                match e.kind {
                    Type::TYPE_SLICE_BEGIN => {
                        let id = e.annotation("id").expect("an id").uint_value();
                        open.push((id, e.ts));
                    }
                    Type::TYPE_SLICE_END => {
                        let (id, began) = open.pop().expect("an end with no slice open");
                        assert!(e.ts >= began, "slice ends before it begins");
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

    /// Every other event is an instant in order; the instruction-level
    /// ones' fields are the values of their counter tracks there, the
    /// rare ones' debug annotations.
    #[test]
    fn perfetto_instants_are_every_other_event_in_order_with_its_fields() {
        require_root();
        let run = run();
        let tracks = &run.decoded.tracks;
        let per_thread = per_thread(&run.decoded);
        let mut left_out = 0;
        for (tid, want) in &run.fired {
            let instants: Vec<_> = per_thread[tid]
                .iter()
                .filter(|e| e.kind == Type::TYPE_INSTANT)
                .collect();
            let others = others(want);
            assert_eq!(instants.len(), others.len(), "thread {tid}");
            for (g, w) in instants.iter().zip(&others) {
                assert_eq!(g.name, w["event"].as_str().unwrap());
                let field = |name: &str| g.field(tracks, name).expect(name) as u64;
                left_out += g.counters.len() - g.given;
                match w["event"].as_str().unwrap() {
                    "mem_read" => {
                        assert_eq!(field("pc"), w["pc"].as_u64().unwrap());
                        assert_eq!(field("addr"), w["addr"].as_u64().unwrap());
                        assert_eq!(field("val"), w["val"].as_u64().unwrap());
                        assert_eq!(field("size"), w["size"].as_u64().unwrap());
                    }
                    "branch" => {
                        let kind = (BranchKind::ALL.iter())
                            .find(|k| k.name() == w["kind"].as_str().unwrap())
                            .unwrap();
                        assert_eq!(field("target"), w["target"].as_u64().unwrap());
                        assert_eq!(field("kind"), *kind as u64);
                        assert_eq!(field("conditional"), (w["conditional"] == true) as u64);
                    }
                    "marker" => assert_eq!(
                        g.annotation("text").unwrap().string_value(),
                        w["text"].as_str().unwrap()
                    ),
                    _ => {}
                }
            }
        }
        // Sizes repeat: values a counter already holds were left out.
        assert!(left_out > 0);
    }

    fn trace_pid(fired: &Fired) -> u32 {
        fired.values().next().unwrap()[0]["pid"].as_u64().unwrap() as u32
    }
}
