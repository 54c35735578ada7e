//! `cargo xtask demo`: the 6502 demo emulator, traced by styx-loader. First
//! its rare events as text; then every event of a second recorded into a
//! raw capture with the loader's defaults (writing a file, batched events
//! wait for room in the ring: nothing is lost), and a short summary of it;
//! then windows of the capture converted with `styx-loader read --from
//! --to`: a millisecond as JSON lines, ten as a Perfetto trace. What is
//! recorded and converted is in the consts below.

use anyhow::{Context, Result};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use styx_testkit::{demo_recording, Loader, Summary};

/// Events shown on the terminal: the ones a person can follow.
const SHOWN: &str = "interrupt,control,span_begin,span_end,marker";
const SHOWN_LINES: usize = 40;
/// How long every event is recorded (1–3 bytes an event on disk, as the
/// CPU the emulator leaves allows compressing:
/// `styx_common::capture::STORED_BUDGET`).
const RECORD_SECONDS: f64 = 1.0;
/// The windows converted (`read --from --to`, seconds after the
/// capture's first event): to JSON lines (~150,000 events), to Perfetto
/// (~600,000). From the start: later, while the emulator waits for the
/// disk now and then, a millisecond of wall-clock time holds fewer events.
const JSONL_WINDOW: (&str, &str) = ("0", "0.001");
const PERFETTO_WINDOW: (&str, &str) = ("0", "0.01");

pub fn run(root: &Path) -> Result<()> {
    crate::setup::require_root("demo")?;
    crate::run_checked(
        Command::new("cargo")
            .args(["build", "--release", "-p", "styx-loader", "-p", "styx-demo"])
            .current_dir(root),
    )?;
    let bin = root.join("target/release");
    let mut demo = KillOnDrop(
        Command::new(bin.join("styx-demo"))
            .args(["--forever", "--quiet"])
            .stdout(Stdio::null())
            .spawn()
            .context("starting styx-demo")?,
    );
    let pid = demo.0.id();
    let loader = bin.join("styx-loader");

    println!("\n== the first {SHOWN_LINES} {SHOWN} events of styx-demo (pid {pid}), as text ==");
    let mut shown = Command::new(&loader)
        .args(["--pid", &pid.to_string(), "-e", SHOWN, "--duration", "5"])
        .stdout(Stdio::piped())
        .spawn()
        .context("starting styx-loader")?;
    let stdout = shown.stdout.take().expect("piped");
    for line in BufReader::new(stdout).lines().take(SHOWN_LINES) {
        println!("{}", line?);
    }
    // Closing the pipe ends the loader quietly, like `| head`.
    shown.wait()?;

    let capture = root.join("target/demo.styx");
    println!(
        "\n== every event for {RECORD_SECONDS} s into a raw capture, {} ==",
        capture.display()
    );
    let summary = record(&loader, pid, &capture)?;
    demo.0.kill()?;
    demo.0.wait()?;
    print_summary(&summary, &capture)?;

    let jsonl = root.join("target/demo-trace.jsonl");
    convert(&loader, &capture, "jsonl", JSONL_WINDOW, &jsonl)?;
    let perfetto = root.join("target/demo.pftrace");
    convert(&loader, &capture, "perfetto", PERFETTO_WINDOW, &perfetto)?;
    let capture = capture.display();
    println!(
        "\nTry: jq -c 'select(.event == \"interrupt\")' {} | head\n     \
         open {} in https://ui.perfetto.dev\n     \
         styx-loader read {capture} --by pc -e insn_exec --rows 10    (the hottest code)\n     \
         styx-loader read {capture} -e mem_write --filter 'addr == 0x0400' | head",
        jsonl.display(),
        perfetto.display(),
    );
    Ok(())
}

/// Records every event of `pid` into `capture`; the loader's summary.
fn record(loader: &Path, pid: u32, capture: &Path) -> Result<Summary> {
    let args = demo_recording(pid, capture, RECORD_SECONDS);
    let recording = Loader::spawn(loader, args, Stdio::inherit())?;
    let (status, stderr) = recording.finish();
    anyhow::ensure!(status.success(), "recording failed: {}", stderr.join("\n"));
    // Its warnings, if any (the summary is printed below).
    for line in stderr.iter().filter(|l| l.contains("warning")) {
        eprintln!("{line}");
    }
    Ok(Summary::find(&stderr)?)
}

/// Events per type, bytes per event, what was lost.
fn print_summary(summary: &Summary, capture: &Path) -> Result<()> {
    let bytes = std::fs::metadata(capture)?.len();
    let lost: u64 = summary.types.iter().map(|t| t.lost).sum();
    println!(
        "{} events in {:.2} s ({:.1} M events/s), {:.1} MB: {:.1} bytes an event; {} lost",
        summary.events,
        summary.seconds,
        summary.events as f64 / summary.seconds / 1e6,
        bytes as f64 / 1e6,
        bytes as f64 / summary.events.max(1) as f64,
        summary.dropped + lost
    );
    for t in &summary.types {
        println!("  {:<11} {:>12}", t.name, t.events);
    }
    Ok(())
}

/// The events of `capture` from `window.0` to `window.1` s after its
/// first, as `format` into `out`.
fn convert(
    loader: &Path,
    capture: &Path,
    format: &str,
    window: (&str, &str),
    out: &Path,
) -> Result<()> {
    let (from, to) = window;
    println!(
        "\n== from {from} s to {to} s of it as {format}, {} ==",
        out.display()
    );
    crate::run_checked(
        Command::new(loader)
            .arg("read")
            .arg(capture)
            .args(["--from", from, "--to", to, "-o", format, "--output"])
            .arg(out),
    )?;
    println!("{} bytes", std::fs::metadata(out)?.len());
    Ok(())
}

/// The demo must not outlive a failed run.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
