//! Register numbers as reported in reg_read / reg_write events, and which
//! registers an instruction reads.

use mos6502::instruction::{AddressingMode as Mode, Instruction as I};
use mos6502::registers::Registers;

pub const REG_A: u8 = 0;
pub const REG_X: u8 = 1;
pub const REG_Y: u8 = 2;
pub const REG_SP: u8 = 3;
pub const REG_P: u8 = 4;

/// The five registers' values, indexed by register number.
pub fn snapshot(r: &Registers) -> [u8; 5] {
    [
        r.accumulator,
        r.index_x,
        r.index_y,
        r.stack_pointer.0,
        r.status.bits(),
    ]
}

/// A bit per register number that `instruction` in `mode` reads: its
/// operands, its index register, the stack pointer, or the flags it tests.
pub fn reads(instruction: I, mode: Mode) -> u8 {
    let bit = |reg: u8| 1u8 << reg;
    let mut regs = match instruction {
        I::ADC | I::ADCnd | I::SBC | I::SBCnd => bit(REG_A) | bit(REG_P),
        I::AND | I::BIT | I::CMP | I::EOR | I::ORA | I::STA | I::TAX | I::TAY => bit(REG_A),
        I::ASL | I::LSR if matches!(mode, Mode::Accumulator) => bit(REG_A),
        I::ROL | I::ROR if matches!(mode, Mode::Accumulator) => bit(REG_A) | bit(REG_P),
        I::ROL | I::ROR => bit(REG_P),
        I::CPX | I::DEX | I::INX | I::STX | I::TXA | I::TXS => bit(REG_X),
        I::CPY | I::DEY | I::INY | I::STY | I::TYA => bit(REG_Y),
        I::PHA => bit(REG_A) | bit(REG_SP),
        I::PHP => bit(REG_P) | bit(REG_SP),
        I::PLA | I::PLP | I::JSR | I::RTS | I::RTI | I::TSX | I::BRK => bit(REG_SP),
        I::BCC | I::BCS | I::BEQ | I::BMI | I::BNE | I::BPL | I::BVC | I::BVS => bit(REG_P),
        _ => 0,
    };
    regs |= match mode {
        Mode::ZeroPageX | Mode::AbsoluteX | Mode::IndexedIndirectX => bit(REG_X),
        Mode::ZeroPageY | Mode::AbsoluteY | Mode::IndirectIndexedY => bit(REG_Y),
        _ => 0,
    };
    regs
}
