//! End to end: styx-testprog fires a known sequence, styx-loader traces it
//! with real eBPF programs, and what comes out must match what went in.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeSet;

#[test]
fn every_event_type_arrives_exactly_as_fired_through_multi_links() {
    every_event_type_arrives_exactly_as_fired("multi");
}

#[test]
fn every_event_type_arrives_exactly_as_fired_through_per_site_links() {
    every_event_type_arrives_exactly_as_fired("per-site");
}

fn every_event_type_arrives_exactly_as_fired(attach: &str) {
    require_root();
    let dir = scratch(&format!("exact-{attach}"));
    let (expect, out) = (dir.join("expected.jsonl"), dir.join("traced.jsonl"));
    let mut prog = TestProg::spawn(Some(&expect));
    let loader = prog.attach_loader(&[
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--attach",
        attach,
    ]);

    // Moderate rate: 2 threads × 2,000 rounds × 15+ events.
    let fired = prog.fire(2000, 2);
    assert_eq!(
        fired.evaluated, fired.calls,
        "every probe call should evaluate its closure while attached"
    );
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "loader failed: {}", stderr.join("\n"));

    let expected = read_jsonl(&expect);
    let traced = read_jsonl(&out);
    assert_eq!(expected.len() as u64, fired.calls);
    assert_eq!(
        traced.len(),
        expected.len(),
        "events received vs fired; loader said:\n{}",
        stderr.join("\n")
    );
    let (expected, traced) = (by_tid(expected), by_tid(traced));
    assert_eq!(expected.len(), 2, "two firing threads");
    for (tid, want) in &expected {
        let got = traced
            .get(tid)
            .unwrap_or_else(|| panic!("no events from thread {tid}"));
        for (i, (w, g)) in want.iter().zip(got).enumerate() {
            assert_eq!(g, w, "thread {tid}, event {i}");
        }
    }
    let kinds: BTreeSet<&str> = traced
        .values()
        .flatten()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.len(),
        styx_types(),
        "every event type seen: {kinds:?}"
    );

    let summary = summary_of(&stderr).line;
    assert!(
        summary.contains(&format!("{} events", fired.calls)),
        "{summary}"
    );
    assert!(summary.contains("; 0 dropped"), "{summary}");
    assert!(summary.contains("process exited"), "{summary}");
}

#[test]
fn closures_run_only_for_attached_event_types() {
    require_root();
    let mut prog = TestProg::spawn(None);
    let detached = prog.fire(100, 1);
    assert!(detached.calls > 1000);
    assert_eq!(detached.evaluated, 0, "no closure may run while detached");

    let loader = prog.attach_loader(&["-e", "mem_read,marker", "-o", "jsonl"]);
    let attached = prog.fire(100, 1);
    // One mem_read and one marker per round, plus a long marker every 16 rounds.
    assert_eq!(attached.evaluated, 100 + 100 + 7);

    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    assert_eq!(
        prog.fire(100, 1).evaluated,
        0,
        "closures stop once detached"
    );
    prog.quit();
}

#[test]
fn semaphores_drop_to_zero_after_exit_and_after_sigkill_multi_links() {
    semaphores_drop_to_zero_after_exit_and_after_sigkill("multi");
}

#[test]
fn semaphores_drop_to_zero_after_exit_and_after_sigkill_per_site_links() {
    semaphores_drop_to_zero_after_exit_and_after_sigkill("per-site");
}

fn semaphores_drop_to_zero_after_exit_and_after_sigkill(attach: &str) {
    require_root();
    let mut prog = TestProg::spawn(None);
    let pid = prog.pid();
    let all_zero = || semaphores(pid).values().all(|v| *v == 0);
    let before = semaphores(pid);
    assert_eq!(
        before.len(),
        styx_types(),
        "a semaphore per probe: {before:?}"
    );
    assert!(all_zero(), "{before:?}");

    for (signal, how) in [(libc::SIGINT, "Ctrl-C"), (libc::SIGKILL, "SIGKILL")] {
        let loader = prog.attach_loader(&["-o", "jsonl", "--attach", attach]);
        // The kernel counts one reference per attached site: per-event
        // sites in the low half, batch-enable sites in the high half.
        let raised = semaphores(pid);
        assert_eq!(raised, words_of_one_batched_loader(pid), "attached");
        loader.signal(signal);
        let _ = loader.finish();
        eventually(&format!("semaphores are 0 after {how}"), all_zero);
        assert!(prog.is_running(), "the traced process survives {how}");
        assert_eq!(prog.fire(10, 1).evaluated, 0);
    }
    prog.quit();
}

#[test]
fn duration_stops_tracing_and_text_output_is_readable() {
    require_root();
    let mut prog = TestProg::spawn(None);
    let pid = prog.pid().to_string();
    let mut loader = spawn_loader(
        &["--pid", &pid, "-e", "mem_write,branch", "--duration", "1.5"],
        std::process::Stdio::piped(),
    );
    loader.wait_for_line("attached").unwrap();
    prog.fire(20, 1);
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut loader.child.stdout.take().unwrap(), &mut stdout).unwrap();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    assert!(
        stderr.iter().any(|l| l.contains("duration reached")),
        "{stderr:?}"
    );
    assert!(prog.is_running());
    prog.quit();

    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 40, "{stdout}");
    assert!(
        lines[0].contains("mem_write") && lines[0].contains("addr=0x40000001"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("branch") && lines[1].contains(" jump"),
        "{}",
        lines[1]
    );
    assert!(lines.iter().any(|l| l.contains("return_from_interrupt")));
}

#[test]
fn closed_stdout_pipe_ends_quietly() {
    require_root();
    let mut prog = TestProg::spawn(None);
    let pid = prog.pid().to_string();
    let mut loader = spawn_loader(
        &["--pid", &pid, "-o", "jsonl"],
        std::process::Stdio::piped(),
    );
    loader.wait_for_line("attached").unwrap();
    prog.fire(10, 1);
    // Read one line, then close the pipe like `| head -n 1`.
    let mut reader = std::io::BufReader::new(loader.child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut reader, &mut first).unwrap();
    drop(reader);
    let (status, stderr) = loader.finish_after(|| prog.fire(10, 1)).unwrap();
    assert!(serde_json::from_str::<Value>(&first).is_ok(), "{first}");
    assert!(status.success(), "{status}: {}", stderr.join("\n"));
    assert!(!stderr.iter().any(|l| l.contains("error")), "{stderr:?}");
    prog.quit();
}

/// A child forked while a per-event tracer is attached runs its parent's
/// code, probe sites included, and must survive firing them. It is why
/// styx-probe's site stays a 1-byte `nop` (README, "Why the site is a
/// 1-byte nop"): Linux 6.18 rewrites a uprobe on a 5-byte nop into a
/// `call` to a `[uprobes-trampoline]` page it does not copy into a forked
/// child, while the child keeps the rewritten text: its first hit died
/// with SIGSEGV when the sites were 5-byte nops. (Batched delivery's
/// flush site: `lossless::a_forked_child_never_waits_for_credit`.)
#[test]
fn a_forked_child_survives_the_sites_its_parent_was_traced_at() {
    require_root();
    let mut prog = TestProg::spawn(None);
    let loader = prog.attach_loader(&[
        "-e",
        "mem_read",
        "--delivery",
        "per-event",
        "-o",
        "raw",
        "--output",
        "/dev/null",
    ]);
    // Hit the parent's site first: a kernel that optimizes it does so now.
    prog.fire(2, 1);
    let answer = prog.ask("fork-child 1");
    assert_eq!(
        answer.trim(),
        "forked status=0",
        "the forked child died firing mem_read (status 11: SIGSEGV)"
    );
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "loader failed: {}", stderr.join("\n"));
}
