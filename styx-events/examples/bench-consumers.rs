//! Consumer benchmark: how fast styx-events (behind `styx-loader read`) turns a capture into each
//! output format, on one core. Run it with `cargo xtask bench-consumers`.
//!
//! Writes 10 million events of an emulator-like mix (instructions, memory
//! and register accesses, branches, blocks, now and then an interrupt, a
//! span or a marker, a second thread) into a capture, then reads it back
//! once per format, formatting into a sink (so disk speed does not count).
//! Prints events/s per format beside the Styx figures the issue gives, and
//! the capture's bytes per event. It prints figures; it asserts nothing.

use std::fs::File;
use std::io;
use std::path::Path;
use std::time::Instant;
use styx_common::{Branch, BranchKind, EventKind, RecordHeader};
use styx_events::{clock_ns, Body, CaptureWriter, ClockId, Compression, Event, EventWriter};
use styx_events::{Format, Guest};
use styx_events::{Header, Options, Reader, Register, Text, Totals};

/// Events per capture unless `--events=N` says otherwise.
const EVENTS: u64 = 10_000_000;

fn main() -> anyhow::Result<()> {
    // `bench-consumers [--events=N] [FORMAT…]`: FORMATs run only those (for profiling).
    let mut events = EVENTS;
    let mut only = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.strip_prefix("--events=") {
            Some(n) => events = n.parse()?,
            None => only.push(arg),
        }
    }
    pin_to_one_core();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let mixed = dir.join("bench-consumers.styx");
    let reads = dir.join("bench-consumers-mem-read.styx");
    let mut header = Header::now(
        std::process::id(),
        "bench-consumers (synthetic)",
        Vec::new(),
    );
    // Register names, as an emulator's `describe!` gives them (Tenet needs them).
    header.guest = Some(Guest {
        arch: "synthetic".into(),
        pc: "pc".into(),
        registers: (0..32)
            .map(|num| Register {
                num,
                name: format!("r{num}"),
                bits: 64,
                within: None,
            })
            .collect(),
        images: Vec::new(),
    });

    let started = Instant::now();
    write_capture(&mixed, &header, events, |_| true)?;
    let mem_reads = write_capture(&reads, &header, events, |e| e.kind == EventKind::MemRead)?;
    let body = |path: &Path| -> anyhow::Result<u64> {
        let json = serde_json::to_vec(&header)?.len() as u64;
        Ok(std::fs::metadata(path)?.len() - 16 - json)
    };
    println!(
        "{events} mixed events written in {:.1} s: {:.1} MB, {:.2} bytes/event; mem_read alone {:.2} bytes/event (target <= 24)",
        started.elapsed().as_secs_f64(),
        body(&mixed)? as f64 / 1e6,
        body(&mixed)? as f64 / events as f64,
        body(&reads)? as f64 / mem_reads as f64,
    );

    println!(
        "\n{:<10} {:>12} {:>10} {:>10}",
        "format", "M events/s", "Styx", "target"
    );
    let row = |name: &str, rate: f64, styx: &str, target: &str| {
        println!("{name:<10} {:>12.1} {styx:>10} {target:>10}", rate / 1e6);
    };
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    if wanted("read") {
        row("read", read_only(&mixed)?, "20.7", ">= 50");
    }
    for format in BENCHED {
        let (styx, target) = reference(format);
        if wanted(format.name()) {
            row(format.name(), convert(&mixed, format)?, styx, target);
        }
    }
    println!("\n(one core, CPU time of the converting thread, page-cached capture, output to a sink; read = decode only)");
    std::fs::remove_file(&mixed)?;
    std::fs::remove_file(&reads)?;
    Ok(())
}

/// The formats measured, in the order of the table: every format but the
/// raw capture (`read` is its cost: decoding it is what every conversion
/// starts with) and folded stacks (the mix has no traced functions).
/// xtask's `bench/consumers.rs` takes its rows from the table printed.
const BENCHED: [Format; 7] = [
    Format::Jsonl,
    Format::Text,
    Format::Chrome,
    Format::Perfetto,
    Format::Drcov,
    Format::Tenet,
    Format::Parquet,
];

/// The Styx figure for a format and the target, as the issue gives them.
fn reference(format: Format) -> (&'static str, &'static str) {
    match format {
        Format::Jsonl => ("6.0", ">= 12"),
        Format::Text => ("2.6", ">= 5"),
        Format::Parquet => ("-", ">= 10"),
        _ => ("-", "-"),
    }
}

/// This thread's CPU time: on a shared machine, the time others take from
/// the core does not count against the formats.
fn cpu_seconds() -> f64 {
    clock_ns(ClockId::ThreadCPUTime) as f64 / 1e9
}

/// Decodes every event and touches it, formatting nothing.
fn read_only(path: &Path) -> anyhow::Result<f64> {
    let started = cpu_seconds();
    let mut reader = Reader::open(File::open(path)?)?;
    let mut checksum = 0u64;
    while let Some(event) = reader.next()? {
        checksum = checksum.wrapping_add(event.header.ts_ns);
        if let Body::Args(a) = event.body {
            checksum ^= a[1];
        }
    }
    std::hint::black_box(checksum);
    Ok(reader.events as f64 / (cpu_seconds() - started))
}

/// Decodes and formats every event into a sink.
fn convert(path: &Path, format: Format) -> anyhow::Result<f64> {
    let started = cpu_seconds();
    let mut reader = Reader::open(File::open(path)?)?;
    let header = reader.header.clone();
    let mut writer =
        styx_events::open_stream(format, Box::new(io::sink()), &header, &Options::default())?;
    let mut counts = [0u64; 16];
    while let Some(event) = reader.next()? {
        counts[event.kind as usize] += 1;
        writer.event(&event)?;
    }
    writer.finish(&Totals {
        events: &counts,
        drops: &[0; 16],
    })?;
    Ok(reader.events as f64 / (cpu_seconds() - started))
}

/// Writes the first `n` events of the mix that `keep` keeps; returns how many.
fn write_capture(
    path: &Path,
    header: &Header,
    n: u64,
    keep: impl Fn(&Event<'_>) -> bool,
) -> anyhow::Result<u64> {
    let mut writer = CaptureWriter::new(File::create(path)?, header, Compression::Zstd)?;
    let mut emu = Emulator::new(header.pid);
    let mut counts = [0u64; 16];
    let mut written = 0;
    while written < n {
        emu.step(|event| {
            if written < n && keep(event) {
                counts[event.kind as usize] += 1;
                written += 1;
                writer.event(event).expect("writing the capture");
            }
        });
    }
    writer.finish(&Totals {
        events: &counts,
        drops: &[0; 16],
    })?;
    Ok(written)
}

/// A made-up CPU's event stream: what an instrumented interpreter emits.
struct Emulator {
    rng: u64,
    ts: u64,
    pc: u64,
    addr: u64,
    regs: [u64; 4],
    pid: u32,
    steps: u64,
    span: u64,
}

impl Emulator {
    fn new(pid: u32) -> Emulator {
        Emulator {
            rng: 0x9e37_79b9_7f4a_7c15,
            ts: 20_000_000_000_000,
            pc: 0x8000,
            addr: 0x0200,
            regs: [0; 4],
            pid,
            steps: 0,
            span: 0,
        }
    }

    /// xorshift64: a fixed, cheap sequence.
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn event(
        &mut self,
        kind: EventKind,
        aux: u8,
        body: Body<'static>,
        emit: &mut impl FnMut(&Event<'_>),
    ) {
        self.ts += 150 + self.next() % 300;
        // Mostly the CPU thread; now and then another (an audio thread, say).
        let tid = if self.next().is_multiple_of(1000) {
            self.pid + 1
        } else {
            self.pid
        };
        let event = Event {
            header: RecordHeader {
                ts_ns: self.ts,
                pid: self.pid,
                tid,
                kind: kind as u8,
                aux,
                _reserved: [0; 6],
            },
            kind,
            body,
        };
        emit(&event);
    }

    /// One instruction's events.
    // Over 80 lines: a straight script of the made-up instruction's events;
    // the benchmark's figures depend on this mix staying as it is.
    fn step(&mut self, mut emit: impl FnMut(&Event<'_>)) {
        self.steps += 1;
        let r = self.next();
        let pc = self.pc;
        let opcode = r & 0xff;
        self.event(
            EventKind::InsnExec,
            0,
            Body::Args([pc, opcode, 0, 0]),
            &mut emit,
        );
        if r >> 8 & 0xf < 10 {
            // Zero page, stack or a nearby operand.
            self.addr = match r >> 12 & 3 {
                0 => r >> 16 & 0xff,
                1 => 0x100 | (r >> 16 & 0xff),
                _ => (self.addr + (r >> 16 & 7)) & 0xffff,
            };
            let val = r >> 24 & 0xff;
            self.event(
                EventKind::MemRead,
                1,
                Body::Args([pc, self.addr, val, 0]),
                &mut emit,
            );
        }
        if r >> 26 & 0xf < 3 {
            let val = r >> 30 & 0xff;
            self.event(
                EventKind::MemWrite,
                1,
                Body::Args([pc, self.addr, val, 0]),
                &mut emit,
            );
        }
        if r >> 38 & 1 == 0 {
            let reg = r >> 39 & 3;
            let old = self.regs[reg as usize];
            let val = r >> 41 & 0xff;
            self.regs[reg as usize] = val;
            self.event(
                EventKind::RegWrite,
                0,
                Body::Args([pc, reg, val, old]),
                &mut emit,
            );
        }
        let size = 1 + (r >> 50) % 3;
        if r >> 52 & 7 == 0 {
            let target = (pc as i64 + ((r >> 56) as i8) as i64) as u64 & 0xffff;
            let branch = Branch::conditional(BranchKind::Jump).encode();
            self.event(
                EventKind::Branch,
                0,
                Body::Args([pc, target, branch, 0]),
                &mut emit,
            );
            self.event(EventKind::Block, 0, Body::Args([pc, size, 0, 0]), &mut emit);
            self.pc = target;
        } else {
            self.pc = (pc + size) & 0xffff;
        }
        if self.steps.is_multiple_of(5000) {
            let irq = Body::Args([0, 2, pc, 0xfffe]);
            self.event(EventKind::Interrupt, 0, irq, &mut emit);
        }
        if self.steps.is_multiple_of(20_000) {
            self.span += 1;
            let span = |id| Body::Span {
                id,
                category: Text {
                    bytes: b"cpu",
                    truncated: false,
                },
                name: Text {
                    bytes: b"frame",
                    truncated: false,
                },
            };
            self.event(EventKind::SpanEnd, 0, span(self.span - 1), &mut emit);
            self.event(EventKind::SpanBegin, 0, span(self.span), &mut emit);
            let marker = Body::Marker(Text {
                bytes: b"vblank",
                truncated: false,
            });
            self.event(EventKind::Marker, 0, marker, &mut emit);
        }
    }
}

/// One core, as the targets are stated.
fn pin_to_one_core() {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET and sched_setaffinity
    // only touch the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every format is measured or said not to be.
    #[test]
    fn the_benched_formats_are_the_format_list() {
        let skipped = [Format::Raw, Format::Folded];
        let mut all: Vec<Format> = BENCHED.into_iter().chain(skipped).collect();
        all.sort_by_key(|f| f.name());
        let mut every = Format::ALL.to_vec();
        every.sort_by_key(|f| f.name());
        assert_eq!(all, every);
    }
}
