//! A tracing session: attach, stream events until told to stop, detach,
//! report.

use crate::capture::Header;
use crate::cli::TraceArgs as Cli;
use crate::drain::{Drained, Sink};
use crate::ebpf::{self, LoadOptions};
use crate::format::{self, EventWriter, Format};
use crate::live::LiveLine;
use crate::report::{self, Stop, Summary};
use crate::sites::{self, Selection, Selector};
use crate::spawn::{self, Held};
use crate::symbols::Symbols;
use crate::target::Target;
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{signal, SignalKind};
use tokio::time::{interval, sleep_until, MissedTickBehavior};

/// How often the ring is drained. The eBPF side submits without waking us
/// (a wake-up per event costs ~0.9 µs), so this tick is the only reader.
const DRAIN_EVERY: Duration = Duration::from_millis(1);

/// Traces until told to stop; returns the exit code styx-loader should end
/// with: 0, or the spawned command's own.
pub async fn run(cli: Cli, held: Option<Held>) -> Result<i32> {
    // Before attaching: a Ctrl-C right after "attached" must stop tracing
    // cleanly, not kill the loader.
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let target = match (&held, &cli.binary) {
        (Some(held), _) => Target::spawned(held.pid, &held.program),
        (None, Some(path)) => Target::binary(path)?,
        (None, None) => Target::from_pid(cli.pid.expect("clap requires a target"))?,
    };
    let selection = find_sites(&cli, &target)?;
    let mut programs: Vec<&'static str> = selection
        .sites
        .iter()
        .map(|s| ebpf::program_name(s.kind))
        .collect();
    programs.sort_unstable();
    programs.dedup();
    let header = Header::now(
        target.pid.unwrap_or(0),
        &target.files[0].name,
        &selection.usdt,
    );
    let out = open_outputs(&cli, &header)?;
    let mut loaded = ebpf::load(&LoadOptions {
        pid: target.pid.unwrap_or(0),
        programs: &programs,
        mode: cli.attach,
        ring_bytes: cli.ring_size,
        ebpf_log: cli.ebpf_log,
        usdt: &selection.usdt,
    })?;
    let sites = selection.sites;
    let mut sink = Sink::new(out);
    let mut logger = if cli.ebpf_log {
        Some(aya_log::EbpfLogger::init(&mut loaded.ebpf).context("starting the eBPF logger")?)
    } else {
        None
    };
    let exit_fd = match target.exit_fd()? {
        // SAFETY: the AsyncFd owns the OwnedFd, so the fd stays open and the
        // same for as long as it is registered.
        Some(fd) => Some(
            unsafe { AsyncFd::register(fd) }
                .map_err(|e| anyhow::anyhow!("watching {} for exit: {e}", target.name))?,
        ),
        None => None,
    };
    let attach_started = Instant::now();
    let links = ebpf::attach_sites(&mut loaded, &target, &sites)?;
    eprintln!(
        "styx-loader: attached {} probe sites in {} in {:.0} ms; Ctrl-C to stop",
        sites.len(),
        target.name,
        attach_started.elapsed().as_secs_f64() * 1e3
    );
    let spawned = held.is_some();
    if let Some(held) = held {
        held.release()?;
    }

    // Not when events go to the same terminal: the line would break theirs.
    let events_on_terminal = cli.output.is_none() && io::stdout().is_terminal();
    let mut live = LiveLine::new(!cli.quiet && io::stderr().is_terminal() && !events_on_terminal);
    let started = Instant::now();
    let deadline = cli.duration.map(|d| tokio::time::Instant::now() + d);
    let mut tick = interval(DRAIN_EVERY);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);

    let stop = loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Drained::Budget = sink.drain(&mut loaded.ring) {
                    // More is waiting: come straight back, after a look at
                    // signals and the clock.
                    tick.reset_immediately();
                }
                if let Some(logger) = logger.as_mut() {
                    logger.flush();
                }
                if live.due() {
                    live.draw(&sink.written.events, &ebpf::read_drops(&loaded.drops)?);
                }
                if !sink.is_open() {
                    break if sink.error.is_some() { Stop::OutputFailed } else { Stop::OutputClosed };
                }
            }
            _ = sigint.recv() => break Stop::Interrupted,
            _ = sigterm.recv() => break Stop::Terminated,
            _ = async { exit_fd.as_ref().expect("guarded").readable().await }, if exit_fd.is_some() => {
                break Stop::TargetExited
            }
            _ = async { sleep_until(deadline.expect("guarded")).await }, if deadline.is_some() => {
                break Stop::DurationReached
            }
        }
    };
    let elapsed = started.elapsed();
    live.clear();

    // The kernel takes ~0.1 s per site to detach per-site links, one site at
    // a time (each waits for an RCU grace period under a global lock), and
    // about that for a whole multi link. Keep draining meanwhile so the
    // events still arriving are kept, then take what is left.
    if links.per_site() > 10 {
        eprintln!(
            "styx-loader: detaching {} probe sites one by one (the kernel needs ~0.1 s each)",
            links.per_site()
        );
    }
    let mut detaching = tokio::task::spawn_blocking(move || drop(links));
    let mut detached = false;
    loop {
        if !detached {
            tokio::select! {
                _ = &mut detaching => detached = true,
                _ = tick.tick() => {}
            }
        }
        if let (Drained::All, true) = (sink.drain(&mut loaded.ring), detached) {
            break;
        }
    }
    if let Some(logger) = logger.as_mut() {
        logger.flush();
    }

    let drops = ebpf::read_drops(&loaded.drops)?;
    sink.finish(&drops);
    report::print(&Summary {
        target: &target.name,
        stop,
        elapsed,
        sink: &sink,
        drops: &drops,
        ring_size: cli.ring_size,
    });
    if let Some(e) = &sink.error {
        // The error names the output that failed (see open_outputs).
        bail!(
            "writing events to {e} (after {} events; {} more were not written)",
            sink.written.total(),
            sink.unwritten.total()
        );
    }
    if let (true, Some(pid)) = (spawned, target.pid) {
        return spawn::wait_exit_code(pid);
    }
    Ok(0)
}

/// The probe sites to attach in the target, or why there are none.
fn find_sites(cli: &Cli, target: &Target) -> Result<Selection> {
    let tables = target.probe_tables()?;
    let kinds = cli.kinds();
    let selector = Selector {
        kinds: &kinds,
        usdt_globs: &cli.probes,
    };
    let mut selection = Selection::default();
    for (file, table) in &tables {
        let mut symbols = Symbols::of(&target.files[*file]);
        selector.select(*file, table, &mut symbols, &mut selection);
    }
    for rejected in &selection.rejected {
        eprintln!("styx-loader: warning: {rejected}");
    }
    if selection.sites.is_empty() {
        let all_sites = || tables.iter().flat_map(|(_, table)| &table.sites);
        let has_styx = all_sites().any(|s| s.provider == styx_common::PROVIDER);
        let globs: Vec<&str> = cli.probes.iter().map(glob::Pattern::as_str).collect();
        let what = match (has_styx, globs.is_empty()) {
            (true, _) => "no usable probe sites for the selected events".to_string(),
            (false, true) => "no styx probes".to_string(),
            (false, false) => format!(
                "no styx probes and none matching --probes {}",
                globs.join(", ")
            ),
        };
        bail!(
            "{} has {what}: {}",
            target.name,
            sites::describe_providers(all_sites())
        );
    }
    Ok(selection)
}

/// The writer for `-o` on `--output` (or stdout), plus a raw capture on
/// `--capture` if asked; errors name the file that failed.
fn open_outputs(cli: &Cli, header: &Header) -> Result<Box<dyn EventWriter>> {
    if cli.format == Format::Raw && cli.output.is_none() && io::stdout().is_terminal() {
        bail!("-o raw writes a binary capture: give --output FILE, or pipe it");
    }
    let main = open_one(cli, cli.format, cli.output.as_deref(), header)?;
    Ok(match &cli.capture {
        None => main,
        Some(path) => Box::new(format::Tee(vec![
            main,
            open_one(cli, Format::Raw, Some(path), header)?,
        ])),
    })
}

fn open_one(
    cli: &Cli,
    format: Format,
    path: Option<&Path>,
    header: &Header,
) -> Result<Box<dyn EventWriter>> {
    const BUFFER: usize = 256 << 10;
    let (out, name): (Box<dyn Write>, String) = match path {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
            let out = Box::new(BufWriter::with_capacity(BUFFER, file));
            (out, path.display().to_string())
        }
        None => (
            Box::new(BufWriter::with_capacity(BUFFER, io::stdout())),
            "stdout".to_string(),
        ),
    };
    let labeled = format::Labeled::new(out, name.clone());
    format::open(
        format,
        Box::new(labeled),
        header,
        &format::Options::new(path, cli.detail),
    )
    .with_context(|| format!("writing the start of {name}"))
}
