//! What a probe call costs where it is written, and what runs once it fires.
//!
//! A probe macro expands, at the emulator's call site, to the check and a
//! call (see `__probe!` in `macros.rs`):
//!
//! ```text
//! extern "C" fn site(a: u64, b: u64, c: u64, d: u64) { fire::mem_read::fire([a, b, c, d]) }
//! asm goto: mov eax, [rip + semaphore]; test eax, eax; jnz cold   // inline: the check
//! cold: {
//!     let values = (|| (pc, addr, val))();      // the closure runs here, inlined
//!     fire::mem_read::call_site(site, values);  // `call append`, in assembly
//! }
//! ```
//!
//! Why this shape (measured on a real interpreter; issue 24's table):
//! - Everything but the check is out of line. What the inliner sees in the
//!   emulator's function is the check and a call: the emulator's own
//!   small helpers (a bus access, a push) stay small enough to be inlined,
//!   as they are with the probes compiled out.
//! - The closure is called where it is written, inside the branch, and only
//!   its values cross into the cold function (it may return an `Option` of
//!   them: `None` fires nothing, and a condition only tracing needs is then
//!   worked out only while traced). A closure handed to an
//!   out-of-line function would make every local it borrows address-taken,
//!   kept on the stack for the whole host function.
//! - The check (`__check!`, `macros.rs`) is one `asm goto`: the load of
//!   the semaphore word, addressed RIP-relative to the static (`sym`; Rust
//!   reaches another crate's static through the GOT, a second, dependent
//!   load), a `test` and a `jnz` to the cold block (the asm's `label`).
//!   LLVM counts it as one instruction where a load (an `asm!` with an
//!   output), a compare and a branch were three: styx-rv's detached run
//!   took 119.4 instructions a guest instruction against 129.3
//!   (callgrind; 96.8 compiled out), and its `Bus::write_mem`, with three
//!   `mem_write!` sites, stays within ThinLTO's import limit (100 IR
//!   instructions) again: the old form took it just past it, so it was
//!   called, not inlined, and copied each store with `memcpy`. A `cmp` of
//!   the word in memory with 0 and a `jne` (no register, 116.9 there) ran
//!   styx-rv no faster (14.0% against 14.2% slower than compiled out over
//!   three code layouts) and the detached tight loop 10% slower (0.55
//!   against 0.50 ns, same layout): the `test` fuses with its branch. The
//!   `asm!` is `readonly`: the compiler keeps the emulator's values in
//!   registers across it. It is not `pure`, so it is never hoisted out of
//!   a loop: a tracer attaching mid-loop is seen at the next check.
//! - `site` is a new function item at every call site (the macro defines
//!   it), so each call site keeps its own USDT site and note. Its `asm!`
//!   names the call site (file, line, column) in a comment, so that no two
//!   are identical code for LLVM's function merging to fold into one.
//! - The frequent (batched) types' cold block calls their type's append
//!   routine (`fast_append!`, assembly), not `site`: while only batch
//!   tracers hold the type it appends the item to the thread's batch
//!   itself, in the registers the call site gave up, and otherwise calls
//!   `site`, saving what compiled code may change. The routine is generic
//!   over the call site's argument types (`append::<T>`): the item's tag,
//!   length and where each value goes are constants in its code, one
//!   instance per combination of widths, so the cold block only moves the
//!   values into registers and nothing is worked out per event. Packing
//!   the item in the cold block instead (shifts and ors, ~10 instructions
//!   a site) made styx-rv's `Bus::read_mem` too big to inline: 147.8
//!   instructions a guest instruction detached, against 129.3
//!   (callgrind). Compiled code cannot be told which registers to leave
//!   alone, so reaching the append through `site` cost a save of every
//!   scratch register and `site`'s own saves (the thread-local lookup is a
//!   call until the linker relaxes it): a traced `mem_read` in a tight
//!   loop took 48 instructions, the old all-inline probes 28, a routine 33
//!   (callgrind). Once items carried their values' widths, one routine per
//!   type placing each value at the offset a layout word from the cold
//!   block gave (a shift, a byte move and a store a value, `rbx` saved)
//!   took 57.7 instructions a traced tight-loop event, the loop included;
//!   the routine per argument types, whose room check needs neither the
//!   item's length nor a null test (`batch::NO_BUFFER`) and which stores a
//!   fixed last byte itself (`Args::FIXED`), takes 38.0
//!   (`styx-bench/examples/append_count.rs` counts them).
//!
//! In the cold function the word is loaded again: zero (a tracer detached
//! since the check, or a `jmp` left by anything patching the check) does
//! nothing. Otherwise the values go to whoever holds the word up: the
//! per-event site (the `nop` tracers break on) for the low half, this
//! thread's batch (`crate::batch`) for the high half. Events of the rare
//! types (control, spans, markers) are never batched; they flush the
//! thread's pending batch before firing, so a thread's events reach the
//! reader in the order they happened.
//! The append routine itself reads only the word's low half: the call
//! site saw the word non-zero, so with the low half zero the high half was
//! up (a tracer detaching since may still get that one item in its
//! thread's batch, as it may between any check and the store after it).

use crate::{MemValue, Value};
#[cfg(not(feature = "disabled"))]
use styx_common::item::TAG_BYTES;
use styx_common::{Branch, EventKind, InterruptKind};
#[cfg(not(feature = "disabled"))]
use styx_common::{MARKER_TEXT_MAX, SPAN_CATEGORY_MAX, SPAN_NAME_MAX};

#[cfg(not(feature = "disabled"))]
use crate::enabled::{load_word, semaphores, PER_EVENT};
#[cfg(not(feature = "disabled"))]
use crate::site::event_site;

/// `Args::FIXED` of an argument tuple with a fixed last value, or
/// without (`None`); `@width`, that value's width: a byte.
macro_rules! fixed {
    (@width $fixed:expr) => {
        1
    };
    () => {
        None
    };
    ($fixed:expr) => {
        Some($fixed)
    };
}

/// Defines `pub mod $name` of a batched type (the call site's check is
/// `__check!` on its semaphore word): `Args`, the argument tuples the
/// probe takes, each with the widths of its values (the item's tag,
/// length and layout follow from them) and its values as the per-event
/// site passes them (`u64`s); `Event`, a tuple or an `Option` of one;
/// `append`, the type's append routine ([`fast_append!`]), and
/// `call_site`, which calls it with the values and the layout word; and
/// `fire`, what the call site's function runs with the values (the Rust
/// path packs the item into `$words` words).
macro_rules! batched_probe {
    ($name:ident / $kind:ident, words $words:tt, site $site:tt / $fewer:tt; $(
        <$($g:ident: $bound:path),*> ($($var:ident),*)
            => [$($value:expr; $bytes:expr),*] $(fixed $fixed:expr)?;
    )+) => {
        #[doc(hidden)]
        pub mod $name {
            #[allow(unused_imports)]
            use super::*;

            /// Words of the type's widest item (the Rust path packs it).
            pub const WORDS: usize = $words;

            /// Calls the append routine of the call site's argument types
            /// ([`append`]) from the call site's cold block with the call
            /// site's function `site` and the values as they are, but a
            /// fixed last one (`Args::FIXED`, in the routine's code): all
            /// the cold block holds is moves.
            #[inline(always)]
            pub fn call_site<T: Args>(site: SiteFn, values: T) {
                let values = values.values();
                #[cfg(not(feature = "disabled"))]
                if T::FIXED.is_some() {
                    call_append!($fewer; append::<T>, site, values);
                } else {
                    call_append!($site; append::<T>, site, values);
                }
                #[cfg(feature = "disabled")]
                let _ = (site, values);
            }

            /// The append routine of the argument types `T`
            /// ([`fast_append!`]): their item's tag, length and value
            /// offsets are in its code.
            #[cfg(not(feature = "disabled"))]
            #[doc(hidden)]
            #[unsafe(naked)]
            pub unsafe extern "C" fn append<T: Args>() {
                fast_append!($site; $name, $kind, T)
            }

            /// The argument tuples the probe accepts.
            pub trait Args: Sized {
                /// Bytes of each value in the item, in order.
                const WIDTHS: &'static [usize];
                /// The item's tag.
                const TAG: u16 = styx_common::item::event_tag(EventKind::$kind, Self::WIDTHS);
                /// Bytes of the item.
                const BYTES: u32 = item_bytes(Self::WIDTHS);
                /// Where each value starts in the item: value `i` at
                /// `AT[i]` (past the last value, the item's end).
                const AT: [usize; 4] = value_offsets(styx_common::item::TAG_BYTES, Self::WIDTHS);
                /// The last value, a byte, when the argument types fix it
                /// (a memory access's size, an instruction's unknown
                /// length): the routine stores it, the call site passes
                /// one register fewer.
                const FIXED: Option<u8> = None;
                /// The values, as the per-event site passes them.
                fn values(self) -> [u64; $site];
            }

            /// What a probe's closure may return: its values, or an
            /// `Option` of them, `None` for no event (a branch not taken:
            /// `branch!(|| (next != end).then(|| (pc, next, kind)))`),
            /// so that a condition only tracing needs is worked out only
            /// while traced.
            pub trait Event<T> {
                fn values(self) -> Option<T>;
            }

            impl<T: Args> Event<T> for T {
                #[inline(always)]
                fn values(self) -> Option<T> {
                    Some(self)
                }
            }

            impl<T: Args> Event<T> for Option<T> {
                #[inline(always)]
                fn values(self) -> Option<T> {
                    self
                }
            }

            $(
                impl<$($g: $bound),*> Args for ($($g,)*) {
                    const WIDTHS: &'static [usize] = &[$($bytes,)* $(fixed!(@width $fixed))?];
                    const FIXED: Option<u8> = fixed!($($fixed)?);
                    #[inline(always)]
                    fn values(self) -> [u64; $site] {
                        let ($($var,)*) = self;
                        [$($value,)* $($fixed as u64)?]
                    }
                }
            )+

            /// Hands the values to whoever holds the word up (inlined into
            /// the call site's function, with the site's `nop` and note):
            /// the batch takes them packed.
            #[inline(always)]
            #[allow(unused_variables)]
            pub fn fire<const SITE: u64, T: Args>(values: [u64; 4]) {
                #[cfg(not(feature = "disabled"))]
                {
                    let state = load_word!(semaphores::$name);
                    if state == 0 {
                        return;
                    }
                    let mut site: [u64; $site] = core::array::from_fn(|i| values[i]);
                    // Not in its register: the routine has it.
                    if let Some(fixed) = T::FIXED {
                        site[$site - 1] = fixed as u64;
                    }
                    if state & PER_EVENT != 0 {
                        event_site!($name, semaphores::$name, SITE, site, $site);
                    }
                    if state > PER_EVENT {
                        let words: [u64; WORDS] = pack(T::TAG as u64, TAG_BYTES, &site, T::WIDTHS);
                        crate::batch::push(EventKind::$kind as u8, T::BYTES, words);
                    }
                }
            }
        }
    };
}

/// The function of a call site's own that a batched type's append routine
/// calls with the values (four registers, the routine's).
pub type SiteFn = extern "C" fn(u64, u64, u64, u64);

/// A declared type's site function: five registers, its values as they
/// are or its packed item.
pub type PackedSiteFn = extern "C" fn(u64, u64, u64, u64, u64);

/// Where each of an item's first `N` values starts, the first at `first`
/// (after a catalogue item's tag, or a declared item's tag and length
/// byte), for values `widths` bytes wide; past the last, the item's end.
pub const fn value_offsets<const N: usize>(first: usize, widths: &[usize]) -> [usize; N] {
    let mut at = [0; N];
    let mut next = first;
    let mut i = 0;
    while i < at.len() {
        at[i] = next;
        if i < widths.len() {
            next += widths[i];
        }
        i += 1;
    }
    at
}

/// Bytes of an item whose values are `widths` bytes wide.
const fn item_bytes(widths: &[usize]) -> u32 {
    let mut bytes = styx_common::item::TAG_BYTES;
    let mut i = 0;
    while i < widths.len() {
        bytes += widths[i];
        i += 1;
    }
    bytes as u32
}

/// An item as `W` little-endian words: its first `head_bytes` bytes
/// `head` (the tag, and a declared type's length byte), then each value in
/// its width (`styx_common::item`), cut to it. The widths are constants
/// where this is inlined: what is left are shifts and ors. Bits past the
/// item are 0.
#[inline(always)]
pub fn pack<const W: usize>(
    head: u64,
    head_bytes: usize,
    values: &[u64],
    widths: &[usize],
) -> [u64; W] {
    let mut words = [0u64; W];
    words[0] = head;
    let mut bit = 8 * head_bytes;
    for (&value, &bytes) in values.iter().zip(widths) {
        let value = match bytes {
            8 => value,
            _ => value & ((1 << (8 * bytes)) - 1),
        };
        let (word, shift) = (bit / 64, bit % 64);
        words[word] |= value << shift;
        if shift + 8 * bytes > 64 {
            words[word + 1] |= value >> (64 - shift);
        }
        bit += 8 * bytes;
    }
    words
}

/// The values of a packed item whose values start after `head_bytes`,
/// each zero-extended to a `u64`.
#[inline(always)]
pub fn unpack<const N: usize>(words: &[u64], head_bytes: usize, widths: &[usize]) -> [u64; N] {
    let mut values = [0u64; N];
    let mut bit = 8 * head_bytes;
    for (value, &bytes) in values.iter_mut().zip(widths) {
        let (word, shift) = (bit / 64, bit % 64);
        let mut read = words[word] >> shift;
        if shift + 8 * bytes > 64 {
            read |= words[word + 1] << (64 - shift);
        }
        *value = if bytes == 8 {
            read
        } else {
            read & ((1 << (8 * bytes)) - 1)
        };
        bit += 8 * bytes;
    }
    values
}

/// Defines `pub mod $name` of a per-event type: `Args`, each
/// tuple with its `fire`, run in the call site's cold function.
macro_rules! per_event_probe {
    ($name:ident: <$($g:ident: $bound:path),*> ($($t:ty),*) ($($var:ident),*) => $n:tt $values:expr) => {
        #[doc(hidden)]
        pub mod $name {
            #[allow(unused_imports)]
            use super::*;

            pub trait Args {
                fn fire<const SITE: u64>(self);
            }

            impl<$($g: $bound),*> Args for ($($t,)*) {
                #[inline(always)]
                #[allow(unused_variables)]
                fn fire<const SITE: u64>(self) {
                    let ($($var,)*) = self;
                    #[cfg(not(feature = "disabled"))]
                    if load_word!(semaphores::$name) != 0 {
                            crate::batch::flush_pending();
                        let site: [u64; $n] = $values;
                        event_site!($name, semaphores::$name, SITE, site, $n);
                    }
                }
            }
        }
    };
}

// Each value travels in its type's width (`Value`). An instruction's
// length is the item's last byte and the per-event site's third value; 0
// where the emulator gives none.
batched_probe!(insn_fetch / InsnFetch, words 3, site 3 / 2;
    <P: Value, I: Value>(pc, insn) => [pc.bits(); P::BYTES, insn.bits(); I::BYTES] fixed 0;
    <P: Value, I: Value, L: InsnLen>(pc, insn, len)
        => [pc.bits(); P::BYTES, insn.bits(); I::BYTES, len.insn_len() as u64; 1];
);
batched_probe!(insn_exec / InsnExec, words 3, site 3 / 2;
    <P: Value, I: Value>(pc, insn) => [pc.bits(); P::BYTES, insn.bits(); I::BYTES] fixed 0;
    <P: Value, I: Value, L: InsnLen>(pc, insn, len)
        => [pc.bits(); P::BYTES, insn.bits(); I::BYTES, len.insn_len() as u64; 1];
);
batched_probe!(block / Block, words 3, site 2 / 1;
    <P: Value, S: Value>(pc, size) => [pc.bits(); P::BYTES, size.bits(); S::BYTES];
);
// A memory access's size is the width of its value's type: the item's
// last byte, the per-event site's fourth value.
batched_probe!(mem_read / MemRead, words 4, site 4 / 3;
    <P: Value, A: Value, V: MemValue>(pc, addr, val)
        => [pc.bits(); P::BYTES, addr.bits(); A::BYTES, val.bits(); V::BYTES] fixed V::BYTES as u8;
);
batched_probe!(mem_write / MemWrite, words 4, site 4 / 3;
    <P: Value, A: Value, V: MemValue>(pc, addr, val)
        => [pc.bits(); P::BYTES, addr.bits(); A::BYTES, val.bits(); V::BYTES] fixed V::BYTES as u8;
);
batched_probe!(reg_read / RegRead, words 4, site 3 / 2;
    <P: Value, R: Value, V: Value>(pc, reg, val)
        => [pc.bits(); P::BYTES, reg.bits(); R::BYTES, val.bits(); V::BYTES];
);
batched_probe!(reg_write / RegWrite, words 5, site 4 / 3;
    <P: Value, R: Value, V: Value, O: Value>(pc, reg, val, old)
        => [pc.bits(); P::BYTES, reg.bits(); R::BYTES, val.bits(); V::BYTES, old.bits(); O::BYTES];
);
// An encoded branch (`Branch::encode`) takes 9 bits.
batched_probe!(branch / Branch, words 3, site 3 / 2;
    <P: Value, T: Value, K: Into<Branch>>(pc, target, kind)
        => [pc.bits(); P::BYTES, target.bits(); T::BYTES, kind.into().encode(); 2];
);
// An interrupt's direction (`InterruptKind`) takes a byte; its number and
// pcs their types' widths, as the other batched types' values.
batched_probe!(interrupt / Interrupt, words 4, site 4 / 3;
    <K: Into<InterruptKind>, N: Value, O: Value, W: Value>(kind, num, old_pc, new_pc)
        => [kind.into() as u64; 1, num.bits(); N::BYTES, old_pc.bits(); O::BYTES, new_pc.bits(); W::BYTES];
);
per_event_probe!(control:
    <C: Into<u64>, A: Into<u64>, B: Into<u64>>(C, A, B)(code, a, b) => 3 [code.into(), a.into(), b.into()]
);
// Spans and markers pass strings as (pointer, length): no copy, no
// allocation. The text lives until after the probe instruction, which
// reads it there (`readonly`: the stores that made it come first).
per_event_probe!(span_begin:
    <C: AsRef<str>, N: AsRef<str>>(C, N, u64)(category, name, id) => 5 [
        resident(category.as_ref(), SPAN_CATEGORY_MAX).as_ptr() as u64, category.as_ref().len() as u64,
        resident(name.as_ref(), SPAN_NAME_MAX).as_ptr() as u64, name.as_ref().len() as u64, id]
);
per_event_probe!(span_end:
    <C: AsRef<str>, N: AsRef<str>>(C, N, u64)(category, name, id) => 5 [
        resident(category.as_ref(), SPAN_CATEGORY_MAX).as_ptr() as u64, category.as_ref().len() as u64,
        resident(name.as_ref(), SPAN_NAME_MAX).as_ptr() as u64, name.as_ref().len() as u64, id]
);

/// `text`, the part of it the eBPF program copies (its first `kept`
/// bytes, fewer than a page) read once so that its pages are in memory:
/// the program reads the process's memory without faulting it in, so a
/// string on a page not touched yet (a `&'static str` in a part of
/// `.rodata` nothing read before) would arrive as zeros. Its first and
/// last bytes cover every page it spans. Only while a tracer is attached.
#[cfg(not(feature = "disabled"))]
#[inline(always)]
fn resident(text: &str, kept: usize) -> &str {
    let bytes = &text.as_bytes()[..text.len().min(kept)];
    if let (Some(first), Some(last)) = (bytes.first(), bytes.last()) {
        // SAFETY: both are references to bytes of `text`.
        unsafe {
            core::ptr::read_volatile(first);
            core::ptr::read_volatile(last);
        }
    }
    text
}

/// Calls `$append` (a type's routine for the call site's argument types,
/// see [`fast_append!`]) from the call site's cold block with the call
/// site's function `site` in `rax` and its `$n` values in `rdi`, `rsi`,
/// `rdx` (and `rcx`): those registers are declared clobbered (they carry
/// what the cold block made for this call; a value still needed after it
/// is copied there, in the cold block), and so are `r10`, `r11`, the
/// value registers a type with fewer values leaves out, and the vector
/// registers (they have no callee-saved ones); every other register keeps
/// its value, so the compiler keeps the host function's values where it
/// would without probes rather than in callee-saved registers that every
/// run of the host function would save and restore. Not `nostack`: the
/// compiler keeps the red zone free and the stack aligned around it, as
/// for a call.
#[cfg(not(feature = "disabled"))]
macro_rules! call_append {
    (1; $append:path, $site:expr, $values:expr) => {
        call_append!(@ $append, $site, [
            inout("rdi") $values[0] => _,
            out("rsi") _,
            out("rdx") _,
            out("rcx") _,
        ])
    };
    (2; $append:path, $site:expr, $values:expr) => {
        call_append!(@ $append, $site, [
            inout("rdi") $values[0] => _,
            inout("rsi") $values[1] => _,
            out("rdx") _,
            out("rcx") _,
        ])
    };
    (3; $append:path, $site:expr, $values:expr) => {
        call_append!(@ $append, $site, [
            inout("rdi") $values[0] => _,
            inout("rsi") $values[1] => _,
            inout("rdx") $values[2] => _,
            out("rcx") _,
        ])
    };
    (4; $append:path, $site:expr, $values:expr) => {
        call_append!(@ $append, $site, [
            inout("rdi") $values[0] => _,
            inout("rsi") $values[1] => _,
            inout("rdx") $values[2] => _,
            inout("rcx") $values[3] => _,
        ])
    };
    (@ $append:path, $site:expr, [$($values:tt)*]) => {
        // SAFETY: `$append` returns with every register but these and the
        // flags as it found them, and the stack pointer restored.
        unsafe {
            core::arch::asm!(
                "call {append}",
                append = sym $append,
                inout("rax") $site => _,
                $($values)*
                out("r10") _,
                out("r11") _,
                out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
                out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
                out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
                out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
            );
        }
    };
}
#[cfg(not(feature = "disabled"))]
use call_append;

/// The body of a batched type's append routine for the argument types
/// `$T` (`append::<T>`), what its call sites call (see [`call_append!`])
/// with their `$n` values. While only batch tracers hold the type and the
/// thread's buffer has room before its next time mark, it appends the
/// item itself: the semaphore word's halves, the thread's buffer (an
/// initial-exec thread-local), the bounds check and the stores, in `r10`
/// and `r11` (the call site declares them clobbered) — what `batch::push`
/// does, without a call into compiled code, which may clobber every
/// scratch register and would need them all saved. The item's tag, length
/// and where each value goes are constants of `$T` (the routine is
/// generic, one instance per combination of widths a program uses), so no
/// layout is worked out per event. Each value is stored whole (8 bytes)
/// at its offset, in order, so the next one overwrites what is past its
/// width (the values need not even be zero-extended), and the buffer has
/// room past its end for the last: the call site only moves its values
/// into registers (its cold block stays small enough for the host function
/// to be inlined as without probes). Anything else (a per-event tracer, no
/// buffer yet, a time mark due, a word gone to zero) calls the call site's
/// function with the values, saving `r8` and `r9`, which the call site
/// keeps.
#[cfg(not(feature = "disabled"))]
macro_rules! fast_append {
    (2; $name:ident, $kind:ident, $T:ident) => {
        fast_append!(@ $name, $kind, $T, "", [])
    };
    (3; $name:ident, $kind:ident, $T:ident) => {
        fast_append!(@ $name, $kind, $T,
            concat!(
                ".if {fixed}\n",
                "mov byte ptr [r11 + r10 + {item} + {at2}], {last}\n",
                ".else\n",
                "mov qword ptr [r11 + r10 + {item} + {at2}], rdx\n",
                ".endif",
            ),
            [at2 = const <$T as Args>::AT[2],
             fixed = const <$T as Args>::FIXED.is_some() as u8,
             last = const match <$T as Args>::FIXED { Some(fixed) => fixed, None => 0 },
            ])
    };
    (4; $name:ident, $kind:ident, $T:ident) => {
        fast_append!(@ $name, $kind, $T,
            concat!(
                "mov qword ptr [r11 + r10 + {item} + {at2}], rdx\n",
                ".if {fixed}\n",
                "mov byte ptr [r11 + r10 + {item} + {at3}], {last}\n",
                ".else\n",
                "mov qword ptr [r11 + r10 + {item} + {at3}], rcx\n",
                ".endif",
            ),
            [at2 = const <$T as Args>::AT[2], at3 = const <$T as Args>::AT[3],
             fixed = const <$T as Args>::FIXED.is_some() as u8,
             last = const match <$T as Args>::FIXED { Some(fixed) => fixed, None => 0 },
            ])
    };
    (@ $name:ident, $kind:ident, $T:ident, $more:expr, [$($at:tt)*]) => {
        core::arch::naked_asm!(
            // The low half: per-event tracers, whose site takes the event.
            // The word was not zero at the call site's check, so the high
            // half, batch tracers, is up (or went down since, as it may
            // while the item is being stored).
            "cmp word ptr [rip + {sema}], 0",
            "jne 2f",
            thread_buffer!(),
            // r10: the length, below the room left (which leaves room for
            // the largest item).
            "mov r10d, dword ptr [r11 + {len}]",
            "cmp r10d, dword ptr [r11 + {room}]",
            "jae 2f",
            // The tag (a 4-byte store: no length-changing prefix), then
            // the values.
            "mov dword ptr [r11 + r10 + {item}], {tag}",
            "mov qword ptr [r11 + r10 + {item} + {at0}], rdi",
            "mov qword ptr [r11 + r10 + {item} + {at1}], rsi",
            $more,
            "inc dword ptr [r11 + {count}]",
            // The new length last (x86 stores are release stores): a
            // thread flushing at exit sees the item.
            "add dword ptr [r11 + {len}], {bytes}",
            "ret",
            "2:",
            call_site_function!(),
            sema = sym semaphores::$name,
            len = const crate::batch::fast::LEN,
            room = const crate::batch::fast::ROOM,
            bytes = const <$T as Args>::BYTES,
            item = const crate::batch::fast::ITEMS,
            tag = const <$T as Args>::TAG,
            at0 = const <$T as Args>::AT[0],
            at1 = const <$T as Args>::AT[1],
            $($at)*
            count = const crate::batch::fast::COUNTS + 4 * EventKind::$kind as usize,
        )
    };
}
#[cfg(not(feature = "disabled"))]
use fast_append;

/// The thread's buffer into `r11`: one with no room if it has none yet
/// (`batch::NO_BUFFER`), which the room check sends on to `2:`.
#[cfg(not(feature = "disabled"))]
macro_rules! thread_buffer {
    () => {
        concat!(
            "mov r11, qword ptr [rip + ",
            crate::batch::current_slot!(),
            "@GOTTPOFF]\n",
            "mov r11, qword ptr fs:[r11]",
        )
    };
}
#[cfg(not(feature = "disabled"))]
pub(crate) use thread_buffer;

/// An append routine's slow path: the call site's function (in `rax`),
/// with the stack as the call site's (8 past a 16-byte boundary) and the
/// two scratch registers the call site keeps saved.
#[cfg(not(feature = "disabled"))]
macro_rules! call_site_function {
    () => {
        "sub rsp, 8\npush r8\npush r9\ncall rax\npop r9\npop r8\nadd rsp, 8\nret"
    };
}
#[cfg(not(feature = "disabled"))]
pub(crate) use call_site_function;

/// A marker takes one value, not a tuple: its `Args` are for the text itself.
#[doc(hidden)]
pub mod marker {
    #[allow(unused_imports)]
    use super::*;

    pub trait Args {
        fn fire<const SITE: u64>(self);
    }

    impl<S: AsRef<str>> Args for S {
        #[inline(always)]
        fn fire<const SITE: u64>(self) {
            #[cfg(not(feature = "disabled"))]
            if load_word!(semaphores::marker) != 0 {
                crate::batch::flush_pending();
                let text = resident(self.as_ref(), MARKER_TEXT_MAX);
                let site = [text.as_ptr() as u64, text.len() as u64];
                event_site!(marker, semaphores::marker, SITE, site, 2);
            }
        }
    }
}

/// A number for the call site at `file`, `line`, `column` of `module`
/// (FNV-1a): written into its probe's code so that no two call sites'
/// functions are the same code, which LLVM's function merging would fold
/// into one (one site, one note, for both).
#[doc(hidden)]
pub const fn site_id(module: &str, file: &str, line: u32, column: u32) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let parts = [
        module.as_bytes(),
        file.as_bytes(),
        &line.to_le_bytes(),
        &column.to_le_bytes(),
    ];
    let mut p = 0;
    while p < parts.len() {
        let mut i = 0;
        while i < parts[p].len() {
            hash = (hash ^ parts[p][i] as u64).wrapping_mul(0x0100_0000_01b3);
            i += 1;
        }
        p += 1;
    }
    hash
}

/// An instruction's length in bytes, the optional third value of
/// `insn_fetch!`/`insn_exec!`: any unsigned integer; lengths above 255 are
/// reported as 0 (unknown).
pub trait InsnLen: Copy {
    fn insn_len(self) -> u8;
}

macro_rules! insn_len {
    ($($t:ty),*) => {$(
        impl InsnLen for $t {
            #[inline(always)]
            fn insn_len(self) -> u8 {
                u8::try_from(self).unwrap_or(0)
            }
        }
    )*};
}
insn_len!(u8, u16, u32, u64, usize);
