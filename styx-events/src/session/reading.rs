//! How each field type reads: the one table the field walk, `--filter`,
//! `top --by` and Parquet's columns follow, for the catalogue's fields and
//! the fields an emulator declares alike.
//!
//! A field's [`Reading`] says which parts its value holds (a branch: its
//! kind, and whether it was conditional), where each part is in the value,
//! the names its values go by, how people read it ([`Shows`]) and how a
//! typed column stores it ([`Stored`]). A declared field reads as its
//! [`FieldKind`]; the catalogue's field types (styx-common's `FieldType`)
//! map onto the same kinds, plus the two encodings only the catalogue has:
//! a branch and an interrupt's direction. How a number of each kind shows
//! (hex, decimal, a register's or an enum value's name) is
//! `fields::read_as`.

use styx_common::schema::FieldKind;
use styx_common::{Branch, BranchKind, FieldType, InterruptKind};

/// How a field's value reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// A number, as its kind reads (a declared field's kind, or a
    /// catalogue number's: `FieldType::kind`).
    Number(FieldKind),
    /// An encoded [`Branch`]: its kind's name, and whether it was
    /// conditional.
    Branch,
    /// An [`InterruptKind`]: entry or exit.
    Interrupt,
    /// A string the probe passed.
    Text,
}

/// One part of a field's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// A sub-field's name; None: the field's own.
    pub name: Option<&'static str>,
    /// Where in the value: `(value >> shift) & mask`.
    pub shift: u8,
    /// See `shift`.
    pub mask: u64,
    /// How people read it.
    pub shows: Shows,
}

/// How people read a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shows {
    /// A number, as its kind reads (`fields::read_as`).
    Number(FieldKind),
    /// A decoded kind by its name (`call`, `entry`): text shows it bare,
    /// as the event's verb.
    Name(&'static [(&'static str, u64)]),
    /// A flag: text shows only a set one.
    Flag,
    /// A string.
    Text,
}

/// How a typed column (Parquet's) stores a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    /// Unsigned 64-bit.
    Unsigned,
    /// Signed 64-bit.
    Signed,
    /// Boolean.
    Bool,
    /// Text: names, strings.
    Text,
}

/// The names of the branch kinds, by value.
pub const BRANCH_KINDS: &[(&str, u64)] = &{
    let mut names = [("", 0u64); BranchKind::ALL.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = (BranchKind::ALL[i].name(), BranchKind::ALL[i] as u64);
        i += 1;
    }
    names
};

/// The names of an interrupt's directions, by value.
pub const INTERRUPT_KINDS: &[(&str, u64)] = &[
    (InterruptKind::Entry.name(), InterruptKind::Entry as u64),
    (InterruptKind::Exit.name(), InterruptKind::Exit as u64),
];

/// The names a flag's (and a `bool` field's) values go by.
pub const BOOLS: &[(&str, u64)] = &[("false", 0), ("true", 1)];

const fn whole(shows: Shows) -> Part {
    Part {
        name: None,
        shift: 0,
        mask: u64::MAX,
        shows,
    }
}

const fn number(kind: FieldKind) -> [Part; 1] {
    [whole(Shows::Number(kind))]
}

const UNSIGNED: [Part; 1] = number(FieldKind::Unsigned);
const SIGNED: [Part; 1] = number(FieldKind::Signed);
const BOOL: [Part; 1] = number(FieldKind::Bool);
const ADDRESS: [Part; 1] = number(FieldKind::Address);
const REGISTER: [Part; 1] = number(FieldKind::Register);
const ENUM: [Part; 1] = number(FieldKind::Enum);
const BRANCH: [Part; 2] = [
    Part {
        name: None,
        shift: 0,
        mask: Branch::KIND_MASK,
        shows: Shows::Name(BRANCH_KINDS),
    },
    Part {
        name: Some("conditional"),
        shift: Branch::CONDITIONAL_SHIFT,
        mask: 1,
        shows: Shows::Flag,
    },
];
const INTERRUPT: [Part; 1] = [whole(Shows::Name(INTERRUPT_KINDS))];
const TEXT: [Part; 1] = [whole(Shows::Text)];

impl Reading {
    /// How a catalogue field of type `ty` reads.
    pub const fn of(ty: FieldType) -> Reading {
        match ty.kind() {
            Some(kind) => Reading::Number(kind),
            None => match ty {
                FieldType::Branch => Reading::Branch,
                FieldType::Interrupt => Reading::Interrupt,
                _ => Reading::Text,
            },
        }
    }

    /// Its parts, in the order outputs show them.
    pub const fn parts(self) -> &'static [Part] {
        match self {
            Reading::Number(FieldKind::Unsigned) => &UNSIGNED,
            Reading::Number(FieldKind::Signed) => &SIGNED,
            Reading::Number(FieldKind::Bool) => &BOOL,
            Reading::Number(FieldKind::Address) => &ADDRESS,
            Reading::Number(FieldKind::Register) => &REGISTER,
            Reading::Number(FieldKind::Enum) => &ENUM,
            Reading::Branch => &BRANCH,
            Reading::Interrupt => &INTERRUPT,
            Reading::Text => &TEXT,
        }
    }

    /// Whether `raw` is a value it decodes: any number is; a branch or an
    /// interrupt's direction only as styx's probes encode them (else
    /// outputs show the kind as unknown, with the raw value).
    pub const fn decodes(self, raw: u64) -> bool {
        match self {
            Reading::Branch => Branch::decode(raw).is_some(),
            Reading::Interrupt => InterruptKind::from_id(raw).is_some(),
            Reading::Number(_) | Reading::Text => true,
        }
    }
}

impl Part {
    /// Its value in a field's `raw` value.
    pub const fn of(&self, raw: u64) -> u64 {
        raw >> self.shift & self.mask
    }
}

impl Shows {
    /// How a typed column stores it: numbers as their kind (an enum value
    /// by its name), names and strings as text, flags as booleans.
    pub const fn stored(self) -> Stored {
        match self {
            Shows::Number(FieldKind::Unsigned | FieldKind::Address | FieldKind::Register) => {
                Stored::Unsigned
            }
            Shows::Number(FieldKind::Signed) => Stored::Signed,
            Shows::Number(FieldKind::Bool) | Shows::Flag => Stored::Bool,
            Shows::Number(FieldKind::Enum) | Shows::Name(_) | Shows::Text => Stored::Text,
        }
    }

    /// The names its values go by that the table itself knows (a decoded
    /// kind's, `true` and `false`); a register's and an enum value's come
    /// from the guest description and the declaration.
    pub const fn names(self) -> &'static [(&'static str, u64)] {
        match self {
            Shows::Name(names) => names,
            Shows::Flag | Shows::Number(FieldKind::Bool) => BOOLS,
            Shows::Number(_) | Shows::Text => &[],
        }
    }

    /// The name of a decoded kind's `value` (see [`Reading::decodes`]).
    pub fn name_of(names: &'static [(&'static str, u64)], value: u64) -> &'static str {
        let found = names.iter().find(|(_, v)| *v == value);
        found.map_or("unknown", |(name, _)| name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use styx_common::EventKind;

    #[test]
    fn a_branch_reads_as_its_kind_and_its_conditional_bit() {
        for kind in BranchKind::ALL {
            for conditional in [false, true] {
                let raw = Branch { kind, conditional }.encode();
                assert!(Reading::Branch.decodes(raw));
                let [kind_part, flag] = Reading::Branch.parts() else {
                    panic!("a branch has two parts")
                };
                let Shows::Name(names) = kind_part.shows else {
                    panic!("its kind is a name")
                };
                assert_eq!(Shows::name_of(names, kind_part.of(raw)), kind.name());
                assert_eq!(flag.of(raw) != 0, conditional);
            }
        }
        assert!(!Reading::Branch.decodes(1 << 40));
        assert!(!Reading::Interrupt.decodes(2));
    }

    #[test]
    fn every_catalogue_field_type_has_a_reading_with_parts() {
        for kind in EventKind::ALL {
            for field in kind.fields() {
                let reading = Reading::of(field.ty);
                assert!(!reading.parts().is_empty(), "{kind:?} {}", field.name);
                assert_eq!(reading.parts()[0].name, None, "the field's own part first");
            }
        }
    }
}
