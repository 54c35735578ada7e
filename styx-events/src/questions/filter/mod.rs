//! Which events to keep: `--filter EXPR` and `--sample N`.
//!
//! An expression ([`parse`]) is checked against the session's event types
//! ([`Types`]: the catalogue's kinds and the types the emulator declared
//! with `styx_probe::event!`, alike): each field it names must be a field
//! of the types it applies to (those it names before `:`, else every
//! selected type that has all its fields). A type's field is looked up in
//! its schema ([`FieldSchema`]): its [`Source`] says which value to test
//! (a part of it, for a branch's `kind` and `conditional`), its reading
//! which names its values go by: an enum value by its name (as written,
//! else ignoring ASCII case), a bool with `true`/`false`, a register by
//! the guest's name for it, a branch's kind by its name, numbers as they
//! are (a signed field's value, cut to its width, as its 64-bit two's
//! complement: `==` and `!=` for negative values, ranges for others).
//!
//! It is then compiled, per type, into a
//! [`styx_common::filter::FilterProgram`] that tests value slots. A
//! catalogue kind's values are in the eBPF programs' fixed slots: its
//! program is the same bytes the eBPF programs run for per-event delivery
//! (a filtered-out event writes nothing to the ring), and the loader runs
//! it with [`Keep`] for what the kernel cannot filter: batched events (the
//! kernel copies a batch whole), text fields, programs longer than the
//! kernel's bound. A declared type's events are USDT events, whose sites'
//! programs do not filter: always the loader's, its program's slots hold
//! the values it tests, in the order it names them (its fields, with
//! `tid`, `pid` and `ts_ns`, outnumber the slots).
//!
//! Every type also has `event` (its type's name: `event == mem_write`,
//! `event != usdt`, a declared type's name; known when the program is
//! compiled, so it compiles to a constant per type) and `ts_ns` (its time,
//! kernel `CLOCK_MONOTONIC` ns, as the outputs show it; the loader's to
//! test, the kernel's programs never see it).
//!
//! Sampling keeps the 1st, (N+1)th, … event of each type of each thread
//! that passes the filters: a rerun of the same program gives the same
//! events.

pub mod parse;

use crate::record::event::{Body, Event};
use crate::session::declared::{DeclaredSites, EnumValues};
use crate::session::guest::RegisterNames;
use crate::session::reading::Shows;
use crate::session::schema::{FieldSchema, Source, TypeId, Types};
use parse::{Expr, Op, Parsed, Test, Value};
use std::collections::HashMap;
use std::fmt;
use styx_common::filter::{
    FilterOp, FilterProgram, CMP_CONTAINS, CMP_EQ, CMP_GE, CMP_LE, CMP_NE, FILTER_MAX_OPS,
    SLOT_PID, SLOT_SIZE, SLOT_TID, SLOT_TS, VALUE_SLOTS,
};
use styx_common::schema::FieldKind;
use styx_common::{widen, EventKind, EVENT_KIND_SLOTS};

/// What is wrong with a filter, and where: one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// 1-based column of the offending token.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl FilterError {
    pub(crate) fn at(column: usize, message: impl Into<String>) -> FilterError {
        FilterError {
            column,
            message: message.into(),
        }
    }
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at column {}: {}", self.column, self.message)
    }
}

impl std::error::Error for FilterError {}

/// Where a catalogue kind's field is in the eBPF programs' value slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldRef {
    /// A number: `(slot >> shift) & mask`, with names for its values.
    Value {
        /// The value slot (see [`styx_common::filter`]).
        slot: u8,
        /// Shifted right first.
        shift: u8,
        /// Then masked.
        mask: u64,
        /// Names its values go by (`call`, `entry`, `true`), if any.
        names: &'static [(&'static str, u64)],
    },
    /// A string: the event's text field by index (span: 0 category, 1 name;
    /// marker: 0 text).
    Text(u8),
}

/// Where a value filters and `--by` read is in a record: a schema
/// field's [`Source`] (an argument, `aux`, a string), or the header's
/// thread, process and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// The record's argument of this index.
    Arg(u8),
    /// The header's `aux` byte.
    Aux,
    /// The record's string of this index.
    Text(u8),
    Tid,
    Pid,
    Ts,
}

impl From<Source> for At {
    fn from(source: Source) -> At {
        match source {
            Source::Arg(i) => At::Arg(i),
            Source::Aux => At::Aux,
            Source::Text(i) => At::Text(i),
        }
    }
}

impl At {
    /// The value slot the eBPF programs (and [`values`]) give it.
    pub const fn fixed_slot(self) -> Option<u8> {
        match self {
            At::Arg(i) if i < SLOT_SIZE => Some(i),
            At::Aux => Some(SLOT_SIZE),
            At::Tid => Some(SLOT_TID),
            At::Pid => Some(SLOT_PID),
            At::Ts => Some(SLOT_TS),
            At::Arg(_) | At::Text(_) => None,
        }
    }

    /// Its value in `event`, as the record holds it (0 where it has none).
    #[inline(always)]
    pub fn read(self, event: &Event<'_>) -> u64 {
        match (self, &event.body) {
            (At::Arg(i), Body::Args(args)) => args.get(i as usize).copied().unwrap_or(0),
            (At::Arg(i), Body::Usdt { args, .. }) => args.get(i as usize).copied().unwrap_or(0),
            (At::Arg(0), Body::Span { id, .. }) => *id,
            (At::Aux, _) => event.header.aux.into(),
            (At::Tid, _) => event.header.tid.into(),
            (At::Pid, _) => event.header.pid.into(),
            (At::Ts, _) => event.header.ts_ns,
            _ => 0,
        }
    }
}

/// A field filters and `--by` can name in a type: a part of one of its
/// schema's fields, or the header's `tid` or `pid`.
#[derive(Debug, Clone, Copy)]
pub struct Named<'a> {
    /// Its name (a part's own, a branch's `conditional`).
    pub name: &'a str,
    /// Where its value is.
    pub at: At,
    /// The part: `(value >> shift) & mask`.
    pub shift: u8,
    /// See `shift`.
    pub mask: u64,
    /// How the part reads.
    pub shows: Shows,
    /// Its schema field and that field's index; None: `tid`, `pid`.
    pub field: Option<(usize, &'a FieldSchema)>,
}

impl Named<'_> {
    /// The bytes and signedness its value is cut to: its schema field's;
    /// `tid` and `pid` whole.
    pub fn cut(&self) -> (u8, bool) {
        self.field.map_or((8, false), |(_, f)| (f.bytes, f.signed))
    }
}

/// The fields filters and `--by` can name in type `t`, with where they
/// are: its schema's fields' parts (a branch's `kind` and `conditional`
/// apart), then `tid` and `pid`; none for a type without a schema.
pub fn named(types: &Types, t: TypeId) -> impl Iterator<Item = Named<'_>> {
    let fields = types.fields(t);
    let header = [("tid", At::Tid), ("pid", At::Pid)].map(|(name, at)| Named {
        name,
        at,
        shift: 0,
        mask: u64::MAX,
        shows: Shows::Number(FieldKind::Unsigned),
        field: None,
    });
    let parts = (fields.unwrap_or(&[]).iter().enumerate()).flat_map(|(i, field)| {
        field.reading.parts().iter().map(move |part| Named {
            name: part.name.unwrap_or(&field.name),
            at: field.source.into(),
            shift: part.shift,
            // The size is the header's byte.
            mask: match field.source {
                Source::Aux => part.mask & 0xff,
                _ => part.mask,
            },
            shows: part.shows,
            field: Some((i, field)),
        })
    });
    let header = fields.is_some().then_some(header).into_iter().flatten();
    parts.chain(header)
}

/// The field `name` of type `t`.
pub fn named_field<'a>(types: &'a Types, t: TypeId, name: &str) -> Option<Named<'a>> {
    named(types, t).find(|f| f.name == name)
}

/// The field naming an event's type, which every type has.
const EVENT_FIELD: &str = "event";
/// The field of an event's time, which every type has.
const TS_FIELD: &str = "ts_ns";

/// The catalogue's types, for the functions that take no session.
static CATALOGUE: std::sync::LazyLock<Types> = std::sync::LazyLock::new(Types::default);

/// The fields filters and `top --by` can use for catalogue kind `kind`,
/// with where the eBPF programs' value slots have them ([`named`]).
pub fn fields_of(kind: EventKind) -> Vec<(&'static str, FieldRef)> {
    let fields = named(&CATALOGUE, kind as TypeId).filter_map(|f| {
        let at = match f.at {
            At::Text(text) => return Some((f.name, FieldRef::Text(text))),
            at => at.fixed_slot()?,
        };
        let value = FieldRef::Value {
            slot: at,
            shift: f.shift,
            mask: f.mask,
            names: f.shows.names(),
        };
        Some((f.name, value))
    });
    fields.collect()
}

/// The types among `candidates` that have field `name`, or an error
/// saying which types have it.
pub fn types_with_field(
    types: &Types,
    name: &str,
    column: usize,
    candidates: &[TypeId],
) -> Result<Vec<TypeId>, FilterError> {
    let has = |t: &TypeId| named_field(types, *t, name).is_some();
    let having: Vec<TypeId> = candidates.iter().copied().filter(has).collect();
    if !having.is_empty() {
        return Ok(having);
    }
    let anywhere: Vec<&str> = types.ids().filter(has).map(|t| types.name(t)).collect();
    Err(FilterError::at(
        column,
        if anywhere.is_empty() {
            format!("no event type has a field '{name}'")
        } else {
            format!(
                "no selected event type has a field '{name}' ({} {} it)",
                anywhere.join(", "),
                if anywhere.len() == 1 { "has" } else { "have" }
            )
        },
    ))
}

/// Every type's program, and the strings their text tests use.
#[derive(Clone)]
pub struct Filters {
    /// Per type id (`schema::Types`: the catalogue kinds' ids, the eBPF
    /// programs' programs, then the declared types').
    pub programs: Vec<FilterProgram>,
    /// Per type id: what its program's value slots hold.
    layouts: Vec<Layout>,
    texts: Vec<String>,
    /// Register names a comparison may use (`reg == sp`).
    registers: RegisterNames,
    /// The session's types.
    types: Types,
    /// The filtered declared type of each of its sites, by spec id.
    by_spec: HashMap<u32, TypeId>,
}

/// What a type's program's value slots hold.
#[derive(Clone, Debug)]
enum Layout {
    /// What [`values`] (and the eBPF programs) put in them: a catalogue
    /// kind's.
    Fixed,
    /// The values its programs test, in the order they name them, each
    /// cut to its width: a declared type's, whose fields, `tid`, `pid` and
    /// `ts_ns` outnumber the slots and which the kernel never filters.
    Chosen(Vec<(At, u8, bool)>),
}

impl Layout {
    /// The slot of the value `at` (cut to `cut`'s bytes and signedness):
    /// a chosen layout takes the next free one; None when none is.
    fn slot(&mut self, at: At, (bytes, signed): (u8, bool)) -> Option<u8> {
        let slots = match self {
            Layout::Fixed => return at.fixed_slot(),
            Layout::Chosen(slots) => slots,
        };
        if let Some(at) = slots.iter().position(|s| s.0 == at) {
            return Some(at as u8);
        }
        if slots.len() == VALUE_SLOTS {
            return None;
        }
        slots.push((at, bytes, signed));
        Some(slots.len() as u8 - 1)
    }

    /// `event`'s value slots.
    #[inline(always)]
    fn values(&self, event: &Event<'_>) -> [u64; VALUE_SLOTS] {
        match self {
            Layout::Fixed => values(event),
            Layout::Chosen(slots) => {
                let mut values = [0u64; VALUE_SLOTS];
                for (value, &(at, bytes, signed)) in values.iter_mut().zip(slots) {
                    *value = widen(at.read(event), bytes, signed);
                }
                values
            }
        }
    }
}

/// The names a field's values go by in a comparison.
#[derive(Clone, Copy)]
enum ValueNames {
    None,
    /// Fixed names (`call`, `entry`, `true`).
    Fixed(&'static [(&'static str, u64)]),
    /// The guest's register names.
    Register,
    /// Type `.0`'s enum field `.1`'s.
    Enum(TypeId, usize),
}

impl ValueNames {
    /// The names of field `field`'s values: an enum's, `true` and
    /// `false`, the guest's registers, a decoded kind's; numbers by none.
    fn of(t: TypeId, field: &Named<'_>) -> ValueNames {
        match (field.shows, field.field) {
            (Shows::Number(FieldKind::Enum), Some((i, _))) => ValueNames::Enum(t, i),
            (Shows::Number(FieldKind::Register), _) => ValueNames::Register,
            (shows, _) if !shows.names().is_empty() => ValueNames::Fixed(shows.names()),
            _ => ValueNames::None,
        }
    }
}

impl Filters {
    /// Checks and compiles `--filter` expressions (ANDed) and `--sample`
    /// for the `selected` types. An error names the expression.
    pub fn compile(
        filters: &[String],
        sample: u64,
        selected: &[EventKind],
    ) -> Result<Filters, (String, FilterError)> {
        Filters::compile_named(filters, sample, selected, RegisterNames::default(), &[])
    }

    /// [`Filters::compile`], where register fields also take the names the
    /// guest description gives (`reg_write: reg == sp`), and the event
    /// types the emulator declared may be filtered by their fields.
    pub fn compile_named(
        filters: &[String],
        sample: u64,
        selected: &[EventKind],
        registers: RegisterNames,
        declared: &[DeclaredSites],
    ) -> Result<Filters, (String, FilterError)> {
        let types = Types::new(declared);
        let layouts = (0..types.len()).map(|t| match types.declared(t) {
            Some(_) => Layout::Chosen(Vec::new()),
            None => Layout::Fixed,
        });
        let mut out = Filters {
            programs: vec![FilterProgram::default(); types.len()],
            layouts: layouts.collect(),
            texts: Vec::new(),
            registers,
            by_spec: HashMap::new(),
            types,
        };
        // Per type: the programs' ops before they are cut to the kernel's bound.
        let mut ops: Vec<Vec<FilterOp>> = vec![Vec::new(); out.types.len()];
        for text in filters {
            let compiled = out.one(text, selected, &mut ops);
            compiled.map_err(|e| (text.clone(), e))?;
        }
        // Every selected kind's program (sampling them, filtered or not),
        // and each filtered declared type's.
        let declared = out.types.declared_ids().filter(|&t| !ops[t].is_empty());
        let compiled: Vec<TypeId> = (selected.iter().map(|&k| k as TypeId))
            .chain(declared)
            .collect();
        for t in compiled {
            let type_ops = &ops[t];
            if type_ops.len() > FILTER_MAX_OPS {
                let all = filters.join("' --filter '");
                let needs = format!(
                    "{} needs {} operations, more than the {FILTER_MAX_OPS} a filter program holds",
                    out.types.name(t),
                    type_ops.len()
                );
                return Err((all, FilterError::at(1, needs)));
            }
            let program = &mut out.programs[t];
            program.ops[..type_ops.len()].copy_from_slice(type_ops);
            program.len = type_ops.len() as u32;
            program.sample_every = sample;
            // Text and time are the loader's to test; a USDT site's program
            // (a declared type's events are USDT events) neither filters
            // nor samples.
            let loader_only = type_ops.iter().any(|op| {
                op.code == FilterOp::TEXT || (op.code == FilterOp::TEST && op.slot == SLOT_TS)
            }) || out.types.event_kind(t) == Some(EventKind::Usdt);
            if !loader_only {
                program.flags |= FilterProgram::KERNEL;
            }
            if let Some(sites) = out.types.declared(t) {
                out.by_spec.extend(sites.spec_ids.iter().map(|&id| (id, t)));
            }
        }
        Ok(out)
    }

    fn one(
        &mut self,
        text: &str,
        selected: &[EventKind],
        ops: &mut [Vec<FilterOp>],
    ) -> Result<(), FilterError> {
        let Parsed { types, expr } = parse::parse(text)?;
        let targets = if types.is_empty() {
            self.applies_to(&expr, selected)?
        } else {
            let mut targets = Vec::new();
            for (name, column) in &types {
                targets.extend(self.named_type(name, *column, selected)?);
            }
            targets
        };
        for t in targets {
            let mut program = Vec::new();
            self.emit(&expr, t, &mut program)?;
            let all = &mut ops[t];
            let and = !all.is_empty();
            all.extend(program);
            if and {
                all.push(op(FilterOp::AND, 0, 0, 0, 0, 0));
            }
        }
        Ok(())
    }

    /// The types `name` (before a filter's `:`) names: those of that name
    /// that are traced (the catalogue's if selected, declared ones).
    fn named_type(
        &self,
        name: &str,
        column: usize,
        selected: &[EventKind],
    ) -> Result<Vec<TypeId>, FilterError> {
        let types = &self.types;
        let named: Vec<TypeId> = (types.ids())
            .filter(|&t| types.name(t) == name && types.kind(t) != Some(EventKind::Usdt))
            .collect();
        let traced = |t: &&TypeId| types.kind(**t).is_none_or(|k| selected.contains(&k));
        let targets: Vec<TypeId> = named.iter().filter(traced).copied().collect();
        if !targets.is_empty() {
            return Ok(targets);
        }
        if !named.is_empty() {
            return Err(FilterError::at(
                column,
                format!("{name} is not traced (add it to -e)"),
            ));
        }
        let names: Vec<&str> = (types.ids())
            .filter(|&t| types.kind(t) != Some(EventKind::Usdt))
            .map(|t| types.name(t))
            .collect();
        Err(FilterError::at(
            column,
            format!("no event type '{name}' (types: {})", names.join(" ")),
        ))
    }

    /// The selected types, and the declared ones, that have every field
    /// `expr` uses.
    fn applies_to(&self, expr: &Expr, selected: &[EventKind]) -> Result<Vec<TypeId>, FilterError> {
        let mut fields = Vec::new();
        tests(expr, &mut |t| fields.push((t.field.clone(), t.column)));
        let candidates: Vec<TypeId> = (selected.iter().map(|&k| k as TypeId))
            .chain(self.types.declared_ids())
            .collect();
        let mut targets = candidates.clone();
        // `event` and `ts_ns` every type has.
        let typed = fields
            .iter()
            .filter(|(n, _)| n != EVENT_FIELD && n != TS_FIELD);
        for (name, column) in typed {
            let having = types_with_field(&self.types, name, *column, &candidates)?;
            targets.retain(|t| having.contains(t));
        }
        if targets.is_empty() {
            let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
            return Err(FilterError::at(
                fields[0].1,
                format!(
                    "no selected event type has all of the fields {} (name the type: 'TYPE: …')",
                    names.join(", ")
                ),
            ));
        }
        Ok(targets)
    }

    /// Appends `expr`'s ops for type `t`, postfix.
    fn emit(&mut self, expr: &Expr, t: TypeId, out: &mut Vec<FilterOp>) -> Result<(), FilterError> {
        match expr {
            Expr::And(a, b) | Expr::Or(a, b) => {
                self.emit(a, t, out)?;
                self.emit(b, t, out)?;
                let code = if matches!(expr, Expr::And(..)) {
                    FilterOp::AND
                } else {
                    FilterOp::OR
                };
                out.push(op(code, 0, 0, 0, 0, 0));
            }
            Expr::Not(a) => {
                self.emit(a, t, out)?;
                out.push(op(FilterOp::NOT, 0, 0, 0, 0, 0));
            }
            Expr::Test(test) => self.test(test, t, out)?,
        }
        Ok(())
    }

    /// Where type `t`'s field `name` is in its program's value slots, and
    /// the names its values go by.
    fn resolve(
        &mut self,
        t: TypeId,
        name: &str,
        column: usize,
    ) -> Result<(FieldRef, ValueNames), FilterError> {
        let (at, shift, mask, names, cut) = if name == TS_FIELD {
            (At::Ts, 0, u64::MAX, ValueNames::None, (8, false))
        } else {
            let Some(f) = named_field(&self.types, t, name) else {
                let names: Vec<&str> = named(&self.types, t).map(|f| f.name).collect();
                return Err(no_field(column, self.types.name(t), name, &names));
            };
            (f.at, f.shift, f.mask, ValueNames::of(t, &f), f.cut())
        };
        if let At::Text(index) = at {
            return Ok((FieldRef::Text(index), names));
        }
        let Some(slot) = self.layouts[t].slot(at, cut) else {
            return Err(FilterError::at(
                column,
                format!(
                    "filters of {} use more than {VALUE_SLOTS} of its fields, tid and pid",
                    self.types.name(t)
                ),
            ));
        };
        let field = FieldRef::Value {
            slot,
            shift,
            mask,
            names: &[],
        };
        Ok((field, names))
    }

    /// An enum field's values.
    fn enum_values(&self, t: TypeId, i: usize) -> Option<&EnumValues> {
        let field = self.types.fields(t)?.get(i)?;
        field.values.as_ref()
    }

    /// The value `name` names for a field whose values go by `names`.
    fn value_named(&self, names: ValueNames, name: &str) -> Option<u64> {
        match names {
            ValueNames::None => None,
            ValueNames::Fixed(fixed) => fixed.iter().find(|(n, _)| *n == name).map(|(_, v)| *v),
            ValueNames::Register => self.registers.num_of(name),
            ValueNames::Enum(t, i) => self.enum_values(t, i)?.value_of(name),
        }
    }

    /// Every name a field's values go by, for an error.
    fn value_names(&self, names: ValueNames) -> Vec<&str> {
        match names {
            ValueNames::None => Vec::new(),
            ValueNames::Fixed(fixed) => fixed.iter().map(|(n, _)| *n).collect(),
            ValueNames::Register => self.registers.names(),
            ValueNames::Enum(t, i) => (self.enum_values(t, i).iter())
                .flat_map(|e| e.values.iter().map(|(_, n)| n.as_str()))
                .collect(),
        }
    }

    // Over 80 lines: one test's checks against the type (field, mask,
    // operator, values), each error pointing at its column, in the order
    // the expression reads.
    fn test(&mut self, test: &Test, t: TypeId, out: &mut Vec<FilterOp>) -> Result<(), FilterError> {
        if test.field == EVENT_FIELD {
            return self.event_test(test, t, out);
        }
        let (field, value_names) = self.resolve(t, &test.field, test.column)?;
        let number_only = |what: &str| {
            FilterError::at(test.column, format!("'{}' is a number: {what}", test.field))
        };
        match (field, &test.op) {
            (FieldRef::Text(index), Op::TextEq(s, eq)) if test.mask.is_none() => {
                let cmp = if *eq { CMP_EQ } else { CMP_NE };
                out.push(op(FilterOp::TEXT, index, cmp, 0, 0, self.text(s)));
            }
            (FieldRef::Text(index), Op::Contains(s)) if test.mask.is_none() => {
                out.push(op(FilterOp::TEXT, index, CMP_CONTAINS, 0, 0, self.text(s)));
            }
            (FieldRef::Text(_), _) => {
                return Err(FilterError::at(
                    test.column,
                    format!(
                        "'{}' is text: compare it with == \"…\", != \"…\" or contains \"…\"",
                        test.field
                    ),
                ))
            }
            (FieldRef::Value { .. }, Op::TextEq(..) | Op::Contains(_)) => {
                return Err(number_only("compare it with a number or a name"))
            }
            (
                FieldRef::Value {
                    slot, shift, mask, ..
                },
                Op::In { lo, hi_inclusive },
            ) => {
                let mask = mask & test.mask.unwrap_or(u64::MAX);
                out.push(op(FilterOp::TEST, slot, CMP_GE, shift, mask, *lo));
                out.push(op(FilterOp::TEST, slot, CMP_LE, shift, mask, *hi_inclusive));
                out.push(op(FilterOp::AND, 0, 0, 0, 0, 0));
            }
            (
                FieldRef::Value {
                    slot, shift, mask, ..
                },
                Op::Cmp(cmp, value),
            ) => {
                let value = match value {
                    Value::Number(n) => *n,
                    Value::Name(name, column) => {
                        self.value_named(value_names, name).ok_or_else(|| {
                            let known = self.value_names(value_names);
                            FilterError::at(
                                *column,
                                if known.is_empty() {
                                    format!(
                                        "'{name}' is not a number ('{}' takes numbers)",
                                        test.field
                                    )
                                } else {
                                    format!(
                                        "'{name}' is not a value of '{}' ({})",
                                        test.field,
                                        known.join(" ")
                                    )
                                },
                            )
                        })?
                    }
                };
                let mask = mask & test.mask.unwrap_or(u64::MAX);
                out.push(op(FilterOp::TEST, slot, *cmp, shift, mask, value));
            }
        }
        Ok(())
    }

    /// `event == NAME` or `event != NAME` for type `t`: whether it is
    /// called so is known here, so the test is a constant (a masked-out
    /// value compared with 0), which the kernel can run too.
    fn event_test(
        &self,
        test: &Test,
        t: TypeId,
        out: &mut Vec<FilterOp>,
    ) -> Result<(), FilterError> {
        let (eq, name, column) = match &test.op {
            Op::Cmp(cmp @ (CMP_EQ | CMP_NE), Value::Name(name, column)) if test.mask.is_none() => {
                (*cmp == CMP_EQ, name, *column)
            }
            _ => {
                return Err(FilterError::at(
                    test.column,
                    "'event' is a type's name: compare it with == or != and a name \
                     (event == mem_write)",
                ))
            }
        };
        let names: Vec<&str> = self.types.ids().map(|t| self.types.name(t)).collect();
        if !names.contains(&name.as_str()) {
            return Err(FilterError::at(
                column,
                format!("no event type '{name}' (types: {})", names.join(" ")),
            ));
        }
        // A declared type's events are USDT events: `usdt` names them too.
        let is = self.types.name(t) == name
            || (self.types.event_kind(t)).is_some_and(|k| k.probe_name() == name);
        let cmp = if is == eq { CMP_EQ } else { CMP_NE };
        out.push(op(FilterOp::TEST, 0, cmp, 0, 0, 0));
        Ok(())
    }

    fn text(&mut self, s: &str) -> u64 {
        self.texts.push(s.to_string());
        (self.texts.len() - 1) as u64
    }

    /// Whether any type is filtered or sampled.
    pub fn any(&self) -> bool {
        self.programs.iter().any(|p| !p.keeps_all())
    }

    /// Whether a declared type is filtered (by the loader, in batches
    /// split for it).
    pub fn any_declared(&self) -> bool {
        !self.by_spec.is_empty()
    }

    /// The type whose program `event` passes: a filtered declared type's,
    /// else its kind's.
    #[inline(always)]
    fn type_of(&self, event: &Event<'_>) -> TypeId {
        if let Body::Usdt { spec_id, .. } = &event.body {
            if let Some(&t) = self.by_spec.get(spec_id) {
                return t;
            }
        }
        event.kind as TypeId
    }

    /// Whether `event` passes type `t`'s program (sampling aside).
    #[inline(always)]
    fn pass(&self, t: TypeId, event: &Event<'_>) -> bool {
        let texts = &self.texts;
        let values = self.layouts[t].values(event);
        self.programs[t].keeps(&values, |field, cmp, index| {
            let wanted = texts.get(index as usize).map_or("", String::as_str);
            text_test(event, field, cmp, wanted.as_bytes())
        })
    }

    /// Whether `event` matches its type's expressions (sampling aside);
    /// None when none applies to its type (`--trigger`).
    pub fn matches(&self, event: &Event<'_>) -> Option<bool> {
        let t = self.type_of(event);
        (self.programs[t].len != 0).then(|| self.pass(t, event))
    }

    /// Whether the kernel can apply `kind`'s program (numbers only, short enough).
    pub fn kernel_can(&self, kind: EventKind) -> bool {
        self.programs[kind as usize].flags & FilterProgram::KERNEL != 0
    }
}

/// `TYPE has no field 'NAME' (its fields: …)`.
fn no_field(column: usize, type_name: &str, name: &str, fields: &[&str]) -> FilterError {
    let fields = fields.join(" ");
    FilterError::at(
        column,
        format!("{type_name} has no field '{name}' (its fields: {fields})"),
    )
}

fn tests<'a>(expr: &'a Expr, f: &mut impl FnMut(&'a Test)) {
    match expr {
        Expr::And(a, b) | Expr::Or(a, b) => {
            tests(a, f);
            tests(b, f);
        }
        Expr::Not(a) => tests(a, f),
        Expr::Test(t) => f(t),
    }
}

fn op(code: u8, slot: u8, cmp: u8, shift: u8, mask: u64, value: u64) -> FilterOp {
    FilterOp {
        code,
        slot,
        cmp,
        shift,
        _reserved: 0,
        mask,
        value,
    }
}

/// An event's value slot `slot`: [`values`]' one.
#[inline(always)]
pub fn value_slot(event: &Event<'_>, slot: u8) -> u64 {
    match (slot, &event.body) {
        (slot @ 0..=3, Body::Args(args)) => args[slot as usize],
        (0, Body::Span { id, .. }) => *id,
        (SLOT_SIZE, _) => event.header.aux.into(),
        (SLOT_TID, _) => event.header.tid.into(),
        (SLOT_PID, _) => event.header.pid.into(),
        (SLOT_TS, _) => event.header.ts_ns,
        _ => 0,
    }
}

/// An event's value slots (see [`styx_common::filter`]).
pub fn values(event: &Event<'_>) -> [u64; VALUE_SLOTS] {
    let mut values = [0u64; VALUE_SLOTS];
    match &event.body {
        Body::Args(args) => values[..4].copy_from_slice(args),
        Body::Span { id, .. } => values[0] = *id,
        Body::Marker(_) | Body::Usdt { .. } | Body::Call(_) => {}
    }
    values[SLOT_SIZE as usize] = event.header.aux.into();
    values[SLOT_TID as usize] = event.header.tid.into();
    values[SLOT_PID as usize] = event.header.pid.into();
    values[SLOT_TS as usize] = event.header.ts_ns;
    values
}

/// The loader's side of `--filter` and `--sample`: the events the kernel
/// did not already filter (batched ones, text tests), kept or left out.
pub struct Keep {
    filters: Filters,
    /// Per type id: the eBPF programs already applied its program.
    in_kernel: Vec<bool>,
    /// Events of each sampled (thread, type id) that passed the filters
    /// so far.
    passed: HashMap<(u32, TypeId), u64>,
    /// Events left out here, per kind id.
    pub left_out: [u64; EVENT_KIND_SLOTS as usize],
}

impl Keep {
    /// Applies `filters` to every kind but those `in_kernel` says the eBPF
    /// programs filter.
    pub fn new(filters: Filters, in_kernel: impl Fn(EventKind) -> bool) -> Keep {
        let mut kernel = vec![false; filters.programs.len()];
        for &kind in EventKind::ALL {
            kernel[kind as usize] = in_kernel(kind);
        }
        Keep {
            filters,
            in_kernel: kernel,
            passed: HashMap::new(),
            left_out: [0; EVENT_KIND_SLOTS as usize],
        }
    }

    /// Whether to keep `event`.
    #[inline]
    pub fn keeps(&mut self, event: &Event<'_>) -> bool {
        let t = self.filters.type_of(event);
        let program = &self.filters.programs[t];
        if self.in_kernel[t] || program.keeps_all() {
            return true;
        }
        let sample_every = program.sample_every;
        let pass = self.filters.pass(t, event);
        let keep = pass && (sample_every <= 1 || self.sampled(event.header.tid, t, sample_every));
        if !keep {
            self.left_out[event.kind as usize] += 1;
        }
        keep
    }

    /// Whether a passing event of thread `tid` and type `t`, sampled 1 in
    /// `every`, is one kept: events are counted only where sampled.
    #[inline(never)]
    fn sampled(&mut self, tid: u32, t: TypeId, every: u64) -> bool {
        let n = self.passed.entry((tid, t)).or_insert(0);
        let first_of_n = n.is_multiple_of(every);
        *n += 1;
        first_of_n
    }
}

fn text_test(event: &Event<'_>, field: u8, cmp: u8, wanted: &[u8]) -> bool {
    let text = match (&event.body, field) {
        (Body::Span { category, .. }, 0) => category,
        (Body::Span { name, .. }, 1) => name,
        (Body::Marker(text), 0) => text,
        _ => return false,
    };
    let bytes = text.bytes;
    match cmp {
        CMP_EQ => bytes == wanted && !text.truncated,
        CMP_NE => bytes != wanted || text.truncated,
        CMP_CONTAINS => wanted.is_empty() || bytes.windows(wanted.len()).any(|w| w == wanted),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::event::Text;
    use styx_common::{Branch, BranchKind, RecordHeader, Shape};

    const ALL: &[EventKind] = &[
        EventKind::InsnExec,
        EventKind::MemRead,
        EventKind::MemWrite,
        EventKind::Branch,
        EventKind::Marker,
        EventKind::Interrupt,
    ];

    fn event(kind: EventKind, args: [u64; 4], aux: u8) -> Event<'static> {
        Event {
            header: RecordHeader {
                kind: kind as u8,
                aux,
                tid: 7,
                pid: 3,
                ..RecordHeader::default()
            },
            kind,
            body: Body::Args(args),
        }
    }

    /// The walk every format shows and the fields filters and `--by` name
    /// both come from one table (`session::reading`): the same names, in
    /// the same order, for every numbers-only type.
    #[test]
    fn filters_name_the_fields_the_formats_show() {
        use crate::session::fields::{for_each_field, Field, Names};
        let names = Names::default();
        let kinds = EventKind::ALL.iter().copied();
        let numbers_only =
            kinds.filter(|k| matches!(k.shape(), Shape::Args(_) | Shape::ArgsAux(_)));
        for kind in numbers_only {
            // A branch that decodes (a conditional call); an interrupt's entry.
            let call = Branch::conditional(BranchKind::Call).encode();
            let e = match kind {
                EventKind::Branch => event(kind, [1, 2, call, 0], 4),
                _ => event(kind, [0, 1, 2, 3], 4),
            };
            let mut shown = Vec::new();
            let _ = for_each_field(&e, &names, |field| {
                shown.push(match field {
                    Field::Value(name, _) | Field::Name(name, _) | Field::Flag(name, _) => name,
                    _ => panic!("{kind:?}: a field of numbers only"),
                });
                Ok::<(), ()>(())
            });
            let filtered: Vec<&str> = (fields_of(kind).into_iter())
                .map(|(name, _)| name)
                .filter(|name| !["tid", "pid"].contains(name))
                .collect();
            assert_eq!(shown, filtered, "{kind:?}");
        }
    }

    fn keep(filters: &[&str], sample: u64) -> Keep {
        let filters: Vec<String> = filters.iter().map(|s| s.to_string()).collect();
        Keep::new(Filters::compile(&filters, sample, ALL).unwrap(), |_| false)
    }

    fn error(filter: &str, selected: &[EventKind]) -> String {
        match Filters::compile(&[filter.to_string()], 0, selected) {
            Err((_, e)) => e.to_string(),
            Ok(_) => panic!("{filter} compiled"),
        }
    }

    #[test]
    fn ranges_masks_and_logic() {
        let mut k = keep(&["addr in 0x8000..0x9000 && !(val & 0x80 != 0)"], 0);
        let w = |addr, val| event(EventKind::MemWrite, [1, addr, val, 0], 1);
        assert!(k.keeps(&w(0x8000, 0x7f)));
        assert!(k.keeps(&w(0x8fff, 0)));
        assert!(!k.keeps(&w(0x9000, 0)));
        assert!(!k.keeps(&w(0x7fff, 0)));
        assert!(!k.keeps(&w(0x8001, 0x80)));
        // Types without `addr` are not filtered.
        assert!(k.keeps(&event(EventKind::InsnExec, [5, 6, 0, 0], 0)));
        assert_eq!(k.left_out[EventKind::MemWrite as usize], 3);
    }

    #[test]
    fn named_types_sizes_and_branch_names() {
        let mut k = keep(
            &[
                "mem_write: size == 2 || pc >= 100",
                "branch: kind == call && conditional == false",
            ],
            0,
        );
        assert!(k.keeps(&event(EventKind::MemWrite, [1, 0, 0, 0], 2)));
        assert!(!k.keeps(&event(EventKind::MemWrite, [1, 0, 0, 0], 1)));
        assert!(k.keeps(&event(EventKind::MemWrite, [100, 0, 0, 0], 1)));
        // mem_read is not named: kept.
        assert!(k.keeps(&event(EventKind::MemRead, [1, 0, 0, 0], 1)));
        let call = Branch::unconditional(BranchKind::Call).encode();
        let cond_call = Branch::conditional(BranchKind::Call).encode();
        let jump = Branch::unconditional(BranchKind::Jump).encode();
        assert!(k.keeps(&event(EventKind::Branch, [1, 2, call, 0], 0)));
        assert!(!k.keeps(&event(EventKind::Branch, [1, 2, cond_call, 0], 0)));
        assert!(!k.keeps(&event(EventKind::Branch, [1, 2, jump, 0], 0)));
    }

    #[test]
    fn text_fields() {
        let mut k = keep(&[r#"marker: text contains "reset""#], 0);
        let marker = |s: &'static str| Event {
            header: RecordHeader {
                kind: EventKind::Marker as u8,
                ..RecordHeader::default()
            },
            kind: EventKind::Marker,
            body: Body::Marker(Text {
                bytes: s.as_bytes(),
                truncated: false,
            }),
        };
        assert!(k.keeps(&marker("cold reset vector")));
        assert!(!k.keeps(&marker("tick")));
        let f = Filters::compile(&[r#"marker: text == "x""#.into()], 0, ALL).unwrap();
        assert!(!f.kernel_can(EventKind::Marker), "text is the loader's");
        let f = Filters::compile(&["pc == 1".into()], 0, ALL).unwrap();
        assert!(f.kernel_can(EventKind::InsnExec) && f.kernel_can(EventKind::MemRead));
    }

    #[test]
    fn sampling_is_per_thread_and_type() {
        let mut k = keep(&["pc < 10"], 3);
        let kept: Vec<u64> = (0..20)
            .filter(|&pc| k.keeps(&event(EventKind::InsnExec, [pc, 0, 0, 0], 0)))
            .collect();
        // The 1st, 4th, 7th… of those passing (pc 0..10).
        assert_eq!(kept, vec![0, 3, 6, 9]);
        let mut other = event(EventKind::InsnExec, [0, 0, 0, 0], 0);
        other.header.tid = 8;
        assert!(k.keeps(&other), "another thread counts from its own first");
    }

    #[test]
    fn every_type_has_its_name_and_time() {
        let mut k = keep(
            &["ts_ns >= 100 && event == mem_write || event == marker"],
            0,
        );
        let at = |kind, ts| {
            let mut e = event(kind, [1, 2, 3, 0], 1);
            e.header.ts_ns = ts;
            e
        };
        assert!(k.keeps(&at(EventKind::MemWrite, 100)));
        assert!(!k.keeps(&at(EventKind::MemWrite, 99)));
        assert!(!k.keeps(&at(EventKind::MemRead, 100)));
        assert!(k.keeps(&at(EventKind::Marker, 5)));
        let f = Filters::compile(&["event != branch".into()], 0, ALL).unwrap();
        assert!(
            f.kernel_can(EventKind::Branch),
            "a type's name is a constant"
        );
        let f = Filters::compile(&["ts_ns < 5".into()], 0, ALL).unwrap();
        assert!(!f.kernel_can(EventKind::InsnExec), "time is the loader's");
        // A declared type answers to its name and to `usdt`.
        let filters = declared_filters(&["event == mmio_write", "ts_ns < 50"]);
        let mut k = Keep::new(filters.unwrap(), |_| false);
        assert!(k.keeps(&usdt(3, &[1, 0, 0, 0, 0])));
        assert!(!k.keeps(&event(EventKind::InsnExec, [1, 0, 0, 0], 0)));
        let mut late = usdt(3, &[1, 0, 0, 0, 0]);
        late.header.ts_ns = 50;
        assert!(!k.keeps(&late));
        let filters = declared_filters(&["event != usdt"]);
        let mut k = Keep::new(filters.unwrap(), |_| false);
        assert!(!k.keeps(&usdt(3, &[1, 0, 0, 0, 0])));
        assert!(k.keeps(&event(EventKind::InsnExec, [1, 0, 0, 0], 0)));
        assert_eq!(
            error("event == mem_wirte", ALL),
            format!(
                "at column 10: no event type 'mem_wirte' (types: {})",
                EventKind::ALL
                    .iter()
                    .map(|k| k.probe_name())
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        );
        assert!(error("event in 1..2", ALL).contains("compare it with == or != and a name"));
    }

    /// Whatever is typed gives a program or an error, never a panic:
    /// every prefix of some expressions, and each with one byte replaced
    /// by characters the grammar uses (and one it does not).
    #[test]
    fn no_input_panics() {
        let seeds = [
            r#"mem_write, branch: addr in 0x10..=0x20 && !(val & 0x80 != 0) || kind == call"#,
            r#"marker: text contains "é\"" || (tid >= 0b101 && pid < 99999999999999999999)"#,
        ];
        let alphabet = [
            '(', ')', '!', '&', '|', '.', '=', '"', ':', ',', '0', 'x', 'é', ' ',
        ];
        for seed in seeds {
            for (at, _) in seed.char_indices() {
                let _ = Filters::compile(&[seed[..at].to_string()], 3, ALL);
                for c in alphabet {
                    let mut mutated = seed.to_string();
                    mutated.replace_range(
                        at..at + seed[at..].chars().next().unwrap().len_utf8(),
                        &c.to_string(),
                    );
                    let _ = Filters::compile(&[mutated], 0, ALL);
                }
            }
        }
    }

    /// styx-declared's `mmio_write`, its sites spec ids 3 and 5.
    fn mmio_write() -> DeclaredSites {
        use crate::session::declared::{DeclaredField, EnumValues, EventType};
        let field = DeclaredField::new;
        let devices = EnumValues {
            name: "Device".into(),
            values: vec![(0, "Uart".into()), (1, "Timer".into()), (7, "Dma".into())],
        };
        DeclaredSites {
            event: EventType {
                provider: "emu".into(),
                name: "mmio_write".into(),
                fields: vec![
                    field("pc", FieldKind::Unsigned, 4, None),
                    field("device", FieldKind::Enum, 1, Some(devices)),
                    field("addr", FieldKind::Address, 4, None),
                    field("on", FieldKind::Bool, 1, None),
                    field("delta", FieldKind::Signed, 1, None),
                ],
            },
            spec_ids: vec![3, 5],
        }
    }

    fn declared_filters(filters: &[&str]) -> Result<Filters, String> {
        let filters: Vec<String> = filters.iter().map(|s| s.to_string()).collect();
        let declared = [mmio_write()];
        Filters::compile_named(&filters, 1, ALL, RegisterNames::default(), &declared)
            .map_err(|(_, e)| e.to_string())
    }

    fn usdt(spec_id: u32, args: &[u64]) -> Event<'_> {
        let event = Event::usdt(spec_id, args);
        Event {
            header: RecordHeader {
                tid: 7,
                ..event.header
            },
            ..event
        }
    }

    /// A declared type's fields as their kinds read: an enum value by
    /// name in any case, an address range, a bool, a signed value as its
    /// two's complement; on every site of the type; other probes kept.
    #[test]
    fn declared_types_filter_by_their_fields() {
        let filters = declared_filters(&["mmio_write: device == uart && addr in 0x10..0x20"]);
        let mut k = Keep::new(filters.unwrap(), |_| false);
        assert!(k.keeps(&usdt(3, &[1, 0, 0x10, 0, 0])));
        assert!(k.keeps(&usdt(5, &[1, 0, 0x1f, 0, 0])));
        assert!(!k.keeps(&usdt(3, &[1, 0, 0x20, 0, 0])));
        assert!(!k.keeps(&usdt(3, &[1, 7, 0x10, 0, 0])));
        assert!(k.keeps(&usdt(9, &[1, 7, 0x10, 0, 0])), "not mmio_write");
        assert_eq!(k.left_out[EventKind::Usdt as usize], 2);
        // No type named: every type with the fields, declared ones too.
        let filters =
            declared_filters(&["device == Dma || on == true", "delta == 0xffffffffffffffff"]);
        let mut k = Keep::new(filters.unwrap(), |_| false);
        assert!(k.keeps(&usdt(3, &[1, 7, 0, 0, 0xff])));
        assert!(k.keeps(&usdt(3, &[1, 0, 0, 1, 0xff])));
        assert!(!k.keeps(&usdt(3, &[1, 0, 0, 0, 0xff])));
        assert!(!k.keeps(&usdt(3, &[1, 7, 0, 0, 0x7f])));
        // tid, unnamed, is every type's (declared ones' too).
        let filters = declared_filters(&["tid == 8"]);
        let mut k = Keep::new(filters.unwrap(), |_| false);
        assert!(!k.keeps(&usdt(3, &[1, 7, 0, 0, 0])));
        // The trigger's question.
        let filters = declared_filters(&["mmio_write: pc >= 2 && tid == 7"]).unwrap();
        assert_eq!(filters.matches(&usdt(3, &[2, 0, 0, 0, 0])), Some(true));
        assert_eq!(filters.matches(&usdt(3, &[1, 0, 0, 0, 0])), Some(false));
        assert!(filters.any_declared());
    }

    /// A catalogue kind's program tests the eBPF programs' fixed value
    /// slots (the kernel runs the same bytes): an argument's by its index,
    /// the size as the header's byte, a branch's kind as its part.
    #[test]
    fn catalogue_fields_compile_to_the_fixed_slots() {
        let f = Filters::compile(
            &["mem_write: addr == 5 && size == 2 && tid == 7".into()],
            0,
            ALL,
        )
        .unwrap();
        let p = &f.programs[EventKind::MemWrite as usize];
        let tests: Vec<(u8, u8, u64, u64)> = (p.ops[..p.len as usize].iter())
            .filter(|op| op.code == FilterOp::TEST)
            .map(|op| (op.slot, op.shift, op.mask, op.value))
            .collect();
        assert_eq!(
            tests,
            [
                (1, 0, u64::MAX, 5),
                (SLOT_SIZE, 0, 0xff, 2),
                (SLOT_TID, 0, u64::MAX, 7)
            ]
        );
        assert!(f.kernel_can(EventKind::MemWrite));
        let f = Filters::compile(&["branch: conditional == true".into()], 0, ALL).unwrap();
        let op = f.programs[EventKind::Branch as usize].ops[0];
        assert_eq!(
            (op.slot, op.shift, op.mask, op.value),
            (2, Branch::CONDITIONAL_SHIFT, 1, 1)
        );
    }

    /// A declared type's program takes a slot per value it tests, in the
    /// order it names them, each cut to its field's width; more than the
    /// slots hold is an error.
    #[test]
    fn declared_programs_take_the_slots_they_use() {
        let filters = declared_filters(&["mmio_write: delta == 0xffffffffffffffff && tid == 7"]);
        let mut k = Keep::new(filters.unwrap(), |_| false);
        assert!(k.keeps(&usdt(3, &[0, 0, 0, 0, 0xff])));
        assert!(!k.keeps(&usdt(3, &[0, 0, 0, 0, 0x7f])));
        use crate::session::declared::{DeclaredField, EventType};
        let names = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let wide = DeclaredSites {
            event: EventType {
                provider: "emu".into(),
                name: "wide".into(),
                fields: (names.iter())
                    .map(|n| DeclaredField::new(n, FieldKind::Unsigned, 8, None))
                    .collect(),
            },
            spec_ids: vec![1],
        };
        let compile = |filter: &str| {
            let filters = [filter.to_string()];
            let declared = std::slice::from_ref(&wide);
            Filters::compile_named(&filters, 1, ALL, RegisterNames::default(), declared)
                .map_err(|(_, e)| e.to_string())
        };
        let all = names.map(|n| format!("{n} == 1")).join(" && ");
        let mut k = Keep::new(compile(&format!("wide: {all}")).unwrap(), |_| false);
        assert!(k.keeps(&usdt(1, &[1; 8])));
        assert!(!k.keeps(&usdt(1, &[1, 1, 1, 1, 1, 1, 1, 0])));
        assert_eq!(
            compile(&format!("wide: {all} && tid == 7")).err().unwrap(),
            "at column 87: filters of wide use more than 8 of its fields, tid and pid"
        );
    }

    #[test]
    fn declared_field_errors_name_what_the_type_has() {
        let error = |filter: &str| declared_filters(&[filter]).err().unwrap();
        assert_eq!(
            error("mmio_write: device == Uartt"),
            "at column 23: 'Uartt' is not a value of 'device' (Uart Timer Dma)"
        );
        assert_eq!(
            error("mmio_write: port == 1"),
            "at column 13: mmio_write has no field 'port' (its fields: pc device addr on delta tid pid)"
        );
        assert_eq!(
            error("mmio_read: pc == 1").split(" (").next().unwrap(),
            "at column 1: no event type 'mmio_read'"
        );
        assert!(error("mmio_read: pc == 1").ends_with(" mmio_write)"));
        assert_eq!(
            error("port == 1"),
            "at column 1: no event type has a field 'port'"
        );
    }

    #[test]
    fn errors_say_which_types_have_a_field() {
        assert_eq!(
            error("addr == 1", &[EventKind::InsnExec]),
            "at column 1: no selected event type has a field 'addr' (mem_read, mem_write have it)"
        );
        assert_eq!(
            error("mem_write: target == 1", ALL),
            "at column 12: mem_write has no field 'target' (its fields: pc addr val size tid pid)"
        );
        assert_eq!(
            error("mem_wrte: pc == 1", ALL).split(" (").next().unwrap(),
            "at column 1: no event type 'mem_wrte'"
        );
        assert_eq!(
            error("block: pc == 1", ALL),
            "at column 1: block is not traced (add it to -e)"
        );
        assert_eq!(
            error("branch: kind == cal", ALL),
            "at column 17: 'cal' is not a value of 'kind' (jump call ret interrupt exception return_from_interrupt return_from_exception hw_loop)"
        );
        assert_eq!(error("addr == 1 && target == 2", ALL), "at column 1: no selected event type has all of the fields addr, target (name the type: 'TYPE: …')");
        assert_eq!(
            error("zork == 1", ALL),
            "at column 1: no event type has a field 'zork'"
        );
        assert_eq!(
            error(r#"marker: text == 5"#, ALL),
            "at column 9: 'text' is text: compare it with == \"…\", != \"…\" or contains \"…\""
        );
    }
}
