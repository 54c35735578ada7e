//! The step loop: rrs-lib executes one instruction at a time, and around
//! each the loop fires `insn_exec`, a `reg_write` for every register the
//! instruction changed (from a snapshot taken only while `reg_write` is
//! traced), and `branch` when control did not fall through: the
//! instrumentation a new user writes after reading styx's README, with
//! nothing compiled twice and no per-frame check.
//!
//! `Machine<true>` also keeps the emulator's own [`Counts`] of those events,
//! for tests to compare with what a tracer received; `Machine<false>`, the
//! build measured, has that counting compiled out.

use crate::asm::{OPCODE_BRANCH, OPCODE_JAL, OPCODE_JALR};
use crate::bus::Bus;
use crate::counts::Counts;
use crate::guest::{self, Answers, ENTRY, RESULT_CHECKSUM, RESULT_PRIMES};
use crate::registers::{RA, ZERO};
use rrs_lib::instruction_executor::InstructionExecutor;
use rrs_lib::HartState;
use styx_probe::{Branch, BranchKind, EventKind};

/// A run that has not halted after this many instructions is stuck.
pub const MAX_INSTRUCTIONS: u64 = 100_000_000;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("the guest raised {exception} at pc {pc:#010x}")]
    Exception { pc: u32, exception: String },
    #[error("the guest did not halt within {MAX_INSTRUCTIONS} instructions")]
    Stuck,
    #[error("the guest halted with exit code {0}")]
    ExitCode(u32),
    #[error("the guest computed {got:?}, not {expected:?}")]
    WrongAnswers { got: Answers, expected: Answers },
}

/// What one run did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunResult {
    pub answers: Answers,
    /// With `COUNT`, everything; without, only `instructions`.
    pub counts: Counts,
}

/// An RV32IM hart and its bus, with the guest program.
pub struct Machine<const COUNT: bool> {
    hart: HartState,
    bus: Bus<COUNT>,
    image: Vec<u8>,
    expected: Answers,
}

/// How a taken control transfer reads, from its instruction word.
fn branch_kind(insn: u32) -> Branch {
    let opcode = insn & 0x7f;
    let rd = (insn >> 7 & 0x1f) as u8;
    let rs1 = (insn >> 15 & 0x1f) as u8;
    match opcode {
        OPCODE_BRANCH => Branch::conditional(BranchKind::Jump),
        OPCODE_JAL | OPCODE_JALR if rd == RA.0 => BranchKind::Call.into(),
        OPCODE_JALR if rd == ZERO.0 && rs1 == RA.0 => BranchKind::Ret.into(),
        _ => BranchKind::Jump.into(),
    }
}

impl<const COUNT: bool> Machine<COUNT> {
    /// A machine with the guest program assembled.
    pub fn new() -> Result<Self, crate::asm::AsmError> {
        Ok(Machine {
            hart: HartState::new(),
            bus: Bus::new(),
            image: guest::image()?,
            expected: Answers::expected(),
        })
    }

    pub fn bus(&self) -> &Bus<COUNT> {
        &self.bus
    }

    /// Runs the guest program from a fresh start (RAM and registers cleared)
    /// until it halts, and checks its answers.
    pub fn run(&mut self) -> Result<RunResult, RunError> {
        self.bus.load(ENTRY, &self.image);
        self.bus.counts = Counts::default();
        self.hart = HartState::new();
        self.hart.pc = ENTRY;
        let mut instructions = 0u64;
        let mut reg_writes = 0u64;
        let mut branches = 0u64;
        let mut cpu = InstructionExecutor {
            mem: &mut self.bus,
            hart_state: &mut self.hart,
        };
        while cpu.mem.halted().is_none() {
            if instructions == MAX_INSTRUCTIONS {
                return Err(RunError::Stuck);
            }
            let pc = cpu.hart_state.pc;
            cpu.mem.pc = pc;
            // The snapshot, a 128-byte copy, only while reg_write is traced.
            let before = if COUNT || styx_probe::enabled(EventKind::RegWrite) {
                Some(cpu.hart_state.registers)
            } else {
                None
            };
            cpu.step().map_err(|e| RunError::Exception {
                pc,
                exception: format!("{e:?}"),
            })?;
            instructions += 1;
            let (hart, bus) = (&*cpu.hart_state, &*cpu.mem);
            // RV32IM without the C extension: every instruction is 4 bytes.
            styx_probe::insn_exec!(|| (pc, bus.peek_word(pc), 4u8));
            if let Some(before) = before {
                for (reg, (&old, &new)) in before.iter().zip(&hart.registers).enumerate() {
                    if old != new {
                        styx_probe::reg_write!(|| (pc, reg as u8, new, old));
                        if COUNT {
                            reg_writes += 1;
                        }
                    }
                }
            }
            // Written as most emulators would (and as styx-probe at the
            // bench's --probe-baseline can build): the comparison runs
            // detached too. `branch!(|| (next != end).then(|| …))` would
            // skip it, 1.5% fewer instructions detached (README).
            let next = hart.pc;
            if next != pc.wrapping_add(4) {
                styx_probe::branch!(|| (pc, next, branch_kind(bus.peek_word(pc))));
                if COUNT {
                    branches += 1;
                }
            }
        }
        let exit = cpu.mem.halted().unwrap_or_default();
        if exit != 0 {
            return Err(RunError::ExitCode(exit));
        }
        let answers = Answers {
            primes: self.bus.peek_word(RESULT_PRIMES),
            checksum: self.bus.peek_word(RESULT_CHECKSUM),
        };
        if answers != self.expected {
            return Err(RunError::WrongAnswers {
                got: answers,
                expected: self.expected,
            });
        }
        Ok(RunResult {
            answers,
            counts: Counts {
                instructions,
                reg_writes,
                branches,
                ..self.bus.counts
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::Assembler;
    use crate::registers::*;

    fn kind_of(build: impl FnOnce(&mut Assembler)) -> Branch {
        let mut a = Assembler::new(0);
        a.label("here");
        build(&mut a);
        let bytes = a.finish().unwrap();
        branch_kind(u32::from_le_bytes(bytes[..4].try_into().unwrap()))
    }

    #[test]
    fn branch_kinds_follow_the_calling_convention() {
        let jump = Branch::unconditional(BranchKind::Jump);
        assert_eq!(kind_of(|a| a.call("here")), BranchKind::Call.into());
        assert_eq!(kind_of(|a| a.jalr(RA, T0, 0)), BranchKind::Call.into());
        assert_eq!(kind_of(|a| a.ret()), BranchKind::Ret.into());
        assert_eq!(kind_of(|a| a.j("here")), jump);
        assert_eq!(kind_of(|a| a.jalr(ZERO, T0, 0)), jump);
        assert_eq!(
            kind_of(|a| a.blt(A0, A1, "here")),
            Branch::conditional(BranchKind::Jump)
        );
    }
}
