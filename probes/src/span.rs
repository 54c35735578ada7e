//! Spans: a begin and an end event sharing a per-process unique id.

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_SPAN_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh span id, unique within this process (never 0).
pub fn next_span_id() -> u64 {
    NEXT_SPAN_ID.fetch_add(1, Ordering::Relaxed)
}

/// A span that ends when dropped; made by [`span!`](crate::span!).
///
/// An id is taken only when the begin probe is enabled. A span begun while no
/// tracer was attached fires no end either, so tracers never see an end
/// without its begin.
#[must_use = "a span ends when this guard is dropped"]
pub struct Span {
    category: &'static str,
    name: &'static str,
    id: u64,
}

impl Span {
    /// Begins a span: one `span_begin` site for every caller of this
    /// function. [`span!`](crate::span!) gives each call site its own.
    #[inline(always)]
    pub fn enter(category: &'static str, name: &'static str) -> Span {
        crate::span!(category, name)
    }

    /// The guard of a span `span!` began (`id` 0: no tracer saw it begin).
    #[doc(hidden)]
    #[inline(always)]
    pub fn begun(category: &'static str, name: &'static str, id: u64) -> Span {
        Span { category, name, id }
    }

    /// The span's id; 0 when no tracer saw it begin.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for Span {
    #[inline(always)]
    fn drop(&mut self) {
        if self.id != 0 {
            crate::span_end!(|| (self.category, self.name, self.id));
        }
    }
}
