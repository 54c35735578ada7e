//! C and C++ emulators through styx_probe.h (styx-probe-c): a C program
//! firing every event type, built as C11 and C++17 against the static
//! library and as C against the shared one, traced by styx-loader (values
//! exact, in order) and by bpftrace (the same probes).

use crate::support::CBuild as Build;
use crate::support::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/c_probes.c");
const ROUNDS: u64 = 6;

/// The test program built as `build` into `dir`.
fn build(build: Build, dir: &Path) -> PathBuf {
    build_c(
        build,
        SOURCE,
        &dir.join(format!("c_probes_{build:?}")),
        None,
    )
}

/// What the program fires in round `i`, as JSON lines show it (without
/// ts_ns, pid, tid; span ids apart).
fn round(i: u64) -> Vec<Value> {
    let pc = 0x1000 + i;
    let exit = i % 2 == 1;
    vec![
        json!({"event": "insn_fetch", "pc": pc, "insn": 0xa9, "len": 2}),
        json!({"event": "insn_exec", "pc": pc, "insn": 0xa9, "len": 2}),
        json!({"event": "block", "pc": pc, "size": 12}),
        json!({"event": "mem_read", "pc": pc, "addr": 0x2000 + i, "val": i, "size": 1}),
        json!({"event": "mem_write", "pc": pc, "addr": 0x3000 + i, "val": 0x1234 + i, "size": 2}),
        json!({"event": "reg_read", "pc": pc, "reg": 3, "val": i}),
        json!({"event": "reg_write", "pc": pc, "reg": 4, "val": i + 1, "old": i}),
        json!({"event": "branch", "pc": pc, "target": 0x4000, "kind": "call", "conditional": exit}),
        json!({"event": "interrupt", "kind": if exit { "exit" } else { "entry" }, "num": 7, "old_pc": pc, "new_pc": 0xfe00}),
        json!({"event": "control", "code": 1, "a": i, "b": 2}),
        json!({"event": "span_begin", "category": "cpu", "name": "frame"}),
        json!({"event": "span_end", "category": "cpu", "name": "frame"}),
        json!({"event": "marker", "text": "round"}),
    ]
}

/// The events of a trace, pid and tid dropped (one thread), span ids
/// checked to pair and dropped.
fn events(out: &Path) -> Vec<Value> {
    let mut events = read_jsonl(out);
    let mut begun = None;
    for event in &mut events {
        let object = event.as_object_mut().unwrap();
        object.remove("pid");
        object.remove("tid");
        if let Some(id) = object.remove("id") {
            match object["event"].as_str() {
                Some("span_begin") => begun = Some(id),
                _ => assert_eq!(begun.take(), Some(id), "an end pairs with its begin"),
            }
        }
    }
    events
}

fn expected() -> Vec<Value> {
    (0..ROUNDS).flat_map(round).collect()
}

/// The program run under `-- COMMAND`, traced from its start.
fn traced_from_start(program: &Path, dir: &Path) -> (Vec<Value>, String) {
    let out = dir.join("trace.jsonl");
    let rounds = ROUNDS.to_string();
    let (status, stdout, stderr) = run_loader(&[
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--",
        program.to_str().unwrap(),
        &rounds,
    ]);
    assert!(status.success(), "{stderr}");
    (events(&out), stdout)
}

#[test]
fn a_c_program_fires_every_type_through_the_header_exactly() {
    require_root();
    let dir = scratch("c-header");
    for kind in [Build::C11, Build::Cxx17] {
        let program = build(kind, &dir);
        // Untraced, no probe's arguments were evaluated.
        untraced_evaluates_nothing(&program);
        let (traced, said) = traced_from_start(&program, &dir);
        assert_eq!(traced, expected(), "{kind:?}");
        assert!(
            said.contains(&format!("evaluated {ROUNDS}")),
            "{kind:?}: {said}"
        );
    }
}

/// `-DSTYX_PROBES_OFF`: every macro compiles to nothing, so the program
/// links without the library, has no probe sites for a tracer to find,
/// and evaluates no probe's arguments.
#[test]
fn with_probes_off_a_c_program_has_no_probes() {
    require_root();
    let dir = scratch("c-header-off");
    let program = build(Build::ProbesOff, &dir);
    untraced_evaluates_nothing(&program);
    let notes = Command::new("readelf")
        .arg("-n")
        .arg(&program)
        .output()
        .unwrap();
    let notes = String::from_utf8_lossy(&notes.stdout);
    assert!(!notes.contains("stapsdt"), "{notes}");
    let (status, _, stderr) = run_loader(&["list", program.to_str().unwrap()]);
    assert!(
        !status.success() && stderr.contains("no USDT probes"),
        "{stderr}"
    );
}

#[test]
fn the_shared_library_is_traced_in_a_running_process_and_a_command() {
    require_root();
    let dir = scratch("c-header-shared");
    let program = build(Build::Shared, &dir);
    let mut child = Command::new(&program)
        .arg(ROUNDS.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let out = dir.join("trace.jsonl");
    let pid = child.id().to_string();
    let loader = attach_loader(&[
        "--pid",
        &pid,
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ]);
    writeln!(child.stdin.take().unwrap(), "go").unwrap();
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, format!("evaluated {ROUNDS}\n"));
    assert!(child.wait().unwrap().success());
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    assert_eq!(events(&out), expected());
    // A command linking the library: the loader attaches it before the
    // command runs.
    let (traced, said) = traced_from_start(&program, &dir);
    assert_eq!(traced, expected());
    assert!(said.contains(&format!("evaluated {ROUNDS}")), "{said}");
}

#[test]
fn bpftrace_sees_the_c_programs_probes() {
    require_root();
    let dir = scratch("c-header-bpftrace");
    let program = build(Build::C11, &dir);
    let script = format!(
        "usdt:{p}:styx:mem_read {{ @reads = count(); @sum = sum(arg2); }} \
         usdt:{p}:styx:marker {{ @text[str(arg0, arg1)] = count(); }}",
        p = program.display()
    );
    let output = Command::new("bpftrace")
        .args(["-e", &script, "-c"])
        .arg(format!("{} {ROUNDS}", program.display()))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{said}");
    let sum: u64 = (0..ROUNDS).sum();
    assert!(said.contains(&format!("@reads: {ROUNDS}")), "{said}");
    assert!(said.contains(&format!("@sum: {sum}")), "{said}");
    assert!(said.contains(&format!("@text[round]: {ROUNDS}")), "{said}");
}
