//! Asking questions instead of streaming everything: the same tight loop
//! of `mem_read`s (styx-bench) with every event filtered out
//! (`--filter 'tid == 0'`), counted (`top --by pc`: the loop's 256 pcs) or kept by the flight
//! recorder, against streaming it as a raw capture to /dev/null, in both
//! delivery modes, side by side in each round.

use super::stats::Samples;
use super::tracer::{Question, Session, Styx, Tracer, Workload};
use super::{Binaries, Plan};
use anyhow::Result;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use styx_common::Delivery;

pub const QUESTIONS: [Question; 4] = [
    Question::None,
    Question::FilterAll,
    Question::Top,
    Question::FlightRecorder,
];

/// A row of the table: the delivery, and the question asked. Ordered here:
/// styx-common's `Delivery` is not, and deriving that there would change the
/// committed eBPF object (its debug info).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Asked(pub Delivery, pub Question);

impl Ord for Asked {
    fn cmp(&self, other: &Asked) -> Ordering {
        (self.0 as u8, self.1).cmp(&(other.0 as u8, other.1))
    }
}

impl PartialOrd for Asked {
    fn partial_cmp(&self, other: &Asked) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

pub const DELIVERIES: [Delivery; 2] = [Delivery::PerEvent, Delivery::Batched];

pub fn label(question: Question) -> &'static str {
    match question {
        Question::None => "streamed (raw capture to /dev/null)",
        Question::FilterAll => "filtered out (`--filter 'tid == 0'`)",
        Question::Top => "counted (`top --by pc`, 256 keys)",
        Question::FlightRecorder => "flight recorder (`--flight-recorder 100000`)",
    }
}

#[derive(Default)]
pub struct Row {
    /// The loop's time per event.
    pub ns_per_event: Samples,
    /// The loader's CPU per event fired.
    pub loader_ns_per_event: Samples,
    /// Of the events fired, what the loader reported lost (ring full).
    pub events: u64,
    pub dropped: u64,
}

#[derive(Default)]
pub struct Results {
    pub rows: BTreeMap<Asked, Row>,
    /// Per round: a question's ns per event over streaming's, same delivery.
    pub ratios: BTreeMap<Asked, Samples>,
}

pub fn round(bins: &Binaries, plan: &Plan, results: &mut Results) -> Result<()> {
    for delivery in DELIVERIES {
        let n = match delivery {
            Delivery::PerEvent => plan.stream_events,
            Delivery::Batched => plan.batched_slow_events,
        };
        let mut streamed = None;
        for question in QUESTIONS {
            let tracer = Tracer::Styx(Styx {
                delivery,
                raw: true,
                to_file: false,
                lossless: false,
                question,
                declared: false,
            });
            let mut workload = Workload::spawn(&bins.bench)?;
            let session = Session::start(tracer, &bins.loader, &mut workload)?;
            let cpu_before = session.cpu_seconds()?;
            let run = workload.run("nop1", n)?;
            let cpu = session.cpu_seconds_when_idle()? - cpu_before;
            anyhow::ensure!(
                run.evaluated == n,
                "{delivery:?} {question:?}: only {} of {n} probes fired",
                run.evaluated
            );
            let got = session.finish(workload)?;
            let row = results.rows.entry(Asked(delivery, question)).or_default();
            row.ns_per_event.push(run.ns_per_event);
            row.loader_ns_per_event.push(cpu * 1e9 / n as f64);
            row.events += got.fired;
            row.dropped += got.reported_lost;
            match question {
                Question::None => streamed = Some(run.ns_per_event),
                _ => {
                    if let Some(base) = streamed {
                        results
                            .ratios
                            .entry(Asked(delivery, question))
                            .or_default()
                            .push(run.ns_per_event / base);
                    }
                }
            }
        }
    }
    Ok(())
}
