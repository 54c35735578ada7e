//! The callbacks QEMU calls as translated code runs, each firing one styx
//! event from the record its user data points at. They run on the vCPU's
//! own thread (in user mode, the guest thread's host thread), so each
//! event carries the right thread id and goes to that thread's batch.
//!
//! API v1 passes a memory callback the access's address and size but not
//! the value moved: `mem_read`/`mem_write` carry 0 in a value as wide as
//! the access (the width is how styx events say the size).
//!
//! Guest system calls (user mode) are event types of the plugin's own
//! (provider `styx_qemu`): the catalogue has none for them.

use crate::records::{Block, Insn};
use core::ffi::{c_uint, c_void};
use qemu_plugin::sys::{
    qemu_plugin_mem_is_store, qemu_plugin_mem_size_shift, qemu_plugin_meminfo_t,
};

/// A translated block starts executing: `block(pc, size)`.
pub unsafe extern "C" fn block(_vcpu: c_uint, userdata: *mut c_void) {
    // SAFETY: registered with a `Block` that lives until the code cache's
    // next flush (`records`), after which this block never runs.
    let block = unsafe { &*(userdata as *const Block) };
    styx_probe::block!(|| (block.pc, block.size));
}

/// An instruction executes: `insn_exec(pc, bytes, len)`. Instructions of
/// up to 4 bytes (every AArch64 or RISC-V one) travel as a 4-byte value,
/// longer ones as 8 bytes (an x86 instruction's first 8).
pub unsafe extern "C" fn insn_exec(_vcpu: c_uint, userdata: *mut c_void) {
    // SAFETY: as for `block`, an `Insn`.
    let insn = unsafe { &*(userdata as *const Insn) };
    if insn.len <= 4 {
        styx_probe::insn_exec!(|| (insn.pc, insn.bytes as u32, insn.len));
    } else {
        styx_probe::insn_exec!(|| (insn.pc, insn.bytes, insn.len));
    }
}

/// A memory access by the instruction: `mem_read` or `mem_write`
/// `(pc, addr, 0)`, the zero as wide as the access. Wider than 8 bytes
/// (QEMU 7.2 splits vector accesses into 8-byte ones before plugins see
/// them) would be reported as 8.
///
/// One callback for both directions: QEMU 7.2 calls a memory callback for
/// loads and stores alike whatever direction it was registered for (a
/// store called both a read and a write callback), so the direction is
/// the access's own; the probes' own checks drop a direction nobody
/// traces.
pub unsafe extern "C" fn mem(
    _vcpu: c_uint,
    info: qemu_plugin_meminfo_t,
    vaddr: u64,
    userdata: *mut c_void,
) {
    // SAFETY: as for `block`, an `Insn`.
    let insn = unsafe { &*(userdata as *const Insn) };
    let pc = insn.pc;
    // SAFETY: both read bits of the value QEMU passed.
    let (store, shift) = unsafe {
        (
            qemu_plugin_mem_is_store(info),
            qemu_plugin_mem_size_shift(info),
        )
    };
    match (store, shift) {
        (false, 0) => styx_probe::mem_read!(|| (pc, vaddr, 0u8)),
        (false, 1) => styx_probe::mem_read!(|| (pc, vaddr, 0u16)),
        (false, 2) => styx_probe::mem_read!(|| (pc, vaddr, 0u32)),
        (false, _) => styx_probe::mem_read!(|| (pc, vaddr, 0u64)),
        (true, 0) => styx_probe::mem_write!(|| (pc, vaddr, 0u8)),
        (true, 1) => styx_probe::mem_write!(|| (pc, vaddr, 0u16)),
        (true, 2) => styx_probe::mem_write!(|| (pc, vaddr, 0u32)),
        (true, _) => styx_probe::mem_write!(|| (pc, vaddr, 0u64)),
    }
}

styx_probe::event! {
    /// A guest system call (user mode), as QEMU passes it to plugins: its
    /// number (the guest architecture's) and its first six arguments.
    pub syscall(num: i64, a1: u64, a2: u64, a3: u64, a4: u64, a5: u64, a6: u64);
    /// A guest system call returned `ret` (negative: an error number).
    pub syscall_ret(num: i64, ret: i64);
}

/// A guest system call: `syscall(num, a1..a6)`.
pub fn syscall_entry(num: i64, args: [u64; 6]) {
    let [a1, a2, a3, a4, a5, a6] = args;
    styx_probe::fire!(syscall, || (num, a1, a2, a3, a4, a5, a6));
}

/// A guest system call returned: `syscall_ret(num, ret)`.
pub fn syscall_return(num: i64, ret: i64) {
    styx_probe::fire!(syscall_ret, || (num, ret));
}
