//! Cases 2, 3 and 5: one event stream, a (pc, addr, val) memory read per
//! event in a tight loop (styx-bench), sent each way, each tracer attached
//! in a session of its own on a fresh workload process. The batched ways
//! compared before and after a change (u64 and 16-bit values, and with
//! `--probe-baseline REV` REV's own build) run back to back, each first in
//! turn.

use super::baseline::Baseline;
use super::disk;
use super::stats::Samples;
use super::tracer::{bpf_run_stats, Question, Session, Styx, Tracer, Workload};
use super::{Binaries, Plan};
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::Path;
use styx_common::Delivery;

/// One way of sending and consuming the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Way {
    /// The loop alone: what the stream costs before anyone sends it.
    Loop,
    Detached,
    DetachedNop5,
    /// styx-loader, batched delivery (the default), raw capture to /dev/null.
    Batched,
    /// … JSON lines to /dev/null, `--lossless`.
    BatchedJsonl,
    /// … raw capture to a file, `--on-full drop` (waiting is the default
    /// for a file).
    BatchedFile,
    /// … raw capture to a file, `--lossless`.
    BatchedFileLossless,
    /// [`Way::BatchedFileLossless`] for the stream as a 16-bit guest fires it.
    BatchedNarrowFileLossless,
    /// [`Way::Batched`] for the stream as a 16-bit guest fires it (`nop1-narrow`).
    BatchedNarrow,
    /// [`Way::BatchedNarrow`]'s events as a type the program declares
    /// (`nop1-declared`).
    BatchedDeclared,
    /// [`Way::Batched`] with `--probe-baseline REV`'s own styx-loader and
    /// styx-bench: the u64 stream before the change.
    BatchedBaseline,
    /// styx-loader, `--delivery per-event`, raw capture to /dev/null.
    PerEvent,
    PerEventJsonl,
    PerEventNop5,
    BpftraceCount,
    BpftraceCountNop5,
    BpftracePrintf,
    Ipmpsc,
    TraceMarker,
}

impl Way {
    pub const ALL: [Way; 19] = [
        Way::Loop,
        Way::Detached,
        Way::DetachedNop5,
        Way::Batched,
        Way::BatchedNarrow,
        Way::BatchedDeclared,
        Way::BatchedBaseline,
        Way::BatchedJsonl,
        Way::BatchedFile,
        Way::BatchedFileLossless,
        Way::BatchedNarrowFileLossless,
        Way::PerEvent,
        Way::PerEventJsonl,
        Way::PerEventNop5,
        Way::BpftraceCount,
        Way::BpftraceCountNop5,
        Way::BpftracePrintf,
        Way::Ipmpsc,
        Way::TraceMarker,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Way::Loop => "no probe (the loop alone)",
            Way::Detached => "styx probe, detached",
            Way::DetachedNop5 => "styx probe on a 5-byte nop, detached",
            Way::Batched => "styx-loader batched, raw capture to /dev/null",
            Way::BatchedNarrow => {
                "styx-loader batched, 16-bit pc and address, raw capture to /dev/null"
            }
            Way::BatchedDeclared => {
                "styx-loader batched, the 16-bit events as a declared type, raw capture to /dev/null"
            }
            Way::BatchedBaseline => {
                "`--probe-baseline`'s styx-loader batched, raw capture to /dev/null"
            }
            Way::BatchedJsonl => "styx-loader batched, JSON lines to /dev/null, `--lossless`",
            Way::BatchedFile => "styx-loader batched, raw capture to a file, `--on-full drop`",
            Way::BatchedFileLossless => "styx-loader batched, raw capture to a file, `--lossless`",
            Way::BatchedNarrowFileLossless => {
                "styx-loader batched, 16-bit pc and address, raw capture to a file, `--lossless`"
            }
            Way::PerEvent => "styx-loader per-event, raw capture to /dev/null",
            Way::PerEventJsonl => "styx-loader per-event, JSON lines to /dev/null",
            Way::PerEventNop5 => "styx-loader per-event, raw capture, 5-byte nop",
            Way::BpftraceCount => "bpftrace `count()`",
            Way::BpftraceCountNop5 => "bpftrace `count()`, 5-byte nop",
            Way::BpftracePrintf => "bpftrace `printf`",
            Way::Ipmpsc => "ipmpsc shared-memory ring (Styx Trace)",
            Way::TraceMarker => "write(2) to ftrace `trace_marker` (crosvm)",
        }
    }

    /// styx-bench's name for how the events are sent.
    fn via(self) -> &'static str {
        match self {
            Way::Loop => "none",
            Way::DetachedNop5 | Way::PerEventNop5 | Way::BpftraceCountNop5 => "nop5",
            Way::Ipmpsc => "ipmpsc",
            Way::TraceMarker => "trace-marker",
            Way::BatchedNarrow | Way::BatchedNarrowFileLossless => "nop1-narrow",
            Way::BatchedDeclared => "nop1-declared",
            _ => "nop1",
        }
    }

    /// The styx-bench program that sends the stream this way and the
    /// styx-loader that traces it; None for the baseline's way when no
    /// baseline was built.
    fn build(self, bins: &Binaries) -> Option<Build<'_>> {
        if self == Way::BatchedBaseline {
            let baseline = bins.baseline.as_ref()?;
            return Some(Build {
                bench: &baseline.bench,
                loader: &baseline.loader,
            });
        }
        let bench = if self.via() == "nop5" {
            &bins.bench_nop5
        } else {
            &bins.bench
        };
        Some(Build {
            bench,
            loader: &bins.loader,
        })
    }

    pub fn tracer(self) -> Option<Tracer> {
        let styx = |delivery, raw, to_file, lossless| {
            Some(Tracer::Styx(Styx {
                delivery,
                raw,
                to_file,
                lossless,
                question: Question::None,
                declared: self == Way::BatchedDeclared,
            }))
        };
        match self {
            Way::Batched | Way::BatchedNarrow | Way::BatchedDeclared | Way::BatchedBaseline => {
                styx(Delivery::Batched, true, false, false)
            }
            Way::BatchedJsonl => styx(Delivery::Batched, false, false, true),
            Way::BatchedFile => styx(Delivery::Batched, true, true, false),
            Way::BatchedFileLossless | Way::BatchedNarrowFileLossless => {
                styx(Delivery::Batched, true, true, true)
            }
            // The 5-byte-nop site is a plain USDT site with no batched
            // half: only per-event delivery (or bpftrace) attaches to it.
            Way::PerEvent | Way::PerEventNop5 => styx(Delivery::PerEvent, true, false, false),
            Way::PerEventJsonl => styx(Delivery::PerEvent, false, false, false),
            Way::BpftraceCount | Way::BpftraceCountNop5 => Some(Tracer::BpftraceCount),
            Way::BpftracePrintf => Some(Tracer::BpftracePrintf),
            _ => None,
        }
    }

    /// Whether the way's events cross with no tracer, or no one reads them.
    pub fn untraced(self) -> bool {
        matches!(self, Way::Loop | Way::Detached | Way::DetachedNop5)
    }

    /// Whether styx-loader writes the stream to a file.
    pub fn to_file(self) -> bool {
        matches!(
            self.tracer(),
            Some(Tracer::Styx(Styx { to_file: true, .. }))
        )
    }

    /// Events per run.
    pub fn events(self, plan: &Plan) -> u64 {
        match self {
            Way::Loop | Way::Detached | Way::DetachedNop5 => plan.detached_events,
            Way::Batched | Way::BatchedNarrow | Way::BatchedDeclared | Way::BatchedBaseline => {
                plan.batched_events
            }
            Way::BatchedJsonl
            | Way::BatchedFile
            | Way::BatchedFileLossless
            | Way::BatchedNarrowFileLossless => plan.batched_slow_events,
            _ => plan.stream_events,
        }
    }
}

/// A styx-bench program and the styx-loader that traces it.
struct Build<'a> {
    bench: &'a Path,
    loader: &'a Path,
}

/// Everything measured for one way, over all rounds.
#[derive(Default)]
pub struct Row {
    pub ns_per_event: Samples,
    /// CPU the consumer (tracer or reader process) spent per event it got.
    pub consumer_ns_per_event: Samples,
    /// Of it, what styx-loader's threads compressing the capture spent.
    pub compressing_ns_per_event: Samples,
    /// Tracers: the share of their CPU time spent in the kernel (from
    /// 10 ms ticks: coarse for short runs).
    pub consumer_system_share: Samples,
    /// Events fired.
    pub events: u64,
    /// Of them, not received: fired − received.
    pub lost: u64,
    /// What styx-loader's summaries counted as lost (ring full, failed copies).
    pub reported_lost: u64,
    /// Attached runs after which the kernel's uprobe trampoline was mapped
    /// in the workload (it optimized the probe site).
    pub trampoline_runs: u64,
    /// File captures: bytes on disk per event received, and MB/s written
    /// over the run.
    pub file_bytes_per_event: Samples,
    pub file_mb_s: Samples,
}

#[derive(Default)]
pub struct Results {
    /// The ways run (all but [`Way::BatchedBaseline`] without a baseline).
    pub rows: BTreeMap<Way, Row>,
    /// Per-round ratios of two ways' ns per event.
    pub ratios: BTreeMap<(Way, Way), Samples>,
    /// The disk the file captures were written to.
    pub disk: disk::Results,
    /// `--probe-baseline REV`: what the user gave, when given.
    pub baseline_rev: Option<String>,
}

impl Results {
    pub fn new(baseline: Option<&Baseline>) -> Results {
        Results {
            baseline_rev: baseline.map(|b| b.rev.clone()),
            ..Results::default()
        }
    }

    pub fn row(&self, way: Way) -> &Row {
        &self.rows[&way]
    }

    /// [`Way::BatchedBaseline`]'s row and its ratios, when a baseline ran.
    pub fn baseline(&self) -> Option<BaselineStream<'_>> {
        Some(BaselineStream {
            rev: self.baseline_rev.as_deref()?,
            row: self.rows.get(&Way::BatchedBaseline)?,
            narrow_over_baseline: self
                .ratios
                .get(&(Way::BatchedNarrow, Way::BatchedBaseline))?,
            u64_over_baseline: self.ratios.get(&(Way::Batched, Way::BatchedBaseline))?,
        })
    }

    pub fn ratio(&self, a: Way, b: Way) -> &Samples {
        &self.ratios[&(a, b)]
    }
}

/// The baseline's stream, as the report quotes it.
pub struct BaselineStream<'a> {
    pub rev: &'a str,
    pub row: &'a Row,
    /// Per round: this tree's narrow stream's and u64 stream's ns per event
    /// over REV's (u64) stream's.
    pub narrow_over_baseline: &'a Samples,
    pub u64_over_baseline: &'a Samples,
}

/// The ratios the report quotes: (numerator, denominator).
pub const RATIOS: [(Way, Way); 10] = [
    (Way::BatchedNarrow, Way::Batched),
    (Way::BatchedDeclared, Way::BatchedNarrow),
    (Way::BpftraceCount, Way::Batched),
    (Way::PerEvent, Way::Batched),
    (Way::Batched, Way::Loop),
    (Way::Detached, Way::Loop),
    (Way::PerEvent, Way::BpftraceCount),
    (Way::PerEventJsonl, Way::BpftraceCount),
    (Way::PerEvent, Way::PerEventNop5),
    (Way::BpftraceCount, Way::BpftraceCountNop5),
];

/// … and with a baseline: this tree's two streams against REV's.
pub const BASELINE_RATIOS: [(Way, Way); 2] = [
    (Way::BatchedNarrow, Way::BatchedBaseline),
    (Way::Batched, Way::BatchedBaseline),
];

/// The traced ways a round runs before the compared ones, and after: the
/// file captures last.
const TRACED_BEFORE: [Way; 6] = [
    Way::PerEvent,
    Way::PerEventJsonl,
    Way::PerEventNop5,
    Way::BpftraceCount,
    Way::BpftraceCountNop5,
    Way::BpftracePrintf,
];
const TRACED_AFTER: [Way; 4] = [
    Way::BatchedJsonl,
    Way::BatchedFile,
    Way::BatchedFileLossless,
    Way::BatchedNarrowFileLossless,
];

/// The batched ways compared with each other (their ratios are the
/// before/after figures), run back to back.
const COMPARED: [Way; 4] = [
    Way::Batched,
    Way::BatchedNarrow,
    Way::BatchedDeclared,
    Way::BatchedBaseline,
];

/// The compared ways this run has, each first in turn round by round, so
/// that drift and whatever ran just before weigh on all alike.
fn compared(bins: &Binaries, round: usize) -> Vec<Way> {
    let mut ways: Vec<Way> = COMPARED
        .into_iter()
        .filter(|way| way.build(bins).is_some())
        .collect();
    let turn = round % ways.len();
    ways.rotate_left(turn);
    ways
}

/// One round: every way once; the file captures last, each followed by
/// writing back what it left in the page cache.
pub fn round(bins: &Binaries, plan: &Plan, results: &mut Results) -> Result<()> {
    let round = results
        .rows
        .get(&Way::Batched)
        .map_or(0, |r| r.ns_per_event.len());
    let mut this_round = untraced(bins, plan, results)?;
    let ways = TRACED_BEFORE
        .into_iter()
        .chain(compared(bins, round))
        .chain(TRACED_AFTER);
    for way in ways {
        let ns_per_event = traced(bins, plan, way, results.rows.entry(way).or_default())?;
        this_round.insert(way, ns_per_event);
        if way.to_file() {
            disk::sync();
        }
    }
    let baseline = bins.baseline.is_some().then_some(BASELINE_RATIOS);
    for (a, b) in RATIOS.into_iter().chain(baseline.into_iter().flatten()) {
        results
            .ratios
            .entry((a, b))
            .or_default()
            .push(this_round[&a] / this_round[&b]);
    }
    disk::round(plan, &mut results.disk)
}

/// The ways no tracer attaches to (the seeds' have their own readers),
/// sharing one workload process per program; their ns per event.
fn untraced(bins: &Binaries, plan: &Plan, results: &mut Results) -> Result<BTreeMap<Way, f64>> {
    let mut this_round = BTreeMap::new();
    let mut workloads = BTreeMap::new();
    for way in [
        Way::Loop,
        Way::Detached,
        Way::DetachedNop5,
        Way::Ipmpsc,
        Way::TraceMarker,
    ] {
        let program = way.build(bins).expect("this tree's build").bench;
        if !workloads.contains_key(program) {
            workloads.insert(program, Workload::spawn(program)?);
        }
        let workload = workloads.get_mut(program).expect("spawned");
        let n = way.events(plan);
        let run = workload.run(way.via(), n)?;
        let row = results.rows.entry(way).or_default();
        row.ns_per_event.push(run.ns_per_event);
        row.events += n;
        if !way.untraced() {
            row.lost += n.saturating_sub(run.received);
            row.consumer_ns_per_event
                .push(run.reader_cpu_s * 1e9 / n as f64);
        }
        this_round.insert(way, run.ns_per_event);
    }
    for (_, workload) in workloads {
        workload.quit()?;
    }
    Ok(this_round)
}

/// One run of a traced way on a fresh workload, added to its row; the
/// loop's ns per event.
fn traced(bins: &Binaries, plan: &Plan, way: Way, row: &mut Row) -> Result<f64> {
    let tracer = way.tracer().expect("a traced way");
    let n = way.events(plan);
    let build = way.build(bins).expect("a way of a build that was built");
    let mut workload = Workload::spawn(build.bench)?;
    let session = Session::start(tracer, build.loader, &mut workload)?;
    let cpu_before = session.cpu_seconds()?;
    let compressing_before = session.compressing_cpu_seconds();
    let split_before = session.cpu_split()?;
    let run = workload.run(way.via(), n)?;
    let cpu = session.cpu_seconds_when_idle()? - cpu_before;
    let compressing = session.compressing_cpu_seconds() - compressing_before;
    let split_after = session.cpu_split()?;
    let (user, system) = (
        split_after.0 - split_before.0,
        split_after.1 - split_before.1,
    );
    let trampoline = workload.has_uprobe_trampoline()?;
    anyhow::ensure!(
        run.evaluated == n,
        "{}: only {} of {n} probes fired",
        way.label(),
        run.evaluated,
    );
    let got = session.finish(workload)?;
    row.ns_per_event.push(run.ns_per_event);
    // Per event received: what the consumer had to handle.
    let handled = match tracer {
        Tracer::Styx(_) => got.received.max(1),
        _ => n,
    };
    row.consumer_ns_per_event.push(cpu * 1e9 / handled as f64);
    row.compressing_ns_per_event
        .push(compressing * 1e9 / handled as f64);
    if user + system > 0.0 {
        row.consumer_system_share.push(system / (user + system));
    }
    row.events += got.fired;
    row.lost += got.lost;
    row.reported_lost += got.reported_lost;
    row.trampoline_runs += u64::from(trampoline);
    if let Some(bytes) = got.file_bytes {
        row.file_bytes_per_event
            .push(bytes as f64 / got.received.max(1) as f64);
        row.file_mb_s
            .push(bytes as f64 / (run.ns_per_event * n as f64 / 1e9) / 1e6);
    }
    Ok(run.ns_per_event)
}

/// Where a batched event's time goes in the emulator: one more batched run
/// to /dev/null with the kernel's eBPF statistics on, for the time the
/// flush probe's program (which copies each batch into the ring) runs.
#[derive(Default)]
pub struct Breakdown {
    pub ns_per_event: f64,
    pub batches: u64,
    pub events_per_batch: f64,
    /// The eBPF program's time per batch, and spread over its events.
    pub kernel_ns_per_batch: f64,
    pub kernel_ns_per_event: f64,
}

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// Measures the [`Breakdown`] once; None if the statistics cannot be
/// turned on. They are turned back off (as found) afterwards.
pub fn breakdown(bins: &Binaries, plan: &Plan) -> Result<Option<Breakdown>> {
    let before = std::fs::read_to_string(BPF_STATS).unwrap_or_default();
    if std::fs::write(BPF_STATS, "1").is_err() {
        return Ok(None);
    }
    let measured = breakdown_run(bins, plan);
    let _ = std::fs::write(BPF_STATS, if before.trim() == "1" { "1" } else { "0" });
    measured.map(Some)
}

fn breakdown_run(bins: &Binaries, plan: &Plan) -> Result<Breakdown> {
    let way = Way::Batched;
    let n = way.events(plan);
    let build = way.build(bins).expect("this tree's build");
    let mut workload = Workload::spawn(build.bench)?;
    let session = Session::start(way.tracer().expect("traced"), build.loader, &mut workload)?;
    let (ns_before, runs_before) = bpf_run_stats(session.pid())?;
    let run = workload.run(way.via(), n)?;
    let (ns_after, runs_after) = bpf_run_stats(session.pid())?;
    session.finish(workload)?;
    let (ns, batches) = (ns_after - ns_before, (runs_after - runs_before).max(1));
    Ok(Breakdown {
        ns_per_event: run.ns_per_event,
        batches,
        events_per_batch: n as f64 / batches as f64,
        kernel_ns_per_batch: ns as f64 / batches as f64,
        kernel_ns_per_event: ns as f64 / n as f64,
    })
}
