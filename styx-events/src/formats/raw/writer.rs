//! Writes events as a raw capture (see the module above for the layout).

use super::varint::{put, zigzag};
use super::{aux_code, ARG_SLOTS, AUX_EXPLICIT, AUX_SHIFT, MAGIC, TAG_BATCH, TAG_END, TAG_THREAD};
use super::{TAG_THREAD_FOLLOWS, VERSION};
use crate::record::event::{Body, Call, Event, Text};
use crate::session::header::Header;
use crate::write::buf::ByteBuf;
use crate::write::writer::{Chunked, EventWriter, Totals};
use std::collections::HashMap;
use std::io::{self, Write};
use styx_common::EVENT_KIND_SLOTS;

/// Bytes gathered before they go to the output: big enough for few write
/// calls, small enough to bound memory.
const CHUNK: usize = 256 << 10;

/// Writes a raw capture.
pub struct CaptureWriter<W: Write> {
    out: Chunked<W>,
    prev_ts: u64,
    prev: [[u64; ARG_SLOTS]; EVENT_KIND_SLOTS as usize],
    threads: HashMap<(u32, u32), u32>,
    current: Option<(u32, u32)>,
}

impl<W: Write> CaptureWriter<W> {
    /// Starts a capture: writes the magic, version and header.
    pub fn new(mut out: W, header: &Header) -> io::Result<Self> {
        let json = serde_json::to_vec(header)?;
        out.write_all(MAGIC)?;
        out.write_all(&VERSION.to_le_bytes())?;
        out.write_all(&(json.len() as u32).to_le_bytes())?;
        out.write_all(&json)?;
        Ok(CaptureWriter {
            out: Chunked::new(out, CHUNK),
            prev_ts: 0,
            prev: [[0; ARG_SLOTS]; EVENT_KIND_SLOTS as usize],
            threads: HashMap::new(),
            current: None,
        })
    }

    /// Gives the output back (for tests and tools).
    pub fn into_inner(self) -> W {
        self.out.into_inner()
    }

    fn encode(&mut self, event: &Event<'_>) {
        let buf = &mut self.out.buf;
        let h = &event.header;
        let mut tag = event.kind as u8;
        let thread = (h.pid, h.tid);
        let mut index = None;
        if self.current != Some(thread) {
            self.current = Some(thread);
            match self.threads.get(&thread) {
                Some(&i) => {
                    tag |= TAG_THREAD_FOLLOWS;
                    index = Some(i);
                }
                None => {
                    self.threads.insert(thread, self.threads.len() as u32);
                    buf.push(TAG_THREAD);
                    put(buf, h.pid.into());
                    put(buf, h.tid.into());
                }
            }
        }
        let code = aux_code(h.aux);
        buf.push(tag | code << AUX_SHIFT);
        if let Some(i) = index {
            put(buf, i.into());
        }
        if code == AUX_EXPLICIT {
            put(buf, h.aux.into());
        }
        put(buf, zigzag(h.ts_ns.wrapping_sub(self.prev_ts)));
        self.prev_ts = h.ts_ns;
        let prev = &mut self.prev[event.kind as usize];
        match &event.body {
            Body::Args(args) => {
                let n = event.kind.shape().record_args();
                delta_args(buf, prev, &args[..n]);
            }
            Body::Span { id, category, name } => {
                delta_args(buf, prev, &[*id]);
                put_text(buf, category);
                put_text(buf, name);
            }
            Body::Marker(text) => put_text(buf, text),
            Body::Usdt {
                spec_id,
                args,
                strings,
            } => {
                put(buf, (*spec_id).into());
                delta_args(buf, prev, args);
                put(buf, strings.len() as u64);
                buf.extend_from_slice(strings);
            }
            Body::Call(call) => delta_args(buf, prev, &call_args(call)),
        }
    }
}

/// A call's numbers as a capture stores them (see the module above).
fn call_args(call: &Call) -> [u64; 5] {
    [
        call.function.into(),
        call.sp,
        call.depth.into(),
        call.duration_ns.map_or(0, |ns| ns.saturating_add(1)),
        call.unwound.into(),
    ]
}

#[inline]
fn delta_args(buf: &mut ByteBuf, prev: &mut [u64; ARG_SLOTS], args: &[u64]) {
    for (slot, &value) in prev.iter_mut().zip(args) {
        put(buf, zigzag(value.wrapping_sub(*slot)));
        *slot = value;
    }
}

fn put_text(buf: &mut ByteBuf, text: &Text<'_>) {
    put(
        buf,
        (text.bytes.len() as u64) << 1 | u64::from(text.truncated),
    );
    buf.extend_from_slice(text.bytes);
}

impl<W: Write> EventWriter for CaptureWriter<W> {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        self.encode(event);
        self.out.event_done()
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn takes_batches(&self) -> bool {
        true
    }

    fn batch(&mut self, record: &[u8]) -> io::Result<()> {
        let buf = &mut self.out.buf;
        buf.push(TAG_BATCH);
        put(buf, record.len() as u64);
        buf.extend_from_slice(record);
        self.out.event_done()
    }

    fn finish(&mut self, totals: &Totals<'_>) -> io::Result<()> {
        let buf = &mut self.out.buf;
        buf.push(TAG_END);
        put(buf, totals.events.iter().sum());
        put(buf, totals.drops.iter().sum());
        for kind in 1..EVENT_KIND_SLOTS as usize {
            let events = totals.events.get(kind).copied().unwrap_or(0);
            let drops = totals.drops.get(kind).copied().unwrap_or(0);
            if events > 0 || drops > 0 {
                buf.push(kind as u8);
                put(buf, events);
                put(buf, drops);
            }
        }
        buf.push(0);
        self.flush()
    }
}
