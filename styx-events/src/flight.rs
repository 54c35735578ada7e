//! The flight recorder (`--flight-recorder N`): the last N events of each
//! thread, kept in the loader's memory (no output, no disk) until a dump:
//! on SIGUSR1, when tracing stops, when the target dies of a signal, or
//! when an event matches `--trigger` (that event and those before it).
//!
//! It takes events as any output does (after `--filter`/`--sample`), copies
//! each into a fixed ring of N slots per thread, and writes a dump through
//! a fresh writer of any format: every thread's events merged in time
//! order, so each dump is complete and ordered on its own.

use crate::event::{Body, Event, Text};
use crate::filter::Filters;
use crate::writer::{EventWriter, Totals};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::rc::Rc;
use styx_common::{EventKind, RecordHeader, EVENT_KIND_SLOTS};

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

/// The last N events per thread, and dumps of them.
pub struct FlightRecorder {
    per_thread: usize,
    threads: HashMap<u32, VecDeque<Held>>,
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
        FlightRecorder {
            per_thread: per_thread.max(1),
            threads: HashMap::new(),
            trigger,
            open,
            dumps: 0,
            made: Vec::new(),
        }
    }

    /// Events held now.
    pub fn held(&self) -> usize {
        self.threads.values().map(VecDeque::len).sum()
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
        let mut all: Vec<&Held> = self
            .threads
            .values()
            .flat_map(|events| events.iter())
            .filter(|h| until.is_none_or(|t| h.header.ts_ns <= t))
            .collect();
        // Stable: a thread's events keep their order at equal times.
        all.sort_by_key(|h| h.header.ts_ns);
        let threads = self
            .threads
            .values()
            .filter(|events| {
                events
                    .iter()
                    .any(|h| until.is_none_or(|t| h.header.ts_ns <= t))
            })
            .count();
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
        Ok((all.len() as u64, threads, place))
    }
}

impl EventWriter for FlightRecorder {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        let ring = self.threads.entry(event.header.tid).or_default();
        if ring.len() == self.per_thread {
            ring.pop_front();
        }
        ring.push_back(Held::of(event));
        let triggered = self
            .trigger
            .as_ref()
            .is_some_and(|t| t.matches(event) == Some(true));
        if triggered {
            // The trigger and what came before it, each thread.
            let name = event.kind.probe_name();
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
}

/// The recorder as the session's output, shared with whoever asks for
/// dumps (SIGUSR1, the target's death, the stop).
pub struct Recording(pub Rc<RefCell<FlightRecorder>>);

impl EventWriter for Recording {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        self.0.borrow_mut().event(event)
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
