//! Functions of an ELF file chosen by name (`--functions REGEX`): the
//! symbol table's functions, names demangled (Rust v0 and legacy, C++),
//! each with the file offsets of its entry and of every `ret` in its body.
//!
//! Why `ret` sites rather than uretprobes: a uretprobe replaces the return
//! address on the stack with the kernel's trampoline, and an unwinder that
//! walks through that frame — a C++ exception, a Rust panic on its way to
//! `catch_unwind` — finds no unwind information for the trampoline and
//! aborts the process. Measured on this project's Linux 6.18 with bpftrace
//! 0.17: a uretprobe on a function a C++ exception passes through ends the
//! program with `terminate called after throwing…`, on a Rust one with
//! `failed to initiate panic, error 5`; uprobes on the same function's
//! `ret` instructions leave the stack alone and the program runs to its
//! end. A `jmp` from the body to another function is a tail call: the
//! callee returns for both (counted, so `list` can say so).
//!
//! A function the compiler inlined everywhere has no symbol and cannot be
//! traced; a symbol without a size (assembly labels) has no body to read.

use crate::file::parse_file;
use crate::note::{in_code, loadable_segments, to_file_offset};
use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind};
use object::read::elf::ElfFile64;
use object::{Endianness, Object, ObjectSymbol, ReadRef, SymbolKind};
use regex::Regex;
use std::collections::HashSet;
use std::path::Path;
use thiserror::Error;

/// One function that can be traced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Demangled, without Rust's hash suffix.
    pub name: String,
    /// As the symbol table has it.
    pub symbol: String,
    /// Its address in the file's address space.
    pub address: u64,
    /// Its body's size in bytes.
    pub size: u64,
    /// File offset of its first instruction: where an entry uprobe goes.
    pub entry: u64,
    /// File offsets of its `ret` instructions: where exit uprobes go.
    pub returns: Vec<u64>,
    /// Direct jumps out of the body (tail calls).
    pub tail_calls: usize,
}

/// Which names to take: any `include` matches, no `exclude` matches.
#[derive(Clone, Debug)]
pub struct Matcher {
    include: Vec<Regex>,
    exclude: Vec<Regex>,
}

/// A pattern that is not a regular expression.
#[derive(Debug, Error)]
#[error("{pattern:?} is not a regular expression: {reason}")]
pub struct PatternError {
    /// The pattern as given.
    pub pattern: String,
    /// What the regex parser said.
    pub reason: String,
}

impl Matcher {
    /// `include` and `exclude` patterns (unanchored, as grep reads them).
    pub fn new(include: &[String], exclude: &[String]) -> Result<Matcher, PatternError> {
        let compile = |patterns: &[String]| {
            patterns
                .iter()
                .map(|p| {
                    Regex::new(p).map_err(|e| PatternError {
                        pattern: p.clone(),
                        // The parser's message ends with the reason; the
                        // lines before it draw the pattern.
                        reason: e
                            .to_string()
                            .lines()
                            .last()
                            .unwrap_or("")
                            .trim()
                            .trim_start_matches("error: ")
                            .to_string(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Matcher {
            include: compile(include)?,
            exclude: compile(exclude)?,
        })
    }

    /// Whether `name` is taken.
    pub fn matches(&self, name: &str) -> bool {
        self.include.iter().any(|r| r.is_match(name))
            && !self.exclude.iter().any(|r| r.is_match(name))
    }
}

/// The matching functions of one file.
#[derive(Debug, Default)]
pub struct FunctionTable {
    /// Functions with a body, by address, each once.
    pub functions: Vec<Function>,
    /// Matching symbols without a body to trace (no size, or outside code).
    pub without_body: Vec<String>,
    /// Other names of functions already listed (aliases at one address).
    pub aliases: usize,
}

/// Why a file's functions could not be read.
#[derive(Debug, Error)]
pub enum FunctionsError {
    /// The file could not be read.
    #[error("cannot read {path}: {cause}")]
    Read {
        /// The file.
        path: String,
        /// What the read said.
        cause: std::io::Error,
    },
    /// Not a 64-bit ELF file.
    #[error("{path} is not a 64-bit ELF file: {reason}")]
    NotElf {
        /// The file.
        path: String,
        /// What the ELF parser said.
        reason: String,
    },
}

/// The functions of the ELF file at `path` whose demangled names `matcher`
/// takes; only the symbol tables and the matching bodies are read.
pub fn read_functions(path: &Path, matcher: &Matcher) -> Result<FunctionTable, FunctionsError> {
    let name = || path.display().to_string();
    parse_file(path, |data| parse_functions(data, matcher))
        .map_err(|cause| FunctionsError::Read {
            path: name(),
            cause,
        })?
        .map_err(|reason| FunctionsError::NotElf {
            path: name(),
            reason,
        })
}

/// [`read_functions`] on an ELF image in memory (tests, fuzzing).
pub fn parse_functions<'data, R: ReadRef<'data>>(
    data: R,
    matcher: &Matcher,
) -> Result<FunctionTable, String> {
    let elf = ElfFile64::<Endianness, R>::parse(data).map_err(|e| e.to_string())?;
    let segments = loadable_segments(&elf);
    let mut table = FunctionTable::default();
    let mut seen = HashSet::new();
    // .symtab names every function; a stripped file has only .dynsym.
    let symbols = if elf.symbols().next().is_some() {
        elf.symbols()
    } else {
        elf.dynamic_symbols()
    };
    for symbol in symbols {
        if symbol.kind() != SymbolKind::Text || !symbol.is_definition() {
            continue;
        }
        let Ok(raw) = symbol.name() else { continue };
        let name = demangle(raw);
        if !matcher.matches(&name) {
            continue;
        }
        let (address, size) = (symbol.address(), symbol.size());
        let entry = to_file_offset(&segments, address).filter(|_| in_code(&segments, address));
        let body = entry.and_then(|entry| data.read_bytes_at(entry, size).ok());
        let (Some(entry), Some(body), true) = (entry, body, size > 0) else {
            table.without_body.push(name);
            continue;
        };
        if !seen.insert(address) {
            table.aliases += 1;
            continue;
        }
        let (returns, tail_calls) = exits(body, address, entry);
        table.functions.push(Function {
            name,
            symbol: raw.to_string(),
            address,
            size,
            entry,
            returns,
            tail_calls,
        });
    }
    table.functions.sort_by_key(|f| f.address);
    Ok(table)
}

/// A symbol's name for people: Rust (v0 and legacy, hash dropped), C++, or
/// as it is.
pub fn demangle(raw: &str) -> String {
    if let Ok(rust) = rustc_demangle::try_demangle(raw) {
        return format!("{rust:#}");
    }
    if raw.starts_with("_Z") {
        if let Ok(cpp) = cpp_demangle::Symbol::new(raw) {
            if let Ok(text) = cpp.demangle() {
                return text;
            }
        }
    }
    raw.to_string()
}

/// The file offsets of the body's `ret`s, and its direct jumps out.
fn exits(body: &[u8], address: u64, entry: u64) -> (Vec<u64>, usize) {
    let end = address.saturating_add(body.len() as u64);
    let mut decoder = Decoder::with_ip(64, body, address, DecoderOptions::NONE);
    let (mut returns, mut tail_calls) = (Vec::new(), 0);
    for insn in &mut decoder {
        match insn.mnemonic() {
            Mnemonic::Ret => returns.push(entry + (insn.ip() - address)),
            Mnemonic::Jmp if insn.op0_kind() == OpKind::NearBranch64 => {
                let target = insn.near_branch_target();
                if target < address || target >= end {
                    tail_calls += 1;
                }
            }
            _ => {}
        }
    }
    (returns, tail_calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_demangle_for_each_language() {
        assert_eq!(
            demangle("_ZN9styx_demo3cpu3Cpu4step17h0123456789abcdefE"),
            "styx_demo::cpu::Cpu::step"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        assert_eq!(demangle("_Z7throweri"), "thrower(int)");
        assert_eq!(demangle("main"), "main");
    }

    #[test]
    fn exits_are_rets_and_jumps_out() {
        // push rbp; je +1; ret; pop rbp; ret; jmp far away
        let body = [
            0x55, 0x74, 0x01, 0xc3, 0x5d, 0xc3, 0xe9, 0x00, 0x10, 0x00, 0x00,
        ];
        let (returns, tail_calls) = exits(&body, 0x1000, 0x400);
        assert_eq!(returns, vec![0x403, 0x405]);
        assert_eq!(tail_calls, 1);
    }

    #[test]
    fn this_test_binary_lists_its_own_functions() {
        let exe = std::env::current_exe().unwrap();
        let matcher =
            Matcher::new(&["functions::tests::".into()], &["lists_its_own".into()]).unwrap();
        let table = read_functions(&exe, &matcher).unwrap();
        let names: Vec<&str> = table.functions.iter().map(|f| f.name.as_str()).collect();
        assert!(
            names
                .iter()
                .any(|n| n.ends_with("names_demangle_for_each_language")),
            "{names:?}"
        );
        assert!(
            !names.iter().any(|n| n.contains("lists_its_own")),
            "{names:?}"
        );
        for f in &table.functions {
            assert!(!f.returns.is_empty() || f.tail_calls > 0, "{f:?}");
        }
        assert!(Matcher::new(&["(".into()], &[]).is_err());
    }
}
