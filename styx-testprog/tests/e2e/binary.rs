//! `--binary PATH`: every process running the binary is traced, including
//! processes started after the loader attached, and only the selected
//! probes' semaphores are raised in them; with a command after `--`, the
//! processes it starts, until it exits.

use crate::support::*;
use std::collections::BTreeMap;
use std::process::Command;

#[test]
fn binary_mode_traces_every_process_started_later() {
    require_root();
    let dir = scratch("binary");
    let out = dir.join("traced.jsonl");
    let binary = testprog_of_its_own(&dir);
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

/// A copy of styx-testprog in `dir`: every process running the traced
/// binary counts, and other tests run styx-testprog meanwhile. `cp`, not
/// std::fs::copy, so that no process this one forks holds the new file
/// open for writing when it is executed (ETXTBSY).
fn testprog_of_its_own(dir: &std::path::Path) -> std::path::PathBuf {
    let binary = dir.join("styx-testprog");
    let copied = Command::new("cp")
        .arg(testprog_path())
        .arg(&binary)
        .status()
        .expect("running cp");
    assert!(copied.success(), "copying styx-testprog");
    binary
}

/// `--binary EMU -- CMD`: the processes the command starts that run the
/// binary (a script's children here, as `cargo run`'s would be) are traced
/// from their first instruction, until the command exits; the loader then
/// exits with the command's status.
#[test]
fn binary_mode_traces_what_a_command_starts_until_it_exits() {
    require_root();
    let dir = scratch("binary-command");
    let out = dir.join("traced.jsonl");
    let binary = testprog_of_its_own(&dir);
    let script = dir.join("run.sh");
    let run = |calls: u32| {
        format!(
            "printf 'fire {calls} 1\\nexit 0\\n' | {}\n",
            binary.display()
        )
    };
    write_program(
        &script,
        format!("#!/bin/sh\n{}{}exit 3\n", run(4), run(5)).as_bytes(),
    );
    let (status, _, stderr) = run_loader(&[
        "--binary",
        binary.to_str().unwrap(),
        "-e",
        "marker,mem_read",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--",
        script.to_str().unwrap(),
    ]);
    assert_eq!(status.code(), Some(3), "the command's exit code: {stderr}");
    assert!(stderr.contains("(process exited); 0 dropped"), "{stderr}");

    let mut by_pid: BTreeMap<u64, Vec<serde_json::Value>> = BTreeMap::new();
    for event in read_jsonl(&out) {
        by_pid
            .entry(event["pid"].as_u64().unwrap())
            .or_default()
            .push(event);
    }
    let mut mem_reads: Vec<usize> = by_pid
        .values()
        .map(|events| {
            assert_eq!(events[0]["text"], "testprog start", "{events:?}");
            events.iter().filter(|e| e["event"] == "mem_read").count()
        })
        .collect();
    mem_reads.sort();
    assert_eq!(mem_reads, [4, 5], "mem_reads per process: {stderr}");
}

/// A binary the command rebuilds before running it (as `cargo run` does
/// when a source changed) is a new file the kernel's uprobes do not reach:
/// the loader says so rather than leave an empty trace unexplained.
#[test]
fn binary_mode_says_when_the_command_replaced_the_binary() {
    require_root();
    let dir = scratch("binary-rebuilt");
    let binary = testprog_of_its_own(&dir);
    let script = dir.join("rebuild-and-run.sh");
    let b = binary.display();
    write_program(
        &script,
        format!(
            "#!/bin/sh\ncp {b} {b}.new && mv {b}.new {b}\nprintf 'fire 4 1\\nexit 0\\n' | {b}\n"
        )
        .as_bytes(),
    );
    let (status, _, stderr) = run_loader(&[
        "--binary",
        binary.to_str().unwrap(),
        "-e",
        "mem_read",
        "-o",
        "jsonl",
        "--output",
        dir.join("traced.jsonl").to_str().unwrap(),
        "--",
        script.to_str().unwrap(),
    ]);
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "warning: {b} was replaced while traced (rebuilt, as `cargo run` does when a \
             source changed)"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(" 0 events from every process running"),
        "{stderr}"
    );
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
