//! Whether a tracer is attached: for work no probe closure can hold, such as
//! choosing between an instrumented and a plain interpreter loop once per
//! block of guest instructions instead of checking every probe on the way.
//!
//! Each event type's semaphore is the `usdt` crate's, a `u16` the kernel
//! raises while a tracer is attached to that type's sites; reading it is
//! what a probe does before deciding to fire.

use styx_common::EventKind;

/// Declares every styx event type's semaphore, from styx-common's event
/// catalogue: `__usdt_sema_styx_<probe>`, the name the `usdt` crate gives it.
#[cfg(not(feature = "disabled"))]
macro_rules! semaphores {
    ($(
        $(#[$doc:meta])* $kind:ident = $id:literal, $probe:ident, $shape:ident $(($n:literal))?,
            [$($arg:ident),*], [$($field:ident: $ty:ident),*];
    )*) => {
        // The `usdt` crate defines a semaphore (weak, hidden, in `.probes`)
        // wherever a site of its type is compiled. Defining each one here the
        // same way lets these reads link in a program with no site of some
        // type; the linker keeps one definition, shared by every site.
        core::arch::global_asm!(
            $(
                concat!(".ifndef __usdt_sema_styx_", stringify!($probe)),
                ".pushsection .probes, \"aw\", \"progbits\"",
                concat!(".weak __usdt_sema_styx_", stringify!($probe)),
                concat!(".hidden __usdt_sema_styx_", stringify!($probe)),
                concat!("__usdt_sema_styx_", stringify!($probe), ":"),
                ".zero 2",
                concat!(".type __usdt_sema_styx_", stringify!($probe), ", @object"),
                concat!(".size __usdt_sema_styx_", stringify!($probe), ", 2"),
                ".popsection",
                ".endif",
            )*
        );

        #[allow(non_upper_case_globals)]
        unsafe extern "C" {
            $(
                #[link_name = concat!("__usdt_sema_styx_", stringify!($probe))]
                static $probe: u16;
            )*
        }

        #[inline(always)]
        fn semaphore(kind: EventKind) -> u16 {
            // SAFETY: a `u16` the kernel changes under us: read it volatile, as the probes do.
            unsafe {
                match kind {
                    $(EventKind::$kind => (&raw const $probe).read_volatile(),)*
                    // Other providers' probes: not styx's to report.
                    EventKind::Usdt => 0,
                }
            }
        }

        #[inline(always)]
        fn any_semaphore() -> bool {
            // SAFETY: as in `semaphore`.
            unsafe { 0 $(| (&raw const $probe).read_volatile())* != 0 }
        }
    };
}

/// A zero-sized marker that starts `.probes` (the semaphores' section) on a
/// page boundary: the section takes the largest alignment of its parts. With
/// lld's layout the first page of the writable data segment is, in the file,
/// also the last page of the RELRO segment; for a process started after a
/// tracer attached, the kernel raises a semaphore on that page in the RELRO
/// mapping instead, and the probe never fires (bpftrace's too). Mutable only
/// so that its section is writable, as `.probes` is; never accessed.
#[cfg(not(feature = "disabled"))]
#[repr(C, align(4096))]
pub struct ProbesPage([u8; 0]);

#[cfg(not(feature = "disabled"))]
#[used]
#[link_section = ".probes"]
static mut PROBES_PAGE: ProbesPage = ProbesPage([]);

/// Called on every probe site's cold path: the reference links in
/// [`PROBES_PAGE`] wherever a styx probe is compiled.
#[cfg(not(feature = "disabled"))]
#[inline(always)]
pub(crate) fn page_align_semaphores() {
    core::hint::black_box(&raw const PROBES_PAGE);
}

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
