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
//! While no tracer is attached a probe costs one load of its semaphore and a
//! branch not taken; the closure is not called. While a tracer is attached the
//! closure runs once and its values are handed to the tracer in registers.
//! Building with the `disabled` feature removes every probe: no code, no ELF
//! notes, and the closures are type-checked but never called.
//!
//! Every argument reaches the tracer as a `u64`. Addresses, program counters and
//! values accept any unsigned integer up to 64 bits (`Into<u64>`).
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
mod describe;
mod enabled;
#[doc(hidden)]
pub mod fire;
mod macros;
#[cfg(not(feature = "disabled"))]
mod site;
mod span;

pub use enabled::{any_enabled, enabled};

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
pub use span::{next_span_id, Span};
#[doc(hidden)]
pub use styx_common::guest as __guest;
pub use styx_common::{Branch, BranchKind, EventKind, InterruptKind};

/// A value a guest memory access moved. Its width is the access size the
/// tracer reports (`u8` → 1 byte, `u16` → 2, `u32` → 4, `u64` → 8).
pub trait MemValue: Copy {
    /// Bytes moved by an access of this type.
    const SIZE: u64;
    fn to_u64(self) -> u64;
}

macro_rules! mem_value {
    ($($t:ty),*) => {$(
        impl MemValue for $t {
            const SIZE: u64 = core::mem::size_of::<$t>() as u64;
            #[inline(always)]
            fn to_u64(self) -> u64 {
                self as u64
            }
        }
    )*};
}
mem_value!(u8, u16, u32, u64);
