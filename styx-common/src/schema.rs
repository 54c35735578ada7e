//! Event types an emulator declares itself (`styx_probe::event!`): each
//! described in the emulator's binary by an ELF note, so a loader learns
//! its name, fields, their types and widths, and the names of enum
//! values, with no rebuild of the loader.
//!
//! The note is written as the guest description's is (see
//! [`crate::guest`]): owner [`crate::guest::GUEST_NOTE_OWNER`], type
//! [`NT_STYX_EVENT`], in `.note.styx`, a `#[used]` static made at compile
//! time by [`note`]. Its descriptor, little-endian:
//!
//! ```text
//! u8 EVENT_NOTE_VERSION
//! provider: NUL-terminated (the declaring crate's name)
//! name:     NUL-terminated
//! u8 fields (at most MAX_FIELDS), each:
//!   u8 kind (FieldKind), u8 bytes (1, 2, 4 or 8), name (NUL-terminated)
//!   kind Enum: the enum's name (NUL-terminated), u16 values, each
//!              u64 value and its name (NUL-terminated)
//! ```
//!
//! The type's probe sites are ordinary USDT sites of the same provider
//! and name (`.note.stapsdt`): one per-event site whose arguments are the
//! fields in order, each a `u64` register (signed ones sign-extended), and
//! a batch-enable site `styx_batch:NAME` on the high half of the type's
//! semaphore word, as for the catalogue's batched types. In a batch, an
//! item of the type has the tag `(semaphore - flush semaphore) / 4`
//! (15 bits, [`declared_tag`]): both addresses are in the file's notes, so
//! a loader knows every declared type's tag before the first event, and
//! the linker, not a registry, keeps the tags of a file's types apart.

/// The note's type (owner "styx").
pub const NT_STYX_EVENT: u32 = 2;
/// The descriptor layout's version: its first byte.
pub const EVENT_NOTE_VERSION: u8 = 1;
/// The most fields a declared event type has (the per-event site passes
/// each in a register of its own).
pub const MAX_FIELDS: usize = 8;
/// The most values an enum of a declared field names.
pub const MAX_ENUM_VALUES: usize = 1024;

/// The provider of `styx_alloc::TracedAllocator`'s types (`alloc`,
/// `dealloc`, `realloc`): the name of the crate declaring them, which
/// checks it is this. Timeline formats draw the heap from them.
pub const HEAP_PROVIDER: &str = "styx_alloc";

/// The field of [`HEAP_PROVIDER`]'s types that holds the return address
/// into the allocating function: a code address of the traced process,
/// which tables name by its function.
pub const HEAP_CALLER: &str = "caller";

/// Whether `provider` (a crate's name) is [`HEAP_PROVIDER`]: for the
/// declaring crate's compile-time check.
pub const fn is_heap_provider(provider: &str) -> bool {
    crate::same_str(provider, HEAP_PROVIDER)
}

/// How a field reads: a declared field's kind, and the reading of the
/// catalogue's numeric fields (`FieldType::kind`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldKind {
    /// An unsigned integer: decimal for people.
    Unsigned = 1,
    /// A signed integer (two's complement in its width).
    Signed = 2,
    /// `true` or `false`.
    Bool = 3,
    /// An address (or another number people read in hex, as the
    /// catalogue's instruction words and values): hex for people.
    Address = 4,
    /// A register number: its name where the guest is described.
    Register = 5,
    /// A value of an emulator-defined enum: its name.
    Enum = 6,
}

impl FieldKind {
    /// Every kind, in code order.
    pub const ALL: [FieldKind; 6] = [
        FieldKind::Unsigned,
        FieldKind::Signed,
        FieldKind::Bool,
        FieldKind::Address,
        FieldKind::Register,
        FieldKind::Enum,
    ];

    /// Its name in a capture's header.
    pub const fn name(self) -> &'static str {
        match self {
            FieldKind::Unsigned => "unsigned",
            FieldKind::Signed => "signed",
            FieldKind::Bool => "bool",
            FieldKind::Address => "address",
            FieldKind::Register => "register",
            FieldKind::Enum => "enum",
        }
    }

    /// The kind with this name.
    pub fn from_name(name: &str) -> Option<FieldKind> {
        FieldKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind with this code.
    pub const fn from_code(code: u8) -> Option<FieldKind> {
        Some(match code {
            1 => FieldKind::Unsigned,
            2 => FieldKind::Signed,
            3 => FieldKind::Bool,
            4 => FieldKind::Address,
            5 => FieldKind::Register,
            6 => FieldKind::Enum,
            _ => return None,
        })
    }
}

/// A value of an enum and its name.
pub type EnumValue = (u64, &'static str);

/// A declared field, as the note is written from it: name, kind, bytes,
/// and for an enum its name and values (else "" and none).
pub type FieldEntry = (
    &'static str,
    FieldKind,
    usize,
    &'static str,
    &'static [EnumValue],
);

/// The batch item tag of a declared type whose semaphore word is at
/// `semaphore` in a file whose flush site's semaphore is at `flush`
/// (addresses of the same file, or of the same process): never 0, never
/// with the catalogue's bit (the item codec's `CATALOGUE_TAG`).
pub const fn declared_tag(semaphore: u64, flush: u64) -> u16 {
    let words = semaphore.wrapping_sub(flush) >> 2;
    (words & 0x7fff) as u16
}

/// Bytes of the whole note [`note`] writes.
pub const fn note_len(provider: &str, name: &str, fields: &[FieldEntry]) -> usize {
    12 + crate::guest::pad4(crate::guest::GUEST_NOTE_OWNER.len() + 1)
        + crate::guest::pad4(desc_len(provider, name, fields))
}

const fn desc_len(provider: &str, name: &str, fields: &[FieldEntry]) -> usize {
    let mut len = 1 + provider.len() + 1 + name.len() + 1 + 1;
    let mut i = 0;
    while i < fields.len() {
        let (field, kind, _, enum_name, values) = fields[i];
        len += 2 + field.len() + 1;
        if let FieldKind::Enum = kind {
            len += enum_name.len() + 1 + 2;
            let mut v = 0;
            while v < values.len() {
                len += 8 + values[v].1.len() + 1;
                v += 1;
            }
        }
        i += 1;
    }
    len
}

/// The declared type's note, at compile time. `N` is [`note_len`] of the
/// same arguments; what [`check`] rejects does not compile.
pub const fn note<const N: usize>(provider: &str, name: &str, fields: &[FieldEntry]) -> [u8; N] {
    assert!(N == note_len(provider, name, fields), "note length");
    if let Err(why) = check(provider, name, fields) {
        panic!("{}", why);
    }
    let mut out = [0u8; N];
    write_note(&mut out, provider, name, fields);
    out
}

/// Writes the note into `out`, [`note_len`] bytes, at run time: for a
/// description made outside Rust (styx-probe-c's generator for C
/// emulators). What [`check`] rejects, or `out` of another length, is the
/// error.
pub fn write_checked(
    out: &mut [u8],
    provider: &str,
    name: &str,
    fields: &[FieldEntry],
) -> Result<(), &'static str> {
    check(provider, name, fields)?;
    if out.len() != note_len(provider, name, fields) {
        return Err("note length");
    }
    write_note(out, provider, name, fields);
    Ok(())
}

/// Why a declared type cannot be written: more than [`MAX_FIELDS`]
/// fields, a width other than 1, 2, 4 or 8, an enum of more than
/// [`MAX_ENUM_VALUES`] values, or a name with a NUL byte in it.
pub const fn check(provider: &str, name: &str, fields: &[FieldEntry]) -> Result<(), &'static str> {
    use crate::guest::{has_nul, NUL_IN_NAME};
    if fields.len() > MAX_FIELDS {
        return Err("a styx event has at most 8 fields");
    }
    if has_nul(provider) || has_nul(name) {
        return Err(NUL_IN_NAME);
    }
    let mut i = 0;
    while i < fields.len() {
        let (field, kind, bytes, enum_name, values) = fields[i];
        if !matches!(bytes, 1 | 2 | 4 | 8) {
            return Err("a styx event field is 1, 2, 4 or 8 bytes wide");
        }
        if has_nul(field) {
            return Err(NUL_IN_NAME);
        }
        if let FieldKind::Enum = kind {
            if values.len() > MAX_ENUM_VALUES {
                return Err("an enum of a styx event names at most 1024 values");
            }
            if has_nul(enum_name) {
                return Err(NUL_IN_NAME);
            }
            let mut v = 0;
            while v < values.len() {
                if has_nul(values[v].1) {
                    return Err(NUL_IN_NAME);
                }
                v += 1;
            }
        }
        i += 1;
    }
    Ok(())
}

/// Writes the note [`check`] accepted into `out`, [`note_len`] bytes.
const fn write_note(out: &mut [u8], provider: &str, name: &str, fields: &[FieldEntry]) {
    use crate::guest::{pad4, put, put_name, GUEST_NOTE_OWNER};
    let owner = GUEST_NOTE_OWNER.len() + 1;
    let mut at = put(out, 0, &(owner as u32).to_le_bytes());
    let desc = desc_len(provider, name, fields) as u32;
    at = put(out, at, &desc.to_le_bytes());
    at = put(out, at, &NT_STYX_EVENT.to_le_bytes());
    put(out, at, GUEST_NOTE_OWNER);
    at = 12 + pad4(owner);
    at = put(out, at, &[EVENT_NOTE_VERSION]);
    at = put_name(out, at, provider);
    at = put_name(out, at, name);
    at = put(out, at, &[fields.len() as u8]);
    let mut i = 0;
    while i < fields.len() {
        let (field, kind, bytes, enum_name, values) = fields[i];
        at = put(out, at, &[kind as u8, bytes as u8]);
        at = put_name(out, at, field);
        if let FieldKind::Enum = kind {
            at = put_name(out, at, enum_name);
            at = put(out, at, &(values.len() as u16).to_le_bytes());
            let mut v = 0;
            while v < values.len() {
                at = put(out, at, &values[v].0.to_le_bytes());
                at = put_name(out, at, values[v].1);
                v += 1;
            }
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELDS: &[FieldEntry] = &[
        ("pc", FieldKind::Unsigned, 4, "", &[]),
        (
            "device",
            FieldKind::Enum,
            1,
            "Device",
            &[(0, "Uart"), (7, "Dma")],
        ),
        ("delta", FieldKind::Signed, 2, "", &[]),
    ];

    #[test]
    fn the_run_time_writer_writes_the_compile_time_note() {
        const LEN: usize = note_len("emu", "mmio_write", FIELDS);
        const NOTE: [u8; LEN] = note("emu", "mmio_write", FIELDS);
        let mut out = [0u8; LEN];
        assert_eq!(write_checked(&mut out, "emu", "mmio_write", FIELDS), Ok(()));
        assert_eq!(out, NOTE);
    }

    #[test]
    fn the_run_time_writer_refuses_what_would_not_compile() {
        let nine = [("a", FieldKind::Unsigned, 1, "", &[][..]); 9];
        let mut out = [0u8; 256];
        let len = |f: &[FieldEntry]| note_len("emu", "x", f);
        assert!(write_checked(&mut out[..len(&nine)], "emu", "x", &nine).is_err());
        let three = [("a", FieldKind::Unsigned, 3, "", &[][..])];
        assert!(write_checked(&mut out[..len(&three)], "emu", "x", &three).is_err());
        let nul = [("a\0b", FieldKind::Unsigned, 1, "", &[][..])];
        assert!(write_checked(&mut out[..len(&nul)], "emu", "x", &nul).is_err());
        assert!(write_checked(&mut out[..3], "emu", "x", &[]).is_err());
    }
}
