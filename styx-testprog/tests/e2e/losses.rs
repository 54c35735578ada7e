//! Losses that say why: a burst the ring could not hold is named a burst
//! (a larger --ring-size helps), an output slower than the emulator is
//! named so (waiting, a raw capture or fewer events help; a larger ring
//! cannot), and an output whose result a loss makes wrong says so.

use crate::support::*;
use std::io::Read;
use styx_common::summary::LossCause;

/// The loader's warning lines containing `what`.
fn warnings<'a>(stderr: &'a [String], what: &str) -> Vec<&'a String> {
    stderr
        .iter()
        .filter(|l| l.starts_with("styx-loader: warning:") && l.contains(what))
        .collect()
}

#[test]
fn a_burst_through_a_small_ring_is_named_a_burst() {
    require_root();
    let out = scratch("losses-burst").join("traced.drcov");
    let mut prog = TestProg::spawn(None);
    // Markers, one kernel trap each, in a burst of a few ms into a ring of
    // a few records; the loader is idle before and after.
    let loader = prog.attach_loader(&[
        "-e",
        "marker,insn_exec",
        "--delivery",
        "per-event",
        "--ring-size",
        "4K",
        "-o",
        "drcov",
        "--output",
        out.to_str().unwrap(),
    ]);
    prog.fire(2000, 1);
    std::thread::sleep(std::time::Duration::from_millis(300));
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    let summary = summary_of(&stderr);
    assert!(summary.dropped > 0, "{stderr:#?}");
    let loss = summary.loss.as_ref().expect("a loss says why");
    assert_eq!(loss.cause, LossCause::Burst, "{stderr:#?}");
    assert_eq!(loss.batched, 0, "per-event delivery: {loss:?}");
    let said = warnings(&stderr, "in bursts the ring buffer could not hold");
    assert_eq!(said.len(), 1, "{stderr:#?}");
    assert!(
        said[0].contains("a larger --ring-size (now 4K) holds longer bursts"),
        "{said:?}"
    );
    assert!(!said[0].contains("cannot help"), "{said:?}");
    // Coverage with holes says so.
    assert_eq!(
        warnings(&stderr, "-o drcov: the coverage misses").len(),
        1,
        "{stderr:#?}"
    );
}

#[test]
fn an_output_slower_than_the_emulator_is_named_so() {
    require_root();
    let mut prog = TestProg::spawn(None);
    // JSON lines to a pipe nobody reads while the emulator fires: the
    // loader blocks writing (busy), the ring fills, batches are dropped (a
    // pipe: the emulator does not wait by default).
    let (loader, mut stdout) = jsonl_to_a_pipe(&prog, &[]);
    prog.fire(20_000, 1);
    // The loader stays blocked a while: most of the time in which events
    // were dropped, whatever the burst took.
    std::thread::sleep(std::time::Duration::from_millis(300));
    prog.quit();
    let reader = std::thread::spawn(move || {
        let mut sink = Vec::new();
        stdout.read_to_end(&mut sink).unwrap();
    });
    let (status, stderr) = loader.finish();
    reader.join().unwrap();
    assert!(status.success(), "{stderr:#?}");
    let summary = summary_of(&stderr);
    assert!(summary.dropped > 0, "{stderr:#?}");
    let loss = summary.loss.as_ref().expect("a loss says why");
    assert_eq!(loss.cause, LossCause::Sustained, "{stderr:#?}");
    assert!(!loss.waited && loss.batched > 0, "{loss:?}");
    let said = warnings(&stderr, "because the output is slower than the emulator");
    assert_eq!(said.len(), 1, "{stderr:#?}");
    for helps in [
        "a larger --ring-size cannot help",
        "--on-full wait",
        "-o raw --output FILE",
        "-e, --filter",
    ] {
        assert!(said[0].contains(helps), "{helps}: {said:?}");
    }
    // JSON lines are not an output a loss makes wrong, only shorter.
    assert!(warnings(&stderr, "-o jsonl:").is_empty(), "{stderr:#?}");
}

#[test]
fn an_emulator_that_waited_for_the_output_is_told_how_long_and_why() {
    require_root();
    let mut prog = TestProg::spawn(None);
    // As above, but the emulator waits for the loader (--on-full wait):
    // nothing is dropped, and the emulator is held while nobody reads.
    let (loader, mut stdout) = jsonl_to_a_pipe(&prog, &["--on-full", "wait"]);
    // The emulator waits until the output is read: the reader starts late.
    let reader = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let mut sink = Vec::new();
        stdout.read_to_end(&mut sink).unwrap();
    });
    let fired = prog.fire(20_000, 1);
    prog.quit();
    let (status, stderr) = loader.finish();
    reader.join().unwrap();
    assert!(status.success(), "{stderr:#?}");
    let summary = summary_of(&stderr);
    assert_eq!(summary.dropped, 0, "{stderr:#?}");
    assert_eq!(summary.events, fired.evaluated, "{stderr:#?}");
    let waited = summary
        .waited
        .as_ref()
        .expect("flow control: a wait is measured");
    assert!(
        waited.seconds >= 0.2 && waited.seconds <= summary.seconds + 0.01,
        "held while nobody read for 300 ms: {waited:?} of {} s",
        summary.seconds
    );
    assert_eq!(
        (waited.output.as_str(), waited.compressing),
        ("jsonl", false)
    );
    let said: Vec<_> = (stderr.iter())
        .filter(|l| l.contains("the emulator waited for the loader"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr:#?}");
    for helps in [
        "nothing was dropped",
        "-o raw --output FILE",
        "-e, --filter",
        "--on-full drop",
    ] {
        assert!(said[0].contains(helps), "{helps}: {said:?}");
    }
    // Not a loss: no warning.
    assert!(warnings(&stderr, "dropped").is_empty(), "{stderr:#?}");
}
