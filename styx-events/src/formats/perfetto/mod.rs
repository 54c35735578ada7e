//! `-o perfetto`: a Perfetto protobuf trace for ui.perfetto.dev and
//! trace_processor; gzip-compressed when the output file ends in `.gz`.
//!
//! One track per process and per thread (TrackDescriptor); spans are slices
//! on their thread (SLICE_BEGIN/SLICE_END, ends paired to begins by id, see
//! [`super::spans`]); the rare events (interrupts, control, markers, other
//! providers' probes, traced functions) are INSTANTs named after their type
//! with their fields as debug annotations (addresses as pointers, shown in
//! hex); each event type gets a counter track `TYPE/s` of its rate per
//! 10 ms window; a process whose heap `styx_alloc` traces gets a counter
//! track of the bytes it allocated, net, since tracing began
//! ([`super::heap`]). Times are kernel `CLOCK_MONOTONIC`, declared as the
//! trace's clock, with a clock snapshot to realtime so the UI can show wall
//! time.
//!
//! Built for big traces (an emulator makes 100 M events a second; the UI
//! opens ~2 GB): names are interned (`InternedData`: event names,
//! categories, annotation names, each once per sequence) and times are
//! deltas on an incremental clock of the sequence's own (`ClockSnapshot`
//! with `is_incremental`, made the packets' clock by `TracePacketDefaults`;
//! a time earlier than the sequence's last is written whole on
//! `CLOCK_MONOTONIC`). The frequent, instruction-level types (the batched
//! ones but interrupts: instructions, blocks, memory and register accesses,
//! branches) are written compactly, ~20 bytes each: every thread's events of one such type
//! are a packet sequence of their own, whose defaults name the thread's
//! track and one counter track per field (`mem_read addr`, … under the
//! thread; a register access's are its register's, `reg_write sp val`, so
//! the UI shows each register's values by its name); an event is an INSTANT with its interned name and its fields'
//! values as `extra_counter_values`, in the defaults' order (memory sizes
//! last), leaving out the trailing values equal to the ones before them on
//! their tracks (a counter holds its value until the next). Every sequence
//! starts with `SEQ_INCREMENTAL_STATE_CLEARED`, its defaults, clock and
//! names; packets that use interned names set `SEQ_NEEDS_INCREMENTAL_STATE`
//! except the compact ones (two bytes of ~20; the flag only lets a reader
//! skip packets after a loss inside a sequence, which a file written whole
//! cannot have).
//!
//! The trace is a stream of `Trace.packet` fields, each encoded on its own
//! (protobuf concatenates repeated fields), so memory stays bounded.

use super::heap::{HeapBytes, HEAP_TRACK};
use super::rates::{Rates, Window};
use super::spans::{span_step, SpanStep, Spans};
use crate::questions::filter::{fields_of, values, FieldRef};
use crate::record::event::{Body, Event};
use crate::session::fields::{for_each_field, Arg, Field, Names};
use crate::session::header::Header;
use crate::session::reading::Reading;
use crate::session::schema;
use crate::write::writer::{Chunked, EventWriter, Totals};
use flate2::write::GzEncoder;
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use styx_common::filter::{SLOT_PID, SLOT_SIZE, SLOT_TID};
use styx_common::schema::FieldKind;
use styx_common::{Delivery, EventKind, EVENT_KIND_SLOTS};

pub mod proto;
use proto::*;

/// The sequence of the descriptors, the rates and the rare events.
const MAIN_SEQUENCE: u32 = 1;
/// Each sequence's incremental clock (sequence-scoped ids: the same id on
/// each is its own clock).
const INCREMENTAL_CLOCK: u32 = CLOCK_SEQUENCE_FIRST;
const CHUNK: usize = 64 << 10;
/// About the most the Perfetto UI opens (it runs trace_processor in the
/// browser, in 4 GiB of WebAssembly memory).
pub const UI_LIMIT_BYTES: u64 = 2 << 30;

/// Track ids: a kind of track in the top byte, its process, thread or
/// event kind below.
fn process_uuid(pid: u32) -> u64 {
    1 << 56 | u64::from(pid)
}
fn thread_uuid(tid: u32) -> u64 {
    2 << 56 | u64::from(tid)
}
fn counter_uuid(kind: usize) -> u64 {
    3 << 56 | kind as u64
}
fn heap_uuid(pid: u32) -> u64 {
    4 << 56 | u64::from(pid)
}
/// The `n`th counter track of an instruction-level type's field.
fn field_uuid(n: u64) -> u64 {
    5 << 56 | n
}

/// The output, compressed or not.
enum Out {
    Plain(Box<dyn Write>),
    Gzip(GzEncoder<Box<dyn Write>>),
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Out::Plain(w) => w.write(buf),
            Out::Gzip(w) => w.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Out::Plain(w) => w.flush(),
            Out::Gzip(w) => w.flush(),
        }
    }
}

/// A sequence's incremental clock: the last time written on it.
struct SequenceClock {
    last_ns: u64,
}

impl SequenceClock {
    /// `packet`'s time: a delta from the last on the sequence's clock, or,
    /// earlier than that, whole on CLOCK_MONOTONIC.
    fn stamp(&mut self, packet: &mut TracePacket, ts_ns: u64) {
        match ts_ns.checked_sub(self.last_ns) {
            Some(delta) => {
                packet.timestamp = Some(delta);
                self.last_ns = ts_ns;
            }
            None => {
                packet.timestamp = Some(ts_ns);
                packet.timestamp_clock_id = Some(CLOCK_MONOTONIC);
            }
        }
    }
}

/// A sequence's interned names, of one kind (event names, categories,
/// annotation names): iids from 1.
#[derive(Default)]
struct Interned {
    iids: HashMap<String, u64>,
}

impl Interned {
    /// `name`'s iid, and its entry if it is new (to go in this packet's
    /// `InternedData`).
    fn iid(&mut self, name: &str, new: &mut Vec<InternedName>) -> u64 {
        if let Some(&iid) = self.iids.get(name) {
            return iid;
        }
        let iid = self.iids.len() as u64 + 1;
        self.iids.insert(name.to_string(), iid);
        new.push(InternedName {
            iid: Some(iid),
            name: Some(name.to_string()),
        });
        iid
    }
}

/// Which events share a compact sequence: a thread's of one type (and
/// of one register, for register accesses).
type CompactKey = (u32, EventKind, Option<u64>);

/// A thread's events of one instruction-level type: their sequence.
struct Compact {
    sequence: u32,
    clock: SequenceClock,
    /// The type's fields, in the counters' order (sizes last).
    fields: Vec<FieldRef>,
    /// The value last written to each field's counter.
    last: Vec<u64>,
}

/// The fields an instruction-level type's counters show, named, in their
/// order: the catalogue's (a branch's kind and `conditional` apart), sizes
/// last (they change least, and trailing values equal to the last are left
/// out); not tid and pid, nor a register's number (the tracks say them).
/// Also the register field, if the type has one.
fn compact_fields(kind: EventKind) -> (Vec<(&'static str, FieldRef)>, Option<FieldRef>) {
    let register = |name: &str| {
        schema::catalogue_field(kind, name)
            .is_some_and(|f| f.reading == Reading::Number(FieldKind::Register))
    };
    let slot_is = |f: &FieldRef, slots: &[u8]| matches!(f, FieldRef::Value { slot, .. } if slots.contains(slot));
    let all = fields_of(kind);
    let reg = all.iter().find(|(name, _)| register(name)).map(|(_, f)| *f);
    let mut fields: Vec<(&'static str, FieldRef)> = all
        .into_iter()
        .filter(|(name, f)| !register(name) && !slot_is(f, &[SLOT_TID, SLOT_PID]))
        .collect();
    fields.sort_by_key(|(_, f)| slot_is(f, &[SLOT_SIZE]));
    (fields, reg)
}

/// A field's value in an event's value slots.
fn value_of(field: FieldRef, slots: &[u64]) -> u64 {
    match field {
        FieldRef::Value {
            slot, shift, mask, ..
        } => (slots[slot as usize] >> shift) & mask,
        FieldRef::Text(_) => 0, // none of the batched types has text
    }
}

/// Whether `kind`'s events are written compactly: the instruction-level
/// types. Interrupts come in batches too, but are rare beside them and
/// read best as named INSTANTs with their fields.
fn is_compact(kind: EventKind) -> bool {
    kind.delivery() == Delivery::Batched && kind != EventKind::Interrupt
}

/// Writes a Perfetto protobuf trace.
pub struct PerfettoWriter {
    out: Chunked<Out>,
    /// One packet's encoding, before it joins the chunk.
    packet: Vec<u8>,
    names: Names,
    pid: u32,
    threads: HashSet<u32>,
    counters: HashSet<usize>,
    spans: Spans,
    rates: Rates,
    /// None when no probe of the session is the heap's.
    heap: Option<HeapBytes>,
    /// Processes whose heap track is described.
    heaps: HashSet<u32>,
    /// The main sequence's clock and interned names.
    clock: SequenceClock,
    event_names: Interned,
    categories: Interned,
    annotation_names: Interned,
    /// Instruction-level events' sequences, by thread and kind.
    compact: HashMap<CompactKey, Compact>,
    next_sequence: u32,
    field_tracks: u64,
    /// Per kind id, once looked up: its register field, if it has one.
    register_fields: [Option<Option<FieldRef>>; EVENT_KIND_SLOTS as usize],
    /// Bytes written (before compression), the most the UI opens (a field
    /// for the tests), and whether it was passed and said.
    written: u64,
    ui_limit: u64,
    warned: bool,
}

impl PerfettoWriter {
    /// Starts the trace on `out`: the clock snapshot and the process track.
    pub fn new(out: Box<dyn Write>, header: &Header, gzip: bool) -> PerfettoWriter {
        let out = if gzip {
            Out::Gzip(GzEncoder::new(out, flate2::Compression::fast()))
        } else {
            Out::Plain(out)
        };
        let start = header.clock.monotonic_ns;
        let mut writer = PerfettoWriter {
            out: Chunked::new(out, CHUNK),
            packet: Vec::with_capacity(4096),
            names: Names::new(header),
            pid: header.pid,
            threads: HashSet::new(),
            counters: HashSet::new(),
            spans: Spans::default(),
            rates: Rates::default(),
            heap: None,
            heaps: HashSet::new(),
            clock: SequenceClock { last_ns: start },
            event_names: Interned::default(),
            categories: Interned::default(),
            annotation_names: Interned::default(),
            compact: HashMap::new(),
            next_sequence: MAIN_SEQUENCE + 1,
            field_tracks: 0,
            register_fields: [None; EVENT_KIND_SLOTS as usize],
            written: 0,
            ui_limit: UI_LIMIT_BYTES,
            warned: false,
        };
        writer.heap = HeapBytes::new(&writer.names.usdt);
        let mut clocks = incremental_clocks(start);
        clocks.push(SnapshotClock {
            clock_id: Some(CLOCK_REALTIME),
            timestamp: Some(header.clock.realtime_ns),
            is_incremental: None,
        });
        writer.packet(
            MAIN_SEQUENCE,
            TracePacket {
                // Starts the sequence: nothing earlier to depend on.
                sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
                clock_snapshot: Some(ClockSnapshot {
                    clocks,
                    primary_trace_clock: Some(CLOCK_MONOTONIC as i32),
                }),
                trace_packet_defaults: Some(TracePacketDefaults {
                    timestamp_clock_id: Some(INCREMENTAL_CLOCK),
                    track_event_defaults: None,
                }),
                ..TracePacket::default()
            },
        );
        writer.describe(TrackDescriptor {
            uuid: Some(process_uuid(header.pid)),
            process: Some(ProcessDescriptor {
                pid: Some(header.pid as i32),
                process_name: Some(header.exe.clone()),
            }),
            ..TrackDescriptor::default()
        });
        writer
    }

    fn packet(&mut self, sequence: u32, mut packet: TracePacket) {
        packet.trusted_packet_sequence_id = Some(sequence);
        prost::encoding::message::encode(TRACE_PACKET_FIELD, &packet, &mut self.packet);
        self.written += self.packet.len() as u64;
        self.out.buf.extend_from_slice(&self.packet);
        self.packet.clear();
        if self.written > self.ui_limit && !self.warned {
            self.warned = true;
            log::warn!(
                "the Perfetto trace is past {} GiB, more than ui.perfetto.dev opens: \
                 cut it (`styx-loader read CAPTURE --from S --to S`, `-e TYPES`, `--filter`) \
                 or load it into trace_processor",
                self.ui_limit >> 30
            );
        }
    }

    fn describe(&mut self, track: TrackDescriptor) {
        self.packet(
            MAIN_SEQUENCE,
            TracePacket {
                track_descriptor: Some(track),
                ..TracePacket::default()
            },
        );
    }

    /// A track event on the main sequence at `ts_ns`, with the names it
    /// interned first.
    fn track_event(&mut self, ts_ns: u64, event: TrackEvent, interned: Option<InternedData>) {
        let mut packet = TracePacket {
            track_event: Some(event),
            interned_data: interned,
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            ..TracePacket::default()
        };
        self.clock.stamp(&mut packet, ts_ns);
        self.packet(MAIN_SEQUENCE, packet);
    }

    /// A named track event on thread `track` (interning its name, category
    /// and annotations' names).
    fn named_event(
        &mut self,
        ts_ns: u64,
        r#type: i32,
        track: u64,
        name: &str,
        category: &str,
        annotations: Vec<(String, DebugAnnotation)>,
    ) {
        let mut names = Vec::new();
        let mut categories = Vec::new();
        let mut annotation_names = Vec::new();
        let name_iid = self.event_names.iid(name, &mut names);
        let category_iid = self.categories.iid(category, &mut categories);
        let debug_annotations = annotations
            .into_iter()
            .map(|(name, a)| DebugAnnotation {
                name_iid: Some(self.annotation_names.iid(&name, &mut annotation_names)),
                ..a
            })
            .collect();
        let interned =
            (!names.is_empty() || !categories.is_empty() || !annotation_names.is_empty())
                .then_some(InternedData {
                    event_categories: categories,
                    event_names: names,
                    debug_annotation_names: annotation_names,
                });
        let event = TrackEvent {
            r#type: Some(r#type),
            track_uuid: Some(track),
            name_iid: Some(name_iid),
            category_iids: vec![category_iid],
            debug_annotations,
            ..TrackEvent::default()
        };
        self.track_event(ts_ns, event, interned);
    }

    fn describe_thread(&mut self, pid: u32, tid: u32) {
        if self.threads.insert(tid) {
            self.describe(TrackDescriptor {
                uuid: Some(thread_uuid(tid)),
                parent_uuid: Some(process_uuid(pid)),
                thread: Some(ThreadDescriptor {
                    pid: Some(pid as i32),
                    tid: Some(tid as i32),
                    thread_name: None,
                }),
                ..TrackDescriptor::default()
            });
        }
    }

    fn counters(&mut self, window: Window) {
        for (kind, rate) in window.per_second {
            if self.counters.insert(kind) {
                let name = EventKind::from_id(kind as u8).map_or("?", EventKind::probe_name);
                self.describe(TrackDescriptor {
                    uuid: Some(counter_uuid(kind)),
                    parent_uuid: Some(process_uuid(self.pid)),
                    name: Some(format!("{name}/s")),
                    counter: Some(CounterDescriptor::default()),
                    ..TrackDescriptor::default()
                });
            }
            let event = TrackEvent {
                r#type: Some(TYPE_COUNTER),
                track_uuid: Some(counter_uuid(kind)),
                counter_value: Some(rate as i64),
                ..TrackEvent::default()
            };
            let mut packet = TracePacket {
                track_event: Some(event),
                ..TracePacket::default()
            };
            self.clock.stamp(&mut packet, window.start_ns);
            self.packet(MAIN_SEQUENCE, packet);
        }
    }

    /// An instruction-level event on its thread's sequence of its type
    /// (started, with its counter tracks, at the first).
    fn compact_event(&mut self, event: &Event<'_>) {
        let h = &event.header;
        let slots = values(event);
        let register = *self.register_fields[event.kind as usize]
            .get_or_insert_with(|| compact_fields(event.kind).1);
        let key = (h.tid, event.kind, register.map(|r| value_of(r, &slots)));
        if !self.compact.contains_key(&key) {
            self.start_compact(key, h.ts_ns);
        }
        let compact = self.compact.get_mut(&key).expect("started");
        let mut extra: Vec<i64> = Vec::with_capacity(compact.fields.len());
        // Up to the last value its counter does not hold already.
        let mut changed = 0;
        for (i, (field, last)) in compact.fields.iter().zip(&mut compact.last).enumerate() {
            let value = value_of(*field, &slots);
            if value != *last {
                changed = i + 1;
            }
            *last = value;
            extra.push(value as i64);
        }
        extra.truncate(changed);
        let mut packet = TracePacket {
            track_event: Some(TrackEvent {
                r#type: Some(TYPE_INSTANT),
                name_iid: Some(1),
                extra_counter_values: extra,
                ..TrackEvent::default()
            }),
            ..TracePacket::default()
        };
        compact.clock.stamp(&mut packet, h.ts_ns);
        let sequence = compact.sequence;
        self.packet(sequence, packet);
    }

    /// A span's slice begin, with its id.
    fn span_begin(&mut self, ts_ns: u64, track: u64, id: u64, category: &str, name: &str) {
        let id = DebugAnnotation {
            uint_value: Some(id),
            ..DebugAnnotation::default()
        };
        let annotations = vec![("id".to_string(), id)];
        self.named_event(ts_ns, TYPE_SLICE_BEGIN, track, name, category, annotations);
    }

    /// Describes the counter tracks of `key`'s events and starts their
    /// sequence, at `ts_ns`.
    fn start_compact(&mut self, key: CompactKey, ts_ns: u64) {
        let (tid, kind, register) = key;
        let (fields, _) = compact_fields(kind);
        let mut uuids = Vec::with_capacity(fields.len());
        let prefix = match register {
            Some(num) => match self.names.registers.get(num) {
                Some(name) => format!("{} {name}", kind.probe_name()),
                None => format!("{} r{num}", kind.probe_name()),
            },
            None => kind.probe_name().to_string(),
        };
        for (name, _) in &fields {
            self.field_tracks += 1;
            let uuid = field_uuid(self.field_tracks);
            uuids.push(uuid);
            self.describe(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(thread_uuid(tid)),
                name: Some(format!("{prefix} {name}")),
                counter: Some(CounterDescriptor::default()),
                ..TrackDescriptor::default()
            });
        }
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.packet(
            sequence,
            TracePacket {
                sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
                clock_snapshot: Some(ClockSnapshot {
                    clocks: incremental_clocks(ts_ns),
                    primary_trace_clock: None,
                }),
                trace_packet_defaults: Some(TracePacketDefaults {
                    timestamp_clock_id: Some(INCREMENTAL_CLOCK),
                    track_event_defaults: Some(TrackEventDefaults {
                        track_uuid: Some(thread_uuid(tid)),
                        extra_counter_track_uuids: uuids,
                    }),
                }),
                interned_data: Some(InternedData {
                    event_names: vec![InternedName {
                        iid: Some(1),
                        name: Some(kind.probe_name().to_string()),
                    }],
                    ..InternedData::default()
                }),
                ..TracePacket::default()
            },
        );
        // No value is held yet: u64::MAX is no field's (sizes are a byte,
        // kinds masked), so the first event writes every value.
        let last = vec![u64::MAX; fields.len()];
        let fields = fields.into_iter().map(|(_, f)| f).collect();
        let clock = SequenceClock { last_ns: ts_ns };
        self.compact.insert(
            key,
            Compact {
                sequence,
                clock,
                fields,
                last,
            },
        );
    }
}

/// The clocks a sequence starts with: its incremental clock and
/// CLOCK_MONOTONIC, both at `ts_ns`.
fn incremental_clocks(ts_ns: u64) -> Vec<SnapshotClock> {
    vec![
        SnapshotClock {
            clock_id: Some(CLOCK_MONOTONIC),
            timestamp: Some(ts_ns),
            is_incremental: None,
        },
        SnapshotClock {
            clock_id: Some(INCREMENTAL_CLOCK),
            timestamp: Some(ts_ns),
            is_incremental: Some(true),
        },
    ]
}

impl PerfettoWriter {
    /// The heap's counter, when `event` changed it.
    fn heap_counter(&mut self, event: &Event<'_>) {
        let Some((pid, net)) = self.heap.as_mut().and_then(|h| h.count(event)) else {
            return;
        };
        if self.heaps.insert(pid) {
            self.describe(TrackDescriptor {
                uuid: Some(heap_uuid(pid)),
                parent_uuid: Some(process_uuid(pid)),
                name: Some(HEAP_TRACK.into()),
                counter: Some(CounterDescriptor::default()),
                ..TrackDescriptor::default()
            });
        }
        let counter = TrackEvent {
            r#type: Some(TYPE_COUNTER),
            track_uuid: Some(heap_uuid(pid)),
            counter_value: Some(net),
            ..TrackEvent::default()
        };
        self.track_event(event.header.ts_ns, counter, None);
    }
}

/// The event's fields as debug annotations.
fn annotations(event: &Event<'_>, names: &Names) -> Vec<(String, DebugAnnotation)> {
    let mut out = Vec::new();
    let string = |value: String| DebugAnnotation {
        string_value: Some(value),
        ..DebugAnnotation::default()
    };
    let _ = for_each_field(event, names, |field| {
        match field {
            Field::Value(name, arg) => out.push((name.to_string(), annotation(arg))),
            Field::Name(name, v) | Field::Str(name, v) => {
                out.push((name.to_string(), string(v.to_string())))
            }
            Field::Flag(name, v) => out.push((name.to_string(), annotation(Arg::Bool(v)))),
            Field::Text(name, text) => {
                out.push((name.to_string(), string(text.lossy().into_owned())))
            }
            Field::Args(args) => {
                let cut = args.any_string(|s| s.cut);
                for (name, arg) in args {
                    out.push((name.to_string(), annotation(arg)));
                }
                if cut {
                    out.push(("truncated".to_string(), annotation(Arg::Bool(true))));
                }
            }
        }
        Ok::<(), ()>(())
    });
    out
}

/// A value as a debug annotation: numbers as unsigned or signed, addresses
/// and hex values as pointers (hex in the UI), names and strings as text.
fn annotation(arg: Arg<'_>) -> DebugAnnotation {
    let mut annotation = DebugAnnotation::default();
    match arg {
        Arg::Signed(v) => annotation.int_value = Some(v),
        Arg::Unsigned(v) | Arg::Dec(v) | Arg::Reg(v, None) | Arg::Enum(v, None) => {
            annotation.uint_value = Some(v)
        }
        Arg::Addr(v) => annotation.pointer_value = Some(v),
        Arg::Reg(_, Some(value)) | Arg::Enum(_, Some(value)) => {
            annotation.string_value = Some(value.to_string())
        }
        Arg::Bool(v) => annotation.bool_value = Some(v),
        Arg::Str(s) => {
            annotation.string_value = Some(match s.unreadable {
                Some(errno) => format!("<unreadable: errno {errno}>"),
                None => s.lossy().into_owned(),
            })
        }
    }
    annotation
}

impl EventWriter for PerfettoWriter {
    // Names are looked up per event; the heap's tracks stay those of the
    // allocator known at the start.
    fn header_grew(&mut self, header: &Header) -> bool {
        self.names = Names::new(header);
        true
    }

    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        let h = &event.header;
        for window in self.rates.count(event.kind as usize, h.ts_ns) {
            self.counters(window);
        }
        self.describe_thread(h.pid, h.tid);
        let track = thread_uuid(h.tid);
        match span_step(&mut self.spans, event) {
            SpanStep::Begin => {
                let Body::Span { id, category, name } = &event.body else {
                    unreachable!("span_step checked the body")
                };
                self.span_begin(h.ts_ns, track, *id, &category.lossy(), &name.lossy());
            }
            SpanStep::CallBegin => {
                let Body::Call(call) = &event.body else {
                    unreachable!("span_step checked the body")
                };
                let name = self.names.function(call.function).to_string();
                let depth = DebugAnnotation {
                    uint_value: Some(call.depth.into()),
                    ..DebugAnnotation::default()
                };
                let annotations = vec![("depth".to_string(), depth)];
                self.named_event(
                    h.ts_ns,
                    TYPE_SLICE_BEGIN,
                    track,
                    &name,
                    "function",
                    annotations,
                );
            }
            SpanStep::End(n) => {
                for _ in 0..n {
                    let end = TrackEvent {
                        r#type: Some(TYPE_SLICE_END),
                        track_uuid: Some(track),
                        ..TrackEvent::default()
                    };
                    self.track_event(h.ts_ns, end, None);
                }
                for (id, category, name) in std::mem::take(&mut self.spans.reopen) {
                    self.span_begin(h.ts_ns, track, id, &category, &name);
                }
            }
            SpanStep::Instant if is_compact(event.kind) => self.compact_event(event),
            SpanStep::Instant => {
                self.heap_counter(event);
                let annotations = annotations(event, &self.names);
                self.named_event(
                    h.ts_ns,
                    TYPE_INSTANT,
                    track,
                    event.name(),
                    "styx",
                    annotations,
                );
            }
        }
        self.out.event_done()
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        if let Some(window) = self.rates.finish() {
            self.counters(window);
        }
        self.out.write_out()?;
        match self.out.get_mut() {
            Out::Plain(w) => w.flush(),
            Out::Gzip(w) => {
                w.try_finish()?;
                w.get_mut().flush()
            }
        }
    }
}

// Keeps the encoder honest: a packet is what Perfetto reads as one.
#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn packets_concatenate_into_a_trace() {
        let packet = TracePacket {
            timestamp: Some(5),
            ..TracePacket::default()
        };
        let mut buf = Vec::new();
        prost::encoding::message::encode(TRACE_PACKET_FIELD, &packet, &mut buf);
        prost::encoding::message::encode(TRACE_PACKET_FIELD, &packet, &mut buf);
        let trace = Trace::decode(&buf[..]).unwrap();
        assert_eq!(trace.packet, vec![packet.clone(), packet]);
    }

    /// Past the UI's limit the writer says so once; its bytes are the
    /// file's (before gzip).
    #[test]
    fn a_trace_past_the_ui_limit_is_said_once() {
        let header = Header::now(1, "/bin/emu", Vec::new());
        let file = crate::write::writer::SharedOutput::default();
        let mut writer = PerfettoWriter::new(Box::new(file.clone()), &header, false);
        writer.ui_limit = 4096;
        let mut event = Event {
            header: styx_common::RecordHeader {
                kind: EventKind::MemRead as u8,
                tid: 1,
                pid: 1,
                ..Default::default()
            },
            kind: EventKind::MemRead,
            body: Body::Args([0x1000, 0x2000, 7, 0]),
        };
        for i in 0..1000u64 {
            event.header.ts_ns = header.clock.monotonic_ns + i * 10;
            event.body = Body::Args([0x1000 + i, 0x2000 + i, i, 0]);
            writer.event(&event).unwrap();
            assert_eq!(writer.warned, writer.written > 4096, "after {i} events");
        }
        assert!(writer.warned);
        let totals = Totals {
            events: &[0; EVENT_KIND_SLOTS as usize],
            drops: &[0; EVENT_KIND_SLOTS as usize],
        };
        writer.finish(&totals).unwrap();
        assert_eq!(file.bytes().len() as u64, writer.written);
    }
}
