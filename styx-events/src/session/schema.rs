//! One description of an event type's fields, for the catalogue's types
//! and the ones an emulator declares alike: each field's name, how it
//! reads ([`Reading`]), where its value is in the record, its width and
//! an enum's names. The catalogue's kinds are the default schemas, built
//! once from `EventKind::fields` (styx-common's `event_catalogue!`, the
//! one definition); a declared type's site gets its schema from the
//! type's note and the site's argument names (`UsdtProbe::fields`). The
//! field walk (`fields::for_each_field`: one walk for both) and Parquet's
//! columns follow these schemas, and `--filter`'s and `top --by`'s fields,
//! catalogue or declared, are looked up in them ([`Types`]), so no second
//! route says what an event's fields are or how they read. A test checks
//! the default schemas against the catalogue's rows.
//!
//! A session's types ([`Types`]) are the catalogue's kinds with their
//! default schemas and, past them, the types the emulator declared with
//! the schemas of their notes: `--filter`, the flight recorder's
//! `--trigger` and `top --by` look a field up in a type's schema alike,
//! whichever kind of type it is. Where its value then goes differs only
//! as the records and the kernel make it: a catalogue kind's values are in
//! the eBPF programs' fixed value slots (the kernel fills them for
//! per-event delivery), a declared type's events are USDT events, which
//! only the loader filters and counts.
//!
//! What stays apart, and why: spans, markers and traced function calls
//! are not lists of numbers (borrowed strings with a cut flag, a call's
//! depth and duration from the call tracker), so their records keep their
//! own shapes; their catalogue schemas still say their fields' names and
//! readings for filters. Other providers' probes (`--probes`) without a
//! declaration are positional arguments with C types, strings among them
//! (`fields::UsdtArgs`): the `usdt` kind has no schema. And the record
//! keeps its two bodies (`Body::Args`, a fixed array, for the hot path;
//! `Body::Usdt` for a site's arguments): both are "values by position",
//! which a schema's [`Source`] indexes.

use crate::session::declared::{DeclaredField, DeclaredSites, EnumValues};
use crate::session::reading::Reading;
use std::ops::Range;
use std::sync::LazyLock;
use styx_common::schema::FieldKind;
use styx_common::{widen, ArgType, EventKind, FieldType, EVENT_KIND_SLOTS};

/// One field of an event type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldSchema {
    /// Its name in every output.
    pub name: String,
    /// How its value reads.
    pub reading: Reading,
    /// Where its value is in the record.
    pub source: Source,
    /// Bytes of the value as the record holds it: it is cut to them (and
    /// sign-extended if `signed`) before it reads.
    pub bytes: u8,
    /// See `bytes`.
    pub signed: bool,
    /// An enum's name and values' names.
    pub values: Option<EnumValues>,
}

/// Where a field's value is in a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The record's argument of this index.
    Arg(u8),
    /// The header's `aux` byte (a memory access's size, an instruction's
    /// length).
    Aux,
    /// The record's string of this index (a span's, a marker's).
    Text(u8),
}

impl FieldSchema {
    /// Its value, from the record's `raw` one: cut to its width.
    #[inline(always)]
    pub fn value(&self, raw: u64) -> u64 {
        widen(raw, self.bytes, self.signed)
    }

    /// The field of a declared type's site: named as the site names its
    /// argument `name`, cut as the site's type `ty` says (a string type,
    /// only in a forged header, as the number it is).
    pub fn declared(index: usize, name: &str, ty: ArgType, field: &DeclaredField) -> FieldSchema {
        let (bytes, signed) = match ty {
            ArgType::Int { bytes, signed } => (bytes, signed),
            _ => (8, false),
        };
        FieldSchema {
            name: name.to_string(),
            bytes,
            signed,
            ..FieldSchema::of_note(index, field)
        }
    }

    /// Field `index` of a declared type, as its note describes it: cut to
    /// its declared width (a signed one sign-extended).
    pub fn of_note(index: usize, field: &DeclaredField) -> FieldSchema {
        FieldSchema {
            name: field.name.clone(),
            reading: Reading::Number(field.kind),
            source: Source::Arg(index as u8),
            bytes: field.bytes,
            signed: field.kind == FieldKind::Signed,
            values: field.values.clone(),
        }
    }
}

/// A type's id in a session ([`Types`]): a catalogue kind's id, or past
/// them ([`EVENT_KIND_SLOTS`] + i) the session's i-th declared type.
pub type TypeId = usize;

/// A session's event types, each with its schema: the catalogue's kinds
/// (the default schemas), then the types the emulator declared (their
/// notes'). What `--filter`, `--trigger` and `top --by` look fields up in.
#[derive(Clone, Debug, Default)]
pub struct Types {
    declared: Vec<(DeclaredSites, Vec<FieldSchema>)>,
}

impl Types {
    /// The catalogue's kinds and the `declared` types.
    pub fn new(declared: &[DeclaredSites]) -> Types {
        let schema = |d: &DeclaredSites| {
            let fields = d.event.fields.iter().enumerate();
            fields.map(|(i, f)| FieldSchema::of_note(i, f)).collect()
        };
        Types {
            declared: declared.iter().map(|d| (d.clone(), schema(d))).collect(),
        }
    }

    /// One past the last type's id.
    pub fn len(&self) -> usize {
        EVENT_KIND_SLOTS as usize + self.declared.len()
    }

    /// Every type's id: the catalogue's kinds (in `EventKind::ALL`'s
    /// order), then the declared types.
    pub fn ids(&self) -> impl Iterator<Item = TypeId> + '_ {
        let kinds = EventKind::ALL.iter().map(|&k| k as TypeId);
        kinds.chain(self.declared_ids())
    }

    /// The declared types' ids.
    pub fn declared_ids(&self) -> Range<TypeId> {
        EVENT_KIND_SLOTS as usize..self.len()
    }

    /// The catalogue kind `t` is, if it is one.
    pub fn kind(&self, t: TypeId) -> Option<EventKind> {
        u8::try_from(t).ok().and_then(EventKind::from_id)
    }

    /// The kind its events are: a declared type's are USDT events.
    pub fn event_kind(&self, t: TypeId) -> Option<EventKind> {
        match self.declared(t) {
            Some(_) => Some(EventKind::Usdt),
            None => self.kind(t),
        }
    }

    /// The declared type `t` is, if it is one.
    pub fn declared(&self, t: TypeId) -> Option<&DeclaredSites> {
        let d = t.checked_sub(EVENT_KIND_SLOTS as usize)?;
        self.declared.get(d).map(|(sites, _)| sites)
    }

    /// Its name: its probe's (`?` for an id no type has).
    pub fn name(&self, t: TypeId) -> &str {
        match self.declared(t) {
            Some(d) => &d.event.name,
            None => self.kind(t).map_or("?", EventKind::probe_name),
        }
    }

    /// Its schema; none for the `usdt` kind (other providers' probes:
    /// positional arguments, `fields::UsdtArgs`) and ids no type has.
    pub fn fields(&self, t: TypeId) -> Option<&[FieldSchema]> {
        if let Some(d) = t.checked_sub(EVENT_KIND_SLOTS as usize) {
            return self.declared.get(d).map(|(_, fields)| fields.as_slice());
        }
        match self.kind(t)? {
            EventKind::Usdt => None,
            kind => Some(catalogue(kind)),
        }
    }
}

/// The schema of catalogue kind `kind`'s fields, in output order; none
/// for [`EventKind::Usdt`] (a site's: `UsdtProbe::fields`) and
/// [`EventKind::Function`].
#[inline]
pub fn catalogue(kind: EventKind) -> &'static [FieldSchema] {
    &CATALOGUE[kind as usize]
}

/// The field `name` of catalogue kind `kind`.
pub fn catalogue_field(kind: EventKind, name: &str) -> Option<&'static FieldSchema> {
    catalogue(kind).iter().find(|f| f.name == name)
}

static CATALOGUE: LazyLock<Vec<Vec<FieldSchema>>> = LazyLock::new(|| {
    let mut kinds = vec![Vec::new(); EVENT_KIND_SLOTS as usize];
    for &kind in EventKind::ALL {
        kinds[kind as usize] = of_kind(kind);
    }
    kinds
});

/// A catalogue kind's fields as a schema: each number from the next
/// argument, a size from `aux`, a string from the next string.
fn of_kind(kind: EventKind) -> Vec<FieldSchema> {
    let (mut arg, mut text) = (0u8, 0u8);
    let next = |n: &mut u8| {
        *n += 1;
        *n - 1
    };
    let fields = kind.fields().iter().map(|field| {
        let source = match field.ty {
            FieldType::Size => Source::Aux,
            FieldType::Text => Source::Text(next(&mut text)),
            _ => Source::Arg(next(&mut arg)),
        };
        FieldSchema {
            name: field.name.to_string(),
            reading: Reading::of(field.ty),
            source,
            bytes: if source == Source::Aux { 1 } else { 8 },
            signed: false,
            values: None,
        }
    });
    fields.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use styx_common::Shape;

    /// The default schemas are the catalogue's rows, field by field: the
    /// same names and readings in the same order, the record's arguments
    /// each taken once in order, the size from `aux`, each value whole as
    /// the record holds it, and no other kind has one.
    #[test]
    fn the_catalogue_schemas_are_what_event_catalogue_lists() {
        for id in 0..EVENT_KIND_SLOTS as u8 {
            let Some(kind) = EventKind::from_id(id) else {
                assert!(CATALOGUE[id as usize].is_empty(), "id {id}");
                continue;
            };
            let schema = catalogue(kind);
            let defs = kind.fields();
            assert_eq!(schema.len(), defs.len(), "{kind:?}");
            let mut args = Vec::new();
            for (field, def) in schema.iter().zip(defs) {
                assert_eq!(field.name, def.name, "{kind:?}");
                assert_eq!(field.reading, Reading::of(def.ty), "{kind:?}");
                assert_eq!(field.source == Source::Aux, def.ty == FieldType::Size);
                assert_eq!(
                    matches!(field.source, Source::Text(_)),
                    def.ty == FieldType::Text
                );
                if let Source::Arg(i) = field.source {
                    args.push(i as usize);
                }
                // Whole as the record holds them: the walk does not cut them.
                let whole = match field.source {
                    Source::Aux => u8::MAX.into(),
                    _ => u64::MAX,
                };
                assert_eq!(field.value(whole), whole, "{kind:?} {}", def.name);
            }
            if let Shape::Args(n) | Shape::ArgsAux(n) = kind.shape() {
                assert_eq!(args, (0..n).collect::<Vec<_>>(), "{kind:?}");
            }
            assert_eq!(catalogue_field(kind, "nonesuch"), None);
        }
    }
}
