//! Records a hit of any USDT probe, reading each argument where its spec
//! (compiled by the loader from the note's argument string) says it is.

use crate::emit::header;
use crate::{dropped, EVENTS, SPECS};
use aya_ebpf::bindings::BPF_RB_NO_WAKEUP;
use aya_ebpf::helpers::generated::bpf_probe_read_user;
use aya_ebpf::helpers::{bpf_get_attach_cookie, bpf_probe_read_kernel};
use aya_ebpf::programs::ProbeContext;
use aya_ebpf::EbpfContext;
use core::ffi::c_void;
use styx_common::{
    EventKind, UsdtArg, UsdtRecord, ARG_CONST, ARG_HAS_BASE, ARG_HAS_INDEX, ARG_MEM, ARG_REG,
    MAX_USDT_ARGS,
};

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
    let Some(mut entry) = EVENTS.reserve::<UsdtRecord>(0) else {
        dropped(ctx, kind, 1);
        return;
    };
    let mut args = [0u64; MAX_USDT_ARGS];
    let mut i = 0;
    while i < MAX_USDT_ARGS {
        if i < nargs {
            args[i] = read_arg(ctx, &spec.args[i]);
        }
        i += 1;
    }
    entry.write(UsdtRecord {
        header,
        spec_id,
        _reserved: 0,
        args,
    });
    entry.submit(BPF_RB_NO_WAKEUP as u64);
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
    // Keep the low `size` bytes, sign- or zero-extended.
    let unused = (64 - (arg.size as u32 & 15) * 8) & 63;
    if arg.signed != 0 {
        (((raw << unused) as i64) >> unused) as u64
    } else {
        (raw << unused) >> unused
    }
}

/// A register of the probed thread, by its offset in `struct pt_regs`.
#[inline(always)]
fn register(ctx: &ProbeContext, offset: u16) -> u64 {
    let at = (ctx.as_ptr() as *const u8).wrapping_add((offset & 0xff) as usize);
    // SAFETY: reads within the kernel's pt_regs for this probe hit.
    unsafe { bpf_probe_read_kernel(at as *const u64) }.unwrap_or(0)
}
