//! `--filter` and `--sample` for per-event delivery: an event the loader's
//! program for its type leaves out is counted in `FILTERED` and never
//! reserves ring space. The programs are styx-common's
//! (`FilterProgram::keeps`, the loader runs the same code on batched events).

use crate::{FILTERED, FILTERING, FILTERS, SAMPLED, SCRATCH};
use styx_common::filter::{FilterProgram, VALUE_SLOTS};
use styx_common::RecordHeader;

/// Whether to write an event of `header` with these value slots (its
/// record's arguments in catalogue order, its size, thread and process).
#[inline(always)]
pub fn keeps(header: &RecordHeader, values: &[u64; VALUE_SLOTS]) -> bool {
    // SAFETY: a plain read of a global the loader sets before loading.
    if unsafe { core::ptr::read_volatile(&FILTERING) } == 0 {
        return true;
    }
    let kind = header.kind;
    let Some(program) = FILTERS.get(kind as u32) else {
        return true;
    };
    if program.flags & FilterProgram::KERNEL == 0 || program.keeps_all() {
        return true;
    }
    // The stack of truth values in map memory (see FilterProgram::run).
    let Some(stack) = SCRATCH.get_ptr_mut(0) else {
        return true;
    };
    // SAFETY: this CPU's slot; a probe program is not preempted by another.
    let stack = unsafe {
        *stack = 1;
        &mut *stack
    };
    // Text tests never reach the kernel (no KERNEL flag).
    if !program.run(values, stack, |_, _, _| false) {
        left_out(kind);
        return false;
    }
    let every = program.sample_every;
    if every > 1 {
        // One thread runs on one CPU at a time: its counter has one writer.
        let key = ((header.tid as u64) << 8) | kind as u64;
        match SAMPLED.get_ptr_mut(key) {
            Some(passed) => {
                // SAFETY: a map value of this thread's only.
                let n = unsafe { *passed };
                unsafe { *passed = n + 1 };
                if n % every != 0 {
                    left_out(kind);
                    return false;
                }
            }
            None => {
                // The thread's first: kept.
                let _ = SAMPLED.insert(key, 1, 0);
            }
        }
    }
    true
}

#[inline(always)]
fn left_out(kind: u8) {
    if let Some(count) = FILTERED.get_ptr_mut(kind as u32) {
        // SAFETY: per-CPU slot: no other writer runs concurrently.
        unsafe { *count += 1 };
    }
}
