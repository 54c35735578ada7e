//! The live line on stderr while tracing: events/s, total, drops, and the
//! busiest types, redrawn in place. Only on a terminal, and not with
//! `--quiet`; the end-of-run summary replaces it.

use std::io::{self, Write};
use std::time::{Duration, Instant};
use styx_common::EventKind;
use styx_events::si;

/// How often the line is redrawn.
const EVERY: Duration = Duration::from_millis(500);
/// Event types named on the line, busiest first.
const TYPES_SHOWN: usize = 4;

pub struct LiveLine {
    enabled: bool,
    last: Instant,
    last_events: Vec<u64>,
    drawn: bool,
}

impl LiveLine {
    pub fn new(enabled: bool) -> LiveLine {
        LiveLine {
            enabled,
            last: Instant::now(),
            last_events: Vec::new(),
            drawn: false,
        }
    }

    /// Whether it is time to redraw (so callers read the drops only then).
    pub fn due(&self) -> bool {
        self.enabled && self.last.elapsed() >= EVERY
    }

    /// Redraws from the counts so far (per kind id).
    pub fn draw(&mut self, events: &[u64], drops: &[u64]) {
        let elapsed = self.last.elapsed().as_secs_f64();
        self.last = Instant::now();
        self.last_events.resize(events.len(), 0);
        let rates: Vec<(usize, f64)> = events
            .iter()
            .zip(&self.last_events)
            .map(|(now, before)| (now - before) as f64 / elapsed)
            .enumerate()
            .collect();
        let line = render(events, drops, &rates);
        self.last_events.copy_from_slice(events);
        let mut err = io::stderr().lock();
        // Back to column 0 and clear: the line is redrawn in place.
        let _ = write!(err, "\r\x1b[K{line}");
        let _ = err.flush();
        self.drawn = true;
    }

    /// Removes the line, before the summary is printed.
    pub fn clear(&mut self) {
        if self.drawn {
            let _ = write!(io::stderr().lock(), "\r\x1b[K");
            self.drawn = false;
        }
    }
}

/// `1.23M ev/s  total 4.56M  dropped 0  |  mem_read 800k/s  branch 200k/s …`
pub fn render(events: &[u64], drops: &[u64], rates: &[(usize, f64)]) -> String {
    let total: u64 = events.iter().sum();
    let dropped: u64 = drops.iter().sum();
    let rate: f64 = rates.iter().map(|(_, r)| r).sum();
    let mut busiest: Vec<&(usize, f64)> = rates.iter().filter(|(_, r)| *r > 0.0).collect();
    busiest.sort_by(|a, b| b.1.total_cmp(&a.1));
    let types: Vec<String> = busiest
        .iter()
        .take(TYPES_SHOWN)
        .map(|&&(kind, r)| {
            let name = EventKind::from_id(kind as u8).map_or("?", EventKind::probe_name);
            format!("{name} {}/s", si(r))
        })
        .collect();
    format!(
        "styx-loader: {} ev/s  total {}  dropped {}  | {}",
        si(rate),
        si(total as f64),
        si(dropped as f64),
        types.join("  ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_busiest_types() {
        let mut events = vec![0u64; 16];
        events[4] = 2_000_000;
        events[8] = 500;
        let mut drops = vec![0u64; 16];
        drops[4] = 3;
        let rates = vec![(4, 1_500_000.0), (8, 250.0), (9, 0.0)];
        let line = render(&events, &drops, &rates);
        assert_eq!(
            line,
            "styx-loader: 1.50M ev/s  total 2.00M  dropped 3  | mem_read 1.50M/s  branch 250/s"
        );
    }
}
