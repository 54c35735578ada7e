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
//!   `site`, saving what compiled code may change. Compiled code cannot
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

use crate::MemValue;
use styx_common::{Branch, InterruptKind};

#[cfg(not(feature = "disabled"))]
use styx_common::EventKind;

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
/// check; `Args`, the argument tuples the probe takes, each turned into
/// four `u64`s (`values`); `append`, the type's append routine
/// ([`fast_append!`]), and `call_site`, which calls it; and `fire`, what
/// the call site's function runs with them: the batch item takes the first
/// `$args` values (and `$aux`), the per-event site the first `$site`.
/// `$aux_reg` is the byte register the routine finds `$aux` in (the low
/// byte of the value `$aux` reads), or `none` for a constant 0.
macro_rules! batched_probe {
    ($name:ident / $kind:ident, args $args:tt, site $site:tt, aux |$v:ident| $aux:expr, $aux_reg:tt; $(
        <$($g:ident: $bound:path),*> ($($var:ident),*) => $values:expr;
    )+) => {
        #[doc(hidden)]
        pub mod $name {
            #[allow(unused_imports)]
            use super::*;

            armed!($name);

            /// Calls the type's [`append`] from the call site's cold block
            /// with the call site's function `site` and the values.
            #[inline(always)]
            pub fn call_site(site: extern "C" fn(u64, u64, u64, u64), values: [u64; 4]) {
                #[cfg(not(feature = "disabled"))]
                call_append!(append, site, values);
                #[cfg(feature = "disabled")]
                let _ = (site, values);
            }

            #[cfg(not(feature = "disabled"))]
            fast_append!(append, $name, $kind, $args, $aux_reg);

            /// The argument tuples the probe accepts.
            pub trait Args {
                /// The values as the call site's function takes them.
                fn values(self) -> [u64; 4];
            }

            $(
                impl<$($g: $bound),*> Args for ($($g,)*) {
                    #[inline(always)]
                    fn values(self) -> [u64; 4] {
                        let ($($var,)*) = self;
                        $values
                    }
                }
            )+

            /// Hands the values to whoever holds the word up (inlined into
            /// the call site's function, with the site's `nop` and note).
            #[inline(always)]
            #[allow(unused_variables)]
            pub fn fire<const SITE: u64>($v: [u64; 4]) {
                #[cfg(not(feature = "disabled"))]
                {
                    let state = load_word!(semaphores::$name);
                    if state == 0 {
                        return;
                    }
                    if state & PER_EVENT != 0 {
                        let site: [u64; $site] = first($v);
                        event_site!($name, semaphores::$name, SITE, site, $site);
                    }
                    if state > PER_EVENT {
                        crate::batch::push::<$args>(EventKind::$kind as u8, $aux, first($v));
                    }
                }
            }
        }
    };
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

/// The first `N` of the four values.
#[cfg(not(feature = "disabled"))]
#[inline(always)]
fn first<const N: usize>(values: [u64; 4]) -> [u64; N] {
    core::array::from_fn(|i| values[i])
}

// An instruction's length travels in the batch item's aux byte and as the
// per-event site's third value; 0 where the emulator gives none.
batched_probe!(insn_fetch / InsnFetch, args 2, site 3, aux |v| v[2] as u8, dl;
    <P: Into<u64>, I: Into<u64>>(pc, insn) => [pc.into(), insn.into(), 0, 0];
    <P: Into<u64>, I: Into<u64>, L: InsnLen>(pc, insn, len)
        => [pc.into(), insn.into(), len.insn_len().into(), 0];
);
batched_probe!(insn_exec / InsnExec, args 2, site 3, aux |v| v[2] as u8, dl;
    <P: Into<u64>, I: Into<u64>>(pc, insn) => [pc.into(), insn.into(), 0, 0];
    <P: Into<u64>, I: Into<u64>, L: InsnLen>(pc, insn, len)
        => [pc.into(), insn.into(), len.insn_len().into(), 0];
);
batched_probe!(block / Block, args 2, site 2, aux |v| 0, none;
    <P: Into<u64>, S: Into<u64>>(pc, size) => [pc.into(), size.into(), 0, 0];
);
// A memory access's size is the width of its value's type: the batch
// item's aux byte, the per-event site's fourth value.
batched_probe!(mem_read / MemRead, args 3, site 4, aux |v| v[3] as u8, cl;
    <P: Into<u64>, A: Into<u64>, V: MemValue>(pc, addr, val)
        => [pc.into(), addr.into(), val.to_u64(), V::SIZE];
);
batched_probe!(mem_write / MemWrite, args 3, site 4, aux |v| v[3] as u8, cl;
    <P: Into<u64>, A: Into<u64>, V: MemValue>(pc, addr, val)
        => [pc.into(), addr.into(), val.to_u64(), V::SIZE];
);
batched_probe!(reg_read / RegRead, args 3, site 3, aux |v| 0, none;
    <P: Into<u64>, R: Into<u64>, V: Into<u64>>(pc, reg, val) => [pc.into(), reg.into(), val.into(), 0];
);
batched_probe!(reg_write / RegWrite, args 4, site 4, aux |v| 0, none;
    <P: Into<u64>, R: Into<u64>, V: Into<u64>, O: Into<u64>>(pc, reg, val, old)
        => [pc.into(), reg.into(), val.into(), old.into()];
);
batched_probe!(branch / Branch, args 3, site 3, aux |v| 0, none;
    <P: Into<u64>, T: Into<u64>, K: Into<Branch>>(pc, target, kind)
        => [pc.into(), target.into(), kind.into().encode(), 0];
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
        category.as_ref().as_ptr() as u64, category.as_ref().len() as u64,
        name.as_ref().as_ptr() as u64, name.as_ref().len() as u64, id]
);
per_event_probe!(span_end:
    <C: AsRef<str>, N: AsRef<str>>(C, N, u64)(category, name, id) => 5 [
        category.as_ref().as_ptr() as u64, category.as_ref().len() as u64,
        name.as_ref().as_ptr() as u64, name.as_ref().len() as u64, id]
);

/// Calls `$append` (see [`fast_append!`]) from the call site's cold block:
/// the registers it uses are declared clobbered (they carry `site` and the
/// closure's results, made in the cold block for this call; a value still
/// needed after it is copied there, in the cold block), and so are the
/// vector registers (they have no callee-saved ones); every other register
/// keeps its value, so the compiler keeps the host function's values where
/// it would without probes rather than in callee-saved registers that
/// every run of the host function would save and restore. Not `nostack`:
/// the compiler keeps the red zone free and the stack aligned around it,
/// as for a call.
#[cfg(not(feature = "disabled"))]
macro_rules! call_append {
    ($append:ident, $site:expr, $values:expr) => {
        // SAFETY: `$append` returns with every register but these and the
        // flags as it found them, and the stack pointer restored.
        unsafe {
            core::arch::asm!(
                "call {append}",
                append = sym $append,
                inout("rax") $site => _,
                inout("rdi") $values[0] => _,
                inout("rsi") $values[1] => _,
                inout("rdx") $values[2] => _,
                inout("rcx") $values[3] => _,
                out("r10") _, out("r11") _,
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

/// Defines `$append`, what a batched type's call sites call with the call
/// site's function in `rax` and the values in `rdi`, `rsi`, `rdx`, `rcx`.
/// While only batch tracers hold the type and the thread's buffer has
/// room before its next time mark, it appends the item itself: the
/// semaphore word, the thread's buffer (an initial-exec thread-local), the
/// bounds check and the stores, in `rax`, `r10` and `r11` (the call site
/// declares them clobbered) — what `batch::push` does, without a call
/// into compiled code, which may clobber every scratch register and would
/// need them all saved. Anything else (a per-event tracer, no buffer yet,
/// a time mark due, a word gone to zero) calls the call site's function,
/// saving the two scratch registers the call site keeps (`r8`, `r9`).
#[cfg(not(feature = "disabled"))]
macro_rules! fast_append {
    ($append:ident, $name:ident, $kind:ident, $args:tt, $aux_reg:tt) => {
        #[doc(hidden)]
        #[unsafe(naked)]
        pub unsafe extern "C" fn $append() {
            core::arch::naked_asm!(
                "mov r11d, dword ptr [rip + {sema}]",
                // Batch tracers only: the high half up, the low half zero.
                "cmp r11d, {per_event}",
                "jbe 2f",
                "test r11d, {per_event}",
                "jnz 2f",
                concat!("mov r11, qword ptr [rip + ", crate::batch::current_slot!(), "@GOTTPOFF]"),
                "mov r11, qword ptr fs:[r11]",
                "test r11, r11",
                "jz 2f",
                "mov r10d, dword ptr [r11 + {len}]",
                "add r10d, {need}",
                "cmp r10d, dword ptr [r11 + {limit}]",
                "ja 2f",
                item_word!($aux_reg),
                "mov qword ptr [r11 + r10 + {item}], rax",
                store_values!($args),
                "inc dword ptr [r11 + {count}]",
                // The new length last (x86 stores are release stores): a
                // thread flushing at exit sees the item.
                "mov dword ptr [r11 + {len}], r10d",
                "ret",
                "2:",
                // The stack as the call site's: 8 past a 16-byte boundary.
                "sub rsp, 8",
                "push r8",
                "push r9",
                "call rax",
                "pop r9",
                "pop r8",
                "add rsp, 8",
                "ret",
                sema = sym semaphores::$name,
                per_event = const PER_EVENT,
                len = const crate::batch::fast::LEN,
                limit = const crate::batch::fast::LIMIT,
                need = const styx_common::batch::item_bytes($args),
                // The item starts `need` bytes before the new length.
                item = const crate::batch::fast::ITEMS as isize
                    - styx_common::batch::item_bytes($args) as isize,
                kind = const EventKind::$kind as u8,
                count = const crate::batch::fast::COUNTS + 4 * EventKind::$kind as usize,
            );
        }
    };
}
#[cfg(not(feature = "disabled"))]
use fast_append;

/// The item's first word into `rax`: the kind, and the aux byte from the
/// register the type carries it in.
#[cfg(not(feature = "disabled"))]
macro_rules! item_word {
    (none) => {
        "mov eax, {kind}"
    };
    ($reg:ident) => {
        concat!(
            "movzx eax, ",
            stringify!($reg),
            "\nshl eax, 8\nor eax, {kind}"
        )
    };
}
#[cfg(not(feature = "disabled"))]
use item_word;

/// The item's values after its first word, from the argument registers.
#[cfg(not(feature = "disabled"))]
macro_rules! store_values {
    (2) => {
        "mov qword ptr [r11 + r10 + {item} + 8], rdi\nmov qword ptr [r11 + r10 + {item} + 16], rsi"
    };
    (3) => {
        concat!(
            store_values!(2),
            "\nmov qword ptr [r11 + r10 + {item} + 24], rdx"
        )
    };
    (4) => {
        concat!(
            store_values!(3),
            "\nmov qword ptr [r11 + r10 + {item} + 32], rcx"
        )
    };
}
#[cfg(not(feature = "disabled"))]
use store_values;

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
                let text = self.as_ref();
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
