//! styx-rv: runs the guest program on the RISC-V machine N times and reports
//! guest instructions per second. Trace it with `sudo styx-loader -- styx-rv`.

use anyhow::Result;
use clap::Parser;
use std::time::Instant;
use styx_rv::{Counts, Machine};

// The guest, for tracers: the 32 integer registers by the numbers
// `reg_write` reports, and RAM as one image (for drcov coverage).
styx_probe::describe! {
    arch: "rv32im",
    pc: "pc",
    registers: [
        ("zero", styx_rv::registers::ZERO.0, 32),
        ("ra", styx_rv::registers::RA.0, 32),
        ("sp", styx_rv::registers::SP.0, 32),
        ("gp", styx_rv::registers::GP.0, 32),
        ("tp", styx_rv::registers::TP.0, 32),
        ("t0", styx_rv::registers::T0.0, 32),
        ("t1", styx_rv::registers::T1.0, 32),
        ("t2", styx_rv::registers::T2.0, 32),
        ("s0", styx_rv::registers::S0.0, 32),
        ("s1", styx_rv::registers::S1.0, 32),
        ("a0", styx_rv::registers::A0.0, 32),
        ("a1", styx_rv::registers::A1.0, 32),
        ("a2", styx_rv::registers::A2.0, 32),
        ("a3", styx_rv::registers::A3.0, 32),
        ("a4", styx_rv::registers::A4.0, 32),
        ("a5", styx_rv::registers::A5.0, 32),
        ("a6", styx_rv::registers::A6.0, 32),
        ("a7", styx_rv::registers::A7.0, 32),
        ("s2", styx_rv::registers::S2.0, 32),
        ("s3", styx_rv::registers::S3.0, 32),
        ("s4", styx_rv::registers::S4.0, 32),
        ("s5", styx_rv::registers::S5.0, 32),
        ("s6", styx_rv::registers::S6.0, 32),
        ("s7", styx_rv::registers::S7.0, 32),
        ("s8", styx_rv::registers::S8.0, 32),
        ("s9", styx_rv::registers::S9.0, 32),
        ("s10", styx_rv::registers::S10.0, 32),
        ("s11", styx_rv::registers::S11.0, 32),
        ("t3", styx_rv::registers::T3.0, 32),
        ("t4", styx_rv::registers::T4.0, 32),
        ("t5", styx_rv::registers::T5.0, 32),
        ("t6", styx_rv::registers::T6.0, 32),
    ],
    images: [("rv32-ram", 0, styx_rv::bus::RAM_SIZE as u64)],
}

/// A RISC-V machine (rrs-lib) instrumented with styx probes, running a
/// sieve, a sort and a checksum; each run's answers are checked.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Run the guest program this many times.
    #[arg(long, default_value_t = 1)]
    repeat: u64,
    /// Print only the final speed line (and the counts with --count).
    #[arg(long)]
    quiet: bool,
    /// Also count every event the probes fire for (instructions, memory
    /// reads and writes, register writes, taken branches) and print the
    /// totals: for tests. Runs a separately compiled counting machine, so
    /// the default one carries no counting.
    #[arg(long)]
    count: bool,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    eprintln!("styx-rv: pid {}", std::process::id());
    let started = Instant::now();
    let counts = if cli.count {
        run::<true>(&cli)?
    } else {
        run::<false>(&cli)?
    };
    if cli.count {
        println!(
            "counts: instructions {}, mem_read {}, mem_write {}, reg_write {}, branch {}",
            counts.instructions,
            counts.mem_reads,
            counts.mem_writes,
            counts.reg_writes,
            counts.branches
        );
    }
    // The line scripts parse: the speed follows the first `": "`.
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{} instructions in {secs:.3} s: {:.2} M instructions/s",
        counts.instructions,
        counts.instructions as f64 / secs / 1e6
    );
    Ok(())
}

/// Runs the guest `--repeat` times; the counts summed over the runs.
fn run<const COUNT: bool>(cli: &Cli) -> Result<Counts> {
    let mut machine = Machine::<COUNT>::new()?;
    let mut total = Counts::default();
    for round in 0..cli.repeat {
        let result = machine.run()?;
        if round == 0 && !cli.quiet {
            println!(
                "primes {}, checksum {:#010x}, {} instructions a run",
                result.answers.primes, result.answers.checksum, result.counts.instructions
            );
        }
        total += result.counts;
    }
    Ok(total)
}
