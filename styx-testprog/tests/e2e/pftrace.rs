//! Perfetto traces read the way Perfetto's trace processor reads them:
//! decoded with Perfetto's own generated schema (`perfetto_protos`), then
//! each packet sequence's incremental state followed as the schema's
//! comments define it (trace_processor's proto reader does the same):
//! `SEQ_INCREMENTAL_STATE_CLEARED` starts a sequence afresh,
//! `TracePacketDefaults` give its packets' clock and its track events'
//! track and extra counter tracks, `InternedData` its names, and a
//! `ClockSnapshot` clock with `is_incremental` makes each later
//! timestamp on that clock a delta from the one before (times on another
//! clock stay whole). What a trace must not do panics here: a sequence
//! that does not start cleared, a name used before it is interned, an
//! incremental time with no snapshot, more counter values than tracks.

use perfetto_protos::debug_annotation::DebugAnnotation;
use perfetto_protos::trace::Trace;
use perfetto_protos::trace_packet::trace_packet::SequenceFlags;
use perfetto_protos::trace_packet::TracePacket;
use perfetto_protos::track_event::track_event::Type;
use protobuf::Message;
use std::collections::{BTreeMap, HashMap};

/// `CLOCK_MONOTONIC`, the trace's clock.
pub const CLOCK_MONOTONIC: u32 = 3;

/// A track event with its sequence's state applied.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub sequence: u32,
    /// Absolute, on CLOCK_MONOTONIC.
    pub ts: u64,
    pub kind: Type,
    pub track: u64,
    pub name: String,
    pub category: String,
    /// Debug annotations by their interned names.
    pub annotations: Vec<(String, DebugAnnotation)>,
    pub counter_value: Option<i64>,
    /// Each extra counter track (the event's or its defaults') with the
    /// value it holds after this event: the one given, or the one before.
    pub counters: Vec<(u64, i64)>,
    /// How many of `counters` the event gave.
    pub given: usize,
}

impl Resolved {
    /// The annotation `name`.
    pub fn annotation(&self, name: &str) -> Option<&DebugAnnotation> {
        self.annotations
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a)
    }

    /// The value of the counter whose track is named `… FIELD`, for the
    /// compact events (their fields as counters).
    pub fn field(&self, tracks: &BTreeMap<u64, Track>, field: &str) -> Option<i64> {
        let suffix = format!(" {field}");
        self.counters
            .iter()
            .find(|(uuid, _)| tracks[uuid].name.ends_with(&suffix))
            .map(|&(_, v)| v)
    }
}

/// A track as its descriptor says.
#[derive(Clone, Debug, Default)]
pub struct Track {
    pub name: String,
    pub parent: Option<u64>,
    pub pid: Option<u64>,
    pub tid: Option<u64>,
    pub counter: bool,
}

/// A whole trace, resolved.
pub struct Decoded {
    pub trace: Trace,
    pub events: Vec<Resolved>,
    pub tracks: BTreeMap<u64, Track>,
}

/// One sequence's incremental state.
#[derive(Default)]
struct Sequence {
    names: HashMap<u64, String>,
    categories: HashMap<u64, String>,
    annotation_names: HashMap<u64, String>,
    clock_id: Option<u32>,
    track: Option<u64>,
    extra_tracks: Vec<u64>,
    /// Incremental clocks: id -> (last value, its CLOCK_MONOTONIC time
    /// minus its value).
    clocks: HashMap<u32, (u64, i128)>,
}

pub fn decode(bytes: &[u8]) -> Decoded {
    let trace = Trace::parse_from_bytes(bytes).expect("decodes with Perfetto's trace schema");
    let mut sequences: HashMap<u32, Sequence> = HashMap::new();
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    let mut tracks = BTreeMap::new();
    let mut held: HashMap<u64, i64> = HashMap::new();
    let mut events = Vec::new();
    for p in &trace.packet {
        let id = p.trusted_packet_sequence_id();
        assert!(id != 0, "every packet names its sequence: {p:?}");
        let seen = counts.entry(id).or_default();
        *seen += 1;
        let flags = p.sequence_flags();
        let cleared = flags & SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32 != 0;
        assert!(
            *seen > 1 || cleared,
            "sequence {id} does not start cleared: {p:?}"
        );
        if cleared {
            sequences.insert(id, Sequence::default());
        }
        let seq = sequences.get_mut(&id).expect("started");
        apply_state(p, seq);
        if p.has_track_descriptor() {
            let d = p.track_descriptor();
            let track = Track {
                name: d.name().to_string(),
                parent: d.has_parent_uuid().then(|| d.parent_uuid()),
                pid: (d.process.is_some()).then(|| d.process.pid() as u64),
                tid: (d.thread.is_some()).then(|| d.thread.tid() as u64),
                counter: d.counter.is_some(),
            };
            assert!(tracks.insert(d.uuid(), track).is_none(), "uuid used twice");
        }
        if !p.has_track_event() {
            continue;
        }
        let ts = time(p, seq);
        events.push(resolve(p, id, ts, seq, &tracks, &mut held));
    }
    Decoded {
        trace,
        events,
        tracks,
    }
}

/// A packet's defaults, interned names and clocks, into its sequence.
fn apply_state(p: &TracePacket, seq: &mut Sequence) {
    if let Some(defaults) = p.trace_packet_defaults.as_ref() {
        seq.clock_id = defaults
            .has_timestamp_clock_id()
            .then(|| defaults.timestamp_clock_id());
        if let Some(te) = defaults.track_event_defaults.as_ref() {
            seq.track = te.has_track_uuid().then(|| te.track_uuid());
            seq.extra_tracks = te.extra_counter_track_uuids.clone();
        }
    }
    if let Some(data) = p.interned_data.as_ref() {
        for n in &data.event_names {
            seq.names.insert(n.iid(), n.name().to_string());
        }
        for n in &data.event_categories {
            seq.categories.insert(n.iid(), n.name().to_string());
        }
        for n in &data.debug_annotation_names {
            seq.annotation_names.insert(n.iid(), n.name().to_string());
        }
    }
    if p.has_clock_snapshot() {
        let clocks = &p.clock_snapshot().clocks;
        let monotonic = clocks
            .iter()
            .find(|c| c.clock_id() == CLOCK_MONOTONIC)
            .expect("each snapshot relates its clocks to CLOCK_MONOTONIC")
            .timestamp();
        for c in clocks.iter().filter(|c| c.is_incremental()) {
            let offset = monotonic as i128 - c.timestamp() as i128;
            seq.clocks.insert(c.clock_id(), (c.timestamp(), offset));
        }
    }
}

/// A packet's time on CLOCK_MONOTONIC.
fn time(p: &TracePacket, seq: &mut Sequence) -> u64 {
    assert!(p.has_timestamp(), "a track event without a time");
    let clock = match p.has_timestamp_clock_id() {
        true => p.timestamp_clock_id(),
        false => seq.clock_id.unwrap_or(CLOCK_MONOTONIC),
    };
    if clock == CLOCK_MONOTONIC {
        return p.timestamp();
    }
    let (last, offset) = seq
        .clocks
        .get_mut(&clock)
        .unwrap_or_else(|| panic!("clock {clock} used before its snapshot: {p:?}"));
    *last += p.timestamp();
    (*last as i128 + *offset) as u64
}

fn resolve(
    p: &TracePacket,
    sequence: u32,
    ts: u64,
    seq: &Sequence,
    tracks: &BTreeMap<u64, Track>,
    held: &mut HashMap<u64, i64>,
) -> Resolved {
    let e = p.track_event();
    let lookup = |table: &HashMap<u64, String>, iid: u64, what: &str| {
        table
            .get(&iid)
            .unwrap_or_else(|| panic!("{what} {iid} used before it was interned: {p:?}"))
            .clone()
    };
    let name = match e.has_name_iid() {
        true => lookup(&seq.names, e.name_iid(), "event name"),
        false => e.name().to_string(),
    };
    let mut categories: Vec<String> = (e.category_iids.iter())
        .map(|&iid| lookup(&seq.categories, iid, "category"))
        .collect();
    categories.extend(e.categories.iter().cloned());
    let annotations = (e.debug_annotations.iter())
        .map(|a| {
            let name = match a.has_name_iid() {
                true => lookup(&seq.annotation_names, a.name_iid(), "annotation name"),
                false => a.name().to_string(),
            };
            (name, a.clone())
        })
        .collect();
    let uuids = match e.extra_counter_track_uuids.is_empty() {
        true => &seq.extra_tracks,
        false => &e.extra_counter_track_uuids,
    };
    assert!(
        e.extra_counter_values.len() <= uuids.len(),
        "more counter values than tracks: {p:?}"
    );
    let mut counters = Vec::new();
    for (i, &uuid) in uuids.iter().enumerate() {
        assert!(
            tracks.get(&uuid).is_some_and(|t| t.counter),
            "no counter track {uuid}"
        );
        if let Some(&v) = e.extra_counter_values.get(i) {
            held.insert(uuid, v);
        }
        if let Some(&v) = held.get(&uuid) {
            counters.push((uuid, v));
        }
    }
    let track = match e.has_track_uuid() {
        true => e.track_uuid(),
        false => seq.track.expect("a track, from the event or its defaults"),
    };
    assert!(
        tracks.contains_key(&track),
        "event on undescribed track {track}"
    );
    Resolved {
        sequence,
        ts,
        kind: e.type_(),
        track,
        name,
        category: categories.join(","),
        annotations,
        counter_value: e.has_counter_value().then(|| e.counter_value()),
        counters,
        given: e.extra_counter_values.len(),
    }
}
