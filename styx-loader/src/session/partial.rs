//! Partial batches, read from the traced process when the loader stops.
//!
//! An emulator thread hands over a batch when it fills, flushes, exits or
//! fires a per-event probe. One that goes on running (or sits idle) after
//! the loader stops would keep its last partial batch. So, once the
//! batch-enable sites are detached (no thread appends any more) and before
//! the flush site is, the loader reads every registered buffer from the
//! process (`process_vm_readv`), gives what it holds as batch records, and
//! writes back what it took (`taken_seq`, `taken_len`), so that the thread
//! hands over only what follows. The registry is found through the flush
//! site's note: its semaphore's address, plus 8, holds the registry's
//! (`styx_common::batch::FlushSemaphore`). Everything read is bounded by the
//! registry's fixed size and each buffer's capacity.

use super::flush_block::{self, remote, FlushSite};
use anyhow::{bail, Context, Result};
use std::fs;
use std::mem::{offset_of, size_of};
use styx_common::batch::{
    BatchHead, BatchRecord, BATCH_BYTES, BATCH_MAGIC, BATCH_RECORD_KIND, REGISTRY_POINTER_OFFSET,
    REGISTRY_SLOTS,
};
use styx_common::RecordHeader;

/// What reading the process gave: batch records, as the eBPF program would
/// have written them (timed now), and how many threads' buffers were read.
#[derive(Default)]
pub struct Partial {
    pub records: Vec<Vec<u8>>,
    pub buffers: usize,
}

/// Reads the partial batches of process `pid` through each flush site.
pub fn read(pid: u32, sites: &[FlushSite]) -> Result<Partial> {
    let mut partial = Partial::default();
    // An exited process (a zombie until reaped) maps nothing; its exit
    // handed its batches over.
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    if maps.is_empty() {
        return Ok(partial);
    }
    for flush in sites {
        let Some(registry) = registry_of(pid, &maps, flush)? else {
            continue;
        };
        let mut slots = vec![0u8; REGISTRY_SLOTS * 8];
        remote::read(pid, registry, &mut slots).context("reading the batch registry")?;
        let now = monotonic_ns();
        for slot in slots.chunks_exact(8) {
            let buffer = u64::from_le_bytes(slot.try_into().expect("8 bytes"));
            if buffer == 0 {
                break;
            }
            if let Some(record) = read_buffer(pid, buffer, now)? {
                partial.records.push(record);
            }
            partial.buffers += 1;
        }
    }
    Ok(partial)
}

/// The address of process `pid`'s batch registry (None: the process has
/// not made it yet, or maps no flush site).
pub fn registry(pid: u32, sites: &[FlushSite]) -> Result<Option<u64>> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    for flush in sites {
        if let Some(registry) = registry_of(pid, &maps, flush)?.filter(|&r| r != 0) {
            return Ok(Some(registry));
        }
    }
    Ok(None)
}

/// The registry's address in the flush block of `flush`, as the process
/// (whose `maps` these are) maps it.
fn registry_of(pid: u32, maps: &str, flush: &FlushSite) -> Result<Option<u64>> {
    let Some(block) = flush_block::address(pid, maps, flush)? else {
        return Ok(None);
    };
    let mut pointer = [0u8; 8];
    remote::read(pid, block + REGISTRY_POINTER_OFFSET, &mut pointer)
        .context("reading the batch registry's address")?;
    Ok(Some(u64::from_le_bytes(pointer)))
}

/// One buffer's pending items as a batch record, and marks them taken; None
/// when it holds nothing new.
fn read_buffer(pid: u32, at: u64, now: u64) -> Result<Option<Vec<u8>>> {
    let mut head_bytes = [0u8; size_of::<BatchHead>()];
    remote::read(pid, at, &mut head_bytes).context("reading a batch buffer's head")?;
    let head: BatchHead = bytemuck::pod_read_unaligned(&head_bytes);
    if head.magic != BATCH_MAGIC {
        bail!("the batch registry lists {at:#x}, which is not a batch buffer");
    }
    let len = head.len.min(head.cap).min(BATCH_BYTES as u32);
    let start = if head.taken_seq == head.seq {
        head.taken_len.min(len)
    } else {
        0
    };
    if start >= len {
        return Ok(None);
    }
    let record_len = size_of::<BatchRecord>();
    let mut record = vec![0u8; record_len + (len - start) as usize];
    let items_at = at + size_of::<BatchHead>() as u64 + start as u64;
    remote::read(pid, items_at, &mut record[record_len..]).context("reading a batch buffer")?;
    let fixed = BatchRecord {
        header: RecordHeader {
            ts_ns: now,
            pid,
            tid: head.tid,
            kind: BATCH_RECORD_KIND,
            aux: 0,
            _reserved: [0; 6],
        },
        head,
        start,
        len: len - start,
    };
    record[..record_len].copy_from_slice(bytemuck::bytes_of(&fixed));
    // Taken: the length first, so a thread that sees its seq taken sees
    // how much of it too.
    let taken_len_at = at + offset_of!(BatchHead, taken_len) as u64;
    let taken_seq_at = at + offset_of!(BatchHead, taken_seq) as u64;
    remote::write(pid, taken_len_at, &len.to_le_bytes()).context("marking a batch taken")?;
    remote::write(pid, taken_seq_at, &head.seq.to_le_bytes()).context("marking a batch taken")?;
    Ok(Some(record))
}

fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}
