//! An emulator's own heap, traced: a `GlobalAlloc` wrapper firing an
//! event at each allocation, deallocation and reallocation, with the
//! block's size, alignment and address and the code that asked for it.
//!
//! ```
//! #[global_allocator]
//! static HEAP: styx_alloc::TracedAllocator<std::alloc::System> =
//!     styx_alloc::TracedAllocator::new(std::alloc::System);
//! ```
//!
//! Its event types are declared here with `styx_probe::event!`, so their
//! provider is this crate's name: `styx_alloc:alloc`, `styx_alloc:dealloc`,
//! `styx_alloc:realloc` (batched by default, as every declared type).
//! Detached, each call costs the wrapped allocator's call plus one load
//! and one branch.
//!
//! Why a crate of its own, not part of styx-probe: a declared type's notes
//! are kept in every program that links the crate declaring it (its schema
//! note is `#[used]`, and note sections survive the linker's garbage
//! collection), used or not. In styx-probe, every emulator would carry the
//! allocator's types, their sites pointing at discarded code; here, only
//! those that depend on this crate do.
//!
//! Firing may allocate (the thread's batch buffer is allocated at its
//! first batched event; registering a thread's exit flush may allocate):
//! while a thread is firing, its allocations go to the wrapped allocator
//! untraced (a thread-local flag), so the tracer neither recurses nor
//! deadlocks. At thread exit, events after the thread's batch was flushed
//! and released are handed over alone, from the stack, allocating nothing.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use styx_probe::{Addr, Declared};

// The timeline formats find these types by this provider name.
const _: () = assert!(
    styx_probe::__schema::is_heap_provider(env!("CARGO_CRATE_NAME")),
    "styx-events draws the heap from the types of provider HEAP_PROVIDER"
);

styx_probe::event! {
    /// A block handed out (`addr` 0: the inner allocator failed).
    alloc(size: u64, align: u64, addr: Addr<u64>, caller: Addr<u64>, zeroed: bool);
    /// A block given back.
    dealloc(size: u64, align: u64, addr: Addr<u64>, caller: Addr<u64>);
    /// A block moved or resized (`addr` 0: it failed, `old_addr` still holds).
    realloc(old_addr: Addr<u64>, old_size: u64, addr: Addr<u64>, size: u64, align: u64, caller: Addr<u64>);
}

/// Wraps any `GlobalAlloc`, firing `styx_alloc:alloc`, `dealloc` and
/// `realloc` while a tracer holds them.
pub struct TracedAllocator<A> {
    inner: A,
}

impl<A> TracedAllocator<A> {
    pub const fn new(inner: A) -> TracedAllocator<A> {
        TracedAllocator { inner }
    }
}

// SAFETY: every call goes to `inner` with the caller's arguments; the
// events only read them.
unsafe impl<A: GlobalAlloc> GlobalAlloc for TracedAllocator<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let addr = self.inner.alloc(layout);
        let (size, align) = (layout.size() as u64, layout.align() as u64);
        fire_outside_allocator::<alloc, A>(
            [size, align, addr as u64, 0, 0],
            |[size, align, addr, ..], caller| (size, align, Addr(addr), Addr(caller), false),
        );
        addr
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let addr = self.inner.alloc_zeroed(layout);
        let (size, align) = (layout.size() as u64, layout.align() as u64);
        fire_outside_allocator::<alloc, A>(
            [size, align, addr as u64, 0, 0],
            |[size, align, addr, ..], caller| (size, align, Addr(addr), Addr(caller), true),
        );
        addr
    }

    #[inline]
    unsafe fn dealloc(&self, addr: *mut u8, layout: Layout) {
        let (size, align) = (layout.size() as u64, layout.align() as u64);
        fire_outside_allocator::<dealloc, A>(
            [size, align, addr as u64, 0, 0],
            |[size, align, addr, ..], caller| (size, align, Addr(addr), Addr(caller)),
        );
        self.inner.dealloc(addr, layout)
    }

    #[inline]
    unsafe fn realloc(&self, old_addr: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        let addr = self.inner.realloc(old_addr, layout, size);
        let (old_size, align) = (layout.size() as u64, layout.align() as u64);
        let raw = [old_addr as u64, old_size, addr as u64, size as u64, align];
        fire_outside_allocator::<realloc, A>(
            raw,
            |[old_addr, old_size, addr, size, align], caller| {
                (
                    Addr(old_addr),
                    old_size,
                    Addr(addr),
                    size,
                    align,
                    Addr(caller),
                )
            },
        );
        addr
    }
}

/// What this thread is doing inside the allocator's events.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Firing {
    No,
    /// Its allocations are the tracer's own: untraced.
    Yes,
    /// Its allocations are [`caller::calibrate`]'s: they teach which
    /// frames are the allocator's.
    Calibrating,
}

thread_local! {
    // Const and without a destructor: no lazy registration, so reading it
    // never allocates, even while the thread's thread-locals are torn down.
    static FIRING: Cell<Firing> = const { Cell::new(Firing::No) };
}

/// Fires `E` if anything holds it: the one check inlined in the allocator.
/// The values go to the cold function in registers, and only there become
/// the event's (with the caller, known there): a closure capturing the
/// allocator's locals would make them address-taken, stored before the
/// check on every call (callgrind, an alloc and free pair detached: 13
/// instructions more than the wrapped allocator's, against 7 so).
#[inline(always)]
fn fire_outside_allocator<E: Declared, A>(
    raw: [u64; 5],
    values: impl FnOnce([u64; 5], u64) -> E::Values,
) {
    let word = E::word();
    if word != 0 {
        core::hint::cold_path();
        let [a, b, c, d, e] = raw;
        fire_once::<E, A>(word, a, b, c, d, e, values);
    }
}

#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn fire_once<E: Declared, A>(
    word: u32,
    a: u64,
    b: u64,
    c: u64,
    d: u64,
    e: u64,
    values: impl FnOnce([u64; 5], u64) -> E::Values,
) {
    match FIRING.get() {
        Firing::Yes => {}
        Firing::Calibrating => {
            // Not a tail call: this frame must be among those learned, as
            // it is among those walked when finding.
            core::hint::black_box(caller::walk(caller::Walk::Learn));
        }
        Firing::No => {
            FIRING.set(Firing::Yes);
            caller::calibrate_once::<A>();
            let caller = caller::walk(caller::Walk::Find);
            E::call_site(word, values([a, b, c, d, e], caller));
            FIRING.set(Firing::No);
        }
    }
}

/// The caller: the return address into the first function, going out
/// from the allocator, that is not on the allocator's own path.
///
/// There is no stable `return_address` intrinsic, and the return address
/// of the allocator's own method is not the caller: `GlobalAlloc` is
/// reached through std's `__rust_alloc` shims and `std::alloc`'s
/// functions, and, for a `Vec` or `Box`, `RawVec`'s type-independent
/// code (one copy serving every `Vec`: its address would name no one). A
/// naked shim reading `[rsp]` sees only the nearest of those frames, and
/// frame pointers are absent in std and most builds. So the stack is
/// unwound by its DWARF tables (`_Unwind_Backtrace`, which std links for
/// panics; ~µs, only while attached), and the frames skipped are those
/// seen, once, between the allocator and a known function that allocates
/// through `std::alloc`'s functions, a `Vec<u8>` and std's formatting
/// (`calibrate`). What
/// is generic over the element type and not inlined (`Vec<T>`'s own
/// functions in a debug build) is not learned: such a caller is a
/// function of std's, instantiated for `T`.
#[cfg(target_arch = "x86_64")]
mod caller {
    use super::{Firing, FIRING};
    use core::ffi::{c_int, c_void};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Once;

    #[repr(C)]
    struct UnwindContext {
        _opaque: [u8; 0],
    }
    type TraceFn = extern "C" fn(*mut UnwindContext, *mut c_void) -> c_int;
    extern "C" {
        fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> c_int;
        fn _Unwind_GetIP(context: *mut UnwindContext) -> usize;
        fn _Unwind_GetRegionStart(context: *mut UnwindContext) -> usize;
    }
    const URC_NO_REASON: c_int = 0;
    const URC_NORMAL_STOP: c_int = 4;

    /// Frames looked at, at most: the allocator's path is shorter.
    const DEPTH: usize = 32;

    /// (function start, return address) of each frame, from this one out,
    /// up to the first whose function is `last` (the unwinding costs per
    /// frame).
    #[inline(never)]
    fn frames(out: &mut [(usize, usize); DEPTH], last: fn(usize) -> bool) -> usize {
        struct Collected<'a> {
            out: &'a mut [(usize, usize); DEPTH],
            len: usize,
            last: fn(usize) -> bool,
        }
        extern "C" fn visit(context: *mut UnwindContext, walk: *mut c_void) -> c_int {
            // SAFETY: `walk` is the `Collected` passed below; `context` is the
            // unwinder's, valid during this call.
            unsafe {
                let walk = &mut *(walk as *mut Collected);
                if walk.len == DEPTH {
                    return URC_NORMAL_STOP;
                }
                let start = _Unwind_GetRegionStart(context);
                walk.out[walk.len] = (start, _Unwind_GetIP(context));
                walk.len += 1;
                if (walk.last)(start) {
                    return URC_NORMAL_STOP;
                }
            }
            URC_NO_REASON
        }
        let mut walk = Collected { out, len: 0, last };
        // SAFETY: `visit` only writes into `walk`, which outlives the call.
        unsafe { _Unwind_Backtrace(visit, &mut walk as *mut Collected as *mut c_void) };
        walk.len
    }

    /// Starts of the functions on the allocator's path (0: free slot).
    static PATH: [AtomicUsize; 128] = [const { AtomicUsize::new(0) }; 128];

    /// The start of the calibrating function (`calibrate::<A>`).
    static CALIBRATING: AtomicUsize = AtomicUsize::new(0);

    fn on_path(start: usize) -> bool {
        PATH.iter()
            .map(|slot| slot.load(Ordering::Relaxed))
            .take_while(|&known| known != 0)
            .any(|known| known == start)
    }

    /// Generic over the wrapped allocator so that it is instantiated in
    /// the crate that installs the allocator, beside that crate's own
    /// copies of std's `#[inline]` functions (a debug build keeps one per
    /// crate), which it learns.
    pub(super) fn calibrate_once<A>() {
        static CALIBRATED: Once = Once::new();
        CALIBRATED.call_once(calibrate::<A>);
    }

    pub(super) enum Walk {
        /// Inside an allocation [`calibrate`] made: every function
        /// between here and `calibrate` is on the allocator's path.
        Learn,
        /// The return address into the first function not on the path.
        Find,
    }

    /// One function for both walks, so that the frames above it are the
    /// same when learning and when finding.
    #[inline(never)]
    pub(super) fn walk(walk: Walk) -> u64 {
        let mut stack = [(0, 0); DEPTH];
        match walk {
            Walk::Find => {
                let len = frames(&mut stack, |start| !on_path(start));
                stack[..len]
                    .last()
                    .filter(|&&(start, _)| !on_path(start))
                    .map_or(0, |&(_, ip)| ip as u64)
            }
            Walk::Learn => {
                let calibrating = |start| start == CALIBRATING.load(Ordering::Relaxed);
                let len = frames(&mut stack, calibrating);
                if let Some((&(start, _), path)) = stack[..len].split_last() {
                    if !calibrating(start) {
                        return 0;
                    }
                    for &(start, _) in path {
                        learn(start);
                    }
                }
                0
            }
        }
    }

    /// Only the thread calibrating writes (`Once`): the first free slot.
    fn learn(start: usize) {
        if on_path(start) {
            return;
        }
        if let Some(slot) = PATH.iter().find(|slot| slot.load(Ordering::Relaxed) == 0) {
            slot.store(start, Ordering::Relaxed);
        }
    }

    /// Allocates as code outside the allocator does, so that [`Walk::Learn`]
    /// sees the frames in between. Through the global allocator: if that
    /// is not a `TracedAllocator`, nothing is learned (and this allocator,
    /// called directly, has no shims in between).
    #[inline(never)]
    fn calibrate<A>() {
        CALIBRATING.store(calibrate::<A> as fn() as usize, Ordering::Relaxed);
        FIRING.set(Firing::Calibrating);
        let layout = std::alloc::Layout::from_size_align(24, 8).unwrap();
        // SAFETY: a block of `layout`, given back with it.
        unsafe {
            let block = std::alloc::alloc(layout);
            let block = std::alloc::realloc(block, layout, 48);
            std::alloc::dealloc(block, std::alloc::Layout::from_size_align(48, 8).unwrap());
            std::alloc::dealloc(std::alloc::alloc_zeroed(layout), layout);
        }
        let mut bytes: Vec<u8> = Vec::with_capacity(8);
        bytes.extend_from_slice(&[0; 16]);
        bytes.push(0);
        bytes.shrink_to_fit();
        drop(std::hint::black_box(bytes));
        // Allocations made inside std's compiled code (formatting, a
        // string grown there): in an optimized build the ones above
        // inline `__rust_alloc` into this function; std calls it.
        let formatted = format!("{:>40}", std::hint::black_box(1));
        drop(std::hint::black_box(formatted.to_lowercase()));
        FIRING.set(Firing::Yes);
    }
}

/// Elsewhere the caller is not known: 0.
#[cfg(not(target_arch = "x86_64"))]
mod caller {
    pub(super) fn calibrate_once<A>() {}
    pub(super) enum Walk {
        Learn,
        Find,
    }
    pub(super) fn walk(_: Walk) -> u64 {
        0
    }
}
