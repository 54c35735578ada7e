//! Several tracers on the same probes at once each see every event (two
//! batched styx-loaders and bpftrace on the per-event sites), and leave the
//! semaphores at 0 when they are all gone.

use crate::support::*;

#[test]
fn two_loaders_and_bpftrace_on_one_process_each_see_every_event() {
    require_root();
    let mut prog = TestProg::spawn(None);
    let pid = prog.pid();
    let sites = sites_per_probe(pid)["mem_read"];
    let args = ["--pid", &pid.to_string(), "-e", "mem_read", "-o", "jsonl"];
    let first = attach_loader(&args);
    let second = attach_loader(&args);
    let bpftrace = bpftrace_attached(pid, "usdt::styx:mem_read { @events = count(); }", sites);
    // bpftrace's per-event sites in the low half, the batch-enable site in
    // the high half: one reference per attached site, however many
    // tracers share it.
    assert_eq!(semaphores(pid)["mem_read"], sites + (1 << 16));
    let fired = prog.fire(500, 1);
    let expected_reads = 500;
    assert!(fired.evaluated > 0);

    let printed = stop_bpftrace(bpftrace);
    assert!(
        printed.contains(&format!("@events: {expected_reads}")),
        "{printed}"
    );
    for loader in [first, second] {
        loader.signal(libc::SIGINT);
        let (status, stderr) = loader.finish();
        assert!(status.success(), "{stderr:?}");
        assert_eq!(
            summary_of(&stderr).events_of("mem_read"),
            expected_reads,
            "{stderr:?}"
        );
    }
    eventually("every semaphore is back to 0", || {
        semaphores(pid).values().all(|v| *v == 0)
    });
    prog.quit();
}
