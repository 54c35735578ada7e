//! Other providers' USDT probes, traced by their argument specs: a C program
//! using <sys/sdt.h>, built at -O0 (memory operands) and -O2 (registers,
//! constants), prints what it passed; the loader must report the same.

mod support;

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::*;

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/usdt_forms.c");

fn build(opt: &str) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("usdt_forms{opt}"));
    let status = Command::new("cc")
        .args([opt, "-o"])
        .arg(&out)
        .arg(SOURCE)
        .status()
        .expect("running cc");
    assert!(
        status.success(),
        "cc {opt} failed (is systemtap-sdt-dev installed?)"
    );
    out
}

/// Traces one run of `binary` and returns (what it said it fired, what was traced).
fn trace(binary: &Path, dir: &Path) -> (Vec<Value>, Vec<Value>) {
    let mut prog = Command::new(binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting the C program");
    let out = dir.join("traced.jsonl");
    let pid = prog.id().to_string();
    let loader = Loader::attach(&[
        "--pid",
        &pid,
        "--probes",
        "forms:*",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ]);
    writeln!(prog.stdin.take().unwrap(), "go 100").unwrap();
    let mut fired = Vec::new();
    for line in BufReader::new(prog.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line == "done" {
            break;
        }
        fired.push(serde_json::from_str(&line).unwrap());
    }
    assert!(prog.wait().unwrap().success());
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    let traced = read_jsonl(&out)
        .into_iter()
        .map(|mut event| {
            let object = event.as_object_mut().unwrap();
            assert_eq!(object.remove("event").unwrap(), "usdt");
            assert_eq!(
                object.remove("pid").unwrap().as_u64().unwrap().to_string(),
                pid
            );
            object.remove("tid");
            event
        })
        .collect();
    (fired, traced)
}

#[test]
fn sdt_probes_at_o0_and_o2_report_the_values_passed() {
    require_root();
    for opt in ["-O0", "-O2"] {
        let binary = build(opt);
        let table = styx_loader::stapsdt::read_probe_table(&binary).unwrap();
        let specs: Vec<&str> = table.sites.iter().map(|s| s.args.as_str()).collect();
        let dir = scratch(&format!("usdt{opt}"));
        let (fired, traced) = trace(&binary, &dir);
        // 100 rounds of mixed, consts, and gated (whose semaphore we raised).
        assert_eq!(fired.len(), 300, "{opt}");
        assert_eq!(traced, fired, "{opt}, specs {specs:?}");
    }
}

#[test]
fn no_matching_probes_says_what_there_is() {
    require_root();
    let binary = build("-O2");
    let mut prog = Command::new(&binary).stdin(Stdio::piped()).spawn().unwrap();
    let (status, _, stderr) = run_loader(&["--pid", &prog.id().to_string(), "--probes", "nope:*"]);
    prog.kill().unwrap();
    prog.wait().unwrap();
    assert!(!status.success());
    assert!(stderr.contains("none matching --probes nope:*"), "{stderr}");
    assert!(
        stderr.contains("its USDT providers are: forms (3 sites)"),
        "{stderr}"
    );
}
