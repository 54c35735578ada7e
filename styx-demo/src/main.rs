//! styx-demo: runs real 6502 programs on an emulator instrumented with every
//! styx probe. Trace it with `sudo styx-loader --pid PID`.

use anyhow::Result;
use clap::builder::PossibleValuesParser;
use clap::Parser;
use std::time::{Duration, Instant};
use styx_demo::{machine, programs, Machine, Program, RunResult};

// The guest, for tracers: register names by the numbers `reg_read`/`reg_write`
// report, and the 64 KiB address space as one image (for drcov coverage).
styx_probe::describe! {
    arch: "6502",
    pc: "pc",
    registers: [
        ("a", styx_demo::registers::REG_A, 8),
        ("x", styx_demo::registers::REG_X, 8),
        ("y", styx_demo::registers::REG_Y, 8),
        ("sp", styx_demo::registers::REG_SP, 8),
        ("p", styx_demo::registers::REG_P, 8),
    ],
    images: [("6502-memory", 0x0000, 0x10000)],
}

/// How often `--forever` prints its speed (unless `--quiet`).
const REPORT_EVERY: Duration = Duration::from_secs(5);

/// A 6502 emulator instrumented with styx probes.
#[derive(Parser)]
#[command(version)]
struct Cli {
    /// Program to run.
    #[arg(long, default_value = "all", value_parser = program_names())]
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

fn program_names() -> PossibleValuesParser {
    PossibleValuesParser::new(programs::ALL.iter().map(|p| p.name).chain(["all"]))
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let selected: Vec<&Program> = match Program::by_name(&cli.program) {
        Some(program) => vec![program],
        None => programs::ALL.iter().collect(),
    };
    eprintln!("styx-demo: pid {}", std::process::id());
    if cli.wait_for_tracer {
        while !machine::tracer_attached() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    let mut machine = Machine::new();
    let started = Instant::now();
    let mut report = Speed::from(&machine);
    let mut round = 0;
    while cli.forever || round < cli.repeat {
        for program in &selected {
            let run_started = Instant::now();
            let result = machine.run(program)?;
            if !cli.quiet && round == 0 {
                print_result(program, &result, run_started.elapsed());
            }
        }
        round += 1;
        if cli.forever && !cli.quiet && report.since.elapsed() >= REPORT_EVERY {
            println!("{}", report.line(&machine));
            report = Speed::from(&machine);
        }
    }
    let total = Speed {
        since: started,
        instructions: 0,
    };
    println!("{}", total.line(&machine));
    Ok(())
}

/// Instructions per second since a starting point.
struct Speed {
    since: Instant,
    instructions: u64,
}

impl Speed {
    fn from(machine: &Machine) -> Speed {
        Speed {
            since: Instant::now(),
            instructions: machine.instructions(),
        }
    }

    /// The line scripts parse: the speed follows the first `": "`.
    fn line(&self, machine: &Machine) -> String {
        let secs = self.since.elapsed().as_secs_f64();
        let instructions = machine.instructions() - self.instructions;
        format!(
            "{instructions} instructions in {secs:.3} s: {:.2} M instructions/s",
            instructions as f64 / secs / 1e6
        )
    }
}

fn print_result(program: &Program, result: &RunResult, took: Duration) {
    println!(
        "{:<7} exit {:>3}, {:>6} instructions, {:>3} IRQs, {:>6.2} M instructions/s, output {}",
        program.name,
        result.exit_code,
        result.instructions,
        result.irqs,
        result.instructions as f64 / took.as_secs_f64() / 1e6,
        summary(&result.output)
    );
}

fn summary(output: &[u8]) -> String {
    const SHOWN: usize = 12;
    if output.len() <= SHOWN {
        format!("{output:?}")
    } else {
        let head: Vec<String> = output[..SHOWN].iter().map(u8::to_string).collect();
        format!("[{}, …] ({} bytes)", head.join(", "), output.len())
    }
}
