//! What a translation knows that its callbacks report (pc, bytes, sizes),
//! kept where the callbacks' user data points. QEMU API v1 has no callback
//! for a single block's end of life, but it calls the flush callback
//! after every flush of the whole code cache (ours by reset, or QEMU's
//! own when the cache is full), after which no translated block runs
//! again: the records of that cache are freed then. Blocks QEMU drops one
//! by one (code written over, unmapped) keep theirs until the next flush,
//! so memory stays bounded by what the cache holds.

use std::sync::Mutex;

/// A translated block: where it starts and its bytes.
#[repr(C)]
pub struct Block {
    pub pc: u64,
    pub size: u16,
}

/// One translated instruction.
#[repr(C)]
pub struct Insn {
    pub pc: u64,
    /// The instruction's first bytes (up to 8) as a little-endian number:
    /// the byte at `pc` is the lowest.
    pub bytes: u64,
    pub len: u8,
}

/// A block's records, boxed so that their addresses stay put while the
/// list of them grows.
pub struct Translation {
    pub block: Block,
    pub insns: Box<[Insn]>,
}

/// The records of every block in QEMU's code cache since its last flush.
/// Boxed each: callbacks point into them, and the list moves its items
/// when it grows.
#[allow(clippy::vec_box)]
static CACHE: Mutex<Vec<Box<Translation>>> = Mutex::new(Vec::new());

/// Keeps `translation` until the next flush and returns where it lives.
pub fn keep(translation: Translation) -> &'static Translation {
    let boxed = Box::new(translation);
    let kept: *const Translation = &*boxed;
    CACHE.lock().unwrap_or_else(|e| e.into_inner()).push(boxed);
    // SAFETY: the box is freed only by `forget_all`, after QEMU flushed
    // the blocks whose callbacks point into it.
    unsafe { &*kept }
}

/// Frees every record: QEMU has just flushed its code cache.
pub fn forget_all() {
    let gone = std::mem::take(&mut *CACHE.lock().unwrap_or_else(|e| e.into_inner()));
    drop(gone);
}
