//! The deltas-in-place transform of a block's payload: the same bytes,
//! except that in every BATCH record each catalogue event's value is
//! replaced by its difference (wrapping, in the value's own width) from
//! the previous value of the same (event kind, value index), and each time
//! mark's time by its difference from the previous mark. Lengths, tags,
//! headers and every byte outside batch items stay where they are, so the
//! decoder finds the same records and widths the encoder did.

use styx_common::batch::{BatchHead, BatchRecord, BATCH_BYTES, BATCH_MAGIC, BATCH_RECORD_KIND};
use styx_common::item::{self, Layout, CATALOGUE_TAG, MARK_BYTES, TAG_BYTES, TIME_TAG};
use styx_common::RecordHeader;

const HEADER_BYTES: usize = core::mem::size_of::<BatchRecord>();
const ITEMS_LEN_AT: usize = core::mem::offset_of!(BatchRecord, len);
const KIND_AT: usize = core::mem::offset_of!(RecordHeader, kind);
const MAGIC_AT: usize =
    core::mem::offset_of!(BatchRecord, head) + core::mem::offset_of!(BatchHead, magic);
const MAX_BATCH_RECORD: usize = HEADER_BYTES + BATCH_BYTES;
const TAG_BATCH: u8 = 0x20;
const TAG_BATCH_DELTAS: u8 = 0x30;
/// Previous values: per kind (7 bits) and value index.
const SLOTS: usize = 128 * item::MAX_ITEM_VALUES;

/// Why deltas do not decode.
#[derive(Debug, thiserror::Error)]
#[error("a batch whose items do not read")]
pub struct DeltasError;

fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// The items of the BATCH record whose tag is at `pos`, if it looks like
/// one (its header only: the same before and after the transform), and
/// where the record ends.
fn batch_at(payload: &[u8], pos: usize) -> Option<(core::ops::Range<usize>, usize)> {
    let mut at = pos + 1;
    let len = get_varint(payload, &mut at)? as usize;
    if !(HEADER_BYTES..=MAX_BATCH_RECORD).contains(&len) {
        return None;
    }
    let record = payload.get(at..at + len)?;
    if record[KIND_AT] != BATCH_RECORD_KIND
        || record[MAGIC_AT..MAGIC_AT + 4] != BATCH_MAGIC.to_le_bytes()
    {
        return None;
    }
    let items_len =
        u32::from_le_bytes(record[ITEMS_LEN_AT..ITEMS_LEN_AT + 4].try_into().ok()?) as usize;
    (items_len <= len - HEADER_BYTES)
        .then(|| (at + HEADER_BYTES..at + HEADER_BYTES + items_len, at + len))
}

/// Which way values are turned.
#[derive(Clone, Copy)]
enum Turn {
    ToDeltas,
    ToValues,
}

/// Turns every batch's values in `bytes` (in place); false where an item
/// does not read (then `bytes` is part turned).
fn turn(bytes: &mut [u8], turn: Turn) -> bool {
    let mut prev = [0u64; SLOTS];
    let mut prev_mark = 0u64;
    let mut pos = 0;
    while let Some((items, end)) = next_batch(bytes, pos) {
        let items = &mut bytes[items];
        let mut at = 0;
        while at < items.len() {
            let Some(tag) = items.get(at..at + TAG_BYTES) else {
                return false;
            };
            let tag = u16::from_le_bytes([tag[0], tag[1]]);
            if tag == TIME_TAG {
                let Some(word) = items.get_mut(at + TAG_BYTES..at + MARK_BYTES) else {
                    return false;
                };
                let stored = u64::from_le_bytes(word.try_into().expect("8 bytes"));
                let (new, value) = match turn {
                    Turn::ToDeltas => (stored.wrapping_sub(prev_mark), stored),
                    Turn::ToValues => {
                        let value = stored.wrapping_add(prev_mark);
                        (value, value)
                    }
                };
                prev_mark = value;
                word.copy_from_slice(&new.to_le_bytes());
                at += MARK_BYTES;
            } else if tag & CATALOGUE_TAG != 0 {
                let Some(Layout::Event {
                    kind,
                    values,
                    widths,
                }) = Layout::of(tag)
                else {
                    return false;
                };
                let mut v = at + TAG_BYTES;
                for index in 0..values {
                    let width = 1usize << (widths >> (2 * index) & 3);
                    let Some(slot) = items.get_mut(v..v + width) else {
                        return false;
                    };
                    let prev = &mut prev[kind as usize * item::MAX_ITEM_VALUES + index];
                    *prev = turn_value(slot, *prev, turn);
                    v += width;
                }
                at = v;
            } else {
                let Some(&len) = items.get(at + TAG_BYTES) else {
                    return false;
                };
                at += TAG_BYTES + 1 + len as usize;
                if at > items.len() {
                    return false;
                }
            }
        }
        pos = end;
    }
    true
}

/// Turns one value of `slot.len()` bytes; the value it stands for.
#[inline(always)]
fn turn_value(slot: &mut [u8], prev: u64, turn: Turn) -> u64 {
    macro_rules! width {
        ($t:ty) => {{
            let stored = <$t>::from_le_bytes(slot.try_into().expect("its width"));
            let (new, value) = match turn {
                Turn::ToDeltas => (stored.wrapping_sub(prev as $t), stored),
                Turn::ToValues => {
                    let value = stored.wrapping_add(prev as $t);
                    (value, value)
                }
            };
            slot.copy_from_slice(&new.to_le_bytes());
            value as u64
        }};
    }
    match slot.len() {
        1 => width!(u8),
        2 => width!(u16),
        4 => width!(u32),
        _ => width!(u64),
    }
}

/// `payload` with its batches' values as deltas, into `out`; false if a
/// batch's items do not read.
pub fn encode(payload: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    out.extend_from_slice(payload);
    turn(out, Turn::ToDeltas)
}

/// Undoes [`encode`] in place.
pub fn decode(bytes: &mut [u8]) -> Result<(), DeltasError> {
    match turn(bytes, Turn::ToValues) {
        true => Ok(()),
        false => Err(DeltasError),
    }
}

/// The items of the first BATCH record at or past `pos` in `payload`, and
/// where that record ends.
fn next_batch(payload: &[u8], pos: usize) -> Option<(core::ops::Range<usize>, usize)> {
    next_record(payload, pos, TAG_BATCH).map(|(_, items, end)| (items, end))
}

/// The first record tagged `tag` at or past `pos` in `payload` whose head
/// reads as a batch record's (a coded record's head is not coded): where
/// its tag is, its items, and where it ends.
fn next_record(
    payload: &[u8],
    mut pos: usize,
    tag: u8,
) -> Option<(usize, core::ops::Range<usize>, usize)> {
    while let Some(found) = memchr::memchr(tag, &payload[pos..]) {
        let tag_at = pos + found;
        match batch_at(payload, tag_at) {
            Some((items, end)) => return Some((tag_at, items, end)),
            None => pos = tag_at + 1,
        }
    }
    None
}

/// Where `payload`'s BATCH records start (their tags), in order.
pub fn batch_tags(payload: &[u8]) -> Vec<u32> {
    tags_of(payload, TAG_BATCH)
}

/// Where the BATCH_DELTAS records of a payload coded by `BatchDeltas`
/// start: where its BATCH records did (coding moves no record).
pub fn batch_tags_coded(payload: &[u8]) -> Vec<u32> {
    tags_of(payload, TAG_BATCH_DELTAS)
}

fn tags_of(payload: &[u8], tag: u8) -> Vec<u32> {
    let mut tags = Vec::new();
    let mut pos = 0;
    while let Some((at, _, end)) = next_record(payload, pos, tag) {
        tags.push(at as u32);
        pos = end;
    }
    tags
}

/// Calls `each` with every BATCH record in `payload` up to its items' end
/// (its fixed part, then its items).
fn each_batch(payload: &[u8], mut each: impl FnMut(&[u8])) {
    let mut pos = 0;
    while let Some((items, end)) = next_batch(payload, pos) {
        each(&payload[items.start - HEADER_BYTES..items.end]);
        pos = end;
    }
}

/// Events in the payload's BATCH records, as the loader counts a batch it
/// keeps whole (`batch_items::counts_by_type`: in chains, checked).
pub fn counted(payload: &[u8]) -> u64 {
    let declared = styx_events::DeclaredTypes::default();
    let mut by_spec = Vec::new();
    let mut events = 0;
    each_batch(payload, |record| {
        let counts = styx_events::batch_items::counts_by_type(
            record,
            item::Codec::Current,
            &declared,
            &mut by_spec,
        )
        .expect("a batch whose items read");
        events += counts[1..].iter().sum::<u64>();
    });
    events
}

/// The items of every batch in `payload` skimmed (`item::skim`, as the
/// loader checks a batch it keeps whole), touching no value: what any
/// transform's walk costs at least. The number of items.
pub fn skim(payload: &[u8]) -> usize {
    let mut walked = 0;
    each_batch(payload, |record| {
        let items = &record[HEADER_BYTES..];
        let mut at = 0;
        while let Ok((_, len)) = item::skim(&items[at..]) {
            walked += 1;
            at += len;
        }
    });
    walked
}
