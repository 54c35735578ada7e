//! The functions behind the probe macros. They are generic and always inlined,
//! so each macro call site gets its own copy of the probe (and its own ELF
//! note) while sharing the event type's semaphore word.
//!
//! A call loads the word once. Zero: nothing more. Otherwise the closure
//! runs once, and its values go to whoever holds the word up: the per-event
//! site (the `nop` tracers break on) for the low half, this thread's batch
//! (`crate::batch`) for the high half. Events of the rare types are never
//! batched; they flush the thread's pending batch before firing, so a
//! thread's events reach the reader in the order they happened.

use crate::MemValue;
use styx_common::{Branch, InterruptKind};

#[cfg(not(feature = "disabled"))]
use styx_common::EventKind;

#[cfg(not(feature = "disabled"))]
use crate::enabled::{semaphores, PER_EVENT};
#[cfg(not(feature = "disabled"))]
use crate::site::event_site;

/// Defines one firing function of a batched event type. `$conv` turns the
/// closure's values into the probe's `u64`s, bound to the same names.
macro_rules! fire_batched {
    ($name:ident / $kind:ident <$($g:ident: $bound:path),*> ($($v:ident),*) => ($($conv:expr),*)) => {
        #[inline(always)]
        pub fn $name<$($g: $bound,)* F: FnOnce() -> ($($g,)*)>(f: F) {
            #[cfg(not(feature = "disabled"))]
            {
                let state = semaphores::$name.state();
                if state != 0 {
                    crate::enabled::page_align_semaphores();
                    let ($($v,)*) = f();
                    let ($($v,)*): ($(fire_batched!(@u64 $v),)*) = ($($conv,)*);
                    if state & PER_EVENT != 0 {
                        event_site!($name, semaphores::$name, [$($v),*]);
                    }
                    if state > PER_EVENT {
                        crate::batch::push(EventKind::$kind as u8, 0, [$($v),*]);
                    }
                }
            }
            #[cfg(feature = "disabled")]
            let _ = f;
        }
    };
    (@u64 $v:ident) => { u64 };
}

/// A memory access: batches keep the size in the item's aux byte.
macro_rules! fire_mem {
    ($name:ident / $kind:ident) => {
        #[inline(always)]
        pub fn $name<P: Into<u64>, A: Into<u64>, V: MemValue, F: FnOnce() -> (P, A, V)>(f: F) {
            #[cfg(not(feature = "disabled"))]
            {
                let state = semaphores::$name.state();
                if state != 0 {
                    crate::enabled::page_align_semaphores();
                    let (pc, addr, val) = f();
                    let (pc, addr, val): (u64, u64, u64) = (pc.into(), addr.into(), val.to_u64());
                    if state & PER_EVENT != 0 {
                        event_site!($name, semaphores::$name, [pc, addr, val, V::SIZE]);
                    }
                    if state > PER_EVENT {
                        crate::batch::push(EventKind::$kind as u8, V::SIZE as u8, [pc, addr, val]);
                    }
                }
            }
            #[cfg(feature = "disabled")]
            let _ = f;
        }
    };
}

/// Defines one firing function of a per-event type.
macro_rules! fire_per_event {
    ($name:ident <$($g:ident: $bound:path),*> ($($v:ident),*) => ($($conv:expr),*)) => {
        #[inline(always)]
        pub fn $name<$($g: $bound,)* F: FnOnce() -> ($($g,)*)>(f: F) {
            #[cfg(not(feature = "disabled"))]
            if semaphores::$name.state() != 0 {
                crate::enabled::page_align_semaphores();
                crate::batch::flush_pending();
                let ($($v,)*) = f();
                let ($($v,)*): ($(fire_batched!(@u64 $v),)*) = ($($conv,)*);
                event_site!($name, semaphores::$name, [$($v),*]);
            }
            #[cfg(feature = "disabled")]
            let _ = f;
        }
    };
}

fire_batched!(insn_fetch / InsnFetch <P: Into<u64>, I: Into<u64>>(pc, insn) => (pc.into(), insn.into()));
fire_batched!(insn_exec / InsnExec <P: Into<u64>, I: Into<u64>>(pc, insn) => (pc.into(), insn.into()));
fire_batched!(block / Block <P: Into<u64>, S: Into<u64>>(pc, size) => (pc.into(), size.into()));
fire_mem!(mem_read / MemRead);
fire_mem!(mem_write / MemWrite);
fire_batched!(reg_read / RegRead <P: Into<u64>, R: Into<u64>, V: Into<u64>>(pc, reg, val)
    => (pc.into(), reg.into(), val.into()));
fire_batched!(reg_write / RegWrite <P: Into<u64>, R: Into<u64>, V: Into<u64>, O: Into<u64>>(pc, reg, val, old)
    => (pc.into(), reg.into(), val.into(), old.into()));
fire_batched!(branch / Branch <P: Into<u64>, T: Into<u64>, K: Into<Branch>>(pc, target, kind)
    => (pc.into(), target.into(), kind.into().encode()));
fire_per_event!(interrupt <K: Into<InterruptKind>, N: Into<u64>, O: Into<u64>, W: Into<u64>>(kind, num, old_pc, new_pc)
    => (kind.into() as u64, num.into(), old_pc.into(), new_pc.into()));
fire_per_event!(control <C: Into<u64>, A: Into<u64>, B: Into<u64>>(code, a, b)
    => (code.into(), a.into(), b.into()));

/// Spans and markers pass strings as (pointer, length): no copy, no allocation.
#[inline(always)]
pub fn span_begin<'a, F: FnOnce() -> (&'a str, &'a str, u64)>(f: F) {
    #[cfg(not(feature = "disabled"))]
    if semaphores::span_begin.state() != 0 {
        crate::enabled::page_align_semaphores();
        crate::batch::flush_pending();
        let (category, name, id) = f();
        let [a, b, c, d, e] = span_args(category, name, id);
        event_site!(span_begin, semaphores::span_begin, [a, b, c, d, e]);
    }
    #[cfg(feature = "disabled")]
    let _ = f;
}

#[inline(always)]
pub fn span_end<'a, F: FnOnce() -> (&'a str, &'a str, u64)>(f: F) {
    #[cfg(not(feature = "disabled"))]
    if semaphores::span_end.state() != 0 {
        crate::enabled::page_align_semaphores();
        crate::batch::flush_pending();
        let (category, name, id) = f();
        let [a, b, c, d, e] = span_args(category, name, id);
        event_site!(span_end, semaphores::span_end, [a, b, c, d, e]);
    }
    #[cfg(feature = "disabled")]
    let _ = f;
}

#[cfg(not(feature = "disabled"))]
#[inline(always)]
fn span_args(category: &str, name: &str, id: u64) -> [u64; 5] {
    [
        category.as_ptr() as u64,
        category.len() as u64,
        name.as_ptr() as u64,
        name.len() as u64,
        id,
    ]
}

/// A marker's text lives until after the probe instruction: the site reads
/// it there (`readonly`, so the stores that made it come first).
#[inline(always)]
pub fn marker<S: AsRef<str>, F: FnOnce() -> S>(f: F) {
    #[cfg(not(feature = "disabled"))]
    if semaphores::marker.state() != 0 {
        crate::enabled::page_align_semaphores();
        crate::batch::flush_pending();
        let kept = f();
        let text = kept.as_ref();
        let (ptr, len) = (text.as_ptr() as u64, text.len() as u64);
        event_site!(marker, semaphores::marker, [ptr, len]);
        drop(kept);
    }
    #[cfg(feature = "disabled")]
    let _ = f;
}
