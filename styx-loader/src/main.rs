//! styx-loader: traces a CPU emulator's styx USDT probes with eBPF.

use clap::Parser;
use std::process::ExitCode;
use styx_loader::{cli, trace};

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if cli.ebpf_log {
        // The eBPF programs log under their crate name; aya's own chatter is
        // only worth seeing when something goes wrong.
        env_logger::Builder::new()
            .filter_level(log::LevelFilter::Warn)
            .filter_module("styx", log::LevelFilter::Trace)
            .init();
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "styx-loader: error: loading eBPF programs needs root (CAP_BPF and CAP_PERFMON): run it with sudo"
        );
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("styx-loader: error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(trace::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("styx-loader: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
