//! `styx_probe::enabled` / `any_enabled`: what the program sees of the
//! tracers attached to it, checked against a real styx-loader.

use crate::support::*;

#[test]
fn probes_report_which_event_types_are_traced() {
    require_root();
    let mut prog = TestProg::spawn(None);
    assert_eq!(prog.enabled(), (false, String::new()), "before attaching");

    let loader = prog.attach_loader(&["-e", "mem_read,marker", "--output", "/dev/null"]);
    assert_eq!(prog.enabled(), (true, "mem_read,marker".to_string()));

    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    // The kernel lowers the semaphores as the links go.
    eventually("no probe enabled after detaching", || {
        prog.enabled() == (false, String::new())
    });
    prog.quit();
}
