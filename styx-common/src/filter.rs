//! A compiled `--filter`: the program one event type's events are tested
//! with, shared by the eBPF programs (per-event delivery: a filtered-out
//! event writes nothing to the ring) and the loader (batched events, text
//! fields). styx-events compiles expressions into it; [`FilterProgram::keeps`]
//! is the one evaluator both sides run.
//!
//! A program is postfix: each [`FilterOp::TEST`] pushes one comparison's
//! truth onto a stack of bits, `AND`/`OR`/`NOT` combine the top ones, and
//! the event is kept when the last bit is set. An event's values sit in
//! [`VALUE_SLOTS`] numbered slots: its record's arguments in catalogue order
//! (0..=3), the access size (`aux`), the thread, the process and its time.

/// Operations a program holds at most (the eBPF loop's bound).
pub const FILTER_MAX_OPS: usize = 32;

/// Value slots of an event a [`FilterOp::TEST`] can read.
pub const VALUE_SLOTS: usize = 8;
/// Slot of the access size (the record header's `aux`).
pub const SLOT_SIZE: u8 = 4;
/// Slot of the thread id.
pub const SLOT_TID: u8 = 5;
/// Slot of the process id.
pub const SLOT_PID: u8 = 6;

/// One operation of a [`FilterProgram`] (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct FilterOp {
    /// [`FilterOp::TEST`], `TEXT`, `AND`, `OR` or `NOT`.
    pub code: u8,
    /// The value slot a `TEST` reads; the text field a `TEXT` reads.
    pub slot: u8,
    /// A `CMP_*` comparison.
    pub cmp: u8,
    /// The slot's value is shifted right by this much, then masked.
    pub shift: u8,
    /// Zero.
    pub _reserved: u32,
    /// Bits of the shifted value compared (`val & 0x80 != 0`: 0x80).
    pub mask: u64,
    /// What it is compared with; for `TEXT`, the index of the string.
    pub value: u64,
}

impl FilterOp {
    /// Pushes `(slot >> shift) & mask CMP value`.
    pub const TEST: u8 = 1;
    /// Pushes a text field's comparison: evaluated by the loader only (a
    /// program with one never goes to the kernel).
    pub const TEXT: u8 = 2;
    /// Pops two bits, pushes both.
    pub const AND: u8 = 3;
    /// Pops two bits, pushes either.
    pub const OR: u8 = 4;
    /// Flips the top bit.
    pub const NOT: u8 = 5;
}

/// `==`
pub const CMP_EQ: u8 = 0;
/// `!=`
pub const CMP_NE: u8 = 1;
/// `<`
pub const CMP_LT: u8 = 2;
/// `<=`
pub const CMP_LE: u8 = 3;
/// `>`
pub const CMP_GT: u8 = 4;
/// `>=`
pub const CMP_GE: u8 = 5;
/// Text only: the field contains the string.
pub const CMP_CONTAINS: u8 = 6;

/// What to keep of one event type (784 bytes): the events its program
/// keeps, then 1 in `sample_every` of those per thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "user", derive(bytemuck::Pod, bytemuck::Zeroable))]
pub struct FilterProgram {
    /// Operations used; 0: every event passes the filter.
    pub len: u32,
    /// `KERNEL`: the eBPF programs apply this (else the loader does).
    pub flags: u32,
    /// Keep the 1st, (N+1)th, … event of each thread that passes; 0 or 1: all.
    pub sample_every: u64,
    /// The operations, `len` of them.
    pub ops: [FilterOp; FILTER_MAX_OPS],
}

impl Default for FilterProgram {
    fn default() -> FilterProgram {
        FilterProgram {
            len: 0,
            flags: 0,
            sample_every: 0,
            ops: [FilterOp {
                code: 0,
                slot: 0,
                cmp: 0,
                shift: 0,
                _reserved: 0,
                mask: 0,
                value: 0,
            }; FILTER_MAX_OPS],
        }
    }
}

impl FilterProgram {
    /// `flags`: the kernel applies this program.
    pub const KERNEL: u32 = 1;

    /// Whether it keeps every event (nothing to test, nothing to sample).
    #[inline(always)]
    pub fn keeps_all(&self) -> bool {
        self.len == 0 && self.sample_every <= 1
    }

    /// Whether an event with these values passes the program (before
    /// sampling). `text(field, cmp, string)` answers a `TEXT` operation;
    /// the kernel never runs programs that have one.
    #[inline(always)]
    pub fn keeps(
        &self,
        values: &[u64; VALUE_SLOTS],
        mut text: impl FnMut(u8, u8, u64) -> bool,
    ) -> bool {
        let mut stack: u64 = 1;
        self.run(values, &mut stack, &mut text)
    }

    /// [`FilterProgram::keeps`] with the stack of truth values (one bit
    /// each, the top in bit 0, starting at 1) in `stack`. The eBPF programs
    /// keep it in map memory: the verifier then does not follow each
    /// value it could take (2^ops paths through the loop), it reads as
    /// any number.
    #[inline(always)]
    pub fn run(
        &self,
        values: &[u64; VALUE_SLOTS],
        stack: &mut u64,
        mut text: impl FnMut(u8, u8, u64) -> bool,
    ) -> bool {
        let len = self.len as usize;
        let stack: *mut u64 = stack;
        // SAFETY: `stack` is a valid, unaliased u64 for this call; volatile
        // so every step goes through memory (see above).
        let (get, set) = (
            || unsafe { core::ptr::read_volatile(stack) },
            |v| unsafe { core::ptr::write_volatile(stack, v) },
        );
        let mut i = 0;
        while i < FILTER_MAX_OPS {
            if i >= len {
                break;
            }
            let op = &self.ops[i];
            match op.code {
                FilterOp::TEST => {
                    let x = (values[(op.slot as usize) & (VALUE_SLOTS - 1)] >> (op.shift & 63))
                        & op.mask;
                    set((get() << 1) | compare(x, op.cmp, op.value) as u64);
                }
                FilterOp::TEXT => set((get() << 1) | text(op.slot, op.cmp, op.value) as u64),
                FilterOp::AND => {
                    let s = get();
                    set(((s >> 2) << 1) | (s & (s >> 1) & 1));
                }
                FilterOp::OR => {
                    let s = get();
                    set(((s >> 2) << 1) | ((s | (s >> 1)) & 1));
                }
                FilterOp::NOT => set(get() ^ 1),
                _ => {}
            }
            i += 1;
        }
        get() & 1 != 0
    }
}

#[inline(always)]
fn compare(x: u64, cmp: u8, value: u64) -> bool {
    match cmp {
        CMP_EQ => x == value,
        CMP_NE => x != value,
        CMP_LT => x < value,
        CMP_LE => x <= value,
        CMP_GT => x > value,
        CMP_GE => x >= value,
        _ => false,
    }
}

const _: () = assert!(core::mem::size_of::<FilterOp>() == 24);
const _: () = assert!(core::mem::size_of::<FilterProgram>() == 16 + 24 * FILTER_MAX_OPS);

// Here, after everything the eBPF programs use, so that their line
// information (and the committed object) stays as it was.
/// Slot of the event's time (`ts_ns`): filled by the loader only, so a
/// program that tests it never goes to the kernel.
pub const SLOT_TS: u8 = 7;
