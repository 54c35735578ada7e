//! The guest description note: what an emulator says about the CPU it
//! emulates (`styx_probe::describe!`), read by the loader from the ELF file
//! like the probe notes, so it costs the emulator nothing at run time.
//!
//! An ELF note of owner [`GUEST_NOTE_OWNER`] and type [`NT_STYX_GUEST`] in a
//! non-allocated section `.note.styx` (kept by every linker, never loaded).
//! Its descriptor, little-endian:
//!
//! ```text
//! u8 GUEST_NOTE_VERSION
//! arch: NUL-terminated string
//! pc:   NUL-terminated string (the program counter's name; empty: "pc")
//! entries, each a tag byte:
//!   GUEST_TAG_REGISTER: u64 number, u16 bits, name (NUL-terminated)
//!   GUEST_TAG_IMAGE:    u64 base, u64 size, name (NUL-terminated)
//!   GUEST_TAG_END:      the last entry
//! ```
//!
//! The writer is `styx_probe::describe!`; the reader styx-events' `guest`.

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
