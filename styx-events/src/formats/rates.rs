//! Events per second per type over fixed windows of trace time, for the
//! timeline formats' counter tracks.

use styx_common::EVENT_KIND_SLOTS;

/// Window length: fine enough to see bursts, coarse enough to add few
/// counter events (100 per traced second per type).
pub const WINDOW_NS: u64 = 10_000_000;

/// A finished window: when it started, and events per second per kind id
/// for every kind seen so far.
pub struct Window {
    /// Trace time the window starts at, ns.
    pub start_ns: u64,
    /// `(kind id, events per second)` for every kind seen so far.
    pub per_second: Vec<(usize, u64)>,
}

#[derive(Default)]
/// Counts events into fixed windows of trace time.
pub struct Rates {
    start: Option<u64>,
    counts: [u64; EVENT_KIND_SLOTS as usize],
    seen: [bool; EVENT_KIND_SLOTS as usize],
}

impl Rates {
    /// Counts an event of `kind` at `ts_ns`; returns the windows it closed
    /// (the last one's counts, then a zero window if time jumped past the
    /// next).
    pub fn count(&mut self, kind: usize, ts_ns: u64) -> Vec<Window> {
        let mut done = Vec::new();
        let start = *self.start.get_or_insert(ts_ns);
        // Times come from the ring or a capture file: any u64. A window that
        // would end past u64::MAX takes every later time (checked sums).
        if let Some(next) = start.checked_add(WINDOW_NS).filter(|&next| ts_ns >= next) {
            done.push(self.close(start));
            if next.checked_add(WINDOW_NS).is_some_and(|end| ts_ns >= end) {
                done.push(self.close(next));
            }
            // ts_ns >= next > start, so this neither wraps nor goes below start.
            self.start = Some(ts_ns - (ts_ns - start) % WINDOW_NS);
        }
        // A kind id past the table (never from a decoded event) is not counted.
        if let (Some(seen), Some(count)) = (self.seen.get_mut(kind), self.counts.get_mut(kind)) {
            *seen = true;
            *count = count.saturating_add(1);
        }
        done
    }

    /// The window in progress, at the end of the trace.
    pub fn finish(&mut self) -> Option<Window> {
        let start = self.start.take()?;
        Some(self.close(start))
    }

    fn close(&mut self, start_ns: u64) -> Window {
        let per_second = (0..self.counts.len())
            .filter(|&k| self.seen[k])
            .map(|k| (k, self.counts[k].saturating_mul(1_000_000_000 / WINDOW_NS)))
            .collect();
        self.counts = [0; EVENT_KIND_SLOTS as usize];
        Window {
            start_ns,
            per_second,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_close_as_time_passes() {
        let mut rates = Rates::default();
        assert!(rates.count(4, 1_000).is_empty());
        assert!(rates.count(4, 2_000).is_empty());
        assert!(rates.count(8, 3_000).is_empty());
        let done = rates.count(4, 1_000 + WINDOW_NS);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].start_ns, 1_000);
        assert_eq!(done[0].per_second, vec![(4, 200), (8, 100)]);
        // A quiet stretch: the rate drops to zero, then picks up.
        let done = rates.count(4, 1_000 + 5 * WINDOW_NS + 7);
        assert_eq!(done.len(), 2);
        assert_eq!(done[0].per_second, vec![(4, 100), (8, 0)]);
        assert_eq!(done[1].start_ns, 1_000 + 2 * WINDOW_NS);
        assert_eq!(done[1].per_second, vec![(4, 0), (8, 0)]);
        let last = rates.finish().unwrap();
        assert_eq!(last.start_ns, 1_000 + 5 * WINDOW_NS);
        assert_eq!(last.per_second, vec![(4, 100), (8, 0)]);
    }

    #[test]
    fn times_near_u64_max_do_not_overflow() {
        let mut rates = Rates::default();
        assert!(rates.count(4, u64::MAX - WINDOW_NS / 2).is_empty());
        assert!(
            rates.count(4, u64::MAX).is_empty(),
            "no window ends past u64::MAX"
        );
        let last = rates.finish().unwrap();
        assert_eq!(last.per_second, vec![(4, 200)]);
        // The last whole window, then past it.
        let start = u64::MAX - WINDOW_NS - 5;
        assert!(rates.count(4, start).is_empty());
        let done = rates.count(4, u64::MAX);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].start_ns, start);
        assert_eq!(rates.finish().unwrap().start_ns, start + WINDOW_NS);
    }
}
