//! How a `branch` probe's `kind` argument and an `interrupt` probe's `kind` are encoded.

/// What sort of control transfer a branch is.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BranchKind {
    Jump = 0,
    Call = 1,
    Ret = 2,
    Interrupt = 3,
    Exception = 4,
    ReturnFromInterrupt = 5,
    ReturnFromException = 6,
    HwLoop = 7,
}

impl BranchKind {
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
    pub kind: BranchKind,
    pub conditional: bool,
}

const CONDITIONAL_BIT: u64 = 1 << 8;

impl Branch {
    pub const fn unconditional(kind: BranchKind) -> Branch {
        Branch {
            kind,
            conditional: false,
        }
    }

    pub const fn conditional(kind: BranchKind) -> Branch {
        Branch {
            kind,
            conditional: true,
        }
    }

    pub const fn encode(self) -> u64 {
        self.kind as u64 | if self.conditional { CONDITIONAL_BIT } else { 0 }
    }

    /// `None` for values no styx probe writes.
    pub const fn decode(raw: u64) -> Option<Branch> {
        if raw & !(CONDITIONAL_BIT | 0xff) != 0 {
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
    Entry = 0,
    Exit = 1,
}

impl InterruptKind {
    pub const fn name(self) -> &'static str {
        match self {
            InterruptKind::Entry => "entry",
            InterruptKind::Exit => "exit",
        }
    }

    pub const fn from_id(raw: u64) -> Option<InterruptKind> {
        match raw {
            0 => Some(InterruptKind::Entry),
            1 => Some(InterruptKind::Exit),
            _ => None,
        }
    }
}
