//! Version 3's blocks: the writer's pool that compresses them on worker
//! threads (written in order), and the reader's side that takes one frame
//! at a time, bounded.
//!
//! ```text
//! block := codec:u8 0:u8 0:u16 stored_len:u32le payload_len:u32le events:u32le stored
//! ```
//!
//! `stored` is the payload as it is (codec 0) or one zstd frame with its
//! checksum (codec 1); the payload is a run of records as in version 2,
//! their delta state (times, arguments, thread table) starting afresh in
//! every block, so each block decodes on its own: the reader of a growing
//! file, one that stops at a cut block and parallel `read` rely on it.
//! `events` is the block's own count, so a cut block says what it held.
//!
//! The loader's thread only appends records to the block being filled
//! (as version 2 did to its chunk); a full block goes to a worker, which
//! counts its batches' events and compresses it. At most
//! [`MAX_IN_FLIGHT`] blocks wait for a worker or for an earlier block to be
//! written: memory stays bounded, and a slow disk or busy workers hold the
//! loader back (the ring then fills as it would for a slow output).

use super::{MAX_BATCH_ENTRY, MAX_BLOCK_PAYLOAD};
use crate::record::batch::DeclaredTypes;
use crate::record::batch_items;
use crate::write::buf::ByteBuf;
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::ops::Range;
use std::thread::JoinHandle;
use styx_common::item::Codec;

/// Bytes of a block's frame, before what it stores.
pub const FRAME_BYTES: usize = 16;

/// How a block's payload is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Compression {
    /// zstd at its fastest level, on worker threads, as far as they keep
    /// up: a block handed over while [`COMPRESS_BEHIND`] others still wait
    /// is stored as encoded, so compressing never slows the loader (on a
    /// machine whose cores the emulator keeps busy, more blocks are
    /// stored).
    #[default]
    Zstd,
    /// Stored as encoded (~10–30 bytes an event): for a fast disk when
    /// no core is spare for compressing.
    None,
}

const CODEC_STORED: u8 = 0;
const CODEC_ZSTD: u8 = 1;

/// zstd's level: 1 compressed the demo's capture ~15× at ~1.4 GB/s a core;
/// higher levels cost more than their bytes save at these rates.
const ZSTD_LEVEL: i32 = 1;

/// The most bytes a block stores: the zstd bound of the largest payload.
pub const MAX_STORED: usize = MAX_BLOCK_PAYLOAD + (MAX_BLOCK_PAYLOAD >> 7) + (64 << 10);

/// Blocks handed to workers and not yet written, at most.
pub const MAX_IN_FLIGHT: usize = 8;

/// Blocks waiting for workers past which the next is stored, not
/// compressed: the workers are behind the loader.
pub const COMPRESS_BEHIND: usize = 2;

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
        if !matches!(frame.codec, CODEC_STORED | CODEC_ZSTD) || bytes[1..4] != [0; 3] {
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
        match self.zstd.decompress_to_buffer(stored, &mut payload[..]) {
            Ok(n) if n == limit => Ok(()),
            Ok(n) => Err(format!("a block of {n} bytes where its frame says {limit}")),
            Err(e) => Err(format!("a block that does not decompress: {e}")),
        }
    }
}

/// One full block for a worker.
struct Job {
    seq: u64,
    payload: ByteBuf,
    /// Where its batch records are, for their events' count.
    batches: Vec<Range<usize>>,
    /// Its events delivered one each.
    events: u64,
    /// Compressed (else stored): the workers were keeping up.
    compress: bool,
}

/// A block ready to be written.
struct Done {
    seq: u64,
    frame: [u8; FRAME_BYTES],
    /// The compressed bytes; None: the payload stored as it is.
    packed: Option<Vec<u8>>,
    payload: ByteBuf,
    batches: Vec<Range<usize>>,
}

/// Worker threads compressing blocks, and the order they are written in.
pub struct BlockPool {
    jobs: Option<Sender<Job>>,
    done: Receiver<io::Result<Done>>,
    workers: Vec<JoinHandle<()>>,
    next_seq: u64,
    next_to_write: u64,
    /// Blocks done out of order, waiting for those before them.
    ready: BTreeMap<u64, Done>,
    /// Buffers back from written blocks.
    spare: Vec<(ByteBuf, Vec<Range<usize>>)>,
}

impl BlockPool {
    /// `workers` threads (at least one) storing blocks as `compression` says.
    pub fn new(
        compression: Compression,
        declared: DeclaredTypes,
        workers: usize,
    ) -> io::Result<BlockPool> {
        let (jobs, job_queue) = bounded::<Job>(MAX_IN_FLIGHT);
        let (done_tx, done) = unbounded();
        let workers = (0..workers.max(1))
            .map(|i| {
                let queue = job_queue.clone();
                let done = done_tx.clone();
                let declared = declared.clone();
                std::thread::Builder::new()
                    .name(format!("styx-capture-{i}"))
                    .spawn(move || work(compression, &declared, &queue, &done))
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(BlockPool {
            jobs: Some(jobs),
            done,
            workers,
            next_seq: 0,
            next_to_write: 0,
            ready: BTreeMap::new(),
            spare: Vec::new(),
        })
    }

    /// An empty buffer for the next block.
    pub fn buffer(&mut self) -> (ByteBuf, Vec<Range<usize>>) {
        self.spare.pop().unwrap_or_else(|| {
            (
                ByteBuf::with_capacity(super::BLOCK_TARGET + MAX_BATCH_ENTRY),
                Vec::new(),
            )
        })
    }

    /// Hands a full block to the workers, then writes what is ready; waits
    /// while [`MAX_IN_FLIGHT`] blocks are.
    pub fn submit(
        &mut self,
        payload: ByteBuf,
        batches: Vec<Range<usize>>,
        events: u64,
        out: &mut impl Write,
    ) -> io::Result<()> {
        while self.next_seq - self.next_to_write >= MAX_IN_FLIGHT as u64 {
            self.take_one(out)?;
        }
        let behind = self.next_seq - self.next_to_write;
        let job = Job {
            seq: self.next_seq,
            payload,
            batches,
            events,
            compress: behind < COMPRESS_BEHIND as u64,
        };
        self.next_seq += 1;
        let sent = self.jobs.as_ref().map(|jobs| jobs.send(job));
        if !matches!(sent, Some(Ok(()))) {
            return Err(io::Error::other("the capture's worker threads are gone"));
        }
        self.write_ready(out)
    }

    /// Writes every block that is done and whose turn it is, not waiting.
    pub fn write_ready(&mut self, out: &mut impl Write) -> io::Result<()> {
        while let Ok(done) = self.done.try_recv() {
            self.arrived(done?);
        }
        self.write_in_order(out)
    }

    /// Waits for every block handed over and writes it.
    pub fn drain(&mut self, out: &mut impl Write) -> io::Result<()> {
        while self.next_to_write < self.next_seq {
            self.take_one(out)?;
        }
        Ok(())
    }

    /// Waits for one block to be done, then writes what is in order.
    fn take_one(&mut self, out: &mut impl Write) -> io::Result<()> {
        let done = self
            .done
            .recv()
            .map_err(|_| io::Error::other("the capture's worker threads are gone"))?;
        self.arrived(done?);
        self.write_in_order(out)
    }

    fn arrived(&mut self, done: Done) {
        self.ready.insert(done.seq, done);
    }

    fn write_in_order(&mut self, out: &mut impl Write) -> io::Result<()> {
        while let Some(done) = self.ready.remove(&self.next_to_write) {
            self.next_to_write += 1;
            // A failed write is not retried (the file stays a prefix of
            // the stream of blocks), and the buffers are kept either way.
            let written = out
                .write_all(&done.frame)
                .and_then(|()| match &done.packed {
                    Some(packed) => out.write_all(packed),
                    None => out.write_all(done.payload.as_slice()),
                });
            let (mut payload, mut batches) = (done.payload, done.batches);
            payload.clear();
            batches.clear();
            self.spare.push((payload, batches));
            written?;
        }
        Ok(())
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

/// A worker: counts each block's batch events and stores the block.
fn work(
    compression: Compression,
    declared: &DeclaredTypes,
    queue: &Receiver<Job>,
    done: &Sender<io::Result<Done>>,
) {
    let mut zstd = match compression {
        Compression::None => None,
        Compression::Zstd => match zstd::bulk::Compressor::new(ZSTD_LEVEL).and_then(|mut c| {
            c.include_checksum(true)?;
            Ok(c)
        }) {
            Ok(c) => Some(c),
            Err(e) => {
                let _ = done.send(Err(e));
                return;
            }
        },
    };
    let mut scratch = Vec::new();
    while let Ok(job) = queue.recv() {
        let payload = job.payload.as_slice();
        let batch_events: u64 = job
            .batches
            .iter()
            .filter_map(|range| {
                batch_items::counts(&payload[range.clone()], Codec::Current, declared)
            })
            .map(|counts| counts.iter().sum::<u64>())
            .sum();
        let packed = match &mut zstd {
            Some(zstd) if job.compress => {
                scratch.clear();
                scratch.reserve(zstd::zstd_safe::compress_bound(payload.len()));
                match zstd.compress_to_buffer(payload, &mut scratch) {
                    Ok(_) => Some(std::mem::take(&mut scratch)),
                    Err(e) => {
                        let _ = done.send(Err(e));
                        return;
                    }
                }
            }
            _ => None,
        };
        let frame = Frame {
            codec: match packed {
                Some(_) => CODEC_ZSTD,
                None => CODEC_STORED,
            },
            stored_len: packed.as_ref().map_or(payload.len(), Vec::len),
            payload_len: payload.len(),
            events: job.events + batch_events,
        };
        let finished = Done {
            seq: job.seq,
            frame: frame.bytes(),
            packed,
            payload: job.payload,
            batches: job.batches,
        };
        if done.send(Ok(finished)).is_err() {
            return;
        }
    }
}
