//! Any USDT probe, not only styx's: one eBPF program reads each site's
//! arguments as its spec says. The loader compiles every site's argument
//! spec into a [`UsdtSpec`] in the `SPECS` map; the attach cookie is its index.
//!
//! An argument the user declared a string (`--probe-args`) is an address:
//! the program copies the NUL-terminated string there, at most
//! [`USDT_STR_MAX`] bytes as bpftrace's `str()` does, after the record (the
//! record's `k`th string at `k * USDT_STR_MAX`), and the argument's slot
//! holds a [`StrWord`] saying how many bytes it kept and whether the string
//! was cut or could not be read.

use crate::RecordHeader;

/// Most arguments a USDT spec may have.
pub const MAX_USDT_ARGS: usize = 12;

/// [`UsdtArg::kind`]: the value is `value` itself.
pub const ARG_CONST: u8 = 0;
/// [`UsdtArg::kind`]: the value is in the register at `base_off` in `pt_regs`.
pub const ARG_REG: u8 = 1;
/// [`UsdtArg::kind`]: the value is in user memory at
/// `value + base + index * scale`.
pub const ARG_MEM: u8 = 2;

/// [`UsdtArg::flags`]: a base register is used.
pub const ARG_HAS_BASE: u8 = 1;
/// [`UsdtArg::flags`]: an index register is used.
pub const ARG_HAS_INDEX: u8 = 2;
/// [`UsdtArg::flags`]: the value is the address of a NUL-terminated string,
/// copied after the record; the argument's slot holds its [`StrWord`].
pub const ARG_STRING: u8 = 4;

/// Most bytes of one string argument a record keeps (bpftrace's `str()`
/// keeps 64 by default; JSON arguments need more).
pub const USDT_STR_MAX: usize = 256;

/// Most bytes of strings after a [`UsdtRecord`]: every argument a string
/// kept whole.
pub const USDT_STRINGS_MAX: usize = MAX_USDT_ARGS * USDT_STR_MAX;

/// Where one argument is and how wide (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct UsdtArg {
    /// [`ARG_CONST`], [`ARG_REG`] or [`ARG_MEM`].
    pub kind: u8,
    /// Bytes: 1, 2, 4 or 8.
    pub size: u8,
    /// 1 if the value is signed (sign-extended to 64 bits).
    pub signed: u8,
    /// Bits to shift the register right first (8 for `%ah`-style registers).
    pub shift: u8,
    /// Offset in `struct pt_regs` of the register ([`ARG_REG`]) or base
    /// register ([`ARG_MEM`]).
    pub base_off: u16,
    /// Offset in `struct pt_regs` of the index register.
    pub index_off: u16,
    /// Multiplies the index: 1, 2, 4 or 8.
    pub scale: u8,
    /// [`ARG_HAS_BASE`], [`ARG_HAS_INDEX`] and [`ARG_STRING`].
    pub flags: u8,
    /// Zero.
    pub _reserved: [u8; 6],
    /// The constant, or the memory displacement.
    pub value: u64,
}

/// A site's arguments (296 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct UsdtSpec {
    /// How many of `args` are used.
    pub nargs: u32,
    /// Zero.
    pub _reserved: u32,
    /// Each argument, in probe order.
    pub args: [UsdtArg; MAX_USDT_ARGS],
}

/// A hit of any USDT probe (128 bytes): the header's `aux` holds the number
/// of arguments; unused ones are 0. `spec_id` names the site (the loader
/// knows its provider and probe). Its string arguments follow it, the
/// `k`th at `k * USDT_STR_MAX`, each as long as its [`StrWord`] says; the
/// record ends with the last one's bytes (at most [`USDT_STRINGS_MAX`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct UsdtRecord {
    /// Time, thread and kind; `aux` is the argument count.
    pub header: RecordHeader,
    /// Index of the site's spec (its attach cookie).
    pub spec_id: u32,
    /// Zero.
    pub _reserved: u32,
    /// The arguments, sign-extended where signed; a string's [`StrWord`].
    pub args: [u64; MAX_USDT_ARGS],
}

/// What became of one string argument, as its slot in [`UsdtRecord::args`]
/// says: bits 0–15 the bytes kept in its place after the record, bit 62 the string was
/// longer than [`USDT_STR_MAX`], bit 63 the read failed (bits 32–47 then
/// hold the helper's error number, e.g. 14 for EFAULT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrWord {
    /// The string's first `len` bytes are kept (all of it unless `cut`).
    Kept {
        /// Bytes kept, without the NUL.
        len: u16,
        /// The string was longer than [`USDT_STR_MAX`].
        cut: bool,
    },
    /// The address could not be read (not mapped, or not resident).
    Unreadable {
        /// The error number the read helper returned, positive.
        errno: u16,
    },
}

const STR_CUT: u64 = 1 << 62;
const STR_UNREADABLE: u64 = 1 << 63;

impl StrWord {
    /// The slot's value.
    #[inline(always)]
    pub const fn encode(self) -> u64 {
        match self {
            StrWord::Kept { len, cut } => len as u64 | if cut { STR_CUT } else { 0 },
            StrWord::Unreadable { errno } => STR_UNREADABLE | (errno as u64) << 32,
        }
    }

    /// A slot's value read back; lengths past [`USDT_STR_MAX`] are cut to it
    /// (a record's bytes are checked against them where they are taken).
    pub const fn decode(word: u64) -> StrWord {
        if word & STR_UNREADABLE != 0 {
            StrWord::Unreadable {
                errno: (word >> 32) as u16,
            }
        } else {
            let len = word as u16;
            StrWord::Kept {
                len: if len as usize > USDT_STR_MAX {
                    USDT_STR_MAX as u16
                } else {
                    len
                },
                cut: word & STR_CUT != 0,
            }
        }
    }

    /// Bytes kept of it.
    pub const fn kept(self) -> usize {
        match self {
            StrWord::Kept { len, .. } => len as usize,
            StrWord::Unreadable { .. } => 0,
        }
    }
}

/// How output shows one USDT argument: an integer of a width and sign, or
/// a string the program copied ([`ARG_STRING`]), plain or holding JSON.
/// Its name (`u32`, `i64`, `str`, `json`) is what `--probe-args` takes
/// and a capture's header records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    /// An integer of `bytes` bytes (1, 2, 4, 8): the value read, cut to that
    /// width and extended by its sign, as a C cast would.
    Int {
        /// 1, 2, 4 or 8.
        bytes: u8,
        /// Signed.
        signed: bool,
    },
    /// A string.
    Str,
    /// A string holding JSON (the `usdt` crate's serde arguments).
    Json,
}

impl ArgType {
    /// The type of a note's argument of `bytes` bytes (1, 2, 4, 8).
    pub const fn int(bytes: u8, signed: bool) -> ArgType {
        ArgType::Int { bytes, signed }
    }

    /// Its name, as [`ArgType::parse`] reads it.
    pub const fn name(self) -> &'static str {
        match self {
            ArgType::Int { bytes, signed } => match (bytes, signed) {
                (1, false) => "u8",
                (2, false) => "u16",
                (4, false) => "u32",
                (1, true) => "i8",
                (2, true) => "i16",
                (4, true) => "i32",
                (_, true) => "i64",
                (_, false) => "u64",
            },
            ArgType::Str => "str",
            ArgType::Json => "json",
        }
    }

    /// The type named `name`, if any.
    pub fn parse(name: &str) -> Option<ArgType> {
        let int = |bytes, signed| Some(ArgType::Int { bytes, signed });
        match name {
            "u8" => int(1, false),
            "u16" => int(2, false),
            "u32" => int(4, false),
            "u64" => int(8, false),
            "i8" => int(1, true),
            "i16" => int(2, true),
            "i32" => int(4, true),
            "i64" => int(8, true),
            "str" => Some(ArgType::Str),
            "json" => Some(ArgType::Json),
            _ => None,
        }
    }

    /// Whether it is a signed integer.
    pub const fn is_signed(self) -> bool {
        matches!(self, ArgType::Int { signed: true, .. })
    }

    /// Whether the program copies a string for it.
    pub const fn is_string(self) -> bool {
        matches!(self, ArgType::Str | ArgType::Json)
    }

    /// An integer value as this type shows it: cut to its width, then
    /// sign-extended if signed (`None` for a string type).
    pub const fn cast(self, value: u64) -> Option<u64> {
        match self {
            ArgType::Int { bytes, signed } => Some(widen(value, bytes, signed)),
            _ => None,
        }
    }
}

/// Longest name a USDT argument may be given.
pub const MAX_ARG_NAME: usize = 64;

/// Whether `name` may name a USDT argument: letters, digits and `_`, not
/// first a digit, at most [`MAX_ARG_NAME`] bytes, which JSON keys, Parquet
/// columns and SQL take unquoted.
pub fn is_arg_name(name: &str) -> bool {
    let mut chars = name.chars();
    let starts = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    starts && name.len() <= MAX_ARG_NAME && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The low `bytes` bytes of `value` (1, 2, 4 or 8), sign- or zero-extended
/// to 64 bits: how the eBPF program widens what it read, and how output
/// casts to a declared type.
#[inline(always)]
pub const fn widen(value: u64, bytes: u8, signed: bool) -> u64 {
    let unused = (64 - (bytes as u32 & 15) * 8) & 63;
    if signed {
        (((value << unused) as i64) >> unused) as u64
    } else {
        (value << unused) >> unused
    }
}

const _: () = assert!(core::mem::size_of::<UsdtArg>() == 24);
const _: () = assert!(core::mem::size_of::<UsdtSpec>() == 296);
const _: () = assert!(core::mem::size_of::<UsdtRecord>() == 128);
const _: () = assert!(USDT_STR_MAX < u16::MAX as usize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn str_words_read_back() {
        for word in [
            StrWord::Kept { len: 0, cut: false },
            StrWord::Kept {
                len: USDT_STR_MAX as u16,
                cut: true,
            },
            StrWord::Unreadable { errno: 14 },
        ] {
            assert_eq!(StrWord::decode(word.encode()), word);
        }
        // A forged length is cut to what a record can hold.
        assert_eq!(StrWord::decode(0xffff).kept(), USDT_STR_MAX);
    }

    #[test]
    fn arg_types_read_back_and_cast_as_c_does() {
        for name in [
            "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "str", "json",
        ] {
            assert_eq!(ArgType::parse(name).unwrap().name(), name);
        }
        assert_eq!(ArgType::parse("int"), None);
        assert_eq!(ArgType::int(1, true).cast(0x1ff), Some(u64::MAX));
        assert_eq!(ArgType::int(2, false).cast(u64::MAX), Some(0xffff));
        assert_eq!(ArgType::int(8, true).cast(5), Some(5));
        assert_eq!(ArgType::Json.cast(5), None);
    }
}
