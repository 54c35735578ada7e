//! Output formats, and the writers for the line formats: JSON lines and text
//! for people. Every format is an [`EventWriter`], live or from a capture.
//!
//! JSON field names are stable (see README "Output"): `ts_ns`, `pid`, `tid`,
//! `event`, then the event's own fields from [`crate::fields`].

use crate::capture::{CaptureWriter, ClockMapping, Header};
use crate::chrome::ChromeWriter;
use crate::fields::{for_each_field, plain_fields, plain_values, Arg, Field};
pub use crate::format_bytes::Bytes;
use crate::perfetto::PerfettoWriter;
use crate::record::{Body, Event, Text};
use crate::sites::UsdtSite;
use clap::ValueEnum;
use std::io::{self, Write};
use std::time::{Duration, UNIX_EPOCH};
use styx_common::{EventKind, EVENT_KIND_SLOTS};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON object per line, for jq and scripts.
    Jsonl,
    /// Aligned columns with hex values, for people.
    Text,
    /// A compact binary capture to keep and convert later with
    /// `styx-loader read` (needs --output FILE or a pipe).
    Raw,
    /// Chrome trace-event JSON (chrome://tracing, Perfetto UI): spans as
    /// slices, other events as instants, event rates as counters.
    Chrome,
    /// A Perfetto protobuf trace (ui.perfetto.dev); gzip-compressed when
    /// --output ends in .gz.
    Perfetto,
}

/// Where decoded events go, in one format.
pub trait EventWriter {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()>;
    /// Hands what was written so far to the output, so a reader sees it.
    fn flush(&mut self) -> io::Result<()>;
    /// Ends the output (trailers, closing brackets) and flushes it.
    fn finish(&mut self, totals: &Totals<'_>) -> io::Result<()>;
}

/// How much a text line says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Detail {
    /// Time, event and its fields: no pid/tid column.
    Brief,
    /// Time, pid/tid, event and its fields.
    #[default]
    Normal,
    /// Also the wall-clock time (UTC), from the clock mapping.
    Full,
}

/// How a format writes, beyond its output.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Compress (Perfetto only).
    pub gzip: bool,
    /// Text only.
    pub detail: Detail,
}

impl Options {
    /// Gzip for an output file named `*.gz`.
    pub fn new(path: Option<&std::path::Path>, detail: Detail) -> Options {
        Options {
            gzip: path.is_some_and(|p| p.extension().is_some_and(|e| e == "gz")),
            detail,
        }
    }
}

/// What a run saw, per event kind id, for a format's trailer.
pub struct Totals<'a> {
    pub events: &'a [u64],
    pub drops: &'a [u64],
}

/// A writer for `format` on `out`, for the session `header` describes.
pub fn open(
    format: Format,
    out: Box<dyn Write>,
    header: &Header,
    options: &Options,
) -> io::Result<Box<dyn EventWriter>> {
    Ok(match format {
        Format::Jsonl => Box::new(LineWriter::new(out, Line::Jsonl, header)),
        Format::Text => Box::new(LineWriter::new(out, Line::Text(options.detail), header)),
        Format::Raw => Box::new(CaptureWriter::new(out, header)?),
        Format::Chrome => Box::new(ChromeWriter::new(out, header)),
        Format::Perfetto => Box::new(PerfettoWriter::new(out, header, options.gzip)),
    })
}

/// Several writers fed the same events (`--capture` beside `-o`).
pub struct Tee(pub Vec<Box<dyn EventWriter>>);

impl EventWriter for Tee {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        self.0.iter_mut().try_for_each(|w| w.event(event))
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.iter_mut().try_for_each(|w| w.flush())
    }
    fn finish(&mut self, totals: &Totals<'_>) -> io::Result<()> {
        self.0.iter_mut().try_for_each(|w| w.finish(totals))
    }
}

/// An output whose errors say which file they came from.
pub struct Labeled {
    out: Box<dyn Write>,
    name: String,
}

impl Labeled {
    pub fn new(out: Box<dyn Write>, name: String) -> Labeled {
        Labeled { out, name }
    }

    fn label(&self, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("{}: {e}", self.name))
    }
}

impl Write for Labeled {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.write(buf).map_err(|e| self.label(e))
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.out.write_all(buf).map_err(|e| self.label(e))
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush().map_err(|e| self.label(e))
    }
}

#[derive(Clone, Copy)]
enum Line {
    Jsonl,
    Text(Detail),
}

/// Bytes of lines gathered before they go to the output.
const LINES_CHUNK: usize = 64 << 10;

/// JSON lines or text: each event formatted into a buffer that goes out in
/// chunks (formatting straight into bytes, not through `fmt`, is what makes
/// these fast).
struct LineWriter {
    out: Box<dyn Write>,
    line: Line,
    usdt: Vec<UsdtSite>,
    clock: ClockMapping,
    buf: Bytes,
    repeats: Repeats,
}

impl LineWriter {
    fn new(out: Box<dyn Write>, line: Line, header: &Header) -> LineWriter {
        LineWriter {
            out,
            line,
            usdt: header.usdt_sites(),
            clock: header.clock,
            buf: Bytes::with_capacity(LINES_CHUNK),
            repeats: Repeats::default(),
        }
    }

    fn write_out(&mut self) -> io::Result<()> {
        let result = self.out.write_all(self.buf.as_slice());
        self.buf.clear();
        result
    }
}

impl EventWriter for LineWriter {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        match self.line {
            Line::Jsonl => jsonl(&mut self.buf, event, &self.usdt, &mut self.repeats),
            Line::Text(Detail::Normal) => text(&mut self.buf, event, &self.usdt, true),
            Line::Text(Detail::Brief) => text(&mut self.buf, event, &self.usdt, false),
            Line::Text(Detail::Full) => {
                let wall =
                    UNIX_EPOCH + Duration::from_nanos(self.clock.realtime(event.header.ts_ns));
                let _ = write!(self.buf, "{} ", humantime::format_rfc3339_nanos(wall));
                text(&mut self.buf, event, &self.usdt, true)
            }
        }
        if self.buf.len() >= LINES_CHUNK {
            self.write_out()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_out()?;
        self.out.flush()
    }

    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        self.flush()
    }
}

/// What consecutive lines share, formatted once: the high digits of the
/// time (they change every ms) and the thread's ids.
pub struct Repeats {
    ms: Option<u64>,
    ms_text: Vec<u8>,
    thread: Option<(u32, u32)>,
    thread_text: Vec<u8>,
    /// Per kind id with plain fields: `NAME","FIELD0":`, then `,"FIELDi":`.
    json_keys: Vec<Option<Vec<Vec<u8>>>>,
}

impl Default for Repeats {
    fn default() -> Repeats {
        let json_keys = (0..EVENT_KIND_SLOTS as u8)
            .map(|id| {
                let kind = EventKind::from_id(id)?;
                let names = plain_fields(kind)?;
                let mut keys =
                    vec![format!("{}\",\"{}\":", kind.probe_name(), names[0]).into_bytes()];
                keys.extend(names[1..].iter().map(|n| format!(",\"{n}\":").into_bytes()));
                Some(keys)
            })
            .collect();
        Repeats {
            ms: None,
            ms_text: Vec::new(),
            thread: None,
            thread_text: Vec::new(),
            json_keys,
        }
    }
}

impl Repeats {
    /// `ts` in decimal: the cached ms digits, then six of ns.
    #[inline]
    fn ts(&mut self, out: &mut Bytes, ts: u64) {
        let ms = ts / 1_000_000;
        if ms == 0 {
            return dec(out, ts);
        }
        if self.ms != Some(ms) {
            self.ms = Some(ms);
            self.ms_text.clear();
            self.ms_text
                .extend_from_slice(itoa::Buffer::new().format(ms).as_bytes());
        }
        out.extend_from_slice(&self.ms_text);
        digits6(out, ts % 1_000_000);
    }

    /// `,"pid":P,"tid":T,"event":"`
    #[inline]
    fn json_thread(&mut self, out: &mut Bytes, pid: u32, tid: u32) {
        if self.thread != Some((pid, tid)) {
            self.thread = Some((pid, tid));
            let mut text = Bytes::default();
            text.extend_from_slice(b",\"pid\":");
            dec(&mut text, pid.into());
            text.extend_from_slice(b",\"tid\":");
            dec(&mut text, tid.into());
            text.extend_from_slice(b",\"event\":\"");
            self.thread_text = text.as_slice().to_vec();
        }
        out.extend_from_slice(&self.thread_text);
    }
}

/// Exactly six decimal digits, zero-padded.
#[inline(always)]
fn digits6(out: &mut Bytes, v: u64) {
    out.dec_fixed(v, 6);
}

/// Appends one event as a JSON line.
pub fn jsonl(out: &mut Bytes, event: &Event<'_>, usdt: &[UsdtSite], repeats: &mut Repeats) {
    let h = &event.header;
    out.extend_from_slice(b"{\"ts_ns\":");
    repeats.ts(out, h.ts_ns);
    repeats.json_thread(out, h.pid, h.tid);
    if let (Body::Args(args), Some(keys)) = (&event.body, &repeats.json_keys[event.kind as usize]) {
        // The common case, straight from the record (see plain_fields).
        let values = plain_values(event, args);
        for (key, value) in keys.iter().zip(values) {
            out.extend_from_slice(key);
            dec(out, value);
        }
        out.extend_from_slice(b"}\n");
        return;
    }
    out.extend_from_slice(event.kind.probe_name().as_bytes());
    out.push(b'"');
    let _ = for_each_field(event, usdt, |field| {
        out.extend_from_slice(b",\"");
        match field {
            Field::Hex(name, v) | Field::Dec(name, v) => {
                key(out, name);
                dec(out, v);
            }
            Field::Str(name, v) => {
                key(out, name);
                json_string(out, v);
            }
            Field::Args(args) => {
                key(out, "args");
                json_args(out, args);
            }
            Field::Name(name, v) => {
                key(out, name);
                out.push(b'"');
                out.extend_from_slice(v.as_bytes());
                out.push(b'"');
            }
            Field::Flag(name, v) => {
                key(out, name);
                out.extend_from_slice(if v { b"true" } else { b"false" });
            }
            Field::Text(name, text) => {
                key(out, name);
                json_string(out, &lossy(text));
            }
        }
        Ok::<(), ()>(())
    });
    out.extend_from_slice(b"}\n");
}

/// `name":` (the opening quote is already out).
#[inline]
fn key(out: &mut Bytes, name: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// Appends one event as a line of text; `threads` adds the pid/tid column.
pub fn text(out: &mut Bytes, event: &Event<'_>, usdt: &[UsdtSite], threads: bool) {
    let h = &event.header;
    pad_left(out, itoa::Buffer::new().format(h.ts_ns / 1_000_000_000), 6);
    out.push(b'.');
    let frac = h.ts_ns % 1_000_000_000;
    pad_left_with(out, itoa::Buffer::new().format(frac), 9, b'0');
    out.push(b' ');
    if threads {
        pad_left(out, itoa::Buffer::new().format(h.pid), 7);
        out.push(b'/');
        pad_right(out, itoa::Buffer::new().format(h.tid), 7);
        out.push(b' ');
    }
    pad_right(out, event.kind.probe_name(), 10);
    let _ = for_each_field(event, usdt, |field| {
        match field {
            Field::Hex(name, v) => {
                name_eq(out, name);
                hex(out, v);
            }
            Field::Str(_, v) => {
                out.push(b' ');
                out.extend_from_slice(v.as_bytes());
            }
            Field::Args(args) => {
                for (i, arg) in args.enumerate() {
                    out.extend_from_slice(b" arg");
                    dec(out, i as u64);
                    out.push(b'=');
                    match arg {
                        Arg::Signed(v) => {
                            out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes())
                        }
                        Arg::Unsigned(v) => hex(out, v),
                    }
                }
            }
            Field::Dec(name, v) => {
                name_eq(out, name);
                dec(out, v);
            }
            Field::Name(_, v) => {
                out.push(b' ');
                out.extend_from_slice(v.as_bytes());
            }
            Field::Flag(name, true) => {
                out.extend_from_slice(b" (");
                out.extend_from_slice(name.as_bytes());
                out.push(b')');
            }
            Field::Flag(_, false) => {}
            Field::Text(name, text) => {
                name_eq(out, name);
                // Rust's Debug quoting, as people expect from `{:?}`.
                let _ = write!(out, "{:?}", lossy(text));
            }
        }
        Ok::<(), ()>(())
    });
    out.push(b'\n');
}

#[inline]
fn name_eq(out: &mut Bytes, name: &str) {
    out.push(b' ');
    out.extend_from_slice(name.as_bytes());
    out.push(b'=');
}

#[inline(always)]
pub fn dec(out: &mut Bytes, v: u64) {
    out.dec(v);
}

/// `0x…` in lowercase, as `{:#x}` writes it.
#[inline]
pub fn hex(out: &mut Bytes, v: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digits = (64 - v.leading_zeros() as usize).div_ceil(4).max(1);
    let mut text = [b'0'; 18];
    text[1] = b'x';
    let mut rest = v;
    for slot in text[2..2 + digits].iter_mut().rev() {
        *slot = DIGITS[(rest & 0xf) as usize];
        rest >>= 4;
    }
    out.extend_from_slice(&text[..2 + digits]);
}

fn pad_left(out: &mut Bytes, s: &str, width: usize) {
    pad_left_with(out, s, width, b' ');
}

fn pad_left_with(out: &mut Bytes, s: &str, width: usize, fill: u8) {
    out.fill(width.saturating_sub(s.len()), fill);
    out.extend_from_slice(s.as_bytes());
}

fn pad_right(out: &mut Bytes, s: &str, width: usize) {
    out.extend_from_slice(s.as_bytes());
    out.fill(width.saturating_sub(s.len()), b' ');
}

/// A JSON string: plain printable ASCII straight through, anything else
/// escaped by serde_json.
/// Another provider's arguments as a JSON array, signed ones negative.
pub fn json_args(out: &mut Bytes, args: impl Iterator<Item = Arg>) {
    out.push(b'[');
    for (i, arg) in args.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match arg {
            Arg::Signed(v) => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
            Arg::Unsigned(v) => dec(out, v),
        }
    }
    out.push(b']');
}

pub fn json_string(out: &mut Bytes, s: &str) {
    if s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
    }
}

pub fn lossy<'a>(text: &'a Text<'_>) -> std::borrow::Cow<'a, str> {
    String::from_utf8_lossy(text.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_the_same_however_they_repeat() {
        let mut repeats = Repeats::default();
        for ts in [
            0,
            999_999,
            1_000_000,
            1_000_001,
            20_000_000_000_123,
            20_000_000_000_456,
            20_000_001_000_000,
            u64::MAX,
        ] {
            let mut out = Bytes::default();
            repeats.ts(&mut out, ts);
            assert_eq!(out.as_slice(), ts.to_string().as_bytes());
        }
    }

    #[test]
    fn hex_matches_std() {
        for v in [0, 1, 0xf, 0x10, 0x1234_5678, u64::MAX] {
            let mut out = Bytes::default();
            hex(&mut out, v);
            assert_eq!(out.as_slice(), format!("{v:#x}").as_bytes());
        }
    }

    #[test]
    fn json_strings_escape_what_needs_it() {
        for s in ["plain", "a \"quote\"", "back\\slash", "tab\there", "é"] {
            let mut out = Bytes::default();
            json_string(&mut out, s);
            assert_eq!(out.as_slice(), serde_json::to_string(s).unwrap().as_bytes());
        }
    }
}
