//! The flight recorder (`--flight-recorder N`): the last N events of each
//! thread, kept in the loader's memory (no output, no disk) until a dump:
//! on SIGUSR1, when tracing stops, when the target dies of a signal, or
//! when an event matches `--trigger` (that event and those before it).
//!
//! It takes what any output takes (after `--filter`/`--sample`): batch
//! records whole where it may (a memory copy per 16 KiB: it keeps up with a
//! batched emulator), other events copied out one by one; per thread, as
//! many of the newest as hold N events (and up to a batch more). A dump
//! splits the batches, keeps each thread's last N events, and writes them
//! through a fresh writer of any format, every thread's merged in time
//! order: each dump is complete and ordered on its own.

use crate::batch::{events_in, Batches};
use crate::event::{Body, Call, Event, Text};
use crate::filter::Filters;
use crate::writer::{EventWriter, Totals};
use bytemuck::pod_read_unaligned;
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::mem::size_of;
use std::rc::Rc;
use styx_common::batch::BATCH_BYTES;
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
    Usdt(u32, Box<[u64]>),
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
                Body::Usdt { spec_id, args } => HeldBody::Usdt(*spec_id, (*args).into()),
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
                HeldBody::Usdt(spec_id, args) => Body::Usdt {
                    spec_id: *spec_id,
                    args,
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
}

/// A thread's newest records and how many events they hold.
#[derive(Default)]
struct Thread {
    kept: VecDeque<Kept>,
    events: u64,
}

/// Events a thread keeps beyond N, so that a batch that repeats part of
/// one before it (read from the process, then handed over) cannot leave a
/// dump short: more than a batch holds.
const SLACK: u64 = (BATCH_BYTES / 16) as u64;

/// The last N events per thread, and dumps of them.
pub struct FlightRecorder {
    per_thread: usize,
    threads: HashMap<u32, Thread>,
    /// Batches are split as they come (the trigger tests batched types).
    split_batches: bool,
    trigger: Option<Filters>,
    open: OpenDump,
    dumps: u32,
    /// Dumps made, for the caller to report.
    pub made: Vec<Result<Dump, String>>,
}

impl FlightRecorder {
    /// Keeps `per_thread` events per thread; `trigger`: an event its
    /// program keeps (among the types it applies to) causes a dump.
    pub fn new(per_thread: usize, trigger: Option<Filters>, open: OpenDump) -> FlightRecorder {
        let split_batches = trigger.as_ref().is_some_and(|t| {
            EventKind::ALL
                .iter()
                .any(|&k| k.delivery() == Delivery::Batched && t.programs[k as usize].len > 0)
        });
        FlightRecorder {
            per_thread: per_thread.max(1),
            threads: HashMap::new(),
            split_batches,
            trigger,
            open,
            dumps: 0,
            made: Vec::new(),
        }
    }

    fn keep(&mut self, tid: u32, kept: Kept) {
        let thread = self.threads.entry(tid).or_default();
        thread.events += kept.events();
        thread.kept.push_back(kept);
        let wanted = self.per_thread as u64 + SLACK;
        while let Some(oldest) = thread.kept.front() {
            if thread.events - oldest.events() < wanted {
                break;
            }
            thread.events -= oldest.events();
            thread.kept.pop_front();
        }
    }

    /// Each thread's last N events (at or before `until`), oldest first.
    fn last_events(&self, until: Option<u64>) -> Vec<Vec<Held>> {
        let mut batches = Batches::new();
        let mut threads: Vec<(u32, &Thread)> = self.threads.iter().map(|(t, k)| (*t, k)).collect();
        threads.sort_by_key(|(tid, _)| *tid);
        threads
            .into_iter()
            .map(|(_, thread)| {
                let mut events = Vec::new();
                for kept in &thread.kept {
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
                let from = events.len().saturating_sub(self.per_thread);
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
            // The trigger and what came before it, each thread.
            let name = event.name();
            self.dump(&format!("trigger: {name}"), Some(event.header.ts_ns));
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
    fn batch(&mut self, record: &[u8]) -> io::Result<()> {
        // The caller checked the record (it took it whole).
        let events = events_in(record).unwrap_or(0);
        let tid = pod_read_unaligned::<RecordHeader>(&record[..size_of::<RecordHeader>()]).tid;
        self.keep(tid, Kept::Batch(record.into(), events));
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
    fn batch(&mut self, record: &[u8]) -> io::Result<()> {
        self.0.borrow_mut().batch(record)
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

    #[test]
    fn keeps_the_last_n_per_thread_and_dumps_them_in_time_order() {
        let dumps = Rc::new(RefCell::new(Vec::new()));
        let d = dumps.clone();
        let trigger =
            Filters::compile(&["insn_exec: pc == 0x99".into()], 1, &[EventKind::InsnExec]).unwrap();
        let mut fr = FlightRecorder::new(
            3,
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
