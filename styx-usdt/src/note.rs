//! Reads SystemTap SDT (USDT) probe notes from an ELF file: which probes it
//! has, where each site is in the file, and where its semaphore is.
//!
//! A note (type 3, owner "stapsdt") holds three addresses — probe pc, the
//! link-time address of `.stapsdt.base`, the semaphore — followed by the
//! provider, probe name and argument spec as NUL-terminated strings.
//!
//! Files come from whoever started the traced process, so nothing in them
//! is trusted: address arithmetic is checked (a note that cannot be mapped
//! is skipped, never mis-mapped), duplicate notes are dropped, a site must
//! be a `nop` that starts an instruction of every function symbol around
//! it (anything else would be corrupted by a uprobe; see `code.rs`), and a
//! file is only opened if regular and read only as far as needed (see
//! `file.rs`: never whole, at most 512 MiB).

use crate::arch::x86_64::{nop_length, MAX_INSTRUCTION};
use crate::code::{function_symbols, place, Placement};
use crate::file::parse_file;
use crate::segments::{in_code, loadable_segments, to_file_offset, Segment};
use object::read::elf::{ElfFile64, SectionHeader};
use object::{Endianness, Object, ObjectSection, ReadRef};
use std::collections::HashMap;
use std::path::Path;
use styx_common::batch::{BATCH_PROVIDER, FLUSH_PROBE, LAYOUT_VERSION_OFFSET};
use styx_common::guest::{GUEST_NOTE_OWNER, NT_STYX_GUEST};
use styx_common::schema::NT_STYX_EVENT;
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
    /// Whether a function symbol covers the site, so that decoding showed
    /// it starts an instruction (see `code.rs`); false: none covers it (a
    /// stripped file), and only its `nop` was checked. Sites inside an
    /// instruction are never listed.
    pub start_checked: bool,
}

impl ProbeSite {
    /// Whether this is styx-probe's batch flush site (`styx_batch:flush`).
    pub fn is_batch_flush(&self) -> bool {
        self.provider == BATCH_PROVIDER && self.name == FLUSH_PROBE
    }
}

/// What an ELF file's notes say, including the notes that could not be read.
#[derive(Debug, Default)]
pub struct ProbeTable {
    /// Every site whose note could be read, in note order.
    pub sites: Vec<ProbeSite>,
    /// One line per note that was skipped, saying why (naming its probe
    /// where the note could be read that far).
    pub problems: Vec<String>,
    /// Notes whose probe address is not in executable code: left behind by
    /// code the linker discarded (common with generics and inlining), they
    /// point at whatever is there now. A uprobe there would corrupt it.
    pub outside_code: usize,
    /// Notes identical to an earlier one at the same address (same
    /// provider, probe, semaphore and arguments), left out: attached twice,
    /// a site would report every event twice.
    pub duplicates: usize,
    /// The file offset of a semaphore whose page in the file is also mapped
    /// by another writable segment (lld's RELRO layout). For a process
    /// started after attaching, the kernel raises it in the wrong mapping.
    pub shared_semaphore_page: Option<u64>,
    /// The descriptors of the file's guest description notes
    /// (`styx_probe::describe!`, layout in `styx_common::guest`), at most
    /// [`MAX_GUEST_NOTES`] of at most [`MAX_GUEST_NOTE_BYTES`] each; decoded
    /// by styx-events' `guest`.
    pub guest_notes: Vec<Vec<u8>>,
    /// The descriptors of the file's declared event types' notes
    /// (`styx_probe::event!`, layout in `styx_common::schema`), at most
    /// [`MAX_EVENT_NOTES`] of at most [`MAX_EVENT_NOTE_BYTES`] each; decoded
    /// by styx-events' `declared`.
    pub event_notes: Vec<Vec<u8>>,
    /// The batch layout version the file's flush site's semaphore block
    /// starts with (`styx_common::batch::FlushSemaphore::layout_version`,
    /// initialized data): the layout of the batches its styx-probe makes.
    /// None without a flush site.
    pub batch_layout: Option<u16>,
}

/// Declared event type notes kept per file (each a type of its own;
/// `styx_common::item`'s tags have room for 32,767).
pub const MAX_EVENT_NOTES: usize = 32_767;
/// The largest declared event type note kept: eight fields, each an enum
/// of 1,024 values with names of up to ~50 bytes.
pub const MAX_EVENT_NOTE_BYTES: usize = 512 << 10;

/// Guest description notes kept per file (an emulator writes one).
pub const MAX_GUEST_NOTES: usize = 4;
/// The largest guest description note kept: thousands of registers.
pub const MAX_GUEST_NOTE_BYTES: usize = 64 << 10;

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

/// Reads every USDT probe site from the ELF file at `path`, which must be a
/// regular file; only the parts needed are read.
pub fn read_probe_table(path: &Path) -> Result<ProbeTable, NotesError> {
    parse_file(path, |data| parse_elf(data))
        .map_err(|cause| NotesError::Read {
            path: path.display().to_string(),
            cause,
        })?
        .map_err(|e| e.with_path(path))
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

/// Why `data` is not an ELF file: the parser's reason, or for a script
/// (`#!`, as an emulator's launcher often is) what to name instead.
fn not_elf<'data, R: ReadRef<'data>>(data: R, parse: object::Error) -> ParseError {
    let start = data
        .read_bytes_at(0, 128.min(data.len().unwrap_or(0)))
        .unwrap_or(&[]);
    match start.strip_prefix(b"#!") {
        Some(line) => {
            let interpreter = line.split(|&b| b == b'\n').next().unwrap_or(line);
            // The file is anyone's: its bytes reach a terminal escaped.
            let interpreter: String = String::from_utf8_lossy(interpreter)
                .trim()
                .chars()
                .flat_map(|c| match c.is_control() {
                    true => c.escape_default().collect::<Vec<_>>(),
                    false => vec![c],
                })
                .collect();
            ParseError::NotElf(format!(
                "it is a script (#!{interpreter}): name the program it runs"
            ))
        }
        None => ParseError::NotElf(parse.to_string()),
    }
}

/// Reads every USDT probe site from an ELF image in memory.
pub fn parse_probe_table(data: &[u8]) -> Result<ProbeTable, ParseError> {
    parse_elf(data)
}

fn parse_elf<'data, R: ReadRef<'data>>(data: R) -> Result<ProbeTable, ParseError> {
    let elf = ElfFile64::<Endianness, R>::parse(data).map_err(|e| not_elf(data, e))?;
    let endian = elf.endian();
    let mut table = ProbeTable::default();

    // Prelink may have moved the code; `.stapsdt.base`'s real address vs the
    // one recorded in each note tells by how much.
    let base = elf.section_by_name(".stapsdt.base").map(|s| s.address());
    let segments = loadable_segments(&elf);
    // (provider, probe, address) of each site kept, and its index.
    let mut seen: HashMap<(String, String, u64), usize> = HashMap::new();

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
            if note.name() == GUEST_NOTE_OWNER && note.n_type(endian).0 == NT_STYX_GUEST {
                keep_guest_note(&mut table, note.desc());
                continue;
            }
            if note.name() == GUEST_NOTE_OWNER && note.n_type(endian).0 == NT_STYX_EVENT {
                keep_event_note(&mut table, note.desc());
                continue;
            }
            if note.name() != NOTE_OWNER || note.n_type(endian) != NT_STAPSDT {
                continue;
            }
            match parse_note(note.desc(), endian, base, &segments) {
                Ok(site) if !in_code(&segments, site.address) => table.outside_code += 1,
                Ok(site) => keep_site(&mut table, &mut seen, data, &segments, site),
                Err(reason) => table.problems.push(reason),
            }
        }
    }
    check_instruction_starts(&elf, data, &segments, &mut table);
    table.batch_layout = batch_layout(data, &table.sites);
    Ok(table)
}

/// The layout version in the flush site's semaphore block, as the file
/// has it (its semaphore lies in a segment's file-backed part, checked
/// when its note was read).
fn batch_layout<'data, R: ReadRef<'data>>(data: R, sites: &[ProbeSite]) -> Option<u16> {
    let flush = sites
        .iter()
        .find(|s| s.is_batch_flush() && s.semaphore != 0)?;
    let at = flush.semaphore_offset.checked_add(LAYOUT_VERSION_OFFSET)?;
    let bytes = data.read_bytes_at(at, 2).ok()?;
    Some(u16::from_le_bytes([bytes[0], bytes[1]]))
}

/// Keeps a guest description's bytes, within the bounds on their number
/// and size.
fn keep_guest_note(table: &mut ProbeTable, desc: &[u8]) {
    if table.guest_notes.len() >= MAX_GUEST_NOTES || desc.len() > MAX_GUEST_NOTE_BYTES {
        table
            .problems
            .push("a guest description note too large or one too many: skipped".into());
    } else {
        table.guest_notes.push(desc.to_vec());
    }
}

/// Keeps a declared event type's bytes, within the bounds on their
/// number and size.
fn keep_event_note(table: &mut ProbeTable, desc: &[u8]) {
    if table.event_notes.len() >= MAX_EVENT_NOTES || desc.len() > MAX_EVENT_NOTE_BYTES {
        table
            .problems
            .push("a declared event type's note too large or one too many: skipped".into());
    } else {
        table.event_notes.push(desc.to_vec());
    }
}

/// Adds a site in code to the table unless it is not at a `nop` or another
/// note already placed the same probe there; `seen` holds the kept sites'
/// (provider, probe, address) and index.
fn keep_site<'data, R: ReadRef<'data>>(
    table: &mut ProbeTable,
    seen: &mut HashMap<(String, String, u64), usize>,
    data: R,
    segments: &[Segment],
    site: ProbeSite,
) {
    if let Err(reason) = check_site_is_nop(data, &site) {
        table.problems.push(reason);
        return;
    }
    let key = (site.provider.clone(), site.name.clone(), site.address);
    if let Some(&kept) = seen.get(&key) {
        // The same probe twice at one place would report each event twice:
        // keep the first note.
        if table.sites[kept] == site {
            table.duplicates += 1;
        } else {
            table.problems.push(format!(
                "{}:{} at {:#x}: a second note with another semaphore or argument spec; kept \
                 the first",
                site.provider, site.name, site.address
            ));
        }
        return;
    }
    seen.insert(key, table.sites.len());
    if site.semaphore != 0
        && table.shared_semaphore_page.is_none()
        && on_shared_page(segments, site.semaphore_offset)
    {
        table.shared_semaphore_page = Some(site.semaphore_offset);
    }
    table.sites.push(site);
}

/// Leaves out the sites that lie inside an instruction of a function symbol
/// (a problem each), and marks the ones no function symbol covers.
fn check_instruction_starts<'data, R: ReadRef<'data>>(
    elf: &ElfFile64<'data, Endianness, R>,
    data: R,
    segments: &[Segment],
    table: &mut ProbeTable,
) {
    if table.sites.is_empty() {
        return;
    }
    let symbols = function_symbols(elf, segments);
    let addresses: Vec<u64> = table.sites.iter().map(|s| s.address).collect();
    let placements = place(data, &symbols, &addresses);
    let mut placements = placements.into_iter();
    let problems = &mut table.problems;
    table.sites.retain_mut(|site| {
        let placement = placements.next().expect("one per site");
        site.start_checked = placement == Placement::Starts;
        match placement.refusal() {
            Some(why) if placement != Placement::Uncovered => {
                problems.push(format!(
                    "{}:{} at {:#x}: the site {why}; a uprobe there would corrupt the code: \
                     skipped",
                    site.provider, site.name, site.address
                ));
                false
            }
            _ => true,
        }
    });
}

/// Whether the site's instruction, read from the file, is a `nop`: a note
/// pointing anywhere else (inside an instruction, at other code) would have
/// a uprobe corrupt the target.
fn check_site_is_nop<'data, R: ReadRef<'data>>(data: R, site: &ProbeSite) -> Result<(), String> {
    let available = data.len().unwrap_or(0).saturating_sub(site.file_offset);
    let size = available.min(MAX_INSTRUCTION as u64);
    let code = data.read_bytes_at(site.file_offset, size).unwrap_or(&[]);
    if nop_length(code).is_some() {
        return Ok(());
    }
    let shown: Vec<String> = code.iter().take(4).map(|b| format!("{b:02x}")).collect();
    Err(format!(
        "{}:{} at {:#x}: not a nop there (bytes [{}] at file offset {:#x}); \
         a uprobe would corrupt the code: skipped",
        site.provider,
        site.name,
        site.address,
        shown.join(" "),
        site.file_offset
    ))
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

/// `address` moved as `.stapsdt.base` moved, from `recorded` to `actual`
/// (prelink); None out of range.
fn moved(address: u64, recorded: u64, actual: u64) -> Option<u64> {
    if actual >= recorded {
        address.checked_add(actual - recorded)
    } else {
        address.checked_sub(recorded - actual)
    }
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
        address = moved(address, note_base, actual).ok_or_else(|| {
            format!(
                "{provider}:{name}: probe address {address:#x} moved as .stapsdt.base \
                 ({note_base:#x} to {actual:#x}) is out of range"
            )
        })?;
    }
    let file_offset = to_file_offset(segments, address).ok_or_else(|| {
        format!(
            "{provider}:{name}: probe address {address:#x} is in no loadable segment \
             (or maps past the end of the file)"
        )
    })?;
    // The kernel counts the semaphore through the file mapping, so it must lie
    // in the file-backed part of a segment, as `.probes` does.
    let semaphore_offset = match semaphore {
        0 => 0,
        sema => to_file_offset(segments, sema).ok_or_else(|| {
            format!(
                "{provider}:{name}: semaphore address {sema:#x} is in no loadable segment \
                 (or maps past the end of the file)"
            )
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
        start_checked: false,
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

    /// A script names its interpreter and says what to name instead.
    #[test]
    fn a_script_is_named_as_one() {
        let err = parse_probe_table(b"#!/bin/sh -e\nexec ./emu\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "not a 64-bit ELF file: it is a script (#!/bin/sh -e): name the program it runs"
        );
        // Its bytes are the file's: a terminal sees them escaped.
        let err = parse_probe_table(b"#!/bin/\x1b[2Jsh\n").unwrap_err();
        assert!(err.to_string().contains("(#!/bin/\\u{1b}[2Jsh)"), "{err}");
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

    #[test]
    fn crafted_segments_do_not_overflow_or_mis_map() {
        let mut desc = Vec::new();
        for word in [0x1800u64, 0, 0] {
            desc.extend_from_slice(&word.to_le_bytes());
        }
        desc.extend_from_slice(b"p\0a\0\0");
        // The file offset of 0x1800 would be past u64::MAX.
        let far = [segment(0x1000, 0x1000, u64::MAX - 0x10, "r-x")];
        let reason = parse_note(&desc, Endianness::Little, None, &far).unwrap_err();
        assert!(reason.contains("p:a"), "{reason}");
        // The semaphore's segment ends past u64::MAX in the file.
        assert!(!on_shared_page(
            &[
                segment(0, 0x10, u64::MAX - 1, "rw-"),
                segment(0x1000, 0x10, u64::MAX - 1, "rw-"),
            ],
            0x5000
        ));
        // A `.stapsdt.base` adjustment that wraps below 0 must not land in a
        // segment at the top of the address space.
        desc[8..16].copy_from_slice(&0x10_0000u64.to_le_bytes());
        let top = [segment(u64::MAX - 0xf_ffff, 0x10_0000, 0, "r-x")];
        let reason = parse_note(&desc, Endianness::Little, Some(0x1000), &top).unwrap_err();
        assert!(reason.contains("p:a"), "{reason}");
    }

    /// A one-segment x86-64 ELF file: `code` at file offset and address
    /// 0x100, then a `.note.stapsdt` section with one note per `(pc,
    /// provider, probe)`.
    fn elf_with_notes(code: &[u8], notes: &[(u64, &str, &str)]) -> Vec<u8> {
        let mut note_section = Vec::new();
        for (pc, provider, probe) in notes {
            let mut desc = Vec::new();
            for word in [*pc, 0, 0] {
                desc.extend_from_slice(&word.to_le_bytes());
            }
            desc.extend_from_slice(format!("{provider}\0{probe}\0\0").as_bytes());
            while desc.len() % 4 != 0 {
                desc.push(0);
            }
            for word in [8u32, desc.len() as u32, 3] {
                note_section.extend_from_slice(&word.to_le_bytes());
            }
            note_section.extend_from_slice(b"stapsdt\0");
            note_section.extend_from_slice(&desc);
        }
        let strtab = b"\0.note.stapsdt\0.shstrtab\0";
        let notes_at = 0x100 + code.len().next_multiple_of(8);
        let strtab_at = notes_at + note_section.len();
        let sections_at = (strtab_at + strtab.len()).next_multiple_of(8);
        let size = sections_at + 3 * 64;

        let mut elf = Vec::new();
        let u16s =
            |elf: &mut Vec<u8>, v: &[u16]| v.iter().for_each(|x| elf.extend(x.to_le_bytes()));
        let u32s =
            |elf: &mut Vec<u8>, v: &[u32]| v.iter().for_each(|x| elf.extend(x.to_le_bytes()));
        let u64s =
            |elf: &mut Vec<u8>, v: &[u64]| v.iter().for_each(|x| elf.extend(x.to_le_bytes()));
        elf.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
        u16s(&mut elf, &[3, 62]); // ET_DYN, EM_X86_64
        u32s(&mut elf, &[1]);
        u64s(&mut elf, &[0, 64, sections_at as u64]);
        u32s(&mut elf, &[0]);
        u16s(&mut elf, &[64, 56, 1, 64, 3, 2]);
        // PT_LOAD, R+X, the whole file at address 0.
        u32s(&mut elf, &[1, 5]);
        u64s(&mut elf, &[0, 0, 0, size as u64, size as u64, 0x1000]);
        elf.resize(0x100, 0);
        elf.extend_from_slice(code);
        elf.resize(notes_at, 0);
        elf.extend_from_slice(&note_section);
        elf.extend_from_slice(strtab);
        elf.resize(sections_at, 0);
        elf.extend_from_slice(&[0; 64]);
        // .note.stapsdt, .shstrtab
        let section =
            |elf: &mut Vec<u8>, name: u32, kind: u32, at: usize, len: usize, align: u64| {
                u32s(elf, &[name, kind]);
                u64s(elf, &[0, 0, at as u64, len as u64]);
                u32s(elf, &[0, 0]);
                u64s(elf, &[align, 0]);
            };
        section(&mut elf, 1, 7, notes_at, note_section.len(), 4);
        section(&mut elf, 15, 3, strtab_at, strtab.len(), 1);
        assert_eq!(elf.len(), size);
        elf
    }

    #[test]
    fn duplicate_notes_give_one_site() {
        let data = elf_with_notes(
            &[0x90; 4],
            &[
                (0x100, "p", "a"),
                (0x100, "p", "a"),
                (0x101, "p", "a"),
                (0x100, "p", "a"),
            ],
        );
        let table = parse_probe_table(&data).unwrap();
        let at: Vec<u64> = table.sites.iter().map(|s| s.address).collect();
        assert_eq!(at, [0x100, 0x101], "{:?}", table.problems);
        assert_eq!(table.duplicates, 2);
        assert!(table.problems.is_empty(), "{:?}", table.problems);
    }

    #[test]
    fn sites_must_be_nops() {
        let code = [
            0x90, // 0x100: nop
            0x66, 0x90, // 0x101: xchg %ax,%ax
            0x0f, 0x1f, 0x44, 0x00, 0x00, // 0x103: nopl 0(%rax,%rax,1)
            0xb8, 0x78, 0x56, 0x34, 0x12, // 0x108: mov $0x12345678,%eax
            0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, // 0x10d: cs nopw
            0x0f, 0x0b, // 0x117: ud2
        ];
        let data = elf_with_notes(
            &code,
            &[
                (0x100, "p", "nop"),
                (0x101, "p", "xchg"),
                (0x103, "p", "nopl"),
                (0x108, "p", "mov"),
                (0x10a, "p", "immediate"),
                (0x10d, "p", "nopw"),
                (0x117, "p", "ud2"),
            ],
        );
        let table = parse_probe_table(&data).unwrap();
        let names: Vec<&str> = table.sites.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["nop", "xchg", "nopl", "nopw"]);
        assert_eq!(table.problems.len(), 3, "{:?}", table.problems);
        for (problem, probe) in table.problems.iter().zip(["p:mov", "p:immediate", "p:ud2"]) {
            assert!(
                problem.contains(probe) && problem.contains("nop"),
                "{problem}"
            );
        }
    }

    /// Runs `f` in a thread and fails if it takes more than 10 s.
    fn promptly<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()));
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("still reading after 10 s")
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = std::env::temp_dir().join(format!("styx-usdt-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("libfifo.so");
        let _ = std::fs::remove_file(&fifo);
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path and a mode.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let at = fifo.clone();
        let err = promptly(move || read_probe_table(&at).map(|_| ()).unwrap_err().to_string());
        let _ = std::fs::remove_dir_all(&dir);
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn dev_zero_is_refused() {
        let err = promptly(|| {
            read_probe_table(Path::new("/dev/zero"))
                .map(|_| ())
                .unwrap_err()
                .to_string()
        });
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn a_huge_sparse_section_is_refused_unread() {
        // A 1 GiB file, all holes but for an ELF header and a note section
        // claiming 1 GiB - 4 KiB.
        let mut data = elf_with_notes(&[0x90], &[(0x100, "p", "a")]);
        let size: u64 = 1 << 30;
        let shdr = data.len() - 64; // .shstrtab's header; move .note.stapsdt's
        let notes = shdr - 64;
        data[notes + 24..notes + 32].copy_from_slice(&4096u64.to_le_bytes());
        data[notes + 32..notes + 40].copy_from_slice(&(size - 4096).to_le_bytes());
        let path = std::env::temp_dir().join(format!("styx-usdt-sparse-{}", std::process::id()));
        std::fs::write(&path, &data).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(size)
            .unwrap();
        let at = path.clone();
        let result = promptly(move || read_probe_table(&at).map(|t| t.sites.len()));
        let _ = std::fs::remove_file(&path);
        let err = result.unwrap_err().to_string();
        assert!(err.contains("MiB"), "{err}");
    }
}
