//! `--lossless` in every target mode: it holds from the first event of a
//! command started by the loader, never makes a forked child wait for
//! credit nobody grants it, and one loader alone holds it on a process.

use crate::support::*;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The event types styx-probe batches.
const BATCHED: &str = "insn_fetch,insn_exec,block,mem_read,mem_write,reg_read,reg_write,branch";

/// Kills process `pid` if `done` is not set within `limit`: a hang fails
/// the test instead of stalling the suite.
fn kill_unless_done(pid: u32, limit: Duration, done: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if done.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: signals a child of this test.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
}

#[test]
fn a_forked_child_never_waits_for_credit() {
    require_root();
    let mut prog = TestProg::spawn(None);
    let loader = prog.attach_loader(&[
        "-e",
        BATCHED,
        "--ring-size",
        "64K",
        "--lossless",
        "-o",
        "jsonl",
        "--output",
        "/dev/null",
    ]);
    // The loader lags (stopped): a thread of the program flushing batch
    // after batch reaches the end of its credit and waits. Then the program
    // forks, and its child (a copy of the block, credit used up) flushes
    // too: no loader will ever grant it credit (this one takes only the
    // parent's batches).
    loader.signal(libc::SIGSTOP);
    let done = Arc::new(AtomicBool::new(false));
    kill_unless_done(prog.pid(), Duration::from_secs(15), done.clone());
    let answer = prog.ask("fork-child 50");
    done.store(true, Ordering::Relaxed);
    loader.signal(libc::SIGCONT);
    assert_eq!(
        answer.trim(),
        "forked status=0",
        "the program was killed after 15 s: its child waited for credit"
    );
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    assert_eq!(summary_of(&stderr).dropped, 0, "{stderr:#?}");
}

/// The process `parent` started running `program`, once it runs it.
fn child_running(parent: u32, program: &std::path::Path) -> Option<u32> {
    let program = program.canonicalize().ok()?;
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid: u32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
            (ppid == parent && exe == program).then_some(pid)
        })
}

#[test]
fn lossless_holds_from_the_first_event_of_a_spawned_command() {
    require_root();
    let out = scratch("lossless-spawn").join("traced.jsonl");
    let mut loader = Command::new(loader_path())
        .args([
            "--lossless",
            "--ring-size",
            "64K",
            "-e",
            BATCHED,
            "-o",
            "jsonl",
        ])
        .arg("--output")
        .arg(&out)
        .arg("--")
        .arg(testprog_path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = loader.id();
    let stderr = lines_of(loader.stderr.take().unwrap());
    let mut said = Vec::new();
    while let Ok(line) = stderr.recv_timeout(Duration::from_secs(60)) {
        let attached = line.contains("attached");
        said.push(line);
        if attached {
            break;
        }
    }
    // The loader stops as soon as it has started the command, before it
    // can have looked at it: the command's first batches must wait for it
    // all the same.
    // SAFETY: signals our child.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    let deadline = Instant::now() + Duration::from_secs(1);
    while child_running(pid, &testprog_path()).is_none() {
        if Instant::now() > deadline {
            // Stopped before it let the command run: let it, and stop it
            // again once it has.
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
            eventually("the command runs", || {
                child_running(pid, &testprog_path()).is_some()
            });
            unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // A burst through a ring of a few batches, while the loader is stopped.
    writeln!(loader.stdin.take().unwrap(), "fire 2000 2\nquit").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: as above.
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    let output = loader.wait_with_output().unwrap();
    said.extend(stderr.iter());
    assert!(output.status.success(), "{said:#?}");
    let done = String::from_utf8_lossy(&output.stdout);
    let evaluated: u64 = done
        .split_whitespace()
        .find_map(|w| w.strip_prefix("evaluated="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the program's answer: {done:?}"));
    assert_eq!(evaluated, 2000 * 2 * 8);
    let summary = summary_of(&said);
    assert_eq!(summary.dropped, 0, "{said:#?}");
    assert_eq!(summary.events, evaluated, "{said:#?}");
    assert_eq!(read_jsonl(&out).len() as u64, evaluated);
}

#[test]
fn a_second_lossless_loader_on_a_process_is_refused() {
    require_root();
    let dir = scratch("lossless-second");
    let (expect, out) = (dir.join("expected.jsonl"), dir.join("traced.jsonl"));
    let mut prog = TestProg::spawn(Some(&expect));
    let first = prog.attach_loader(&[
        "-e",
        BATCHED,
        "--ring-size",
        "64K",
        "--lossless",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ]);
    let pid = prog.pid().to_string();
    let (status, _, stderr) = run_loader(&[
        "--pid",
        &pid,
        "-e",
        BATCHED,
        "--lossless",
        "-d",
        "1",
        "-o",
        "jsonl",
        "--output",
        "/dev/null",
    ]);
    assert!(!status.success(), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains(&format!("pid {pid} is already traced --lossless")),
        "{stderr}"
    );
    // The first one still holds the emulator to its pace: nothing lost.
    let fired = prog.fire(3000, 2);
    prog.quit();
    let (status, stderr) = first.finish();
    assert!(status.success(), "{stderr:#?}");
    let summary = summary_of(&stderr);
    assert_eq!(summary.dropped, 0, "{stderr:#?}");
    assert_eq!(summary.events, fired.evaluated, "{stderr:#?}");
    assert_eq!(read_jsonl(&out).len(), read_jsonl(&expect).len());
}

/// `top` takes flow control when it can, and counts without it (drops
/// reported) when another loader holds it.
#[test]
fn top_beside_a_lossless_loader_runs_without_flow_control() {
    require_root();
    let prog = TestProg::spawn(None);
    let first = prog.attach_loader(&[
        "-e",
        BATCHED,
        "--lossless",
        "-o",
        "jsonl",
        "--output",
        "/dev/null",
    ]);
    let pid = prog.pid().to_string();
    let (status, _, stderr) = run_loader(&["top", "--pid", &pid, "-d", "0.2", "-e", "insn_exec"]);
    assert!(status.success(), "{stderr}");
    let warned: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("already traced --lossless"))
        .collect();
    assert_eq!(warned.len(), 1, "{stderr}");
    prog.quit();
    let (status, stderr) = first.finish();
    assert!(status.success(), "{stderr:#?}");
}
