//! A tracing session: attach, stream events until told to stop, report.

use crate::cli::Cli;
use crate::drain::{drain, Counts, Drained};
use crate::ebpf::{self, LoadOptions};
use crate::sites;
use crate::stapsdt::read_probe_table;
use crate::target::Target;
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::{interval, sleep_until, MissedTickBehavior};

/// How often the ring is drained. The eBPF side submits without waking us
/// (a wake-up per event costs ~0.9 µs), so this tick is the only reader.
const DRAIN_EVERY: Duration = Duration::from_millis(1);

/// Why tracing ended.
enum Stop {
    Interrupted,
    Terminated,
    TargetExited,
    DurationReached,
    OutputClosed,
    OutputFailed,
}

pub async fn run(cli: Cli) -> Result<()> {
    let target = Target::from_pid(cli.pid)?;
    let table = read_probe_table(&target.exe_link)
        .with_context(|| format!("reading probes of pid {} ({})", target.pid, target.exe_name))?;
    for problem in &table.problems {
        eprintln!("styx-loader: warning: {}: {problem}", target.exe_name);
    }
    let selection = sites::select(&table, &cli.kinds());
    for rejected in &selection.rejected {
        eprintln!("styx-loader: warning: {rejected}");
    }
    if selection.sites.is_empty() {
        if !table
            .sites
            .iter()
            .any(|s| s.provider == styx_common::PROVIDER)
        {
            bail!(
                "pid {} ({}) has no styx probes: {}",
                target.pid,
                target.exe_name,
                sites::describe_providers(&table)
            );
        }
        bail!(
            "pid {} ({}) has no usable probe sites for the selected events",
            target.pid,
            target.exe_name
        );
    }

    let mut out = open_output(&cli)?;
    let mut loaded = ebpf::load(&LoadOptions {
        pid: target.pid,
        ring_bytes: cli.ring_size,
        ebpf_log: cli.ebpf_log,
    })?;
    let mut logger = if cli.ebpf_log {
        Some(aya_log::EbpfLogger::init(&mut loaded.ebpf).context("starting the eBPF logger")?)
    } else {
        None
    };
    // SAFETY: the AsyncFd owns the OwnedFd, so the fd stays open and the same
    // for as long as it is registered.
    let exit_fd = unsafe { AsyncFd::register(target.exit_fd()?) }
        .map_err(|e| anyhow::anyhow!("watching pid {} for exit: {e}", target.pid))?;
    let links = ebpf::attach_sites(
        &mut loaded.ebpf,
        &target.exe_link,
        target.pid,
        &selection.sites,
    )?;
    eprintln!(
        "styx-loader: attached {} probe sites in pid {} ({}); Ctrl-C to stop",
        links.len(),
        target.pid,
        target.exe_name
    );

    let started = Instant::now();
    let deadline = cli.duration.map(|d| tokio::time::Instant::now() + d);
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut tick = interval(DRAIN_EVERY);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut counts = Counts::default();
    let mut write_error = None;

    let stop = loop {
        tokio::select! {
            _ = tick.tick() => {
                match drain(&mut loaded.ring, &mut out, cli.format, &mut counts) {
                    Ok(Drained::All) => {}
                    // More is waiting: come straight back, after a look at
                    // signals and the clock.
                    Ok(Drained::Budget) => tick.reset_immediately(),
                    Err(e) => {
                        write_error = real_failure(e);
                        break if write_error.is_some() { Stop::OutputFailed } else { Stop::OutputClosed };
                    }
                }
                if let Some(logger) = logger.as_mut() {
                    logger.flush();
                }
            }
            _ = sigint.recv() => break Stop::Interrupted,
            _ = sigterm.recv() => break Stop::Terminated,
            _ = exit_fd.readable() => break Stop::TargetExited,
            _ = async { sleep_until(deadline.expect("guarded")).await }, if deadline.is_some() => {
                break Stop::DurationReached
            }
        }
    };
    let elapsed = started.elapsed();

    // The kernel takes ~0.1 s per site to detach, one site at a time (each
    // waits for an RCU grace period under a global lock). Keep draining
    // meanwhile so the events still arriving are kept, then take what is left.
    if links.len() > 10 {
        eprintln!(
            "styx-loader: detaching {} probe sites (the kernel needs ~0.1 s each)",
            links.len()
        );
    }
    let mut detaching = tokio::task::spawn_blocking(move || drop(links));
    // Once the output has closed or failed, events are still taken from the
    // ring, so they are counted as unwritten rather than as ring-full drops.
    let mut output_open = !matches!(stop, Stop::OutputClosed | Stop::OutputFailed);
    let mut unwritten = Counts::default();
    let mut detached = false;
    loop {
        if !detached {
            tokio::select! {
                _ = &mut detaching => detached = true,
                _ = tick.tick() => {}
            }
        }
        let drained = if output_open {
            drain(&mut loaded.ring, &mut out, cli.format, &mut counts)
        } else {
            drain(
                &mut loaded.ring,
                &mut io::sink(),
                cli.format,
                &mut unwritten,
            )
        };
        match drained {
            Ok(Drained::All) if detached => break,
            Ok(_) => {}
            Err(e) => {
                write_error = real_failure(e);
                output_open = false;
            }
        }
    }
    if let Some(logger) = logger.as_mut() {
        logger.flush();
    }
    let drops = ebpf::read_drops(&loaded.drops)?;
    report(&cli, &target, &stop, elapsed, &counts, &drops);
    if unwritten.total() > 0 && write_error.is_none() {
        eprintln!(
            "styx-loader: {} events that arrived after the output closed were not written",
            unwritten.total()
        );
    }
    if let Some(e) = write_error {
        let to = cli
            .output
            .as_ref()
            .map_or("stdout".to_string(), |p| p.display().to_string());
        bail!(
            "writing events to {to}: {e} (after {} events; {} more were not written)",
            counts.total(),
            unwritten.total()
        );
    }
    Ok(())
}

/// A closed pipe is how a reader says it has seen enough: not a failure.
fn real_failure(error: io::Error) -> Option<io::Error> {
    (error.kind() != io::ErrorKind::BrokenPipe).then_some(error)
}

fn open_output(cli: &Cli) -> Result<Box<dyn Write>> {
    const BUFFER: usize = 256 << 10;
    Ok(match &cli.output {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
            Box::new(BufWriter::with_capacity(BUFFER, file))
        }
        None => Box::new(BufWriter::with_capacity(BUFFER, io::stdout())),
    })
}

fn report(
    cli: &Cli,
    target: &Target,
    stop: &Stop,
    elapsed: Duration,
    counts: &Counts,
    drops: &[u64],
) {
    let why = match stop {
        Stop::Interrupted => "interrupted",
        Stop::Terminated => "terminated",
        Stop::TargetExited => "process exited",
        Stop::DurationReached => "duration reached",
        Stop::OutputClosed => "output closed",
        Stop::OutputFailed => "output failed",
    };
    let dropped: u64 = drops.iter().sum();
    eprintln!(
        "styx-loader: {} events from pid {} in {:.2} s ({why}); {dropped} dropped",
        counts.total(),
        target.pid,
        elapsed.as_secs_f64(),
    );
    for kind in cli.kinds() {
        let (n, lost) = (counts.events[kind as usize], drops[kind as usize]);
        if n > 0 || lost > 0 {
            let lost = if lost > 0 {
                format!("  ({lost} dropped: ring buffer full)")
            } else {
                String::new()
            };
            eprintln!("  {:<11} {n:>12}{lost}", kind.probe_name());
        }
    }
    if dropped > 0 {
        eprintln!(
            "styx-loader: warning: {dropped} events were dropped because the ring buffer was full; try a larger --ring-size (now {} bytes)",
            cli.ring_size
        );
    }
    if counts.undecodable > 0 {
        eprintln!(
            "styx-loader: warning: {} records could not be decoded (first: {})",
            counts.undecodable,
            counts
                .first_undecodable
                .as_ref()
                .map_or(String::new(), |e| e.to_string())
        );
    }
}
