//! Live counts: events counted per key (`top --by pc`, `read CAP --by
//! addr`), the table people read, and the memory heatmap ([`heatmap`]).
//!
//! A [`KeySpec`] says, per event type of the session (`schema::Types`:
//! the catalogue's kinds and the types the emulator declared, alike),
//! which number is its key: one of its fields, looked up in the type's
//! schema as `--filter` looks it up (`filter::named`), the page of its
//! address, or the type itself; the key shows as its field reads. A
//! catalogue kind's key in the eBPF programs' value slots
//! ([`KeySpec::kernel_keys`]) is what they use to count per-event delivery
//! in the kernel (no event reaches userspace); [`CountWriter`] counts the
//! events that do reach the loader (batched ones, a declared type's, a
//! capture's) the same way. A [`Table`] holds at most `max_keys` keys: events of a key that
//! does not fit are counted in their type's "other" row, never dropped.

pub mod heatmap;

use crate::questions::filter::{self, named_field, types_with_field, At};
use crate::record::event::{Body, Event};
use crate::session::code::CodeNames;
use crate::session::declared::{DeclaredSites, EnumValues};
use crate::session::fields::{read_as, Arg};
use crate::session::guest::{Guest, RegisterNames};
use crate::session::reading::Shows;
use crate::session::schema::{TypeId, Types};
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
use styx_common::schema::{FieldKind, HEAP_CALLER, HEAP_PROVIDER};
use styx_common::{widen, EventKind, EVENT_KIND_SLOTS};

/// Where one catalogue kind's key is in the eBPF programs' value slots:
/// `(slot >> shift) & mask`, as a filter test reads a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyRef {
    /// The value slot.
    pub slot: u8,
    /// Shifted right first (a page: its size's bits more).
    pub shift: u8,
    /// Then masked (0: every event of the type has key 0, `--by event`).
    pub mask: u64,
}

/// Where one counted type's key is: the field it was looked up as
/// (`filter::Named`: its value, cut to its width, then its part), a page
/// of it shifted and masked further.
#[derive(Clone, Copy, Debug)]
struct Key {
    at: At,
    /// The value's width and signedness (its schema field's).
    bytes: u8,
    signed: bool,
    shift: u8,
    mask: u64,
}

/// How a counted type's keys read: as its field's part, and the index of
/// its schema field (None: `tid`, `pid`, `--by event`).
#[derive(Clone, Copy, Debug)]
struct Shown {
    shows: Shows,
    field: Option<usize>,
}

/// What `--by` counts per.
#[derive(Clone, Debug)]
pub struct KeySpec {
    /// What was asked for: a field name, `page` or `event`.
    pub by: String,
    /// `page`: bits of the page size (the key is the page's number).
    pub page_bits: u8,
    /// Register names for `--by reg`, where the guest gives them.
    pub registers: RegisterNames,
    /// Names of the traced process's functions, for `--by caller` of the
    /// heap's types.
    pub code: CodeNames,
    /// Names of the guest program's functions, for `--by pc`: a QEMU
    /// guest's, from its file's symbols once its description came
    /// ([`CountWriter::guest`]).
    pub guest_code: CodeNames,
    /// The session's types (the first [`DECLARED_TYPES`] declared ones).
    types: Types,
    /// Per type id: its key, or None when the type is not counted.
    keys: Vec<Option<Key>>,
    /// Per catalogue kind: its key in the eBPF programs' value slots (a
    /// catalogue kind's events hold its values there, `filter::values`).
    fixed: [Option<KeyRef>; EVENT_KIND_SLOTS as usize],
    /// Per type id counted: how its keys read.
    shown: Vec<Option<Shown>>,
    /// The counted declared type of each of its sites, by spec id.
    by_spec: FxHashMap<u32, u8>,
}

/// Rows of a table are per (type, key): a type is a type id ([`Types`]:
/// a catalogue kind id, or past them a declared type; [`DECLARED_TYPES`]
/// at most are counted).
pub const TABLE_TYPES: usize = 256;
/// Declared types a table counts at most.
pub const DECLARED_TYPES: usize = TABLE_TYPES - EVENT_KIND_SLOTS as usize;

impl KeySpec {
    /// Counts the `selected` types, and the `declared` ones, by `by`: a
    /// numeric field (`pc`, `addr`, `target`, `reg`, a declared type's
    /// `device`…; the types that have it, looked up in their schemas),
    /// `page` (the page of `addr`, pages of `page_size` bytes) or `event`
    /// (the type itself).
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
        let types = Types::new(&declared[..declared.len().min(DECLARED_TYPES)]);
        let candidates: Vec<TypeId> = (selected.iter().map(|&k| k as TypeId))
            .chain(types.declared_ids())
            .collect();
        let mut spec = KeySpec {
            by: by.to_string(),
            page_bits: if by == "page" { page_bits } else { 0 },
            registers: RegisterNames::default(),
            code: CodeNames::default(),
            guest_code: CodeNames::default(),
            keys: vec![None; types.len()],
            fixed: [None; EVENT_KIND_SLOTS as usize],
            shown: vec![None; types.len()],
            by_spec: FxHashMap::default(),
            types,
        };
        match by {
            // Every type with a schema (not other providers' probes): key 0.
            "event" => {
                let typed = candidates
                    .iter()
                    .filter(|&&t| spec.types.fields(t).is_some());
                for &t in typed {
                    spec.keys[t] = Some(Key {
                        at: At::Arg(0),
                        bytes: 8,
                        signed: false,
                        shift: 0,
                        mask: 0,
                    });
                    spec.shown[t] = Some(Shown {
                        shows: Shows::Number(FieldKind::Unsigned),
                        field: None,
                    });
                }
            }
            _ => {
                let field = if by == "page" { "addr" } else { by };
                let having = types_with_field(&spec.types, field, 1, &candidates)
                    .map_err(|e| format!("--by {by}: {}", e.message))?;
                for t in having {
                    let Some(f) = named_field(&spec.types, t, field) else {
                        continue;
                    };
                    if let At::Text(_) = f.at {
                        return Err(format!("--by {by}: '{field}' is text; count by a number"));
                    }
                    let (bytes, signed) = f.cut();
                    let key = Key {
                        at: f.at,
                        bytes,
                        signed,
                        shift: f.shift + spec.page_bits,
                        mask: f.mask >> spec.page_bits,
                    };
                    spec.keys[t] = Some(key);
                    spec.shown[t] = Some(Shown {
                        shows: f.shows,
                        field: f.field.map(|(i, _)| i),
                    });
                }
            }
        }
        for (t, fixed) in spec.fixed.iter_mut().enumerate() {
            *fixed = spec.keys[t].and_then(|key| {
                Some(KeyRef {
                    slot: key.at.fixed_slot()?,
                    shift: key.shift,
                    mask: key.mask,
                })
            });
        }
        for t in spec.types.declared_ids() {
            if let (Some(_), Some(sites)) = (spec.keys[t], spec.types.declared(t)) {
                spec.by_spec
                    .extend(sites.spec_ids.iter().map(|&id| (id, t as u8)));
            }
        }
        Ok(spec)
    }

    /// The catalogue kinds' keys in the eBPF programs' value slots, as
    /// they count per-event delivery in the kernel.
    pub fn kernel_keys(&self) -> [Option<KeyRef>; EVENT_KIND_SLOTS as usize] {
        self.fixed
    }

    /// The table type and key `event` is counted by, if its type is
    /// counted: its type's id (see [`TABLE_TYPES`]: a counted declared
    /// type's, else its kind's) and its field's value.
    #[inline]
    pub fn count_key(&self, event: &Event<'_>) -> Option<(u8, u64)> {
        let Body::Usdt { spec_id, .. } = &event.body else {
            // A catalogue kind's: its value slot, as a filter reads it.
            let key = self.fixed[event.kind as usize]?;
            let value = filter::value_slot(event, key.slot);
            return Some((event.kind as u8, (value >> key.shift) & key.mask));
        };
        // A USDT event of no counted declared type: the `usdt` kind has no key.
        let &t = self.by_spec.get(spec_id)?;
        let key = self.keys[t as usize].as_ref()?;
        let value = widen(key.at.read(event), key.bytes, key.signed);
        Some((t, (value >> key.shift) & key.mask))
    }

    /// `event`'s key, if its type is counted.
    #[inline]
    pub fn key(&self, event: &Event<'_>) -> Option<u64> {
        self.count_key(event).map(|(_, key)| key)
    }

    /// How the counted type `table_type`'s keys read, and the enum values
    /// of its field.
    fn key_of(&self, table_type: u8) -> Option<(Shown, Option<&EnumValues>)> {
        let t = table_type as TypeId;
        let shown = (*self.shown.get(t)?)?;
        let field = shown.field.and_then(|i| self.types.fields(t)?.get(i));
        Some((shown, field.and_then(|f| f.values.as_ref())))
    }

    /// The name of a table type: its event type's.
    pub fn type_name(&self, table_type: u8) -> &str {
        self.types.name(table_type as TypeId)
    }

    /// How a key of a table type reads: the type's name (`--by event`), a
    /// page's first address, or as its field reads (an enum value by
    /// name, an address in hex, a code address by its function, a
    /// register by name, a bool, a signed number, a branch's kind).
    pub fn show_key(&self, table_type: u8, key: u64) -> String {
        match self.by.as_str() {
            "event" => return self.type_name(table_type).to_string(),
            "page" => return format!("{:#x}", key << self.page_bits),
            _ => {}
        }
        let Some((k, values)) = self.key_of(table_type) else {
            return key.to_string();
        };
        match k.shows {
            Shows::Number(kind) => {
                let code = self.function_of(table_type, key);
                key_text(read_as(kind, key, values, &self.registers), code)
            }
            shows => (shows.names().iter())
                .find(|(_, v)| *v == key)
                .map_or_else(|| key.to_string(), |(n, _)| n.to_string()),
        }
    }

    /// [`KeySpec::show_key`] of a catalogue kind's key.
    pub fn show(&self, kind: EventKind, key: u64) -> String {
        self.show_key(kind as u8, key)
    }

    /// The name of a key: a register's, where the guest names it, an enum
    /// value's, the function an allocation's caller is in, or the guest
    /// function a pc is in (JSON gives it as `key_name`).
    pub fn key_name(&self, table_type: u8, key: u64) -> Option<Cow<'_, str>> {
        if matches!(self.by.as_str(), "event" | "page") {
            return None;
        }
        let (k, values) = self.key_of(table_type)?;
        match k.shows {
            Shows::Number(FieldKind::Register) => self.registers.get(key).map(Cow::Borrowed),
            Shows::Number(FieldKind::Enum) => values?.name_of(key).map(Cow::Borrowed),
            _ => self.function_of(table_type, key).map(Cow::Owned),
        }
    }

    /// The function holding `key` when it is a code address: a catalogue
    /// type's `pc` in the guest program (a QEMU guest's), the heap's
    /// types' caller in the traced process.
    fn function_of(&self, table_type: u8, key: u64) -> Option<String> {
        let t = table_type as TypeId;
        let code = match self.types.declared(t) {
            None if self.by == "pc" => &self.guest_code,
            Some(d) if d.event.provider == HEAP_PROVIDER && self.by == HEAP_CALLER => &self.code,
            _ => return None,
        };
        code.name_of(key)
    }

    /// The catalogue kinds it counts.
    pub fn kinds(&self) -> impl Iterator<Item = EventKind> + '_ {
        EventKind::ALL
            .iter()
            .copied()
            .filter(|&k| self.keys[k as usize].is_some())
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
    use crate::questions::filter::FieldRef;
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
            let fields = crate::questions::filter::fields_of(EventKind::MemWrite);
            let Some((_, FieldRef::Value { slot, .. })) = fields.iter().find(|(n, _)| *n == field)
            else {
                panic!()
            };
            let want = crate::questions::filter::values(&e)[*slot as usize];
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

    /// A declared type's key is looked up as a catalogue kind's: its
    /// events are counted by `tid` and `pid` as every type's, and by the
    /// page of its `addr`.
    #[test]
    fn declared_types_key_as_the_catalogues_do() {
        use crate::session::declared::{DeclaredField, EventType};
        let declared = [DeclaredSites {
            event: EventType {
                provider: "emu".into(),
                name: "mmio".into(),
                fields: vec![DeclaredField::new("addr", FieldKind::Address, 4, None)],
            },
            spec_ids: vec![4],
        }];
        let row = EVENT_KIND_SLOTS as u8;
        let mut mmio = Event::usdt(4, &[0x1234]);
        mmio.header.tid = 9;
        let spec = KeySpec::new("tid", 4096, &[EventKind::MemRead], &declared).unwrap();
        assert_eq!(spec.count_key(&mmio), Some((row, 9)));
        assert_eq!(spec.show_key(row, 9), "9");
        let spec = KeySpec::new("page", 256, &[EventKind::MemRead], &declared).unwrap();
        assert_eq!(spec.count_key(&mmio), Some((row, 0x12)));
        assert_eq!(spec.show_key(row, 0x12), "0x1200");
        assert_eq!(spec.key_name(row, 0x12), None);
        let read = event(EventKind::MemRead, [1, 0x1234, 0, 0], 1);
        assert_eq!(
            spec.count_key(&read),
            Some((EventKind::MemRead as u8, 0x12))
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
