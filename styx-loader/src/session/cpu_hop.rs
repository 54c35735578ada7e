//! Moving the loader off a CPU it shares with the emulator.
//!
//! A loader that falls behind the ring buffer may be sharing a CPU with
//! the emulator while another CPU runs only lowest-priority work (the
//! capture's compressing threads, `SCHED_IDLE`). The scheduler moves it
//! over at a later load balance: on the 2-CPU machine of the benchmarks,
//! whose CPUs share no cache, ~30 ms later, while the ring overflowed.
//! Leaving the current CPU out of the loader's own affinity for one tick
//! moves it at once; its affinity is then as it was.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// The least time between two moves: a loader behind for another reason
/// (a slow output) moves at most this often.
const HOP_AT_MOST_EVERY: Duration = Duration::from_millis(100);

/// The calling thread's moves; see the module's comment.
#[derive(Default)]
pub struct CpuHop {
    /// The affinity to put back after a move.
    allowed: Option<CpuSet>,
    last: Option<Instant>,
}

impl CpuHop {
    /// Moves the calling thread to another CPU it may run on, if there is
    /// one and it did not move lately.
    pub fn hop(&mut self) {
        if self.allowed.is_some() || self.last.is_some_and(|t| t.elapsed() < HOP_AT_MOST_EVERY) {
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
            self.last = Some(Instant::now());
        }
    }

    /// After a move: the thread's affinity as it was.
    pub fn settle(&mut self) {
        if let Some(allowed) = self.allowed.take() {
            let _ = sched_setaffinity(Pid::from_raw(0), &allowed);
        }
    }
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
}
