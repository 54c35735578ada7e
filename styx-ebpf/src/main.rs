//! styx's eBPF programs. Each is attached to many USDT probe sites; the attach
//! cookie says which event type a site reports. A program reads the probe's
//! arguments from registers (styx-probe passes every argument as a u64 in the
//! next SysV argument register) and copies them into the `EVENTS` ring buffer.
#![no_std]
#![no_main]

mod batch;
mod count;
mod emit;
mod fatal;
mod filter;
mod function;
mod usdt;

use aya_ebpf::helpers::bpf_get_attach_cookie;
use aya_ebpf::macros::{map, tracepoint, uprobe};
use aya_ebpf::maps::{Array, LruHashMap, PerCpuArray, PerCpuHashMap, RingBuf};
use aya_ebpf::programs::{ProbeContext, TracePointContext};
use aya_ebpf::EbpfContext;
use aya_log_ebpf::{error, warn};
use styx_common::count::{CountKey, CountSpec, COUNT_TABLES};
use styx_common::filter::FilterProgram;
use styx_common::{EventKind, Shape, UsdtSpec, EVENT_KIND_SLOTS};

/// Default size; the loader sets the real one (`--ring-size`).
const DEFAULT_RING_BYTES: u32 = 8 << 20;

#[map]
static EVENTS: RingBuf = RingBuf::with_byte_size(DEFAULT_RING_BYTES, 0);

/// Events lost because `EVENTS` was full, per event kind, per CPU; slot 0
/// counts the batches lost so.
#[map]
static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(EVENT_KIND_SLOTS, 0);

/// Batched events lost because the copy from the thread's memory failed
/// (a page not resident), per event kind, per CPU; slot 0 counts the
/// batches lost so (and those whose head could not be read at all).
#[map]
static FAULTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(EVENT_KIND_SLOTS, 0);

/// Argument specs of the generic USDT sites, indexed by their attach cookie.
/// The loader sizes and fills it before attaching.
#[map]
static SPECS: Array<UsdtSpec> = Array::with_max_entries(1, 0);

/// A USDT record and its strings while the program builds it, per CPU.
#[map]
static USDT_SCRATCH: PerCpuArray<usdt::UsdtScratch> = PerCpuArray::with_max_entries(1, 0);

/// `--filter`/`--sample` programs by event kind (per-event delivery).
#[map]
static FILTERS: Array<FilterProgram> = Array::with_max_entries(EVENT_KIND_SLOTS, 0);

/// Events each thread's filter passed so far, per kind (`tid << 8 | kind`),
/// for `--sample`. A thread evicted from it counts again from its next event.
#[map]
static SAMPLED: LruHashMap<u64, u64> = LruHashMap::with_max_entries(65536, 0);

/// Events the filters (or sampling) left out, per kind, per CPU.
#[map]
static FILTERED: PerCpuArray<u64> = PerCpuArray::with_max_entries(EVENT_KIND_SLOTS, 0);

/// A filter program's stack of truth values, per CPU.
#[map]
static SCRATCH: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// Non-zero when `FILTERS` holds programs: saves the lookup otherwise.
#[no_mangle]
static FILTERING: u32 = 0;

/// `top`: per table and kind (`table * EVENT_KIND_SLOTS + kind`), where
/// the key is.
#[map]
static COUNT_SPECS: Array<CountSpec> = Array::with_max_entries(COUNT_TABLES * EVENT_KIND_SLOTS, 0);

/// `top`: events counted per key, per CPU; the loader sizes it (`--max-keys`).
#[map]
static COUNTS: PerCpuHashMap<CountKey, u64> = PerCpuHashMap::with_max_entries(1, 0);

/// `top`: events whose key did not fit `COUNTS`, per table and kind, per CPU.
#[map]
static COUNT_OTHER: PerCpuArray<u64> =
    PerCpuArray::with_max_entries(COUNT_TABLES * EVENT_KIND_SLOTS, 0);

/// `--flight-recorder`: where the traced process's batch registry is (0:
/// not known yet), for `styx_fatal`.
#[map]
static REGISTRY_AT: Array<u64> = Array::with_max_entries(2, 0);

/// Non-zero: per-event events are counted in `COUNTS`, not written.
#[no_mangle]
static COUNTING: u32 = 0;

/// Only events from this process are kept (0: any). Several processes can map
/// one binary, and every program attached to a site runs for all of them.
#[no_mangle]
static TARGET_TGID: u32 = 0;

#[uprobe]
pub fn styx_args2(ctx: ProbeContext) -> u32 {
    emit::args::<2>(&ctx, Shape::Args(2));
    0
}

#[uprobe]
pub fn styx_args3(ctx: ProbeContext) -> u32 {
    emit::args::<3>(&ctx, Shape::Args(3));
    0
}

#[uprobe]
pub fn styx_args4(ctx: ProbeContext) -> u32 {
    emit::args::<4>(&ctx, Shape::Args(4));
    0
}

#[uprobe]
pub fn styx_insn(ctx: ProbeContext) -> u32 {
    emit::args::<2>(&ctx, Shape::ArgsAux(2));
    0
}

#[uprobe]
pub fn styx_mem(ctx: ProbeContext) -> u32 {
    emit::args::<3>(&ctx, Shape::ArgsAux(3));
    0
}

#[uprobe]
pub fn styx_span(ctx: ProbeContext) -> u32 {
    emit::span(&ctx);
    0
}

#[uprobe]
pub fn styx_marker(ctx: ProbeContext) -> u32 {
    emit::marker(&ctx);
    0
}

/// A thread's batch of events (`styx_batch:flush`); a full ring loses it,
/// counted per event kind.
#[uprobe]
pub fn styx_batch(ctx: ProbeContext) -> u32 {
    batch::flush(&ctx);
    0
}

/// The traced process is being killed by a signal (`signal:signal_deliver`).
#[tracepoint]
pub fn styx_fatal(ctx: TracePointContext) -> u32 {
    fatal::deliver(&ctx);
    0
}

/// Any USDT probe: the cookie indexes its argument spec in `SPECS`.
#[uprobe]
pub fn styx_usdt(ctx: ProbeContext) -> u32 {
    usdt::record(&ctx);
    0
}

/// A traced function's first instruction (`--functions`); the cookie is
/// its index in the session's function table.
#[uprobe]
pub fn styx_fn_entry(ctx: ProbeContext) -> u32 {
    function::record(&ctx, styx_common::FUNCTION_ENTRY, 0);
    0
}

/// One of a traced function's `ret` instructions: a uprobe there, not a
/// uretprobe, which would swap the return address on the stack and make
/// an unwinder passing through (a C++ exception, a Rust panic) abort.
#[uprobe]
pub fn styx_fn_exit(ctx: ProbeContext) -> u32 {
    function::record(&ctx, styx_common::FUNCTION_EXIT, 0);
    0
}

/// One of a traced function's `jmp`s to another function (a tail call),
/// with `ret` probes: the loader ends the call there if the stack pointer
/// is the call's.
#[uprobe]
pub fn styx_fn_tail(ctx: ProbeContext) -> u32 {
    function::record(&ctx, styx_common::FUNCTION_TAIL_CALL, 0);
    0
}

/// A traced function's return as a uretprobe (`--function-exits
/// uretprobe`): it runs after the `ret`, the stack pointer 8 bytes above
/// where it was at the entry; the record carries the entry's value.
#[uprobe]
pub fn styx_fn_return(ctx: ProbeContext) -> u32 {
    function::record(&ctx, styx_common::FUNCTION_EXIT, 8);
    0
}

/// The event kind this site reports, if the cookie names one of `shape`,
/// and the cookie.
#[inline(always)]
fn site_kind(ctx: &ProbeContext, shape: Shape) -> Option<(u8, u64)> {
    // SAFETY: the helper only reads the cookie of the running program.
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let id = cookie as u8;
    match EventKind::from_id(id) {
        Some(kind) if kind.shape() == shape => Some((id, cookie)),
        _ => {
            error!(
                ctx,
                "styx: site cookie {} does not fit this program", cookie
            );
            None
        }
    }
}

/// Whether events of the current process are wanted.
#[inline(always)]
fn wanted(tgid: u32) -> bool {
    // SAFETY: a plain read of a global the loader sets before loading.
    let target = unsafe { core::ptr::read_volatile(&TARGET_TGID) };
    target == 0 || target == tgid
}

/// Counts `lost` events the ring had no room for; logs when the count
/// passes a power of two, per CPU, so a full ring cannot flood the log too.
#[inline(always)]
fn dropped<C: EbpfContext>(ctx: &C, kind: u8, lost: u64) {
    let Some(count) = DROPS.get_ptr_mut(kind as u32) else {
        return;
    };
    // SAFETY: per-CPU slot, so no other writer runs concurrently.
    let (before, n) = unsafe {
        let before = *count;
        *count += lost;
        (before, *count)
    };
    if (before ^ n) > before {
        warn!(
            ctx,
            "styx: ring buffer full: {} events of kind {} dropped on this CPU", n, kind
        );
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}
