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
//! callee returns for both. Its file offset is kept: with `ret` probes the
//! call ends there (a uprobe on the `jmp`), since the callee's `ret` may
//! not be traced.
//!
//! Every entry, `ret` and `jmp` probed must start an instruction of every
//! function symbol covering it (`code.rs`): a symbol `g = f+1` inside
//! `f`'s `movl $0x90c3c3c3,%eax` decodes to three `ret`s that are `f`'s
//! immediate, and is refused with why.
//!
//! A function the compiler inlined everywhere has no symbol and cannot be
//! traced; a symbol without a size (assembly labels) has no body to read.

use crate::code::{function_symbols, place, symbol_at, FunctionSymbol};
use crate::demangle::demangle;
use crate::file::parse_file;
use crate::segments::{in_code, loadable_segments, to_file_offset};
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
    /// File offsets of its direct `jmp`s to other functions (tail calls;
    /// not jumps into its own `.cold` part).
    pub tail_calls: Vec<u64>,
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
    /// Matching functions not traced, with why: an entry, `ret` or `jmp`
    /// that does not start an instruction of every function symbol around
    /// it, where a uprobe would corrupt the code.
    pub refused: Vec<(String, String)>,
    /// The file has no `.symtab` (stripped): names were looked for in
    /// `.dynsym` (the exported functions), which has this many functions.
    pub stripped: Option<usize>,
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
        let functions = elf
            .dynamic_symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition())
            .count();
        table.stripped = Some(functions);
        elf.dynamic_symbols()
    };
    let code = function_symbols(&elf, &segments);
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
        // A body past the top of the address space is a crafted one.
        let fits = size > 0 && address.checked_add(size).is_some();
        let (Some(entry), Some(body), true) = (entry, body, fits) else {
            table.without_body.push(name);
            continue;
        };
        if !seen.insert(address) {
            table.aliases += 1;
            continue;
        }
        let (returns, tail_calls) = exits(body, address, entry, raw, &code);
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
    refuse_misplaced(data, &code, &mut table);
    table.functions.sort_by_key(|f| f.address);
    Ok(table)
}

/// Leaves out the functions with a site to probe that does not start an
/// instruction of every function symbol covering it, saying why.
fn refuse_misplaced<'data, R: ReadRef<'data>>(
    data: R,
    code: &[FunctionSymbol],
    table: &mut FunctionTable,
) {
    // Each function's sites, as addresses: (function, what, address).
    let mut sites = Vec::new();
    for (i, f) in table.functions.iter().enumerate() {
        let at = |offset: u64| f.address + (offset - f.entry);
        sites.push((i, "entry", f.address));
        sites.extend(f.returns.iter().map(|&o| (i, "return", at(o))));
        sites.extend(f.tail_calls.iter().map(|&o| (i, "tail-call jump", at(o))));
    }
    let addresses: Vec<u64> = sites.iter().map(|s| s.2).collect();
    let mut why: Vec<Option<String>> = vec![None; table.functions.len()];
    for ((function, what, address), placement) in
        sites.into_iter().zip(place(data, code, &addresses))
    {
        if let (Some(refusal), None) = (placement.refusal(), &why[function]) {
            why[function] = Some(format!(
                "its {what} at {address:#x} {refusal} (a uprobe there would corrupt the code)"
            ));
        }
    }
    let mut why = why.into_iter();
    let refused = &mut table.refused;
    table
        .functions
        .retain(|f| match why.next().expect("one per function") {
            Some(reason) => {
                refused.push((f.name.clone(), reason));
                false
            }
            None => true,
        });
}

/// The file offsets of the body's `ret`s, and of its direct `jmp`s to
/// other functions (the function's own `.cold` part, `RAW.cold` as GCC
/// names it, is the function still). `raw` is its symbol name; `code` the
/// file's function symbols.
fn exits(
    body: &[u8],
    address: u64,
    entry: u64,
    raw: &str,
    code: &[FunctionSymbol],
) -> (Vec<u64>, Vec<u64>) {
    let end = address.saturating_add(body.len() as u64);
    let mut decoder = Decoder::with_ip(64, body, address, DecoderOptions::NONE);
    let (mut returns, mut tail_calls) = (Vec::new(), Vec::new());
    let own_part = |target: u64| {
        symbol_at(code, target).is_some_and(|name| {
            name.strip_prefix(raw)
                .is_some_and(|rest| rest.starts_with(".cold"))
        })
    };
    for insn in &mut decoder {
        let at = entry + (insn.ip() - address);
        match insn.mnemonic() {
            Mnemonic::Ret => returns.push(at),
            Mnemonic::Jmp if insn.op0_kind() == OpKind::NearBranch64 => {
                let target = insn.near_branch_target();
                if (target < address || target >= end) && !own_part(target) {
                    tail_calls.push(at);
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
    fn exits_are_rets_and_jumps_out() {
        // push rbp; je +1; ret; pop rbp; ret; jmp far away
        let body = [
            0x55, 0x74, 0x01, 0xc3, 0x5d, 0xc3, 0xe9, 0x00, 0x10, 0x00, 0x00,
        ];
        let (returns, tail_calls) = exits(&body, 0x1000, 0x400, "f", &[]);
        assert_eq!(returns, vec![0x403, 0x405]);
        assert_eq!(tail_calls, vec![0x406]);
        // A jump to f's own cold part (GCC's `f.cold`) stays in f; one to
        // another function's is a tail call.
        let body = [0xe9, 0xfb, 0x0f, 0x00, 0x00, 0xe9, 0xf6, 0x1f, 0x00, 0x00];
        let code = [
            FunctionSymbol::at("f.cold", 0x2000, 0x10),
            FunctionSymbol::at("g.cold", 0x3000, 0x10),
        ];
        let (_, tail_calls) = exits(&body, 0x1000, 0x400, "f", &code);
        assert_eq!(tail_calls, vec![0x405]);
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
                .any(|n| n.ends_with("exits_are_rets_and_jumps_out")),
            "{names:?}"
        );
        assert!(
            !names.iter().any(|n| n.contains("lists_its_own")),
            "{names:?}"
        );
        for f in &table.functions {
            assert!(!f.returns.is_empty() || !f.tail_calls.is_empty(), "{f:?}");
        }
        assert!(Matcher::new(&["(".into()], &[]).is_err());
    }
}
