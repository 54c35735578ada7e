//! The batch item codec: how an event or a time mark is laid out in a
//! thread's batch. styx-probe writes items, the
//! loader's batch splitter, captures, the flight recorder and the fuzzers
//! read them; all through this module, which also reads the items of
//! captures written before it ([`v1`]).
//!
//! Each value travels in the width of the type the emulator gave it: a
//! `u16` pc is two bytes in the batch, the ring and the capture. Items
//! are little-endian and unaligned:
//!
//! ```text
//! item := tag:u16le value*
//! tag  := 0x0000                          a time mark: ns:u64 follows (10 bytes)
//!       | 1 kind:7 widths:8               a catalogue event: its probe's arguments in
//!                                         order, argument i in 1 << (widths >> 2i & 3)
//!                                         bytes (codes past the last argument 0)
//!       | 0 id:15 (id ≠ 0)                an event type the emulator declared
//!                                         (`styx_common::schema`): len:u8, then
//!                                         len bytes of values, each in the width
//!                                         its declaration gives
//! ```
//!
//! So a `mem_read` of a 16-bit guest (pc and address `u16`, a `u8` value,
//! and its size) takes 8 bytes; one with three `u64`s 27. A record-args
//! kind's values are its probe's arguments (`EventKind::probe_args`): the
//! record's arguments and, for an [`crate::Shape::ArgsAux`] kind, the
//! header's `aux` byte last.

use crate::{EventKind, Shape};

/// Bytes of an item's tag.
pub const TAG_BYTES: usize = 2;

/// The tag of a time mark: the thread's `CLOCK_MONOTONIC` ns, a `u64`, follows.
pub const TIME_TAG: u16 = 0;

/// Bytes of a time mark item.
pub const MARK_BYTES: usize = TAG_BYTES + 8;

/// Set in the tag of a catalogue event.
pub const CATALOGUE_TAG: u16 = 0x8000;

/// The most values a catalogue event's item holds (a `reg_write`'s pc,
/// register, value, old value).
pub const MAX_ITEM_VALUES: usize = 4;

/// The largest catalogue event's item: a tag and four `u64`s.
pub const MAX_ITEM_BYTES: usize = TAG_BYTES + 8 * MAX_ITEM_VALUES;

/// The largest declared type's item: a tag, its length byte and eight
/// `u64`s (`styx_common::schema::MAX_FIELDS`).
pub const MAX_DECLARED_ITEM_BYTES: usize = TAG_BYTES + 1 + 8 * crate::schema::MAX_FIELDS;

/// The code of a value `bytes` wide in a tag's widths (1, 2, 4 or 8 bytes).
pub const fn width_code(bytes: usize) -> u16 {
    match bytes {
        1 => 0,
        2 => 1,
        4 => 2,
        8 => 3,
        _ => panic!("a value is 1, 2, 4 or 8 bytes wide"),
    }
}

/// The tag of a catalogue event of `kind` whose values are `widths` bytes wide.
pub const fn event_tag(kind: EventKind, widths: &[usize]) -> u16 {
    assert!(widths.len() == kind.probe_args().len());
    let mut tag = CATALOGUE_TAG | (kind as u16) << 8;
    let mut i = 0;
    while i < widths.len() {
        tag |= width_code(widths[i]) << (2 * i);
        i += 1;
    }
    tag
}

/// What a catalogue event's or a mark's tag says: the event kind and the
/// widths of its values, or a mark (a declared type's item says its
/// length itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A time mark.
    Mark,
    /// A catalogue event.
    Event {
        /// Its kind.
        kind: EventKind,
        /// How many values follow the tag.
        values: usize,
        /// The tag's width codes.
        widths: u8,
    },
}

impl Layout {
    /// The layout of `tag`; None for a declared type's tag and for a tag
    /// no batch holds (a kind of no argument shape, width codes past its
    /// last value).
    pub const fn of(tag: u16) -> Option<Layout> {
        if tag == TIME_TAG {
            return Some(Layout::Mark);
        }
        if tag & CATALOGUE_TAG == 0 {
            return None;
        }
        let Some((kind, values)) = BATCHED[(tag >> 8) as usize & 0x7f] else {
            return None;
        };
        let widths = tag as u8;
        if values < MAX_ITEM_VALUES && widths >> (2 * values) != 0 {
            return None;
        }
        Some(Layout::Event {
            kind,
            values,
            widths,
        })
    }

    /// Bytes of value `i` of an event's item.
    const fn width(widths: u8, i: usize) -> usize {
        1 << (widths >> (2 * i) & 3)
    }

    /// Bytes of an item of this layout, its tag included.
    pub const fn bytes(self) -> usize {
        match self {
            Layout::Mark => MARK_BYTES,
            Layout::Event { values, widths, .. } => {
                let mut bytes = TAG_BYTES;
                let mut i = 0;
                while i < values {
                    bytes += Layout::width(widths, i);
                    i += 1;
                }
                bytes
            }
        }
    }
}

/// The catalogue's kinds a batch holds (those of an argument shape), by
/// id, with their values' count: what a tag's kind bits may name.
const BATCHED: [Option<(EventKind, usize)>; 128] = {
    let mut table = [None; 128];
    let mut i = 0;
    while i < EventKind::ALL.len() {
        let kind = EventKind::ALL[i];
        if let Shape::Args(_) | Shape::ArgsAux(_) = kind.shape() {
            table[kind as usize] = Some((kind, kind.probe_args().len()));
        }
        i += 1;
    }
    table
};

/// What an item is, without its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skimmed {
    /// A time mark.
    Mark,
    /// A catalogue event of this kind.
    Event(EventKind),
    /// An event of a declared type: its tag, and the bytes of its values.
    Declared {
        /// Its tag.
        tag: u16,
        /// Bytes of its values.
        values: usize,
    },
}

impl Skimmed {
    /// What a read item is.
    pub fn of(item: &Item<'_>) -> Skimmed {
        match *item {
            Item::Mark(_) => Skimmed::Mark,
            Item::Event { kind, .. } => Skimmed::Event(kind),
            Item::Declared { tag, values } => Skimmed::Declared {
                tag,
                values: values.len(),
            },
        }
    }
}

/// Bytes of the item a tag begins where the tag alone says, by the whole
/// tag: a time mark's, a catalogue event's (its tag included); 0 for a
/// declared type's (its length byte says) and a tag no batch holds. One
/// load: the loader skims every item of every batch it keeps whole, and
/// working a length out from [`Layout`] per item was most of the loader's
/// time (perf: 80% at 77 M events/s); its walk in chains steps by it with
/// no branch. Derived from [`Layout::of`]; the test that skims every tag
/// checks it agrees.
pub static STEP_BYTES: [u8; 1 << 16] = {
    let mut table = [0u8; 1 << 16];
    table[TIME_TAG as usize] = MARK_BYTES as u8;
    let mut low = 0;
    while low < 1 << 15 {
        if let Some(layout) = Layout::of(CATALOGUE_TAG | low as u16) {
            table[CATALOGUE_TAG as usize | low] = layout.bytes() as u8;
        }
        low += 1;
    }
    table
};

/// Bytes of the catalogue event's item `tag` begins (its tag included), 0
/// for a tag no batch holds; its kind is `tag >> 8 & 0x7f`, an
/// [`EventKind`] id wherever this is not 0.
#[inline]
pub fn catalogue_item_bytes(tag: u16) -> usize {
    STEP_BYTES[(tag | CATALOGUE_TAG) as usize] as usize
}

/// What the item at the start of `bytes` is and its length, from its tag
/// (and a declared type's length byte) alone: for walks that count items
/// rather than read them (the loader's whole-batch check).
#[inline]
pub fn skim(bytes: &[u8]) -> Result<(Skimmed, usize), ItemError> {
    let tag = match bytes {
        [low, high, ..] => u16::from_le_bytes([*low, *high]),
        _ => return Err(ItemError::Truncated),
    };
    let (what, len) = if tag & CATALOGUE_TAG != 0 {
        let len = catalogue_item_bytes(tag);
        match BATCHED[(tag >> 8) as usize & 0x7f] {
            Some((kind, _)) if len != 0 => (Skimmed::Event(kind), len),
            _ => return Err(ItemError::UnknownTag(tag)),
        }
    } else if tag == TIME_TAG {
        (Skimmed::Mark, MARK_BYTES)
    } else {
        let len = *bytes.get(TAG_BYTES).ok_or(ItemError::Truncated)? as usize;
        (Skimmed::Declared { tag, values: len }, TAG_BYTES + 1 + len)
    };
    if len > bytes.len() {
        return Err(ItemError::Truncated);
    }
    Ok((what, len))
}

/// An item, read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// A time mark: the thread's `CLOCK_MONOTONIC` ns.
    Mark(u64),
    /// An event: its record arguments and `aux` byte, as a per-event
    /// record of its kind has them.
    Event {
        /// Its kind.
        kind: EventKind,
        /// The header's `aux` byte ([`crate::Shape::ArgsAux`]), else 0.
        aux: u8,
        /// The record's arguments (those past the shape's count are 0).
        args: [u64; MAX_ITEM_VALUES],
    },
    /// An event of a type the emulator declared: its tag and the bytes of
    /// its values, which its declaration says how to read.
    Declared {
        /// The type's tag in its file (`styx_common::schema::declared_tag`).
        tag: u16,
        /// Its values, each in its declared width.
        values: &'a [u8],
    },
}

/// Why an item cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemError {
    /// The item runs past the end of the batch.
    Truncated,
    /// Its tag is none a batch holds.
    UnknownTag(u16),
}

/// Reads the item at the start of `bytes`: it and its length.
pub fn read(bytes: &[u8]) -> Result<(Item<'_>, usize), ItemError> {
    let tag = match bytes {
        [low, high, ..] => u16::from_le_bytes([*low, *high]),
        _ => return Err(ItemError::Truncated),
    };
    if tag != TIME_TAG && tag & CATALOGUE_TAG == 0 {
        let len = *bytes.get(TAG_BYTES).ok_or(ItemError::Truncated)? as usize;
        let end = TAG_BYTES + 1 + len;
        let values = bytes.get(TAG_BYTES + 1..end).ok_or(ItemError::Truncated)?;
        return Ok((Item::Declared { tag, values }, end));
    }
    let layout = Layout::of(tag).ok_or(ItemError::UnknownTag(tag))?;
    let len = layout.bytes();
    let body = bytes.get(TAG_BYTES..len).ok_or(ItemError::Truncated)?;
    let item = match layout {
        Layout::Mark => Item::Mark(value(body)),
        Layout::Event {
            kind,
            values,
            widths,
        } => {
            let mut read = [0u64; MAX_ITEM_VALUES];
            let mut at = 0;
            for (i, slot) in read.iter_mut().enumerate().take(values) {
                let width = Layout::width(widths, i);
                *slot = value(&body[at..at + width]);
                at += width;
            }
            event(kind, read)
        }
    };
    Ok((item, len))
}

/// A little-endian value of up to 8 bytes. The widths items have are read
/// by one load each: a copy of a length known only here is a call to
/// `memmove`, which was most of the time of reading a value.
#[inline]
fn value(bytes: &[u8]) -> u64 {
    match *bytes {
        [b] => b.into(),
        [b0, b1] => u16::from_le_bytes([b0, b1]).into(),
        [b0, b1, b2, b3] => u32::from_le_bytes([b0, b1, b2, b3]).into(),
        [b0, b1, b2, b3, b4, b5, b6, b7] => u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]),
        _ => {
            let mut word = [0u8; 8];
            word[..bytes.len()].copy_from_slice(bytes);
            u64::from_le_bytes(word)
        }
    }
}

/// An event of `kind` from its probe's argument values.
fn event(kind: EventKind, values: [u64; MAX_ITEM_VALUES]) -> Item<'static> {
    let (args, aux) = match kind.shape() {
        Shape::ArgsAux(n) => (n, values[n] as u8),
        shape => (shape.record_args(), 0),
    };
    // The values past the record's arguments cleared, not a copy of a
    // length known only here (a call to `memmove`).
    let mut record = values;
    for (i, value) in record.iter_mut().enumerate() {
        if i >= args {
            *value = 0;
        }
    }
    Item::Event {
        kind,
        aux,
        args: record,
    }
}

/// The item layout of a batch: this module's, or version 1's (captures
/// of format version 1 hold batches of it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Codec {
    /// Values in their own widths (batch layout version 3).
    #[default]
    Current,
    /// A `u64` per value ([`v1`]).
    V1,
}

impl Codec {
    /// Reads the item at the start of `bytes`: it and its length.
    pub fn read(self, bytes: &[u8]) -> Result<(Item<'_>, usize), ItemError> {
        match self {
            Codec::Current => read(bytes),
            Codec::V1 => v1::read(bytes),
        }
    }

    /// What the item at the start of `bytes` is, and its length ([`skim`]).
    #[inline]
    pub fn skim(self, bytes: &[u8]) -> Result<(Skimmed, usize), ItemError> {
        match self {
            Codec::Current => skim(bytes),
            Codec::V1 => v1::read(bytes).map(|(item, len)| (Skimmed::of(&item), len)),
        }
    }
}

/// Writes a time mark into `out`; its length.
pub fn write_mark(ns: u64, out: &mut [u8; MAX_ITEM_BYTES]) -> usize {
    out[..TAG_BYTES].copy_from_slice(&TIME_TAG.to_le_bytes());
    out[TAG_BYTES..MARK_BYTES].copy_from_slice(&ns.to_le_bytes());
    MARK_BYTES
}

/// Writes an item of a declared type into `out`: `tag`, the length, the
/// values each in its width; its length.
pub fn write_declared(
    tag: u16,
    values: &[u64],
    widths: &[usize],
    out: &mut [u8; MAX_DECLARED_ITEM_BYTES],
) -> usize {
    out[..TAG_BYTES].copy_from_slice(&tag.to_le_bytes());
    let mut at = TAG_BYTES + 1;
    for (&value, &bytes) in values.iter().zip(widths) {
        out[at..at + bytes].copy_from_slice(&value.to_le_bytes()[..bytes]);
        at += bytes;
    }
    out[TAG_BYTES] = (at - TAG_BYTES - 1) as u8;
    at
}

/// Writes an event of `kind` into `out`, its probe's arguments given as
/// (value, width in bytes); its length. What styx-probe's call sites pack
/// into registers at compile time, for tests and tools.
pub fn write_event(
    kind: EventKind,
    values: &[(u64, usize)],
    out: &mut [u8; MAX_ITEM_BYTES],
) -> usize {
    let mut widths = [0usize; MAX_ITEM_VALUES];
    for (width, (_, bytes)) in widths.iter_mut().zip(values) {
        *width = *bytes;
    }
    let tag = event_tag(kind, &widths[..values.len()]);
    out[..TAG_BYTES].copy_from_slice(&tag.to_le_bytes());
    let mut at = TAG_BYTES;
    for &(value, bytes) in values {
        out[at..at + bytes].copy_from_slice(&value.to_le_bytes()[..bytes]);
        at += bytes;
    }
    at
}

/// The items of captures of format version 1: a `u64` word (kind in the
/// low byte, `aux` in the next) and a `u64` per record argument; a time
/// mark is word 0 and the ns.
pub mod v1 {
    use super::{Item, ItemError, MAX_ITEM_VALUES};
    use crate::{EventKind, Shape};

    /// Reads the version-1 item at the start of `bytes`: it and its length.
    pub fn read(bytes: &[u8]) -> Result<(Item<'_>, usize), ItemError> {
        let word = word(bytes, 0).ok_or(ItemError::Truncated)?;
        let kind = word as u8;
        if kind == 0 {
            let ns = word_at(bytes, 1)?;
            return Ok((Item::Mark(ns), 16));
        }
        let kind = EventKind::from_id(kind)
            .filter(|k| matches!(k.shape(), Shape::Args(_) | Shape::ArgsAux(_)))
            .ok_or(ItemError::UnknownTag(kind as u16))?;
        let n = kind.shape().record_args();
        let mut args = [0u64; MAX_ITEM_VALUES];
        for (i, arg) in args.iter_mut().enumerate().take(n) {
            *arg = word_at(bytes, 1 + i)?;
        }
        let aux = (word >> 8) as u8;
        Ok((Item::Event { kind, aux, args }, 8 * (1 + n)))
    }

    fn word_at(bytes: &[u8], index: usize) -> Result<u64, ItemError> {
        word(bytes, index).ok_or(ItemError::Truncated)
    }

    fn word(bytes: &[u8], index: usize) -> Option<u64> {
        let chunk = bytes.get(8 * index..8 * index + 8)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        Some(u64::from_le_bytes(word))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_narrow_memory_access_takes_eight_bytes_and_reads_back() {
        let mut out = [0u8; MAX_ITEM_BYTES];
        let len = write_event(
            EventKind::MemRead,
            &[(0x0600, 2), (0x0010, 2), (0x2a, 1), (1, 1)],
            &mut out,
        );
        assert_eq!(len, 8);
        let (item, read_len) = read(&out[..len]).unwrap();
        assert_eq!(read_len, 8);
        assert_eq!(
            item,
            Item::Event {
                kind: EventKind::MemRead,
                aux: 1,
                args: [0x0600, 0x0010, 0x2a, 0],
            }
        );
    }

    #[test]
    fn every_width_of_every_batched_kind_reads_back() {
        for &kind in EventKind::ALL {
            if !matches!(kind.shape(), Shape::Args(_) | Shape::ArgsAux(_)) {
                continue;
            }
            let n = kind.probe_args().len();
            for bytes in [1usize, 2, 4, 8] {
                let max = if bytes == 8 {
                    u64::MAX
                } else {
                    (1 << (8 * bytes)) - 1
                };
                let values: [(u64, usize); MAX_ITEM_VALUES] = [(max, bytes); 4];
                let mut out = [0u8; MAX_ITEM_BYTES];
                let len = write_event(kind, &values[..n], &mut out);
                assert_eq!(len, TAG_BYTES + n * bytes);
                let (
                    Item::Event {
                        kind: read,
                        aux,
                        args,
                    },
                    _,
                ) = read(&out[..len]).unwrap()
                else {
                    panic!("not an event");
                };
                assert_eq!(read, kind);
                let record = kind.shape().record_args();
                assert!(args[..record].iter().all(|&a| a == max), "{kind:?}");
                if let Shape::ArgsAux(_) = kind.shape() {
                    assert_eq!(aux, max as u8);
                }
            }
        }
    }

    /// Skimming says what reading says, for every tag.
    #[test]
    fn skimming_agrees_with_reading() {
        let mut bytes = [0x5au8; 64];
        for tag in 0..=u16::MAX {
            bytes[..2].copy_from_slice(&tag.to_le_bytes());
            bytes[2] = (tag % 70) as u8;
            let read = read(&bytes).map(|(item, len)| (Skimmed::of(&item), len));
            assert_eq!(skim(&bytes), read, "tag {tag:#06x}");
            let step = match read {
                Ok((Skimmed::Mark | Skimmed::Event(_), len)) => len,
                _ => 0,
            };
            assert_eq!(
                STEP_BYTES[usize::from(tag)] as usize,
                step,
                "tag {tag:#06x}"
            );
        }
    }

    #[test]
    fn marks_and_bad_items() {
        let mut out = [0u8; MAX_ITEM_BYTES];
        let len = write_mark(123_456_789, &mut out);
        assert_eq!(read(&out[..len]), Ok((Item::Mark(123_456_789), MARK_BYTES)));
        assert_eq!(read(&out[..len - 1]), Err(ItemError::Truncated));
        assert_eq!(read(&out[..1]), Err(ItemError::Truncated));
        // A declared type's item says its length.
        let mut declared = [0u8; MAX_DECLARED_ITEM_BYTES];
        let len = write_declared(5, &[0x1234, u64::MAX], &[2, 8], &mut declared);
        assert_eq!(len, 13);
        let values = &declared[3..13];
        assert_eq!(
            read(&declared[..len]),
            Ok((Item::Declared { tag: 5, values }, 13))
        );
        assert_eq!(read(&declared[..len - 1]), Err(ItemError::Truncated));
        assert_eq!(read(&[5, 0]), Err(ItemError::Truncated));
        // A text shape, and width codes past a block's two values.
        let marker = CATALOGUE_TAG | (EventKind::Marker as u16) << 8;
        assert_eq!(
            read(&marker.to_le_bytes()),
            Err(ItemError::UnknownTag(marker))
        );
        let block = event_tag(EventKind::Block, &[1, 1]) | 1 << 4;
        assert_eq!(
            read(&block.to_le_bytes()),
            Err(ItemError::UnknownTag(block))
        );
    }

    #[test]
    fn version_one_items_read_as_before() {
        let mut bytes = [0u8; 40];
        bytes[0] = EventKind::MemRead as u8;
        bytes[1] = 4;
        bytes[8..16].copy_from_slice(&0x600u64.to_le_bytes());
        bytes[16..24].copy_from_slice(&0x10u64.to_le_bytes());
        bytes[24..32].copy_from_slice(&7u64.to_le_bytes());
        let (item, len) = v1::read(&bytes).unwrap();
        assert_eq!(len, 32);
        assert_eq!(
            item,
            Item::Event {
                kind: EventKind::MemRead,
                aux: 4,
                args: [0x600, 0x10, 7, 0]
            }
        );
        assert_eq!(v1::read(&bytes[..31]), Err(ItemError::Truncated));
    }
}
