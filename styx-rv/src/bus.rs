//! The machine's memory as rrs-lib's interpreter reaches it: every
//! instruction fetch, load and store goes through [`Memory`], so this is
//! where the `mem_read` / `mem_write` probes sit, one per access size.
//!
//! | address | device |
//! |---|---|
//! | `0` .. [`RAM_SIZE`] | RAM |
//! | [`HALT_PORT`] | a store halts the machine; the value is its exit code |
//! | [`OUTPUT_PORT`] | each store appends its low byte to the output |
//!
//! `Bus<true>` also counts the accesses, for tests that compare what a
//! tracer received with what the emulator did; `Bus<false>`, the one
//! measured, counts nothing (the counting is compiled out of it).

use crate::counts::Counts;
use rrs_lib::{MemAccessSize, Memory};

/// RAM size in bytes, from address 0.
pub const RAM_SIZE: u32 = 0x1_0000;
/// A store here halts the machine with the value as exit code.
pub const HALT_PORT: u32 = 0x1000_0000;
/// Each store here appends its low byte to the output.
pub const OUTPUT_PORT: u32 = 0x1000_0004;

/// RAM and the two ports.
pub struct Bus<const COUNT: bool> {
    ram: Box<[u8]>,
    /// The pc of the instruction being executed, reported with each access.
    pub(crate) pc: u32,
    output: Vec<u8>,
    halted: Option<u32>,
    /// Accesses so far (only with `COUNT`).
    pub(crate) counts: Counts,
}

impl<const COUNT: bool> Bus<COUNT> {
    /// Zeroed RAM, no output.
    pub fn new() -> Self {
        Bus {
            ram: vec![0; RAM_SIZE as usize].into_boxed_slice(),
            pc: 0,
            output: Vec::new(),
            halted: None,
            counts: Counts::default(),
        }
    }

    /// Zeroes RAM, loads `image` at `address`, and clears the output and the
    /// halt (the counts go on).
    pub fn load(&mut self, address: u32, image: &[u8]) {
        self.ram.fill(0);
        let start = address as usize;
        self.ram[start..start + image.len()].copy_from_slice(image);
        self.output.clear();
        self.halted = None;
    }

    /// Reads a RAM word without firing a probe: for the host, not the guest.
    /// 0 outside RAM.
    #[inline]
    pub fn peek_word(&self, address: u32) -> u32 {
        let at = address as usize;
        self.ram
            .get(at..at + 4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The exit code stored to the halt port, once one has been.
    #[inline]
    pub fn halted(&self) -> Option<u32> {
        self.halted
    }

    /// The bytes stored to the output port since the last [`load`](Self::load).
    pub fn output(&self) -> &[u8] {
        &self.output
    }

    fn ram_read(&self, address: u32, size: MemAccessSize) -> Option<u32> {
        let at = address as usize;
        Some(match size {
            MemAccessSize::Byte => u32::from(*self.ram.get(at)?),
            MemAccessSize::HalfWord => {
                let b = self.ram.get(at..at + 2)?;
                u32::from(u16::from_le_bytes([b[0], b[1]]))
            }
            MemAccessSize::Word => {
                let b = self.ram.get(at..at + 4)?;
                u32::from_le_bytes([b[0], b[1], b[2], b[3]])
            }
        })
    }

    fn write(&mut self, address: u32, size: MemAccessSize, value: u32) -> bool {
        match address {
            HALT_PORT => self.halted = Some(value),
            OUTPUT_PORT => self.output.push(value as u8),
            _ => {
                let at = address as usize;
                let bytes = value.to_le_bytes();
                let len = match size {
                    MemAccessSize::Byte => 1,
                    MemAccessSize::HalfWord => 2,
                    MemAccessSize::Word => 4,
                };
                match self.ram.get_mut(at..at + len) {
                    Some(slot) => slot.copy_from_slice(&bytes[..len]),
                    None => return false,
                }
            }
        }
        true
    }
}

impl<const COUNT: bool> Default for Bus<COUNT> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const COUNT: bool> Memory for Bus<COUNT> {
    fn read_mem(&mut self, addr: u32, size: MemAccessSize) -> Option<u32> {
        let val = self.ram_read(addr, size)?;
        let pc = self.pc;
        // The access size is the width of the value's type.
        match size {
            MemAccessSize::Byte => styx_probe::mem_read!(|| (pc, addr, val as u8)),
            MemAccessSize::HalfWord => styx_probe::mem_read!(|| (pc, addr, val as u16)),
            MemAccessSize::Word => styx_probe::mem_read!(|| (pc, addr, val)),
        }
        if COUNT {
            self.counts.mem_reads += 1;
        }
        Some(val)
    }

    fn write_mem(&mut self, addr: u32, size: MemAccessSize, store_data: u32) -> bool {
        if !self.write(addr, size, store_data) {
            return false;
        }
        let pc = self.pc;
        match size {
            MemAccessSize::Byte => styx_probe::mem_write!(|| (pc, addr, store_data as u8)),
            MemAccessSize::HalfWord => styx_probe::mem_write!(|| (pc, addr, store_data as u16)),
            MemAccessSize::Word => styx_probe::mem_write!(|| (pc, addr, store_data)),
        }
        if COUNT {
            self.counts.mem_writes += 1;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ram_reads_back_what_was_written_at_each_size() {
        let mut bus = Bus::<true>::new();
        assert!(bus.write_mem(0x100, MemAccessSize::Word, 0x1122_3344));
        assert!(bus.write_mem(0x104, MemAccessSize::HalfWord, 0xaabb_ccdd));
        assert!(bus.write_mem(0x106, MemAccessSize::Byte, 0xee));
        assert_eq!(bus.read_mem(0x100, MemAccessSize::Word), Some(0x1122_3344));
        assert_eq!(bus.read_mem(0x101, MemAccessSize::Byte), Some(0x33));
        assert_eq!(bus.read_mem(0x104, MemAccessSize::Word), Some(0x00ee_ccdd));
        assert_eq!(bus.read_mem(0x104, MemAccessSize::HalfWord), Some(0xccdd));
        assert_eq!(bus.peek_word(0x104), 0x00ee_ccdd);
        assert_eq!((bus.counts.mem_reads, bus.counts.mem_writes), (4, 3));
    }

    #[test]
    fn ports_halt_and_print_and_stray_accesses_fail_uncounted() {
        let mut bus = Bus::<true>::new();
        assert!(bus.write_mem(OUTPUT_PORT, MemAccessSize::Word, u32::from(b'h')));
        assert!(bus.write_mem(OUTPUT_PORT, MemAccessSize::Byte, u32::from(b'i')));
        assert_eq!(bus.output(), b"hi");
        assert_eq!(bus.halted(), None);
        assert!(bus.write_mem(HALT_PORT, MemAccessSize::Word, 7));
        assert_eq!(bus.halted(), Some(7));
        assert_eq!(bus.read_mem(HALT_PORT, MemAccessSize::Word), None);
        assert_eq!(bus.read_mem(RAM_SIZE - 2, MemAccessSize::Word), None);
        assert!(!bus.write_mem(RAM_SIZE, MemAccessSize::Byte, 1));
        assert_eq!((bus.counts.mem_reads, bus.counts.mem_writes), (0, 3));

        bus.load(0x10, &[1, 2, 3, 4]);
        assert_eq!((bus.output(), bus.halted()), (&[][..], None));
        assert_eq!(bus.peek_word(0x10), 0x0403_0201);
    }

    #[test]
    fn the_uncounted_bus_counts_nothing() {
        let mut bus = Bus::<false>::new();
        assert!(bus.write_mem(0, MemAccessSize::Word, 1));
        assert_eq!(bus.read_mem(0, MemAccessSize::Word), Some(1));
        assert_eq!(bus.counts, Counts::default());
    }
}
