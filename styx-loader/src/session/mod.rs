//! A tracing session, in four steps: [`Session::start`] loads the programs
//! and attaches them, [`Session::stream`] moves events from the ring to the
//! output until something says stop, [`Session::detach`] lets go of the
//! sites while still draining, and [`Session::finish`] ends the output and
//! prints the summary. Its parts: the kernel side set up
//! ([`attachment`]), the ring drained ([`drain`]), the batch plumbing
//! beside it ([`batches`]: flush sites, flow control, the registry), what
//! says stop ([`stoppers`]), the live line and the summary; libraries the
//! process maps later ([`follow`]).
//!
//! The eBPF side submits records without waking anyone (a wake-up per event
//! costs ~0.9 µs), so a 1 ms tick is the ring's only reader.

pub mod attachment;
pub mod batches;
mod cpu_hop;
pub mod drain;
pub mod follow;
pub mod live;
pub mod pace;
pub mod report;
pub mod spawn;
pub mod stoppers;

use crate::bpf::attach::{self, Links};
use crate::bpf::load::{self, Counting, Loaded};
use crate::bpf::AttachMode;
use anyhow::{bail, Result};
use attachment::Logger;
use batches::{Batches, Partial};
use drain::Sink;
use follow::Follow;
use live::LiveLine;
use pace::{LossContext, Pace};
use report::{Run, Stop};
use std::cell::RefCell;
use std::io::{self, IsTerminal};
use std::rc::Rc;
use std::time::{Duration, Instant};
use stoppers::{Stoppers, Wake};
use styx_common::summary::Waited;
use styx_common::EventKind;
use styx_events::{DeclaredTypes, EventWriter, Filters, FlightRecorder, Keep, Table};
use styx_usdt::select::{Role, Selection};
use styx_usdt::target::Target;
use tokio::time::{interval, sleep, Interval, MissedTickBehavior};

/// How often the ring is drained.
const DRAIN_EVERY: Duration = Duration::from_millis(1);

/// How often the flight recorder looks for threads that exited.
const EXITED_CHECK_EVERY: Duration = Duration::from_secs(1);

/// How to run a session.
pub struct Settings {
    pub attach: AttachMode,
    pub ring_bytes: u32,
    /// Forward the programs' own log.
    pub ebpf_log: bool,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Draw the live line (on a terminal, not `--quiet`).
    pub live: bool,
    /// Also print the summary as JSON (`--json-summary`).
    pub json_summary: bool,
    pub lossless: Lossless,
    /// `--filter` and `--sample`, if given.
    pub filters: Option<Filters>,
    /// `top` with per-event delivery: count in the kernel.
    pub counting: Option<Counting>,
    /// `top`: redraws its table every so often, and at the end.
    pub refresh: Option<Refresh>,
    /// `--flight-recorder`: dumps on SIGUSR1, the target's death, the stop.
    pub flight: Option<Rc<RefCell<FlightRecorder>>>,
    /// The event types the emulator declared that batches may carry
    /// (`Header::declared_types`).
    pub declared: DeclaredTypes,
    /// Where events go, as a loss warning names it: `-o`'s format name, or
    /// `top`.
    pub output: &'static str,
    /// Whether a raw capture's worker threads compress its blocks (the
    /// summary's note on how long the emulator waited names them).
    pub compressing: bool,
    /// Following the libraries the process maps later: the programs their
    /// sites may need, loaded beside the selection's.
    pub later_programs: Vec<&'static str>,
    /// And the spec ids kept free for their other providers' probes.
    pub spare_specs: u32,
}

/// Whether batches wait for room in the ring instead of being lost (one
/// process only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lossless {
    Off,
    /// `--on-full wait` (`--lossless`): refused if another loader has
    /// flow control.
    Required,
    /// The default for a file on disk, and `top`'s: taken if no other
    /// loader has it; else traced without (said once), the drops reported.
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
    batches: Batches,
    sink: Sink,
    logger: Option<Logger>,
    stoppers: Stoppers,
    /// Flight recorder: when it last forgot threads that exited.
    exited_checked: Instant,
    tick: Interval,
    settings: Settings,
    target_name: String,
    /// The USDT sites' `provider:probe`, by spec id, for the summary.
    probe_names: Vec<String>,
    started: Instant,
    elapsed: Duration,
    /// The rates seen, for why events were dropped.
    pace: Pace,
    /// Takes the loader's CPU back when it is behind and kept waiting for one.
    cpu_hop: cpu_hop::CpuHop,
    /// The event types delivered in batches (the others never wait).
    batched: Vec<EventKind>,
    /// The libraries the process maps later, followed (a process traced).
    follow: Option<Follow>,
}

impl Session {
    /// Loads the programs `selection` needs and attaches them in `target`;
    /// events go to `out`. Must run inside the async runtime.
    pub fn start(
        target: &Target,
        selection: &Selection,
        out: Box<dyn EventWriter>,
        settings: Settings,
    ) -> Result<Session> {
        let flight = settings.flight.is_some();
        let mut stoppers = Stoppers::install(flight)?;
        let mut batches =
            Batches::claim(target, selection, settings.lossless, settings.ring_bytes)?;
        let mut loaded = attachment::load(target, selection, &settings)?;
        let logger = attachment::logger(&mut loaded, settings.ebpf_log)?;
        stoppers.watch_exit(target)?;
        if flight && target.pid.is_some() {
            attach::attach_fatal(&mut loaded)?;
        }
        let attach_started = Instant::now();
        let attached = attachment::attach(&mut loaded, target, selection, |loaded| {
            batches.grant(loaded, 0)
        })?;
        // The flight recorder's death watch knows the registry before the
        // process runs on.
        if flight {
            batches.tell_registry(&mut loaded);
        }
        attachment::announce(&attached, &target.name, attach_started);
        let mut tick = interval(DRAIN_EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let (keep, split_batches) = keep_in_loader(settings.filters.as_ref(), selection);
        let batched = EventKind::ALL
            .iter()
            .copied()
            .filter(|&kind| {
                selection
                    .sites
                    .iter()
                    .any(|s| s.role == Role::BatchEnable(kind))
            })
            .collect();
        Ok(Session {
            loaded,
            links: attached.links,
            batch_links: attached.batch_links,
            batches,
            sink: Sink::new(
                out,
                keep,
                split_batches,
                settings.declared.clone(),
                settings.ring_bytes,
            ),
            logger,
            stoppers,
            exited_checked: Instant::now(),
            tick,
            settings,
            target_name: target.name.clone(),
            probe_names: (selection.usdt.iter())
                .map(|site| format!("{}:{}", site.provider, site.probe))
                .collect(),
            started: Instant::now(),
            elapsed: Duration::ZERO,
            pace: Pace::new(Duration::ZERO, 0, 0),
            cpu_hop: cpu_hop::CpuHop::default(),
            batched,
            follow: None,
        })
    }

    /// Follows the libraries the process maps from now on (see [`follow`]).
    pub fn follow(&mut self, mut follow: Follow) {
        follow.initial_sites = self.links.attached() + self.batch_links.attached();
        self.follow = Some(follow);
    }

    /// Where the process mapped its files, once a command is past its
    /// `exec`: for the outputs (`EventWriter::process_mapped`) and the
    /// header libraries mapped later grow; whether the outputs keep it.
    pub fn process_mapped(&mut self, mapped: &[styx_events::MappedFile]) -> bool {
        if let Some(follow) = self.follow.as_mut() {
            follow.header.mapped = mapped.to_vec();
        }
        self.sink.process_mapped(mapped)
    }

    /// The session's header as libraries mapped later made it grow (None
    /// when not following).
    pub fn grown_header(&self) -> Option<&styx_events::Header> {
        self.follow.as_ref().map(|f| &f.header)
    }

    /// A look at the libraries the process mapped, when due.
    fn follow_tick(&mut self) {
        let Some(follow) = self.follow.as_mut().filter(|f| f.due()) else {
            return;
        };
        follow.look(
            &mut self.loaded,
            &mut self.sink,
            &mut self.batches,
            &mut self.links,
            &mut self.batch_links,
        );
        let named = self.probe_names.len();
        self.probe_names.extend(
            (follow.header.usdt.iter().skip(named)).map(|u| format!("{}:{}", u.provider, u.probe)),
        );
    }

    /// Streams events until a signal, the process's exit, the duration, or
    /// the output says stop.
    pub async fn stream(&mut self) -> Result<Stop> {
        let mut live = LiveLine::new(self.settings.live);
        self.started = Instant::now();
        let dropped = load::read_lost(&self.loaded.drops)?.events.iter().sum();
        self.pace = Pace::new(self.sink.busy, self.sink.written.total(), dropped);
        self.stoppers.stop_after(self.settings.duration);
        let mut next_refresh = Instant::now();
        let stop = loop {
            tokio::select! {
                _ = self.tick.tick() => {
                    if let Some(stop) = self.on_tick(&mut live, &mut next_refresh)? {
                        break stop;
                    }
                }
                wake = self.stoppers.next() => match wake {
                    Wake::DumpNow => self.dump_now().await,
                    Wake::Stop(stop) => break stop,
                }
            }
        };
        self.elapsed = self.started.elapsed();
        live.clear();
        Ok(stop)
    }

    /// A tick while streaming: drains the ring, grants credit, draws what
    /// is drawn; a stop when the output has stopped taking events.
    fn on_tick(&mut self, live: &mut LiveLine, next_refresh: &mut Instant) -> Result<Option<Stop>> {
        self.cpu_hop.settle();
        let drained = self.sink.drain(&mut self.loaded.ring);
        if !drained.emptied() {
            // More is waiting: come straight back, after a look at signals
            // and the clock.
            self.tick.reset_immediately();
        }
        if drained.behind() && self.cpu_hop.starved() {
            self.sink.leave_the_cpu();
            self.cpu_hop.hop();
        }
        self.grant();
        self.follow_tick();
        if let Some(logger) = self.logger.as_mut() {
            logger.flush();
        }
        if self.pace.due() {
            let lost = load::read_lost(&self.loaded.drops)?;
            let written = self.sink.written.total();
            self.pace
                .look(self.sink.busy, written, lost.events.iter().sum());
        }
        if live.due() {
            let lost = load::read_lost(&self.loaded.drops)?;
            live.draw(&self.sink.written.events, &lost.events);
        }
        if self.settings.flight.is_some() {
            self.flight_tick();
        }
        if let Some(refresh) = self.settings.refresh.as_mut() {
            if Instant::now() >= *next_refresh {
                *next_refresh = Instant::now() + refresh.every;
                let tables = load::read_counts(&self.loaded, refresh.tables, refresh.max_keys)?;
                (refresh.draw)(&tables, false);
            }
        }
        Ok(match (self.sink.is_open(), &self.sink.error) {
            (true, _) => None,
            (false, Some(_)) => Some(Stop::OutputFailed),
            (false, None) => Some(Stop::OutputClosed),
        })
    }

    /// Lossless mode: credit for the batches taken so far.
    fn grant(&mut self) {
        self.batches.grant(&self.loaded, self.sink.batch_records);
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
        self.batches.release_flow();
        let links = std::mem::take(&mut self.links);
        self.detach_links(links).await;
        if let Some(logger) = self.logger.as_mut() {
            logger.flush();
        }
    }

    /// Reads the batches threads still hold from the process (see
    /// [`batches::partial`]); a warning if it cannot.
    async fn take_partial_batches(&mut self) {
        if !self.batches.any() {
            return;
        }
        // A thread that loaded its semaphore just before the detach may be
        // appending still: let it finish, draining meanwhile. That takes a
        // few ns, but a thread preempted between its check and its append
        // (a busy machine) can take a scheduler slice or more: so a second
        // read later hands over what was appended after the first (each
        // read marks what it took; the test that stops the loader while a
        // thread fires was seen one event short with a single read).
        for (wait, why) in [
            (Duration::from_millis(2), Partial::Stopping),
            (Duration::from_millis(50), Partial::StoppingAgain),
        ] {
            sleep(wait).await;
            self.sink.drain(&mut self.loaded.ring);
            self.grant();
            self.batches.take_partial(&mut self.sink, why);
        }
    }

    /// Flight recorder, after a drain: dumps if the target is being killed;
    /// tells `styx_fatal` where the batch registry is once it exists.
    fn flight_tick(&mut self) {
        let Some(flight) = &self.settings.flight else {
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
        self.batches.tell_registry(&mut self.loaded);
    }

    /// SIGUSR1: what is in the ring and what the threads still hold, then a dump.
    async fn dump_now(&mut self) {
        self.sink.drain(&mut self.loaded.ring);
        self.batches.take_partial(&mut self.sink, Partial::Dumping);
        if let Some(flight) = &self.settings.flight {
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
            self.grant();
            if drained.emptied() && detached {
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
        if let Some(refresh) = self.settings.refresh.as_mut() {
            let tables = load::read_counts(&self.loaded, refresh.tables, refresh.max_keys)?;
            (refresh.draw)(&tables, true);
        }
        self.flight_tick();
        if let Some(flight) = &self.settings.flight {
            flight.borrow_mut().dump("tracing stopped", None);
        }
        self.sink.finish(&drops);
        let written = self.sink.written.total();
        self.pace.look(self.sink.busy, written, drops.iter().sum());
        let context = LossContext {
            batched: self.batched.iter().map(|&k| drops[k as usize]).sum(),
            waited: self.batches.waited,
            ring_bytes: self.settings.ring_bytes.into(),
            output: self.settings.output.to_string(),
        };
        let pace = written as f64 / self.sink.busy.as_secs_f64().max(1e-9);
        report::print(&Run {
            target: &self.target_name,
            stop,
            elapsed: self.elapsed,
            sink: &self.sink,
            drops: &drops,
            faults: &faults,
            filtered: &filtered,
            loss: self.pace.loss(pace, context),
            probe_names: &self.probe_names,
            json: self.settings.json_summary,
            late: self.follow.as_ref().map_or(&[][..], |f| &f.late[..]),
            waited: self.batches.held().map(|held| Waited {
                seconds: held.as_secs_f64(),
                output: self.settings.output.to_string(),
                compressing: self.settings.compressing,
            }),
        });
        if let Some(flight) = &self.settings.flight {
            report::flight(&flight.borrow());
        }
        if let Some(follow) = &self.follow {
            if follow.attached() == 0 {
                // Non-zero, as the refusal at the start was before libraries
                // were followed: a script learns that its trace is empty.
                let why = (follow.waiting.clone())
                    .unwrap_or_else(|| format!("{} has no probes asked for", self.target_name));
                bail!("{why}, nor did a library it mapped while traced: nothing was traced");
            }
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
    // Declared types' items are in batches enabled as USDT's.
    let split = EventKind::ALL
        .iter()
        .any(|&k| batched(k) && !filters.programs[k as usize].keeps_all())
        || (filters.any_declared() && batched(EventKind::Usdt));
    (Some(Keep::new(filters.clone(), in_kernel)), split)
}

/// `SIGSEGV` for 11; `signal 99` for a number that names none.
fn signal_name(signal: u32) -> String {
    match nix::sys::signal::Signal::try_from(signal as i32) {
        Ok(known) => known.as_str().to_string(),
        Err(_) => format!("signal {signal}"),
    }
}

/// Whether the live line may be drawn: on a terminal, unless events go to
/// the same terminal (the line would break theirs).
pub fn live_line_wanted(quiet: bool, output_is_file: bool) -> bool {
    let events_on_terminal = !output_is_file && io::stdout().is_terminal();
    !quiet && io::stderr().is_terminal() && !events_on_terminal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(6), "SIGABRT");
        assert_eq!(signal_name(99), "signal 99");
    }
}
