//! The step loop: runs one instruction at a time and fires the probes for
//! what it did.
//!
//! Events per instruction: `insn_fetch` and `insn_exec` (pc, opcode),
//! `reg_read` for each register the instruction reads and `reg_write` for each
//! one it changed (numbers in [`crate::registers`]), `mem_read`/`mem_write`
//! from the bus, and on a control transfer `branch` (only when taken) and
//! `block` (the straight-line run that just ended: its start pc and size in
//! bytes). A timer raises an IRQ every [`TIMER_PERIOD`] instructions:
//! `interrupt` entry when the CPU takes it, exit at its `RTI`. Each program
//! run is a span and so is each frame of [`FRAME`] instructions; `control`
//! reports reset (code 1: a = start address), halt (code 2: a = exit
//! code, b = instructions run) and a tracer seen by [`tracer_attached`]
//! (code 3); `marker` says what ran and what it gave.

use crate::bus::DemoBus;
use crate::programs::Program;
use crate::registers::{reads, snapshot};
use anyhow::{bail, Result};
use mos6502::cpu::CPU;
use mos6502::instruction::{Instruction as I, Nmos6502};
use mos6502::Variant;
use styx_probe::{Branch, BranchKind, InterruptKind};

pub const TIMER_PERIOD: u64 = 500;
pub const FRAME: u64 = 1024;
/// The 6502's IRQ line, as reported in `interrupt` events.
pub const IRQ_NUMBER: u8 = 0;
pub const CONTROL_RESET: u8 = 1;
pub const CONTROL_HALT: u8 = 2;
pub const CONTROL_TRACER_SEEN: u8 = 3;
/// A program that has not halted after this many instructions is broken.
const STEP_LIMIT: u64 = 50_000_000;

pub struct Machine {
    pub cpu: CPU<DemoBus, Nmos6502>,
    /// Instructions executed since power-on.
    pub instructions: u64,
    block_start: u16,
}

pub struct RunResult {
    pub exit_code: u8,
    pub output: Vec<u8>,
    pub instructions: u64,
}

impl Machine {
    pub fn new() -> Machine {
        Machine {
            cpu: CPU::new(DemoBus::new(), Nmos6502),
            instructions: 0,
            block_start: 0,
        }
    }

    /// Loads `program`, resets into it and runs it until it halts.
    pub fn run(&mut self, program: &Program) -> Result<RunResult> {
        let _span = styx_probe::span!("program", program.name);
        styx_probe::marker!(|| format!("{}: start", program.name));
        program.load(&mut self.cpu.memory);
        self.cpu.memory.output.clear();
        self.cpu.memory.halted = None;
        self.cpu.reset();
        let start = self.cpu.registers.program_counter;
        self.block_start = start;
        styx_probe::control!(|| (CONTROL_RESET, start, 0u8));

        let first = self.instructions;
        while self.cpu.memory.halted.is_none() {
            let _frame = styx_probe::span!("cpu", "frame");
            for _ in 0..FRAME {
                self.step();
                if self.cpu.memory.halted.is_some() {
                    break;
                }
            }
            if self.instructions - first > STEP_LIMIT {
                bail!(
                    "{} did not halt within {STEP_LIMIT} instructions",
                    program.name
                );
            }
        }
        let exit_code = self.cpu.memory.halted.unwrap_or(0);
        let instructions = self.instructions - first;
        styx_probe::control!(|| (CONTROL_HALT, exit_code, instructions));
        let output = std::mem::take(&mut self.cpu.memory.output);
        styx_probe::marker!(|| format!(
            "{}: halted with {exit_code} after {instructions} instructions, {} output bytes",
            program.name,
            output.len()
        ));
        Ok(RunResult {
            exit_code,
            output,
            instructions,
        })
    }

    /// Executes one instruction (and the interrupt it may let in).
    fn step(&mut self) {
        let pc = self.cpu.registers.program_counter;
        let opcode = self.cpu.memory.peek(pc);
        self.cpu.memory.pc = pc;
        styx_probe::insn_fetch!(|| (pc, opcode));

        let decoded = Nmos6502::decode(opcode);
        if let Some((instruction, mode)) = decoded {
            let read = reads(instruction, mode);
            let regs = snapshot(&self.cpu.registers);
            for (reg, val) in regs.iter().enumerate() {
                if read & (1 << reg) != 0 {
                    styx_probe::reg_read!(|| (pc, reg as u8, *val));
                }
            }
        }

        self.instructions += 1;
        if self.instructions.is_multiple_of(TIMER_PERIOD) {
            self.cpu.memory.irq_line = true;
        }
        let before = snapshot(&self.cpu.registers);
        self.cpu.memory.irq_taken = false;
        self.cpu.single_step();
        styx_probe::insn_exec!(|| (pc, opcode));
        let after = snapshot(&self.cpu.registers);
        for (reg, (old, new)) in before.iter().zip(&after).enumerate() {
            if old != new {
                styx_probe::reg_write!(|| (pc, reg as u8, *new, *old));
            }
        }

        let next = self.cpu.registers.program_counter;
        if self.cpu.memory.irq_taken {
            // The instruction ran, then the CPU took the IRQ: `next` is the handler.
            let resume = self.return_address();
            self.transfer(pc, resume, next, Branch::from(BranchKind::Interrupt));
            styx_probe::interrupt!(|| (InterruptKind::Entry, IRQ_NUMBER, resume, next));
        } else if let Some((instruction, mode)) = decoded {
            let size = 1 + operand_bytes(mode);
            if let Some(kind) = transfer_kind(instruction) {
                let sequential = pc.wrapping_add(size);
                if next != sequential || !kind.conditional {
                    self.transfer(pc, pc, next, kind);
                    if instruction == I::RTI {
                        styx_probe::interrupt!(|| (InterruptKind::Exit, IRQ_NUMBER, pc, next));
                    }
                }
            }
        }
    }

    /// Ends the current block at the instruction at `last` and reports the branch.
    fn transfer(&mut self, last: u16, from: u16, to: u16, kind: Branch) {
        let start = self.block_start;
        let size = last.wrapping_sub(start) as u64 + 1;
        styx_probe::block!(|| (start, size));
        styx_probe::branch!(|| (from, to, kind));
        self.block_start = to;
    }

    /// Where an interrupt will return to: the pc it pushed on the stack.
    fn return_address(&self) -> u16 {
        let sp = self.cpu.registers.stack_pointer.0;
        let lo = self.cpu.memory.peek(0x0100 + sp.wrapping_add(2) as u16);
        let hi = self.cpu.memory.peek(0x0100 + sp.wrapping_add(3) as u16);
        u16::from_le_bytes([lo, hi])
    }
}

/// Whether a tracer has enabled the `control` probe. The probe's closure
/// runs only then, so this fires one `control` event (code 3) when it does.
pub fn tracer_attached() -> bool {
    let mut attached = false;
    styx_probe::control!(|| {
        attached = true;
        (CONTROL_TRACER_SEEN, 0u8, 0u8)
    });
    attached
}

impl Default for Machine {
    fn default() -> Self {
        Self::new()
    }
}

fn operand_bytes(mode: mos6502::instruction::AddressingMode) -> u16 {
    use mos6502::instruction::AddressingMode as M;
    match mode {
        M::Accumulator | M::Implied => 0,
        M::Absolute | M::AbsoluteX | M::AbsoluteY | M::Indirect | M::BuggyIndirect => 2,
        M::AbsoluteIndexedIndirect => 2,
        _ => 1,
    }
}

/// How an instruction transfers control, if it does.
fn transfer_kind(instruction: I) -> Option<Branch> {
    Some(match instruction {
        I::JMP => Branch::unconditional(BranchKind::Jump),
        I::JSR => Branch::unconditional(BranchKind::Call),
        I::RTS => Branch::unconditional(BranchKind::Ret),
        I::RTI => Branch::unconditional(BranchKind::ReturnFromInterrupt),
        I::BRK | I::BRKcld => Branch::unconditional(BranchKind::Interrupt),
        I::BCC | I::BCS | I::BEQ | I::BMI | I::BNE | I::BPL | I::BVC | I::BVS => {
            Branch::conditional(BranchKind::Jump)
        }
        _ => return None,
    })
}
