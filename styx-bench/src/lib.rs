//! styx-bench: the workloads `cargo xtask bench` measures. One event stream,
//! a (pc, addr, val) memory read per event, sent these ways:
//!
//! - `none`: the loop alone, no probe;
//! - `nop1` (the `styx-bench` program): `styx_probe::mem_read!`, styx-probe's
//!   1-byte-nop site: one trap per event with per-event delivery (and
//!   bpftrace), appended to the thread's batch with batched delivery;
//! - `nop1-narrow` (the `styx-bench` program): the same site and stream as a
//!   16-bit guest fires it, `mem_read!(|| (pc as u16, addr as u16, val))`:
//!   each batched event carries its values in those widths (the batch item
//!   codec, `styx_common::item`), where `nop1`'s carry a u64 pc and address;
//! - `nop5` (the `styx-bench-nop5` program): a `styx:mem_read` site on a
//!   5-byte nop, a plain USDT site;
//! - `ipmpsc`: a shared-memory ring to a reader process, 24-byte events (Styx Trace's way);
//! - `trace-marker`: one `write` of a text line per event to ftrace's
//!   `trace_marker`, read from `trace_pipe` by another process (crosvm's way).
//!
//! The two probe sites live in two programs because each has a semaphore
//! of its own (styx-probe's is a 32-bit word the 5-byte site cannot name),
//! and bpftrace 0.17 raises only the first site's semaphore of a probe
//! with several sites (it takes one semaphore per probe name, as
//! `<sys/sdt.h>` probes have): with both in one program, one of them never
//! fired under bpftrace.
//!
//! And `ready`, a `styx_probe::mem_write!` the benchmark fires to learn when
//! bpftrace has attached and to wake it when stopping, so that those events
//! stay out of the measured memory-read stream. bpftrace attaches to the
//! per-event sites, so `ready` fires at once for it whatever styx-loader's
//! delivery; styx-loader sessions trace `-e mem_read` alone.
//!
//! Driven over stdin, one command per line, so a tracer can attach between
//! starting it and running a loop:
//!
//! - `run VIA N` answers `ran via=VIA events=N ns_per_event=F evaluated=E
//!   received=R reader_cpu_s=C` (E: probe arguments evaluated; R and C: what
//!   the reader process got and the CPU time it used, for ipmpsc and trace-marker);
//! - `quit`.

mod ipmpsc_ring;
mod trace_marker;

use anyhow::{bail, Context, Result};
use std::hint::black_box;
use std::io::{BufRead, Write};
use std::time::Instant;

/// What a run gave.
pub struct Ran {
    pub ns_per_event: f64,
    pub evaluated: u64,
    /// Events the reader process received, and its CPU seconds.
    pub reader: Option<(u64, f64)>,
}

impl Ran {
    /// A run with no reader process.
    pub fn plain(ns_per_event: f64, evaluated: u64) -> Ran {
        Ran {
            ns_per_event,
            evaluated,
            reader: None,
        }
    }
}

/// The program: a reader process if its arguments say so, else commands
/// from stdin. `probe` runs the ways only this program has (`nop1`, `nop5`):
/// `Some(run)` for one of them, `None` for any other name.
pub fn serve(probe: impl Fn(&str, u64) -> Option<Ran>) -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["read-ipmpsc", path, n] => return ipmpsc_ring::read(path, n.parse()?),
        ["read-trace-pipe", dir, n] => return trace_marker::read(dir.as_ref(), n.parse()?),
        [] => {}
        _ => bail!("usage: styx-bench (commands on stdin: `run VIA N`, `quit`)"),
    }
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["run", via, n] => {
                let n: u64 = n.parse().context("N")?;
                let ran = match probe(via, n) {
                    Some(ran) => ran,
                    None => run(via, n)?,
                };
                let (received, reader_cpu) = ran.reader.unwrap_or((0, 0.0));
                writeln!(
                    stdout.lock(),
                    "ran via={via} events={n} ns_per_event={:.3} evaluated={} received={received} reader_cpu_s={reader_cpu:.4}",
                    ran.ns_per_event, ran.evaluated
                )?;
            }
            ["quit"] => break,
            _ => bail!("unknown command {line:?}"),
        }
    }
    Ok(())
}

/// The ways both programs have.
fn run(via: &str, n: u64) -> Result<Ran> {
    Ok(match via {
        "none" => Ran::plain(timed(n, |_, _, _| 0), 0),
        "ready" => ready(n),
        "ipmpsc" => ipmpsc_ring::run(n)?,
        "trace-marker" => trace_marker::run(n)?,
        _ => bail!("unknown VIA {via:?}: none, nop1 and nop1-narrow (styx-bench), nop5 (styx-bench-nop5), ipmpsc, trace-marker or ready"),
    })
}

/// `n` handshake events: `styx_probe::mem_write!`.
#[inline(never)]
fn ready(n: u64) -> Ran {
    let mut evaluated = 0u64;
    let ns = timed(n, |pc, addr, val| {
        styx_probe::mem_write!(|| {
            evaluated += 1;
            (pc, addr, val)
        });
        0
    });
    Ran::plain(ns, evaluated)
}

/// Times `n` events of the stream through `emit`; returns ns per event.
#[inline(always)]
pub fn timed(n: u64, mut emit: impl FnMut(u64, u64, u8) -> u64) -> f64 {
    let started = Instant::now();
    let mut sink = 0u64;
    for i in 0..n {
        let (pc, addr, val) = event(i);
        sink = sink.wrapping_add(emit(pc, addr, val));
    }
    black_box(sink);
    started.elapsed().as_nanos() as f64 / n as f64
}

/// The i-th event of the stream: opaque to the optimizer, like an emulator's.
#[inline(always)]
pub fn event(i: u64) -> (u64, u64, u8) {
    (
        black_box(0x0600 + (i & 0xff)),
        black_box(i ^ 0x55),
        black_box(i as u8),
    )
}

/// CPU seconds (user + system) this process has used.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills one struct we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Starts this program again as a reader process with `args`.
fn spawn_reader(args: &[&str]) -> Result<std::process::Child> {
    std::process::Command::new(std::env::current_exe()?)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("starting the reader process")
}

/// A seed approach's run of `n` events, sent since `started`: what its
/// reader process got.
fn finished(n: u64, started: Instant, reader: std::process::Child) -> Result<Ran> {
    let ns_per_event = started.elapsed().as_nanos() as f64 / n as f64;
    Ok(Ran {
        ns_per_event,
        evaluated: n,
        reader: Some(reader_result(reader)?),
    })
}

/// Waits for a reader and parses its `received=R cpu_s=C` line.
fn reader_result(reader: std::process::Child) -> Result<(u64, f64)> {
    let output = reader.wait_with_output()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let field = |key: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .with_context(|| format!("no {key} in the reader's {text:?}"))
    };
    Ok((field("received=")?.parse()?, field("cpu_s=")?.parse()?))
}
