//! Which of the plugin's event types a tracer holds, read from styx-probe's
//! semaphores: the set the next translation instruments.

use std::time::{Duration, Instant};
use styx_probe::{enabled, EventKind};

/// How long the set a tracer holds must stay the same before the guest
/// starts: a loader attaches a file's sites one after another, within
/// milliseconds.
const SETTLED: Duration = Duration::from_millis(50);

/// Holds the guest back (QEMU calls this while installing the plugin,
/// before it runs anything) until a tracer holds one of the plugin's
/// types and the set has settled, or `most` has passed: for a loader that
/// starts QEMU itself and attaches once it sees the plugin mapped. A line
/// on stderr says when it gives up.
pub fn wait_for_tracer(most: Duration) {
    let start = Instant::now();
    let mut held = (Wanted(0), start);
    while start.elapsed() < most {
        let now = Wanted::now();
        if now != held.0 {
            held = (now, Instant::now());
        } else if !now.is_empty() && held.1.elapsed() >= SETTLED {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    if Wanted::now().is_empty() {
        eprintln!("styx-qemu: no tracer attached within {most:?}; running the guest untraced");
    }
}

/// A set of the event types the plugin can fire, one bit each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Wanted(u8);

impl Wanted {
    pub const BLOCK: Wanted = Wanted(1);
    pub const INSN_EXEC: Wanted = Wanted(2);
    pub const MEM_READ: Wanted = Wanted(4);
    pub const MEM_WRITE: Wanted = Wanted(8);

    /// What tracers hold now: four loads of semaphore words, no call
    /// into the kernel, so it is cheap enough for every translation and
    /// every guest system call.
    pub fn now() -> Wanted {
        let mut wanted = Wanted(0);
        for (kind, bit) in [
            (EventKind::Block, Wanted::BLOCK),
            (EventKind::InsnExec, Wanted::INSN_EXEC),
            (EventKind::MemRead, Wanted::MEM_READ),
            (EventKind::MemWrite, Wanted::MEM_WRITE),
        ] {
            if enabled(kind) {
                wanted.0 |= bit.0;
            }
        }
        wanted
    }

    pub fn has(self, bit: Wanted) -> bool {
        self.0 & bit.0 != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn bits(self) -> u8 {
        self.0
    }
}
