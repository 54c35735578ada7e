//! Writes decoded events as JSON lines or as text for people.
//!
//! JSON field names are stable (see README "Output"): `ts_ns`, `pid`, `tid`,
//! `event`, then the event's own fields from [`crate::fields`].

use crate::fields::{for_each_field, Arg, Field};
use crate::record::{Event, Text};
use crate::sites::UsdtSite;
use clap::ValueEnum;
use std::io::{self, Write};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON object per line, for jq and scripts.
    Jsonl,
    /// Aligned columns with hex values, for people.
    Text,
}

pub fn write_event(
    out: &mut impl Write,
    format: Format,
    event: &Event<'_>,
    usdt: &[UsdtSite],
) -> io::Result<()> {
    match format {
        Format::Jsonl => write_jsonl(out, event, usdt),
        Format::Text => write_text(out, event, usdt),
    }
}

fn write_jsonl(out: &mut impl Write, event: &Event<'_>, usdt: &[UsdtSite]) -> io::Result<()> {
    let h = &event.header;
    write!(
        out,
        "{{\"ts_ns\":{},\"pid\":{},\"tid\":{},\"event\":\"{}\"",
        h.ts_ns,
        h.pid,
        h.tid,
        event.kind.probe_name()
    )?;
    for_each_field(event, usdt, |field| match field {
        Field::Hex(name, v) | Field::Dec(name, v) => write!(out, ",\"{name}\":{v}"),
        Field::Str(name, v) => {
            write!(out, ",\"{name}\":")?;
            serde_json::to_writer(&mut *out, v).map_err(io::Error::from)
        }
        Field::Args(args) => {
            out.write_all(b",\"args\":[")?;
            for (i, arg) in args.enumerate() {
                let comma = if i > 0 { "," } else { "" };
                match arg {
                    Arg::Signed(v) => write!(out, "{comma}{v}")?,
                    Arg::Unsigned(v) => write!(out, "{comma}{v}")?,
                }
            }
            out.write_all(b"]")
        }
        Field::Name(name, v) => write!(out, ",\"{name}\":\"{v}\""),
        Field::Flag(name, v) => write!(out, ",\"{name}\":{v}"),
        Field::Text(name, text) => {
            write!(out, ",\"{name}\":")?;
            serde_json::to_writer(&mut *out, &*lossy(text)).map_err(io::Error::from)
        }
    })?;
    out.write_all(b"}\n")
}

fn write_text(out: &mut impl Write, event: &Event<'_>, usdt: &[UsdtSite]) -> io::Result<()> {
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
    for_each_field(event, usdt, |field| match field {
        Field::Hex(name, v) => write!(out, " {name}={v:#x}"),
        Field::Str(_, v) => write!(out, " {v}"),
        Field::Args(args) => {
            for (i, arg) in args.enumerate() {
                match arg {
                    Arg::Signed(v) => write!(out, " arg{i}={v}")?,
                    Arg::Unsigned(v) => write!(out, " arg{i}={v:#x}")?,
                }
            }
            Ok(())
        }
        Field::Dec(name, v) => write!(out, " {name}={v}"),
        Field::Name(_, v) => write!(out, " {v}"),
        Field::Flag(name, true) => write!(out, " ({name})"),
        Field::Flag(_, false) => Ok(()),
        Field::Text(name, text) => write!(out, " {name}={:?}", lossy(text)),
    })?;
    out.write_all(b"\n")
}

fn lossy<'a>(text: &'a Text<'_>) -> std::borrow::Cow<'a, str> {
    String::from_utf8_lossy(text.bytes)
}
