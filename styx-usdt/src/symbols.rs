//! Where a file's symbols are in the traced process, for `%rip`-relative
//! argument operands such as `8@counter+16(%rip)`: the assembler wrote the
//! operand relative to the probe's own code, so its address is the symbol's
//! link-time address plus the file's load bias in that process. (libbpf
//! rejects these operands.)
//!
//! The file is read as the notes are (`file.rs`): only if regular, and only
//! the headers and symbol tables, within a bound.

use crate::demangle::demangle;
use crate::file::{parse_file, Bounded};
use crate::target::ElfFile;
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Endianness, Object, ObjectKind, ObjectSymbol, SymbolKind};
use std::collections::HashMap;

/// The symbol addresses of one file, resolved on first use.
pub struct Symbols<'a> {
    file: &'a ElfFile,
    loaded: Option<Result<Resolved, SymbolError>>,
}

/// Why a symbol's address in the process is not known.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SymbolError {
    /// The file could not be read or parsed as ELF.
    #[error("reading {file}: {reason}")]
    Unreadable {
        /// The file, for messages.
        file: String,
        /// What went wrong.
        reason: String,
    },
    /// The file's first mapping matches none of its segments.
    #[error("{0}'s mapping matches no segment")]
    NoSegment(String),
    /// A position-independent file outside a running process.
    #[error("{0} is position-independent, so its symbols' addresses are only known in a running process (--pid)")]
    PositionIndependent(String),
    /// The file is not the one the process mapped (its build id differs).
    #[error("{0} changed since it was traced (its build id differs)")]
    Changed(String),
    /// No such symbol in the file.
    #[error("no symbol {name} in {file}")]
    Missing {
        /// The symbol.
        name: String,
        /// The file, for messages.
        file: String,
    },
}

struct Resolved {
    /// Runtime address minus link-time address.
    bias: u64,
    addresses: HashMap<String, u64>,
}

impl<'a> Symbols<'a> {
    /// The symbols of `file`, read when first asked for.
    pub fn of(file: &'a ElfFile) -> Symbols<'a> {
        Symbols { file, loaded: None }
    }

    /// The file they are of.
    pub fn file(&self) -> &'a ElfFile {
        self.file
    }

    /// The address of `name` in the traced process.
    pub fn address(&mut self, name: &str) -> Result<u64, SymbolError> {
        let file = self.file;
        let resolved = self
            .loaded
            .get_or_insert_with(|| resolve(file))
            .as_ref()
            .map_err(Clone::clone)?;
        let link = resolved
            .addresses
            .get(name)
            .ok_or_else(|| SymbolError::Missing {
                name: name.to_owned(),
                file: file.name.clone(),
            })?;
        Ok(link.wrapping_add(resolved.bias))
    }
}

fn resolve(file: &ElfFile) -> Result<Resolved, SymbolError> {
    let unreadable = |reason: String| SymbolError::Unreadable {
        file: file.name.clone(),
        reason,
    };
    parse_file(&file.read_at, |data| resolve_in(file, data))
        .map_err(|e| unreadable(e.to_string()))?
}

fn resolve_in(file: &ElfFile, data: Bounded<'_>) -> Result<Resolved, SymbolError> {
    let elf = parse(file, data)?;
    let bias = load_bias(file, &elf)?;
    let addresses = elf
        .symbols()
        .chain(elf.dynamic_symbols())
        .filter(|s| s.is_definition())
        .filter_map(|s| Some((s.name().ok()?.to_owned(), s.address())))
        .collect();
    Ok(Resolved { bias, addresses })
}

type Elf<'a> = ElfFile64<'a, Endianness, Bounded<'a>>;

fn parse<'a>(file: &ElfFile, data: Bounded<'a>) -> Result<Elf<'a>, SymbolError> {
    ElfFile64::parse(data).map_err(|e| SymbolError::Unreadable {
        file: file.name.clone(),
        reason: e.to_string(),
    })
}

/// Runtime address minus link-time address of `file` in the traced
/// process, from its first mapping.
fn load_bias(file: &ElfFile, elf: &Elf<'_>) -> Result<u64, SymbolError> {
    Ok(match (elf.kind(), file.mapped_at) {
        // A fixed-address executable is where it was linked.
        (ObjectKind::Executable, _) => 0,
        (_, Some((start, offset))) => {
            let endian = elf.endian();
            let link = elf
                .elf_program_headers()
                .iter()
                .filter(|ph| ph.p_type(endian) == object::elf::PT_LOAD)
                .find(|ph| {
                    let (from, size) = (ph.p_offset(endian), ph.p_filesz(endian));
                    offset >= from && offset - from < size.max(1)
                })
                // From the file: checked, a wrapped address would be wrong.
                .and_then(|ph| ph.p_vaddr(endian).checked_add(offset - ph.p_offset(endian)))
                .ok_or_else(|| SymbolError::NoSegment(file.name.clone()))?;
            start.wrapping_sub(link)
        }
        (_, None) => return Err(SymbolError::PositionIndependent(file.name.clone())),
    })
}

/// A function of a file, where it is in the traced process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionAt {
    /// Its first byte's address in the process.
    pub start: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Demangled, without Rust's hash suffix.
    pub name: String,
}

/// The functions `file` defines, at their addresses in the traced process
/// (its mapping gives the load bias): to name a code address such as an
/// allocation's caller. Its GNU build id must be `build_id` when one is
/// given: a file rebuilt since would name the wrong functions.
pub fn functions_at(
    file: &ElfFile,
    build_id: Option<&[u8]>,
) -> Result<Vec<FunctionAt>, SymbolError> {
    let read = |data: Bounded<'_>| {
        let elf = parse(file, data)?;
        let found = elf.build_id().ok().flatten();
        if build_id.is_some_and(|want| found != Some(want)) {
            return Err(SymbolError::Changed(file.name.clone()));
        }
        let bias = load_bias(file, &elf)?;
        let mut seen = std::collections::HashSet::new();
        Ok((elf.symbols().chain(elf.dynamic_symbols()))
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.size() > 0)
            .filter(|s| seen.insert(s.address()))
            .filter_map(|s| {
                Some(FunctionAt {
                    start: s.address().wrapping_add(bias),
                    size: s.size(),
                    name: demangle(s.name().ok()?),
                })
            })
            .collect())
    };
    parse_file(&file.read_at, read).map_err(|e| SymbolError::Unreadable {
        file: file.name.clone(),
        reason: e.to_string(),
    })?
}

/// The GNU build id of `file` (None inside: it has none) if it reads as
/// the ELF files whose code [`functions_at`] names; None for a file that
/// does not: a process also maps data files (`/etc/ld.so.cache` while the
/// dynamic loader looks a library up, locale archives), which name nothing.
pub fn elf_build_id(file: &ElfFile) -> Option<Option<Vec<u8>>> {
    let read = |data: Bounded<'_>| {
        let elf = parse(file, data).ok()?;
        Some(elf.build_id().ok().flatten().map(<[u8]>::to_vec))
    };
    parse_file(&file.read_at, read).ok()?
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// This test's own function is found where it runs, by name; the
    /// file with another build id names nothing.
    #[test]
    fn functions_are_where_the_process_runs_them() {
        let target = crate::target::Target::from_pid(std::process::id()).unwrap();
        let exe = &target.files[0];
        let here = functions_are_where_the_process_runs_them as fn() as usize as u64;
        let functions = functions_at(exe, elf_build_id(exe).flatten().as_deref()).unwrap();
        let holding: Vec<&str> = (functions.iter())
            .filter(|f| f.start <= here && here < f.start + f.size)
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(
            holding,
            ["styx_usdt::symbols::tests::functions_are_where_the_process_runs_them"]
        );
        assert_eq!(
            functions_at(exe, Some(b"another build")),
            Err(SymbolError::Changed(exe.name.clone()))
        );
    }

    /// The process's executable is ELF; a data file it could map is not.
    #[test]
    fn only_elf_files_read_as_elf() {
        let target = crate::target::Target::from_pid(std::process::id()).unwrap();
        let is_elf = |file: &ElfFile| elf_build_id(file).is_some();
        assert!(is_elf(&target.files[0]));
        let data = std::env::temp_dir().join(format!("styx-not-elf-{}", std::process::id()));
        std::fs::write(&data, b"glibc-ld.so.cache1.1\0 not an ELF file").unwrap();
        let not_elf = is_elf(&ElfFile::at(&data));
        std::fs::remove_file(&data).unwrap();
        assert!(!not_elf);
        assert!(!is_elf(&ElfFile::at(Path::new("/dev/zero"))));
    }

    #[test]
    fn dev_zero_is_refused_at_once() {
        let file = ElfFile::at(Path::new("/dev/zero"));
        let err = Symbols::of(&file).address("counter").unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
