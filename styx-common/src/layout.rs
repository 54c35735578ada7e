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
    /// Kernel `CLOCK_MONOTONIC` time, ns.
    pub ts_ns: u64,
    /// Process (thread group) id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// [`crate::EventKind`] id.
    pub kind: u8,
    /// Access size in bytes for mem_read/mem_write (USDT: the argument count), else 0.
    pub aux: u8,
    /// Zero.
    pub _reserved: [u8; 6],
}

/// Header plus `N` probe arguments, each widened to u64.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ArgsRecord<const N: usize> {
    /// Time, thread and kind.
    pub header: RecordHeader,
    /// The arguments in probe order.
    pub args: [u64; N],
}

/// A span begin or end (136 bytes). The `*_len` fields hold the lengths the
/// emulator passed; only the first `min(len, MAX)` bytes are in the arrays.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct SpanRecord {
    /// Time, thread and kind.
    pub header: RecordHeader,
    /// Pairs an end with its begin.
    pub id: u64,
    /// Length of the category the emulator passed.
    pub category_len: u32,
    /// Length of the name the emulator passed.
    pub name_len: u32,
    /// The category's first bytes.
    pub category: [u8; SPAN_CATEGORY_MAX],
    /// The name's first bytes.
    pub name: [u8; SPAN_NAME_MAX],
}

/// A text marker (152 bytes). `len` is the length the emulator passed; only the
/// first `min(len, MARKER_TEXT_MAX)` bytes are in `text`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct MarkerRecord {
    /// Time, thread and kind.
    pub header: RecordHeader,
    /// Length of the text the emulator passed.
    pub len: u32,
    /// Zero.
    pub _reserved: u32,
    /// The text's first bytes.
    pub text: [u8; MARKER_TEXT_MAX],
}

/// [`RecordHeader::aux`] of a [`FunctionRecord`] at a function's entry.
pub const FUNCTION_ENTRY: u8 = 0;
/// [`RecordHeader::aux`] of a [`FunctionRecord`] at one of its `ret`s (or
/// its return, as a uretprobe).
pub const FUNCTION_EXIT: u8 = 1;
/// [`RecordHeader::aux`] of a [`FunctionRecord`] at one of its `jmp`s to
/// another function (a tail call): an exit if the stack pointer is the
/// call's (its frame is gone), else a jump within the function.
pub const FUNCTION_TAIL_CALL: u8 = 2;

/// `kind` of a [`FunctionRecord`] in the ring, past every event kind's id
/// as the ring's other record kinds
/// ([`crate::batch::BATCH_RECORD_KIND`], [`FATAL_RECORD_KIND`]); decoded,
/// the record is of kind [`crate::EventKind::Function`].
pub const FUNCTION_RECORD_KIND: u8 = 0xf1;

/// A traced function entered or about to return (40 bytes; kind
/// [`FUNCTION_RECORD_KIND`], `aux` [`FUNCTION_ENTRY`], [`FUNCTION_EXIT`]
/// or [`FUNCTION_TAIL_CALL`]). The eBPF program knows only which function and the
/// stack pointer; the loader pairs entries with exits per thread by it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct FunctionRecord {
    /// Time, thread and kind; `aux` says entry or exit.
    pub header: RecordHeader,
    /// The function's index in the session's function table (the attach
    /// cookie).
    pub function: u32,
    /// Zero.
    pub _reserved: u32,
    /// The stack pointer at the probe: at the entry and at a `ret` both
    /// point at the return address, so a call's entry and exit carry the
    /// same value.
    pub sp: u64,
}

/// `kind` of a [`FatalRecord`]: not an event type.
pub const FATAL_RECORD_KIND: u8 = 0xf0;

/// The traced process is being killed by a signal it does not handle
/// (SIGSEGV, SIGABRT, …), seen by the kernel as it delivers it (32 bytes);
/// written after the batches its threads still held.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct FatalRecord {
    /// Time, process and the thread the signal is delivered to;
    /// `kind` is [`FATAL_RECORD_KIND`].
    pub header: RecordHeader,
    /// The signal.
    pub signal: u32,
    /// Its `si_code`.
    pub code: i32,
}

// The documented sizes are part of the format: keep them from drifting.
const _: () = assert!(core::mem::size_of::<RecordHeader>() == 24);
const _: () = assert!(core::mem::size_of::<ArgsRecord<3>>() == 48);
const _: () = assert!(core::mem::size_of::<SpanRecord>() == 136);
const _: () = assert!(core::mem::size_of::<MarkerRecord>() == 152);
const _: () = assert!(core::mem::size_of::<FatalRecord>() == 32);
const _: () = assert!(core::mem::size_of::<FunctionRecord>() == 40);
