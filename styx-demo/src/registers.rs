//! Register numbers as reported in `reg_read` / `reg_write` events, and a
//! snapshot of all five registers cheap enough to take twice per instruction.

use mos6502::registers::Registers;

/// The accumulator.
pub const REG_A: u8 = 0;
/// Index register X.
pub const REG_X: u8 = 1;
/// Index register Y.
pub const REG_Y: u8 = 2;
/// The stack pointer (the low byte; the stack lives at `$0100 + SP`).
pub const REG_SP: u8 = 3;
/// The processor status flags `NV-BDIZC`, as `Status::bits` gives them.
pub const REG_P: u8 = 4;

/// Register names, indexed by register number.
pub const NAMES: [&str; 5] = ["a", "x", "y", "sp", "p"];

/// A set of registers: bit `n` is register number `n`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegSet(pub u8);

impl RegSet {
    /// No registers.
    pub const NONE: RegSet = RegSet(0);

    /// The set holding only register `reg`.
    pub const fn of(reg: u8) -> RegSet {
        RegSet(1 << reg)
    }

    /// Both sets' registers.
    pub const fn with(self, other: RegSet) -> RegSet {
        RegSet(self.0 | other.0)
    }

    /// Whether register `reg` is in the set.
    pub const fn contains(self, reg: u8) -> bool {
        self.0 & (1 << reg) != 0
    }
}

impl Iterator for RegSet {
    type Item = u8;

    /// The register numbers in the set, lowest first.
    #[inline]
    fn next(&mut self) -> Option<u8> {
        if self.0 == 0 {
            return None;
        }
        let reg = self.0.trailing_zeros() as u8;
        self.0 &= self.0 - 1;
        Some(reg)
    }
}

/// All five registers, one byte each (register `n` in bits `8n..8n+8`), so
/// finding what an instruction changed is one XOR rather than five compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot(u64);

impl Snapshot {
    /// Takes the registers' current values.
    #[inline(always)]
    pub fn of(r: &Registers) -> Snapshot {
        Snapshot(u64::from_le_bytes([
            r.accumulator,
            r.index_x,
            r.index_y,
            r.stack_pointer.0,
            r.status.bits(),
            0,
            0,
            0,
        ]))
    }

    /// The value of register number `reg`.
    #[inline(always)]
    pub fn get(self, reg: u8) -> u8 {
        (self.0 >> (8 * u32::from(reg))) as u8
    }

    /// The registers whose value differs in `after`, lowest number first.
    #[inline(always)]
    pub fn changed(self, after: Snapshot) -> Changed {
        Changed(self.0 ^ after.0)
    }
}

/// Iterates the registers that changed: the nonzero bytes of two snapshots' XOR.
pub struct Changed(u64);

impl Iterator for Changed {
    type Item = u8;

    #[inline(always)]
    fn next(&mut self) -> Option<u8> {
        if self.0 == 0 {
            return None;
        }
        let reg = self.0.trailing_zeros() / 8;
        self.0 &= !(0xff << (8 * reg));
        Some(reg as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mos6502::registers::{StackPointer, Status};

    fn registers(a: u8, x: u8, y: u8, sp: u8, p: u8) -> Registers {
        let mut r = Registers::new();
        r.accumulator = a;
        r.index_x = x;
        r.index_y = y;
        r.stack_pointer = StackPointer(sp);
        r.status = Status::from_bits_truncate(p);
        r
    }

    #[test]
    fn snapshot_reads_back_each_register_by_number() {
        let s = Snapshot::of(&registers(1, 2, 3, 0xfd, 0x24));
        let values: Vec<u8> = (0..5).map(|reg| s.get(reg)).collect();
        assert_eq!(values, [1, 2, 3, 0xfd, 0x24]);
    }

    #[test]
    fn changed_lists_exactly_the_registers_that_differ() {
        let before = Snapshot::of(&registers(1, 2, 3, 0xfd, 0x24));
        let after = Snapshot::of(&registers(1, 9, 3, 0xfc, 0x24));
        assert_eq!(before.changed(after).collect::<Vec<_>>(), [REG_X, REG_SP]);
        assert_eq!(before.changed(before).next(), None);
    }

    #[test]
    fn a_set_iterates_its_registers_in_order() {
        let set = RegSet::of(REG_P).with(RegSet::of(REG_A));
        assert!(set.contains(REG_A) && !set.contains(REG_X));
        assert_eq!(set.collect::<Vec<_>>(), [REG_A, REG_P]);
    }
}
