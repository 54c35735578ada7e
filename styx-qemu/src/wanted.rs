//! Which of the plugin's event types a tracer holds, read from styx-probe's
//! semaphores: the set the next translation instruments.

use styx_probe::{enabled, EventKind};

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
