//! Where the guest program's ELF file lies in guest memory (user mode),
//! for its description: API v1 gives the code's range (`start_code`, the
//! lowest executable segment as loaded) but not the load bias nor where
//! the file starts, which coverage tools need (a drcov module's base is
//! where the file's first byte is, as a disassembler's image base). The
//! program headers give the rest: bias = `start_code` minus the lowest
//! executable segment's link address. Read once, when tracing starts.

use std::fs::File;
use std::io::Read;

const PT_LOAD: u32 = 1;
const PF_X: u32 = 1;
/// Program headers read at most: a hostile or broken file cannot make
/// the plugin allocate much.
const MAX_PHDR_BYTES: usize = 64 << 10;

/// The file's span as loaded: (first byte, end of its last segment).
pub fn loaded_span(path: &str, start_code: u64) -> Option<(u64, u64)> {
    let mut file = File::open(path).ok()?;
    let mut ident = [0u8; 64];
    file.read_exact(&mut ident[..52]).ok()?;
    if &ident[..4] != b"\x7fELF" {
        return None;
    }
    let wide = match ident[4] {
        1 => false,
        2 => true,
        _ => return None,
    };
    let little = match ident[5] {
        1 => true,
        2 => false,
        _ => return None,
    };
    if wide {
        file.read_exact(&mut ident[52..64]).ok()?;
    }
    let fields = Fields { little };
    let (phoff, phentsize, phnum) = if wide {
        (
            fields.u64(&ident[32..]),
            fields.u16(&ident[54..]),
            fields.u16(&ident[56..]),
        )
    } else {
        (
            u64::from(fields.u32(&ident[28..])),
            fields.u16(&ident[42..]),
            fields.u16(&ident[44..]),
        )
    };
    let entry_size = if wide { 56 } else { 32 };
    if usize::from(phentsize) < entry_size {
        return None;
    }
    let bytes = usize::from(phentsize) * usize::from(phnum);
    if bytes > MAX_PHDR_BYTES {
        return None;
    }
    let mut table = vec![0u8; bytes];
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(phoff)).ok()?;
    file.read_exact(&mut table).ok()?;
    // (p_flags, p_offset, p_vaddr, p_memsz) of each PT_LOAD.
    let loads: Vec<(u32, u64, u64, u64)> = table
        .chunks_exact(usize::from(phentsize))
        .filter_map(|ph| {
            let (ty, flags, offset, vaddr, memsz) = if wide {
                let f = |at| fields.u64(&ph[at..]);
                (fields.u32(ph), fields.u32(&ph[4..]), f(8), f(16), f(40))
            } else {
                let f = |at| u64::from(fields.u32(&ph[at..]));
                (fields.u32(ph), fields.u32(&ph[24..]), f(4), f(8), f(20))
            };
            (ty == PT_LOAD).then_some((flags, offset, vaddr, memsz))
        })
        .collect();
    let code_link = loads
        .iter()
        .filter(|(flags, ..)| flags & PF_X != 0)
        .map(|&(_, _, vaddr, _)| vaddr)
        .min()?;
    let bias = start_code.wrapping_sub(code_link);
    let first = loads
        .iter()
        .map(|&(_, offset, vaddr, _)| vaddr.saturating_sub(offset))
        .min()?;
    let end = loads
        .iter()
        .map(|&(_, _, vaddr, memsz)| vaddr.saturating_add(memsz))
        .max()?;
    Some((first.wrapping_add(bias), end.wrapping_add(bias)))
}

/// Reads the file's integers in its byte order.
#[derive(Clone, Copy)]
struct Fields {
    little: bool,
}

impl Fields {
    fn u16(self, b: &[u8]) -> u16 {
        let b = [b[0], b[1]];
        if self.little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    }

    fn u32(self, b: &[u8]) -> u32 {
        let b = [b[0], b[1], b[2], b[3]];
        if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    }

    fn u64(self, b: &[u8]) -> u64 {
        let b: [u8; 8] = b[..8].try_into().unwrap_or_default();
        if self.little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        }
    }
}
