//! `--lossless` in every target mode: it holds from the first event of a
//! command started by the loader, never makes a forked child wait for
//! credit nobody grants it, and one loader alone holds it on a process.

use crate::support::*;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Kills process `pid` and its children if `done` is not set within
/// `limit`: a hang fails the test instead of stalling the suite.
fn kill_unless_done(pid: u32, limit: Duration, done: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if done.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Its children first: they hold its stdout open.
        for child in children_of(pid).into_iter().chain([pid]) {
            // SAFETY: signals a process this test started.
            unsafe { libc::kill(child as i32, libc::SIGKILL) };
        }
    });
}

/// The processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            (parent_of(pid)? == parent).then_some(pid)
        })
        .collect()
}

/// Process `pid`'s parent.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[test]
fn a_forked_child_never_waits_for_credit() {
    require_root();
    let mut prog = TestProg::spawn(None);
    let options = ["--lossless", "-o", "jsonl", "--output", "/dev/null"];
    let loader = prog.attach_loader(&[&BATCHED_SMALL_RING[..], &options].concat());
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
    children_of(parent)
        .into_iter()
        .find(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == program))
}

/// The events the test program says it fired (`evaluated=N` in its
/// answer to `quit`).
fn evaluated(stdout: &[u8]) -> u64 {
    let done = String::from_utf8_lossy(stdout);
    done.split_whitespace()
        .find_map(|w| w.strip_prefix("evaluated="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the program's answer: {done:?}"))
}

#[test]
fn lossless_holds_from_the_first_event_of_a_spawned_command() {
    require_root();
    // Each round gives a loader without the command's own claim a chance
    // to have found the command before it stops (~1 in 3 here): three
    // rounds, so that such a loader fails this test.
    for round in 0..3 {
        spawned_burst_loses_nothing(round);
    }
}

/// A loader stopped as soon as it has started the command, before it can
/// have looked at it; the command fires a burst through a ring of a few
/// batches: its batches wait for the loader all the same.
fn spawned_burst_loses_nothing(round: u32) {
    let out = scratch(&format!("lossless-spawn-{round}")).join("traced.jsonl");
    let mut loader = loader_command()
        .args(BATCHED_SMALL_RING)
        .args(["--lossless", "-o", "jsonl"])
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
    let mut stderr = BufReader::new(loader.stderr.take().unwrap());
    let mut said = Vec::new();
    loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "{said:#?}");
        said.push(line.trim_end().to_string());
        if line.contains("attached") {
            break;
        }
    }
    // SAFETY: signals our child.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    let stderr = lines_of(stderr);
    let deadline = Instant::now() + Duration::from_secs(1);
    while child_running(pid, &testprog_path()).is_none() {
        if Instant::now() > deadline {
            // Stopped before it let the command run: let it, and stop it
            // again once it has.
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
            eventually("the command runs", || {
                child_running(pid, &testprog_path()).is_some()
            });
            // SAFETY: as above.
            unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    writeln!(loader.stdin.take().unwrap(), "fire 2000 2\nquit").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: as above.
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    let output = loader.wait_with_output().unwrap();
    said.extend(stderr.iter());
    assert!(output.status.success(), "{said:#?}");
    let evaluated = evaluated(&output.stdout);
    assert_eq!(evaluated, 2000 * 2 * 8);
    let summary = summary_of(&said);
    assert_eq!(summary.dropped, 0, "round {round}: {said:#?}");
    assert_eq!(summary.events, evaluated, "{said:#?}");
    assert_eq!(read_jsonl(&out).len() as u64, evaluated);
}

#[test]
fn a_second_lossless_loader_on_a_process_is_refused() {
    require_root();
    let dir = scratch("lossless-second");
    let (expect, out) = (dir.join("expected.jsonl"), dir.join("traced.jsonl"));
    let mut prog = TestProg::spawn(Some(&expect));
    let options = [
        "--lossless",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ];
    let first = prog.attach_loader(&[&BATCHED_SMALL_RING[..], &options].concat());
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
        errors[0].contains(&format!("pid {pid} is already traced --on-full wait")),
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
        .filter(|l| l.contains("already traced --on-full wait"))
        .collect();
    assert_eq!(warned.len(), 1, "{stderr}");
    prog.quit();
    let (status, stderr) = first.finish();
    assert!(status.success(), "{stderr:#?}");
}

/// A copy of the test program whose flush block says (in the file) that
/// its batches are in layout `layout`: what a styx-probe of another layout
/// looks like to this loader.
fn with_batch_layout(layout: u16, dir: &std::path::Path) -> std::path::PathBuf {
    use styx_common::batch::LAYOUT_VERSION_OFFSET;
    let table = styx_usdt::note::read_probe_table(&testprog_path()).unwrap();
    let flush = table
        .sites
        .iter()
        .find(|s| s.is_batch_flush())
        .expect("the test program's flush site");
    let mut bytes = std::fs::read(testprog_path()).unwrap();
    let at = (flush.semaphore_offset + LAYOUT_VERSION_OFFSET) as usize;
    bytes[at..at + 2].copy_from_slice(&layout.to_le_bytes());
    let copy = dir.join("styx-testprog-other-layout");
    write_program(&copy, &bytes);
    copy
}

/// A command built with another batch layout takes lossless flow control
/// from the loader's environment all the same (its styx-probe cannot know
/// the loader's layout), so the loader must leave its flush site alone:
/// nothing listening there, it never waits for credit. Its events come one
/// hit each, all of them, and one line says why.
#[test]
fn a_command_with_batches_in_another_layout_is_traced_per_event_and_never_waits() {
    require_root();
    let other = styx_common::batch::BATCH_LAYOUT_VERSION + 1;
    for (round, mode) in [&["--lossless"][..], &[]].into_iter().enumerate() {
        let dir = scratch(&format!("lossless-layout-{round}"));
        let program = with_batch_layout(other, &dir);
        let out = dir.join("traced.jsonl");
        let mut loader = loader_command()
            .args(mode)
            .args(["-e", BATCHED, "-o", "jsonl", "--output"])
            .arg(&out)
            .arg("--")
            .arg(&program)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        kill_unless_done(loader.id(), Duration::from_secs(30), done.clone());
        writeln!(loader.stdin.take().unwrap(), "fire 500 2\nquit").unwrap();
        let output = loader.wait_with_output().unwrap();
        done.store(true, Ordering::Relaxed);
        let said: Vec<String> = String::from_utf8_lossy(&output.stderr)
            .lines()
            .map(str::to_string)
            .collect();
        assert!(
            output.status.success(),
            "{mode:?}: killed after 30 s or failed (the command waited for credit?): {said:#?}"
        );
        let layouts = format!("batches are in layout {other}, this loader reads layouts");
        assert!(said.iter().any(|l| l.contains(&layouts)), "{said:#?}");
        let evaluated = evaluated(&output.stdout);
        assert_eq!(evaluated, 500 * 2 * 8);
        let summary = summary_of(&said);
        assert_eq!(
            (summary.events, summary.dropped),
            (evaluated, 0),
            "{said:#?}"
        );
        assert_eq!(read_jsonl(&out).len() as u64, evaluated);
    }
}
