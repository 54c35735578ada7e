//! Partial batches, read from the traced process when the loader stops.
//!
//! An emulator thread hands over a batch when it fills, flushes, exits or
//! fires a per-event probe. One that goes on running (or sits idle) after
//! the loader stops would keep its last partial batch. So, once the
//! batch-enable sites are detached (no thread appends any more) and before
//! the flush site is, the loader reads every registered buffer from the
//! process (`process_vm_readv`), gives what it holds as batch records, and
//! writes back what it took, so that the thread hands over only what
//! follows (the walk itself, and what it does with a registry it cannot
//! trust, is `styx_events::partial`). The registry is found through the
//! flush site's note: its semaphore's address, plus 8, holds the
//! registry's (`styx_common::batch::FlushSemaphore`).

use super::flush_block::{self, remote, FlushSite};
use anyhow::{Context, Result};
use std::fs;
use std::io;
use styx_common::batch::REGISTRY_POINTER_OFFSET;
use styx_events::partial::{self, Memory, Walked};
use styx_events::{clock_ns, ClockId};

/// The traced process's memory, through `process_vm_readv`/`writev`;
/// written only if `mark_taken`.
struct Process {
    pid: u32,
    mark_taken: bool,
}

impl Memory for Process {
    fn read(&mut self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        remote::read(self.pid, at, buf)
    }
    fn write(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        match self.mark_taken {
            true => remote::write(self.pid, at, bytes),
            false => Err(io::Error::other("batches read, not marked taken")),
        }
    }
}

/// Reads the partial batches of process `pid` (whose `/proc/PID/maps` is
/// `maps`) through each flush site, calling `each` with every batch record
/// (as the eBPF program would have written it, timed now); what the walks
/// found besides, summed. Unless
/// `mark_taken`, the threads are not told: each hands its batch over whole
/// later (to this loader, whose splitter gives each event once, and to any
/// other tracer, which then loses none of it).
pub fn read(
    pid: u32,
    maps: &str,
    sites: &[FlushSite],
    mark_taken: bool,
    mut each: impl FnMut(&[u8]),
) -> Result<Walked> {
    let mut found = Walked::default();
    // An exited process (a zombie until reaped) maps nothing; its exit
    // handed its batches over.
    if maps.is_empty() {
        return Ok(found);
    }
    for flush in sites {
        let Some(registry) = registry_of(pid, maps, flush)?.filter(|&r| r != 0) else {
            continue;
        };
        let walked = partial::take(
            &mut Process { pid, mark_taken },
            registry,
            (pid, flush.number),
            clock_ns(ClockId::Monotonic),
            &mut each,
        )
        .context("reading the batch registry")?;
        found.buffers += walked.buffers;
        found.skipped += walked.skipped;
        if found.first_skipped.is_none() {
            found.first_skipped = walked.first_skipped;
        }
        if found.cut.is_none() {
            found.cut = walked.cut;
        }
    }
    Ok(found)
}

/// Says what a walk of `pid`'s registry skipped or left unread, if anything.
pub fn report(pid: u32, walked: &Walked) {
    if let Some(first) = &walked.first_skipped {
        log::warn!(
            "pid {pid}'s batch registry has {} slots that name no batch buffer, skipped (first: \
             {first}); the {} buffers it lists were read",
            walked.skipped,
            walked.buffers
        );
    }
    if let Some(cut) = &walked.cut {
        log::warn!(
            "pid {pid}'s batch registry was read in part ({cut}): the batches pending in the \
             buffers it lists past that are lost"
        );
    }
}

/// The address of process `pid`'s batch registry (None: the process has
/// not made it yet, or maps no flush site).
pub fn registry(pid: u32, sites: &[FlushSite]) -> Result<Option<(u64, u8)>> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    for flush in sites {
        if let Some(registry) = registry_of(pid, &maps, flush)?.filter(|&r| r != 0) {
            return Ok(Some((registry, flush.number)));
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
