//! Fills ring-buffer records from a probe's arguments.

use crate::{count, dropped, filter, site_kind, wanted, EVENTS};
use aya_ebpf::bindings::BPF_RB_NO_WAKEUP;
use aya_ebpf::helpers::generated::bpf_probe_read_user;
use aya_ebpf::helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns};
use aya_ebpf::maps::ring_buf::RingBufEntry;
use aya_ebpf::programs::ProbeContext;
use core::ffi::c_void;
use styx_common::filter::{SLOT_PID, SLOT_SIZE, SLOT_TID, VALUE_SLOTS};
use styx_common::{ArgsRecord, MarkerRecord, RecordHeader, Shape, SpanRecord, COOKIE_HAS_AUX_ARG};

// No wake-up per event (~0.9 µs each): the loader drains on a short timer.
pub(crate) const SUBMIT_FLAGS: u64 = BPF_RB_NO_WAKEUP as u64;

/// The header for an event of `kind` from the current thread, or None if the
/// process is not the one being traced.
#[inline(always)]
pub(crate) fn header(kind: u8, aux: u8) -> Option<RecordHeader> {
    let mut header = untimed_header(kind, aux)?;
    stamp(&mut header);
    Some(header)
}

/// The time: read only for events that are kept (a clock read is ~60 ns).
#[inline(always)]
fn stamp(header: &mut RecordHeader) {
    // SAFETY: reads the monotonic clock; no arguments.
    header.ts_ns = unsafe { bpf_ktime_get_ns() };
}

/// [`header`] without its time yet.
#[inline(always)]
fn untimed_header(kind: u8, aux: u8) -> Option<RecordHeader> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !wanted(tgid) {
        return None;
    }
    Some(RecordHeader {
        ts_ns: 0,
        pid: tgid,
        tid: pid_tgid as u32,
        kind,
        aux,
        _reserved: [0; 6],
    })
}

/// The header and room for a `T` in the ring, for a site of `shape`; None
/// when the event is not wanted here, the filters leave it out (`values`:
/// its numbers, see `filter::keeps`), or the ring is full (counted).
#[inline(always)]
fn begin<T: 'static>(
    ctx: &ProbeContext,
    shape: Shape,
    values: &mut [u64; VALUE_SLOTS],
) -> Option<(RecordHeader, RingBufEntry<T>)> {
    let (kind, cookie) = site_kind(ctx, shape)?;
    // Memory accesses carry their size, instructions their length (probe
    // argument n), in the header: where the site passes it.
    let aux = match shape {
        Shape::ArgsAux(n) if cookie & COOKIE_HAS_AUX_ARG != 0 => arg(ctx, n) as u8,
        _ => 0,
    };
    let mut header = untimed_header(kind, aux)?;
    values[SLOT_SIZE as usize] = aux as u64;
    values[SLOT_TID as usize] = header.tid as u64;
    values[SLOT_PID as usize] = header.pid as u64;
    if !filter::keeps(&header, values) {
        return None;
    }
    if count::counting() {
        count::count(kind, values);
        return None;
    }
    stamp(&mut header);
    match EVENTS.reserve::<T>(0) {
        Some(entry) => Some((header, entry)),
        None => {
            dropped(ctx, kind, 1);
            None
        }
    }
}

#[inline(always)]
fn arg(ctx: &ProbeContext, n: usize) -> u64 {
    ctx.arg::<u64>(n).unwrap_or(0)
}

/// N plain u64 arguments.
#[inline(always)]
pub fn args<const N: usize>(ctx: &ProbeContext, shape: Shape) {
    let mut values = [0u64; VALUE_SLOTS];
    let mut args = [0u64; N];
    let mut i = 0;
    while i < N {
        args[i] = arg(ctx, i);
        values[i & 3] = args[i];
        i += 1;
    }
    let Some((header, mut entry)) = begin::<ArgsRecord<N>>(ctx, shape, &mut values) else {
        return;
    };
    entry.write(ArgsRecord { header, args });
    entry.submit(SUBMIT_FLAGS);
}

/// Probe arguments (category, category_len, name, name_len, id).
#[inline(always)]
pub fn span(ctx: &ProbeContext) {
    // A span's one number: its id.
    let mut values = [arg(ctx, 4), 0, 0, 0, 0, 0, 0, 0];
    let Some((header, mut entry)) = begin::<SpanRecord>(ctx, Shape::Span, &mut values) else {
        return;
    };
    let (category_len, name_len) = (arg(ctx, 1), arg(ctx, 3));
    let record = entry.as_mut_ptr();
    // SAFETY: `record` points at reserved ring memory of SpanRecord's size;
    // every byte is written before submit (the kernel does not zero it).
    unsafe {
        core::ptr::write_bytes(record, 0, 1);
        (*record).header = header;
        (*record).id = arg(ctx, 4);
        (*record).category_len = saturate(category_len);
        (*record).name_len = saturate(name_len);
        copy_user(&mut (*record).category, arg(ctx, 0), category_len);
        copy_user(&mut (*record).name, arg(ctx, 2), name_len);
    }
    entry.submit(SUBMIT_FLAGS);
}

/// Probe arguments (text, text_len).
#[inline(always)]
pub fn marker(ctx: &ProbeContext) {
    let mut values = [0u64; VALUE_SLOTS];
    let Some((header, mut entry)) = begin::<MarkerRecord>(ctx, Shape::Marker, &mut values) else {
        return;
    };
    let len = arg(ctx, 1);
    let record = entry.as_mut_ptr();
    // SAFETY: as in `span`.
    unsafe {
        core::ptr::write_bytes(record, 0, 1);
        (*record).header = header;
        (*record).len = saturate(len);
        copy_user(&mut (*record).text, arg(ctx, 0), len);
    }
    entry.submit(SUBMIT_FLAGS);
}

#[inline(always)]
fn saturate(len: u64) -> u32 {
    if len > u32::MAX as u64 {
        u32::MAX
    } else {
        len as u32
    }
}

/// Copies up to `M` bytes of a user string; on a fault the bytes stay zero.
#[inline(always)]
fn copy_user<const M: usize>(dst: &mut [u8; M], src: u64, len: u64) {
    let n = if len > M as u64 { M as u32 } else { len as u32 };
    if n == 0 {
        return;
    }
    // SAFETY: dst has room for n <= M bytes; a bad src only makes the helper fail.
    let rc =
        unsafe { bpf_probe_read_user(dst.as_mut_ptr() as *mut c_void, n, src as *const c_void) };
    if rc < 0 {
        dst.fill(0);
    }
}
