//! Byte layouts of ring-buffer records. All fields little-endian, no padding holes.

/// Bytes of a span's category kept in a record; longer ones are cut.
pub const SPAN_CATEGORY_MAX: usize = 32;
/// Bytes of a span's name kept in a record; longer ones are cut.
pub const SPAN_NAME_MAX: usize = 64;
/// Bytes of a marker's text kept in a record; longer ones are cut.
pub const MARKER_TEXT_MAX: usize = 120;

/// Starts every record (24 bytes).
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | `ts_ns`: kernel `CLOCK_MONOTONIC` time, ns |
/// | 8 | 4 | `pid`: process (thread group) id |
/// | 12 | 4 | `tid`: thread id |
/// | 16 | 1 | `kind`: [`crate::EventKind`] id |
/// | 17 | 1 | `aux`: access size in bytes for mem_read/mem_write, else 0 |
/// | 18 | 6 | zero |
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct RecordHeader {
    pub ts_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub kind: u8,
    pub aux: u8,
    pub _reserved: [u8; 6],
}

/// Header plus `N` probe arguments, each widened to u64.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ArgsRecord<const N: usize> {
    pub header: RecordHeader,
    pub args: [u64; N],
}

/// A span begin or end (136 bytes). The `*_len` fields hold the lengths the
/// emulator passed; only the first `min(len, MAX)` bytes are in the arrays.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct SpanRecord {
    pub header: RecordHeader,
    pub id: u64,
    pub category_len: u32,
    pub name_len: u32,
    pub category: [u8; SPAN_CATEGORY_MAX],
    pub name: [u8; SPAN_NAME_MAX],
}

/// A text marker (152 bytes). `len` is the length the emulator passed; only the
/// first `min(len, MARKER_TEXT_MAX)` bytes are in `text`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct MarkerRecord {
    pub header: RecordHeader,
    pub len: u32,
    pub _reserved: u32,
    pub text: [u8; MARKER_TEXT_MAX],
}

// The documented sizes are part of the format: keep them from drifting.
const _: () = assert!(core::mem::size_of::<RecordHeader>() == 24);
const _: () = assert!(core::mem::size_of::<ArgsRecord<3>>() == 48);
const _: () = assert!(core::mem::size_of::<SpanRecord>() == 136);
const _: () = assert!(core::mem::size_of::<MarkerRecord>() == 152);
