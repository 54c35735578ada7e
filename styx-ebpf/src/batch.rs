//! Copies a thread's batch of events into one ring record (the protocol is
//! in `styx_common::batch`): the flush probe passes the buffer's head and
//! the byte range of items; the record is the head, the range, and the
//! items, stamped with the kernel's time. Ring space is reserved in one of
//! a few fixed sizes (`styx_common::batch::BATCH_RECORD_CLASSES`: the
//! verifier wants a constant), the copy bounded by it.

use crate::emit::SUBMIT_FLAGS;
use crate::{dropped, wanted, DROPS, EVENTS, FAULTS};
use aya_ebpf::helpers::bpf_get_attach_cookie;
use aya_ebpf::helpers::generated::bpf_probe_read_user;
use aya_ebpf::helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns};
use aya_ebpf::programs::ProbeContext;
use aya_ebpf::EbpfContext;
use core::ffi::c_void;
use core::mem::size_of;
use styx_common::batch::{
    BatchHead, BatchRecord, BATCH_RECORD_CLASSES as CLASSES, BATCH_RECORD_KIND,
};
use styx_common::{RecordHeader, EVENT_KIND_SLOTS};

const _: () = assert!(CLASSES.len() == 4, "one branch of flush() per class");

/// A ring record of a batch with room for `N` bytes of items.
#[repr(C)]
struct Chunk<const N: usize> {
    record: BatchRecord,
    items: [u8; N],
}

/// Arguments `(head, start, len, seq, tid[, layout])`. Slot 0 of `DROPS` and `FAULTS` counts
/// lost batches (which lossless mode's flow control counts as taken); the
/// other slots their events per kind.
#[inline(always)]
pub fn flush(ctx: &ProbeContext) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !wanted(tgid) {
        return;
    }
    // The flush site's cookie: its file's number, which names the tags of
    // the types that file declared.
    // SAFETY: the helper only reads the cookie of the running program.
    let file = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let head_at = arg(ctx, 0);
    let (start, len) = (arg(ctx, 1), arg(ctx, 2));
    let (seq, tid) = (arg(ctx, 3), arg(ctx, 4) as u32);
    let mut head = BatchHead::default();
    // SAFETY: writes into a local of the size given; a bad address only
    // makes the helper fail.
    let rc = unsafe {
        bpf_probe_read_user(
            &mut head as *mut BatchHead as *mut c_void,
            size_of::<BatchHead>() as u32,
            head_at as *const c_void,
        )
    };
    if rc < 0 {
        // Its events cannot be counted: only the batch.
        count(FAULTS.get_ptr_mut(0), 1);
        return;
    }
    let items_at = head_at + size_of::<BatchHead>() as u64 + start;
    // The batch's number and owner as the flushing thread read them.
    head.seq = seq;
    head.tid = tid;
    let place = Place {
        head: &head,
        items_at,
        start,
        len,
        tgid,
        file: file.min(u8::MAX as u64) as u8,
    };
    // The smallest record class that holds the range.
    if len <= CLASSES[0] as u64 {
        copy::<{ CLASSES[0] }, _>(ctx, &place);
    } else if len <= CLASSES[1] as u64 {
        copy::<{ CLASSES[1] }, _>(ctx, &place);
    } else if len <= CLASSES[2] as u64 {
        copy::<{ CLASSES[2] }, _>(ctx, &place);
    } else {
        copy::<{ CLASSES[3] }, _>(ctx, &place);
    }
}

/// What is being flushed, and where it is in the thread's memory.
pub struct Place<'a> {
    pub head: &'a BatchHead,
    pub items_at: u64,
    pub start: u64,
    pub len: u64,
    pub tgid: u32,
    /// The flush site's file ([`BatchRecord`]'s `aux`).
    pub file: u8,
}

#[inline(always)]
pub fn copy<const N: usize, C: EbpfContext>(ctx: &C, place: &Place<'_>) {
    let Some(mut entry) = EVENTS.reserve::<Chunk<N>>(0) else {
        count(DROPS.get_ptr_mut(0), 1);
        each_kind(place.head, |kind, n| dropped(ctx, kind, n));
        return;
    };
    let n = if place.len > N as u64 {
        N as u32
    } else {
        place.len as u32
    };
    let chunk = entry.as_mut_ptr();
    // SAFETY: `chunk` is reserved ring memory of Chunk<N>'s size; the record
    // is written whole and at most N bytes of items after it.
    let rc = unsafe {
        (*chunk).record = BatchRecord {
            header: RecordHeader {
                ts_ns: bpf_ktime_get_ns(),
                pid: place.tgid,
                // The buffer's owner: at process exit one thread flushes
                // every thread's buffer.
                tid: place.head.tid,
                kind: BATCH_RECORD_KIND,
                aux: place.file,
                _reserved: [0; 6],
            },
            head: *place.head,
            start: place.start as u32,
            len: n,
        };
        bpf_probe_read_user(
            (*chunk).items.as_mut_ptr() as *mut c_void,
            n,
            place.items_at as *const c_void,
        )
    };
    if rc < 0 {
        // A page of the range is not resident (or not mapped): the copy
        // fails whole. Counted per kind, from the head's counts.
        entry.discard(0);
        count(FAULTS.get_ptr_mut(0), 1);
        each_kind(place.head, |kind, n| {
            count(FAULTS.get_ptr_mut(kind as u32), n)
        });
        return;
    }
    entry.submit(SUBMIT_FLAGS);
}

/// Calls `f(kind, events)` for each kind the batch has events of.
#[inline(always)]
fn each_kind(head: &BatchHead, mut f: impl FnMut(u8, u64)) {
    let mut kind = 1;
    while kind < EVENT_KIND_SLOTS as usize {
        let n = head.counts[kind];
        if n != 0 {
            f(kind as u8, n as u64);
        }
        kind += 1;
    }
}

#[inline(always)]
fn count(slot: Option<*mut u64>, n: u64) {
    if let Some(slot) = slot {
        // SAFETY: a per-CPU slot: no other writer runs concurrently.
        unsafe { *slot += n };
    }
}

#[inline(always)]
fn arg(ctx: &ProbeContext, n: usize) -> u64 {
    ctx.arg::<u64>(n).unwrap_or(0)
}
