//! The probe macros emulators call. Each takes a closure returning the
//! probe's arguments (or an `Option` of them: `None` fires nothing); the
//! closure runs only while a tracer is attached.
//! Each expands to `__probe!` (what that costs and why: `fire.rs`).

/// A probe's check: `$fire` runs while semaphore word `$sema` (a path to
/// a static) is not 0: the word loaded, tested, and a jump to `$fire`, all
/// in one `asm goto`, which LLVM's inliner counts as one instruction where
/// a load (an `asm!` with an output), a compare and a branch were three
/// (see `fire.rs`). Not `cmp` of the word in memory: on this project's AMD
/// machines that ran a detached tight loop 10% slower than the load and a
/// `test` the branch fuses with (same code layout). Not `pure`: never
/// hoisted out of a loop, so a tracer attaching mid-loop is seen at the
/// next check.
#[cfg(not(feature = "disabled"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __check {
    ($sema:path, $fire:block) => {{
        // Defined outside the `unsafe` block, so that the emulator's
        // closure in `$fire` gets no unsafe context from it. Inlined.
        #[allow(unused_mut)]
        let mut __styx_fire = || $fire;
        // SAFETY: reads the 4-byte static `$sema` into a scratch register;
        // jumps to `fire` or on.
        unsafe {
            ::core::arch::asm!(
                "mov {word:e}, dword ptr [rip + {sema}]",
                "test {word:e}, {word:e}",
                "jnz {fire}",
                sema = sym $sema,
                word = out(reg) _,
                fire = label { __styx_fire() },
                options(nostack, readonly),
            );
        }
    }};
}
/// With probes compiled out: the code type-checks and is never run.
#[cfg(feature = "disabled")]
#[doc(hidden)]
#[macro_export]
macro_rules! __check {
    ($sema:path, $fire:block) => {{
        if false $fire
    }};
}

/// A probe call: the check inline, then, only while something is attached,
/// the closure called here and its values passed to a function of this
/// call site's own (its own USDT site and note). A batched type's is
/// called through `fire::call_site`, which keeps the caller's registers;
/// a per-event type's (rare events: control, spans, markers) is an
/// ordinary cold call.
#[doc(hidden)]
#[macro_export]
macro_rules! __probe {
    (batched $name:ident, $args:expr) => {{
        // Generic over the values' types (the closure's), which give
        // the item's layout; one instance, this call site's.
        #[inline(always)]
        fn __styx_probe_call<T: $crate::fire::$name::Args>(values: T) {
            extern "C" fn __styx_probe_site<T: $crate::fire::$name::Args>(
                a: u64,
                b: u64,
                c: u64,
                d: u64,
            ) {
                const SITE: u64 =
                    $crate::fire::site_id(module_path!(), file!(), line!(), column!());
                $crate::fire::$name::fire::<SITE, T>([a, b, c, d])
            }
            $crate::fire::$name::call_site(__styx_probe_site::<T>, values)
        }
        $crate::__check!($crate::__semaphores::$name, {
            // Laid out off the straight line, as a call to a cold function
            // would be (this one is called through `asm!`).
            ::core::hint::cold_path();
            // The closure's values, or its `Option` of them.
            if let Some(values) = $crate::fire::$name::Event::values(($args)()) {
                __styx_probe_call(values)
            }
        })
    }};
    (per_event $name:ident, $args:expr) => {{
        #[cold]
        #[inline(never)]
        fn __styx_probe_site<T: $crate::fire::$name::Args>(args: T) {
            const SITE: u64 = $crate::fire::site_id(module_path!(), file!(), line!(), column!());
            $crate::fire::$name::Args::fire::<SITE>(args)
        }
        $crate::__check!($crate::__semaphores::$name, {
            __styx_probe_site(($args)())
        })
    }};
}

/// An instruction word `insn` was fetched at `pc`.
///
/// ```
/// # let (pc, insn) = (0x0600u16, 0xa9u8);
/// styx_probe::insn_fetch!(|| (pc, insn));
/// ```
#[macro_export]
macro_rules! insn_fetch {
    ($args:expr) => {
        $crate::__probe!(batched insn_fetch, $args)
    };
}

/// The instruction `insn` at `pc` was executed.
///
/// ```
/// # let (pc, insn) = (0x0600u16, 0xa9u8);
/// styx_probe::insn_exec!(|| (pc, insn));
/// ```
#[macro_export]
macro_rules! insn_exec {
    ($args:expr) => {
        $crate::__probe!(batched insn_exec, $args)
    };
}

/// A basic block of `size` bytes at `pc`: on entry (translating emulators)
/// or on completion (interpreters).
///
/// ```
/// # let (pc, size) = (0x0600u16, 12u8);
/// styx_probe::block!(|| (pc, size));
/// ```
#[macro_export]
macro_rules! block {
    ($args:expr) => {
        $crate::__probe!(batched block, $args)
    };
}

/// Guest memory at `addr` was read by the instruction at `pc`, giving `val`.
///
/// The access size is the width of `val`'s type ([`MemValue`](crate::MemValue)):
/// a `u8` is a 1-byte read, a `u32` a 4-byte read.
///
/// ```
/// # let (pc, addr) = (0x0600u16, 0x0010u16);
/// let val: u8 = 0x2a;
/// styx_probe::mem_read!(|| (pc, addr, val)); // size 1
/// let word: u32 = 0xdead_beef;
/// styx_probe::mem_read!(|| (pc, addr, word)); // size 4
/// ```
#[macro_export]
macro_rules! mem_read {
    ($args:expr) => {
        $crate::__probe!(batched mem_read, $args)
    };
}

/// Guest memory at `addr` was written with `val` by the instruction at `pc`.
/// The access size is the width of `val`'s type, as for [`mem_read!`](crate::mem_read!).
///
/// ```
/// # let (pc, addr) = (0x0600u16, 0x0200u16);
/// styx_probe::mem_write!(|| (pc, addr, 0x41u8));
/// ```
#[macro_export]
macro_rules! mem_write {
    ($args:expr) => {
        $crate::__probe!(batched mem_write, $args)
    };
}

/// Register number `reg` was read at `pc`, giving `val`. Register numbers are
/// the emulator's own.
///
/// ```
/// # let (pc, a) = (0x0600u16, 7u8);
/// const REG_A: u8 = 0;
/// styx_probe::reg_read!(|| (pc, REG_A, a));
/// ```
#[macro_export]
macro_rules! reg_read {
    ($args:expr) => {
        $crate::__probe!(batched reg_read, $args)
    };
}

/// Register number `reg` was written at `pc` with `val`; `old` is what it held.
///
/// ```
/// # let (pc, old, new) = (0x0600u16, 7u8, 8u8);
/// const REG_X: u8 = 1;
/// styx_probe::reg_write!(|| (pc, REG_X, new, old));
/// ```
#[macro_export]
macro_rules! reg_write {
    ($args:expr) => {
        $crate::__probe!(batched reg_write, $args)
    };
}

/// Control left `pc` for `target`. `kind` is a [`BranchKind`](crate::BranchKind)
/// (unconditional) or a [`Branch`](crate::Branch), which says whether it was conditional.
///
/// ```
/// use styx_probe::{Branch, BranchKind};
/// # let (pc, target) = (0x0600u16, 0x0700u16);
/// styx_probe::branch!(|| (pc, target, BranchKind::Call));
/// styx_probe::branch!(|| (pc, target, Branch::conditional(BranchKind::Jump)));
/// // Taken branches only: `None` fires nothing, and while nothing is
/// // attached the comparison is not made.
/// # let end = pc + 2;
/// styx_probe::branch!(|| (target != end).then(|| (pc, target, BranchKind::Jump)));
/// ```
#[macro_export]
macro_rules! branch {
    ($args:expr) => {
        $crate::__probe!(batched branch, $args)
    };
}

/// An interrupt service routine was entered or left: `kind` is an
/// [`InterruptKind`](crate::InterruptKind), `num` the vector or line number, and
/// control moved from `old_pc` to `new_pc`. `num` and the pcs are
/// [`Value`](crate::Value)s, each travelling in its type's width (a batched
/// type, as `mem_read!`).
///
/// ```
/// use styx_probe::InterruptKind;
/// styx_probe::interrupt!(|| (InterruptKind::Entry, 2u8, 0x0612u16, 0xfe00u16));
/// ```
#[macro_export]
macro_rules! interrupt {
    ($args:expr) => {
        $crate::__probe!(batched interrupt, $args)
    };
}

/// An emulator control event; `code`, `a` and `b` mean what the emulator says
/// (reset, pause, breakpoint hit, …).
///
/// ```
/// const CONTROL_RESET: u64 = 1;
/// styx_probe::control!(|| (CONTROL_RESET, 0xfffcu16, 0u8));
/// ```
#[macro_export]
macro_rules! control {
    ($args:expr) => {
        $crate::__probe!(per_event control, $args)
    };
}

/// A span of work began: `(category, name, id)`. Pair it with a
/// [`span_end!`](crate::span_end!) carrying the same id, or use [`span!`](crate::span!),
/// which does both. Ids come from [`next_span_id`](crate::next_span_id).
///
/// ```
/// let id = styx_probe::next_span_id();
/// styx_probe::span_begin!(|| ("cpu", "frame", id));
/// // ... the work ...
/// styx_probe::span_end!(|| ("cpu", "frame", id));
/// ```
#[macro_export]
macro_rules! span_begin {
    ($args:expr) => {
        $crate::__probe!(per_event span_begin, $args)
    };
}

/// A span of work ended: `(category, name, id)`, as given to [`span_begin!`](crate::span_begin!).
///
/// ```
/// let id = styx_probe::next_span_id();
/// styx_probe::span_begin!(|| ("io", "dma", id));
/// styx_probe::span_end!(|| ("io", "dma", id));
/// ```
#[macro_export]
macro_rules! span_end {
    ($args:expr) => {
        $crate::__probe!(per_event span_end, $args)
    };
}

/// Begins a span and returns a guard that ends it when dropped.
///
/// ```
/// fn run_frame() {
///     let _span = styx_probe::span!("cpu", "frame");
///     // ... the work; the span ends when `_span` goes out of scope ...
/// }
/// # run_frame();
/// ```
#[macro_export]
macro_rules! span {
    ($category:expr, $name:expr) => {{
        let (category, name): (&'static str, &'static str) = ($category, $name);
        let mut id = 0;
        $crate::__probe!(per_event span_begin, || {
            id = $crate::next_span_id();
            (category, name, id)
        });
        $crate::Span::begun(category, name, id)
    }};
}

/// A one-off text message. The closure may return a `&str` or a `String`;
/// `format!` in it costs nothing while no tracer is attached.
///
/// ```
/// styx_probe::marker!(|| "reset");
/// # let pc = 0x0600u16;
/// styx_probe::marker!(|| format!("breakpoint at {pc:#06x}"));
/// ```
#[macro_export]
macro_rules! marker {
    ($args:expr) => {
        $crate::__probe!(per_event marker, $args)
    };
}
