//! Where decoded events go: the [`EventWriter`] every format is, what a run
//! saw ([`Totals`]), and the pieces writers share: [`Chunked`], the one
//! buffer between a format and its output (callers hand writers an
//! unbuffered file or stdout), [`Tee`] and [`Labeled`].

use crate::record::event::Event;
use crate::session::header::{Header, MappedFile};
use crate::write::buf::ByteBuf;
use std::io::{self, Write};

/// Where decoded events go, in one format.
pub trait EventWriter {
    /// Takes one event.
    fn event(&mut self, event: &Event<'_>) -> io::Result<()>;
    /// Hands what was written so far to the output, so a reader sees it.
    fn flush(&mut self) -> io::Result<()>;
    /// Ends the output (trailers, closing brackets) and flushes it.
    fn finish(&mut self, totals: &Totals<'_>) -> io::Result<()>;
    /// Whether [`EventWriter::batch`] takes batch records whole (the raw
    /// capture stores them as they are); else the caller splits them and
    /// hands over their events.
    fn takes_batches(&self) -> bool {
        false
    }
    /// Takes a whole batch record (see [`crate::Batches`]) holding `events`
    /// events (the caller counted them checking its items); called only
    /// when [`EventWriter::takes_batches`] says so.
    fn batch(&mut self, record: &[u8], events: u64) -> io::Result<()> {
        let _ = (record, events);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this output takes batches split into events",
        ))
    }
    /// Whether the output this format makes of a run of events is what
    /// another writer of it (for the same session) makes of them alone,
    /// put together in order: no header, trailer or state carried from
    /// event to event but what [`EventWriter::formatted`] carries.
    /// Parallel `read` then formats blocks apart ([`FormatBlock`]) and
    /// hands the pieces to [`EventWriter::formatted`], in order.
    fn formats_apart(&self) -> bool {
        false
    }
    /// Takes the next piece a [`FormatBlock`] of this format made (see
    /// [`EventWriter::formats_apart`]), after what this one wrote; leaves
    /// it emptied, its room kept for another block.
    fn formatted(&mut self, piece: &mut Formatted) -> io::Result<()> {
        let _ = piece;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this output formats its events itself",
        ))
    }
    /// The loader is falling behind the ring buffer: for a while, do now
    /// only what cannot wait, and leave the CPU to the loader (a capture
    /// stores its blocks rather than hand them to its compressing threads).
    fn behind(&mut self) {}

    /// Parallel `read` (before its first piece): work of this writer's
    /// that the workers may do between blocks, so that it takes no thread
    /// of its own competing with them for the cores (Parquet's encoding).
    fn helper(&mut self) -> Option<Helper> {
        None
    }
    /// Parallel `read` of every event (before its first piece): the
    /// capture cut into runs of a fixed number of events, each formatted
    /// whole by one worker, rather than block by block (Parquet: a run is
    /// a row group, gathered and encoded where its events are decoded, as
    /// one thread would). None: block by block.
    fn runs(&mut self) -> Option<Runs> {
        None
    }
    /// After [`EventWriter::event`] or [`EventWriter::flush`] failed:
    /// whether part of the output still works, so that it should still be
    /// [`EventWriter::finish`]ed (a [`Tee`] whose other writers do). A
    /// writer whose output failed is done with: false.
    fn can_finish(&self) -> bool {
        false
    }
    /// The session's header named more probes or functions after this
    /// output was opened (a library the traced process mapped later):
    /// `header` is the whole header as it now is, the ids it had before
    /// unchanged. Whether this output names their events from here on; a
    /// format whose header or columns are written when it opens (a
    /// capture, Parquet, the timelines) says no, and the loader then
    /// leaves those probes unattached.
    fn header_grew(&mut self, header: &Header) -> bool {
        let _ = header;
        false
    }
    /// Where the traced process mapped its files, known only once a
    /// command the loader started is past its `exec` (after the output
    /// opened): what names the heap's callers. Whether this output keeps
    /// it: one that does not name callers needs nothing (yes); a capture
    /// says no once it has written its header.
    fn process_mapped(&mut self, mapped: &[MappedFile]) -> bool {
        let _ = mapped;
        true
    }
}

/// Work a writer lets parallel `read`'s workers do ([`EventWriter::helper`]).
pub type Helper = std::sync::Arc<dyn Fn() + Send + Sync>;

/// How a writer's events are formatted in runs ([`EventWriter::runs`]).
pub struct Runs {
    /// Events of a run: the capture's first run starts at its first
    /// event, the last is what is left.
    pub events: u64,
    /// Makes a worker's formatter of runs; its pieces go to
    /// [`EventWriter::formatted`] in order, as block pieces do.
    pub make: Box<dyn Fn() -> io::Result<Box<dyn FormatBlock>> + Send + Sync>,
}

/// One block's events as a [`FormatBlock`] made them, for the writer of
/// the output ([`EventWriter::formatted`]).
pub enum Formatted {
    /// Bytes to write as they are (the line formats).
    Bytes(ByteBuf),
    /// Rows a columnar format gathered (Parquet's), to cut into row
    /// groups as the events come: opaque here, only that format's writer
    /// reads them (writing underlies the formats, which depend on it).
    Rows(Box<dyn std::any::Any + Send>),
}

/// A parallel `read` worker's side of a format: the events of one block
/// at a time into a piece (see [`EventWriter::formats_apart`]).
pub trait FormatBlock {
    /// Takes one event of the block.
    fn event(&mut self, event: &Event<'_>) -> io::Result<()>;
    /// What the events since the last call made; `room` (a piece already
    /// written, emptied) holds it when given, so buffers are not grown
    /// afresh for every block.
    fn take(&mut self, room: Option<Formatted>) -> Formatted;
    /// After [`FormatBlock::take`] of a run ([`EventWriter::runs`]):
    /// whether its piece is what the writer makes of the run where it
    /// falls; if not, that run and the rest are read again block by block
    /// (Parquet: a run whose strings fill its row group early).
    fn run_fits(&self) -> bool {
        true
    }
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
    pub buf: ByteBuf,
    chunk: usize,
}

impl<W: Write> Chunked<W> {
    /// An empty buffer in front of `out`.
    pub fn new(out: W, chunk: usize) -> Chunked<W> {
        Chunked {
            out,
            buf: ByteBuf::with_capacity(chunk),
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

    /// Writes the buffer out, then `bytes` straight (formatted elsewhere).
    pub fn write_through(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write_out()?;
        self.out.write_all(bytes)
    }

    /// The output, for what a format does at its end (a gzip trailer).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }
}

/// Several writers fed the same events (`--capture` beside `-o`).
///
/// A writer that fails is set aside and the others go on: when `-o`'s pipe
/// closes (`| head`), the capture still gets every event the caller handed
/// over and, at [`EventWriter::finish`], its END record. Each call returns
/// the first error of a writer failing in it, so the caller learns of each
/// failure once; [`EventWriter::can_finish`] says whether any writer works.
pub struct Tee {
    /// None once the writer failed.
    writers: Vec<Option<Box<dyn EventWriter>>>,
}

impl Tee {
    /// Feeds `writers`, in order.
    pub fn new(writers: Vec<Box<dyn EventWriter>>) -> Tee {
        Tee {
            writers: writers.into_iter().map(Some).collect(),
        }
    }

    /// Calls `f` on every writer still working; one that fails is dropped.
    fn each(
        &mut self,
        mut f: impl FnMut(&mut dyn EventWriter) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut result = Ok(());
        for slot in &mut self.writers {
            if let Some(writer) = slot {
                if let Err(e) = f(&mut **writer) {
                    *slot = None;
                    if result.is_ok() {
                        result = Err(e);
                    }
                }
            }
        }
        result
    }
}

impl EventWriter for Tee {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        self.each(|w| w.event(event))
    }
    fn flush(&mut self) -> io::Result<()> {
        self.each(|w| w.flush())
    }
    fn takes_batches(&self) -> bool {
        self.writers.iter().flatten().all(|w| w.takes_batches())
    }
    fn batch(&mut self, record: &[u8], events: u64) -> io::Result<()> {
        self.each(|w| w.batch(record, events))
    }
    fn behind(&mut self) {
        self.writers.iter_mut().flatten().for_each(|w| w.behind());
    }
    fn finish(&mut self, totals: &Totals<'_>) -> io::Result<()> {
        self.each(|w| w.finish(totals))
    }
    fn can_finish(&self) -> bool {
        self.writers.iter().any(Option::is_some)
    }
    fn header_grew(&mut self, header: &Header) -> bool {
        // Every writer is told (not short-circuiting: each that can takes
        // the names); yes only if all do.
        let mut all = true;
        for writer in self.writers.iter_mut().flatten() {
            all &= writer.header_grew(header);
        }
        all
    }
    fn process_mapped(&mut self, mapped: &[MappedFile]) -> bool {
        let mut all = true;
        for writer in self.writers.iter_mut().flatten() {
            all &= writer.process_mapped(mapped);
        }
        all
    }
}

/// Takes every event and writes nothing: for what arrives after the
/// output closed, and for `--summary` alone.
pub struct Discard;

impl EventWriter for Discard {
    fn event(&mut self, _: &Event<'_>) -> io::Result<()> {
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        Ok(())
    }
    fn header_grew(&mut self, _: &Header) -> bool {
        true
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

/// An output whose bytes a test reads back after its writer has them:
/// for the formats' tests.
#[cfg(test)]
#[derive(Clone, Default)]
pub(crate) struct SharedOutput(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

#[cfg(test)]
impl SharedOutput {
    /// What was written so far.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }
}

#[cfg(test)]
impl Write for SharedOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::event::Body;
    use std::cell::RefCell;
    use std::rc::Rc;
    use styx_common::{EventKind, RecordHeader};

    /// Records what it is given; fails every call with `fail` once set.
    #[derive(Default)]
    struct Probe {
        log: Rc<RefCell<Vec<&'static str>>>,
        fail: Option<io::ErrorKind>,
    }

    impl Probe {
        fn call(&mut self, what: &'static str) -> io::Result<()> {
            self.log.borrow_mut().push(what);
            match self.fail {
                Some(kind) => Err(kind.into()),
                None => Ok(()),
            }
        }
    }

    impl EventWriter for Probe {
        fn event(&mut self, _: &Event<'_>) -> io::Result<()> {
            self.call("event")
        }
        fn flush(&mut self) -> io::Result<()> {
            self.call("flush")
        }
        fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
            self.call("finish")
        }
    }

    #[test]
    fn a_tee_goes_on_without_a_writer_that_failed() {
        let (main, capture) = (Rc::default(), Rc::default());
        let mut tee = Tee::new(vec![
            Box::new(Probe {
                log: Rc::clone(&main),
                fail: Some(io::ErrorKind::BrokenPipe),
            }),
            Box::new(Probe {
                log: Rc::clone(&capture),
                fail: None,
            }),
        ]);
        let event = Event {
            header: RecordHeader::default(),
            kind: EventKind::Marker,
            body: Body::Args([0; 4]),
        };
        let err = tee.event(&event).expect_err("the main output failed");
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        assert!(tee.can_finish(), "the capture still works");
        tee.event(&event).unwrap();
        tee.flush().unwrap();
        let totals = Totals {
            events: &[],
            drops: &[],
        };
        tee.finish(&totals).unwrap();
        assert_eq!(*main.borrow(), ["event"]);
        assert_eq!(*capture.borrow(), ["event", "event", "flush", "finish"]);
    }
}
