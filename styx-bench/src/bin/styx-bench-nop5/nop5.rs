//! A `styx:mem_read` probe site on a 5-byte nop instead of styx-probe's
//! 1-byte one. Linux (6.18 here) traps a uprobe on a 1-byte nop with int3
//! every time; one on a 5-byte nop is rewritten after its first hit into a
//! call to a trampoline that enters the kernel by the `uprobe` syscall,
//! skipping the trap (not faster on every machine: the benchmark measures).
//! Why styx-probe's own site is not this one (README, "Why the site is a
//! 1-byte nop"): the rewritten call writes below `%rsp`, into the red zone
//! (guarded here), and a child forked while the site is optimized keeps
//! the call but not the trampoline, and dies at its first hit (this
//! program never forks).
//! Same provider, name and arguments as the styx-probe site, so per-event
//! tracers (bpftrace, styx-loader `--delivery per-event`) take it for one.
//!
//! The note follows the SystemTap SDT v3 layout (see styx-probe's `site`
//! module). Its semaphore is a plain 16-bit USDT semaphore of its own, not
//! styx-probe's 32-bit word (a Rust static whose halves belong to the
//! per-event and batched sites, which this site cannot name): so the site
//! has no batched half, and styx-loader's batched delivery does not attach
//! to it.

use std::arch::asm;

unsafe extern "C" {
    static __usdt_sema_styx_mem_read: u16;
}

/// Whether a tracer is attached to this site (its own semaphore).
#[inline(always)]
pub fn enabled() -> bool {
    // SAFETY: a `u16` the kernel raises and lowers: read volatile.
    unsafe { (&raw const __usdt_sema_styx_mem_read).read_volatile() != 0 }
}

/// Fires `styx:mem_read` (pc, addr, val, size 1) at a 5-byte-nop site.
/// Call only while [`enabled`].
#[inline(always)]
pub fn mem_read(pc: u64, addr: u64, val: u8) {
    // SAFETY: the instruction is a nop; the rest are assembler directives
    // adding a note, the shared semaphore (if this object lacks it) and the
    // `.stapsdt.base` marker, as every USDT site does.
    // The semaphore and `.stapsdt.base` are symbols other objects share.
    #[allow(named_asm_labels)]
    unsafe {
        asm!(
            // nopl 0x0(%rax,%rax,1): the 5-byte nop the kernel can optimize,
            // with %rsp moved past the red zone around it: the kernel's call
            // to its trampoline pushes four words below %rsp, where the loop
            // may keep values (this `asm!` is `nostack`).
            "lea rsp, [rsp - 128]",
            "990: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
            "lea rsp, [rsp + 128]",
            ".ifndef __usdt_sema_styx_mem_read",
            ".pushsection .probes, \"aw\", \"progbits\"",
            ".weak __usdt_sema_styx_mem_read",
            ".hidden __usdt_sema_styx_mem_read",
            "__usdt_sema_styx_mem_read:",
            ".zero 2",
            ".type __usdt_sema_styx_mem_read, @object",
            ".size __usdt_sema_styx_mem_read, 2",
            ".popsection",
            ".endif",
            ".pushsection .note.stapsdt, \"\", \"note\"",
            ".balign 4",
            ".4byte 992f-991f, 994f-993f, 3",
            "991: .asciz \"stapsdt\"",
            "992: .balign 4",
            "993: .8byte 990b",
            ".8byte _.stapsdt.base",
            ".8byte __usdt_sema_styx_mem_read",
            ".asciz \"styx\"",
            ".asciz \"mem_read\"",
            ".asciz \"8@%rdi 8@%rsi 8@%rdx 8@%rcx\"",
            "994: .balign 4",
            ".popsection",
            ".ifndef _.stapsdt.base",
            ".pushsection .stapsdt.base, \"aGR\", \"progbits\", .stapsdt.base, comdat",
            ".weak _.stapsdt.base",
            ".hidden _.stapsdt.base",
            "_.stapsdt.base:",
            ".space 1",
            ".size _.stapsdt.base, 1",
            ".popsection",
            ".endif",
            in("rdi") pc,
            in("rsi") addr,
            in("rdx") u64::from(val),
            in("rcx") 1u64,
            options(nomem, nostack, preserves_flags)
        );
    }
}
