//! Whether a tracer is attached: for work no probe closure can hold, such as
//! choosing between an instrumented and a plain interpreter loop once per
//! block of guest instructions instead of checking every probe on the way.
//!
//! Each event type's semaphore is a 32-bit word the kernel raises while a
//! tracer is attached to that type's sites (per event or in batches);
//! reading it is what a probe does before deciding to fire.

#[cfg(not(feature = "disabled"))]
use core::cell::UnsafeCell;
use styx_common::EventKind;

/// The word of semaphore `$sema` (a path to a static), loaded RIP-relative
/// by one instruction. Exported (hidden) for declared event types.
#[doc(hidden)]
#[macro_export]
macro_rules! __load_word {
    ($sema:path) => {{
        let word: u32;
        // SAFETY: reads the 4-byte static `$sema`; writes nothing but `word`.
        unsafe {
            core::arch::asm!(
                "mov {word:e}, dword ptr [rip + {sema}]",
                word = out(reg) word,
                sema = sym $sema,
                options(nostack, preserves_flags, readonly),
            );
        }
        word
    }};
}
#[cfg(not(feature = "disabled"))]
pub(crate) use __load_word as load_word;

/// The symbol of event type `$probe`'s semaphore word. Defined in
/// assembly, hidden (every module of a program addresses it directly, and
/// a shared library exports none), with styx-probe's version in its name
/// (two versions in one program keep apart, as the batch slot's): so that
/// C code linked with styx-probe-c's static library reads it by name, one
/// load inline (`styx_probe.h`), which a Rust static's mangled name would
/// not allow.
#[cfg(not(feature = "disabled"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __semaphore_symbol {
    ($probe:ident) => {
        concat!(
            "styx_probe_v",
            env!("CARGO_PKG_VERSION_MAJOR"),
            "_",
            env!("CARGO_PKG_VERSION_MINOR"),
            "_semaphore_",
            stringify!($probe)
        )
    };
}

/// Declares every styx event type's semaphore word, from styx-common's event
/// catalogue: a word in `.probes` ([`__semaphore_symbol!`]) and an
/// extern static named as the probe, for the probes' `sym` operands.
#[cfg(not(feature = "disabled"))]
macro_rules! semaphores {
    ($(
        $(#[$doc:meta])* $kind:ident = $id:literal, $probe:ident, $shape:ident $(($n:literal))?,
            $delivery:ident, [$($arg:ident),*], [$($field:ident: $ty:ident),*];
    )*) => {
        /// One semaphore word per event type, named as its probe.
        #[doc(hidden)]
        #[allow(non_upper_case_globals)]
        pub mod semaphores {
            use super::SemaphoreWord;
            $(
                core::arch::global_asm!(
                    ".pushsection .probes, \"aw\", @progbits",
                    ".balign 4",
                    concat!(".globl ", __semaphore_symbol!($probe)),
                    concat!(".hidden ", __semaphore_symbol!($probe)),
                    concat!(".type ", __semaphore_symbol!($probe), ", @object"),
                    concat!(".size ", __semaphore_symbol!($probe), ", 4"),
                    concat!(__semaphore_symbol!($probe), ":"),
                    ".4byte 0",
                    ".popsection",
                );
                unsafe extern "C" {
                    #[link_name = __semaphore_symbol!($probe)]
                    pub safe static $probe: SemaphoreWord;
                }
            )*
        }

        #[inline(always)]
        fn semaphore(kind: EventKind) -> u32 {
            match kind {
                $(EventKind::$kind => load_word!(semaphores::$probe),)*
                // Other providers' probes and traced functions: not
                // styx-probe's to report.
                EventKind::Usdt | EventKind::Function => 0,
            }
        }

        #[inline(always)]
        fn any_semaphore() -> bool {
            0 $(| load_word!(semaphores::$probe))* != 0
        }
    };
}

/// An event type's semaphore word, the static, laid out as
/// `styx_common::batch::Semaphore` (the layout, hence another name): the
/// kernel counts its low half up for each tracer attached to the type's
/// per-event sites, its high half for each attached to its batch-enable
/// site. A probe loads the word once; zero means nobody traces the type.
#[cfg(not(feature = "disabled"))]
#[doc(hidden)]
#[repr(C, align(4))]
pub struct SemaphoreWord(UnsafeCell<u32>);

// SAFETY: only the kernel writes it; probes read it by `asm!` (`load_word!`).
#[cfg(not(feature = "disabled"))]
unsafe impl Sync for SemaphoreWord {}

/// The low half's bits: per-event tracers.
#[cfg(not(feature = "disabled"))]
pub(crate) const PER_EVENT: u32 = 0xffff;

#[cfg(not(feature = "disabled"))]
impl SemaphoreWord {
    #[doc(hidden)]
    pub const fn new() -> SemaphoreWord {
        SemaphoreWord(UnsafeCell::new(0))
    }
}

#[cfg(not(feature = "disabled"))]
const _: () = assert!(
    core::mem::size_of::<SemaphoreWord>() == core::mem::size_of::<styx_common::batch::Semaphore>()
);

/// A zero-sized marker that starts `.probes` (the semaphores' section) on a
/// page boundary: the section takes the largest alignment of its parts. With
/// lld's layout the first page of the writable data segment is, in the file,
/// also the last page of the RELRO segment; for a process started after a
/// tracer attached, the kernel raises a semaphore on that page in the RELRO
/// mapping instead, and the probe never fires (bpftrace's too). Mutable only
/// so that its section is writable, as `.probes` is; never accessed.
/// `#[used]` is what links it in: rustc keeps a used static of a library
/// crate in every program built with it (so the probes need not refer to
/// it, which cost a load on every cold path).
#[cfg(not(feature = "disabled"))]
#[repr(C, align(4096))]
pub struct ProbesPage([u8; 0]);

#[cfg(not(feature = "disabled"))]
#[used]
#[link_section = ".probes"]
static mut PROBES_PAGE: ProbesPage = ProbesPage([]);

#[cfg(not(feature = "disabled"))]
styx_common::event_catalogue!(semaphores);

/// Whether a tracer is attached to the probes of event type `kind`.
/// Always `false` with the `disabled` feature, and for
/// [`EventKind::Usdt`] (other providers' probes).
///
/// ```
/// use styx_probe::{enabled, EventKind};
/// if enabled(EventKind::MemRead) {
///     // e.g. switch the memory bus to its instrumented path
/// }
/// ```
#[inline(always)]
pub fn enabled(kind: EventKind) -> bool {
    #[cfg(not(feature = "disabled"))]
    return semaphore(kind) != 0;
    #[cfg(feature = "disabled")]
    {
        let _ = kind;
        false
    }
}

/// Whether a tracer is attached to any styx probe: one check that can gate a
/// whole block of instrumented work. It costs a load per event type, so call
/// it per block or frame, not per instruction. Always `false` with the
/// `disabled` feature.
///
/// ```
/// // Per frame of guest instructions: the plain loop while nobody traces.
/// let traced = styx_probe::any_enabled();
/// # let _ = traced;
/// ```
#[inline(always)]
pub fn any_enabled() -> bool {
    #[cfg(not(feature = "disabled"))]
    return any_semaphore();
    #[cfg(feature = "disabled")]
    false
}
