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
//!
//! **Gating**: the CPU checks for tracers once per frame
//! ([`Cpu::run_frame`]) and runs the frame on one of two `mos6502` CPUs
//! sharing one machine state: the probed one while a tracer is attached, a
//! plain one (the same code as with probes compiled out) otherwise. A trace
//! that begins mid-run starts its first block at the first traced
//! instruction, with no interrupt known to be in service.

use crate::bus::{DemoBus, Probed};
use crate::events::{fire, tracing};
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

/// A `mos6502` CPU on the bus, probed or not.
type Core<const TRACED: bool> = CPU<Probed<TRACED>, Nmos6502>;

/// A 6502 on [`DemoBus`] that fires styx probes as it steps while a tracer
/// is attached.
pub struct Cpu {
    /// Runs while no tracer is attached.
    plain: Core<false>,
    /// Runs while one is. The machine state (registers, bus) lives in
    /// whichever runs; the other holds an unused bus.
    probed: Core<true>,
    traced: bool,
    stepper: Stepper,
}

/// How a frame ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame {
    /// It ran all its instructions.
    Full,
    /// The program wrote the halt port.
    Halted,
}

impl Cpu {
    /// A CPU with zeroed RAM and registers; [`reset`](Self::reset) starts it.
    pub fn new() -> Cpu {
        Cpu {
            plain: CPU::new(Probed(DemoBus::new()), Nmos6502),
            probed: CPU::new(Probed(DemoBus::new()), Nmos6502),
            traced: false,
            stepper: Stepper {
                ops: OpTable::nmos(),
                block_start: 0,
                isr: IsrStack::default(),
                instructions: 0,
                irqs: 0,
            },
        }
    }

    /// Power-on registers, then the 6502 reset sequence (the vector reads
    /// report pc `$FFFC`). Returns the pc it starts at.
    pub fn reset(&mut self) -> u16 {
        self.set_traced(tracing());
        if self.traced {
            reset(&mut self.probed);
        } else {
            reset(&mut self.plain);
        }
        self.stepper.isr = IsrStack::default();
        self.stepper.block_start = self.pc();
        self.stepper.block_start
    }

    /// Runs up to `len` instructions, stopping early at a halt, probed if a
    /// tracer is attached now.
    pub fn run_frame(&mut self, len: u64) -> Result<Frame, Jammed> {
        self.set_traced(tracing());
        if self.traced {
            self.stepper.frame(&mut self.probed, len)
        } else {
            self.stepper.frame(&mut self.plain, len)
        }
    }

    /// Moves the machine state to the probed CPU or back.
    fn set_traced(&mut self, traced: bool) {
        if traced == self.traced {
            return;
        }
        // `mos6502` keeps a wait state and an NMI edge privately: an NMOS
        // 6502 without an NMI source never changes either, so they match.
        std::mem::swap(&mut self.plain.memory.0, &mut self.probed.memory.0);
        if traced {
            self.probed.registers = self.plain.registers;
            self.probed.cycles = self.plain.cycles;
            self.stepper.block_start = self.probed.registers.program_counter;
            self.stepper.isr = IsrStack::default();
        } else {
            self.plain.registers = self.probed.registers;
            self.plain.cycles = self.probed.cycles;
        }
        self.traced = traced;
    }

    /// The program counter: the next instruction to run.
    pub fn pc(&self) -> u16 {
        self.registers().program_counter
    }

    /// The CPU's registers.
    pub fn registers(&self) -> &Registers {
        if self.traced {
            &self.probed.registers
        } else {
            &self.plain.registers
        }
    }

    /// The memory and devices.
    pub fn bus(&self) -> &DemoBus {
        if self.traced {
            &self.probed.memory
        } else {
            &self.plain.memory
        }
    }

    /// The memory and devices, to load programs and take their output.
    pub fn bus_mut(&mut self) -> &mut DemoBus {
        if self.traced {
            &mut self.probed.memory
        } else {
            &mut self.plain.memory
        }
    }

    /// Instructions executed since [`new`](Self::new).
    pub fn instructions(&self) -> u64 {
        self.stepper.instructions
    }

    /// Timer IRQs taken since [`new`](Self::new).
    pub fn irqs(&self) -> u64 {
        self.stepper.irqs
    }
}

impl Default for Cpu {
    fn default() -> Self {
        Self::new()
    }
}

/// Power-on registers, then the reset sequence.
fn reset<const TRACED: bool>(cpu: &mut Core<TRACED>) {
    cpu.registers = Registers::new();
    cpu.memory.pc = RESET_VECTOR_LO;
    cpu.reset();
}

/// What the step loop keeps besides the 6502 itself.
struct Stepper {
    ops: OpTable,
    /// Where the current basic block began.
    block_start: u16,
    isr: IsrStack,
    instructions: u64,
    irqs: u64,
}

impl Stepper {
    #[inline(always)]
    fn frame<const TRACED: bool>(
        &mut self,
        cpu: &mut Core<TRACED>,
        len: u64,
    ) -> Result<Frame, Jammed> {
        let _frame = TRACED.then(|| styx_probe::span!("cpu", "frame"));
        for _ in 0..len {
            self.step(cpu)?;
            if cpu.memory.halted().is_some() {
                if TRACED {
                    // Inside the frame: the last block is part of it.
                    let pc = cpu.registers.program_counter;
                    self.end_block(pc, pc);
                }
                return Ok(Frame::Halted);
            }
        }
        Ok(Frame::Full)
    }

    /// Executes one instruction, and the IRQ it may let in; firing its
    /// events if `TRACED`, else doing only what an uninstrumented emulator would.
    #[inline(always)]
    fn step<const TRACED: bool>(&mut self, cpu: &mut Core<TRACED>) -> Result<(), Jammed> {
        let pc = cpu.registers.program_counter;
        let opcode = cpu.memory.peek(pc);
        let op = self.ops.get(opcode);
        if op.flow == Flow::Jam {
            return Err(Jammed { pc, opcode });
        }
        if !TRACED {
            self.execute(cpu);
            if cpu.memory.irq_taken {
                self.irqs += 1;
            }
            return Ok(());
        }
        self.traced_step(cpu, pc, opcode, op);
        Ok(())
    }

    /// [`Stepper::step`] while traced: a function of its own (never
    /// inlined), so that `styx-loader --functions 'styx_demo::'` can show
    /// each instruction's step as a slice; the untraced path stays inlined.
    #[inline(never)]
    fn traced_step<const TRACED: bool>(
        &mut self,
        cpu: &mut Core<TRACED>,
        pc: u16,
        opcode: u8,
        op: OpInfo,
    ) {
        cpu.memory.pc = pc;
        fire!(insn_fetch, pc, opcode);
        let before = Snapshot::of(&cpu.registers);
        for reg in op.reads {
            fire!(reg_read, pc, reg, before.get(reg));
        }

        self.execute(cpu);

        fire!(insn_exec, pc, opcode);
        let after = Snapshot::of(&cpu.registers);
        for reg in before.changed(after) {
            fire!(reg_write, pc, reg, after.get(reg), before.get(reg));
        }
        if op.flow != Flow::Next || cpu.memory.irq_taken {
            self.control_flow(cpu, pc, op);
        }
    }

    /// Runs the instruction at pc (and the IRQ it may let in) on `mos6502`.
    #[inline(always)]
    fn execute<const TRACED: bool>(&mut self, cpu: &mut Core<TRACED>) {
        cpu.memory.tick();
        cpu.memory.irq_taken = false;
        cpu.single_step();
        self.instructions += 1;
    }

    /// Reports the transfers after the instruction at `pc`: its own, if it
    /// made one, then a taken IRQ's.
    fn control_flow<const TRACED: bool>(&mut self, cpu: &Core<TRACED>, pc: u16, op: OpInfo) {
        let next = cpu.registers.program_counter;
        let irq = cpu.memory.irq_taken;
        // Where the instruction itself sent control; `next` is the handler if an IRQ came after it.
        let target = if irq { saved_pc(cpu) } else { next };
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
}

/// The return address an interrupt just pushed (above the pushed P).
fn saved_pc<const TRACED: bool>(cpu: &Core<TRACED>) -> u16 {
    let sp = cpu.registers.stack_pointer.0;
    let at = |offset: u8| cpu.memory.peek(0x0100 | u16::from(sp.wrapping_add(offset)));
    u16::from_le_bytes([at(2), at(3)])
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
