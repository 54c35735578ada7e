//! styx-rv: runs the guest program on the RISC-V machine N times and reports
//! guest instructions per second. Trace it with `sudo styx-loader -- styx-rv`.

use anyhow::Result;
use clap::Parser;
use std::time::Instant;
use styx_rv::{Counts, Machine};

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
