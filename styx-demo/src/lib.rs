//! A 6502 machine on the `mos6502` crate, instrumented at every styx event
//! type, with a few real programs to run on it.

pub mod bus;
pub mod machine;
pub mod programs;
mod registers;

pub use machine::{Machine, RunResult};
pub use programs::Program;
