//! Compiles parsed argument specs into what the generic eBPF program reads.

use crate::argspec::{ArgSpec, Location, Reg};
use crate::symbols::SymbolError;
use styx_common::{UsdtArg, UsdtSpec, ARG_CONST, ARG_HAS_BASE, ARG_HAS_INDEX, ARG_MEM, ARG_REG};

/// An argument the eBPF program could not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// The register is not saved in `struct pt_regs`.
    #[error("register %{0} is not in pt_regs")]
    Register(&'static str),
    /// `N(%rip)` alone is relative to the probe's own code, which the
    /// program does not know.
    #[error("a %rip-relative operand without a symbol needs the probe's own address")]
    RipWithoutSymbol,
    /// The operand's symbol could not be placed.
    #[error(transparent)]
    Symbol(#[from] SymbolError),
}

/// Compiles `args`; `symbol` gives a symbol's address in the traced process,
/// for `%rip`-relative operands.
pub fn compile(
    args: &[ArgSpec],
    symbol: &mut dyn FnMut(&str) -> Result<u64, SymbolError>,
) -> Result<UsdtSpec, CompileError> {
    let mut spec = UsdtSpec {
        nargs: args.len() as u32,
        ..UsdtSpec::default()
    };
    for (slot, arg) in spec.args.iter_mut().zip(args) {
        *slot = compile_arg(arg, symbol)?;
    }
    Ok(spec)
}

fn compile_arg(
    arg: &ArgSpec,
    symbol: &mut dyn FnMut(&str) -> Result<u64, SymbolError>,
) -> Result<UsdtArg, CompileError> {
    let offset = |reg: &Reg| {
        crate::arch::x86_64::pt_regs_offset(reg).ok_or(CompileError::Register(reg.full))
    };
    let mut out = UsdtArg {
        size: arg.size,
        signed: arg.signed.into(),
        ..UsdtArg::default()
    };
    match &arg.location {
        Location::Const(value) => {
            out.kind = ARG_CONST;
            out.value = *value as u64;
        }
        Location::Reg(reg) => {
            out.kind = ARG_REG;
            out.base_off = offset(reg)?;
            out.shift = if reg.high_byte { 8 } else { 0 };
        }
        Location::Mem { base, index, disp } => {
            out.kind = ARG_MEM;
            out.value = *disp as u64;
            if let Some(base) = base {
                out.base_off = offset(base)?;
                out.flags |= ARG_HAS_BASE;
            }
            if let Some((index, scale)) = index {
                out.index_off = offset(index)?;
                out.scale = *scale;
                out.flags |= ARG_HAS_INDEX;
            }
        }
        // An absolute address once the symbol is placed.
        Location::RipRelative {
            symbol: Some(name),
            offset,
        } => {
            out.kind = ARG_MEM;
            out.value = symbol(name)?.wrapping_add(*offset as u64);
        }
        Location::RipRelative { symbol: None, .. } => {
            return Err(CompileError::RipWithoutSymbol);
        }
    }
    Ok(out)
}
