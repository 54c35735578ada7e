//! The raw capture format (`-o raw`): compact, streamed, versioned, and
//! readable up to its last whole block (or record) when cut short.
//!
//! ```text
//! file    := MAGIC version:u32le header_len:u32le header body
//! body    := block*                   versions 3 to 6 (see `blocks.rs`)
//!          | record*                  versions 1 and 2
//! block   := frame (stored payload)   payload := record*, deltas afresh
//! MAGIC   := "STYXCAP\0"
//! header  := header_len bytes of JSON (see [`Header`]): host, kernel, pid,
//!            executable, the clock mapping, the event table (names, argument
//!            names and types) and the other providers' probes (provider,
//!            probe, argument types and signedness), by spec id
//! record  := tag:u8 body
//! ```
//!
//! The low nibble of `tag` is the event kind id (1 to 15); 0 marks a meta
//! record. Event records:
//!
//! | part | encoding |
//! |---|---|
//! | `tag` bit 4 | a thread index follows (varint), else the thread of the previous record |
//! | `tag` bits 5–7 | `aux` (the access size): 0 → 0; 1–4 → 1, 2, 4, 8; 7 → a varint follows |
//! | time | zigzag varint of `ts_ns` minus the previous record's (records arrive in ring order, which can step back across CPUs) |
//! | arguments | per argument, zigzag varint of its difference from the same argument of the previous event of the same kind |
//! | span | id as an argument; then category and name as strings |
//! | marker | the text as a string |
//! | usdt | spec id varint, then `aux` arguments as above, then (from version 2) its strings' bytes: varint length, the bytes (each string argument's length is in its argument, `styx_common::StrWord`) |
//! | function | `aux` 0 entry, 1 exit, 2 exit by a tail call; arguments function id, sp, depth, duration ns + 1 (0: unknown), unwound (0/1) |
//! | string | varint `kept_len << 1 \| truncated`, then the bytes kept |
//!
//! Meta records: `0x00` THREAD `pid tid` (varints) defines the next thread
//! index (0, 1, …) and makes it the current thread; `0x10` END closes the
//! capture: `events` then `dropped` (varints), then per event kind with
//! either non-zero `kind:u8 events dropped`, ended by kind 0; `0x20` BATCH
//! `len` (varint) then a batch record as the eBPF program wrote it, up to
//! the end of its items (see `styx_common::batch`: 136 bytes, then the
//! items, at most [`MAX_BATCH_RECORD`] in all; not the rest of the ring
//! space the flush reserved), which the reader splits into its events;
//! from version 6 `0x30` BATCH_DELTAS, the same with its items delta coded
//! (a batch of one type's events, coded by the worker compressing its
//! block: `deltas.rs`). BATCH records change neither the current thread nor the previous values
//! deltas are taken from.
//!
//! Batches are stored as they come, not re-encoded per event: that keeps the
//! loader at ~1 ns an event where re-encoding costs ~25 ns and cannot keep
//! up with batched delivery. Their items carry each value in the width the
//! emulator gave it (`styx_common::item`: a 16-bit guest's `mem_read` 8
//! bytes, a 64-bit one's 27) plus 10 bytes per time mark every ~1 KiB;
//! version 1 took 8 bytes per value. Events delivered one hit each keep the
//! delta encoding below.
//!
//! Deltas against the previous value make the common case small: a
//! `mem_read` a few µs after the last event, at a nearby pc and address,
//! takes 1 + 2 + 1 + 1–3 + 1–2 bytes, about 8 (a ring record is 56).
//!
//! Every record is complete in itself once the ones before it (in its
//! block) are read, and every block once its frame is, so a capture that
//! ends in the middle of one (loader killed, disk full) is read up to its
//! last whole block (version 1 and 2: record); without an END record the
//! reader warns that it was cut short, how many trailing bytes it dropped
//! and, from a whole frame, how many events they held. Blocks are
//! compressed on worker threads (`blocks.rs`) and, being independent, read
//! in parallel (`parallel.rs`). A version 3 capture's header is written
//! with its first block (or its end), not as it opens: a command the
//! loader starts maps its files only after that, and the header says
//! where (the heap's callers are named by it). The writer
//! keeps a fixed amount of state (the previous values, one buffer, the thread
//! table), so memory stays bounded however long it runs.

mod blocks;
mod deltas;
mod parallel;
mod reader;
mod varint;
mod writer;

pub use blocks::Compression;
pub use deltas::BatchDeltas;
pub use parallel::{read_blocks, MakeFormatter, ParallelError};
pub use reader::{Block, CaptureError, Ending, Reader};
pub use writer::{CaptureWriter, HELD_AT_MOST};

/// The first bytes of every capture.
pub const MAGIC: &[u8; 8] = b"STYXCAP\0";
/// The format version this loader writes, of blocks; it reads this one
/// and back to [`OLDEST_VERSION`]. Version 6: a batch of one type's events
/// may be a BATCH_DELTAS record (`deltas.rs`), which a reader of version 5
/// would take for a corrupt block; it refuses version 6 in one line
/// instead.
pub const VERSION: u32 = 6;
/// Blocks, as version 6, without BATCH_DELTAS records; they may be lz4
/// (codec 2, `blocks.rs`), which a reader of version 4 would take for a
/// corrupt block.
pub const LZ4_BLOCKS_VERSION: u32 = 5;
/// Blocks, as version 5, zstd or stored only: batches of up to 64 KiB
/// (`styx_common::batch::BATCH_BYTES`), which a reader of version 3 would
/// take for a corrupt capture.
pub const ZSTD_BLOCKS_VERSION: u32 = 4;
/// Blocks, as version 4, with batches of up to 16 KiB.
pub const BLOCKS_16K_VERSION: u32 = 3;
/// The last version whose records follow the header straight.
pub const STREAM_VERSION: u32 = 2;
/// The oldest version this loader reads: version 1's batch items carried a
/// `u64` per value (`styx_common::item::v1`), and its USDT records no
/// strings (no `--probe-args`).
pub const OLDEST_VERSION: u32 = 1;

/// The longest header a reader takes, in bytes. A header lists the event
/// types and the probes of other providers traced (a few hundred bytes
/// each), so even tens of thousands of probes stay far below; a longer one
/// is refused rather than read into memory.
pub const MAX_HEADER: usize = 16 << 20;

/// A block is handed on once its payload holds this many bytes: big
/// enough for zstd to find the repeats, small enough that a cut capture
/// loses little and that parallel `read` has blocks to share out.
pub const BLOCK_TARGET: usize = 1 << 20;

/// The largest payload a reader takes: a full block plus the record
/// that filled it and the END record, with room to spare.
pub const MAX_BLOCK_PAYLOAD: usize = 2 * BLOCK_TARGET;

/// Meta record tags (kind nibble 0).
const TAG_THREAD: u8 = 0x00;
const TAG_END: u8 = 0x10;
const TAG_BATCH: u8 = 0x20;
const TAG_BATCH_DELTAS: u8 = 0x30;

/// The longest batch record a capture holds (and a reader takes).
pub const MAX_BATCH_RECORD: usize =
    core::mem::size_of::<styx_common::batch::BatchRecord>() + styx_common::batch::BATCH_BYTES;

/// The most bytes a BATCH record takes: tag, length, record.
const MAX_BATCH_ENTRY: usize = 1 + 10 + MAX_BATCH_RECORD;
/// Event tag bit: a thread index follows.
const TAG_THREAD_FOLLOWS: u8 = 0x10;
/// Event tag bits 5-7: how `aux` is stored.
const AUX_SHIFT: u8 = 5;
const AUX_EXPLICIT: u8 = 7;

/// The most bytes one record can take: a USDT record with 12 ten-byte
/// arguments and its strings, plus tag, thread and time.
pub const MAX_RECORD: usize = 1 + 10 + 10 + 10 + 10 + 12 * 10 + 10 + styx_common::USDT_STRINGS_MAX;

/// Arguments kept per kind for delta coding (a USDT probe's at most).
const ARG_SLOTS: usize = styx_common::MAX_USDT_ARGS;

fn aux_code(aux: u8) -> u8 {
    match aux {
        0 => 0,
        1 => 1,
        2 => 2,
        4 => 3,
        8 => 4,
        _ => AUX_EXPLICIT,
    }
}

const fn aux_from_code(code: u8) -> Option<u8> {
    match code {
        0 => Some(0),
        1..=4 => Some(1 << (code - 1)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
