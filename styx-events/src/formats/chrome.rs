//! `-o chrome`: Chrome trace-event JSON, for chrome://tracing, Perfetto and
//! other tools that read it.
//!
//! Written in the JSON Array Format (`[event, event, …]`), whose closing
//! bracket readers treat as optional, so a trace cut short still loads.
//! Spans are `B`/`E` pairs on their thread (ends matched to begins by id,
//! see [`super::spans`]), and so are traced functions' calls (category
//! `function`, nested with the spans); every other event is a thread-scoped instant
//! (`i`) with its fields as `args` (addresses as `"0x…"` strings); a
//! counter (`C`) named `events/s` gives each type's rate per 10 ms window,
//! and a process whose heap `styx_alloc` traces gets a counter of its net
//! bytes allocated ([`super::heap`]).
//! Times are µs of kernel `CLOCK_MONOTONIC`, to the ns.

use super::heap::{HeapBytes, HEAP_TRACK};
use super::rates::{Rates, Window};
use super::spans::{span_step, SpanStep, Spans};
use crate::formats::jsonl::{json_arg, json_string, json_usdt, JsonStyle};
use crate::record::event::{Body, Event};
use crate::session::fields::{for_each_field, Field, Names};
use crate::session::header::Header;
use crate::write::buf::ByteBuf;
use crate::write::writer::{Chunked, EventWriter, Totals};
use std::io::{self, Write};
use styx_common::{EventKind, RecordHeader};

const CHUNK: usize = 64 << 10;

/// Writes Chrome trace-event JSON.
pub struct ChromeWriter {
    out: Chunked<Box<dyn Write>>,
    names: Names,
    pid: u32,
    spans: Spans,
    rates: Rates,
    /// None when no probe of the session is the heap's.
    heap: Option<HeapBytes>,
}

impl ChromeWriter {
    /// Starts the array on `out` with the process's name and where the trace came from.
    pub fn new(out: Box<dyn Write>, header: &Header) -> ChromeWriter {
        let mut out = Chunked::new(out, CHUNK);
        let buf = &mut out.buf;
        buf.extend_from_slice(b"[\n");
        // Names the process track, and says where the trace came from.
        buf.extend_from_slice(b"{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":");
        buf.dec(header.pid.into());
        buf.extend_from_slice(b",\"args\":{\"name\":");
        json_string(buf, &format!("{} (pid {})", header.exe, header.pid));
        buf.extend_from_slice(b"}},\n{\"name\":\"styx\",\"ph\":\"M\",\"pid\":");
        buf.dec(header.pid.into());
        buf.extend_from_slice(b",\"args\":");
        buf.extend_from_slice(
            &serde_json::to_vec(&serde_json::json!({
                "host": header.host,
                "kernel": header.kernel,
                "clock": header.clock,
            }))
            .expect("a JSON value"),
        );
        buf.extend_from_slice(b"}");
        let names = Names::new(header);
        ChromeWriter {
            out,
            heap: HeapBytes::new(&names.usdt),
            names,
            pid: header.pid,
            spans: Spans::default(),
            rates: Rates::default(),
        }
    }

    /// `,\n{"name":NAME,"cat":CAT,"ph":PH,"ts":TS,"pid":P,"tid":T`; no
    /// name or category when `name` is empty (slice ends).
    fn open(&mut self, name: &str, cat: &str, ph: &str, ts_ns: u64, pid: u32, tid: u32) {
        let b = &mut self.out.buf;
        b.extend_from_slice(b",\n{");
        if !name.is_empty() {
            b.extend_from_slice(b"\"name\":");
            json_string(b, name);
            b.extend_from_slice(b",\"cat\":");
            json_string(b, cat);
            b.push(b',');
        }
        b.extend_from_slice(b"\"ph\":\"");
        b.extend_from_slice(ph.as_bytes());
        b.extend_from_slice(b"\",\"ts\":");
        micros(b, ts_ns);
        b.extend_from_slice(b",\"pid\":");
        b.dec(pid.into());
        b.extend_from_slice(b",\"tid\":");
        b.dec(tid.into());
    }

    /// A span's `B`, with its id.
    fn begin_span(&mut self, id: u64, category: &str, name: &str, h: &RecordHeader) {
        self.open(name, category, "B", h.ts_ns, h.pid, h.tid);
        self.out.buf.extend_from_slice(b",\"args\":{\"id\":");
        self.out.buf.dec(id);
        self.out.buf.extend_from_slice(b"}}");
    }

    fn counters(&mut self, window: Window) {
        let b = &mut self.out.buf;
        b.extend_from_slice(b",\n{\"name\":\"events/s\",\"ph\":\"C\",\"ts\":");
        micros(b, window.start_ns);
        b.extend_from_slice(b",\"pid\":");
        b.dec(self.pid.into());
        b.extend_from_slice(b",\"args\":{");
        for (i, (kind, rate)) in window.per_second.iter().enumerate() {
            if i > 0 {
                b.push(b',');
            }
            let name = EventKind::from_id(*kind as u8).map_or("?", EventKind::probe_name);
            json_string(b, name);
            b.push(b':');
            b.dec(*rate);
        }
        b.extend_from_slice(b"}}");
    }

    /// The heap's counter, when `event` changed it.
    fn heap_counter(&mut self, event: &Event<'_>) {
        let Some((pid, net)) = self.heap.as_mut().and_then(|h| h.count(event)) else {
            return;
        };
        let b = &mut self.out.buf;
        b.extend_from_slice(b",\n{\"name\":");
        json_string(b, HEAP_TRACK);
        b.extend_from_slice(b",\"ph\":\"C\",\"ts\":");
        micros(b, event.header.ts_ns);
        b.extend_from_slice(b",\"pid\":");
        b.dec(pid.into());
        b.extend_from_slice(b",\"args\":{\"bytes\":");
        b.extend_from_slice(itoa::Buffer::new().format(net).as_bytes());
        b.extend_from_slice(b"}}");
    }

    /// `,"args":{…}}` with the event's fields.
    fn args(&mut self, event: &Event<'_>) {
        let b = &mut self.out.buf;
        b.extend_from_slice(b",\"args\":{");
        let mut first = true;
        let _ = for_each_field(event, &self.names, |field| {
            if !first {
                b.push(b',');
            }
            first = false;
            match field {
                Field::Value(name, arg) => {
                    json_string(b, name);
                    b.push(b':');
                    json_arg(b, &arg, JsonStyle::Chrome);
                }
                Field::Name(name, v) | Field::Str(name, v) => {
                    json_string(b, name);
                    b.push(b':');
                    json_string(b, v);
                }
                Field::Flag(name, v) => {
                    json_string(b, name);
                    b.extend_from_slice(if v { b":true" } else { b":false" });
                }
                Field::Text(name, text) => {
                    json_string(b, name);
                    b.push(b':');
                    json_string(b, &text.lossy());
                }
                Field::Args(args) => {
                    b.push(b'"');
                    json_usdt(b, args, JsonStyle::Chrome);
                }
            }
            Ok::<(), ()>(())
        });
        b.extend_from_slice(b"}}");
    }
}

/// ns as µs with three decimals, so nothing is rounded away.
fn micros(b: &mut ByteBuf, ns: u64) {
    b.dec(ns / 1000);
    let frac = ns % 1000;
    b.push(b'.');
    b.push(b'0' + (frac / 100) as u8);
    b.push(b'0' + (frac / 10 % 10) as u8);
    b.push(b'0' + (frac % 10) as u8);
}

impl EventWriter for ChromeWriter {
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
        match span_step(&mut self.spans, event) {
            SpanStep::Begin => {
                let Body::Span { id, category, name } = &event.body else {
                    unreachable!("span_step checked the body")
                };
                self.begin_span(*id, &category.lossy(), &name.lossy(), h);
            }
            SpanStep::CallBegin => {
                let Body::Call(call) = &event.body else {
                    unreachable!("span_step checked the body")
                };
                let name = self.names.function(call.function).to_string();
                self.open(&name, "function", "B", h.ts_ns, h.pid, h.tid);
                self.out.buf.extend_from_slice(b",\"args\":{\"depth\":");
                self.out.buf.dec(call.depth.into());
                self.out.buf.extend_from_slice(b"}}");
            }
            SpanStep::End(n) => {
                for _ in 0..n {
                    self.open("", "", "E", h.ts_ns, h.pid, h.tid);
                    self.out.buf.push(b'}');
                }
                for (id, category, name) in std::mem::take(&mut self.spans.reopen) {
                    self.begin_span(id, &category, &name, h);
                }
            }
            SpanStep::Instant => {
                self.open(event.name(), "styx", "i", h.ts_ns, h.pid, h.tid);
                self.out.buf.extend_from_slice(b",\"s\":\"t\"");
                self.args(event);
                self.heap_counter(event);
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
        self.out.buf.extend_from_slice(b"\n]\n");
        self.flush()
    }
}
