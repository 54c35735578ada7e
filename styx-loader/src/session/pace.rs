//! The rates the loader sees while tracing, from which the end-of-run
//! report tells why events were dropped (`styx_common::summary::Loss`).
//!
//! Every ~0.1 s (or after a drain that took longer) the session reads the
//! ring-full counters and compares them with its last look. Over the
//! intervals in which events were dropped it adds up their length, the
//! time the loader spent draining in them (taking records from the ring and
//! writing them: a blocking write counts as busy) and the events written
//! and dropped. A loader busy most of that time means the output is slower
//! than the emulator (a larger ring cannot help); a loader mostly idle, a
//! burst the ring could not hold (or a loader not scheduled).

use std::time::{Duration, Instant};
use styx_common::summary::{Loss, LossCause};

/// How often the counters are looked at, at most.
const EVERY: Duration = Duration::from_millis(100);

/// The counts at one look.
#[derive(Clone, Copy)]
struct Look {
    at: Instant,
    busy: Duration,
    written: u64,
    dropped: u64,
}

/// What the intervals with drops add up to.
#[derive(Default)]
struct Dropping {
    time: Duration,
    busy: Duration,
    written: u64,
    dropped: u64,
}

pub struct Pace {
    last: Look,
    dropping: Dropping,
}

impl Pace {
    /// Starts counting now, from the counts so far.
    pub fn new(busy: Duration, written: u64, dropped: u64) -> Pace {
        Pace {
            last: Look {
                at: Instant::now(),
                busy,
                written,
                dropped,
            },
            dropping: Dropping::default(),
        }
    }

    /// Whether it is time for a look.
    pub fn due(&self) -> bool {
        self.last.at.elapsed() >= EVERY
    }

    /// A look at the counts so far: the loader's time spent draining,
    /// events written and dropped.
    pub fn look(&mut self, busy: Duration, written: u64, dropped: u64) {
        let now = Look {
            at: Instant::now(),
            busy,
            written,
            dropped,
        };
        let last = std::mem::replace(&mut self.last, now);
        let new_drops = now.dropped.saturating_sub(last.dropped);
        if new_drops > 0 {
            let d = &mut self.dropping;
            d.time += now.at - last.at;
            d.busy += now.busy.saturating_sub(last.busy);
            d.written += now.written.saturating_sub(last.written);
            d.dropped += new_drops;
        }
    }

    /// Why events were dropped, once the last look is taken (None if
    /// none were), with what the session knows: `output_per_s`, the
    /// loader's events written per second of draining over the whole run,
    /// and the rest of [`Loss`].
    pub fn loss(&self, output_per_s: f64, rest: LossContext) -> Option<Loss> {
        let d = &self.dropping;
        if d.dropped == 0 {
            return None;
        }
        let seconds = d.time.as_secs_f64().max(1e-6);
        let busy = (d.busy.as_secs_f64() / seconds).min(1.0);
        Some(Loss {
            cause: LossCause::of(busy),
            seconds,
            busy,
            offered_per_s: (d.written + d.dropped) as f64 / seconds,
            output_per_s,
            batched: rest.batched,
            waited: rest.waited,
            ring_bytes: rest.ring_bytes,
            output: rest.output,
        })
    }
}

/// What the session adds to a loss: of the drops, the batched events;
/// whether batches waited; the ring; the output.
pub struct LossContext {
    pub batched: u64,
    pub waited: bool,
    pub ring_bytes: u64,
    pub output: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> LossContext {
        LossContext {
            batched: 0,
            waited: false,
            ring_bytes: 4096,
            output: "jsonl".into(),
        }
    }

    #[test]
    fn only_intervals_with_drops_count() {
        let mut pace = Pace::new(Duration::ZERO, 0, 0);
        std::thread::sleep(Duration::from_millis(5));
        // Nothing dropped: this interval says nothing.
        pace.look(Duration::from_millis(5), 1000, 0);
        assert!(pace.loss(1.0, context()).is_none());
        std::thread::sleep(Duration::from_millis(20));
        // Busy 1 ms of the >= 20 ms in which 50 were dropped: a burst.
        pace.look(Duration::from_millis(6), 1500, 50);
        let loss = pace.loss(1.0, context()).unwrap();
        assert_eq!(loss.cause, LossCause::Burst);
        assert!(loss.seconds >= 0.02 && loss.busy <= 0.05, "{loss:?}");
        assert!(loss.offered_per_s <= 550.0 / 0.02, "{loss:?}");
        std::thread::sleep(Duration::from_millis(20));
        // Then busy throughout 20 ms with drops: 21 ms busy of >= 40 ms.
        pace.look(Duration::from_millis(26), 2000, 60);
        let loss = pace.loss(1.0, context()).unwrap();
        assert!(loss.busy <= 21.0 / 40.0 + 1e-9, "{loss:?}");
    }
}
