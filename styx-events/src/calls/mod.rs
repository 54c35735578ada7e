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
//! `longjmp`, or a tail call (`jmp` to another function, whose frame
//! replaces the caller's: the caller ends where the callee starts, and the
//! callee's `ret` returns for both). Depths of later calls stay right,
//! since they come from what is still open. An exit whose entry came
//! before tracing did has no duration.
//!
//! The tracker sits in front of every format, live and on `read` (pairing
//! events it already paired gives the same result), fills in each call's
//! depth, duration and `unwound`, and keeps the per-function table
//! ([`table`]) printed at the end; [`folded`] is the flame-graph format
//! built on its output.

pub mod folded;
pub mod table;

use crate::event::{Body, Call, Event};
use crate::writer::{EventWriter, Totals};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::rc::Rc;
use styx_common::{EventKind, RecordHeader, FUNCTION_EXIT};
pub use table::CallTable;

/// Open calls kept, all threads together, at most: past it a call is
/// passed on with its depth but not tracked (its exit has no duration), so
/// a capture of endless entries cannot grow memory without bound.
pub const MAX_OPEN_CALLS: usize = 1 << 20;

/// An open call.
#[derive(Clone, Copy, Debug)]
struct Frame {
    function: u32,
    sp: u64,
    entered_ns: u64,
    /// Time spent in traced calls it made, for its self time.
    children_ns: u64,
}

/// Pairs calls and hands every event on to `inner` (see the module above).
pub struct CallTracker {
    inner: Box<dyn EventWriter>,
    /// Open calls per (pid, tid), innermost last.
    threads: HashMap<(u32, u32), Vec<Frame>>,
    open: usize,
    /// Exits written for calls found gone: events the caller did not count.
    added: u64,
    table: Rc<RefCell<CallTable>>,
}

impl CallTracker {
    /// Pairs calls of the `functions` functions in front of `inner`; the
    /// table fills as events pass.
    pub fn new(inner: Box<dyn EventWriter>, functions: usize) -> CallTracker {
        CallTracker {
            inner,
            threads: HashMap::new(),
            open: 0,
            added: 0,
            table: Rc::new(RefCell::new(CallTable::new(functions))),
        }
    }

    /// The per-function table, shared: read it after `finish`.
    pub fn table(&self) -> Rc<RefCell<CallTable>> {
        Rc::clone(&self.table)
    }

    fn call(&mut self, header: &RecordHeader, call: &Call) -> io::Result<()> {
        let stack = self.threads.entry((header.pid, header.tid)).or_default();
        let now = header.ts_ns;
        let mut table = self.table.borrow_mut();
        // Calls whose frames are gone, innermost first: at or below an
        // entry's sp; below an exit's, or at it but another function.
        let mut gone = Vec::new();
        while let Some(top) = stack.last() {
            let below = top.sp < call.sp;
            let at = top.sp == call.sp;
            let ended = below || (at && (!call.exit || top.function != call.function));
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
        if call.exit {
            if stack.last().is_some_and(|top| top.sp == call.sp) {
                let frame = stack.pop().expect("just looked");
                filled.duration_ns = Some(close(stack, &frame, now, &mut table, call.unwound));
                self.open -= 1;
            } else {
                table.unpaired += 1;
            }
            filled.depth = stack.len() as u32;
        } else {
            table.enter(call.function);
            filled.depth = stack.len() as u32;
            if self.open - gone.len() < MAX_OPEN_CALLS {
                stack.push(Frame {
                    function: call.function,
                    sp: call.sp,
                    entered_ns: now,
                    children_ns: 0,
                });
                self.open += 1;
            } else {
                table.untracked += 1;
            }
        }
        self.open -= gone.len();
        self.added += gone.len() as u64;
        drop(table);
        for (frame, depth, duration) in gone {
            let unwound = Call {
                function: frame.function,
                sp: frame.sp,
                exit: true,
                depth,
                duration_ns: Some(duration),
                unwound: true,
            };
            let header = RecordHeader {
                aux: FUNCTION_EXIT,
                ..*header
            };
            self.inner.event(&Event {
                header,
                kind: EventKind::Function,
                body: Body::Call(unwound),
            })?;
        }
        self.inner.event(&Event {
            header: *header,
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
            *n += self.added;
        }
        self.inner.finish(&Totals {
            events: &events,
            drops: totals.drops,
        })
    }
    fn takes_batches(&self) -> bool {
        self.inner.takes_batches()
    }
    fn batch(&mut self, record: &[u8]) -> io::Result<()> {
        self.inner.batch(record)
    }
    fn can_finish(&self) -> bool {
        self.inner.can_finish()
    }
}

/// Takes every event and writes nothing (`--summary` alone).
pub struct Discard;

impl EventWriter for Discard {
    fn event(&mut self, _: &Event<'_>) -> io::Result<()> {
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        Ok(())
    }
    fn takes_batches(&self) -> bool {
        true
    }
    fn batch(&mut self, _: &[u8]) -> io::Result<()> {
        Ok(())
    }
}
