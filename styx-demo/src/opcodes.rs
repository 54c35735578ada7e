//! What the step loop needs to know about each opcode, decoded once into a
//! 256-entry table so the hot loop does one indexed load per instruction.
//!
//! Registers an instruction reads (its `reg_read` events), by instruction:
//!
//! | reads | instructions |
//! |---|---|
//! | A | `AND BIT CMP EOR ORA STA TAX TAY`, `ASL`/`LSR` on A; `SAX SBX` (also X), `DCP SLO SRE ANC ALR XAA` |
//! | A, P | `ADC SBC`, `ROL`/`ROR` on A; `ISC RLA RRA ARR USBC` (P: carry in) |
//! | P | `ROL`/`ROR` on memory (carry in), `Bxx` (the flag tested) |
//! | X | `CPX DEX INX STX TXA TXS` |
//! | Y | `CPY DEY INY STY TYA` |
//! | SP | `PLA PLP JSR RTS RTI TSX`; `PHA` (also A), `PHP` (also P), `BRK` (also P) |
//! | SP, P | `LAS` |
//!
//! plus the index register of every indexed mode: X for `zp,X`, `abs,X` and
//! `(zp,X)`; Y for `zp,Y`, `abs,Y` and `(zp),Y`. Flag-setting instructions
//! (`CLC`, `SEI`, …) write P without reading it. An interrupt's own pushes are
//! not register reads.

use crate::registers::{RegSet, REG_A, REG_P, REG_SP, REG_X, REG_Y};
use mos6502::instruction::{AddressingMode as Mode, Instruction as I, Nmos6502};
use mos6502::Variant;
use styx_probe::{Branch, BranchKind};

/// How an instruction moves the program counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// On to the next instruction.
    Next,
    /// `Bxx`: to its target when the condition holds, else on.
    Conditional,
    /// `JMP`.
    Jump,
    /// `JSR`.
    Call,
    /// `RTS`.
    Return,
    /// `RTI`.
    ReturnFromInterrupt,
    /// `BRK`: a software interrupt through the IRQ vector.
    Break,
    /// `JAM`: the CPU locks up until reset.
    Jam,
}

impl Flow {
    /// The `branch` event's kind for this flow, if it transfers control.
    pub const fn branch(self) -> Option<Branch> {
        Some(match self {
            Flow::Next | Flow::Jam => return None,
            Flow::Conditional => Branch::conditional(BranchKind::Jump),
            Flow::Jump => Branch::unconditional(BranchKind::Jump),
            Flow::Call => Branch::unconditional(BranchKind::Call),
            Flow::Return => Branch::unconditional(BranchKind::Ret),
            Flow::ReturnFromInterrupt => Branch::unconditional(BranchKind::ReturnFromInterrupt),
            Flow::Break => Branch::unconditional(BranchKind::Interrupt),
        })
    }
}

/// One opcode's length, the registers it reads and its control flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// Bytes from this instruction's opcode to the next one's.
    pub len: u8,
    /// The registers it reads (see the module docs).
    pub reads: RegSet,
    /// How it moves the program counter.
    pub flow: Flow,
}

/// [`OpInfo`] for all 256 NMOS 6502 opcodes (the undocumented ones too).
pub struct OpTable([OpInfo; 256]);

impl OpTable {
    /// Decodes every opcode with `mos6502`'s own decoder, so the table agrees
    /// with the CPU that runs them.
    pub fn nmos() -> OpTable {
        let mut table = [OpInfo {
            len: 1,
            reads: RegSet::NONE,
            flow: Flow::Jam,
        }; 256];
        for (opcode, info) in table.iter_mut().enumerate() {
            if let Some((instruction, mode)) = Nmos6502::decode(opcode as u8) {
                *info = OpInfo {
                    len: len(instruction, mode),
                    reads: reads(instruction, mode),
                    flow: flow(instruction),
                };
            }
        }
        OpTable(table)
    }

    /// What `opcode` does.
    #[inline(always)]
    pub fn get(&self, opcode: u8) -> OpInfo {
        self.0[opcode as usize]
    }
}

impl Default for OpTable {
    fn default() -> Self {
        Self::nmos()
    }
}

fn len(instruction: I, mode: Mode) -> u8 {
    match instruction {
        // BRK skips a signature byte: it returns two bytes on.
        I::BRK | I::BRKcld => 2,
        _ => 1 + mode.extra_bytes() as u8,
    }
}

fn flow(instruction: I) -> Flow {
    match instruction {
        I::BCC | I::BCS | I::BEQ | I::BMI | I::BNE | I::BPL | I::BVC | I::BVS => Flow::Conditional,
        I::JMP => Flow::Jump,
        I::JSR => Flow::Call,
        I::RTS => Flow::Return,
        I::RTI => Flow::ReturnFromInterrupt,
        I::BRK | I::BRKcld => Flow::Break,
        I::JAM => Flow::Jam,
        _ => Flow::Next,
    }
}

fn reads(instruction: I, mode: Mode) -> RegSet {
    let [a, x, y, sp, p] = [REG_A, REG_X, REG_Y, REG_SP, REG_P].map(RegSet::of);
    let accumulator = matches!(mode, Mode::Accumulator);
    let by_instruction = match instruction {
        I::ADC | I::ADCnd | I::SBC | I::SBCnd | I::USBC => a.with(p),
        I::ISC | I::RLA | I::RRA | I::ARR => a.with(p),
        I::ROL | I::ROR if accumulator => a.with(p),
        I::ROL | I::ROR => p,
        I::ASL | I::LSR if accumulator => a,
        I::AND | I::BIT | I::CMP | I::EOR | I::ORA | I::STA | I::TAX | I::TAY => a,
        I::DCP | I::SLO | I::SRE | I::ANC | I::ALR | I::XAA => a,
        I::SAX | I::SBX => a.with(x),
        I::CPX | I::DEX | I::INX | I::STX | I::TXA | I::TXS => x,
        I::CPY | I::DEY | I::INY | I::STY | I::TYA => y,
        I::PHA => a.with(sp),
        I::PHP | I::BRK | I::BRKcld => p.with(sp),
        I::PLA | I::PLP | I::JSR | I::RTS | I::RTI | I::TSX => sp,
        I::LAS => sp.with(p),
        I::BCC | I::BCS | I::BEQ | I::BMI | I::BNE | I::BPL | I::BVC | I::BVS => p,
        _ => RegSet::NONE,
    };
    let index = match mode {
        Mode::ZeroPageX | Mode::AbsoluteX | Mode::IndexedIndirectX => x,
        Mode::ZeroPageY | Mode::AbsoluteY | Mode::IndirectIndexedY => y,
        _ => RegSet::NONE,
    };
    by_instruction.with(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regs(set: RegSet) -> Vec<u8> {
        set.collect()
    }

    #[test]
    fn lengths_follow_the_addressing_mode() {
        let table = OpTable::nmos();
        assert_eq!(table.get(0xea).len, 1); // NOP
        assert_eq!(table.get(0xa9).len, 2); // LDA #imm
        assert_eq!(table.get(0xd0).len, 2); // BNE rel
        assert_eq!(table.get(0x9d).len, 3); // STA abs,X
        assert_eq!(table.get(0x20).len, 3); // JSR abs
        assert_eq!(table.get(0x00).len, 2); // BRK + signature byte
    }

    #[test]
    fn reads_cover_operands_index_registers_and_the_stack() {
        let table = OpTable::nmos();
        assert_eq!(regs(table.get(0x8d).reads), [REG_A]); // STA abs
        assert_eq!(regs(table.get(0x9d).reads), [REG_A, REG_X]); // STA abs,X
        assert_eq!(regs(table.get(0x91).reads), [REG_A, REG_Y]); // STA (zp),Y
        assert_eq!(regs(table.get(0xaa).reads), [REG_A]); // TAX
        assert_eq!(regs(table.get(0xe0).reads), [REG_X]); // CPX #imm
        assert_eq!(regs(table.get(0x48).reads), [REG_A, REG_SP]); // PHA
        assert_eq!(regs(table.get(0x65).reads), [REG_A, REG_P]); // ADC zp
        assert_eq!(regs(table.get(0xd0).reads), [REG_P]); // BNE
        assert!(regs(table.get(0xa9).reads).is_empty()); // LDA #imm
        assert_eq!(regs(table.get(0xbd).reads), [REG_X]); // LDA abs,X
    }

    #[test]
    fn control_flow_is_classified() {
        let table = OpTable::nmos();
        let flow = |op| table.get(op).flow;
        assert_eq!(flow(0x4c), Flow::Jump); // JMP abs
        assert_eq!(flow(0x6c), Flow::Jump); // JMP (ind)
        assert_eq!(flow(0x20), Flow::Call);
        assert_eq!(flow(0x60), Flow::Return);
        assert_eq!(flow(0x40), Flow::ReturnFromInterrupt);
        assert_eq!(flow(0x00), Flow::Break);
        assert_eq!(flow(0xb0), Flow::Conditional); // BCS
        assert_eq!(flow(0x02), Flow::Jam);
        assert_eq!(flow(0xe8), Flow::Next); // INX
        assert_eq!(Flow::Next.branch(), None);
        assert_eq!(
            Flow::Conditional.branch(),
            Some(Branch::conditional(BranchKind::Jump))
        );
    }
}
