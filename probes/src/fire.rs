//! What a probe call costs where it is written, and what runs once it fires.
//!
//! A probe macro expands, at the emulator's call site, to the check and a
//! call (see `__probe!` in `macros.rs`):
//!
//! ```text
//! if fire::mem_read::armed() {                 // inline: one load, one branch
//!     extern "C" fn site(a: u64, b: u64, c: u64, d: u64) { fire::mem_read::fire([a, b, c, d]) }
//!     let values = (|| (pc, addr, val))();      // the closure runs here, inlined
//!     fire::mem_read::call_site(site, values);  // `call append`, in assembly
//! }
//! ```
//!
//! Why this shape (measured on a real interpreter; issue 24's table):
//! - Everything but the check is out of line. What the inliner sees in the
//!   emulator's function is a load, a branch and a call: the emulator's own
//!   small helpers (a bus access, a push) stay small enough to be inlined,
//!   as they are with the probes compiled out.
//! - The closure is called where it is written, inside the branch, and only
//!   its values cross into the cold function. A closure handed to an
//!   out-of-line function would make every local it borrows address-taken,
//!   kept on the stack for the whole host function.
//! - The check loads the semaphore word by an `asm!` addressed RIP-relative
//!   to the static (`sym`): Rust reaches another crate's static through the
//!   GOT, a second, dependent load. The `asm!` is `readonly`: the compiler
//!   keeps the emulator's values in registers across it. It is not `pure`,
//!   so it is never hoisted out of a loop: a tracer attaching mid-loop is
//!   seen at the next check.
//! - `site` is a new function item at every call site (the macro defines
//!   it), so each call site keeps its own USDT site and note. Its `asm!`
//!   names the call site (file, line, column) in a comment, so that no two
//!   are identical code for LLVM's function merging to fold into one.
//! - The frequent (batched) types' cold block calls their type's append
//!   routine (`fast_append!`, assembly), not `site`: while only batch
//!   tracers hold the type it appends the item to the thread's batch
//!   itself, in the registers the call site gave up, and otherwise calls
//!   `site`, saving what compiled code may change. The cold block only
//!   moves the values and one immediate (the item's tag, length and
//!   offsets: `layout_word`) into registers; the routine puts each value
//!   in its width. Packing the item in the cold block instead (shifts and
//!   ors, ~10 instructions a site) made styx-rv's `Bus::read_mem` too big
//!   to inline: 147.8 instructions a guest instruction detached, against
//!   129.3 (callgrind). Compiled code cannot
//!   be told which registers to leave alone, so reaching the append
//!   through `site` cost a save of every scratch register and `site`'s own
//!   saves (the thread-local lookup is a call until the linker relaxes
//!   it): a traced `mem_read` in a tight loop took 48 instructions, the
//!   old all-inline probes 28, the routine 33 (callgrind).
//!
//! In the cold function the word is loaded again: zero (a tracer detached
//! since the check, or a `jmp` left by anything patching the check) does
//! nothing. Otherwise the values go to whoever holds the word up: the
//! per-event site (the `nop` tracers break on) for the low half, this
//! thread's batch (`crate::batch`) for the high half. Events of the rare
//! types are never batched; they flush the thread's pending batch before
//! firing, so a thread's events reach the reader in the order they happened.

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

/// `armed()`, whether anything is attached to probe `$name`'s type: the
/// only part of a probe inlined where it is called.
macro_rules! armed {
    ($name:ident) => {
        #[inline(always)]
        pub fn armed() -> bool {
            #[cfg(not(feature = "disabled"))]
            return load_word!(semaphores::$name) != 0;
            #[cfg(feature = "disabled")]
            false
        }
    };
}

/// Defines `pub mod $name` of a batched type: `armed()`, the call site's
/// check; `Args`, the argument tuples the probe takes, each with the
/// widths of its values (the item's tag, length and layout follow from
/// them) and its values as the per-event site passes them (`u64`s);
/// `append`, the type's append routine ([`fast_append!`]), and
/// `call_site`, which calls it with the values and the layout word; and
/// `fire`, what the call site's function runs with the values (the Rust
/// path packs the item into `$words` words).
macro_rules! batched_probe {
    ($name:ident / $kind:ident, words $words:tt, site $site:tt; $(
        <$($g:ident: $bound:path),*> ($($var:ident),*) => [$($value:expr; $bytes:expr),*];
    )+) => {
        #[doc(hidden)]
        pub mod $name {
            #[allow(unused_imports)]
            use super::*;

            armed!($name);

            /// Words of the type's widest item (the Rust path packs it).
            pub const WORDS: usize = $words;

            /// Calls the type's [`append`] from the call site's cold block
            /// with the call site's function `site`, the values as they
            /// are (zero-extended) and where each goes in the item
            /// ([`layout_word`]): all the cold block holds is moves.
            #[inline(always)]
            pub fn call_site<T: Args>(site: SiteFn, values: T) {
                let values = values.values();
                let v = |i: usize| if i < $site { values[i] } else { 0 };
                #[cfg(not(feature = "disabled"))]
                call_append!(append, site, T::LAYOUT, [v(0), v(1), v(2), v(3)]);
                #[cfg(feature = "disabled")]
                let _ = (site, v);
            }

            #[cfg(not(feature = "disabled"))]
            fast_append!(append, $name, $kind, $site);

            /// The argument tuples the probe accepts.
            pub trait Args: Sized {
                /// Bytes of each value in the item, in order.
                const WIDTHS: &'static [usize];
                /// The item's tag.
                const TAG: u16 = styx_common::item::event_tag(EventKind::$kind, Self::WIDTHS);
                /// Bytes of the item.
                const BYTES: u32 = item_bytes(Self::WIDTHS);
                /// The tag and where each value goes, for the routine.
                const LAYOUT: u64 = layout_word(Self::TAG, Self::WIDTHS);
                /// The values, as the per-event site passes them.
                fn values(self) -> [u64; $site];
            }

            $(
                impl<$($g: $bound),*> Args for ($($g,)*) {
                    const WIDTHS: &'static [usize] = &[$($bytes),*];
                    #[inline(always)]
                    fn values(self) -> [u64; $site] {
                        let ($($var,)*) = self;
                        [$($value),*]
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
                    let site: [u64; $site] = core::array::from_fn(|i| values[i]);
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

/// A declared type's site function: the packed item (five registers).
pub type PackedSiteFn = extern "C" fn(u64, u64, u64, u64, u64);

/// What a catalogue type's append routine needs besides the values: the
/// item's tag (bits 0–15), its bytes (16–23), and the offset in it of
/// values 1, 2 and 3 (24–31, 32–39, 40–47; value 0 is at 2): one
/// immediate the call site moves into `r10`.
pub const fn layout_word(tag: u16, widths: &[usize]) -> u64 {
    let mut word = tag as u64;
    let mut at = styx_common::item::TAG_BYTES;
    let mut i = 0;
    while i < widths.len() {
        if i > 0 {
            word |= (at as u64) << (16 + 8 * i);
        }
        at += widths[i];
        i += 1;
    }
    word | (at as u64) << 16
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

/// Defines `pub mod $name` of a per-event type: `armed()` and `Args`, each
/// tuple with its `fire`, run in the call site's cold function.
macro_rules! per_event_probe {
    ($name:ident: <$($g:ident: $bound:path),*> ($($t:ty),*) ($($var:ident),*) => $n:tt $values:expr) => {
        #[doc(hidden)]
        pub mod $name {
            #[allow(unused_imports)]
            use super::*;

            armed!($name);

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
batched_probe!(insn_fetch / InsnFetch, words 3, site 3;
    <P: Value, I: Value>(pc, insn) => [pc.bits(); P::BYTES, insn.bits(); I::BYTES, 0; 1];
    <P: Value, I: Value, L: InsnLen>(pc, insn, len)
        => [pc.bits(); P::BYTES, insn.bits(); I::BYTES, len.insn_len() as u64; 1];
);
batched_probe!(insn_exec / InsnExec, words 3, site 3;
    <P: Value, I: Value>(pc, insn) => [pc.bits(); P::BYTES, insn.bits(); I::BYTES, 0; 1];
    <P: Value, I: Value, L: InsnLen>(pc, insn, len)
        => [pc.bits(); P::BYTES, insn.bits(); I::BYTES, len.insn_len() as u64; 1];
);
batched_probe!(block / Block, words 3, site 2;
    <P: Value, S: Value>(pc, size) => [pc.bits(); P::BYTES, size.bits(); S::BYTES];
);
// A memory access's size is the width of its value's type: the item's
// last byte, the per-event site's fourth value.
batched_probe!(mem_read / MemRead, words 4, site 4;
    <P: Value, A: Value, V: MemValue>(pc, addr, val)
        => [pc.bits(); P::BYTES, addr.bits(); A::BYTES, val.bits(); V::BYTES, V::BYTES as u64; 1];
);
batched_probe!(mem_write / MemWrite, words 4, site 4;
    <P: Value, A: Value, V: MemValue>(pc, addr, val)
        => [pc.bits(); P::BYTES, addr.bits(); A::BYTES, val.bits(); V::BYTES, V::BYTES as u64; 1];
);
batched_probe!(reg_read / RegRead, words 4, site 3;
    <P: Value, R: Value, V: Value>(pc, reg, val)
        => [pc.bits(); P::BYTES, reg.bits(); R::BYTES, val.bits(); V::BYTES];
);
batched_probe!(reg_write / RegWrite, words 5, site 4;
    <P: Value, R: Value, V: Value, O: Value>(pc, reg, val, old)
        => [pc.bits(); P::BYTES, reg.bits(); R::BYTES, val.bits(); V::BYTES, old.bits(); O::BYTES];
);
// An encoded branch (`Branch::encode`) takes 9 bits.
batched_probe!(branch / Branch, words 3, site 3;
    <P: Value, T: Value, K: Into<Branch>>(pc, target, kind)
        => [pc.bits(); P::BYTES, target.bits(); T::BYTES, kind.into().encode(); 2];
);
per_event_probe!(interrupt:
    <K: Into<InterruptKind>, N: Into<u64>, O: Into<u64>, W: Into<u64>>(K, N, O, W)(kind, num, old_pc, new_pc)
        => 4 [kind.into() as u64, num.into(), old_pc.into(), new_pc.into()]
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

/// Calls `$append` (see [`fast_append!`]) from the call site's cold block
/// with the packed item's `$words` words in `rdi`, `rsi`, `rdx`, `rcx`
/// (and `r8`), its length in `r10` and `site` in `rax`: those registers
/// are declared clobbered (they carry what the cold block made for this
/// call; a value still needed after it is copied there, in the cold
/// block), and so are `r11` and the vector registers (they have no
/// callee-saved ones); every other register keeps its value, so the
/// compiler keeps the host function's values where it would without
/// probes rather than in callee-saved registers that every run of the
/// host function would save and restore. Not `nostack`: the compiler
/// keeps the red zone free and the stack aligned around it, as for a call.
#[cfg(not(feature = "disabled"))]
macro_rules! call_append {
    ($append:ident, $site:expr, $layout:expr, $values:expr) => {
        // SAFETY: `$append` returns with every register but these and the
        // flags as it found them, and the stack pointer restored.
        unsafe {
            core::arch::asm!(
                "call {append}",
                append = sym $append,
                inout("rax") $site => _,
                inout("r10") $layout => _,
                inout("rdi") $values[0] => _,
                inout("rsi") $values[1] => _,
                inout("rdx") $values[2] => _,
                inout("rcx") $values[3] => _,
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

/// Calls [`declared_append`] from a declared type's cold block with its
/// packed item: as [`call_append!`], the
/// semaphore word it read in `r11`.
#[cfg(not(feature = "disabled"))]
#[inline(always)]
pub(crate) fn call_declared(word: u32, site: PackedSiteFn, bytes: u32, words: [u64; 5]) {
    // SAFETY: `declared_append` returns with every register but these and
    // the flags as it found them, and the stack pointer restored.
    unsafe {
        core::arch::asm!(
            "call {append}",
            append = sym declared_append,
            inout("rax") site => _,
            inout("r10") bytes => _,
            inout("r11") word => _,
            inout("rdi") words[0] => _,
            inout("rsi") words[1] => _,
            inout("rdx") words[2] => _,
            inout("rcx") words[3] => _,
            inout("r8") words[4] => _,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
            out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
            out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
        );
    }
}

/// The append routine of every declared type: as a catalogue type's
/// ([`fast_append!`]), the semaphore word given (in `r11`: the call site
/// read it, and each type has its own), five words stored, counted as
/// other providers' probes' events (`EventKind::Usdt`).
#[cfg(not(feature = "disabled"))]
#[unsafe(naked)]
unsafe extern "C" fn declared_append() {
    core::arch::naked_asm!(
        buffer_of_batch_only!(),
        "add r10d, dword ptr [r11 + {len}]",
        "cmp r10d, dword ptr [r11 + {limit}]",
        "ja 2f",
        "mov eax, dword ptr [r11 + {len}]",
        "mov qword ptr [r11 + rax + {item}], rdi",
        "mov qword ptr [r11 + rax + {item} + 8], rsi",
        "mov qword ptr [r11 + rax + {item} + 16], rdx",
        "mov qword ptr [r11 + rax + {item} + 24], rcx",
        "mov qword ptr [r11 + rax + {item} + 32], r8",
        "inc dword ptr [r11 + {count}]",
        // The new length last (x86 stores are release stores): a thread
        // flushing at exit sees the item.
        "mov dword ptr [r11 + {len}], r10d",
        "ret",
        "2:",
        call_site_function!(),
        per_event = const PER_EVENT,
        len = const crate::batch::fast::LEN,
        limit = const crate::batch::fast::LIMIT,
        item = const crate::batch::fast::ITEMS,
        count = const crate::batch::fast::COUNTS + 4 * EventKind::Usdt as usize,
    );
}

/// Defines `$append`, what a batched type's call sites call (see
/// [`call_append!`]) with its `$values` values. While only batch tracers
/// hold the type and the thread's buffer has room before its next time
/// mark, it appends the item itself: the semaphore word, the thread's
/// buffer (an initial-exec thread-local), the bounds check and the
/// stores, in `rax`, `r10` and `r11` (the call site declares them
/// clobbered), `rbx` (saved) and the value registers once stored — what
/// `batch::push` does, without a call into compiled code, which may
/// clobber every scratch register and would need them all saved. Each
/// value is stored whole (8 bytes) at its offset, in order, so the next
/// one overwrites the zeros past its width, and the buffer has room past
/// its end for the last: the call site only moves its values and the
/// layout word into registers (its cold block stays small enough for the
/// host function to be inlined as without probes). Anything else (a
/// per-event tracer, no buffer yet, a time mark due, a word gone to zero)
/// calls the call site's function with the values, saving `r8` and `r9`,
/// which the call site keeps.
#[cfg(not(feature = "disabled"))]
macro_rules! fast_append {
    ($append:ident, $name:ident, $kind:ident, $values:tt) => {
        #[doc(hidden)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $append() {
            core::arch::naked_asm!(
                "mov r11d, dword ptr [rip + {sema}]",
                buffer_of_batch_only!(),
                "push rbx",
                // rbx: the length after this item (r10 bits 16-23 its bytes).
                "mov ebx, r10d",
                "shr ebx, 16",
                "movzx ebx, bl",
                "add ebx, dword ptr [r11 + {len}]",
                "cmp ebx, dword ptr [r11 + {limit}]",
                "ja 3f",
                "mov eax, dword ptr [r11 + {len}]",
                "lea rax, [r11 + rax + {item}]",
                "mov word ptr [rax], r10w",
                "mov qword ptr [rax + 2], rdi",
                store_at_offsets!($values),
                "inc dword ptr [r11 + {count}]",
                // The new length last (x86 stores are release stores): a
                // thread flushing at exit sees the item.
                "mov dword ptr [r11 + {len}], ebx",
                "pop rbx",
                "ret",
                "3:",
                "pop rbx",
                "2:",
                call_site_function!(),
                sema = sym semaphores::$name,
                per_event = const PER_EVENT,
                len = const crate::batch::fast::LEN,
                limit = const crate::batch::fast::LIMIT,
                item = const crate::batch::fast::ITEMS,
                count = const crate::batch::fast::COUNTS + 4 * EventKind::$kind as usize,
            );
        }
    };
}
#[cfg(not(feature = "disabled"))]
use fast_append;

/// An append routine's first steps once the semaphore word is in `r11d`:
/// on to `2:` unless only batch tracers hold the type (the high half up,
/// the low half zero) and the thread has a buffer, which is then in `r11`.
#[cfg(not(feature = "disabled"))]
macro_rules! buffer_of_batch_only {
    () => {
        concat!(
            "cmp r11d, {per_event}\n",
            "jbe 2f\n",
            "test r11d, {per_event}\n",
            "jnz 2f\n",
            "mov r11, qword ptr [rip + ",
            crate::batch::current_slot!(),
            "@GOTTPOFF]\n",
            "mov r11, qword ptr fs:[r11]\n",
            "test r11, r11\n",
            "jz 2f",
        )
    };
}
#[cfg(not(feature = "disabled"))]
use buffer_of_batch_only;

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
use call_site_function;

/// Values 1 to 3 at the offsets the layout word (`r10`) gives, each offset
/// read into the register of a value already stored.
#[cfg(not(feature = "disabled"))]
macro_rules! store_at_offsets {
    (2) => {
        "shr r10, 24\nmovzx edi, r10b\nmov qword ptr [rax + rdi], rsi"
    };
    (3) => {
        concat!(
            store_at_offsets!(2),
            "\nshr r10, 8\nmovzx edi, r10b\nmov qword ptr [rax + rdi], rdx"
        )
    };
    (4) => {
        concat!(
            store_at_offsets!(3),
            "\nshr r10, 8\nmovzx edi, r10b\nmov qword ptr [rax + rdi], rcx"
        )
    };
}
#[cfg(not(feature = "disabled"))]
use store_at_offsets;

/// A marker takes one value, not a tuple: its `Args` are for the text itself.
#[doc(hidden)]
pub mod marker {
    #[allow(unused_imports)]
    use super::*;

    armed!(marker);

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
