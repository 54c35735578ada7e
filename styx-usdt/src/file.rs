//! Opening and reading the ELF files of a target, which anyone may have
//! prepared: a process maps what its user chose, and styx reads it as root
//! through `/proc/PID/root/…`.
//!
//! - Only regular files are read: the path is checked before opening (a
//!   FIFO or a device is refused without being opened), opened with
//!   `O_NONBLOCK` (should it have become a FIFO in between, the open cannot
//!   block) and checked again on the open descriptor.
//! - A file is never read whole: [`Reader`] reads only what the ELF parser
//!   asks for (headers, note sections, the bytes at probe sites, symbol
//!   tables), each range once, and at most [`READ_BUDGET`] bytes per file in
//!   all. A 3 GB sparse file costs a few kilobytes; a file that would need
//!   more than the budget is refused with an error saying so.

use object::read::ReadCache;
use object::ReadRef;
use std::cell::Cell;
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::ops::Range;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Most bytes read from one file. Real note sections are kilobytes and the
/// largest symbol tables tens of megabytes; this leaves room for those and
/// bounds what a crafted file can make root allocate.
pub(crate) const READ_BUDGET: u64 = 512 << 20;

/// Opens `path` for reading if it is a regular file; a FIFO, socket or
/// device is an error, at once.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    // stat first: opening a FIFO blocks until a writer comes, and opening a
    // device may have side effects.
    regular(&std::fs::metadata(path)?)?;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    // The path may have been swapped between the stat and the open.
    regular(&file.metadata()?)?;
    Ok(file)
}

fn regular(metadata: &Metadata) -> io::Result<()> {
    let kind = metadata.file_type();
    let what = if kind.is_file() {
        return Ok(());
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({what})"),
    ))
}

/// A regular file read on demand, within [`READ_BUDGET`].
pub(crate) struct Reader {
    cache: ReadCache<File>,
    used: Cell<u64>,
    over_budget: Cell<bool>,
}

impl Reader {
    /// Opens `path` (see [`open_regular`]).
    pub(crate) fn open(path: &Path) -> io::Result<Reader> {
        Ok(Reader {
            cache: ReadCache::new(open_regular(path)?),
            used: Cell::new(0),
            over_budget: Cell::new(false),
        })
    }

    /// The file's bytes, for the ELF parser.
    pub(crate) fn data(&self) -> Bounded<'_> {
        Bounded { reader: self }
    }

    /// The error to report instead of the parser's when a read was refused
    /// for the budget (the parser only sees a failed read).
    pub(crate) fn over_budget(&self) -> Option<io::Error> {
        self.over_budget.get().then(|| {
            io::Error::other(format!(
                "it would need more than {} MiB read (crafted section sizes?)",
                READ_BUDGET >> 20
            ))
        })
    }
}

/// Opens `path` (see [`open_regular`]) and runs `parse` on its bytes, read
/// as the parser asks. An error if the file cannot be opened, or if the
/// parse wanted more than [`READ_BUDGET`]: then its own result, from a read
/// that was refused, is not what went wrong.
pub(crate) fn parse_file<T>(path: &Path, parse: impl FnOnce(Bounded<'_>) -> T) -> io::Result<T> {
    let reader = Reader::open(path)?;
    let parsed = parse(reader.data());
    match reader.over_budget() {
        Some(cause) => Err(cause),
        None => Ok(parsed),
    }
}

/// [`Reader`]'s bytes as the `object` crate reads them.
#[derive(Clone, Copy)]
pub(crate) struct Bounded<'a> {
    reader: &'a Reader,
}

impl Bounded<'_> {
    fn charge(self, size: u64) -> Result<(), ()> {
        let used = self.reader.used.get().saturating_add(size);
        if used > READ_BUDGET {
            self.reader.over_budget.set(true);
            return Err(());
        }
        self.reader.used.set(used);
        Ok(())
    }
}

impl<'a> ReadRef<'a> for Bounded<'a> {
    fn len(self) -> Result<u64, ()> {
        (&self.reader.cache).len()
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        self.charge(size)?;
        (&self.reader.cache).read_bytes_at(offset, size)
    }

    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'a [u8], ()> {
        // ReadCache looks at most 4 KiB ahead for the delimiter.
        let bytes = (&self.reader.cache).read_bytes_at_until(range, delimiter)?;
        self.charge(bytes.len() as u64 + 1)?;
        Ok(bytes)
    }
}
