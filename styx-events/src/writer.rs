//! Where decoded events go: the [`EventWriter`] every format is, what a run
//! saw ([`Totals`]), and the pieces writers share: [`Chunked`], the one
//! buffer between a format and its output (callers hand writers an
//! unbuffered file or stdout), [`Tee`] and [`Labeled`].

use crate::bytes::Bytes;
use crate::event::Event;
use std::io::{self, Write};

/// Where decoded events go, in one format.
pub trait EventWriter {
    /// Takes one event.
    fn event(&mut self, event: &Event<'_>) -> io::Result<()>;
    /// Hands what was written so far to the output, so a reader sees it.
    fn flush(&mut self) -> io::Result<()>;
    /// Ends the output (trailers, closing brackets) and flushes it.
    fn finish(&mut self, totals: &Totals<'_>) -> io::Result<()>;
}

/// What a run saw, per event kind id, for a format's trailer.
pub struct Totals<'a> {
    /// Events written, per kind id.
    pub events: &'a [u64],
    /// Events lost in the kernel (ring buffer full), per kind id.
    pub drops: &'a [u64],
}

/// A format's output: bytes gathered in one buffer and written in chunks of
/// about `chunk` bytes, so a fast format makes few write calls and memory
/// stays bounded.
pub struct Chunked<W: Write> {
    out: W,
    /// What the format has written and the output not yet taken.
    pub buf: Bytes,
    chunk: usize,
}

impl<W: Write> Chunked<W> {
    /// An empty buffer in front of `out`.
    pub fn new(out: W, chunk: usize) -> Chunked<W> {
        Chunked {
            out,
            buf: Bytes::with_capacity(chunk),
            chunk,
        }
    }

    /// After each event: writes the buffer out once it holds a chunk.
    #[inline]
    pub fn event_done(&mut self) -> io::Result<()> {
        if self.buf.len() >= self.chunk {
            self.write_out()?;
        }
        Ok(())
    }

    /// Writes the buffer out. Whatever happens, its bytes are done with: a
    /// failed write is not retried, so a file stays a prefix of the stream.
    pub fn write_out(&mut self) -> io::Result<()> {
        let result = self.out.write_all(self.buf.as_slice());
        self.buf.clear();
        result
    }

    /// Writes the buffer out and flushes the output.
    pub fn flush(&mut self) -> io::Result<()> {
        self.write_out()?;
        self.out.flush()
    }

    /// The output, for what a format does at its end (a gzip trailer).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Gives the output back (for tests and tools); call [`Chunked::flush`] first.
    pub fn into_inner(self) -> W {
        self.out
    }
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
    /// `out`, whose errors are prefixed with `name`.
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
