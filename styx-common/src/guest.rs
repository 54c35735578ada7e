//! The guest description note: what an emulator says about the CPU it
//! emulates (`styx_probe::describe!`), read by the loader from the ELF file
//! like the probe notes, so it costs the emulator nothing at run time.
//!
//! An ELF note of owner [`GUEST_NOTE_OWNER`] and type [`NT_STYX_GUEST`] in a
//! section `.note.styx`: a `#[used]` static made by [`note`] at compile
//! time, so that rustc keeps it from a library crate too (a note written
//! by `global_asm!` was left out with its object file when nothing else
//! in that object was used).
//! Its descriptor, little-endian:
//!
//! ```text
//! u8 GUEST_NOTE_VERSION
//! arch: NUL-terminated string
//! pc:   NUL-terminated string (the program counter's name; empty: "pc")
//! entries, each a tag byte:
//!   GUEST_TAG_REGISTER:    u64 number, u16 bits, name (NUL-terminated)
//!   GUEST_TAG_SUBREGISTER: u64 number, u16 bits, u16 shift,
//!                          parent's name, name (both NUL-terminated)
//!   GUEST_TAG_IMAGE:       u64 base, u64 size, name (NUL-terminated)
//!   GUEST_TAG_END:         the last entry
//! ```
//!
//! A sub-register is `bits` bits of its parent, a register of the same
//! description, starting at bit `shift` (Z80's A is bits 8..16 of AF; an
//! alias is all of its parent: shift 0, the parent's width). Only a
//! description with sub-registers has that tag, so readers of the first
//! layout still read the others.
//!
//! The writer is [`note`] (through `styx_probe::describe!`); the reader
//! styx-events' `guest`.

/// The note's owner name.
pub const GUEST_NOTE_OWNER: &[u8] = b"styx";
/// The note's type.
pub const NT_STYX_GUEST: u32 = 1;
/// The descriptor layout's version: its first byte.
pub const GUEST_NOTE_VERSION: u8 = 1;
/// Tag of the entry that ends the descriptor.
pub const GUEST_TAG_END: u8 = 0;
/// Tag of a register entry.
pub const GUEST_TAG_REGISTER: u8 = 1;
/// Tag of a guest image entry.
pub const GUEST_TAG_IMAGE: u8 = 2;
/// Tag of a sub-register entry.
pub const GUEST_TAG_SUBREGISTER: u8 = 3;

/// A register of a description: (name, number, bits, and for a
/// sub-register its parent's name and the bit it starts at).
pub type RegisterEntry = (&'static str, u64, u16, Option<(&'static str, u16)>);
/// An image of a description: (name, base, size).
pub type ImageEntry = (&'static str, u64, u64);

/// The note's bytes, 4-aligned as ELF notes are.
#[repr(C, align(4))]
pub struct Note<const N: usize>(pub [u8; N]);

pub(crate) const fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// Bytes of the whole note (header, owner, descriptor) [`note`] writes.
pub const fn note_len(
    arch: &str,
    pc: &str,
    regs: &[RegisterEntry],
    images: &[ImageEntry],
) -> usize {
    12 + pad4(GUEST_NOTE_OWNER.len() + 1) + pad4(desc_len(arch, pc, regs, images))
}

const fn desc_len(arch: &str, pc: &str, regs: &[RegisterEntry], images: &[ImageEntry]) -> usize {
    let mut len = 1 + arch.len() + 1 + pc.len() + 1 + 1;
    let mut i = 0;
    while i < regs.len() {
        len += 1 + 8 + 2 + regs[i].0.len() + 1;
        if let Some((parent, _)) = regs[i].3 {
            len += 2 + parent.len() + 1;
        }
        i += 1;
    }
    i = 0;
    while i < images.len() {
        len += 1 + 8 + 8 + images[i].0.len() + 1;
        i += 1;
    }
    len
}

/// The guest description note, at compile time. `N` is [`note_len`] of
/// the same arguments; a name with a NUL byte in it, or a sub-register
/// that is not inside a register of the description, does not compile.
pub const fn note<const N: usize>(
    arch: &str,
    pc: &str,
    regs: &[RegisterEntry],
    images: &[ImageEntry],
) -> [u8; N] {
    assert!(N == note_len(arch, pc, regs, images), "note length");
    let mut out = [0u8; N];
    let owner = GUEST_NOTE_OWNER.len() + 1;
    let mut at = put(&mut out, 0, &(owner as u32).to_le_bytes());
    at = put(
        &mut out,
        at,
        &(desc_len(arch, pc, regs, images) as u32).to_le_bytes(),
    );
    at = put(&mut out, at, &NT_STYX_GUEST.to_le_bytes());
    put(&mut out, at, GUEST_NOTE_OWNER);
    at = 12 + pad4(owner);
    at = put(&mut out, at, &[GUEST_NOTE_VERSION]);
    at = put_name(&mut out, at, arch);
    at = put_name(&mut out, at, pc);
    let mut i = 0;
    while i < regs.len() {
        let (name, num, bits, within) = regs[i];
        match within {
            None => {
                at = put(&mut out, at, &[GUEST_TAG_REGISTER]);
                at = put(&mut out, at, &num.to_le_bytes());
                at = put(&mut out, at, &bits.to_le_bytes());
            }
            Some((parent, shift)) => {
                check_within(regs, bits, parent, shift);
                at = put(&mut out, at, &[GUEST_TAG_SUBREGISTER]);
                at = put(&mut out, at, &num.to_le_bytes());
                at = put(&mut out, at, &bits.to_le_bytes());
                at = put(&mut out, at, &shift.to_le_bytes());
                at = put_name(&mut out, at, parent);
            }
        }
        at = put_name(&mut out, at, name);
        i += 1;
    }
    i = 0;
    while i < images.len() {
        at = put(&mut out, at, &[GUEST_TAG_IMAGE]);
        at = put(&mut out, at, &images[i].1.to_le_bytes());
        at = put(&mut out, at, &images[i].2.to_le_bytes());
        at = put_name(&mut out, at, images[i].0);
        i += 1;
    }
    put(&mut out, at, &[GUEST_TAG_END]);
    out
}

/// A sub-register's parent is a register of `regs`, not itself a
/// sub-register, and holds bits `shift..shift + bits`.
const fn check_within(regs: &[RegisterEntry], bits: u16, parent: &str, shift: u16) {
    let mut i = 0;
    while i < regs.len() {
        if crate::same_str(regs[i].0, parent) {
            assert!(
                regs[i].3.is_none(),
                "a sub-register's parent in a guest description is itself a sub-register"
            );
            assert!(
                bits > 0 && shift as u32 + bits as u32 <= regs[i].2 as u32,
                "a sub-register in a guest description does not fit in its parent"
            );
            return;
        }
        i += 1;
    }
    panic!("a sub-register in a guest description names a parent it does not describe");
}

pub(crate) const fn put<const N: usize>(out: &mut [u8; N], at: usize, bytes: &[u8]) -> usize {
    let mut i = 0;
    while i < bytes.len() {
        out[at + i] = bytes[i];
        i += 1;
    }
    at + bytes.len()
}

/// A name and its NUL (the event schema's notes write theirs so too).
pub(crate) const fn put_name<const N: usize>(out: &mut [u8; N], at: usize, name: &str) -> usize {
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i] != 0, "a name in a styx note has a NUL byte");
        i += 1;
    }
    put(out, at, bytes) + 1
}
