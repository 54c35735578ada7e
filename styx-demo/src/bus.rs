//! The 6502's memory and devices; through [`Probed<true>`](Probed) the CPU's
//! every access (instruction fetches, operands, stack, vectors) fires
//! `mem_read` / `mem_write`.
//!
//! | address | device |
//! |---|---|
//! | `$F000` | halt port: a write stops the machine; the value is its exit code |
//! | `$F001` | output port: each byte written is appended to the output |
//! | `$F002` | timer: a write acknowledges the tick and lowers the IRQ line; a read gives the line (1 high, 0 low) |
//! | else | RAM |
//!
//! The timer raises the (level-triggered) IRQ line every [`TIMER_PERIOD`]
//! instructions and holds it until the program acknowledges.

use crate::events::fire;
use mos6502::memory::{Bus, IRQ_INTERRUPT_VECTOR_LO};

/// A write here halts the machine with the value as exit code.
pub const HALT_PORT: u16 = 0xf000;
/// Each byte written here is appended to the program's output.
pub const OUTPUT_PORT: u16 = 0xf001;
/// A write here acknowledges a timer tick (lowers the IRQ line).
pub const TIMER_PORT: u16 = 0xf002;
/// Instructions between timer ticks.
pub const TIMER_PERIOD: u32 = 500;

/// 64 KiB of RAM with the devices above mapped over it.
pub struct DemoBus {
    ram: Box<[u8; 0x10000]>,
    /// The pc of the instruction being executed, reported with each access.
    pub(crate) pc: u16,
    output: Vec<u8>,
    halted: Option<u8>,
    /// Instructions until the next timer tick.
    timer_left: u32,
    /// Level-triggered: high from a timer tick until the program acknowledges it.
    irq_line: bool,
    /// Set when the CPU fetches the IRQ vector, i.e. takes the interrupt; the
    /// step loop clears it before each instruction.
    pub(crate) irq_taken: bool,
}

impl DemoBus {
    /// Zeroed RAM, no output, the timer a full period from its next tick.
    pub fn new() -> DemoBus {
        DemoBus {
            ram: Box::new([0; 0x10000]),
            pc: 0,
            output: Vec::new(),
            halted: None,
            timer_left: TIMER_PERIOD,
            irq_line: false,
            irq_taken: false,
        }
    }

    /// Reads RAM without firing a probe: for the host, not the guest.
    pub fn peek(&self, address: u16) -> u8 {
        self.ram[address as usize]
    }

    /// Writes RAM without firing a probe: for loading programs.
    pub fn poke(&mut self, address: u16, bytes: &[u8]) {
        let start = address as usize;
        self.ram[start..start + bytes.len()].copy_from_slice(bytes);
    }

    /// The bytes written to the output port since the last [`power_on`](Self::power_on).
    pub fn output(&self) -> &[u8] {
        &self.output
    }

    /// Takes the output, leaving it empty.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// The exit code written to the halt port, once one has been.
    #[inline(always)]
    pub fn halted(&self) -> Option<u8> {
        self.halted
    }

    /// Whether the timer's IRQ line is high.
    pub fn irq_line(&self) -> bool {
        self.irq_line
    }

    /// Returns the devices to their power-on state (RAM is kept), so each
    /// program run starts alike whatever ran before it.
    pub fn power_on(&mut self) {
        self.output.clear();
        self.halted = None;
        self.timer_left = TIMER_PERIOD;
        self.irq_line = false;
        self.irq_taken = false;
    }

    /// Advances the timer by one instruction.
    #[inline(always)]
    pub fn tick(&mut self) {
        self.timer_left -= 1;
        if self.timer_left == 0 {
            self.timer_left = TIMER_PERIOD;
            self.irq_line = true;
        }
    }
}

impl Default for DemoBus {
    fn default() -> Self {
        Self::new()
    }
}

/// A traced read's probe, in a function of its own (never inlined) so that
/// `styx-loader --functions 'styx_demo::bus'` can show every access; the
/// untraced CPU never calls it.
#[inline(never)]
fn traced_read(pc: u16, address: u16, val: u8) {
    fire!(mem_read, pc, address, val);
}

/// A traced write's probe (see [`traced_read`]).
#[inline(never)]
fn traced_write(pc: u16, address: u16, value: u8) {
    fire!(mem_write, pc, address, value);
}

/// The [`DemoBus`] as the CPU sees it. `Probed<true>` fires `mem_read` /
/// `mem_write` for every access; `Probed<false>` is a plain bus, so the CPU
/// built on it compiles to the same code as with probes compiled out (a
/// probe check inside every access would change how `mos6502` inlines its
/// instruction decoder, costing ~20% even with no tracer attached).
pub struct Probed<const TRACED: bool>(pub DemoBus);

impl<const TRACED: bool> std::ops::Deref for Probed<TRACED> {
    type Target = DemoBus;
    fn deref(&self) -> &DemoBus {
        &self.0
    }
}

impl<const TRACED: bool> std::ops::DerefMut for Probed<TRACED> {
    fn deref_mut(&mut self) -> &mut DemoBus {
        &mut self.0
    }
}

impl<const TRACED: bool> Bus for Probed<TRACED> {
    #[inline(always)]
    fn get_byte(&mut self, address: u16) -> u8 {
        let bus = &mut self.0;
        let val = if address == TIMER_PORT {
            u8::from(bus.irq_line)
        } else {
            bus.ram[address as usize]
        };
        if TRACED {
            traced_read(bus.pc, address, val);
        }
        val
    }

    #[inline(always)]
    fn set_byte(&mut self, address: u16, value: u8) {
        let bus = &mut self.0;
        if TRACED {
            traced_write(bus.pc, address, value);
        }
        match address {
            HALT_PORT => bus.halted = Some(value),
            OUTPUT_PORT => bus.output.push(value),
            TIMER_PORT => bus.irq_line = false,
            _ => bus.ram[address as usize] = value,
        }
    }

    fn irq_pending(&mut self) -> bool {
        self.0.irq_line
    }

    fn irq_vector(&mut self) -> u16 {
        // The CPU asks only when it takes the IRQ: the one place to notice that.
        self.0.irq_taken = true;
        IRQ_INTERRUPT_VECTOR_LO
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_halt_print_and_acknowledge() {
        let mut bus = Probed::<true>(DemoBus::new());
        bus.set_byte(OUTPUT_PORT, b'h');
        bus.set_byte(OUTPUT_PORT, b'i');
        assert_eq!(bus.output(), b"hi");
        assert_eq!(bus.halted(), None);
        bus.set_byte(HALT_PORT, 7);
        assert_eq!(bus.halted(), Some(7));
        // Port writes do not land in RAM.
        assert_eq!(bus.peek(OUTPUT_PORT), 0);
    }

    #[test]
    fn the_timer_raises_irq_each_period_until_acknowledged() {
        let mut bus = Probed::<true>(DemoBus::new());
        for _ in 0..TIMER_PERIOD - 1 {
            bus.tick();
        }
        assert!(!bus.irq_pending());
        bus.tick();
        assert!(bus.irq_pending());
        assert_eq!(bus.get_byte(TIMER_PORT), 1);
        bus.set_byte(TIMER_PORT, 0);
        assert!(!bus.irq_pending());
        assert_eq!(bus.get_byte(TIMER_PORT), 0);
    }

    #[test]
    fn power_on_resets_the_devices_but_not_ram() {
        let mut bus = Probed::<true>(DemoBus::new());
        bus.set_byte(0x0200, 42);
        bus.set_byte(OUTPUT_PORT, 1);
        bus.set_byte(HALT_PORT, 0);
        for _ in 0..TIMER_PERIOD {
            bus.tick();
        }
        bus.power_on();
        assert_eq!(
            (bus.output(), bus.halted(), bus.irq_line()),
            (&[][..], None, false)
        );
        assert_eq!(bus.peek(0x0200), 42);
    }
}
