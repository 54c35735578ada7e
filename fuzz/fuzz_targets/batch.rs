//! Batch records, heads and registry slots as a hostile process (or a
//! capture's author) makes them: a run of records split, taken whole and
//! counted by one splitter, then the input as a process's memory whose
//! batch registry the partial reader walks, its records split in turn. Any
//! input gives events, a counted irregularity or an error: no panic, no
//! hang, no unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io;
use styx_events::Batches;
use styx_events::batch_items;
use styx_events::partial::{self, Memory};

/// Where the input is mapped; the registry's first block starts there.
const BASE: u64 = 0x1000_0000;
/// Bytes past the input that read as zeros (so that a short input can
/// describe a registry block); beyond, reads fail as unmapped memory does.
const ZEROS: u64 = 64 << 10;

/// The input as a process's memory.
struct Fake<'a> {
    bytes: &'a [u8],
    written: Vec<(u64, Vec<u8>)>,
}

impl Memory for Fake<'_> {
    fn read(&mut self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        let fault = || io::Error::from_raw_os_error(14);
        let from = at.checked_sub(BASE).ok_or_else(fault)?;
        let to = from.checked_add(buf.len() as u64).ok_or_else(fault)?;
        if to > self.bytes.len() as u64 + ZEROS {
            return Err(fault());
        }
        buf.fill(0);
        let have = &self.bytes[(from as usize).min(self.bytes.len())..];
        let n = have.len().min(buf.len());
        buf[..n].copy_from_slice(&have[..n]);
        Ok(())
    }
    fn write(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        // Kept apart: the walk must not depend on reading its own marks.
        if self.written.len() < 1 << 16 {
            self.written.push((at, bytes.to_vec()));
        }
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    // Records, each preceded by its length (u16 LE), as they would come
    // off the ring one after another.
    let mut batches = Batches::new();
    let mut rest = data;
    while let [a, b, tail @ ..] = rest {
        let len = (u16::from_le_bytes([*a, *b]) as usize).min(tail.len());
        let (record, after) = tail.split_at(len);
        rest = after;
        let _ = batch_items::counts(record);
        let mut counts = [0u64; 16];
        if !batches.take_whole(record, &mut counts) {
            let _ = batches.split(record, |_| Ok::<(), ()>(()));
        }
    }
    let _ = batches.irregular();

    let mut memory = Fake {
        bytes: data,
        written: Vec::new(),
    };
    let mut taken = Batches::new();
    let _ = partial::take(&mut memory, BASE, 1, 0, |record| {
        let _ = taken.split(record, |_| Ok::<(), ()>(()));
    });
});
