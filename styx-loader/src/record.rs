//! Decodes the raw records the eBPF programs put in the ring buffer.

use bytemuck::pod_read_unaligned;
use std::mem::size_of;
use styx_common::{
    EventKind, MarkerRecord, RecordHeader, Shape, SpanRecord, UsdtRecord, MARKER_TEXT_MAX,
    MAX_USDT_ARGS, SPAN_CATEGORY_MAX, SPAN_NAME_MAX,
};
use thiserror::Error;

const HEADER: usize = size_of::<RecordHeader>();

/// One decoded event, borrowing its strings from the ring.
pub struct Event<'a> {
    pub header: RecordHeader,
    pub kind: EventKind,
    pub body: Body<'a>,
}

pub enum Body<'a> {
    /// The probe's arguments in order; unused slots are 0. For memory
    /// accesses the size is in `header.aux`.
    Args([u64; 4]),
    Span {
        id: u64,
        category: Text<'a>,
        name: Text<'a>,
    },
    Marker(Text<'a>),
    /// Another provider's probe: its site's spec id and arguments.
    Usdt {
        spec_id: u32,
        args: &'a [u64],
    },
}

/// A string as the probe passed it: the bytes kept, and whether it was cut.
pub struct Text<'a> {
    pub bytes: &'a [u8],
    pub truncated: bool,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("record of {0} bytes is shorter than its header")]
    Short(usize),
    #[error("record has unknown event kind {0}")]
    UnknownKind(u8),
    #[error("record is not 8-byte aligned")]
    Misaligned,
    #[error("{kind} record of {len} bytes, expected {expected}")]
    WrongSize {
        kind: &'static str,
        len: usize,
        expected: usize,
    },
}

pub fn decode(bytes: &[u8]) -> Result<Event<'_>, DecodeError> {
    if bytes.len() < HEADER {
        return Err(DecodeError::Short(bytes.len()));
    }
    let header: RecordHeader = pod_read_unaligned(&bytes[..HEADER]);
    let kind = EventKind::from_id(header.kind).ok_or(DecodeError::UnknownKind(header.kind))?;
    let expected = record_size(kind);
    if bytes.len() != expected {
        return Err(DecodeError::WrongSize {
            kind: kind.probe_name(),
            len: bytes.len(),
            expected,
        });
    }
    let body = match kind.shape() {
        Shape::Args(_) | Shape::MemAccess => {
            let mut args = [0u64; 4];
            for (arg, chunk) in args.iter_mut().zip(bytes[HEADER..].chunks_exact(8)) {
                *arg = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
            }
            Body::Args(args)
        }
        Shape::Span => {
            let record: &SpanRecord = from_ring(bytes)?;
            Body::Span {
                id: record.id,
                category: text(&record.category, record.category_len, SPAN_CATEGORY_MAX),
                name: text(&record.name, record.name_len, SPAN_NAME_MAX),
            }
        }
        Shape::Marker => {
            let record: &MarkerRecord = from_ring(bytes)?;
            Body::Marker(text(&record.text, record.len, MARKER_TEXT_MAX))
        }
        Shape::Usdt => {
            let record: &UsdtRecord = from_ring(bytes)?;
            let nargs = (header.aux as usize).min(MAX_USDT_ARGS);
            Body::Usdt {
                spec_id: record.spec_id,
                args: &record.args[..nargs],
            }
        }
    };
    Ok(Event { header, kind, body })
}

/// Bytes a record of this kind occupies (without the ring's own header).
pub fn record_size(kind: EventKind) -> usize {
    match kind.shape() {
        Shape::Args(n) => HEADER + 8 * n,
        Shape::MemAccess => HEADER + 8 * 3,
        Shape::Span => size_of::<SpanRecord>(),
        Shape::Marker => size_of::<MarkerRecord>(),
        Shape::Usdt => size_of::<UsdtRecord>(),
    }
}

// Ring buffer records are 8-byte aligned, so they can be borrowed in place.
fn from_ring<T: bytemuck::Pod>(bytes: &[u8]) -> Result<&T, DecodeError> {
    bytemuck::try_from_bytes(bytes).map_err(|_| DecodeError::Misaligned)
}

fn text(buf: &[u8], len: u32, max: usize) -> Text<'_> {
    let len = len as usize;
    Text {
        bytes: &buf[..len.min(max)],
        truncated: len > max,
    }
}
