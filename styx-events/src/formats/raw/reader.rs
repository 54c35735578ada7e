//! Reads a raw capture back into events, one at a time, in bounded memory:
//! version 3's blocks one after the other (or, for parallel `read`, each
//! [`Block`] on its own), versions 1 and 2's records straight.

use super::blocks::{Frame, Unpacker, FRAME_BYTES};
use super::varint::{get, unzigzag};
use super::{aux_from_code, ARG_SLOTS, AUX_EXPLICIT, AUX_SHIFT, MAGIC, MAX_RECORD};
use super::{deltas, BLOCKS_16K_VERSION, LZ4_BLOCKS_VERSION, TAG_THREAD_FOLLOWS};
use super::{MAX_BATCH_ENTRY, MAX_BATCH_RECORD, TAG_BATCH, TAG_BATCH_DELTAS};
use super::{MAX_HEADER, OLDEST_VERSION, STREAM_VERSION, TAG_END, TAG_THREAD};
use super::{VERSION, ZSTD_BLOCKS_VERSION};
use crate::record::batch::{BatchError, Batches};
use crate::record::event::{Body, Call, Event, Text};
use crate::session::header::Header;
use std::io::{self, Read};
use std::ops::Range;
use styx_common::item::Codec;
use styx_common::schema::MAX_FIELDS;
use styx_common::{
    EventKind, RecordHeader, Shape, EVENT_KIND_SLOTS, FUNCTION_EXIT, FUNCTION_TAIL_CALL,
    MARKER_TEXT_MAX, MAX_USDT_ARGS, SPAN_CATEGORY_MAX, SPAN_NAME_MAX, USDT_STRINGS_MAX,
};
use thiserror::Error;

/// Bytes read from the file at a time.
const READ_CHUNK: usize = 1 << 20;

#[derive(Debug, Error)]
/// Why a capture cannot be read (on).
pub enum CaptureError {
    #[error("not a styx capture (it does not start with the capture magic; write one with `-o raw --output FILE`)")]
    /// It does not start with the capture magic.
    NotACapture,
    #[error("capture format version {found}; this styx-loader reads versions {OLDEST_VERSION} to {VERSION}")]
    /// A format version this reader does not know.
    WrongVersion {
        /// The version the file says it is.
        found: u32,
    },
    #[error("the capture ends inside its header ({0} bytes): nothing was recorded")]
    /// The file ends inside its header.
    HeaderCut(u64),
    #[error("the capture claims a header of {len} bytes (at most {MAX_HEADER} are read): it is corrupt or not a styx capture")]
    /// The header length is past `MAX_HEADER` (16 MiB): no writer writes one that
    /// long, and reading it would take that much memory.
    HeaderTooLong {
        /// The length the file gives.
        len: u64,
    },
    #[error("the capture's header is not valid: {0}")]
    /// The header is not the JSON it should be.
    BadHeader(serde_json::Error),
    #[error("corrupt record at byte {offset}: {what}")]
    /// A record that cannot be decoded, at `offset`.
    Corrupt {
        /// Where the record starts.
        offset: u64,
        /// What is wrong with it.
        what: String,
    },
    #[error(transparent)]
    /// Reading the input failed.
    Io(#[from] io::Error),
}

/// How the capture ended, once [`Reader::next`] has returned `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Not at the end yet.
    Reading,
    /// The writer closed it: its own count of events and drops.
    Complete {
        /// Events the writer wrote.
        events: u64,
        /// Events lost in the kernel while tracing.
        dropped: u64,
        /// `(kind id, events, dropped)` for every kind with either.
        per_kind: Vec<(u8, u64, u64)>,
    },
    /// It stops without an END record: the loader was killed or the disk
    /// filled. `partial` bytes of an incomplete record (or block) at
    /// `offset` were dropped; whatever came after was never written.
    CutShort {
        /// Where the last whole record (or block) ends.
        offset: u64,
        /// Bytes after it, part of a record (or block).
        partial: usize,
        /// The events of the block cut short, where its frame was whole.
        lost_events: Option<u64>,
    },
}

/// Where a reader's records come from.
enum Source {
    /// Versions 1 and 2: the input, read in chunks into the buffer.
    Stream,
    /// Version 3: the input's blocks, each decompressed whole into the
    /// buffer (and the bytes of the one being read).
    Blocks(Unpacker, Vec<u8>),
    /// One block at a time, handed over ([`Reader::load`]): parallel `read`.
    Loaded(Unpacker),
}

/// A block of a version 3 capture as stored, not yet decompressed: what
/// parallel `read` hands its workers ([`Reader::take_block`], [`Reader::load`]).
#[derive(Clone)]
pub struct Block {
    /// Where it starts in the file.
    pub offset: u64,
    frame: Frame,
    stored: Vec<u8>,
}

impl Block {
    /// Its events, as its frame says.
    pub fn events(&self) -> u64 {
        self.frame.events
    }

    /// Its bytes as stored (compressed or not).
    pub fn stored_bytes(&self) -> usize {
        self.stored.len()
    }

    /// Its payload, the records as the writer encoded them, decompressed
    /// (for tools that measure how blocks are stored).
    pub fn payload(&self) -> Result<Vec<u8>, CaptureError> {
        let mut payload = Vec::new();
        Unpacker::new()?
            .unpack(&self.frame, &self.stored, &mut payload)
            .map_err(|what| CaptureError::Corrupt {
                offset: self.offset,
                what,
            })?;
        Ok(payload)
    }
}

/// Reads a capture: the header at once, then one event per [`Reader::next`].
pub struct Reader<R: Read> {
    input: R,
    source: Source,
    /// The session the capture describes.
    pub header: Header,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// The capture's format version.
    version: u32,
    /// File offset of `buf[0]` (of the block being read).
    base: u64,
    /// Version 3: the file offset of the next block's frame.
    next_block: u64,
    eof: bool,
    prev_ts: u64,
    prev: [[u64; ARG_SLOTS]; EVENT_KIND_SLOTS as usize],
    threads: Vec<(u32, u32)>,
    current: Option<(u32, u32)>,
    /// The events of the last BATCH record not yet returned, and which is next.
    pending: Vec<Pending>,
    /// Decodes BATCH_DELTAS records.
    deltas: deltas::BatchDeltas,
    pending_at: usize,
    batches: Batches,
    /// Events returned so far.
    pub events: u64,
    /// BATCH records whose framing was whole but whose batch was not (a
    /// traced process can hand over anything): skipped after the events
    /// before the fault, and read on.
    pub malformed_batches: u64,
    /// The first of them: its offset, and what was wrong.
    pub first_malformed_batch: Option<(u64, BatchError)>,
    /// BATCH_DELTAS records read (batches of one type's events, delta
    /// coded by the writer's workers): for tools that measure how blocks
    /// are stored.
    pub delta_coded_batches: u64,
    /// How the capture ended, once read to its end.
    pub ending: Ending,
}

/// An event whose body is its arguments, in parts.
type ArgsEvent = (RecordHeader, EventKind, [u64; 4]);

/// An event of a BATCH record: a catalogue event's, or a declared type's
/// (its spec id and fields).
#[derive(Clone, Copy)]
enum Pending {
    Args(ArgsEvent),
    Declared(RecordHeader, u32, usize, [u64; MAX_FIELDS]),
}

fn args_event((header, kind, args): ArgsEvent) -> Event<'static> {
    Event {
        header,
        kind,
        body: Body::Args(args),
    }
}

/// An event's parts, before its strings are borrowed from the buffer.
enum Parts {
    Args([u64; 4]),
    Span {
        id: u64,
        category: (Range<usize>, bool),
        name: (Range<usize>, bool),
    },
    Marker((Range<usize>, bool)),
    Usdt {
        spec_id: u32,
        nargs: usize,
        strings: Range<usize>,
    },
    Call(Call),
}

/// Why a record could not be decoded.
enum Stop {
    /// The bytes ran out.
    Short,
    Bad(String),
}

impl<R: Read> Reader<R> {
    /// Reads and checks the magic, version and header.
    pub fn open(mut input: R) -> Result<Reader<R>, CaptureError> {
        let mut fixed = [0u8; 16];
        let got = read_full(&mut input, &mut fixed)?;
        if got < MAGIC.len() || &fixed[..8] != MAGIC {
            return Err(CaptureError::NotACapture);
        }
        if got < fixed.len() {
            return Err(CaptureError::HeaderCut(got as u64));
        }
        let version = u32::from_le_bytes(fixed[8..12].try_into().expect("4 bytes"));
        // Version 1 differs in its batches' items and its USDT records,
        // version 3 in its blocks, version 4 in its batches' largest size
        // (a reader takes the largest in all), version 5 in its blocks'
        // codecs (a reader takes every codec in all), version 6 in its
        // BATCH_DELTAS records (taken only there).
        let (codec, source) = match version {
            VERSION | LZ4_BLOCKS_VERSION | ZSTD_BLOCKS_VERSION | BLOCKS_16K_VERSION => {
                (Codec::Current, Source::Blocks(Unpacker::new()?, Vec::new()))
            }
            STREAM_VERSION => (Codec::Current, Source::Stream),
            OLDEST_VERSION => (Codec::V1, Source::Stream),
            _ => return Err(CaptureError::WrongVersion { found: version }),
        };
        let len = u32::from_le_bytes(fixed[12..16].try_into().expect("4 bytes")) as usize;
        if len > MAX_HEADER {
            return Err(CaptureError::HeaderTooLong { len: len as u64 });
        }
        // Read as it arrives, not allocated up front: a short file claiming
        // a long header costs what it holds.
        let mut json = Vec::new();
        loop {
            match (&mut input)
                .take((len - json.len()) as u64)
                .read_to_end(&mut json)
            {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        let got = json.len();
        if got < len {
            return Err(CaptureError::HeaderCut((16 + got) as u64));
        }
        let header: Header = serde_json::from_slice(&json).map_err(CaptureError::BadHeader)?;
        Ok(Reader::start(
            input,
            source,
            header,
            version,
            codec,
            (16 + len) as u64,
        ))
    }

    /// A reader at `base`, the first record or block, before it.
    fn start(
        input: R,
        source: Source,
        header: Header,
        version: u32,
        codec: Codec,
        base: u64,
    ) -> Reader<R> {
        let declared = header.declared_types();
        let blocks = !matches!(source, Source::Stream);
        Reader {
            input,
            source,
            header,
            version,
            buf: if blocks {
                Vec::new()
            } else {
                vec![0; READ_CHUNK]
            },
            pos: 0,
            end: 0,
            base,
            next_block: base,
            // A block's bytes are all there once it is decompressed.
            eof: blocks,
            prev_ts: 0,
            prev: [[0; ARG_SLOTS]; EVENT_KIND_SLOTS as usize],
            threads: Vec::new(),
            current: None,
            pending: Vec::new(),
            deltas: deltas::BatchDeltas::default(),
            pending_at: 0,
            batches: Batches::with(codec, declared),
            events: 0,
            malformed_batches: 0,
            first_malformed_batch: None,
            delta_coded_batches: 0,
            ending: Ending::Reading,
        }
    }

    /// The next event, or None at the end (then see [`Reader::ending`]).
    #[allow(clippy::should_implement_trait)] // lends from self: not an Iterator
    #[inline(always)]
    pub fn next(&mut self) -> Result<Option<Event<'_>>, CaptureError> {
        // The common case inline in the caller's loop; the rest apart
        // (also a batch's events, which come before the next record).
        if self.pending_at >= self.pending.len() {
            if let Some(event) = self.fast_args() {
                self.events += 1;
                return Ok(Some(args_event(event)));
            }
        }
        self.next_slow()
    }

    #[inline(never)]
    fn next_slow(&mut self) -> Result<Option<Event<'_>>, CaptureError> {
        loop {
            if self.pending_at < self.pending.len() {
                let at = self.pending_at;
                self.pending_at += 1;
                self.events += 1;
                return Ok(Some(match &self.pending[at] {
                    Pending::Args(event) => args_event(*event),
                    Pending::Declared(header, spec_id, n, args) => Event {
                        header: *header,
                        kind: EventKind::Usdt,
                        body: Body::Usdt {
                            spec_id: *spec_id,
                            args: &args[..*n],
                            strings: &[],
                        },
                    },
                }));
            }
            // Records the fast path takes can follow a refill.
            if let Some(event) = self.fast_args() {
                self.events += 1;
                return Ok(Some(args_event(event)));
            }
            if !matches!(self.ending, Ending::Reading) {
                return Ok(None);
            }
            if self.end - self.pos < MAX_RECORD && !self.eof {
                self.refill()?;
                continue;
            }
            if self.pos == self.end {
                match self.source {
                    Source::Stream => {
                        self.ending = Ending::CutShort {
                            offset: self.offset(),
                            partial: 0,
                            lost_events: None,
                        };
                        return Ok(None);
                    }
                    Source::Blocks(..) => match self.take_block()? {
                        Some(block) => {
                            self.load(block)?;
                            continue;
                        }
                        None => return Ok(None),
                    },
                    // The block handed over is read: the caller hands on.
                    Source::Loaded(_) => return Ok(None),
                }
            }
            let mut pos = self.pos;
            match self.record(&mut pos) {
                Ok(None) => self.pos = pos,
                Ok(Some((header, kind, parts))) => {
                    self.pos = pos;
                    self.events += 1;
                    return Ok(Some(self.event(header, kind, parts)));
                }
                // A block holds whole records only.
                Err(Stop::Short) if self.in_blocks() => {
                    return Err(self.corrupt("a record cut at its block's end".into()))
                }
                Err(Stop::Short) if self.eof => {
                    self.ending = Ending::CutShort {
                        offset: self.offset(),
                        partial: self.end - self.pos,
                        lost_events: None,
                    };
                    return Ok(None);
                }
                // A BATCH record is longer than the others: read on.
                Err(Stop::Short) if self.end - self.pos < MAX_BATCH_ENTRY => self.refill()?,
                Err(Stop::Short) => {
                    return Err(self.corrupt("a record longer than any record can be".into()))
                }
                Err(Stop::Bad(what)) => return Err(self.corrupt(what)),
            }
        }
    }

    /// The common record, decoded with fewer branches: arguments only, same
    /// thread as the one before, `aux` in the tag, and a whole record
    /// certainly buffered. None for anything else, which [`Reader::record`]
    /// then decodes.
    #[inline(always)]
    fn fast_args(&mut self) -> Option<ArgsEvent> {
        if self.end - self.pos < MAX_RECORD {
            return None;
        }
        let bytes = &self.buf[..self.end];
        let (kind, nargs, aux) = FAST[bytes[self.pos] as usize]?;
        let (pid, tid) = self.current?;
        let mut pos = self.pos + 1;
        let ts_ns = self.prev_ts.wrapping_add(unzigzag(get(bytes, &mut pos)?));
        let prev = &mut self.prev[kind as usize];
        let mut arg = |i: usize| -> Option<u64> {
            let value = prev[i].wrapping_add(unzigzag(get(bytes, &mut pos)?));
            prev[i] = value;
            Some(value)
        };
        // Unrolled, so the values go to the event from registers: copying
        // them back out of `prev` right after storing them stalls.
        let args = match nargs {
            2 => [arg(0)?, arg(1)?, 0, 0],
            3 => [arg(0)?, arg(1)?, arg(2)?, 0],
            _ => [arg(0)?, arg(1)?, arg(2)?, arg(3)?],
        };
        self.pos = pos;
        self.prev_ts = ts_ns;
        let header = RecordHeader {
            ts_ns,
            pid,
            tid,
            kind: kind as u8,
            aux,
            _reserved: [0; 6],
        };
        Some((header, kind, args))
    }

    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn in_blocks(&self) -> bool {
        !matches!(self.source, Source::Stream)
    }

    /// Whether the capture is of blocks (version 3), which
    /// [`crate::read_blocks`] reads in parallel.
    pub fn reads_blocks(&self) -> bool {
        matches!(self.source, Source::Blocks(..))
    }

    fn corrupt(&self, what: String) -> CaptureError {
        match self.in_blocks() {
            // The block's offset in the file, and where in its payload.
            true => CaptureError::Corrupt {
                offset: self.base,
                what: format!("{what} (at byte {} of the block's {})", self.pos, self.end),
            },
            false => CaptureError::Corrupt {
                offset: self.offset(),
                what,
            },
        }
    }

    /// A version 3 capture's next block as stored, not decompressed (for
    /// parallel `read`, before any event was read); None at the end of the
    /// input, then [`Reader::ending`] says how it ended (cut short, since
    /// an END record is in a block). Memory is bounded by the frame's
    /// checks, however long a block claims to be.
    pub fn take_block(&mut self) -> Result<Option<Block>, CaptureError> {
        let Source::Blocks(_, spare) = &mut self.source else {
            return Ok(None);
        };
        if !matches!(self.ending, Ending::Reading) {
            return Ok(None);
        }
        if self.pos != self.end {
            return Err(self.corrupt("a block taken before the last was read".into()));
        }
        let offset = self.next_block;
        let mut fixed = [0u8; FRAME_BYTES];
        let got = read_full(&mut self.input, &mut fixed)?;
        if got < FRAME_BYTES {
            self.ending = Ending::CutShort {
                offset,
                partial: got,
                lost_events: None,
            };
            return Ok(None);
        }
        let frame = Frame::parse(&fixed).map_err(|what| CaptureError::Corrupt { offset, what })?;
        let mut stored = std::mem::take(spare);
        stored.resize(frame.stored_len, 0);
        let got = read_full(&mut self.input, &mut stored)?;
        if got < frame.stored_len {
            self.ending = Ending::CutShort {
                offset,
                partial: FRAME_BYTES + got,
                lost_events: Some(frame.events),
            };
            return Ok(None);
        }
        self.next_block = offset + (FRAME_BYTES + frame.stored_len) as u64;
        Ok(Some(Block {
            offset,
            frame,
            stored,
        }))
    }

    /// A reader of blocks handed over one at a time ([`Reader::load`]), for
    /// the session `header` describes: a worker of parallel `read`.
    pub fn for_blocks(header: Header) -> io::Result<Reader<io::Empty>> {
        let source = Source::Loaded(Unpacker::new()?);
        Ok(Reader::start(
            io::empty(),
            source,
            header,
            VERSION,
            Codec::Current,
            0,
        ))
    }

    /// Decompresses `block` to be read next, its deltas afresh; an error
    /// if its bytes are not the block its frame says.
    pub fn load(&mut self, block: Block) -> Result<(), CaptureError> {
        let unpacker = match &mut self.source {
            Source::Stream => return Err(self.corrupt("a block in a capture of records".into())),
            Source::Blocks(unpacker, _) | Source::Loaded(unpacker) => unpacker,
        };
        let unpacked = unpacker.unpack(&block.frame, &block.stored, &mut self.buf);
        if let Source::Blocks(_, spare) = &mut self.source {
            // Its bytes back, for the next block.
            *spare = block.stored;
        }
        unpacked.map_err(|what| CaptureError::Corrupt {
            offset: block.offset,
            what,
        })?;
        self.base = block.offset;
        self.pos = 0;
        self.end = self.buf.len();
        if let Source::Loaded(_) = self.source {
            // Each block's own: whether it holds the END record.
            self.ending = Ending::Reading;
        }
        self.prev_ts = 0;
        self.prev = [[0; ARG_SLOTS]; EVENT_KIND_SLOTS as usize];
        self.threads.clear();
        self.current = None;
        // A block read only in part (parallel `read`'s runs stop where
        // theirs end) leaves none of its batch's events to the next.
        self.pending.clear();
        self.pending_at = 0;
        Ok(())
    }

    /// Forgets the batches given before (see [`Batches::forget`]): a run
    /// of blocks read apart decodes as it would from the capture's start;
    /// and a block read again on the same reader (a run's last, then the
    /// next run's first) gives its batches again.
    pub(crate) fn forget_batches(&mut self) {
        self.batches.forget();
    }

    fn refill(&mut self) -> io::Result<()> {
        self.buf.copy_within(self.pos..self.end, 0);
        self.base += self.pos as u64;
        self.end -= self.pos;
        self.pos = 0;
        while self.end < self.buf.len() {
            match self.input.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Decodes one record at `*pos`: None for a meta record.
    // Over 80 lines: the decoder's hot path, one match over the record
    // kinds read top to bottom, inlined whole into `next`.
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    fn record(
        &mut self,
        pos: &mut usize,
    ) -> Result<Option<(RecordHeader, EventKind, Parts)>, Stop> {
        let bytes = &self.buf[..self.end];
        let tag = *bytes.get(*pos).ok_or(Stop::Short)?;
        *pos += 1;
        let kind_id = tag & 0x0f;
        if kind_id == 0 {
            return self.meta(tag, pos).map(|()| None);
        }
        let kind = EventKind::from_id(kind_id)
            .ok_or_else(|| Stop::Bad(format!("unknown event kind {kind_id}")))?;
        if tag & TAG_THREAD_FOLLOWS != 0 {
            let index = get(bytes, pos).ok_or(Stop::Short)?;
            let thread = self
                .threads
                .get(index as usize)
                .copied()
                .ok_or_else(|| Stop::Bad(format!("thread {index} was never defined")))?;
            self.current = Some(thread);
        }
        let (pid, tid) = self
            .current
            .ok_or_else(|| Stop::Bad("an event before any thread record".into()))?;
        let code = tag >> AUX_SHIFT;
        let aux = match aux_from_code(code) {
            Some(aux) => aux,
            None if code == AUX_EXPLICIT => get(bytes, pos).ok_or(Stop::Short)? as u8,
            None => return Err(Stop::Bad(format!("unknown aux code {code}"))),
        };
        let ts_ns = self
            .prev_ts
            .wrapping_add(unzigzag(get(bytes, pos).ok_or(Stop::Short)?));
        let prev = &mut self.prev[kind_id as usize];
        let parts = match kind.shape() {
            Shape::Args(n) => Parts::Args(delta_args(bytes, pos, prev, n)?),
            Shape::ArgsAux(n) => Parts::Args(delta_args(bytes, pos, prev, n)?),
            Shape::Span => {
                let [id, ..] = delta_args(bytes, pos, prev, 1)?;
                let category = text(bytes, pos, SPAN_CATEGORY_MAX)?;
                let name = text(bytes, pos, SPAN_NAME_MAX)?;
                Parts::Span { id, category, name }
            }
            Shape::Marker => Parts::Marker(text(bytes, pos, MARKER_TEXT_MAX)?),
            Shape::Usdt => {
                let spec_id = get(bytes, pos).ok_or(Stop::Short)? as u32;
                let nargs = aux as usize;
                if nargs > MAX_USDT_ARGS {
                    return Err(Stop::Bad(format!("usdt record with {nargs} arguments")));
                }
                for slot in prev.iter_mut().take(nargs) {
                    *slot = slot.wrapping_add(unzigzag(get(bytes, pos).ok_or(Stop::Short)?));
                }
                let strings = match self.version {
                    1 => *pos..*pos,
                    _ => usdt_strings(bytes, pos)?,
                };
                Parts::Usdt {
                    spec_id,
                    nargs,
                    strings,
                }
            }
            Shape::Function => {
                let mut values = [0u64; 5];
                for (value, last) in values.iter_mut().zip(prev.iter()) {
                    *value = last.wrapping_add(unzigzag(get(bytes, pos).ok_or(Stop::Short)?));
                }
                prev[..5].copy_from_slice(&values);
                let [function, sp, depth, duration, unwound] = values;
                Parts::Call(Call {
                    function: u32::try_from(function)
                        .map_err(|_| Stop::Bad(format!("function id {function}")))?,
                    sp,
                    exit: matches!(aux, FUNCTION_EXIT | FUNCTION_TAIL_CALL),
                    tail_call: aux == FUNCTION_TAIL_CALL,
                    depth: u32::try_from(depth)
                        .map_err(|_| Stop::Bad(format!("call depth {depth}")))?,
                    duration_ns: duration.checked_sub(1),
                    unwound: unwound != 0,
                })
            }
        };
        self.prev_ts = ts_ns;
        let header = RecordHeader {
            ts_ns,
            pid,
            tid,
            kind: kind_id,
            aux,
            _reserved: [0; 6],
        };
        Ok(Some((header, kind, parts)))
    }

    fn meta(&mut self, tag: u8, pos: &mut usize) -> Result<(), Stop> {
        let bytes = &self.buf[..self.end];
        match tag {
            TAG_THREAD => {
                let pid = get(bytes, pos).ok_or(Stop::Short)? as u32;
                let tid = get(bytes, pos).ok_or(Stop::Short)? as u32;
                self.threads.push((pid, tid));
                self.current = Some((pid, tid));
                Ok(())
            }
            TAG_END => {
                let events = get(bytes, pos).ok_or(Stop::Short)?;
                let dropped = get(bytes, pos).ok_or(Stop::Short)?;
                let mut per_kind = Vec::new();
                loop {
                    let kind = *bytes.get(*pos).ok_or(Stop::Short)?;
                    *pos += 1;
                    if kind == 0 {
                        break;
                    }
                    let n = get(bytes, pos).ok_or(Stop::Short)?;
                    let lost = get(bytes, pos).ok_or(Stop::Short)?;
                    per_kind.push((kind, n, lost));
                }
                self.ending = Ending::Complete {
                    events,
                    dropped,
                    per_kind,
                };
                // Nothing after the end is read.
                self.end = *pos;
                self.eof = true;
                Ok(())
            }
            TAG_BATCH | TAG_BATCH_DELTAS if tag == TAG_BATCH || self.version >= VERSION => {
                // In a block, the block's: its payload may be compressed.
                let offset = match self.in_blocks() {
                    true => self.base,
                    false => self.base + (*pos - 1) as u64,
                };
                let len = get(bytes, pos).ok_or(Stop::Short)? as usize;
                if len > MAX_BATCH_RECORD {
                    return Err(Stop::Bad(format!("batch record of {len} bytes")));
                }
                let mut record = bytes.get(*pos..*pos + len).ok_or(Stop::Short)?;
                *pos += len;
                self.pending.clear();
                self.pending_at = 0;
                if tag == TAG_BATCH_DELTAS {
                    self.delta_coded_batches += 1;
                    match self.deltas.decode(record) {
                        Ok(decoded) => record = decoded,
                        Err(item) => {
                            self.malformed_batches += 1;
                            let e = BatchError::NotCoded(item);
                            self.first_malformed_batch.get_or_insert((offset, e));
                            return Ok(());
                        }
                    }
                }
                let pending = &mut self.pending;
                let split = self.batches.split(record, |event| {
                    // Batches hold events of argument shapes and of
                    // declared types.
                    match event.body {
                        Body::Args(args) => {
                            pending.push(Pending::Args((event.header, event.kind, args)))
                        }
                        // A declared type's: no strings.
                        Body::Usdt { spec_id, args, .. } => {
                            let mut fields = [0u64; MAX_FIELDS];
                            let n = args.len().min(MAX_FIELDS);
                            fields[..n].copy_from_slice(&args[..n]);
                            pending.push(Pending::Declared(event.header, spec_id, n, fields));
                        }
                        _ => {}
                    }
                    Ok::<(), ()>(())
                });
                if let Err(e) = split {
                    // Its length says where the next record starts: one bad
                    // batch does not hide the rest of the capture.
                    self.malformed_batches += 1;
                    self.first_malformed_batch.get_or_insert((offset, e));
                }
                Ok(())
            }
            other => Err(Stop::Bad(format!("unknown record tag {other:#04x}"))),
        }
    }

    #[inline(always)]
    fn event(&self, header: RecordHeader, kind: EventKind, parts: Parts) -> Event<'_> {
        let text = |(range, truncated): (Range<usize>, bool)| Text {
            bytes: &self.buf[range],
            truncated,
        };
        let body = match parts {
            Parts::Args(args) => Body::Args(args),
            Parts::Span { id, category, name } => Body::Span {
                id,
                category: text(category),
                name: text(name),
            },
            Parts::Marker(t) => Body::Marker(text(t)),
            Parts::Usdt {
                spec_id,
                nargs,
                strings,
            } => Body::Usdt {
                spec_id,
                args: &self.prev[kind as usize][..nargs],
                strings: &self.buf[strings],
            },
            Parts::Call(call) => Body::Call(call),
        };
        Event { header, kind, body }
    }
}

/// By tag: the kind, argument count and `aux` of records that are only
/// arguments, of the current thread, with `aux` in the tag.
const FAST: [Option<(EventKind, usize, u8)>; 256] = {
    let mut table = [None; 256];
    let mut tag = 0;
    while tag < 256 {
        let kind = EventKind::from_id(tag as u8 & 0x0f);
        let aux = aux_from_code(tag as u8 >> AUX_SHIFT);
        if let (Some(kind), Some(aux), 0) = (kind, aux, tag as u8 & TAG_THREAD_FOLLOWS) {
            table[tag] = match kind.shape() {
                Shape::Args(n) if n >= 2 && n <= 4 => Some((kind, n, aux)),
                Shape::ArgsAux(n) if n >= 2 && n <= 4 => Some((kind, n, aux)),
                _ => None,
            };
        }
        tag += 1;
    }
    table
};

/// Reads `n` delta-coded arguments; `prev` is updated only if all are there.
#[inline(always)]
fn delta_args(
    bytes: &[u8],
    pos: &mut usize,
    prev: &mut [u64; ARG_SLOTS],
    n: usize,
) -> Result<[u64; 4], Stop> {
    let mut args = [0u64; 4];
    for (i, arg) in args.iter_mut().enumerate().take(n) {
        *arg = prev[i].wrapping_add(unzigzag(get(bytes, pos).ok_or(Stop::Short)?));
    }
    prev[..n].copy_from_slice(&args[..n]);
    Ok(args)
}

fn text(bytes: &[u8], pos: &mut usize, max: usize) -> Result<(Range<usize>, bool), Stop> {
    let word = get(bytes, pos).ok_or(Stop::Short)?;
    let len = (word >> 1) as usize;
    if len > max {
        return Err(Stop::Bad(format!(
            "a string of {len} bytes (at most {max})"
        )));
    }
    let range = *pos..*pos + len;
    if range.end > bytes.len() {
        return Err(Stop::Short);
    }
    *pos = range.end;
    Ok((range, word & 1 == 1))
}

/// A USDT record's strings: their length, then the bytes.
fn usdt_strings(bytes: &[u8], pos: &mut usize) -> Result<Range<usize>, Stop> {
    let len = get(bytes, pos).ok_or(Stop::Short)? as usize;
    if len > USDT_STRINGS_MAX {
        return Err(Stop::Bad(format!(
            "usdt strings of {len} bytes (at most {USDT_STRINGS_MAX})"
        )));
    }
    let range = *pos..*pos + len;
    if range.end > bytes.len() {
        return Err(Stop::Short);
    }
    *pos = range.end;
    Ok(range)
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
