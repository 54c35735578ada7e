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
//! the process): [`Batches`] remembers, per buffer (process, thread, buffer
//! number), its last few batches, how far into each events were given and
//! the bytes at both ends of that, and gives each event once. A record that
//! repeats a batch's number with other bytes there, or is older than the
//! batches remembered, is given whole and counted ([`Irregular`]): nothing
//! is hidden because a record looks like a repeat. Buffers not heard from
//! while thousands of others were are forgotten, so memory stays bounded
//! whatever thread ids or buffer numbers the records name.

use crate::record::event::{Body, Event};
use bytemuck::pod_read_unaligned;
use std::collections::HashMap;
use std::mem::{size_of, take};
use styx_common::batch::{BatchRecord, ALONE_SEQ, BATCH_BYTES};
use styx_common::item::{Codec, Item, ItemError};
use styx_common::schema::MAX_FIELDS;
use styx_common::{EventKind, RecordHeader};
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
    /// An item's tag names no batched event kind.
    #[error("batch item {offset} has unknown tag {tag:#06x}")]
    UnknownTag {
        /// The item's offset in the batch.
        offset: usize,
        /// Its tag (in a version-1 capture, its kind byte).
        tag: u16,
    },
    /// An item of an event type the emulator declared that the session
    /// does not know (its file's notes did not declare it), or of another
    /// length than its declaration's.
    #[error("batch item {offset} is of no event type its file declared (tag {tag:#06x})")]
    Declared {
        /// The item's offset in the batch.
        offset: usize,
        /// Its tag.
        tag: u16,
    },
    /// The last item runs past the end.
    #[error("batch item at {0} is cut off")]
    Truncated(usize),
    /// A capture's delta coded batch (`BATCH_DELTAS`) whose item at this
    /// offset of its items is not of the batch's one type: none of its
    /// events were given.
    #[error("delta coded batch item at {0} is not of the batch's one type")]
    NotCoded(usize),
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
    /// A catalogue event's first four; a declared type's fields.
    args: [u64; MAX_FIELDS],
    /// A declared type's event: its spec id and how many fields it has.
    declared: Option<(u32, usize)>,
}

/// How the items of an event type the emulator declared read (from the
/// session's header): the spec id its events are named by, and per field
/// its bytes and whether it is signed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Declared {
    /// The spec id of the type's USDT site.
    pub spec_id: u32,
    /// (bytes, signed) of each field, in order.
    pub fields: Vec<(u8, bool)>,
}

impl Declared {
    /// Bytes of an item's values.
    pub fn value_bytes(&self) -> usize {
        self.fields.iter().map(|&(bytes, _)| bytes as usize).sum()
    }

    /// The fields of an item's `values` (as the per-event site passes
    /// them: signed ones sign-extended); None when they are not the
    /// declaration's length.
    fn read(&self, values: &[u8]) -> Option<[u64; MAX_FIELDS]> {
        let mut read = [0u64; MAX_FIELDS];
        let mut at = 0;
        for (slot, &(bytes, signed)) in read.iter_mut().zip(&self.fields) {
            let bytes = bytes as usize;
            let mut word = [0u8; 8];
            word[..bytes].copy_from_slice(values.get(at..at + bytes)?);
            let value = u64::from_le_bytes(word);
            let unused = 64 - 8 * bytes as u32;
            *slot = match signed {
                true if unused > 0 => ((value << unused) as i64 >> unused) as u64,
                _ => value,
            };
            at += bytes;
        }
        (at == values.len()).then_some(read)
    }
}

/// The declared types batches carry, by (file, tag): a batch record's
/// `aux` is its file.
pub type DeclaredTypes = HashMap<(u8, u16), Declared>;

/// Records that were not what an honest emulator hands over; their events
/// were given whole (so some may have been given twice).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Irregular {
    /// Repeated the number of a batch their buffer had handed over, with
    /// other bytes where they overlap.
    pub conflicting: u64,
    /// Numbered below the batches remembered of their buffer, or between
    /// them without being one of them.
    pub out_of_order: u64,
}

/// Which buffer a record comes from: (process, thread, buffer number).
type BufferKey = (u32, u32, u32);

/// Batches remembered per buffer: a repeat comes soon after the batch
/// (within a flush or two of its owner).
const RECENT: usize = 4;

/// Buffers remembered per generation; a buffer unheard of for a whole
/// generation is forgotten (at most twice this many are remembered).
const GENERATION: usize = 4096;

/// What was given of one batch.
#[derive(Clone, Copy, Debug)]
struct Given {
    seq: u64,
    /// Bytes of the batch given, from its start.
    to: u64,
    /// Its first 16 bytes (the time mark every batch begins with), once a
    /// record from its start was given.
    first: Option<[u8; 16]>,
    /// The 16 bytes before `to` (the last item's arguments).
    last: Option<[u8; 16]>,
}

/// A buffer's recent batches, oldest first.
type Recent = [Option<Given>; RECENT];

/// Where a record stands against what its buffer handed over before.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    /// Nothing of it was given: all of it is new.
    Fresh,
    /// A batch given up to this offset (bytes before are repeats).
    Known { given_to: u64 },
    /// Overlaps what was given of its batch, with other bytes.
    Conflicting,
    /// Older than the batches remembered, or between them.
    OutOfOrder,
}

/// Per-buffer memory of what was given, and scratch space reused across
/// records.
#[derive(Default)]
pub struct Batches {
    /// Buffers heard from in this generation.
    buffers: HashMap<BufferKey, Recent>,
    /// Those of the previous generation not heard from since.
    older: HashMap<BufferKey, Recent>,
    irregular: Irregular,
    /// The current record's events.
    events: Vec<Walked>,
    /// Its time marks: (index of the event after the mark, ns).
    marks: Vec<(usize, u64)>,
    /// The items' layout.
    codec: Codec,
    /// The declared types the items may be of.
    declared: DeclaredTypes,
}

/// A record's fixed part and items, once both are whole.
struct Record<'a> {
    batch: BatchRecord,
    items: &'a [u8],
}

impl Record<'_> {
    fn key(&self) -> BufferKey {
        (
            self.batch.header.pid,
            self.batch.header.tid,
            self.batch.head.buffer,
        )
    }

    fn start(&self) -> u64 {
        self.batch.start as u64
    }

    fn end(&self) -> u64 {
        self.start() + self.items.len() as u64
    }

    /// The batch's first 16 bytes, if this record starts there.
    fn first(&self) -> Option<[u8; 16]> {
        let bytes = self.items.get(..16).filter(|_| self.batch.start == 0)?;
        Some(bytes.try_into().expect("16 bytes"))
    }

    /// The 16 bytes before batch offset `to`, if this record holds them.
    fn before(&self, to: u64) -> Option<[u8; 16]> {
        let at = to.checked_sub(16)?.checked_sub(self.start())? as usize;
        let bytes = self.items.get(at..at.checked_add(16)?)?;
        Some(bytes.try_into().expect("16 bytes"))
    }

    /// What this record gives of its batch.
    fn given(&self) -> Given {
        Given {
            seq: self.batch.head.seq,
            to: self.end(),
            first: self.first(),
            last: self.before(self.end()),
        }
    }
}

impl Batches {
    /// A fresh memory, for batches of the current item layout.
    pub fn new() -> Batches {
        Batches::default()
    }

    /// A fresh memory, for batches whose items are laid out as `codec`
    /// says (a capture of an earlier format version) and may be of the
    /// `declared` types.
    pub fn with(codec: Codec, declared: DeclaredTypes) -> Batches {
        Batches {
            codec,
            declared,
            ..Batches::default()
        }
    }

    /// Forgets what was given: the batches after are placed as if first
    /// (parallel `read`'s runs each begin so, like its blocks' deltas).
    pub fn forget(&mut self) {
        self.buffers.clear();
        self.older.clear();
    }

    /// The irregular records seen so far.
    pub fn irregular(&self) -> Irregular {
        self.irregular
    }

    /// The batches remembered of `key`, if any (without making it recent).
    fn recent(&self, key: &BufferKey) -> Option<&Recent> {
        self.buffers.get(key).or_else(|| self.older.get(key))
    }

    /// The batches remembered of `key`, made recent: a new generation
    /// starts when this one is full, forgetting buffers not heard of in
    /// the last.
    fn recent_mut(&mut self, key: BufferKey) -> &mut Recent {
        if !self.buffers.contains_key(&key) {
            let recent = self.older.remove(&key).unwrap_or_default();
            if self.buffers.len() >= GENERATION {
                self.older = take(&mut self.buffers);
            }
            self.buffers.insert(key, recent);
        }
        self.buffers.get_mut(&key).expect("just inserted")
    }

    /// Whether `record` overlaps what was given of its batch (then it is
    /// split, which gives only the new part, or reports a conflict).
    fn overlaps(&self, record: &Record<'_>) -> bool {
        let seq = record.batch.head.seq;
        seq != ALONE_SEQ
            && self.recent(&record.key()).is_some_and(|recent| {
                recent
                    .iter()
                    .flatten()
                    .any(|g| g.seq == seq && record.start() < g.to)
            })
    }

    /// Places `record` against what its buffer handed over before, and
    /// remembers what it gives.
    fn place(&mut self, record: &Record<'_>) -> Place {
        let seq = record.batch.head.seq;
        if seq == ALONE_SEQ {
            return Place::Fresh;
        }
        let recent = self.recent_mut(record.key());
        let place = match recent.iter_mut().flatten().find(|g| g.seq == seq) {
            Some(given) => {
                let start = record.start();
                let differs = start < given.to
                    && ((given.first.is_some()
                        && record.first().is_some()
                        && given.first != record.first())
                        || (given.last.is_some()
                            && record.before(given.to).is_some()
                            && given.last != record.before(given.to)));
                if differs {
                    *given = record.given();
                    Place::Conflicting
                } else {
                    let given_to = given.to;
                    given.first = given.first.or(record.first());
                    if record.end() > given.to {
                        given.to = record.end();
                        given.last = record.before(given.to);
                    }
                    Place::Known { given_to }
                }
            }
            None => {
                let newest = recent.iter().flatten().map(|g| g.seq).max();
                let fresh = newest.is_none_or(|newest| seq > newest);
                // The oldest (or an empty) entry makes room.
                let oldest = recent
                    .iter_mut()
                    .min_by_key(|g| g.map_or(0, |g| g.seq.saturating_add(1)))
                    .expect("RECENT > 0");
                if fresh || oldest.is_none_or(|g| g.seq < seq) {
                    *oldest = Some(record.given());
                }
                if fresh {
                    Place::Fresh
                } else {
                    Place::OutOfOrder
                }
            }
        };
        match place {
            Place::Conflicting => self.irregular.conflicting += 1,
            Place::OutOfOrder => self.irregular.out_of_order += 1,
            Place::Fresh | Place::Known { .. } => {}
        }
        place
    }

    /// Takes `record` whole when none of it was given before: adds its
    /// events per kind to `counts` (index = kind id) from a walk of its
    /// item words ([`crate::record::batch_items::counts`]: the head's own counts
    /// are the traced process's word, never trusted), and remembers it was
    /// given; how many events it holds. None, having changed nothing, when
    /// it must be split instead (part of it was given, or it is malformed:
    /// [`Batches::split`] then says how). Its declared types' events are
    /// added to `by_spec` per spec id.
    pub fn take_whole(
        &mut self,
        record: &[u8],
        counts: &mut [u64],
        by_spec: &mut Vec<(u32, u64)>,
    ) -> Option<u64> {
        let mut types = Vec::new();
        let found = crate::record::batch_items::counts_by_type(
            record,
            self.codec,
            &self.declared,
            &mut types,
        );
        let found = found?;
        let batch: BatchRecord = pod_read_unaligned(&record[..RECORD]);
        let items = &record[RECORD..RECORD + batch.len as usize];
        let record = Record { batch, items };
        if self.overlaps(&record) {
            return None;
        }
        for (count, n) in counts.iter_mut().zip(found) {
            *count += n;
        }
        for (spec_id, n) in types {
            crate::record::batch_items::add(by_spec, spec_id, n);
        }
        self.place(&record);
        Some(found.iter().sum())
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
        let walked = self.walk(items, batch.header.aux);
        let start = batch.start as u64;
        // Batch offsets before this were given already.
        let given_to = match self.place(&Record { batch, items }) {
            Place::Known { given_to } => given_to,
            Place::Fresh | Place::Conflicting | Place::OutOfOrder => 0,
        };
        let result = self.give(&batch.header, start, given_to, &mut each);
        walked?;
        Ok(result)
    }

    /// Reads the items (of a batch of file `file`) into `events` and
    /// `marks`; an error for a bad item, after keeping those before it.
    fn walk(&mut self, items: &[u8], file: u8) -> Result<(), BatchError> {
        self.events.clear();
        self.marks.clear();
        // The last declared type met: a batch's items are of few types.
        let mut last: Option<(u16, &Declared)> = None;
        let mut at = 0;
        while at < items.len() {
            let (item, len) = self.codec.read(&items[at..]).map_err(|e| match e {
                ItemError::Truncated => BatchError::Truncated(at),
                ItemError::UnknownTag(tag) => BatchError::UnknownTag { offset: at, tag },
            })?;
            match item {
                Item::Mark(ns) => self.marks.push((self.events.len(), ns)),
                Item::Event { kind, aux, args } => {
                    let mut wide = [0u64; MAX_FIELDS];
                    wide[..args.len()].copy_from_slice(&args);
                    self.events.push(Walked {
                        offset: at,
                        kind,
                        aux,
                        args: wide,
                        declared: None,
                    })
                }
                Item::Declared { tag, values } => {
                    let declared = match last {
                        Some((last_tag, declared)) if last_tag == tag => Some(declared),
                        _ => self.declared.get(&(file, tag)),
                    };
                    last = declared.map(|d| (tag, d));
                    let read = declared.and_then(|d| Some((d, d.read(values)?)));
                    let Some((declared, args)) = read else {
                        return Err(BatchError::Declared { offset: at, tag });
                    };
                    self.events.push(Walked {
                        offset: at,
                        kind: EventKind::Usdt,
                        aux: declared.fields.len() as u8,
                        args,
                        declared: Some((declared.spec_id, declared.fields.len())),
                    })
                }
            }
            at += len;
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
            let body = match event.declared {
                Some((spec_id, n)) => Body::Usdt {
                    spec_id,
                    args: &event.args[..n],
                    strings: &[],
                },
                None => Body::Args([event.args[0], event.args[1], event.args[2], event.args[3]]),
            };
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
                body,
            };
            each(&timed)?;
            split.events += 1;
        }
        Ok(split)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::test_items::{bad_tag, insn, mark, mem_read};
    use styx_common::batch::{BatchHead, BATCH_RECORD_KIND};

    /// A batch record of thread 7 in process 1, flushed at `end_ns`.
    fn record(seq: u64, start: u32, end_ns: u64, items: &[u8]) -> Vec<u8> {
        let fixed = BatchRecord {
            header: RecordHeader {
                ts_ns: end_ns,
                pid: 1,
                tid: 7,
                kind: BATCH_RECORD_KIND,
                ..RecordHeader::default()
            },
            head: BatchHead {
                seq,
                ..BatchHead::default()
            },
            start,
            len: items.len() as u32,
        };
        let mut bytes = bytemuck::bytes_of(&fixed).to_vec();
        bytes.extend_from_slice(items);
        bytes
    }

    /// (ts, first argument) of each event given.
    fn split(batches: &mut Batches, bytes: &[u8]) -> Result<Vec<(u64, u64)>, BatchError> {
        let mut got = Vec::new();
        batches
            .split(bytes, |event| {
                let Body::Args(args) = event.body else {
                    unreachable!()
                };
                assert_eq!((event.header.pid, event.header.tid), (1, 7));
                got.push((event.header.ts_ns, args[0]));
                Ok::<(), ()>(())
            })?
            .unwrap();
        Ok(got)
    }

    #[test]
    fn events_are_timed_between_the_marks_around_them_and_the_flush() {
        let items: Vec<u8> = [
            &mark(1000)[..],
            &insn(1),
            &insn(2),
            &mark(1400),
            &insn(3),
            &insn(4),
            &insn(5),
            &insn(6),
        ]
        .concat();
        let got = split(&mut Batches::new(), &record(0, 0, 2200, &items)).unwrap();
        // 1000 and 1400 exact; 2 halfway between them; 4, 5, 6 a quarter
        // of the way each towards the flush (as if a mark followed 6).
        assert_eq!(
            got,
            [
                (1000, 1),
                (1200, 2),
                (1400, 3),
                (1600, 4),
                (1800, 5),
                (2000, 6)
            ]
        );
    }

    #[test]
    fn events_before_any_mark_take_the_next_marks_time_or_the_flushes() {
        let items: Vec<u8> = [&insn(1)[..], &mark(500), &insn(2)].concat();
        let got = split(&mut Batches::new(), &record(0, 48, 900, &items)).unwrap();
        assert_eq!(got, [(500, 1), (500, 2)]);
        let got = split(&mut Batches::new(), &record(0, 0, 900, &insn(3))).unwrap();
        assert_eq!(got, [(900, 3)]);
    }

    #[test]
    fn bytes_of_a_batch_given_before_are_not_given_again() {
        let mut batches = Batches::new();
        let first: Vec<u8> = [&mark(10)[..], &insn(1), &insn(2)].concat();
        assert_eq!(
            split(&mut batches, &record(3, 0, 50, &first))
                .unwrap()
                .len(),
            2
        );
        // The same batch, longer (read again later): only the new event.
        let longer: Vec<u8> = [&first[..], &insn(3)].concat();
        let got = split(&mut batches, &record(3, 0, 60, &longer)).unwrap();
        assert_eq!(got.iter().map(|e| e.1).collect::<Vec<_>>(), [3]);
        // Its rest handed over from where a loader took it: nothing new.
        assert!(split(&mut batches, &record(3, 48, 70, &insn(3)))
            .unwrap()
            .is_empty());
        // A newer one is given.
        assert_eq!(
            split(&mut batches, &record(4, 0, 90, &first))
                .unwrap()
                .len(),
            2
        );
        // Batch 3 arriving again late (a process's exit flushed it while
        // its owner did): given already.
        assert!(split(&mut batches, &record(3, 0, 95, &longer))
            .unwrap()
            .is_empty());
        assert_eq!(batches.irregular(), Irregular::default());
        // Batches of one event, from a thread being torn down, all count.
        for _ in 0..2 {
            assert_eq!(
                split(&mut batches, &record(ALONE_SEQ, 0, 99, &insn(9)))
                    .unwrap()
                    .len(),
                1
            );
        }
    }

    #[test]
    fn whole_batches_are_counted_per_kind_once() {
        let mut batches = Batches::new();
        let mut counts = [0u64; 16];
        let mem = mem_read(1, 2, 3, 4);
        let items: Vec<u8> = [&mark(10)[..], &insn(1), &mem, &insn(2)].concat();
        assert_eq!(
            batches.take_whole(&record(0, 0, 20, &items), &mut counts, &mut Vec::new()),
            Some(3)
        );
        assert_eq!(counts[EventKind::InsnExec as usize], 2);
        assert_eq!(counts[EventKind::MemRead as usize], 1);
        assert_eq!(counts.iter().sum::<u64>(), 3);
        // Overlapping what was taken: to be split instead, counts untouched.
        assert_eq!(
            batches.take_whole(&record(0, 0, 30, &items), &mut counts, &mut Vec::new()),
            None
        );
        assert_eq!(counts.iter().sum::<u64>(), 3);
        // A bad item: split instead (which reports it).
        let bad: Vec<u8> = [&insn(1)[..], &bad_tag()].concat();
        assert_eq!(
            batches.take_whole(&record(1, 0, 30, &bad), &mut counts, &mut Vec::new()),
            None
        );

        // A head's counts are not trusted, even when they fit the batch's
        // length: these say one mem_read and four marks, the items hold two
        // insn_exec more.
        let mut lying = record(2, 0, 40, &items);
        let counts_at = RECORD - 8 - 64;
        lying[counts_at..][..4].copy_from_slice(&4u32.to_le_bytes());
        lying[counts_at + 4 * EventKind::InsnExec as usize..][..4]
            .copy_from_slice(&0u32.to_le_bytes());
        lying[counts_at + 4 * EventKind::MemRead as usize..][..4]
            .copy_from_slice(&1u32.to_le_bytes());
        let mut counts = [0u64; 16];
        assert_eq!(
            batches.take_whole(&lying, &mut counts, &mut Vec::new()),
            Some(3)
        );
        assert_eq!(counts[EventKind::InsnExec as usize], 2);
        assert_eq!(counts[EventKind::MemRead as usize], 1);
    }

    /// `record` of `buffer` (thread 7 of process 1).
    fn of_buffer(buffer: u32, mut bytes: Vec<u8>) -> Vec<u8> {
        let at = std::mem::offset_of!(BatchRecord, head) + std::mem::offset_of!(BatchHead, buffer);
        bytes[at..at + 4].copy_from_slice(&buffer.to_le_bytes());
        bytes
    }

    #[test]
    fn batches_are_told_apart_by_buffer_not_by_thread_id_alone() {
        // A thread id given out again, to a thread on another buffer whose
        // batch numbers are lower: nothing of it is a repeat.
        let mut batches = Batches::new();
        let items: Vec<u8> = [&mark(10)[..], &insn(1), &insn(2)].concat();
        let got = split(&mut batches, &of_buffer(1, record(9, 0, 20, &items))).unwrap();
        assert_eq!(got.len(), 2);
        let got = split(&mut batches, &of_buffer(2, record(2, 0, 30, &items))).unwrap();
        assert_eq!(got.len(), 2);
        let mut counts = [0u64; 16];
        assert_eq!(
            batches.take_whole(
                &of_buffer(3, record(0, 0, 40, &items)),
                &mut counts,
                &mut Vec::new()
            ),
            Some(2)
        );
        assert_eq!(counts.iter().sum::<u64>(), 2);
        assert_eq!(batches.irregular(), Irregular::default());
    }

    #[test]
    fn records_that_are_not_repeats_are_given_whole_and_counted() {
        let mut batches = Batches::new();
        let first: Vec<u8> = [&mark(10)[..], &insn(1), &insn(2)].concat();
        assert_eq!(
            split(&mut batches, &record(5, 0, 20, &first))
                .unwrap()
                .len(),
            2
        );
        // Batch 5 again with another time mark: not a repeat.
        let other: Vec<u8> = [&mark(11)[..], &insn(3), &insn(4)].concat();
        let got = split(&mut batches, &record(5, 0, 30, &other)).unwrap();
        assert_eq!(got.iter().map(|e| e.1).collect::<Vec<_>>(), [3, 4]);
        // Batch 5 from its middle, its last bytes other than given.
        let got = split(
            &mut batches,
            &record(5, 10, 35, &[insn(3), insn(0x600)].concat()),
        )
        .unwrap();
        assert_eq!(got.iter().map(|e| e.1).collect::<Vec<_>>(), [3, 0x600]);
        assert_eq!(batches.irregular().conflicting, 2);
        // Numbers going backwards, below every batch remembered: all given.
        for seq in (0..5).rev() {
            let items: Vec<u8> = [&mark(20)[..], &insn(100 + seq)].concat();
            let got = split(&mut batches, &record(seq, 0, 40, &items)).unwrap();
            assert_eq!(got.len(), 1, "batch {seq}");
        }
        assert_eq!(batches.irregular().out_of_order, 5);
        // Taken whole too, and counted the same.
        let mut counts = [0u64; 16];
        assert_eq!(
            batches.take_whole(&record(1, 0, 50, &first), &mut counts, &mut Vec::new()),
            Some(2)
        );
        assert_eq!(counts.iter().sum::<u64>(), 2);
        assert_eq!(batches.irregular().out_of_order, 6);
    }

    /// Tags are numbered per file: two files' types under one tag read
    /// each as its own file declares it (a batch record's `aux` is its
    /// file).
    #[test]
    fn equal_tags_of_two_files_are_their_own_files_types() {
        use styx_common::item::{write_declared, MAX_DECLARED_ITEM_BYTES};
        let tag = 0x7ffe;
        let declared = DeclaredTypes::from([
            (
                (0, tag),
                Declared {
                    spec_id: 10,
                    fields: vec![(2, false), (8, false)],
                },
            ),
            (
                (1, tag),
                Declared {
                    spec_id: 20,
                    fields: vec![(1, true)],
                },
            ),
        ]);
        let mut batches = Batches::with(Codec::Current, declared);
        let item = |values: &[u64], widths: &[usize]| {
            let mut out = [0u8; MAX_DECLARED_ITEM_BYTES];
            let len = write_declared(tag, values, widths, &mut out);
            out[..len].to_vec()
        };
        let mut given = Vec::new();
        for (file, values, widths) in [
            (0, &[0x1234, u64::MAX][..], &[2, 8][..]),
            (1, &[0xfe], &[1]),
        ] {
            let items: Vec<u8> = [&mark(10)[..], &item(values, widths)].concat();
            let mut bytes = record(file.into(), 0, 20, &items);
            let aux_at =
                std::mem::offset_of!(BatchRecord, header) + std::mem::offset_of!(RecordHeader, aux);
            bytes[aux_at] = file;
            batches
                .split(&bytes, |event| {
                    let Body::Usdt { spec_id, args, .. } = event.body else {
                        panic!("not a declared type's event")
                    };
                    given.push((spec_id, args.to_vec()));
                    Ok::<(), ()>(())
                })
                .unwrap()
                .unwrap();
        }
        assert_eq!(
            given,
            [(10, vec![0x1234, u64::MAX]), (20, vec![-2i64 as u64])]
        );
    }

    #[test]
    fn memory_stays_bounded_whatever_threads_the_records_name() {
        let mut batches = Batches::new();
        let items: Vec<u8> = [&mark(10)[..], &insn(1)].concat();
        let mut bytes = record(0, 0, 20, &items);
        let tid_at = std::mem::offset_of!(BatchRecord, header) + 12;
        for tid in 0..5 * GENERATION as u32 {
            bytes[tid_at..tid_at + 4].copy_from_slice(&tid.to_le_bytes());
            let mut counts = [0u64; 16];
            assert_eq!(
                batches.take_whole(&bytes, &mut counts, &mut Vec::new()),
                Some(1)
            );
        }
        assert!(batches.buffers.len() + batches.older.len() <= 2 * GENERATION);
        // A buffer heard from lately is still known.
        assert_eq!(
            batches.take_whole(&bytes, &mut [0u64; 16], &mut Vec::new()),
            None
        );
    }

    #[test]
    fn malformed_batches_give_what_precedes_the_fault_then_say_why() {
        let mut batches = Batches::new();
        let bad: Vec<u8> = [&insn(1)[..], &bad_tag()].concat();
        let mut got = Vec::new();
        let error = batches
            .split(&record(0, 0, 5, &bad), |e| {
                got.push(e.header.ts_ns);
                Ok::<(), ()>(())
            })
            .unwrap_err();
        assert_eq!(got.len(), 1);
        assert_eq!(
            error,
            BatchError::UnknownTag {
                offset: 19,
                tag: styx_common::item::CATALOGUE_TAG | (EventKind::Marker as u16) << 8
            }
        );
        // Cut inside an item.
        let mut cut = record(1, 0, 5, &insn(1));
        let len = cut.len();
        cut.truncate(len - 8);
        assert!(matches!(
            batches.split(&cut, |_| Ok::<(), ()>(())),
            Err(BatchError::Short { .. })
        ));
        let mut lying = record(2, 0, 5, &insn(1));
        lying[RECORD - 4..RECORD].copy_from_slice(&16u32.to_le_bytes());
        assert_eq!(
            batches.split(&lying, |_| Ok::<(), ()>(())).unwrap_err(),
            BatchError::Truncated(0)
        );
        assert!(matches!(
            batches.split(&[0u8; 10], |_| Ok::<(), ()>(())),
            Err(BatchError::Short { len: 10, .. })
        ));
    }
}
