//! Reads SystemTap SDT (USDT) probe notes from an ELF file: which probes it
//! has, where each site is in the file, and where its semaphore is.
//!
//! A note (type 3, owner "stapsdt") holds three addresses — probe pc, the
//! link-time address of `.stapsdt.base`, the semaphore — followed by the
//! provider, probe name and argument spec as NUL-terminated strings.

use object::elf::{PF_W, PF_X, PT_LOAD};
use object::read::elf::{ElfFile64, ProgramHeader, SectionHeader};
use object::{Endianness, Object, ObjectSection};
use std::path::Path;
use thiserror::Error;

/// One probe site: one place in the code where a probe can fire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSite {
    /// The provider, e.g. `styx`.
    pub provider: String,
    /// The probe's name, e.g. `mem_read`.
    pub name: String,
    /// Virtual address of the probe instruction (after `.stapsdt.base` adjustment).
    pub address: u64,
    /// File offset of the probe instruction: what a uprobe is attached at.
    pub file_offset: u64,
    /// Virtual address of the semaphore, 0 if the probe has none.
    pub semaphore: u64,
    /// File offset of the semaphore (the kernel's `ref_ctr_offset`), 0 if none.
    pub semaphore_offset: u64,
    /// The argument spec, e.g. `8@%rdi 8@%rsi`.
    pub args: String,
}

/// What an ELF file's notes say, including the notes that could not be read.
#[derive(Debug, Default)]
pub struct ProbeTable {
    /// Every site whose note could be read, in note order.
    pub sites: Vec<ProbeSite>,
    /// One line per note that was skipped, saying why.
    pub problems: Vec<String>,
    /// Notes whose probe address is not in executable code: left behind by
    /// code the linker discarded (common with generics and inlining), they
    /// point at whatever is there now. A uprobe there would corrupt it.
    pub outside_code: usize,
    /// The file offset of a semaphore whose page in the file is also mapped
    /// by another writable segment (lld's RELRO layout). For a process
    /// started after attaching, the kernel raises it in the wrong mapping.
    pub shared_semaphore_page: Option<u64>,
}

/// Why a file's probe notes could not be read at all.
#[derive(Debug, Error)]
pub enum NotesError {
    /// The file could not be read.
    #[error("cannot read {path}: {cause}")]
    Read {
        /// The file.
        path: String,
        /// What the read said.
        cause: std::io::Error,
    },
    /// The file is not a 64-bit ELF file.
    #[error("{path} is not a 64-bit ELF file: {reason}")]
    NotElf {
        /// The file.
        path: String,
        /// What the ELF parser said.
        reason: String,
    },
    /// The note section cannot be walked.
    #[error("{path}: malformed .note.stapsdt section: {reason}")]
    BadSection {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
}

const NOTE_OWNER: &[u8] = b"stapsdt";
/// Note type of SystemTap SDT v3 probes.
const NT_STAPSDT: object::elf::NoteType = object::elf::NoteType(3);

/// Reads every USDT probe site from the ELF file at `path`.
pub fn read_probe_table(path: &Path) -> Result<ProbeTable, NotesError> {
    let data = std::fs::read(path).map_err(|cause| NotesError::Read {
        path: path.display().to_string(),
        cause,
    })?;
    parse_probe_table(&data).map_err(|e| e.with_path(path))
}

/// Errors without a path, for parsing bytes; `read_probe_table` adds it.
#[derive(Debug, Error)]
pub enum ParseError {
    /// Not a 64-bit ELF file, and why.
    #[error("not a 64-bit ELF file: {0}")]
    NotElf(String),
    /// The note section cannot be walked, and why.
    #[error("malformed .note.stapsdt section: {0}")]
    BadSection(String),
}

impl ParseError {
    fn with_path(self, path: &Path) -> NotesError {
        let path = path.display().to_string();
        match self {
            ParseError::NotElf(reason) => NotesError::NotElf { path, reason },
            ParseError::BadSection(reason) => NotesError::BadSection { path, reason },
        }
    }
}

/// Reads every USDT probe site from an ELF image in memory.
pub fn parse_probe_table(data: &[u8]) -> Result<ProbeTable, ParseError> {
    let elf =
        ElfFile64::<Endianness>::parse(data).map_err(|e| ParseError::NotElf(e.to_string()))?;
    let endian = elf.endian();
    let mut table = ProbeTable::default();

    // Prelink may have moved the code; `.stapsdt.base`'s real address vs the
    // one recorded in each note tells by how much.
    let base = elf.section_by_name(".stapsdt.base").map(|s| s.address());
    let segments = loadable_segments(&elf);

    for section in elf.elf_section_table().iter() {
        if section.sh_type(endian) != object::elf::SHT_NOTE {
            continue;
        }
        let Some(notes) = section
            .notes(endian, data)
            .map_err(|e| ParseError::BadSection(e.to_string()))?
        else {
            continue;
        };
        let mut notes = notes;
        loop {
            let note = match notes.next() {
                Ok(Some(note)) => note,
                Ok(None) => break,
                Err(e) => {
                    // The rest of the section cannot be walked reliably.
                    table.problems.push(format!("note section cut short: {e}"));
                    break;
                }
            };
            if note.name() != NOTE_OWNER || note.n_type(endian) != NT_STAPSDT {
                continue;
            }
            match parse_note(note.desc(), endian, base, &segments) {
                Ok(site) if !in_code(&segments, site.address) => table.outside_code += 1,
                Ok(site) => {
                    if site.semaphore != 0
                        && table.shared_semaphore_page.is_none()
                        && on_shared_page(&segments, site.semaphore_offset)
                    {
                        table.shared_semaphore_page = Some(site.semaphore_offset);
                    }
                    table.sites.push(site);
                }
                Err(reason) => table.problems.push(reason),
            }
        }
    }
    Ok(table)
}

/// A PT_LOAD segment.
#[derive(Clone, Copy, Debug)]
struct Segment {
    vaddr: u64,
    file_size: u64,
    offset: u64,
    executable: bool,
    writable: bool,
}

const PAGE: u64 = 4096;

impl Segment {
    fn contains(&self, address: u64) -> bool {
        address >= self.vaddr && address - self.vaddr < self.file_size
    }

    /// Whether the file pages this segment maps include `offset`.
    fn maps_file_page_of(&self, offset: u64) -> bool {
        let start = self.offset / PAGE * PAGE;
        let end = (self.offset + self.file_size).div_ceil(PAGE) * PAGE;
        (start..end).contains(&offset)
    }
}

fn loadable_segments(elf: &ElfFile64<Endianness>) -> Vec<Segment> {
    let endian = elf.endian();
    elf.elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(endian) == PT_LOAD)
        .map(|ph| Segment {
            vaddr: ph.p_vaddr(endian),
            file_size: ph.p_filesz(endian),
            offset: ph.p_offset(endian),
            executable: ph.p_flags(endian).0 & PF_X.0 != 0,
            writable: ph.p_flags(endian).0 & PF_W.0 != 0,
        })
        .collect()
}

fn to_file_offset(segments: &[Segment], address: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| s.contains(address))
        .map(|s| address - s.vaddr + s.offset)
}

fn in_code(segments: &[Segment], address: u64) -> bool {
    segments.iter().any(|s| s.executable && s.contains(address))
}

/// Whether more than one writable segment maps the file page holding the
/// semaphore at `offset`: the kernel raises it through the first writable
/// mapping of that page it finds.
fn on_shared_page(segments: &[Segment], offset: u64) -> bool {
    segments
        .iter()
        .filter(|s| s.writable && s.maps_file_page_of(offset))
        .count()
        > 1
}

fn parse_note(
    desc: &[u8],
    endian: Endianness,
    base: Option<u64>,
    segments: &[Segment],
) -> Result<ProbeSite, String> {
    if desc.len() < 24 {
        return Err(format!(
            "stapsdt note of {} bytes is too short for its three addresses",
            desc.len()
        ));
    }
    let word = |i: usize| {
        let bytes: [u8; 8] = desc[i * 8..i * 8 + 8].try_into().expect("8 bytes");
        match endian {
            Endianness::Little => u64::from_le_bytes(bytes),
            Endianness::Big => u64::from_be_bytes(bytes),
        }
    };
    let (mut address, note_base, semaphore) = (word(0), word(1), word(2));
    let mut strings = desc[24..].split(|b| *b == 0);
    let mut next_string = |what: &str| -> Result<String, String> {
        let s = strings
            .next()
            .ok_or_else(|| format!("stapsdt note at {address:#x} has no {what}"))?;
        std::str::from_utf8(s)
            .map(str::to_owned)
            .map_err(|_| format!("stapsdt note at {address:#x}: {what} is not UTF-8"))
    };
    let provider = next_string("provider")?;
    let name = next_string("probe name")?;
    let args = next_string("argument spec")?;
    if provider.is_empty() || name.is_empty() {
        return Err(format!(
            "stapsdt note at {address:#x} has an empty provider or probe name"
        ));
    }
    if !desc[24..].ends_with(&[0]) || desc[24..].iter().filter(|b| **b == 0).count() < 3 {
        return Err(format!(
            "stapsdt note {provider}:{name} at {address:#x} is not NUL-terminated"
        ));
    }
    if let (Some(actual), true) = (base, note_base != 0) {
        address = address.wrapping_add(actual.wrapping_sub(note_base));
    }
    let file_offset = to_file_offset(segments, address).ok_or_else(|| {
        format!("{provider}:{name}: probe address {address:#x} is in no loadable segment")
    })?;
    // The kernel counts the semaphore through the file mapping, so it must lie
    // in the file-backed part of a segment, as `.probes` does.
    let semaphore_offset = match semaphore {
        0 => 0,
        sema => to_file_offset(segments, sema).ok_or_else(|| {
            format!("{provider}:{name}: semaphore address {sema:#x} is in no loadable segment")
        })?,
    };
    Ok(ProbeSite {
        provider,
        name,
        address,
        file_offset,
        semaphore,
        semaphore_offset,
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_elf_is_a_clear_error() {
        let err = parse_probe_table(b"#!/bin/sh\necho hi\n").unwrap_err();
        assert!(matches!(err, ParseError::NotElf(_)));
    }

    #[test]
    fn short_note_is_reported_not_parsed() {
        let reason = parse_note(&[0u8; 10], Endianness::Little, None, &[]).unwrap_err();
        assert!(reason.contains("too short"), "{reason}");
    }

    #[test]
    fn note_fields_and_offsets() {
        let mut desc = Vec::new();
        for word in [0x1010u64, 0x2000, 0x3004] {
            desc.extend_from_slice(&word.to_le_bytes());
        }
        desc.extend_from_slice(b"styx\0mem_read\08@%rdi 8@%rsi\0");
        // text at vaddr 0x1000 / offset 0x1000, data at vaddr 0x3000 / offset 0x2000
        let segments = [
            segment(0x1000, 0x1000, 0x1000, "r-x"),
            segment(0x3000, 0x100, 0x2000, "rw-"),
        ];
        // .stapsdt.base moved by 0x10 since the note was written
        let site = parse_note(&desc, Endianness::Little, Some(0x2010), &segments).unwrap();
        assert_eq!(site.provider, "styx");
        assert_eq!(site.name, "mem_read");
        assert_eq!(site.args, "8@%rdi 8@%rsi");
        assert_eq!(site.address, 0x1020);
        assert_eq!(site.file_offset, 0x1020);
        assert_eq!(site.semaphore, 0x3004);
        assert_eq!(site.semaphore_offset, 0x2004);
    }

    #[test]
    fn missing_strings_are_reported() {
        let mut desc = vec![0u8; 24];
        desc.extend_from_slice(b"styx");
        let text = [segment(0, 0x1000, 0, "r-x")];
        let reason = parse_note(&desc, Endianness::Little, None, &text).unwrap_err();
        assert!(reason.contains("no probe name"), "{reason}");
    }

    fn segment(vaddr: u64, file_size: u64, offset: u64, flags: &str) -> Segment {
        Segment {
            vaddr,
            file_size,
            offset,
            executable: flags.contains('x'),
            writable: flags.contains('w'),
        }
    }

    #[test]
    fn code_is_executable_segments_only() {
        // lld: read-only data from 0, code from 0x1000.
        let segments = [
            segment(0, 0x800, 0, "r--"),
            segment(0x1800, 0x1000, 0x800, "r-x"),
        ];
        // A note of discarded code resolves to a small offset from 0: the ELF header.
        assert!(!in_code(&segments, 0x56));
        assert!(in_code(&segments, 0x1856));
        assert!(!in_code(&segments, 0x2800));
    }

    #[test]
    fn a_semaphore_on_the_relro_segments_last_file_page_is_flagged() {
        // lld: RELRO ends at file 0x5388, data starts in the same file page.
        let segments = [
            segment(0xdfcc0, 0x56c8, 0xddcc0, "rw-"),
            segment(0xe6388, 0xa18, 0xe3388, "rw-"),
        ];
        assert!(on_shared_page(&segments, 0xe3d80));
        // Past that page (styx-probe page-aligns `.probes`), only data maps it.
        assert!(!on_shared_page(&segments, 0xe4000));
    }
}
