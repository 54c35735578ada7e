//! Interrupts are a batched type: appended to the thread's batch with its
//! other batched events, they arrive exactly and in order with them, and
//! wait in a partial batch as they do (a per-event interrupt would hand
//! the batch over first). bpftrace on their per-event sites counts what
//! the loader gets in batches; `--delivery per-event` still takes them one
//! probe hit each.

use crate::support::*;

/// Interrupts among three of the batched types styx-testprog fires before
/// them in each round (one event of each a round).
const WITH_INTERRUPTS: &str = "insn_exec,mem_read,branch,interrupt";

/// Events of [`WITH_INTERRUPTS`] a round fires.
const PER_ROUND: u64 = 4;

/// A program and a loader tracing it into JSON lines, with `args`.
fn traced(name: &str, args: &[&str]) -> (TestProg, Loader, std::path::PathBuf, std::path::PathBuf) {
    require_root();
    let dir = scratch(name);
    let (expect, out) = (dir.join("expected.jsonl"), dir.join("traced.jsonl"));
    let prog = TestProg::spawn(Some(&expect));
    let mut all = vec!["-o", "jsonl", "--output", out.to_str().unwrap()];
    all.extend_from_slice(args);
    let loader = prog.attach_loader(&all);
    (prog, loader, expect, out)
}

#[test]
fn batched_interrupts_arrive_exactly_and_in_order_with_the_threads_events() {
    let (mut prog, loader, expect, out) = traced("interrupts-batched", &["-e", WITH_INTERRUPTS]);
    // Only the batch-enable site: the high half of the word.
    assert_eq!(semaphores(prog.pid())["interrupt"], 1 << 16);
    // ~3,600 events a thread, ~81 KB: a full batch each, then part of one,
    // which waits with its interrupts until the threads exit.
    let parked = prog.fire_by("park 900 2");
    assert_eq!(parked.evaluated, 2 * 900 * PER_ROUND);
    eventually("full batches arrive while the threads wait", || {
        lines_in(&out) >= 2 * styx_common::batch::BATCH_BYTES / 32
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    let waiting = lines_in(&out);
    assert!(
        waiting < parked.evaluated as usize,
        "the rest waits in the threads' batches, interrupts too: {waiting} arrived"
    );
    prog.ask("unpark");
    eventually("thread exits hand over the rest", || {
        lines_in(&out) == parked.evaluated as usize
    });
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    assert_eq!(
        assert_every_event_arrived(&expect, &out),
        parked.evaluated as usize
    );
    let summary = summary_of(&stderr);
    assert_eq!(summary.events_of("interrupt"), 2 * 900, "{stderr:?}");
    assert!(summary.line.contains("; 0 dropped"), "{}", summary.line);
    // Entries and exits alternate; each carries its number and both pcs.
    let irqs: Vec<_> = read_jsonl(&out)
        .into_iter()
        .filter(|e| e["event"] == "interrupt")
        .collect();
    assert_eq!(irqs.len(), 1800);
    assert!(irqs.iter().any(|e| e["kind"] == "entry"));
    assert!(irqs.iter().any(|e| e["kind"] == "exit"));
}

#[test]
fn bpftrace_on_the_per_event_sites_counts_what_the_loader_gets_in_batches() {
    let (mut prog, loader, expect, out) = traced("interrupts-bpftrace", &["-e", "interrupt"]);
    let pid = prog.pid();
    let sites = sites_per_probe(pid)["interrupt"];
    let bpftrace = bpftrace_attached(
        pid,
        "usdt::styx:interrupt { @irqs = count(); @nums = sum(arg1); @exits = sum(arg0); }",
        sites,
    );
    // bpftrace's per-event sites in the low half, the loader's batch-enable
    // site in the high half.
    assert_eq!(semaphores(pid)["interrupt"], sites + (1 << 16));
    let fired = prog.fire(500, 1);
    assert_eq!(fired.evaluated, 500);
    let printed = stop_bpftrace(bpftrace);
    // Round i: number i % 3, an exit (1) on odd rounds.
    let nums: u64 = (0..500u64).map(|i| i % 3).sum();
    for line in ["@irqs: 500", &format!("@nums: {nums}"), "@exits: 250"] {
        assert!(printed.contains(line), "{line}: {printed}");
    }
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    assert_eq!(
        summary_of(&stderr).events_of("interrupt"),
        500,
        "{stderr:?}"
    );
    assert_eq!(assert_every_event_arrived(&expect, &out), 500);
}

#[test]
fn per_event_delivery_still_takes_interrupts_one_hit_each() {
    let (mut prog, loader, expect, out) = traced(
        "interrupts-per-event",
        &["--delivery", "per-event", "-e", WITH_INTERRUPTS],
    );
    let pid = prog.pid();
    // Every per-event site, no batch-enable site.
    assert_eq!(
        semaphores(pid)["interrupt"],
        sites_per_probe(pid)["interrupt"]
    );
    // Each one a record of its own: all here while the threads wait.
    let parked = prog.fire_by("park 200 2");
    assert_eq!(parked.evaluated, 2 * 200 * PER_ROUND);
    eventually("every event arrives while the threads wait", || {
        lines_in(&out) == parked.evaluated as usize
    });
    prog.ask("unpark");
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    assert_eq!(
        assert_every_event_arrived(&expect, &out),
        parked.evaluated as usize
    );
    assert_eq!(
        summary_of(&stderr).events_of("interrupt"),
        400,
        "{stderr:?}"
    );
}
