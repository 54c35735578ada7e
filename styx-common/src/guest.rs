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
    if let Err(why) = check(arch, pc, regs) {
        panic!("{}", why);
    }
    let mut out = [0u8; N];
    write_note(&mut out, arch, pc, regs, images);
    out
}

/// Writes the note into `out`, [`note_len`] bytes, at run time: for a
/// description made outside Rust (styx-probe-c's generator for C
/// emulators). What [`check`] rejects, or `out` of another length, is the
/// error.
pub fn write_checked(
    out: &mut [u8],
    arch: &str,
    pc: &str,
    regs: &[RegisterEntry],
    images: &[ImageEntry],
) -> Result<(), &'static str> {
    check(arch, pc, regs)?;
    if out.len() != note_len(arch, pc, regs, images) {
        return Err("note length");
    }
    write_note(out, arch, pc, regs, images);
    Ok(())
}

/// Why a description cannot be written: a name with a NUL byte in it, or
/// a sub-register that is not inside a register of the description.
pub const fn check(arch: &str, pc: &str, regs: &[RegisterEntry]) -> Result<(), &'static str> {
    if has_nul(arch) || has_nul(pc) {
        return Err(NUL_IN_NAME);
    }
    let mut i = 0;
    while i < regs.len() {
        let (name, _, bits, within) = regs[i];
        if has_nul(name) {
            return Err(NUL_IN_NAME);
        }
        if let Some((parent, shift)) = within {
            if let Err(why) = check_within(regs, bits, parent, shift) {
                return Err(why);
            }
        }
        i += 1;
    }
    Ok(())
}

/// Writes the note [`check`] accepted into `out`, [`note_len`] bytes.
const fn write_note(
    out: &mut [u8],
    arch: &str,
    pc: &str,
    regs: &[RegisterEntry],
    images: &[ImageEntry],
) {
    let owner = GUEST_NOTE_OWNER.len() + 1;
    let mut at = put(out, 0, &(owner as u32).to_le_bytes());
    at = put(
        out,
        at,
        &(desc_len(arch, pc, regs, images) as u32).to_le_bytes(),
    );
    at = put(out, at, &NT_STYX_GUEST.to_le_bytes());
    put(out, at, GUEST_NOTE_OWNER);
    at = 12 + pad4(owner);
    at = put(out, at, &[GUEST_NOTE_VERSION]);
    at = put_name(out, at, arch);
    at = put_name(out, at, pc);
    let mut i = 0;
    while i < regs.len() {
        let (name, num, bits, within) = regs[i];
        match within {
            None => {
                at = put(out, at, &[GUEST_TAG_REGISTER]);
                at = put(out, at, &num.to_le_bytes());
                at = put(out, at, &bits.to_le_bytes());
            }
            Some((parent, shift)) => {
                at = put(out, at, &[GUEST_TAG_SUBREGISTER]);
                at = put(out, at, &num.to_le_bytes());
                at = put(out, at, &bits.to_le_bytes());
                at = put(out, at, &shift.to_le_bytes());
                at = put_name(out, at, parent);
            }
        }
        at = put_name(out, at, name);
        i += 1;
    }
    i = 0;
    while i < images.len() {
        at = put(out, at, &[GUEST_TAG_IMAGE]);
        at = put(out, at, &images[i].1.to_le_bytes());
        at = put(out, at, &images[i].2.to_le_bytes());
        at = put_name(out, at, images[i].0);
        i += 1;
    }
    put(out, at, &[GUEST_TAG_END]);
}

/// A sub-register's parent is a register of `regs`, not itself a
/// sub-register, and holds bits `shift..shift + bits`.
const fn check_within(
    regs: &[RegisterEntry],
    bits: u16,
    parent: &str,
    shift: u16,
) -> Result<(), &'static str> {
    let mut i = 0;
    while i < regs.len() {
        if crate::same_str(regs[i].0, parent) {
            if regs[i].3.is_some() {
                return Err(
                    "a sub-register's parent in a guest description is itself a sub-register",
                );
            }
            if bits == 0 || shift as u32 + bits as u32 > regs[i].2 as u32 {
                return Err("a sub-register in a guest description does not fit in its parent");
            }
            return Ok(());
        }
        i += 1;
    }
    Err("a sub-register in a guest description names a parent it does not describe")
}

/// What [`check`] and the event schema's check say of a name with a NUL.
pub(crate) const NUL_IN_NAME: &str = "a name in a styx note has a NUL byte";

/// Whether `name` has a NUL byte (which would end it early in the note).
pub(crate) const fn has_nul(name: &str) -> bool {
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0 {
            return true;
        }
        i += 1;
    }
    false
}

pub(crate) const fn put(out: &mut [u8], at: usize, bytes: &[u8]) -> usize {
    let mut i = 0;
    while i < bytes.len() {
        out[at + i] = bytes[i];
        i += 1;
    }
    at + bytes.len()
}

/// A name and its NUL (the event schema's notes write theirs so too);
/// the writers' checks rejected a name with a NUL in it.
pub(crate) const fn put_name(out: &mut [u8], at: usize, name: &str) -> usize {
    put(out, at, name.as_bytes()) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGS: &[RegisterEntry] = &[("af", 0, 16, None), ("a", 1, 8, Some(("af", 8)))];
    const IMAGES: &[ImageEntry] = &[("rom.bin", 0x8000, 0x4000)];

    #[test]
    fn the_run_time_writer_writes_the_compile_time_note() {
        const LEN: usize = note_len("z80", "pc", REGS, IMAGES);
        const NOTE: [u8; LEN] = note("z80", "pc", REGS, IMAGES);
        let mut out = [0u8; LEN];
        assert_eq!(write_checked(&mut out, "z80", "pc", REGS, IMAGES), Ok(()));
        assert_eq!(out, NOTE);
    }

    #[test]
    fn the_run_time_writer_refuses_a_sub_register_outside_its_parent() {
        let mut out = [0u8; 256];
        for regs in [
            [("af", 0, 16, None), ("a", 1, 8, Some(("af", 12)))],
            [("af", 0, 16, None), ("a", 1, 8, Some(("bc", 8)))],
            [("af", 0, 16, None), ("a\0", 1, 8, None)],
        ] {
            let len = note_len("z80", "", &regs, &[]);
            let why = write_checked(&mut out[..len], "z80", "", &regs, &[]);
            assert!(why.is_err(), "{regs:?}");
        }
    }
}
