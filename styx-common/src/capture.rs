//! What a raw capture's writer holds to beyond its format, shared by the
//! writer (`styx-events`), the loader's help and summary, and the
//! benchmark's report.

/// Bytes an event (block frames included) within which a capture taken
/// while the emulator waits for the loader stores, as encoded, the blocks
/// its compressing threads are behind with rather than wait for them
/// (`--compression auto`). Storing costs the loader less CPU than
/// compressing, and the capture more bytes: a margin under 4, at which
/// 100 M events/s is the 400 MB/s most disks take.
pub const STORED_BUDGET: u64 = 3;
