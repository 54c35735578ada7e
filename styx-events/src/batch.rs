//! A batch record split into its events (protocol in `styx_common::batch`).
//!
//! Each event gets a `CLOCK_MONOTONIC` time: the time marks the thread wrote
//! (before its first event and then every ~1 KiB of items, ~32 memory
//! accesses) are exact; an event between two marks is placed by its index,
//! linearly between them, and one after the last mark between it and the
//! flush (the kernel's time when the batch was handed over). So times are
//! exact at marks and within the interval between marks elsewhere, never
//! decreasing within a thread.
//!
//! The same bytes of a batch may arrive twice (a process's exit flushes
//! other threads' buffers while they run; a stopping loader reads them from
//! the process): [`Batches`] remembers, per thread, the newest batch and how
//! far into it events were given, and gives each once.

use crate::event::{Body, Event};
use bytemuck::pod_read_unaligned;
use std::collections::HashMap;
use std::mem::size_of;
use styx_common::batch::{item_bytes, BatchRecord, ALONE_SEQ, BATCH_BYTES, ITEM_TIME};
use styx_common::{EventKind, RecordHeader, Shape};
use thiserror::Error;

const RECORD: usize = size_of::<BatchRecord>();

/// A batch record that is not what the eBPF program writes; its events (if
/// any were readable) were given before the error.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum BatchError {
    /// Shorter than its fixed part, or than the items it says it has.
    #[error("batch record of {len} bytes, too short for its {needed}")]
    Short {
        /// The record's size.
        len: usize,
        /// Bytes it needs.
        needed: usize,
    },
    /// An item names no batched event kind.
    #[error("batch item {offset} has unknown kind {kind}")]
    UnknownKind {
        /// The item's offset in the batch.
        offset: usize,
        /// Its kind byte.
        kind: u8,
    },
    /// The last item runs past the end.
    #[error("batch item at {0} is cut off")]
    Truncated(usize),
}

/// What a batch record gave.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Events given.
    pub events: u64,
    /// Events skipped as already given.
    pub duplicates: u64,
}

/// An event of a batch, walked: its offset in the record's items.
struct Walked {
    offset: usize,
    kind: EventKind,
    aux: u8,
    args: [u64; 4],
}

/// Per-thread memory of what was given, and scratch space reused across
/// records.
#[derive(Default)]
pub struct Batches {
    /// (process, thread) → (newest batch seq, bytes of it given).
    given: HashMap<(u32, u32), (u64, u64)>,
    /// The current record's events.
    events: Vec<Walked>,
    /// Its time marks: (index of the event after the mark, ns).
    marks: Vec<(usize, u64)>,
}

impl Batches {
    /// A fresh memory.
    pub fn new() -> Batches {
        Batches::default()
    }

    /// Takes `record` whole when none of it was given before: adds its
    /// events per kind to `counts` (index = kind id) from a walk of its
    /// item words, and remembers it was given. False, having changed
    /// nothing, when it must be split instead (part of it was given, or it
    /// is malformed: [`Batches::split`] then says how).
    pub fn take_whole(&mut self, record: &[u8], counts: &mut [u64]) -> bool {
        let Some(fixed) = record.get(..RECORD) else {
            return false;
        };
        let batch: BatchRecord = pod_read_unaligned(fixed);
        let len = batch.len as usize;
        let Some(items) = record
            .get(RECORD..RECORD + len)
            .filter(|_| len <= BATCH_BYTES)
        else {
            return false;
        };
        let key = (batch.header.pid, batch.header.tid);
        let seq = batch.head.seq;
        let fresh = match self.given.get(&key) {
            _ if seq == ALONE_SEQ => true,
            Some(&(newest, to)) => seq > newest || (seq == newest && to <= batch.start as u64),
            None => true,
        };
        if !fresh || !count_items(items, counts) {
            return false;
        }
        if seq != ALONE_SEQ {
            self.given
                .insert(key, (seq, batch.start as u64 + len as u64));
        }
        true
    }

    /// Splits `record` (a ring record whose kind is
    /// `styx_common::batch::BATCH_RECORD_KIND`) and calls `each` with its
    /// events not given before, in order. Stops at the first error `each`
    /// returns. A malformed record gives the events before the fault, then
    /// the error.
    pub fn split<E>(
        &mut self,
        record: &[u8],
        mut each: impl FnMut(&Event<'_>) -> Result<(), E>,
    ) -> Result<Result<Split, E>, BatchError> {
        if record.len() < RECORD {
            return Err(BatchError::Short {
                len: record.len(),
                needed: RECORD,
            });
        }
        let batch: BatchRecord = pod_read_unaligned(&record[..RECORD]);
        let len = (batch.len as usize).min(BATCH_BYTES);
        let Some(items) = record.get(RECORD..RECORD + len) else {
            return Err(BatchError::Short {
                len: record.len(),
                needed: RECORD + len,
            });
        };
        let walked = self.walk(items);
        let start = batch.start as u64;
        let key = (batch.header.pid, batch.header.tid);
        let seq = batch.head.seq;
        // Batch offsets before this were given already.
        let given_to = match self.given.get(&key) {
            _ if seq == ALONE_SEQ => 0,
            Some(&(newest, _)) if seq < newest => u64::MAX,
            Some(&(newest, to)) if seq == newest => to,
            _ => 0,
        };
        if seq != ALONE_SEQ {
            let end = start + len as u64;
            let entry = self.given.entry(key).or_insert((seq, 0));
            if entry.0 < seq {
                *entry = (seq, 0);
            }
            if entry.0 == seq {
                entry.1 = entry.1.max(end);
            }
        }
        let result = self.give(&batch.header, start, given_to, &mut each);
        walked?;
        Ok(result)
    }

    /// Reads the items into `events` and `marks`; an error for a bad item,
    /// after keeping those before it.
    fn walk(&mut self, items: &[u8]) -> Result<(), BatchError> {
        self.events.clear();
        self.marks.clear();
        let mut at = 0;
        while at < items.len() {
            let word = read_u64(items, at).ok_or(BatchError::Truncated(at))?;
            let kind = word as u8;
            if kind == ITEM_TIME {
                let ns = read_u64(items, at + 8).ok_or(BatchError::Truncated(at))?;
                self.marks.push((self.events.len(), ns));
                at += item_bytes(1);
                continue;
            }
            let event_kind = EventKind::from_id(kind)
                .filter(|k| matches!(k.shape(), Shape::Args(_) | Shape::MemAccess))
                .ok_or(BatchError::UnknownKind { offset: at, kind })?;
            let n = event_kind.shape().record_args();
            let mut args = [0u64; 4];
            for (i, arg) in args.iter_mut().enumerate().take(n) {
                *arg = read_u64(items, at + 8 * (1 + i)).ok_or(BatchError::Truncated(at))?;
            }
            self.events.push(Walked {
                offset: at,
                kind: event_kind,
                aux: (word >> 8) as u8,
                args,
            });
            at += item_bytes(n);
        }
        Ok(())
    }

    /// Gives the walked events at or past `given_to` (batch offsets), timed.
    fn give<E>(
        &self,
        header: &RecordHeader,
        start: u64,
        given_to: u64,
        each: &mut impl FnMut(&Event<'_>) -> Result<(), E>,
    ) -> Result<Split, E> {
        let total = self.events.len();
        // The flush closes the last interval, as if a mark followed.
        let end = (total, header.ts_ns);
        let mut split = Split::default();
        // marks[next] is the first mark after the current event.
        let mut next = 0;
        let mut previous_ns = 0;
        for (index, event) in self.events.iter().enumerate() {
            while next < self.marks.len() && self.marks[next].0 <= index {
                next += 1;
            }
            let after = self.marks.get(next).copied().unwrap_or(end);
            let ns = match next.checked_sub(1).map(|m| self.marks[m]) {
                Some(before) => interpolate(before, after, index),
                // Before any mark (a batch handed over from its middle):
                // the next mark's time, or the flush's.
                None => after.1,
            };
            let ns = ns.max(previous_ns);
            previous_ns = ns;
            if start + (event.offset as u64) < given_to {
                split.duplicates += 1;
                continue;
            }
            let timed = Event {
                header: RecordHeader {
                    ts_ns: ns,
                    pid: header.pid,
                    tid: header.tid,
                    kind: event.kind as u8,
                    aux: event.aux,
                    _reserved: [0; 6],
                },
                kind: event.kind,
                body: Body::Args(event.args),
            };
            each(&timed)?;
            split.events += 1;
        }
        Ok(split)
    }
}

/// Adds the events of `items` per kind to `counts`, walking only their
/// words; false (counts unchanged) if an item is bad or cut off.
fn count_items(items: &[u8], counts: &mut [u64]) -> bool {
    let mut found = [0u64; styx_common::EVENT_KIND_SLOTS as usize];
    let mut at = 0;
    while at < items.len() {
        let Some(word) = read_u64(items, at) else {
            return false;
        };
        let kind = word as u8;
        let args = match ARGS_OF[kind as usize & 0x0f] {
            Some(args) if kind < 16 => args,
            _ => return false,
        };
        if kind != ITEM_TIME {
            found[kind as usize] += 1;
        }
        at += item_bytes(args);
    }
    if at != items.len() {
        return false;
    }
    for (count, n) in counts.iter_mut().zip(found) {
        *count += n;
    }
    true
}

/// Arguments an item of each kind byte has: a time mark one (its ns), a
/// batched event its record's; None for kinds batches never hold.
const ARGS_OF: [Option<usize>; 16] = {
    let mut args = [None; 16];
    args[ITEM_TIME as usize] = Some(1);
    let mut i = 0;
    while i < EventKind::ALL.len() {
        let kind = EventKind::ALL[i];
        if let Shape::Args(_) | Shape::MemAccess = kind.shape() {
            args[kind as usize] = Some(kind.shape().record_args());
        }
        i += 1;
    }
    args
};

/// The time of event `index`, linearly between two (event index, ns) marks.
fn interpolate((from, from_ns): (usize, u64), (to, to_ns): (usize, u64), index: usize) -> u64 {
    if to <= from || to_ns <= from_ns {
        return from_ns;
    }
    let (span, done, all) = (to_ns - from_ns, (index - from) as u64, (to - from) as u64);
    match span.checked_mul(done) {
        Some(product) => from_ns + product / all,
        None => from_ns + (span as u128 * done as u128 / all as u128) as u64,
    }
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let chunk = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(chunk.try_into().expect("8 bytes")))
}
