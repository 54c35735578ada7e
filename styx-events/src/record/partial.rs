//! The batches an emulator's threads still hold, read from its memory when
//! a loader stops (protocol in `styx_common::batch`): the registry's chain
//! of blocks walked, each buffer's pending items made into a batch record
//! (timed now) and marked taken, so that the owner hands over only what
//! follows. The memory is any [`Memory`]: the traced process's for the
//! loader, made-up bytes for the fuzzer.
//!
//! The process may be hostile or broken: a slot that names no batch buffer
//! (unreadable, another magic, a buffer listed twice) is skipped and
//! counted, and the walk goes on; a chain that loops or runs past
//! [`MAX_REGISTRY_BLOCKS`] is cut and said so. Records are handed over one
//! at a time: memory stays one record whatever the registry lists.

use bytemuck::pod_read_unaligned;
use std::collections::HashSet;
use std::io;
use std::mem::{offset_of, size_of};
use styx_common::batch::{
    BatchHead, BatchRecord, BATCH_BYTES, BATCH_MAGIC, BATCH_RECORD_KIND, MAX_REGISTRY_BLOCKS,
    REGISTRY_BLOCK_BYTES, REGISTRY_SLOTS,
};
use styx_common::RecordHeader;

/// A process's memory, read and written at its addresses.
pub trait Memory {
    /// Fills `buf` from address `at`, whole or not at all.
    fn read(&mut self, at: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Writes `bytes` at address `at`.
    fn write(&mut self, at: u64, bytes: &[u8]) -> io::Result<()>;
}

/// What walking a registry found, besides the records.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Walked {
    /// Batch buffers read.
    pub buffers: u64,
    /// Slots skipped because they name no batch buffer.
    pub skipped: u64,
    /// Why the first skipped slot was.
    pub first_skipped: Option<String>,
    /// Why the walk stopped before the chain's end, if it did.
    pub cut: Option<String>,
}

/// Walks the registry whose first block is at `registry` in `memory` (of
/// process `pid`, the registry of its file number `file`), calling `each`
/// with a batch record of every buffer's pending items and marking them
/// taken. An error only when the first block cannot be read.
pub fn take(
    memory: &mut impl Memory,
    registry: u64,
    (pid, file): (u32, u8),
    now: u64,
    mut each: impl FnMut(&[u8]),
) -> io::Result<Walked> {
    let mut walked = Walked::default();
    let mut block = vec![0u8; REGISTRY_BLOCK_BYTES];
    let mut blocks_seen = HashSet::new();
    let mut buffers_seen = HashSet::new();
    let mut at = registry;
    let mut number = 0;
    while at != 0 {
        if blocks_seen.len() == MAX_REGISTRY_BLOCKS {
            walked.cut = Some(format!(
                "the registry goes on past {MAX_REGISTRY_BLOCKS} blocks of {REGISTRY_SLOTS} \
                 buffers"
            ));
            break;
        }
        if !blocks_seen.insert(at) {
            walked.cut = Some(format!("registry block {number} at {at:#x} loops back"));
            break;
        }
        if let Err(e) = memory.read(at, &mut block) {
            if number == 0 {
                return Err(e);
            }
            walked.cut = Some(format!(
                "registry block {number} at {at:#x} cannot be read: {e}"
            ));
            break;
        }
        let word = |i: usize| u64::from_le_bytes(block[8 * i..8 * i + 8].try_into().expect("8"));
        for (slot, buffer) in (0..REGISTRY_SLOTS).map(word).enumerate() {
            if buffer == 0 {
                continue;
            }
            let name = || format!("slot {} ({buffer:#x})", number * REGISTRY_SLOTS + slot);
            let skip = if buffers_seen.insert(buffer) {
                match take_buffer(memory, buffer, (pid, file), now, &mut each) {
                    Ok(()) => None,
                    Err(why) => Some(format!("{}: {why}", name())),
                }
            } else {
                Some(format!("{}: a buffer listed before", name()))
            };
            match skip {
                None => walked.buffers += 1,
                Some(why) => {
                    walked.skipped += 1;
                    walked.first_skipped.get_or_insert(why);
                }
            }
        }
        // After the slots: the next block's address.
        at = word(REGISTRY_SLOTS);
        number += 1;
    }
    Ok(walked)
}

/// Hands `each` what the buffer at `at` holds that no loader took, and
/// marks it taken; why not, when `at` is no batch buffer.
fn take_buffer(
    memory: &mut impl Memory,
    at: u64,
    (pid, file): (u32, u8),
    now: u64,
    each: &mut impl FnMut(&[u8]),
) -> Result<(), String> {
    let mut head = [0u8; size_of::<BatchHead>()];
    memory
        .read(at, &mut head)
        .map_err(|e| format!("cannot be read: {e}"))?;
    let head: BatchHead = pod_read_unaligned(&head);
    if head.magic != BATCH_MAGIC {
        return Err(format!("not a batch buffer (magic {:#x})", head.magic));
    }
    let Some((start, len)) = pending(&head) else {
        return Ok(());
    };
    let record_len = size_of::<BatchRecord>();
    let mut record = vec![0u8; record_len + (len - start) as usize];
    let items_at = at
        .checked_add(size_of::<BatchHead>() as u64 + start as u64)
        .ok_or("its items wrap around the address space")?;
    memory
        .read(items_at, &mut record[record_len..])
        .map_err(|e| format!("its items cannot be read: {e}"))?;
    // The owner flushed meanwhile (and so handed over what was read, and
    // may be writing the next batch over it): nothing to take.
    let mut seq = [0u8; 8];
    let seq_at = at + offset_of!(BatchHead, seq) as u64;
    if memory.read(seq_at, &mut seq).is_err() || u64::from_le_bytes(seq) != head.seq {
        return Ok(());
    }
    let fixed = BatchRecord {
        header: RecordHeader {
            ts_ns: now,
            pid,
            tid: head.tid,
            kind: BATCH_RECORD_KIND,
            aux: file,
            _reserved: [0; 6],
        },
        head,
        start,
        len: len - start,
    };
    record[..record_len].copy_from_slice(bytemuck::bytes_of(&fixed));
    each(&record);
    // Taken: the length first, so a thread that sees its seq taken sees how
    // much of it too. If these cannot be written, the owner hands the
    // batch over whole later, and the splitter gives each event once.
    let taken_len_at = at + offset_of!(BatchHead, taken_len) as u64;
    let taken_seq_at = at + offset_of!(BatchHead, taken_seq) as u64;
    let _ = memory
        .write(taken_len_at, &len.to_le_bytes())
        .and_then(|()| memory.write(taken_seq_at, &head.seq.to_le_bytes()));
    Ok(())
}

/// The byte range of a buffer's items that no loader took, if any.
pub(crate) fn pending(head: &BatchHead) -> Option<(u32, u32)> {
    let len = head.len.min(head.cap).min(BATCH_BYTES as u32);
    let start = if head.taken_seq == head.seq {
        head.taken_len.min(len)
    } else {
        0
    };
    (start < len).then_some((start, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::test_items::{insn, mark};

    /// Memory of made-up bytes at address `base`; reads outside fail.
    struct Fake {
        base: u64,
        bytes: Vec<u8>,
    }

    impl Fake {
        fn range(&self, at: u64, len: usize) -> io::Result<std::ops::Range<usize>> {
            let fault = || io::Error::from_raw_os_error(libc::EFAULT);
            let from = at.checked_sub(self.base).ok_or_else(fault)? as usize;
            let to = from.checked_add(len).ok_or_else(fault)?;
            (to <= self.bytes.len())
                .then_some(from..to)
                .ok_or_else(fault)
        }

        fn put(&mut self, at: u64, bytes: &[u8]) {
            let range = self.range(at, bytes.len()).unwrap();
            self.bytes[range].copy_from_slice(bytes);
        }
    }

    impl Memory for Fake {
        fn read(&mut self, at: u64, buf: &mut [u8]) -> io::Result<()> {
            let range = self.range(at, buf.len())?;
            buf.copy_from_slice(&self.bytes[range]);
            Ok(())
        }
        fn write(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
            let range = self.range(at, bytes.len())?;
            self.bytes[range].copy_from_slice(bytes);
            Ok(())
        }
    }

    const BASE: u64 = 0x10_0000;
    const BUFFER_BYTES: u64 = (size_of::<BatchHead>() + BATCH_BYTES) as u64;

    /// A buffer at `at` holding one time mark and `events` insn_execs.
    fn buffer(memory: &mut Fake, at: u64, seq: u64, events: u64) {
        let mut items = mark(5);
        for pc in 0..events {
            items.extend(insn(pc));
        }
        let head = BatchHead {
            magic: BATCH_MAGIC,
            tid: 7,
            seq,
            len: items.len() as u32,
            cap: BATCH_BYTES as u32,
            taken_seq: u64::MAX,
            ..BatchHead::default()
        };
        memory.put(at, bytemuck::bytes_of(&head));
        memory.put(at + size_of::<BatchHead>() as u64, &items);
    }

    fn slot(memory: &mut Fake, block: u64, slot: usize, value: u64) {
        memory.put(block + 8 * slot as u64, &value.to_le_bytes());
    }

    fn walk(memory: &mut Fake, registry: u64) -> (Vec<Vec<u8>>, io::Result<Walked>) {
        let mut records = Vec::new();
        let walked = take(memory, registry, (1, 0), 99, |r| records.push(r.to_vec()));
        (records, walked)
    }

    #[test]
    fn bad_slots_are_skipped_and_counted_and_the_walk_goes_on() {
        let block = BASE;
        let second = BASE + REGISTRY_BLOCK_BYTES as u64;
        let buffers = second + REGISTRY_BLOCK_BYTES as u64;
        let mut memory = Fake {
            base: BASE,
            bytes: vec![0; (buffers - BASE + 4 * BUFFER_BYTES) as usize],
        };
        let garbage = buffers + 3 * BUFFER_BYTES;
        buffer(&mut memory, buffers, 3, 2);
        buffer(&mut memory, buffers + BUFFER_BYTES, 0, 4);
        buffer(&mut memory, buffers + 2 * BUFFER_BYTES, 9, 1);
        memory.put(garbage, &[0xab; 200]);
        // Garbage, unmapped, a buffer, itself again, a gap, another
        // buffer, and one in the next block.
        slot(&mut memory, block, 0, garbage);
        slot(&mut memory, block, 1, 0x1000);
        slot(&mut memory, block, 2, buffers);
        slot(&mut memory, block, 3, buffers);
        slot(&mut memory, block, 5, buffers + BUFFER_BYTES);
        slot(&mut memory, block, REGISTRY_SLOTS, second);
        slot(&mut memory, second, 0, buffers + 2 * BUFFER_BYTES);
        let (records, walked) = walk(&mut memory, block);
        let walked = walked.unwrap();
        assert_eq!(records.len(), 3);
        assert_eq!((walked.buffers, walked.skipped), (3, 3));
        assert!(walked.first_skipped.unwrap().contains("slot 0"));
        assert_eq!(walked.cut, None);
        // Taken: read again, nothing new.
        let (records, _) = walk(&mut memory, block);
        assert!(records.is_empty());
    }

    #[test]
    fn chains_that_loop_or_run_on_are_cut() {
        let mut memory = Fake {
            base: BASE,
            bytes: vec![0; REGISTRY_BLOCK_BYTES],
        };
        slot(&mut memory, BASE, REGISTRY_SLOTS, BASE);
        let walked = walk(&mut memory, BASE).1.unwrap();
        assert!(walked.cut.unwrap().contains("loops"));
        // An unreadable first block is an error; a later one cuts.
        assert!(walk(&mut memory, 0x10).1.is_err());
        slot(&mut memory, BASE, REGISTRY_SLOTS, 0x10);
        let walked = walk(&mut memory, BASE).1.unwrap();
        assert!(walked.cut.unwrap().contains("cannot be read"));
    }
}
