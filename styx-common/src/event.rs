//! The catalogue of styx events: one USDT probe per kind, with its arguments.

/// The USDT provider name every styx probe is published under.
pub const PROVIDER: &str = "styx";

/// Size of per-kind tables (drop counters): kind ids are 1..EVENT_KIND_SLOTS.
pub const EVENT_KIND_SLOTS: u32 = 16;

/// How an event's payload is laid out after the [`crate::RecordHeader`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `n` u64 arguments copied straight from the probe's argument registers.
    Args(usize),
    /// Like `Args(3)`, plus a fourth probe argument (the access size) kept in
    /// the header's `aux` byte: mem_read and mem_write.
    MemAccess,
    /// Category and name strings plus a span id.
    Span,
    /// A text message.
    Marker,
    /// Any USDT probe's arguments, read as the site's spec says.
    Usdt,
}

macro_rules! event_kinds {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $probe:literal, $shape:expr, [$($arg:literal),*]; )*) => {
        /// One styx event type; the discriminant is the `kind` byte of a record.
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum EventKind {
            $( $(#[$doc])* $variant = $id, )*
        }

        impl EventKind {
            /// Every event kind, in id order.
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant),*];

            /// The USDT probe name (`styx:<name>`), also the name used on the command line and in output.
            pub const fn probe_name(self) -> &'static str {
                match self { $(EventKind::$variant => $probe,)* }
            }

            /// How the record's payload is laid out.
            pub const fn shape(self) -> Shape {
                match self { $(EventKind::$variant => $shape,)* }
            }

            /// The names of the probe's arguments, in order, as USDT sees them.
            pub const fn probe_args(self) -> &'static [&'static str] {
                match self { $(EventKind::$variant => &[$($arg),*],)* }
            }

            /// The kind with this record id.
            pub const fn from_id(id: u8) -> Option<EventKind> {
                match id { $($id => Some(EventKind::$variant),)* _ => None }
            }
        }
    };
}

event_kinds! {
    /// An instruction word was fetched at `pc`.
    InsnFetch = 1, "insn_fetch", Shape::Args(2), ["pc", "insn"];
    /// The instruction at `pc` was executed.
    InsnExec = 2, "insn_exec", Shape::Args(2), ["pc", "insn"];
    /// A basic block of `size` bytes at `pc`: reported on entry by translating
    /// emulators, on completion by interpreters.
    Block = 3, "block", Shape::Args(2), ["pc", "size"];
    /// Guest memory was read: `size` bytes at `addr`, value `val`.
    MemRead = 4, "mem_read", Shape::MemAccess, ["pc", "addr", "val", "size"];
    /// Guest memory was written.
    MemWrite = 5, "mem_write", Shape::MemAccess, ["pc", "addr", "val", "size"];
    /// A register was read.
    RegRead = 6, "reg_read", Shape::Args(3), ["pc", "reg", "val"];
    /// A register was written; `old` is its previous value.
    RegWrite = 7, "reg_write", Shape::Args(4), ["pc", "reg", "val", "old"];
    /// Control flow left `pc` for `target`; `kind` is an encoded [`crate::Branch`].
    Branch = 8, "branch", Shape::Args(3), ["pc", "target", "kind"];
    /// An interrupt service routine was entered or left ([`crate::InterruptKind`]).
    Interrupt = 9, "interrupt", Shape::Args(4), ["kind", "num", "old_pc", "new_pc"];
    /// An emulator control event (reset, pause, breakpoint…): meaning is the emulator's.
    Control = 10, "control", Shape::Args(3), ["code", "a", "b"];
    /// A span of work began.
    SpanBegin = 11, "span_begin", Shape::Span, ["category", "category_len", "name", "name_len", "id"];
    /// A span of work ended.
    SpanEnd = 12, "span_end", Shape::Span, ["category", "category_len", "name", "name_len", "id"];
    /// A one-off text message.
    Marker = 13, "marker", Shape::Marker, ["text", "text_len"];
    /// A probe of any other provider, traced by its argument spec.
    Usdt = 15, "usdt", Shape::Usdt, [];
}

impl EventKind {
    /// The kind whose probe is called `name`.
    pub fn from_probe_name(name: &str) -> Option<EventKind> {
        Self::ALL.iter().copied().find(|k| k.probe_name() == name)
    }
}
