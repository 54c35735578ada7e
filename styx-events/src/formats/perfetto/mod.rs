//! `-o perfetto`: a Perfetto protobuf trace for ui.perfetto.dev and
//! trace_processor; gzip-compressed when the output file ends in `.gz`.
//!
//! One track per process and per thread (TrackDescriptor); spans are slices
//! on their thread (SLICE_BEGIN/SLICE_END, ends paired to begins by id, see
//! [`super::spans`]); every other event is an INSTANT named after its type
//! with its fields as debug annotations (addresses as pointers, shown in
//! hex); each event type gets a counter track `TYPE/s` of its rate per
//! 10 ms window; a process whose heap `styx_alloc` traces gets a counter
//! track of the bytes it allocated, net, since tracing began
//! ([`super::heap`]). Times are kernel `CLOCK_MONOTONIC`, declared as the trace's
//! clock, with a clock snapshot to realtime so the UI can show wall time.
//!
//! The trace is a stream of `Trace.packet` fields, each encoded on its own
//! (protobuf concatenates repeated fields), so memory stays bounded.

use super::heap::{HeapBytes, HEAP_TRACK};
use super::rates::{Rates, Window};
use super::spans::{span_step, SpanStep, Spans};
use crate::record::event::{Body, Event};
use crate::session::fields::{for_each_field, Arg, Field, Names};
use crate::session::header::Header;
use crate::write::writer::{Chunked, EventWriter, Totals};
use flate2::write::GzEncoder;
use std::collections::HashSet;
use std::io::{self, Write};
use styx_common::EventKind;

pub mod proto;
use proto::*;

/// Every packet comes from one writer: one sequence.
const SEQUENCE: u32 = 1;
const CHUNK: usize = 64 << 10;

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
}

impl PerfettoWriter {
    /// Starts the trace on `out`: the clock snapshot and the process track.
    pub fn new(out: Box<dyn Write>, header: &Header, gzip: bool) -> PerfettoWriter {
        let out = if gzip {
            Out::Gzip(GzEncoder::new(out, flate2::Compression::fast()))
        } else {
            Out::Plain(out)
        };
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
        };
        writer.heap = HeapBytes::new(&writer.names.usdt);
        writer.packet(TracePacket {
            // Starts the sequence: nothing earlier to depend on.
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            clock_snapshot: Some(ClockSnapshot {
                clocks: vec![
                    Clock {
                        clock_id: Some(CLOCK_MONOTONIC),
                        timestamp: Some(header.clock.monotonic_ns),
                    },
                    Clock {
                        clock_id: Some(CLOCK_REALTIME),
                        timestamp: Some(header.clock.realtime_ns),
                    },
                ],
                primary_trace_clock: Some(CLOCK_MONOTONIC as i32),
            }),
            ..TracePacket::default()
        });
        writer.packet(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(process_uuid(header.pid)),
                process: Some(ProcessDescriptor {
                    pid: Some(header.pid as i32),
                    process_name: Some(header.exe.clone()),
                }),
                ..TrackDescriptor::default()
            }),
            ..TracePacket::default()
        });
        writer
    }

    fn packet(&mut self, mut packet: TracePacket) {
        packet.trusted_packet_sequence_id = Some(SEQUENCE);
        if packet.timestamp.is_some() {
            packet.timestamp_clock_id = Some(CLOCK_MONOTONIC);
        }
        prost::encoding::message::encode(TRACE_PACKET_FIELD, &packet, &mut self.packet);
        self.out.buf.extend_from_slice(&self.packet);
        self.packet.clear();
    }

    fn track_event(&mut self, ts_ns: u64, event: TrackEvent) {
        self.packet(TracePacket {
            timestamp: Some(ts_ns),
            track_event: Some(event),
            ..TracePacket::default()
        });
    }

    fn describe_thread(&mut self, pid: u32, tid: u32) {
        if self.threads.insert(tid) {
            self.packet(TracePacket {
                track_descriptor: Some(TrackDescriptor {
                    uuid: Some(thread_uuid(tid)),
                    parent_uuid: Some(process_uuid(pid)),
                    thread: Some(ThreadDescriptor {
                        pid: Some(pid as i32),
                        tid: Some(tid as i32),
                        thread_name: None,
                    }),
                    ..TrackDescriptor::default()
                }),
                ..TracePacket::default()
            });
        }
    }

    fn counters(&mut self, window: Window) {
        for (kind, rate) in window.per_second {
            if self.counters.insert(kind) {
                let name = EventKind::from_id(kind as u8).map_or("?", EventKind::probe_name);
                self.packet(TracePacket {
                    track_descriptor: Some(TrackDescriptor {
                        uuid: Some(counter_uuid(kind)),
                        parent_uuid: Some(process_uuid(self.pid)),
                        name: Some(format!("{name}/s")),
                        counter: Some(CounterDescriptor::default()),
                        ..TrackDescriptor::default()
                    }),
                    ..TracePacket::default()
                });
            }
            self.track_event(
                window.start_ns,
                TrackEvent {
                    r#type: Some(TYPE_COUNTER),
                    track_uuid: Some(counter_uuid(kind)),
                    counter_value: Some(rate as i64),
                    ..TrackEvent::default()
                },
            );
        }
    }
}

impl PerfettoWriter {
    /// The heap's counter, when `event` changed it.
    fn heap_counter(&mut self, event: &Event<'_>) {
        let Some((pid, net)) = self.heap.as_mut().and_then(|h| h.count(event)) else {
            return;
        };
        if self.heaps.insert(pid) {
            self.packet(TracePacket {
                track_descriptor: Some(TrackDescriptor {
                    uuid: Some(heap_uuid(pid)),
                    parent_uuid: Some(process_uuid(pid)),
                    name: Some(HEAP_TRACK.into()),
                    counter: Some(CounterDescriptor::default()),
                    ..TrackDescriptor::default()
                }),
                ..TracePacket::default()
            });
        }
        self.track_event(
            event.header.ts_ns,
            TrackEvent {
                r#type: Some(TYPE_COUNTER),
                track_uuid: Some(heap_uuid(pid)),
                counter_value: Some(net),
                ..TrackEvent::default()
            },
        );
    }
}

/// The event's fields as debug annotations.
fn annotations(event: &Event<'_>, names: &Names) -> Vec<DebugAnnotation> {
    let mut out = Vec::new();
    let named = |name: &str| DebugAnnotation {
        name: Some(name.to_string()),
        ..DebugAnnotation::default()
    };
    let _ = for_each_field(event, names, |field| {
        match field {
            Field::Hex(name, v) => out.push(DebugAnnotation {
                pointer_value: Some(v),
                ..named(name)
            }),
            Field::Dec(name, v) | Field::Reg(name, v, None) => out.push(DebugAnnotation {
                uint_value: Some(v),
                ..named(name)
            }),
            Field::Reg(name, _, Some(reg_name)) => out.push(DebugAnnotation {
                string_value: Some(reg_name.to_string()),
                ..named(name)
            }),
            Field::Name(name, v) | Field::Str(name, v) => out.push(DebugAnnotation {
                string_value: Some(v.to_string()),
                ..named(name)
            }),
            Field::Flag(name, v) => out.push(DebugAnnotation {
                bool_value: Some(v),
                ..named(name)
            }),
            Field::Text(name, text) => out.push(DebugAnnotation {
                string_value: Some(text.lossy().into_owned()),
                ..named(name)
            }),
            Field::Args(args) => {
                let cut = args.any_string(|s| s.cut);
                for (name, arg) in args {
                    out.push(match arg {
                        Arg::Signed(v) => DebugAnnotation {
                            int_value: Some(v),
                            ..named(name)
                        },
                        Arg::Unsigned(v) | Arg::Dec(v) | Arg::Reg(v, None) | Arg::Enum(v, None) => {
                            DebugAnnotation {
                                uint_value: Some(v),
                                ..named(name)
                            }
                        }
                        Arg::Addr(v) => DebugAnnotation {
                            pointer_value: Some(v),
                            ..named(name)
                        },
                        Arg::Reg(_, Some(value)) | Arg::Enum(_, Some(value)) => DebugAnnotation {
                            string_value: Some(value.to_string()),
                            ..named(name)
                        },
                        Arg::Bool(v) => DebugAnnotation {
                            bool_value: Some(v),
                            ..named(name)
                        },
                        Arg::Str(s) => DebugAnnotation {
                            string_value: Some(match s.unreadable {
                                Some(errno) => format!("<unreadable: errno {errno}>"),
                                None => s.lossy().into_owned(),
                            }),
                            ..named(name)
                        },
                    });
                }
                if cut {
                    out.push(DebugAnnotation {
                        bool_value: Some(true),
                        ..named("truncated")
                    });
                }
            }
        }
        Ok::<(), ()>(())
    });
    out
}

impl EventWriter for PerfettoWriter {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        let h = &event.header;
        for window in self.rates.count(event.kind as usize, h.ts_ns) {
            self.counters(window);
        }
        self.describe_thread(h.pid, h.tid);
        let track = Some(thread_uuid(h.tid));
        match span_step(&mut self.spans, event) {
            SpanStep::Begin => {
                let Body::Span { id, category, name } = &event.body else {
                    unreachable!("span_step checked the body")
                };
                let begin = span_begin(track, *id, &category.lossy(), &name.lossy());
                self.track_event(h.ts_ns, begin);
            }
            SpanStep::CallBegin => {
                let Body::Call(call) = &event.body else {
                    unreachable!("span_step checked the body")
                };
                let begin = TrackEvent {
                    r#type: Some(TYPE_SLICE_BEGIN),
                    track_uuid: track,
                    name: Some(self.names.function(call.function).to_string()),
                    categories: vec!["function".into()],
                    debug_annotations: vec![DebugAnnotation {
                        name: Some("depth".into()),
                        uint_value: Some(call.depth.into()),
                        ..DebugAnnotation::default()
                    }],
                    ..TrackEvent::default()
                };
                self.track_event(h.ts_ns, begin);
            }
            SpanStep::End(n) => {
                for _ in 0..n {
                    let end = TrackEvent {
                        r#type: Some(TYPE_SLICE_END),
                        track_uuid: track,
                        ..TrackEvent::default()
                    };
                    self.track_event(h.ts_ns, end);
                }
                for (id, category, name) in std::mem::take(&mut self.spans.reopen) {
                    self.track_event(h.ts_ns, span_begin(track, id, &category, &name));
                }
            }
            SpanStep::Instant => {
                self.heap_counter(event);
                let instant = TrackEvent {
                    r#type: Some(TYPE_INSTANT),
                    track_uuid: track,
                    name: Some(event.name().to_string()),
                    categories: vec!["styx".into()],
                    debug_annotations: annotations(event, &self.names),
                    ..TrackEvent::default()
                };
                self.track_event(h.ts_ns, instant);
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

/// A span's slice begin, with its id.
fn span_begin(track: Option<u64>, id: u64, category: &str, name: &str) -> TrackEvent {
    TrackEvent {
        r#type: Some(TYPE_SLICE_BEGIN),
        track_uuid: track,
        name: Some(name.to_string()),
        categories: vec![category.to_string()],
        debug_annotations: vec![DebugAnnotation {
            name: Some("id".into()),
            uint_value: Some(id),
            ..DebugAnnotation::default()
        }],
        ..TrackEvent::default()
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
}
