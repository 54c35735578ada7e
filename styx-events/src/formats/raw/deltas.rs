//! Version 6: a batch whose events are all of one type is stored with each
//! item's values as their difference from the item before (a BATCH_DELTAS
//! record); the worker compressing a block codes it, the reader decodes
//! it before splitting the batch.
//!
//! A batch of one type's events (coverage's `-e insn_exec`, one access
//! type, a tight loop) holds values that change little from one event to
//! the next: a pc a few bytes on, an address or a counter one up. Each
//! byte of an event's values is stored as its difference (wrapping) from
//! the same byte of the batch's previous event, and each byte of a time
//! mark's time from the previous mark's, so a counter's low byte becomes 1
//! and its other bytes 0, and the compressor after it finds repeats
//! everywhere. The tight loop's 64-bit stream (20 bytes an event) took
//! 22 ns an event of lz4 and left 6.4 bytes; coded first, 8 ns for 0.36
//! bytes (`styx-events/examples/bench-blocks`, which says more). Where the
//! emulated program's own repeats compress well already, coding costs
//! more than it saves: the worker keeps to what its last try of both ways
//! said (`blocks.rs`, `Coding`).
//!
//! Byte by byte, not value by value: no widths to look up (a declared
//! type's are in the capture's header, not in its items), and the loop is
//! a vector subtraction. An item's tag, and a declared type's length
//! byte, are not coded: the decoder walks the items the encoder did.
//!
//! Batches of several types stay as they are: there zstd finds the
//! emulated program's own repeats in the raw items better than in their
//! differences (bench-blocks: the demo's blocks 0.71 bytes an event coded
//! value by value, against 0.50 raw), and the walk costs as much as the
//! compression. The encoder gives up at the first item of a second type,
//! so trying costs such a batch a few items.

use super::varint::get;
use super::{TAG_BATCH, TAG_BATCH_DELTAS};
use core::mem::{offset_of, size_of};
use core::ops::Range;
use styx_common::batch::BatchRecord;
use styx_common::item::{self, Skimmed, MARK_BYTES, TAG_BYTES, TIME_TAG};

/// Bytes of a batch record before its items.
const RECORD_HEAD: usize = size_of::<BatchRecord>();
/// Where a batch record says how many bytes of items follow its head.
const ITEMS_LEN_AT: usize = offset_of!(BatchRecord, len);

/// Codes blocks' batches (a capture's worker) and decodes them (a reader;
/// public for tools that measure how blocks are stored), keeping its
/// buffers from one to the next.
#[derive(Default)]
pub struct BatchDeltas {
    coded: Vec<u8>,
    parts: Vec<Part>,
}

impl BatchDeltas {
    /// A block's payload of one BATCH record, as [`BatchDeltas::code`]
    /// takes it: its tag, its length, `record` (for tools and tests that
    /// make one; the capture's writer frames its records itself).
    pub fn entry(record: &[u8]) -> Vec<u8> {
        let mut buf = crate::write::buf::ByteBuf::with_capacity(record.len() + 16);
        buf.push(TAG_BATCH);
        super::varint::put(&mut buf, record.len() as u64);
        buf.extend_from_slice(record);
        buf.as_slice().to_vec()
    }

    /// `payload` (a block's records) with each of its one-type batches
    /// coded, their tags BATCH_DELTAS, as long as `payload`; `batches` are
    /// the offsets of its BATCH records, in order. None when none was.
    pub fn code(&mut self, payload: &[u8], batches: &[u32]) -> Option<&[u8]> {
        let coded = &mut self.coded;
        coded.clear();
        // Payload bytes before this are in `coded`.
        let mut copied = 0;
        for &at in batches {
            let at = at as usize;
            let mut pos = at + 1;
            if payload.get(at) != Some(&TAG_BATCH) || at < copied {
                continue;
            }
            let Some(record) = get(payload, &mut pos)
                .and_then(|len| payload.get(pos..pos.checked_add(len as usize)?))
            else {
                continue;
            };
            let Some(items) = items_of(record) else {
                continue;
            };
            let Ok(shape) = walk(&record[items.clone()], &mut self.parts) else {
                continue;
            };
            coded.extend_from_slice(&payload[copied..at]);
            coded.push(TAG_BATCH_DELTAS);
            coded.extend_from_slice(&payload[at + 1..pos]);
            // Every byte of the items is written by `encode`: not copied
            // first (the payload comes from another CPU's cache).
            let start = coded.len();
            coded.extend_from_slice(&record[..items.start]);
            coded.resize(start + items.end, 0);
            coded.extend_from_slice(&record[items.end..]);
            let out = &mut coded[start + items.start..start + items.end];
            encode(&record[items], out, &self.parts, shape);
            copied = pos + record.len();
        }
        if copied == 0 {
            return None;
        }
        coded.extend_from_slice(&payload[copied..]);
        Some(coded)
    }

    /// A BATCH_DELTAS record decoded into the batch record it was;
    /// Err(offset of the item in the batch's items) where they do not
    /// follow the coding: an item of a second type, or one cut off.
    pub fn decode(&mut self, record: &[u8]) -> Result<&[u8], usize> {
        let decoded = &mut self.coded;
        decoded.clear();
        decoded.extend_from_slice(record);
        // A head past the record: the splitter says what is wrong with it.
        if let Some(items) = items_of(decoded) {
            let items = &mut decoded[items];
            let shape = walk(items, &mut self.parts)?;
            decode(items, &self.parts, shape);
        }
        Ok(decoded)
    }

    /// `payload` (a block's records) decoded in place: each record at
    /// `batches` (where its BATCH records start, as [`BatchDeltas::code`]
    /// was told: coding moves no record) that is BATCH_DELTAS made the
    /// BATCH record it was. Err as [`BatchDeltas::decode`]'s.
    pub fn decode_payload(&mut self, payload: &mut [u8], batches: &[u32]) -> Result<(), usize> {
        for &at in batches {
            let at = at as usize;
            if payload.get(at) != Some(&TAG_BATCH_DELTAS) {
                continue;
            }
            let mut pos = at + 1;
            let Some(record) = get(payload, &mut pos)
                .and_then(|len| Some(pos..pos.checked_add(len as usize)?))
                .filter(|record| record.end <= payload.len())
            else {
                continue;
            };
            let decoded = self.decode(&payload[record.clone()])?;
            payload[record].copy_from_slice(decoded);
            payload[at] = TAG_BATCH;
        }
        Ok(())
    }
}

/// Where `record`'s items are, as its head says, if within it.
fn items_of(record: &[u8]) -> Option<Range<usize>> {
    let len = record.get(ITEMS_LEN_AT..ITEMS_LEN_AT + 4)?;
    let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
    let end = RECORD_HEAD.checked_add(len)?;
    (end <= record.len()).then_some(RECORD_HEAD..end)
}

/// The one event type of a batch's items, as its first item says.
#[derive(Clone, Copy, Default)]
struct Shape {
    /// Its uncoded bytes: the tag, and a declared type's length byte.
    head_bytes: [u8; TAG_BYTES + 1],
    /// How many of them.
    head: usize,
    /// An item's bytes.
    len: usize,
}

impl Shape {
    /// Whether `item` starts with an event of this type.
    #[inline(always)]
    fn starts(&self, item: &[u8]) -> bool {
        item.len() >= self.len
            && item[0] == self.head_bytes[0]
            && item[1] == self.head_bytes[1]
            && (self.head == TAG_BYTES || item[2] == self.head_bytes[2])
    }
}

/// A stretch of a batch's items.
#[derive(Clone, Copy)]
enum Part {
    /// A time mark at this offset, coded against the mark at `prev`.
    Mark { at: usize, prev: Option<usize> },
    /// Events of the batch's type from `at` to `end`, each coded against
    /// the one before it; the first against the one at `prev`.
    Run {
        at: usize,
        end: usize,
        prev: Option<usize>,
    },
}

/// The parts of `items` (coded or not: only their uncoded bytes steer the
/// walk) and their one event type; Err(an item's offset) where an item
/// is neither a mark nor of the type of the first event, or is cut off.
fn walk(items: &[u8], parts: &mut Vec<Part>) -> Result<Shape, usize> {
    parts.clear();
    let mut shape = None::<Shape>;
    let (mut prev_event, mut prev_mark) = (None, None);
    let mut at = 0;
    while at < items.len() {
        let item = &items[at..];
        if let Some(shape) = shape.filter(|shape| shape.starts(item)) {
            let mut end = at + shape.len;
            while shape.starts(&items[end..]) {
                end += shape.len;
            }
            parts.push(Part::Run {
                at,
                end,
                prev: prev_event.replace(end - shape.len),
            });
            at = end;
            continue;
        }
        match item {
            [low, high, ..] if u16::from_le_bytes([*low, *high]) == TIME_TAG => {
                if item.len() < MARK_BYTES {
                    return Err(at);
                }
                parts.push(Part::Mark {
                    at,
                    prev: prev_mark.replace(at),
                });
                at += MARK_BYTES;
            }
            _ if shape.is_some() => return Err(at),
            _ => {
                let len = match item::skim(item) {
                    Ok((Skimmed::Event(_) | Skimmed::Declared { .. }, len)) => len,
                    Ok((Skimmed::Mark, _)) | Err(_) => return Err(at),
                };
                let head = match item[1] & 0x80 {
                    0 => TAG_BYTES + 1,
                    _ => TAG_BYTES,
                };
                let mut head_bytes = [0; TAG_BYTES + 1];
                head_bytes[..head].copy_from_slice(&item[..head]);
                shape = Some(Shape {
                    head_bytes,
                    head,
                    len,
                });
            }
        }
    }
    Ok(shape.unwrap_or_default())
}

/// Codes `items` into `out`, every byte, as `walk` parted them.
fn encode(items: &[u8], out: &mut [u8], parts: &[Part], shape: Shape) {
    let Shape { head, len, .. } = shape;
    // The item at `at` of `len` bytes, its first `head` as they are, the
    // rest against the item at `prev` (or as they are).
    let item = |out: &mut [u8], at: usize, head: usize, len: usize, prev: Option<usize>| {
        out[at..at + head].copy_from_slice(&items[at..at + head]);
        let values = &items[at + head..at + len];
        match prev {
            Some(prev) => subtract(&mut out[at + head..at + len], values, &items[prev + head..]),
            None => out[at + head..at + len].copy_from_slice(values),
        }
    };
    for &part in parts {
        match part {
            Part::Mark { at, prev } => item(out, at, TAG_BYTES, MARK_BYTES, prev),
            Part::Run { at, end, prev } => {
                item(out, at, head, len, prev);
                // Each event after the first against the one before it, in
                // one pass over the run (tags too, put back after).
                subtract(
                    &mut out[at + len..end],
                    &items[at + len..end],
                    &items[at..end],
                );
                for event in (at + len..end).step_by(len) {
                    // Byte by byte: a copy of `head` bytes is a call.
                    out[event] = items[event];
                    out[event + 1] = items[event + 1];
                    if head > TAG_BYTES {
                        out[event + 2] = items[event + 2];
                    }
                }
            }
        }
    }
}

/// Decodes `items` in place, as `walk` parted them.
fn decode(items: &mut [u8], parts: &[Part], shape: Shape) {
    let Shape { head, len, .. } = shape;
    for &part in parts {
        match part {
            Part::Mark { at, prev } => {
                if let Some(prev) = prev {
                    add(items, at + TAG_BYTES..at + MARK_BYTES, prev + TAG_BYTES);
                }
            }
            Part::Run { at, end, prev } => {
                if let Some(prev) = prev {
                    add(items, at + head..at + len, prev + head);
                }
                for event in (at + len..end).step_by(len) {
                    add(items, event + head..event + len, event - len + head);
                }
            }
        }
    }
}

#[inline(always)]
fn subtract(out: &mut [u8], cur: &[u8], prev: &[u8]) {
    for ((out, cur), prev) in out.iter_mut().zip(cur).zip(prev) {
        *out = cur.wrapping_sub(*prev);
    }
}

/// Adds to `bytes[values]` the bytes from `from` on, which come before.
#[inline(always)]
fn add(bytes: &mut [u8], values: Range<usize>, from: usize) {
    let (before, values) = bytes[..values.end].split_at_mut(values.start);
    for (value, prev) in values.iter_mut().zip(&before[from..]) {
        *value = value.wrapping_add(*prev);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::test_items::{event, mark};
    use styx_common::item::write_declared;
    use styx_common::EventKind;

    /// A batch record (head zeroed but for its items' length) of `items`,
    /// with `extra` bytes after them.
    fn record(items: &[u8], extra: usize) -> Vec<u8> {
        let mut record = vec![0u8; RECORD_HEAD];
        record[ITEMS_LEN_AT..ITEMS_LEN_AT + 4].copy_from_slice(&(items.len() as u32).to_le_bytes());
        record.extend_from_slice(items);
        record.extend((0..extra).map(|i| i as u8));
        record
    }

    /// A `mem_read` as the tight loop fires it: 64-bit pc and address, a
    /// byte read (20 bytes).
    fn mem_read(items: &mut Vec<u8>, pc: u64, addr: u64, val: u8) {
        let values = [(pc, 8), (addr, 8), (val.into(), 1), (1, 1)];
        items.extend(event(EventKind::MemRead, &values));
    }

    /// A `mem_write` of the same widths: an event of a second type.
    fn mem_write(items: &mut Vec<u8>) {
        items.extend(event(
            EventKind::MemWrite,
            &[(1, 8), (2, 8), (3, 1), (1, 1)],
        ));
    }

    fn declared(items: &mut Vec<u8>, values: &[u64], widths: &[usize]) {
        let mut out = [0u8; item::MAX_DECLARED_ITEM_BYTES];
        let n = write_declared(7, values, widths, &mut out);
        items.extend_from_slice(&out[..n]);
    }

    /// The tight loop's stream: marks among 64-bit `mem_read`s.
    fn one_type() -> Vec<u8> {
        let mut items = Vec::new();
        for i in 0..500u64 {
            if i % 50 == 0 {
                items.extend(mark(1_000_000 + i * 37));
            }
            mem_read(&mut items, 0x0600 + (i & 0xff), i ^ 0x55, i as u8);
        }
        items
    }

    /// `record` coded, if it is.
    fn code(record: &[u8]) -> Option<Vec<u8>> {
        let payload = BatchDeltas::entry(record);
        let coded = BatchDeltas::default().code(&payload, &[0])?.to_vec();
        assert_eq!(coded.len(), payload.len());
        assert_eq!(coded[0], TAG_BATCH_DELTAS);
        Some(coded[payload.len() - record.len()..].to_vec())
    }

    fn decode(coded: &[u8]) -> Result<Vec<u8>, usize> {
        BatchDeltas::default().decode(coded).map(<[u8]>::to_vec)
    }

    fn round_trip(record: &[u8]) -> Vec<u8> {
        let coded = code(record).expect("codes");
        assert_eq!(decode(&coded), Ok(record.to_vec()), "decodes to the record");
        coded
    }

    /// A batch of one type's events (and marks) codes to as many bytes,
    /// mostly small differences, and decodes to itself; the head, the tags
    /// and the bytes after the items stay as they are.
    #[test]
    fn one_types_batch_codes_to_its_differences_and_back() {
        let items = one_type();
        let record = record(&items, 7);
        let coded = round_trip(&record);
        assert_eq!(coded[..RECORD_HEAD], record[..RECORD_HEAD]);
        assert_eq!(coded[record.len() - 7..], record[record.len() - 7..]);
        let coded_items = &coded[RECORD_HEAD..RECORD_HEAD + items.len()];
        // The first event as it is; the second's pc one on, its address
        // xor 0x55's step, its value one on, its size the same.
        let first = MARK_BYTES;
        let second = first + 20;
        assert_eq!(coded_items[first..second], items[first..second]);
        assert_eq!(
            coded_items[second..second + 2],
            items[second..second + 2],
            "tag"
        );
        assert_eq!(
            coded_items[second + 2..second + 20],
            [1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0]
        );
        let zeros = coded_items.iter().filter(|&&b| b == 0).count();
        assert!(
            zeros * 10 > coded_items.len() * 7,
            "{zeros} of {}",
            coded_items.len()
        );
    }

    /// A declared type's items keep their length byte as it is.
    #[test]
    fn declared_items_code_and_keep_their_length() {
        let mut items = Vec::new();
        for i in 0..40u64 {
            declared(&mut items, &[i, 1000 - i], &[2, 2]);
        }
        let record = record(&items, 0);
        let coded = round_trip(&record);
        assert_eq!(coded[RECORD_HEAD + 7..RECORD_HEAD + 10], [7, 0, 4]);
        assert_eq!(coded[RECORD_HEAD + 10..RECORD_HEAD + 14], [1, 0, 0xff, 0]);
    }

    /// Events of a second type, or another length under the same tag, or
    /// an item cut off or of no known tag: not coded.
    #[test]
    fn batches_not_of_one_type_are_not_coded() {
        let mut mixed = one_type();
        mem_write(&mut mixed);
        let mut lengths = Vec::new();
        declared(&mut lengths, &[1, 2], &[2, 2]);
        declared(&mut lengths, &[1, 2], &[2, 4]);
        let cut = one_type()[..100].to_vec();
        let mut unknown = one_type();
        unknown.extend_from_slice(&[0x01, 0xff, 0, 0]);
        for items in [mixed, lengths, cut, unknown] {
            assert_eq!(code(&record(&items, 0)), None);
        }
        // Its head claiming more items than it holds.
        let mut short = record(&one_type(), 0);
        short[ITEMS_LEN_AT] += 1;
        assert_eq!(code(&short), None);
    }

    /// The block's payload: its one-type batches coded and retagged, a
    /// mixed one and every other byte as they were; false when none codes.
    #[test]
    fn a_blocks_one_type_batches_are_coded_and_others_kept() {
        let uniform = record(&one_type(), 0);
        let mut mixed_items = one_type();
        mixed_items.extend(mark(5));
        mem_write(&mut mixed_items);
        let mixed = record(&mixed_items, 0);
        let mut payload = vec![0x00, 0x05, 0x06];
        let mut batches = Vec::new();
        for record in [&uniform, &mixed, &uniform] {
            batches.push(payload.len() as u32);
            payload.extend(BatchDeltas::entry(record));
            payload.extend([0x10, 0x01]);
        }
        let mut coder = BatchDeltas::default();
        let coded = coder.code(&payload, &batches).expect("coded").to_vec();
        assert_eq!(coded.len(), payload.len());
        let tags: Vec<u8> = batches.iter().map(|&at| coded[at as usize]).collect();
        assert_eq!(tags, [TAG_BATCH_DELTAS, TAG_BATCH, TAG_BATCH_DELTAS]);
        // Each coded record decodes back; the rest is as it was.
        let mut decoded = coded.clone();
        BatchDeltas::default()
            .decode_payload(&mut decoded, &batches)
            .unwrap();
        assert_eq!(decoded, payload);
        assert_eq!(coder.code(&BatchDeltas::entry(&mixed), &[0]), None);
    }

    /// Decoding bytes no encoder wrote stops at the item that does not
    /// follow the coding, never past the record.
    #[test]
    fn decoding_foreign_bytes_stops_at_what_does_not_follow() {
        let mut items = one_type();
        let second_type = items.len();
        mem_write(&mut items);
        assert_eq!(decode(&record(&items, 3)), Err(second_type));
        let cut = &one_type()[..95];
        assert_eq!(decode(&record(cut, 0)), Err(90));
        // A head past the record: left as it is, for the splitter.
        let mut long = record(&one_type(), 0);
        long[ITEMS_LEN_AT + 3] = 0xff;
        assert_eq!(decode(&long), Ok(long.clone()));
        for len in 0..RECORD_HEAD + 30 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let _ = decode(&bytes);
        }
    }
}
