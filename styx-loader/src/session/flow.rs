//! Lossless mode's flow control, the loader's side (the protocol is in
//! `styx_common::batch::FlushSemaphore`): the loader grants the emulator
//! credit for as many batches as half the ring holds beyond those it has
//! taken, rewriting the credit after every drain, and takes the credit
//! away as it stops. The emulator waits for credit before flushing, so the
//! ring never fills, however slow the output.

use super::flush_block::{self, remote, FlushSite};
use anyhow::{Context, Result};
use std::mem::size_of;
use styx_common::batch::{
    BatchRecord, BATCH_BYTES, CREDIT_OFFSET, CREDIT_OWNER_OFFSET, FLUSHED_OFFSET,
};

/// Flow control of one process, once its flush blocks are found.
pub struct Flow {
    pid: u32,
    /// The flush blocks' addresses; empty until the process has mapped its
    /// files (a command started here has not, at first).
    blocks: Vec<u64>,
    /// Batches the emulator may have in flight: half the ring, in the
    /// largest batch records.
    window: u64,
}

impl Flow {
    /// Flow control for `pid` with a ring of `ring_bytes`.
    pub fn new(pid: u32, ring_bytes: u32) -> Flow {
        // Each record also takes the ring's 8-byte header.
        let record = (size_of::<BatchRecord>() + BATCH_BYTES + 8) as u64;
        Flow {
            pid,
            blocks: Vec::new(),
            window: (ring_bytes as u64 / 2 / record).max(1),
        }
    }

    /// The process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Grants credit for `taken` batches (received or seen lost since the
    /// start) plus the window; on the first call that finds the flush
    /// blocks, also takes the emulator's count of flushes back to 0 and
    /// claims flow control. An error only if the process's memory cannot
    /// be written once found.
    pub fn grant(&mut self, sites: &[FlushSite], taken: u64) -> Result<()> {
        if self.blocks.is_empty() {
            let maps =
                std::fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap_or_default();
            // The files mapped now (a library opened later is not
            // flow-controlled); none yet: no flush can have happened either.
            // Errors too are tried again at the next drain: a command
            // started here may be half-way through `exec`.
            let mut blocks = Vec::new();
            for site in sites {
                if let Ok(Some(block)) = flush_block::address(self.pid, &maps, site) {
                    blocks.push(block);
                }
            }
            if blocks.is_empty() {
                return Ok(());
            }
            for &block in &blocks {
                remote::write(self.pid, block + FLUSHED_OFFSET, &0u64.to_le_bytes())
                    .context("starting lossless flow control")?;
            }
            self.blocks = blocks;
            self.write_credit(taken)?;
            for &block in &self.blocks {
                remote::write(
                    self.pid,
                    block + CREDIT_OWNER_OFFSET,
                    &std::process::id().to_le_bytes(),
                )
                .context("starting lossless flow control")?;
            }
            return Ok(());
        }
        self.write_credit(taken)
    }

    fn write_credit(&self, taken: u64) -> Result<()> {
        let credit = taken + self.window;
        for &block in &self.blocks {
            remote::write(self.pid, block + CREDIT_OFFSET, &credit.to_le_bytes())
                .context("granting lossless flow control credit")?;
        }
        Ok(())
    }

    /// Gives flow control up: waiting threads go on (before detaching, so
    /// none waits for a loader that has gone).
    pub fn release(&mut self) {
        for block in std::mem::take(&mut self.blocks) {
            // The process may have exited: nothing to release then.
            let _ = remote::write(self.pid, block + CREDIT_OWNER_OFFSET, &0u32.to_le_bytes());
        }
    }
}
