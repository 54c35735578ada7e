//! Live counts: events counted per key (`top --by pc`, `read CAP --by
//! addr`), the table people read, and the memory heatmap ([`heatmap`]).
//!
//! A [`KeySpec`] says, per event type, which number is its key: one of its
//! fields, the page of its address, or the type itself. Its
//! [`KeyRef`]s are what the eBPF programs use to count per-event delivery
//! in the kernel (no event reaches userspace); [`CountWriter`] counts the
//! events that do reach the loader (batched ones, a capture's) the same
//! way. A [`Table`] holds at most `max_keys` keys: events of a key that
//! does not fit are counted in their type's "other" row, never dropped.

pub mod heatmap;

use crate::questions::filter::{field_of, types_with_field, FieldRef};
use crate::record::event::{Body, Event};
use crate::session::code::CodeNames;
use crate::session::declared::{DeclaredField, DeclaredSites};
use crate::session::fields::{declared_arg, read_as, Arg};
use crate::session::guest::{Guest, RegisterNames};
use crate::session::reading::Reading;
use crate::session::schema;
use crate::write::escape;
use crate::write::human::si;
use crate::write::writer::{EventWriter, Totals};
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::io;
use std::rc::Rc;
use std::time::Duration;
use styx_common::filter::{SLOT_PID, SLOT_SIZE, SLOT_TID};
use styx_common::schema::{FieldKind, HEAP_CALLER, HEAP_PROVIDER};
use styx_common::{EventKind, EVENT_KIND_SLOTS};

/// Where one type's key is in its value slots: `(slot >> shift) & mask`,
/// as a filter test reads a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRef {
    /// The value slot.
    pub slot: u8,
    /// Shifted right first (a page: its size's bits more).
    pub shift: u8,
    /// Then masked (0: every event of the type has key 0, `--by event`).
    pub mask: u64,
}

/// What `--by` counts per.
#[derive(Clone, Debug)]
pub struct KeySpec {
    /// What was asked for: a field name, `page` or `event`.
    pub by: String,
    /// `page`: bits of the page size (the key is the page's number).
    pub page_bits: u8,
    /// Per kind id: its key, or None when the type is not counted.
    pub keys: [Option<KeyRef>; EVENT_KIND_SLOTS as usize],
    /// Register names for `--by reg`, where the guest gives them.
    pub registers: RegisterNames,
    /// Names of the traced process's functions, for `--by caller` of the
    /// heap's types.
    pub code: CodeNames,
    /// Names of the guest program's functions, for `--by pc`: a QEMU
    /// guest's, from its file's symbols once its description came
    /// ([`CountWriter::guest`]).
    pub guest_code: CodeNames,
    /// The session's declared types; those counted have the field.
    declared: Vec<DeclaredSites>,
    /// Per declared type: counted by its field of this index (`--by
    /// event`: by none, every event key 0), or not counted.
    declared_fields: Vec<Option<Option<usize>>>,
    /// The declared type of each counted site, by spec id.
    declared_by_spec: FxHashMap<u32, usize>,
}

/// Rows of a table are per (type, key): a type is a catalogue kind id, or
/// past them a declared type ([`DECLARED_TYPES`] at most are counted).
pub const TABLE_TYPES: usize = 256;
/// Declared types a table counts at most.
pub const DECLARED_TYPES: usize = TABLE_TYPES - EVENT_KIND_SLOTS as usize;

impl KeySpec {
    /// Counts the `selected` types, and the `declared` ones, by `by`: a
    /// numeric field (`pc`, `addr`, `target`, `reg`, a declared type's
    /// `device`…; the types that have it), `page` (the page of `addr`,
    /// pages of `page_size` bytes; catalogue types) or `event` (the type
    /// itself).
    pub fn new(
        by: &str,
        page_size: u64,
        selected: &[EventKind],
        declared: &[DeclaredSites],
    ) -> Result<KeySpec, String> {
        if !page_size.is_power_of_two() {
            return Err(format!("--page-size {page_size} is not a power of two"));
        }
        let page_bits = page_size.trailing_zeros() as u8;
        let mut spec = KeySpec {
            by: by.to_string(),
            page_bits: if by == "page" { page_bits } else { 0 },
            keys: [None; EVENT_KIND_SLOTS as usize],
            registers: RegisterNames::default(),
            code: CodeNames::default(),
            guest_code: CodeNames::default(),
            declared: declared.iter().take(DECLARED_TYPES).cloned().collect(),
            declared_fields: Vec::new(),
            declared_by_spec: FxHashMap::default(),
        };
        spec.declared_fields = (spec.declared.iter())
            .map(|d| match by {
                "event" => Some(None),
                "page" => None,
                field => d.field(field).map(Some),
            })
            .collect();
        for (d, declared) in spec.declared.iter().enumerate() {
            if spec.declared_fields[d].is_some() {
                spec.declared_by_spec
                    .extend(declared.spec_ids.iter().map(|&id| (id, d)));
            }
        }
        let field = match by {
            "event" => {
                for &kind in selected.iter().filter(|&&k| k != EventKind::Usdt) {
                    spec.keys[kind as usize] = Some(KeyRef {
                        slot: 0,
                        shift: 0,
                        mask: 0,
                    });
                }
                return Ok(spec);
            }
            "page" => "addr",
            field => field,
        };
        let kinds = match types_with_field(field, 1, selected) {
            Ok(kinds) => kinds,
            Err(_) if !spec.declared_by_spec.is_empty() => Vec::new(),
            Err(e) => return Err(format!("--by {by}: {}", e.message)),
        };
        for kind in kinds {
            match field_of(kind, field) {
                Some(FieldRef::Value {
                    slot, shift, mask, ..
                }) => {
                    let shift = shift + spec.page_bits;
                    spec.keys[kind as usize] = Some(KeyRef {
                        slot,
                        shift,
                        mask: mask >> spec.page_bits,
                    })
                }
                Some(FieldRef::Text(_)) => {
                    return Err(format!("--by {by}: '{field}' is text; count by a number"))
                }
                None => {}
            }
        }
        Ok(spec)
    }

    /// Whether it counts a declared type (whose events are USDT events).
    pub fn counts_declared(&self) -> bool {
        !self.declared_by_spec.is_empty()
    }

    /// The table type and key `event` is counted by, if its type is
    /// counted: a catalogue kind's id and [`KeySpec::key`], or a declared
    /// type's (see [`TABLE_TYPES`]) and its field's value.
    #[inline]
    pub fn count_key(&self, event: &Event<'_>) -> Option<(u8, u64)> {
        if let Body::Usdt { spec_id, args, .. } = &event.body {
            let &d = self.declared_by_spec.get(spec_id)?;
            let key = match self.declared_fields[d]? {
                None => 0,
                Some(i) => {
                    let raw = args.get(i).copied().unwrap_or(0);
                    self.declared[d].event.fields[i].value(raw)
                }
            };
            return Some(((EVENT_KIND_SLOTS as usize + d) as u8, key));
        }
        Some((event.kind as u8, self.key(event)?))
    }

    /// The declared type of table type `table_type`, and its field
    /// counted by (None: `--by event`).
    fn declared_of(&self, table_type: u8) -> Option<(&DeclaredSites, Option<usize>)> {
        let d = (table_type as usize).checked_sub(EVENT_KIND_SLOTS as usize)?;
        Some((
            self.declared.get(d)?,
            self.declared_fields.get(d).copied()??,
        ))
    }

    /// The name of a table type: its event type's.
    pub fn type_name(&self, table_type: u8) -> &str {
        match self.declared_of(table_type) {
            Some((declared, _)) => &declared.event.name,
            None => name(table_type),
        }
    }

    /// How a key of a table type reads: for a declared type, as its field
    /// reads (an enum value by name, an address in hex, a register by
    /// name, a bool, a signed number); else as [`KeySpec::show`].
    pub fn show_key(&self, table_type: u8, key: u64) -> String {
        let Some((declared, field)) = self.declared_of(table_type) else {
            return match EventKind::from_id(table_type) {
                Some(kind) => self.show(kind, key),
                None => key.to_string(),
            };
        };
        let Some(field) = field.map(|i| &declared.event.fields[i]) else {
            return declared.event.name.clone();
        };
        let arg = declared_arg(field, key, &self.registers);
        let code = is_code(declared, field)
            .then(|| self.code.name_of(key))
            .flatten();
        key_text(arg, code)
    }

    /// The name of a key: a register's, where the guest names it, a
    /// declared enum value's, the function an allocation's caller is in,
    /// or the guest function a pc is in (JSON gives it as `key_name`).
    pub fn key_name(&self, table_type: u8, key: u64) -> Option<Cow<'_, str>> {
        let Some((declared, field)) = self.declared_of(table_type) else {
            let kind = EventKind::from_id(table_type)?;
            return match self.register(kind, key) {
                Some(name) => Some(Cow::Borrowed(name)),
                None => self.guest_function(&self.by, key).map(Cow::Owned),
            };
        };
        let field = &declared.event.fields[field?];
        match field.kind {
            FieldKind::Register => self.registers.get(key).map(Cow::Borrowed),
            FieldKind::Enum => field.values.as_ref()?.name_of(key).map(Cow::Borrowed),
            FieldKind::Address if is_code(declared, field) => {
                self.code.name_of(key).map(Cow::Owned)
            }
            _ => None,
        }
    }

    /// The types it counts.
    pub fn kinds(&self) -> impl Iterator<Item = EventKind> + '_ {
        EventKind::ALL
            .iter()
            .copied()
            .filter(|&k| self.keys[k as usize].is_some())
    }

    /// `event`'s key, if its type is counted.
    #[inline]
    pub fn key(&self, event: &Event<'_>) -> Option<u64> {
        let key = self.keys[event.kind as usize]?;
        // The one slot wanted (what `filter::values` would give for it).
        let value = match (key.slot, &event.body) {
            (slot @ 0..=3, Body::Args(args)) => args[slot as usize],
            (0, Body::Span { id, .. }) => *id,
            (SLOT_SIZE, _) => event.header.aux.into(),
            (SLOT_TID, _) => event.header.tid.into(),
            (SLOT_PID, _) => event.header.pid.into(),
            _ => 0,
        };
        Some((value >> key.shift) & key.mask)
    }

    /// How a key reads: a page's first address, a number in hex or decimal
    /// as the field reads, or the type's name.
    pub fn show(&self, kind: EventKind, key: u64) -> String {
        match self.by.as_str() {
            "event" => kind.probe_name().to_string(),
            "page" => format!("{:#x}", key << self.page_bits),
            field => match schema::catalogue_field(kind, field).map(|f| f.reading) {
                Some(Reading::Number(kind)) => {
                    let code = self.guest_function(field, key);
                    key_text(read_as(kind, key, None, &self.registers), code)
                }
                _ => match field_of(kind, field) {
                    Some(FieldRef::Value { names, .. }) if !names.is_empty() => names
                        .iter()
                        .find(|(_, v)| *v == key)
                        .map_or_else(|| key.to_string(), |(n, _)| n.to_string()),
                    _ => key.to_string(),
                },
            },
        }
    }

    /// The guest function holding `key` when counting by `pc`.
    fn guest_function(&self, field: &str, key: u64) -> Option<String> {
        (field == "pc")
            .then(|| self.guest_code.name_of(key))
            .flatten()
    }

    /// The register name of `key` when counting a type's register field.
    pub fn register(&self, kind: EventKind, key: u64) -> Option<&str> {
        let field = schema::catalogue_field(kind, &self.by)?;
        (field.reading == Reading::Number(FieldKind::Register))
            .then(|| self.registers.get(key))
            .flatten()
    }

    /// The key's value as JSON output gives it (a page: its first address).
    pub fn json_value(&self, key: u64) -> u64 {
        if self.by == "page" {
            key << self.page_bits
        } else {
            key
        }
    }
}

/// How a key reads in a table, as its field's kind reads (`read_as`): an
/// address in hex (a code address by its function, `code`), a number in
/// decimal, a register or enum value by name.
fn key_text(arg: Arg<'_>, code: Option<String>) -> String {
    match arg {
        Arg::Addr(v) => code.map_or_else(
            || format!("{v:#x}"),
            |name| escape::controls(&name).into_owned(),
        ),
        Arg::Signed(v) => v.to_string(),
        Arg::Bool(v) => v.to_string(),
        Arg::Dec(v) | Arg::Unsigned(v) | Arg::Reg(v, None) | Arg::Enum(v, None) => v.to_string(),
        Arg::Reg(_, Some(name)) | Arg::Enum(_, Some(name)) => escape::controls(name).into_owned(),
        // Keys are numbers.
        Arg::Str(_) => String::new(),
    }
}

/// Whether `field` of `declared` holds a code address of the traced
/// process: the heap's types' caller.
fn is_code(declared: &DeclaredSites, field: &DeclaredField) -> bool {
    declared.event.provider == HEAP_PROVIDER && field.name == HEAP_CALLER
}

/// Counts per (type, key), at most `max_keys` of them; the rest per type
/// in "other". A type is a catalogue kind id or a declared type's (see
/// [`TABLE_TYPES`]).
#[derive(Clone, Debug)]
pub struct Table {
    // Fx: a multiply per key, not SipHash (2x the batched rate here); keys
    // crafted to collide only slow counting down: at most `max_keys` are held.
    counts: FxHashMap<(u8, u64), u64>,
    /// Per type: events whose key did not fit ([`TABLE_TYPES`] of them).
    pub other: Vec<u64>,
    max_keys: usize,
}

impl Default for Table {
    fn default() -> Table {
        Table::new(0)
    }
}

impl Table {
    /// An empty table holding at most `max_keys` keys.
    pub fn new(max_keys: usize) -> Table {
        Table {
            counts: FxHashMap::default(),
            other: vec![0; TABLE_TYPES],
            max_keys,
        }
    }

    /// Counts `n` events of `kind` with `key`.
    #[inline]
    pub fn add(&mut self, kind: u8, key: u64, n: u64) {
        let full = self.counts.len() >= self.max_keys;
        match self.counts.get_mut(&(kind, key)) {
            Some(count) => *count += n,
            None if full => self.other[kind as usize] += n,
            None => {
                self.counts.insert((kind, key), n);
            }
        }
    }

    /// Events counted, "other" included.
    pub fn total(&self) -> u64 {
        self.counts.values().sum::<u64>() + self.other.iter().sum::<u64>()
    }

    /// Keys held.
    pub fn keys(&self) -> usize {
        self.counts.len()
    }

    /// The count of one key.
    pub fn get(&self, kind: u8, key: u64) -> u64 {
        self.counts.get(&(kind, key)).copied().unwrap_or(0)
    }

    /// Every (kind, key, count), the largest first (ties by kind, then key).
    pub fn sorted(&self) -> Vec<(u8, u64, u64)> {
        let mut rows: Vec<(u8, u64, u64)> = self
            .counts
            .iter()
            .map(|(&(k, key), &n)| (k, key, n))
            .collect();
        rows.sort_unstable_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
        rows
    }

    /// Adds another table's counts (the kernel's to the loader's).
    pub fn merge(&mut self, other: &Table) {
        for (&(kind, key), &n) in &other.counts {
            self.add(kind, key, n);
        }
        for (mine, theirs) in self.other.iter_mut().zip(&other.other) {
            *mine += theirs;
        }
    }
}

/// How the table is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableFormat {
    /// Aligned columns for people.
    Text,
    /// One JSON object per row.
    Jsonl,
}

/// One printed table: the `rows` largest keys (all with None), "other"
/// rows, and with `previous` (the table `elapsed` ago) a rate column.
pub struct View<'a> {
    /// What is counted.
    pub spec: &'a KeySpec,
    /// The counts now.
    pub table: &'a Table,
    /// The counts at the previous refresh, for rates.
    pub previous: Option<(&'a Table, Duration)>,
    /// Rows to show at most.
    pub rows: Option<usize>,
}

/// One row of a printed table: a key's count (`key` None: a type's
/// "other" row), its share of the total and its rate.
struct Row {
    kind: u8,
    key: Option<u64>,
    n: u64,
    share: f64,
    rate: Option<f64>,
}

impl View<'_> {
    /// The table as text or JSON lines.
    pub fn render(&self, format: TableFormat) -> String {
        let sorted = self.table.sorted();
        let shown = sorted.len().min(self.rows.unwrap_or(usize::MAX));
        let keyed: Vec<Row> = (sorted[..shown].iter())
            .map(|&(kind, key, n)| self.row(kind, Some(key), n))
            .collect();
        let others: Vec<Row> = (self.table.other.iter().enumerate())
            .filter(|(_, &n)| n > 0)
            .map(|(kind, &n)| self.row(kind as u8, None, n))
            .collect();
        match format {
            TableFormat::Jsonl => self.jsonl(keyed.iter().chain(&others)),
            TableFormat::Text => self.text(&keyed, sorted.len() - shown, &others),
        }
    }

    fn row(&self, kind: u8, key: Option<u64>, n: u64) -> Row {
        let total = self.table.total();
        let rate = self.previous.map(|(prev, dt)| {
            let before = match key {
                Some(key) => prev.get(kind, key),
                None => prev.other[kind as usize],
            };
            n.saturating_sub(before) as f64 / dt.as_secs_f64().max(1e-9)
        });
        Row {
            kind,
            key,
            n,
            share: if total == 0 {
                0.0
            } else {
                n as f64 / total as f64
            },
            rate,
        }
    }

    fn jsonl<'r>(&self, rows: impl Iterator<Item = &'r Row>) -> String {
        let by = &self.spec.by;
        let mut out = String::new();
        for row in rows {
            let (event, n, share) = (self.spec.type_name(row.kind), row.n, row.share);
            let Some(key) = row.key else {
                let _ = writeln!(
                    out,
                    "{{\"event\":\"{event}\",\"by\":\"{by}\",\"other\":true,\"count\":{n},\"share\":{share:.6}}}",
                );
                continue;
            };
            let _ = write!(
                out,
                "{{\"event\":\"{event}\",\"by\":\"{by}\",\"key\":{},\"count\":{n},\"share\":{share:.6}",
                self.spec.json_value(key),
            );
            if let Some(key_name) = self.spec.key_name(row.kind, key) {
                // As event lines give `reg_name` beside `reg`.
                let _ = write!(out, ",\"key_name\":{}", serde_json::json!(key_name));
            }
            if let Some(r) = row.rate {
                let _ = write!(out, ",\"rate\":{r:.1}");
            }
            out.push_str("}\n");
        }
        out
    }

    /// Aligned columns: the keys shown, how many `more` were not, the
    /// types' other rows.
    fn text(&self, keyed: &[Row], more: usize, others: &[Row]) -> String {
        let by = self.spec.by.to_uppercase();
        let keys: Vec<String> = (keyed.iter().chain(others))
            .map(|row| match row.key {
                None => "(other)".to_string(),
                Some(key) => self.spec.show_key(row.kind, key),
            })
            .collect();
        // Keys that are numbers or short names in a column of their own;
        // longer ones (functions) last on the line, as perf report puts
        // its symbols.
        let last = keys.iter().any(|k| k.chars().count() > 18);
        let mut out = format!("{:<11}", "EVENT");
        if !last {
            let _ = write!(out, " {by:>18}");
        }
        let _ = write!(out, " {:>14} {:>7}", "COUNT", "SHARE");
        if self.previous.is_some() {
            out.push_str("     RATE/s");
        }
        if last {
            let _ = write!(out, "  {by}");
        }
        out.push('\n');
        for (i, (row, key)) in keyed.iter().chain(others).zip(&keys).enumerate() {
            if i == keyed.len() && more > 0 {
                let _ = writeln!(out, "… {more} more keys");
            }
            let (event, n, pct) = (self.spec.type_name(row.kind), row.n, row.share * 100.0);
            let _ = write!(out, "{event:<11}");
            if !last {
                let _ = write!(out, " {key:>18}");
            }
            let _ = write!(out, " {n:>14} {pct:>6.2}%");
            if let Some(r) = row.rate {
                let _ = write!(out, " {:>10}", si(r));
            }
            if last {
                let _ = write!(out, "  {key}");
            }
            out.push('\n');
        }
        if others.is_empty() && more > 0 {
            let _ = writeln!(out, "… {more} more keys");
        }
        out
    }
}

/// An event type's name by id.
fn name(kind: u8) -> &'static str {
    EventKind::from_id(kind).map_or("?", EventKind::probe_name)
}

/// Counts the events it is handed into shared tables: one per `--by` (and
/// one by page of `mem_read`/`mem_write` for `--heatmap`).
pub struct CountWriter {
    /// What each table counts, and the table.
    pub tables: Vec<(KeySpec, Rc<RefCell<Table>>)>,
    /// The first guest description a marker gave (a QEMU guest's:
    /// `Guest::from_marker`), shared with whoever shows the tables, which
    /// names pcs by its program's functions ([`KeySpec::guest_code`]).
    pub guest: Rc<RefCell<Option<Guest>>>,
}

impl EventWriter for CountWriter {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        if let Body::Marker(text) = &event.body {
            let mut guest = self.guest.borrow_mut();
            if guest.is_none() {
                *guest = Guest::from_marker(text.bytes, text.truncated);
            }
        }
        for (spec, table) in &self.tables {
            if let Some((table_type, key)) = spec.count_key(event) {
                table.borrow_mut().add(table_type, key, 1);
            }
        }
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::event::Body;
    use styx_common::RecordHeader;

    fn event(kind: EventKind, args: [u64; 4], aux: u8) -> Event<'static> {
        Event {
            header: RecordHeader {
                kind: kind as u8,
                aux,
                ..RecordHeader::default()
            },
            kind,
            body: Body::Args(args),
        }
    }

    /// `--by pc` names a pc by the guest function holding it, once the
    /// guest's description came in a marker (the loader then reads the
    /// program's symbols).
    #[test]
    fn pcs_are_named_by_the_guest_functions_holding_them() {
        let mut spec = KeySpec::new("pc", 4096, &[EventKind::Block], &[]).unwrap();
        spec.guest_code = CodeNames::new([(0x401000, 0x20, "touch".to_string())]);
        let block = EventKind::Block as u8;
        assert_eq!(spec.show_key(block, 0x401004), "touch+0x4");
        assert_eq!(spec.key_name(block, 0x401000).as_deref(), Some("touch"));
        assert_eq!(spec.show_key(block, 0x402000), "0x402000");
        assert_eq!(spec.key_name(block, 0x402000), None);

        let guest = Rc::default();
        let mut writer = CountWriter {
            tables: Vec::new(),
            guest: Rc::clone(&guest),
        };
        let marker = |text: &'static [u8]| Event {
            header: RecordHeader {
                kind: EventKind::Marker as u8,
                ..RecordHeader::default()
            },
            kind: EventKind::Marker,
            body: Body::Marker(crate::record::event::Text {
                bytes: text,
                truncated: false,
            }),
        };
        writer.event(&marker(b"reset")).unwrap();
        assert!(guest.borrow().is_none());
        writer
            .event(&marker(
                b"qemu x86_64 image 0x400000-0x4c0ee8 entry 0x4015b0: /g",
            ))
            .unwrap();
        writer
            .event(&marker(
                b"qemu aarch64 image 0x400000-0x4c0ee8 entry 0x4015b0: /h",
            ))
            .unwrap();
        assert_eq!(guest.borrow().as_ref().unwrap().arch, "x86_64", "the first");
    }

    #[test]
    fn keys_by_field_page_and_event() {
        let all = [EventKind::InsnExec, EventKind::MemRead, EventKind::Branch];
        let by_pc = KeySpec::new("pc", 4096, &all, &[]).unwrap();
        assert_eq!(
            by_pc.key(&event(EventKind::MemRead, [0x1234, 0x5678, 0, 0], 1)),
            Some(0x1234)
        );
        let by_page = KeySpec::new("page", 256, &all, &[]).unwrap();
        assert_eq!(
            by_page.key(&event(EventKind::MemRead, [0x1234, 0x5678, 0, 0], 1)),
            Some(0x56)
        );
        assert_eq!(
            by_page.key(&event(EventKind::InsnExec, [1, 2, 0, 0], 1)),
            None
        );
        assert_eq!(by_page.show(EventKind::MemRead, 0x56), "0x5600");
        let by_kind = KeySpec::new("kind", 4096, &all, &[]).unwrap();
        let call = styx_common::Branch::conditional(styx_common::BranchKind::Call).encode();
        let key = by_kind
            .key(&event(EventKind::Branch, [1, 2, call, 0], 1))
            .unwrap();
        assert_eq!(by_kind.show(EventKind::Branch, key), "call");
        let by_event = KeySpec::new("event", 4096, &all, &[]).unwrap();
        assert_eq!(
            by_event.key(&event(EventKind::InsnExec, [1, 2, 0, 0], 1)),
            Some(0)
        );
        assert_eq!(
            KeySpec::new("addr", 4096, &[EventKind::InsnExec], &[]).unwrap_err(),
            "--by addr: no selected event type has a field 'addr' (mem_read, mem_write have it)"
        );
    }

    /// The key's shortcut reads what a filter reads (`filter::values`).
    #[test]
    fn keys_read_the_value_slots_filters_read() {
        let all: Vec<EventKind> = EventKind::ALL[..EventKind::ALL.len() - 1].to_vec();
        let mut e = event(EventKind::MemWrite, [11, 22, 33, 44], 2);
        e.header.tid = 77;
        e.header.pid = 66;
        for field in ["pc", "addr", "val", "size", "tid", "pid"] {
            let spec = KeySpec::new(field, 4096, &all, &[]).unwrap();
            let FieldRef::Value { slot, .. } = field_of(EventKind::MemWrite, field).unwrap() else {
                panic!()
            };
            let want = crate::questions::filter::values(&e)[slot as usize];
            assert_eq!(spec.key(&e), Some(want), "{field}");
        }
    }

    /// A declared type's field is a key: each of its sites counted as the
    /// one type, keys shown as the field reads.
    #[test]
    fn declared_fields_key_their_types_rows() {
        use crate::session::declared::{DeclaredField, EnumValues, EventType};
        let field = |name, kind, values| DeclaredField::new(name, kind, 1, values);
        let devices = EnumValues {
            name: "Device".into(),
            values: vec![(7, "Dma".into())],
        };
        let declared = [DeclaredSites {
            event: EventType {
                provider: "emu".into(),
                name: "mmio".into(),
                fields: vec![
                    field("device", FieldKind::Enum, Some(devices)),
                    field("addr", FieldKind::Address, None),
                    field("delta", FieldKind::Signed, None),
                    field("on", FieldKind::Bool, None),
                ],
            },
            spec_ids: vec![4, 6],
        }];
        let usdt = Event::usdt;
        let row = EVENT_KIND_SLOTS as u8;
        let args = [7, 0x20, 0xfe, 1];
        for (by, shown) in [
            ("device", "Dma"),
            ("addr", "0x20"),
            ("delta", "-2"),
            ("on", "true"),
        ] {
            let spec = KeySpec::new(by, 4096, &[EventKind::InsnExec], &declared).unwrap();
            let (table_type, key) = spec.count_key(&usdt(6, &args)).unwrap();
            assert_eq!(table_type, row);
            assert_eq!(spec.show_key(table_type, key), shown, "{by}");
            assert_eq!(spec.type_name(table_type), "mmio");
            assert_eq!(spec.count_key(&usdt(5, &args)), None, "not mmio's site");
        }
        let spec = KeySpec::new("device", 4096, &[], &declared).unwrap();
        assert_eq!(spec.key_name(row, 7).as_deref(), Some("Dma"));
        assert_eq!(spec.show_key(row, 1), "1");
        let spec = KeySpec::new("pc", 4096, &[EventKind::InsnExec], &declared).unwrap();
        assert_eq!(spec.count_key(&usdt(4, &args)), None, "mmio has no pc");
        assert_eq!(
            KeySpec::new("port", 4096, &[EventKind::InsnExec], &declared).unwrap_err(),
            "--by port: no event type has a field 'port'"
        );
    }

    #[test]
    fn keys_beyond_the_table_are_counted_as_other() {
        let mut table = Table::new(2);
        for key in 0..5 {
            table.add(4, key, key + 1);
        }
        table.add(4, 0, 10);
        assert_eq!(table.keys(), 2);
        assert_eq!(table.get(4, 0), 11);
        assert_eq!(table.other[4], 3 + 4 + 5);
        assert_eq!(table.total(), 1 + 2 + 3 + 4 + 5 + 10);
        let spec = KeySpec::new("addr", 4096, &[EventKind::MemRead], &[]).unwrap();
        let text = View {
            spec: &spec,
            table: &table,
            previous: None,
            rows: Some(1),
        }
        .render(TableFormat::Text);
        assert!(
            text.contains("mem_read                   0x0             11"),
            "{text}"
        );
        assert!(text.contains("… 1 more keys"), "{text}");
        assert!(text.contains("(other)             12"), "{text}");
    }
}
