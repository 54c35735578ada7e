//! Parses USDT argument specs (`-4@%esi 8@-20(%rbp) 8@sym+16(%rip)`), as
//! libbpf does and a step further: `%rip`-relative operands with a symbol.
//!
//! Each argument is `SIZE@OPERAND`: SIZE is 1, 2, 4 or 8 bytes, negative for
//! signed values; the OPERAND is AT&T syntax:
//! - `$imm`: a constant;
//! - `%reg`: a register or part of one (`%rax`, `%eax`, `%ax`, `%al`, `%ah`, `%r12d`, `%sil`…);
//! - `disp(%base)`, `disp(%base,%index,scale)`, `(,%index,scale)`: memory;
//! - `sym+off(%rip)`, `off(%rip)`: memory at a symbol or pc-relative address.

pub use crate::arch::x86_64::Reg;

/// Most arguments a spec may carry.
pub const MAX_ARGS: usize = 12;

#[derive(Clone, Debug, PartialEq, Eq)]
/// One parsed `SIZE@OPERAND` argument.
pub struct ArgSpec {
    /// Bytes: 1, 2, 4 or 8.
    pub size: u8,
    /// Whether the value is signed (a negative SIZE).
    pub signed: bool,
    /// Where the value is.
    pub location: Location,
}

#[derive(Clone, Debug, PartialEq, Eq)]
/// Where an argument's value is.
pub enum Location {
    /// The constant itself (`$imm`).
    Const(i64),
    /// A register, or part of one (`%reg`).
    Reg(Reg),
    /// Memory at `disp + base + index * scale`.
    Mem {
        /// The base register, if any.
        base: Option<Reg>,
        /// The index register and its scale, if any.
        index: Option<(Reg, u8)>,
        /// The displacement.
        disp: i64,
    },
    /// Memory at `symbol + offset`, relative to the probe's own code.
    RipRelative {
        /// The symbol, if the operand names one.
        symbol: Option<String>,
        /// Bytes past the symbol (or past the probe's code).
        offset: i64,
    },
}

/// An argument spec styx cannot read, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("argument {arg:?}: {reason}")]
pub struct ArgSpecError {
    /// The argument (or whole spec) at fault.
    pub arg: String,
    /// Why it cannot be read.
    pub reason: String,
}

/// Parses a whole spec string: arguments separated by spaces.
pub fn parse_spec(spec: &str) -> Result<Vec<ArgSpec>, ArgSpecError> {
    let args: Vec<&str> = spec.split_whitespace().collect();
    if args.len() > MAX_ARGS {
        return Err(ArgSpecError {
            arg: spec.to_owned(),
            reason: format!("{} arguments, at most {MAX_ARGS} are supported", args.len()),
        });
    }
    args.into_iter().map(parse_arg).collect()
}

/// Parses one `SIZE@OPERAND` argument.
pub fn parse_arg(arg: &str) -> Result<ArgSpec, ArgSpecError> {
    let fail = |reason: String| ArgSpecError {
        arg: arg.to_owned(),
        reason,
    };
    let (size, operand) = arg
        .split_once('@')
        .ok_or_else(|| fail("no SIZE@ prefix".into()))?;
    let (signed, digits) = match size.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, size),
    };
    let size = match digits {
        "1" => 1,
        "2" => 2,
        "4" => 4,
        "8" => 8,
        _ => return Err(fail(format!("size {size:?} is not 1, 2, 4 or 8"))),
    };
    let location = parse_operand(operand).map_err(fail)?;
    Ok(ArgSpec {
        size,
        signed,
        location,
    })
}

fn parse_operand(operand: &str) -> Result<Location, String> {
    if let Some(imm) = operand.strip_prefix('$') {
        return parse_int(imm).map(Location::Const);
    }
    if operand.starts_with('%') {
        return parse_reg(operand).map(Location::Reg);
    }
    let open = operand
        .find('(')
        .ok_or_else(|| format!("operand {operand:?} is not $imm, %reg or memory"))?;
    let inner = operand[open + 1..]
        .strip_suffix(')')
        .ok_or_else(|| format!("operand {operand:?} has no closing parenthesis"))?;
    let prefix = &operand[..open];
    let parts: Vec<&str> = inner.split(',').collect();
    if parts == ["%rip"] {
        return parse_rip_relative(prefix);
    }
    let disp = if prefix.is_empty() {
        0
    } else {
        parse_int(prefix)?
    };
    let base = match parts[0] {
        "" => None,
        reg => Some(parse_full_reg(reg)?),
    };
    let index = match parts.as_slice() {
        [_] => None,
        [_, index, scale] => {
            let scale = match *scale {
                "1" => 1,
                "2" => 2,
                "4" => 4,
                "8" => 8,
                _ => return Err(format!("scale {scale:?} is not 1, 2, 4 or 8")),
            };
            Some((parse_full_reg(index)?, scale))
        }
        _ => {
            return Err(format!(
                "memory operand ({inner}) is not (base) or (base,index,scale)"
            ))
        }
    };
    if base.is_none() && index.is_none() {
        return Err(format!("memory operand ({inner}) has no register"));
    }
    Ok(Location::Mem { base, index, disp })
}

/// `sym`, `sym+16`, `sym-8`, `16+sym` (as GCC writes array elements) or a
/// plain number, before `(%rip)`.
fn parse_rip_relative(prefix: &str) -> Result<Location, String> {
    if let Some((number, symbol)) = prefix.split_once('+') {
        if let (
            Ok(offset),
            Ok(Location::RipRelative {
                symbol: Some(s),
                offset: 0,
            }),
        ) = (parse_int(number), parse_rip_relative(symbol))
        {
            return Ok(Location::RipRelative {
                symbol: Some(s),
                offset,
            });
        }
    }
    if prefix.is_empty() || parse_int(prefix).is_ok() {
        let offset = if prefix.is_empty() {
            0
        } else {
            parse_int(prefix)?
        };
        return Ok(Location::RipRelative {
            symbol: None,
            offset,
        });
    }
    // A sign past the first character splits off the offset (a leading `-`
    // belongs to no symbol). Skip a whole character, not a byte: the prefix
    // comes from a file and may be any UTF-8.
    let first = prefix.chars().next().map_or(0, char::len_utf8);
    let split = prefix[first..].find(['+', '-']).map(|i| i + first);
    let (symbol, offset) = match split {
        Some(i) => (&prefix[..i], parse_int(&prefix[i..])?),
        None => (prefix, 0),
    };
    let valid = symbol
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.$@".contains(c));
    if !valid {
        return Err(format!("{symbol:?} is not a symbol name"));
    }
    Ok(Location::RipRelative {
        symbol: Some(symbol.to_owned()),
        offset,
    })
}

fn parse_int(text: &str) -> Result<i64, String> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(body) => (true, body),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let magnitude = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => body.parse::<u64>(),
    }
    .map_err(|_| format!("{text:?} is not a number"))?;
    // Constants may be written as large unsigned values; keep their bits.
    Ok(if negative {
        (magnitude as i64).wrapping_neg()
    } else {
        magnitude as i64
    })
}

/// A base or index register must be a full 64-bit one.
fn parse_full_reg(text: &str) -> Result<Reg, String> {
    let reg = parse_reg(text)?;
    if reg.width != 8 {
        return Err(format!("{text} is not a 64-bit register"));
    }
    Ok(reg)
}

fn parse_reg(text: &str) -> Result<Reg, String> {
    let name = text
        .strip_prefix('%')
        .ok_or_else(|| format!("{text:?} is not a register"))?;
    crate::arch::x86_64::REGISTERS
        .iter()
        .find_map(|&(full, names)| {
            let at = names.iter().position(|n| *n == name)?;
            let (width, high_byte) =
                [(8, false), (4, false), (2, false), (1, false), (1, true)][at];
            Some(Reg {
                full,
                width,
                high_byte,
            })
        })
        .ok_or_else(|| format!("unknown register %{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(full: &'static str, width: u8) -> Reg {
        Reg {
            full,
            width,
            high_byte: false,
        }
    }

    fn one(arg: &str) -> ArgSpec {
        parse_arg(arg).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn registers_of_every_width() {
        assert_eq!(one("8@%rdi").location, Location::Reg(reg("rdi", 8)));
        let eax = one("-4@%eax");
        assert_eq!((eax.size, eax.signed), (4, true));
        assert_eq!(eax.location, Location::Reg(reg("rax", 4)));
        assert_eq!(one("4@%r12d").location, Location::Reg(reg("r12", 4)));
        assert_eq!(one("2@%r8w").location, Location::Reg(reg("r8", 2)));
        assert_eq!(one("1@%sil").location, Location::Reg(reg("rsi", 1)));
        let ah = one("1@%ah").location;
        assert_eq!(
            ah,
            Location::Reg(Reg {
                full: "rax",
                width: 1,
                high_byte: true
            })
        );
    }

    #[test]
    fn constants() {
        assert_eq!(one("-4@$5").location, Location::Const(5));
        assert_eq!(one("8@$-1").location, Location::Const(-1));
        assert_eq!(one("8@$0x10").location, Location::Const(16));
    }

    #[test]
    fn memory_operands() {
        assert_eq!(
            one("-4@-20(%rbp)").location,
            Location::Mem {
                base: Some(reg("rbp", 8)),
                index: None,
                disp: -20
            }
        );
        assert_eq!(
            one("8@(%rsp)").location,
            Location::Mem {
                base: Some(reg("rsp", 8)),
                index: None,
                disp: 0
            }
        );
        assert_eq!(
            one("1@-96(%rbp,%rax,8)").location,
            Location::Mem {
                base: Some(reg("rbp", 8)),
                index: Some((reg("rax", 8), 8)),
                disp: -96
            }
        );
        assert_eq!(
            one("4@(,%rcx,4)").location,
            Location::Mem {
                base: None,
                index: Some((reg("rcx", 8), 4)),
                disp: 0
            }
        );
    }

    #[test]
    fn rip_relative_with_and_without_symbol() {
        assert_eq!(
            one("8@sym+16(%rip)").location,
            Location::RipRelative {
                symbol: Some("sym".into()),
                offset: 16
            }
        );
        assert_eq!(
            one("4@counter(%rip)").location,
            Location::RipRelative {
                symbol: Some("counter".into()),
                offset: 0
            }
        );
        assert_eq!(
            one("4@_ZN3foo3bar17h0123456789abcdefE-8(%rip)").location,
            Location::RipRelative {
                symbol: Some("_ZN3foo3bar17h0123456789abcdefE".into()),
                offset: -8
            }
        );
        assert_eq!(
            one("-4@8+forms_pair(%rip)").location,
            Location::RipRelative {
                symbol: Some("forms_pair".into()),
                offset: 8
            }
        );
        assert_eq!(
            one("8@0x20(%rip)").location,
            Location::RipRelative {
                symbol: None,
                offset: 32
            }
        );
    }

    #[test]
    fn whole_specs() {
        let args = parse_spec("8@%rdx 8@-80(%rbx)").unwrap();
        assert_eq!(args.len(), 2);
        assert_eq!(parse_spec("").unwrap(), vec![]);
        let twelve = ["8@%rdi"; 12].join(" ");
        assert_eq!(parse_spec(&twelve).unwrap().len(), 12);
        let thirteen = ["8@%rdi"; 13].join(" ");
        assert!(parse_spec(&thirteen).is_err());
    }

    #[test]
    fn unreadable_specs_say_why() {
        for (arg, why) in [
            ("%rdi", "no SIZE@"),
            ("3@%rdi", "not 1, 2, 4 or 8"),
            ("8@%xyz", "unknown register"),
            ("8@-20(%ebp)", "not a 64-bit register"),
            ("8@-20(%rbp", "no closing parenthesis"),
            ("8@(%rbp,%rax,3)", "scale"),
            ("8@junk", "not $imm, %reg or memory"),
            ("8@a*b(%rip)", "not a symbol name"),
        ] {
            let err = parse_arg(arg).unwrap_err();
            assert!(err.reason.contains(why), "{arg}: {err}");
        }
    }

    #[test]
    fn non_ascii_anywhere_is_an_error_not_a_panic() {
        // Regression: `8@é(%rip)` sliced the symbol at byte 1, inside `é`.
        let err = parse_arg("8@é(%rip)").unwrap_err();
        assert!(err.reason.contains("not a symbol name"), "{err}");
        // Every operand shape, with a multi-byte character at every place.
        for arg in [
            "8@sym+16(%rip)",
            "-4@8+forms_pair(%rip)",
            "8@a-8(%rip)",
            "1@-96(%rbp,%rax,8)",
            "8@$0x10",
            "4@%r12d",
        ] {
            let chars: Vec<char> = arg.chars().collect();
            for at in 0..=chars.len() {
                for odd in ['é', '€', '𝄞', '\u{0}'] {
                    let mut text: String = chars[..at].iter().collect();
                    text.push(odd);
                    text.extend(&chars[at..]);
                    let _ = parse_arg(&text);
                    let _ = parse_spec(&text);
                }
            }
        }
    }
}
