//! Event types of its own (`styx_probe::event!`), of different shapes: one
//! with an enum field, one with signed fields, one with eight fields of
//! every kind, one wider than the append routine's registers; and a library
//! crate's (styx-testdev's `dma_copy`), declared there. Commands on stdin,
//! each answered on stdout:
//! - `fire N`: N rounds, each one event of every type; answers `fired N`.
//! - `quit`: exits.
//!
//! Round `i` fires (what the tests expect, see [`round`]):
//! - `mmio_write(pc 0x1000 + i, device [Uart, Timer, Dma][i % 3],
//!   addr 0x10 + i, val 3 * i)`;
//! - `flags_delta(pc 0x600 + i, delta -(i % 5), wide -1000 * i)`;
//! - `wide(a i, b 2 * i, c 3 * i, d 4 * i, e i odd, f i % 16, g -(i as i16), h 5 * i)`;
//! - `big(i, i + 1, i + 2, i + 3, i + 4, -i)`;
//! - `dma_copy(src 0x8000 + 16 * i, dst 0x200 + i, len i % 64)`, by
//!   `styx_testdev::copy`.

use std::io::{BufRead, Write};
use styx_probe::{Addr, Reg};

styx_probe::event_enum! {
    /// The devices of the toy machine.
    pub enum Device: u8 { Uart = 0, Timer = 1, Dma = 7 }
}

styx_probe::event! {
    /// A store to a device's register.
    pub mmio_write(pc: u32, device: Device, addr: Addr<u32>, val: u32);
    /// The flags a reference model computed differed by `delta`.
    pub flags_delta(pc: u16, delta: i8, wide: i64);
    /// Eight fields, one of every kind and width.
    pub wide(a: u8, b: u16, c: u32, d: u64, e: bool, f: Reg<u8>, g: i16, h: usize);
    /// More bytes than the append routine's registers hold (51).
    pub big(a: u64, b: u64, c: u64, d: u64, e: u64, f: i64);
}

const DEVICES: [Device; 3] = [Device::Uart, Device::Timer, Device::Dma];

/// Round `i`: one event of every type.
#[inline(never)]
fn round(i: u64) {
    styx_probe::fire!(mmio_write, || (
        0x1000 + i as u32,
        DEVICES[i as usize % 3],
        Addr(0x10 + i as u32),
        3 * i as u32
    ));
    // The closure may return an `Option`: this one `Some` every round (one
    // flags_delta a round, as the tests expect), the next `None` (nothing).
    styx_probe::fire!(flags_delta, || (i < u64::MAX).then(|| (
        0x600 + i as u16,
        -((i % 5) as i8),
        -1000 * i as i64
    )));
    styx_probe::fire!(flags_delta, || (i == u64::MAX).then_some((0, 0, 0)));
    styx_probe::fire!(wide, || (
        i as u8,
        2 * i as u16,
        3 * i as u32,
        4 * i,
        i % 2 == 1,
        Reg((i % 16) as u8),
        -(i as i16),
        5 * i as usize
    ));
    styx_probe::fire!(big, || (i, i + 1, i + 2, i + 3, i + 4, -(i as i64)));
    styx_testdev::copy(i);
}

fn main() {
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("reading a command");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["fire", n] => {
                let n: u64 = n.parse().expect("fire N");
                (0..n).for_each(round);
                writeln!(stdout.lock(), "fired {n}").unwrap();
            }
            ["quit"] => return,
            _ => panic!("unknown command {line:?}"),
        }
    }
}
