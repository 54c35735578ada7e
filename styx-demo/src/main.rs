//! styx-demo: runs real 6502 programs on an emulator instrumented with every
//! styx probe. Trace it with `sudo styx-loader --pid PID`.

use anyhow::{anyhow, Result};
use clap::Parser;
use std::time::Instant;
use styx_demo::{programs, Machine, Program};

/// A 6502 emulator instrumented with styx probes.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Program to run: sieve, sort, fib or all.
    #[arg(long, default_value = "all")]
    program: String,
    /// Run the programs this many times.
    #[arg(long, default_value_t = 1)]
    repeat: u64,
    /// Run until killed (so a tracer can attach by pid).
    #[arg(long)]
    forever: bool,
    /// Print only the final speed line.
    #[arg(long)]
    quiet: bool,
    /// Start only once a tracer has enabled the `control` probe (e.g. an
    /// attached styx-loader), so a short run is traced from its first instruction.
    #[arg(long)]
    wait_for_tracer: bool,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let selected: Vec<&Program> = if cli.program == "all" {
        programs::ALL.iter().collect()
    } else {
        vec![Program::by_name(&cli.program)
            .ok_or_else(|| anyhow!("no program {:?} (sieve, sort, fib, all)", cli.program))?]
    };
    eprintln!("styx-demo: pid {}", std::process::id());
    if cli.wait_for_tracer {
        while !styx_demo::machine::tracer_attached() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    let mut machine = Machine::new();
    let started = Instant::now();
    let mut round = 0;
    while cli.forever || round < cli.repeat {
        for program in &selected {
            let result = machine.run(program)?;
            if !cli.quiet && round == 0 {
                println!(
                    "{:<6} exit {:>3}, {:>7} instructions, output {:?}",
                    program.name,
                    result.exit_code,
                    result.instructions,
                    summary(&result.output)
                );
            }
        }
        round += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{} instructions in {secs:.3} s: {:.2} M instructions/s",
        machine.instructions,
        machine.instructions as f64 / secs / 1e6
    );
    Ok(())
}

fn summary(output: &[u8]) -> String {
    if output.len() <= 12 {
        format!("{output:?}")
    } else {
        format!("{:?}… ({} bytes)", &output[..12], output.len())
    }
}
