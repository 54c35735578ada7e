//! Compiles parsed argument specs into what the generic eBPF program reads.

use crate::argspec::{ArgSpec, Location, Reg};
use styx_common::{UsdtArg, UsdtSpec, ARG_CONST, ARG_HAS_BASE, ARG_HAS_INDEX, ARG_MEM, ARG_REG};

/// Offsets of the registers in x86-64 `struct pt_regs`.
fn pt_regs_offset(reg: &Reg) -> Option<u16> {
    Some(match reg.full {
        "r15" => 0,
        "r14" => 8,
        "r13" => 16,
        "r12" => 24,
        "rbp" => 32,
        "rbx" => 40,
        "r11" => 48,
        "r10" => 56,
        "r9" => 64,
        "r8" => 72,
        "rax" => 80,
        "rcx" => 88,
        "rdx" => 96,
        "rsi" => 104,
        "rdi" => 112,
        "rip" => 128,
        "rsp" => 152,
        _ => return None,
    })
}

/// Compiles `args`; `symbol` gives a symbol's address in the traced process,
/// for `%rip`-relative operands.
pub fn compile(
    args: &[ArgSpec],
    symbol: &mut dyn FnMut(&str) -> Result<u64, String>,
) -> Result<UsdtSpec, String> {
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
    symbol: &mut dyn FnMut(&str) -> Result<u64, String>,
) -> Result<UsdtArg, String> {
    let offset = |reg: &Reg| {
        pt_regs_offset(reg).ok_or_else(|| format!("register %{} is not in pt_regs", reg.full))
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
            return Err(
                "a %rip-relative operand without a symbol needs the probe's own address".into(),
            );
        }
    }
    Ok(out)
}
