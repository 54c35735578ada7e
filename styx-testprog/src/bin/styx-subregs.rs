//! A toy Z80 register file for the sub-register tests: its guest
//! description says A and F are the halves of AF, H and L of HL, and five
//! instructions write AF whole, then A, F, L and H, each reported by its
//! own register number. A tracer's Tenet lines must show AF and HL with
//! those halves merged in; other formats the halves' own names.

use styx_probe::{insn_exec, reg_write};

const AF: u8 = 0;
const A: u8 = 1;
const F: u8 = 2;
const HL: u8 = 3;
const H: u8 = 4;
const L: u8 = 5;

styx_probe::describe! {
    arch: "z80",
    pc: "pc",
    registers: [
        ("af", AF, 16), ("a", A, 8, in "af" at 8), ("f", F, 8, in "af" at 0),
        ("hl", HL, 16), ("h", H, 8, in "hl" at 8), ("l", L, 8, in "hl" at 0),
    ],
}

/// The instructions: (pc, register written, value).
const PROGRAM: [(u16, u8, u16); 5] = [
    (0x100, AF, 0x1234),
    (0x101, A, 0x56),
    (0x102, F, 0x78),
    (0x103, L, 0x9a),
    (0x104, H, 0xbc),
];

#[derive(Default)]
struct Registers {
    af: u16,
    hl: u16,
}

impl Registers {
    fn pair(&mut self, reg: u8) -> &mut u16 {
        match reg {
            AF | A | F => &mut self.af,
            _ => &mut self.hl,
        }
    }

    /// Writes `reg`; returns what it held.
    fn write(&mut self, reg: u8, val: u16) -> u16 {
        let pair = self.pair(reg);
        let (shift, mask) = match reg {
            AF | HL => (0, 0xffff),
            A | H => (8, 0xff),
            _ => (0, 0xff),
        };
        let old = (*pair >> shift) & mask;
        *pair = (*pair & !(mask << shift)) | ((val & mask) << shift);
        old
    }
}

fn main() {
    let mut regs = Registers::default();
    for (pc, reg, val) in PROGRAM {
        insn_exec!(|| (pc, 0u8, 1u8));
        let old = regs.write(reg, val);
        reg_write!(|| (pc, reg, val, old));
    }
    println!("af={:#x} hl={:#x}", regs.af, regs.hl);
}
