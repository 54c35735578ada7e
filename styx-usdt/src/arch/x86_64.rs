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
