//! Event types an emulator declared (`styx_probe::event!`): name, the
//! declaring crate (the USDT provider of the type's sites), fields with
//! their kinds, widths and enum names. Decoded from the type's note
//! (layout: `styx_common::schema`), which comes from a file someone else
//! built: decoding checks every length and count, and a malformed note is
//! an error that names what is wrong.

use serde::{Deserialize, Serialize};
use std::fmt;
use styx_common::schema::{FieldKind, EVENT_NOTE_VERSION, MAX_ENUM_VALUES, MAX_FIELDS};
use thiserror::Error;

/// An event type the emulator declared.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EventType {
    /// The declaring crate: the provider of the type's USDT sites.
    pub provider: String,
    /// The type's name, its probe's name.
    pub name: String,
    /// Its fields, in order.
    pub fields: Vec<DeclaredField>,
}

/// A field of a declared event type.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeclaredField {
    /// Its name in every output.
    pub name: String,
    /// How it reads.
    #[serde(with = "kind_name")]
    pub kind: FieldKind,
    /// Bytes it takes in a batch: 1, 2, 4 or 8.
    pub bytes: u8,
    /// For an enum: its name and values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<EnumValues>,
}

/// An enum's name and its values' names.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EnumValues {
    /// The enum's name.
    pub name: String,
    /// (value, name) of each value.
    pub values: Vec<(u64, String)>,
}

/// An event type the emulator declared, as a session has it: the
/// declaration and the spec ids of its sites (each traced per event, and
/// the one its batches' items are named by). A session's types
/// (`schema::Types`, what `--filter` and `--by` look fields up in) are
/// the catalogue's and these, with the schemas of their notes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredSites {
    /// The declaration.
    pub event: EventType,
    /// Its sites' spec ids.
    pub spec_ids: Vec<u32>,
}

impl DeclaredSites {
    /// The declared types `header` names, in the order of their first
    /// site; sites of one provider and name (several in one file, or one
    /// per file of a process) are one type.
    pub fn of(header: &crate::session::header::Header) -> Vec<DeclaredSites> {
        let probes = crate::session::usdt::UsdtProbes::from_header(header);
        let mut types: Vec<DeclaredSites> = Vec::new();
        for info in &header.usdt {
            let Some(event) = probes.get(info.spec_id).and_then(|p| p.declared.as_ref()) else {
                continue;
            };
            let same = |t: &&mut DeclaredSites| {
                t.event.provider == event.provider && t.event.name == event.name
            };
            match types.iter_mut().find(same) {
                Some(known) => known.spec_ids.push(info.spec_id),
                None => types.push(DeclaredSites {
                    event: event.clone(),
                    spec_ids: vec![info.spec_id],
                }),
            }
        }
        types
    }
}

impl DeclaredField {
    /// A field of this name, kind, width and enum: for tests.
    #[cfg(test)]
    pub(crate) fn new(name: &str, kind: FieldKind, bytes: u8, values: Option<EnumValues>) -> Self {
        DeclaredField {
            name: name.to_string(),
            kind,
            bytes,
            values,
        }
    }
}

impl EnumValues {
    /// The name of `value`, if the enum names it.
    pub fn name_of(&self, value: u64) -> Option<&str> {
        let found = self.values.iter().find(|(v, _)| *v == value);
        found.map(|(_, name)| name.as_str())
    }

    /// The value named `name`: as written, else ignoring ASCII case
    /// (filters take `uart` for `Uart`).
    pub fn value_of(&self, name: &str) -> Option<u64> {
        let exact = self.values.iter().find(|(_, n)| n == name);
        let any_case = || {
            let mut found = self
                .values
                .iter()
                .filter(|(_, n)| n.eq_ignore_ascii_case(name));
            // Two values one name apart only by case: only as written.
            match (found.next(), found.next()) {
                (Some(one), None) => Some(one),
                _ => None,
            }
        };
        exact.or_else(any_case).map(|(v, _)| *v)
    }
}

/// Why a declared event type's note could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SchemaError {
    /// A version this reader does not know.
    #[error("event type note of version {0}; this styx-loader reads version {EVENT_NOTE_VERSION}")]
    Version(u8),
    /// The bytes end before the description does.
    #[error("event type note cut short")]
    Short,
    /// A name that is not UTF-8, or empty.
    #[error("event type note has a name that is empty or not UTF-8")]
    Name,
    /// More fields, or enum values, than a declaration can make.
    #[error("event type note has {0} {1}, more than a declaration can make")]
    TooMany(usize, &'static str),
    /// A field kind or width no declaration makes.
    #[error("event type note has field {0} of an unknown kind or width")]
    Field(String),
    /// Bytes after the last field.
    #[error("event type note has {0} bytes after its last field")]
    Trailing(usize),
}

impl EventType {
    /// Decodes a note's descriptor.
    pub fn decode(desc: &[u8]) -> Result<EventType, SchemaError> {
        let mut r = Cursor(desc);
        let version = r.u8()?;
        if version != EVENT_NOTE_VERSION {
            return Err(SchemaError::Version(version));
        }
        let provider = r.name()?;
        let name = r.name()?;
        let count = r.u8()? as usize;
        if count > MAX_FIELDS {
            return Err(SchemaError::TooMany(count, "fields"));
        }
        let fields = (0..count)
            .map(|_| r.field())
            .collect::<Result<Vec<_>, _>>()?;
        if !r.0.is_empty() {
            return Err(SchemaError::Trailing(r.0.len()));
        }
        Ok(EventType {
            provider,
            name,
            fields,
        })
    }

    /// Bytes of the values of an item of this type.
    pub fn item_bytes(&self) -> usize {
        self.fields.iter().map(|f| f.bytes as usize).sum()
    }
}

/// `mmio_write(pc: u32, device: Device, addr: Addr<u32>)`, as it was declared.
impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.name)?;
        for (i, field) in self.fields.iter().enumerate() {
            let separator = if i == 0 { "" } else { ", " };
            write!(f, "{separator}{}: {field}", field.name)?;
        }
        write!(f, ")")
    }
}

impl DeclaredField {
    /// The type's name: `u32`, `i8`, `bool`, `Addr<u64>`, `Reg<u8>`, or an
    /// enum's own name (its values apart).
    pub fn type_name(&self) -> String {
        match &self.values {
            Some(e) if self.kind == FieldKind::Enum => e.name.clone(),
            _ => {
                let mut name = self.to_string();
                name.truncate(name.find(' ').unwrap_or(name.len()));
                name
            }
        }
    }
}

/// The field's type as it was declared: `u32`, `i8`, `bool`,
/// `Addr<u64>`, `Reg<u8>`, an enum's name with its values.
impl fmt::Display for DeclaredField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = 8 * self.bytes as u32;
        match (&self.kind, &self.values) {
            (FieldKind::Unsigned, _) => write!(f, "u{bits}"),
            (FieldKind::Signed, _) => write!(f, "i{bits}"),
            (FieldKind::Bool, _) => write!(f, "bool"),
            (FieldKind::Address, _) => write!(f, "Addr<u{bits}>"),
            (FieldKind::Register, _) => write!(f, "Reg<u{bits}>"),
            (FieldKind::Enum, Some(e)) => {
                write!(f, "{} {{", e.name)?;
                for (i, (value, name)) in e.values.iter().enumerate() {
                    let separator = if i == 0 { " " } else { ", " };
                    write!(f, "{separator}{name} = {value}")?;
                }
                write!(f, " }}")
            }
            (FieldKind::Enum, None) => write!(f, "enum"),
        }
    }
}

/// A [`FieldKind`] in a capture header: its name.
mod kind_name {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};
    use styx_common::schema::FieldKind;

    pub fn serialize<S: Serializer>(kind: &FieldKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(kind.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<FieldKind, D::Error> {
        let name = String::deserialize(d)?;
        FieldKind::from_name(&name).ok_or_else(|| D::Error::custom(format!("field kind {name:?}")))
    }
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], SchemaError> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or(SchemaError::Short)?;
        self.0 = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, SchemaError> {
        Ok(self.take::<1>()?[0])
    }

    fn name(&mut self) -> Result<String, SchemaError> {
        let end = self
            .0
            .iter()
            .position(|&b| b == 0)
            .ok_or(SchemaError::Short)?;
        let name = std::str::from_utf8(&self.0[..end]).map_err(|_| SchemaError::Name)?;
        if name.is_empty() {
            return Err(SchemaError::Name);
        }
        self.0 = &self.0[end + 1..];
        Ok(name.to_string())
    }

    fn field(&mut self) -> Result<DeclaredField, SchemaError> {
        let [kind, bytes] = self.take()?;
        let name = self.name()?;
        let kind = match FieldKind::from_code(kind) {
            Some(kind) if matches!(bytes, 1 | 2 | 4 | 8) => kind,
            _ => return Err(SchemaError::Field(name)),
        };
        let values = match kind {
            FieldKind::Enum => Some(self.enum_values()?),
            _ => None,
        };
        Ok(DeclaredField {
            name,
            kind,
            bytes,
            values,
        })
    }

    fn enum_values(&mut self) -> Result<EnumValues, SchemaError> {
        let name = self.name()?;
        let count = u16::from_le_bytes(self.take()?) as usize;
        if count > MAX_ENUM_VALUES {
            return Err(SchemaError::TooMany(count, "enum values"));
        }
        let mut values = Vec::with_capacity(count);
        for _ in 0..count {
            let value = u64::from_le_bytes(self.take()?);
            values.push((value, self.name()?));
        }
        Ok(EnumValues { name, values })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use styx_common::schema::{note, note_len, FieldEntry};

    const DEVICES: &[(u64, &str)] = &[(0, "Uart"), (1, "Timer")];
    const FIELDS: &[FieldEntry] = &[
        ("pc", FieldKind::Unsigned, 4, "", &[]),
        ("device", FieldKind::Enum, 1, "Device", DEVICES),
        ("addr", FieldKind::Address, 2, "", &[]),
        ("delta", FieldKind::Signed, 8, "", &[]),
    ];
    const LEN: usize = note_len("emu", "mmio_write", FIELDS);
    const NOTE: [u8; LEN] = note("emu", "mmio_write", FIELDS);

    /// The descriptor of the note `styx_probe::event!` writes.
    fn desc() -> Vec<u8> {
        let size = u32::from_le_bytes(NOTE[4..8].try_into().unwrap()) as usize;
        NOTE[20..20 + size].to_vec()
    }

    #[test]
    fn a_declaration_reads_back_as_written() {
        let t = EventType::decode(&desc()).unwrap();
        assert_eq!(
            (t.provider.as_str(), t.name.as_str()),
            ("emu", "mmio_write")
        );
        assert_eq!(t.item_bytes(), 15);
        assert_eq!(
            t.to_string(),
            "mmio_write(pc: u32, device: Device { Uart = 0, Timer = 1 }, addr: Addr<u16>, delta: i64)"
        );
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<EventType>(&json).unwrap(), t);
    }

    #[test]
    fn every_cut_and_bad_byte_is_an_error_not_a_panic() {
        let good = desc();
        for end in 0..good.len() {
            assert!(EventType::decode(&good[..end]).is_err(), "prefix {end}");
        }
        for at in 0..good.len() {
            for byte in [0, 0xff, 9] {
                let mut bad = good.clone();
                bad[at] = byte;
                let _ = EventType::decode(&bad);
            }
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert_eq!(EventType::decode(&trailing), Err(SchemaError::Trailing(1)));
        assert_eq!(EventType::decode(&[7]), Err(SchemaError::Version(7)));
    }
}
