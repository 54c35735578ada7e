//! An ELF file's loadable segments (`PT_LOAD`): where an address is in the
//! file, and whether it is code. Every reader of addresses a file gives
//! (notes, symbols) maps them through here; the values come from the file,
//! so all arithmetic on them is checked.

use object::elf::{PF_W, PF_X, PT_LOAD};
use object::read::elf::{ElfFile64, ProgramHeader};
use object::{Endianness, ReadRef};

/// A PT_LOAD segment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segment {
    pub(crate) vaddr: u64,
    pub(crate) file_size: u64,
    pub(crate) offset: u64,
    pub(crate) executable: bool,
    pub(crate) writable: bool,
}

const PAGE: u64 = 4096;

// Segment values come from the file: all arithmetic on them is checked.
impl Segment {
    fn contains(&self, address: u64) -> bool {
        address
            .checked_sub(self.vaddr)
            .is_some_and(|into| into < self.file_size)
    }

    /// The file offset of `address`, if this segment maps it to one.
    fn file_offset(&self, address: u64) -> Option<u64> {
        if !self.contains(address) {
            return None;
        }
        (address - self.vaddr).checked_add(self.offset)
    }

    /// Whether the file pages this segment maps include `offset`.
    pub(crate) fn maps_file_page_of(&self, offset: u64) -> bool {
        let start = self.offset / PAGE * PAGE;
        let end = self
            .offset
            .checked_add(self.file_size)
            .and_then(|end| end.checked_next_multiple_of(PAGE));
        // A segment ending past the largest offset maps every page after its
        // start (no real file has one; it errs towards the warning).
        end.map_or(offset >= start, |end| (start..end).contains(&offset))
    }
}

pub(crate) fn loadable_segments<'data, R: ReadRef<'data>>(
    elf: &ElfFile64<'data, Endianness, R>,
) -> Vec<Segment> {
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

pub(crate) fn to_file_offset(segments: &[Segment], address: u64) -> Option<u64> {
    segments
        .iter()
        .find(|s| s.contains(address))
        .and_then(|s| s.file_offset(address))
}

/// Whether `address` is in an executable segment.
pub(crate) fn in_code(segments: &[Segment], address: u64) -> bool {
    segments.iter().any(|s| s.executable && s.contains(address))
}
