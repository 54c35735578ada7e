//! Runs whole programs: load, reset, step until halted, collect the result.
//!
//! Events around the per-instruction ones of [`crate::cpu`]:
//! - a span `("program", name)` around each run and `("cpu", "frame")` around
//!   each traced frame of [`FRAME`] instructions (the last one of a run is
//!   shorter); the CPU checks for tracers once per frame;
//! - `control` (code, a, b): [`CONTROL_RESET`], [`CONTROL_HALT`],
//!   [`CONTROL_JAM`], [`CONTROL_TRACER_SEEN`];
//! - `marker`: `"<program>: start"` and
//!   `"<program>: halted with <exit code> after <n> instructions, <n> output bytes"`.

use crate::bus::DemoBus;
use crate::cpu::{Cpu, Frame};
use crate::events::fire;
use crate::programs::Program;
use anyhow::{bail, Result};

/// Instructions per `("cpu", "frame")` span.
pub const FRAME: u64 = 1024;
/// `control` code for a reset: a = the pc it starts at, b = 0.
pub const CONTROL_RESET: u8 = 1;
/// `control` code for a halt: a = exit code, b = instructions the run executed.
pub const CONTROL_HALT: u8 = 2;
/// `control` code fired by [`tracer_attached`] once a tracer sees it: a = b = 0.
pub const CONTROL_TRACER_SEEN: u8 = 3;
/// `control` code for a `JAM` opcode, which ends the run with an error: a = pc, b = opcode.
pub const CONTROL_JAM: u8 = 4;
/// A program that has not halted after this many instructions is broken.
const STEP_LIMIT: u64 = 50_000_000;

/// The emulated computer: a [`Cpu`] and the programs' lifecycle.
#[derive(Default)]
pub struct Machine {
    cpu: Cpu,
}

/// What a program run gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunResult {
    /// The value it wrote to the halt port.
    pub exit_code: u8,
    /// The bytes it wrote to the output port.
    pub output: Vec<u8>,
    /// Instructions it executed (interrupt handlers included).
    pub instructions: u64,
    /// Timer IRQs it took.
    pub irqs: u64,
}

impl Machine {
    /// A machine with zeroed memory.
    pub fn new() -> Machine {
        Machine::default()
    }

    /// Loads `program`, resets into it and runs it until it halts.
    pub fn run(&mut self, program: &Program) -> Result<RunResult> {
        let _span = styx_probe::span!("program", program.name);
        styx_probe::marker!(|| format!("{}: start", program.name));
        let bus = self.cpu.bus_mut();
        bus.power_on();
        program.load(bus);
        let start = self.cpu.reset();
        fire!(control, CONTROL_RESET, start, 0u8);

        let (first, first_irqs) = (self.cpu.instructions(), self.cpu.irqs());
        loop {
            match self.cpu.run_frame(FRAME) {
                Ok(Frame::Halted) => break,
                Ok(Frame::Full) => {}
                Err(jam) => {
                    fire!(control, CONTROL_JAM, jam.pc, jam.opcode);
                    bail!("{}: {jam}", program.name);
                }
            }
            if self.cpu.instructions() - first > STEP_LIMIT {
                bail!(
                    "{} did not halt within {STEP_LIMIT} instructions",
                    program.name
                );
            }
        }

        let exit_code = self.cpu.bus().halted().unwrap_or_default();
        let instructions = self.cpu.instructions() - first;
        fire!(control, CONTROL_HALT, exit_code, instructions);
        let output = self.cpu.bus_mut().take_output();
        styx_probe::marker!(|| format!(
            "{}: halted with {exit_code} after {instructions} instructions, {} output bytes",
            program.name,
            output.len()
        ));
        Ok(RunResult {
            exit_code,
            output,
            instructions,
            irqs: self.cpu.irqs() - first_irqs,
        })
    }

    /// Instructions executed since [`new`](Self::new).
    pub fn instructions(&self) -> u64 {
        self.cpu.instructions()
    }

    /// The memory and devices, e.g. to read what a program left in RAM.
    pub fn bus(&self) -> &DemoBus {
        self.cpu.bus()
    }

    /// The CPU.
    pub fn cpu(&self) -> &Cpu {
        &self.cpu
    }
}

/// Whether a tracer has enabled the `control` probe. The probe's closure runs
/// only then, so this fires one `control` event ([`CONTROL_TRACER_SEEN`]) when it does.
pub fn tracer_attached() -> bool {
    let mut attached = false;
    styx_probe::control!(|| {
        attached = true;
        (CONTROL_TRACER_SEEN, 0u8, 0u8)
    });
    attached
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::recorder::capture;
    use crate::programs::FIB;

    #[rustfmt::skip]
    const JAM: Program = Program {
        name: "jam",
        origin: 0x0600,
        code: &[
            0xEA, // 0600  NOP
            0x02, // 0601  JAM
        ],
        data: Vec::new,
    };

    fn controls(events: &[crate::events::recorder::Event]) -> Vec<Vec<u64>> {
        events
            .iter()
            .filter(|(probe, _)| *probe == "control")
            .map(|(_, args)| args.clone())
            .collect()
    }

    #[test]
    fn a_run_is_framed_by_reset_and_halt() {
        let mut machine = Machine::new();
        let mut result = None;
        let events = capture(|| result = Some(machine.run(&FIB).unwrap()));
        let result = result.unwrap();
        assert_eq!(
            controls(&events),
            [
                vec![CONTROL_RESET.into(), FIB.origin.into(), 0],
                vec![CONTROL_HALT.into(), 24, result.instructions],
            ]
        );
    }

    #[test]
    fn a_jam_ends_the_run_with_an_error_and_a_control_event() {
        let mut machine = Machine::new();
        let mut result = None;
        let events = capture(|| result = Some(machine.run(&JAM)));
        let error = result.unwrap().unwrap_err();
        assert_eq!(error.to_string(), "jam: JAM opcode 0x02 at 0x0601");
        assert_eq!(
            controls(&events),
            [
                vec![CONTROL_RESET.into(), 0x0600, 0],
                vec![CONTROL_JAM.into(), 0x0601, 0x02],
            ]
        );
        // The machine stays usable.
        assert_eq!(machine.run(&FIB).unwrap().exit_code, 24);
    }
}
