//! Which events to keep: `--filter EXPR` and `--sample N`.
//!
//! An expression ([`parse`]) is checked against the event catalogue: each
//! field it names must be a field of the types it applies to (those it
//! names before `:`, else every selected type that has all its fields).
//! It is then compiled, per event type, into a
//! [`styx_common::filter::FilterProgram`]: the same bytes the eBPF
//! programs run for per-event delivery (a filtered-out event writes nothing
//! to the ring) and the loader runs with [`Keep`] for what the kernel
//! cannot filter: batched events (the kernel copies a batch whole), text
//! fields, programs longer than the kernel's bound.
//!
//! Event types the emulator declared (`styx_probe::event!`) are filtered
//! by their fields too (`mmio_write: device == Uart && addr in
//! 0x10..0x20`), always by the loader: their events are USDT events, whose
//! sites' programs do not filter. A declared field compares as its kind
//! reads: an enum value by its name (as written, else ignoring ASCII
//! case), a bool with `true`/`false`, a register by the guest's name for
//! it, numbers as they are (a signed field's value as its 64-bit two's
//! complement: `==` and `!=` for negative values, ranges for others).
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
use crate::session::declared::DeclaredSites;
use crate::session::guest::RegisterNames;
use crate::session::reading::{Reading, BOOLS};
use crate::session::schema::{self, Source};
use parse::{Expr, Op, Parsed, Test, Value};
use std::collections::HashMap;
use std::fmt;
use styx_common::filter::{
    FilterOp, FilterProgram, CMP_CONTAINS, CMP_EQ, CMP_GE, CMP_LE, CMP_NE, FILTER_MAX_OPS,
    SLOT_PID, SLOT_SIZE, SLOT_TID, SLOT_TS, VALUE_SLOTS,
};
use styx_common::schema::FieldKind;
use styx_common::{EventKind, EVENT_KIND_SLOTS};

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

/// Where a field's value is, for one event type.
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

/// The field naming an event's type, which every type has.
const EVENT_FIELD: &str = "event";
/// The field of an event's time, which every type has.
const TS_FIELD: &str = "ts_ns";
/// `ts_ns`'s place: its own slot, which only the loader fills.
const TS_REF: FieldRef = FieldRef::Value {
    slot: SLOT_TS,
    shift: 0,
    mask: u64::MAX,
    names: &[],
};

/// The names a field of `kind` compares by (the catalogue's numbers by
/// their kind too, `FieldType::kind`): an enum's values' (`enum_names`),
/// `true` and `false`, the guest's registers; numbers by none.
fn names_of_kind(kind: FieldKind, enum_names: ValueNames) -> ValueNames {
    match kind {
        FieldKind::Enum => enum_names,
        FieldKind::Bool => ValueNames::Fixed(BOOLS),
        FieldKind::Register => ValueNames::Register,
        FieldKind::Unsigned | FieldKind::Signed | FieldKind::Address => ValueNames::None,
    }
}

/// The fields filters and `top --by` can use for `kind`, with where they are:
/// the catalogue's fields (a branch's `kind` and `conditional` apart), then
/// `tid` and `pid`.
pub fn fields_of(kind: EventKind) -> Vec<(&'static str, FieldRef)> {
    let mut out = Vec::new();
    if kind == EventKind::Usdt {
        return out;
    }
    let value = |slot, shift, mask, names| FieldRef::Value {
        slot,
        shift,
        mask,
        names,
    };
    for field in schema::catalogue(kind) {
        let name: &'static str = &field.name;
        let arg = match field.source {
            // The size is in the header's aux byte, not an argument.
            Source::Aux => {
                out.push((name, value(SLOT_SIZE, 0, 0xff, &[][..])));
                continue;
            }
            Source::Text(text) => {
                out.push((name, FieldRef::Text(text)));
                continue;
            }
            Source::Arg(arg) => arg,
        };
        for part in field.reading.parts() {
            let names = part.shows.names();
            let name = part.name.unwrap_or(name);
            out.push((name, value(arg, part.shift, part.mask, names)));
        }
    }
    out.push(("tid", value(SLOT_TID, 0, u64::MAX, &[][..])));
    out.push(("pid", value(SLOT_PID, 0, u64::MAX, &[][..])));
    out
}

/// The field `name` of `kind`.
pub fn field_of(kind: EventKind, name: &str) -> Option<FieldRef> {
    fields_of(kind)
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| f)
}

/// The selected types that have field `name`, or an error saying which
/// types have it.
pub fn types_with_field(
    name: &str,
    column: usize,
    selected: &[EventKind],
) -> Result<Vec<EventKind>, FilterError> {
    let having: Vec<EventKind> = selected
        .iter()
        .copied()
        .filter(|&k| field_of(k, name).is_some())
        .collect();
    if !having.is_empty() {
        return Ok(having);
    }
    let anywhere: Vec<&str> = EventKind::ALL
        .iter()
        .filter(|&&k| field_of(k, name).is_some())
        .map(|k| k.probe_name())
        .collect();
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

/// Every selected type's program, and the strings their text tests use.
#[derive(Clone)]
pub struct Filters {
    /// Indexed by event kind id.
    pub programs: [FilterProgram; EVENT_KIND_SLOTS as usize],
    texts: Vec<String>,
    /// Register names a comparison may use (`reg == sp`).
    registers: RegisterNames,
    /// The session's declared types, and the program of each.
    declared: Vec<DeclaredSites>,
    declared_programs: Vec<DeclaredProgram>,
    /// Index in `declared` of each filtered declared type's sites, by spec id.
    declared_by_spec: HashMap<u32, usize>,
}

/// An event type a filter applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// One of the catalogue's.
    Kind(EventKind),
    /// One the emulator declared: its index in the session's.
    Declared(usize),
}

/// A declared type's program, and what each value slot it tests holds:
/// its fields are as many as the slots, so each program takes the slots
/// for the fields it uses, in the order it names them.
#[derive(Clone, Debug, Default)]
struct DeclaredProgram {
    ops: Vec<FilterOp>,
    program: FilterProgram,
    slots: Vec<Slot>,
}

/// What a declared type's value slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Its field of this index.
    Field(usize),
    Tid,
    Pid,
    Ts,
}

/// The names a field's values go by in a comparison.
#[derive(Clone, Copy)]
enum ValueNames {
    None,
    /// Fixed names (`call`, `entry`, `true`).
    Fixed(&'static [(&'static str, u64)]),
    /// The guest's register names.
    Register,
    /// Declared type `.0`'s enum field `.1`.
    Enum(usize, usize),
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
        let mut out = Filters {
            programs: [FilterProgram::default(); EVENT_KIND_SLOTS as usize],
            texts: Vec::new(),
            registers,
            declared: declared.to_vec(),
            declared_programs: vec![DeclaredProgram::default(); declared.len()],
            declared_by_spec: HashMap::new(),
        };
        // Per kind: the programs' ops before they are cut to the kernel's bound.
        let mut ops: Vec<Vec<FilterOp>> = vec![Vec::new(); EVENT_KIND_SLOTS as usize];
        for text in filters {
            let compiled = out.one(text, selected, &mut ops);
            compiled.map_err(|e| (text.clone(), e))?;
        }
        for &kind in selected {
            let program = &mut out.programs[kind as usize];
            let kind_ops = &ops[kind as usize];
            if kind_ops.len() > FILTER_MAX_OPS {
                let all = filters.join("' --filter '");
                return Err((
                    all,
                    FilterError::at(
                        1,
                        format!(
                            "{} needs {} operations, more than the {FILTER_MAX_OPS} a filter program holds",
                            kind.probe_name(),
                            kind_ops.len()
                        ),
                    ),
                ));
            }
            program.ops[..kind_ops.len()].copy_from_slice(kind_ops);
            program.len = kind_ops.len() as u32;
            program.sample_every = sample;
            // Text and time are the loader's to test; a USDT site's program
            // neither filters nor samples.
            let loader_only = kind_ops.iter().any(|op| {
                op.code == FilterOp::TEXT || (op.code == FilterOp::TEST && op.slot == SLOT_TS)
            }) || kind == EventKind::Usdt;
            if !loader_only {
                program.flags |= FilterProgram::KERNEL;
            }
        }
        for (d, declared) in out.declared_programs.iter_mut().enumerate() {
            if declared.ops.is_empty() {
                continue;
            }
            let event = &out.declared[d];
            if declared.ops.len() > FILTER_MAX_OPS {
                let all = filters.join("' --filter '");
                let needs = format!(
                    "{} needs {} operations, more than the {FILTER_MAX_OPS} a filter program holds",
                    event.event.name,
                    declared.ops.len()
                );
                return Err((all, FilterError::at(1, needs)));
            }
            let program = &mut declared.program;
            program.ops[..declared.ops.len()].copy_from_slice(&declared.ops);
            program.len = declared.ops.len() as u32;
            program.sample_every = sample;
            for &spec_id in &event.spec_ids {
                out.declared_by_spec.insert(spec_id, d);
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
        for target in targets {
            let mut program = Vec::new();
            self.emit(&expr, target, &mut program)?;
            let all = match target {
                Target::Kind(kind) => &mut ops[kind as usize],
                Target::Declared(d) => &mut self.declared_programs[d].ops,
            };
            let and = !all.is_empty();
            all.extend(program);
            if and {
                all.push(op(FilterOp::AND, 0, 0, 0, 0, 0));
            }
        }
        Ok(())
    }

    /// The types `name` (before a filter's `:`) names: the catalogue's
    /// type of that name if traced, and the declared types of that name.
    fn named_type(
        &self,
        name: &str,
        column: usize,
        selected: &[EventKind],
    ) -> Result<Vec<Target>, FilterError> {
        let catalogue = EventKind::ALL
            .iter()
            .copied()
            .find(|k| k.probe_name() == name && *k != EventKind::Usdt);
        let mut targets: Vec<Target> = (self.declared.iter().enumerate())
            .filter(|(_, d)| d.event.name == name)
            .map(|(d, _)| Target::Declared(d))
            .collect();
        match catalogue {
            Some(kind) if selected.contains(&kind) => targets.push(Target::Kind(kind)),
            Some(_) if targets.is_empty() => {
                return Err(FilterError::at(
                    column,
                    format!("{name} is not traced (add it to -e)"),
                ))
            }
            None if targets.is_empty() => {
                let names: Vec<&str> = EventKind::ALL[..EventKind::ALL.len() - 1]
                    .iter()
                    .map(|k| k.probe_name())
                    .chain(self.declared.iter().map(|d| d.event.name.as_str()))
                    .collect();
                return Err(FilterError::at(
                    column,
                    format!("no event type '{name}' (types: {})", names.join(" ")),
                ));
            }
            _ => {}
        }
        Ok(targets)
    }

    /// The selected types, and the declared ones, that have every field
    /// `expr` uses.
    fn applies_to(&self, expr: &Expr, selected: &[EventKind]) -> Result<Vec<Target>, FilterError> {
        let mut fields = Vec::new();
        tests(expr, &mut |t| fields.push((t.field.clone(), t.column)));
        // A declared type's fields, and every type's tid and pid.
        let declared_with = |name: &str| {
            (self.declared.iter().enumerate())
                .filter(|(_, d)| d.field(name).is_some() || ["tid", "pid"].contains(&name))
                .map(|(d, _)| Target::Declared(d))
                .collect::<Vec<_>>()
        };
        let mut targets: Vec<Target> = selected.iter().map(|&k| Target::Kind(k)).collect();
        targets.extend((0..self.declared.len()).map(Target::Declared));
        // `event` and `ts_ns` every type has.
        let typed = fields
            .iter()
            .filter(|(n, _)| n != EVENT_FIELD && n != TS_FIELD);
        for (name, column) in typed {
            let declared = declared_with(name);
            let mut having: Vec<Target> = match types_with_field(name, *column, selected) {
                Ok(kinds) => kinds.into_iter().map(Target::Kind).collect(),
                Err(_) if !declared.is_empty() => Vec::new(),
                Err(e) => return Err(e),
            };
            having.extend(declared);
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

    /// Appends `expr`'s ops for `target`, postfix.
    fn emit(
        &mut self,
        expr: &Expr,
        target: Target,
        out: &mut Vec<FilterOp>,
    ) -> Result<(), FilterError> {
        match expr {
            Expr::And(a, b) | Expr::Or(a, b) => {
                self.emit(a, target, out)?;
                self.emit(b, target, out)?;
                let code = if matches!(expr, Expr::And(..)) {
                    FilterOp::AND
                } else {
                    FilterOp::OR
                };
                out.push(op(code, 0, 0, 0, 0, 0));
            }
            Expr::Not(a) => {
                self.emit(a, target, out)?;
                out.push(op(FilterOp::NOT, 0, 0, 0, 0, 0));
            }
            Expr::Test(test) => self.test(test, target, out)?,
        }
        Ok(())
    }

    /// Where `target`'s field `name` is and the names its values go by;
    /// a declared type's field takes the next free value slot.
    fn resolve(
        &mut self,
        target: Target,
        name: &str,
        column: usize,
    ) -> Result<(FieldRef, ValueNames), FilterError> {
        let kind = match target {
            Target::Kind(_) if name == TS_FIELD => return Ok((TS_REF, ValueNames::None)),
            Target::Kind(kind) => kind,
            Target::Declared(d) => return self.resolve_declared(d, name, column),
        };
        let Some(field) = field_of(kind, name) else {
            let names: Vec<&str> = fields_of(kind).iter().map(|(n, _)| *n).collect();
            return Err(no_field(column, kind.probe_name(), name, &names));
        };
        let reading = schema::catalogue_field(kind, name).map(|f| f.reading);
        let names = match (reading, field) {
            (Some(Reading::Number(kind)), _) => names_of_kind(kind, ValueNames::None),
            (_, FieldRef::Value { names, .. }) if !names.is_empty() => ValueNames::Fixed(names),
            _ => ValueNames::None,
        };
        Ok((field, names))
    }

    /// [`Filters::resolve`] for declared type `d`: its fields, then `tid`
    /// and `pid`.
    fn resolve_declared(
        &mut self,
        d: usize,
        name: &str,
        column: usize,
    ) -> Result<(FieldRef, ValueNames), FilterError> {
        let event = &self.declared[d].event;
        let (slot, names) = match self.declared[d].field(name) {
            Some(i) => {
                let names = names_of_kind(event.fields[i].kind, ValueNames::Enum(d, i));
                (Slot::Field(i), names)
            }
            None if name == "tid" => (Slot::Tid, ValueNames::None),
            None if name == "pid" => (Slot::Pid, ValueNames::None),
            None if name == TS_FIELD => (Slot::Ts, ValueNames::None),
            None => {
                let fields = event.fields.iter().map(|f| f.name.as_str());
                let names: Vec<&str> = fields.chain(["tid", "pid"]).collect();
                return Err(no_field(column, &event.name, name, &names));
            }
        };
        let slots = &mut self.declared_programs[d].slots;
        let at = match slots.iter().position(|s| *s == slot) {
            Some(at) => at,
            None if slots.len() < VALUE_SLOTS => {
                slots.push(slot);
                slots.len() - 1
            }
            None => {
                return Err(FilterError::at(
                    column,
                    format!(
                        "filters of {} use more than {VALUE_SLOTS} of its fields, tid and pid",
                        event.name
                    ),
                ))
            }
        };
        let field = FieldRef::Value {
            slot: at as u8,
            shift: 0,
            mask: u64::MAX,
            names: &[],
        };
        Ok((field, names))
    }

    /// The value `name` names for a field whose values go by `names`.
    fn value_named(&self, names: ValueNames, name: &str) -> Option<u64> {
        match names {
            ValueNames::None => None,
            ValueNames::Fixed(fixed) => fixed.iter().find(|(n, _)| *n == name).map(|(_, v)| *v),
            ValueNames::Register => self.registers.num_of(name),
            ValueNames::Enum(d, i) => self.declared[d].event.fields[i]
                .values
                .as_ref()
                .and_then(|e| e.value_of(name)),
        }
    }

    /// Every name a field's values go by, for an error.
    fn value_names(&self, names: ValueNames) -> Vec<&str> {
        match names {
            ValueNames::None => Vec::new(),
            ValueNames::Fixed(fixed) => fixed.iter().map(|(n, _)| *n).collect(),
            ValueNames::Register => self.registers.names(),
            ValueNames::Enum(d, i) => (self.declared[d].event.fields[i].values.iter())
                .flat_map(|e| e.values.iter().map(|(_, n)| n.as_str()))
                .collect(),
        }
    }

    // Over 80 lines: one test's checks against the type (field, mask,
    // operator, values), each error pointing at its column, in the order
    // the expression reads.
    fn test(
        &mut self,
        test: &Test,
        target: Target,
        out: &mut Vec<FilterOp>,
    ) -> Result<(), FilterError> {
        if test.field == EVENT_FIELD {
            return self.event_test(test, target, out);
        }
        let (field, value_names) = self.resolve(target, &test.field, test.column)?;
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

    /// `event == NAME` or `event != NAME` for `target`: whether its type is
    /// called so is known here, so the test is a constant (a masked-out
    /// value compared with 0), which the kernel can run too.
    fn event_test(
        &self,
        test: &Test,
        target: Target,
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
        let catalogue = EventKind::ALL.iter().map(|k| k.probe_name());
        let declared = self.declared.iter().map(|d| d.event.name.as_str());
        let names: Vec<&str> = catalogue.chain(declared).collect();
        if !names.contains(&name.as_str()) {
            return Err(FilterError::at(
                column,
                format!("no event type '{name}' (types: {})", names.join(" ")),
            ));
        }
        // A declared type's events are USDT events: `usdt` names them too.
        let is = match target {
            Target::Kind(kind) => kind.probe_name() == name,
            Target::Declared(d) => name == "usdt" || self.declared[d].event.name == *name,
        };
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
        self.programs.iter().any(|p| !p.keeps_all()) || self.any_declared()
    }

    /// Whether a declared type is filtered (by the loader, in batches
    /// split for it).
    pub fn any_declared(&self) -> bool {
        !self.declared_by_spec.is_empty()
    }

    /// For an event of a filtered declared type: the type's index and
    /// whether the event passes its program (sampling aside).
    fn declared_pass(&self, event: &Event<'_>) -> Option<(usize, bool)> {
        let Body::Usdt { spec_id, args, .. } = &event.body else {
            return None;
        };
        let &d = self.declared_by_spec.get(spec_id)?;
        let declared = &self.declared_programs[d];
        let fields = &self.declared[d].event.fields;
        let mut values = [0u64; VALUE_SLOTS];
        for (value, slot) in values.iter_mut().zip(&declared.slots) {
            *value = match *slot {
                Slot::Field(i) => {
                    let raw = args.get(i).copied().unwrap_or(0);
                    fields.get(i).map_or(raw, |f| f.value(raw))
                }
                Slot::Tid => event.header.tid.into(),
                Slot::Pid => event.header.pid.into(),
                Slot::Ts => event.header.ts_ns,
            };
        }
        Some((d, declared.program.keeps(&values, |_, _, _| false)))
    }

    /// Whether `event` matches its type's expressions (sampling aside);
    /// None when none applies to its type (`--trigger`).
    pub fn matches(&self, event: &Event<'_>) -> Option<bool> {
        if let Some((_, pass)) = self.declared_pass(event) {
            return Some(pass);
        }
        let program = &self.programs[event.kind as usize];
        if program.len == 0 {
            return None;
        }
        let texts = &self.texts;
        Some(program.keeps(&values(event), |field, cmp, index| {
            let wanted = texts.get(index as usize).map_or("", String::as_str);
            text_test(event, field, cmp, wanted.as_bytes())
        }))
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
    /// Per kind id: the eBPF programs already applied its program.
    in_kernel: [bool; EVENT_KIND_SLOTS as usize],
    /// Events of each (thread, kind id or, past the kinds, declared
    /// type) that passed the filters so far.
    passed: HashMap<(u32, usize), u64>,
    /// Events left out here, per kind id.
    pub left_out: [u64; EVENT_KIND_SLOTS as usize],
}

impl Keep {
    /// Applies `filters` to every kind but those `in_kernel` says the eBPF
    /// programs filter.
    pub fn new(filters: Filters, in_kernel: impl Fn(EventKind) -> bool) -> Keep {
        let mut kernel = [false; EVENT_KIND_SLOTS as usize];
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
        let k = event.kind as usize;
        let (pass, sampled_as, sample_every) = match self.filters.declared_pass(event) {
            Some((d, pass)) => {
                let every = self.filters.declared_programs[d].program.sample_every;
                (pass, EVENT_KIND_SLOTS as usize + d, every)
            }
            None => {
                let program = &self.filters.programs[k];
                if self.in_kernel[k] || program.keeps_all() {
                    return true;
                }
                let texts = &self.filters.texts;
                let pass = program.keeps(&values(event), |field, cmp, index| {
                    let wanted = texts.get(index as usize).map_or("", String::as_str);
                    text_test(event, field, cmp, wanted.as_bytes())
                });
                (pass, k, program.sample_every)
            }
        };
        let keep = pass && {
            let n = self
                .passed
                .entry((event.header.tid, sampled_as))
                .or_insert(0);
            let first_of_n = sample_every <= 1 || n.is_multiple_of(sample_every);
            *n += 1;
            first_of_n
        };
        if !keep {
            self.left_out[k] += 1;
        }
        keep
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
