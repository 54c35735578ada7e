//! Parallel `read`: a version 3 capture's blocks decoded and formatted on
//! worker threads, their bytes written in the blocks' order.
//!
//! Every block decodes on its own (its deltas start afresh), and a format
//! that [`EventWriter::formats_apart`] writes for a run of events the
//! bytes any writer of it would: so each worker keeps its own reader and
//! writer, formats whole blocks into memory, and the calling thread reads
//! the file, hands blocks out and writes the results in order. The output
//! is the serial one byte for byte, also when a block is corrupt (the
//! events before the fault, then the error) or the capture is cut short.
//! At most [`IN_FLIGHT_PER_WORKER`] blocks per worker are read ahead or
//! waiting to be written: memory stays bounded.

use super::reader::{Block, CaptureError, Ending, Reader};
use crate::record::batch::BatchError;
use crate::write::writer::EventWriter;
use crossbeam_channel::{bounded, Receiver, Sender};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::rc::Rc;
use styx_common::EVENT_KIND_SLOTS;
use thiserror::Error;

/// Blocks read ahead or waiting per worker, at most.
const IN_FLIGHT_PER_WORKER: usize = 3;

/// Events per kind id.
pub type KindCounts = [u64; EVENT_KIND_SLOTS as usize];

/// Makes a worker's writer of the format on the output it is given.
pub type MakeWriter<'a> = dyn Fn(Box<dyn Write>) -> io::Result<Box<dyn EventWriter>> + Sync + 'a;

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
    bytes: Vec<u8>,
    counts: KindCounts,
    malformed: u64,
    first_malformed: Option<(u64, BatchError)>,
    /// Its END record's ending, if it holds the END record.
    complete: Option<Ending>,
    /// Why it stopped early, after `bytes`.
    error: Option<ParallelError>,
}

/// A worker's output: bytes gathered for the block being formatted.
#[derive(Clone, Default)]
struct Gathered(Rc<RefCell<Vec<u8>>>);

impl Write for Gathered {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads every block of `reader` (a version 3 capture, no event read yet)
/// on `workers` threads, each formatting with a writer `make` gives, and
/// hands the bytes to `out` ([`EventWriter::formatted`]) in order. Returns
/// the events per kind; `reader`'s counts, malformed batches and ending
/// are then as a serial read leaves them.
pub fn read_blocks<R: Read>(
    reader: &mut Reader<R>,
    workers: usize,
    make: &MakeWriter<'_>,
    out: &mut dyn EventWriter,
) -> Result<KindCounts, ParallelError> {
    let workers = workers.max(1);
    let (jobs, queue) = bounded::<(u64, Block)>(workers * IN_FLIGHT_PER_WORKER);
    let (results, done) = bounded::<Done>(workers * IN_FLIGHT_PER_WORKER);
    let header = reader.header.clone();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let (queue, results, header) = (queue.clone(), results.clone(), header.clone());
            scope.spawn(move || work(header, make, &queue, &results));
        }
        drop((queue, results));
        let outcome = hand_out(reader, jobs, &done, out);
        // Whatever stopped the loop, the workers see the queue closed
        // and finish their block; their results are not waited for.
        drop(done);
        outcome
    })
}

/// The calling thread's part: reads blocks, hands them out, writes the
/// results in order.
fn hand_out<R: Read>(
    reader: &mut Reader<R>,
    jobs: Sender<(u64, Block)>,
    done: &Receiver<Done>,
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
            match reader.take_block() {
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
        while let Some(block) = waiting.remove(&written) {
            written += 1;
            out.formatted(&block.bytes).map_err(ParallelError::Output)?;
            let events: u64 = block.counts.iter().sum();
            reader.events += events;
            for (total, n) in totals.iter_mut().zip(block.counts) {
                *total += n;
            }
            reader.malformed_batches += block.malformed;
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

/// A worker: formats each block it is given into bytes.
fn work(
    header: crate::session::header::Header,
    make: &MakeWriter<'_>,
    queue: &Receiver<(u64, Block)>,
    results: &Sender<Done>,
) {
    let gathered = Gathered::default();
    let setup = Reader::<io::Empty>::for_blocks(header)
        .and_then(|reader| Ok((reader, make(Box::new(gathered.clone()))?)));
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
        let mut counts = [0u64; EVENT_KIND_SLOTS as usize];
        let mut error = reader.load(block).err().map(ParallelError::Capture);
        while error.is_none() {
            match reader.next() {
                Ok(Some(event)) => {
                    counts[event.kind as usize] += 1;
                    if let Err(e) = writer.event(&event) {
                        error = Some(ParallelError::Output(e));
                    }
                }
                Ok(None) => break,
                Err(e) => error = Some(ParallelError::Capture(e)),
            }
        }
        if let Err(e) = writer.flush() {
            error.get_or_insert(ParallelError::Output(e));
        }
        let complete = match reader.ending {
            Ending::Complete { .. } => Some(reader.ending.clone()),
            _ => None,
        };
        let done = Done {
            seq,
            bytes: std::mem::take(&mut *gathered.0.borrow_mut()),
            counts,
            malformed: reader.malformed_batches,
            first_malformed: reader.first_malformed_batch.take(),
            complete,
            error,
        };
        if results.send(done).is_err() {
            return;
        }
    }
}

impl Done {
    fn failed(seq: u64, error: ParallelError) -> Done {
        Done {
            seq,
            bytes: Vec::new(),
            counts: [0; EVENT_KIND_SLOTS as usize],
            malformed: 0,
            first_malformed: None,
            complete: None,
            error: Some(error),
        }
    }
}
