//! Event types and a guest description a C emulator declares
//! (c_declared.styx, made into a header by styx-declare): a C program
//! built as C11 and C++17 against the static library, traced by
//! styx-loader (each field by its name and value, batched and per event,
//! in jsonl, text, Parquet and Tenet, registers by the description's
//! names), listed by `list`, and traced by bpftrace.

use crate::support::CBuild as Build;
use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/c_declared.c");
const DECLARATIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/c_declared.styx");
const ROUNDS: u64 = 6;

/// The test program built as `build` into `dir`, its declarations' header
/// made there by styx-declare.
fn build(build: Build, dir: &Path) -> PathBuf {
    let declare = beside_testprog("styx-declare", "styx-probe-c");
    let header = dir.join("c_declared_styx.h");
    let status = Command::new(&declare)
        .arg(DECLARATIONS)
        .arg("-o")
        .arg(&header)
        .status()
        .unwrap();
    assert!(status.success(), "{} {DECLARATIONS}", declare.display());
    let out = dir.join(format!("c_declared_{build:?}"));
    build_c(build, SOURCE, &out, Some(dir))
}

/// What the program fires in round `i`, as JSON lines show it (without
/// ts_ns, pid, tid): each declared field by its name, an enum's value by
/// its name, a register field and the register events' numbers by the
/// guest description's names.
fn round(i: u64) -> Vec<Value> {
    let s = i as i64;
    let emu = |probe: &str, fields: Value| {
        let mut event = json!({"event": "usdt", "provider": "emu", "probe": probe});
        for (name, value) in fields.as_object().unwrap() {
            event[name] = value.clone();
        }
        event
    };
    let register = ["af", "a", "pc"][i as usize % 3];
    let device = ["uart", "timer", "dma"][i as usize % 3];
    vec![
        emu(
            "mmio_write",
            json!({"pc": 0x1000 + i, "device": device,
                   "addr": 0x10 + i, "val": 3 * i}),
        ),
        emu(
            "flags_delta",
            json!({"pc": 0x600 + i, "delta": -(s % 5), "wide": -1000 * s, "taken": i % 2 == 1,
                   "r": i % 3, "r_name": register}),
        ),
        emu(
            "eight",
            json!({"a": 250 + i, "b": 0xfff0 + i, "c": 0xffff_fff0u64 + i,
                   "d": 0xffff_ffff_ffff_fff0u64 + i, "e": -300 - s, "f": -70000 - s, "g": i,
                   "h": 1u64 << 63}),
        ),
        json!({"event": "usdt", "provider": "emu", "probe": "tick", "args": []}),
        json!({"event": "reg_write", "pc": 0x1000 + i, "reg": 0, "reg_name": "af",
               "val": 0x1200 + i, "old": 0x1100 + i}),
        json!({"event": "reg_write", "pc": 0x1000 + i, "reg": 1, "reg_name": "a",
               "val": 0x40 + i, "old": 0x12}),
    ]
}

fn expected() -> Vec<Value> {
    (0..ROUNDS).flat_map(round).collect()
}

/// The loader's arguments for the program's declared types and its
/// register writes, `more` before the command.
fn traced(program: &Path, out: &Path, format: &str, more: &[&str]) -> (String, String) {
    let rounds = ROUNDS.to_string();
    let mut args = vec![
        "-e",
        "reg_write",
        "--probes",
        "emu:*",
        "-o",
        format,
        "--output",
    ];
    args.push(out.to_str().unwrap());
    args.extend_from_slice(more);
    args.extend(["--", program.to_str().unwrap(), &rounds]);
    let (status, stdout, stderr) = run_loader(&args);
    assert!(status.success(), "{stderr}");
    (stdout, stderr)
}

/// A trace's events, pid, tid and time dropped (one thread, in order).
fn events(out: &Path) -> Vec<Value> {
    let mut events = read_jsonl(out);
    for event in &mut events {
        let object = event.as_object_mut().unwrap();
        for key in ["ts_ns", "pid", "tid"] {
            object.remove(key);
        }
    }
    events
}

#[test]
fn a_c_programs_declared_types_arrive_by_field_name_batched_and_per_event() {
    require_root();
    let dir = scratch("c-declared");
    for kind in [Build::C11, Build::Cxx17] {
        let program = build(kind, &dir);
        // Untraced, no argument of a declared type was evaluated.
        untraced_evaluates_nothing(&program);
        let out = dir.join("trace.jsonl");
        // Batched: the flush site and the batch-enable sites of
        // reg_write and the four declared types.
        let (said, stderr) = traced(&program, &out, "jsonl", &[]);
        assert!(
            stderr.contains("attached 6 probe sites"),
            "{kind:?}: {stderr}"
        );
        assert!(
            said.contains(&format!("evaluated {ROUNDS}")),
            "{kind:?}: {said}"
        );
        assert_eq!(events(&out), expected(), "{kind:?} batched");
        for probe in ["mmio_write", "flags_delta", "eight", "tick"] {
            let line = format!("{ROUNDS}  emu:{probe}");
            assert!(stderr.lines().any(|l| l.trim() == line), "{line}: {stderr}");
        }
        // One event at a time: each type's per-event site.
        let (_, stderr) = traced(&program, &out, "jsonl", &["--delivery", "per-event"]);
        assert!(
            stderr.contains("attached 5 probe sites"),
            "{kind:?}: {stderr}"
        );
        assert_eq!(events(&out), expected(), "{kind:?} per event");
    }
}

/// With the shared library the declared types' sites and words are the
/// program's, the flush site the library's: the loader takes their
/// events one at a time, the catalogue's in batches, all of them whole.
#[test]
fn the_shared_library_fires_declared_types_one_at_a_time() {
    require_root();
    let dir = scratch("c-declared-shared");
    let program = build(Build::Shared, &dir);
    let out = dir.join("trace.jsonl");
    let (said, stderr) = traced(&program, &out, "jsonl", &[]);
    assert!(said.contains(&format!("evaluated {ROUNDS}")), "{said}");
    // The library's flush and reg_write's batch-enable sites, the
    // program's four per-event sites.
    assert!(stderr.contains("attached 6 probe sites"), "{stderr}");
    // Two streams, each in order: the declared types' and reg_write's.
    let (declared, registers): (Vec<Value>, Vec<Value>) =
        expected().into_iter().partition(|e| e["event"] == "usdt");
    let (got_declared, got_registers): (Vec<Value>, Vec<Value>) =
        events(&out).into_iter().partition(|e| e["event"] == "usdt");
    assert_eq!(got_declared, declared);
    assert_eq!(got_registers, registers);
    let (_, stderr) = traced(&program, &out, "jsonl", &["--delivery", "per-event"]);
    assert!(stderr.contains("attached 5 probe sites"), "{stderr}");
    assert_eq!(events(&out), expected());
}

#[test]
fn list_shows_the_c_declared_types_with_their_fields() {
    let dir = scratch("c-declared-list");
    let program = build(Build::C11, &dir);
    let (declared, stdout) = listed_declared(&program, "emu:*");
    assert_eq!(
        declared,
        [
            "eight(a: u8, b: u16, c: u32, d: u64, e: i16, f: i32, g: u8, h: u64)",
            "flags_delta(pc: u16, delta: i8, wide: i64, taken: bool, r: Reg<u8>)",
            "mmio_write(pc: u32, device: device { uart = 0, timer = 1, dma = 7 }, addr: Addr<u32>, val: u32)",
            "tick()",
        ],
        "{stdout}"
    );
    // Each type's site passes its fields in order, a register each.
    assert!(
        stdout.contains("8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9 8@%r10 8@%r11"),
        "{stdout}"
    );
}

#[test]
fn text_parquet_and_tenet_name_the_c_emulators_fields_and_registers() {
    require_root();
    let dir = scratch("c-declared-formats");
    let program = build(Build::C11, &dir);
    let out = dir.join("trace.txt");
    traced(&program, &out, "text", &["--detail", "brief"]);
    let text = std::fs::read_to_string(&out).unwrap();
    for line in [
        "emu mmio_write pc=4097 device=timer addr=0x11 val=3",
        "emu flags_delta pc=1537 delta=-1 wide=-1000 taken=true r=a",
        "emu eight a=251 b=65521 c=4294967281 d=18446744073709551601 e=-301 f=-70001 g=1 h=9223372036854775808",
        "reg_write  pc=0x1001 reg=af val=0x1201 old=0x1101",
    ] {
        assert!(text.lines().any(|l| l.ends_with(line)), "{line:?} in {text}");
    }

    let parquet = dir.join("trace.parquet");
    traced(&program, &parquet, "parquet", &[]);
    let table = parquet.to_str().unwrap();
    let rows = duckdb(&format!(
        "SELECT device, addr, val, delta, wide, taken, e, f FROM '{table}' \
         WHERE probe IN ('mmio_write', 'flags_delta', 'eight') ORDER BY ts_ns"
    ));
    let want: Vec<Vec<Value>> = (0..ROUNDS as i64)
        .flat_map(|i| {
            let device = ["uart", "timer", "dma"][i as usize % 3];
            let null = Value::Null;
            [
                vec![
                    json!(device),
                    json!(0x10 + i),
                    json!(3 * i),
                    null.clone(),
                    null.clone(),
                    null.clone(),
                    null.clone(),
                    null.clone(),
                ],
                vec![
                    null.clone(),
                    null.clone(),
                    null.clone(),
                    json!(-(i % 5)),
                    json!(-1000 * i),
                    json!(i % 2 == 1),
                    null.clone(),
                    null.clone(),
                ],
                vec![
                    null.clone(),
                    null.clone(),
                    null.clone(),
                    null.clone(),
                    null.clone(),
                    null.clone(),
                    json!(-300 - i),
                    json!(-70000 - i),
                ],
            ]
        })
        .collect();
    assert_eq!(rows, want);

    // Tenet's register lines by the description's names: a's writes
    // merged into af's bits 8..16 (round i writes af 0x1200 + i, then a
    // 0x40 + i: af is (0x40 + i) << 8 | i), each line the registers the
    // instruction before changed and the next pc, the first af's value
    // before its first write.
    let tenet = dir.join("trace.tenet");
    traced(&program, &tenet, "tenet", &[]);
    let lines = std::fs::read_to_string(&tenet).unwrap();
    let af = |i: u64| (0x40 + i) << 8 | i;
    let mut want = vec!["af=0x1100,pc=0x1000".to_string()];
    want.extend((1..ROUNDS).map(|i| format!("af={:#x},pc={:#x}", af(i - 1), 0x1000 + i)));
    want.push(format!("af={:#x}", af(ROUNDS - 1)));
    assert_eq!(lines.lines().collect::<Vec<_>>(), want, "{lines}");
}

#[test]
fn bpftrace_sees_the_c_declared_types_with_their_arguments() {
    require_root();
    let dir = scratch("c-declared-bpftrace");
    let program = build(Build::C11, &dir);
    let script = format!(
        "usdt:{p}:emu:mmio_write {{ @device[arg1] = count(); @val = sum(arg3); @addr = max(arg2); }} \
         usdt:{p}:emu:flags_delta {{ @wide = min((int64)arg2); }}",
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
    // Devices uart (0), timer (1), dma (7) twice each; values 3 * i.
    let val: u64 = (0..ROUNDS).map(|i| 3 * i).sum();
    let wide = -1000 * (ROUNDS as i64 - 1);
    for line in [
        "@device[0]: 2".to_string(),
        "@device[1]: 2".into(),
        "@device[7]: 2".into(),
        format!("@val: {val}"),
        format!("@addr: {}", 0x10 + ROUNDS - 1),
        format!("@wide: {wide}"),
    ] {
        assert!(said.lines().any(|l| l == line), "{line:?} in {said}");
    }
}

/// A mistaken declaration file: styx-declare says where and what, writes
/// no header, and exits with an error rather than a crash.
#[test]
fn styx_declare_names_a_mistakes_file_and_line() {
    let dir = scratch("c-declared-mistake");
    let file = dir.join("bad.styx");
    std::fs::write(&file, "provider emu;\nevent x(a: u128);\n").unwrap();
    let header = dir.join("bad.h");
    let output = Command::new(beside_testprog("styx-declare", "styx-probe-c"))
        .arg(&file)
        .arg("-o")
        .arg(&header)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("in {}", file.display())),
        "{stderr}"
    );
    assert!(
        stderr.contains("line 2: \"u128\" is not a field type"),
        "{stderr}"
    );
    assert!(!header.exists());
}
