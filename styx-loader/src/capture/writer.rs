//! Writes events as a raw capture (see the module above for the layout).

use super::varint::{put, zigzag};
use super::{aux_code, Header, ARG_SLOTS, AUX_EXPLICIT, AUX_SHIFT, MAGIC, TAG_END, TAG_THREAD};
use super::{TAG_THREAD_FOLLOWS, VERSION};
use crate::format::{EventWriter, Totals};
use crate::record::{Body, Event, Text};
use std::collections::HashMap;
use std::io::{self, Write};
use styx_common::{EventKind, EVENT_KIND_SLOTS};

/// Bytes gathered before they go to the output: big enough for few write
/// calls, small enough to bound memory.
const CHUNK: usize = 256 << 10;

pub struct CaptureWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
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
            out,
            buf: Vec::with_capacity(CHUNK + super::MAX_RECORD),
            prev_ts: 0,
            prev: [[0; ARG_SLOTS]; EVENT_KIND_SLOTS as usize],
            threads: HashMap::new(),
            current: None,
        })
    }

    /// Gives the output back (for tests and tools).
    pub fn into_inner(self) -> W {
        self.out
    }

    fn encode(&mut self, event: &Event<'_>) {
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
                    self.buf.push(TAG_THREAD);
                    put(&mut self.buf, h.pid.into());
                    put(&mut self.buf, h.tid.into());
                }
            }
        }
        let code = aux_code(h.aux);
        self.buf.push(tag | code << AUX_SHIFT);
        if let Some(i) = index {
            put(&mut self.buf, i.into());
        }
        if code == AUX_EXPLICIT {
            put(&mut self.buf, h.aux.into());
        }
        put(&mut self.buf, zigzag(h.ts_ns.wrapping_sub(self.prev_ts)));
        self.prev_ts = h.ts_ns;
        let prev = &mut self.prev[event.kind as usize];
        match &event.body {
            Body::Args(args) => {
                let n = match event.kind {
                    EventKind::MemRead | EventKind::MemWrite => 3,
                    kind => kind.probe_args().len(),
                };
                delta_args(&mut self.buf, prev, &args[..n]);
            }
            Body::Span { id, category, name } => {
                delta_args(&mut self.buf, prev, &[*id]);
                put_text(&mut self.buf, category);
                put_text(&mut self.buf, name);
            }
            Body::Marker(text) => put_text(&mut self.buf, text),
            Body::Usdt { spec_id, args } => {
                put(&mut self.buf, (*spec_id).into());
                delta_args(&mut self.buf, prev, args);
            }
        }
    }

    fn write_out(&mut self) -> io::Result<()> {
        let result = self.out.write_all(&self.buf);
        // Whatever happened, these bytes are done with: a failed write is
        // not retried, so the file stays a prefix of the stream.
        self.buf.clear();
        result
    }
}

#[inline]
fn delta_args(buf: &mut Vec<u8>, prev: &mut [u64; ARG_SLOTS], args: &[u64]) {
    for (slot, &value) in prev.iter_mut().zip(args) {
        put(buf, zigzag(value.wrapping_sub(*slot)));
        *slot = value;
    }
}

fn put_text(buf: &mut Vec<u8>, text: &Text<'_>) {
    put(
        buf,
        (text.bytes.len() as u64) << 1 | u64::from(text.truncated),
    );
    buf.extend_from_slice(text.bytes);
}

impl<W: Write> EventWriter for CaptureWriter<W> {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        self.encode(event);
        if self.buf.len() >= CHUNK {
            self.write_out()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_out()?;
        self.out.flush()
    }

    fn finish(&mut self, totals: &Totals<'_>) -> io::Result<()> {
        self.buf.push(TAG_END);
        put(&mut self.buf, totals.events.iter().sum());
        put(&mut self.buf, totals.drops.iter().sum());
        for kind in 1..EVENT_KIND_SLOTS as usize {
            let events = totals.events.get(kind).copied().unwrap_or(0);
            let drops = totals.drops.get(kind).copied().unwrap_or(0);
            if events > 0 || drops > 0 {
                self.buf.push(kind as u8);
                put(&mut self.buf, events);
                put(&mut self.buf, drops);
            }
        }
        self.buf.push(0);
        self.flush()
    }
}
