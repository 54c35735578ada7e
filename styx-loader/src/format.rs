//! Writes decoded events as JSON lines or as text for people.
//!
//! JSON field names are stable (see README "Output"): `ts_ns`, `pid`, `tid`,
//! `event`, then the event's own fields, named as its probe's arguments.

use crate::record::{Body, Event, Text};
use clap::ValueEnum;
use std::io::{self, Write};
use styx_common::{Branch, EventKind, InterruptKind};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON object per line, for jq and scripts.
    Jsonl,
    /// Aligned columns with hex values, for people.
    Text,
}

pub fn write_event(out: &mut impl Write, format: Format, event: &Event<'_>) -> io::Result<()> {
    match format {
        Format::Jsonl => write_jsonl(out, event),
        Format::Text => write_text(out, event),
    }
}

fn write_jsonl(out: &mut impl Write, event: &Event<'_>) -> io::Result<()> {
    let h = &event.header;
    write!(
        out,
        "{{\"ts_ns\":{},\"pid\":{},\"tid\":{},\"event\":\"{}\"",
        h.ts_ns,
        h.pid,
        h.tid,
        event.kind.probe_name()
    )?;
    match &event.body {
        Body::Args(args) => match event.kind {
            EventKind::MemRead | EventKind::MemWrite => write!(
                out,
                ",\"pc\":{},\"addr\":{},\"val\":{},\"size\":{}",
                args[0], args[1], args[2], h.aux
            )?,
            EventKind::Branch => {
                write!(out, ",\"pc\":{},\"target\":{}", args[0], args[1])?;
                match Branch::decode(args[2]) {
                    Some(b) => write!(
                        out,
                        ",\"kind\":\"{}\",\"conditional\":{}",
                        b.kind.name(),
                        b.conditional
                    )?,
                    None => write!(out, ",\"kind\":\"unknown\",\"kind_raw\":{}", args[2])?,
                }
            }
            EventKind::Interrupt => {
                match InterruptKind::from_id(args[0]) {
                    Some(k) => write!(out, ",\"kind\":\"{}\"", k.name())?,
                    None => write!(out, ",\"kind\":\"unknown\",\"kind_raw\":{}", args[0])?,
                }
                write!(
                    out,
                    ",\"num\":{},\"old_pc\":{},\"new_pc\":{}",
                    args[1], args[2], args[3]
                )?;
            }
            kind => {
                for (name, value) in kind.probe_args().iter().zip(args) {
                    write!(out, ",\"{name}\":{value}")?;
                }
            }
        },
        Body::Span { id, category, name } => {
            out.write_all(b",\"category\":")?;
            write_json_text(out, category)?;
            out.write_all(b",\"name\":")?;
            write_json_text(out, name)?;
            write!(out, ",\"id\":{id}")?;
            if category.truncated || name.truncated {
                out.write_all(b",\"truncated\":true")?;
            }
        }
        Body::Marker(text) => {
            out.write_all(b",\"text\":")?;
            write_json_text(out, text)?;
            if text.truncated {
                out.write_all(b",\"truncated\":true")?;
            }
        }
    }
    out.write_all(b"}\n")
}

fn write_json_text(out: &mut impl Write, text: &Text<'_>) -> io::Result<()> {
    let s = String::from_utf8_lossy(text.bytes);
    serde_json::to_writer(&mut *out, &*s).map_err(io::Error::from)
}

fn write_text(out: &mut impl Write, event: &Event<'_>) -> io::Result<()> {
    let h = &event.header;
    write!(
        out,
        "{:>6}.{:09} {:>7}/{:<7} {:<10}",
        h.ts_ns / 1_000_000_000,
        h.ts_ns % 1_000_000_000,
        h.pid,
        h.tid,
        event.kind.probe_name()
    )?;
    match &event.body {
        Body::Args(args) => match event.kind {
            EventKind::MemRead | EventKind::MemWrite => write!(
                out,
                " pc={:#06x} addr={:#06x} val={:#04x} size={}",
                args[0], args[1], args[2], h.aux
            )?,
            EventKind::Branch => {
                write!(out, " pc={:#06x} target={:#06x}", args[0], args[1])?;
                match Branch::decode(args[2]) {
                    Some(b) if b.conditional => write!(out, " {} (conditional)", b.kind.name())?,
                    Some(b) => write!(out, " {}", b.kind.name())?,
                    None => write!(out, " kind={:#x}?", args[2])?,
                }
            }
            EventKind::Interrupt => {
                match InterruptKind::from_id(args[0]) {
                    Some(k) => write!(out, " {}", k.name())?,
                    None => write!(out, " kind={}?", args[0])?,
                }
                write!(
                    out,
                    " num={} old_pc={:#06x} new_pc={:#06x}",
                    args[1], args[2], args[3]
                )?;
            }
            kind => {
                for (name, value) in kind.probe_args().iter().zip(args) {
                    write!(out, " {name}={value:#x}")?;
                }
            }
        },
        Body::Span { id, category, name } => write!(
            out,
            " {}/{} id={id}{}",
            String::from_utf8_lossy(category.bytes),
            String::from_utf8_lossy(name.bytes),
            if category.truncated || name.truncated {
                " (truncated)"
            } else {
                ""
            }
        )?,
        Body::Marker(text) => write!(
            out,
            " {:?}{}",
            String::from_utf8_lossy(text.bytes),
            if text.truncated { " (truncated)" } else { "" }
        )?,
    }
    out.write_all(b"\n")
}
