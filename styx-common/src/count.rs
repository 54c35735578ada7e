//! `top`'s counting in the kernel (per-event delivery): instead of writing
//! an event to the ring, the eBPF programs count it in a hash map under its
//! key. Up to [`COUNT_TABLES`] tables count at once (`--by`, and pages of
//! memory accesses for `--heatmap`); a key that no longer fits the map is
//! counted in its type's "other" slot.

/// Tables counted at once.
pub const COUNT_TABLES: u32 = 2;

/// Where one event type's key is, for one table (16 bytes): as a filter
/// test reads a value slot, `(slot >> shift) & mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct CountSpec {
    /// Non-zero: the type is counted in this table.
    pub active: u8,
    /// The value slot (see [`crate::filter`]).
    pub slot: u8,
    /// Shifted right first.
    pub shift: u8,
    /// Zero.
    pub _reserved: [u8; 5],
    /// Then masked.
    pub mask: u64,
}

/// A counted key (16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct CountKey {
    /// The event kind id.
    pub kind: u8,
    /// Which table.
    pub table: u8,
    /// Zero.
    pub _reserved: [u8; 6],
    /// The key.
    pub key: u64,
}

const _: () = assert!(core::mem::size_of::<CountSpec>() == 16);
const _: () = assert!(core::mem::size_of::<CountKey>() == 16);
