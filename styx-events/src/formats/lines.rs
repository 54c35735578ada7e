//! The line formats: JSON lines for scripts, aligned text for people. Each
//! event is formatted straight into bytes ([`crate::write::buf::ByteBuf`]), not through
//! `fmt`, which is what makes these fast.
//!
//! JSON field names are stable (see README "Output"): `ts_ns`, `pid`, `tid`,
//! `event`, then the event's own fields from [`crate::session::fields`].

use super::jsonl::jsonl;
use super::text::text;
use crate::record::event::Event;
use crate::session::fields::{is_plain, Names};
use crate::session::header::{ClockMapping, Header};
use crate::session::reading::Reading;
use crate::session::schema;
use crate::write::buf::ByteBuf;
use crate::write::writer::{Chunked, EventWriter, FormatBlock, Formatted, Totals};
use std::io::{self, Write};
use std::time::{Duration, UNIX_EPOCH};
use styx_common::schema::FieldKind;
use styx_common::{EventKind, EVENT_KIND_SLOTS};

/// How much a text line says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Detail {
    /// Time, event and its fields: no pid/tid column.
    Brief,
    /// Time, pid/tid, event and its fields.
    #[default]
    Normal,
    /// Also the wall-clock time (UTC), from the clock mapping.
    Full,
}

/// Which line format.
#[derive(Clone, Copy)]
pub enum Line {
    /// JSON lines.
    Jsonl,
    /// Text, with this much detail.
    Text(Detail),
}

/// Bytes of lines gathered before they go to the output.
const LINES_CHUNK: usize = 64 << 10;

/// JSON lines or text: each event formatted into a buffer that goes out in
/// chunks (formatting straight into bytes, not through `fmt`, is what makes
/// these fast).
pub struct LineWriter {
    out: Chunked<Box<dyn Write>>,
    lines: Lines,
}

/// A parallel `read` worker's lines: a block's events into a buffer of
/// their own, handed over whole.
pub struct LineFormatter {
    buf: ByteBuf,
    lines: Lines,
}

/// What formats a line: the format and what it names and repeats.
struct Lines {
    line: Line,
    names: Names,
    clock: ClockMapping,
    repeats: Repeats,
}

impl Lines {
    fn new(line: Line, header: &Header) -> Lines {
        let names = Names::new(header);
        Lines {
            repeats: Repeats::new(&names),
            line,
            names,
            clock: header.clock,
        }
    }

    /// Appends `event`'s line to `buf`.
    #[inline]
    fn put(&mut self, buf: &mut ByteBuf, event: &Event<'_>) {
        match self.line {
            Line::Jsonl => jsonl(buf, event, &self.names, &mut self.repeats),
            Line::Text(Detail::Normal) => text(buf, event, &self.names, true),
            Line::Text(Detail::Brief) => text(buf, event, &self.names, false),
            Line::Text(Detail::Full) => {
                let wall =
                    UNIX_EPOCH + Duration::from_nanos(self.clock.realtime(event.header.ts_ns));
                let _ = write!(buf, "{} ", humantime::format_rfc3339_nanos(wall));
                text(buf, event, &self.names, true)
            }
        }
    }
}

impl LineWriter {
    /// Lines of `line` format on `out`, for the session `header` describes.
    pub fn new(out: Box<dyn Write>, line: Line, header: &Header) -> LineWriter {
        LineWriter {
            out: Chunked::new(out, LINES_CHUNK),
            lines: Lines::new(line, header),
        }
    }
}

impl LineFormatter {
    /// Lines of `line` format, for the session `header` describes.
    pub fn new(line: Line, header: &Header) -> LineFormatter {
        LineFormatter {
            buf: ByteBuf::default(),
            lines: Lines::new(line, header),
        }
    }
}

impl EventWriter for LineWriter {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        self.lines.put(&mut self.out.buf, event);
        self.out.event_done()
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        self.flush()
    }

    // Each line names its probe from the header as it is then.
    fn header_grew(&mut self, header: &Header) -> bool {
        self.lines = Lines::new(self.lines.line, header);
        true
    }

    // A line depends on its event alone (`Repeats` only saves work).
    fn formats_apart(&self) -> bool {
        true
    }

    fn formatted(&mut self, piece: &mut Formatted) -> io::Result<()> {
        let Formatted::Bytes(bytes) = piece else {
            return Err(io::Error::other("rows handed to a line format"));
        };
        let written = self.out.write_through(bytes.as_slice());
        bytes.clear();
        written
    }
}

impl FormatBlock for LineFormatter {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        self.lines.put(&mut self.buf, event);
        Ok(())
    }

    fn take(&mut self, room: Option<Formatted>) -> Formatted {
        // The lines as formatted, into room already grown: copying each
        // block's lines into a fresh buffer (growing, faulting its pages
        // in, freed on the calling thread) cost the demo's capture half a
        // second of system time as JSON lines.
        let room = match room {
            Some(Formatted::Bytes(room)) => room,
            _ => ByteBuf::default(),
        };
        Formatted::Bytes(std::mem::replace(&mut self.buf, room))
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
    pub(crate) json_keys: Vec<Option<Vec<Vec<u8>>>>,
}

impl Default for Repeats {
    fn default() -> Repeats {
        Repeats::new(&Names::default())
    }
}

impl Repeats {
    /// Nothing repeated yet; kinds with a named register take the field
    /// walk (their lines gain `reg_name`).
    pub fn new(names: &Names) -> Repeats {
        let json_keys = (0..EVENT_KIND_SLOTS as u8)
            .map(|id| {
                let kind = EventKind::from_id(id).filter(|&k| is_plain(k))?;
                let fields = schema::catalogue(kind);
                let named_reg =
                    (fields.iter()).any(|f| f.reading == Reading::Number(FieldKind::Register));
                if named_reg && !names.registers.is_empty() {
                    return None;
                }
                let names: Vec<&str> = fields.iter().map(|f| &*f.name).collect();
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

    /// `ts` in decimal: the cached ms digits, then six of ns.
    #[inline]
    pub(crate) fn ts(&mut self, out: &mut ByteBuf, ts: u64) {
        let ms = ts / 1_000_000;
        if ms == 0 {
            return out.dec(ts);
        }
        if self.ms != Some(ms) {
            self.ms = Some(ms);
            self.ms_text.clear();
            self.ms_text
                .extend_from_slice(itoa::Buffer::new().format(ms).as_bytes());
        }
        out.extend_from_slice(&self.ms_text);
        out.dec_fixed(ts % 1_000_000, 6);
    }

    /// `,"pid":P,"tid":T,"event":"`
    #[inline]
    pub(crate) fn json_thread(&mut self, out: &mut ByteBuf, pid: u32, tid: u32) {
        if self.thread != Some((pid, tid)) {
            self.thread = Some((pid, tid));
            let mut text = ByteBuf::default();
            text.extend_from_slice(b",\"pid\":");
            text.dec(pid.into());
            text.extend_from_slice(b",\"tid\":");
            text.dec(tid.into());
            text.extend_from_slice(b",\"event\":\"");
            self.thread_text = text.as_slice().to_vec();
        }
        out.extend_from_slice(&self.thread_text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::header::UsdtInfo;
    use crate::write::writer::SharedOutput;
    use styx_common::ArgType;

    /// A probe found after the output opened (a library mapped later) is
    /// named once the header grew: before, its events read `?`.
    #[test]
    fn probes_named_after_opening_are_named_from_then_on() {
        let mut header = Header::now(1, "exe", Vec::new());
        let out = SharedOutput::default();
        let mut writer = LineWriter::new(Box::new(out.clone()), Line::Jsonl, &header);
        let args = [7u64];
        let event = Event::usdt(0, &args);
        writer.event(&event).unwrap();
        let u64 = ArgType::int(8, false);
        header
            .usdt
            .push(UsdtInfo::new(0, "lib", "fire", [(None, u64)]));
        assert!(writer.header_grew(&header));
        writer.event(&event).unwrap();
        writer.flush().unwrap();
        let text = String::from_utf8(out.bytes()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains(r#""provider":"?","probe":"?""#), "{text}");
        assert!(
            lines[1].contains(r#""provider":"lib","probe":"fire","args":[7]"#),
            "{text}"
        );
    }

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
            let mut out = ByteBuf::default();
            repeats.ts(&mut out, ts);
            assert_eq!(out.as_slice(), ts.to_string().as_bytes());
        }
    }

    #[test]
    fn hex_matches_std() {
        for v in [0, 1, 0xf, 0x10, 0x1234_5678, u64::MAX] {
            let mut out = ByteBuf::default();
            out.hex(v);
            assert_eq!(out.as_slice(), format!("{v:#x}").as_bytes());
        }
    }

    #[test]
    fn json_strings_escape_what_needs_it() {
        for s in ["plain", "a \"quote\"", "back\\slash", "tab\there", "é"] {
            let mut out = ByteBuf::default();
            crate::formats::jsonl::json_string(&mut out, s);
            assert_eq!(out.as_slice(), serde_json::to_string(s).unwrap().as_bytes());
        }
    }
}
