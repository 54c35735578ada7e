//! Case 1: the 6502 demo running its programs, probes compiled out, detached,
//! and traced by styx-loader (raw capture to /dev/null) from its first
//! instruction, for one event type and for all of them, with batched and
//! with per-event delivery; and once, all types batched into a raw capture
//! file, for the capture's bytes per event and those of its Perfetto
//! conversion.

use super::stats::Samples;
use super::tracer::{copy_failures, delivery_arg};
use super::{Binaries, Plan};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use styx_common::{Delivery, EventKind};
use styx_testkit::{Loader, Summary};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    CompiledOut,
    Detached,
    /// Traced, `insn_exec` only: one event per instruction.
    One(Delivery),
    /// Traced, every event type.
    All(Delivery),
}

impl Variant {
    pub const ALL: [Variant; 6] = [
        Variant::CompiledOut,
        Variant::Detached,
        Variant::One(Delivery::Batched),
        Variant::All(Delivery::Batched),
        Variant::One(Delivery::PerEvent),
        Variant::All(Delivery::PerEvent),
    ];

    pub fn label(self) -> String {
        let delivery = match self {
            Variant::CompiledOut => return "probes compiled out".into(),
            Variant::Detached => return "probes detached".into(),
            Variant::One(delivery) | Variant::All(delivery) => delivery_arg(delivery),
        };
        format!("{delivery}: {}", self.traced())
    }

    /// What a traced variant traces (empty for the others).
    pub fn traced(self) -> String {
        match self {
            Variant::One(_) => "`insn_exec` only".into(),
            Variant::All(_) => format!("all {} event types", styx_event_types()),
            Variant::CompiledOut | Variant::Detached => String::new(),
        }
    }

    /// Its place among the results' keys (styx-common's `Delivery` is not
    /// ordered: see [`super::questions::Asked`]).
    fn rank(self) -> (u8, u8) {
        match self {
            Variant::CompiledOut => (0, 0),
            Variant::Detached => (1, 0),
            Variant::One(delivery) => (2, delivery as u8),
            Variant::All(delivery) => (3, delivery as u8),
        }
    }

    /// Repeats of the demo's programs per run.
    pub fn repeat(self, plan: &Plan) -> u64 {
        match self {
            Variant::CompiledOut | Variant::Detached => plan.demo_repeat,
            Variant::One(Delivery::Batched) => plan.demo_repeat_batched_one,
            Variant::All(Delivery::Batched) => plan.demo_repeat_batched_all,
            Variant::One(Delivery::PerEvent) => plan.demo_repeat_per_event_one,
            Variant::All(Delivery::PerEvent) => plan.demo_repeat_per_event_all,
        }
    }
}

impl Ord for Variant {
    fn cmp(&self, other: &Variant) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl PartialOrd for Variant {
    fn partial_cmp(&self, other: &Variant) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

#[derive(Default)]
pub struct Row {
    /// M guest instructions per second.
    pub speed: Samples,
    /// Traced: per round, how many times slower than compiled out (the
    /// round's median compiled-out speed / this run's).
    pub slowdown: Samples,
    pub events: u64,
    /// Lost, as styx-loader's summary counts them (ring full, failed copies).
    pub lost: u64,
}

#[derive(Default)]
pub struct Results {
    pub rows: BTreeMap<Variant, Row>,
    /// Per pair of back-to-back runs: how much longer the detached demo
    /// took than the compiled-out one (compiled-out speed / detached speed).
    pub detached_slowdown: Samples,
    /// Per round, the demo traced at all types into a file.
    pub into_file: IntoFile,
    pub capture: Capture,
}

/// The demo traced at every type, batched, into a raw capture file with
/// the loader's defaults, once per round, as long as the run to
/// /dev/null (`Variant::All(Batched)`): sustained, not a burst the ring
/// holds.
#[derive(Default)]
pub struct IntoFile {
    /// Per round: its speed over the same round's speed traced to /dev/null.
    pub speed_ratio: Samples,
    /// The files' bytes and the events written to them, over the rounds.
    pub bytes: u64,
    pub events: u64,
    pub lost: u64,
}

impl IntoFile {
    pub fn bytes_per_event(&self) -> f64 {
        self.bytes as f64 / self.events.max(1) as f64
    }
}

/// The demo traced at every type, batched, into a raw capture file.
#[derive(Default)]
pub struct Capture {
    /// The file's size, and the events the loader wrote to it.
    pub bytes: u64,
    pub events: u64,
    pub lost: u64,
    /// The capture converted with `read -o perfetto`: the trace's size.
    pub perfetto_bytes: u64,
    /// The demo's speed meanwhile, M instructions/s (against its speed
    /// traced the same way to /dev/null, `rows`).
    pub speed: f64,
    /// `read` of the capture, per format and thread count.
    pub reads: Vec<ReadRow>,
}

/// `styx-loader read CAPTURE -o FORMAT --threads N` to /dev/null.
#[derive(Default)]
pub struct ReadRow {
    pub format: &'static str,
    /// `--threads`; 0 for the default (every core).
    pub threads: usize,
    /// M events/s, wall clock.
    pub rate: Samples,
}

/// The formats and thread counts `read` is measured with.
pub const READ_FORMATS: [&str; 3] = ["jsonl", "text", "parquet"];
pub const READ_THREADS: [usize; 3] = [1, 2, 0];
/// Times each `read` runs.
const READ_RUNS: usize = 3;

impl Capture {
    pub fn bytes_per_event(&self) -> f64 {
        self.bytes as f64 / self.events.max(1) as f64
    }

    pub fn perfetto_bytes_per_event(&self) -> f64 {
        self.perfetto_bytes as f64 / self.events.max(1) as f64
    }

    /// `read -o format --threads threads`'s median M events/s (NaN if
    /// not measured).
    pub fn read_rate(&self, format: &str, threads: usize) -> f64 {
        self.reads
            .iter()
            .find(|r| r.format == format && r.threads == threads)
            .map_or(f64::NAN, |r| r.rate.median())
    }
}

/// Where the demo's capture goes: beside the stream's file captures.
fn capture_path() -> PathBuf {
    std::env::temp_dir().join("styx-bench-demo.styx")
}

/// One run of the demo traced at every type, batched, from its first
/// instruction into a raw capture file: its size over the events written,
/// the demo's speed, then `read` of the capture in the formats people
/// convert to, on 1, 2 and every core.
pub fn capture(bins: &Binaries, plan: &Plan) -> Result<Capture> {
    let path = capture_path();
    let (speed, events, lost, bytes) = traced_into_file(bins, plan.demo_repeat_capture, &path)?;
    let perfetto_bytes = perfetto_size(&bins.loader, &path)?;
    let mut reads = Vec::new();
    for format in READ_FORMATS {
        for threads in READ_THREADS {
            let mut row = ReadRow {
                format,
                threads,
                rate: Samples::default(),
            };
            for _ in 0..READ_RUNS {
                row.rate
                    .push(events as f64 / read(&bins.loader, &path, format, threads)? / 1e6);
            }
            reads.push(row);
        }
    }
    std::fs::remove_file(&path)?;
    Ok(Capture {
        bytes,
        events,
        lost,
        perfetto_bytes,
        speed,
        reads,
    })
}

/// The size of `capture` converted to a Perfetto trace.
fn perfetto_size(loader: &Path, capture: &Path) -> Result<u64> {
    let trace = capture.with_extension("pftrace");
    let status = Command::new(loader)
        .arg("read")
        .arg(capture)
        .args(["-o", "perfetto", "--output"])
        .arg(&trace)
        .status()?;
    anyhow::ensure!(
        status.success(),
        "read -o perfetto of the demo's capture failed"
    );
    let bytes = std::fs::metadata(&trace)?.len();
    std::fs::remove_file(&trace)?;
    Ok(bytes)
}

/// Seconds `styx-loader read` takes to convert `capture` to `format` on
/// /dev/null (`threads` 0: its default).
fn read(loader: &Path, capture: &Path, format: &str, threads: usize) -> Result<f64> {
    let mut command = Command::new(loader);
    command.arg("read").arg(capture).args(["-o", format]);
    if threads > 0 {
        command.args(["--threads", &threads.to_string()]);
    }
    let started = std::time::Instant::now();
    let status = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("running styx-loader read")?;
    anyhow::ensure!(status.success(), "styx-loader read -o {format} failed");
    Ok(started.elapsed().as_secs_f64())
}

pub fn round(bins: &Binaries, plan: &Plan, results: &mut Results) -> Result<()> {
    // Tracers detached just before (the previous round) leave the kernel
    // cleaning up for a while; the untraced runs are short enough to notice.
    std::thread::sleep(std::time::Duration::from_secs(1));
    // Pairs of back-to-back runs, alternating which goes first, so drift
    // and whatever ran just before weigh on both alike.
    let mut compiled_out = Samples::default();
    for pair in 0..plan.demo_pairs {
        let mut order = [Variant::CompiledOut, Variant::Detached];
        if pair % 2 == 1 {
            order.reverse();
        }
        let mut speeds = BTreeMap::new();
        for variant in order {
            let demo = if variant == Variant::CompiledOut {
                &bins.demo_off
            } else {
                &bins.demo
            };
            let speed = plain(demo, plan.demo_repeat)?;
            results.rows.entry(variant).or_default().speed.push(speed);
            if variant == Variant::CompiledOut {
                compiled_out.push(speed);
            }
            speeds.insert(variant, speed);
        }
        results
            .detached_slowdown
            .push(speeds[&Variant::CompiledOut] / speeds[&Variant::Detached]);
    }
    for variant in &Variant::ALL[2..] {
        let (delivery, only) = match *variant {
            Variant::One(delivery) => (delivery, Some("insn_exec")),
            Variant::All(delivery) => (delivery, None),
            _ => unreachable!("traced variants only"),
        };
        let (speed, events, lost) = traced(
            &bins.loader,
            &bins.demo,
            delivery,
            only,
            variant.repeat(plan),
            Path::new("/dev/null"),
        )?;
        let row = results.rows.entry(*variant).or_default();
        row.speed.push(speed);
        row.slowdown.push(compiled_out.median() / speed);
        row.events += events;
        row.lost += lost;
        if *variant == Variant::All(Delivery::Batched) {
            into_file(bins, plan, speed, &mut results.into_file)?;
        }
    }
    Ok(())
}

/// The demo traced at every type, batched, from its first instruction,
/// `repeat` times, into a raw capture at `path`: its speed, the events
/// written and lost, the file's size.
fn traced_into_file(bins: &Binaries, repeat: u64, path: &Path) -> Result<(f64, u64, u64, u64)> {
    let _ = std::fs::remove_file(path);
    let (speed, events, lost) = traced(
        &bins.loader,
        &bins.demo,
        Delivery::Batched,
        None,
        repeat,
        path,
    )?;
    let bytes = std::fs::metadata(path)
        .with_context(|| format!("the demo's capture {}", path.display()))?
        .len();
    Ok((speed, events, lost, bytes))
}

/// The demo traced at every type into a file right after its run to
/// /dev/null (`to_null`, M instructions/s).
fn into_file(bins: &Binaries, plan: &Plan, to_null: f64, results: &mut IntoFile) -> Result<()> {
    let path = capture_path();
    let (speed, events, lost, bytes) = traced_into_file(bins, plan.demo_repeat_batched_all, &path)?;
    std::fs::remove_file(&path)?;
    results.bytes += bytes;
    results.events += events;
    results.lost += lost;
    results.speed_ratio.push(speed / to_null);
    Ok(())
}

/// `EMULATOR --quiet --repeat N`: styx-demo and styx-rv take the same
/// arguments and print the same speed line.
fn emulator_command(emulator: &Path, repeat: u64) -> Command {
    let mut command = Command::new(emulator);
    command.args(["--quiet", "--repeat", &repeat.to_string()]);
    command
}

/// The emulator's speed untraced, in M guest instructions/s.
pub fn plain(emulator: &Path, repeat: u64) -> Result<f64> {
    let output = emulator_command(emulator, repeat)
        .stderr(Stdio::null())
        .output()
        .with_context(|| format!("running {}", emulator.display()))?;
    anyhow::ensure!(output.status.success(), "{} failed", emulator.display());
    speed(&String::from_utf8_lossy(&output.stdout))
}

/// styx's own event types, the catalogue's: what `-e` offers besides
/// `usdt` (other providers' probes), and what the demo fires.
pub fn styx_event_types() -> usize {
    EventKind::ALL
        .iter()
        .filter(|&&kind| kind != EventKind::Usdt)
        .count()
}

/// Speed, events received and events lost, traced from the first
/// instruction into a raw capture at `output`.
pub fn traced(
    loader: &Path,
    emulator: &Path,
    delivery: Delivery,
    only: Option<&str>,
    repeat: u64,
    output: &Path,
) -> Result<(f64, u64, u64)> {
    let mut args: Vec<&OsStr> = ["-o", "raw", "--output"].map(OsStr::new).to_vec();
    args.push(output.as_os_str());
    args.extend(["--quiet", "--delivery", delivery_arg(delivery)].map(OsStr::new));
    if let Some(kind) = only {
        args.extend([OsStr::new("-e"), OsStr::new(kind)]);
    }
    let command = emulator_command(emulator, repeat);
    args.push(OsStr::new("--"));
    args.push(command.get_program());
    args.extend(command.get_args());
    let mut loader = Loader::spawn(loader, args, Stdio::piped())?;
    let mut stdout = String::new();
    std::io::Read::read_to_string(loader.child.stdout.as_mut().expect("piped"), &mut stdout)?;
    let (status, stderr) = loader.finish();
    anyhow::ensure!(
        status.success(),
        "traced {} failed: {stderr:?}",
        emulator.display()
    );
    let summary = Summary::find(&stderr)?;
    let lost = summary.dropped + copy_failures(&stderr);
    Ok((speed(&stdout)?, summary.events, lost))
}

/// The emulator's last line: `N instructions in S s: X M instructions/s`.
fn speed(stdout: &str) -> Result<f64> {
    stdout
        .lines()
        .last()
        .and_then(|l| {
            l.split(": ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .with_context(|| format!("no speed in the emulator's output {stdout:?}"))
}
