//! styx-loader: traces a CPU emulator's styx USDT probes with eBPF.
//!
//! The binary's edge: the command line ([`cli`]), the commands ([`cmd`]),
//! what a target has beyond its probes ([`search`]), where events go
//! ([`outputs`]), a tracing session ([`session`]) and the kernel side
//! ([`bpf`]). Finding probes and reading their notes and
//! argument specs is styx-usdt's; decoding records, fields, formats and
//! captures are styx-events'.
//!
//! Tracing needs the `trace` feature (on by default), which brings aya and
//! tokio; without it the binary still lists probes and reads captures.

mod bpf;
mod cli;
mod cmd;
mod outputs;
mod search;
#[cfg(feature = "trace")]
mod session;

use clap::Parser;
use cli::{Cli, Command, TopArgs, TopOptions, TraceArgs};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ebpf_log = match &cli.command {
        Some(Command::Top(top)) => top.trace.ebpf_log,
        _ => cli.trace.ebpf_log,
    };
    Logger::install(ebpf_log);
    let result = match cli.command {
        Some(Command::List(args)) => cmd::list::run(&args).map(|()| 0),
        Some(Command::Read(args)) => cmd::read::run(&args).map(|()| 0),
        Some(Command::Top(args)) => {
            let TopArgs { read, top, trace } = *args;
            match read {
                Some(capture) => cmd::read::run_top(capture, top, trace).map(|()| 0),
                None => run_trace(trace, Some(top)),
            }
        }
        None => run_trace(cli.trace, None),
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("styx-loader: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(not(feature = "trace"))]
fn run_trace(_: TraceArgs, _: Option<TopOptions>) -> anyhow::Result<i32> {
    anyhow::bail!(
        "this styx-loader was built without the `trace` feature: it can only `list` and `read`"
    )
}

#[cfg(feature = "trace")]
fn run_trace(args: TraceArgs, top: Option<TopOptions>) -> anyhow::Result<i32> {
    if !nix::unistd::geteuid().is_root() {
        anyhow::bail!(
            "loading eBPF programs needs root (CAP_BPF and CAP_PERFMON): run it with sudo"
        );
    }
    // Look the user up before anything starts, and fork before the runtime
    // starts threads.
    if args.user.is_some() && args.command.is_empty() {
        anyhow::bail!(
            "--user is for a command given after `--`; it does not apply to --pid or --binary"
        );
    }
    let run_as = args
        .user
        .as_deref()
        .map(session::spawn::RunAs::lookup)
        .transpose()?;
    let held = match args.command.as_slice() {
        [] => None,
        command => {
            let lossless = cmd::trace::lossless_mode(&args, top.is_some());
            let _claim =
                session::batches::flow::ChildClaim::set(lossless != session::Lossless::Off);
            Some(session::spawn::hold(command, run_as.as_ref())?)
        }
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("starting the async runtime: {e}"))?
        .block_on(cmd::trace::run(args, held, top))
}

/// Prints warnings and notes (the libraries' and the loader's own) as `styx-loader: warning: …`
/// lines on stderr; with `--ebpf-log`, also the eBPF programs' own log
/// (aya-log, under their crate name `styx`) and aya's warnings.
struct Logger {
    ebpf_log: AtomicBool,
}

static LOGGER: Logger = Logger {
    ebpf_log: AtomicBool::new(false),
};

impl Logger {
    fn install(ebpf_log: bool) {
        LOGGER.ebpf_log.store(ebpf_log, Ordering::Relaxed);
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(if ebpf_log {
                log::LevelFilter::Trace
            } else {
                log::LevelFilter::Info
            });
        }
    }

    fn ebpf_log(&self) -> bool {
        self.ebpf_log.load(Ordering::Relaxed)
    }
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        let target = metadata.target();
        if target.starts_with("styx_") {
            metadata.level() <= log::Level::Info
        } else if target == "styx" || target.starts_with("styx::") {
            self.ebpf_log()
        } else {
            self.ebpf_log() && metadata.level() <= log::Level::Warn
        }
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let target = record.target();
        let what = match record.level() {
            _ if !target.starts_with("styx_") => {
                format!("{} {}", target, record.level().as_str().to_lowercase())
            }
            log::Level::Error => "error".to_string(),
            log::Level::Warn => "warning".to_string(),
            _ => "note".to_string(),
        };
        eprintln!("styx-loader: {what}: {}", record.args());
    }

    fn flush(&self) {}
}
