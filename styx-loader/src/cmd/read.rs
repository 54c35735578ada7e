//! `styx-loader read FILE`: converts a raw capture into another format, any
//! time later, as often as wanted.

use crate::cli::ReadArgs;
use crate::outputs;
use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{self, Read};
use styx_common::{EventKind, EVENT_KIND_SLOTS};
use styx_events::capture::{Ending, Reader};
use styx_events::writer::Totals;

/// Converts the capture `args` names.
pub fn run(args: &ReadArgs) -> Result<()> {
    let name = args.file.display().to_string();
    let input: Box<dyn Read> = if name == "-" {
        Box::new(io::stdin().lock())
    } else {
        Box::new(File::open(&args.file).with_context(|| format!("cannot open {name}"))?)
    };
    let mut reader = Reader::open(input).with_context(|| format!("reading {name}"))?;
    let mut writer = outputs::open_one(
        args.format,
        args.output.as_deref(),
        args.detail,
        &reader.header,
    )?;
    let mut counts = [0u64; EVENT_KIND_SLOTS as usize];
    let outcome = (|| -> Result<()> {
        while let Some(event) = reader.next().with_context(|| format!("reading {name}"))? {
            counts[event.kind as usize] += 1;
            writer.event(&event)?;
        }
        Ok(())
    })();
    if let Err(e) = outcome {
        // A reader that has seen enough (`| head`) is not an error; a bad
        // record is, but what came before it is still written out.
        if is_broken_pipe(&e) {
            return Ok(());
        }
        let _ = writer.flush();
        return Err(e.context(format!("after {} events", reader.events)));
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
            if *events != reader.events {
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
        Ending::CutShort { offset, partial } => log::warn!(
            "{name} was cut short (it has no end record: the loader was killed or the disk filled): \
             read {} events up to byte {offset}; the last {partial} bytes, part of a record, were dropped, \
             and anything traced after that was never written",
            reader.events
        ),
        Ending::Reading => unreachable!("the reader returned None"),
    }
    let totals = Totals {
        events: &counts,
        drops: &drops,
    };
    match writer.finish(&totals) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing the output"),
    }
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
