//! A small RV32IM assembler: the instructions the guest program uses,
//! encoded into words, with labels for branches and jumps. It exists so the
//! guest is written and built here, from source, with no toolchain or
//! binary from elsewhere.

use crate::registers::{Reg, RA, ZERO};
use std::collections::BTreeMap;

/// What keeps a program from assembling.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AsmError {
    #[error("label {0:?} is defined twice")]
    DuplicateLabel(&'static str),
    #[error("label {0:?} is used but never defined")]
    UndefinedLabel(&'static str),
    #[error("{what} immediate {value} at {at:#x} does not fit")]
    OutOfRange {
        what: &'static str,
        value: i64,
        at: u32,
    },
}

/// A label reference to patch once every label is known.
struct Fixup {
    /// Index of the instruction word.
    index: usize,
    label: &'static str,
    form: Form,
}

#[derive(Clone, Copy)]
enum Form {
    Branch,
    Jal,
}

/// Major opcodes (the low 7 bits of an instruction).
pub const OPCODE_LOAD: u32 = 0x03;
pub const OPCODE_OP_IMM: u32 = 0x13;
pub const OPCODE_STORE: u32 = 0x23;
pub const OPCODE_OP: u32 = 0x33;
pub const OPCODE_LUI: u32 = 0x37;
pub const OPCODE_BRANCH: u32 = 0x63;
pub const OPCODE_JALR: u32 = 0x67;
pub const OPCODE_JAL: u32 = 0x6f;

/// The M extension's `funct7`.
const FUNCT7_MULDIV: u32 = 0b000_0001;

/// Builds a program at a load address, one instruction at a time.
pub struct Assembler {
    origin: u32,
    words: Vec<u32>,
    labels: BTreeMap<&'static str, u32>,
    fixups: Vec<Fixup>,
    /// The first error, reported by [`finish`](Self::finish).
    error: Option<AsmError>,
}

fn fits_signed(value: i64, bits: u32) -> bool {
    let limit = 1i64 << (bits - 1);
    (-limit..limit).contains(&value)
}

fn r(rd: Reg, rs1: Reg, rs2: Reg) -> u32 {
    u32::from(rs2.0) << 20 | u32::from(rs1.0) << 15 | u32::from(rd.0) << 7
}

impl Assembler {
    /// An empty program whose first instruction will sit at `origin`.
    pub fn new(origin: u32) -> Assembler {
        Assembler {
            origin,
            words: Vec::new(),
            labels: BTreeMap::new(),
            fixups: Vec::new(),
            error: None,
        }
    }

    /// The address the next instruction goes to.
    pub fn here(&self) -> u32 {
        self.origin + 4 * self.words.len() as u32
    }

    fn fail(&mut self, error: AsmError) {
        self.error.get_or_insert(error);
    }

    /// `value` if it fits a signed `bits`-bit immediate (else records an error).
    fn imm(&mut self, what: &'static str, value: i32, bits: u32) -> u32 {
        if !fits_signed(value.into(), bits) {
            self.fail(AsmError::OutOfRange {
                what,
                value: value.into(),
                at: self.here(),
            });
        }
        value as u32 & ((1 << bits) - 1)
    }

    /// Defines `name` as the address of the next instruction.
    pub fn label(&mut self, name: &'static str) {
        let here = self.here();
        if self.labels.insert(name, here).is_some() {
            self.fail(AsmError::DuplicateLabel(name));
        }
    }

    fn emit(&mut self, word: u32) {
        self.words.push(word);
    }

    fn op(&mut self, funct7: u32, funct3: u32, rd: Reg, rs1: Reg, rs2: Reg) {
        self.emit(funct7 << 25 | r(rd, rs1, rs2) | funct3 << 12 | OPCODE_OP);
    }

    fn op_imm(&mut self, funct3: u32, rd: Reg, rs1: Reg, imm: i32) {
        let imm = self.imm("I-type", imm, 12);
        self.emit(imm << 20 | r(rd, rs1, ZERO) | funct3 << 12 | OPCODE_OP_IMM);
    }

    fn shift_imm(&mut self, funct7: u32, funct3: u32, rd: Reg, rs1: Reg, shamt: u32) {
        if shamt > 31 {
            self.fail(AsmError::OutOfRange {
                what: "shift amount",
                value: shamt.into(),
                at: self.here(),
            });
        }
        let shamt = Reg((shamt & 31) as u8);
        self.emit(funct7 << 25 | r(rd, rs1, shamt) | funct3 << 12 | OPCODE_OP_IMM);
    }

    fn load(&mut self, funct3: u32, rd: Reg, offset: i32, base: Reg) {
        let imm = self.imm("load offset", offset, 12);
        self.emit(imm << 20 | r(rd, base, ZERO) | funct3 << 12 | OPCODE_LOAD);
    }

    fn store(&mut self, funct3: u32, src: Reg, offset: i32, base: Reg) {
        let imm = self.imm("store offset", offset, 12);
        let split = (imm >> 5) << 25 | (imm & 0x1f) << 7;
        self.emit(split | r(ZERO, base, src) | funct3 << 12 | OPCODE_STORE);
    }

    fn branch(&mut self, funct3: u32, rs1: Reg, rs2: Reg, target: &'static str) {
        self.fixups.push(Fixup {
            index: self.words.len(),
            label: target,
            form: Form::Branch,
        });
        self.emit(r(ZERO, rs1, rs2) | funct3 << 12 | OPCODE_BRANCH);
    }

    pub fn add(&mut self, rd: Reg, rs1: Reg, rs2: Reg) {
        self.op(0, 0b000, rd, rs1, rs2);
    }
    pub fn xor(&mut self, rd: Reg, rs1: Reg, rs2: Reg) {
        self.op(0, 0b100, rd, rs1, rs2);
    }
    pub fn mul(&mut self, rd: Reg, rs1: Reg, rs2: Reg) {
        self.op(FUNCT7_MULDIV, 0b000, rd, rs1, rs2);
    }

    pub fn addi(&mut self, rd: Reg, rs1: Reg, imm: i32) {
        self.op_imm(0b000, rd, rs1, imm);
    }
    pub fn slli(&mut self, rd: Reg, rs1: Reg, shamt: u32) {
        self.shift_imm(0, 0b001, rd, rs1, shamt);
    }
    pub fn srli(&mut self, rd: Reg, rs1: Reg, shamt: u32) {
        self.shift_imm(0, 0b101, rd, rs1, shamt);
    }

    /// `rd = imm20 << 12`.
    pub fn lui(&mut self, rd: Reg, imm20: u32) {
        if imm20 >> 20 != 0 {
            self.fail(AsmError::OutOfRange {
                what: "lui",
                value: imm20.into(),
                at: self.here(),
            });
        }
        self.emit((imm20 & 0xf_ffff) << 12 | u32::from(rd.0) << 7 | OPCODE_LUI);
    }

    pub fn lw(&mut self, rd: Reg, offset: i32, base: Reg) {
        self.load(0b010, rd, offset, base);
    }
    pub fn lbu(&mut self, rd: Reg, offset: i32, base: Reg) {
        self.load(0b100, rd, offset, base);
    }
    pub fn lhu(&mut self, rd: Reg, offset: i32, base: Reg) {
        self.load(0b101, rd, offset, base);
    }
    pub fn sb(&mut self, src: Reg, offset: i32, base: Reg) {
        self.store(0b000, src, offset, base);
    }
    pub fn sh(&mut self, src: Reg, offset: i32, base: Reg) {
        self.store(0b001, src, offset, base);
    }
    pub fn sw(&mut self, src: Reg, offset: i32, base: Reg) {
        self.store(0b010, src, offset, base);
    }

    pub fn beq(&mut self, rs1: Reg, rs2: Reg, target: &'static str) {
        self.branch(0b000, rs1, rs2, target);
    }
    pub fn blt(&mut self, rs1: Reg, rs2: Reg, target: &'static str) {
        self.branch(0b100, rs1, rs2, target);
    }
    pub fn bge(&mut self, rs1: Reg, rs2: Reg, target: &'static str) {
        self.branch(0b101, rs1, rs2, target);
    }
    pub fn bltu(&mut self, rs1: Reg, rs2: Reg, target: &'static str) {
        self.branch(0b110, rs1, rs2, target);
    }
    pub fn bgeu(&mut self, rs1: Reg, rs2: Reg, target: &'static str) {
        self.branch(0b111, rs1, rs2, target);
    }

    /// Jumps to `target`, leaving the return address in `rd`.
    pub fn jal(&mut self, rd: Reg, target: &'static str) {
        self.fixups.push(Fixup {
            index: self.words.len(),
            label: target,
            form: Form::Jal,
        });
        self.emit(u32::from(rd.0) << 7 | OPCODE_JAL);
    }

    /// Jumps to `base + offset`, leaving the return address in `rd`.
    pub fn jalr(&mut self, rd: Reg, base: Reg, offset: i32) {
        let imm = self.imm("jalr offset", offset, 12);
        self.emit(imm << 20 | r(rd, base, ZERO) | OPCODE_JALR);
    }

    /// `rd = value`, in one instruction when it fits 12 signed bits, else two.
    pub fn li(&mut self, rd: Reg, value: u32) {
        let low = ((value & 0xfff) as i32) << 20 >> 20;
        if fits_signed(value as i32 as i64, 12) {
            self.addi(rd, ZERO, low);
            return;
        }
        // `addi` sign-extends its 12 bits: round the upper part to make up for it.
        let upper = value.wrapping_sub(low as u32) >> 12;
        self.lui(rd, upper);
        if low != 0 {
            self.addi(rd, rd, low);
        }
    }

    pub fn mv(&mut self, rd: Reg, rs: Reg) {
        self.addi(rd, rs, 0);
    }
    pub fn j(&mut self, target: &'static str) {
        self.jal(ZERO, target);
    }
    pub fn call(&mut self, target: &'static str) {
        self.jal(RA, target);
    }
    pub fn ret(&mut self) {
        self.jalr(ZERO, RA, 0);
    }

    /// The program's bytes (little-endian words), labels resolved.
    pub fn finish(mut self) -> Result<Vec<u8>, AsmError> {
        for fixup in std::mem::take(&mut self.fixups) {
            let Some(&target) = self.labels.get(fixup.label) else {
                self.fail(AsmError::UndefinedLabel(fixup.label));
                continue;
            };
            let at = self.origin + 4 * fixup.index as u32;
            let offset = i64::from(target) - i64::from(at);
            let bits = match fixup.form {
                Form::Branch => 13,
                Form::Jal => 21,
            };
            if !fits_signed(offset, bits) {
                self.fail(AsmError::OutOfRange {
                    what: "branch target",
                    value: offset,
                    at,
                });
                continue;
            }
            let o = offset as u32;
            self.words[fixup.index] |= match fixup.form {
                Form::Branch => {
                    (o >> 12 & 1) << 31
                        | (o >> 5 & 0x3f) << 25
                        | (o >> 1 & 0xf) << 8
                        | (o >> 11 & 1) << 7
                }
                Form::Jal => {
                    (o >> 20 & 1) << 31
                        | (o >> 1 & 0x3ff) << 21
                        | (o >> 11 & 1) << 20
                        | (o >> 12 & 0xff) << 12
                }
            };
        }
        match self.error {
            Some(error) => Err(error),
            None => Ok(self.words.iter().flat_map(|w| w.to_le_bytes()).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registers::*;
    use rrs_lib::instruction_string_outputter::InstructionStringOutputter;

    /// Each word of `asm`'s program as rrs-lib's disassembler reads it: an
    /// encoder check that does not share its idea of the encoding.
    fn disassembled(asm: Assembler) -> Vec<String> {
        let origin = asm.origin;
        let bytes = asm.finish().unwrap();
        bytes
            .chunks(4)
            .enumerate()
            .map(|(i, word)| {
                let mut outputter = InstructionStringOutputter {
                    insn_pc: origin + 4 * i as u32,
                };
                let word = u32::from_le_bytes(word.try_into().unwrap());
                rrs_lib::process_instruction(&mut outputter, word)
                    .unwrap_or_else(|| format!("undecodable {word:#010x}"))
            })
            .collect()
    }

    #[test]
    fn every_instruction_decodes_as_written() {
        let mut a = Assembler::new(0x100);
        a.label("top");
        a.add(A0, A1, A2);
        a.xor(S0, S1, A0);
        a.mul(A0, A1, A2);
        a.addi(SP, SP, -16);
        a.addi(A0, A0, 2047);
        a.addi(A0, A0, -2048);
        a.slli(T0, T0, 31);
        a.srli(T0, T0, 16);
        a.lui(T1, 0xfffff);
        a.lw(RA, 12, SP);
        a.lbu(A0, 0, T0);
        a.lhu(A0, -2, T1);
        a.sb(A0, -5, SP);
        a.sh(A0, 6, T0);
        a.sw(RA, 2047, SP);
        a.beq(A0, ZERO, "top");
        a.blt(A0, A1, "top");
        a.bge(A0, A1, "end");
        a.bltu(A0, A1, "top");
        a.bgeu(A0, A1, "end");
        a.jal(RA, "top");
        a.jalr(ZERO, RA, 0);
        a.label("end");
        assert_eq!(
            disassembled(a),
            [
                "add x10, x11, x12",
                "xor x8, x9, x10",
                "mul x10, x11, x12",
                "addi x2, x2, -16",
                "addi x10, x10, 2047",
                "addi x10, x10, -2048",
                "slli x5, x5, 31",
                "srli x5, x5, 16",
                "lui x6, 0xfffff000",
                "lw x1, 12(x2)",
                "lbu x10, 0(x5)",
                "lhu x10, -2(x6)",
                "sb x10, -5(x2)",
                "sh x10, 6(x5)",
                "sw x1, 2047(x2)",
                "beq x10, x0, 0x00000100",
                "blt x10, x11, 0x00000100",
                "bge x10, x11, 0x00000158",
                "bltu x10, x11, 0x00000100",
                "bgeu x10, x11, 0x00000158",
                "jal x1, 0x00000100",
                "jalr x0, 0x000(x1)",
            ]
        );
    }

    #[test]
    fn li_loads_any_value() {
        for value in [
            0,
            1,
            2047,
            2048,
            0x800,
            0xfff,
            0x1000,
            0x7fff_f800,
            0x8000_0000,
            0xdead_beef,
            u32::MAX,
            0x1234_5800,
        ] {
            let mut a = Assembler::new(0);
            a.li(A0, value);
            let mut lines = disassembled(a).into_iter();
            let first = lines.next().unwrap();
            let got = if let Some(rest) = first.strip_prefix("lui x10, ") {
                let upper = u32::from_str_radix(rest.trim_start_matches("0x"), 16).unwrap();
                let low = lines.next().map_or(0, |l| {
                    l.strip_prefix("addi x10, x10, ")
                        .unwrap()
                        .parse::<i32>()
                        .unwrap()
                });
                upper.wrapping_add(low as u32)
            } else {
                first
                    .strip_prefix("addi x10, x0, ")
                    .unwrap()
                    .parse::<i32>()
                    .unwrap() as u32
            };
            assert_eq!(got, value, "{value:#x}");
            assert!(lines.next().is_none());
        }
    }

    #[test]
    fn errors_name_what_does_not_assemble() {
        let mut a = Assembler::new(0);
        a.j("nowhere");
        assert_eq!(a.finish(), Err(AsmError::UndefinedLabel("nowhere")));

        let mut a = Assembler::new(0);
        a.label("x");
        a.label("x");
        assert_eq!(a.finish(), Err(AsmError::DuplicateLabel("x")));

        let mut a = Assembler::new(0);
        a.addi(A0, A0, 2048);
        assert_eq!(
            a.finish(),
            Err(AsmError::OutOfRange {
                what: "I-type",
                value: 2048,
                at: 0
            })
        );

        let mut a = Assembler::new(0);
        a.beq(A0, A0, "far");
        for _ in 0..1024 {
            a.addi(A0, A0, 1);
        }
        a.label("far");
        assert_eq!(
            a.finish(),
            Err(AsmError::OutOfRange {
                what: "branch target",
                value: 4100,
                at: 0
            })
        );
    }
}
