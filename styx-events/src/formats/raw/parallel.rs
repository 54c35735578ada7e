//! Parallel `read`: a version 3 capture's blocks decoded and formatted on
//! worker threads, handed to the output's writer in the blocks' order.
//!
//! Every block decodes on its own (its deltas start afresh), and a format
//! that [`EventWriter::formats_apart`] makes of a run of events what its
//! writer would, put together in order: so each worker keeps its own
//! reader and [`FormatBlock`], formats whole blocks into memory (the line
//! formats' bytes, Parquet's gathered rows), and the calling thread reads
//! the file, hands blocks out and gives the pieces to the output's writer
//! in order (which, for Parquet, cuts them into the serial row groups).
//! The output is the serial one byte for byte, also when a block is
//! corrupt (the events before the fault, then the error) or the capture is
//! cut short. A cut (`read -e`, `--from`, `--to`) is made on the workers,
//! each event kept or not on its own: a window's bounds that count from
//! the capture's first event are put in `ts_ns` first, the first blocks
//! decoded here until it is met. At most [`IN_FLIGHT_PER_WORKER`] blocks
//! per worker are read ahead or waiting to be written, and written pieces
//! go back to the workers (one waiting per worker) to be filled again
//! (fresh buffers per block cost page faults and copies): memory stays
//! bounded.

use super::reader::{Block, CaptureError, Ending, Reader};
use crate::questions::cut::{Cut, Sieve};
use crate::record::batch::BatchError;
use crate::write::writer::{EventWriter, FormatBlock, Formatted, Helper};
use crossbeam_channel::{bounded, Receiver, Sender};
use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read};
use styx_common::EVENT_KIND_SLOTS;
use thiserror::Error;

/// Blocks read ahead or waiting per worker, at most.
const IN_FLIGHT_PER_WORKER: usize = 3;

/// Events per kind id.
pub type KindCounts = [u64; EVENT_KIND_SLOTS as usize];

/// Makes a worker's formatter of the output's format.
pub type MakeFormatter<'a> = dyn Fn() -> io::Result<Box<dyn FormatBlock>> + Sync + 'a;

/// Why parallel reading stopped.
#[derive(Debug, Error)]
pub enum ParallelError {
    /// The capture is corrupt (what came before is written).
    #[error(transparent)]
    Capture(CaptureError),
    /// Writing the output failed (a worker's writer or `out`).
    #[error(transparent)]
    Output(io::Error),
}

/// One block's events, formatted.
struct Done {
    seq: u64,
    /// None when the worker could not start.
    piece: Option<Formatted>,
    /// Events read, and of them those the cut kept, per kind.
    counts: KindCounts,
    kept: KindCounts,
    /// The first event's time and the latest.
    span: Option<(u64, u64)>,
    malformed: u64,
    first_malformed: Option<(u64, BatchError)>,
    delta_coded: u64,
    /// Its END record's ending, if it holds the END record.
    complete: Option<Ending>,
    /// Why it stopped early, after `bytes`.
    error: Option<ParallelError>,
}

/// Reads every block of `reader` (a version 3 capture, no event read yet)
/// on `workers` threads, each formatting with a formatter `make` gives the
/// events `cut` keeps, and hands the pieces to `out`
/// ([`EventWriter::formatted`]) in order. Returns the events kept per
/// kind; `reader`'s counts, malformed and delta coded batches and ending,
/// and what `cut` saw, are then as a serial read leaves them.
pub fn read_blocks<R: Read>(
    reader: &mut Reader<R>,
    workers: usize,
    cut: &mut Cut,
    make: &MakeFormatter<'_>,
    out: &mut dyn EventWriter,
) -> Result<KindCounts, ParallelError> {
    let mut ahead = Ahead::default();
    let first = match cut.counts_from_first() {
        true => ahead.first_event_time(reader)?,
        false => None,
    };
    let sieve = (!cut.keeps_all()).then(|| cut.sieve(first));
    let sieve = sieve.as_ref();
    let workers = workers.max(1);
    let (jobs, queue) = bounded::<(u64, Block)>(workers * IN_FLIGHT_PER_WORKER);
    let (results, done) = bounded::<Done>(workers * IN_FLIGHT_PER_WORKER);
    let (spare, spares) = bounded::<Formatted>(workers);
    let header = reader.header.clone();
    let helper = out.helper();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let (queue, results, spares) = (queue.clone(), results.clone(), spares.clone());
            let (header, helper) = (header.clone(), helper.clone());
            scope.spawn(move || work(header, sieve, make, &queue, &results, &spares, helper));
        }
        drop((queue, results, spares));
        let outcome = hand_out(reader, ahead, cut, jobs, &done, &spare, out);
        // Whatever stopped the loop, the workers see the queue closed
        // and finish their block; their results are not waited for.
        drop(done);
        // A worker may still be doing the writer's work: this thread
        // helps rather than wait for it alone.
        if let Some(help) = &helper {
            help();
        }
        outcome
    })
}

/// The calling thread's part: reads blocks, hands them out, writes the
/// results in order.
fn hand_out<R: Read>(
    reader: &mut Reader<R>,
    mut ahead: Ahead,
    cut: &mut Cut,
    jobs: Sender<(u64, Block)>,
    done: &Receiver<Done>,
    spare: &Sender<Formatted>,
    out: &mut dyn EventWriter,
) -> Result<KindCounts, ParallelError> {
    let mut jobs = Some(jobs);
    let mut totals = [0u64; EVENT_KIND_SLOTS as usize];
    let mut sent = 0u64;
    let mut written = 0u64;
    let mut waiting = BTreeMap::new();
    let capacity = done.capacity().unwrap_or(1) as u64;
    let mut read_error = None;
    reader.events = 0;
    loop {
        // Read ahead while there is room; then wait for the next result.
        while let Some(to) = jobs.as_ref().filter(|_| sent - written < capacity) {
            match ahead.take(reader) {
                Ok(Some(block)) => {
                    if to.send((sent, block)).is_err() {
                        break;
                    }
                    sent += 1;
                }
                Ok(None) => jobs = None,
                Err(e) => {
                    // After the blocks before it, as a serial read.
                    read_error = Some(e);
                    jobs = None;
                }
            }
        }
        if written == sent {
            break;
        }
        let result = done.recv().expect("a worker per block handed out");
        waiting.insert(result.seq, result);
        while let Some(mut block) = waiting.remove(&written) {
            written += 1;
            if let Some(mut piece) = block.piece.take() {
                out.formatted(&mut piece).map_err(ParallelError::Output)?;
                // Its room back to a worker (dropped when they have
                // enough).
                let _ = spare.try_send(piece);
            }
            let events: u64 = block.counts.iter().sum();
            reader.events += events;
            for (total, n) in totals.iter_mut().zip(block.kept) {
                *total += n;
            }
            cut.saw_block(block.span, &block.counts, &block.kept);
            reader.malformed_batches += block.malformed;
            reader.delta_coded_batches += block.delta_coded;
            if reader.first_malformed_batch.is_none() {
                reader.first_malformed_batch = block.first_malformed;
            }
            if let Some(error) = block.error {
                // As a serial read stops: its end not reached, whatever
                // was read ahead.
                reader.ending = Ending::Reading;
                return Err(error);
            }
            if let Some(ending) = block.complete {
                // Nothing after the END record is read.
                reader.ending = ending;
                return Ok(totals);
            }
        }
    }
    match read_error {
        Some(e) => Err(ParallelError::Capture(e)),
        None => Ok(totals),
    }
}

/// A worker: formats each block it is given into a piece, the events
/// `sieve` keeps only when given.
fn work(
    header: crate::session::header::Header,
    sieve: Option<&Sieve>,
    make: &MakeFormatter<'_>,
    queue: &Receiver<(u64, Block)>,
    results: &Sender<Done>,
    spares: &Receiver<Formatted>,
    helper: Option<Helper>,
) {
    let setup = Reader::<io::Empty>::for_blocks(header).and_then(|reader| Ok((reader, make()?)));
    let (mut reader, mut writer) = match setup {
        Ok(both) => both,
        Err(e) => {
            // Each block handed here says so, in its turn.
            while let Ok((seq, _)) = queue.recv() {
                let error = io::Error::new(e.kind(), e.to_string());
                let _ = results.send(Done::failed(seq, ParallelError::Output(error)));
            }
            return;
        }
    };
    while let Ok((seq, block)) = queue.recv() {
        reader.malformed_batches = 0;
        reader.first_malformed_batch = None;
        reader.delta_coded_batches = 0;
        let mut counts = [0u64; EVENT_KIND_SLOTS as usize];
        let mut kept = [0u64; EVENT_KIND_SLOTS as usize];
        let mut span: Option<(u64, u64)> = None;
        let mut error = reader.load(block).err().map(ParallelError::Capture);
        while error.is_none() {
            match reader.next() {
                Ok(Some(event)) => {
                    counts[event.kind as usize] += 1;
                    let ts = event.header.ts_ns;
                    span = Some(span.map_or((ts, ts), |(first, last)| (first, last.max(ts))));
                    if sieve.is_some_and(|sieve| !sieve.keeps(&event)) {
                        continue;
                    }
                    kept[event.kind as usize] += 1;
                    if let Err(e) = writer.event(&event) {
                        error = Some(ParallelError::Output(e));
                    }
                }
                Ok(None) => break,
                Err(e) => error = Some(ParallelError::Capture(e)),
            }
        }
        let complete = match reader.ending {
            Ending::Complete { .. } => Some(reader.ending.clone()),
            _ => None,
        };
        let done = Done {
            seq,
            piece: Some(writer.take(spares.try_recv().ok())),
            counts,
            kept,
            span,
            malformed: reader.malformed_batches,
            first_malformed: reader.first_malformed_batch.take(),
            delta_coded: reader.delta_coded_batches,
            complete,
            error,
        };
        if results.send(done).is_err() {
            return;
        }
        // The writer's work waiting, between blocks (see EventWriter::helper).
        if let Some(help) = &helper {
            help();
        }
    }
}

/// Blocks taken before any was handed out, to find the capture's first
/// event's time, and a fault met taking them: handed out first.
#[derive(Default)]
struct Ahead {
    blocks: VecDeque<Block>,
    error: Option<CaptureError>,
}

impl Ahead {
    /// The time of the first event a serial read gives, from the first
    /// blocks decoded here (and kept to hand out); None when none comes
    /// before the capture's end or a fault (which the workers then meet).
    fn first_event_time<R: Read>(
        &mut self,
        reader: &mut Reader<R>,
    ) -> Result<Option<u64>, ParallelError> {
        let header = reader.header.clone();
        let mut probe = Reader::<io::Empty>::for_blocks(header).map_err(ParallelError::Output)?;
        loop {
            let block = match reader.take_block() {
                Ok(Some(block)) => block,
                Ok(None) => return Ok(None),
                Err(e) => {
                    self.error = Some(e);
                    return Ok(None);
                }
            };
            self.blocks.push_back(block.clone());
            if probe.load(block).is_err() {
                return Ok(None);
            }
            let time = match probe.next() {
                Ok(Some(event)) => Some(event.header.ts_ns),
                Ok(None) => None,
                Err(_) => return Ok(None),
            };
            // A block of no event: the next one's first, unless it ended
            // the capture.
            if time.is_some() || !matches!(probe.ending, Ending::Reading) {
                return Ok(time);
            }
        }
    }

    /// The next block to hand out.
    fn take<R: Read>(&mut self, reader: &mut Reader<R>) -> Result<Option<Block>, CaptureError> {
        if let Some(block) = self.blocks.pop_front() {
            return Ok(Some(block));
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => reader.take_block(),
        }
    }
}

impl Done {
    fn failed(seq: u64, error: ParallelError) -> Done {
        Done {
            seq,
            piece: None,
            counts: [0; EVENT_KIND_SLOTS as usize],
            kept: [0; EVENT_KIND_SLOTS as usize],
            span: None,
            malformed: 0,
            first_malformed: None,
            delta_coded: 0,
            complete: None,
            error: Some(error),
        }
    }
}
