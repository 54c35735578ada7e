//! Where a file's symbols are in the traced process, for `%rip`-relative
//! argument operands such as `8@counter+16(%rip)`: the assembler wrote the
//! operand relative to the probe's own code, so its address is the symbol's
//! link-time address plus the file's load bias in that process. (libbpf
//! rejects these operands.)

use crate::target::ElfFile;
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Endianness, Object, ObjectKind, ObjectSymbol};
use std::collections::HashMap;

/// The symbol addresses of one file, resolved on first use.
pub struct Symbols<'a> {
    file: &'a ElfFile,
    loaded: Option<Result<Resolved, String>>,
}

struct Resolved {
    /// Runtime address minus link-time address.
    bias: u64,
    addresses: HashMap<String, u64>,
}

impl<'a> Symbols<'a> {
    pub fn of(file: &'a ElfFile) -> Symbols<'a> {
        Symbols { file, loaded: None }
    }

    /// The address of `name` in the traced process.
    pub fn address(&mut self, name: &str) -> Result<u64, String> {
        let file = self.file;
        let resolved = self
            .loaded
            .get_or_insert_with(|| resolve(file))
            .as_ref()
            .map_err(Clone::clone)?;
        let link = resolved
            .addresses
            .get(name)
            .ok_or_else(|| format!("no symbol {name} in {}", file.name))?;
        Ok(link.wrapping_add(resolved.bias))
    }
}

fn resolve(file: &ElfFile) -> Result<Resolved, String> {
    let data = std::fs::read(&file.read_at).map_err(|e| format!("reading {}: {e}", file.name))?;
    let elf = ElfFile64::<Endianness>::parse(&*data).map_err(|e| e.to_string())?;
    let bias = match (elf.kind(), file.mapped_at) {
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
                .map(|ph| ph.p_vaddr(endian) + (offset - ph.p_offset(endian)))
                .ok_or_else(|| format!("{}'s mapping matches no segment", file.name))?;
            start.wrapping_sub(link)
        }
        (_, None) => {
            return Err(format!(
                "{} is position-independent, so its symbols' addresses are only known in a running process (--pid)",
                file.name
            ))
        }
    };
    let addresses = elf
        .symbols()
        .chain(elf.dynamic_symbols())
        .filter(|s| s.is_definition())
        .filter_map(|s| Some((s.name().ok()?.to_owned(), s.address())))
        .collect();
    Ok(Resolved { bias, addresses })
}
