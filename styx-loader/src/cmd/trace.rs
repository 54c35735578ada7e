//! The default command: trace a process, a command started here, or a
//! binary system-wide, from the command line to the exit code.

use crate::bpf::load::Counting;
use crate::cli::{FunctionExitsArg, OnFull, TopOptions, TraceArgs};
use crate::cmd::top::{self, Counter, Screen};
use crate::outputs::{self, Outputs};
use crate::search::{declared_types, find_functions, guest_description, mapped_files};
use crate::search::{NoneMatched, Searched};
use crate::session::batches;
use crate::session::follow::{Asked, Follow, SPARE_SPECS};
use crate::session::report::Stop;
use crate::session::spawn::{self, Held};
use crate::session::{self, Lossless, Refresh, Session};
use anyhow::{bail, Result};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use styx_common::batch::{BATCH_BYTES, MIN_BATCHED_RING_BYTES};
use styx_common::summary::size_text;
use styx_common::{Delivery, EventKind};
use styx_events::Filters;
use styx_events::{Compression, Format, Options, Output};
use styx_events::{DeclaredInfo, DeclaredSites, EventType, Header, MappedFile, UsdtInfo};
use styx_events::{EventWriter, Tee};
use styx_events::{FlightRecorder, Limits, OpenDump, Recording};
use styx_events::{Guest, RegisterNames};
use styx_usdt::functions::Matcher;
use styx_usdt::select::Role;
use styx_usdt::select::{describe_providers, FunctionExits, Selection, UsdtSite, Wanted};
use styx_usdt::symbols::Symbols;
use styx_usdt::target::Target;

/// Traces until told to stop; returns the exit code styx-loader should end
/// with: 0, or the spawned command's own. `held` is the command after `--`,
/// forked before the runtime started.
pub async fn run(mut args: TraceArgs, held: Option<Held>, top: Option<TopOptions>) -> Result<i32> {
    if let (Some(top), true) = (&top, args.events.is_empty()) {
        // `top` traces only the types it counts: the others would cost the
        // emulator and the loader for nothing.
        args.events = top::counted_kinds(&top.count, !args.probes.is_empty())?;
    }
    let (target, searched) = target_of(&args, held.as_ref())?;
    let asked = asked_later(&args, &target, top.is_some())?;
    let (selection, guest, declared, waiting) =
        find_sites(&args, &target, searched, asked.is_some())?;
    let mut header = header_of(&args, &target, &selection, guest, &declared);
    // Bad expressions stop here: nothing is attached yet. Register fields
    // take the names the guest description gives, declared types' fields
    // the declaration's.
    let filters = args.compile_filters(&header)?;
    if top.is_some() && !header.functions.is_empty() {
        bail!("--functions is for tracing, not top");
    }
    let flight = match args.flight_recorder {
        Some(n) if top.is_none() => Some(flight_recorder(&args, n, &header)?),
        Some(_) => bail!("--flight-recorder is for tracing, not top"),
        None => None,
    };
    let lossless = lossless_mode(&args, top.is_some());
    let (out, counting, refresh) = match &top {
        None if flight.is_some() => (
            Box::new(Recording(flight.clone().expect("just checked"))) as Box<dyn EventWriter>,
            None,
            None,
        ),
        None => (
            outputs::open(
                &Outputs {
                    format: args.output.format,
                    output: args.output.path.as_deref(),
                    capture: args.capture.as_ref(),
                    detail: args.output.detail,
                    roll_mib: args.output.roll_size,
                    compression: args.output.compression,
                    emulator_waits: lossless != Lossless::Off,
                    discard: args.summary,
                },
                &header,
            )?,
            None,
            None,
        ),
        Some(top) => counting_outputs(&args, top, &target, &selection, &header)?,
    };
    // Room for the other providers' probes of libraries mapped later.
    let spare_specs = match &asked {
        Some(asked) if !asked.usdt_globs.is_empty() => SPARE_SPECS,
        _ => 0,
    };
    let settings = session::Settings {
        attach: args.attach,
        ring_bytes: args.ring_size,
        ebpf_log: args.ebpf_log,
        duration: args.duration,
        live: session::live_line_wanted(args.quiet, args.output.path.is_some()),
        json_summary: args.json_summary,
        lossless,
        filters,
        counting,
        refresh,
        flight,
        declared: header.declared_types(),
        output: match top {
            Some(_) => "top",
            None => args.output.format.name(),
        },
        // `--summary` writes no main output: only `--capture` is a capture then.
        compressing: ((args.output.format == Format::Raw && !args.summary)
            || args.capture.is_some())
            && args.output.compression != Compression::None,
        later_programs: asked.as_ref().map(Asked::programs).unwrap_or_default(),
        spare_specs,
    };
    let (out, calls) = outputs::track_calls(
        out,
        &header,
        asked.is_some() && !args.functions.functions.is_empty(),
    );
    let binary_file = args.binary.as_ref().map(|_| file_version(&target));
    let mut session = Session::start(&target, &selection, out, settings)?;
    if let Some(asked) = asked {
        let room = selection.usdt.len() + spare_specs as usize;
        if let Some(mut follow) = Follow::new(&target, selection, header.clone(), asked, room) {
            follow.waiting = waiting;
            session.follow(follow);
        }
    }
    let command = held.as_ref().map(|h| h.pid);
    let own_session = held.as_ref().is_some_and(|h| h.own_session);
    if let Some(held) = held {
        let (pid, program) = (held.pid, held.program.clone());
        held.release()?;
        if header.traces_heap() && target.pid == Some(pid) {
            header.mapped = mapped_after_exec(pid, &program, &header);
            if !header.mapped.is_empty() && !session.process_mapped(&header.mapped) {
                log::warn!(
                    "callers stay addresses: this output wrote its header before the command \
                     mapped its files"
                );
            }
        }
    }
    let stop = session.stream().await?;
    if let (Stop::Interrupted, true, Some(pid)) = (&stop, own_session, command) {
        spawn::interrupt(pid);
    }
    session.detach().await;
    if binary_file.is_some_and(|at_start| file_version(&target) != at_start) {
        log::warn!(
            "{} was replaced while traced (rebuilt, as `cargo run` does when a source \
             changed): processes that ran the new file were not traced; build it before \
             tracing",
            styx_events::escape::controls(&target.files[0].name)
        );
    }
    // With the functions of libraries mapped later.
    let header = session.grown_header().cloned().unwrap_or(header);
    session.finish(stop)?;
    if let Some(calls) = calls {
        let to = args.summary.then_some(args.output.path.as_deref());
        outputs::write_call_table(&calls.borrow(), &header, to)?;
    }
    match command {
        Some(pid) => spawn::wait_exit_code(pid),
        None => Ok(0),
    }
}

/// What to trace: the command held, the binary, or the process; refused
/// where `--on-full wait` cannot hold.
fn target_of(args: &TraceArgs, held: Option<&Held>) -> Result<(Target, Searched)> {
    let (target, searched) = match (held, &args.binary) {
        (Some(held), None) => {
            refuse_script(&held.program)?;
            (Target::spawned(held.pid, &held.program), Searched::Command)
        }
        (Some(held), Some(path)) => (
            Target::binary(path)?.until_exit_of(held.pid),
            Searched::Binary,
        ),
        (None, Some(path)) => (Target::binary(path)?, Searched::Binary),
        (None, None) => (
            Target::from_pid(args.pid.expect("clap requires a target"))?,
            Searched::Process,
        ),
    };
    check_ring_size(args.ring_size, args.delivery)?;
    let waiting = "--on-full wait (--lossless)";
    match (args.on_full(), args.delivery, target.pid) {
        (Some(OnFull::Wait), Delivery::PerEvent, _) => bail!(
            "{waiting} needs --delivery batched: per-event hits cannot wait, a full ring drops them"
        ),
        (Some(OnFull::Wait), _, None) => bail!(
            "{waiting} needs one process (--pid or a command after --): with --binary, \
             processes come and go and none is told when to wait; use --on-full drop \
             (drops counted and reported)"
        ),
        (None, Delivery::Batched, None) if writes_to_disk(args) => log::info!(
            "--binary: batches a full ring has no room for are dropped, counted and \
             reported (waiting for room, the default for a file, needs one process: --pid, \
             or a command after -- without --binary)"
        ),
        _ => {}
    }
    Ok((target, searched))
}

/// Which file `--binary` names now: a rebuilt one is another (its own
/// inode), which the kernel's uprobes on the first do not reach.
fn file_version(target: &Target) -> Option<(u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(&target.files[0].read_at).ok()?;
    Some((meta.dev(), meta.ino(), meta.mtime(), meta.mtime_nsec()))
}

/// Refuses a command that is a script: the program traced from its first
/// instruction would be its interpreter, never the emulator it starts.
fn refuse_script(program: &std::path::Path) -> Result<()> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut start = [0u8; 128];
    // Non-blocking: a FIFO there must not hold the loader (exec refuses it).
    let read = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(program)
        .and_then(|mut file| match file.metadata()?.is_file() {
            true => file.read(&mut start),
            false => Ok(0),
        });
    let Ok(n) = read else { return Ok(()) };
    let Some(line) = start[..n].strip_prefix(b"#!") else {
        return Ok(());
    };
    let interpreter = String::from_utf8_lossy(line.split(|&b| b == b'\n').next().unwrap_or(line));
    let program = program.display().to_string();
    bail!(
        "{} is a script (#!{}): a command after -- is traced as the program it runs, here \
         the interpreter. To trace the emulator it starts, name the emulator's binary: \
         styx-loader --binary EMULATOR [OPTIONS] -- {}",
        styx_events::escape::controls(&program),
        styx_events::escape::controls(interpreter.trim()),
        styx_events::escape::controls(&program)
    )
}

/// Refuses a ring too small for batched delivery: every full batch would
/// be dropped, however fast the loader.
fn check_ring_size(ring_bytes: u32, delivery: Delivery) -> Result<()> {
    let least = MIN_BATCHED_RING_BYTES;
    if delivery == Delivery::Batched && (ring_bytes as usize) < least {
        bail!(
            "--ring-size {} is too small for batched delivery (batches of {} KiB): give at \
             least --ring-size {}K, or --delivery per-event",
            size_text(ring_bytes.into()),
            BATCH_BYTES >> 10,
            least >> 10
        );
    }
    Ok(())
}

/// The session's header: the target, the other providers' sites, the
/// guest and the traced functions.
fn header_of(
    args: &TraceArgs,
    target: &Target,
    selection: &Selection,
    guest: Option<Guest>,
    declared: &Declared,
) -> Header {
    // A site's file: the first whose notes declare its provider and name.
    let declaration = |provider: &str, name: &str| {
        declared
            .values()
            .find(|t| t.provider == provider && t.name == name)
    };
    let usdt = selection
        .usdt
        .iter()
        .enumerate()
        .map(
            |(id, site)| match declaration(&site.provider, &site.probe) {
                Some(event) => UsdtInfo::declared(id as u32, event),
                None => {
                    let args = site.args.iter().map(|a| (a.name.clone(), a.ty));
                    UsdtInfo::new(id as u32, &site.provider, &site.probe, args)
                }
            },
        )
        .collect();
    let mut header = Header::now(target.pid.unwrap_or(0), &target.files[0].name, usdt);
    header.declared = selection
        .declared
        .iter()
        .filter_map(|d| {
            let event = declared.get(&(d.file, d.provider.clone(), d.name.clone()))?;
            Some(DeclaredInfo {
                file: batches::file_number(d.file),
                tag: d.tag,
                spec_id: d.spec_id,
                event: event.clone(),
            })
        })
        .collect();
    header.guest = guest;
    header.functions = selection.functions.clone();
    header.uretprobe_exits = args.function_exits == FunctionExitsArg::Uretprobe;
    header.mapped = mapped_files(target, &header);
    header
}

/// Where the command the loader started mapped its files, once it is past
/// its `exec` (the header was made before it ran): what names the heap's
/// callers. Nothing if it did not get there in time, or exited.
fn mapped_after_exec(pid: u32, program: &std::path::Path, header: &Header) -> Vec<MappedFile> {
    if !spawn::wait_for_exec(pid, program) {
        return Vec::new();
    }
    match Target::from_pid(pid) {
        Ok(running) => mapped_files(&running, header),
        Err(_) => Vec::new(),
    }
}

/// Whether batches wait for the loader: `--on-full wait` (or
/// `--lossless`); by default, when events go to a file on disk (a capture
/// with holes is worth little for coverage, Tenet or replay) and for
/// `top`, whose counts are exact (a thread waits for room in the ring
/// rather than lose a batch; the loader counts ~40 M events/s), if no
/// other loader has flow control of the process.
pub fn lossless_mode(args: &TraceArgs, top: bool) -> Lossless {
    // With --binary the command only starts the processes traced.
    let one_process = args.pid.is_some() || (!args.command.is_empty() && args.binary.is_none());
    match args.on_full() {
        Some(OnFull::Wait) => Lossless::Required,
        Some(OnFull::Drop) => Lossless::Off,
        None if args.delivery != Delivery::Batched || !one_process => Lossless::Off,
        None if top || writes_to_disk(args) => Lossless::IfFree,
        None => Lossless::Off,
    }
}

/// Whether every output is a file on disk: `--output` naming a regular
/// file, a directory (rolled Parquet) or nothing yet, and `--capture`
/// beside it; or the capture alone when `--summary` writes no events. Not
/// when events also go to a terminal, pipe or device (`/dev/null`,
/// `/dev/stdout` on a pipe): the emulator would wait for its reader. Nor
/// the flight recorder's dumps.
fn writes_to_disk(args: &TraceArgs) -> bool {
    if args.flight_recorder.is_some() {
        return false;
    }
    let on_disk = |path: &std::path::Path| match std::fs::metadata(path) {
        Ok(meta) => meta.is_file() || meta.is_dir(),
        Err(_) => true,
    };
    match (args.summary, args.output.path.as_deref()) {
        (true, _) => args.capture.is_some(),
        (false, None) => false,
        (false, Some(path)) => on_disk(path),
    }
}

/// `top`'s output, what the kernel counts, and how the table is drawn.
type CountingOutputs = (Box<dyn EventWriter>, Option<Counting>, Option<Refresh>);

/// `top`: events go to the counter (and a capture, if asked for); with no
/// capture, the kernel counts the per-event types itself.
fn counting_outputs(
    args: &TraceArgs,
    top: &TopOptions,
    target: &Target,
    selection: &Selection,
    header: &Header,
) -> Result<CountingOutputs> {
    let c = &top.count;
    let counter = Counter::new(
        c.key(),
        c.page_size,
        c.heatmap.as_deref(),
        c.max_keys,
        args.output.format,
        &args.kinds(),
        header,
    )?;
    let batched = |kind: EventKind| {
        selection
            .sites
            .iter()
            .any(|s| s.role == Role::BatchEnable(kind))
    };
    // A capture needs every event streamed: then the loader counts them all.
    let counting = args.capture.is_none().then(|| Counting {
        tables: counter
            .specs
            .iter()
            .map(|spec| {
                let mut keys = spec.kernel_keys();
                for &kind in EventKind::ALL {
                    if batched(kind) {
                        keys[kind as usize] = None;
                    }
                }
                keys
            })
            .collect(),
        max_keys: c.max_keys.max(1),
    });
    let mut out: Box<dyn EventWriter> = Box::new(counter.writer());
    if let Some(path) = &args.capture {
        out = Box::new(Tee::new(vec![
            out,
            outputs::open_with(
                Format::Raw,
                Some(path),
                &Options {
                    wait_for_compression: lossless_mode(args, true) != Lossless::Off,
                    ..outputs::options(
                        args.output.detail,
                        args.output.roll_size,
                        args.output.compression,
                    )
                },
                header,
            )?,
        ]));
    }
    let (tables, max_keys) = (counter.specs.len(), counter.max_keys);
    let mut screen = Screen::new(
        counter,
        top.rows,
        args.output.path.clone(),
        format!("styx-loader top: {}", target.name),
    );
    let refresh = Refresh {
        every: top.interval.max(top::MIN_INTERVAL),
        draw: Box::new(move |kernel, done| screen.draw(kernel, done)),
        tables,
        max_keys,
    };
    Ok((out, counting, Some(refresh)))
}

/// `--flight-recorder N`: a recorder whose dumps open the -o format on
/// numbered files (or stdout).
fn flight_recorder(
    args: &TraceArgs,
    per_thread: u64,
    header: &Header,
) -> Result<Rc<RefCell<FlightRecorder>>> {
    if args.capture.is_some() {
        bail!("--capture writes every event; with --flight-recorder use -o raw for dumps");
    }
    let output = Output::new(args.output.path.as_deref(), args.output.format);
    output.refuse_binary_on_terminal(args.output.format)?;
    // The filter language, without sampling: any event it keeps triggers.
    let trigger = match &args.trigger {
        None => None,
        Some(expr) => match Filters::compile_named(
            std::slice::from_ref(expr),
            1,
            &args.kinds(),
            RegisterNames::new(header.guest.as_ref()),
            &DeclaredSites::of(header),
        ) {
            Ok(filters) => Some(filters),
            Err((expr, e)) => bail!("--trigger '{expr}': {e}"),
        },
    };
    let (format, dump_header) = (args.output.format, header.clone());
    let options = Options {
        detail: args.output.detail,
        roll_bytes: args.output.roll_size << 20,
        compression: args.output.compression,
        ..Options::default()
    };
    let open: OpenDump = Box::new(move |n| {
        let place = output.numbered(n);
        let writer = styx_events::open(format, &place, &dump_header, &options)?;
        Ok((writer, place.to_string()))
    });
    let limits = Limits {
        per_thread: usize::try_from(per_thread).unwrap_or(usize::MAX),
        memory: usize::try_from(args.flight_memory).unwrap_or(usize::MAX),
        trigger_dumps: args.max_dumps,
        trigger_holdoff_ns: u64::try_from(args.trigger_holdoff.as_nanos()).unwrap_or(u64::MAX),
    };
    Ok(Rc::new(RefCell::new(
        FlightRecorder::new(limits, trigger, open).reading(header),
    )))
}

/// `--probe-args` that fit no site's note (one line per probe), or that
/// declare no probe being traced.
fn warn_misdeclared(args: &TraceArgs, selection: &Selection) {
    let lines: std::collections::BTreeSet<&String> = selection.misdeclared.iter().collect();
    for line in lines {
        log::warn!("{line}");
    }
    for declared in &args.probe_args {
        let matches = |site: &UsdtSite| {
            declared
                .pattern
                .matches(&format!("{}:{}", site.provider, site.probe))
        };
        if !selection.usdt.iter().any(matches) {
            log::warn!(
                "--probe-args {}: no probe traced with --probes matches it",
                declared.pattern
            );
        }
    }
}

/// What to take from the libraries a process maps later (see
/// [`crate::session::follow`]): what the command line asks of the files
/// found at the start. None for `--binary`, and for `top` (its tables are
/// made for the probes found at the start).
fn asked_later(args: &TraceArgs, target: &Target, top: bool) -> Result<Option<Asked>> {
    if target.pid.is_none() || top {
        return Ok(None);
    }
    let functions = match args.functions.functions.is_empty() {
        true => None,
        false => Some((
            Matcher::new(&args.functions.functions, &args.functions.functions_exclude)?,
            match args.function_exits {
                FunctionExitsArg::Ret => FunctionExits::Ret,
                FunctionExitsArg::Uretprobe => FunctionExits::Uretprobe,
            },
            args.functions.force,
        )),
    };
    Ok(Some(Asked {
        kinds: args.kinds(),
        batched: args.delivery == Delivery::Batched,
        usdt_globs: args.probes.clone(),
        probe_args: args.probe_args.clone(),
        allow_unverified: args.allow_unverified_sites,
        functions,
    }))
}

/// The event types the target's files declare (`styx_probe::event!`), by
/// (file, provider, name).
type Declared = BTreeMap<(usize, String, String), EventType>;

/// The probe sites to attach in the target, or why there are none, the
/// guest its emulator described and the event types it declared.
///
/// With `follow` (a process, whose libraries mapped later are followed),
/// none found is no error: one line says the loader waits for them, and
/// why is returned (said again if none comes).
fn find_sites(
    args: &TraceArgs,
    target: &Target,
    searched: Searched,
    follow: bool,
) -> Result<(Selection, Option<Guest>, Declared, Option<String>)> {
    let mut waiting = None;
    let tables = target.probe_tables()?;
    let guest = guest_description(target, &tables);
    let declared = declared_types(target, &tables);
    let kinds = args.kinds();
    let is_declared = |file: usize, provider: &str, name: &str| {
        declared.contains_key(&(file, provider.to_string(), name.to_string()))
    };
    let wanted = Wanted {
        kinds: &kinds,
        batched: args.delivery == Delivery::Batched,
        usdt_globs: &args.probes,
        probe_args: &args.probe_args,
        allow_unverified: args.allow_unverified_sites,
        declared: &is_declared,
    };
    let mut selection = Selection::default();
    for (file, table) in &tables {
        let mut symbols = Symbols::of(&target.files[*file]);
        wanted.pick(*file, table, &mut symbols, &mut selection);
    }
    for rejected in &selection.rejected {
        log::warn!("{rejected}");
    }
    warn_misdeclared(args, &selection);
    if !args.functions.functions.is_empty() {
        let exits = match args.function_exits {
            FunctionExitsArg::Ret => FunctionExits::Ret,
            FunctionExitsArg::Uretprobe => FunctionExits::Uretprobe,
        };
        let tables = match find_functions(target, &args.functions, searched) {
            Err(e) if follow && selection.sites.is_empty() && e.is::<NoneMatched>() => {
                waiting = Some(wait_for_library(format!("{e:#}")));
                Vec::new()
            }
            found => found?,
        };
        for (file, table) in tables {
            for (name, why) in &table.refused {
                log::warn!(
                    "{}: {}: {}: not traced",
                    target.files[file].name,
                    styx_events::escape::controls(name),
                    styx_events::escape::controls(why)
                );
            }
            selection.add_functions(file, &table, exits);
        }
        // Nothing else to find: a program without styx probes is fine.
        return Ok((selection, guest, declared, waiting));
    }
    if selection.sites.is_empty() {
        let all_sites = || tables.iter().flat_map(|(_, table)| &table.sites);
        let has_styx = all_sites().any(|s| s.provider == styx_common::PROVIDER);
        let globs: Vec<&str> = args.probes.iter().map(glob::Pattern::as_str).collect();
        let what = match (has_styx, globs.is_empty()) {
            (true, _) => "no usable probe sites for the selected events".to_string(),
            (false, true) => "no styx probes".to_string(),
            (false, false) => format!(
                "no styx probes and none matching --probes {}",
                globs.join(", ")
            ),
        };
        let mut why = format!(
            "{} has {what}: {}",
            target.name,
            describe_providers(all_sites())
        );
        if searched == Searched::Command {
            why.push_str(
                " (if it starts the emulator as a process of its own, as a shell or `cargo run` \
                 does, name the emulator: --binary EMULATOR -- COMMAND)",
            );
        }
        if !follow {
            bail!(why);
        }
        waiting = Some(wait_for_library(why));
    }
    Ok((selection, guest, declared, waiting))
}

/// Says, once, that nothing is attached at the start (`why`) and the
/// loader waits for a library with probes; if none ever comes, the
/// session ends with an error (see `Session::finish`).
fn wait_for_library(why: String) -> String {
    eprintln!(
        "styx-loader: {why}; waiting for a library it maps later with them (what a library \
         fires before styx reaches it is not seen)"
    );
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_too_small_for_batches_is_refused_with_the_least_that_works() {
        let err = check_ring_size(64 << 10, Delivery::Batched)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--ring-size 64K is too small for batched delivery (batches of 64 KiB): give at \
             least --ring-size 256K, or --delivery per-event"
        );
        assert!(check_ring_size(MIN_BATCHED_RING_BYTES as u32, Delivery::Batched).is_ok());
        assert!(check_ring_size(4096, Delivery::PerEvent).is_ok());
    }
}
