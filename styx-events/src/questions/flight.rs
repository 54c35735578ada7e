//! The flight recorder (`--flight-recorder N`): the last N events of each
//! thread, kept in the loader's memory (no output, no disk) until a dump:
//! on SIGUSR1, when tracing stops, when the target dies of a signal, or
//! when an event matches `--trigger` (that event and those before it).
//!
//! It takes what any output takes (after `--filter`/`--sample`): batch
//! records whole where it may (a memory copy per batch: it keeps up with a
//! batched emulator), other events copied out one by one; per thread, as
//! many of the newest as hold N events (and up to a batch more). A dump
//! splits the batches, keeps each thread's last N events, and writes them
//! through a fresh writer of any format, every thread's merged in time
//! order: each dump is complete and ordered on its own.
//!
//! Whatever the target does, it stays bounded ([`Limits`]): all threads'
//! records within a memory budget (the oldest of any thread forgotten
//! first, a thread with none left whole), threads that exited forgotten a
//! while after, trigger dumps at most so many and not within a hold-off of
//! each other; what was left out is counted ([`Forgotten`]).

use crate::questions::filter::Filters;
use crate::record::batch::{Batches, DeclaredTypes};
use crate::record::event::{Body, Call, Event, Text};
use crate::session::header::Header;
use crate::session::usdt::UsdtProbes;
use crate::write::writer::{EventWriter, Totals};
use bytemuck::pod_read_unaligned;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::mem::size_of;
use std::rc::Rc;
use styx_common::batch::BATCH_BYTES;
use styx_common::item::Codec;
use styx_common::{Delivery, EventKind, RecordHeader, EVENT_KIND_SLOTS};

/// An event copied out of its record.
#[derive(Clone, Debug)]
struct Held {
    header: RecordHeader,
    kind: EventKind,
    body: HeldBody,
}

#[derive(Clone, Debug)]
enum HeldBody {
    Args([u64; 4]),
    Span {
        id: u64,
        category: (Box<[u8]>, bool),
        name: (Box<[u8]>, bool),
    },
    Marker(Box<[u8]>, bool),
    Usdt(u32, Box<[u64]>, Box<[u8]>),
    Call(Call),
}

impl Held {
    fn of(event: &Event<'_>) -> Held {
        let text = |t: &Text<'_>| (Box::<[u8]>::from(t.bytes), t.truncated);
        Held {
            header: event.header,
            kind: event.kind,
            body: match &event.body {
                Body::Args(a) => HeldBody::Args(*a),
                Body::Span { id, category, name } => HeldBody::Span {
                    id: *id,
                    category: text(category),
                    name: text(name),
                },
                Body::Marker(t) => HeldBody::Marker(t.bytes.into(), t.truncated),
                Body::Usdt {
                    spec_id,
                    args,
                    strings,
                } => HeldBody::Usdt(*spec_id, (*args).into(), (*strings).into()),
                Body::Call(call) => HeldBody::Call(*call),
            },
        }
    }

    fn event(&self) -> Event<'_> {
        fn text((bytes, truncated): &(Box<[u8]>, bool)) -> Text<'_> {
            Text {
                bytes,
                truncated: *truncated,
            }
        }
        Event {
            header: self.header,
            kind: self.kind,
            body: match &self.body {
                HeldBody::Args(a) => Body::Args(*a),
                HeldBody::Span { id, category, name } => Body::Span {
                    id: *id,
                    category: text(category),
                    name: text(name),
                },
                HeldBody::Marker(bytes, truncated) => Body::Marker(Text {
                    bytes,
                    truncated: *truncated,
                }),
                HeldBody::Usdt(spec_id, args, strings) => Body::Usdt {
                    spec_id: *spec_id,
                    args,
                    strings,
                },
                HeldBody::Call(call) => Body::Call(*call),
            },
        }
    }
}

/// Opens the writer for dump number `n` (from 1).
pub type OpenDump = Box<dyn FnMut(u32) -> io::Result<(Box<dyn EventWriter>, String)>>;

/// What a dump wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dump {
    /// Its number, from 1.
    pub number: u32,
    /// Events written.
    pub events: u64,
    /// Threads they came from.
    pub threads: usize,
    /// Where (a file name, or stdout).
    pub place: String,
    /// Why.
    pub reason: String,
}

/// What a thread's ring holds: a batch record whole, or one event.
enum Kept {
    Batch(Box<[u8]>, u64),
    Event(Held),
}

impl Kept {
    fn events(&self) -> u64 {
        match self {
            Kept::Batch(_, n) => *n,
            Kept::Event(_) => 1,
        }
    }

    /// About the memory it takes: itself, its bytes on the heap, its place
    /// in a thread's ring and in the arrival order.
    fn bytes(&self) -> usize {
        let heap = match self {
            Kept::Batch(record, _) => record.len(),
            Kept::Event(held) => match &held.body {
                HeldBody::Args(_) | HeldBody::Call(_) => 0,
                HeldBody::Span { category, name, .. } => category.0.len() + name.0.len(),
                HeldBody::Marker(text, _) => text.len(),
                HeldBody::Usdt(_, args, strings) => args.len() * 8 + strings.len(),
            },
        };
        size_of::<(u64, Kept)>() + size_of::<(u64, u32)>() + heap
    }
}

/// A thread's newest records (with their arrival numbers), how many events
/// they hold, and the last look at threads before its newest record came.
#[derive(Default)]
struct Thread {
    kept: VecDeque<(u64, Kept)>,
    events: u64,
    seen_at_look: u64,
}

/// About the memory a thread takes beside its records (its map entry).
const THREAD_BYTES: usize = size_of::<(u32, Thread)>() + 16;

/// Events a thread keeps beyond N, so that a batch that repeats part of
/// one before it (read from the process, then handed over) cannot leave a
/// dump short: more than a batch holds.
const SLACK: u64 = (BATCH_BYTES / 16) as u64;

/// What bounds a recorder.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Events kept per thread (N).
    pub per_thread: usize,
    /// Bytes all threads' records may take, about; past it, the oldest
    /// records of any thread are forgotten first.
    pub memory: usize,
    /// Dumps `--trigger` may cause; later triggers are counted.
    pub trigger_dumps: u32,
    /// A trigger less than this after the last trigger's dump (by the
    /// events' times) is counted, not dumped.
    pub trigger_holdoff_ns: u64,
}

/// What a recorder left out to stay within its [`Limits`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// Events forgotten, oldest first, to stay within the memory budget.
    pub events: u64,
    /// Threads whose every record went so.
    pub threads: u64,
    /// Threads forgotten after exiting (see [`FlightRecorder::forget_exited`]).
    pub exited: u64,
    /// Triggers within the hold-off of the dump before.
    pub held_off: u64,
    /// Triggers after `trigger_dumps` trigger dumps.
    pub past_max: u64,
}

/// How many looks at threads ([`FlightRecorder::forget_exited`], the
/// loader's once a second) a thread that exited is kept after its newest
/// record came: a dump soon after still shows what it did last. Counted in
/// looks, not by the records' times: a loader behind takes old records.
pub const EXITED_KEPT_LOOKS: u64 = 10;

/// The last N events per thread, and dumps of them.
pub struct FlightRecorder {
    limits: Limits,
    threads: HashMap<u32, Thread>,
    /// (arrival number, thread) of every record, oldest first; entries of
    /// records already gone are dropped now and then.
    arrivals: VecDeque<(u64, u32)>,
    next_arrival: u64,
    /// Looks at threads so far (see [`FlightRecorder::forget_exited`]).
    looks: u64,
    /// Records held, and about the bytes they and their threads take.
    records: usize,
    bytes: usize,
    /// Batches are split as they come (the trigger tests batched types).
    split_batches: bool,
    trigger: Option<Filters>,
    open: OpenDump,
    dumps: u32,
    trigger_dumps: u32,
    /// The time of the last trigger that dumped.
    last_trigger_ns: Option<u64>,
    /// What was left out, for the caller to report.
    pub forgotten: Forgotten,
    /// Dumps made, for the caller to report.
    pub made: Vec<Result<Dump, String>>,
    /// The declared types batches kept may hold (the session header's).
    declared: DeclaredTypes,
    /// Other providers' probes and declared types, to name a trigger.
    probes: UsdtProbes,
}

impl FlightRecorder {
    /// Splits the batches it keeps knowing the session's declared types,
    /// and names a trigger of another provider's probe, as `header` says.
    pub fn reading(mut self, header: &Header) -> FlightRecorder {
        self.declared = header.declared_types();
        self.probes = UsdtProbes::from_header(header);
        self
    }

    /// Keeps `limits.per_thread` events per thread; `trigger`: an event its
    /// program keeps (among the types it applies to) causes a dump.
    pub fn new(limits: Limits, trigger: Option<Filters>, open: OpenDump) -> FlightRecorder {
        // Declared types' events come batched unless traced one per hit.
        let split_batches = trigger.as_ref().is_some_and(|t| {
            t.any_declared()
                || EventKind::ALL
                    .iter()
                    .any(|&k| k.delivery() == Delivery::Batched && t.programs[k as usize].len > 0)
        });
        FlightRecorder {
            limits: Limits {
                per_thread: limits.per_thread.max(1),
                ..limits
            },
            threads: HashMap::new(),
            arrivals: VecDeque::new(),
            next_arrival: 0,
            looks: 0,
            records: 0,
            bytes: 0,
            split_batches,
            trigger,
            open,
            declared: DeclaredTypes::default(),
            probes: UsdtProbes::default(),
            dumps: 0,
            trigger_dumps: 0,
            last_trigger_ns: None,
            forgotten: Forgotten::default(),
            made: Vec::new(),
        }
    }

    /// What bounds it.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// About the bytes the threads' records take now.
    pub fn memory(&self) -> usize {
        self.bytes
    }

    /// Threads held now.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    fn keep(&mut self, tid: u32, kept: Kept) {
        let arrival = self.next_arrival;
        self.next_arrival += 1;
        let thread = self.threads.entry(tid).or_insert_with(|| {
            self.bytes += THREAD_BYTES;
            Thread::default()
        });
        thread.events += kept.events();
        thread.seen_at_look = self.looks;
        self.bytes += kept.bytes();
        self.records += 1;
        thread.kept.push_back((arrival, kept));
        self.arrivals.push_back((arrival, tid));
        let wanted = self.limits.per_thread as u64 + SLACK;
        while let Some((_, oldest)) = thread.kept.front() {
            if thread.events - oldest.events() < wanted {
                break;
            }
            thread.events -= oldest.events();
            self.bytes -= oldest.bytes();
            self.records -= 1;
            thread.kept.pop_front();
        }
        while self.bytes > self.limits.memory {
            if !self.forget_oldest() {
                break;
            }
        }
        if self.arrivals.len() > 2 * self.records + 1024 {
            self.drop_stale_arrivals();
        }
    }

    /// Forgets the oldest record of any thread (and the thread, if it was
    /// its last); false when there is none.
    fn forget_oldest(&mut self) -> bool {
        while let Some((arrival, tid)) = self.arrivals.pop_front() {
            let Some(thread) = self.threads.get_mut(&tid) else {
                continue;
            };
            if thread.kept.front().map(|(a, _)| *a) != Some(arrival) {
                continue;
            }
            let (_, oldest) = thread.kept.pop_front().expect("just looked");
            thread.events -= oldest.events();
            self.bytes -= oldest.bytes();
            self.records -= 1;
            self.forgotten.events += oldest.events();
            if thread.kept.is_empty() {
                self.threads.remove(&tid);
                self.bytes -= THREAD_BYTES;
                self.forgotten.threads += 1;
            }
            return true;
        }
        false
    }

    /// Drops the arrival entries of records no longer held: a thread's
    /// records go oldest first, so an entry is live while its number is
    /// not older than its thread's oldest record.
    fn drop_stale_arrivals(&mut self) {
        let threads = &self.threads;
        self.arrivals.retain(|(arrival, tid)| {
            threads
                .get(tid)
                .and_then(|t| t.kept.front())
                .is_some_and(|(oldest, _)| oldest <= arrival)
        });
    }

    /// A look at the threads: forgets those that made no record for
    /// [`EXITED_KEPT_LOOKS`] looks and that `alive` says have exited.
    pub fn forget_exited(&mut self, alive: impl Fn(u32) -> bool) {
        self.looks += 1;
        let looks = self.looks;
        let gone: Vec<u32> = self
            .threads
            .iter()
            .filter(|(tid, t)| looks - t.seen_at_look > EXITED_KEPT_LOOKS && !alive(**tid))
            .map(|(tid, _)| *tid)
            .collect();
        for tid in gone {
            let thread = self.threads.remove(&tid).expect("just found");
            for (_, kept) in &thread.kept {
                self.bytes -= kept.bytes();
            }
            self.records -= thread.kept.len();
            self.bytes -= THREAD_BYTES;
            self.forgotten.exited += 1;
        }
        if self.arrivals.len() > 2 * self.records + 1024 {
            self.drop_stale_arrivals();
        }
    }

    /// Each thread's last N events (at or before `until`), oldest first.
    fn last_events(&self, until: Option<u64>) -> Vec<Vec<Held>> {
        let mut batches = Batches::with(Codec::Current, self.declared.clone());
        let mut threads: Vec<(u32, &Thread)> = self.threads.iter().map(|(t, k)| (*t, k)).collect();
        threads.sort_by_key(|(tid, _)| *tid);
        threads
            .into_iter()
            .map(|(_, thread)| {
                let mut events = Vec::new();
                for (_, kept) in &thread.kept {
                    match kept {
                        Kept::Event(held) => events.push(held.clone()),
                        Kept::Batch(record, _) => {
                            // Each byte once (a batch read, then handed over).
                            let _ = batches.split(record, |event| {
                                events.push(Held::of(event));
                                Ok::<(), ()>(())
                            });
                        }
                    }
                }
                // A thread's events in time order, equal times as they came.
                events.sort_by_key(|h| h.header.ts_ns);
                events.retain(|h| until.is_none_or(|t| h.header.ts_ns <= t));
                let from = events.len().saturating_sub(self.limits.per_thread);
                events.drain(..from);
                events
            })
            .filter(|events| !events.is_empty())
            .collect()
    }

    /// Writes every thread's events (those at or before `until`, if given)
    /// in time order to a new output; records the outcome in `made`.
    pub fn dump(&mut self, reason: &str, until: Option<u64>) {
        self.dumps += 1;
        let number = self.dumps;
        let outcome = self
            .write_dump(number, until)
            .map(|(events, threads, place)| Dump {
                number,
                events,
                threads,
                place,
                reason: reason.to_string(),
            });
        match &outcome {
            Ok(d) => log::info!(
                "flight recorder: dump {number} ({reason}): {} events of {} threads in {}",
                d.events,
                d.threads,
                d.place
            ),
            Err(e) => log::warn!("flight recorder: dump {number} ({reason}) failed: {e}"),
        }
        self.made
            .push(outcome.map_err(|e| format!("dump {number} ({reason}): {e}")));
    }

    /// A trigger matched `event`: a dump, unless within the hold-off of
    /// the last trigger's dump or past the most trigger dumps.
    fn triggered(&mut self, event: &Event<'_>) {
        let ts = event.header.ts_ns;
        let limits = self.limits;
        if self
            .last_trigger_ns
            .is_some_and(|last| ts.saturating_sub(last) < limits.trigger_holdoff_ns)
        {
            self.forgotten.held_off += 1;
            return;
        }
        if self.trigger_dumps >= limits.trigger_dumps {
            if self.forgotten.past_max == 0 {
                log::warn!(
                    "flight recorder: {} dumps by --trigger made (--max-dumps): later triggers \
                     are counted, not dumped",
                    limits.trigger_dumps
                );
            }
            self.forgotten.past_max += 1;
            return;
        }
        self.trigger_dumps += 1;
        self.last_trigger_ns = Some(ts);
        // The trigger and what came before it, each thread.
        let probe = match event.body {
            Body::Usdt { spec_id, .. } => self.probes.get(spec_id),
            _ => None,
        };
        let name = probe.map_or(event.name(), |p| p.probe.as_str());
        self.dump(&format!("trigger: {name}"), Some(ts));
    }

    fn write_dump(&mut self, number: u32, until: Option<u64>) -> io::Result<(u64, usize, String)> {
        let threads = self.last_events(until);
        let mut all: Vec<&Held> = threads.iter().flatten().collect();
        // Stable: a thread's events keep their order at equal times.
        all.sort_by_key(|h| h.header.ts_ns);
        let (mut out, place) = (self.open)(number)?;
        let mut counts = [0u64; EVENT_KIND_SLOTS as usize];
        for held in &all {
            counts[held.kind as usize] += 1;
            out.event(&held.event())?;
        }
        out.finish(&Totals {
            events: &counts,
            drops: &[0; EVENT_KIND_SLOTS as usize],
        })?;
        Ok((all.len() as u64, threads.len(), place))
    }
}

impl EventWriter for FlightRecorder {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        self.keep(event.header.tid, Kept::Event(Held::of(event)));
        let triggered = self
            .trigger
            .as_ref()
            .is_some_and(|t| t.matches(event) == Some(true));
        if triggered {
            self.triggered(event);
        }
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        Ok(())
    }
    fn takes_batches(&self) -> bool {
        !self.split_batches
    }
    fn batch(&mut self, record: &[u8], events: u64) -> io::Result<()> {
        let header: RecordHeader = pod_read_unaligned(&record[..size_of::<RecordHeader>()]);
        self.keep(header.tid, Kept::Batch(record.into(), events));
        Ok(())
    }
}

/// The recorder as the session's output, shared with whoever asks for
/// dumps (SIGUSR1, the target's death, the stop).
pub struct Recording(pub Rc<RefCell<FlightRecorder>>);

impl EventWriter for Recording {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        self.0.borrow_mut().event(event)
    }
    fn takes_batches(&self) -> bool {
        self.0.borrow().takes_batches()
    }
    fn batch(&mut self, record: &[u8], events: u64) -> io::Result<()> {
        self.0.borrow_mut().batch(record, events)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (tid, pc) of each event, per dump.
    type Dumps = Rc<RefCell<Vec<Vec<(u32, u64)>>>>;

    /// A writer keeping (tid, pc) of what it is given.
    struct Keeps(Dumps);

    impl EventWriter for Keeps {
        fn event(&mut self, e: &Event<'_>) -> io::Result<()> {
            let Body::Args(a) = e.body else { panic!() };
            self.0
                .borrow_mut()
                .last_mut()
                .unwrap()
                .push((e.header.tid, a[0]));
            Ok(())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
            Ok(())
        }
    }

    fn exec(tid: u32, ts: u64, pc: u64) -> Event<'static> {
        Event {
            header: RecordHeader {
                ts_ns: ts,
                tid,
                kind: EventKind::InsnExec as u8,
                ..RecordHeader::default()
            },
            kind: EventKind::InsnExec,
            body: Body::Args([pc, 0, 0, 0]),
        }
    }

    fn limits(per_thread: usize) -> Limits {
        Limits {
            per_thread,
            memory: 1 << 30,
            trigger_dumps: 100,
            trigger_holdoff_ns: 1_000_000_000,
        }
    }

    /// A recorder whose dumps go to `Keeps`, and what they got.
    fn recorder(limits: Limits, trigger: Option<&str>) -> (FlightRecorder, Dumps) {
        let dumps: Dumps = Rc::new(RefCell::new(Vec::new()));
        let d = dumps.clone();
        let trigger = trigger.map(|t| {
            Filters::compile(
                &[t.to_string()],
                1,
                &[EventKind::InsnExec, EventKind::Control],
            )
            .unwrap()
        });
        let open: OpenDump = Box::new(move |n| {
            d.borrow_mut().push(Vec::new());
            Ok((
                Box::new(Keeps(d.clone())) as Box<dyn EventWriter>,
                format!("dump {n}"),
            ))
        });
        (FlightRecorder::new(limits, trigger, open), dumps)
    }

    /// A batch record of thread `tid` with `n` insn_exec events at `ts`.
    fn batch(tid: u32, ts: u64, n: u64) -> Vec<u8> {
        use crate::record::test_items::{insn, mark};
        use styx_common::batch::{BatchHead, BatchRecord, BATCH_RECORD_KIND};
        let mut items = mark(ts);
        for i in 0..n {
            items.extend(insn(i));
        }
        let fixed = BatchRecord {
            header: RecordHeader {
                ts_ns: ts,
                tid,
                kind: BATCH_RECORD_KIND,
                ..RecordHeader::default()
            },
            head: BatchHead::default(),
            start: 0,
            len: items.len() as u32,
        };
        let mut bytes = bytemuck::bytes_of(&fixed).to_vec();
        bytes.extend_from_slice(&items);
        bytes
    }

    /// Threads that come and go (or tids a hostile process makes up) once
    /// each kept a ring forever: 5.6 GB in 1.2 s. Now the oldest records
    /// go first, counted, whole threads with them, and memory stays under
    /// the budget; the newest threads are all in a dump.
    #[test]
    fn memory_stays_within_the_budget_the_oldest_records_going_first() {
        let memory = 1 << 20;
        let (mut fr, dumps) = recorder(
            Limits {
                memory,
                ..limits(100)
            },
            None,
        );
        let record = batch(1, 0, 40);
        let threads = 20_000u32;
        for tid in 0..threads {
            fr.batch(&batch(tid, u64::from(tid), 40), 40).unwrap();
            assert!(fr.memory() <= memory, "{} bytes", fr.memory());
        }
        let per_thread = record.len() + size_of::<(u64, Kept)>() + THREAD_BYTES;
        let held = fr.threads();
        assert!(
            held > memory / per_thread / 2 && held < memory / per_thread + 1,
            "{held}"
        );
        assert!(fr.arrivals.len() <= 2 * fr.records + 1024);
        assert_eq!(fr.forgotten.threads, u64::from(threads) - held as u64);
        assert_eq!(fr.forgotten.events, 40 * fr.forgotten.threads);
        fr.dump("test", None);
        let dumped = &dumps.borrow()[0];
        assert_eq!(dumped.len(), 40 * held);
        // The newest threads, whole.
        assert_eq!(dumped[0].0, threads - held as u32);
        assert_eq!(dumped.last().unwrap().0, threads - 1);
    }

    /// One thread's stream of events keeps its last N however long it
    /// runs; its stale arrival entries do not pile up.
    #[test]
    fn a_long_stream_of_one_thread_stays_bounded() {
        let (mut fr, _) = recorder(limits(10), None);
        for i in 0..100_000 {
            fr.event(&exec(1, i, i)).unwrap();
        }
        assert!(fr.records <= 10 + SLACK as usize + 1);
        assert!(fr.arrivals.len() <= 2 * fr.records + 1024);
        assert_eq!(fr.forgotten, Forgotten::default());
    }

    #[test]
    fn threads_that_exited_are_forgotten_once_gone_a_while() {
        let (mut fr, _) = recorder(limits(10), None);
        fr.event(&exec(1, 1_000, 1)).unwrap();
        fr.event(&exec(2, 1_000, 2)).unwrap();
        for _ in 0..EXITED_KEPT_LOOKS {
            fr.forget_exited(|_| false);
        }
        assert_eq!(fr.threads(), 2, "kept for a while after they exit");
        fr.event(&exec(3, 2_000, 3)).unwrap();
        // Thread 1 lives on; 2 exited long ago; 3 exited just now.
        fr.forget_exited(|tid| tid == 1);
        assert_eq!(fr.threads(), 2);
        assert!(fr.threads.contains_key(&1) && fr.threads.contains_key(&3));
        assert_eq!(fr.forgotten.exited, 1);
        let (mut alone, _) = recorder(limits(10), None);
        alone.event(&exec(1, 1_000, 1)).unwrap();
        alone.event(&exec(3, 20_000_000_000, 3)).unwrap();
        assert_eq!(fr.memory(), alone.memory());
    }

    /// A trigger the target fires at will once made a dump each time
    /// (8,001 files in 1.5 s): now one per hold-off, at most so many.
    #[test]
    fn triggers_dump_at_most_so_many_times_and_not_within_the_holdoff() {
        let (mut fr, dumps) = recorder(
            Limits {
                trigger_dumps: 3,
                trigger_holdoff_ns: 100,
                ..limits(10)
            },
            Some("control: code == 7"),
        );
        let control = |ts: u64| Event {
            header: RecordHeader {
                ts_ns: ts,
                tid: 1,
                kind: EventKind::Control as u8,
                ..RecordHeader::default()
            },
            kind: EventKind::Control,
            body: Body::Args([7, 0, 0, 0]),
        };
        for ts in (0..1_000).step_by(10) {
            fr.event(&exec(1, ts, ts)).unwrap();
            fr.event(&control(ts)).unwrap();
        }
        // At 0, 100 and 200; the 7 between each are held off; 70 later.
        assert_eq!(fr.made.len(), 3);
        assert_eq!(dumps.borrow().len(), 3);
        assert_eq!(fr.forgotten.held_off, 27);
        assert_eq!(fr.forgotten.past_max, 70);
        // Other dumps are not triggers: not bounded by them.
        fr.dump("SIGUSR1", None);
        assert_eq!(fr.made.len(), 4);
    }

    #[test]
    fn keeps_the_last_n_per_thread_and_dumps_them_in_time_order() {
        let dumps = Rc::new(RefCell::new(Vec::new()));
        let d = dumps.clone();
        let trigger =
            Filters::compile(&["insn_exec: pc == 0x99".into()], 1, &[EventKind::InsnExec]).unwrap();
        let mut fr = FlightRecorder::new(
            Limits {
                trigger_holdoff_ns: 0,
                ..limits(3)
            },
            Some(trigger),
            Box::new(move |n| {
                d.borrow_mut().push(Vec::new());
                Ok((
                    Box::new(Keeps(d.clone())) as Box<dyn EventWriter>,
                    format!("dump {n}"),
                ))
            }),
        );
        for i in 0..10 {
            fr.event(&exec(1, 10 * i, i)).unwrap();
            fr.event(&exec(2, 10 * i + 5, 100 + i)).unwrap();
        }
        fr.dump("test", None);
        assert_eq!(
            dumps.borrow()[0],
            vec![(1, 7), (2, 107), (1, 8), (2, 108), (1, 9), (2, 109)]
        );
        // The trigger: itself and what came before it, nothing after.
        fr.event(&exec(2, 200, 0x99)).unwrap();
        fr.event(&exec(1, 210, 11)).unwrap();
        assert_eq!(dumps.borrow().len(), 2);
        assert_eq!(
            dumps.borrow()[1],
            vec![(1, 7), (1, 8), (2, 108), (1, 9), (2, 109), (2, 0x99)]
        );
        assert_eq!(fr.made.len(), 2);
        assert_eq!(fr.made[1].as_ref().unwrap().events, 6);
    }
}
