//! Where a format's bytes go, decided once ([`Output`]): stdout, a file, or
//! a directory to roll files in. Every output a run writes is created here,
//! carefully ([`create_file`]): the main one, the capture, the flight
//! recorder's dumps, Tenet's other threads and rolled Parquet files.

use super::Format;
use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where a format writes, resolved once from `--output`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// No `--output`.
    Stdout,
    /// One file, and for some formats numbered files beside it (Tenet's
    /// other threads).
    File(PathBuf),
    /// A directory the format rolls its files in (`--output DIR/` for a
    /// format that [`Format::rolls_files`]).
    Dir(PathBuf),
}

/// Why an output could not be opened; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// A binary format is not written to a terminal.
    #[error("-o {0} is binary: give --output FILE, or pipe it")]
    BinaryOnTerminal(&'static str),
    /// A symbolic link someone else owns is not followed.
    #[error(
        "cannot write {0}: it is a symbolic link owned by another user, which styx-loader \
         does not follow for an output (give the path of the file it points to)"
    )]
    ForeignLink(String),
    /// Truncating a file with other names would change them too: the
    /// output, and how many names it has.
    #[error(
        "cannot write {0}: it has {1} hard links, so truncating it would change the other \
         names too (remove it first, or choose another name)"
    )]
    HardLinks(String, u64),
    /// Creating or truncating the output failed.
    #[error("cannot write {0}")]
    Write(String, #[source] io::Error),
    /// Creating the directory failed.
    #[error("cannot create {0}")]
    CreateDir(String, #[source] io::Error),
    /// The format could not write its start (a header, or what it needs is
    /// missing).
    #[error("writing the start of {0}")]
    Start(String, #[source] io::Error),
}

/// Outputs opened after the start (a thread's or a rolled file) fail as
/// writes do: one I/O error whose text is the whole chain.
impl From<OutputError> for io::Error {
    fn from(e: OutputError) -> io::Error {
        let mut text = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            text = format!("{text}: {cause}");
            source = cause.source();
        }
        io::Error::other(text)
    }
}

impl Output {
    /// `--output PATH` (None: stdout) for `format`: a directory when the
    /// format rolls files and the path ends in `/` or is a directory.
    pub fn new(path: Option<&Path>, format: Format) -> Output {
        match path {
            None => Output::Stdout,
            Some(dir) if format.rolls_files() && is_dir_output(dir) => {
                Output::Dir(dir.to_path_buf())
            }
            Some(path) => Output::File(path.to_path_buf()),
        }
    }

    /// The path, if not stdout.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Output::Stdout => None,
            Output::File(path) | Output::Dir(path) => Some(path),
        }
    }

    /// The `n`th of several outputs (the flight recorder's dumps):
    /// `run.styx` → `run.<n>.styx`, `dumps/` → `dumps/<n>/`; stdout stays.
    pub fn numbered(&self, n: u32) -> Output {
        match self {
            Output::Stdout => Output::Stdout,
            Output::File(path) => Output::File(numbered(path, n)),
            Output::Dir(path) => Output::Dir(numbered(path, n)),
        }
    }

    /// A binary format is not written to a terminal: it needs `--output`
    /// or a pipe. Checked when an output opens, and by callers before
    /// attaching for outputs opened later (the flight recorder's dumps).
    pub fn refuse_binary_on_terminal(&self, format: Format) -> Result<(), OutputError> {
        if format.is_binary() && *self == Output::Stdout && io::stdout().is_terminal() {
            return Err(OutputError::BinaryOnTerminal(format.name()));
        }
        Ok(())
    }

    /// Whether the output is to be gzip-compressed: a file named `*.gz`.
    pub(crate) fn gzip(&self) -> bool {
        matches!(self, Output::File(p) if p.extension().is_some_and(|e| e == "gz"))
    }

    /// Creates the file or directory; a directory's files are created by
    /// the format as it rolls them, so its stream is a sink.
    pub(crate) fn open(&self) -> Result<Box<dyn Write>, OutputError> {
        Ok(match self {
            Output::Stdout => Box::new(io::stdout()),
            Output::File(path) => Box::new(create_file(path)?),
            Output::Dir(dir) => {
                if !dir.is_dir() {
                    std::fs::DirBuilder::new()
                        .mode(0o700)
                        .recursive(true)
                        .create(dir)
                        .map_err(|e| OutputError::CreateDir(dir.display().to_string(), e))?;
                }
                Box::new(io::sink())
            }
        })
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path() {
            None => f.write_str("stdout"),
            Some(path) => path.display().fmt(f),
        }
    }
}

/// Opens `path` to write an output, safely when run as root in a directory
/// others can write (/tmp): a symbolic link owned by another user is not
/// followed (`O_NOFOLLOW`), so a link planted there cannot make the run
/// overwrite a file of its choosing or create one where it likes (the rule
/// of the kernel's `fs.protected_symlinks`, applied everywhere); a link of
/// our own, such as `/dev/stdout`, is. Nor is a regular file with other
/// hard links truncated. A new file is created
/// 0600, as perf creates perf.data: a trace holds the traced program's data.
///
/// An existing regular file (one name only) is overwritten, keeping its owner
/// and mode, so `--output` can name the same file run after run; whoever
/// could put a regular file there could write it anyway. Other existing
/// files (`/dev/null`, a named pipe) are written as they are.
pub fn create_file(path: &Path) -> Result<File, OutputError> {
    let name = || path.display().to_string();
    let failed = |e| OutputError::Write(name(), e);
    // SAFETY: geteuid has no preconditions.
    let ours = |link: &Metadata| link.uid() == unsafe { libc::geteuid() };
    let follow = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink() && ours(&m));
    let no_follow = if follow { 0 } else { libc::O_NOFOLLOW };
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(no_follow | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::EACCES) if path.is_symlink() => {
                OutputError::ForeignLink(name())
            }
            _ => failed(e),
        })?;
    let meta = file.metadata().map_err(failed)?;
    if meta.file_type().is_file() {
        if meta.nlink() > 1 {
            return Err(OutputError::HardLinks(name(), meta.nlink()));
        }
        // Truncated only now that it is known to be a file of its own.
        file.set_len(0).map_err(failed)?;
    }
    Ok(file)
}

/// Whether `--output` names a directory to roll files in: it ends in `/`
/// or is one.
fn is_dir_output(path: &Path) -> bool {
    path.as_os_str().to_string_lossy().ends_with('/') || path.is_dir()
}

/// A numbered file beside `path`: `run.styx` → `run.<n>.styx`, `run` →
/// `run.<n>` (Tenet's other threads, the flight recorder's dumps).
pub(crate) fn numbered_beside(path: &Path, n: impl fmt::Display) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{n}"),
    };
    path.with_file_name(name)
}

/// `run.styx` → `run.<n>.styx`; a directory of rolled Parquet files,
/// `dumps/` → `dumps/<n>/`; another path that is not a regular file
/// (/dev/null, a pipe) stays as it is: every dump goes there.
fn numbered(path: &Path, n: u32) -> PathBuf {
    if is_dir_output(path) {
        let mut dir = path.join(n.to_string()).into_os_string();
        dir.push("/");
        return PathBuf::from(dir);
    }
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return path.to_path_buf();
    }
    numbered_beside(path, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_are_numbered_beside_the_output_or_inside_its_directory() {
        assert_eq!(
            numbered(Path::new("/x/run.styx"), 2),
            PathBuf::from("/x/run.2.styx")
        );
        assert_eq!(numbered(Path::new("/x/run"), 3), PathBuf::from("/x/run.3"));
        assert_eq!(
            numbered(Path::new("/x/dumps/"), 1),
            PathBuf::from("/x/dumps/1/")
        );
        assert_eq!(
            numbered(Path::new("/dev/null"), 1),
            PathBuf::from("/dev/null")
        );
        let dir = std::env::temp_dir();
        assert_eq!(
            numbered(&dir, 4),
            PathBuf::from(format!("{}/4/", dir.display()))
        );
    }

    #[test]
    fn only_a_format_that_rolls_files_writes_a_directory() {
        let dir = Path::new("/x/out/");
        assert_eq!(
            Output::new(Some(dir), Format::Parquet),
            Output::Dir(dir.into())
        );
        assert_eq!(
            Output::new(Some(dir), Format::Jsonl),
            Output::File(dir.into())
        );
        assert_eq!(Output::new(None, Format::Parquet), Output::Stdout);
    }
}
