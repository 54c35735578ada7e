//! USDT probes in ELF files and processes, read without the kernel: no root,
//! no eBPF. styx-loader attaches what this crate picks; `list` and the tests
//! use it alone.
//!
//! The pipeline, in module order:
//! 1. [`target`]: what to trace: a process (its executable and mapped
//!    libraries), a program about to start, or a binary system-wide;
//! 2. [`note`]: each file's `.note.stapsdt` notes: probe sites, file offsets,
//!    semaphores (each site checked to start an instruction, `code.rs`);
//! 3. [`argspec`]: a site's argument spec (`-4@%esi 8@sym(%rip)`) parsed;
//! 4. [`compile`]: a parsed spec compiled into the [`styx_common::UsdtSpec`]
//!    the generic eBPF program reads ([`symbols`] places `%rip` symbols);
//!    [`probe_args`] adds what the note cannot say (`--probe-args`: strings,
//!    names);
//! 5. [`select`]: the sites to attach for the event types and globs wanted,
//!    each with its attach cookie, and the ones left out with why.
//!
//! x86-64 facts (register names, `pt_regs` offsets, argument registers) are
//! in [`arch`].
#![warn(missing_docs)]

pub mod arch;
pub mod argspec;
mod code;
pub mod compile;
pub mod demangle;
mod file;
pub mod functions;
pub mod needed;
pub mod note;
pub mod probe_args;
mod segments;
pub mod select;
pub mod symbols;
pub mod target;
