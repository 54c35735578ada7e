//! The catalogue of styx events: one USDT probe per kind, with its arguments.

/// The USDT provider name every styx probe is published under.
pub const PROVIDER: &str = "styx";

/// Set in the attach cookie of a [`Shape::ArgsAux`] site whose note passes
/// the `aux` argument (the low byte is the event kind).
pub const COOKIE_HAS_AUX_ARG: u64 = 1 << 8;

/// Size of per-kind tables (drop counters): kind ids are 1..EVENT_KIND_SLOTS.
pub const EVENT_KIND_SLOTS: u32 = 16;

/// How an event's payload is laid out after the [`crate::RecordHeader`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `n` u64 arguments copied straight from the probe's argument registers.
    Args(usize),
    /// `n` u64 arguments, plus one more probe argument kept in the header's
    /// `aux` byte: the access size of mem_read and mem_write (`ArgsAux(3)`),
    /// the instruction length of insn_fetch and insn_exec (`ArgsAux(2)`).
    /// A site without that argument (insn sites of styx-probe before it)
    /// has 0 there; its attach cookie says so ([`crate::COOKIE_HAS_AUX_ARG`]).
    ArgsAux(usize),
    /// Category and name strings plus a span id.
    Span,
    /// A text message.
    Marker,
    /// Any USDT probe's arguments, read as the site's spec says.
    Usdt,
    /// A traced function's entry or return ([`crate::FunctionRecord`]).
    Function,
}

impl Shape {
    /// How many u64 arguments a record of this shape carries after its
    /// header (0 for shapes laid out otherwise).
    pub const fn record_args(self) -> usize {
        match self {
            Shape::Args(n) | Shape::ArgsAux(n) => n,
            Shape::Span | Shape::Marker | Shape::Usdt | Shape::Function => 0,
        }
    }
}

/// How events of a type reach the reader when styx-loader traces them in
/// batches (its default; `--delivery per-event` takes every type one hit
/// each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Appended to the thread's batch buffer; one probe hit per batch
    /// (see [`crate::batch`]).
    Batched,
    /// One probe hit per event. Before it fires, the thread's pending batch
    /// is flushed, so a thread's events keep their order.
    PerEvent,
}

/// How an event field reads, and where its value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType {
    /// An address or value from the next argument: hex for people.
    Hex,
    /// A count, number or id from the next argument: decimal for people.
    Dec,
    /// A register number from the next argument: decimal, and its name
    /// where the emulator described its guest (`styx_probe::describe!`).
    Reg,
    /// A size in bytes (a memory access's, an instruction's length): kept in
    /// the record header's `aux` byte, not an argument.
    Size,
    /// An encoded [`crate::Branch`] from the next argument: its kind's name,
    /// and whether it was conditional.
    Branch,
    /// A [`crate::InterruptKind`] from the next argument: entry or exit.
    Interrupt,
    /// A string the probe passed as (pointer, length).
    Text,
}

impl FieldType {
    /// How its value reads, as a declared field of that kind would (the
    /// one table of readings, `styx_events`' `fields::read_as`): hex
    /// numbers as addresses, counts and sizes as unsigned, registers by
    /// name. None for the catalogue's decoded fields (a branch's kind and
    /// condition, an interrupt's direction) and strings.
    pub const fn kind(self) -> Option<crate::schema::FieldKind> {
        use crate::schema::FieldKind;
        match self {
            FieldType::Hex => Some(FieldKind::Address),
            FieldType::Dec | FieldType::Size => Some(FieldKind::Unsigned),
            FieldType::Reg => Some(FieldKind::Register),
            FieldType::Branch | FieldType::Interrupt | FieldType::Text => None,
        }
    }

    /// The type a capture header gives the field.
    pub const fn capture_type(self) -> &'static str {
        match self {
            FieldType::Hex | FieldType::Dec | FieldType::Reg => "u64",
            FieldType::Size => "u8",
            FieldType::Branch => "branch",
            FieldType::Interrupt => "interrupt",
            FieldType::Text => "str",
        }
    }
}

/// One field of an event, as output names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldDef {
    /// The field's name in every output.
    pub name: &'static str,
    /// How it reads.
    pub ty: FieldType,
}

/// The catalogue of styx's own event types, one row each: the one place an
/// event type is defined. It hands the rows to `$callback!`, which takes
/// what it needs: this crate builds [`EventKind`] from them (and through it
/// the field walk, capture header and formats of styx-events), styx-probe
/// its semaphores. A row is
/// `Variant = id, probe_name, Shape, Delivery, [probe arguments], [field: FieldType, …];`:
/// the probe arguments are the USDT probe's (a string is two: pointer and
/// length), the fields what outputs show, in order. [`Delivery`] says
/// whether styx-loader takes the type in batches by default: the frequent
/// ones and interrupts (a timer's: thousands a second) are; the rare ones
/// (control, spans, markers) stay one probe hit each: they reach the reader at once.
#[macro_export]
macro_rules! event_catalogue {
    ($callback:ident) => {
        $callback! {
            /// An instruction word was fetched at `pc`; `len` is its length in
            /// bytes (0: the emulator did not say).
            InsnFetch = 1, insn_fetch, ArgsAux(2), Batched, [pc, insn, len],
                [pc: Hex, insn: Hex, len: Size];
            /// The instruction at `pc` was executed; `len` as for `insn_fetch`.
            InsnExec = 2, insn_exec, ArgsAux(2), Batched, [pc, insn, len],
                [pc: Hex, insn: Hex, len: Size];
            /// A basic block of `size` bytes at `pc`: reported on entry by translating
            /// emulators, on completion by interpreters.
            Block = 3, block, Args(2), Batched, [pc, size], [pc: Hex, size: Dec];
            /// Guest memory was read: `size` bytes at `addr`, value `val`.
            MemRead = 4, mem_read, ArgsAux(3), Batched, [pc, addr, val, size],
                [pc: Hex, addr: Hex, val: Hex, size: Size];
            /// Guest memory was written.
            MemWrite = 5, mem_write, ArgsAux(3), Batched, [pc, addr, val, size],
                [pc: Hex, addr: Hex, val: Hex, size: Size];
            /// A register was read.
            RegRead = 6, reg_read, Args(3), Batched, [pc, reg, val], [pc: Hex, reg: Reg, val: Hex];
            /// A register was written; `old` is its previous value.
            RegWrite = 7, reg_write, Args(4), Batched, [pc, reg, val, old],
                [pc: Hex, reg: Reg, val: Hex, old: Hex];
            /// Control flow left `pc` for `target`; `kind` is an encoded [`crate::Branch`].
            Branch = 8, branch, Args(3), Batched, [pc, target, kind],
                [pc: Hex, target: Hex, kind: Branch];
            /// An interrupt service routine was entered or left ([`crate::InterruptKind`]).
            Interrupt = 9, interrupt, Args(4), Batched, [kind, num, old_pc, new_pc],
                [kind: Interrupt, num: Dec, old_pc: Hex, new_pc: Hex];
            /// An emulator control event (reset, pause, breakpoint…): meaning is the emulator's.
            Control = 10, control, Args(3), PerEvent, [code, a, b], [code: Dec, a: Hex, b: Hex];
            /// A span of work began.
            SpanBegin = 11, span_begin, Span, PerEvent, [category, category_len, name, name_len, id],
                [category: Text, name: Text, id: Dec];
            /// A span of work ended.
            SpanEnd = 12, span_end, Span, PerEvent, [category, category_len, name, name_len, id],
                [category: Text, name: Text, id: Dec];
            /// A one-off text message.
            Marker = 13, marker, Marker, PerEvent, [text, text_len], [text: Text];
        }
    };
}

macro_rules! define_event_kinds {
    ($(
        $(#[$doc:meta])* $variant:ident = $id:literal, $probe:ident, $shape:ident $(($n:literal))?,
            $delivery:ident, [$($arg:ident),*], [$($field:ident: $ty:ident),*];
    )*) => {
        /// One styx event type; the discriminant is the `kind` byte of a record.
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum EventKind {
            $( $(#[$doc])* $variant = $id, )*
            /// A probe of any other provider, traced by its argument spec.
            Usdt = 15,
            /// A function of the traced program entered or returned
            /// (`--functions`): not a probe, so not in [`EventKind::ALL`]
            /// (which `-e` and per-type tables range over). Its id serves
            /// per-kind tables and captures; in the ring its records are
            /// [`crate::FUNCTION_RECORD_KIND`].
            Function = 14,
        }

        impl EventKind {
            /// Every event kind a probe reports, in id order: the
            /// catalogue's, then [`EventKind::Usdt`]. Not
            /// [`EventKind::Function`].
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant,)* EventKind::Usdt];

            /// The USDT probe name (`styx:<name>`), also the name used on the command line and in output.
            pub const fn probe_name(self) -> &'static str {
                match self {
                    $(EventKind::$variant => stringify!($probe),)*
                    EventKind::Usdt => "usdt",
                    EventKind::Function => "function",
                }
            }

            /// How the record's payload is laid out.
            pub const fn shape(self) -> Shape {
                match self {
                    $(EventKind::$variant => Shape::$shape $(($n))?,)*
                    EventKind::Usdt => Shape::Usdt,
                    EventKind::Function => Shape::Function,
                }
            }

            /// How styx-loader takes events of this type by default.
            pub const fn delivery(self) -> Delivery {
                match self {
                    $(EventKind::$variant => Delivery::$delivery,)*
                    EventKind::Usdt | EventKind::Function => Delivery::PerEvent,
                }
            }

            /// The names of the probe's arguments, in order, as USDT sees them.
            pub const fn probe_args(self) -> &'static [&'static str] {
                match self {
                    $(EventKind::$variant => &[$(stringify!($arg)),*],)*
                    EventKind::Usdt | EventKind::Function => &[],
                }
            }

            /// The event's fields in output order (after time, process,
            /// thread and event name); none for [`EventKind::Usdt`], whose
            /// fields depend on the site, nor for [`EventKind::Function`].
            pub const fn fields(self) -> &'static [FieldDef] {
                match self {
                    $(EventKind::$variant => &[$(FieldDef {
                        name: stringify!($field),
                        ty: FieldType::$ty,
                    }),*],)*
                    EventKind::Usdt | EventKind::Function => &[],
                }
            }

            /// The kind with this record id.
            pub const fn from_id(id: u8) -> Option<EventKind> {
                match id {
                    $($id => Some(EventKind::$variant),)*
                    15 => Some(EventKind::Usdt),
                    14 => Some(EventKind::Function),
                    _ => None,
                }
            }
        }
    };
}

event_catalogue!(define_event_kinds);

impl EventKind {
    /// The kind whose probe is called `name`.
    pub fn from_probe_name(name: &str) -> Option<EventKind> {
        Self::ALL.iter().copied().find(|k| k.probe_name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;
    use std::string::ToString;
    use std::vec::Vec;

    /// A row's fields and probe arguments say the same: every field but the
    /// size takes an argument, a string two (`NAME`, then `NAME_len`).
    #[test]
    fn fields_match_probe_arguments() {
        for &kind in EventKind::ALL.iter().filter(|k| **k != EventKind::Usdt) {
            let mut expected = Vec::new();
            for field in kind.fields() {
                expected.push(field.name.to_string());
                if field.ty == FieldType::Text {
                    expected.push(format!("{}_len", field.name));
                }
            }
            assert_eq!(kind.probe_args(), expected, "{kind:?}");
            let record_args = kind
                .fields()
                .iter()
                .filter(|f| !matches!(f.ty, FieldType::Size | FieldType::Text))
                .count();
            if let Shape::Args(_) | Shape::ArgsAux(_) = kind.shape() {
                assert_eq!(kind.shape().record_args(), record_args, "{kind:?}");
            }
        }
    }

    #[test]
    fn ids_and_names_round_trip() {
        assert_eq!(EventKind::from_id(14), Some(EventKind::Function));
        assert!(!EventKind::ALL.contains(&EventKind::Function));
        for &kind in EventKind::ALL {
            assert_eq!(EventKind::from_id(kind as u8), Some(kind));
            assert_eq!(EventKind::from_probe_name(kind.probe_name()), Some(kind));
            assert!((kind as u32) < EVENT_KIND_SLOTS);
        }
    }

    #[test]
    fn the_rings_other_record_kinds_are_no_event_kinds() {
        let others = [
            crate::batch::BATCH_RECORD_KIND,
            crate::FUNCTION_RECORD_KIND,
            crate::FATAL_RECORD_KIND,
        ];
        for (i, &kind) in others.iter().enumerate() {
            assert_eq!(EventKind::from_id(kind), None, "{kind:#x}");
            assert!(u32::from(kind) >= EVENT_KIND_SLOTS, "{kind:#x}");
            assert!(!others[..i].contains(&kind), "{kind:#x} twice");
        }
    }
}
