//! Any USDT probe, not only styx's: one eBPF program reads each site's
//! arguments as its spec says. The loader compiles every site's argument
//! spec into a [`UsdtSpec`] in the `SPECS` map; the attach cookie is its index.

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
    /// [`ARG_HAS_BASE`] and [`ARG_HAS_INDEX`].
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
/// knows its provider and probe).
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
    /// The arguments, sign-extended where signed.
    pub args: [u64; MAX_USDT_ARGS],
}

const _: () = assert!(core::mem::size_of::<UsdtArg>() == 24);
const _: () = assert!(core::mem::size_of::<UsdtSpec>() == 296);
const _: () = assert!(core::mem::size_of::<UsdtRecord>() == 128);
