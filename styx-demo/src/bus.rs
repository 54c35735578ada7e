//! Memory and devices, firing `mem_read` / `mem_write` for every access.
//!
//! | address | device |
//! |---|---|
//! | `$F000` | halt port: a write stops the machine; the value is its exit code |
//! | `$F001` | output port: each byte written is appended to the output |
//! | `$F002` | timer: a write acknowledges the tick and lowers the IRQ line |
//! | else | RAM |

use mos6502::memory::Bus;

pub const HALT_PORT: u16 = 0xf000;
pub const OUTPUT_PORT: u16 = 0xf001;
pub const TIMER_ACK: u16 = 0xf002;

pub struct DemoBus {
    ram: Box<[u8; 0x10000]>,
    /// The pc of the instruction being executed, reported with each access.
    pub pc: u16,
    pub output: Vec<u8>,
    pub halted: Option<u8>,
    /// Level-triggered: high from a timer tick until the program acknowledges it.
    pub irq_line: bool,
    /// Set when the CPU fetches the IRQ vector, i.e. services the interrupt.
    pub irq_taken: bool,
}

impl DemoBus {
    pub fn new() -> DemoBus {
        DemoBus {
            ram: Box::new([0; 0x10000]),
            pc: 0,
            output: Vec::new(),
            halted: None,
            irq_line: false,
            irq_taken: false,
        }
    }

    /// Reads without firing a probe: for the host, not the guest.
    pub fn peek(&self, address: u16) -> u8 {
        self.ram[address as usize]
    }

    /// Writes without firing a probe: for loading programs.
    pub fn poke(&mut self, address: u16, bytes: &[u8]) {
        let start = address as usize;
        self.ram[start..start + bytes.len()].copy_from_slice(bytes);
    }
}

impl Default for DemoBus {
    fn default() -> Self {
        Self::new()
    }
}

impl Bus for DemoBus {
    fn get_byte(&mut self, address: u16) -> u8 {
        let val = self.ram[address as usize];
        let pc = self.pc;
        styx_probe::mem_read!(|| (pc, address, val));
        val
    }

    fn set_byte(&mut self, address: u16, value: u8) {
        let pc = self.pc;
        styx_probe::mem_write!(|| (pc, address, value));
        match address {
            HALT_PORT => self.halted = Some(value),
            OUTPUT_PORT => self.output.push(value),
            TIMER_ACK => self.irq_line = false,
            _ => self.ram[address as usize] = value,
        }
    }

    fn irq_pending(&mut self) -> bool {
        self.irq_line
    }

    fn irq_vector(&mut self) -> u16 {
        self.irq_taken = true;
        mos6502::memory::IRQ_INTERRUPT_VECTOR_LO
    }
}
