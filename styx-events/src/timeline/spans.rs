//! Pairs each `span_end` with its `span_begin` by id, per thread, for the
//! timeline formats, whose slices on a thread must nest.

use crate::event::{Body, Event};
use std::collections::HashMap;
use styx_common::EventKind;

/// Open spans kept per thread at most; deeper ones become instants, so a
/// run of begins without ends cannot grow memory without bound.
pub const MAX_DEPTH: usize = 1024;

#[derive(Default)]
/// The open spans of each thread, innermost last.
pub struct Spans {
    open: HashMap<u32, Vec<u64>>,
}

impl Spans {
    /// A span began on thread `tid`: true if it opens a slice.
    pub fn begin(&mut self, tid: u32, id: u64) -> bool {
        let stack = self.open.entry(tid).or_default();
        if stack.len() >= MAX_DEPTH {
            return false;
        }
        stack.push(id);
        true
    }

    /// A span ended on thread `tid`: how many slices to end, innermost
    /// first. Spans begun inside it and still open end with it (slices
    /// cannot overlap); 0 if no open span has this id (it began before
    /// tracing did).
    pub fn end(&mut self, tid: u32, id: u64) -> usize {
        let Some(stack) = self.open.get_mut(&tid) else {
            return 0;
        };
        match stack.iter().rposition(|&open| open == id) {
            Some(at) => {
                let n = stack.len() - at;
                stack.truncate(at);
                n
            }
            None => 0,
        }
    }
}

/// What a timeline does with an event.
pub enum SpanStep {
    /// Open a slice (a span_begin).
    Begin,
    /// End this many slices, innermost first (a span_end).
    End(usize),
    /// Show it as an instant: not a span, a span_end that began before
    /// tracing did, or a span_begin past [`MAX_DEPTH`].
    Instant,
}

/// What a timeline writes for `event`: a slice begin, slice ends, or an instant.
pub fn span_step(spans: &mut Spans, event: &Event<'_>) -> SpanStep {
    let tid = event.header.tid;
    match (&event.body, event.kind) {
        (Body::Span { id, .. }, EventKind::SpanBegin) if spans.begin(tid, *id) => SpanStep::Begin,
        (Body::Span { id, .. }, EventKind::SpanEnd) => match spans.end(tid, *id) {
            0 => SpanStep::Instant,
            n => SpanStep::End(n),
        },
        _ => SpanStep::Instant,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_pair_with_begins_by_id() {
        let mut spans = Spans::default();
        assert!(spans.begin(1, 10));
        assert!(spans.begin(1, 11));
        assert!(spans.begin(2, 10));
        assert_eq!(spans.end(1, 11), 1);
        assert_eq!(spans.end(1, 99), 0, "never began");
        assert!(spans.begin(1, 12));
        assert_eq!(spans.end(1, 10), 2, "12 was still open inside 10");
        assert_eq!(spans.end(1, 10), 0);
        assert_eq!(spans.end(2, 10), 1, "threads are apart");
    }

    #[test]
    fn depth_is_bounded() {
        let mut spans = Spans::default();
        for id in 0..MAX_DEPTH as u64 {
            assert!(spans.begin(1, id));
        }
        assert!(!spans.begin(1, 5000));
    }
}
