//! styx-loader: traces a CPU emulator's styx USDT probes with eBPF.

use clap::Parser;
use std::process::ExitCode;
use styx_loader::cli::{Cli, Command, TraceArgs};
use styx_loader::{list, read, spawn, trace};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Command::List(args)) => list::run(args).map(|()| 0),
        Some(Command::Read(args)) => read::run(args).map(|()| 0),
        None => run_trace(cli.trace),
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("styx-loader: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_trace(args: TraceArgs) -> anyhow::Result<i32> {
    if args.ebpf_log {
        // The eBPF programs log under their crate name; aya's own chatter is
        // only worth seeing when something goes wrong.
        env_logger::Builder::new()
            .filter_level(log::LevelFilter::Warn)
            .filter_module("styx", log::LevelFilter::Trace)
            .init();
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!(
            "loading eBPF programs needs root (CAP_BPF and CAP_PERFMON): run it with sudo"
        );
    }
    // Fork before the runtime starts threads.
    let held = match args.command.as_slice() {
        [] => None,
        command => Some(spawn::hold(command)?),
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("starting the async runtime: {e}"))?
        .block_on(trace::run(args, held))
}
