//! USDT probes for CPU emulators, traced by `styx-loader` or any USDT tracer.
//!
//! Each event type is one USDT probe of the provider `styx`. Call a probe with a
//! closure that returns its arguments:
//!
//! ```
//! let (pc, addr, val) = (0x0600u16, 0x0010u16, 0x2au8);
//! styx_probe::mem_read!(|| (pc, addr, val));
//! ```
//!
//! While no tracer is attached a probe costs one load of its semaphore word, a
//! test and a branch not taken; the closure is not called. While a tracer
//! is attached the closure runs once and its values are handed to the tracer
//! in registers; a closure that returns an `Option` of its values fires
//! nothing for `None`.
//! Building with the `disabled` feature removes every probe: no code, no ELF
//! notes, and the closures are type-checked but never called.
//!
//! Addresses, program counters and values accept any unsigned integer up to
//! 64 bits ([`Value`]). In a batch each travels in its own type's width (a
//! `u16` pc takes two bytes); a tracer attached to the probe itself
//! (bpftrace) reads each as a `u64`.
//!
//! Every call site becomes its own probe site (an ELF note in your binary); all
//! sites of one event type share one semaphore.
//!
//! Work that no closure can hold, such as an interpreter loop that computes
//! what its probes report, can be gated once per block of guest instructions
//! with [`any_enabled`] or [`enabled`].

// Reached only through the macros; not part of the API.
#[cfg(not(feature = "disabled"))]
mod batch;
#[doc(hidden)]
pub mod declared;
mod describe;
mod enabled;
#[doc(hidden)]
pub mod fire;
mod macros;
#[cfg(not(feature = "disabled"))]
mod site;
mod span;

#[doc(hidden)]
pub use declared as __declared;
pub use declared::{Addr, Declared, Field, Reg};
/// Each event type's semaphore word, for styx-probe-c's C header, whose
/// inline checks read them.
#[cfg(not(feature = "disabled"))]
#[doc(hidden)]
pub use enabled::semaphores as __semaphores;
#[cfg(not(feature = "disabled"))]
#[doc(hidden)]
pub use enabled::SemaphoreWord as __SemaphoreWord;
pub use enabled::{any_enabled, enabled};
#[doc(hidden)]
pub use styx_common::schema as __schema;

/// Hands this thread's batched events to the tracer now, rather than when
/// its batch fills, the thread exits or the process exits. For an emulator
/// that pauses (at a breakpoint, between frames) and wants the reader to
/// have everything so far. Costs one probe hit while events are pending,
/// nothing otherwise.
#[inline]
pub fn flush() {
    #[cfg(not(feature = "disabled"))]
    batch::flush_pending();
}
/// Hands every thread's pending batched events to the tracer now, other
/// threads' too: what the process's exit does through the C library's
/// `atexit`, for a host that ends the process without running those
/// handlers. QEMU's user mode is one: a guest's `exit_group` ends QEMU with
/// the system call itself, after calling its plugins' exit callbacks
/// (styx-qemu calls this from its own). Threads still appending meanwhile
/// lose nothing: the tracer keeps each byte of a batch once. Costs nothing
/// while no thread has events pending.
pub fn flush_all() {
    #[cfg(not(feature = "disabled"))]
    batch::flush_all_at_exit();
}
pub use span::{next_span_id, Span};
#[doc(hidden)]
pub use styx_common::guest as __guest;
pub use styx_common::{Branch, BranchKind, EventKind, InterruptKind};

/// A value a batched probe passes (a pc, an address, a register number or
/// value, an instruction word): it travels in its type's width, so a `u16`
/// pc takes two bytes of the thread's batch, the kernel's ring and the
/// capture, and a `u64` eight. Implemented for the unsigned integers,
/// `usize` and `bool`; an emulator's own type can implement it (its
/// `bits` must fit in `BYTES` bytes: only those are kept).
pub trait Value: Copy {
    /// Bytes the value takes: 1, 2, 4 or 8.
    const BYTES: usize;
    /// The value, zero-extended.
    fn bits(self) -> u64;
}

macro_rules! value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            const BYTES: usize = core::mem::size_of::<$t>();
            #[inline(always)]
            fn bits(self) -> u64 {
                self as u64
            }
        }
    )*};
}
value!(u8, u16, u32, u64, usize, bool);

/// A value a guest memory access moved. Its width is the access size the
/// tracer reports (`u8` → 1 byte, `u16` → 2, `u32` → 4, `u64` → 8).
pub trait MemValue: Value {}

impl MemValue for u8 {}
impl MemValue for u16 {}
impl MemValue for u32 {}
impl MemValue for u64 {}
