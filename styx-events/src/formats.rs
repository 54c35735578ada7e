//! The output formats, and [`open`], which makes the writer for one.

use crate::capture::CaptureWriter;
use crate::header::Header;
pub use crate::lines::Detail;
use crate::lines::{Line, LineWriter};
use crate::timeline::chrome::ChromeWriter;
use crate::timeline::perfetto::PerfettoWriter;
use crate::tools::drcov::DrcovWriter;
use crate::tools::parquet::ParquetWriter;
use crate::tools::tenet::TenetWriter;
use crate::writer::EventWriter;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

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
        }
    }
}

/// Opens another file beside the output (Tenet's threads, Parquet's rolled
/// files); the loader gives its own, which is careful as root.
pub type Opener = Rc<dyn Fn(&Path) -> io::Result<Box<dyn Write>>>;

/// How a format writes, beyond its output.
#[derive(Clone)]
pub struct Options {
    /// Compress (Perfetto only).
    pub gzip: bool,
    /// Text only.
    pub detail: Detail,
    /// The output's path (stdout: None), for formats that write more files
    /// beside it.
    pub path: Option<PathBuf>,
    /// How those files are created.
    pub opener: Opener,
    /// Parquet in a directory: bytes per file before the next begins.
    pub roll_bytes: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            gzip: false,
            detail: Detail::default(),
            path: None,
            opener: Rc::new(create_file),
            roll_bytes: crate::tools::parquet::ROLL_BYTES,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("gzip", &self.gzip)
            .field("detail", &self.detail)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Gzip for an output file named `*.gz`.
    pub fn new(path: Option<&Path>, detail: Detail) -> Options {
        Options {
            gzip: path.is_some_and(|p| p.extension().is_some_and(|e| e == "gz")),
            detail,
            path: path.map(Path::to_path_buf),
            ..Options::default()
        }
    }
}

/// A new file, 0600 (a trace holds the traced program's data), not through
/// a symbolic link.
pub fn create_file(path: &Path) -> io::Result<Box<dyn Write>> {
    let file: File = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    Ok(Box::new(file))
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
    })
}
