//! `styx-loader read FILE`: converts a raw capture into another format, any
//! time later, as often as wanted, whole or cut (a window, types, filters);
//! `top CAPTURE` is its `--by` table.

use crate::cli::{compile_filters, ReadArgs, TopOptions, TraceArgs};
use crate::cmd::top::Counter;
use crate::outputs;
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{self, Read};
use std::path::PathBuf;
use styx_common::{EventKind, EVENT_KIND_SLOTS};
use styx_events::{read_blocks, Ending, Format, Header, Keep, ParallelError, Reader};
use styx_events::{Bound, Cut, Discard, EventWriter, Options, Tee, Totals, Types};

/// `top CAPTURE`: `read CAPTURE --by KEY` (pc unless --by says), the text
/// table `--rows` long as top's.
pub fn run_top(capture: PathBuf, top: TopOptions, trace: TraceArgs) -> Result<()> {
    let mut count = top.count;
    count.by = Some(count.key().to_string());
    let rows = (trace.output.format == Format::Text).then_some(top.rows);
    run(&ReadArgs {
        file: capture,
        events: (trace.events.iter())
            .map(|k| k.probe_name().to_string())
            .collect(),
        output: trace.output,
        select: trace.select,
        from: None,
        to: None,
        rows,
        summary: false,
        threads: None,
        count,
    })
}

/// Converts the capture `args` names.
pub fn run(args: &ReadArgs) -> Result<()> {
    let name = args.file.display().to_string();
    let mut reader = open(args, &name)?;
    let mut types = (!args.events.is_empty())
        .then(|| event_types(&args.events, &reader.header, &name))
        .transpose()?;
    // A QEMU guest's description, a marker, names drcov's module (as
    // tracing with -o drcov takes it: `TraceArgs::kinds`) and the guest
    // functions `--by pc` shows.
    let by_pc = args.count.by.is_some() && args.count.key() == "pc";
    if let Some(types) = types
        .as_mut()
        .filter(|_| by_pc || args.output.format == Format::Drcov)
    {
        types.add_kind(EventKind::Marker);
    }
    // Every type unless -e: a capture says which it holds only as it is read.
    let kinds = types
        .as_ref()
        .map_or_else(|| EventKind::ALL.to_vec(), Types::kinds);
    if let (Some(from), Some(to)) = (args.from, args.to) {
        check_window(from, to)?;
    }
    let mut cut = Cut::new(args.from, args.to, types);
    let filters = &args.select.filters;
    let mut keep = compile_filters(filters, args.select.sample, &kinds, &reader.header)?
        .map(|filters| Keep::new(filters, |_| false));
    let count = &args.count;
    let styx_kinds: Vec<EventKind> = kinds
        .into_iter()
        .filter(|&k| k != EventKind::Usdt)
        .collect();
    let counter = counter(args, &styx_kinds, &reader.header)?;
    if args.summary && reader.header.functions.is_empty() {
        bail!("{name} holds no traced functions (--functions): there is no table to --summary");
    }
    let writer: Box<dyn EventWriter> = match (&count.by, &counter) {
        // The table replaces the events.
        (Some(_), Some(counter)) => Box::new(counter.writer()),
        _ if args.summary => Box::new(Discard),
        (_, counter) => {
            let out = &args.output;
            let options = Options {
                // Parquet's encoder on a thread of its own.
                threads: threads(args),
                ..outputs::options(out.detail, out.roll_size, out.compression)
            };
            let events =
                outputs::open_with(out.format, out.path.as_deref(), &options, &reader.header)?;
            match counter {
                Some(counter) => Box::new(Tee::new(vec![events, Box::new(counter.writer())])),
                None => events,
            }
        }
    };
    // Calls are paired again (as when traced), for the table.
    let (mut writer, calls) = outputs::track_calls(writer, &reader.header, false);
    // Blocks in parallel only when nothing between the reader and the
    // writer holds state across events (a cut does not: each event is in
    // it or not on its own).
    let parallel = keep.is_none() && calls.is_none();
    let counts = match convert(
        &mut reader,
        &mut cut,
        keep.as_mut(),
        &mut *writer,
        args,
        parallel,
    ) {
        Ok(counts) => counts,
        // A reader that has seen enough (`| head`) is not an error; a bad
        // record is, but what came before it is still written out.
        Err(e) if is_broken_pipe(&e) => return Ok(()),
        Err(e) => {
            let _ = writer.flush();
            return Err(e.context(format!("after {} events", reader.events)));
        }
    };
    let drops = check_ending(&reader, &name)?;
    if counts.iter().sum::<u64>() == 0 && !cut.keeps_all() {
        if let Some((first, last)) = cut.span() {
            log::warn!(
                "no event of {name} is in the window or of the types asked for (--from, --to, -e): \
                 its events span {:.6} s from ts_ns {first} to {last}",
                (last - first) as f64 / 1e9
            );
        }
    }
    let totals = Totals {
        events: &counts,
        drops: &drops,
    };
    match writer.finish(&totals) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
        other => other.context("writing the output")?,
    }
    if let Some(calls) = calls {
        let to = args.summary.then_some(args.output.path.as_deref());
        outputs::write_call_table(&calls.borrow(), &reader.header, to)?;
    }
    if let Some(counter) = counter {
        let tables = counter.merged(&[]);
        let table_to = count.by.is_some().then_some(args.output.path.as_deref());
        counter.write_final(
            &tables,
            table_to,
            args.rows,
            &format!("styx-loader read {name}"),
        )?;
    }
    Ok(())
}

/// The capture `args` names (`-`: stdin), its header read.
fn open(args: &ReadArgs, name: &str) -> Result<Reader<Box<dyn Read>>> {
    let input: Box<dyn Read> = if name == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(&args.file).with_context(|| format!("cannot open {name}"))?)
    };
    Reader::open(input).with_context(|| format!("reading {name}"))
}

/// `--by` and `--heatmap`'s counter, if either was given.
fn counter(args: &ReadArgs, kinds: &[EventKind], header: &Header) -> Result<Option<Counter>> {
    let count = &args.count;
    if count.by.is_none() && count.heatmap.is_none() {
        return Ok(None);
    }
    let format = match count.by {
        Some(_) => args.output.format,
        None => Format::Text,
    };
    let counter = Counter::new(
        count.by.as_deref().unwrap_or("event"),
        count.page_size,
        count.heatmap.as_deref(),
        count.max_keys,
        format,
        kinds,
        header,
    )?;
    Ok(Some(counter))
}

/// The capture to `writer`: its blocks on several threads where the
/// output comes out the same (`parallel`: no state across events before
/// the writer), else one event after the other.
fn convert(
    reader: &mut Reader<Box<dyn Read>>,
    cut: &mut Cut,
    keep: Option<&mut Keep>,
    writer: &mut dyn EventWriter,
    args: &ReadArgs,
    parallel: bool,
) -> Result<[u64; EVENT_KIND_SLOTS as usize]> {
    let name = args.file.display().to_string();
    let threads = threads(args);
    if !(parallel && threads > 1 && reader.reads_blocks() && writer.formats_apart()) {
        return copy(reader, cut, keep, writer, &name);
    }
    let (format, header) = (args.output.format, reader.header.clone());
    let out = &args.output;
    let options = outputs::options(out.detail, out.roll_size, out.compression);
    let make = move || {
        styx_events::open_block_formatter(format, &header, &options)
            .ok_or_else(|| io::Error::other("this format is not formatted apart"))
    };
    read_blocks(reader, threads, cut, &make, writer).map_err(|e| match e {
        ParallelError::Capture(e) => anyhow::Error::new(e).context(format!("reading {name}")),
        ParallelError::Output(e) => e.into(),
    })
}

/// `--threads`, else one per core.
fn threads(args: &ReadArgs) -> usize {
    args.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |n| usize::try_from(n).unwrap_or(usize::MAX),
    )
}

/// Every event of the capture that `cut` and then `keep` keep to `writer`;
/// how many of each kind.
fn copy(
    reader: &mut Reader<Box<dyn Read>>,
    cut: &mut Cut,
    mut keep: Option<&mut Keep>,
    writer: &mut dyn EventWriter,
    name: &str,
) -> Result<[u64; EVENT_KIND_SLOTS as usize]> {
    let mut counts = [0u64; EVENT_KIND_SLOTS as usize];
    while let Some(event) = reader.next().with_context(|| format!("reading {name}"))? {
        // The cut first: sampling counts only the events in it.
        if !cut.keeps(&event) || keep.as_mut().is_some_and(|k| !k.keeps(&event)) {
            continue;
        }
        counts[event.kind as usize] += 1;
        writer.event(&event)?;
    }
    Ok(counts)
}

/// `--from` before `--to`, where both count the same way (else only the
/// capture can say).
fn check_window(from: Bound, to: Bound) -> Result<()> {
    let empty = match (from, to) {
        (Bound::AfterFirst(a), Bound::AfterFirst(b)) | (Bound::At(a), Bound::At(b)) => a >= b,
        _ => false,
    };
    if empty {
        bail!("--from {from} is not before --to {to}: the window holds nothing");
    }
    Ok(())
}

/// `-e` on `read`: each name a styx type (`usdt`: every USDT event),
/// `fn_entry`/`fn_exit`, or the capture's USDT sites (other providers'
/// probes, declared types) by probe name or PROVIDER:PROBE glob.
fn event_types(names: &[String], header: &Header, capture: &str) -> Result<Types> {
    let mut types = Types::default();
    for name in names.iter().map(|n| n.trim()) {
        if let Some(kind) = EventKind::from_probe_name(name) {
            types.add_kind(kind);
            continue;
        }
        if let Some(exit) = ["fn_entry", "fn_exit"].iter().position(|f| *f == name) {
            types.add_function(exit == 1);
            continue;
        }
        let sites: Vec<u32> = match name.contains(':') {
            true => {
                let glob = glob::Pattern::new(name)
                    .map_err(|e| anyhow::anyhow!("-e '{name}' is not a glob pattern: {e}"))?;
                (header.usdt.iter())
                    .filter(|u| glob.matches(&format!("{}:{}", u.provider, u.probe)))
                    .map(|u| u.spec_id)
                    .collect()
            }
            false => (header.usdt.iter())
                .filter(|u| u.probe == name)
                .map(|u| u.spec_id)
                .collect(),
        };
        if sites.is_empty() {
            let mut known: Vec<String> = (EventKind::ALL.iter())
                .map(|k| k.probe_name().to_string())
                .collect();
            known.extend(["fn_entry".into(), "fn_exit".into()]);
            let probes = header
                .usdt
                .iter()
                .map(|u| format!("{}:{}", u.provider, u.probe));
            known.extend(probes.collect::<std::collections::BTreeSet<_>>());
            bail!(
                "-e '{name}': no such event type in {capture} (its types: {})",
                known.join(" ")
            );
        }
        sites.into_iter().for_each(|id| types.add_site(id));
    }
    Ok(types)
}

/// What the capture's end says: the drops per kind it recorded (a warning
/// for any), a warning if it was cut short or had malformed batches, an
/// error if it holds fewer or more events than it says.
fn check_ending(
    reader: &Reader<Box<dyn Read>>,
    name: &str,
) -> Result<[u64; EVENT_KIND_SLOTS as usize]> {
    if let Some((offset, first)) = &reader.first_malformed_batch {
        // A block's payload may be compressed: its place is the block's.
        let place = match reader.reads_blocks() {
            true => "in the block at byte",
            false => "at byte",
        };
        log::warn!(
            "{name}: {} malformed batch records were skipped (the first {place} {offset}: \
             {first}); their events from the fault on are lost, the rest of the capture was read",
            reader.malformed_batches
        );
    }
    let mut drops = [0u64; EVENT_KIND_SLOTS as usize];
    match &reader.ending {
        Ending::Complete {
            events,
            dropped,
            per_kind,
        } => {
            for &(kind, _, lost) in per_kind {
                if let Some(slot) = drops.get_mut(kind as usize) {
                    *slot = lost;
                }
            }
            // A malformed batch's events were counted from its head.
            if *events != reader.events && reader.malformed_batches == 0 {
                bail!(
                    "{name} says it holds {events} events but {} were read",
                    reader.events
                );
            }
            if *dropped > 0 {
                log::warn!(
                    "{dropped} events were dropped while tracing (ring buffer full): {}",
                    per_kind_list(per_kind)
                );
            }
        }
        Ending::CutShort {
            offset,
            partial,
            lost_events,
        } => log::warn!(
            "{name} was cut short (it has no end record: the loader was killed or the disk filled): \
             read {} events up to byte {offset}; the last {partial} bytes, part of a {}, were dropped, \
             and anything traced after that was never written",
            reader.events,
            match lost_events {
                Some(n) => format!("block of {n} events"),
                None => "record or of a block's frame".into(),
            }
        ),
        Ending::Reading => unreachable!("the reader returned None"),
    }
    Ok(drops)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<io::Error>())
        .any(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

fn per_kind_list(per_kind: &[(u8, u64, u64)]) -> String {
    per_kind
        .iter()
        .filter(|(_, _, lost)| *lost > 0)
        .map(|&(kind, _, lost)| {
            let name = EventKind::from_id(kind).map_or("?", EventKind::probe_name);
            format!("{name} {lost}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}
