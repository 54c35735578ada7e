//! Writes events as a raw capture (see the module above for the layout):
//! version 3's blocks, or version 2's plain stream of records (kept for
//! the tests of the reader's older versions).

use super::blocks::{BlockPool, Compression, Filled};
use super::varint::{put, zigzag};
#[cfg(test)]
use super::STREAM_VERSION;
use super::{aux_code, ARG_SLOTS, AUX_EXPLICIT, AUX_SHIFT, BLOCK_TARGET, MAGIC, MAX_BATCH_RECORD};
use super::{TAG_BATCH, TAG_END, TAG_THREAD, TAG_THREAD_FOLLOWS, VERSION};
use crate::record::event::{Body, Call, Event, Text};
use crate::session::header::{Header, MappedFile};
use crate::write::buf::ByteBuf;
use crate::write::writer::{EventWriter, Totals};
use std::collections::HashMap;
use std::io::{self, Write};
use std::time::{Duration, Instant};
use styx_common::EVENT_KIND_SLOTS;

/// Version 2: bytes gathered before they go to the output: big enough for
/// few write calls, small enough to bound memory.
const CHUNK: usize = 256 << 10;

/// A flush cuts the block being filled once it has waited this long, so
/// a reader of the growing file (or of one whose loader was killed) is
/// this far behind at most; at high rates blocks fill long before.
pub const FLUSH_AGE: Duration = Duration::from_millis(250);

/// How long after its last events an idle capture may hold some back, with
/// flushes coming: the block's [`FLUSH_AGE`], then the wait for a worker
/// that gets no CPU time before the block is stored as encoded. Whoever
/// flushes an idle capture keeps flushing this long (plus its own period).
pub const HELD_AT_MOST: Duration = match FLUSH_AGE.checked_add(super::blocks::WORKER_LATE) {
    Some(held) => held,
    None => panic!("a few hundred milliseconds"),
};

/// Worker threads compressing blocks: the cores the emulator and the
/// loader's own thread leave, at least one (the OS shares them out).
fn workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4))
}

/// The delta coding's state: what the next record is told against. A
/// block starts it afresh.
struct Deltas {
    prev_ts: u64,
    prev: [[u64; ARG_SLOTS]; EVENT_KIND_SLOTS as usize],
    threads: HashMap<(u32, u32), u32>,
    current: Option<(u32, u32)>,
}

impl Default for Deltas {
    fn default() -> Deltas {
        Deltas {
            prev_ts: 0,
            prev: [[0; ARG_SLOTS]; EVENT_KIND_SLOTS as usize],
            threads: HashMap::new(),
            current: None,
        }
    }
}

/// Where the records go after the buffer.
enum Framing {
    /// Version 2: the buffer to the output every [`CHUNK`].
    Stream,
    /// Version 3: the buffer is the block being filled.
    Blocks {
        /// Boxed: the pool is most of the variant.
        pool: Box<BlockPool>,
        /// The events it holds.
        events: u64,
        /// Where its BATCH records start: the workers code those of one
        /// type's events (`deltas.rs`).
        batches: Vec<u32>,
        /// When a flush first found it not empty.
        waiting_since: Option<Instant>,
    },
}

/// Writes a raw capture.
pub struct CaptureWriter<W: Write> {
    out: W,
    buf: ByteBuf,
    deltas: Deltas,
    body: Framing,
    /// A capture of blocks holds its header back until its first block
    /// (or its end): a command the loader started maps its files only
    /// after the capture opened, and the header says where
    /// ([`EventWriter::process_mapped`]).
    unwritten: Option<Header>,
}

impl<W: Write> CaptureWriter<W> {
    /// Starts a capture of blocks stored as `compression` says: writes the
    /// magic, version and header.
    pub fn new(out: W, header: &Header, compression: Compression) -> io::Result<Self> {
        Self::with_pool(out, header, BlockPool::new(compression, workers())?)
    }

    /// Whether the writer waits a little for a worker late with a block
    /// (the default) rather than store it at once.
    pub fn waiting_for_compression(mut self, wait: bool) -> Self {
        if let Framing::Blocks { pool, .. } = &mut self.body {
            pool.wait_for_workers(wait);
        }
        self
    }

    /// Starts a capture whose compressing workers never get to run.
    #[cfg(test)]
    pub(crate) fn never_compressed(out: W, header: &Header) -> io::Result<Self> {
        Self::with_pool(out, header, BlockPool::never_answered())
    }

    /// Starts a capture whose one compressing worker starts only once
    /// `open`'s sender is dropped, blocks stored as `compression` says.
    #[cfg(test)]
    pub(crate) fn with_held_worker(
        out: W,
        header: &Header,
        open: crossbeam_channel::Receiver<()>,
        compression: Compression,
    ) -> io::Result<Self> {
        Self::with_pool(out, header, BlockPool::held_until(open, compression))
    }

    fn with_pool(out: W, header: &Header, mut pool: BlockPool) -> io::Result<Self> {
        let buf = pool.buffer();
        let body = Framing::Blocks {
            pool: Box::new(pool),
            events: 0,
            batches: Vec::new(),
            waiting_since: None,
        };
        Self::start(out, header, VERSION, buf, body)
    }

    /// Starts a capture whose blocks are all compressed as `compression`
    /// says, however long its workers take.
    #[cfg(test)]
    pub(crate) fn patient(out: W, header: &Header, compression: Compression) -> io::Result<Self> {
        Self::with_pool(out, header, BlockPool::patient(compression)?)
    }

    /// Starts a version 2 capture: records straight in the file.
    #[cfg(test)]
    pub(crate) fn version_2(out: W, header: &Header) -> io::Result<Self> {
        Self::start(
            out,
            header,
            STREAM_VERSION,
            ByteBuf::with_capacity(CHUNK),
            Framing::Stream,
        )
    }

    fn start(
        mut out: W,
        header: &Header,
        version: u32,
        buf: ByteBuf,
        body: Framing,
    ) -> io::Result<Self> {
        let unwritten = match body {
            Framing::Blocks { .. } => Some(header.clone()),
            Framing::Stream => {
                write_prelude(&mut out, version, header)?;
                None
            }
        };
        Ok(CaptureWriter {
            out,
            buf,
            deltas: Deltas::default(),
            body,
            unwritten,
        })
    }

    /// Gives the output back (for tests and tools), after [`EventWriter::finish`].
    pub fn into_inner(mut self) -> W {
        // Blocks hold no reference to the output: a writer never finished
        // just loses what it had not written.
        let out = std::mem::replace(&mut self.body, Framing::Stream);
        drop(out);
        let CaptureWriter { out, .. } = self;
        out
    }

    /// After each record: hands the buffer on once it holds a chunk or a block.
    #[inline]
    fn record_done(&mut self) -> io::Result<()> {
        match &self.body {
            Framing::Stream if self.buf.len() >= CHUNK => {
                let written = self.out.write_all(self.buf.as_slice());
                self.buf.clear();
                written
            }
            Framing::Blocks { .. } if self.buf.len() >= BLOCK_TARGET => self.cut_block(),
            _ => Ok(()),
        }
    }

    /// Ends the block being filled (if it holds anything) and hands it to
    /// the workers; the next starts its deltas afresh.
    pub(crate) fn cut_block(&mut self) -> io::Result<()> {
        let Framing::Blocks {
            pool,
            events,
            batches,
            waiting_since,
        } = &mut self.body
        else {
            return Ok(());
        };
        if self.buf.len() == 0 {
            return Ok(());
        }
        write_held_header(&mut self.unwritten, &mut self.out)?;
        let buf = pool.buffer();
        let full = std::mem::replace(&mut self.buf, buf);
        let filled = Filled {
            events: std::mem::take(events),
            batches: std::mem::take(batches),
        };
        let result = pool.submit(full, filled, &mut self.out);
        *waiting_since = None;
        self.deltas = Deltas::default();
        result
    }

    fn encode(&mut self, event: &Event<'_>) {
        let buf = &mut self.buf;
        let deltas = &mut self.deltas;
        let h = &event.header;
        let mut tag = event.kind as u8;
        let thread = (h.pid, h.tid);
        let mut index = None;
        if deltas.current != Some(thread) {
            deltas.current = Some(thread);
            match deltas.threads.get(&thread) {
                Some(&i) => {
                    tag |= TAG_THREAD_FOLLOWS;
                    index = Some(i);
                }
                None => {
                    deltas.threads.insert(thread, deltas.threads.len() as u32);
                    buf.push(TAG_THREAD);
                    put(buf, h.pid.into());
                    put(buf, h.tid.into());
                }
            }
        }
        let code = aux_code(h.aux);
        buf.push(tag | code << AUX_SHIFT);
        if let Some(i) = index {
            put(buf, i.into());
        }
        if code == AUX_EXPLICIT {
            put(buf, h.aux.into());
        }
        put(buf, zigzag(h.ts_ns.wrapping_sub(deltas.prev_ts)));
        deltas.prev_ts = h.ts_ns;
        let prev = &mut deltas.prev[event.kind as usize];
        match &event.body {
            Body::Args(args) => {
                let n = event.kind.shape().record_args();
                delta_args(buf, prev, &args[..n]);
            }
            Body::Span { id, category, name } => {
                delta_args(buf, prev, &[*id]);
                put_text(buf, category);
                put_text(buf, name);
            }
            Body::Marker(text) => put_text(buf, text),
            Body::Usdt {
                spec_id,
                args,
                strings,
            } => {
                put(buf, (*spec_id).into());
                delta_args(buf, prev, args);
                put(buf, strings.len() as u64);
                buf.extend_from_slice(strings);
            }
            Body::Call(call) => delta_args(buf, prev, &call_args(call)),
        }
    }
}

/// The capture's first bytes: magic, version, the header's length and
/// the header.
fn write_prelude(out: &mut impl Write, version: u32, header: &Header) -> io::Result<()> {
    let json = serde_json::to_vec(header)?;
    out.write_all(MAGIC)?;
    out.write_all(&version.to_le_bytes())?;
    out.write_all(&(json.len() as u32).to_le_bytes())?;
    out.write_all(&json)
}

/// Writes the header a capture of blocks held back, if it still is.
fn write_held_header(unwritten: &mut Option<Header>, out: &mut impl Write) -> io::Result<()> {
    match unwritten.take() {
        Some(header) => write_prelude(out, VERSION, &header),
        None => Ok(()),
    }
}

/// A call's numbers as a capture stores them (see the module above).
fn call_args(call: &Call) -> [u64; 5] {
    [
        call.function.into(),
        call.sp,
        call.depth.into(),
        call.duration_ns.map_or(0, |ns| ns.saturating_add(1)),
        call.unwound.into(),
    ]
}

#[inline]
fn delta_args(buf: &mut ByteBuf, prev: &mut [u64; ARG_SLOTS], args: &[u64]) {
    for (slot, &value) in prev.iter_mut().zip(args) {
        put(buf, zigzag(value.wrapping_sub(*slot)));
        *slot = value;
    }
}

fn put_text(buf: &mut ByteBuf, text: &Text<'_>) {
    put(
        buf,
        (text.bytes.len() as u64) << 1 | u64::from(text.truncated),
    );
    buf.extend_from_slice(text.bytes);
}

impl<W: Write> EventWriter for CaptureWriter<W> {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        self.encode(event);
        if let Framing::Blocks { events, .. } = &mut self.body {
            *events += 1;
        }
        self.record_done()
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.body {
            Framing::Stream => {
                let written = self.out.write_all(self.buf.as_slice());
                self.buf.clear();
                written?;
            }
            Framing::Blocks {
                pool,
                waiting_since,
                ..
            } => {
                // Called per drain of the ring: a block is cut only once
                // it has waited, or blocks would be as small as drains.
                let waited = self.buf.len() > 0
                    && waiting_since.get_or_insert_with(Instant::now).elapsed() >= FLUSH_AGE;
                if waited {
                    self.cut_block()?;
                } else {
                    pool.write_ready(&mut self.out)?;
                }
            }
        }
        self.out.flush()
    }

    fn takes_batches(&self) -> bool {
        true
    }

    fn behind(&mut self) {
        if let Framing::Blocks { pool, .. } = &mut self.body {
            pool.hold_off();
        }
    }

    fn process_mapped(&mut self, mapped: &[MappedFile]) -> bool {
        match &mut self.unwritten {
            Some(header) => {
                header.mapped = mapped.to_vec();
                true
            }
            None => false,
        }
    }

    fn batch(&mut self, record: &[u8], batch_events: u64) -> io::Result<()> {
        // Its items end within the longest record (the caller checked
        // them); bytes past that, which no ring record has, would make the
        // record one no reader takes.
        let record = &record[..record.len().min(MAX_BATCH_RECORD)];
        let buf = &mut self.buf;
        if let Framing::Blocks {
            events, batches, ..
        } = &mut self.body
        {
            *events += batch_events;
            batches.push(buf.len() as u32);
        }
        buf.push(TAG_BATCH);
        put(buf, record.len() as u64);
        buf.extend_from_slice(record);
        self.record_done()
    }

    fn finish(&mut self, totals: &Totals<'_>) -> io::Result<()> {
        let buf = &mut self.buf;
        buf.push(TAG_END);
        put(buf, totals.events.iter().sum());
        put(buf, totals.drops.iter().sum());
        for kind in 1..EVENT_KIND_SLOTS as usize {
            let events = totals.events.get(kind).copied().unwrap_or(0);
            let drops = totals.drops.get(kind).copied().unwrap_or(0);
            if events > 0 || drops > 0 {
                buf.push(kind as u8);
                put(buf, events);
                put(buf, drops);
            }
        }
        buf.push(0);
        if let Framing::Blocks { .. } = self.body {
            write_held_header(&mut self.unwritten, &mut self.out)?;
            self.cut_block()?;
            if let Framing::Blocks { pool, .. } = &mut self.body {
                pool.drain(&mut self.out)?;
            }
        }
        self.flush()
    }
}
