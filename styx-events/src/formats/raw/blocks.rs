//! Version 3's blocks: the writer's pool that compresses them on worker
//! threads (written in order), and the reader's side that takes one frame
//! at a time, bounded.
//!
//! ```text
//! block := codec:u8 0:u8 0:u16 stored_len:u32le payload_len:u32le events:u32le stored
//! ```
//!
//! `stored` is the payload as it is (codec 0), one zstd frame with its
//! checksum (codec 1) or one lz4 block (codec 2, from version 5; no
//! checksum: a damaged one that still decodes to its length gives records
//! the reader checks as any); the payload is a run of records as in
//! version 2, their delta state (times, arguments, thread table) starting
//! afresh in every block, so each block decodes on its own: the reader of a growing
//! file, one that stops at a cut block and parallel `read` rely on it.
//! `events` is the block's own count, so a cut block says what it held.
//! From version 6 a worker may delta code the block's batches of one
//! type's events before compressing it (`deltas.rs`; when, [`Coding`]).
//!
//! The loader's thread only appends records to the block being filled
//! (as version 2 did to its chunk), counting its events; a full block goes
//! to a worker, which compresses it: by default with zstd while the
//! workers keep up, and with lz4 (~1.3× faster here, ~2× the bytes) a
//! block taken while another waits for a worker. On this 2-CPU machine
//! the demo traced into a file (8 alternating rounds) ran so at 0.83 of
//! its speed traced to /dev/null, at 0.76 with zstd for every block and
//! 0.81 with lz4, 1.5–1.7 bytes an event each way. The workers run at the
//! lowest priority (`SCHED_IDLE`): they compress with the CPU time the emulator
//! and the loader leave, never taking it from them. At most
//! [`MAX_IN_FLIGHT`] blocks are pending; then the oldest is written,
//! compressed or as it is. Memory stays bounded either way. How long the
//! loader waits for the workers depends on whether the emulator waits for
//! the loader:
//!
//! - It does not (`--on-full drop`): the loader never waits. A block handed
//!   over while [`COMPRESS_BEHIND`] wait for the workers is stored as it is,
//!   and so is the oldest once [`MAX_IN_FLIGHT`] are pending; every block,
//!   for a while, once the loader fell behind the ring
//!   ([`BlockPool::hold_off`]). Only a slow disk holds the loader back (the
//!   ring then fills as for a slow output).
//! - It does (the default into a file): a block handed over while
//!   [`COMPRESS_BEHIND`] wait for the workers is stored as it is only while
//!   the capture stays within [`STORED_BUDGET`] bytes an event (by
//!   `auto`; `zstd` and `lz4` compress them all); every other block goes
//!   to the workers, and with [`MAX_IN_FLIGHT`] pending the loader waits
//!   a little for the oldest ([`TAKE_OVER_AFTER`]), its CPU then the
//!   worker's. Storing takes less CPU than compressing (the kernel's copy
//!   of the demo's 7.1 bytes an event, ~3 ns, against lz4's ~4.3 ns),
//!   but stored alone the capture is ~5× bigger, more than most disks
//!   take at these rates (1.4 GB/s at 200 M events/s: the emulator then
//!   waits for the disk all the same); hence the budget. On this 2-CPU
//!   machine (10 alternating rounds) the demo ran into a file at 0.96 of
//!   its speed traced to /dev/null at 3.0 bytes an event, against 0.91 at
//!   1.3 handing the workers every block (earlier, skipping the workers
//!   whenever two blocks waited for them, with no budget: 5.3 bytes at
//!   0.78 against 2.3 at 0.70).

use super::{deltas, MAX_BATCH_ENTRY, MAX_BLOCK_PAYLOAD};
use crate::write::buf::ByteBuf;
use crossbeam_channel::{unbounded, Receiver, Sender};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
pub use styx_common::capture::STORED_BUDGET;

/// Bytes of a block's frame, before what it stores.
pub const FRAME_BYTES: usize = 16;

/// How a block's payload is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Compression {
    /// Compressed on worker threads of the lowest priority as far as they
    /// keep up: a block handed over while two others still wait for them
    /// is stored as encoded; when the emulator waits for the loader, only
    /// while the capture stays within 3 bytes an event (it may then run
    /// at the workers' pace). zstd's fastest level while they keep up,
    /// lz4 for a block taken while another waits.
    #[default]
    Auto,
    /// zstd's fastest level for every block the workers take: the smallest
    /// captures, ~1.3× the CPU of lz4.
    Zstd,
    /// lz4 for every block the workers take: the least CPU, ~2× zstd's bytes.
    Lz4,
    /// Stored as encoded (~10–30 bytes an event): for a fast disk when
    /// no core is spare for compressing.
    None,
}

const CODEC_STORED: u8 = 0;
const CODEC_ZSTD: u8 = 1;
const CODEC_LZ4: u8 = 2;

/// zstd's level: 1 compressed the demo's capture ~15× at ~1.4 GB/s a core;
/// higher levels cost more than their bytes save at these rates.
const ZSTD_LEVEL: i32 = 1;

/// The most bytes a block stores: the zstd bound of the largest payload
/// (lz4's is smaller).
pub const MAX_STORED: usize = MAX_BLOCK_PAYLOAD + (MAX_BLOCK_PAYLOAD >> 7) + (64 << 10);

/// Blocks handed over and not yet written, at most: past it the oldest is
/// written, compressed or not.
pub const MAX_IN_FLIGHT: usize = 8;

/// Blocks at the workers past which the next is stored, not compressed,
/// when the loader may not wait for them: the workers are behind.
pub const COMPRESS_BEHIND: usize = 2;

/// How long the oldest block waits for a worker before it is stored (the
/// workers may get no CPU time on a busy machine): so a reader of the
/// growing file sees it soon; at the end, for a short while only.
pub(crate) const WORKER_LATE: Duration = Duration::from_millis(100);
const LAST_WAIT: Duration = Duration::from_millis(20);

/// With [`MAX_IN_FLIGHT`] blocks pending, how long the loader waits for the
/// worker compressing the oldest before storing it (unless told not to
/// wait): a worker that gets the CPU compresses a block in about a
/// millisecond, and while the loader waits its CPU is the worker's. Once a
/// worker was late, the loader waits again only after an answer came in
/// time.
const TAKE_OVER_AFTER: Duration = Duration::from_millis(2);

/// How long blocks are stored rather than compressed once the loader fell
/// behind the ring ([`BlockPool::hold_off`]).
const HOLD_OFF: Duration = Duration::from_millis(100);

/// A block's frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    codec: u8,
    /// Bytes stored after the frame.
    pub stored_len: usize,
    /// Bytes of its payload.
    pub payload_len: usize,
    /// Events in it.
    pub events: u64,
}

impl Frame {
    fn bytes(&self) -> [u8; FRAME_BYTES] {
        let mut out = [0u8; FRAME_BYTES];
        out[0] = self.codec;
        out[4..8].copy_from_slice(&(self.stored_len as u32).to_le_bytes());
        out[8..12].copy_from_slice(&(self.payload_len as u32).to_le_bytes());
        out[12..16].copy_from_slice(&(self.events.min(u32::MAX.into()) as u32).to_le_bytes());
        out
    }

    /// The frame in `bytes`, checked against every bound; why not if not.
    pub fn parse(bytes: &[u8; FRAME_BYTES]) -> Result<Frame, String> {
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let frame = Frame {
            codec: bytes[0],
            stored_len: word(4) as usize,
            payload_len: word(8) as usize,
            events: word(12).into(),
        };
        if !matches!(frame.codec, CODEC_STORED | CODEC_ZSTD | CODEC_LZ4) || bytes[1..4] != [0; 3] {
            return Err(format!("unknown block codec {:#04x}", frame.codec));
        }
        if frame.payload_len > MAX_BLOCK_PAYLOAD {
            return Err(format!(
                "a block of {} bytes (at most {MAX_BLOCK_PAYLOAD})",
                frame.payload_len
            ));
        }
        let most = match frame.codec {
            CODEC_STORED => frame.payload_len,
            _ => MAX_STORED,
        };
        if frame.stored_len > most || (frame.codec == CODEC_STORED && frame.stored_len != most) {
            return Err(format!(
                "a block storing {} bytes for {}",
                frame.stored_len, frame.payload_len
            ));
        }
        Ok(frame)
    }
}

/// Decompresses blocks (one per reader or worker: it keeps zstd's context).
pub struct Unpacker {
    zstd: zstd::bulk::Decompressor<'static>,
}

impl Unpacker {
    pub fn new() -> io::Result<Unpacker> {
        Ok(Unpacker {
            zstd: zstd::bulk::Decompressor::new()?,
        })
    }

    /// `stored`'s payload into `payload` (cleared first); why not if the
    /// bytes are not the block `frame` says.
    pub fn unpack(
        &mut self,
        frame: &Frame,
        stored: &[u8],
        payload: &mut Vec<u8>,
    ) -> Result<(), String> {
        if frame.codec == CODEC_STORED {
            payload.clear();
            payload.extend_from_slice(stored);
            return Ok(());
        }
        // Room for the payload the frame declares (bounded by the frame's
        // check), and no more: zstd stops there rather than grow it.
        let limit = frame.payload_len;
        payload.resize(limit, 0);
        let unpacked = match frame.codec {
            CODEC_LZ4 => lz4::block::decompress_to_buffer(stored, Some(limit as i32), payload),
            _ => self.zstd.decompress_to_buffer(stored, &mut payload[..]),
        };
        match unpacked {
            Ok(n) if n == limit => Ok(()),
            Ok(n) => Err(format!("a block of {n} bytes where its frame says {limit}")),
            Err(e) => Err(format!("a block that does not decompress: {e}")),
        }
    }
}

/// What the writer knows of a full block besides its bytes.
pub struct Filled {
    /// Its events.
    pub events: u64,
    /// Where its BATCH records start, in order.
    pub batches: Vec<u32>,
}

/// One full block for a worker to compress; the pool keeps the payload
/// too, to store it itself if the worker is late.
struct Job {
    seq: u64,
    payload: Arc<ByteBuf>,
    /// Its BATCH records, which the worker codes where they are of one
    /// type's events (`deltas.rs`).
    batches: Vec<u32>,
}

/// A worker's answer: the block compressed, or None when the pool had
/// stored it meanwhile (then it was not compressed) or zstd failed.
struct Packed {
    seq: u64,
    packed: io::Result<Option<(u8, Vec<u8>)>>,
}

/// A block handed over and not written yet, in order.
struct Pending {
    seq: u64,
    payload: Arc<ByteBuf>,
    events: u64,
    packing: Packing,
    handed_over: Instant,
}

/// How a pending block is to be stored.
enum Packing {
    /// A worker compresses it: written when its answer comes.
    AtWorker,
    /// As it is (the workers were behind, or could not compress it).
    Stored,
    /// By a worker: its codec and bytes.
    Compressed(u8, Vec<u8>),
}

/// Worker threads compressing blocks, and the order they are written in.
///
/// The loader's thread never waits for a worker: one that is late with
/// the oldest block when [`MAX_IN_FLIGHT`] are pending (it runs only on CPU
/// time nothing else wants, so it may be very late) sees that block stored
/// instead, as it is, and its work on it dropped.
pub struct BlockPool {
    jobs: Option<Sender<Job>>,
    answers: Receiver<Packed>,
    workers: Vec<JoinHandle<()>>,
    pending: VecDeque<Pending>,
    next_seq: u64,
    /// Jobs sent that no answer came back for yet.
    at_workers: usize,
    /// No block was taken from a late worker since its last answer.
    workers_in_time: bool,
    /// The emulator waits for the loader, so the loader may wait for the
    /// workers (see the module's comment).
    may_wait: bool,
    /// Buffers back from written blocks.
    spare: Vec<ByteBuf>,
    /// Until then blocks are stored, not handed to the workers (see
    /// [`BlockPool::hold_off`]).
    held_off_until: Option<Instant>,
    /// Waits for the workers however long they take (tests: on a loaded
    /// machine a worker may get no CPU for longer than any wait).
    patient: bool,
    /// Whether, when the loader may wait, blocks the workers are behind
    /// with are stored within [`STORED_BUDGET`] (`auto`).
    stores_within_budget: bool,
    /// Events of the blocks handed over so far.
    events_in: u64,
    /// Bytes of the blocks written so far and of those pending to be
    /// stored (the ones at the workers count once written).
    bytes_out: u64,
}

impl BlockPool {
    /// Blocks stored as `compression` says, by `workers` threads (at least
    /// one; none when nothing is compressed).
    pub fn new(compression: Compression, workers: usize) -> io::Result<BlockPool> {
        let (jobs, job_queue) = unbounded::<Job>();
        let (answer, answers) = unbounded();
        let workers = match compression {
            Compression::None => 0,
            Compression::Auto | Compression::Zstd | Compression::Lz4 => workers.max(1),
        };
        let workers = (0..workers)
            .map(|i| {
                let queue = job_queue.clone();
                let answer = answer.clone();
                std::thread::Builder::new()
                    .name(format!("styx-capture-{i}"))
                    .spawn(move || work(&queue, &answer, compression))
            })
            .collect::<io::Result<Vec<_>>>()?;
        let jobs = (!workers.is_empty()).then_some(jobs);
        Ok(BlockPool::with(jobs, answers, workers, compression))
    }

    fn with(
        jobs: Option<Sender<Job>>,
        answers: Receiver<Packed>,
        workers: Vec<JoinHandle<()>>,
        compression: Compression,
    ) -> BlockPool {
        BlockPool {
            jobs,
            answers,
            workers,
            pending: VecDeque::new(),
            next_seq: 0,
            at_workers: 0,
            workers_in_time: true,
            may_wait: true,
            spare: Vec::new(),
            held_off_until: None,
            patient: false,
            stores_within_budget: compression == Compression::Auto,
            events_in: 0,
            bytes_out: 0,
        }
    }

    /// A pool that compresses every block as `compression` says, waiting
    /// for its workers however long they take.
    #[cfg(test)]
    pub(crate) fn patient(compression: Compression) -> io::Result<BlockPool> {
        let mut pool = BlockPool::new(compression, 2)?;
        pool.patient = true;
        Ok(pool)
    }

    /// A pool whose workers never get to run: jobs are taken by nobody.
    #[cfg(test)]
    pub(crate) fn never_answered() -> BlockPool {
        let (jobs, queue) = unbounded::<Job>();
        let (answer, answers) = unbounded();
        let idle = std::thread::spawn(move || {
            // Holds the queue and the answers open, answering nothing, until
            // the pool closes the queue.
            let _answer = answer;
            while queue.recv().is_ok() {}
        });
        BlockPool::with(Some(jobs), answers, vec![idle], Compression::Auto)
    }

    /// A pool of one worker that starts compressing (at normal priority)
    /// as `compression` says only once `open`'s sender is dropped: workers
    /// far behind the loader.
    #[cfg(test)]
    pub(crate) fn held_until(open: Receiver<()>, compression: Compression) -> BlockPool {
        let (jobs, queue) = unbounded::<Job>();
        let (answer, answers) = unbounded();
        let worker = std::thread::spawn(move || {
            let _ = open.recv();
            compress(&queue, &answer, compression)
        });
        BlockPool::with(Some(jobs), answers, vec![worker], compression)
    }

    /// Whether the loader may wait for the workers: the blocks they are
    /// behind with are then stored only within [`STORED_BUDGET`] (`auto`),
    /// the others handed to them and a late one waited for a little (see
    /// [`TAKE_OVER_AFTER`]); else blocks they are behind with are stored.
    pub fn wait_for_workers(&mut self, wait: bool) {
        self.may_wait = wait;
    }

    /// The loader fell behind the ring: for [`HOLD_OFF`] blocks are stored
    /// as encoded, not handed to the workers, unless the loader may wait
    /// for them (the emulator then waits for the loader and loses nothing).
    /// Workers without blocks leave their CPU idle, and an idle CPU takes
    /// over a runnable thread from a busy one: a loader that woke on the
    /// emulator's CPU moves. A CPU busy with the workers (lowest priority
    /// as they are) does not take it over at once: on the 2-CPU machine
    /// of the benchmarks the loader then shared the emulator's CPU for
    /// ~30 ms while the ring overflowed.
    pub fn hold_off(&mut self) {
        self.held_off_until = Some(Instant::now() + HOLD_OFF);
    }

    /// An empty buffer for the next block.
    pub fn buffer(&mut self) -> ByteBuf {
        self.spare
            .pop()
            .unwrap_or_else(|| ByteBuf::with_capacity(super::BLOCK_TARGET + MAX_BATCH_ENTRY))
    }

    /// Hands a full block to the workers, or marks it to be stored when
    /// they are behind, then writes what is ready; with [`MAX_IN_FLIGHT`]
    /// blocks pending, the oldest is written now, compressed or not.
    pub fn submit(
        &mut self,
        payload: ByteBuf,
        filled: Filled,
        out: &mut impl Write,
    ) -> io::Result<()> {
        let Filled { events, batches } = filled;
        self.take_answers()?;
        let seq = self.next_seq;
        self.next_seq += 1;
        let payload = Arc::new(payload);
        self.events_in += events;
        let behind = self.at_workers >= COMPRESS_BEHIND;
        let compress = match self.may_wait {
            true => !behind || !self.stores_within_budget || !self.fits_stored(payload.len()),
            false => !behind && !self.held_off(),
        };
        let packing = match &self.jobs {
            Some(jobs) if compress => {
                let job = Job {
                    seq,
                    payload: Arc::clone(&payload),
                    batches,
                };
                jobs.send(job)
                    .map_err(|_| io::Error::other("the capture's worker threads are gone"))?;
                self.at_workers += 1;
                Packing::AtWorker
            }
            _ => {
                self.bytes_out += (FRAME_BYTES + payload.len()) as u64;
                Packing::Stored
            }
        };
        self.pending.push_back(Pending {
            seq,
            payload,
            events,
            packing,
            handed_over: Instant::now(),
        });
        self.write_in_order(out)?;
        let take_over_after = match self.may_wait {
            true => TAKE_OVER_AFTER,
            false => Duration::ZERO,
        };
        while self.pending.len() >= MAX_IN_FLIGHT {
            self.wait_for_oldest(take_over_after)?;
            self.write_oldest(out)?;
        }
        Ok(())
    }

    /// Whether a block of `payload` bytes stored as it is keeps the capture
    /// within [`STORED_BUDGET`] bytes an event.
    fn fits_stored(&self, payload: usize) -> bool {
        self.bytes_out + (FRAME_BYTES + payload) as u64 <= STORED_BUDGET * self.events_in
    }

    /// Whether blocks are stored for now (see [`BlockPool::hold_off`]).
    fn held_off(&self) -> bool {
        self.held_off_until
            .is_some_and(|until| Instant::now() < until)
    }

    /// Waits up to `longest` for the answer for the oldest block, if it is
    /// at a worker and the workers have been in time.
    fn wait_for_oldest(&mut self, longest: Duration) -> io::Result<()> {
        let until = Instant::now() + longest;
        while self.workers_in_time
            && (self.pending.front()).is_some_and(|p| matches!(p.packing, Packing::AtWorker))
        {
            let answer = match self.patient {
                true => self.answers.recv().map_err(|_| ()),
                false => self.answers.recv_deadline(until).map_err(|_| ()),
            };
            match answer {
                Ok(answer) => self.arrived(answer)?,
                // Late, or (patient) the workers are gone: stored.
                Err(()) => (self.workers_in_time, self.patient) = (false, false),
            }
        }
        Ok(())
    }

    /// Writes every block whose turn it is and that is ready, not waiting;
    /// the oldest stored if a worker is late with it.
    pub fn write_ready(&mut self, out: &mut impl Write) -> io::Result<()> {
        self.take_answers()?;
        self.write_in_order(out)?;
        if !self.patient
            && (self.pending.front())
                .is_some_and(|oldest| oldest.handed_over.elapsed() >= WORKER_LATE)
        {
            self.write_oldest(out)?;
            self.write_in_order(out)?;
        }
        Ok(())
    }

    /// Writes every block pending: waits a little for the workers'
    /// answers, then stores what they have not compressed.
    pub fn drain(&mut self, out: &mut impl Write) -> io::Result<()> {
        self.workers_in_time = true;
        while !self.pending.is_empty() {
            self.wait_for_oldest(LAST_WAIT)?;
            self.write_oldest(out)?;
        }
        Ok(())
    }

    /// The workers' answers so far, each to its block.
    fn take_answers(&mut self) -> io::Result<()> {
        while let Ok(answer) = self.answers.try_recv() {
            self.arrived(answer)?;
        }
        Ok(())
    }

    fn arrived(&mut self, answer: Packed) -> io::Result<()> {
        self.at_workers -= 1;
        self.workers_in_time = true;
        let packed = answer.packed?;
        let first = self.pending.front().map_or(u64::MAX, |p| p.seq);
        // A block written meanwhile is no longer pending.
        if let Some(at) = answer.seq.checked_sub(first) {
            if let Some(block) = self.pending.get_mut(at as usize) {
                block.packing = match packed {
                    Some((codec, bytes)) => Packing::Compressed(codec, bytes),
                    None => Packing::Stored,
                };
            }
        }
        Ok(())
    }

    /// Writes the oldest blocks while each is ready: compressed, or to be
    /// stored.
    fn write_in_order(&mut self, out: &mut impl Write) -> io::Result<()> {
        while let Some(oldest) = self.pending.front() {
            if let Packing::AtWorker = oldest.packing {
                break;
            }
            self.write_oldest(out)?;
        }
        Ok(())
    }

    /// Writes the oldest block: compressed if its answer came, else stored.
    fn write_oldest(&mut self, out: &mut impl Write) -> io::Result<()> {
        let Some(block) = self.pending.pop_front() else {
            return Ok(());
        };
        let payload = block.payload.as_slice();
        let (codec, stored) = match &block.packing {
            Packing::Compressed(codec, packed) => (*codec, &packed[..]),
            Packing::AtWorker | Packing::Stored => (CODEC_STORED, payload),
        };
        if !matches!(block.packing, Packing::Stored) {
            self.bytes_out += (FRAME_BYTES + stored.len()) as u64;
        }
        let frame = Frame {
            codec,
            stored_len: stored.len(),
            payload_len: payload.len(),
            events: block.events,
        };
        // A failed write is not retried (the file stays a prefix of the
        // stream of blocks), and the buffer is kept either way.
        let written = out
            .write_all(&frame.bytes())
            .and_then(|()| out.write_all(stored));
        // A late worker may hold it still: then it goes when the worker
        // drops it.
        if let Ok(mut payload) = Arc::try_unwrap(block.payload) {
            payload.clear();
            self.spare.push(payload);
        }
        written
    }
}

impl Drop for BlockPool {
    fn drop(&mut self) {
        // Closing the queue ends the workers once it is empty.
        self.jobs = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

/// A worker: compresses blocks at the lowest priority.
fn work(queue: &Receiver<Job>, answer: &Sender<Packed>, compression: Compression) {
    lower_priority();
    compress(queue, answer, compression)
}

/// Compresses the blocks `queue` brings, skipping those the pool stored
/// meanwhile.
fn compress(queue: &Receiver<Job>, answer: &Sender<Packed>, compression: Compression) {
    // A zstd context only where zstd may be taken.
    let mut zstd = match compression {
        Compression::Auto | Compression::Zstd => {
            match zstd::bulk::Compressor::new(ZSTD_LEVEL).and_then(|mut c| {
                c.include_checksum(true)?;
                Ok(c)
            }) {
                Ok(c) => Some(c),
                Err(e) => {
                    log::warn!("the capture's blocks are not compressed with zstd: {e}");
                    None
                }
            }
        }
        Compression::Lz4 | Compression::None => None,
    };
    let mut scratch = Vec::new();
    let (mut coder, mut coding) = (deltas::BatchDeltas::default(), Coding::default());
    while let Ok(job) = queue.recv() {
        // The pool's reference gone: it was written stored.
        let written = Arc::strong_count(&job.payload) == 1;
        let payload = job.payload.as_slice();
        let lz4 = match compression {
            Compression::Lz4 => true,
            // Another block waits for a worker: this one the faster way.
            Compression::Auto => !queue.is_empty(),
            Compression::Zstd | Compression::None => false,
        };
        let pack = |bytes: &[u8]| match &mut zstd {
            _ if lz4 => {
                // Into the worker's own buffer, then copied at its size:
                // the bound zeroed for every block cost more than the copy.
                scratch.resize(MAX_STORED, 0);
                lz4::block::compress_to_buffer(bytes, None, false, &mut scratch)
                    .map(|n| Some((CODEC_LZ4, scratch[..n].to_vec())))
            }
            Some(zstd) => {
                let mut packed = Vec::with_capacity(zstd::zstd_safe::compress_bound(bytes.len()));
                zstd.compress_to_buffer(bytes, &mut packed)
                    .map(|_| Some((CODEC_ZSTD, packed)))
            }
            None => Ok(None),
        };
        let packed = match written {
            true => Ok(None),
            false => coding.pack(payload, &job.batches, &mut coder, pack),
        };
        drop(job.payload);
        if answer
            .send(Packed {
                seq: job.seq,
                packed,
            })
            .is_err()
        {
            return;
        }
    }
}

/// Whether a worker codes its blocks' one-type batches (`deltas.rs`)
/// before compressing them. That pays where values step like counters
/// (the tight loop's blocks: lz4 22 ns an event at 6.4 bytes, coded first
/// 8 ns at 0.36), not where the emulated program's own repeats compress
/// well already (the demo's `-e insn_exec`: 1.6 ns at 0.28 bytes, coded
/// 5.9 ns at 0.27; `bench-blocks`). So every [`Coding::PROBE_EVERY`]th
/// block is compressed both ways, the fewer bytes kept, and the blocks
/// until the next such are coded if coding at least halved its bytes.
#[derive(Default)]
struct Coding {
    blocks: u32,
    code: bool,
}

impl Coding {
    const PROBE_EVERY: u32 = 64;

    /// `payload` (its BATCH records at `batches`) compressed by `pack`,
    /// its one-type batches coded first when this block is to be.
    fn pack(
        &mut self,
        payload: &[u8],
        batches: &[u32],
        coder: &mut deltas::BatchDeltas,
        mut pack: impl FnMut(&[u8]) -> io::Result<Option<(u8, Vec<u8>)>>,
    ) -> io::Result<Option<(u8, Vec<u8>)>> {
        let probe = self.blocks.is_multiple_of(Self::PROBE_EVERY);
        self.blocks = self.blocks.wrapping_add(1);
        let coded = match probe || self.code {
            true => coder.code(payload, batches),
            false => None,
        };
        match coded {
            None => pack(payload),
            Some(coded) if !probe => pack(coded),
            Some(coded) => match (pack(coded), pack(payload)) {
                (Ok(Some(coded)), Ok(Some(raw))) => {
                    self.code = coded.1.len() * 2 <= raw.1.len();
                    Ok(Some(if coded.1.len() <= raw.1.len() {
                        coded
                    } else {
                        raw
                    }))
                }
                (coded, _) => coded,
            },
        }
    }
}

/// Makes the calling thread run only on CPU time nothing else wants
/// (`SCHED_IDLE`); where that is refused it runs as it was, and the
/// blocks it cannot compress in time are stored.
fn lower_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` outlives the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        log::debug!(
            "capture worker keeps its priority: {}",
            io::Error::last_os_error()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker's answer unpacked: its codec and the payload, `payload_len`
    /// bytes.
    fn unpack(packed: Packed, payload_len: usize, unpacker: &mut Unpacker) -> (u8, Vec<u8>) {
        let (codec, bytes) = packed.packed.unwrap().expect("compressed");
        let frame = Frame {
            codec,
            stored_len: bytes.len(),
            payload_len,
            events: 0,
        };
        let mut unpacked = Vec::new();
        unpacker.unpack(&frame, &bytes, &mut unpacked).unwrap();
        (codec, unpacked)
    }

    /// `auto`: a block taken while another waits for a worker is compressed
    /// with lz4, one taken with none waiting with zstd; each unpacks to its
    /// payload.
    #[test]
    fn auto_takes_lz4_while_blocks_wait_and_zstd_when_none_does() {
        let payloads: Vec<Arc<ByteBuf>> = (0..3u8)
            .map(|i| {
                let mut payload = ByteBuf::with_capacity(1 << 16);
                for n in 0..(1u32 << 14) {
                    payload.extend_from_slice(&(n * u32::from(i + 1)).to_le_bytes());
                }
                Arc::new(payload)
            })
            .collect();
        let (jobs, queue) = unbounded();
        let (answer, answers) = unbounded();
        for (seq, payload) in payloads.iter().enumerate() {
            // The test keeps a reference: the pool has not written it stored.
            let payload = Arc::clone(payload);
            jobs.send(Job {
                seq: seq as u64,
                payload,
                batches: Vec::new(),
            })
            .unwrap();
        }
        drop(jobs);
        compress(&queue, &answer, Compression::Auto);
        let mut unpacker = Unpacker::new().unwrap();
        let codecs: Vec<u8> = answers
            .try_iter()
            .map(|packed| {
                let payload = payloads[packed.seq as usize].as_slice();
                let (codec, unpacked) = unpack(packed, payload.len(), &mut unpacker);
                assert_eq!(unpacked, payload);
                codec
            })
            .collect();
        assert_eq!(codecs, [CODEC_LZ4, CODEC_LZ4, CODEC_ZSTD]);
    }

    /// A block's payload: BATCH records of one type's events (mem_reads
    /// whose values are `value(i)`), and where they start.
    fn one_type_block(mut value: impl FnMut(u64) -> u64) -> (Arc<ByteBuf>, Vec<u32>) {
        use crate::record::test_items::{mark, mem_read};
        let mut payload = ByteBuf::with_capacity(1 << 16);
        let mut batches = Vec::new();
        for batch in 0..4u64 {
            let mut record = vec![0u8; core::mem::size_of::<styx_common::batch::BatchRecord>()];
            let mut items = mark(batch);
            for i in batch * 200..(batch + 1) * 200 {
                items.extend(mem_read(0x600 + i, value(i), value(i + 1), 8));
            }
            let len_at = core::mem::offset_of!(styx_common::batch::BatchRecord, len);
            record[len_at..len_at + 4].copy_from_slice(&(items.len() as u32).to_le_bytes());
            record.extend(items);
            batches.push(payload.len() as u32);
            payload.extend_from_slice(&deltas::BatchDeltas::entry(&record));
        }
        (Arc::new(payload), batches)
    }

    /// A worker codes a block's one-type batches while that halved the
    /// bytes of the last block it compressed both ways (every 64th): the
    /// counter-like blocks until the 64th, of values at random, after it
    /// none; each unpacks, its coded batches decoded, to its payload.
    #[test]
    fn a_worker_codes_one_type_batches_while_that_halves_their_bytes() {
        let counter = one_type_block(|i| i);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let random = one_type_block(move |_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        });
        let (jobs, queue) = unbounded();
        let (answer, answers) = unbounded();
        let blocks: Vec<_> = (0..66)
            .map(|seq| match seq {
                64 => &random,
                _ => &counter,
            })
            .collect();
        for (seq, (payload, batches)) in blocks.iter().enumerate() {
            let job = Job {
                seq: seq as u64,
                payload: Arc::clone(payload),
                batches: batches.clone(),
            };
            jobs.send(job).unwrap();
        }
        drop(jobs);
        compress(&queue, &answer, Compression::Lz4);
        let (mut unpacker, mut deltas) = (Unpacker::new().unwrap(), deltas::BatchDeltas::default());
        let coded: Vec<bool> = answers
            .try_iter()
            .map(|packed| {
                let (payload, batches) = blocks[packed.seq as usize];
                let seq = packed.seq;
                let (_, mut unpacked) = unpack(packed, payload.len(), &mut unpacker);
                let coded = unpacked[batches[0] as usize] == super::super::TAG_BATCH_DELTAS;
                deltas.decode_payload(&mut unpacked, batches).unwrap();
                assert_eq!(unpacked, payload.as_slice(), "block {seq}");
                coded
            })
            .collect();
        assert!(coded[..64].iter().all(|&coded| coded), "{coded:?}");
        assert!(
            !coded[65],
            "coded after a probe that did not halve the bytes"
        );
    }

    /// An lz4 block whose bytes were damaged, or that decodes to another
    /// length than its frame says, is refused with why.
    #[test]
    fn a_damaged_lz4_block_is_refused() {
        let payload: Vec<u8> = (0..50_000u32)
            .flat_map(|n| (n % 251).to_le_bytes())
            .collect();
        let mut packed = vec![0; lz4::block::compress_bound(payload.len()).unwrap()];
        let n = lz4::block::compress_to_buffer(&payload, None, false, &mut packed).unwrap();
        packed.truncate(n);
        let frame = |payload_len| Frame {
            codec: CODEC_LZ4,
            stored_len: n,
            payload_len,
            events: 0,
        };
        let mut unpacker = Unpacker::new().unwrap();
        let mut out = Vec::new();
        unpacker
            .unpack(&frame(payload.len()), &packed, &mut out)
            .unwrap();
        assert_eq!(out, payload);
        let short = unpacker.unpack(&frame(payload.len() - 1), &packed, &mut out);
        assert!(short.is_err(), "{short:?}");
        let long = unpacker.unpack(&frame(payload.len() + 1), &packed, &mut out);
        assert!(long.is_err(), "{long:?}");
        let cut = unpacker.unpack(&frame(payload.len()), &packed[..n / 2], &mut out);
        assert!(cut.is_err(), "{cut:?}");
    }
}
