//! A USDT probe site: a `nop` at the call site and the ELF note that
//! describes it (SystemTap's `stapsdt` format, which bpftrace, perf and
//! styx-loader read). Written here rather than by the `usdt` crate because
//! styx's semaphores are 32-bit words whose halves belong to different
//! sites (see `styx_common::batch`), and a note must be able to name either
//! half.
//!
//! Every argument is a `u64` in the next SysV argument register
//! (`8@%rdi 8@%rsi …`), which is where styx's eBPF programs read them.

/// Emits a probe site. `$sema` is a static whose address (plus `$offset`
/// bytes) the note gives as the semaphore; the arguments go in registers.
/// `$options` are the `asm!` options: `readonly` where the tracer only reads
/// the process's memory, none where it may write (the flush probe's status).
/// Exported (hidden) for the event types an emulator declares
/// (`event!`), whose provider and name are strings (`@str`).
#[doc(hidden)]
#[macro_export]
macro_rules! __probe_site {
    ($provider:ident, $probe:ident, $sema:path, $offset:literal, $spec:literal,
     [$($reg:tt = $val:expr),*] $(, $option:ident)*) => {
        $crate::__probe_site!(@str "", "", 0, stringify!($provider), stringify!($probe), $sema, $offset, $spec, [$($reg = $val),*] $(, $option)*)
    };
    // A site that never runs: jumped over, there only to be attached to.
    (@skipped $provider:expr, $probe:expr, $sema:path, $offset:literal) => {
        $crate::__probe_site!(@str "jmp 995f", "995:", 0, $provider, $probe, $sema, $offset, "", [], nomem)
    };
    (@ $before:literal, $after:literal, $site:expr, $provider:ident, $probe:ident, $sema:path, $offset:literal,
     $spec:literal, [$($reg:tt = $val:expr),*] $(, $option:ident)*) => {
        $crate::__probe_site!(@str $before, $after, $site, stringify!($provider), stringify!($probe), $sema, $offset, $spec, [$($reg = $val),*] $(, $option)*)
    };
    // `$site` names the call site in a comment (see `fire.rs`).
    (@str $before:literal, $after:literal, $site:expr, $provider:expr, $probe:expr, $sema:path, $offset:literal,
     $spec:expr, [$($reg:tt = $val:expr),*] $(, $option:ident)*) => {
        // SAFETY: a `nop` and data in other sections; the values are only
        // placed in registers.
        unsafe {
            core::arch::asm!(
                "/* styx call site {site} */",
                $before,
                "990: nop",
                ".pushsection .note.stapsdt, \"\", \"note\"",
                ".balign 4",
                ".4byte 992f-991f, 994f-993f, 3",
                "991: .asciz \"stapsdt\"",
                "992: .balign 4",
                "993: .8byte 990b",
                ".8byte _.stapsdt.base",
                concat!(".8byte {sema}+", $offset),
                concat!(".asciz \"", $provider, "\""),
                concat!(".asciz \"", $probe, "\""),
                concat!(".asciz \"", $spec, "\""),
                "994: .balign 4",
                ".popsection",
                // The base tools compare with the note's second address to
                // detect a prelinked file; one per file, shared by every note.
                ".ifndef _.stapsdt.base",
                ".pushsection .stapsdt.base, \"aGR\", \"progbits\", .stapsdt.base, comdat",
                ".weak _.stapsdt.base",
                ".hidden _.stapsdt.base",
                "_.stapsdt.base:",
                ".space 1",
                ".size _.stapsdt.base, 1",
                ".popsection",
                ".endif",
                $after,
                sema = sym $sema,
                site = const $site,
                $(in($reg) $val,)*
                options(nostack, preserves_flags $(, $option)*),
            );
        }
    };
}
pub(crate) use __probe_site as probe_site;

/// A site of styx's own provider for the `$n` (2 to 5) values of the
/// array `$v`, gated on the low (per-event) half of `$sema`, at call site
/// `$site` (`fire::site_id`). The values
/// must be live at the `nop`; the tracer may read memory they point to
/// (`readonly`).
macro_rules! event_site {
    ($probe:ident, $sema:path, $site:expr, $v:ident, 2) => {
        $crate::__probe_site!(@ "", "", $site, styx, $probe, $sema, 0, "8@%rdi 8@%rsi", ["rdi" = $v[0], "rsi" = $v[1]], readonly)
    };
    ($probe:ident, $sema:path, $site:expr, $v:ident, 3) => {
        $crate::__probe_site!(@ "", "", $site, styx, $probe, $sema, 0, "8@%rdi 8@%rsi 8@%rdx", ["rdi" = $v[0], "rsi" = $v[1], "rdx" = $v[2]], readonly)
    };
    ($probe:ident, $sema:path, $site:expr, $v:ident, 4) => {
        $crate::__probe_site!(@ "", "", $site, styx, $probe, $sema, 0, "8@%rdi 8@%rsi 8@%rdx 8@%rcx", ["rdi" = $v[0], "rsi" = $v[1], "rdx" = $v[2], "rcx" = $v[3]], readonly)
    };
    ($probe:ident, $sema:path, $site:expr, $v:ident, 5) => {
        $crate::__probe_site!(@ "", "", $site, styx, $probe, $sema, 0, "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8", ["rdi" = $v[0], "rsi" = $v[1], "rdx" = $v[2], "rcx" = $v[3], "r8" = $v[4]], readonly)
    };
}

pub(crate) use event_site;
