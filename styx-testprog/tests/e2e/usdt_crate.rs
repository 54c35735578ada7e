//! A program whose probes are declared with the `usdt` crate
//! (styx-usdtcrate), traced with `--probes` and `--probe-args`: exact
//! counts and values, its `&str` arguments as strings and its serde
//! argument as JSON, in jsonl live and read back from the capture, text,
//! Parquet (DuckDB) and Perfetto; bpftrace on the same probe at the same
//! time counts the same hits.

use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// How the tests declare the crate's probes: its notes say only `8@%rdi`
/// for a string's or a JSON string's address, and name nothing.
const PROBE_ARGS: [&str; 3] = [
    "usdtcrate:request=id:u64,path:str,delta:i32",
    "usdtcrate:response=body:json",
    "usdtcrate:note=str",
];

const ROUNDS: u64 = 50;

fn usdtcrate_path() -> PathBuf {
    beside_testprog("styx-usdtcrate", "styx-usdtcrate")
}

/// What styx-usdtcrate's `request` passes in round `i` (its `path`).
fn path(i: u64) -> String {
    format!("/rom/{i}/\"quoted\" é")
}

/// The crate's JSON for round `i`'s `response`: serde's, inside `{"ok":…}`.
fn body(i: u64) -> Value {
    json!({"ok": {"id": i, "status": 200 + i % 3, "tags": ["a", format!("t{i}")]}})
}

/// Arguments for the loader: the probes, their declarations, and `more`.
fn loader_args<'a>(declared: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--probes", "usdtcrate:*"];
    for d in declared {
        args.extend(["--probe-args", d]);
    }
    args.extend_from_slice(more);
    args
}

/// The program's semaphore of `request`: non-zero while it is traced.
fn holders(prog: &mut TestProg) -> u64 {
    let answer = prog.ask("enabled");
    let n = answer.trim().strip_prefix("enabled ").expect("enabled N");
    n.parse().expect("a number")
}

/// Runs the program's `go ROUNDS` and `long` while styx-loader traces it
/// into a jsonl file and a capture, and bpftrace counts `request` hits at
/// the same time; returns the jsonl events, the capture and what bpftrace
/// printed.
fn trace_with_bpftrace(dir: &Path) -> (Vec<Value>, PathBuf, String) {
    let mut prog = TestProg::start(&usdtcrate_path(), &[]);
    let (out, capture) = (dir.join("live.jsonl"), dir.join("run.styx"));
    let more = [
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--capture",
        capture.to_str().unwrap(),
    ];
    let loader = prog.attach_loader(&loader_args(&PROBE_ARGS, &more));
    assert_eq!(holders(&mut prog), 1);
    let bpftrace = start_bpftrace(prog.pid());
    // The kernel raises a semaphore once per probe site, however many
    // tracers hold it: bpftrace is ready when its uprobe is open and it
    // waits for events.
    eventually("bpftrace attached to usdtcrate:request", || {
        perf_events_open(bpftrace.id()) >= 1 && in_event_loop(bpftrace.id())
    });
    assert_eq!(
        prog.run(&format!("go {ROUNDS}"), &format!("done {ROUNDS}")),
        Vec::<String>::new()
    );
    assert_eq!(prog.run("long", "done 1"), Vec::<String>::new());
    let printed = stop_bpftrace(bpftrace);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    let summary = summary_of(&stderr);
    assert_eq!(summary.events, 2 * ROUNDS + 1, "{stderr:?}");
    assert_eq!(summary.dropped, 0, "{stderr:?}");
    (read_jsonl(&out), capture, printed)
}

fn start_bpftrace(pid: u32) -> Child {
    let program = format!(
        "usdt:{}:usdtcrate:request {{ @requests = count(); }}",
        usdtcrate_path().display()
    );
    Command::new("bpftrace")
        .args(["-p", &pid.to_string(), "-e", &program])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting bpftrace")
}

/// The events styx must report, in order, without pid/tid (and ts_ns,
/// which `read_jsonl` drops).
fn expected() -> Vec<Value> {
    let mut events = Vec::new();
    for i in 0..ROUNDS {
        events.push(
            json!({"event": "usdt", "provider": "usdtcrate", "probe": "request",
            "id": i, "path": path(i), "delta": i as i64 - 5}),
        );
        events.push(
            json!({"event": "usdt", "provider": "usdtcrate", "probe": "response",
            "body": body(i)}),
        );
    }
    // Cut where bpftrace's str() would be too, and said so.
    events.push(
        json!({"event": "usdt", "provider": "usdtcrate", "probe": "note",
        "args": ["x".repeat(256)], "truncated": true}),
    );
    events
}

fn without_thread(events: Vec<Value>) -> Vec<Value> {
    events
        .into_iter()
        .map(|mut e| {
            let object = e.as_object_mut().unwrap();
            for key in ["pid", "tid"] {
                object.remove(key).unwrap_or_else(|| panic!("no {key}"));
            }
            e
        })
        .collect()
}

/// `styx-loader read CAPTURE -o FORMAT --output OUT`.
fn read_as(capture: &Path, format: &str, out: &Path) {
    let args = [
        "read",
        capture.to_str().unwrap(),
        "-o",
        format,
        "--output",
        out.to_str().unwrap(),
    ];
    let (status, _, stderr) = run_loader(&args);
    assert!(status.success(), "{format}: {stderr}");
}

#[test]
fn usdt_crate_probes_are_traced_by_name_with_strings_and_json() {
    require_root();
    let dir = scratch("usdt-crate");
    let (live, capture, bpftrace) = trace_with_bpftrace(&dir);
    assert_eq!(without_thread(live.clone()), expected());
    assert!(
        bpftrace.contains(&format!("@requests: {ROUNDS}")),
        "bpftrace printed {bpftrace:?}"
    );

    // The capture carries the names, types and strings: read back, the same.
    let read = dir.join("read.jsonl");
    read_as(&capture, "jsonl", &read);
    assert_eq!(read_jsonl(&read), live);

    let text = dir.join("read.txt");
    read_as(&capture, "text", &text);
    let text = std::fs::read_to_string(&text).unwrap();
    let line = |probe: &str, nth: usize| {
        let lines = text
            .lines()
            .filter(|l| l.contains(&format!(" usdtcrate {probe}")));
        lines
            .clone()
            .nth(nth)
            .unwrap_or_else(|| panic!("{probe} {nth}: {text}"))
    };
    assert!(
        line("request", 7).ends_with(r#" id=0x7 path="/rom/7/\"quoted\" é" delta=2"#),
        "{}",
        line("request", 7)
    );
    assert!(
        line("response", 2).ends_with(r#" body={"ok":{"id":2,"status":202,"tags":["a","t2"]}}"#),
        "{}",
        line("response", 2)
    );
    assert!(line("note", 0).ends_with(&format!("=\"{}\" (truncated)", "x".repeat(256))));

    let parquet = dir.join("read.parquet");
    read_as(&capture, "parquet", &parquet);
    let table = parquet.to_str().unwrap();
    let requests = duckdb(&format!(
        "SELECT id, path, delta FROM '{table}' WHERE probe = 'request' ORDER BY ts_ns"
    ));
    let want: Vec<Vec<Value>> = (0..ROUNDS)
        .map(|i| vec![json!(i), json!(path(i)), json!(i as i64 - 5)])
        .collect();
    assert_eq!(requests, want);
    // The JSON argument is text DuckDB's JSON functions read.
    let statuses = duckdb(&format!(
        "SELECT sum(CAST(json_extract(body, '$.ok.status') AS INTEGER)) FROM '{table}' \
         WHERE probe = 'response'"
    ));
    let sum: u64 = (0..ROUNDS).map(|i| 200 + i % 3).sum();
    assert_eq!(statuses, vec![vec![json!(sum)]]);
}

#[test]
fn usdt_crate_arguments_show_in_perfetto_by_name() {
    require_root();
    let dir = scratch("usdt-crate-perfetto");
    let mut prog = TestProg::start(&usdtcrate_path(), &[]);
    let out = dir.join("run.pftrace");
    let more = ["-o", "perfetto", "--output", out.to_str().unwrap()];
    let loader = prog.attach_loader(&loader_args(&PROBE_ARGS, &more));
    prog.run("go 3", "done 3");
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    let decoded = crate::pftrace::decode(&std::fs::read(&out).unwrap());
    let paths: Vec<String> = (decoded.events.iter())
        .filter_map(|e| Some(e.annotation("path")?.string_value().to_string()))
        .collect();
    assert_eq!(paths, (0..3).map(path).collect::<Vec<_>>());
}

/// Declared a string, `id` is an address nothing is mapped at: the read
/// fails and says so (bpftrace's `str()` would show an empty string).
/// Declarations that do not fit a note are said, once, and the note's
/// reading kept.
#[test]
fn an_unreadable_string_is_said_not_hidden() {
    require_root();
    let dir = scratch("usdt-crate-unreadable");
    let mut prog = TestProg::start(&usdtcrate_path(), &[]);
    let out = dir.join("run.jsonl");
    let declared = [
        "usdtcrate:request=ident:str,path:str,delta:str",
        "usdtcrate:note=str,u8",
        "nope:*=str",
    ];
    let more = ["-o", "jsonl", "--output", out.to_str().unwrap()];
    let loader = prog.attach_loader(&loader_args(&declared, &more));
    prog.run("go 2", "done 2");
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success());
    for warning in [
        "usdtcrate:request: argument 2 is 4 bytes (\"8@%rdi 8@%rsi -4@%edx\"), not an address: shown as i32, not str",
        "usdtcrate:note: --probe-args declares 2 arguments, its note has 1 (\"8@%rdi\"): the extra ones are ignored",
        "--probe-args nope:*: no probe traced with --probes matches it",
    ] {
        let said = stderr.iter().filter(|l| l.contains(warning)).count();
        assert_eq!(said, 1, "{warning}: {stderr:?}");
    }
    let requests: Vec<Value> = without_thread(read_jsonl(&out))
        .into_iter()
        .filter(|e| e["probe"] == "request")
        .collect();
    let want: Vec<Value> = (0..2)
        .map(|i| {
            json!({"event": "usdt", "provider": "usdtcrate", "probe": "request",
                "ident": null, "path": path(i), "delta": i as i64 - 5, "unreadable": true})
        })
        .collect();
    assert_eq!(requests, want);
}

#[test]
fn a_bad_declaration_is_one_clear_line() {
    for (declared, says) in [
        ("usdtcrate:request=id:u128", "unknown type \"u128\""),
        ("usdtcrate:request", "expected PROVIDER:PROBE=TYPE"),
        (
            "usdtcrate:request=pid:u32",
            "argument name \"pid\" is a field every USDT event has",
        ),
        (
            "usdtcrate:request=pc:str",
            "argument name \"pc\" is an integer field of styx's own events",
        ),
    ] {
        let (status, _, stderr) = run_loader(&["--pid", "1", "--probe-args", declared]);
        assert!(!status.success(), "{declared}");
        let error: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(error.len(), 1, "{stderr}");
        assert!(error[0].contains(says), "{declared}: {stderr}");
    }
}
