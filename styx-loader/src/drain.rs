//! Moves records from the ring buffer to the output, counting as it goes.

use crate::format::{write_event, Format};
use crate::record::{decode, DecodeError};
use aya::maps::{MapData, RingBuf};
use std::io::{self, Write};
use styx_common::EVENT_KIND_SLOTS;

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

/// Records taken per drain at most, so a producer faster than the output
/// cannot keep the loop from noticing signals and deadlines.
const BUDGET: usize = 1 << 16;

pub enum Drained {
    /// The ring was empty when the drain ended.
    All,
    /// The budget ran out first: more may be waiting.
    Budget,
}

/// Reads what is in the ring (up to a budget) and writes it out. A write
/// error stops the drain: the caller decides whether that is the end (closed
/// pipe) or a failure (full disk).
pub fn drain(
    ring: &mut RingBuf<MapData>,
    out: &mut impl Write,
    format: Format,
    counts: &mut Counts,
) -> io::Result<Drained> {
    let mut wrote = false;
    let mut taken = 0;
    while taken < BUDGET {
        let Some(item) = ring.next() else { break };
        taken += 1;
        match decode(&item) {
            Ok(event) => {
                counts.events[event.kind as usize] += 1;
                write_event(out, format, &event)?;
                wrote = true;
            }
            Err(error) => {
                counts.undecodable += 1;
                counts.first_undecodable.get_or_insert(error);
            }
        }
    }
    // Flush per drain so a reader sees events within a tick, not per buffer.
    if wrote {
        out.flush()?;
    }
    Ok(if taken == BUDGET {
        Drained::Budget
    } else {
        Drained::All
    })
}
