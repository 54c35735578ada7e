//! `--filter` and `--sample`, in both delivery modes: exactly the events
//! the expressions select arrive (checked against the test program's own
//! record of what it fired, by a predicate written here), the summary
//! counts the rest as filtered out, a rerun samples the same events, and a
//! bad expression stops the loader before anything attaches.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

const FILTERS: &[&str] = &[
    "--filter",
    "addr in 0x40000010..0x40000020",
    "--filter",
    "mem_write: val & 0x10 != 0",
    "--filter",
    "branch: kind == call || conditional == true",
    "--filter",
    r#"marker: text contains "round 1""#,
];

/// What the filters above keep, decided here from the fired event.
fn selected(event: &Value) -> bool {
    let n = |name: &str| event[name].as_u64().expect(name);
    match event["event"].as_str().expect("event") {
        "mem_read" => (0x4000_0010..0x4000_0020).contains(&n("addr")),
        "mem_write" => (0x4000_0010..0x4000_0020).contains(&n("addr")) && n("val") & 0x10 != 0,
        "branch" => event["kind"] == "call" || event["conditional"] == true,
        "marker" => event["text"].as_str().expect("text").contains("round 1"),
        _ => true,
    }
}

/// Traces `rounds` rounds on 2 threads with `args`; returns what was
/// fired, what arrived (both by thread, in order) and the summary.
fn trace(name: &str, delivery: &str, rounds: u64, args: &[&str]) -> Traced {
    require_root();
    let dir = scratch(name);
    let (expect, out) = (dir.join("expected.jsonl"), dir.join("traced.jsonl"));
    let mut prog = TestProg::spawn(Some(&expect));
    let all = jsonl_to(&out, delivery, args);
    let loader = prog.attach_loader(&all);
    prog.fire(rounds, 2);
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    prog.quit();
    Traced {
        fired: by_tid(read_jsonl(&expect)),
        traced: by_tid(read_jsonl(&out)),
        summary: summary_of(&stderr),
        out,
    }
}

struct Traced {
    fired: BTreeMap<u64, Vec<Value>>,
    traced: BTreeMap<u64, Vec<Value>>,
    summary: styx_testkit::Summary,
    out: std::path::PathBuf,
}

fn count(events: &BTreeMap<u64, Vec<Value>>, name: &str) -> u64 {
    events
        .values()
        .flatten()
        .filter(|e| e["event"] == name)
        .count() as u64
}

fn assert_same(got: &BTreeMap<u64, Vec<Value>>, want: &BTreeMap<u64, Vec<Value>>, what: &str) {
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (tid, want) in want {
        let got = &got[tid];
        assert_eq!(got.len(), want.len(), "{what}: thread {tid}");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(g, w, "{what}: thread {tid}, event {i}");
        }
    }
}

#[test]
fn filters_keep_exactly_the_selected_events_in_both_delivery_modes() {
    for delivery in ["batched", "per-event"] {
        let run = trace(&format!("filters-{delivery}"), delivery, 64, FILTERS);
        let want: BTreeMap<u64, Vec<Value>> = run
            .fired
            .iter()
            .map(|(tid, events)| {
                (
                    *tid,
                    events.iter().filter(|e| selected(e)).cloned().collect(),
                )
            })
            .collect();
        assert_same(&run.traced, &want, delivery);
        // Something of each filtered type got through, and not everything.
        for name in ["mem_read", "mem_write", "branch", "marker"] {
            let (kept, fired) = (count(&want, name), count(&run.fired, name));
            assert!(
                kept > 0 && kept < fired,
                "{delivery} {name}: {kept} of {fired}"
            );
            let line = run.summary.types.iter().find(|t| t.name == name);
            let line = line.unwrap_or_else(|| panic!("{name} in {:?}", run.summary.line));
            assert_eq!(
                (line.events, line.filtered),
                (kept, fired - kept),
                "{delivery} {name}: written and filtered out"
            );
        }
        let _ = std::fs::remove_file(&run.out);
    }
}

/// The sampled events of a run, per thread in the order the threads
/// started (thread ids differ between runs), without ids.
fn sampled(run: &Traced) -> Vec<Vec<Value>> {
    let mut threads: Vec<Vec<Value>> = run
        .traced
        .values()
        .map(|events| {
            events
                .iter()
                .map(|e| {
                    let mut e = e.clone();
                    let e_obj = e.as_object_mut().expect("object");
                    for id in ["tid", "pid", "id"] {
                        e_obj.remove(id);
                    }
                    e
                })
                .collect()
        })
        .collect();
    // The test program's threads differ in their pcs' high byte.
    threads.sort_by_key(|events| events.first().and_then(|e| e["pc"].as_u64()));
    threads
}

#[test]
fn sampling_keeps_one_in_n_per_thread_and_type_the_same_on_every_run() {
    let args = [
        "-e",
        "insn_exec,mem_write,control",
        "--sample",
        "7",
        "--filter",
        "mem_write: size >= 2",
    ];
    let runs: Vec<Traced> = ["batched", "per-event", "batched"]
        .iter()
        .enumerate()
        .map(|(i, delivery)| trace(&format!("sample-{i}"), delivery, 100, &args))
        .collect();
    // The 1st, 8th, 15th… of each type's passing events, each thread.
    let fired_kinds = ["insn_exec", "mem_write", "control"];
    let want: BTreeMap<u64, Vec<Value>> = runs[0]
        .fired
        .iter()
        .map(|(tid, events)| {
            let mut passed: BTreeMap<&str, u64> = BTreeMap::new();
            let kept = events
                .iter()
                .filter(|e| {
                    let name = e["event"].as_str().expect("event");
                    if !fired_kinds.contains(&name)
                        || (name == "mem_write" && e["size"].as_u64() < Some(2))
                    {
                        return false;
                    }
                    let n = passed.entry(name).or_insert(0);
                    *n += 1;
                    (*n - 1).is_multiple_of(7)
                })
                .cloned()
                .collect();
            (*tid, kept)
        })
        .collect();
    assert_same(&runs[0].traced, &want, "batched");
    assert_eq!(
        runs[0].summary.events_of("insn_exec"),
        2 * 15,
        "100 a thread: 1 in 7"
    );
    // Rerun, and the other delivery mode: the same events.
    assert_eq!(sampled(&runs[1]), sampled(&runs[0]), "per-event vs batched");
    assert_eq!(sampled(&runs[2]), sampled(&runs[0]), "a rerun");
}

#[test]
fn a_bad_filter_points_at_the_token_and_nothing_attaches() {
    require_root();
    let mut prog = TestProg::spawn(None::<&Path>);
    let pid = prog.pid().to_string();
    for (filter, says) in [
        ("mem_write: adr == 1", "--filter 'mem_write: adr == 1': at column 12: mem_write has no field 'adr' (its fields: pc addr val size tid pid)"),
        ("addr = 1", "--filter 'addr = 1': at column 6: unexpected '='"),
        ("target == 1", "--filter 'target == 1': at column 1: no selected event type has a field 'target' (branch has it)"),
    ] {
        let args = ["--pid", &pid, "-e", "mem_read,mem_write", "--filter", filter];
        let (status, _, stderr) = run_loader(&args);
        assert!(!status.success());
        assert_eq!(stderr.trim_end(), format!("styx-loader: error: {says}"), "one line");
        assert!(semaphores(prog.pid()).values().all(|&w| w == 0), "nothing attached");
    }
    let (any, _) = prog.enabled();
    assert!(!any);
    prog.quit();
}
