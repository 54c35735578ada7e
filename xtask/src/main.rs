//! `cargo xtask <command>`: the project's chores.

mod bench;
mod build_ebpf;
mod demo;
mod fuzz;
mod layout;
mod setup;
mod test;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "styx's chores")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build the eBPF programs (nightly + bpf-linker) into styx-loader/ebpf/styx.bpf.o.
    BuildEbpf {
        /// Do not write: fail if the committed object differs from what the source builds.
        #[arg(long)]
        check: bool,
    },
    /// Install what this machine lacks for building eBPF and running the tests.
    Setup,
    /// Set up, build, and run the 6502 demo emulator traced by styx-loader.
    Demo,
    /// Benchmark styx against the anchors (the demo compiled out, detached and
    /// attached; cost per event vs bpftrace; an ipmpsc ring and trace_marker;
    /// consumers; probe-site encodings; the realistic RISC-V workload),
    /// interleaved and repeated; writes BENCHMARKS.md. Needs root.
    Bench {
        /// Fewer rounds and smaller runs: under two minutes once built.
        #[arg(long)]
        quick: bool,
        /// Also build the realistic workload (styx-rv) against styx-probe
        /// and styx-common as they were at this git revision, and measure
        /// it compiled out and detached beside the current build: the
        /// detached cost before and after; and build the revision's own
        /// styx-loader and styx-bench, for the tight loop's batched cost
        /// before and after.
        #[arg(long, value_name = "REV")]
        probe_baseline: Option<String>,
    },
    /// Measure styx-qemu, the QEMU plugin, on a CPU-bound guest under
    /// qemu-x86_64: without the plugin against loaded and detached
    /// (alternating), traced with every event type (events/s), and QEMU's
    /// own `-d nochain,exec` log. Prints the figures. Needs root.
    BenchQemu {
        /// Rounds (each runs every case once).
        #[arg(long, default_value_t = 7)]
        rounds: usize,
    },
    /// Measure only how fast captures convert to each format (10 M events,
    /// one core), and capture bytes per event.
    BenchConsumers,
    /// Fuzz the parsers the root loader runs on other people's files
    /// (argument specs, USDT notes, captures through every format) with
    /// cargo-fuzz on nightly: N seconds per target. Installs cargo-fuzz if
    /// missing; a crash fails and is saved under fuzz/artifacts/.
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Targets to run (default: all: argspec, notes, capture, batch).
        targets: Vec<String>,
    },
    /// Set up, check the committed eBPF object, and run every test.
    Test {
        /// Extra arguments for `cargo test`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let root = workspace_root();
    match cli.command {
        Command::BuildEbpf { check } => {
            setup::ensure_ebpf_toolchain(&root)?;
            build_ebpf::run(&root, check)
        }
        Command::Setup => setup::run(&root),
        Command::Demo => demo::run(&root),
        Command::Bench {
            quick,
            probe_baseline,
        } => bench::run(&root, quick, probe_baseline.as_deref()),
        Command::BenchQemu { rounds } => bench::qemu::run(&root, rounds),
        Command::BenchConsumers => run_checked(
            std::process::Command::new("cargo")
                .args(["run", "--release", "--quiet", "-p", "styx-events"])
                .args(["--example", "bench-consumers"])
                .current_dir(&root),
        ),
        Command::Fuzz { seconds, targets } => fuzz::run(&root, seconds, &targets),
        Command::Test { args } => test::run(&root, &args),
    }
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Runs a command, failing with its command line if it does not succeed.
fn run_checked(command: &mut std::process::Command) -> Result<()> {
    let status = command
        .status()
        .map_err(|e| anyhow::anyhow!("cannot run {:?}: {e}", command.get_program()))?;
    anyhow::ensure!(status.success(), "{command:?} failed: {status}");
    Ok(())
}
