//! A tracing session, in four steps: [`Session::start`] loads the programs
//! and attaches them, [`Session::stream`] moves events from the ring to the
//! output until something says stop, [`Session::detach`] lets go of the
//! sites while still draining, and [`Session::finish`] ends the output and
//! prints the summary.
//!
//! The eBPF side submits records without waking anyone (a wake-up per event
//! costs ~0.9 µs), so a 1 ms tick is the ring's only reader.

pub mod drain;
pub mod flow;
pub mod flush_block;
pub mod live;
pub mod partial;
pub mod report;
pub mod spawn;

use crate::bpf::attach::{self, Links};
use crate::bpf::load::{self, Counting, LoadOptions, Loaded};
use crate::bpf::AttachMode;
use anyhow::{bail, Context, Result};
use drain::{Drained, Sink};
use flow::Flow;
use flush_block::FlushSite;
use live::LiveLine;
use report::{Stop, Summary};
use std::cell::RefCell;
use std::io::{self, IsTerminal};
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::time::{Duration, Instant};
use styx_common::EventKind;
use styx_events::EventWriter;
use styx_events::FlightRecorder;
use styx_events::Table;
use styx_events::{Filters, Keep};
use styx_usdt::select::Selection;
use styx_usdt::select::{AttachSite, Role};
use styx_usdt::target::Target;
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::{interval, sleep, sleep_until, Interval, MissedTickBehavior};

/// How often the ring is drained.
const DRAIN_EVERY: Duration = Duration::from_millis(1);

/// How often the flight recorder looks for threads that exited.
const EXITED_CHECK_EVERY: Duration = Duration::from_secs(1);

/// How to run a session.
pub struct Options {
    /// How to attach.
    pub attach: AttachMode,
    /// Ring buffer bytes.
    pub ring_bytes: u32,
    /// Forward the programs' own log.
    pub ebpf_log: bool,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Draw the live line (on a terminal, not `--quiet`).
    pub live: bool,
    /// Whether batches wait for room in the ring instead of being lost.
    pub lossless: Lossless,
    /// `--filter` and `--sample`, if given.
    pub filters: Option<Filters>,
    /// `top` with per-event delivery: count in the kernel.
    pub counting: Option<Counting>,
    /// `top`: redraws its table every so often, and at the end.
    pub refresh: Option<Refresh>,
    /// `--flight-recorder`: dumps on SIGUSR1, the target's death, the stop.
    pub flight: Option<Rc<RefCell<FlightRecorder>>>,
}

/// Whether batches wait for room in the ring instead of being lost (one
/// process only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lossless {
    Off,
    /// `--lossless`: refused if another loader has flow control.
    Required,
    /// `top`: taken if no other loader has it; else counted without, the
    /// drops reported.
    IfFree,
}

/// Draws `top`'s tables given the kernel's counts; `true`: the last time.
pub type Draw = Box<dyn FnMut(&[Table], bool)>;

/// Something to call every `every` while streaming, and once at the end
/// (`done`), with `top`'s tables as the kernel counted them so far.
pub struct Refresh {
    pub every: Duration,
    pub draw: Draw,
    /// Tables the kernel counts, and their room.
    pub tables: usize,
    pub max_keys: usize,
}

/// An attached session.
pub struct Session {
    loaded: Loaded,
    links: Links,
    /// The batch-enable sites: detached first when stopping.
    batch_links: Links,
    /// Where to read partial batches from when stopping (a process target
    /// with batch sites).
    flush_sites: Vec<FlushSite>,
    pid: Option<u32>,
    /// Lossless mode's flow control.
    flow: Option<Flow>,
    sink: Sink,
    logger: Option<aya_log::EbpfLogger<&'static dyn log::Log>>,
    /// Becomes readable when the traced process exits.
    exit_fd: Option<AsyncFd<OwnedFd>>,
    sigint: Signal,
    sigterm: Signal,
    /// The flight recorder's "dump now".
    sigusr1: Option<Signal>,
    /// Flight recorder: whether `styx_fatal` knows the batch registry.
    registry_known: bool,
    /// Flight recorder: when it last forgot threads that exited.
    exited_checked: Instant,
    tick: Interval,
    options: Options,
    target_name: String,
    started: Instant,
    elapsed: Duration,
}

impl Session {
    /// Loads the programs `selection` needs and attaches them in `target`;
    /// events go to `out`. Must run inside the async runtime.
    pub fn start(
        target: &Target,
        selection: &Selection,
        out: Box<dyn EventWriter>,
        options: Options,
    ) -> Result<Session> {
        // Before attaching: a Ctrl-C right after "attached" must stop
        // tracing cleanly, not kill the loader.
        let sigint = signal(SignalKind::interrupt())?;
        let sigterm = signal(SignalKind::terminate())?;
        let sigusr1 = match options.flight {
            Some(_) => Some(signal(SignalKind::user_defined1())?),
            None => None,
        };
        let flush_sites: Vec<FlushSite> = selection
            .sites
            .iter()
            .filter(|s| s.role == Role::BatchFlush)
            .map(|s| FlushSite {
                file: target.files[s.file].clone(),
                site: s.site.clone(),
            })
            .collect();
        // Lossless flow control claimed before anything is attached (a
        // refusal leaves the process as it was); in place before any batch
        // can be made: in a running process as the first credit is granted
        // below, in a command started here by its own claim at its first
        // event (see flow::ChildClaim).
        let mut flow = match (options.lossless, target.pid) {
            (Lossless::Off, _) | (_, None) => None,
            (mode, Some(pid)) => match Flow::claim(pid, options.ring_bytes, flush_sites.len()) {
                Ok(flow) => Some(flow),
                Err(e) if mode == Lossless::IfFree && e.is::<flow::Taken>() => {
                    log::warn!(
                        "{e}: counting without it (batches a full ring has no room for are \
                         dropped, and reported)"
                    );
                    None
                }
                Err(e) => return Err(e),
            },
        };
        // Room for a link per site (up to attach::MAX_PER_SITE) before any
        // is attached, rather than EMFILE half-way.
        attach::raise_fd_limit();
        let mut programs: Vec<&'static str> = selection
            .sites
            .iter()
            .map(|s| attach::program_name(s.role))
            .collect();
        programs.sort_unstable();
        programs.dedup();
        let mut loaded = load::load(&LoadOptions {
            pid: target.pid.unwrap_or(0),
            programs: &programs,
            mode: options.attach,
            ring_bytes: options.ring_bytes,
            ebpf_log: options.ebpf_log,
            usdt: &selection.usdt,
            filters: options.filters.as_ref(),
            counting: options.counting.as_ref(),
        })?;
        let logger = if options.ebpf_log {
            Some(aya_log::EbpfLogger::init(&mut loaded.ebpf).context("starting the eBPF logger")?)
        } else {
            None
        };
        let exit_fd = match target.exit_fd()? {
            // SAFETY: the AsyncFd owns the OwnedFd, so the fd stays open and
            // the same for as long as it is registered.
            Some(fd) => Some(
                unsafe { AsyncFd::register(fd) }
                    .map_err(|e| anyhow::anyhow!("watching {} for exit: {e}", target.name))?,
            ),
            None => None,
        };
        if options.flight.is_some() && target.pid.is_some() {
            attach::attach_fatal(&mut loaded)?;
        }
        let attach_started = Instant::now();
        // The flush site before the batch-enable sites: no batch may be
        // handed over before something takes it.
        let (enable, rest): (Vec<&AttachSite>, Vec<&AttachSite>) = selection
            .sites
            .iter()
            .partition(|s| matches!(s.role, Role::BatchEnable(_)));
        let links = attach::attach_sites(&mut loaded, target, &rest)?;
        grant_credit(&mut flow, &loaded, 0, &flush_sites);
        let batch_links = if enable.is_empty() {
            Links::default()
        } else {
            attach::attach_sites(&mut loaded, target, &enable)?
        };
        // The flight recorder's death watch knows the registry before the
        // process runs on (a command started here: once it has exec'd).
        let registry_known = match (&options.flight, target.pid) {
            (Some(_), Some(pid)) if !flush_sites.is_empty() => {
                matches!(partial::registry(pid, &flush_sites), Ok(Some(registry))
                    if load::set_registry(&mut loaded, registry).is_ok())
            }
            _ => false,
        };
        eprintln!(
            "styx-loader: attached {} probe sites in {} in {:.0} ms; Ctrl-C to stop",
            links.attached() + batch_links.attached(),
            target.name,
            attach_started.elapsed().as_secs_f64() * 1e3
        );
        let mut tick = interval(DRAIN_EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let (keep, split_batches) = keep_in_loader(options.filters.as_ref(), selection);
        Ok(Session {
            loaded,
            links,
            batch_links,
            flush_sites,
            pid: target.pid,
            flow,
            sink: Sink::new(out, keep, split_batches),
            logger,
            exit_fd,
            sigint,
            sigterm,
            sigusr1,
            registry_known,
            exited_checked: Instant::now(),
            tick,
            options,
            target_name: target.name.clone(),
            started: Instant::now(),
            elapsed: Duration::ZERO,
        })
    }

    /// Streams events until a signal, the process's exit, the duration, or
    /// the output says stop.
    pub async fn stream(&mut self) -> Result<Stop> {
        let mut live = LiveLine::new(self.options.live);
        self.started = Instant::now();
        let deadline = self
            .options
            .duration
            .map(|d| tokio::time::Instant::now() + d);
        // Out of `self` while streaming, which borrows `self` mutably.
        let exit_fd_owned = self.exit_fd.take();
        let exit_fd = exit_fd_owned.as_ref();
        let mut next_refresh = Instant::now();
        let stop = loop {
            tokio::select! {
                _ = self.tick.tick() => {
                    if let Drained::Budget = self.sink.drain(&mut self.loaded.ring) {
                        // More is waiting: come straight back, after a look
                        // at signals and the clock.
                        self.tick.reset_immediately();
                    }
                    grant_credit(&mut self.flow, &self.loaded, self.sink.batch_records, &self.flush_sites);
                    if let Some(logger) = self.logger.as_mut() {
                        logger.flush();
                    }
                    if live.due() {
                        live.draw(&self.sink.written.events, &load::read_lost(&self.loaded.drops)?.events);
                    }
                    if self.options.flight.is_some() {
                        self.flight_tick();
                    }
                    if let Some(refresh) = self.options.refresh.as_mut() {
                        if Instant::now() >= next_refresh {
                            next_refresh = Instant::now() + refresh.every;
                            let tables = load::read_counts(&self.loaded, refresh.tables, refresh.max_keys)?;
                            (refresh.draw)(&tables, false);
                        }
                    }
                    if !self.sink.is_open() {
                        break if self.sink.error.is_some() { Stop::OutputFailed } else { Stop::OutputClosed };
                    }
                }
                _ = async { self.sigusr1.as_mut().expect("guarded").recv().await }, if self.sigusr1.is_some() => {
                    self.dump_now().await;
                }
                _ = self.sigint.recv() => break Stop::Interrupted,
                _ = self.sigterm.recv() => break Stop::Terminated,
                _ = async { exit_fd.expect("guarded").readable().await }, if exit_fd.is_some() => {
                    break Stop::TargetExited
                }
                _ = async { sleep_until(deadline.expect("guarded")).await }, if deadline.is_some() => {
                    break Stop::DurationReached
                }
            }
        };
        self.exit_fd = exit_fd_owned;
        self.elapsed = self.started.elapsed();
        live.clear();
        Ok(stop)
    }

    /// Detaches every site, draining meanwhile, then takes what is left.
    ///
    /// The kernel takes ~0.1 s per site to detach per-site links, one site at
    /// a time (each waits for an RCU grace period under a global lock), and
    /// about that for a whole multi link; the events still arriving
    /// meanwhile are kept.
    pub async fn detach(&mut self) {
        // No thread appends to a batch once its type's enable site is gone;
        // then what the threads still hold is read from the process while
        // the flush site still takes what they hand over meanwhile.
        let batch_links = std::mem::take(&mut self.batch_links);
        if batch_links.attached() > 0 {
            self.detach_links(batch_links).await;
            self.take_partial_batches().await;
        }
        // Lossless flow control stays until here (lifting it earlier would
        // let threads flood a ring nobody made room in); a thread waiting
        // for credit goes on now.
        if let Some(flow) = self.flow.as_mut() {
            flow.release();
        }
        let links = std::mem::take(&mut self.links);
        self.detach_links(links).await;
        if let Some(logger) = self.logger.as_mut() {
            logger.flush();
        }
    }

    /// Reads the batches threads still hold from the process (see
    /// [`partial`]); a warning if it cannot.
    async fn take_partial_batches(&mut self) {
        if self.flush_sites.is_empty() {
            return;
        }
        // A thread that loaded its semaphore just before the detach may be
        // appending still: let it finish (a few ns; 2 ms covers a preempted
        // one in all but pathological cases), draining meanwhile.
        sleep(Duration::from_millis(2)).await;
        self.sink.drain(&mut self.loaded.ring);
        grant_credit(
            &mut self.flow,
            &self.loaded,
            self.sink.batch_records,
            &self.flush_sites,
        );
        let pids = match self.pid {
            Some(pid) => vec![pid],
            // --binary: every process running it now.
            None => flush_block::pids_mapping(&self.flush_sites),
        };
        for pid in pids {
            match partial::read(pid, &self.flush_sites, |record| self.sink.record(record)) {
                Ok(walked) => partial::report(pid, &walked),
                Err(e) => log::warn!(
                    "could not read the batches pid {pid}'s threads still hold (their events \
                     since their last flush are lost): {e:#}"
                ),
            }
        }
    }

    /// Flight recorder, after a drain: dumps if the target is being killed;
    /// tells `styx_fatal` where the batch registry is once it exists.
    fn flight_tick(&mut self) {
        let Some(flight) = &self.options.flight else {
            return;
        };
        if let Some((signal, at)) = self.sink.fatal.take() {
            let name = signal_name(signal);
            // Its threads' later events (before the kernel stopped them) are not.
            flight
                .borrow_mut()
                .dump(&format!("the target was killed by {name}"), Some(at));
        }
        if self.exited_checked.elapsed() >= EXITED_CHECK_EVERY {
            self.exited_checked = Instant::now();
            // /proc/TID exists for every live thread (listed or not).
            let alive = |tid: u32| std::path::Path::new(&format!("/proc/{tid}")).exists();
            flight.borrow_mut().forget_exited(alive);
        }
        if !self.registry_known {
            if let (Some(pid), false) = (self.pid, self.flush_sites.is_empty()) {
                if let Ok(Some(registry)) = partial::registry(pid, &self.flush_sites) {
                    self.registry_known = load::set_registry(&mut self.loaded, registry).is_ok();
                }
            }
        }
    }

    /// SIGUSR1: what is in the ring and what the threads still hold, then a dump.
    async fn dump_now(&mut self) {
        self.sink.drain(&mut self.loaded.ring);
        if let Some(pid) = self.pid {
            if !self.flush_sites.is_empty() {
                match partial::read(pid, &self.flush_sites, |record| self.sink.record(record)) {
                    Ok(walked) => partial::report(pid, &walked),
                    Err(e) => log::warn!(
                        "could not read the batches pid {pid}'s threads hold (their latest events are not in this dump): {e:#}"
                    ),
                }
            }
        }
        if let Some(flight) = &self.options.flight {
            flight.borrow_mut().dump("SIGUSR1", None);
        }
    }

    /// Lets go of `links`, draining meanwhile.
    async fn detach_links(&mut self, links: Links) {
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
                    _ = self.tick.tick() => {}
                }
            }
            let drained = self.sink.drain(&mut self.loaded.ring);
            grant_credit(
                &mut self.flow,
                &self.loaded,
                self.sink.batch_records,
                &self.flush_sites,
            );
            if let (Drained::All, true) = (drained, detached) {
                break;
            }
        }
    }

    /// Ends the output with the run's totals and prints the summary; an
    /// error if the output failed.
    pub fn finish(mut self, stop: Stop) -> Result<()> {
        let drops = load::read_lost(&self.loaded.drops)?.events;
        let faults = load::read_lost(&self.loaded.faults)?;
        let mut filtered = load::read_lost(&self.loaded.filtered)?.events;
        if let Some(keep) = &self.sink.keep {
            for (n, here) in filtered.iter_mut().zip(keep.left_out) {
                *n += here;
            }
        }
        if let Some(refresh) = self.options.refresh.as_mut() {
            let tables = load::read_counts(&self.loaded, refresh.tables, refresh.max_keys)?;
            (refresh.draw)(&tables, true);
        }
        self.flight_tick();
        if let Some(flight) = &self.options.flight {
            flight.borrow_mut().dump("tracing stopped", None);
        }
        self.sink.finish(&drops);
        report::print(&Summary {
            target: &self.target_name,
            stop,
            elapsed: self.elapsed,
            sink: &self.sink,
            drops: &drops,
            faults: &faults,
            filtered: &filtered,
            ring_size: self.options.ring_bytes,
        });
        if let Some(flight) = &self.options.flight {
            report::flight(&flight.borrow());
        }
        if let Some(e) = &self.sink.error {
            // The error names the output that failed (see crate::outputs::open).
            bail!(
                "writing events to {e} (after {} events; {} more were not written)",
                self.sink.written.total(),
                self.sink.unwritten.total()
            );
        }
        Ok(())
    }
}

/// What the loader filters of `filters`: every type whose events the eBPF
/// programs cannot filter (batched ones, text tests), and whether batches
/// must be split for it.
fn keep_in_loader(filters: Option<&Filters>, selection: &Selection) -> (Option<Keep>, bool) {
    let Some(filters) = filters.filter(|f| f.any()) else {
        return (None, false);
    };
    let batched = |kind| {
        selection
            .sites
            .iter()
            .any(|s| s.role == Role::BatchEnable(kind))
    };
    let in_kernel = |kind| filters.kernel_can(kind) && !batched(kind);
    let split = EventKind::ALL
        .iter()
        .any(|&k| batched(k) && !filters.programs[k as usize].keeps_all());
    (Some(Keep::new(filters.clone(), in_kernel)), split)
}

/// Lossless mode: grants the emulator credit for the batches taken
/// (`received` records, or seen lost) so far. If that fails (the process exited, or its memory
/// cannot be written), says so once and stops: the emulator then goes on
/// without waiting.
fn grant_credit(flow: &mut Option<Flow>, loaded: &Loaded, received: u64, sites: &[FlushSite]) {
    let Some(control) = flow.as_mut() else {
        return;
    };
    let granted = load::read_lost(&loaded.drops)
        .and_then(|drops| Ok(drops.batches + load::read_lost(&loaded.faults)?.batches))
        .and_then(|lost| control.grant(sites, received + lost));
    if let Err(e) = granted {
        // An exited process maps nothing (a zombie until reaped).
        let exited = std::fs::read_to_string(format!("/proc/{}/maps", control.pid()))
            .map_or(true, |maps| maps.is_empty());
        if !exited {
            log::warn!("lossless flow control stopped, batches may be lost from here: {e:#}");
        }
        control.release();
        *flow = None;
    }
}

/// `SIGSEGV` for 11.
fn signal_name(signal: u32) -> String {
    let name = match signal as i32 {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}

/// Whether the live line may be drawn: on a terminal, unless events go to
/// the same terminal (the line would break theirs).
pub fn live_line_wanted(quiet: bool, output_is_file: bool) -> bool {
    let events_on_terminal = !output_is_file && io::stdout().is_terminal();
    !quiet && io::stderr().is_terminal() && !events_on_terminal
}
