//! A 6502 computer on the `mos6502` crate, instrumented at every styx event
//! type, with real programs to run on it: styx's demo and benchmark workload.
//!
//! - [`bus`]: RAM and devices (halt and output ports, a timer raising IRQs);
//!   fires `mem_read` / `mem_write`.
//! - [`cpu`]: one instrumented instruction at a time; fires the instruction,
//!   register, branch, block and interrupt events.
//! - [`machine`]: whole program runs; fires spans, `control` and `marker`.
//! - [`opcodes`]: each opcode's length, registers read and control flow.
//! - [`registers`]: the register numbers events carry.
//! - [`programs`]: the hand-assembled programs.
//!
//! Built with the `probes-off` feature, the same emulator has every probe
//! compiled out.
//!
//! ```
//! use styx_demo::{programs, Machine};
//! let result = Machine::new().run(&programs::FIB).unwrap();
//! assert_eq!(result.exit_code, 24);
//! ```

pub mod bus;
pub mod cpu;
mod events;
pub mod machine;
pub mod opcodes;
pub mod programs;
pub mod registers;

pub use machine::{Machine, RunResult};
pub use programs::Program;
