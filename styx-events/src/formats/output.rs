//! How a format writes beyond its output: gzip, text detail, and for the
//! formats that write several files (Tenet's threads, rolled Parquet) the
//! output's path and how to create files beside it.

use crate::formats::lines::Detail;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Parquet in a directory: a file is closed and the next begun once it
/// holds this many bytes (`--roll-size`'s default).
pub const ROLL_BYTES: u64 = 256 << 20;

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
            roll_bytes: ROLL_BYTES,
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

/// A numbered file beside `path`: `run.styx` → `run.<n>.styx`, `run` →
/// `run.<n>` (Tenet's other threads, the flight recorder's dumps).
pub fn numbered_beside(path: &Path, n: impl fmt::Display) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{n}"),
    };
    path.with_file_name(name)
}
