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
//!
//! A writer whose pieces are best made of a fixed number of events
//! ([`EventWriter::runs`]: Parquet's row groups) is handed, when every
//! event is read, runs: the blocks cut where the events they hold, by
//! their frames, make a run (a block across two runs goes to both, each
//! decoding its own part), each run formatted whole by one worker (a row
//! group gathered and encoded where it was decoded, as one thread does,
//! not gathered in pieces and encoded by columns elsewhere: on the
//! demo's capture ~6% more CPU time than one thread against ~19%). A
//! frame may lie (a spoilt or hostile capture): a run whose blocks did
//! not hold what their frames said, or met a fault, is read again block
//! by block from its start, and so is everything after it; the output is
//! still the serial one.

use super::reader::{Block, CaptureError, Ending, Reader};
use crate::questions::cut::{Cut, Sieve};
use crate::record::batch::BatchError;
use crate::write::writer::{EventWriter, FormatBlock, Formatted, Helper, Runs};
use crossbeam_channel::{bounded, Receiver, Sender};
use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read};
use std::sync::OnceLock;
use styx_common::EVENT_KIND_SLOTS;
use thiserror::Error;

/// Blocks read ahead or waiting per worker, at most.
const IN_FLIGHT_PER_WORKER: usize = 3;

/// Runs read ahead or waiting, at most, beyond one per worker: each is a
/// row group's rows in memory.
const RUNS_AHEAD: usize = 1;

/// Bytes of blocks kept for runs at most (from the oldest not written on,
/// to read again if a frame lies); past it, block by block. Runs of the
/// demo's compressed capture keep ~5 MB; of a capture stored as encoded
/// (8–33 bytes an event), 30–130 MB.
const MAX_KEPT_BYTES: usize = 256 << 20;

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

/// What a worker is handed: blocks to read in order, and which of their
/// events to format.
struct Job {
    seq: u64,
    blocks: Vec<Block>,
    /// Events of the first block a run before formatted.
    skip: u64,
    /// Events to format at most (a run's; else all).
    take: u64,
    /// The last block's events past `take` are the next run's, which
    /// reports the block (its counts, faults, ending).
    shares_last: bool,
    /// A run ([`EventWriter::runs`]), for the runs' formatter.
    run: bool,
}

/// One job's events, formatted.
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
    /// A run whose blocks held other than their frames said, or that met
    /// a fault: to read again block by block.
    unsure: bool,
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
    // Runs only when every event is formatted: which a cut keeps is
    // known only once the blocks are decoded.
    let runs = match sieve {
        None => out.runs().filter(|runs| runs.events > 0),
        Some(_) => None,
    };
    let in_flight = match runs {
        Some(_) => workers + RUNS_AHEAD,
        None => workers * IN_FLIGHT_PER_WORKER,
    };
    let (jobs, queue) = bounded::<Job>(in_flight);
    let (results, done) = bounded::<Done>(in_flight);
    let (spare, spares) = bounded::<Formatted>(workers);
    let header = reader.header.clone();
    // A worker formatting runs does the writer's work in them; blocks
    // read after runs are helped as from the start.
    let helper = OnceLock::new();
    if runs.is_none() {
        let_workers_help(out, &helper);
    }
    let helper = &helper;
    let cutter = runs.as_ref().map(|runs| RunCutter::new(runs.events));
    let runs = runs.as_ref();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let (queue, results, spares) = (queue.clone(), results.clone(), spares.clone());
            let header = header.clone();
            let makers = Makers {
                block: make,
                run: runs,
            };
            scope.spawn(move || work(header, sieve, makers, &queue, &results, &spares, helper));
        }
        drop((queue, results, spares));
        let outcome = hand_out(reader, ahead, cutter, cut, jobs, &done, &spare, out, helper);
        // Whatever stopped the loop, the workers see the queue closed
        // and finish their job; their results are not waited for.
        drop(done);
        // A worker may still be doing the writer's work: this thread
        // helps rather than wait for it alone.
        if let Some(help) = helper.get() {
            help();
        }
        outcome
    })
}

/// The calling thread's part: reads blocks, hands them out (in runs, while
/// `runs` is given), writes the results in order.
#[allow(clippy::too_many_arguments)]
fn hand_out<R: Read>(
    reader: &mut Reader<R>,
    mut ahead: Ahead,
    mut runs: Option<RunCutter>,
    cut: &mut Cut,
    jobs: Sender<Job>,
    done: &Receiver<Done>,
    spare: &Sender<Formatted>,
    out: &mut dyn EventWriter,
    helper: &OnceLock<Helper>,
) -> Result<KindCounts, ParallelError> {
    let mut totals = [0u64; EVENT_KIND_SLOTS as usize];
    let mut sent = 0u64;
    let mut written = 0u64;
    let mut waiting = BTreeMap::new();
    let capacity = done.capacity().unwrap_or(1) as u64;
    let mut read_error = None;
    let mut reading = true;
    // Events of the next block that a run before formatted (read again
    // block by block).
    let mut skip = 0;
    reader.events = 0;
    loop {
        // Read ahead while there is room; then wait for the next result.
        while reading && sent - written < capacity {
            if let Some(job) = runs.as_mut().and_then(RunCutter::ready) {
                if jobs.send(Job { seq: sent, ..job }).is_err() {
                    break;
                }
                sent += 1;
                continue;
            }
            let job = match ahead.take(reader) {
                Ok(Some(block)) => match &mut runs {
                    Some(cutter) => {
                        cutter.push(block);
                        if cutter.keeps_too_much() {
                            let cutter = runs.take().expect("matched above");
                            skip = fall_back(cutter, &mut ahead, &mut read_error, out, helper);
                            (written, waiting) = (sent, BTreeMap::new());
                        }
                        continue;
                    }
                    None => Job::block(block, std::mem::take(&mut skip)),
                },
                end => {
                    if let Err(e) = end {
                        // After the blocks before it, as a serial read.
                        read_error = Some(e);
                    }
                    match &mut runs {
                        // Its last run first.
                        Some(cutter) if !cutter.ended => {
                            cutter.ended = true;
                            continue;
                        }
                        _ => {
                            reading = false;
                            break;
                        }
                    }
                }
            };
            if jobs.send(Job { seq: sent, ..job }).is_err() {
                break;
            }
            sent += 1;
        }
        if written == sent {
            break;
        }
        let result = done.recv().expect("a worker per job handed out");
        if result.seq < written {
            // A run read again block by block.
            continue;
        }
        waiting.insert(result.seq, result);
        while let Some(mut result) = waiting.remove(&written) {
            if result.unsure {
                let cutter = runs.take().expect("only runs are unsure");
                skip = fall_back(cutter, &mut ahead, &mut read_error, out, helper);
                reading = true;
                (written, waiting) = (sent, BTreeMap::new());
                break;
            }
            written += 1;
            if let Some(cutter) = &mut runs {
                cutter.wrote_run();
            }
            if let Some(mut piece) = result.piece.take() {
                out.formatted(&mut piece).map_err(ParallelError::Output)?;
                // Its room back to a worker (dropped when they have
                // enough).
                let _ = spare.try_send(piece);
            }
            let events: u64 = result.counts.iter().sum();
            reader.events += events;
            for (total, n) in totals.iter_mut().zip(result.kept) {
                *total += n;
            }
            cut.saw_block(result.span, &result.counts, &result.kept);
            reader.malformed_batches += result.malformed;
            reader.delta_coded_batches += result.delta_coded;
            if reader.first_malformed_batch.is_none() {
                reader.first_malformed_batch = result.first_malformed;
            }
            if let Some(error) = result.error {
                // As a serial read stops: its end not reached, whatever
                // was read ahead.
                reader.ending = Ending::Reading;
                return Err(error);
            }
            if let Some(ending) = result.complete {
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

/// Reads the oldest run not yet written and the rest again block by
/// block (what was handed out is not waited for: the caller takes every
/// job as written), the workers helping `out` as block by block from the
/// start; the events of its first block to skip.
fn fall_back(
    cutter: RunCutter,
    ahead: &mut Ahead,
    read_error: &mut Option<CaptureError>,
    out: &mut dyn EventWriter,
    helper: &OnceLock<Helper>,
) -> u64 {
    let_workers_help(out, helper);
    let (blocks, skip) = cutter.fall_back();
    ahead.put_back(blocks, read_error.take());
    skip
}

/// The writer's work the workers do between blocks, if it has some
/// ([`EventWriter::helper`]).
fn let_workers_help(out: &mut dyn EventWriter, helper: &OnceLock<Helper>) {
    if let Some(help) = out.helper() {
        let _ = helper.set(help);
    }
}

/// What a worker formats with: blocks with `block`'s formatters, runs
/// with those `run` makes.
#[derive(Clone, Copy)]
struct Makers<'a> {
    block: &'a MakeFormatter<'a>,
    run: Option<&'a Runs>,
}

/// A worker: formats the events of each job it is given into a piece, the
/// events `sieve` keeps only when given.
fn work(
    header: crate::session::header::Header,
    sieve: Option<&Sieve>,
    makers: Makers<'_>,
    queue: &Receiver<Job>,
    results: &Sender<Done>,
    spares: &Receiver<Formatted>,
    helper: &OnceLock<Helper>,
) {
    let mut reader = match Reader::<io::Empty>::for_blocks(header) {
        Ok(reader) => reader,
        Err(e) => {
            // Each job handed here says so, in its turn.
            while let Ok(job) = queue.recv() {
                let error = io::Error::new(e.kind(), e.to_string());
                let _ = results.send(Done::failed(job.seq, ParallelError::Output(error)));
            }
            return;
        }
    };
    // Blocks' formatter, runs'.
    let mut formatters: [Option<Box<dyn FormatBlock>>; 2] = [None, None];
    let mut after_runs = false;
    while let Ok(job) = queue.recv() {
        // Each run begins as if the capture did; blocks read again after
        // runs (the worker's last may be later in the capture) as if the
        // worker had read no run.
        if job.run || after_runs {
            reader.forget_batches();
        }
        after_runs = job.run;
        let formatter = &mut formatters[job.run as usize];
        if formatter.is_none() {
            let made = match makers.run {
                Some(runs) if job.run => (runs.make)(),
                _ => (makers.block)(),
            };
            match made {
                Ok(made) => *formatter = Some(made),
                Err(e) => {
                    let done = Done::failed(job.seq, ParallelError::Output(e));
                    if results.send(done).is_err() {
                        return;
                    }
                    continue;
                }
            }
        }
        let writer = formatter.as_deref_mut().expect("made above");
        let done = format_job(&mut reader, job, sieve, writer, spares);
        if results.send(done).is_err() {
            return;
        }
        // The writer's work waiting, between blocks (see EventWriter::helper).
        if let Some(help) = helper.get() {
            help();
        }
    }
}

/// Reads `job`'s blocks and formats their events it takes (those `sieve`
/// keeps, if given) with `writer`.
fn format_job(
    reader: &mut Reader<io::Empty>,
    job: Job,
    sieve: Option<&Sieve>,
    writer: &mut dyn FormatBlock,
    spares: &Receiver<Formatted>,
) -> Done {
    let mut done = Done::new(job.seq);
    let (mut skip, mut formatted) = (job.skip, 0u64);
    // Every block reported held what its frame says.
    let mut as_framed = true;
    let last = job.blocks.len().saturating_sub(1);
    for (i, block) in job.blocks.into_iter().enumerate() {
        let reports = !(job.shares_last && i == last);
        let framed = block.events();
        reader.malformed_batches = 0;
        reader.first_malformed_batch = None;
        reader.delta_coded_batches = 0;
        let mut read = 0u64;
        let mut error = reader.load(block).err().map(ParallelError::Capture);
        while error.is_none() {
            match reader.next() {
                Ok(Some(event)) => {
                    read += 1;
                    let keep = sieve.is_none_or(|sieve| sieve.keeps(&event));
                    if reports {
                        done.saw(&event, keep);
                    }
                    if skip > 0 {
                        skip -= 1;
                        continue;
                    }
                    if formatted == job.take {
                        // The next run's, which reads this block again.
                        match reports {
                            true => continue,
                            false => break,
                        }
                    }
                    if keep {
                        formatted += 1;
                        if let Err(e) = writer.event(&event) {
                            error = Some(ParallelError::Output(e));
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => error = Some(ParallelError::Capture(e)),
            }
        }
        if reports {
            as_framed &= read == framed;
            done.malformed += reader.malformed_batches;
            done.delta_coded += reader.delta_coded_batches;
            if done.first_malformed.is_none() {
                done.first_malformed = reader.first_malformed_batch.take();
            }
            if let Ending::Complete { .. } = reader.ending {
                done.complete = Some(reader.ending.clone());
            }
        }
        as_framed &= reader.malformed_batches == 0;
        if error.is_some() {
            done.error = error;
            break;
        }
    }
    let short = job.take != u64::MAX && formatted != job.take;
    done.piece = Some(writer.take(spares.try_recv().ok()));
    let fits = writer.run_fits();
    done.unsure = job.run && (!as_framed || short || done.error.is_some() || !fits);
    done
}

/// The capture cut into runs of `events` events where its blocks' frames
/// say, and every block from the first of the oldest run not yet written
/// (to read again block by block if one did not hold what its frame said).
struct RunCutter {
    events: u64,
    /// The run being filled: where it starts (its first block's place;
    /// the next block's when it has none yet), the events of that block
    /// the run before took, its events (by the frames).
    filling_from: u64,
    skip: u64,
    filled: u64,
    /// Per run handed out and not yet written, in order: its first
    /// block's place in the capture, and the events skipped there.
    starts: VecDeque<(u64, u64)>,
    /// The blocks from `kept_from` on (those of the run being filled
    /// among them), and their bytes.
    kept: VecDeque<Block>,
    kept_from: u64,
    kept_bytes: usize,
    /// The next block's place.
    next: u64,
    /// Every block was taken.
    ended: bool,
}

impl RunCutter {
    fn new(events: u64) -> RunCutter {
        RunCutter {
            events,
            filling_from: 0,
            skip: 0,
            filled: 0,
            starts: VecDeque::new(),
            kept: VecDeque::new(),
            kept_from: 0,
            kept_bytes: 0,
            next: 0,
            ended: false,
        }
    }

    /// Takes the capture's next block.
    fn push(&mut self, block: Block) {
        self.next += 1;
        self.kept_bytes += block.stored_bytes();
        self.filled += block.events();
        self.kept.push_back(block);
    }

    /// The next run the blocks taken fill (one block may fill several:
    /// made one at a time, so a frame claiming billions of events makes
    /// no more than are handed out); once every block was taken, the
    /// capture's last, what is left.
    fn ready(&mut self) -> Option<Job> {
        let last_run = self.filled < self.events;
        if last_run && (!self.ended || self.filling_from == self.next) {
            return None;
        }
        let from = (self.filling_from - self.kept_from) as usize;
        let blocks: Vec<Block> = self.kept.range(from..).cloned().collect();
        let skip = std::mem::take(&mut self.skip);
        self.starts.push_back((self.filling_from, skip));
        if last_run {
            self.filling_from = self.next;
            return Some(Job::run(blocks, skip, u64::MAX, false));
        }
        // Events of the last block past the run: the next run's.
        let past = self.filled - self.events;
        self.filled = past;
        self.filling_from = self.next;
        if past > 0 {
            let last = blocks.last().expect("a run has a block");
            // Its events before the next run: no more than it holds, as
            // the run took at least one of it.
            self.skip = last.events() - past;
            self.filling_from -= 1;
        }
        Some(Job::run(blocks, skip, self.events, past > 0))
    }

    /// Whether the blocks kept are more than runs of honest frames keep:
    /// frames claiming few events (a run would hold the whole capture).
    fn keeps_too_much(&self) -> bool {
        self.kept_bytes > MAX_KEPT_BYTES
    }

    /// The oldest run handed out was written: its blocks are no longer
    /// kept (but one the next run shares).
    fn wrote_run(&mut self) {
        self.starts.pop_front();
        let from = match self.starts.front() {
            Some(&(from, _)) => from,
            None => self.filling_from,
        };
        self.forget_before(from);
    }

    fn forget_before(&mut self, place: u64) {
        while self.kept_from < place {
            let Some(block) = self.kept.pop_front() else {
                break;
            };
            self.kept_bytes -= block.stored_bytes();
            self.kept_from += 1;
        }
    }

    /// The blocks from the oldest run not yet written (or being filled)
    /// on, and the events of the first that the run before took.
    fn fall_back(mut self) -> (VecDeque<Block>, u64) {
        let (from, skip) = match self.starts.pop_front() {
            Some(start) => start,
            None => (self.filling_from, self.skip),
        };
        self.forget_before(from);
        (self.kept, skip)
    }
}

/// Blocks taken before any was handed out, to find the capture's first
/// event's time, and a fault met taking them: handed out first.
#[derive(Default)]
struct Ahead {
    blocks: VecDeque<Block>,
    error: Option<CaptureError>,
    /// The reader gave its last block (or a fault).
    ended: bool,
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
                Ok(None) => {
                    self.ended = true;
                    return Ok(None);
                }
                Err(e) => {
                    self.error = Some(e);
                    self.ended = true;
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
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if self.ended {
            return Ok(None);
        }
        let taken = reader.take_block();
        self.ended = !matches!(taken, Ok(Some(_)));
        taken
    }

    /// Blocks to hand out again, before any other, then `error` if given.
    fn put_back(&mut self, blocks: VecDeque<Block>, error: Option<CaptureError>) {
        for block in blocks.into_iter().rev() {
            self.blocks.push_front(block);
        }
        self.error = self.error.take().or(error);
    }
}

impl Job {
    /// One block, the events of it a run before took skipped.
    fn block(block: Block, skip: u64) -> Job {
        Job {
            seq: 0,
            blocks: vec![block],
            skip,
            take: u64::MAX,
            shares_last: false,
            run: false,
        }
    }

    fn run(blocks: Vec<Block>, skip: u64, take: u64, shares_last: bool) -> Job {
        Job {
            seq: 0,
            blocks,
            skip,
            take,
            shares_last,
            run: true,
        }
    }
}

impl Done {
    fn new(seq: u64) -> Done {
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
            error: None,
            unsure: false,
        }
    }

    fn failed(seq: u64, error: ParallelError) -> Done {
        Done {
            error: Some(error),
            ..Done::new(seq)
        }
    }

    /// An event of a block this job reports, kept or not.
    fn saw(&mut self, event: &crate::record::event::Event<'_>, kept: bool) {
        self.counts[event.kind as usize] += 1;
        self.kept[event.kind as usize] += kept as u64;
        let ts = event.header.ts_ns;
        let span = self
            .span
            .map_or((ts, ts), |(first, last)| (first, last.max(ts)));
        self.span = Some(span);
    }
}
