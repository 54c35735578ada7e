//! Tenet traces (the trace explorer for IDA, and its Ghidra importer): one
//! text line per executed instruction, `name=0x…` for each register that
//! changed, `mr=0xADDR:BYTES` / `mw=…` for each memory access with its real
//! size (bytes in memory order, little-endian guests), and the program
//! counter last.
//!
//! Tenet's lines are deltas taken when an instruction is reached: line `k`
//! holds what instruction `k-1` changed and the pc of instruction `k`. The
//! first line holds the registers known before the first instruction (the
//! values its `reg_read`s saw and its `reg_write`s replaced) and its pc; a
//! last line, without a pc, what the last instruction changed.
//!
//! Events belong to the instruction whose pc they carry. A thread's next
//! instruction begins at an `insn_fetch`, at an event with another pc, or at
//! a second `insn_exec` of the same pc (so a loop on one instruction needs
//! `insn_fetch` to split its memory accesses exactly).
//!
//! One thread per file: the first thread writes the output, each other
//! thread `NAME.TID.EXT` beside it (on stdout: the first thread only, the
//! others counted and reported). Register names come from the guest
//! description (`styx_probe::describe!`); without one there is no trace.
//! Tenet knows whole registers only: a sub-register's value (Z80's A in
//! AF) is merged into its parent's last value and the parent printed.

use crate::formats::output::{create_file, numbered_beside, Output};
use crate::record::event::{Body, Event};
use crate::session::guest::RegisterNames;
use crate::session::header::Header;
use crate::write::writer::{Chunked, EventWriter, Totals};
use rustc_hash::FxHashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use styx_common::EventKind;

/// Threads given a file of their own; events of more are counted.
pub const MAX_THREADS: usize = 1024;
/// Memory accesses and registers kept per instruction (a capture could
/// claim any number under one pc); more are counted.
pub const MAX_PER_INSN: usize = 4096;

/// Tenet lines, one file per thread.
pub struct TenetWriter {
    registers: RegisterNames,
    pc_name: String,
    /// The output for the first thread; None once taken.
    first: Option<Box<dyn Write>>,
    /// The output's path, beside which the other threads' files go.
    path: Option<PathBuf>,
    threads: FxHashMap<u32, Thread>,
    /// Events of threads that got no file.
    left_out: u64,
    /// Accesses and registers past [`MAX_PER_INSN`] in one instruction.
    over: u64,
}

struct Thread {
    out: Chunked<Box<dyn Write>>,
    /// The instruction whose events are coming in.
    current: Option<Insn>,
    lines: u64,
    /// Whole registers' last values, which sub-registers' values go into.
    values: FxHashMap<u64, u64>,
}

#[derive(Default)]
struct Insn {
    pc: u64,
    executed: bool,
    /// Registers' values before it, where its events tell (for line 1).
    before: Vec<(u64, u64)>,
    /// Registers it wrote, last value.
    written: Vec<(u64, u64)>,
    /// Memory accesses: (write?, address, value, size).
    memory: Vec<(bool, u64, u64, u8)>,
}

impl TenetWriter {
    /// A Tenet trace on `out` (and files beside `output`'s for more
    /// threads); an error if the emulator named no registers.
    pub fn new(out: Box<dyn Write>, header: &Header, output: &Output) -> io::Result<TenetWriter> {
        let Some(guest) = header.guest.as_ref().filter(|g| !g.registers.is_empty()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "-o tenet needs register names, and this emulator did not describe its guest \
                 (styx_probe::describe!)",
            ));
        };
        Ok(TenetWriter {
            registers: RegisterNames::new(Some(guest)),
            pc_name: guest.pc.clone(),
            first: Some(out),
            path: output.path().map(Path::to_path_buf),
            threads: FxHashMap::default(),
            left_out: 0,
            over: 0,
        })
    }

    /// Opens the thread's file on its first event; false if it gets none.
    fn open_thread(&mut self, tid: u32) -> io::Result<bool> {
        if !self.threads.contains_key(&tid) {
            let out: Box<dyn Write> = match (self.first.take(), &self.path) {
                (Some(out), _) => out,
                (None, Some(path)) if self.threads.len() < MAX_THREADS => {
                    Box::new(create_file(&numbered_beside(path, tid))?)
                }
                (None, _) => return Ok(false),
            };
            let thread = Thread {
                out: Chunked::new(out, 64 << 10),
                current: None,
                lines: 0,
                values: FxHashMap::default(),
            };
            self.threads.insert(tid, thread);
        }
        Ok(true)
    }
}

impl EventWriter for TenetWriter {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        let (Body::Args(args), true) = (&event.body, takes(event.kind)) else {
            return Ok(());
        };
        let tid = event.header.tid;
        if !self.open_thread(tid)? {
            self.left_out += 1;
            return Ok(());
        }
        let registers = &self.registers;
        let pc_name = self.pc_name.as_str();
        let thread = self.threads.get_mut(&tid).expect("opened above");
        let pc = args[0];
        let next = match &thread.current {
            None => true,
            Some(current) => {
                event.kind == EventKind::InsnFetch
                    || current.pc != pc
                    || (event.kind == EventKind::InsnExec && current.executed)
            }
        };
        if next {
            thread.begin(pc, registers, pc_name);
        }
        let values = &mut thread.values;
        let insn = thread.current.as_mut().expect("begun above");
        if [insn.memory.len(), insn.written.len(), insn.before.len()]
            .iter()
            .any(|&n| n >= MAX_PER_INSN)
        {
            self.over += 1;
            return Ok(());
        }
        match event.kind {
            EventKind::InsnExec => insn.executed = true,
            EventKind::RegRead => {
                let (num, val) = whole(registers, values, args[1], args[2]);
                know(&mut insn.before, num, val);
                remember(registers, values, num, val);
            }
            EventKind::RegWrite => {
                let (num, old) = whole(registers, values, args[1], args[3]);
                let (_, val) = whole(registers, values, args[1], args[2]);
                know(&mut insn.before, num, old);
                set(&mut insn.written, num, val);
                remember(registers, values, num, val);
            }
            EventKind::MemRead | EventKind::MemWrite => insn.memory.push((
                event.kind == EventKind::MemWrite,
                args[1],
                args[2],
                event.header.aux,
            )),
            _ => {}
        }
        thread.out.event_done()
    }

    fn flush(&mut self) -> io::Result<()> {
        for thread in self.threads.values_mut() {
            thread.out.flush()?;
        }
        Ok(())
    }

    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        let mut result = Ok(());
        for thread in self.threads.values_mut() {
            thread.end(&self.registers, &self.pc_name);
            if let Err(e) = thread.out.flush() {
                result = result.and(Err(e));
            }
        }
        if self.over > 0 {
            log::warn!(
                "tenet: {} events past {MAX_PER_INSN} accesses or registers in one instruction \
                 left out",
                self.over
            );
        }
        if self.left_out > 0 {
            log::warn!(
                "tenet: {} events of other threads left out ({}); give --output FILE for a \
                 file per thread (at most {MAX_THREADS})",
                self.left_out,
                if self.path.is_none() {
                    "stdout holds one thread"
                } else {
                    "too many threads"
                }
            );
        }
        if self.threads.len() > 1 {
            if let Some(path) = &self.path {
                log::info!(
                    "tenet: {} threads: the first in {}, the others in {}",
                    self.threads.len(),
                    path.display(),
                    numbered_beside(path, "TID").display()
                );
            }
        }
        result
    }
}

/// The kinds whose events make a Tenet line.
fn takes(kind: EventKind) -> bool {
    matches!(
        kind,
        EventKind::InsnFetch
            | EventKind::InsnExec
            | EventKind::RegRead
            | EventKind::RegWrite
            | EventKind::MemRead
            | EventKind::MemWrite
    )
}

impl Thread {
    /// Instruction `pc` begins: writes the line the one before completes.
    fn begin(&mut self, pc: u64, registers: &RegisterNames, pc_name: &str) {
        if let Some(done) = self.current.take() {
            if self.lines == 0 {
                self.line(&done.before, &[], Some(done.pc), registers, pc_name);
            }
            self.line(&done.written, &done.memory, Some(pc), registers, pc_name);
        }
        self.current = Some(Insn {
            pc,
            ..Insn::default()
        });
    }

    /// The end of the trace: the last instruction's changes.
    fn end(&mut self, registers: &RegisterNames, pc_name: &str) {
        if let Some(done) = self.current.take() {
            if self.lines == 0 {
                self.line(&done.before, &[], Some(done.pc), registers, pc_name);
            }
            if !done.written.is_empty() || !done.memory.is_empty() {
                self.line(&done.written, &done.memory, None, registers, pc_name);
            }
        }
    }

    fn line(
        &mut self,
        regs: &[(u64, u64)],
        memory: &[(bool, u64, u64, u8)],
        pc: Option<u64>,
        registers: &RegisterNames,
        pc_name: &str,
    ) {
        let b = &mut self.out.buf;
        let mut first = true;
        let mut sep = |b: &mut crate::write::buf::ByteBuf| {
            if !std::mem::take(&mut first) {
                b.push(b',');
            }
        };
        for &(num, val) in regs {
            sep(b);
            match registers.get(num) {
                Some(name) => b.extend_from_slice(name.as_bytes()),
                None => {
                    b.push(b'r');
                    b.dec(num);
                }
            }
            b.push(b'=');
            b.hex(val);
        }
        for &(write, addr, val, size) in memory {
            sep(b);
            b.extend_from_slice(if write { b"mw=" } else { b"mr=" });
            b.hex(addr);
            b.push(b':');
            for byte in val.to_le_bytes().iter().take(usize::from(size.clamp(1, 8))) {
                b.extend_from_slice(&hex_byte(*byte));
            }
        }
        if let Some(pc) = pc {
            sep(b);
            b.extend_from_slice(pc_name.as_bytes());
            b.push(b'=');
            b.hex(pc);
        }
        b.push(b'\n');
        self.lines += 1;
    }
}

fn hex_byte(byte: u8) -> [u8; 2] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    [
        DIGITS[usize::from(byte >> 4)],
        DIGITS[usize::from(byte & 0xf)],
    ]
}

/// Register `num` holding `val`, as Tenet names it: a sub-register's
/// bits merged into its parent's last value (bits not seen yet are 0), a
/// whole register as it is. Parts past bit 63 are not Tenet's.
fn whole(
    registers: &RegisterNames,
    values: &FxHashMap<u64, u64>,
    num: u64,
    val: u64,
) -> (u64, u64) {
    let Some((within, bits)) = registers.within(num) else {
        return (num, val);
    };
    let last = values.get(&within.parent).copied().unwrap_or(0);
    let ones = u64::MAX
        .checked_shr(64u32.saturating_sub(u32::from(bits)))
        .unwrap_or(0);
    let merged = match ones.checked_shl(u32::from(within.shift)) {
        Some(mask) => (last & !mask) | ((val & ones) << within.shift),
        None => last,
    };
    (within.parent, merged)
}

/// Keeps whole register `num`'s latest value for the sub-registers to come;
/// nothing to keep for a guest without sub-registers.
fn remember(registers: &RegisterNames, values: &mut FxHashMap<u64, u64>, num: u64, val: u64) {
    if registers.has_sub_registers() {
        values.insert(num, val);
    }
}

/// Records a register's value before the instruction, if not known yet.
fn know(values: &mut Vec<(u64, u64)>, num: u64, val: u64) {
    if !values.iter().any(|&(n, _)| n == num) {
        values.push((num, val));
    }
}

/// Records a register's latest value.
fn set(values: &mut Vec<(u64, u64)>, num: u64, val: u64) {
    match values.iter_mut().find(|(n, _)| *n == num) {
        Some(slot) => slot.1 = val,
        None => values.push((num, val)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::guest::{Guest, Register, Within};
    use styx_common::RecordHeader;

    fn header() -> Header {
        let mut header = Header::now(1, "/bin/emu", Vec::new());
        header.guest = Some(Guest {
            arch: "toy".into(),
            pc: "ip".into(),
            registers: vec![Register {
                num: 3,
                name: "sp".into(),
                bits: 32,
                within: None,
            }],
            images: Vec::new(),
        });
        header
    }

    fn event(tid: u32, kind: EventKind, aux: u8, args: [u64; 4]) -> Event<'static> {
        Event {
            header: RecordHeader {
                ts_ns: 1,
                pid: 1,
                tid,
                kind: kind as u8,
                aux,
                _reserved: [0; 6],
            },
            kind,
            body: Body::Args(args),
        }
    }

    /// Two threads' instructions, interleaved: each thread's file holds its
    /// own lines, the first the `--output` file, the second `NAME.TID.EXT`.
    #[test]
    fn each_thread_gets_its_file_and_its_own_lines() {
        let dir = std::env::temp_dir().join(format!("styx-tenet-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.tenet");
        let out = Box::new(create_file(&path).unwrap());
        let mut writer = TenetWriter::new(out, &header(), &Output::File(path.clone())).unwrap();
        let events = [
            event(10, EventKind::InsnFetch, 0, [0x100, 0, 0, 0]),
            event(20, EventKind::InsnFetch, 0, [0x200, 0, 0, 0]),
            event(10, EventKind::RegWrite, 0, [0x100, 3, 0xff0, 0x1000]),
            event(20, EventKind::MemWrite, 2, [0x200, 0x40, 0xbeef, 0]),
            event(10, EventKind::InsnFetch, 0, [0x102, 0, 0, 0]),
            event(10, EventKind::RegWrite, 0, [0x102, 9, 5, 4]),
            event(20, EventKind::InsnFetch, 0, [0x204, 0, 0, 0]),
            event(20, EventKind::RegRead, 0, [0x204, 3, 7, 0]),
        ];
        for e in &events {
            writer.event(e).unwrap();
        }
        writer
            .finish(&Totals {
                events: &[0; 16],
                drops: &[0; 16],
            })
            .unwrap();
        let first = std::fs::read_to_string(&path).unwrap();
        // The last line: what the last instruction changed, no pc; a
        // register the description does not name goes by its number.
        assert_eq!(first, "sp=0x1000,ip=0x100\nsp=0xff0,ip=0x102\nr9=0x5\n");
        let second = std::fs::read_to_string(dir.join("run.20.tenet")).unwrap();
        assert_eq!(second, "ip=0x200\nmw=0x40:efbe,ip=0x204\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Writes through sub-registers, and a read of one, print their
    /// parent with the bits merged into its last value.
    #[test]
    fn sub_registers_print_as_their_parents() {
        let mut header = header();
        let guest = header.guest.as_mut().unwrap();
        let reg = |name: &str, num: u64, bits: u16, within: Option<Within>| Register {
            num,
            name: name.into(),
            bits,
            within,
        };
        let af = Some(Within {
            parent: 0,
            shift: 0,
        });
        guest.registers = vec![
            reg("af", 0, 16, None),
            reg("a", 1, 8, af.map(|w| Within { shift: 8, ..w })),
            reg("f", 2, 8, af),
        ];
        let out = crate::write::writer::SharedOutput::default();
        let mut writer = TenetWriter::new(Box::new(out.clone()), &header, &Output::Stdout).unwrap();
        let insn = |pc: u64| event(1, EventKind::InsnExec, 0, [pc, 0, 0, 0]);
        let write = |pc: u64, reg: u64, val: u64, old: u64| {
            event(1, EventKind::RegWrite, 0, [pc, reg, val, old])
        };
        for e in [
            insn(0x10),
            write(0x10, 1, 0x12, 0x00),
            insn(0x11),
            write(0x11, 2, 0x34, 0x00),
            insn(0x12),
            write(0x12, 0, 0xbeef, 0x1234),
            insn(0x13),
            event(1, EventKind::RegRead, 0, [0x13, 1, 0xbe, 0]),
            write(0x13, 2, 0x1ff, 0xef),
        ] {
            writer.event(&e).unwrap();
        }
        writer
            .finish(&Totals {
                events: &[0; 16],
                drops: &[0; 16],
            })
            .unwrap();
        assert_eq!(
            String::from_utf8(out.bytes()).unwrap(),
            "af=0x0,ip=0x10\naf=0x1200,ip=0x11\naf=0x1234,ip=0x12\naf=0xbeef,ip=0x13\naf=0xbeff\n"
        );
    }

    #[test]
    fn without_register_names_it_says_so() {
        let mut header = header();
        header.guest = None;
        let err = TenetWriter::new(Box::new(io::sink()), &header, &Output::Stdout).err();
        assert!(err.unwrap().to_string().contains("needs register names"));
    }
}
