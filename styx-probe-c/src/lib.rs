//! styx's probes for emulators written in C or C++: `include/styx_probe.h`
//! and this crate built as a static library (`libstyx_probe_c.a`) or a
//! shared one (`libstyx_probe_c.so`).
//!
//! The probes are styx-probe's own, compiled once into the library: each
//! event type has one USDT site here, so bpftrace and styx-loader see the
//! same `styx:*` probes as in a Rust emulator, batched delivery included.
//! What the C emulator inlines is only the check (`styx_probe.h`): with the
//! static library it reads the type's semaphore word by its symbol, which
//! styx-probe defines hidden and named by version so that the C program's
//! code, linked with it, addresses it directly: one load and a branch not
//! taken while nobody traces. Only while a tracer is attached does the
//! emulator call into the library (`styx_fire_*` below), which fires the
//! event as the Rust macros do. The shared library cannot lend its hidden
//! words to another module; it exports a table of their addresses, which
//! the header reads when built with `STYX_PROBE_SHARED` (a second load).
//!
//! Values arrive as C passes them, 64 bits each, and travel in the batch
//! as `u64`s (a memory access's value in its size's width). The header is
//! generated from the event catalogue ([`header`]); a test keeps the
//! committed file equal to it.

mod header;

pub use header::header;

use core::ffi::{c_char, CStr};
use std::borrow::Cow;
use styx_probe::{Branch, InterruptKind};

/// A string the emulator passed: its text up to the NUL, invalid UTF-8
/// replaced; empty for a null pointer.
///
/// # Safety
/// `text` is null or a NUL-terminated string that lives for the call.
unsafe fn text<'a>(text: *const c_char) -> Cow<'a, str> {
    if text.is_null() {
        return Cow::Borrowed("");
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(text) }.to_string_lossy()
}

/// An instruction word was fetched at `pc`; `len` its length in bytes (0:
/// not known).
#[unsafe(no_mangle)]
pub extern "C" fn styx_fire_insn_fetch(pc: u64, insn: u64, len: u8) {
    styx_probe::insn_fetch!(|| (pc, insn, len));
}

/// The instruction at `pc` was executed.
#[unsafe(no_mangle)]
pub extern "C" fn styx_fire_insn_exec(pc: u64, insn: u64, len: u8) {
    styx_probe::insn_exec!(|| (pc, insn, len));
}

/// A basic block of `size` bytes at `pc`.
#[unsafe(no_mangle)]
pub extern "C" fn styx_fire_block(pc: u64, size: u64) {
    styx_probe::block!(|| (pc, size));
}

/// Fires a memory access of `size` bytes as the Rust probes take it: the
/// size is the value's type's (1, 2, 4 or 8 bytes; a size between them
/// as the next, a larger one as 8 with the value's low 64 bits, as a Rust
/// emulator's `u64` would).
macro_rules! access {
    ($probe:ident, $pc:expr, $addr:expr, $val:expr, $size:expr) => {
        match $size {
            0 | 1 => styx_probe::$probe!(|| ($pc, $addr, $val as u8)),
            2 => styx_probe::$probe!(|| ($pc, $addr, $val as u16)),
            3 | 4 => styx_probe::$probe!(|| ($pc, $addr, $val as u32)),
            _ => styx_probe::$probe!(|| ($pc, $addr, $val)),
        }
    };
}

/// Guest memory at `addr` was read by the instruction at `pc`.
#[unsafe(no_mangle)]
pub extern "C" fn styx_fire_mem_read(pc: u64, addr: u64, val: u64, size: u8) {
    access!(mem_read, pc, addr, val, size);
}

/// Guest memory at `addr` was written by the instruction at `pc`.
#[unsafe(no_mangle)]
pub extern "C" fn styx_fire_mem_write(pc: u64, addr: u64, val: u64, size: u8) {
    access!(mem_write, pc, addr, val, size);
}

/// Register `reg` was read at `pc`.
#[unsafe(no_mangle)]
pub extern "C" fn styx_fire_reg_read(pc: u64, reg: u64, val: u64) {
    styx_probe::reg_read!(|| (pc, reg, val));
}

/// Register `reg` was written at `pc`; `old` is what it held.
#[unsafe(no_mangle)]
pub extern "C" fn styx_fire_reg_write(pc: u64, reg: u64, val: u64, old: u64) {
    styx_probe::reg_write!(|| (pc, reg, val, old));
}

/// Control left `pc` for `target`; `kind` an encoded branch (a
/// `STYX_BRANCH_*` kind, `| STYX_BRANCH_CONDITIONAL`). A value that
/// encodes no branch is fired as a jump (its conditional bit kept), so
/// that the event is not lost; the header says so.
#[unsafe(no_mangle)]
pub extern "C" fn styx_fire_branch(pc: u64, target: u64, kind: u32) {
    let branch = Branch::decode(kind.into()).unwrap_or(Branch {
        kind: styx_probe::BranchKind::Jump,
        conditional: u64::from(kind) & 1 << Branch::CONDITIONAL_SHIFT != 0,
    });
    styx_probe::branch!(|| (pc, target, branch));
}

/// An interrupt service routine was entered (`kind` 0) or left (1): vector
/// `num`, from `old_pc` to `new_pc`. Another kind is fired as an entry.
#[unsafe(no_mangle)]
pub extern "C" fn styx_fire_interrupt(kind: u8, num: u64, old_pc: u64, new_pc: u64) {
    let kind = match InterruptKind::from_id(kind.into()) {
        Some(kind) => kind,
        None => InterruptKind::Entry,
    };
    styx_probe::interrupt!(|| (kind, num, old_pc, new_pc));
}

/// An emulator control event.
#[unsafe(no_mangle)]
pub extern "C" fn styx_fire_control(code: u64, a: u64, b: u64) {
    styx_probe::control!(|| (code, a, b));
}

/// A span of work began.
///
/// # Safety
/// `category` and `name` are null or NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn styx_fire_span_begin(
    category: *const c_char,
    name: *const c_char,
    id: u64,
) {
    // SAFETY: the caller's promise.
    let (category, name) = unsafe { (text(category), text(name)) };
    styx_probe::span_begin!(|| (category.as_ref(), name.as_ref(), id));
}

/// A span of work ended.
///
/// # Safety
/// As for [`styx_fire_span_begin`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn styx_fire_span_end(category: *const c_char, name: *const c_char, id: u64) {
    // SAFETY: the caller's promise.
    let (category, name) = unsafe { (text(category), text(name)) };
    styx_probe::span_end!(|| (category.as_ref(), name.as_ref(), id));
}

/// A one-off text message.
///
/// # Safety
/// `message` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn styx_fire_marker(message: *const c_char) {
    // SAFETY: the caller's promise.
    let message = unsafe { text(message) };
    styx_probe::marker!(|| message.as_ref());
}

/// A fresh span id, unique in the process (never 0).
#[unsafe(no_mangle)]
pub extern "C" fn styx_next_span_id() -> u64 {
    styx_probe::next_span_id()
}

/// Hands this thread's batched events to the tracer now (see
/// `styx_probe::flush`).
#[unsafe(no_mangle)]
pub extern "C" fn styx_flush() {
    styx_probe::flush();
}

/// The address of each event type's semaphore word, by kind id: what the
/// header's checks read through when the emulator uses the shared library
/// (`STYX_PROBE_SHARED`), which cannot export the hidden words themselves.
#[repr(transparent)]
pub struct Semaphores([*const styx_probe::__SemaphoreWord; styx_common::EVENT_KIND_SLOTS as usize]);

// SAFETY: the addresses of statics, never written through.
unsafe impl Sync for Semaphores {}

macro_rules! semaphore_table {
    ($(
        $(#[$doc:meta])* $kind:ident = $id:literal, $probe:ident, $shape:ident $(($n:literal))?,
            $delivery:ident, [$($arg:ident),*], [$($field:ident: $ty:ident),*];
    )*) => {
        /// See [`Semaphores`].
        #[unsafe(no_mangle)]
        #[allow(non_upper_case_globals)]
        pub static styx_probe_semaphores: Semaphores = {
            let mut table = [core::ptr::null(); styx_common::EVENT_KIND_SLOTS as usize];
            $(table[$id] = &raw const styx_probe::__semaphores::$probe;)*
            Semaphores(table)
        };
    };
}
styx_common::event_catalogue!(semaphore_table);
