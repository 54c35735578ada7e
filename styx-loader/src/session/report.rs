//! The end-of-run summary on stderr (`styx_common::summary`: events per
//! type, drops; as text, and with `--json-summary` also as JSON), then
//! warnings about anything that did not make it to the output: why events
//! were dropped and what helps, and what that makes wrong in an output
//! such as coverage.

use super::drain::Sink;
use crate::bpf::load::Lost;
use std::time::Duration;
use styx_common::summary::{LateLibrary, Loss, ProbeCount, Summary, TypeCount, Waited};
use styx_common::EventKind;
use styx_events::{FlightRecorder, EXITED_KEPT_LOOKS};

pub use styx_common::summary::Stop;

/// What a run did, as the session knows it.
pub struct Run<'a> {
    /// "pid 123 (/usr/bin/emu)" or "every process running …".
    pub target: &'a str,
    pub stop: Stop,
    pub elapsed: Duration,
    pub sink: &'a Sink,
    /// Ring-full drops per event kind (index = kind id).
    pub drops: &'a [u64],
    /// Batched events whose copy from the emulator failed.
    pub faults: &'a Lost,
    /// Events `--filter`/`--sample` left out, per kind id.
    pub filtered: &'a [u64],
    /// Why events were dropped, if any were.
    pub loss: Option<Loss>,
    /// Other providers' probes (and declared types) as `provider:probe`,
    /// by spec id.
    pub probe_names: &'a [String],
    pub json: bool,
    /// The libraries attached after the start (see `super::follow`).
    pub late: &'a [super::follow::LateFile],
    /// How long the emulator waited for the loader, under flow control.
    pub waited: Option<Waited>,
}

/// Prints the summary, then warns about what went missing.
pub fn print(run: &Run<'_>) {
    let summary = summary(run);
    eprintln!("{summary}");
    if run.json {
        eprintln!("{}", summary.json_line());
    }
    if let Some(warning) = summary.loss_warning() {
        log::warn!("{warning}");
    }
    if let Some(spoiled) = summary.spoiled() {
        log::warn!("{spoiled}");
    }
    if let Some(note) = summary.wait_note() {
        eprintln!("{note}");
    }
    warn_lost(run);
}

fn summary(run: &Run<'_>) -> Summary {
    let written = &run.sink.written;
    let types = EventKind::ALL
        .iter()
        .chain([&EventKind::Function])
        .map(|&kind| {
            let i = kind as usize;
            TypeCount {
                name: kind.probe_name().to_string(),
                events: written.events[i],
                dropped: run.drops[i],
                lost: run.faults.events[i],
                filtered: run.filtered[i],
                probes: match kind {
                    EventKind::Usdt => by_probe(&written.by_probe, run.probe_names),
                    _ => Vec::new(),
                },
            }
        })
        .filter(|t| t.events > 0 || t.dropped > 0 || t.lost > 0 || t.filtered > 0)
        .collect();
    Summary {
        events: written.total(),
        target: run.target.to_string(),
        seconds: run.elapsed.as_secs_f64(),
        stop: run.stop,
        dropped: run.drops.iter().sum(),
        types,
        loss: run.loss.clone(),
        late: (run.late.iter())
            .map(|l| LateLibrary {
                path: l.name.clone(),
                seconds: l.after.as_secs_f64(),
                sites: l.sites as u64,
            })
            .collect(),
        waited: run.waited.clone(),
    }
}

/// `usdt`'s events per probe, named `provider:probe` by spec id, most
/// first.
fn by_probe(counts: &[(u32, u64)], names: &[String]) -> Vec<ProbeCount> {
    let mut probes: Vec<ProbeCount> = (counts.iter())
        .map(|&(spec_id, events)| ProbeCount {
            name: names
                .get(spec_id as usize)
                .cloned()
                .unwrap_or_else(|| "?".into()),
            events,
        })
        .collect();
    probes.sort_by(|a, b| b.events.cmp(&a.events).then_with(|| a.name.cmp(&b.name)));
    probes
}

/// Warnings (and notes) about events lost, twice or malformed.
fn warn_lost(run: &Run<'_>) {
    let (sink, written) = (run.sink, &run.sink.written);
    let faulted: u64 = run.faults.events.iter().sum();
    if run.faults.batches > 0 {
        log::warn!(
            "{} batches were lost because the kernel could not copy them from the process \
             (a page of the batch buffer not resident): {faulted} events, plus those of \
             batches whose head could not be read at all",
            run.faults.batches
        );
    }
    if written.duplicates > 0 {
        log::debug!(
            "{} batched events arrived twice and were written once",
            written.duplicates
        );
    }
    let irregular = sink.irregular();
    if irregular.out_of_order > 0 {
        log::warn!(
            "{} out of order (numbered below later batches of their buffer: forged, or handed \
             over late); their events were written, some perhaps twice",
            batch_records(irregular.out_of_order)
        );
    }
    if irregular.conflicting > 0 {
        log::warn!(
            "{} with the number of a batch their buffer had handed over but other contents \
             (forged, or read as it changed); their events were written, some perhaps twice",
            batch_records(irregular.conflicting)
        );
    }
    if let Some(first) = &written.first_bad_batch {
        log::warn!(
            "{} batch records were malformed (first: {first})",
            written.bad_batches
        );
    }
    let unwritten = sink.unwritten.total();
    if unwritten > 0 && sink.error.is_none() {
        // No error: the output's reader closed the pipe (as `| head`
        // does) and the run stopped; not a loss the loader could help.
        eprintln!(
            "styx-loader: the output's reader closed it (as `| head` does): the {unwritten} \
             events taken from the ring after that were not written"
        );
    }
    let undecodable = written.undecodable + sink.unwritten.undecodable;
    let first = written.first_undecodable.as_ref();
    if let Some(first) = first.or(sink.unwritten.first_undecodable.as_ref()) {
        log::warn!("{undecodable} records could not be decoded (first: {first})");
    }
}

/// What the flight recorder left out to stay within its bounds.
pub fn flight(recorder: &FlightRecorder) {
    let forgotten = &recorder.forgotten;
    let limits = recorder.limits();
    if forgotten.events > 0 {
        log::warn!(
            "flight recorder: its memory was full (--flight-memory {} MiB): {} events were \
             forgotten, oldest first ({} threads whole); dumps since hold fewer than the last \
             {} events of the threads quiet the longest",
            limits.memory >> 20,
            forgotten.events,
            forgotten.threads,
            limits.per_thread
        );
    }
    if forgotten.exited > 0 {
        log::info!(
            "flight recorder: {} threads were forgotten about {EXITED_KEPT_LOOKS} s after they \
             exited",
            forgotten.exited
        );
    }
    let skipped = forgotten.held_off + forgotten.past_max;
    if skipped > 0 {
        log::warn!(
            "flight recorder: {skipped} triggers did not dump: {} within {} s of the dump \
             before (--trigger-holdoff), {} after the {} dumps --max-dumps allows",
            forgotten.held_off,
            limits.trigger_holdoff_ns as f64 / 1e9,
            forgotten.past_max,
            limits.trigger_dumps
        );
    }
}

/// "1 batch record", "2 batch records".
fn batch_records(n: u64) -> String {
    match n {
        1 => "1 batch record".to_string(),
        n => format!("{n} batch records"),
    }
}
