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

/// [`UsdtArg::flags`] bits.
pub const ARG_HAS_BASE: u8 = 1;
pub const ARG_HAS_INDEX: u8 = 2;

/// Where one argument is and how wide (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct UsdtArg {
    pub kind: u8,
    /// Bytes: 1, 2, 4 or 8.
    pub size: u8,
    /// 1 if the value is signed (sign-extended to 64 bits).
    pub signed: u8,
    /// Bits to shift the register right first (8 for `%ah`-style registers).
    pub shift: u8,
    /// Offsets in `struct pt_regs` of the base and index registers.
    pub base_off: u16,
    pub index_off: u16,
    pub scale: u8,
    pub flags: u8,
    pub _reserved: [u8; 6],
    /// The constant, or the memory displacement.
    pub value: u64,
}

/// A site's arguments (296 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct UsdtSpec {
    pub nargs: u32,
    pub _reserved: u32,
    pub args: [UsdtArg; MAX_USDT_ARGS],
}

/// A hit of any USDT probe (128 bytes): the header's `aux` holds the number
/// of arguments; unused ones are 0. `spec_id` names the site (the loader
/// knows its provider and probe).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct UsdtRecord {
    pub header: RecordHeader,
    pub spec_id: u32,
    pub _reserved: u32,
    pub args: [u64; MAX_USDT_ARGS],
}

const _: () = assert!(core::mem::size_of::<UsdtArg>() == 24);
const _: () = assert!(core::mem::size_of::<UsdtSpec>() == 296);
const _: () = assert!(core::mem::size_of::<UsdtRecord>() == 128);
