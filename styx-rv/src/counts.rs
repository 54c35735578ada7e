//! The emulator's own tally of the events it fires, kept by the counting
//! machine (`Machine<true>`, `Bus<true>`) for tests to compare with what a
//! tracer received.

/// The emulator's own count of what it fired probes for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub instructions: u64,
    pub mem_reads: u64,
    pub mem_writes: u64,
    /// Registers whose value an instruction changed.
    pub reg_writes: u64,
    /// Instructions after which the pc was not the next one.
    pub branches: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, other: Counts) {
        self.instructions += other.instructions;
        self.mem_reads += other.mem_reads;
        self.mem_writes += other.mem_writes;
        self.reg_writes += other.reg_writes;
        self.branches += other.branches;
    }
}
