//! The instrumented step: runs one instruction on `mos6502` and fires the
//! probes for what it did.
//!
//! Per instruction, in order:
//! - `insn_fetch` (pc, opcode), then `reg_read` (pc, register, value) for each
//!   register it reads (numbers in [`crate::registers`], coverage in
//!   [`crate::opcodes`]);
//! - `mem_read` / `mem_write` (pc, address, value) for each bus access, from
//!   [`crate::bus`], the opcode and operand fetches included;
//! - `insn_exec` (pc, opcode), then `reg_write` (pc, register, new, old) for
//!   each register whose value changed;
//! - on a control transfer: `block` for the basic block it ended, then
//!   `branch` (pc, target, kind): `JMP` jump, `JSR` call, `RTS` ret, `RTI`
//!   return_from_interrupt, `BRK` interrupt, `Bxx` conditional jump, only
//!   when taken;
//! - `interrupt` entry (number, the pc it will return to, the handler) when
//!   `BRK` runs or the timer IRQ is taken, and exit (number, the `RTI`'s pc,
//!   where it returns to) at `RTI`.
//!
//! A taken IRQ is a transfer of its own after the instruction it followed:
//! `block`, then `branch` (kind interrupt) from the pc it saved to the
//! handler, then `interrupt` entry. Its stack pushes are attributed to that
//! instruction's pc, and so are its register changes (SP, P).
//!
//! **Blocks** are reported on completion, as `(start, size)`: the run of
//! instructions from `start`, entered by a control transfer (or reset), up to
//! and including the instruction that transferred control away (or the one an
//! interrupt followed); `size` is its length in bytes, operands included. A
//! conditional branch not taken does not end a block. Empty blocks (an IRQ
//! taken right at a branch target) are not reported, and a run's last block
//! is reported when it halts.

use crate::bus::DemoBus;
use crate::events::fire;
use crate::opcodes::{Flow, OpInfo, OpTable};
use crate::registers::Snapshot;
use mos6502::cpu::CPU;
use mos6502::instruction::Nmos6502;
use mos6502::memory::RESET_VECTOR_LO;
use mos6502::registers::Registers;
use styx_probe::{Branch, BranchKind, InterruptKind};

/// The `interrupt` number of the timer IRQ (vector `$FFFE`).
pub const IRQ_NUMBER: u8 = 0;
/// The `interrupt` number of `BRK` (the same vector, a software interrupt).
pub const BRK_NUMBER: u8 = 1;

/// The CPU executed a `JAM` opcode: it is locked up until reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jammed {
    /// Where the `JAM` is.
    pub pc: u16,
    /// Which of the `JAM` opcodes it is.
    pub opcode: u8,
}

impl std::fmt::Display for Jammed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JAM opcode {:#04x} at {:#06x}", self.opcode, self.pc)
    }
}

impl std::error::Error for Jammed {}

/// A 6502 on [`DemoBus`] that fires styx probes as it steps.
pub struct Cpu {
    cpu: CPU<DemoBus, Nmos6502>,
    ops: OpTable,
    /// Where the current basic block began.
    block_start: u16,
    isr: IsrStack,
    instructions: u64,
    irqs: u64,
}

impl Cpu {
    /// A CPU with zeroed RAM and registers; [`reset`](Self::reset) starts it.
    pub fn new() -> Cpu {
        Cpu {
            cpu: CPU::new(DemoBus::new(), Nmos6502),
            ops: OpTable::nmos(),
            block_start: 0,
            isr: IsrStack::default(),
            instructions: 0,
            irqs: 0,
        }
    }

    /// Power-on registers, then the 6502 reset sequence (the vector reads
    /// report pc `$FFFC`). Returns the pc it starts at.
    pub fn reset(&mut self) -> u16 {
        self.cpu.registers = Registers::new();
        self.cpu.memory.pc = RESET_VECTOR_LO;
        self.cpu.reset();
        self.isr = IsrStack::default();
        self.block_start = self.pc();
        self.block_start
    }

    /// Executes one instruction, and the IRQ it may let in, firing its events.
    #[inline(always)]
    pub fn step(&mut self) -> Result<(), Jammed> {
        let pc = self.cpu.registers.program_counter;
        let opcode = self.cpu.memory.peek(pc);
        let op = self.ops.get(opcode);
        if op.flow == Flow::Jam {
            return Err(Jammed { pc, opcode });
        }
        self.cpu.memory.pc = pc;
        fire!(insn_fetch, pc, opcode);
        let before = Snapshot::of(&self.cpu.registers);
        for reg in op.reads {
            fire!(reg_read, pc, reg, before.get(reg));
        }

        self.cpu.memory.tick();
        self.cpu.memory.irq_taken = false;
        self.cpu.single_step();
        self.instructions += 1;

        fire!(insn_exec, pc, opcode);
        let after = Snapshot::of(&self.cpu.registers);
        for reg in before.changed(after) {
            fire!(reg_write, pc, reg, after.get(reg), before.get(reg));
        }
        if op.flow != Flow::Next || self.cpu.memory.irq_taken {
            self.control_flow(pc, op);
        }
        Ok(())
    }

    /// Reports the transfers after the instruction at `pc`: its own, if it
    /// made one, then a taken IRQ's.
    fn control_flow(&mut self, pc: u16, op: OpInfo) {
        let next = self.cpu.registers.program_counter;
        let irq = self.cpu.memory.irq_taken;
        // Where the instruction itself sent control; `next` is the handler if an IRQ came after it.
        let target = if irq { self.saved_pc() } else { next };
        let end = pc.wrapping_add(u16::from(op.len));
        if let Some(kind) = op.flow.branch() {
            let taken = op.flow != Flow::Conditional || target != end;
            if taken {
                self.end_block(end, target);
                fire!(branch, pc, target, kind);
                match op.flow {
                    Flow::Break => self.enter_interrupt(BRK_NUMBER, end, target),
                    Flow::ReturnFromInterrupt => {
                        let num = self.isr.pop();
                        fire!(interrupt, InterruptKind::Exit, num, pc, target);
                    }
                    _ => {}
                }
            }
        }
        if irq {
            self.irqs += 1;
            self.end_block(target, next);
            fire!(
                branch,
                target,
                next,
                Branch::unconditional(BranchKind::Interrupt)
            );
            self.enter_interrupt(IRQ_NUMBER, target, next);
        }
    }

    fn enter_interrupt(&mut self, num: u8, resume: u16, handler: u16) {
        self.isr.push(num);
        fire!(interrupt, InterruptKind::Entry, num, resume, handler);
    }

    /// Reports the current block as ending at `end` (exclusive); the next
    /// one starts at `next_start`.
    fn end_block(&mut self, end: u16, next_start: u16) {
        let start = self.block_start;
        let size = end.wrapping_sub(start);
        if size != 0 {
            fire!(block, start, size);
        }
        self.block_start = next_start;
    }

    /// Reports the block in progress: at a halt, which ends a run without a transfer.
    pub fn finish_block(&mut self) {
        let pc = self.pc();
        self.end_block(pc, pc);
    }

    /// The return address an interrupt just pushed (above the pushed P).
    fn saved_pc(&self) -> u16 {
        let sp = self.cpu.registers.stack_pointer.0;
        let at = |offset: u8| {
            self.cpu
                .memory
                .peek(0x0100 | u16::from(sp.wrapping_add(offset)))
        };
        u16::from_le_bytes([at(2), at(3)])
    }

    /// The program counter: the next instruction to run.
    pub fn pc(&self) -> u16 {
        self.cpu.registers.program_counter
    }

    /// The CPU's registers.
    pub fn registers(&self) -> &Registers {
        &self.cpu.registers
    }

    /// The memory and devices.
    pub fn bus(&self) -> &DemoBus {
        &self.cpu.memory
    }

    /// The memory and devices, to load programs and take their output.
    pub fn bus_mut(&mut self) -> &mut DemoBus {
        &mut self.cpu.memory
    }

    /// Instructions executed since [`new`](Self::new).
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// Timer IRQs taken since [`new`](Self::new).
    pub fn irqs(&self) -> u64 {
        self.irqs
    }
}

impl Default for Cpu {
    fn default() -> Self {
        Self::new()
    }
}

/// The numbers of the interrupts being serviced, innermost last, so each
/// `RTI`'s exit event names the interrupt it returns from.
#[derive(Default)]
struct IsrStack {
    nums: [u8; IsrStack::DEPTH],
    depth: usize,
}

impl IsrStack {
    /// Deeper nesting is remembered only as depth: its exits report the IRQ.
    const DEPTH: usize = 8;

    fn push(&mut self, num: u8) {
        if let Some(slot) = self.nums.get_mut(self.depth) {
            *slot = num;
        }
        self.depth += 1;
    }

    /// The innermost interrupt's number; the IRQ's for an `RTI` without one
    /// (a program may use `RTI` as a jump).
    fn pop(&mut self) -> u8 {
        if self.depth == 0 {
            return IRQ_NUMBER;
        }
        self.depth -= 1;
        self.nums.get(self.depth).copied().unwrap_or(IRQ_NUMBER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::recorder::{capture, Event};
    use crate::programs::{Program, IRQ_HANDLER, SIEVE, SORT};
    use crate::registers::{REG_A, REG_X};
    use crate::Machine;

    #[rustfmt::skip]
    const LOOP_AND_CALL: Program = Program {
        name: "loop-and-call",
        origin: 0x0600,
        code: &[
            0xA2, 0x02,       // 0600       LDX #2
            0xCA,             // 0602 loop: DEX
            0xD0, 0xFD,       // 0603       BNE loop
            0x20, 0x0B, 0x06, // 0605       JSR sub
            0x8D, 0x00, 0xF0, // 0608       STA $F000
            0x60,             // 060B sub:  RTS
        ],
        data: Vec::new,
    };

    #[rustfmt::skip]
    const BREAK: Program = Program {
        name: "break",
        origin: 0x0600,
        code: &[
            0x00, 0xEA,       // 0600       BRK (signature byte)
            0x8D, 0x00, 0xF0, // 0602       STA $F000
        ],
        data: Vec::new,
    };

    fn run(program: &Program) -> Vec<Event> {
        capture(|| {
            Machine::new().run(program).unwrap();
        })
    }

    fn only(events: &[Event], probes: &[&str]) -> Vec<(&'static str, Vec<u64>)> {
        events
            .iter()
            .filter(|(probe, _)| probes.contains(probe))
            .cloned()
            .collect()
    }

    fn ev(probe: &'static str, args: &[u64]) -> Event {
        (probe, args.to_vec())
    }

    const CONDITIONAL_JUMP: u64 = Branch::conditional(BranchKind::Jump).encode();

    #[test]
    fn blocks_end_at_taken_transfers_and_count_bytes() {
        let events = run(&LOOP_AND_CALL);
        assert_eq!(
            only(&events, &["block", "branch"]),
            [
                ev("block", &[0x0600, 5]),
                ev("branch", &[0x0603, 0x0602, CONDITIONAL_JUMP]),
                // The second BNE falls through: the block runs on to the JSR.
                ev("block", &[0x0602, 6]),
                ev("branch", &[0x0605, 0x060b, BranchKind::Call as u64]),
                ev("block", &[0x060b, 1]),
                ev("branch", &[0x060b, 0x0608, BranchKind::Ret as u64]),
                // The halting store ends the run's last block.
                ev("block", &[0x0608, 3]),
            ]
        );
    }

    #[test]
    fn an_instruction_fires_fetch_reads_accesses_exec_and_writes_in_order() {
        let events = run(&LOOP_AND_CALL);
        let first_dex = events
            .iter()
            .position(|e| *e == ev("insn_fetch", &[0x0602, 0xca]))
            .unwrap();
        assert_eq!(
            events[first_dex..first_dex + 5],
            [
                ev("insn_fetch", &[0x0602, 0xca]),
                ev("reg_read", &[0x0602, REG_X.into(), 2]),
                ev("mem_read", &[0x0602, 0x0602, 0xca]),
                ev("insn_exec", &[0x0602, 0xca]),
                ev("reg_write", &[0x0602, REG_X.into(), 1, 2]),
            ]
        );
        let halt = only(&events, &["reg_read", "mem_write"]);
        assert_eq!(
            halt[halt.len() - 2..],
            [
                ev("reg_read", &[0x0608, REG_A.into(), 0]),
                ev("mem_write", &[0x0608, 0xf000, 0]),
            ]
        );
    }

    #[test]
    fn brk_enters_the_handler_and_rti_returns_past_its_signature_byte() {
        let events = run(&BREAK);
        let handler = u64::from(IRQ_HANDLER);
        let brk = u64::from(BRK_NUMBER);
        let (entry, exit) = (InterruptKind::Entry as u64, InterruptKind::Exit as u64);
        assert_eq!(
            only(&events, &["block", "branch", "interrupt"]),
            [
                ev("block", &[0x0600, 2]),
                ev("branch", &[0x0600, handler, BranchKind::Interrupt as u64]),
                ev("interrupt", &[entry, brk, 0x0602, handler]),
                ev("block", &[handler, 8]),
                ev(
                    "branch",
                    &[handler + 7, 0x0602, BranchKind::ReturnFromInterrupt as u64]
                ),
                ev("interrupt", &[exit, brk, handler + 7, 0x0602]),
                ev("block", &[0x0602, 3]),
            ]
        );
    }

    /// Over whole programs with timer IRQs: blocks tile the executed code
    /// between transfers, and every IRQ entry is matched by its exit.
    #[test]
    fn blocks_and_interrupts_stay_consistent_over_real_programs() {
        let ops = OpTable::nmos();
        for program in [&SIEVE, &SORT] {
            let mut machine = Machine::new();
            let mut irqs = 0;
            let events = capture(|| irqs = machine.run(program).unwrap().irqs);
            let mut block_start = u64::from(program.origin);
            let mut block_end = None;
            let mut open = Vec::new();
            for (probe, args) in &events {
                match *probe {
                    "block" => {
                        assert_eq!(args[0], block_start, "{}: block start", program.name);
                        block_end = Some(args[0] + args[1]);
                    }
                    "branch" => {
                        let pc = args[0] as u16;
                        let is_irq = Branch::decode(args[2]).unwrap().kind == BranchKind::Interrupt
                            && machine.bus().peek(pc) != 0x00;
                        // An IRQ leaves from the pc it saved: its block ends there.
                        let end = if is_irq {
                            pc
                        } else {
                            pc + u16::from(ops.get(machine.bus().peek(pc)).len)
                        };
                        if let Some(block_end) = block_end.take() {
                            assert_eq!(block_end, u64::from(end), "{}: block end", program.name);
                        }
                        block_start = args[1];
                    }
                    "interrupt" if args[0] == InterruptKind::Entry as u64 => {
                        assert_eq!((args[1], args[3]), (IRQ_NUMBER.into(), IRQ_HANDLER.into()));
                        open.push(args[2]);
                    }
                    "interrupt" => {
                        assert_eq!(Some(args[3]), open.pop(), "{}: RTI target", program.name);
                    }
                    _ => {}
                }
            }
            let entries = only(&events, &["interrupt"]).len() / 2;
            assert!(
                irqs > 10 && entries as u64 == irqs,
                "{}: {irqs} IRQs",
                program.name
            );
            assert!(open.is_empty());
        }
    }
}
