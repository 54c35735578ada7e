//! The flight recorder's "the target died of a signal": as the kernel
//! delivers a signal the process does not handle and that kills it
//! (SIGSEGV, SIGABRT, …), this program copies the batches its threads still
//! hold into the ring (their last events would die with the process: no
//! exit handler runs), then writes a `FatalRecord`. The loader dumps on it.
//!
//! Attached to the `signal:signal_deliver` tracepoint only when the
//! loader records (`--flight-recorder`) one process.

use crate::batch::{copy, Place};
use crate::{EVENTS, REGISTRY_AT, TARGET_TGID};
use aya_ebpf::helpers::generated::bpf_probe_read_user;
use aya_ebpf::helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns};
use aya_ebpf::programs::TracePointContext;
use core::ffi::c_void;
use core::mem::size_of;
use styx_common::batch::{BatchHead, BATCH_BYTES, BATCH_MAGIC};
use styx_common::{FatalRecord, RecordHeader, FATAL_RECORD_KIND};

/// Registry slots read (threads tracing at once); later ones are not.
const FATAL_SLOTS: u64 = 64;

// Offsets in the tracepoint's record (tracefs `signal_deliver/format`).
const SIG_AT: usize = 8;
const CODE_AT: usize = 16;
const HANDLER_AT: usize = 24;

#[inline(always)]
pub fn deliver(ctx: &TracePointContext) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    // SAFETY: a plain read of a global the loader sets before loading.
    let target = unsafe { core::ptr::read_volatile(&TARGET_TGID) };
    if target == 0 || target != tgid {
        return;
    }
    // SAFETY: reads within the tracepoint's record.
    let (sig, code, handler) = unsafe {
        (
            ctx.read_at::<i32>(SIG_AT).unwrap_or(0),
            ctx.read_at::<i32>(CODE_AT).unwrap_or(0),
            ctx.read_at::<u64>(HANDLER_AT).unwrap_or(1),
        )
    };
    // SIG_DFL is 0; a handled signal does not kill.
    if handler != 0 || !kills(sig) {
        return;
    }
    if let Some(&registry) = REGISTRY_AT.get(0) {
        let file = REGISTRY_AT.get(1).map_or(0, |&f| f as u8);
        if registry != 0 {
            take_batches(ctx, registry, tgid, file);
        }
    }
    // A full ring loses the notice (the loader still dumps when the
    // process is gone).
    let Some(mut entry) = EVENTS.reserve::<FatalRecord>(0) else {
        return;
    };
    entry.write(FatalRecord {
        header: RecordHeader {
            // SAFETY: reads the monotonic clock.
            ts_ns: unsafe { bpf_ktime_get_ns() },
            pid: tgid,
            tid: pid_tgid as u32,
            kind: FATAL_RECORD_KIND,
            aux: 0,
            _reserved: [0; 6],
        },
        signal: sig as u32,
        code,
    });
    entry.submit(0);
}

/// Whether `sig`'s default action ends the process (signal(7)).
#[inline(always)]
fn kills(sig: i32) -> bool {
    // SIGCHLD, SIGCONT, the stop signals, SIGURG, SIGWINCH do not.
    !matches!(sig, 17..=23 | 28) && (1..=64).contains(&sig)
}

/// Copies every registered buffer's items into the ring, as the loader's
/// partial read does when it stops (see styx-loader's `session/partial.rs`).
#[inline(always)]
fn take_batches(ctx: &TracePointContext, registry: u64, tgid: u32, file: u8) {
    let mut slot = 0;
    while slot < FATAL_SLOTS {
        let mut at = 0u64;
        // SAFETY: writes into a local of the size given; a bad address only
        // makes the helper fail.
        let rc = unsafe {
            bpf_probe_read_user(
                &mut at as *mut u64 as *mut c_void,
                8,
                (registry + slot * 8) as *const c_void,
            )
        };
        if rc < 0 || at == 0 {
            break;
        }
        let mut head = BatchHead::default();
        // SAFETY: as above.
        let rc = unsafe {
            bpf_probe_read_user(
                &mut head as *mut BatchHead as *mut c_void,
                size_of::<BatchHead>() as u32,
                at as *const c_void,
            )
        };
        slot += 1;
        if rc < 0 || head.magic != BATCH_MAGIC {
            continue;
        }
        let mut len = if head.len < head.cap {
            head.len
        } else {
            head.cap
        } as u64;
        if len > BATCH_BYTES as u64 {
            len = BATCH_BYTES as u64;
        }
        if len == 0 {
            continue;
        }
        // The whole batch, also what a loader already took from it (the
        // loader gives each event once): no `len - start` the verifier
        // cannot bound.
        let place = Place {
            head: &head,
            items_at: at + size_of::<BatchHead>() as u64,
            start: 0,
            len,
            tgid,
            file,
        };
        // One size class: at a death, ring room matters less than
        // a program the verifier can follow.
        copy::<BATCH_BYTES, _>(ctx, &place);
    }
}
