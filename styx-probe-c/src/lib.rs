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
//!
//! Event types a C emulator declares itself are written in a declaration
//! file that `styx-declare` ([`declare`]) turns into a header of their
//! own: each type's semaphore word, its note (the bytes styx-probe's
//! `event!` writes, by the same writer), its per-event and batch-enable
//! sites, and a function that hands the values to
//! [`styx_fire_declared`], which fires them as `event!`'s types fire.

pub mod declare;
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

/// Fires an event of a type the emulator declared (`styx-declare`'s
/// generated code calls it, only while `semaphore`'s word is raised):
/// `count` values, each in `widths` bytes (1, 2, 4 or 8) in a batch, and
/// `site`, the type's per-event site, run with the values while a tracer
/// takes its events one by one. 0, or -1 for what no generated code
/// passes (a null pointer, more than 8 values, another width): nothing is
/// fired then.
///
/// # Safety
/// `semaphore` is the type's semaphore word; `values` and `widths` hold
/// `count` elements each (either may be null for 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn styx_fire_declared(
    semaphore: *const u32,
    site: Option<unsafe extern "C" fn(values: *const u64)>,
    values: *const u64,
    widths: *const u8,
    count: u32,
) -> i32 {
    use styx_common::schema::MAX_FIELDS;
    let count = count as usize;
    let (Some(site), false) = (site, semaphore.is_null()) else {
        return -1;
    };
    if count > MAX_FIELDS || (count > 0 && (values.is_null() || widths.is_null())) {
        return -1;
    }
    let (values, given) = match count {
        0 => (&[][..], &[][..]),
        // SAFETY: the caller's promise, the pointers checked not null.
        _ => unsafe {
            (
                core::slice::from_raw_parts(values, count),
                core::slice::from_raw_parts(widths, count),
            )
        },
    };
    let mut bytes = [0usize; MAX_FIELDS];
    for (bytes, &given) in bytes.iter_mut().zip(given) {
        if !matches!(given, 1 | 2 | 4 | 8) {
            return -1;
        }
        *bytes = given.into();
    }
    // SAFETY: the caller's promise; the kernel writes the word, so read it
    // as the inline check does, volatile.
    let word = unsafe { core::ptr::read_volatile(semaphore) };
    // SAFETY: the site reads the `count` values it was generated for.
    let fire_site = || unsafe { site(values.as_ptr()) };
    styx_probe::__declared::foreign(word, semaphore as u64, fire_site, values, &bytes[..count]);
    0
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

#[cfg(test)]
mod tests {
    use super::styx_fire_declared;

    unsafe extern "C" fn site(_: *const u64) {
        panic!("no site runs for what is refused");
    }

    #[test]
    fn what_no_generated_code_passes_is_refused_not_fired() {
        // Raised as by a per-event tracer: were the call accepted, the
        // site would run.
        let word = 1u32;
        let values = [1u64; 9];
        let widths = [1u8, 3, 1, 1, 1, 1, 1, 1, 1];
        // SAFETY: each pointer is null or holds `count` elements.
        unsafe {
            use core::ptr::null;
            assert_eq!(
                styx_fire_declared(null(), Some(site), values.as_ptr(), widths.as_ptr(), 1),
                -1
            );
            assert_eq!(
                styx_fire_declared(&word, None, values.as_ptr(), widths.as_ptr(), 1),
                -1
            );
            assert_eq!(
                styx_fire_declared(&word, Some(site), null(), widths.as_ptr(), 1),
                -1
            );
            assert_eq!(
                styx_fire_declared(&word, Some(site), values.as_ptr(), null(), 1),
                -1
            );
            assert_eq!(
                styx_fire_declared(&word, Some(site), values.as_ptr(), widths.as_ptr(), 9),
                -1
            );
            assert_eq!(
                styx_fire_declared(&word, Some(site), values.as_ptr(), widths.as_ptr(), 2),
                -1
            );
        }
    }
}
