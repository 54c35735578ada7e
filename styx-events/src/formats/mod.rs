//! The output formats: [`Format`], the list of them, and [`open`], which
//! makes the writer for one. One file (or folder) per format; the line
//! formats share `lines.rs`, the two timeline formats `spans.rs` (ends
//! paired with begins) and `rates.rs` (event rates as counters).

mod chrome;
pub mod drcov;
mod folded;
mod heap;
mod jsonl;
mod lines;
pub mod output;
mod parquet;
mod perfetto;
mod rates;
pub mod raw;
mod spans;
mod tenet;
mod text;

use crate::session::header::Header;
use crate::write::writer::{EventWriter, FormatBlock, Labeled};
use chrome::ChromeWriter;
use drcov::DrcovWriter;
use folded::FoldedWriter;
pub use lines::Detail;
use lines::{Line, LineFormatter, LineWriter};
pub use output::{create_file, Output, OutputError};
use parquet::{ParquetWriter, RowGatherer};
use perfetto::PerfettoWriter;
use raw::{CaptureWriter, Compression};
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
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 9] = [
        Format::Jsonl,
        Format::Text,
        Format::Raw,
        Format::Chrome,
        Format::Perfetto,
        Format::Drcov,
        Format::Tenet,
        Format::Parquet,
        Format::Folded,
    ];

    /// Whether the format is binary, so not for a terminal.
    pub fn is_binary(self) -> bool {
        matches!(self, Format::Raw | Format::Drcov | Format::Parquet)
    }

    /// Whether `--output DIR/` rolls files in the directory.
    pub fn rolls_files(self) -> bool {
        matches!(self, Format::Parquet)
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

/// How a format writes, beyond where.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Perfetto: compress (also when the output file is named `*.gz`).
    pub gzip: bool,
    /// Text: how much a line says.
    pub detail: Detail,
    /// A format rolling files in a directory: bytes per file before the
    /// next begins.
    pub roll_bytes: u64,
    /// A raw capture: how its blocks are stored.
    pub compression: Compression,
    /// A raw capture: whether its writer waits a little for a compressing
    /// thread late with a block (everything compressed, if at the threads'
    /// pace) or stores the block at once. Not when the emulator does not
    /// wait for the loader (`--on-full drop`): a loader held back then
    /// loses events.
    pub wait_for_compression: bool,
    /// Threads the writer may use besides the caller's: Parquet encodes
    /// row groups on a second thread when more than 1 (same bytes; on
    /// parallel `read`, on its workers instead).
    pub threads: usize,
}

/// `--roll-size`'s default: a rolled file is closed and the next begun
/// once it holds this many bytes.
pub const ROLL_BYTES: u64 = 256 << 20;

impl Default for Options {
    fn default() -> Options {
        Options {
            gzip: false,
            detail: Detail::default(),
            roll_bytes: ROLL_BYTES,
            compression: Compression::default(),
            wait_for_compression: true,
            threads: 1,
        }
    }
}

/// Opens `output` (refusing a binary format on a terminal) and makes the
/// writer for `format` on it, for the session `header` describes; errors
/// name the output. The one way a run's outputs open.
pub fn open(
    format: Format,
    output: &Output,
    header: &Header,
    options: &Options,
) -> Result<Box<dyn EventWriter>, OutputError> {
    output.refuse_binary_on_terminal(format)?;
    let out = Labeled::new(output.open()?, output.to_string());
    let options = Options {
        gzip: options.gzip || output.gzip(),
        ..*options
    };
    writer(format, Box::new(out), output, header, &options)
        .map_err(|e| OutputError::Start(output.to_string(), e))
}

/// The writer for `format` on a stream the caller opened (tests, the
/// benchmark, the fuzzer), as on stdout: no files beside it.
pub fn open_stream(
    format: Format,
    out: Box<dyn Write>,
    header: &Header,
    options: &Options,
) -> io::Result<Box<dyn EventWriter>> {
    writer(format, out, &Output::Stdout, header, options)
}

/// A parallel `read` worker's formatter of `format`, for the session
/// `header` describes: None for a format whose writer does not format
/// apart ([`EventWriter::formats_apart`]).
pub fn open_block_formatter(
    format: Format,
    header: &Header,
    options: &Options,
) -> Option<Box<dyn FormatBlock>> {
    match format {
        Format::Jsonl => Some(Box::new(LineFormatter::new(Line::Jsonl, header))),
        Format::Text => Some(Box::new(LineFormatter::new(
            Line::Text(options.detail),
            header,
        ))),
        Format::Parquet => Some(Box::new(RowGatherer::new(header))),
        _ => None,
    }
}

/// `format`'s writer on `out`, already opened for `output` (unbuffered:
/// every writer gathers its own chunks).
fn writer(
    format: Format,
    out: Box<dyn Write>,
    output: &Output,
    header: &Header,
    options: &Options,
) -> io::Result<Box<dyn EventWriter>> {
    Ok(match format {
        Format::Jsonl => Box::new(LineWriter::new(out, Line::Jsonl, header)),
        Format::Text => Box::new(LineWriter::new(out, Line::Text(options.detail), header)),
        Format::Raw => Box::new(
            CaptureWriter::new(out, header, options.compression)?
                .waiting_for_compression(options.wait_for_compression),
        ),
        Format::Chrome => Box::new(ChromeWriter::new(out, header)),
        Format::Perfetto => Box::new(PerfettoWriter::new(out, header, options.gzip)),
        Format::Drcov => Box::new(DrcovWriter::new(out, header)),
        Format::Tenet => Box::new(TenetWriter::new(out, header, output)?),
        Format::Parquet => Box::new(ParquetWriter::new(
            out,
            header,
            output,
            options.roll_bytes,
            options.threads,
        )?),
        Format::Folded => Box::new(FoldedWriter::new(out, header)),
    })
}

// With clap (as the workspace builds it): clap reads the enum itself.
#[cfg(all(test, feature = "clap"))]
mod tests {
    use super::*;

    #[test]
    fn the_list_of_formats_is_every_format() {
        use clap::ValueEnum;
        assert_eq!(Format::value_variants(), Format::ALL);
        for format in Format::ALL {
            let value = format.to_possible_value().expect("not hidden");
            assert_eq!(value.get_name(), format.name());
        }
    }
}

/// Fields every USDT event has in JSON: a named argument may not be one.
const USDT_FIELDS: [&str; 9] = [
    "ts_ns",
    "pid",
    "tid",
    "event",
    "provider",
    "probe",
    "args",
    "truncated",
    "unreadable",
];

/// Why a USDT argument, a string or not, may not be called `name`, if it
/// may not: a field every USDT event has, the name of an unnamed argument,
/// or a Parquet column of styx's own events of another type.
pub fn usdt_name_taken(name: &str, string: bool) -> Option<&'static str> {
    let unnamed = name
        .strip_prefix("arg")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if USDT_FIELDS.contains(&name) {
        Some("is a field every USDT event has")
    } else if unnamed {
        Some("is how unnamed arguments are called")
    } else {
        parquet::usdt_column_conflict(name, string)
    }
}
