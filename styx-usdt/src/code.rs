//! Which addresses of an ELF file start an instruction, as far as its
//! function symbols tell.
//!
//! A uprobe writes an `int3` over the byte at its address. At an address
//! inside an instruction it changes that instruction instead: a USDT note
//! pointing at byte 1 of `movl $0x90909090,%eax` passes a nop check, and
//! the function then returns 0x909090cc. x86 code can only be decoded from
//! a known start, and a function symbol gives one: each function symbol
//! (of `.symtab` and `.dynsym`) covering an address is decoded from its
//! first byte, and the address must begin an instruction in every one.
//! Symbols come from the file as notes do, so a symbol placed inside
//! another's instruction (`g = f+1`) does not vouch for the addresses it
//! covers: they fail against `f`.
//!
//! The work is bounded for crafted files: an address covered by more than
//! [`MAX_COVERING`] symbols is not checked (and so refused), each symbol
//! is decoded once and only as far as the last address it must place, and
//! its bytes are read through the file's read budget.

use crate::arch::x86_64::MAX_INSTRUCTION;
use crate::demangle::demangle;
use crate::segments::{in_code, to_file_offset, Segment};
use iced_x86::{Decoder, DecoderOptions};
use object::read::elf::ElfFile64;
use object::{Endianness, Object, ObjectSymbol, ReadRef, SymbolKind};
use std::collections::{BTreeMap, HashSet};

/// The most function symbols checked around one address; real code has one
/// or two (a function and its aliases of another size).
pub(crate) const MAX_COVERING: usize = 16;

/// Where an address lies among the file's instructions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// It starts an instruction in every function symbol covering it (at
    /// least one).
    Starts,
    /// It lies inside the instruction at `instruction`, decoding `function`
    /// from its start.
    Inside {
        /// The symbol whose decoding says so.
        function: String,
        /// The instruction's address.
        instruction: u64,
    },
    /// No function symbol covers it.
    Uncovered,
    /// More than [`MAX_COVERING`] function symbols cover it (this many).
    Crowded(usize),
}

impl Placement {
    /// Why an address so placed cannot be probed, as words that follow it
    /// ("0x1170 is inside …"); None for [`Placement::Starts`].
    pub(crate) fn refusal(&self) -> Option<String> {
        match self {
            Placement::Starts => None,
            Placement::Inside {
                function,
                instruction,
            } => Some(format!(
                "is inside the instruction at {instruction:#x} of {}",
                demangle(function)
            )),
            Placement::Uncovered => Some("is in no function symbol".to_string()),
            Placement::Crowded(n) => Some(format!(
                "is in {n} function symbols at once (at most {MAX_COVERING} are checked)"
            )),
        }
    }
}

/// A function symbol with a body in code.
#[derive(Clone, Debug)]
pub(crate) struct FunctionSymbol {
    pub(crate) name: String,
    pub(crate) address: u64,
    pub(crate) size: u64,
    file_offset: u64,
}

impl FunctionSymbol {
    /// A symbol whose file offset is its address (tests).
    #[cfg(test)]
    pub(crate) fn at(name: &str, address: u64, size: u64) -> FunctionSymbol {
        FunctionSymbol {
            name: name.to_string(),
            address,
            size,
            file_offset: address,
        }
    }

    fn end(&self) -> u64 {
        self.address.saturating_add(self.size)
    }
}

/// The function symbols of a file (both tables, each body once), sorted by
/// address.
pub(crate) fn function_symbols<'data, R: ReadRef<'data>>(
    elf: &ElfFile64<'data, Endianness, R>,
    segments: &[Segment],
) -> Vec<FunctionSymbol> {
    let mut seen = HashSet::new();
    let mut symbols: Vec<FunctionSymbol> = elf
        .symbols()
        .chain(elf.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.size() > 0)
        .filter_map(|s| {
            let (address, size) = (s.address(), s.size());
            let last = address.checked_add(size - 1)?;
            // The body must be code the file maps in one piece.
            let file_offset = to_file_offset(segments, address)?;
            let whole = to_file_offset(segments, last) == file_offset.checked_add(size - 1);
            if !(whole && in_code(segments, address) && in_code(segments, last)) {
                return None;
            }
            seen.insert((address, size)).then(|| FunctionSymbol {
                name: s.name().unwrap_or("?").to_string(),
                address,
                size,
                file_offset,
            })
        })
        .collect();
    symbols.sort_by_key(|s| (s.address, s.size));
    symbols
}

/// The name of the function symbol that `address` is in, if one is.
pub(crate) fn symbol_at(symbols: &[FunctionSymbol], address: u64) -> Option<&str> {
    let after = symbols.partition_point(|s| s.address <= address);
    symbols[..after]
        .iter()
        .rev()
        .take(MAX_COVERING)
        .find(|s| address < s.end())
        .map(|s| s.name.as_str())
}

/// Where each of `addresses` lies (see the module comment), in their order.
pub(crate) fn place<'data, R: ReadRef<'data>>(
    data: R,
    symbols: &[FunctionSymbol],
    addresses: &[u64],
) -> Vec<Placement> {
    let mut order: Vec<usize> = (0..addresses.len()).collect();
    order.sort_by_key(|&i| addresses[i]);
    // Sweep the addresses in order, keeping the symbols that cover the
    // current one (by end address); each address collects its coverers.
    let mut covered_by: BTreeMap<usize, Vec<usize>> = BTreeMap::new(); // symbol -> address indices
    let mut placements = vec![Placement::Starts; addresses.len()];
    let mut active: BTreeMap<u64, Vec<usize>> = BTreeMap::new(); // end -> symbols
    let mut active_count = 0;
    let mut next_symbol = 0;
    for &i in &order {
        let address = addresses[i];
        while next_symbol < symbols.len() && symbols[next_symbol].address <= address {
            active
                .entry(symbols[next_symbol].end())
                .or_default()
                .push(next_symbol);
            active_count += 1;
            next_symbol += 1;
        }
        while let Some(entry) = active.first_entry() {
            if *entry.key() > address {
                break;
            }
            active_count -= entry.remove().len();
        }
        placements[i] = match active_count {
            0 => Placement::Uncovered,
            n if n > MAX_COVERING => Placement::Crowded(n),
            _ => {
                for &symbol in active.values().flatten() {
                    covered_by.entry(symbol).or_default().push(i);
                }
                Placement::Starts
            }
        };
    }
    for (symbol, covered) in covered_by {
        let symbol = &symbols[symbol];
        // In address order (the sweep's), as decoding meets them.
        for (i, inside) in decode_through(data, symbol, addresses, &covered) {
            if placements[i] == Placement::Starts {
                placements[i] = Placement::Inside {
                    function: symbol.name.clone(),
                    instruction: inside,
                };
            }
        }
    }
    placements
}

/// Decodes `symbol` from its start up to the last of `covered` (indices
/// into `addresses`, in address order): each address that does not start
/// an instruction, with the start of the instruction it is in. A body that
/// cannot be read places nothing as a start.
fn decode_through<'data, R: ReadRef<'data>>(
    data: R,
    symbol: &FunctionSymbol,
    addresses: &[u64],
    covered: &[usize],
) -> Vec<(usize, u64)> {
    let Some(&last) = covered.last() else {
        return Vec::new();
    };
    let needed = (addresses[last] - symbol.address)
        .saturating_add(MAX_INSTRUCTION as u64)
        .min(symbol.size);
    let Ok(body) = data.read_bytes_at(symbol.file_offset, needed) else {
        return covered.iter().map(|&i| (i, symbol.address)).collect();
    };
    let mut decoder = Decoder::with_ip(64, body, symbol.address, DecoderOptions::NONE);
    let mut pending = covered.iter().peekable();
    let mut inside = Vec::new();
    for insn in &mut decoder {
        let end = insn.ip() + insn.len() as u64;
        while let Some(&&i) = pending.peek() {
            let address = addresses[i];
            if address >= end {
                break;
            }
            if address != insn.ip() {
                inside.push((i, insn.ip()));
            }
            pending.next();
        }
        if pending.peek().is_none() {
            break;
        }
    }
    // Past what was read: not placed as starts.
    inside.extend(pending.map(|&i| (i, symbol.address)));
    inside
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbol(name: &str, address: u64, size: u64) -> FunctionSymbol {
        FunctionSymbol::at(name, address, size)
    }

    fn inside(function: &str, instruction: u64) -> Placement {
        Placement::Inside {
            function: function.to_string(),
            instruction,
        }
    }

    #[test]
    fn an_address_must_start_an_instruction_of_every_symbol_around_it() {
        // f: movl $0x90c3c3c3,%eax; ret. g = f+1, 4 bytes: "ret ret ret nop".
        // h at 0x10: nop; ret.
        let mut code = vec![0xb8, 0xc3, 0xc3, 0xc3, 0x90, 0xc3];
        code.resize(0x10, 0xcc);
        code.extend([0x90, 0xc3]);
        let symbols = [symbol("f", 0, 6), symbol("g", 1, 4), symbol("h", 0x10, 2)];
        let placed = place(&code[..], &symbols, &[5, 1, 0, 3, 0x11, 0x40, 0x10]);
        assert_eq!(
            placed,
            [
                Placement::Starts, // f's ret (g ends before it)
                inside("f", 0),    // g's entry
                Placement::Starts, // f's entry
                inside("f", 0),    // one of g's "rets"
                Placement::Starts,
                Placement::Uncovered,
                Placement::Starts,
            ]
        );
        assert_eq!(symbol_at(&symbols, 3), Some("g"));
        assert_eq!(symbol_at(&symbols, 0x11), Some("h"));
        assert_eq!(symbol_at(&symbols, 0x12), None);
    }

    #[test]
    fn an_address_among_too_many_symbols_is_not_checked() {
        let code = [0x90u8; 64];
        let symbols: Vec<_> = (0..=MAX_COVERING as u64)
            .map(|i| symbol(&format!("s{i}"), 0, 8 + i))
            .collect();
        let placed = place(&code[..], &symbols, &[4, 30]);
        assert_eq!(
            placed,
            [Placement::Crowded(MAX_COVERING + 1), Placement::Uncovered]
        );
    }
}
