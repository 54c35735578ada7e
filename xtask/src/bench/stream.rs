//! Cases 2, 3 and 5: one event stream, a (pc, addr, val) memory read per
//! event in a tight loop (styx-bench), sent each way, each tracer attached
//! in a session of its own on a fresh workload process.

use super::stats::Samples;
use super::tracer::{Session, Tracer, Workload};
use super::{Binaries, Plan};
use anyhow::Result;
use std::collections::BTreeMap;
use std::time::Duration;

/// One way of sending and consuming the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Way {
    /// The loop alone: what the stream costs before anyone sends it.
    Loop,
    Detached,
    DetachedNop5,
    StyxRaw,
    StyxRawNop5,
    StyxJsonl,
    BpftraceCount,
    BpftraceCountNop5,
    BpftracePrintf,
    Ipmpsc,
    TraceMarker,
}

impl Way {
    pub const ALL: [Way; 11] = [
        Way::Loop,
        Way::Detached,
        Way::DetachedNop5,
        Way::StyxRaw,
        Way::StyxRawNop5,
        Way::StyxJsonl,
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
            Way::StyxRaw => "styx-loader, raw capture",
            Way::StyxRawNop5 => "styx-loader, raw capture, 5-byte nop",
            Way::StyxJsonl => "styx-loader, JSON lines",
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
            Way::DetachedNop5 | Way::StyxRawNop5 | Way::BpftraceCountNop5 => "nop5",
            Way::Ipmpsc => "ipmpsc",
            Way::TraceMarker => "trace-marker",
            _ => "nop1",
        }
    }

    fn tracer(self) -> Option<Tracer> {
        match self {
            Way::StyxRaw | Way::StyxRawNop5 => Some(Tracer::StyxRaw),
            Way::StyxJsonl => Some(Tracer::StyxJsonl),
            Way::BpftraceCount | Way::BpftraceCountNop5 => Some(Tracer::BpftraceCount),
            Way::BpftracePrintf => Some(Tracer::BpftracePrintf),
            _ => None,
        }
    }
}

/// Everything measured for one way, over all rounds.
#[derive(Default)]
pub struct Row {
    pub ns_per_event: Samples,
    /// CPU the consumer (tracer or reader process) spent per event.
    pub consumer_ns_per_event: Samples,
    pub events: u64,
    pub lost: u64,
    /// Attached runs after which the kernel's uprobe trampoline was mapped
    /// in the workload (it optimized the probe site).
    pub trampoline_runs: u64,
}

#[derive(Default)]
pub struct Results {
    pub rows: BTreeMap<Way, Row>,
    /// Per-round ratios of two ways' ns per event.
    pub ratios: BTreeMap<(Way, Way), Samples>,
}

impl Results {
    pub fn row(&self, way: Way) -> &Row {
        &self.rows[&way]
    }

    pub fn ratio(&self, a: Way, b: Way) -> &Samples {
        &self.ratios[&(a, b)]
    }
}

/// The ratios the report quotes: (numerator, denominator).
pub const RATIOS: [(Way, Way); 4] = [
    (Way::StyxRaw, Way::BpftraceCount),
    (Way::StyxJsonl, Way::BpftraceCount),
    (Way::StyxRaw, Way::StyxRawNop5),
    (Way::BpftraceCount, Way::BpftraceCountNop5),
];

/// One round: every way once.
pub fn round(bins: &Binaries, plan: &Plan, results: &mut Results) -> Result<()> {
    let mut this_round = BTreeMap::new();
    // The untraced ways share one workload process.
    let mut workload = Workload::spawn(&bins.bench)?;
    for way in [
        Way::Loop,
        Way::Detached,
        Way::DetachedNop5,
        Way::Ipmpsc,
        Way::TraceMarker,
    ] {
        let n = match way {
            Way::Loop | Way::Detached | Way::DetachedNop5 => plan.detached_events,
            _ => plan.stream_events,
        };
        let run = workload.run(way.via(), n)?;
        let row = results.rows.entry(way).or_default();
        row.ns_per_event.push(run.ns_per_event);
        row.events += n;
        if matches!(way, Way::Ipmpsc | Way::TraceMarker) {
            row.lost += n.saturating_sub(run.received);
            row.consumer_ns_per_event
                .push(run.reader_cpu_s * 1e9 / n as f64);
        }
        this_round.insert(way, run.ns_per_event);
    }
    workload.quit()?;

    for way in Way::ALL {
        let Some(tracer) = way.tracer() else { continue };
        let mut workload = Workload::spawn(&bins.bench)?;
        let session = Session::start(tracer, &bins.loader, &mut workload)?;
        let cpu_before = session.cpu_seconds()?;
        let run = workload.run(way.via(), plan.stream_events)?;
        // The loader drains on a 1 ms timer: let it finish this run's events.
        std::thread::sleep(Duration::from_millis(50));
        let cpu = session.cpu_seconds()? - cpu_before;
        let trampoline = workload.has_uprobe_trampoline()?;
        anyhow::ensure!(
            run.evaluated == plan.stream_events,
            "{}: only {} of {} probes fired",
            way.label(),
            run.evaluated,
            plan.stream_events
        );
        let lost = session.finish(workload)?;
        let row = results.rows.entry(way).or_default();
        row.ns_per_event.push(run.ns_per_event);
        row.consumer_ns_per_event
            .push(cpu * 1e9 / plan.stream_events as f64);
        row.events += plan.stream_events;
        row.lost += lost;
        row.trampoline_runs += u64::from(trampoline);
        this_round.insert(way, run.ns_per_event);
    }
    for (a, b) in RATIOS {
        results
            .ratios
            .entry((a, b))
            .or_default()
            .push(this_round[&a] / this_round[&b]);
    }
    Ok(())
}
