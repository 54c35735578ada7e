//! `top` with per-event delivery: an event is counted under its key in
//! `COUNTS` (see `styx_common::count`) instead of being written to the ring.
//! The counts are per CPU (no atomic adds in BPF here); the loader sums them.

use crate::{COUNTING, COUNTS, COUNT_OTHER, COUNT_SPECS};
use aya_ebpf::bindings::BPF_NOEXIST;
use styx_common::count::{CountKey, COUNT_TABLES};
use styx_common::filter::VALUE_SLOTS;
use styx_common::EVENT_KIND_SLOTS;

/// Whether the session counts rather than streams.
#[inline(always)]
pub fn counting() -> bool {
    // SAFETY: a plain read of a global the loader sets before loading.
    unsafe { core::ptr::read_volatile(&COUNTING) != 0 }
}

/// Counts an event of `kind` with these values in every table that counts it.
#[inline(always)]
pub fn count(kind: u8, values: &[u64; VALUE_SLOTS]) {
    let mut table = 0;
    while table < COUNT_TABLES {
        let index = table * EVENT_KIND_SLOTS + (kind as u32 & (EVENT_KIND_SLOTS - 1));
        if let Some(spec) = COUNT_SPECS.get(index) {
            if spec.active != 0 {
                let key = CountKey {
                    kind,
                    table: table as u8,
                    _reserved: [0; 6],
                    key: (values[spec.slot as usize & (VALUE_SLOTS - 1)] >> (spec.shift & 63))
                        & spec.mask,
                };
                if !add(&key) {
                    if let Some(other) = COUNT_OTHER.get_ptr_mut(index) {
                        // SAFETY: per-CPU slot: no other writer runs concurrently.
                        unsafe { *other += 1 };
                    }
                }
            }
        }
        table += 1;
    }
}

/// Adds 1 to `key`'s count; false if the map is full.
#[inline(always)]
fn add(key: &CountKey) -> bool {
    if let Some(count) = COUNTS.get_ptr_mut(key) {
        increment(count);
        return true;
    }
    if COUNTS.insert(key, 1, BPF_NOEXIST as u64).is_ok() {
        return true;
    }
    // Another CPU may have inserted it meanwhile (this CPU's value is then
    // 0); else the map is full.
    match COUNTS.get_ptr_mut(key) {
        Some(count) => {
            increment(count);
            true
        }
        None => false,
    }
}

#[inline(always)]
fn increment(count: *mut u64) {
    // SAFETY: this CPU's value of a live per-CPU map entry: no other writer
    // runs concurrently.
    unsafe { *count += 1 };
}
