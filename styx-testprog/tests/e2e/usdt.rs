//! Other providers' USDT probes, traced by their argument specs: a C program
//! using <sys/sdt.h>, built at -O0 (memory operands) and -O2 (registers,
//! constants), prints what it passed; the loader must report the same.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/usdt_forms.c");

/// The C program built at `opt`, once per test run: tests run in parallel,
/// and rewriting a binary another test is executing fails with ETXTBSY.
fn build(opt: &str) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    built
        .entry(opt.to_string())
        .or_insert_with(|| {
            let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("usdt_forms{opt}"));
            cc(&[opt, "-o", out.to_str().unwrap(), SOURCE]);
            out
        })
        .clone()
}

/// Traces one run of `binary` and returns what it said it fired, what was
/// traced, and what the loader said.
fn trace(binary: &Path, dir: &Path) -> (Vec<Value>, Vec<Value>, Vec<String>) {
    let mut prog = TestProg::start(binary, &[]);
    let out = dir.join("traced.jsonl");
    let pid = prog.pid().to_string();
    let loader = prog.attach_loader(&[
        "--probes",
        "forms:*",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ]);
    let fired = prog
        .run("go 100", "done")
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    prog.finish();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    let traced = usdt_events(&out, pid.parse().unwrap());
    (fired, traced, stderr)
}

#[test]
fn sdt_probes_at_o0_and_o2_report_the_values_passed() {
    require_root();
    for opt in ["-O0", "-O2"] {
        let binary = build(opt);
        let table = styx_usdt::note::read_probe_table(&binary).unwrap();
        let specs: Vec<&str> = table.sites.iter().map(|s| s.args.as_str()).collect();
        let dir = scratch(&format!("usdt{opt}"));
        let (fired, traced, _) = trace(&binary, &dir);
        // 100 rounds of mixed, globals, consts, and gated (whose semaphore we raised).
        assert_eq!(fired.len(), 400, "{opt}");
        assert_eq!(traced, fired, "{opt}, specs {specs:?}");
    }
}

#[test]
fn no_matching_probes_says_what_there_is() {
    require_root();
    let binary = build("-O2");
    let mut prog = Command::new(&binary).stdin(Stdio::piped()).spawn().unwrap();
    // Said at once; the loader then waits for a library with them (see
    // late_libraries.rs) and, the process gone without one, fails.
    let mut loader = spawn_loader(
        &["--pid", &prog.id().to_string(), "--probes", "nope:*"],
        Stdio::null(),
    );
    // Once attached (to nothing): the process is watched for its exit.
    let attached = loader.wait_for_line("attached");
    prog.kill().unwrap();
    prog.wait().unwrap();
    attached.unwrap_or_else(|e| panic!("{e}"));
    let (status, stderr) = loader.finish();
    let waiting = (stderr.iter())
        .find(|l| l.contains("waiting for a library"))
        .unwrap_or_else(|| panic!("{stderr:?}"));
    assert!(!status.success());
    let error = stderr
        .iter()
        .find(|l| l.contains("error"))
        .expect("an error");
    for said in [waiting, error] {
        assert!(said.contains("none matching --probes nope:*"), "{said}");
        assert!(
            said.contains("its USDT providers are: forms (4 sites)"),
            "{said}"
        );
    }
}

/// A copy of `binary` whose `forms:consts` note points its probe outside
/// every loadable segment.
fn with_broken_consts_note(binary: &Path, dir: &Path) -> PathBuf {
    let mut bytes = std::fs::read(binary).unwrap();
    let strings = b"forms\0consts\0";
    let at = bytes
        .windows(strings.len())
        .position(|w| w == strings)
        .expect("the consts note");
    // The note's three addresses come right before its strings; the first
    // is the probe's pc.
    let pc = at - 24;
    bytes[pc..pc + 8].copy_from_slice(&0xdead_0000_0000u64.to_le_bytes());
    let broken = dir.join("broken");
    write_program(&broken, &bytes);
    broken
}

#[test]
fn a_malformed_note_is_named_and_the_other_probes_still_attach() {
    require_root();
    let dir = scratch("usdt-malformed");
    let broken = with_broken_consts_note(&build("-O2"), &dir);
    let complaint = "forms:consts: probe address 0xdead00000000 is in no loadable segment";

    let (status, listed, stderr) = run_loader(&["list", broken.to_str().unwrap()]);
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains(complaint), "{stderr}");
    assert!(listed.contains(":forms:mixed") && listed.contains(":forms:gated"));
    assert!(!listed.contains(":forms:consts"), "{listed}");

    let (fired, traced, stderr) = trace(&broken, &dir);
    assert!(stderr.iter().any(|l| l.contains(complaint)), "{stderr:?}");
    let reachable: Vec<Value> = fired
        .into_iter()
        .filter(|e| e["probe"] != "consts")
        .collect();
    assert_eq!(reachable.len(), 300);
    assert_eq!(traced, reachable);
}

#[test]
fn a_file_that_is_not_elf_is_a_clear_error() {
    let (status, _, stderr) = run_loader(&["list", "/etc/passwd"]);
    assert!(!status.success());
    assert!(
        stderr.contains("/etc/passwd is not a 64-bit ELF file"),
        "{stderr}"
    );
}

/// Debian's CPython, whose markers pass strings: the loader reads them as
/// CPython documents them with no `--probe-args`, and one that matches
/// takes precedence.
const PYTHON: &str = "/usr/bin/python3.11";

/// CPython's `function__*` markers of one run of a script calling `hop` 37
/// times, traced from its start, `extra` added to the loader's arguments.
fn python_calls(dir: &Path, extra: &[&str]) -> Vec<Value> {
    let script = dir.join("hops.py");
    let source = "def hop(n):\n    return n + 1\n\ntotal = 0\nfor _ in range(37):\n    total = hop(total)\nprint(total)\n";
    std::fs::write(&script, source).unwrap();
    let out = dir.join("calls.jsonl");
    let mut args = vec![
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--probes",
        "python:function__*",
        // Debian's python3.11 is stripped: no symbol covers its sites.
        "--allow-unverified-sites",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", PYTHON, script.to_str().unwrap()]);
    let (status, stdout, stderr) = run_loader(&args);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("37"), "the script ran: {stdout}");
    read_jsonl(&out)
}

#[test]
fn python_markers_show_their_strings_without_probe_args() {
    require_root();
    let dir = scratch("usdt-python");
    let calls = python_calls(&dir, &[]);
    let script = dir.join("hops.py");
    // CPython 3.11 fires no function__entry for a call it inlines (one
    // Python function calling another; bpftrace sees none either), but
    // every function__return.
    let returns: Vec<&Value> = (calls.iter())
        .filter(|e| e["probe"] == "function__return" && e["funcname"] == "hop")
        .collect();
    assert_eq!(returns.len(), 37, "{:?}", calls.first());
    for event in returns {
        assert_eq!(event["provider"], "python");
        assert_eq!(event["filename"], script.to_str().unwrap(), "{event}");
        assert_eq!(event["lineno"], 2, "{event}");
        assert!(event.get("args").is_none(), "{event}");
    }
    let entries = calls.iter().filter(|e| e["probe"] == "function__entry");
    for event in entries {
        assert!(
            event["funcname"].as_str().is_some_and(|f| !f.is_empty()),
            "{event}"
        );
    }

    // What the user declares comes first: here the file name's address.
    let calls = python_calls(
        &dir,
        &[
            "--probe-args",
            "python:function__return=where:u64,what:u64,line:int",
        ],
    );
    let hop = (calls.iter())
        .find(|e| e["probe"] == "function__return" && e["line"] == 2)
        .expect("hop's return");
    assert!(hop["where"].as_u64().is_some_and(|a| a > 0x1000), "{hop}");
    assert!(hop.get("filename").is_none(), "{hop}");
}
