//! Moves records from the ring buffer to the output, counting as it goes.

use aya::maps::{MapData, RingBuf};
use std::io;
use styx_common::EVENT_KIND_SLOTS;
use styx_events::event::{decode, DecodeError, Event};
use styx_events::writer::{EventWriter, Totals};

/// Records taken per drain at most, so a producer faster than the output
/// cannot keep the loop from noticing signals and deadlines.
const BUDGET: usize = 1 << 16;

/// What has gone through, per event kind (index = kind id).
#[derive(Default)]
pub struct Counts {
    pub events: [u64; EVENT_KIND_SLOTS as usize],
    pub undecodable: u64,
    pub first_undecodable: Option<DecodeError>,
}

impl Counts {
    pub fn total(&self) -> u64 {
        self.events.iter().sum()
    }
}

pub enum Drained {
    /// The ring was empty when the drain ended.
    All,
    /// The budget ran out first: more may be waiting.
    Budget,
}

/// Where events go, and what became of them.
pub struct Sink {
    out: Box<dyn EventWriter>,
    /// Events written (or handed to the output before it failed).
    pub written: Counts,
    /// Events taken from the ring after the output closed or failed: counted
    /// here rather than left in the ring to pass for ring-full drops.
    pub unwritten: Counts,
    /// Why the output stopped taking events; None for a closed pipe, which
    /// is how a reader says it has seen enough.
    pub error: Option<io::Error>,
    open: bool,
    /// Once closed: whether part of the output still works and is to be
    /// finished (the capture beside a closed `-o`, see [`EventWriter::can_finish`]).
    finishable: bool,
}

impl Sink {
    pub fn new(out: Box<dyn EventWriter>) -> Sink {
        Sink {
            out,
            written: Counts::default(),
            unwritten: Counts::default(),
            error: None,
            open: true,
            finishable: false,
        }
    }

    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Takes what is in the ring, up to a budget.
    pub fn drain(&mut self, ring: &mut RingBuf<MapData>) -> Drained {
        if !self.open {
            return drain(ring, &mut Discard, &mut self.unwritten).expect("discarding never fails");
        }
        match drain(ring, &mut *self.out, &mut self.written) {
            Ok(drained) => drained,
            Err(e) => {
                self.failed(e);
                Drained::Budget
            }
        }
    }

    /// Ends the output with the run's totals (a capture's END record, a
    /// closing bracket), unless it already stopped taking events. After the
    /// main output closed, a capture beside it is still finished: it holds
    /// every event counted as written, since it was fed each one the main
    /// output was.
    pub fn finish(&mut self, drops: &[u64]) {
        if !self.open && !self.finishable {
            return;
        }
        let totals = Totals {
            events: &self.written.events,
            drops,
        };
        if let Err(e) = self.out.finish(&totals) {
            self.failed(e);
        }
    }

    fn failed(&mut self, e: io::Error) {
        // Once closed, the session stops and later events are not written
        // (counted as unwritten), to any output.
        self.open = false;
        self.finishable = self.out.can_finish();
        // The first failure is the one to report (a capture failing as it
        // is finished after `-o` closed is one too).
        if self.error.is_none() {
            self.error = (e.kind() != io::ErrorKind::BrokenPipe).then_some(e);
        }
    }
}

/// Takes events and keeps none: for what arrives after the output closed.
struct Discard;

impl EventWriter for Discard {
    fn event(&mut self, _: &Event<'_>) -> io::Result<()> {
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        Ok(())
    }
}

/// Reads what is in the ring (up to a budget) and writes it out, stopping at
/// the first write error.
fn drain(
    ring: &mut RingBuf<MapData>,
    out: &mut dyn EventWriter,
    counts: &mut Counts,
) -> io::Result<Drained> {
    let mut taken = 0;
    while taken < BUDGET {
        let Some(item) = ring.next() else { break };
        taken += 1;
        match decode(&item) {
            Ok(event) => {
                counts.events[event.kind as usize] += 1;
                out.event(&event)?;
            }
            Err(error) => {
                counts.undecodable += 1;
                counts.first_undecodable.get_or_insert(error);
            }
        }
    }
    // Flush per drain so a reader sees events within a tick, not per buffer.
    if taken > 0 {
        out.flush()?;
    }
    Ok(if taken == BUDGET {
        Drained::Budget
    } else {
        Drained::All
    })
}
