//! Event types an emulator declares itself (`styx_probe::event!`,
//! styx-declared): their notes say what `list` shows, and bpftrace traces
//! their sites with the values in the order declared.

use crate::support::*;
use serde_json::Value;
use std::process::{Command, Stdio};

fn program() -> std::path::PathBuf {
    beside_testprog("styx-declared", "styx-testprog")
}

#[test]
fn list_shows_each_declared_type_with_its_fields() {
    let binary = program();
    let (status, stdout, stderr) =
        run_loader(&["list", binary.to_str().unwrap(), "styx_declared:*"]);
    assert!(status.success(), "{stderr}");
    let declared: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("declared "))
        .collect();
    assert_eq!(
        declared,
        [
            "big(a: u64, b: u64, c: u64, d: u64, e: u64, f: i64)",
            "flags_delta(pc: u16, delta: i8, wide: i64)",
            "mmio_write(pc: u32, device: Device { Uart = 0, Timer = 1, Dma = 7 }, addr: Addr<u32>, val: u32)",
            "wide(a: u8, b: u16, c: u32, d: u64, e: bool, f: Reg<u8>, g: i16, h: u64)",
        ],
        "{stdout}"
    );
    // Each type's one site passes its fields in order, a register each.
    assert!(
        stdout.contains("8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9 8@%r10 8@%r11"),
        "{stdout}"
    );
}

/// A bpftrace one-liner on a declared type: its arguments are the fields
/// in the order declared (an enum's value, an address, a value).
#[test]
fn bpftrace_reads_a_declared_types_fields_as_its_arguments() {
    require_root();
    let binary = program();
    let mut prog = TestProg::start(&binary, &[]);
    let pid = prog.pid();
    let script = format!(
        "usdt:{}:styx_declared:mmio_write {{ @device[arg1] = count(); @val = sum(arg3); @addr = max(arg2); }}",
        binary.display()
    );
    let bpftrace = Command::new("bpftrace")
        .args(["-p", &pid.to_string(), "-e", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting bpftrace");
    eventually("bpftrace raised mmio_write's semaphore", || {
        provider_semaphores(pid, &binary, "styx_declared").get("mmio_write") == Some(&1)
            && in_event_loop(bpftrace.id())
    });
    assert_eq!(prog.ask("fire 30").trim(), "fired 30");
    let printed = stop_bpftrace(bpftrace);
    prog.quit();
    // Devices Uart (0), Timer (1), Dma (7) ten times each; values 3 * i.
    for line in [
        "@device[0]: 10",
        "@device[1]: 10",
        "@device[7]: 10",
        "@val: 1305",
        "@addr: 45",
    ] {
        assert!(printed.lines().any(|l| l == line), "{line:?} in {printed}");
    }
}

/// What round `i` of styx-declared fires: (probe, values as a per-event
/// site passes them, signed ones sign-extended).
fn round(i: i64) -> [(&'static str, Vec<i64>); 4] {
    [
        (
            "mmio_write",
            vec![0x1000 + i, [0, 1, 7][i as usize % 3], 0x10 + i, 3 * i],
        ),
        ("flags_delta", vec![0x600 + i, -(i % 5), -1000 * i]),
        (
            "wide",
            vec![i % 256, 2 * i, 3 * i, 4 * i, i % 2, i % 16, -i, 5 * i],
        ),
        ("big", vec![i, i + 1, i + 2, i + 3, i + 4, -i]),
    ]
}

/// styx-declared traced with `--probes 'styx_declared:*'` and `args`
/// while it fires `rounds`: what the loader wrote to `out` (jsonl).
fn traced(name: &str, rounds: u64, args: &[&str]) -> (Vec<Value>, Vec<String>) {
    require_root();
    let out = scratch(name).join("out.jsonl");
    let mut prog = TestProg::start(&program(), &[]);
    let mut all = vec!["--probes", "styx_declared:*", "-o", "jsonl", "--output"];
    all.push(out.to_str().unwrap());
    all.extend_from_slice(args);
    let loader = prog.attach_loader(&all);
    assert_eq!(
        prog.ask(&format!("fire {rounds}")).trim(),
        format!("fired {rounds}")
    );
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    (read_jsonl(&out), stderr)
}

/// `got` is `want`; else the first event that differs (a whole trace
/// would bury it).
fn assert_same(got: &[(String, Vec<i64>)], want: &[(String, Vec<i64>)]) {
    if let Some(at) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        panic!(
            "event {at} of {} (expected {}): {:?}, expected {:?}",
            got.len(),
            want.len(),
            got.get(at),
            want.get(at)
        );
    }
}

/// The fields each declared type of styx-declared has, in order.
fn fields_of(probe: &str) -> &'static [&'static str] {
    match probe {
        "mmio_write" => &["pc", "device", "addr", "val"],
        "flags_delta" => &["pc", "delta", "wide"],
        "wide" => &["a", "b", "c", "d", "e", "f", "g", "h"],
        "big" => &["a", "b", "c", "d", "e", "f"],
        "testprog_tick" => &["i", "minus_i"],
        "lib_tick" => &["i", "odd"],
        other => panic!("no declared type {other}"),
    }
}

/// (probe, values) of each event of a trace: its fields, by the names
/// the declaration gives them.
fn events(trace: &[Value]) -> Vec<(String, Vec<i64>)> {
    trace
        .iter()
        .map(|e| {
            assert_eq!(e["event"], "usdt", "{e}");
            let probe = e["probe"].as_str().unwrap();
            let values = fields_of(probe)
                .iter()
                .map(|f| e[*f].as_i64().unwrap_or_else(|| panic!("no {f} in {e}")))
                .collect();
            (probe.to_string(), values)
        })
        .collect()
}

/// Declared types taken in batches (the default) and one hit per event
/// give the same events, each with its values as declared: narrow ones,
/// signed ones sign-extended, an enum's value.
#[test]
fn declared_types_arrive_whole_batched_and_per_event() {
    let rounds = 300;
    let want: Vec<(String, Vec<i64>)> = (0..rounds as i64)
        .flat_map(round)
        .map(|(probe, args)| (probe.to_string(), args))
        .collect();
    let (batched, stderr) = traced("declared-batched", rounds, &[]);
    assert!(batched.iter().all(|e| e["provider"] == "styx_declared"));
    // One flush site and the batch-enable site of each type.
    assert!(stderr[0].contains("attached 5 probe sites"), "{stderr:#?}");
    assert_same(&events(&batched), &want);
    let (per_event, stderr) = traced("declared-per-event", rounds, &["--delivery", "per-event"]);
    assert!(stderr[0].contains("attached 4 probe sites"), "{stderr:#?}");
    assert_same(&events(&per_event), &want);
}

/// A raw capture of batched declared types keeps what they are: `read`
/// gives the same events.
#[test]
fn a_capture_of_declared_types_reads_back() {
    require_root();
    let dir = scratch("declared-capture");
    let raw = dir.join("run.styx");
    let mut prog = TestProg::start(&program(), &[]);
    let loader = prog.attach_loader(&[
        "--probes",
        "styx_declared:*",
        "-o",
        "raw",
        "--output",
        raw.to_str().unwrap(),
    ]);
    assert_eq!(prog.ask("fire 100").trim(), "fired 100");
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    let (status, stdout, stderr) = run_loader(&["read", raw.to_str().unwrap(), "-o", "jsonl"]);
    assert!(status.success() && stderr.is_empty(), "{stderr}");
    let want: Vec<(String, Vec<i64>)> = (0..100)
        .flat_map(round)
        .map(|(probe, args)| (probe.to_string(), args))
        .collect();
    assert_same(&events(&parse_jsonl(&stdout)), &want);
}

/// Two files of one process, each with its own styx-probe and its own
/// declared types (styx-testprog's `testprog_tick`, the dlopened
/// styx-testlib's `lib_tick`): their batches' tags are their own file's,
/// and every event is its type's with its values.
#[test]
fn two_files_declare_their_own_types_in_one_process() {
    require_root();
    let out = scratch("declared-two-files").join("out.jsonl");
    let mut prog = TestProg::spawn(None);
    let library = beside_testprog("libstyx_testlib.so", "styx-testlib");
    assert_eq!(
        prog.ask(&format!("dlopen {}", library.display())).trim(),
        "loaded"
    );
    let loader = prog.attach_loader(&jsonl_to(
        &out,
        "batched",
        &[
            "-e",
            "insn_exec",
            "--probes",
            "styx_testprog:*",
            "--probes",
            "styx_testlib:*",
        ],
    ));
    assert_eq!(prog.ask("declared 500").trim(), "declared 500");
    assert_eq!(prog.ask("lib-fire 300 2").trim(), "lib-fired 1200");
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    let trace = read_jsonl(&out);
    let of = |provider: &str| -> Vec<Vec<i64>> {
        let declared: Vec<Value> = trace
            .iter()
            .filter(|e| e["event"] == "usdt" && e["provider"] == provider)
            .cloned()
            .collect();
        events(&declared)
            .into_iter()
            .map(|(_, values)| values)
            .collect()
    };
    let own: Vec<Vec<i64>> = (0..500).map(|i| vec![i, -i]).collect();
    assert!(of("styx_testprog") == own, "{stderr:#?}");
    // Two threads, each rounds 0..300 in order.
    let lib = of("styx_testlib");
    assert_eq!(lib.len(), 600, "{stderr:#?}");
    let mut rounds: Vec<i64> = lib.iter().map(|args| args[0]).collect();
    assert!(lib.iter().all(|args| args[1] == args[0] % 2), "{lib:?}");
    rounds.sort_unstable();
    let want: Vec<i64> = (0..300).flat_map(|i| [i, i]).collect();
    assert_eq!(rounds, want);
}
