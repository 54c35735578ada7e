//! Styx Trace's approach: events go through a shared-memory ring buffer
//! (the `ipmpsc` crate) to a reader in another process, 24 bytes each.

use crate::{cpu_seconds, event, finished, spawn_reader, Ran};
use anyhow::Result;
use ipmpsc::{Receiver, Sender, SharedRingBuffer};
use std::time::Instant;

/// The ring's size: styx-loader's default ring.
const RING_BYTES: u32 = 16 << 20;

/// The event as it crosses: (pc, addr, val), 24 bytes.
type Event = (u64, u64, u64);

pub fn run(n: u64) -> Result<Ran> {
    let path = format!("/dev/shm/styx-bench-ipmpsc-{}", std::process::id());
    let sender = Sender::new(SharedRingBuffer::create(&path, RING_BYTES)?);
    let reader = spawn_reader(&["read-ipmpsc", &path, &n.to_string()])?;
    let started = Instant::now();
    for i in 0..n {
        let (pc, addr, val) = event(i);
        sender.send(&(pc, addr, u64::from(val)))?;
    }
    let ran = finished(n, started, reader);
    let _ = std::fs::remove_file(&path);
    ran
}

/// The reader process: takes `n` events, prints `received=N cpu_s=C`.
pub fn read(path: &str, n: u64) -> Result<()> {
    let receiver = Receiver::new(SharedRingBuffer::open(path)?);
    let mut checksum = 0u64;
    for _ in 0..n {
        let (pc, addr, val): Event = receiver.recv()?;
        checksum = checksum.wrapping_add(pc ^ addr ^ val);
    }
    std::hint::black_box(checksum);
    println!("received={n} cpu_s={:.4}", cpu_seconds());
    Ok(())
}
