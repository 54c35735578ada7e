//! A hostile emulator (tests/c/forged_batches.c: styx-probe's flush site and
//! block written by hand) hands over batches no honest styx-probe makes:
//! nothing it does hides other batches' events silently, grows the loader
//! without bound, or stops the loader reading the threads' pending batches.

use crate::support::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use styx_common::batch::{BATCH_BYTES, BATCH_LAYOUT_VERSION, BATCH_MAGIC, REGISTRY_SLOTS};
use styx_common::item::{event_tag, TIME_TAG};
use styx_common::{EventKind, EVENT_KIND_SLOTS};

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/forged_batches.c");

/// The program, built once per test run with the layout's constants.
fn program() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build("forged_batches", BATCH_LAYOUT_VERSION, BATCH_BYTES))
}

/// The program as styx-probe's layout 3 made it: 16 KiB buffers, a flush
/// probe of five arguments.
fn layout_3_program() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| build("forged_batches_layout_3", 3, 16 * 1024))
}

fn build(name: &str, layout: u16, batch_bytes: usize) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let defines = [
        format!("-DLAYOUT_VERSION={layout}"),
        format!("-DREGISTRY_SLOTS={REGISTRY_SLOTS}"),
        format!("-DBATCH_BYTES={batch_bytes}"),
        format!("-DBATCH_MAGIC={BATCH_MAGIC:#x}"),
        format!("-DINSN_EXEC={}", EventKind::InsnExec as u8),
        format!("-DKIND_SLOTS={EVENT_KIND_SLOTS}"),
        format!(
            "-DINSN_EXEC_TAG={:#x}",
            event_tag(EventKind::InsnExec, &[8, 8, 1])
        ),
        format!("-DTIME_TAG={TIME_TAG}"),
    ];
    let mut args: Vec<&str> = defines.iter().map(String::as_str).collect();
    args.extend([
        "-O2",
        "-Wall",
        "-Werror",
        "-o",
        out.to_str().unwrap(),
        SOURCE,
    ]);
    cc(&args);
    out
}

/// The forged program traced (`-e insn_exec`, jsonl to a file).
struct Forged {
    prog: TestProg,
    loader: Loader,
    out: PathBuf,
}

fn forged(name: &str) -> Forged {
    forged_to("jsonl", scratch(name).join("traced.jsonl"))
}

fn forged_to(format: &str, out: PathBuf) -> Forged {
    forged_program(program(), format, out)
}

fn forged_program(program: &Path, format: &str, out: PathBuf) -> Forged {
    require_root();
    let prog = TestProg::start(program, &[]);
    let args = [
        "-e",
        "insn_exec",
        "-o",
        format,
        "--output",
        out.to_str().unwrap(),
    ];
    let loader = prog.attach_loader(&args);
    Forged { prog, loader, out }
}

impl Forged {
    /// Runs a forging command; the events it says the loader should deliver.
    fn forge(&mut self, command: &str) -> u64 {
        let answer = self.prog.ask(command);
        let events = answer
            .trim()
            .rsplit_once("events=")
            .and_then(|(_, n)| n.parse().ok());
        events.unwrap_or_else(|| panic!("{command}: answered {answer:?}"))
    }

    /// Ends the program, then the loader with it: (pcs traced, stderr).
    fn finish(self) -> (Vec<u64>, Vec<String>) {
        self.prog.quit();
        let (status, stderr) = self.loader.finish();
        assert!(status.success(), "{stderr:#?}");
        (pcs(&self.out), stderr)
    }
}

fn pcs(out: &Path) -> Vec<u64> {
    read_jsonl(out)
        .iter()
        .map(|e| e["pc"].as_u64().expect("an insn_exec"))
        .collect()
}

/// Every event delivered exactly once: `n` of them, all different.
fn assert_each_once(pcs: &[u64], n: u64, stderr: &[String]) {
    let distinct: BTreeSet<u64> = pcs.iter().copied().collect();
    assert_eq!(pcs.len() as u64, n, "events delivered: {stderr:#?}");
    assert_eq!(distinct.len() as u64, n, "each once: {stderr:#?}");
}

/// The stderr lines containing `needle`.
fn lines_with<'a>(stderr: &'a [String], needle: &str) -> Vec<&'a String> {
    stderr.iter().filter(|l| l.contains(needle)).collect()
}

#[test]
fn batch_numbers_going_backwards_hide_nothing_and_are_reported() {
    let mut forged = forged("forged-backwards");
    let n = forged.forge("backwards 40 10");
    let (pcs, stderr) = forged.finish();
    assert_each_once(&pcs, n, &stderr);
    let warned = lines_with(&stderr, "out of order");
    assert_eq!(warned.len(), 1, "{stderr:#?}");
    assert!(warned[0].contains("39 batch"), "{stderr:#?}");
}

#[test]
fn a_batch_number_reused_with_other_contents_is_kept_and_reported() {
    let mut forged = forged("forged-conflict");
    // Seq 5 twice with different bytes: both kept. Then seq 7 twice with
    // the same bytes: a repeat, given once and not reported.
    let n = forged.forge("conflict 10") + forged.forge("repeat 10");
    let (pcs, stderr) = forged.finish();
    assert_each_once(&pcs, n, &stderr);
    let warned = lines_with(&stderr, "other contents");
    assert_eq!(warned.len(), 1, "{stderr:#?}");
    assert!(warned[0].contains("1 batch record with"), "{stderr:#?}");
}

#[test]
fn two_buffers_of_one_thread_id_are_told_apart() {
    // What a thread id coming round again looks like: a buffer whose
    // batch numbers are lower than the last one's with that id.
    let mut forged = forged("forged-reused-tid");
    let n = forged.forge("reused-tid 10");
    let (pcs, stderr) = forged.finish();
    assert_each_once(&pcs, n, &stderr);
    assert!(lines_with(&stderr, "warning").is_empty(), "{stderr:#?}");
}

#[test]
fn a_corrupt_registry_slot_skips_only_itself() {
    let mut forged = forged("forged-registry");
    let n = forged.forge("registry 10");
    // Stopping reads the registry: garbage, an unmapped address, a buffer
    // listed twice, a gap, and the two buffers with pending events.
    forged.loader.signal(libc::SIGINT);
    let Forged { prog, loader, out } = forged;
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    prog.quit();
    assert_each_once(&pcs(&out), n, &stderr);
    let warned = lines_with(&stderr, "registry");
    assert_eq!(warned.len(), 1, "{stderr:#?}");
    assert!(warned[0].contains("3 slots"), "{stderr:#?}");
}

/// An emulator built with styx-probe's layout 3 (16 KiB batches, the flush
/// probe without its sixth argument): its batches, a near-full one too,
/// and the pending batches its registry lists are all taken, each once.
#[test]
fn an_emulator_of_layout_3_is_traced_whole() {
    let out = scratch("forged-layout-3").join("traced.jsonl");
    let mut forged = forged_program(layout_3_program(), "jsonl", out.clone());
    // 800 events of 19 bytes: a batch of ~15 KiB.
    let n = forged.forge("repeat 800");
    let pending = forged.forge("registry 10");
    forged.loader.signal(libc::SIGINT);
    let Forged { prog, loader, .. } = forged;
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    prog.quit();
    assert_each_once(&pcs(&out), n + pending, &stderr);
    assert!(
        lines_with(&stderr, "batch layout").is_empty(),
        "{stderr:#?}"
    );
}

/// The peak memory (VmHWM) of process `pid`, in KiB; None once it has
/// exited (a zombie has no memory).
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn made_up_thread_ids_do_not_grow_the_loader() {
    // 300,000 batches of one event, each naming a thread of its own, in
    // chunks the loader takes before the next (none is lost to a full
    // ring). It once kept ~25 bytes for each thread id ever seen (a table
    // of 13 MB by the end, 19 MB at its peak); now it remembers the
    // buffers heard from lately, as many after 100,000 ids as after
    // 300,000. JSON lines, written as they come (a capture writes whole
    // blocks), count what was written.
    const CHUNK: u64 = 10_000;
    let out = scratch("forged-tids").join("run.jsonl");
    let mut forged = forged_to("jsonl", out.clone());
    let pid = forged.loader.pid();
    let lines =
        || std::fs::read(&out).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count() as u64);
    let mut after_100k = 0;
    for chunk in 0..30 {
        let n = forged.forge(&format!("tids {CHUNK} {}", chunk * CHUNK));
        assert_eq!(n, CHUNK);
        let want = CHUNK * (chunk + 1);
        eventually("the chunk is written", || lines() >= want);
        assert_eq!(lines(), want, "every batch of the chunk, once");
        if chunk == 9 {
            after_100k = peak_kib(pid).expect("the loader runs");
        }
    }
    let at_end = peak_kib(pid).expect("the loader runs");
    forged.prog.quit();
    let (status, stderr) = forged.loader.finish();
    assert!(status.success(), "{stderr:#?}");
    let summary = summary_of(&stderr);
    assert_eq!(
        (summary.events, summary.dropped),
        (30 * CHUNK, 0),
        "{stderr:#?}"
    );
    let grown = at_end.saturating_sub(after_100k);
    assert!(
        grown < 4 * 1024,
        "the loader grew by {grown} KiB from 100,000 to 300,000 thread ids"
    );
}
