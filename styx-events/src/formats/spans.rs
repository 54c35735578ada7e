//! Pairs each `span_end` with its `span_begin` by id, and each traced
//! function's exit with its entry (by function and stack pointer), per
//! thread, for the timeline formats, whose slices on a thread must nest:
//! spans and calls share one stack, so a call made inside a span nests
//! under it.

use crate::record::event::{Body, Event};
use std::collections::HashMap;
use styx_common::EventKind;

/// Open spans kept per thread at most; deeper ones become instants, so a
/// run of begins without ends cannot grow memory without bound.
pub const MAX_DEPTH: usize = 1024;

/// An open slice: a span by its id, or a call by function and stack pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Open {
    Span(u64),
    /// A traced function's call.
    Call(u32, u64),
}

/// A span to begin again at once: (id, category, name).
pub type Reopen = (u64, String, String);

/// An open slice, and for a span what it is called (to begin it again).
struct Slice {
    open: Open,
    label: Option<(String, String)>,
}

#[derive(Default)]
/// The open slices of each thread, innermost last.
pub struct Spans {
    open: HashMap<u32, Vec<Slice>>,
    /// Spans that a call's end had to end too (they began inside the call
    /// and outlive it): the writer ends them with it and begins them again.
    pub reopen: Vec<Reopen>,
}

impl Spans {
    /// A span began (or a call was entered) on thread `tid`: true if it
    /// opens a slice.
    pub fn begin(&mut self, tid: u32, slice: Open) -> bool {
        self.begin_labelled(tid, slice, None)
    }

    /// [`Spans::begin`] for a span, with its category and name.
    fn begin_labelled(&mut self, tid: u32, open: Open, label: Option<(String, String)>) -> bool {
        let stack = self.open.entry(tid).or_default();
        if stack.len() >= MAX_DEPTH {
            return false;
        }
        stack.push(Slice { open, label });
        true
    }

    /// A span ended (or a call returned) on thread `tid`: how many slices
    /// to end, innermost first. Slices begun inside it and still open end
    /// with it (slices cannot overlap); 0 if it is not open (it began
    /// before tracing did, or an enclosing span ended first). A call's end
    /// also ends the spans begun inside it and still open, and leaves them
    /// in [`Spans::reopen`], open again above its caller.
    pub fn end(&mut self, tid: u32, slice: Open) -> usize {
        let Some(stack) = self.open.get_mut(&tid) else {
            return 0;
        };
        let Some(at) = stack.iter().rposition(|s| s.open == slice) else {
            return 0;
        };
        let n = stack.len() - at;
        let ended = stack.split_off(at);
        if let Open::Call(..) = slice {
            for s in ended {
                if let (Open::Span(id), Some((category, name))) = (s.open, s.label) {
                    self.reopen.push((id, category.clone(), name.clone()));
                    stack.push(Slice {
                        open: s.open,
                        label: Some((category, name)),
                    });
                }
            }
        }
        if stack.is_empty() {
            // Threads come and go: only those with open slices are kept.
            self.open.remove(&tid);
        }
        n
    }
}

/// What a timeline does with an event.
pub enum SpanStep {
    /// Open a slice (a span_begin).
    Begin,
    /// Open a slice for a call (a fn_entry).
    CallBegin,
    /// End this many slices, innermost first (a span_end).
    End(usize),
    /// Show it as an instant: not a span, a span_end that began before
    /// tracing did, or a span_begin past [`MAX_DEPTH`].
    Instant,
}

/// What a timeline writes for `event`: a slice begin, slice ends, or an instant.
pub fn span_step(spans: &mut Spans, event: &Event<'_>) -> SpanStep {
    let tid = event.header.tid;
    let ended = |n| match n {
        0 => SpanStep::Instant,
        n => SpanStep::End(n),
    };
    match (&event.body, event.kind) {
        (Body::Span { id, category, name }, EventKind::SpanBegin)
            if spans.begin_labelled(
                tid,
                Open::Span(*id),
                Some((category.lossy().into_owned(), name.lossy().into_owned())),
            ) =>
        {
            SpanStep::Begin
        }
        (Body::Span { id, .. }, EventKind::SpanEnd) => ended(spans.end(tid, Open::Span(*id))),
        (Body::Call(call), _) => {
            let slice = Open::Call(call.function, call.sp);
            match call.exit {
                false if spans.begin(tid, slice) => SpanStep::CallBegin,
                false => SpanStep::Instant,
                true => ended(spans.end(tid, slice)),
            }
        }
        _ => SpanStep::Instant,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_pair_with_begins_by_id() {
        let mut spans = Spans::default();
        let span = Open::Span;
        assert!(spans.begin(1, span(10)));
        assert!(spans.begin(1, span(11)));
        assert!(spans.begin(2, span(10)));
        assert_eq!(spans.end(1, span(11)), 1);
        assert_eq!(spans.end(1, span(99)), 0, "never began");
        assert!(spans.begin(1, span(12)));
        assert_eq!(spans.end(1, span(10)), 2, "12 was still open inside 10");
        assert_eq!(spans.end(1, span(10)), 0);
        assert_eq!(spans.end(2, span(10)), 1, "threads are apart");
        // A call inside a span nests under it; the span's end ends it too.
        assert!(spans.begin(1, span(20)));
        assert!(spans.begin(1, Open::Call(3, 0x7000)));
        assert!(spans.begin(1, Open::Call(4, 0x6ff0)));
        assert_eq!(spans.end(1, Open::Call(4, 0x6ff0)), 1);
        assert_eq!(spans.end(1, span(20)), 2);
        assert_eq!(
            spans.end(1, Open::Call(3, 0x7000)),
            0,
            "ended with the span"
        );
        assert!(spans.reopen.is_empty());
        // A span begun inside a call outlives it: ended with the call,
        // then begun again.
        assert!(spans.begin(1, Open::Call(5, 0x7000)));
        assert!(spans.begin_labelled(1, span(30), Some(("cpu".into(), "frame".into()))));
        assert_eq!(spans.end(1, Open::Call(5, 0x7000)), 2);
        assert_eq!(spans.reopen, vec![(30, "cpu".into(), "frame".into())]);
        assert_eq!(spans.end(1, span(30)), 1, "still open");
    }

    #[test]
    fn depth_is_bounded() {
        let mut spans = Spans::default();
        for id in 0..MAX_DEPTH as u64 {
            assert!(spans.begin(1, Open::Span(id)));
        }
        assert!(!spans.begin(1, Open::Span(5000)));
    }
}
