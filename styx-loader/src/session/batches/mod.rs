//! A session's batch plumbing, beside the ring: the target's flush sites,
//! lossless mode's flow control through them ([`flow`]), and the batch
//! registry the flush site's block points to ([`partial`]): read for the
//! batches threads still hold when stopping or dumping, and told to
//! `styx_fatal` for the flight recorder. [`flush_block`] finds the block
//! and reaches the process's memory.

pub mod flow;
pub mod flush_block;
pub mod partial;

use super::drain::Sink;
use super::Lossless;
use crate::bpf::load::{self, Loaded};
use anyhow::Result;
use flow::Flow;
use flush_block::{EnableSite, FlushSite};
use std::time::Duration;
use styx_usdt::select::{Role, Selection};
use styx_usdt::target::Target;

pub struct Batches {
    /// None for `--binary`, whose processes are found by what they map.
    pid: Option<u32>,
    /// The flush sites attached (none without batched delivery).
    sites: Vec<FlushSite>,
    /// The batch-enable sites attached (of libraries mapped later too).
    enable: Vec<EnableSite>,
    flow: Option<Flow>,
    /// Whether batches waited for room (flow control was claimed).
    pub waited: bool,
    /// How long the emulator waited for credit, at most, under flow
    /// control that has stopped (see [`Batches::held`]).
    held_before: Duration,
    /// Flight recorder: whether `styx_fatal` knows the batch registry.
    registry_known: bool,
}

/// Why the batches threads hold are read, which says what a failure loses.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Partial {
    /// Tracing stops: from every process traced.
    Stopping,
    /// Tracing stops, read again for what threads appended after the
    /// first read: what that one said is not said again.
    StoppingAgain,
    /// The flight recorder dumps on SIGUSR1: from the process traced.
    Dumping,
}

impl Batches {
    /// The flush sites of `selection` in `target`, and lossless flow
    /// control claimed as `lossless` asks. Claimed before anything is
    /// attached (a refusal leaves the process as it was) and in place
    /// before any batch can be made: in a running process as the first
    /// credit is granted between the attach steps, in a command started
    /// here by its own claim at its first event (see [`flow::ChildClaim`]).
    pub fn claim(
        target: &Target,
        selection: &Selection,
        lossless: Lossless,
        ring_bytes: u32,
    ) -> Result<Batches> {
        let sites: Vec<FlushSite> = selection
            .sites
            .iter()
            .filter(|s| s.role == Role::BatchFlush)
            .map(|s| FlushSite::of(target, s))
            .collect();
        let enable = (selection.sites.iter())
            .filter(|s| matches!(s.role, Role::BatchEnable(_)))
            .map(|s| EnableSite::of(target, s))
            .collect();
        let flow = match (lossless, target.pid) {
            (Lossless::Off, _) | (_, None) => None,
            (mode, Some(pid)) => match Flow::claim(pid, ring_bytes, sites.len()) {
                Ok(flow) => Some(flow),
                Err(e) if mode == Lossless::IfFree && e.is::<flow::Taken>() => {
                    log::warn!(
                        "{e}: tracing without waiting (batches a full ring has no room for \
                         are dropped, counted and reported)"
                    );
                    None
                }
                Err(e) => return Err(e),
            },
        };
        Ok(Batches {
            pid: target.pid,
            sites,
            enable,
            waited: flow.is_some(),
            held_before: Duration::ZERO,
            flow,
            registry_known: false,
        })
    }

    /// A flush site of a library the process mapped later, attached (before
    /// its batch-enable sites): its flow control from the next grant on,
    /// its batches read when stopping.
    pub fn add_site(&mut self, site: FlushSite) {
        self.sites.push(site);
        if let Some(flow) = self.flow.as_mut() {
            flow.add_site();
        }
    }

    /// A batch-enable site of a library the process mapped later, attached:
    /// one more whose semaphore says whether another tracer batches.
    pub fn add_enable_site(&mut self, site: EnableSite) {
        self.enable.push(site);
    }

    /// Lossless mode: grants the emulator credit for the batches taken
    /// (`received` records, or seen lost) so far. If that fails (the process
    /// exited, or its memory cannot be written), says so once and stops:
    /// the emulator then goes on without waiting.
    pub fn grant(&mut self, loaded: &Loaded, received: u64) {
        let Some(control) = self.flow.as_mut() else {
            return;
        };
        let granted = load::read_lost(&loaded.drops)
            .and_then(|drops| Ok(drops.batches + load::read_lost(&loaded.faults)?.batches))
            .and_then(|lost| control.grant(&self.sites, received + lost));
        if let Err(e) = granted {
            // An exited process maps nothing (a zombie until reaped).
            let exited = std::fs::read_to_string(format!("/proc/{}/maps", control.pid()))
                .map_or(true, |maps| maps.is_empty());
            if !exited {
                log::warn!("lossless flow control stopped, batches may be lost from here: {e:#}");
            }
            control.release();
            self.held_before = control.held();
            self.flow = None;
        }
    }

    /// How long the emulator waited for the loader's credit, at most (see
    /// [`flow`]); None without flow control.
    pub fn held(&self) -> Option<Duration> {
        self.waited
            .then(|| self.flow.as_ref().map_or(self.held_before, Flow::held))
    }

    /// Gives flow control up: a thread waiting for credit goes on.
    pub fn release_flow(&mut self) {
        if let Some(flow) = self.flow.as_mut() {
            flow.release();
        }
    }

    /// Whether threads may hold batches to be read from the process.
    pub fn any(&self) -> bool {
        !self.sites.is_empty()
    }

    /// Reads the batches the threads still hold (see [`partial`]), each
    /// record to `sink`; a warning saying what is lost if it cannot.
    pub fn take_partial(&self, sink: &mut Sink, why: Partial) {
        if self.sites.is_empty() {
            return;
        }
        let pids = match (why, self.pid) {
            (_, Some(pid)) => vec![pid],
            // --binary: every process running it now.
            (Partial::Stopping | Partial::StoppingAgain, None) => {
                flush_block::pids_mapping(&self.sites)
            }
            (Partial::Dumping, None) => Vec::new(),
        };
        for pid in pids {
            let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
            if why != Partial::Dumping && flush_block::others_batching(pid, &maps, &self.enable) {
                // Taking them would take them from the other tracer: its
                // threads hand over what they hold once it is full, to both.
                if why == Partial::Stopping {
                    log::warn!(
                        "another tracer has batched events enabled in pid {pid}: the batches \
                         its threads hold were left to it, and reach this trace only if \
                         handed over before the loader let go (a thread that went idle \
                         holds up to a batch)"
                    );
                }
                continue;
            }
            // A dump leaves them unmarked: tracing goes on, and another
            // tracer (whose presence this loader's own sites hide) gets them.
            let mark_taken = why != Partial::Dumping;
            let read = partial::read(pid, &maps, &self.sites, mark_taken, |record| {
                sink.record(record)
            });
            if why == Partial::StoppingAgain {
                // What this read could say, the first one said.
                continue;
            }
            match read {
                Ok(walked) => partial::report(pid, &walked),
                Err(e) if why == Partial::Dumping => log::warn!(
                    "could not read the batches pid {pid}'s threads hold (their latest events \
                     are not in this dump): {e:#}"
                ),
                Err(e) => log::warn!(
                    "could not read the batches pid {pid}'s threads still hold (their events \
                     since their last flush are lost): {e:#}"
                ),
            }
        }
    }

    /// Flight recorder: tells `styx_fatal` where the batch registry is, once
    /// the process has made it (a command started here: once it has exec'd).
    pub fn tell_registry(&mut self, loaded: &mut Loaded) {
        let (false, Some(pid), false) = (self.registry_known, self.pid, self.sites.is_empty())
        else {
            return;
        };
        if let Ok(Some((registry, file))) = partial::registry(pid, &self.sites) {
            self.registry_known = load::set_registry(loaded, registry, file).is_ok();
        }
    }
}

/// A file's number as a batch record carries it (a byte: files past 255
/// share 255, whose declared types are then not told apart).
pub fn file_number(file: usize) -> u8 {
    file.min(u8::MAX as usize) as u8
}
