//! Moves records from the ring buffer to the output, counting as it goes.

use aya::maps::{MapData, RingBuf};
use std::io;
use std::time::{Duration, Instant};
use styx_common::batch::BATCH_RECORD_KIND;
use styx_common::item::Codec;
use styx_common::{FatalRecord, EVENT_KIND_SLOTS, FATAL_RECORD_KIND};
use styx_events::Keep;
use styx_events::{batch_items, decode, Body, DecodeError, Event};
use styx_events::{BatchError, Batches, DeclaredTypes, Irregular};
use styx_events::{Discard, EventWriter, Totals, HELD_AT_MOST};

/// Records taken per drain at most, so a producer faster than the output
/// cannot keep the loop from noticing signals and deadlines.
const BUDGET: usize = 1 << 16;
/// A drain's time at most, for the same reason when the output is slow
/// (a budget of batches could take seconds): Ctrl-C and `--duration` are
/// noticed within about this.
const DRAIN_TIME: Duration = Duration::from_millis(50);
/// Records between looks at the clock (a look costs ~20 ns, a batch
/// record µs).
const RECORDS_PER_LOOK: usize = 16;
/// How often drains of an idle ring flush the output after the last
/// events, until [`HELD_AT_MOST`] (and two of these) has passed: a capture
/// cuts the block it holds back only in a flush once the block has
/// waited, and stores it in a later one if no worker compressed it in
/// time, so an emulator gone idle still sees its last events reach the
/// file, on a busy machine too.
const IDLE_FLUSH_EVERY: Duration = Duration::from_millis(50);

/// What has gone through, per event kind (index = kind id).
#[derive(Default)]
pub struct Counts {
    pub events: [u64; EVENT_KIND_SLOTS as usize],
    pub undecodable: u64,
    pub first_undecodable: Option<DecodeError>,
    /// Batch records that were malformed (their events before the fault
    /// are counted as events).
    pub bad_batches: u64,
    pub first_bad_batch: Option<BatchError>,
    /// Batched events that arrived twice and were given once.
    pub duplicates: u64,
    /// Of the `usdt` events, how many each probe gave: (spec id, events),
    /// in the order first seen (the summary names each).
    pub by_probe: Vec<(u32, u64)>,
}

impl Counts {
    pub fn total(&self) -> u64 {
        self.events.iter().sum()
    }

    /// Counts `event`.
    fn event(&mut self, event: &Event<'_>) {
        self.events[event.kind as usize] += 1;
        if let Body::Usdt { spec_id, .. } = event.body {
            batch_items::add(&mut self.by_probe, spec_id, 1);
        }
    }
}

pub enum Drained {
    /// The ring was empty when the drain ended.
    All,
    /// As [`Drained::All`], but it had held an eighth of its size or more:
    /// the loader is behind the ring.
    AllBehind,
    /// The budget (records or time) ran out first: more may be waiting
    /// (the loader is behind).
    Budget,
}

impl Drained {
    /// Whether the ring was empty when the drain ended.
    pub fn emptied(&self) -> bool {
        !matches!(self, Drained::Budget)
    }

    /// Whether the drain found the loader behind the ring.
    pub fn behind(&self) -> bool {
        !matches!(self, Drained::All)
    }
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
    /// What each thread's batches gave so far.
    batches: Batches,
    /// Batch records taken from the ring.
    pub batch_records: u64,
    /// Once closed: whether part of the output still works and is to be
    /// finished (the capture beside a closed `-o`, see [`EventWriter::can_finish`]).
    finishable: bool,
    /// `--filter`/`--sample` for what the kernel did not filter.
    pub keep: Option<Keep>,
    /// Batches must be split to be filtered (else an output may take them whole).
    split_batches: bool,
    /// The traced process is being killed: (signal, kernel time), from a
    /// `FatalRecord` (flight recorder), until the session takes it.
    pub fatal: Option<(u32, u64)>,
    /// Time spent in drains that took anything (writes that block
    /// included): the loader's busy time, for why events were dropped.
    pub busy: Duration,
    /// When a drain last took records, and when the output was last flushed.
    last_taken: Option<Instant>,
    last_flush: Instant,
    /// Bytes of records taken in one drain past which the loader is behind
    /// the ring (an eighth of it: drains come every millisecond).
    behind_bytes: usize,
}

impl Sink {
    /// The session's header named more probes or functions (see
    /// `EventWriter::header_grew`): whether the output names them.
    pub fn header_grew(&mut self, header: &styx_events::Header) -> bool {
        self.out.header_grew(header)
    }

    /// Where the process mapped its files (see
    /// `EventWriter::process_mapped`): whether the output keeps it.
    pub fn process_mapped(&mut self, mapped: &[styx_events::MappedFile]) -> bool {
        self.out.process_mapped(mapped)
    }

    /// Events go to `out`; `keep` filters those the kernel did not, and
    /// with `split_batches` batches are always split to be filtered.
    /// Batches may hold events of the `declared` types.
    pub fn new(
        out: Box<dyn EventWriter>,
        keep: Option<Keep>,
        split_batches: bool,
        declared: DeclaredTypes,
        ring_bytes: u32,
    ) -> Sink {
        Sink {
            keep,
            split_batches,
            fatal: None,
            out,
            written: Counts::default(),
            unwritten: Counts::default(),
            error: None,
            open: true,
            batches: Batches::with(Codec::Current, declared),
            batch_records: 0,
            finishable: false,
            busy: Duration::ZERO,
            last_taken: None,
            last_flush: Instant::now(),
            behind_bytes: ring_bytes as usize / 8,
        }
    }

    /// The loader is behind for want of a CPU: the output leaves it the
    /// CPU for a while (see `EventWriter::behind`).
    pub fn leave_the_cpu(&mut self) {
        if self.open {
            self.out.behind();
        }
    }

    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Batch records that were not what an honest emulator hands over.
    pub fn irregular(&self) -> Irregular {
        self.batches.irregular()
    }

    /// Takes what is in the ring, up to a budget of records and time.
    pub fn drain(&mut self, ring: &mut RingBuf<MapData>) -> Drained {
        let started = Instant::now();
        let (mut taken, mut bytes) = (0, 0);
        let mut drained = Drained::All;
        loop {
            if taken == BUDGET
                || (taken % RECORDS_PER_LOOK == 0 && taken > 0 && started.elapsed() >= DRAIN_TIME)
            {
                drained = Drained::Budget;
                break;
            }
            let Some(item) = ring.next() else {
                if bytes >= self.behind_bytes {
                    drained = Drained::AllBehind;
                }
                break;
            };
            taken += 1;
            bytes += item.len();
            self.record(&item);
        }
        let now = Instant::now();
        if taken > 0 {
            self.last_taken = Some(now);
        }
        // Flush per drain so a reader sees events within a tick, not per
        // buffer; when idle, now and then until what a writer holds back
        // has waited long enough to go out.
        let idle_flush = taken == 0
            && now.duration_since(self.last_flush) >= IDLE_FLUSH_EVERY
            && (self.last_taken)
                .is_some_and(|t| now.duration_since(t) <= HELD_AT_MOST + 2 * IDLE_FLUSH_EVERY);
        if (taken > 0 || idle_flush) && self.open {
            self.last_flush = now;
            if let Err(e) = self.out.flush() {
                self.failed(e);
            }
        }
        if taken > 0 {
            self.busy += started.elapsed();
        }
        drained
    }

    /// Writes out the events of one record (an event, or a batch of them).
    pub fn record(&mut self, bytes: &[u8]) {
        if bytes.get(16) == Some(&FATAL_RECORD_KIND) {
            if let Ok(fatal) = bytemuck::try_pod_read_unaligned::<FatalRecord>(bytes) {
                self.fatal = Some((fatal.signal, fatal.header.ts_ns));
            }
            return;
        }
        if bytes.get(16) == Some(&BATCH_RECORD_KIND) {
            self.batch_records += 1;
        }
        let (out, counts): (&mut dyn EventWriter, _) = if self.open {
            (&mut *self.out, &mut self.written)
        } else {
            (&mut Discard, &mut self.unwritten)
        };
        // Stored whole by an output that can (the raw capture, the flight
        // recorder) when every item parses: the loader then only walks
        // the item words to count them. The head's counts are not trusted:
        // a batch with a bad item stored whole would stop a reader there.
        let whole = match bytes.get(16) {
            // Counted by the walk, into the counts, when taken whole.
            Some(&BATCH_RECORD_KIND) if out.takes_batches() && !self.split_batches => {
                (self.batches).take_whole(bytes, &mut counts.events, &mut counts.by_probe)
            }
            _ => None,
        };
        let keep = &mut self.keep;
        let mut keeps = |event: &Event<'_>| keep.as_mut().is_none_or(|k| k.keeps(event));
        let written = match (bytes.get(16), whole) {
            (Some(&BATCH_RECORD_KIND), Some(events)) => out.batch(batch_items::kept(bytes), events),
            (Some(&BATCH_RECORD_KIND), None) => {
                let split = self.batches.split(bytes, |event| {
                    if !keeps(event) {
                        return Ok(());
                    }
                    counts.event(event);
                    out.event(event)
                });
                match split {
                    Ok(Ok(split)) => {
                        counts.duplicates += split.duplicates;
                        Ok(())
                    }
                    Ok(Err(e)) => Err(e),
                    Err(error) => {
                        counts.bad_batches += 1;
                        counts.first_bad_batch.get_or_insert(error);
                        Ok(())
                    }
                }
            }
            _ => match decode(bytes) {
                Ok(event) if !keeps(&event) => Ok(()),
                Ok(event) => {
                    counts.event(&event);
                    out.event(&event)
                }
                Err(error) => {
                    counts.undecodable += 1;
                    counts.first_undecodable.get_or_insert(error);
                    Ok(())
                }
            },
        };
        if let Err(e) = written {
            self.failed(e);
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
