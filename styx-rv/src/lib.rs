//! A RISC-V (RV32IM) machine on the `rrs-lib` interpreter from crates.io,
//! running a guest program written in this crate, instrumented with styx
//! probes the way the README teaches: styx's realistic benchmark workload,
//! beside the 6502 demo (which checks for tracers once per frame and
//! compiles its CPU twice; this one does neither).
//!
//! - [`bus`]: RAM and ports behind rrs-lib's `Memory` trait; fires
//!   `mem_read` / `mem_write` at every access.
//! - [`machine`]: the step loop; fires `insn_exec`, `reg_write`, `branch`.
//! - [`guest`]: the program (a sieve, a sort, a checksum) and its answers.
//! - [`asm`]: the encoder the program is written with.
//! - [`counts`]: the emulator's own tally of its events, for tests.
//! - [`registers`]: register numbers by ABI name.
//!
//! Built with the `probes-off` feature, every probe is compiled out.
//!
//! ```
//! use styx_rv::{guest::Answers, Machine};
//! let result = Machine::<false>::new().unwrap().run().unwrap();
//! assert_eq!(result.answers, Answers::expected());
//! ```

pub mod asm;
pub mod bus;
pub mod counts;
pub mod guest;
pub mod machine;
pub mod registers;

pub use counts::Counts;
pub use machine::{Machine, RunError, RunResult};
