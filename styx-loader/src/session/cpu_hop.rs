//! Taking the loader's CPU back when it is kept waiting for one.
//!
//! A loader behind the ring buffer may be behind because its output is
//! slow (it is then busy the whole time), or because it waits for a CPU:
//! one it shares with the emulator, while another CPU runs only
//! lowest-priority work (the capture's compressing threads, `SCHED_IDLE`).
//! A CPU busy with such threads does not take over a runnable thread the
//! way an idle one does: on the 2-CPU machine of the benchmarks (no cache
//! shared between its CPUs) a loader woken on the emulator's CPU shared it
//! for ~30 ms while the ring overflowed (`perf sched`). The kernel counts
//! the time a thread waited on a run queue (`/proc/thread-self/schedstat`);
//! a loader behind that waited for more than [`STARVED_SHARE`] of the time
//! since it last looked is starved. It then stops feeding the workers for
//! a while (`EventWriter::behind`) and leaves its current CPU out of its
//! own affinity for one tick, which moves it at once; its affinity is then
//! as it was.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// The share of the time since the last look that a thread behind must
/// have waited for a CPU to be starved.
const STARVED_SHARE: f64 = 0.2;

/// A look older than this is no measure of now: it only starts a new one.
const LOOK_AT_MOST: Duration = Duration::from_millis(100);

/// The least time between two moves.
const HOP_AT_MOST_EVERY: Duration = Duration::from_millis(100);

/// The calling thread's waits for a CPU and its moves; see the module's
/// comment.
#[derive(Default)]
pub struct CpuHop {
    /// When the thread last looked, and how long it had waited on a run
    /// queue by then (ns).
    looked: Option<(Instant, u64)>,
    /// The affinity to put back after a move.
    allowed: Option<CpuSet>,
    moved: Option<Instant>,
}

impl CpuHop {
    /// Whether the calling thread, behind, waited for a CPU for more than
    /// [`STARVED_SHARE`] of the time since it last looked (within
    /// [`LOOK_AT_MOST`]).
    pub fn starved(&mut self) -> bool {
        let Some(waited) = run_delay() else {
            return false;
        };
        let now = Instant::now();
        let before = self.looked.replace((now, waited));
        let Some((then, waited_then)) = before else {
            return false;
        };
        let since = now.duration_since(then);
        since <= LOOK_AT_MOST
            && waited.saturating_sub(waited_then) as f64 > STARVED_SHARE * since.as_nanos() as f64
    }

    /// Moves the calling thread to another CPU it may run on, if there is
    /// one and it did not move lately.
    pub fn hop(&mut self) {
        if self.allowed.is_some() || self.moved.is_some_and(|t| t.elapsed() < HOP_AT_MOST_EVERY) {
            return;
        }
        // SAFETY: sched_getcpu has no preconditions.
        let Ok(cpu) = usize::try_from(unsafe { libc::sched_getcpu() }) else {
            return;
        };
        let Ok(allowed) = sched_getaffinity(Pid::from_raw(0)) else {
            return;
        };
        let others = (0..CpuSet::count()).any(|c| c != cpu && allowed.is_set(c).unwrap_or(false));
        let mut elsewhere = allowed;
        if !others || elsewhere.unset(cpu).is_err() {
            return;
        }
        if sched_setaffinity(Pid::from_raw(0), &elsewhere).is_ok() {
            self.allowed = Some(allowed);
            self.moved = Some(Instant::now());
        }
    }

    /// After a move: the thread's affinity as it was.
    pub fn settle(&mut self) {
        if let Some(allowed) = self.allowed.take() {
            let _ = sched_setaffinity(Pid::from_raw(0), &allowed);
        }
    }
}

/// Nanoseconds the calling thread has waited on a run queue (the second
/// number of its schedstat).
fn run_delay() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hop moves the thread to another CPU it may run on (when it may run
    /// on another), and the affinity is then as it was; a second hop right
    /// after does nothing.
    #[test]
    fn a_hop_moves_the_thread_and_puts_its_affinity_back() {
        std::thread::spawn(|| {
            let allowed = sched_getaffinity(Pid::from_raw(0)).unwrap();
            let cpus = (0..CpuSet::count())
                .filter(|&c| allowed.is_set(c).unwrap())
                .count();
            // SAFETY: no preconditions.
            let before = unsafe { libc::sched_getcpu() };
            let mut hop = CpuHop::default();
            hop.hop();
            // SAFETY: as above.
            let after = unsafe { libc::sched_getcpu() };
            assert_eq!(
                after != before,
                cpus > 1,
                "{cpus} CPUs: {before} -> {after}"
            );
            hop.settle();
            assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), allowed);
            hop.hop();
            assert!(hop.allowed.is_none(), "a second hop within 100 ms");
        })
        .join()
        .unwrap();
    }

    /// A thread that shares its CPU with a busy one for a while is
    /// starved; one that had its CPU to itself is not.
    #[test]
    fn a_thread_kept_waiting_for_its_cpu_is_starved() {
        std::thread::spawn(|| {
            let mut alone = CpuHop::default();
            assert!(!alone.starved(), "the first look only starts a measure");
            std::thread::sleep(Duration::from_millis(80));
            assert!(!alone.starved(), "asleep, it waited for no CPU");
            // Pinned with a busy thread to one CPU: they take turns.
            // SAFETY: no preconditions.
            let cpu = unsafe { libc::sched_getcpu() } as usize;
            let mut one = CpuSet::new();
            one.set(cpu).unwrap();
            sched_setaffinity(Pid::from_raw(0), &one).unwrap();
            let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let spin = {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    sched_setaffinity(Pid::from_raw(0), &one).unwrap();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {}
                })
            };
            let mut shared = CpuHop::default();
            shared.starved();
            let until = Instant::now() + Duration::from_millis(60);
            while Instant::now() < until {}
            let starved = shared.starved();
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            spin.join().unwrap();
            assert!(starved, "sharing one CPU with a busy thread");
        })
        .join()
        .unwrap();
    }
}
