//! The one record layout styx's eBPF programs write and its loader reads, plus the
//! event catalogue (probe names, argument names) both sides and the probes share.
//!
//! Every record in the ring buffer starts with a [`RecordHeader`] (24 bytes). What
//! follows depends on the event's [`Shape`]:
//! - [`Shape::Args`]`(n)`: `n` little-endian `u64` arguments ([`ArgsRecord`]);
//! - [`Shape::Span`]: a [`SpanRecord`] (id, category and name, truncated to fit);
//! - [`Shape::Marker`]: a [`MarkerRecord`] (the text, truncated to fit);
//! - [`Shape::Usdt`]: a [`UsdtRecord`] (any USDT probe's arguments);
//! - [`Shape::Function`]: a [`FunctionRecord`] (a traced function's entry or exit).
//!
//! A batch of events is one record too: a [`batch::BatchRecord`] and the
//! events' items (see [`batch`]).
//!
//! The kernel's ring buffer adds an 8-byte header to every record and rounds its
//! size up to 8, so a `mem_read` (24 + 3 × 8 = 48 bytes) costs 56 bytes of ring.
#![no_std]
#![warn(missing_docs)]

#[cfg(feature = "summary")]
extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod batch;
mod branch;
pub mod capture;
pub mod count;
mod event;
pub mod filter;
pub mod guest;
pub mod guest_marker;
pub mod item;
mod layout;
pub mod schema;
// Its names say what they hold; comments only where they add to them.
#[cfg(feature = "summary")]
#[allow(missing_docs)]
pub mod summary;
mod usdt;

pub use branch::{Branch, BranchKind, InterruptKind};
pub use event::{
    Delivery, EventKind, FieldDef, FieldType, Shape, COOKIE_HAS_AUX_ARG, EVENT_KIND_SLOTS, PROVIDER,
};
pub use layout::{
    ArgsRecord, FatalRecord, FunctionRecord, MarkerRecord, RecordHeader, SpanRecord,
    FATAL_RECORD_KIND, FUNCTION_ENTRY, FUNCTION_EXIT, FUNCTION_RECORD_KIND, FUNCTION_TAIL_CALL,
    MARKER_TEXT_MAX, SPAN_CATEGORY_MAX, SPAN_NAME_MAX,
};
pub use usdt::{
    is_arg_name, widen, ArgType, StrWord, UsdtArg, UsdtRecord, UsdtSpec, ARG_CONST, ARG_HAS_BASE,
    ARG_HAS_INDEX, ARG_MEM, ARG_REG, ARG_STRING, MAX_ARG_NAME, MAX_USDT_ARGS, USDT_STRINGS_MAX,
    USDT_STR_MAX,
};

/// Whether `a` and `b` are the same string, in a constant (`==` on `str`
/// is not `const`).
pub const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
