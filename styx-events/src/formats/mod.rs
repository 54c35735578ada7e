//! The output formats: [`Format`], the list of them, and [`open`], which
//! makes the writer for one. One file (or folder) per format; the line
//! formats share `lines.rs`, the two timeline formats `spans.rs` (ends
//! paired with begins) and `rates.rs` (event rates as counters).

mod chrome;
pub mod drcov;
mod folded;
mod jsonl;
mod lines;
pub mod output;
pub mod parquet;
mod perfetto;
mod rates;
pub mod raw;
mod spans;
mod tenet;
mod text;

use crate::session::header::Header;
use crate::write::writer::EventWriter;
use chrome::ChromeWriter;
use drcov::DrcovWriter;
use folded::FoldedWriter;
pub use lines::Detail;
use lines::{Line, LineWriter};
pub use output::Options;
use parquet::ParquetWriter;
use perfetto::PerfettoWriter;
use raw::CaptureWriter;
use std::io::{self, Write};
use tenet::TenetWriter;

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
    /// drcov coverage (Lighthouse, Cartographer, bncov): each basic block
    /// once, from `block` events or `insn_exec` runs.
    Drcov,
    /// A Tenet trace (Tenet for IDA): per instruction the registers it
    /// changed and the memory it touched; one file per thread; needs the
    /// emulator's register names (styx_probe::describe!).
    Tenet,
    /// Parquet for SQL (DuckDB, pandas, Spark): one row per event; with
    /// --output DIR/ files rolled by size.
    Parquet,
    /// Folded stacks of the traced functions (--functions) for flame
    /// graphs (inferno, speedscope, flamegraph.pl): `a;b;c SELF_NS` per
    /// distinct stack, written at the end.
    Folded,
}

impl Format {
    /// Whether the format is binary, so not for a terminal.
    pub fn is_binary(self) -> bool {
        matches!(self, Format::Raw | Format::Drcov | Format::Parquet)
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::Text => "text",
            Format::Raw => "raw",
            Format::Chrome => "chrome",
            Format::Perfetto => "perfetto",
            Format::Drcov => "drcov",
            Format::Tenet => "tenet",
            Format::Parquet => "parquet",
            Format::Folded => "folded",
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
        Format::Drcov => Box::new(DrcovWriter::new(out, header)),
        Format::Tenet => Box::new(TenetWriter::new(out, header, options)?),
        Format::Parquet => Box::new(ParquetWriter::new(out, header, options)?),
        Format::Folded => Box::new(FoldedWriter::new(out, header)),
    })
}
