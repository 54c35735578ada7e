//! An event's fields in order, named as in the JSON output: the one walk
//! every format uses, driven by the event type's schema (`schema`: the
//! catalogue's kinds and declared types alike), so a new event type
//! needs no change here.

use crate::record::event::{Body, Event, Text};
use crate::session::declared::EnumValues;
use crate::session::guest::RegisterNames;
use crate::session::header::{Header, DEFAULT_ARG_NAMES};
use crate::session::reading::{Reading, Shows};
use crate::session::schema::{self, FieldSchema, Source};
use crate::session::usdt::UsdtProbes;
use styx_common::schema::FieldKind;
use styx_common::{ArgType, EventKind, Shape, StrWord, MAX_USDT_ARGS, USDT_STR_MAX};

/// One field of an event, with how people like to read it.
#[allow(missing_docs)] // each variant is (name, value)
pub enum Field<'a> {
    /// A number field of the event's schema (the catalogue's or a
    /// declared type's), as its kind reads ([`read_as`]: an address or
    /// value in hex, a count or size in decimal, a register by its name
    /// where the guest description gives one, an enum value by its name).
    Value(&'a str, Arg<'a>),
    /// A decoded kind (`call`, `entry`, …): text shows it bare, as the
    /// event's verb.
    Name(&'a str, &'static str),
    /// A flag such as `conditional`: text shows only a set one.
    Flag(&'a str, bool),
    /// A string the probe passed (span category and name, marker text).
    Text(&'static str, &'a Text<'a>),
    /// A name from the probe's note (provider, probe).
    Str(&'static str, &'a str),
    /// Another provider's probe arguments, in order, where no declared
    /// type's schema names them all (see `UsdtProbe::schema`).
    Args(UsdtArgs<'a>),
}

/// One argument of another provider's probe, as its type shows it.
pub enum Arg<'a> {
    /// Sign-extended by the eBPF program (or cast to a declared signed type).
    Signed(i64),
    /// As read (or cast to an unsigned type `--probe-args` gave): text
    /// shows it in hex, as most such arguments are addresses.
    Unsigned(u64),
    /// A declared type's unsigned field: decimal everywhere.
    Dec(u64),
    /// A declared type's `Addr<uN>`: hex where a format shows addresses
    /// in hex (as the catalogue's `pc` and `addr`).
    Addr(u64),
    /// A declared type's `bool`.
    Bool(bool),
    /// A declared type's `Reg<uN>`: its number, and its name where the
    /// guest description gives one (as the catalogue's `reg`).
    Reg(u64, Option<&'a str>),
    /// A value of a declared type's enum, and its name where the enum
    /// names it (else it shows as the number it is).
    Enum(u64, Option<&'a str>),
    /// A string the eBPF program copied.
    Str(UsdtStr<'a>),
}

/// How a value of each field kind reads: the one table every format (and
/// `--filter`, `--by`) follows, for every schema's number fields
/// (`FieldSchema::number`, the walk) and `top`'s keys. `value` is as the
/// record holds it, signed ones sign-extended; `values` an enum's names.
pub fn read_as<'a>(
    kind: FieldKind,
    value: u64,
    values: Option<&'a EnumValues>,
    registers: &'a RegisterNames,
) -> Arg<'a> {
    match kind {
        FieldKind::Unsigned => Arg::Dec(value),
        FieldKind::Signed => Arg::Signed(value as i64),
        FieldKind::Bool => Arg::Bool(value != 0),
        FieldKind::Address => Arg::Addr(value),
        FieldKind::Register => Arg::Reg(value, registers.get(value)),
        FieldKind::Enum => Arg::Enum(value, values.and_then(|e| e.name_of(value))),
    }
}

impl FieldSchema {
    /// How its `value` (already cut to its width) reads as a number
    /// ([`read_as`] by the kind its reading gives; a field that is not a
    /// number, which no declared type has, as the number it is).
    pub fn number<'a>(&'a self, value: u64, registers: &'a RegisterNames) -> Arg<'a> {
        match self.reading {
            Reading::Number(kind) => read_as(kind, value, self.values.as_ref(), registers),
            _ => Arg::Unsigned(value),
        }
    }
}

/// A string argument as the record keeps it.
pub struct UsdtStr<'a> {
    /// The bytes kept (at most `styx_common::USDT_STR_MAX`).
    pub bytes: &'a [u8],
    /// The string was longer than what is kept.
    pub cut: bool,
    /// The read failed, with this error number (e.g. 14, EFAULT): no bytes.
    pub unreadable: Option<u16>,
    /// Declared `json`: outputs that can show JSON as a value do, when it parses.
    pub json: bool,
}

impl UsdtStr<'_> {
    /// The text as UTF-8, invalid bytes replaced.
    pub fn lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.bytes)
    }

    /// Its bytes if it was declared JSON and is one whole JSON value (a cut
    /// one never is).
    pub fn json_value(&self) -> Option<&[u8]> {
        let whole = self.json && !self.cut && self.unreadable.is_none();
        let parses = || serde_json::from_slice::<serde::de::IgnoredAny>(self.bytes).is_ok();
        (whole && parses()).then_some(self.bytes)
    }
}

/// The arguments of a USDT event, named and typed by the session's header.
#[derive(Clone)]
pub struct UsdtArgs<'a> {
    values: &'a [u64],
    types: &'a [(String, ArgType)],
    /// A declared type's schema: how each argument reads.
    schema: &'a [FieldSchema],
    registers: &'a RegisterNames,
    strings: &'a [u8],
    index: usize,
    /// String arguments met so far.
    string_index: usize,
    /// Some argument was named: show each as a field, not in an `args` list.
    pub named: bool,
}

impl<'a> Iterator for UsdtArgs<'a> {
    type Item = (&'a str, Arg<'a>);

    fn next(&mut self) -> Option<(&'a str, Arg<'a>)> {
        let &value = self.values.get(self.index)?;
        let (name, ty) = match self.types.get(self.index) {
            Some((name, ty)) => (name.as_str(), *ty),
            None => (DEFAULT_ARG_NAMES[self.index % MAX_USDT_ARGS], U64),
        };
        let declared = self.schema.get(self.index);
        self.index += 1;
        let arg = match (ty.cast(value), declared) {
            (Some(value), Some(field)) => field.number(value, self.registers),
            // The eBPF program sign-extended signed values to 64 bits.
            (Some(value), None) if ty.is_signed() => Arg::Signed(value as i64),
            (Some(value), None) => Arg::Unsigned(value),
            (None, _) => Arg::Str(self.take_string(value, ty == ArgType::Json)),
        };
        Some((name, arg))
    }
}

impl<'a> UsdtArgs<'a> {
    /// The next string from the record's strings (the `k`th at
    /// `k * USDT_STR_MAX`), as `word` says; cut where the record holds
    /// fewer bytes than it claims (a forged record).
    fn take_string(&mut self, word: u64, json: bool) -> UsdtStr<'a> {
        let word = StrWord::decode(word);
        let at = self.string_index * USDT_STR_MAX;
        self.string_index += 1;
        let slot = self.strings.get(at..).unwrap_or(&[]);
        let bytes = &slot[..word.kept().min(slot.len())];
        let (cut, unreadable) = match word {
            StrWord::Kept { cut, len } => (cut || usize::from(len) > bytes.len(), None),
            StrWord::Unreadable { errno } => (false, Some(errno)),
        };
        UsdtStr {
            bytes,
            cut,
            unreadable,
            json,
        }
    }

    /// Whether `what` holds for one of the string arguments (cut, unreadable).
    pub fn any_string(&self, what: impl Fn(&UsdtStr<'_>) -> bool) -> bool {
        self.clone().any(|(_, arg)| match arg {
            Arg::Str(s) => what(&s),
            _ => false,
        })
    }
}

const U64: ArgType = ArgType::int(8, false);

/// What a session's header names beyond the catalogue: other providers'
/// probes, and the guest's registers.
#[derive(Clone, Debug, Default)]
pub struct Names {
    /// Other providers' probes, by spec id.
    pub usdt: UsdtProbes,
    /// Register names, by number.
    pub registers: RegisterNames,
    /// Traced functions' names, by id (`--functions`).
    pub functions: Vec<String>,
}

impl Names {
    /// The names `header` gives.
    pub fn new(header: &Header) -> Names {
        Names {
            usdt: UsdtProbes::from_header(header),
            registers: RegisterNames::new(header.guest.as_ref()),
            functions: header.functions.clone(),
        }
    }
}

/// Calls `each` with every field of `event` after the common ones
/// (`ts_ns`, `pid`, `tid`, `event`), as its type's schema lists them (see
/// `schema` for the shapes that are not lists of numbers).
#[inline(always)]
pub fn for_each_field<'a, E>(
    event: &'a Event<'a>,
    names: &'a Names,
    mut each: impl FnMut(Field<'a>) -> Result<(), E>,
) -> Result<(), E> {
    let registers = &names.registers;
    match &event.body {
        Body::Args(args) => walk::<_, false>(
            schema::catalogue(event.kind),
            args,
            event.header.aux,
            registers,
            &mut each,
        ),
        Body::Span { id, category, name } => {
            each(Field::Text("category", category))?;
            each(Field::Text("name", name))?;
            each(Field::Value("id", Arg::Dec(*id)))?;
            truncated(&mut each, category.truncated || name.truncated)
        }
        Body::Marker(text) => {
            each(Field::Text("text", text))?;
            truncated(&mut each, text.truncated)
        }
        Body::Usdt {
            spec_id,
            args,
            strings,
        } => {
            let site = names.usdt.get(*spec_id);
            let (provider, probe) = site.map_or(("?", "?"), |s| (&s.provider, &s.probe));
            each(Field::Str("provider", provider))?;
            each(Field::Str("probe", probe))?;
            if let Some(schema) = site.and_then(|s| s.schema(args.len())) {
                return walk::<_, true>(schema, args, 0, registers, &mut each);
            }
            each(Field::Args(UsdtArgs {
                values: args,
                types: site.map_or(&[][..], |s| &s.args[..]),
                schema: site.map_or(&[][..], |s| &s.fields[..]),
                registers,
                strings,
                index: 0,
                string_index: 0,
                named: site.is_some_and(|s| s.named),
            }))
        }
        Body::Call(call) => {
            each(Field::Str("function", names.function(call.function)))?;
            each(Field::Value("depth", Arg::Dec(call.depth.into())))?;
            if let Some(ns) = call.duration_ns {
                each(Field::Value("duration_ns", Arg::Dec(ns)))?;
            }
            if call.unwound {
                each(Field::Flag("unwound", true))?;
            }
            if call.tail_call {
                each(Field::Flag("tail_call", true))?;
            }
            Ok(())
        }
    }
}

impl Names {
    /// The traced function with this id, `?` if the header has none.
    pub fn function(&self, id: u32) -> &str {
        self.functions.get(id as usize).map_or("?", String::as_str)
    }
}

/// Whether every field of `kind` is a plain number straight from the
/// record (its arguments in order, then for memory accesses the size from
/// `aux`): formats may then write them without the walk. Not for kinds with
/// decoded fields (branch, interrupt), strings, or USDT.
pub fn is_plain(kind: EventKind) -> bool {
    let schema = schema::catalogue(kind);
    let number = |f: &FieldSchema| matches!(f.reading, Reading::Number(_));
    !schema.is_empty() && schema.iter().all(number)
}

/// Calls `each` with the fields `schema` lists, each value from the
/// record's `args` or `aux` as its source says: the catalogue's kinds and
/// declared types' sites alike. `CUT`: values are cut to their fields'
/// widths first (a declared site's); the catalogue's are whole as the
/// record holds them (`schema`'s test checks it), and its walk is the hot
/// path of the formats that take it.
#[inline(always)]
fn walk<'a, E, const CUT: bool>(
    schema: &'a [FieldSchema],
    args: &[u64],
    aux: u8,
    registers: &'a RegisterNames,
    each: &mut impl FnMut(Field<'a>) -> Result<(), E>,
) -> Result<(), E> {
    for field in schema {
        let raw = match field.source {
            Source::Arg(i) => args.get(i as usize).copied().unwrap_or(0),
            Source::Aux => aux.into(),
            // Strings never come in an argument record.
            Source::Text(_) => continue,
        };
        let value = if CUT { field.value(raw) } else { raw };
        read_field(field, value, registers, each)?;
    }
    Ok(())
}

/// A plain event's values, in field order (see [`is_plain`]).
#[inline(always)]
pub fn plain_values(event: &Event<'_>, args: &[u64; 4]) -> [u64; 4] {
    match event.kind.shape() {
        // The catalogue lists the aux byte's field last.
        Shape::ArgsAux(2) => [args[0], args[1], event.header.aux.into(), 0],
        Shape::ArgsAux(3) => [args[0], args[1], args[2], event.header.aux.into()],
        _ => *args,
    }
}

/// Calls `each` with the parts of `field` whose value is `raw`, as its
/// reading says (see `reading`): a number as its kind reads, a decoded
/// kind by its name, a flag; a kind no probe writes as unknown, with the
/// raw value.
#[inline(always)]
fn read_field<'a, E>(
    field: &'a FieldSchema,
    raw: u64,
    registers: &'a RegisterNames,
    each: &mut impl FnMut(Field<'a>) -> Result<(), E>,
) -> Result<(), E> {
    if !field.reading.decodes(raw) {
        return unknown_kind(each, raw);
    }
    for part in field.reading.parts() {
        let name = part.name.unwrap_or(&field.name);
        let value = part.of(raw);
        match part.shows {
            Shows::Number(kind) => each(Field::Value(
                name,
                read_as(kind, value, field.values.as_ref(), registers),
            ))?,
            Shows::Name(values) => each(Field::Name(name, Shows::name_of(values, value)))?,
            Shows::Flag => each(Field::Flag(name, value != 0))?,
            Shows::Text => {}
        }
    }
    Ok(())
}

fn unknown_kind<'a, E>(
    each: &mut impl FnMut(Field<'a>) -> Result<(), E>,
    raw: u64,
) -> Result<(), E> {
    each(Field::Name("kind", "unknown"))?;
    each(Field::Value("kind_raw", Arg::Dec(raw)))
}

/// `truncated: true` only when a string was cut, so the usual line stays short.
fn truncated<'a, E>(each: &mut impl FnMut(Field<'a>) -> Result<(), E>, cut: bool) -> Result<(), E> {
    if cut {
        each(Field::Flag("truncated", true))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::header::UsdtInfo;
    use styx_common::RecordHeader;

    /// Strings are taken from their slots as their words say, never past
    /// the record's bytes: a forged length is cut, and said to be.
    #[test]
    fn usdt_strings_come_from_their_slots_and_forged_lengths_are_cut() {
        let types = [
            (None, ArgType::Str),
            (Some("n".to_string()), ArgType::int(1, true)),
            (None, ArgType::Json),
            (None, ArgType::Str),
        ];
        let header = Header::now(1, "exe", vec![UsdtInfo::new(0, "p", "q", types)]);
        let names = Names::new(&header);
        let words = [
            StrWord::Kept { len: 2, cut: false }.encode(),
            0x1ff,
            StrWord::Unreadable { errno: 14 }.encode(),
            StrWord::Kept {
                len: 200,
                cut: false,
            }
            .encode(),
        ];
        let mut strings = b"hi".to_vec();
        strings.resize(USDT_STR_MAX * 2, b'-');
        strings.extend_from_slice(b"short");
        let event = Event {
            header: RecordHeader::default(),
            kind: EventKind::Usdt,
            body: Body::Usdt {
                spec_id: 0,
                args: &words,
                strings: &strings,
            },
        };
        let mut seen = Vec::new();
        let _ = for_each_field(&event, &names, |field| {
            if let Field::Args(args) = field {
                assert!(args.named);
                for (name, arg) in args {
                    seen.push(match arg {
                        Arg::Signed(v) => format!("{name}={v}"),
                        Arg::Unsigned(v) => format!("{name}={v}u"),
                        Arg::Str(s) => format!(
                            "{name}={:?} cut={} unreadable={:?}",
                            s.lossy(),
                            s.cut,
                            s.unreadable
                        ),
                        _ => panic!("{name}: no declared type here"),
                    });
                }
            }
            Ok::<(), ()>(())
        });
        let want = [
            "arg0=\"hi\" cut=false unreadable=None",
            "n=-1",
            "arg2=\"\" cut=false unreadable=Some(14)",
            "arg3=\"short\" cut=true unreadable=None",
        ];
        assert_eq!(seen, want);
    }

    /// A declared type's fields read as their kinds say: an enum's value
    /// by name (a value it does not name as a number), an address, a
    /// bool, a register by the guest's name, a signed number; from the
    /// site's declaration or, in a capture written before sites kept it,
    /// from the batches' declared types.
    #[test]
    fn declared_fields_read_as_their_kinds() {
        use crate::session::declared::{DeclaredField, EnumValues, EventType};
        use crate::session::guest::Guest;
        use crate::session::header::DeclaredInfo;
        let field = DeclaredField::new;
        let device = EnumValues {
            name: "Device".into(),
            values: vec![(0, "Uart".into()), (7, "Dma".into())],
        };
        let event = EventType {
            provider: "emu".into(),
            name: "mmio".into(),
            fields: vec![
                field("device", FieldKind::Enum, 1, Some(device)),
                field("addr", FieldKind::Address, 4, None),
                field("on", FieldKind::Bool, 1, None),
                field("r", FieldKind::Register, 1, None),
                field("d", FieldKind::Signed, 1, None),
                field("n", FieldKind::Unsigned, 2, None),
            ],
        };
        let guest = Guest::naming(2, "sp");
        let walk = |header: &Header, args: &[u64]| {
            let names = Names::new(header);
            let event = Event {
                header: RecordHeader::default(),
                kind: EventKind::Usdt,
                body: Body::Usdt {
                    spec_id: 0,
                    args,
                    strings: &[],
                },
            };
            let mut seen = Vec::new();
            let _ = for_each_field(&event, &names, |field| {
                // Named fields come one by one, as the catalogue's do;
                // a site whose names are not all given, as a list.
                let args: Vec<(&str, Arg<'_>)> = match field {
                    Field::Value(name, arg) => vec![(name, arg)],
                    Field::Args(args) => args.collect(),
                    _ => Vec::new(),
                };
                {
                    for (name, arg) in args {
                        seen.push(match arg {
                            Arg::Signed(v) => format!("{name}={v}"),
                            Arg::Dec(v) => format!("{name}={v}"),
                            Arg::Addr(v) => format!("{name}=addr {v:#x}"),
                            Arg::Bool(v) => format!("{name}={v}"),
                            Arg::Reg(v, reg) => format!("{name}=reg {v} {reg:?}"),
                            Arg::Enum(v, value) => format!("{name}=enum {v} {value:?}"),
                            Arg::Unsigned(_) | Arg::Str(_) => format!("{name}: not declared"),
                        });
                    }
                }
                Ok::<(), ()>(())
            });
            seen
        };
        let mut header = Header::now(1, "exe", vec![UsdtInfo::declared(0, &event)]);
        header.guest = Some(guest);
        let args = [7, 0x10, 1, 2, 0xfd, 65535];
        assert_eq!(
            walk(&header, &args),
            [
                "device=enum 7 Some(\"Dma\")",
                "addr=addr 0x10",
                "on=true",
                "r=reg 2 Some(\"sp\")",
                "d=-3",
                "n=65535"
            ]
        );
        let args = [5, 0x10, 0, 3, 0, 0];
        let seen = walk(&header, &args);
        assert_eq!(seen[0], "device=enum 5 None");
        assert_eq!(seen[2], "on=false");
        assert_eq!(seen[3], "r=reg 3 None");
        // Written before sites kept their declaration: the batches' one.
        header.usdt[0].declared = None;
        header.declared = vec![DeclaredInfo {
            file: 0,
            tag: 1,
            spec_id: 0,
            event,
        }];
        assert_eq!(walk(&header, &args)[0], "device=enum 5 None");
        assert_eq!(walk(&header, &[0])[0], "device=enum 0 Some(\"Uart\")");
    }

    /// A declared type with a catalogue kind's fields walks as that kind
    /// does: the same fields, named and read alike, one by one (the one
    /// route); only `provider` and `probe` come before them.
    #[test]
    fn a_declared_type_walks_as_the_catalogue_kind_of_its_fields() {
        use crate::session::declared::{DeclaredField, EventType};
        use crate::session::guest::Guest;
        let kind = EventKind::RegWrite;
        let declared = EventType {
            provider: "emu".into(),
            name: "my_reg_write".into(),
            fields: schema::catalogue(kind)
                .iter()
                .map(|f| {
                    let Reading::Number(k) = f.reading else {
                        panic!("reg_write's fields are numbers")
                    };
                    DeclaredField::new(&f.name, k, 8, None)
                })
                .collect(),
        };
        let mut header = Header::now(1, "exe", vec![UsdtInfo::declared(0, &declared)]);
        header.guest = Some(Guest::naming(2, "sp"));
        let names = Names::new(&header);
        let args = [0x1000, 2, 0xfeed, 0xbeef];
        let walk = |event: &Event<'_>| {
            let mut seen = Vec::new();
            let _ = for_each_field(event, &names, |field| {
                seen.push(match field {
                    Field::Value(name, Arg::Addr(v)) => format!("{name}=addr {v:#x}"),
                    Field::Value(name, Arg::Reg(v, reg)) => format!("{name}=reg {v} {reg:?}"),
                    Field::Str(name, v) => format!("{name}={v}"),
                    _ => "another field".to_string(),
                });
                Ok::<(), ()>(())
            });
            seen
        };
        let catalogue = Event {
            header: RecordHeader {
                kind: kind as u8,
                ..RecordHeader::default()
            },
            kind,
            body: Body::Args(args),
        };
        let site = Event::usdt(0, &args);
        let want = [
            "pc=addr 0x1000",
            "reg=reg 2 Some(\"sp\")",
            "val=addr 0xfeed",
            "old=addr 0xbeef",
        ];
        assert_eq!(walk(&catalogue), want);
        assert_eq!(walk(&site)[..2], ["provider=emu", "probe=my_reg_write"]);
        assert_eq!(walk(&site)[2..], want);
    }

    /// The shortcut says what the full walk says, for every kind it covers.
    #[test]
    fn plain_fields_match_the_full_walk() {
        for &kind in EventKind::ALL.iter().filter(|&&k| is_plain(k)) {
            let names: Vec<&str> = kind.fields().iter().map(|f| f.name).collect();
            let args = [11, 22, 33, 44];
            let event = Event {
                header: RecordHeader {
                    kind: kind as u8,
                    aux: 4,
                    ..RecordHeader::default()
                },
                kind,
                body: Body::Args(args),
            };
            let mut walked = Vec::new();
            let none = Names::default();
            let _ = for_each_field(&event, &none, |field| {
                match field {
                    Field::Value(name, Arg::Addr(v) | Arg::Dec(v) | Arg::Reg(v, _)) => {
                        walked.push((name, v))
                    }
                    _ => panic!("{kind:?} has a field that is not a plain number"),
                }
                Ok::<(), ()>(())
            });
            let values = plain_values(&event, &args);
            let shortcut: Vec<(&str, u64)> = names.iter().copied().zip(values).collect();
            assert_eq!(walked, shortcut, "{kind:?}");
        }
    }
}
