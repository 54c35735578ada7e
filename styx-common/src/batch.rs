//! Batched delivery: one probe hit per batch of events instead of one per
//! event (a uprobe trap costs ~0.6 µs; appending an event ~2 ns).
//!
//! How it works, end to end:
//! 1. Each event type has one 32-bit semaphore word ([`Semaphore`]): its low
//!    half counts the tracers attached to the type's per-event sites
//!    (bpftrace, `--delivery per-event`), its high half those attached to the
//!    type's *batch-enable* site, a probe `styx_batch:<type>` that never runs
//!    and exists only so that attaching to it raises that half. A probe call
//!    loads the word once: zero means detached, as before.
//! 2. While the high half is raised, the emulator thread appends the event to
//!    its own buffer: a [`BatchHead`] followed by [`BATCH_BYTES`] of items.
//!    An item ([`crate::item`]) is a 16-bit tag and the event's values, each
//!    in the width the emulator gave it, or a time mark (the thread's
//!    `CLOCK_MONOTONIC` read, written before the first event at or past
//!    every [`MARK_EVERY_BYTES`]).
//! 3. When the buffer is full, at `styx_probe::flush()`, before a per-event
//!    type's probe fires, at thread exit and at process exit, the thread
//!    fires `styx_batch:flush(head, start, len, seq, tid, layout)`. The eBPF program copies
//!    head and items whole into one ring record ([`BatchRecord`] + items),
//!    stamped with the kernel's time: the end of the batch.
//! 4. The loader splits the record into events, timing each by
//!    interpolating between the marks around it (and the flush time).
//!
//! A batch is identified by its buffer (process, [`BatchHead::tid`],
//! [`BatchHead::buffer`]) and its number there ([`BatchHead::seq`], which
//! only grows: a buffer passes from an exited thread to a new one, and the
//! kernel gives thread ids out again, so a thread id alone names no
//! sequence). The same bytes may reach the loader twice (a process exiting
//! flushes other threads' partial batches while they run; a loader stopping
//! reads them from the process), and the loader keeps each byte of a batch
//! once. A record that repeats a batch's number with other bytes, or comes
//! after later batches of its buffer than the loader remembers, is kept
//! whole and reported: only a forged batch, or a buffer read as it changed,
//! makes one.

use crate::EVENT_KIND_SLOTS;

/// Provider of the batch probes: `styx_batch:flush` and one enable probe per
/// batched event type, named as the type (`styx_batch:mem_read`).
pub const BATCH_PROVIDER: &str = "styx_batch";

/// The probe a thread fires to hand over a batch: arguments
/// `(head, start, len, seq, tid, layout)`, the buffer's [`BatchHead`], the
/// byte range of items to copy, the batch's number and owner as the
/// flushing thread read them (at process exit one thread flushes every
/// thread's buffer, whose head may have moved on by the time the probe
/// fires), and [`BATCH_LAYOUT_VERSION`].
///
/// The sixth argument came with layout 4 (64 KiB buffers): a loader that
/// knows only the five-argument site (layout 3 and before, 16 KiB, whose
/// eBPF program would copy only the first 16 KiB of a batch) does not take
/// the site as its flush site, and takes the file's events one probe hit
/// each, with a warning, instead of losing most of each batch. A loader
/// takes both sites: a five-argument site's batches are of at most
/// 16 KiB, and its copies are as long as each batch.
pub const FLUSH_PROBE: &str = "flush";

/// Bytes of items a thread's buffer holds (64 KiB: batches of ~2,000
/// memory accesses, one flush probe hit each). Measured against 16 KiB
/// (8 alternating rounds, one machine, 0 dropped): the demo traced at all
/// types to /dev/null 27.3 → 30.1 M instructions/s (median, +10%), a tight
/// loop of memory reads 4.03 → 3.12 ns/event (1.29×): fewer flush traps
/// (~0.5 µs each) per event. (The first prototype: 111 M events/s at 4 KiB,
/// 190–270 M/s at 16 KiB.)
pub const BATCH_BYTES: usize = 64 * 1024;

/// The sizes of ring records' items a flush reserves, smallest first, the
/// last [`BATCH_BYTES`]: a flush of `len` bytes takes the first that holds
/// them. The eBPF program reserves ring space in fixed sizes (the verifier
/// wants a constant), so a partial batch (`flush()`, before a per-event
/// type's event, thread exit) takes at most 4× its bytes of ring, not a
/// full batch's.
pub const BATCH_RECORD_CLASSES: [usize; 4] = [1024, 4 * 1024, 16 * 1024, BATCH_BYTES];

/// A time mark is written before the first event at or past every this many
/// bytes of a batch (and before its first event): ~128 memory accesses of a
/// 16-bit guest, ~37 of one with 64-bit values.
pub const MARK_EVERY_BYTES: u32 = 1024;

/// [`BatchHead::magic`]: "styx" little-endian.
pub const BATCH_MAGIC: u32 = u32::from_le_bytes(*b"styx");

/// [`BatchHead::seq`] of a batch of one event, fired by a thread being torn
/// down after its buffer was released: never a duplicate of another.
pub const ALONE_SEQ: u64 = u64::MAX;

/// Kind byte of a [`BatchRecord`] in the ring: past every event kind's id,
/// as the ring's other records that are not one event each
/// ([`crate::FUNCTION_RECORD_KIND`], [`crate::FATAL_RECORD_KIND`]).
pub const BATCH_RECORD_KIND: u8 = 0xf2;

/// An event type's semaphore word: low half per-event tracers, high half
/// batch tracers, both counted up and down by the kernel.
#[repr(C, align(4))]
pub struct Semaphore {
    /// Raised by attaching to the type's per-event sites (the note's
    /// semaphore address).
    pub per_event: u16,
    /// Raised by attaching to the type's batch-enable site (semaphore
    /// address + 2).
    pub batched: u16,
}

/// Offset of [`Semaphore::batched`]: what the batch-enable note adds to the
/// semaphore's address.
pub const BATCHED_HALF_OFFSET: u64 = 2;

/// The start of a thread's batch buffer, in the emulator's memory (104 bytes);
/// the items follow it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct BatchHead {
    /// [`BATCH_MAGIC`].
    pub magic: u32,
    /// The owning thread's id.
    pub tid: u32,
    /// The batch's number in this thread, from 0; the owner counts it up
    /// after each flush.
    pub seq: u64,
    /// Bytes of items in this batch (written by the owner only).
    pub len: u32,
    /// Bytes of room for items.
    pub cap: u32,
    /// Set by a loader that read this batch from the process when it
    /// stopped: `seq` of the batch read, and bytes of it read
    /// (`taken_len`). The owner then hands over only what follows.
    pub taken_seq: u64,
    /// See `taken_seq`.
    pub taken_len: u32,
    /// The buffer's number, different for each buffer of the process (and,
    /// chosen at random per process, likely different from those of an
    /// earlier process with the same pid).
    pub buffer: u32,
    /// Events per kind in the items being flushed; slot 0 counts the time
    /// marks.
    pub counts: [u32; EVENT_KIND_SLOTS as usize],
}

/// The ring record of a batch (136 bytes); `len` bytes of items follow it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct BatchRecord {
    /// Kernel time of the flush, the process, the owning thread;
    /// `kind` is [`BATCH_RECORD_KIND`], `aux` the number of the file whose
    /// flush site handed it over (the flush site's attach cookie; declared
    /// types' tags are per file, `crate::schema`).
    pub header: crate::RecordHeader,
    /// The buffer's head as it was at the flush.
    pub head: BatchHead,
    /// Offset in the batch of the first item here.
    pub start: u32,
    /// Bytes of items here.
    pub len: u32,
}

/// The most a batch takes of the ring: its record, a full batch of items
/// and the ring's own 8-byte header. A smaller ring drops every full batch.
pub const BATCH_RING_BYTES: usize = core::mem::size_of::<BatchRecord>() + BATCH_BYTES + 8;

/// The smallest ring (`--ring-size`) batched delivery takes: a power of
/// two that holds at least two full batch records (256 KiB, three of
/// them), so that the loader can drain one while the emulator fills
/// another. A smaller ring would drop full batches even while the loader
/// keeps up.
pub const MIN_BATCHED_RING_BYTES: usize = (2 * BATCH_RING_BYTES).next_power_of_two();

/// Where the emulator keeps its threads' batch buffers, for a loader that
/// stops while they hold events: a chain of blocks, each [`REGISTRY_SLOTS`]
/// pointers to buffers (null: free) and then a pointer to the next block
/// (null: the last), found through the flush site's semaphore
/// ([`FlushSemaphore::registry`]). Slots are filled in order and never
/// emptied; buffers are never freed.
pub const REGISTRY_SLOTS: usize = 1024;

/// Bytes of a registry block: its slots and the next block's address.
pub const REGISTRY_BLOCK_BYTES: usize = (REGISTRY_SLOTS + 1) * 8;

/// The most registry blocks a loader reads (262,144 threads tracing at
/// once); a longer chain, or one that loops, is cut there and reported.
pub const MAX_REGISTRY_BLOCKS: usize = 256;

/// The environment variable through which a lossless loader that starts
/// the emulator (`-- CMD`) gives it flow control before its first event:
/// the loader's pid. The emulator takes it when that pid is its parent's
/// (its own children, forked or exec'd, are not the traced process).
pub const LOSSLESS_LOADER_ENV: &str = "STYX_LOSSLESS_LOADER";

/// The flush probe's semaphore, with what a loader reaches through it
/// (found from the note alone, in stripped binaries too): the thread
/// registry, and lossless mode's flow control.
///
/// Lossless mode (`--lossless`) is credit-based, because under kernel
/// lockdown (integrity) an eBPF program may not write into the process: the
/// loader writes, with `process_vm_writev`, the traced process's pid (as
/// it sees itself) to `controlled`, its own to `credit_owner`, and every
/// ~1 ms `credit` = the batches it has taken (or seen lost) since it set
/// `flushed` to 0, plus what half its ring holds. A thread about to flush
/// waits (20 µs, doubling to 1 ms) while `flushed >= credit`, then counts
/// itself in `flushed`. It stops waiting, for good, when `credit_owner` is
/// 0 or no longer a live process, or nothing listens on the flush site: a
/// loader killed mid-wait cannot hold the emulator. It never waits in
/// another process than `controlled`: a forked child inherits the block but
/// no loader grants it credit.
///
/// A loader that starts the emulator cannot write here before the emulator
/// runs; it passes its pid in [`LOSSLESS_LOADER_ENV`] instead, and the
/// emulator takes flow control itself at its first event (`controlled`
/// its own pid, `credit` 0): its first flush waits for the loader's first
/// credit. One lossless loader per process: a second one is refused.
#[repr(C, align(8))]
pub struct FlushSemaphore {
    /// Raised by attaching to the flush site.
    pub listeners: u16,
    /// [`BATCH_LAYOUT_VERSION`]: a loader reads it before it writes here
    /// or reads the registry, and leaves a process built with another
    /// layout alone.
    pub layout_version: u16,
    /// Zero.
    pub _reserved: u32,
    /// Address of the registry's first block (see [`REGISTRY_SLOTS`]).
    pub registry: u64,
    /// Batches flushed by every thread (counted up by the emulator; set to
    /// 0 by a lossless loader as it starts).
    pub flushed: u64,
    /// Lossless mode: batches the emulator may have flushed before it waits.
    pub credit: u64,
    /// Lossless mode: the loader's pid; 0: no flow control.
    pub credit_owner: u32,
    /// Lossless mode: the pid of the process flow control is for, as it
    /// sees itself (`getpid()`).
    pub controlled: u32,
}

/// The layout of [`FlushSemaphore`], the registry, [`BatchHead`] and the
/// items ([`crate::item`]) this crate describes; changes whenever they do
/// (2: the registry became a chain of blocks, heads got
/// [`BatchHead::buffer`], the block [`FlushSemaphore::controlled`]; 3: items
/// carry values in their own widths; 4: buffers of 64 KiB, [`BATCH_BYTES`],
/// were 16 KiB).
pub const BATCH_LAYOUT_VERSION: u16 = 4;

/// The oldest layout a loader still reads and writes: 3 differs from 4 only
/// in its buffers' capacity, which a loader reads from each head
/// ([`BatchHead::cap`]), and in its flush probe's arguments ([`FLUSH_PROBE`]).
pub const OLDEST_BATCH_LAYOUT_VERSION: u16 = 3;

/// Whether a loader reads batches in `layout` (a flush block's
/// [`FlushSemaphore::layout_version`]): [`OLDEST_BATCH_LAYOUT_VERSION`] to
/// [`BATCH_LAYOUT_VERSION`].
pub const fn reads_layout(layout: u16) -> bool {
    layout >= OLDEST_BATCH_LAYOUT_VERSION && layout <= BATCH_LAYOUT_VERSION
}

/// Offset of [`FlushSemaphore::layout_version`] from the semaphore's address.
pub const LAYOUT_VERSION_OFFSET: u64 = 2;
/// Offset of [`FlushSemaphore::registry`] from the semaphore's address.
pub const REGISTRY_POINTER_OFFSET: u64 = 8;
/// Offset of [`FlushSemaphore::flushed`].
pub const FLUSHED_OFFSET: u64 = 16;
/// Offset of [`FlushSemaphore::credit`].
pub const CREDIT_OFFSET: u64 = 24;
/// Offset of [`FlushSemaphore::credit_owner`].
pub const CREDIT_OWNER_OFFSET: u64 = 32;
/// Offset of [`FlushSemaphore::controlled`].
pub const CONTROLLED_OFFSET: u64 = 36;

const _: () = assert!(core::mem::size_of::<BatchHead>() == 104);
const _: () = assert!(core::mem::size_of::<BatchRecord>() == 136);
const _: () = assert!(core::mem::size_of::<Semaphore>() == 4);
const _: () = assert!(core::mem::size_of::<FlushSemaphore>() == 40);
const _: () =
    assert!(core::mem::offset_of!(FlushSemaphore, registry) as u64 == REGISTRY_POINTER_OFFSET);
const _: () =
    assert!(core::mem::offset_of!(FlushSemaphore, layout_version) as u64 == LAYOUT_VERSION_OFFSET);
const _: () = assert!(core::mem::offset_of!(FlushSemaphore, flushed) as u64 == FLUSHED_OFFSET);
const _: () = assert!(core::mem::offset_of!(FlushSemaphore, credit) as u64 == CREDIT_OFFSET);
const _: () =
    assert!(core::mem::offset_of!(FlushSemaphore, credit_owner) as u64 == CREDIT_OWNER_OFFSET);
const _: () =
    assert!(core::mem::offset_of!(FlushSemaphore, controlled) as u64 == CONTROLLED_OFFSET);
const _: () = assert!(core::mem::offset_of!(BatchHead, buffer) == 36);
const _: () = assert!(BATCH_RECORD_CLASSES[BATCH_RECORD_CLASSES.len() - 1] == BATCH_BYTES);
const _: () = assert!(MIN_BATCHED_RING_BYTES >= 2 * BATCH_RING_BYTES);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_record_class_is_at_most_4x_the_one_before() {
        assert_eq!(BATCH_RECORD_CLASSES[0], 1024);
        for pair in BATCH_RECORD_CLASSES.windows(2) {
            assert!(pair[0] < pair[1] && pair[1] <= 4 * pair[0], "{pair:?}");
        }
        assert_eq!(MIN_BATCHED_RING_BYTES, 256 * 1024);
    }
}
