//! What styx knows of x86-64: register names in argument specs, where the
//! kernel keeps each register of a stopped thread (`struct pt_regs`), and the
//! SysV registers styx-probe passes its arguments in.

/// A register operand: which 64-bit register, and which part of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg {
    /// The full register's name, e.g. `rax` for `%eax`, `%ax`, `%al`, `%ah`.
    pub full: &'static str,
    /// Bytes named: 8, 4, 2 or 1.
    pub width: u8,
    /// `%ah`-style: the second-lowest byte.
    pub high_byte: bool,
}

/// x86-64 registers: the 64-, 32-, 16-, 8-bit and high-byte names.
pub const REGISTERS: &[(&str, &[&str])] = &[
    ("rax", &["rax", "eax", "ax", "al", "ah"]),
    ("rbx", &["rbx", "ebx", "bx", "bl", "bh"]),
    ("rcx", &["rcx", "ecx", "cx", "cl", "ch"]),
    ("rdx", &["rdx", "edx", "dx", "dl", "dh"]),
    ("rsi", &["rsi", "esi", "si", "sil"]),
    ("rdi", &["rdi", "edi", "di", "dil"]),
    ("rbp", &["rbp", "ebp", "bp", "bpl"]),
    ("rsp", &["rsp", "esp", "sp", "spl"]),
    ("r8", &["r8", "r8d", "r8w", "r8b"]),
    ("r9", &["r9", "r9d", "r9w", "r9b"]),
    ("r10", &["r10", "r10d", "r10w", "r10b"]),
    ("r11", &["r11", "r11d", "r11w", "r11b"]),
    ("r12", &["r12", "r12d", "r12w", "r12b"]),
    ("r13", &["r13", "r13d", "r13w", "r13b"]),
    ("r14", &["r14", "r14d", "r14w", "r14b"]),
    ("r15", &["r15", "r15d", "r15w", "r15b"]),
    ("rip", &["rip"]),
];

/// The SysV argument registers, in order: where styx-probe's probes pass
/// their arguments and where the eBPF programs read them.
pub const ARGUMENT_REGISTERS: [&str; 6] = ["rdi", "rsi", "rdx", "rcx", "r8", "r9"];

/// Offset of `reg`'s full register in x86-64 `struct pt_regs`; `None` if the
/// kernel does not save it there.
pub fn pt_regs_offset(reg: &Reg) -> Option<u16> {
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

/// The longest x86-64 instruction, in bytes.
pub const MAX_INSTRUCTION: usize = 15;

/// The length of the `nop` at the start of `code`, if it starts with one of
/// the encodings compilers and assemblers emit for USDT sites and padding:
/// `90`, `66 90`, and the multi-byte `0f 1f /0` forms (`nopl`, `nopw`, with
/// `66` and `2e` prefixes), whole within `code`. A uprobe replaces the
/// site's first byte with `int3` and emulates the instruction; anywhere but
/// at a real instruction it would corrupt the code.
pub fn nop_length(code: &[u8]) -> Option<usize> {
    let prefixes = code
        .iter()
        .take(MAX_INSTRUCTION - 3)
        .take_while(|b| matches!(b, 0x66 | 0x2e))
        .count();
    let length = match &code[prefixes..] {
        [0x90, ..] => 1,
        // The ModRM byte's reg field is 0 (`/0`); its mod and r/m fields say
        // how many SIB and displacement bytes follow.
        [0x0f, 0x1f, modrm, tail @ ..] if (modrm >> 3) & 7 == 0 => {
            let (mode, rm) = (modrm >> 6, modrm & 7);
            let sib = mode != 3 && rm == 4;
            let displacement = match mode {
                0 if rm == 5 => 4,
                0 if sib && tail.first()? & 7 == 5 => 4,
                1 => 1,
                2 => 4,
                _ => 0,
            };
            3 + usize::from(sib) + displacement
        }
        _ => return None,
    };
    let length = prefixes + length;
    (length <= code.len()).then_some(length)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nops_compilers_emit() {
        for nop in [
            &[0x90][..],
            &[0x66, 0x90],
            &[0x0f, 0x1f, 0x00],
            &[0x0f, 0x1f, 0x40, 0x00],
            &[0x0f, 0x1f, 0x44, 0x00, 0x00],
            &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
            &[0x0f, 0x1f, 0x80, 0, 0, 0, 0],
            &[0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0],
            &[0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0],
            &[0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0],
            &[0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0],
        ] {
            assert_eq!(nop_length(nop), Some(nop.len()), "{nop:x?}");
        }
        for other in [
            &[][..],
            &[0xcc],
            &[0xf3, 0x90],             // pause
            &[0x0f, 0x1f, 0x48, 0x00], // reg field 1: not a nop
            &[0x0f, 0x1f, 0x84, 0, 0], // cut short
            &[0xb8, 0x90, 0, 0, 0],
            &[0x66; 20],
        ] {
            assert_eq!(nop_length(other), None, "{other:x?}");
        }
    }
}
