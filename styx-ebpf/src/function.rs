//! A traced function's entry or return (`--functions`): which function
//! (the attach cookie) and the stack pointer, nothing else. Depth, pairing
//! and durations are the loader's, which can see an exit that never came.

use crate::emit::{header, SUBMIT_FLAGS};
use crate::{dropped, EVENTS};
use aya_ebpf::helpers::bpf_get_attach_cookie;
use aya_ebpf::programs::ProbeContext;
use aya_ebpf::EbpfContext;
use styx_common::{EventKind, FunctionRecord, FUNCTION_RECORD_KIND};

/// `at` is [`styx_common::FUNCTION_ENTRY`], [`styx_common::FUNCTION_EXIT`]
/// or [`styx_common::FUNCTION_TAIL_CALL`];
/// `popped`: how far the stack pointer has risen since the function's
/// entry (8 in a uretprobe, which runs after the `ret` popped its address).
#[inline(always)]
pub fn record(ctx: &ProbeContext, at: u8, popped: u64) {
    let kind = EventKind::Function as u8;
    let Some(header) = header(FUNCTION_RECORD_KIND, at) else {
        return;
    };
    // SAFETY: the helper only reads the cookie of the running program.
    let function = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) } as u32;
    // SAFETY: a uprobe's context is the thread's saved registers; reading
    // a field of it is a plain context access the verifier checks.
    let sp = unsafe { (*ctx.regs).rsp }.wrapping_sub(popped);
    let Some(mut entry) = EVENTS.reserve::<FunctionRecord>(0) else {
        dropped(ctx, kind, 1);
        return;
    };
    entry.write(FunctionRecord {
        header,
        function,
        _reserved: 0,
        sp,
    });
    entry.submit(SUBMIT_FLAGS);
}
