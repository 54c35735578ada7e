//! The columns transform of a block's payload: its BATCH records' items
//! split into a stream of tags and one stream per (event kind, value
//! index), each value a zigzag varint of its difference from the previous
//! value of the same stream; time marks as differences from the previous
//! mark; the batch headers in a stream of their own; every other byte (the
//! records that are not batches, each BATCH record's tag and length) as it
//! is, in order. Reversible to the exact payload bytes.
//!
//! ```text
//! columns := count:varint (id:varint len:varint)^count  stream bytes, by id
//! ```

use styx_common::batch::BatchRecord;
use styx_common::item::{self, Layout, CATALOGUE_TAG, MARK_BYTES, TAG_BYTES, TIME_TAG};

/// Bytes of a batch record's header, before its items.
const HEADER_BYTES: usize = core::mem::size_of::<BatchRecord>();
/// Where in it the bytes of items are counted (`BatchRecord::len`).
const ITEMS_LEN_AT: usize = core::mem::offset_of!(BatchRecord, len);

/// The tag of a BATCH record in the payload.
const TAG_BATCH: u8 = 0x20;

/// Per batch record, the literal bytes before it and those past its items.
const LAYOUT: usize = 0;
/// The bytes outside batch records' headers and items.
const LITERAL: usize = 1;
const HEADERS: usize = 2;
const TAGS: usize = 3;
const MARKS: usize = 4;
/// Declared types' items after their tag: length byte and values.
const DECLARED: usize = 5;
const FIRST_VALUES: usize = 6;
/// Kinds a catalogue tag names (7 bits).
const KINDS: usize = 128;
const STREAMS: usize = FIRST_VALUES + KINDS * item::MAX_ITEM_VALUES;

const fn value_stream(kind: usize, index: usize) -> usize {
    FIRST_VALUES + kind * item::MAX_ITEM_VALUES + index
}

/// Why columns do not decode.
#[derive(Debug, thiserror::Error)]
pub enum ColumnsError {
    #[error("its stream table is malformed")]
    Table,
    #[error("stream {0} ends early")]
    StreamEnds(usize),
    #[error("it decodes past its payload's length")]
    TooLong,
    #[error("it decodes to {got} bytes where the frame says {want}")]
    Length { got: usize, want: usize },
    #[error("an item of tag {0:#06x} no batch holds")]
    Tag(u16),
    #[error("a value wider than its item's width")]
    Width,
    #[error("a batch's items overrun its length")]
    Overrun,
    #[error("stream {0} holds bytes no record takes")]
    Leftover(usize),
}

/// Reusable state of the transform, both ways.
pub struct Columns {
    streams: Vec<Stream>,
    /// Catalogue tags' items, by the tag's low 15 bits.
    shapes: Vec<TagShape>,
    /// Values' deltas in the value's own width (wrapping), not as varints.
    fixed: bool,
}

/// What a catalogue tag's item holds, looked up once per item.
#[derive(Clone, Copy, Default)]
struct TagShape {
    /// Bytes of the item, its tag included; 0 for a tag no batch holds.
    len: u8,
    values: u8,
    widths: u8,
    /// The stream of its first value (the others follow).
    first_stream: u16,
}

impl TagShape {
    fn of(low: u16) -> TagShape {
        match Layout::of(CATALOGUE_TAG | low) {
            Some(
                layout @ Layout::Event {
                    kind,
                    values,
                    widths,
                },
            ) => TagShape {
                len: layout.bytes() as u8,
                values: values as u8,
                widths,
                first_stream: value_stream(kind as usize, 0) as u16,
            },
            _ => TagShape::default(),
        }
    }
}

/// A stream's bytes and the last value it took a delta from, together:
/// the encoder's inner loop touches both per value.
#[derive(Clone, Default)]
struct Stream {
    bytes: Vec<u8>,
    prev: u64,
}

impl Default for Columns {
    fn default() -> Self {
        Columns {
            streams: vec![Stream::default(); STREAMS],
            shapes: (0..=!CATALOGUE_TAG).map(TagShape::of).collect(),
            fixed: false,
        }
    }
}

impl Columns {
    /// Columns whose deltas keep their values' widths.
    pub fn fixed_width() -> Columns {
        Columns {
            fixed: true,
            ..Columns::default()
        }
    }
}

#[inline(always)]
fn put_varint(out: &mut Vec<u8>, value: u64) {
    // One and two bytes are most values' deltas: a short path for them.
    if value < 0x80 {
        out.push(value as u8);
    } else if value < 0x4000 {
        out.extend_from_slice(&[value as u8 | 0x80, (value >> 7) as u8]);
    } else {
        put_long_varint(out, value);
    }
}

#[inline(never)]
fn put_long_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[inline]
fn zigzag(delta: u64) -> u64 {
    let d = delta as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

#[inline]
fn unzigzag(value: u64) -> u64 {
    (value >> 1) ^ (value & 1).wrapping_neg()
}

#[inline]
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

fn le(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

/// The little-endian value of `width` (1, 2, 4 or 8) bytes at `at`: a load
/// of that width, where a copy of variable length into a word costs a
/// call and a stalled load per value.
#[inline(always)]
fn value_at(bytes: &[u8], at: usize, width: usize) -> Option<u64> {
    let end = at.checked_add(width)?;
    let bytes = bytes.get(at..end)?;
    Some(match width {
        1 => bytes[0].into(),
        2 => u16::from_le_bytes([bytes[0], bytes[1]]).into(),
        4 => u32::from_le_bytes(bytes.try_into().ok()?).into(),
        _ => u64::from_le_bytes(bytes.try_into().ok()?),
    })
}

/// Appends `value`'s low `width` (1, 2, 4 or 8) bytes.
#[inline(always)]
fn put_value(out: &mut Vec<u8>, value: u64, width: usize) {
    match width {
        1 => out.push(value as u8),
        2 => out.extend_from_slice(&(value as u16).to_le_bytes()),
        4 => out.extend_from_slice(&(value as u32).to_le_bytes()),
        _ => out.extend_from_slice(&value.to_le_bytes()),
    }
}

/// The most bytes of a BATCH record (as the capture's reader takes).
const MAX_BATCH_RECORD: usize = HEADER_BYTES + styx_common::batch::BATCH_BYTES;
/// Where a batch record's header has its kind and its batch head's magic.
const KIND_AT: usize = core::mem::offset_of!(styx_common::RecordHeader, kind);
const MAGIC_AT: usize = core::mem::offset_of!(BatchRecord, head)
    + core::mem::offset_of!(styx_common::batch::BatchHead, magic);

/// The BATCH record whose tag is at `pos`, if it looks like one: the
/// record's range. Found by its look rather than by reading every
/// record before it (only the capture's reader knows how long an event
/// record is); a look-alike inside another record is transformed as well
/// and decodes to the same bytes.
fn batch_at(payload: &[u8], pos: usize) -> Option<core::ops::Range<usize>> {
    let mut at = pos + 1;
    let len = get_varint(payload, &mut at)? as usize;
    if !(HEADER_BYTES..=MAX_BATCH_RECORD).contains(&len) {
        return None;
    }
    let record = payload.get(at..at + len)?;
    if record[KIND_AT] != styx_common::batch::BATCH_RECORD_KIND
        || record[MAGIC_AT..MAGIC_AT + 4] != styx_common::batch::BATCH_MAGIC.to_le_bytes()
    {
        return None;
    }
    let items_len = le(&record[ITEMS_LEN_AT..ITEMS_LEN_AT + 4]) as usize;
    (items_len <= len - HEADER_BYTES).then_some(at..at + len)
}

impl Columns {
    /// The columns of `payload` into `out` (cleared first); false when a
    /// batch's items do not parse (the payload is then best stored
    /// otherwise).
    pub fn encode(&mut self, payload: &[u8], out: &mut Vec<u8>) -> bool {
        for stream in &mut self.streams {
            stream.bytes.clear();
            stream.prev = 0;
        }
        let mut pos = 0;
        let mut literal_from = 0;
        while let Some(found) = memchr::memchr(TAG_BATCH, &payload[pos..]) {
            let tag_at = pos + found;
            let Some(record) = batch_at(payload, tag_at) else {
                pos = tag_at + 1;
                continue;
            };
            let items_end =
                HEADER_BYTES + le(&payload[record.start + ITEMS_LEN_AT..][..4]) as usize;
            let trailing = record.len() - items_end;
            let layout = &mut self.streams[LAYOUT].bytes;
            put_varint(layout, (record.start - literal_from) as u64);
            put_varint(layout, trailing as u64);
            (self.streams[LITERAL].bytes).extend_from_slice(&payload[literal_from..record.start]);
            if !self.batch(payload, record.start, record.start + items_end) {
                return false;
            }
            // Bytes past its items, which readers skip.
            (self.streams[LITERAL].bytes)
                .extend_from_slice(&payload[record.start + items_end..record.end]);
            literal_from = record.end;
            pos = record.end;
        }
        (self.streams[LITERAL].bytes).extend_from_slice(&payload[literal_from..]);
        out.clear();
        let used = self.streams.iter().filter(|s| !s.bytes.is_empty()).count();
        put_varint(out, used as u64);
        for (id, stream) in self.streams.iter().enumerate() {
            if !stream.bytes.is_empty() {
                put_varint(out, id as u64);
                put_varint(out, stream.bytes.len() as u64);
            }
        }
        for stream in &self.streams {
            out.extend_from_slice(&stream.bytes);
        }
        true
    }

    /// A batch record's header and items into the streams; false if its
    /// length or an item is not what a batch holds.
    fn batch(&mut self, payload: &[u8], start: usize, end: usize) -> bool {
        let record = &payload[start..end];
        let Some((header, items)) = record.split_at_checked(HEADER_BYTES) else {
            return false;
        };
        let items_at = start + HEADER_BYTES;
        if le(&header[ITEMS_LEN_AT..ITEMS_LEN_AT + 4]) != items.len() as u64 {
            return false;
        }
        self.streams[HEADERS].bytes.extend_from_slice(header);
        let mut at = 0;
        while at < items.len() {
            let Some(tag) = items.get(at..at + TAG_BYTES) else {
                return false;
            };
            let tag = u16::from_le_bytes([tag[0], tag[1]]);
            self.streams[TAGS]
                .bytes
                .extend_from_slice(&tag.to_le_bytes());
            if tag == TIME_TAG {
                let Some(ns) = value_at(items, at + TAG_BYTES, 8) else {
                    return false;
                };
                let marks = &mut self.streams[MARKS];
                put_varint(&mut marks.bytes, zigzag(ns.wrapping_sub(marks.prev)));
                marks.prev = ns;
                at += MARK_BYTES;
            } else if tag & CATALOGUE_TAG != 0 && self.fixed {
                let shape = self.shapes[(tag & !CATALOGUE_TAG) as usize];
                let item_end = at + shape.len as usize;
                if shape.len == 0 || item_end > items.len() {
                    return false;
                }
                let mut v = items_at + at + TAG_BYTES;
                let mut widths = shape.widths;
                for index in 0..shape.values as usize {
                    let width = 1usize << (widths & 3);
                    widths >>= 2;
                    // A whole word where the payload has one (all but its
                    // last bytes): no branch on the width.
                    let value = match payload.get(v..v + 8) {
                        Some(word) => {
                            u64::from_le_bytes(word.try_into().expect("8 bytes"))
                                & (u64::MAX >> (64 - 8 * width))
                        }
                        None => le(&payload[v..v + width]),
                    };
                    let stream = &mut self.streams[shape.first_stream as usize + index];
                    let delta = value.wrapping_sub(stream.prev);
                    let len = stream.bytes.len();
                    stream.bytes.extend_from_slice(&delta.to_le_bytes());
                    stream.bytes.truncate(len + width);
                    stream.prev = value;
                    v += width;
                }
                at = item_end;
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
                    let Some(value) = value_at(items, v, width) else {
                        return false;
                    };
                    let stream = &mut self.streams[value_stream(kind as usize, index)];
                    let delta = value.wrapping_sub(stream.prev);
                    match self.fixed {
                        true => put_value(&mut stream.bytes, delta, width),
                        false => put_varint(&mut stream.bytes, zigzag(delta)),
                    }
                    stream.prev = value;
                    v += width;
                }
                at = v;
            } else {
                let Some(&len) = items.get(at + TAG_BYTES) else {
                    return false;
                };
                let Some(values) = items.get(at + TAG_BYTES..at + TAG_BYTES + 1 + len as usize)
                else {
                    return false;
                };
                self.streams[DECLARED].bytes.extend_from_slice(values);
                at += TAG_BYTES + 1 + len as usize;
            }
        }
        true
    }

    /// The payload of `payload_len` bytes `columns` encode, into `out`
    /// (cleared first); why not if they are not columns of such a payload.
    pub fn decode(
        &mut self,
        columns: &[u8],
        payload_len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), ColumnsError> {
        let mut pos = 0;
        let count = get_varint(columns, &mut pos).ok_or(ColumnsError::Table)?;
        if count > STREAMS as u64 {
            return Err(ColumnsError::Table);
        }
        let mut lens = [(0usize, 0usize); STREAMS];
        let mut last = None;
        for _ in 0..count {
            let id = get_varint(columns, &mut pos).ok_or(ColumnsError::Table)?;
            let len = get_varint(columns, &mut pos).ok_or(ColumnsError::Table)?;
            if id >= STREAMS as u64 || last.is_some_and(|last| id <= last) {
                return Err(ColumnsError::Table);
            }
            last = Some(id);
            lens[id as usize].1 = usize::try_from(len).map_err(|_| ColumnsError::Table)?;
        }
        // Each stream's range, in id order after the table.
        let mut at = pos;
        for range in &mut lens {
            let end = at.checked_add(range.1).filter(|&end| end <= columns.len());
            let end = end.ok_or(ColumnsError::Table)?;
            *range = (at, end);
            at = end;
        }
        if at != columns.len() {
            return Err(ColumnsError::Table);
        }
        // Cursors: each stream's next byte.
        let mut cursor: [usize; STREAMS] = core::array::from_fn(|id| lens[id].0);
        out.clear();
        out.reserve(payload_len);
        let mut prev = [0u64; STREAMS];
        let varint = |cursor: &mut [usize; STREAMS], id: usize| -> Result<u64, ColumnsError> {
            let mut at = cursor[id];
            let value = get_varint(&columns[..lens[id].1], &mut at);
            cursor[id] = at;
            value.ok_or(ColumnsError::StreamEnds(id))
        };
        let take = |cursor: &mut [usize; STREAMS], id: usize, n: usize| {
            let from = cursor[id];
            let to = from.checked_add(n).filter(|&to| to <= lens[id].1);
            let to = to.ok_or(ColumnsError::StreamEnds(id))?;
            cursor[id] = to;
            Ok::<_, ColumnsError>(&columns[from..to])
        };
        let room = |out: &Vec<u8>, n: usize| match out.len().checked_add(n) {
            Some(len) if len <= payload_len => Ok(()),
            _ => Err(ColumnsError::TooLong),
        };
        while cursor[LAYOUT] < lens[LAYOUT].1 {
            let before = varint(&mut cursor, LAYOUT)?;
            let before = usize::try_from(before).map_err(|_| ColumnsError::TooLong)?;
            room(out, before)?;
            out.extend_from_slice(take(&mut cursor, LITERAL, before)?);
            let header = take(&mut cursor, HEADERS, HEADER_BYTES)?;
            let items_len = le(&header[ITEMS_LEN_AT..ITEMS_LEN_AT + 4]) as usize;
            room(out, HEADER_BYTES + items_len)?;
            let trailing = varint(&mut cursor, LAYOUT)?;
            let trailing = usize::try_from(trailing).map_err(|_| ColumnsError::TooLong)?;
            out.extend_from_slice(header);
            let end = out.len() + items_len;
            while out.len() < end {
                let tag = take(&mut cursor, TAGS, TAG_BYTES)?;
                let tag = u16::from_le_bytes([tag[0], tag[1]]);
                if tag == TIME_TAG {
                    if out.len() + MARK_BYTES > end {
                        return Err(ColumnsError::Overrun);
                    }
                    let ns = prev[MARKS].wrapping_add(unzigzag(varint(&mut cursor, MARKS)?));
                    prev[MARKS] = ns;
                    out.extend_from_slice(&tag.to_le_bytes());
                    out.extend_from_slice(&ns.to_le_bytes());
                } else if tag & CATALOGUE_TAG != 0 {
                    let Some(
                        layout @ Layout::Event {
                            kind,
                            values,
                            widths,
                        },
                    ) = Layout::of(tag)
                    else {
                        return Err(ColumnsError::Tag(tag));
                    };
                    if out.len() + layout.bytes() > end {
                        return Err(ColumnsError::Overrun);
                    }
                    out.extend_from_slice(&tag.to_le_bytes());
                    for index in 0..values {
                        let width = 1usize << (widths >> (2 * index) & 3);
                        let stream = value_stream(kind as usize, index);
                        let value = match self.fixed {
                            true => {
                                let delta = take(&mut cursor, stream, width)?;
                                let value = prev[stream].wrapping_add(le(delta));
                                match width {
                                    8 => value,
                                    _ => value & ((1 << (8 * width)) - 1),
                                }
                            }
                            false => {
                                let delta = unzigzag(varint(&mut cursor, stream)?);
                                prev[stream].wrapping_add(delta)
                            }
                        };
                        if width < 8 && value >> (8 * width) != 0 {
                            return Err(ColumnsError::Width);
                        }
                        prev[stream] = value;
                        put_value(out, value, width);
                    }
                } else {
                    let len = take(&mut cursor, DECLARED, 1)?[0] as usize;
                    if out.len() + TAG_BYTES + 1 + len > end {
                        return Err(ColumnsError::Overrun);
                    }
                    out.extend_from_slice(&tag.to_le_bytes());
                    out.push(len as u8);
                    out.extend_from_slice(take(&mut cursor, DECLARED, len)?);
                }
            }
            room(out, trailing)?;
            out.extend_from_slice(take(&mut cursor, LITERAL, trailing)?);
        }
        let rest = lens[LITERAL].1 - cursor[LITERAL];
        room(out, rest)?;
        out.extend_from_slice(take(&mut cursor, LITERAL, rest)?);
        if out.len() != payload_len {
            return Err(ColumnsError::Length {
                got: out.len(),
                want: payload_len,
            });
        }
        match (0..STREAMS).find(|&id| cursor[id] != lens[id].1) {
            Some(id) => Err(ColumnsError::Leftover(id)),
            None => Ok(()),
        }
    }
}
