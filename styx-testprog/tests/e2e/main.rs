//! End to end: styx-loader, with the real eBPF programs, tracing
//! styx-testprog, the 6502 demo, the RISC-V workload (styx-rv), C
//! programs using <sys/sdt.h> (their sources are in tests/c) and a Rust one
//! using the `usdt` crate (styx-usdtcrate), and one whose heap is traced
//! (styx-alloc), and static x86-64 and AArch64 guests under qemu-user with
//! the styx-qemu plugin; also
//! `styx-loader list` and `read`, and bpftrace on styx probes. One test binary, a module per subject.
//!
//! Most tests load eBPF programs and attach uprobes, so they must run as
//! root; they fail (never skip) when that is not possible. styx-loader,
//! styx-demo, styx-rv, styx-usdtcrate, styx-alloc and styx-qemu's plugin
//! must be built first (`cargo xtask test` does it); qemu-user and
//! gcc-aarch64-linux-gnu come from `scripts/setup`.

mod pftrace;
mod support;

mod alloc;
mod batched;
mod binary;
mod bpftrace;
mod c_declared;
mod c_header;
mod capture;
mod compile_out;
mod cut;
mod declared;
mod demo;
mod enabled;
mod errors;
mod filters;
mod flight;
mod forged;
mod forged_batches;
mod function_errors;
mod functions;
mod interrupts;
mod late_libraries;
mod libraries;
mod list;
mod live;
mod losses;
mod lossless;
mod many_sites;
mod misaligned_sites;
mod qemu;
mod spawn;
mod tail_calls;
mod timeline;
mod together;
mod tools;
mod top;
mod trace;
mod usdt;
mod usdt_crate;
mod workload;
