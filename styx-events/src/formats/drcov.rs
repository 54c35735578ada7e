//! drcov coverage, version 2 (DynamoRIO's format, which Lighthouse,
//! Cartographer and bncov load): a text header, a module table, then a
//! binary table of basic blocks, each `{u32 start; u16 size; u16 module}`
//! little-endian, `start` an offset into its module.
//!
//! Blocks come from `block` events. An emulator that fires none but fires
//! `insn_exec` gets blocks made of instruction runs: a run ends at a
//! `branch` of its thread, and at a pc that does not follow the previous
//! instruction. Where the emulator gives instruction lengths
//! (`insn_exec!(|| (pc, insn, len))`), following means starting where the
//! previous one ended, and a block's size covers its last instruction
//! whole. Without them, a pc more than [`MAX_INSN_GAP`] bytes after the
//! previous one, or not after it, starts a new run; the size then reaches
//! the first byte of the last instruction (which is what coverage tools
//! need to mark it), and without `branch` events a taken short forward
//! branch joins two runs.
//!
//! Modules are the guest images the emulator described
//! (`styx_probe::describe!`), else the programs QEMU guests' description
//! markers name (`styx_common::guest_marker`: a marker, as the guest is
//! known only when QEMU runs; this file is written at the end, so a
//! description arriving after the header was written still counts, and
//! `read` of a capture holding the marker gives the same file), at most
//! [`MAX_MODULES`]; without any, one module `guest` spans the executed
//! range. A block outside every module, or that does not fit the
//! table's fields, is left out and counted in the warning at the end. Each
//! distinct block is written once; at most [`MAX_BLOCKS`] are kept.

use crate::record::event::{Body, Event};
use crate::session::guest::{Guest, Image};
use crate::session::header::Header;
use crate::write::writer::{Chunked, EventWriter, Totals};
use rustc_hash::{FxHashMap, FxHashSet};
use std::io::{self, Write};
use styx_common::EventKind;

/// Distinct blocks kept (16 bytes each in the set): more are counted, not kept.
pub const MAX_BLOCKS: usize = 8 << 20;
/// Modules taken from description markers at most (a process may fire
/// any number of them).
pub const MAX_MODULES: usize = 256;
/// The longest step between two instructions of one run (x86's longest
/// instruction is 15 bytes).
pub const MAX_INSN_GAP: u64 = 16;

/// Gathers the distinct blocks, writes the file at the end.
pub struct DrcovWriter {
    out: Chunked<Box<dyn Write>>,
    images: Vec<Image>,
    /// Whether the header described the images: then markers add none.
    described: bool,
    /// Described images past [`MAX_MODULES`].
    modules_over: u64,
    /// From `block` events: (start, size).
    blocks: FxHashSet<(u64, u64)>,
    /// From `insn_exec` runs, used only if no `block` event came.
    runs: FxHashSet<(u64, u64)>,
    /// Per thread: the run being built, (first pc, last pc, its length
    /// or 0).
    open_runs: FxHashMap<u32, (u64, u64, u64)>,
    /// Distinct blocks past [`MAX_BLOCKS`].
    over: u64,
}

impl DrcovWriter {
    /// A drcov file on `out` for the session `header` describes.
    pub fn new(out: Box<dyn Write>, header: &Header) -> DrcovWriter {
        let images: Vec<Image> = (header.guest.as_ref())
            .map(|g| g.images.clone())
            .unwrap_or_default();
        DrcovWriter {
            out: Chunked::new(out, 64 << 10),
            described: !images.is_empty(),
            images,
            modules_over: 0,
            blocks: FxHashSet::default(),
            runs: FxHashSet::default(),
            open_runs: FxHashMap::default(),
            over: 0,
        }
    }

    fn keep(set: &mut FxHashSet<(u64, u64)>, over: &mut u64, block: (u64, u64)) {
        if set.len() < MAX_BLOCKS || set.contains(&block) {
            set.insert(block);
        } else {
            *over += 1;
        }
    }

    fn add_images(&mut self, images: Vec<Image>) {
        for image in images {
            if self.images.contains(&image) {
                continue;
            }
            match self.images.len() < MAX_MODULES {
                true => self.images.push(image),
                false => self.modules_over += 1,
            }
        }
    }

    fn end_run(&mut self, tid: u32) {
        if let Some((first, last, len)) = self.open_runs.remove(&tid) {
            let size = last - first + len.max(1);
            Self::keep(&mut self.runs, &mut self.over, (first, size));
        }
    }
}

impl EventWriter for DrcovWriter {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        let args = match &event.body {
            Body::Args(args) => args,
            Body::Marker(text) if !self.described => {
                if let Some(guest) = Guest::from_marker(text.bytes, text.truncated) {
                    self.add_images(guest.images);
                }
                return Ok(());
            }
            _ => return Ok(()),
        };
        let tid = event.header.tid;
        match event.kind {
            EventKind::Block => Self::keep(&mut self.blocks, &mut self.over, (args[0], args[1])),
            EventKind::InsnExec if self.blocks.is_empty() => {
                let (pc, len) = (args[0], u64::from(event.header.aux));
                match self.open_runs.get_mut(&tid) {
                    Some((_, last, last_len)) if follows(*last, *last_len, pc) => {
                        (*last, *last_len) = (pc, len);
                    }
                    _ => {
                        self.end_run(tid);
                        self.open_runs.insert(tid, (pc, pc, len));
                    }
                }
            }
            EventKind::Branch if self.blocks.is_empty() => self.end_run(tid),
            _ => {}
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        let tids: Vec<u32> = self.open_runs.keys().copied().collect();
        for tid in tids {
            self.end_run(tid);
        }
        let from_runs = self.blocks.is_empty();
        let blocks = if from_runs { &self.runs } else { &self.blocks };
        let mut blocks: Vec<(u64, u64)> = blocks.iter().copied().collect();
        blocks.sort_unstable();
        let modules = match self.images.is_empty() {
            false => self.images.clone(),
            true => vec![executed_range(&blocks)],
        };
        let mut table = Vec::with_capacity(blocks.len());
        let mut outside = 0u64;
        for &(start, size) in &blocks {
            match entry(&modules, start, size) {
                Some(entry) => table.push(entry),
                None => outside += 1,
            }
        }
        let b = &mut self.out.buf;
        let _ = write!(
            b,
            "DRCOV VERSION: 2\nDRCOV FLAVOR: styx\n\
             Module Table: version 2, count {}\nColumns: id, base, end, entry, path\n",
            modules.len()
        );
        for (id, module) in modules.iter().enumerate() {
            let _ = writeln!(
                b,
                "{id}, {:#018x}, {:#018x}, {:#018x}, {}",
                module.base,
                module.base.saturating_add(module.size),
                0,
                module_path(&module.name)
            );
        }
        let _ = writeln!(b, "BB Table: {} bbs", table.len());
        for (offset, size, module) in table {
            b.extend_from_slice(&offset.to_le_bytes());
            b.extend_from_slice(&size.to_le_bytes());
            b.extend_from_slice(&module.to_le_bytes());
        }
        if outside + self.over > 0 {
            log::warn!(
                "drcov: {outside} blocks outside the modules or too large for the table, and \
                 {} past the {MAX_BLOCKS} kept, left out",
                self.over
            );
        }
        if self.modules_over > 0 {
            log::warn!(
                "drcov: {} described guest programs past the {MAX_MODULES} kept left out",
                self.modules_over
            );
        }
        if from_runs && !blocks.is_empty() {
            log::info!("drcov: no block events: blocks made of insn_exec runs");
        }
        self.out.flush()
    }
}

/// One module spanning every block, when the emulator described no image.
fn executed_range(blocks: &[(u64, u64)]) -> Image {
    let base = blocks.first().map_or(0, |b| b.0);
    let end = blocks
        .iter()
        .map(|&(start, size)| start.saturating_add(size))
        .max()
        .unwrap_or(base);
    Image {
        name: "guest".to_string(),
        base,
        size: end - base,
    }
}

/// Whether an instruction at `pc` continues the run whose last instruction
/// is at `last`, `len` bytes long (0: unknown).
fn follows(last: u64, len: u64, pc: u64) -> bool {
    match len {
        0 => pc > last && pc - last <= MAX_INSN_GAP,
        len => last.checked_add(len) == Some(pc),
    }
}

/// The table entry of a block: offset in its module, size, module id.
fn entry(modules: &[Image], start: u64, size: u64) -> Option<(u32, u16, u16)> {
    let (id, module) = modules
        .iter()
        .enumerate()
        .find(|(_, m)| m.contains(start))?;
    Some((
        u32::try_from(start - module.base).ok()?,
        u16::try_from(size).ok()?,
        u16::try_from(id).ok()?,
    ))
}

/// A module's path as the table's comma-separated line can hold it.
fn module_path(name: &str) -> String {
    name.chars()
        .map(|c| if c == ',' || c.is_control() { '_' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(name: &str, base: u64, size: u64) -> Image {
        Image {
            name: name.into(),
            base,
            size,
        }
    }

    #[test]
    fn blocks_map_to_their_module_or_are_left_out() {
        let modules = [image("rom", 0x8000, 0x100), image("ram, low", 0, 0x100)];
        assert_eq!(entry(&modules, 0x8010, 4), Some((0x10, 4, 0)));
        assert_eq!(entry(&modules, 0x0ff, 1), Some((0xff, 1, 1)));
        assert_eq!(entry(&modules, 0x8100, 1), None, "past the end of rom");
        assert_eq!(entry(&modules, 0x10, 0x1_0000), None, "too large for u16");
        assert_eq!(module_path("ram, low"), "ram_ low");
    }

    #[test]
    fn runs_with_lengths_end_at_any_jump_and_cover_the_last_instruction() {
        // 2-byte instructions: 0x100, 0x102, then a taken 2-byte skip to
        // 0x106 (no branch event), then 0x106, 0x108.
        assert!(follows(0x100, 2, 0x102));
        assert!(
            !follows(0x102, 2, 0x106),
            "a short forward jump ends the run"
        );
        assert!(!follows(0x102, 2, 0x102));
        assert!(!follows(u64::MAX, 2, 1));
        // Without lengths the same skip is within the gap and joins the runs.
        assert!(follows(0x102, 0, 0x106));
        assert!(!follows(0x102, 0, 0x102 + MAX_INSN_GAP + 1));
    }

    /// A QEMU guest's description marker makes its program the module,
    /// whenever it comes; another marker or one cut short adds nothing.
    #[test]
    fn a_qemu_guest_marker_names_the_module() {
        use crate::record::event::Text;
        use crate::write::writer::SharedOutput;
        use styx_common::RecordHeader;
        let marker = |text: &'static [u8], truncated| Event {
            header: RecordHeader {
                kind: EventKind::Marker as u8,
                ..RecordHeader::default()
            },
            kind: EventKind::Marker,
            body: Body::Marker(Text {
                bytes: text,
                truncated,
            }),
        };
        let block = |pc| Event {
            header: RecordHeader {
                kind: EventKind::Block as u8,
                ..RecordHeader::default()
            },
            kind: EventKind::Block,
            body: Body::Args([pc, 4, 0, 0]),
        };
        let out = SharedOutput::default();
        let header = Header::now(1, "/usr/bin/qemu-x86_64", Vec::new());
        let mut writer = DrcovWriter::new(Box::new(out.clone()), &header);
        let guest = b"qemu x86_64 image 0x400000-0x4c0ee8 entry 0x4015b0: /tmp/g, 64";
        for event in [
            block(0x401000),
            marker(b"reset", false),
            marker(b"qemu x86_64 image 0x0-0x10 entry 0x0: /tmp/cut", true),
            marker(guest, false),
            marker(guest, false),
            block(0x4015b0),
        ] {
            writer.event(&event).unwrap();
        }
        let kinds = vec![0; EventKind::ALL.len() + 1];
        let totals = Totals {
            events: &kinds,
            drops: &kinds,
        };
        writer.finish(&totals).unwrap();
        let bytes = out.bytes();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains("Module Table: version 2, count 1\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "0, 0x0000000000400000, 0x00000000004c0ee8, 0x0000000000000000, /tmp/g_ 64\n"
            ),
            "{text}"
        );
        let table = &bytes[bytes.len() - 16..];
        assert_eq!(table[..4], 0x1000u32.to_le_bytes());
        assert_eq!(table[8..12], 0x15b0u32.to_le_bytes());
    }

    #[test]
    fn without_images_one_module_spans_the_blocks() {
        let m = executed_range(&[(0x1000, 4), (0x1010, 0x20)]);
        assert_eq!((m.name.as_str(), m.base, m.size), ("guest", 0x1000, 0x30));
    }
}
