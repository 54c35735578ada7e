//! Traced functions' calls (`--functions`): entries paired with exits, per
//! thread, by stack pointer.
//!
//! The eBPF programs report, for each hit of a function's first
//! instruction or of one of its `ret`s, the function and the stack pointer.
//! At both the stack pointer is the address of the return address, so a
//! call's entry and exit carry the same value, and a call made inside it a
//! lower one. [`CallTracker`] keeps each thread's open calls and, from the
//! stack pointer alone, knows which ones can no longer be running:
//!
//! - an entry at stack pointer `sp` closes every open call at `sp` or
//!   below (deeper): their frames are gone, reused by this call;
//! - an exit at `sp` closes every open call below `sp`, then returns the
//!   innermost call if it is this function at this `sp`.
//!
//! Closed so, a call gets an exit marked `unwound`, timed when that was
//! seen. This is how exits that never come are handled: a C++ exception or
//! a Rust panic unwinding through traced frames (caught further out), a
//! `longjmp`. Depths of later calls stay right, since they come from what
//! is still open. An exit whose entry came before tracing did has no
//! duration.
//!
//! Tail calls (a `jmp` to another function, whose frame then replaces the
//! caller's) depend on how returns are probed:
//!
//! - `ret` probes: each direct `jmp` out of a traced function is probed
//!   too ([`FUNCTION_TAIL_CALL`]); at the call's stack pointer it is the
//!   call's exit, marked `tail_call`: the call ends at its jump, its
//!   callee's time not in it, whether or not the callee is traced (whose
//!   `ret` returns for both). At another stack pointer the jump stays in
//!   the function (its split-off part): no exit, nothing passed on.
//! - uretprobes: the kernel returns through every traced call of a chain
//!   of tail calls at once, the callee's exit first. An entry at the stack
//!   pointer of the innermost open call is such a callee: it nests inside,
//!   and the caller's exit, which must be the thread's next event, ends it
//!   with its callee (marked `tail_call`). Any other next event means the
//!   caller's frame was gone (a `longjmp`): it is closed as unwound.
//!
//! The tracker sits in front of every format, live and on `read` (pairing
//! events it already paired gives the same result), fills in each call's
//! depth, duration, `unwound` and `tail_call`, and keeps the per-function
//! table ([`table`]) printed at the end; `-o folded` (in the formats) is the
//! flame-graph format built on its output.

pub mod table;

use crate::record::event::{Body, Call, Event};
use crate::session::header::Header;
use crate::write::writer::{EventWriter, Totals};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::rc::Rc;
use styx_common::{EventKind, RecordHeader, FUNCTION_EXIT, FUNCTION_TAIL_CALL};
pub use table::CallTable;

/// Open calls kept, all threads together, at most: past it a call is
/// passed on with its depth but not tracked (its exit has no duration), so
/// a capture of endless entries cannot grow memory without bound.
pub const MAX_OPEN_CALLS: usize = 1 << 20;

#[derive(Clone, Copy, Debug)]
struct Frame {
    function: u32,
    sp: u64,
    entered_ns: u64,
    /// Time spent in traced calls it made, for its self time.
    children_ns: u64,
    /// (uretprobes) a traced callee replaced its frame: it returns with it.
    tail_called: bool,
}

/// Pairs calls and hands every event on to `inner` (see the module above).
pub struct CallTracker {
    inner: Box<dyn EventWriter>,
    /// Open calls per (pid, tid), innermost last.
    threads: HashMap<(u32, u32), Vec<Frame>>,
    open: usize,
    /// Exits written for calls found gone: events the caller did not count.
    added: u64,
    /// Jumps that stayed in their function: counted by the caller, not
    /// passed on.
    not_exits: u64,
    /// Returns were probed as uretprobes (see the module above).
    uretprobe_exits: bool,
    table: Rc<RefCell<CallTable>>,
}

impl CallTracker {
    /// Pairs calls of the `functions` functions, whose returns were probed
    /// as uretprobes if `uretprobe_exits` (else as `ret`s), in front of
    /// `inner`; the table fills as events pass.
    pub fn new(
        inner: Box<dyn EventWriter>,
        functions: usize,
        uretprobe_exits: bool,
    ) -> CallTracker {
        let mut table = CallTable::new(functions);
        table.uretprobe_exits = uretprobe_exits;
        CallTracker {
            inner,
            threads: HashMap::new(),
            open: 0,
            added: 0,
            not_exits: 0,
            uretprobe_exits,
            table: Rc::new(RefCell::new(table)),
        }
    }

    /// The per-function table, shared: read it after `finish`.
    pub fn table(&self) -> Rc<RefCell<CallTable>> {
        Rc::clone(&self.table)
    }

    // Over 80 lines: the pairing rules of the module's doc, entry then exit,
    // in that order on one thread's stack; split, they would pass the
    // stack, the table and the event between pieces.
    fn call(&mut self, header: &RecordHeader, call: &Call) -> io::Result<()> {
        let thread = (header.pid, header.tid);
        let stack = self.threads.entry(thread).or_default();
        let now = header.ts_ns;
        let mut table = self.table.borrow_mut();
        let chained = self.uretprobe_exits;
        // Calls whose frames are gone, innermost first: at or below an
        // entry's sp; below an exit's, or at it but another function; and
        // (uretprobes) a tail-calling call whose exit is not this event.
        let mut gone = Vec::new();
        while let Some(top) = stack.last() {
            let below = top.sp < call.sp;
            let at = top.sp == call.sp;
            let its_exit = call.exit && at && top.function == call.function;
            let ended = below
                || (top.tail_called && !its_exit)
                || (at && !call.exit && !chained)
                || (at && call.exit && !its_exit);
            if !ended {
                break;
            }
            let frame = stack.pop().expect("just looked");
            let duration = close(stack, &frame, now, &mut table, true);
            gone.push((frame, stack.len() as u32, duration));
        }
        let mut filled = Call {
            duration_ns: None,
            ..*call
        };
        let mut header = *header;
        let mut passed_on = true;
        if call.exit {
            if stack.last().is_some_and(|top| top.sp == call.sp) {
                let frame = stack.pop().expect("just looked");
                filled.tail_call |= frame.tail_called;
                if filled.tail_call {
                    header.aux = FUNCTION_TAIL_CALL;
                    table.tail_call(frame.function);
                }
                filled.duration_ns = Some(close(stack, &frame, now, &mut table, call.unwound));
                self.open -= 1;
            } else if call.tail_call {
                // A jump within its function (to its split-off part), at
                // another sp than the call's: the call goes on.
                passed_on = false;
                self.not_exits += 1;
            } else {
                table.unpaired += 1;
            }
            filled.depth = stack.len() as u32;
        } else {
            table.enter(call.function);
            filled.depth = stack.len() as u32;
            if self.open - gone.len() < MAX_OPEN_CALLS {
                // (uretprobes) A callee at its caller's sp: a tail call.
                if let Some(caller) = stack.last_mut().filter(|top| top.sp == call.sp) {
                    caller.tail_called = true;
                }
                stack.push(Frame {
                    function: call.function,
                    sp: call.sp,
                    entered_ns: now,
                    children_ns: 0,
                    tail_called: false,
                });
                self.open += 1;
            } else {
                table.untracked += 1;
            }
        }
        self.open -= gone.len();
        self.added += gone.len() as u64;
        if stack.is_empty() {
            // Threads come and go: only those with open calls are kept.
            self.threads.remove(&thread);
        }
        drop(table);
        for (frame, depth, duration) in gone {
            let unwound = Call {
                function: frame.function,
                sp: frame.sp,
                exit: true,
                depth,
                duration_ns: Some(duration),
                unwound: true,
                tail_call: false,
            };
            let header = RecordHeader {
                aux: FUNCTION_EXIT,
                ..header
            };
            self.inner.event(&Event {
                header,
                kind: EventKind::Function,
                body: Body::Call(unwound),
            })?;
        }
        if !passed_on {
            return Ok(());
        }
        self.inner.event(&Event {
            header,
            kind: EventKind::Function,
            body: Body::Call(filled),
        })
    }
}

/// Ends `frame` at `now`: its duration, added to its caller's children
/// and to the table.
fn close(
    stack: &mut [Frame],
    frame: &Frame,
    now: u64,
    table: &mut CallTable,
    unwound: bool,
) -> u64 {
    let duration = now.saturating_sub(frame.entered_ns);
    if let Some(caller) = stack.last_mut() {
        caller.children_ns = caller.children_ns.saturating_add(duration);
    }
    let self_ns = duration.saturating_sub(frame.children_ns);
    table.exit(frame.function, duration, self_ns, unwound);
    duration
}

impl EventWriter for CallTracker {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        match &event.body {
            Body::Call(call) => self.call(&event.header, call),
            _ => self.inner.event(event),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn finish(&mut self, totals: &Totals<'_>) -> io::Result<()> {
        self.table.borrow_mut().still_open = self.open as u64;
        // A capture's end record counts what it holds, added exits too.
        let mut events = totals.events.to_vec();
        if let Some(n) = events.get_mut(EventKind::Function as usize) {
            *n = (*n + self.added).saturating_sub(self.not_exits);
        }
        self.inner.finish(&Totals {
            events: &events,
            drops: totals.drops,
        })
    }
    fn takes_batches(&self) -> bool {
        self.inner.takes_batches()
    }
    fn batch(&mut self, record: &[u8], events: u64) -> io::Result<()> {
        self.inner.batch(record, events)
    }
    fn behind(&mut self) {
        self.inner.behind()
    }
    fn can_finish(&self) -> bool {
        self.inner.can_finish()
    }
    fn header_grew(&mut self, header: &Header) -> bool {
        self.table.borrow_mut().grow(header.functions.len());
        self.inner.header_grew(header)
    }
    fn process_mapped(&mut self, mapped: &[crate::session::header::MappedFile]) -> bool {
        self.inner.process_mapped(mapped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps each call event's (exit, function, depth, duration, unwound).
    struct Collect(Rc<RefCell<Vec<Call>>>);

    impl EventWriter for Collect {
        fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
            if let Body::Call(call) = &event.body {
                self.0.borrow_mut().push(*call);
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

    /// A tracker, for returns probed as uretprobes or not, whose output is
    /// collected.
    fn tracker(uretprobes: bool) -> (CallTracker, Rc<RefCell<Vec<Call>>>) {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let tracker = CallTracker::new(Box::new(Collect(Rc::clone(&seen))), 4, uretprobes);
        (tracker, seen)
    }

    /// Hands `call` to `tracker` as thread `tid`'s event at `ts_ns`.
    fn feed(tracker: &mut CallTracker, ts_ns: u64, tid: u32, call: Call) {
        let aux = match (call.exit, call.tail_call) {
            (false, _) => styx_common::FUNCTION_ENTRY,
            (true, false) => FUNCTION_EXIT,
            (true, true) => FUNCTION_TAIL_CALL,
        };
        let header = RecordHeader {
            ts_ns,
            tid,
            kind: EventKind::Function as u8,
            aux,
            ..RecordHeader::default()
        };
        let event = Event {
            header,
            kind: EventKind::Function,
            body: Body::Call(call),
        };
        tracker.event(&event).unwrap();
    }

    /// Which probe a hit is of.
    #[derive(Clone, Copy)]
    enum At {
        Entry,
        Return,
        /// A `jmp` to another function.
        Jump,
    }

    /// Runs `(ts, tid, exit, function, sp)` hits of `ret` probes through a
    /// tracker.
    fn track(hits: &[(u64, u32, bool, u32, u64)]) -> (Vec<Call>, CallTable) {
        let hits: Vec<_> = hits
            .iter()
            .map(|&(ts, tid, exit, function, sp)| {
                let at = if exit { At::Return } else { At::Entry };
                (ts, tid, at, function, sp)
            })
            .collect();
        track_probed(false, &hits)
    }

    /// Runs `(ts, tid, at, function, sp)` hits through a tracker for
    /// returns probed as uretprobes or not.
    fn track_probed(uretprobes: bool, hits: &[(u64, u32, At, u32, u64)]) -> (Vec<Call>, CallTable) {
        let (mut tracker, seen) = tracker(uretprobes);
        for &(ts_ns, tid, at, function, sp) in hits {
            let call = Call {
                function,
                sp,
                exit: !matches!(at, At::Entry),
                tail_call: matches!(at, At::Jump),
                ..Call::default()
            };
            feed(&mut tracker, ts_ns, tid, call);
        }
        let totals = Totals {
            events: &[0; 16],
            drops: &[0; 16],
        };
        tracker.finish(&totals).unwrap();
        let table = tracker.table().borrow().clone();
        let calls = seen.borrow().clone();
        (calls, table)
    }

    /// (exit, function, depth, duration, unwound) of each call event.
    fn brief(calls: &[Call]) -> Vec<(bool, u32, u32, Option<u64>, bool)> {
        calls
            .iter()
            .map(|c| (c.exit, c.function, c.depth, c.duration_ns, c.unwound))
            .collect()
    }

    /// The calls marked `tail_call`, by index.
    fn tail_calls(calls: &[Call]) -> Vec<usize> {
        (0..calls.len()).filter(|&i| calls[i].tail_call).collect()
    }

    #[test]
    fn with_uretprobes_a_chain_of_tail_calls_returns_once_for_each_call() {
        use At::*;
        // 0 at sp 100 jumps to 1, which jumps to 2; the kernel returns
        // through 2, 1 and 0 at once. Twice, then a plain call.
        let round = |t: u64| {
            [
                (t, 1, Entry, 0, 100),
                (t + 10, 1, Entry, 1, 100),
                (t + 20, 1, Entry, 2, 100),
                (t + 50, 1, Return, 2, 100),
                (t + 50, 1, Return, 1, 100),
                (t + 51, 1, Return, 0, 100),
            ]
        };
        let mut hits: Vec<_> = round(0).into_iter().chain(round(100)).collect();
        hits.extend([(200, 1, Entry, 3, 100), (205, 1, Return, 3, 100)]);
        let (calls, table) = track_probed(true, &hits);
        let once = [
            (false, 0, 0, None, false),
            (false, 1, 1, None, false),
            (false, 2, 2, None, false),
            (true, 2, 2, Some(30), false),
            (true, 1, 1, Some(40), false),
            (true, 0, 0, Some(51), false),
        ];
        let mut want: Vec<_> = once.into_iter().chain(once).collect();
        want.extend([(false, 3, 0, None, false), (true, 3, 0, Some(5), false)]);
        assert_eq!(brief(&calls), want);
        assert_eq!(tail_calls(&calls), [4, 5, 10, 11]);
        assert_eq!((table.unpaired, table.still_open), (0, 0));
        assert_eq!((table.rows[0].tail_calls, table.rows[0].unwound), (2, 0));
        // 0's own time: before its jump.
        assert_eq!(table.rows[0].self_ns, 2 * 11);
        // Paired again (`read` of a capture), the same.
        let (mut again, seen) = tracker(true);
        for (i, call) in calls.iter().enumerate() {
            feed(&mut again, i as u64, 1, *call);
        }
        let again = seen.borrow();
        let flags = |c: &[Call]| -> Vec<_> { c.iter().map(|c| (c.depth, c.tail_call)).collect() };
        assert_eq!(flags(&again), flags(&calls));
    }

    #[test]
    fn with_uretprobes_a_frame_left_by_longjmp_is_closed_when_its_return_does_not_follow() {
        use At::*;
        // 0 at sp 100 is left by a longjmp; 1 is then called at the same
        // sp and taken for its tail callee; 0's return does not follow 1's.
        let (calls, table) = track_probed(
            true,
            &[
                (0, 1, Entry, 0, 100),
                (5, 1, Entry, 1, 100),
                (8, 1, Return, 1, 100),
                (9, 1, Entry, 2, 100),
                (12, 1, Return, 2, 100),
            ],
        );
        assert_eq!(
            brief(&calls),
            [
                (false, 0, 0, None, false),
                (false, 1, 1, None, false),
                (true, 1, 1, Some(3), false),
                (true, 0, 0, Some(9), true),
                (false, 2, 0, None, false),
                (true, 2, 0, Some(3), false),
            ]
        );
        assert_eq!((table.unpaired, table.still_open), (0, 0));
    }

    #[test]
    fn with_ret_probes_a_tail_call_ends_at_its_jump() {
        use At::*;
        // 0 at sp 100 jumps to an untraced function, which returns for it;
        // the caller calls 1 at the same sp. 2 at sp 200 jumps within
        // itself (sp 190: its frame is still there), then returns.
        let (calls, table) = track_probed(
            false,
            &[
                (10, 1, Entry, 0, 100),
                (15, 1, Jump, 0, 100),
                (40, 1, Entry, 1, 100),
                (41, 1, Return, 1, 100),
                (50, 1, Entry, 2, 200),
                (51, 1, Jump, 2, 190),
                (60, 1, Return, 2, 200),
            ],
        );
        assert_eq!(
            brief(&calls),
            [
                (false, 0, 0, None, false),
                (true, 0, 0, Some(5), false),
                (false, 1, 0, None, false),
                (true, 1, 0, Some(1), false),
                (false, 2, 0, None, false),
                (true, 2, 0, Some(10), false),
            ]
        );
        assert_eq!(tail_calls(&calls), [1]);
        assert_eq!((table.unpaired, table.still_open), (0, 0));
        assert_eq!((table.rows[0].tail_calls, table.rows[0].unwound), (1, 0));
        let mut text = Vec::new();
        let names: Vec<String> = (0..4).map(|i| format!("f{i}")).collect();
        table.write(&names, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("(1 calls were left by a tail call: each ends at its jump"),
            "{text}"
        );
    }

    #[test]
    fn a_tail_call_ends_its_caller_where_the_callee_begins() {
        // 0 at sp 100 jumps to 1 (same sp), whose ret returns for both.
        let (calls, table) = track(&[
            (10, 1, false, 0, 100),
            (20, 1, false, 1, 100),
            (50, 1, true, 1, 100),
        ]);
        assert_eq!(
            brief(&calls),
            [
                (false, 0, 0, None, false),
                (true, 0, 0, Some(10), true),
                (false, 1, 0, None, false),
                (true, 1, 0, Some(30), false),
            ]
        );
        assert_eq!((table.rows[0].unwound, table.rows[1].ended), (1, 1));
        assert_eq!(table.still_open, 0);
    }

    #[test]
    fn a_longjmp_out_of_nested_calls_closes_them_at_the_next_return_further_out() {
        // 0 (sp 100) calls 1 (sp 90), which calls 2 (sp 80); a longjmp
        // lands back in 0, which returns.
        let (calls, table) = track(&[
            (0, 7, false, 0, 100),
            (1, 7, false, 1, 90),
            (2, 7, false, 2, 80),
            (9, 7, true, 0, 100),
        ]);
        assert_eq!(
            brief(&calls),
            [
                (false, 0, 0, None, false),
                (false, 1, 1, None, false),
                (false, 2, 2, None, false),
                (true, 2, 2, Some(7), true),
                (true, 1, 1, Some(8), true),
                (true, 0, 0, Some(9), false),
            ]
        );
        // Self time: 0 spent 1 ns outside 1.
        assert_eq!(table.rows[0].self_ns, 1);
        assert_eq!(table.rows[1].self_ns, 1);
    }

    #[test]
    fn a_return_of_a_call_begun_before_tracing_has_no_duration() {
        let (calls, table) = track(&[(5, 3, true, 2, 300), (6, 3, false, 1, 400)]);
        assert_eq!(
            brief(&calls),
            [(true, 2, 0, None, false), (false, 1, 0, None, false)]
        );
        assert_eq!((table.unpaired, table.still_open), (1, 1));
    }

    #[test]
    fn pairing_paired_events_again_gives_the_same_events() {
        let hits = [
            (0, 1, false, 0, 100),
            (1, 1, false, 1, 90),
            (3, 1, false, 2, 100), // 0 and 1 gone
            (4, 1, true, 2, 100),
            (5, 2, false, 3, 100),
        ];
        let (first, table) = track(&hits);
        let (mut again, seen) = tracker(false);
        for call in &first {
            feed(&mut again, 0, 1, *call);
        }
        let again: Vec<_> = seen
            .borrow()
            .iter()
            .map(|c| (c.exit, c.function, c.depth, c.unwound))
            .collect();
        let first: Vec<_> = first
            .iter()
            .map(|c| (c.exit, c.function, c.depth, c.unwound))
            .collect();
        assert_eq!(again, first);
        assert_eq!(table.rows[0].unwound + table.rows[1].unwound, 2);
    }
}
