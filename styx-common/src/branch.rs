//! How a `branch` probe's `kind` argument and an `interrupt` probe's `kind` are encoded.

/// What sort of control transfer a branch is.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BranchKind {
    /// An unconditional or conditional jump.
    Jump = 0,
    /// A subroutine call.
    Call = 1,
    /// A return from a subroutine.
    Ret = 2,
    /// Entry to an interrupt handler.
    Interrupt = 3,
    /// Entry to an exception handler.
    Exception = 4,
    /// A return from an interrupt handler.
    ReturnFromInterrupt = 5,
    /// A return from an exception handler.
    ReturnFromException = 6,
    /// The back edge of a hardware loop.
    HwLoop = 7,
}

impl BranchKind {
    /// Every kind, in id order.
    pub const ALL: [BranchKind; 8] = [
        BranchKind::Jump,
        BranchKind::Call,
        BranchKind::Ret,
        BranchKind::Interrupt,
        BranchKind::Exception,
        BranchKind::ReturnFromInterrupt,
        BranchKind::ReturnFromException,
        BranchKind::HwLoop,
    ];

    /// The name used in output.
    pub const fn name(self) -> &'static str {
        match self {
            BranchKind::Jump => "jump",
            BranchKind::Call => "call",
            BranchKind::Ret => "ret",
            BranchKind::Interrupt => "interrupt",
            BranchKind::Exception => "exception",
            BranchKind::ReturnFromInterrupt => "return_from_interrupt",
            BranchKind::ReturnFromException => "return_from_exception",
            BranchKind::HwLoop => "hw_loop",
        }
    }

    /// The kind with this id, if any.
    pub const fn from_id(id: u8) -> Option<BranchKind> {
        if (id as usize) < Self::ALL.len() {
            Some(Self::ALL[id as usize])
        } else {
            None
        }
    }
}

/// A branch's kind and whether it was conditional. On the wire (the probe's
/// third argument) it is `kind | conditional << 8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Branch {
    /// What sort of transfer.
    pub kind: BranchKind,
    /// Whether it depended on a condition.
    pub conditional: bool,
}

const CONDITIONAL_BIT: u64 = 1 << Branch::CONDITIONAL_SHIFT;

impl Branch {
    /// The encoded value's bit that says it was conditional.
    pub const CONDITIONAL_SHIFT: u8 = 8;

    /// The encoded value's bits that hold its kind.
    pub const KIND_MASK: u64 = 0xff;

    /// A branch taken always.
    pub const fn unconditional(kind: BranchKind) -> Branch {
        Branch {
            kind,
            conditional: false,
        }
    }

    /// A branch that depended on a condition.
    pub const fn conditional(kind: BranchKind) -> Branch {
        Branch {
            kind,
            conditional: true,
        }
    }

    /// The probe argument: `kind | conditional << 8`.
    pub const fn encode(self) -> u64 {
        self.kind as u64 | if self.conditional { CONDITIONAL_BIT } else { 0 }
    }

    /// `None` for values no styx probe writes.
    pub const fn decode(raw: u64) -> Option<Branch> {
        if raw & !(CONDITIONAL_BIT | Branch::KIND_MASK) != 0 {
            return None;
        }
        match BranchKind::from_id(raw as u8) {
            Some(kind) => Some(Branch {
                kind,
                conditional: raw & CONDITIONAL_BIT != 0,
            }),
            None => None,
        }
    }
}

impl From<BranchKind> for Branch {
    fn from(kind: BranchKind) -> Branch {
        Branch::unconditional(kind)
    }
}

/// Whether an `interrupt` event is the entry to or the exit from a service routine.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InterruptKind {
    /// The service routine was entered.
    Entry = 0,
    /// The service routine was left.
    Exit = 1,
}

impl InterruptKind {
    /// The name used in output.
    pub const fn name(self) -> &'static str {
        match self {
            InterruptKind::Entry => "entry",
            InterruptKind::Exit => "exit",
        }
    }

    /// The kind a probe argument encodes, if any.
    pub const fn from_id(raw: u64) -> Option<InterruptKind> {
        match raw {
            0 => Some(InterruptKind::Entry),
            1 => Some(InterruptKind::Exit),
            _ => None,
        }
    }
}
