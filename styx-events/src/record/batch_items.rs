//! A batch record's events per kind, from a walk of its item words: what
//! an output that keeps batches whole (a raw capture, the flight recorder)
//! checks before it keeps one. The head's own counts are the traced
//! process's word and may add up while an item is bad; a capture storing
//! such a batch could not be read past it.

use bytemuck::pod_read_unaligned;
use std::mem::size_of;
use styx_common::batch::{item_bytes, BatchRecord, BATCH_BYTES, ITEM_TIME};
use styx_common::{EventKind, Shape, EVENT_KIND_SLOTS};

/// Events per kind id (slot 0, time marks, stays 0).
pub type KindCounts = [u64; EVENT_KIND_SLOTS as usize];

/// The events per kind of `record` (a ring record whose kind is
/// `styx_common::batch::BATCH_RECORD_KIND`), or None when it is not whole:
/// shorter than its fixed part or its items, more items than a batch
/// holds, an item of no batched kind, or one cut off. Only the item words
/// are read (~1 ns an item).
pub fn counts(record: &[u8]) -> Option<KindCounts> {
    const FIXED: usize = size_of::<BatchRecord>();
    let batch: BatchRecord = pod_read_unaligned(record.get(..FIXED)?);
    let len = batch.len as usize;
    if len > BATCH_BYTES {
        return None;
    }
    let items = record.get(FIXED..FIXED + len)?;
    let mut found = [0u64; EVENT_KIND_SLOTS as usize];
    let mut at = 0;
    while at < items.len() {
        let kind = *items.get(at)?;
        let bytes = ITEM_BYTES[kind as usize]?;
        found[kind as usize] += 1;
        at += bytes;
    }
    if at != items.len() {
        return None;
    }
    found[ITEM_TIME as usize] = 0;
    Some(found)
}

/// Bytes an item takes by its kind byte (a time mark: its word and ns; an
/// event of an argument shape, what the splitter (`Batches::split`)
/// reads: its word and arguments); None for kinds no batch holds.
const ITEM_BYTES: [Option<usize>; 256] = {
    let mut bytes = [None; 256];
    bytes[ITEM_TIME as usize] = Some(item_bytes(1));
    let mut i = 0;
    while i < EventKind::ALL.len() {
        let kind = EventKind::ALL[i];
        if let Shape::Args(_) | Shape::ArgsAux(_) = kind.shape() {
            bytes[kind as usize] = Some(item_bytes(kind.shape().record_args()));
        }
        i += 1;
    }
    bytes
};

#[cfg(test)]
mod tests {
    use super::*;
    use styx_common::batch::{item_word, BatchHead, BATCH_RECORD_KIND};
    use styx_common::RecordHeader;

    /// A batch record whose head claims `claimed` insn_exec events and one
    /// time mark, holding `items`.
    fn record(items: &[u64], claimed: u32) -> Vec<u8> {
        let mut head = BatchHead {
            len: (items.len() * 8) as u32,
            ..BatchHead::default()
        };
        head.counts[ITEM_TIME as usize] = 1;
        head.counts[EventKind::InsnExec as usize] = claimed;
        let fixed = BatchRecord {
            header: RecordHeader {
                kind: BATCH_RECORD_KIND,
                ..RecordHeader::default()
            },
            head,
            start: 0,
            len: head.len,
        };
        let mut bytes = bytemuck::bytes_of(&fixed).to_vec();
        for item in items {
            bytes.extend_from_slice(&item.to_le_bytes());
        }
        bytes
    }

    const MARK: [u64; 2] = [item_word(ITEM_TIME, 0), 1000];
    const INSN: [u64; 3] = [item_word(EventKind::InsnExec as u8, 0), 0x400, 0x90];

    #[test]
    fn whole_batches_are_counted_from_their_items_not_their_head() {
        let mem = [item_word(EventKind::MemRead as u8, 4), 1, 2, 3];
        let items = [&MARK[..], &INSN, &mem, &INSN].concat();
        // The head says one insn_exec: the items hold two and a mem_read.
        let found = counts(&record(&items, 1)).unwrap();
        assert_eq!(found[EventKind::InsnExec as usize], 2);
        assert_eq!(found[EventKind::MemRead as usize], 1);
        assert_eq!(found.iter().sum::<u64>(), 3);
    }

    /// The forged batch of issue 25: its head's counts (a mark and an
    /// insn_exec) add up to its 40 bytes, its second item has kind 255.
    #[test]
    fn a_batch_with_a_bad_item_is_not_whole_whatever_its_head_says() {
        let forged = [&MARK[..], &[item_word(255, 0), 0, 0]].concat();
        assert_eq!(counts(&record(&forged, 1)), None);
        // Text shapes are never items.
        let marker = [&MARK[..], &[item_word(EventKind::Marker as u8, 0), 0, 0]].concat();
        assert_eq!(counts(&record(&marker, 1)), None);
        // Cut inside an item, or shorter than its length says.
        let mut cut = record(&[&MARK[..], &INSN].concat(), 1);
        let at = cut.len() - 8;
        cut.truncate(at);
        assert_eq!(counts(&cut), None);
        let short = &record(&INSN[..2], 1);
        assert_eq!(counts(short), None);
        assert_eq!(counts(&[0u8; 20]), None);
    }
}
