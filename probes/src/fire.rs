//! The functions behind the probe macros. They are generic and always inlined,
//! so each macro call site gets its own copy of the probe (and its own ELF
//! note) while sharing the event type's semaphore.
//!
//! The `usdt` crate's probe macros are private to the crate that defines the
//! provider; these functions are how other crates reach them.

use crate::MemValue;
use styx_common::{Branch, InterruptKind};

#[cfg(not(feature = "disabled"))]
// `probe_` prefix: a macro named `marker` would clash with a builtin attribute.
#[usdt::provider(probe_format = "probe_{probe}")]
mod styx {
    fn insn_fetch(pc: u64, insn: u64) {}
    fn insn_exec(pc: u64, insn: u64) {}
    fn block(pc: u64, size: u64) {}
    fn mem_read(pc: u64, addr: u64, val: u64, size: u64) {}
    fn mem_write(pc: u64, addr: u64, val: u64, size: u64) {}
    fn reg_read(pc: u64, reg: u64, val: u64) {}
    fn reg_write(pc: u64, reg: u64, val: u64, old: u64) {}
    fn branch(pc: u64, target: u64, kind: u64) {}
    fn interrupt(kind: u64, num: u64, old_pc: u64, new_pc: u64) {}
    fn control(code: u64, a: u64, b: u64) {}
    fn span_begin(category: u64, category_len: u64, name: u64, name_len: u64, id: u64) {}
    fn span_end(category: u64, category_len: u64, name: u64, name_len: u64, id: u64) {}
    fn marker(text: u64, text_len: u64) {}
}

/// Defines one firing function: with probes compiled in, it forwards the
/// closure's converted values to the `usdt` probe; compiled out, it only
/// keeps the closure's type checked.
macro_rules! fire_fn {
    ($name:ident / $probe:ident <$($g:ident: $bound:path),*> ($($v:ident),*) => ($($conv:expr),*)) => {
        #[inline(always)]
        pub fn $name<$($g: $bound,)* F: FnOnce() -> ($($g,)*)>(f: F) {
            #[cfg(not(feature = "disabled"))]
            styx::$probe!(|| {
                crate::enabled::page_align_semaphores();
                let ($($v,)*) = f();
                ($($conv,)*)
            });
            #[cfg(feature = "disabled")]
            let _ = f;
        }
    };
}

fire_fn!(insn_fetch / probe_insn_fetch <P: Into<u64>, I: Into<u64>>(pc, insn) => (pc.into(), insn.into()));
fire_fn!(insn_exec / probe_insn_exec <P: Into<u64>, I: Into<u64>>(pc, insn) => (pc.into(), insn.into()));
fire_fn!(block / probe_block <P: Into<u64>, S: Into<u64>>(pc, size) => (pc.into(), size.into()));
fire_fn!(mem_read / probe_mem_read <P: Into<u64>, A: Into<u64>, V: MemValue>(pc, addr, val)
    => (pc.into(), addr.into(), val.to_u64(), V::SIZE));
fire_fn!(mem_write / probe_mem_write <P: Into<u64>, A: Into<u64>, V: MemValue>(pc, addr, val)
    => (pc.into(), addr.into(), val.to_u64(), V::SIZE));
fire_fn!(reg_read / probe_reg_read <P: Into<u64>, R: Into<u64>, V: Into<u64>>(pc, reg, val)
    => (pc.into(), reg.into(), val.into()));
fire_fn!(reg_write / probe_reg_write <P: Into<u64>, R: Into<u64>, V: Into<u64>, O: Into<u64>>(pc, reg, val, old)
    => (pc.into(), reg.into(), val.into(), old.into()));
fire_fn!(branch / probe_branch <P: Into<u64>, T: Into<u64>, K: Into<Branch>>(pc, target, kind)
    => (pc.into(), target.into(), kind.into().encode()));
fire_fn!(interrupt / probe_interrupt <K: Into<InterruptKind>, N: Into<u64>, O: Into<u64>, W: Into<u64>>(kind, num, old_pc, new_pc)
    => (kind.into() as u64, num.into(), old_pc.into(), new_pc.into()));
fire_fn!(control / probe_control <C: Into<u64>, A: Into<u64>, B: Into<u64>>(code, a, b)
    => (code.into(), a.into(), b.into()));

/// Spans and markers pass strings as (pointer, length): no copy, no allocation.
#[inline(always)]
pub fn span_begin<'a, F: FnOnce() -> (&'a str, &'a str, u64)>(f: F) {
    #[cfg(not(feature = "disabled"))]
    styx::probe_span_begin!(|| {
        crate::enabled::page_align_semaphores();
        let (category, name, id) = f();
        span_args(category, name, id)
    });
    #[cfg(feature = "disabled")]
    let _ = f;
}

#[inline(always)]
pub fn span_end<'a, F: FnOnce() -> (&'a str, &'a str, u64)>(f: F) {
    #[cfg(not(feature = "disabled"))]
    styx::probe_span_end!(|| {
        crate::enabled::page_align_semaphores();
        let (category, name, id) = f();
        span_args(category, name, id)
    });
    #[cfg(feature = "disabled")]
    let _ = f;
}

#[cfg(not(feature = "disabled"))]
#[inline(always)]
fn span_args(category: &str, name: &str, id: u64) -> (u64, u64, u64, u64, u64) {
    (
        category.as_ptr() as u64,
        category.len() as u64,
        name.as_ptr() as u64,
        name.len() as u64,
        id,
    )
}

/// A marker's text must stay alive until the probe instruction has run, so it
/// is parked in `keep`, which outlives the probe, not in the argument closure.
#[inline(always)]
pub fn marker<S: AsRef<str>, F: FnOnce() -> S>(f: F) {
    #[cfg(not(feature = "disabled"))]
    {
        let mut keep: Option<S> = None;
        styx::probe_marker!(|| {
            crate::enabled::page_align_semaphores();
            let kept = keep.insert(f());
            let text = kept.as_ref();
            (text.as_ptr() as u64, text.len() as u64)
        });
    }
    #[cfg(feature = "disabled")]
    let _ = f;
}
