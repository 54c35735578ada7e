//! A stopping loader's walk of a traced process's batch registry
//! (`styx_events::partial::take`), on made-up memory: the input is the
//! process's memory from address `BASE` (the registry's first block at its
//! start); reads past it fail as an unmapped page would. Any memory gives
//! records or a counted, reported skip — no panic, no hang, no unbounded
//! allocation — and each record the walk hands over goes through the
//! splitter: a record whose items all parse splits into exactly as many
//! events as the item walk counted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io;
use styx_events::batch::Batches;
use styx_events::batch_items;
use styx_events::partial::{self, Memory};

const BASE: u64 = 0x10_0000;

struct Image(Vec<u8>);

impl Image {
    fn range(&self, at: u64, len: usize) -> io::Result<std::ops::Range<usize>> {
        let start = at
            .checked_sub(BASE)
            .and_then(|o| usize::try_from(o).ok())
            .filter(|&o| o.checked_add(len).is_some_and(|end| end <= self.0.len()));
        start
            .map(|o| o..o + len)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))
    }
}

impl Memory for Image {
    fn read(&mut self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        let range = self.range(at, buf.len())?;
        buf.copy_from_slice(&self.0[range]);
        Ok(())
    }

    fn write(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        let range = self.range(at, bytes.len())?;
        self.0[range].copy_from_slice(bytes);
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut memory = Image(data.to_vec());
    let mut batches = Batches::new();
    let _ = partial::take(&mut memory, BASE, 1, 1_000_000, |record| {
        let counted = batch_items::counts(record);
        let mut events = 0u64;
        let split = batches.split(record, |_| {
            events += 1;
            Ok::<(), ()>(())
        });
        if let Some(counts) = counted {
            if split.is_ok() {
                // Bytes given before (a buffer listed twice) are not given again.
                assert!(events <= counts.iter().sum::<u64>());
            }
        }
    });
});
