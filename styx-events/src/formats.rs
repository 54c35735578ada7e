//! The output formats, and [`open`], which makes the writer for one.

use crate::capture::CaptureWriter;
use crate::header::Header;
pub use crate::lines::Detail;
use crate::lines::{Line, LineWriter};
use crate::timeline::chrome::ChromeWriter;
use crate::timeline::perfetto::PerfettoWriter;
use crate::writer::EventWriter;
use std::io::{self, Write};
use std::path::Path;

/// An output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
    pub fn new(path: Option<&Path>, detail: Detail) -> Options {
        Options {
            gzip: path.is_some_and(|p| p.extension().is_some_and(|e| e == "gz")),
            detail,
        }
    }
}

/// A writer for `format` on `out` (unbuffered: every writer gathers its own
/// chunks), for the session `header` describes.
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
