//! Batched delivery on the emulator's side (layouts and the protocol in
//! `styx_common::batch`): a per-thread buffer that events of batched types
//! are appended to while a tracer takes them in batches, and the one flush
//! probe that hands a batch to the tracer.
//!
//! Nothing here exists until a thread appends its first event: the buffer
//! (64 KiB, `styx_common::batch::BATCH_BYTES`) is allocated then, registered where a stopping loader and the
//! process's exit find it (a chain of registry blocks, grown as needed),
//! and reused by a later thread once its owner has exited, so memory stays
//! bounded by the most threads tracing at once. Buffers are never freed: a
//! buffer's number and batch numbers name its batches for good. The hot
//! path is a thread-local load, a bounds check and the stores: written in
//! assembly in the batched types' append routines (`fire.rs`, which read
//! the layout through [`fast`]), and in Rust here ([`push`]) for the
//! appends they hand on.

use crate::enabled::semaphores;
use core::cell::{Cell, UnsafeCell};
use core::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::Once;
use std::time::Duration;
use styx_common::batch::{
    BatchHead, ALONE_SEQ, BATCH_BYTES, BATCH_LAYOUT_VERSION, BATCH_MAGIC, LOSSLESS_LOADER_ENV,
    MARK_EVERY_BYTES, REGISTRY_BLOCK_BYTES, REGISTRY_SLOTS,
};
use styx_common::item::{
    read, write_declared, Item, MARK_BYTES, MAX_DECLARED_ITEM_BYTES, TAG_BYTES, TIME_TAG,
};
use styx_common::{EventKind, EVENT_KIND_SLOTS};

/// [`BatchHead`] as the owner writes it: the fields other threads, the
/// loader (`taken_*`, by `process_vm_writev`) or a forked child's
/// renumbering also touch are atomics. Same layout (checked below).
#[repr(C)]
struct Head {
    magic: u32,
    tid: AtomicU32,
    seq: AtomicU64,
    len: AtomicU32,
    cap: u32,
    taken_seq: AtomicU64,
    taken_len: AtomicU32,
    buffer: AtomicU32,
    /// Only the owner writes these; only the eBPF program reads them.
    counts: UnsafeCell<[u32; EVENT_KIND_SLOTS as usize]>,
}

const _: () = assert!(core::mem::size_of::<Head>() == core::mem::size_of::<BatchHead>());
const _: () =
    assert!(core::mem::offset_of!(Head, counts) == core::mem::offset_of!(BatchHead, counts));
const _: () =
    assert!(core::mem::offset_of!(Head, taken_len) == core::mem::offset_of!(BatchHead, taken_len));
const _: () =
    assert!(core::mem::offset_of!(Head, buffer) == core::mem::offset_of!(BatchHead, buffer));
// The flush probe's readers find the items right after the head.
const _: () = assert!(core::mem::offset_of!(Buffer, items) == core::mem::size_of::<BatchHead>());

/// Bytes past a buffer's capacity that appends may write over: an item
/// is stored as whole words (up to nine, a declared type's largest), its
/// length counted.
const SLACK: usize = 72;

/// How far before the next time mark's offset (or the capacity) appends
/// stop ([`Buffer::room`]): the largest item's bytes, so that the check
/// before an append need not know its item's length (one instruction
/// fewer on the fast path, `fire.rs`). Batches end up to this much short
/// of the capacity.
const ROOM_MARGIN: u32 = MAX_DECLARED_ITEM_BYTES as u32;
const _: () = assert!(styx_common::item::MAX_ITEM_BYTES <= MAX_DECLARED_ITEM_BYTES);

/// A thread's buffer: the head, the items right after it (where the flush
/// probe's readers expect them), then the owner's private state.
#[repr(C, align(8))]
struct Buffer {
    head: Head,
    items: UnsafeCell<[u8; BATCH_BYTES + SLACK]>,
    /// Appends go on while `len < room`: the next time mark's offset, or
    /// the capacity, less [`ROOM_MARGIN`]; 0 while a time mark is due.
    room: Cell<u32>,
    /// Whether a thread owns the buffer (0: free for the next thread).
    owned: AtomicU32,
}

// SAFETY: the owner alone writes the non-atomic parts; other threads only
// read atomics and hand the buffer's address to the flush probe.
unsafe impl Sync for Buffer {}

/// Where every buffer is: a stopping loader reads it (found through
/// [`FLUSH`]), and the process's exit flushes what it lists. A block of
/// slots, filled in order and never emptied, then the next block, made
/// when this one is full (`styx_common::batch::REGISTRY_SLOTS`).
#[doc(hidden)]
#[repr(C)]
pub struct RegistryBlock {
    slots: [AtomicPtr<Buffer>; REGISTRY_SLOTS],
    next: AtomicPtr<RegistryBlock>,
}

const _: () = assert!(core::mem::size_of::<RegistryBlock>() == REGISTRY_BLOCK_BYTES);

static REGISTRY: RegistryBlock = RegistryBlock::empty();

impl RegistryBlock {
    const fn empty() -> RegistryBlock {
        RegistryBlock {
            slots: [const { AtomicPtr::new(null_mut()) }; REGISTRY_SLOTS],
            next: AtomicPtr::new(null_mut()),
        }
    }

    /// Every registered buffer, in the order registered.
    fn buffers() -> impl Iterator<Item = &'static Buffer> {
        let blocks = std::iter::successors(Some(&REGISTRY), |block| {
            let next = block.next.load(Ordering::Acquire);
            // SAFETY: blocks are never freed.
            (!next.is_null()).then(|| unsafe { &*next })
        });
        blocks.flat_map(|block| {
            block.slots.iter().map_while(|slot| {
                let buffer = slot.load(Ordering::Acquire);
                // SAFETY: registered buffers are never freed.
                (!buffer.is_null()).then(|| unsafe { &*buffer })
            })
        })
    }

    /// Lists `buffer` in the first free slot, adding a block when every
    /// slot is taken.
    fn register(buffer: &'static Buffer) {
        let listed = buffer as *const Buffer as *mut Buffer;
        let mut block = &REGISTRY;
        loop {
            for slot in &block.slots {
                if slot.load(Ordering::Acquire).is_null()
                    && slot
                        .compare_exchange(null_mut(), listed, Ordering::AcqRel, Ordering::Acquire)
                        .is_ok()
                {
                    return;
                }
            }
            let mut next = block.next.load(Ordering::Acquire);
            if next.is_null() {
                let fresh = Box::into_raw(Box::new(RegistryBlock::empty()));
                next = match block.next.compare_exchange(
                    null_mut(),
                    fresh,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => fresh,
                    Err(theirs) => {
                        // SAFETY: ours, never shared.
                        drop(unsafe { Box::from_raw(fresh) });
                        theirs
                    }
                };
            }
            // SAFETY: blocks are never freed.
            block = unsafe { &*next };
        }
    }
}

/// The next buffer's number (`BatchHead::buffer`): from a random start per
/// process, so that a later process with the same pid numbers its buffers
/// differently.
static NEXT_BUFFER: AtomicU32 = AtomicU32::new(0);

/// The flush site's block, the static the loader reads and writes: its
/// semaphore and, beside it, the registry's address and lossless mode's
/// flow control, laid out as `styx_common::batch::FlushSemaphore` (the
/// layout; this is the live static's type, hence another name).
#[doc(hidden)]
#[repr(C, align(8))]
pub struct FlushBlock {
    listeners: UnsafeCell<u16>,
    layout_version: u16,
    _reserved: u32,
    registry: *const RegistryBlock,
    flushed: AtomicU64,
    credit: AtomicU64,
    credit_owner: AtomicU32,
    controlled: AtomicU32,
}

// SAFETY: `listeners` is the kernel's (read volatile); the pointer never
// changes; the rest are atomics.
unsafe impl Sync for FlushBlock {}

const _: () = assert!(
    core::mem::size_of::<FlushBlock>()
        == core::mem::size_of::<styx_common::batch::FlushSemaphore>()
);

#[doc(hidden)]
#[link_section = ".probes"]
pub static FLUSH: FlushBlock = FlushBlock {
    listeners: UnsafeCell::new(0),
    layout_version: BATCH_LAYOUT_VERSION,
    _reserved: 0,
    registry: &raw const REGISTRY,
    flushed: AtomicU64::new(0),
    credit: AtomicU64::new(0),
    credit_owner: AtomicU32::new(0),
    controlled: AtomicU32::new(0),
};

/// The name of the thread-local slot holding this thread's buffer (null
/// until its first batched event). It is defined in assembly, not by
/// `thread_local!`, so that the probes' fast path (`fire.rs`, assembly too)
/// can address it; the version in its name keeps two styx-probe versions
/// in one program apart. Initial-exec: one load from the GOT, then the
/// slot at `fs:`; in a shared library that is loaded later (`dlopen`) it
/// takes a few bytes of the C library's spare static TLS.
macro_rules! current_slot {
    () => {
        concat!(
            "styx_probe_batch_current_v",
            env!("CARGO_PKG_VERSION_MAJOR"),
            "_",
            env!("CARGO_PKG_VERSION_MINOR")
        )
    };
}
pub(crate) use current_slot;

// The slot starts as `NO_BUFFER`'s address (a relocation in the TLS
// image, which the dynamic linker applies before any thread's copy is
// made, `dlopen` included).
core::arch::global_asm!(
    ".pushsection .tdata, \"awT\", @progbits",
    ".balign 8",
    concat!(".globl ", current_slot!()),
    concat!(".hidden ", current_slot!()),
    concat!(".type ", current_slot!(), ", @object"),
    concat!(".size ", current_slot!(), ", 8"),
    concat!(current_slot!(), ":"),
    ".quad {none}",
    ".popsection",
    none = sym NO_BUFFER,
);

/// What a thread's slot points at while it has no buffer: a buffer with
/// no room (`room` 0), never written, so that the append routines' one
/// check of the room also sends a thread without a buffer to the slow path
/// (no null test on the fast path). Zeros: in `.bss`, its pages untouched
/// but the two the routines read.
static NO_BUFFER: Buffer = Buffer {
    head: Head {
        magic: 0,
        tid: AtomicU32::new(0),
        seq: AtomicU64::new(0),
        len: AtomicU32::new(0),
        cap: 0,
        taken_seq: AtomicU64::new(0),
        taken_len: AtomicU32::new(0),
        buffer: AtomicU32::new(0),
        counts: UnsafeCell::new([0; EVENT_KIND_SLOTS as usize]),
    },
    items: UnsafeCell::new([0; BATCH_BYTES + SLACK]),
    room: Cell::new(0),
    owned: AtomicU32::new(0),
};

/// This thread's buffer, if it has one.
#[inline(always)]
fn current() -> Option<&'static Buffer> {
    let buffer: *const Buffer;
    // SAFETY: reads this thread's slot (8 bytes of its static TLS).
    unsafe {
        core::arch::asm!(
            concat!("mov {p}, qword ptr [rip + ", current_slot!(), "@GOTTPOFF]"),
            "mov {p}, qword ptr fs:[{p}]",
            p = out(reg) buffer,
            options(nostack, preserves_flags, readonly),
        );
    }
    // SAFETY: the slot holds `NO_BUFFER` or this thread's buffer, which
    // lives until the thread exits.
    (!core::ptr::eq(buffer, &NO_BUFFER)).then(|| unsafe { &*buffer })
}

/// Makes `buffer` (or none) this thread's.
#[inline(always)]
fn set_current(buffer: Option<&'static Buffer>) {
    let buffer: *const Buffer = buffer.unwrap_or(&NO_BUFFER);
    // SAFETY: writes this thread's slot, nothing else.
    unsafe {
        core::arch::asm!(
            concat!("mov {t}, qword ptr [rip + ", current_slot!(), "@GOTTPOFF]"),
            "mov qword ptr fs:[{t}], {p}",
            t = out(reg) _,
            p = in(reg) buffer,
            options(nostack, preserves_flags),
        );
    }
}

/// Where the fast path (`fire.rs`) finds a buffer's fields: byte offsets
/// from its start, derived from the layouts above.
pub(crate) mod fast {
    use super::{Buffer, Head};
    use core::mem::offset_of;

    pub(crate) const LEN: usize = offset_of!(Buffer, head) + offset_of!(Head, len);
    pub(crate) const ROOM: usize = offset_of!(Buffer, room);
    pub(crate) const ITEMS: usize = offset_of!(Buffer, items);
    pub(crate) const COUNTS: usize = offset_of!(Buffer, head) + offset_of!(Head, counts);
}

thread_local! {
    /// Flushes and releases this thread's buffer when the thread exits.
    static OWNER: Owner = const { Owner };
}

struct Owner;

impl Drop for Owner {
    fn drop(&mut self) {
        let buffer = current();
        set_current(None);
        if let Some(buffer) = buffer {
            flush_owned(buffer);
            release(buffer);
        }
    }
}

/// Appends an event of `kind`, its item packed into `W` words of which
/// the first `bytes` count (packed by the call site), to this thread's batch.
#[inline(always)]
pub(crate) fn push<const W: usize>(kind: u8, bytes: u32, words: [u64; W]) {
    const { assert!(W <= SLACK / 8) };
    if let Some(buffer) = current() {
        let len = buffer.head.len.load(Ordering::Relaxed);
        if len < buffer.room.get() {
            // SAFETY: this thread's own buffer, which only it appends to,
            // with room for the largest item.
            unsafe { append(buffer, len, kind, bytes, &words) };
            return;
        }
    }
    push_slow(kind, bytes, words);
}

/// Appends an item of a declared type (`styx_common::schema`): its tag,
/// its length, the values in their declared widths. Counted in the head as
/// other providers' probes' events (`EventKind::Usdt`), which a loader
/// makes of them.
pub(crate) fn push_declared(tag: u16, values: &[u64], widths: &[usize]) {
    let mut item = [0u8; MAX_DECLARED_ITEM_BYTES];
    let bytes = write_declared(tag, values, widths, &mut item);
    let mut words = [0u64; SLACK / 8];
    for (word, chunk) in words.iter_mut().zip(item.chunks(8)) {
        let mut le = [0u8; 8];
        le[..chunk.len()].copy_from_slice(chunk);
        *word = u64::from_le_bytes(le);
    }
    push(EventKind::Usdt as u8, bytes as u32, words);
}

/// Writes an item at `len`, which the caller checked has room: its words
/// whole (the buffer's slack takes what is past the item), its length
/// counted.
#[inline(always)]
unsafe fn append(buffer: &Buffer, len: u32, kind: u8, bytes: u32, words: &[u64]) {
    let at = (buffer.items.get() as *mut u8).add(len as usize);
    for (i, word) in words.iter().enumerate() {
        (at.add(8 * i) as *mut u64).write_unaligned(word.to_le());
    }
    if let Some(count) = (*buffer.head.counts.get()).get_mut(kind as usize) {
        *count += 1;
    }
    // Release: a thread flushing this buffer at process exit sees the items.
    buffer.head.len.store(len + bytes, Ordering::Release);
}

/// A time mark's words: its tag and the thread's clock now.
fn mark_words() -> [u64; 2] {
    let ns = monotonic_ns();
    [
        (TIME_TAG as u64) | ns << (8 * TAG_BYTES),
        ns >> (64 - 8 * TAG_BYTES),
    ]
}

/// The buffer has no room (`len >= room`): a time mark is due, the
/// buffer is full, or this thread has none yet.
#[cold]
#[inline(never)]
fn push_slow<const W: usize>(kind: u8, bytes: u32, words: [u64; W]) {
    let Some(buffer) = current_or_new() else {
        return push_alone(kind, bytes, words);
    };
    let mark = MARK_BYTES as u32;
    let head = &buffer.head;
    // A loader that stopped took part of this batch: hand over the rest and
    // start afresh, rather than append after what it took. Full: no room
    // for a time mark and the largest item after it.
    debug_assert!(bytes <= ROOM_MARGIN);
    if head.taken_seq.load(Ordering::Acquire) == head.seq.load(Ordering::Relaxed)
        || head.len.load(Ordering::Relaxed) + mark + ROOM_MARGIN > head.cap
    {
        flush_owned(buffer);
    }
    let len = head.len.load(Ordering::Relaxed);
    // SAFETY: room for the mark and the item was made above.
    unsafe {
        if len >= buffer.room.get() {
            // A time mark: the thread's clock now, before the event.
            append(buffer, len, 0, mark, &mark_words());
            let after_mark = len + mark;
            // At least `after_mark`: the check above left room.
            buffer
                .room
                .set((after_mark + MARK_EVERY_BYTES).min(head.cap) - ROOM_MARGIN);
            append(buffer, after_mark, kind, bytes, &words);
        } else {
            append(buffer, len, kind, bytes, &words);
        }
    }
}

/// Flushes this thread's pending events, if it has any: before a per-event
/// probe fires (so the thread's events reach the reader in order) and from
/// [`crate::flush`].
#[inline(always)]
pub(crate) fn flush_pending() {
    if let Some(buffer) = current() {
        if buffer.head.len.load(Ordering::Relaxed) != 0 {
            flush_owned(buffer);
        }
    }
}

/// Hands the batch to the tracer and starts the next one.
#[cold]
fn flush_owned(buffer: &Buffer) {
    let head = &buffer.head;
    let len = head.len.load(Ordering::Relaxed);
    let seq = head.seq.load(Ordering::Relaxed);
    let start = if head.taken_seq.load(Ordering::Acquire) == seq {
        let taken = head.taken_len.load(Ordering::Relaxed).min(len);
        // The counts are for what is handed over (ring-full losses).
        // SAFETY: the owner's items and counts.
        unsafe { recount(buffer, taken, len) };
        taken
    } else {
        0
    };
    hand_over(buffer, start, len, seq);
    head.seq.store(seq + 1, Ordering::Release);
    head.len.store(0, Ordering::Release);
    // SAFETY: the owner's counts.
    unsafe { *head.counts.get() = [0; EVENT_KIND_SLOTS as usize] };
    // The next event writes a time mark first.
    buffer.room.set(0);
}

/// Fires the flush probe for items `start..len` of batch `seq` of the
/// owner's own buffer, after waiting for credit in lossless mode.
fn hand_over(buffer: &Buffer, start: u32, len: u32, seq: u64) {
    if start >= len {
        return;
    }
    take_turn();
    fire_batch(buffer, start, len, seq);
}

/// Lossless mode: waits for credit to flush a batch, and counts it
/// (`styx_common::batch::FlushSemaphore` says how).
fn take_turn() {
    if FLUSH.credit_owner.load(Ordering::Relaxed) != 0 {
        wait_for_credit();
    }
    FLUSH.flushed.fetch_add(1, Ordering::Relaxed);
}

/// The flush probe for items `start..len` of batch `seq`: the batch's
/// number and owner go with it as the caller read them (at process exit
/// another thread may have moved on meanwhile).
fn fire_batch(buffer: &Buffer, start: u32, len: u32, seq: u64) {
    fire_flush(
        buffer as *const Buffer as u64,
        start as u64,
        (len - start) as u64,
        seq,
        buffer.head.tid.load(Ordering::Relaxed) as u64,
    );
}

/// Lossless mode: waits while the loader has not taken enough of the
/// batches already flushed. Gives up waiting, and turns flow control off,
/// when the loader is gone (its pid dead, or nothing attached to the flush
/// site), so a killed loader cannot hold the emulator. Never waits in a
/// process the loader does not control (a forked child's copy of the block).
#[cold]
fn wait_for_credit() {
    let mut wait = Duration::from_micros(20);
    loop {
        let owner = FLUSH.credit_owner.load(Ordering::Acquire);
        if owner == 0
            || FLUSH.flushed.load(Ordering::Relaxed) < FLUSH.credit.load(Ordering::Acquire)
        {
            return;
        }
        // SAFETY: getpid has no preconditions.
        if FLUSH.controlled.load(Ordering::Acquire) != unsafe { libc::getpid() } as u32 {
            return;
        }
        // SAFETY: reads the kernel's counter volatile; kill(pid, 0) only
        // asks whether the process exists.
        let listening = unsafe { FLUSH.listeners.get().read_volatile() } != 0;
        let alive = unsafe { libc::kill(owner as libc::pid_t, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
        if !listening || !alive {
            let _ =
                FLUSH
                    .credit_owner
                    .compare_exchange(owner, 0, Ordering::AcqRel, Ordering::Relaxed);
            return;
        }
        std::thread::sleep(wait);
        wait = (wait * 2).min(Duration::from_millis(1));
    }
}

/// Recomputes the per-kind counts for items `from..to`.
unsafe fn recount(buffer: &Buffer, from: u32, to: u32) {
    let counts = &mut *buffer.head.counts.get();
    *counts = [0; EVENT_KIND_SLOTS as usize];
    let items = &*buffer.items.get();
    let mut at = from as usize;
    while at < to as usize {
        // The owner's own items: every one reads.
        let Ok((item, len)) = read(&items[at..to as usize]) else {
            return;
        };
        match item {
            Item::Event { kind, .. } => counts[kind as usize] += 1,
            Item::Mark(_) => counts[0] += 1,
            Item::Declared { .. } => counts[EventKind::Usdt as usize] += 1,
        }
        at += len;
    }
}

/// The one flush site, and the batch-enable sites, which never run: a
/// tracer attaches to `styx_batch:<type>` only to raise that type's
/// batched half (`+2`). Not inlined, so each is one site per binary.
#[inline(never)]
fn fire_flush(buffer: u64, start: u64, len: u64, seq: u64, tid: u64) {
    crate::site::probe_site!(
        styx_batch,
        flush,
        FLUSH,
        0,
        "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9",
        [
            "rdi" = buffer,
            "rsi" = start,
            "rdx" = len,
            "rcx" = seq,
            "r8" = tid,
            "r9" = BATCH_LAYOUT_VERSION as u64
        ]
    );
    styx_common::event_catalogue!(batch_enable_sites);
}

/// One never-run site per batched event type, jumped over.
macro_rules! batch_enable_sites {
    ($(
        $(#[$doc:meta])* $kind:ident = $id:literal, $probe:ident, $shape:ident $(($n:literal))?,
            $delivery:ident, [$($arg:ident),*], [$($field:ident: $ty:ident),*];
    )*) => {
        $(batch_enable_site!($delivery, $probe);)*
    };
}
use batch_enable_sites;

macro_rules! batch_enable_site {
    (Batched, $probe:ident) => {
        crate::site::probe_site!(@skipped "styx_batch", stringify!($probe), semaphores::$probe, 2);
    };
    (PerEvent, $probe:ident) => {};
}
use batch_enable_site;

/// This thread's buffer, taken or allocated on its first event; None while
/// the thread is being torn down (its thread-locals destroyed).
fn current_or_new() -> Option<&'static Buffer> {
    if let Some(buffer) = current() {
        return Some(buffer);
    }
    // Registers the destructor that flushes and releases it.
    OWNER.try_with(|_| ()).ok()?;
    let buffer = acquire();
    set_current(Some(buffer));
    Some(buffer)
}

/// A free registered buffer, or a new one, registered.
fn acquire() -> &'static Buffer {
    static FIRST: Once = Once::new();
    FIRST.call_once(|| {
        // SAFETY: register plain functions; failure only means the exit
        // flush does not run (then a stopping loader still reads the
        // buffers, if it is tracing this process), or a forked child
        // hands over its parent's pending events as its own.
        unsafe {
            libc::atexit(flush_all_at_exit);
            libc::pthread_atfork(None, None, Some(forget_in_child));
        }
        NEXT_BUFFER.store(random_u32(), Ordering::Relaxed);
        claim_flow_control();
    });
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    for buffer in RegistryBlock::buffers() {
        if buffer
            .owned
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            buffer.head.tid.store(tid, Ordering::Relaxed);
            return buffer;
        }
    }
    // Made in place on the heap, zeroed: 64 KiB built on the stack first
    // (unoptimized builds do) could overflow an emulator thread's stack.
    // SAFETY: every field of a Buffer is an integer, an atomic or a cell
    // of integers: all zeros is a valid Buffer.
    let mut buffer: Box<Buffer> = unsafe { Box::<Buffer>::new_zeroed().assume_init() };
    buffer.head.magic = BATCH_MAGIC;
    buffer.head.cap = BATCH_BYTES as u32;
    *buffer.head.tid.get_mut() = tid;
    *buffer.head.taken_seq.get_mut() = u64::MAX;
    *buffer.head.buffer.get_mut() = NEXT_BUFFER.fetch_add(1, Ordering::Relaxed);
    *buffer.owned.get_mut() = 1;
    let buffer: &'static Buffer = Box::leak(buffer);
    RegistryBlock::register(buffer);
    buffer
}

/// Gives a thread's buffer back, to the next thread that needs one.
fn release(buffer: &Buffer) {
    buffer.owned.store(0, Ordering::Release);
}

/// A lossless loader that started this process (`-- CMD`) asks for flow
/// control through the environment (`styx_common::batch::LOSSLESS_LOADER_ENV`):
/// taken before the first batch, whose flush then waits for the loader's
/// first credit. Only by the loader's own child: this process's children
/// inherit the variable, and are not traced.
fn claim_flow_control() {
    let Some(loader) = std::env::var_os(LOSSLESS_LOADER_ENV) else {
        return;
    };
    let Some(loader) = loader.to_str().and_then(|pid| pid.parse::<u32>().ok()) else {
        return;
    };
    // SAFETY: getppid and getpid have no preconditions.
    let (parent, me) = unsafe { (libc::getppid() as u32, libc::getpid() as u32) };
    // Already claimed: the loader found this block first.
    if loader == 0 || parent != loader || FLUSH.credit_owner.load(Ordering::Acquire) != 0 {
        return;
    }
    FLUSH.controlled.store(me, Ordering::Relaxed);
    FLUSH.credit.store(0, Ordering::Relaxed);
    FLUSH.flushed.store(0, Ordering::Relaxed);
    let _ = FLUSH
        .credit_owner
        .compare_exchange(0, loader, Ordering::AcqRel, Ordering::Relaxed);
}

/// A number from the kernel's random source, or, failing that, from the
/// clock and the pid.
fn random_u32() -> u32 {
    let mut bytes = [0u8; 4];
    // SAFETY: writes at most 4 bytes into `bytes`.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), 4, libc::GRND_NONBLOCK) };
    if got == 4 {
        return u32::from_ne_bytes(bytes);
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u64;
    let mixed = (monotonic_ns() ^ pid << 32).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (mixed >> 32) as u32
}

/// An event fired while its thread is being torn down (after its buffer
/// was flushed and released): handed over alone from a buffer on the
/// stack, after a time mark.
#[cold]
fn push_alone<const W: usize>(kind: u8, bytes: u32, words: [u64; W]) {
    #[repr(C)]
    struct Alone {
        head: Head,
        items: [u8; MARK_BYTES + SLACK],
    }
    let mut alone = Alone {
        head: Head {
            magic: BATCH_MAGIC,
            tid: AtomicU32::new(unsafe { libc::gettid() } as u32),
            seq: AtomicU64::new(ALONE_SEQ),
            len: AtomicU32::new(0),
            cap: (MARK_BYTES + SLACK) as u32,
            taken_seq: AtomicU64::new(0),
            taken_len: AtomicU32::new(0),
            buffer: AtomicU32::new(0),
            counts: UnsafeCell::new([0; EVENT_KIND_SLOTS as usize]),
        },
        items: [0; MARK_BYTES + SLACK],
    };
    let ns = monotonic_ns();
    alone.items[..TAG_BYTES].copy_from_slice(&TIME_TAG.to_le_bytes());
    alone.items[TAG_BYTES..MARK_BYTES].copy_from_slice(&ns.to_le_bytes());
    for (i, word) in words.iter().enumerate() {
        let at = MARK_BYTES + 8 * i;
        alone.items[at..at + 8].copy_from_slice(&word.to_le_bytes());
    }
    if let Some(count) = alone.head.counts.get_mut().get_mut(kind as usize) {
        *count = 1;
    }
    let len = MARK_BYTES as u64 + bytes as u64;
    let tid = alone.head.tid.load(Ordering::Relaxed) as u64;
    fire_flush(&raw const alone as u64, 0, len, ALONE_SEQ, tid);
}

/// At process exit (return from `main`, `exit()` from any thread), every
/// registered buffer's pending events are handed over, other threads'
/// too; they may still be appending, and the loader keeps each byte of a
/// batch once. Events fired after this (in later exit handlers) are lost.
pub(crate) extern "C" fn flush_all_at_exit() {
    for buffer in RegistryBlock::buffers() {
        if pending(buffer).is_none() {
            continue;
        }
        // Read again after any wait for credit, so that what goes to the
        // probe is as fresh as it can be: a batch its running owner
        // flushed meanwhile is not handed over again under its number.
        take_turn();
        match pending(buffer) {
            Some((start, len, seq)) => fire_batch(buffer, start, len, seq),
            // Not flushed after all: the turn goes back.
            None => {
                FLUSH.flushed.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// What `buffer` holds that no loader took: (start, len, seq).
fn pending(buffer: &Buffer) -> Option<(u32, u32, u64)> {
    let head = &buffer.head;
    let seq = head.seq.load(Ordering::Acquire);
    let len = head.len.load(Ordering::Acquire);
    let start = if head.taken_seq.load(Ordering::Acquire) == seq {
        head.taken_len.load(Ordering::Relaxed).min(len)
    } else {
        0
    };
    (start < len).then_some((start, len, seq))
}

/// In a forked child: the buffers are copies of the parent's, holding the
/// parent's pending events (the parent hands them over). The child starts
/// with none: every buffer empty, free and numbered afresh (its batches
/// are its own), this thread without one, and no flow control (a lossless
/// loader traces the parent).
extern "C" fn forget_in_child() {
    NEXT_BUFFER.store(random_u32(), Ordering::Relaxed);
    for buffer in RegistryBlock::buffers() {
        buffer.head.len.store(0, Ordering::Release);
        let number = NEXT_BUFFER.fetch_add(1, Ordering::Relaxed);
        buffer.head.buffer.store(number, Ordering::Relaxed);
        // SAFETY: the child has one thread, this one.
        unsafe { *buffer.head.counts.get() = [0; EVENT_KIND_SLOTS as usize] };
        buffer.room.set(0);
        buffer.owned.store(0, Ordering::Release);
    }
    FLUSH.credit_owner.store(0, Ordering::Release);
    set_current(None);
}

/// `CLOCK_MONOTONIC` now, in ns (the vDSO: no system call).
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the struct we pass.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}
