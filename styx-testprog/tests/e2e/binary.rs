//! `--binary PATH`: every process running the binary is traced, including
//! processes started after the loader attached, and only the selected
//! probes' semaphores are raised in them.

use crate::support::*;
use std::collections::BTreeMap;
use std::process::Command;

#[test]
fn binary_mode_traces_every_process_started_later() {
    require_root();
    let dir = scratch("binary");
    let out = dir.join("traced.jsonl");
    // A copy of its own: every process running the traced binary counts,
    // and other tests run styx-testprog meanwhile. `cp`, not std::fs::copy,
    // so that no process this one forks holds the new file open for
    // writing when it is executed (ETXTBSY).
    let binary = dir.join("styx-testprog");
    let copied = Command::new("cp")
        .arg(testprog_path())
        .arg(&binary)
        .status()
        .expect("running cp");
    assert!(copied.success(), "copying styx-testprog");
    let loader = attach_loader(&[
        "--binary",
        binary.to_str().unwrap(),
        "-e",
        "marker",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ]);

    let mut progs: Vec<TestProg> = (0..2).map(|_| TestProg::start(&binary, &[])).collect();
    let mut expected = BTreeMap::new();
    for prog in &mut progs {
        let pid = prog.pid();
        let raised = semaphores(pid);
        assert!(
            raised["marker"] > 0,
            "marker raised in pid {pid}: {raised:?}"
        );
        assert_eq!(raised["mem_read"], 0, "unselected stays 0 in pid {pid}");
        // One marker per round plus a long one every 16, after "testprog start".
        let fired = prog.fire(100, 1);
        assert_eq!(fired.evaluated, 100 + 7);
        expected.insert(pid as u64, 1 + 100 + 7);
    }
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    assert!(
        summary_of(&stderr).line.contains("every process running"),
        "{stderr:?}"
    );

    let mut seen: BTreeMap<u64, u64> = BTreeMap::new();
    for event in read_jsonl(&out) {
        assert_eq!(event["event"], "marker");
        *seen.entry(event["pid"].as_u64().unwrap()).or_default() += 1;
    }
    assert_eq!(seen, expected, "markers per process");
    for prog in &mut progs {
        let pid = prog.pid();
        eventually("semaphores back to 0", || {
            semaphores(pid).values().all(|v| *v == 0)
        });
    }
    for prog in progs {
        prog.quit();
    }
}

#[test]
fn binary_mode_refuses_what_it_cannot_trace() {
    require_root();
    let (status, _, stderr) = run_loader(&["--binary", "/nonexistent/emulator"]);
    assert!(!status.success());
    assert!(
        stderr.contains("cannot trace /nonexistent/emulator"),
        "{stderr}"
    );
    let (status, _, stderr) = run_loader(&["--binary", "/etc/passwd"]);
    assert!(!status.success());
    assert!(stderr.contains("is not a 64-bit ELF file"), "{stderr}");
}
