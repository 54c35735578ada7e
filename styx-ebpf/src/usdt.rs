//! Records a hit of any USDT probe, reading each argument where its spec
//! (compiled by the loader from the note's argument string) says it is,
//! and copying the strings of those declared strings after the record.

use crate::emit::{header, SUBMIT_FLAGS};
use crate::{dropped, EVENTS, SPECS, USDT_SCRATCH};
use aya_ebpf::helpers::generated::{
    bpf_probe_read_user, bpf_probe_read_user_str, bpf_ringbuf_output,
};
use aya_ebpf::helpers::{bpf_get_attach_cookie, bpf_probe_read_kernel};
use aya_ebpf::programs::ProbeContext;
use aya_ebpf::EbpfContext;
use core::ffi::c_void;
use core::mem::size_of;
use core::ptr::{read_volatile, write_volatile};
use styx_common::{
    widen, EventKind, StrWord, UsdtArg, UsdtRecord, ARG_CONST, ARG_HAS_BASE, ARG_HAS_INDEX,
    ARG_MEM, ARG_REG, ARG_STRING, MAX_USDT_ARGS, USDT_STRINGS_MAX, USDT_STR_MAX,
};

/// A record and its strings, built in a per-CPU map (too big for the
/// stack) and copied into the ring up to its last string's end.
#[repr(C)]
pub struct UsdtScratch {
    record: UsdtRecord,
    /// String `k` of the record at `k * USDT_STR_MAX` (see
    /// `styx_common::StrWord`), and room for the last one's read to run
    /// two bytes past it.
    strings: [u8; STRINGS_ROOM],
    /// Strings copied so far, and where the last one ends. Kept here, not
    /// in registers: the verifier does not follow map memory, so the
    /// states of the argument loop stay alike (carried in registers, each
    /// count and length was a state of its own, and verifying took ~1.5 s).
    copied: u64,
    end: u64,
}

/// A string is read `USDT_STR_MAX + 1` bytes long and its NUL: one more
/// byte than is kept, to know whether it was cut.
const READ_LEN: u32 = USDT_STR_MAX as u32 + 2;
const STRINGS_ROOM: usize = (USDT_STRINGS_MAX + 2 + 7) & !7;

#[inline(always)]
pub fn record(ctx: &ProbeContext) {
    // SAFETY: the helper only reads the cookie of the running program.
    let spec_id = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) } as u32;
    let Some(spec) = SPECS.get(spec_id) else {
        return;
    };
    let kind = EventKind::Usdt as u8;
    let nargs = if spec.nargs as usize > MAX_USDT_ARGS {
        MAX_USDT_ARGS
    } else {
        spec.nargs as usize
    };
    let Some(header) = header(kind, nargs as u8) else {
        return;
    };
    let Some(scratch) = USDT_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: this CPU's slot of the map, used by nothing else while this
    // program runs (it is not preempted by another run on this CPU).
    let scratch = unsafe { &mut *scratch };
    // SAFETY (both): plain writes to this CPU's scratch; volatile so they
    // stay in map memory (see `UsdtScratch::copied`).
    unsafe {
        write_volatile(&mut scratch.copied, 0);
        write_volatile(&mut scratch.end, 0);
    }
    let mut i = 0;
    while i < MAX_USDT_ARGS {
        let mut value = 0;
        if i < nargs {
            let arg = &spec.args[i];
            value = read_arg(ctx, arg);
            if arg.flags & ARG_STRING != 0 {
                value = next_string(scratch, value);
            }
        }
        scratch.record.args[i] = value;
        i += 1;
    }
    scratch.record.header = header;
    scratch.record.spec_id = spec_id;
    scratch.record._reserved = 0;
    // SAFETY: a plain read of this CPU's scratch.
    let end = unsafe { read_volatile(&scratch.end) } as usize;
    // Said for the verifier: `end` is within USDT_STRINGS_MAX.
    if end > USDT_STRINGS_MAX {
        return;
    }
    let len = size_of::<UsdtRecord>() + end;
    // SAFETY: `len` is within the scratch, written up to it.
    let rc = unsafe {
        bpf_ringbuf_output(
            &EVENTS as *const _ as *mut c_void,
            scratch as *mut UsdtScratch as *mut c_void,
            len as u64,
            SUBMIT_FLAGS,
        )
    };
    if rc < 0 {
        dropped(ctx, kind, 1);
    }
}

/// Copies the string at `address` into the record's next string slot;
/// returns its [`StrWord`].
#[inline(always)]
fn next_string(scratch: &mut UsdtScratch, address: u64) -> u64 {
    // SAFETY (all three): plain accesses to this CPU's scratch.
    let slot = unsafe { read_volatile(&scratch.copied) } as usize;
    // Said for the verifier: no record has more strings than arguments.
    if slot >= MAX_USDT_ARGS {
        return 0;
    }
    let word = copy_string(scratch, slot, address);
    unsafe {
        write_volatile(&mut scratch.copied, slot as u64 + 1);
        write_volatile(&mut scratch.end, (slot * USDT_STR_MAX + word.kept()) as u64);
    }
    word.encode()
}

/// Copies the NUL-terminated string at `address` into string slot `slot`
/// (below MAX_USDT_ARGS), at most [`USDT_STR_MAX`] bytes of it, and says
/// what became of it.
#[inline(always)]
fn copy_string(scratch: &mut UsdtScratch, slot: usize, address: u64) -> StrWord {
    let at = slot * USDT_STR_MAX;
    // SAFETY: writes at most READ_LEN bytes from `at`, within the strings'
    // room (the last slot has two bytes to spare); a bad address only
    // makes the helper fail.
    let rc = unsafe {
        bpf_probe_read_user_str(
            scratch.strings.as_mut_ptr().add(at) as *mut c_void,
            READ_LEN,
            address as *const c_void,
        )
    };
    if rc < 0 {
        let errno = (-rc) as u16;
        return StrWord::Unreadable { errno };
    }
    // `rc` counts the NUL; a string of more than USDT_STR_MAX bytes fills
    // the read.
    let read = (rc as usize).saturating_sub(1);
    let cut = read > USDT_STR_MAX;
    let len = if cut { USDT_STR_MAX } else { read };
    StrWord::Kept {
        len: len as u16,
        cut,
    }
}

/// One argument's value, widened to 64 bits as its size and sign say; 0 if
/// it cannot be read.
#[inline(always)]
fn read_arg(ctx: &ProbeContext, arg: &UsdtArg) -> u64 {
    let raw = match arg.kind {
        ARG_CONST => arg.value,
        ARG_REG => register(ctx, arg.base_off) >> (arg.shift & 63),
        ARG_MEM => {
            let mut address = arg.value;
            if arg.flags & ARG_HAS_BASE != 0 {
                address = address.wrapping_add(register(ctx, arg.base_off));
            }
            if arg.flags & ARG_HAS_INDEX != 0 {
                let index = register(ctx, arg.index_off);
                address = address.wrapping_add(index.wrapping_mul(arg.scale as u64));
            }
            let mut value = 0u64;
            // SAFETY: reads 8 bytes (as libbpf does) into a local; a bad
            // address only makes the helper fail. The width is cut below.
            let rc = unsafe {
                bpf_probe_read_user(
                    &mut value as *mut u64 as *mut c_void,
                    8,
                    address as *const c_void,
                )
            };
            if rc < 0 {
                return 0;
            }
            value
        }
        _ => return 0,
    };
    widen(raw, arg.size, arg.signed != 0)
}

/// A register of the probed thread, by its offset in `struct pt_regs`.
#[inline(always)]
fn register(ctx: &ProbeContext, offset: u16) -> u64 {
    let at = (ctx.as_ptr() as *const u8).wrapping_add((offset & 0xff) as usize);
    // SAFETY: reads within the kernel's pt_regs for this probe hit.
    unsafe { bpf_probe_read_kernel(at as *const u64) }.unwrap_or(0)
}
