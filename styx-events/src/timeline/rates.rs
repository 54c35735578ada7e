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
        if ts_ns >= start + WINDOW_NS {
            done.push(self.close(start));
            let next = start + WINDOW_NS;
            if ts_ns >= next + WINDOW_NS {
                done.push(self.close(next));
            }
            self.start = Some(ts_ns - (ts_ns - start) % WINDOW_NS);
        }
        self.seen[kind] = true;
        self.counts[kind] += 1;
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
            .map(|k| (k, self.counts[k] * (1_000_000_000 / WINDOW_NS)))
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
}
