//! Bad input and hostile conditions: each gets one clear line and a non-zero
//! exit, or a counted, reported loss.

use crate::support::*;
use std::process::{Command, Stdio};

fn error_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.contains("error"))
        .unwrap_or_else(|| panic!("no error line in {stderr:?}"))
}

#[test]
fn no_such_pid() {
    require_root();
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id().to_string();
    gone.wait().unwrap();
    let (status, _, stderr) = run_loader(&["--pid", &pid]);
    assert!(!status.success());
    assert_eq!(
        error_line(&stderr),
        format!("styx-loader: error: no process with pid {pid}")
    );
}

/// A process without probes is followed (a library it maps later may have
/// them: see late_libraries.rs); the loader says what it has at once, and
/// if it exits having mapped none, fails saying so again.
#[test]
fn process_without_styx_probes_says_what_it_has() {
    require_root();
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let mut loader = spawn_loader(&["--pid", &sleeper.id().to_string()], Stdio::null());
    // Once attached (to nothing): the process is watched for its exit.
    let attached = loader.wait_for_line("attached");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    attached.unwrap_or_else(|e| panic!("{e}"));
    let (status, stderr) = loader.finish();
    let waiting = (stderr.iter())
        .find(|l| l.contains("waiting for a library"))
        .unwrap_or_else(|| panic!("{stderr:?}"));
    assert!(!status.success());
    for line in [waiting.as_str(), error_line(&stderr.join("\n"))] {
        assert!(line.contains("has no styx probes"), "{line}");
        assert!(line.contains("it has no USDT probes at all"), "{line}");
    }
    assert!(error_line(&stderr.join("\n")).contains("nothing was traced"));
}

#[test]
fn unknown_event_type_lists_the_known_ones() {
    let (status, _, stderr) = run_loader(&["--pid", "1", "-e", "mem_read,mem_reed"]);
    assert_eq!(status.code(), Some(2), "usage errors exit 2");
    assert!(stderr.contains("unknown event type 'mem_reed'"), "{stderr}");
    assert!(stderr.contains("insn_exec"), "{stderr}");
}

#[test]
fn unwritable_output_fails_before_attaching() {
    require_root();
    let mut prog = TestProg::spawn(None);
    let (status, _, stderr) = run_loader(&[
        "--pid",
        &prog.pid().to_string(),
        "--output",
        "/nonexistent-dir/trace.jsonl",
    ]);
    assert!(!status.success());
    let line = error_line(&stderr);
    assert!(
        line.contains("cannot write /nonexistent-dir/trace.jsonl"),
        "{line}"
    );
    assert!(!stderr.contains("attached"), "{stderr}");
    assert_eq!(prog.fire(5, 1).evaluated, 0);
    prog.quit();
}

#[test]
fn not_root_is_told_to_use_sudo() {
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(loader_path())
        .args(["--pid", "1"])
        .output()
        .expect("running setpriv (util-linux)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(error_line(&stderr).contains("run it with sudo"), "{stderr}");
}

#[test]
fn unknown_user_is_one_clear_line_before_anything_starts() {
    require_root();
    let testprog = testprog_path();
    let testprog = testprog.to_str().unwrap();
    for (args, says) in [
        (
            vec!["--user", "no-such-user-here", "--", testprog],
            "--user \"no-such-user-here\": no such user",
        ),
        (
            vec!["--user", "4000000000", "--", testprog],
            "--user 4000000000: no user has uid 4000000000",
        ),
        (
            vec!["--user", "nobody", "--pid", "1"],
            "--user is for a command given after `--`",
        ),
    ] {
        let (status, _, stderr) = run_loader(&args);
        assert_eq!(status.code(), Some(1), "{args:?}: {stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("attached"), "{stderr}");
    }
}

/// `list --pid` of another user's process: a permission problem, said so.
#[test]
fn list_of_another_users_process_says_permission() {
    require_root();
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(loader_path())
        .args(["list", "--pid", &pid])
        .output()
        .expect("running setpriv (util-linux)");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(
        error_line(&stderr),
        format!(
            "styx-loader: error: no permission to read the executable of pid {pid} \
             (another user's process: run it with sudo)"
        )
    );
}

#[test]
fn full_disk_is_an_error_with_a_count() {
    require_root();
    let mut prog = TestProg::spawn(None);
    let loader = prog.attach_loader(&["-o", "jsonl", "--output", "/dev/full"]);
    prog.fire(50, 1);
    let (status, stderr) = loader.finish_after(|| prog.fire(1, 1)).unwrap();
    assert!(!status.success(), "{stderr:?}");
    let stderr = stderr.join("\n");
    let line = error_line(&stderr);
    assert!(line.contains("writing events to /dev/full"), "{line}");
    assert!(line.contains("No space left on device"), "{line}");
    prog.quit();
}

#[test]
fn ring_full_drops_are_counted_and_reported() {
    require_root();
    let dir = scratch("drops");
    let out = dir.join("traced.jsonl");
    let mut prog = TestProg::spawn(None);
    let loader = prog.attach_loader(&[
        "-o",
        "jsonl",
        "--ring-size",
        "256K",
        // Writing a file, batches would wait for room by default.
        "--on-full",
        "drop",
        "--ebpf-log",
        "--output",
        out.to_str().unwrap(),
    ]);
    // A burst far larger than the ring (the least batched delivery takes:
    // three full batches) holds between two drains.
    let fired = prog.fire(20_000, 2);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    let received = read_jsonl(&out).len() as u64;
    let summary = summary_of(&stderr);
    let (line, dropped) = (&summary.line, summary.dropped);
    assert!(dropped > 0, "the ring must overflow: {line}");
    assert_eq!(
        received + dropped,
        fired.calls,
        "every event is received or counted as dropped"
    );
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("warning") && l.contains("larger --ring-size")),
        "{stderr:?}"
    );
}

/// `--on-full wait` where nothing can wait: per-event hits, and `--binary`
/// (processes come and go, none is told when to wait). One line each,
/// naming what does hold.
#[test]
fn waiting_where_nothing_can_wait_is_refused_in_one_line() {
    require_root();
    let prog = TestProg::spawn(None);
    let pid = prog.pid().to_string();
    let testprog = testprog_path();
    let binary = testprog.to_str().unwrap();
    for (args, says) in [
        (
            vec![
                "--pid",
                &pid,
                "--on-full",
                "wait",
                "--delivery",
                "per-event",
            ],
            "--on-full wait (--lossless) needs --delivery batched",
        ),
        (
            vec!["--pid", &pid, "--lossless", "--delivery", "per-event"],
            "--on-full wait (--lossless) needs --delivery batched",
        ),
        (
            vec!["--binary", binary, "--on-full", "wait"],
            "--on-full wait (--lossless) needs one process (--pid or a command after --)",
        ),
    ] {
        let (status, stdout, stderr) = run_loader(&args);
        assert!(!status.success() && stdout.is_empty(), "{args:?}: {stderr}");
        let line = error_line(&stderr);
        assert!(line.contains(says), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
    prog.quit();
}

#[test]
fn a_ring_too_small_for_batches_is_refused_in_one_line() {
    require_root();
    let prog = TestProg::spawn(None);
    let pid = prog.pid().to_string();
    let (status, _, stderr) = run_loader(&["--pid", &pid, "--ring-size", "64K"]);
    assert!(!status.success(), "{stderr}");
    let line = error_line(&stderr);
    assert!(
        line.contains("--ring-size 64K is too small for batched delivery")
            && line.contains("at least --ring-size 256K"),
        "{stderr}"
    );
    prog.quit();
}
