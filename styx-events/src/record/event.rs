//! A ring-buffer record decoded: what the eBPF programs wrote (layouts in
//! styx-common), borrowed in place.

use bytemuck::pod_read_unaligned;
use std::mem::size_of;
use styx_common::{
    EventKind, FunctionRecord, MarkerRecord, RecordHeader, Shape, SpanRecord, UsdtRecord,
    FUNCTION_EXIT, FUNCTION_RECORD_KIND, FUNCTION_TAIL_CALL, MARKER_TEXT_MAX, MAX_USDT_ARGS,
    SPAN_CATEGORY_MAX, SPAN_NAME_MAX, USDT_STRINGS_MAX,
};
use thiserror::Error;

const HEADER: usize = size_of::<RecordHeader>();

/// One decoded event, borrowing its strings from the ring.
pub struct Event<'a> {
    /// Time, process, thread, kind and aux byte, as recorded.
    pub header: RecordHeader,
    /// The header's kind, checked.
    pub kind: EventKind,
    /// What follows the header.
    pub body: Body<'a>,
}

/// An event's payload, by the shape of its kind.
pub enum Body<'a> {
    /// The probe's arguments in order; unused slots are 0. For memory
    /// accesses the size is in `header.aux`.
    Args([u64; 4]),
    /// A span began or ended.
    Span {
        /// Pairs an end with its begin.
        id: u64,
        /// The span's category.
        category: Text<'a>,
        /// The span's name.
        name: Text<'a>,
    },
    /// A marker's text.
    Marker(Text<'a>),
    /// Another provider's probe: its site's spec id and arguments.
    Usdt {
        /// The site's spec id, by which the session's `UsdtProbes` name it.
        spec_id: u32,
        /// As many arguments as the site has.
        args: &'a [u64],
        /// The bytes of its string arguments, in order (see
        /// `styx_common::StrWord`); empty if it has none.
        strings: &'a [u8],
    },
    /// A traced function entered or left (`--functions`).
    Call(Call),
}

/// A traced function's entry or exit. The eBPF program gives the function
/// and the stack pointer; depth, duration and how it ended are filled in by
/// the call tracker (module `calls`), which pairs a thread's entries and exits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Call {
    /// Index into the header's function table.
    pub function: u32,
    /// The stack pointer at the probe (the address of the return address).
    pub sp: u64,
    /// An exit (else an entry).
    pub exit: bool,
    /// How many traced calls of the thread enclose this one.
    pub depth: u32,
    /// On an exit whose entry was seen: ns since it.
    pub duration_ns: Option<u64>,
    /// On an exit: the call was left without its `ret` (an exception, a
    /// panic, longjmp, or a tail call that replaced its frame): the time is
    /// when the tracker saw that, at the thread's next traced entry or exit
    /// further out.
    pub unwound: bool,
    /// On an exit: the call was left by a tail call, a `jmp` to another
    /// function (record `aux` [`FUNCTION_TAIL_CALL`]). With `ret` probes it
    /// ended at that jump; with uretprobes, when its callee returned.
    pub tail_call: bool,
}

/// A string as the probe passed it: the bytes kept, and whether it was cut.
pub struct Text<'a> {
    /// The bytes kept (at most the record's room for them).
    pub bytes: &'a [u8],
    /// Whether the probe passed more than was kept.
    pub truncated: bool,
}

/// A record that is not one the eBPF programs write.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Too short for a header.
    #[error("record of {0} bytes is shorter than its header")]
    Short(usize),
    /// The kind byte names no event type.
    #[error("record has unknown event kind {0}")]
    UnknownKind(u8),
    /// Not 8-byte aligned, as every ring record is.
    #[error("record is not 8-byte aligned")]
    Misaligned,
    /// The size does not fit the kind.
    #[error("{kind} record of {len} bytes, expected {expected}")]
    WrongSize {
        /// The kind's name.
        kind: &'static str,
        /// The record's size.
        len: usize,
        /// The kind's record size.
        expected: usize,
    },
}

/// Decodes one ring-buffer record (without the ring's own header).
pub fn decode(bytes: &[u8]) -> Result<Event<'_>, DecodeError> {
    if bytes.len() < HEADER {
        return Err(DecodeError::Short(bytes.len()));
    }
    let mut header: RecordHeader = pod_read_unaligned(&bytes[..HEADER]);
    if header.kind == FUNCTION_RECORD_KIND {
        header.kind = EventKind::Function as u8;
    }
    let kind = EventKind::from_id(header.kind).ok_or(DecodeError::UnknownKind(header.kind))?;
    let expected = record_size(kind);
    // A USDT record's strings follow it.
    let extra = match kind.shape() {
        Shape::Usdt => USDT_STRINGS_MAX,
        _ => 0,
    };
    if bytes.len() < expected || bytes.len() > expected + extra {
        return Err(DecodeError::WrongSize {
            kind: kind.probe_name(),
            len: bytes.len(),
            expected,
        });
    }
    let body = match kind.shape() {
        Shape::Args(_) | Shape::ArgsAux(_) => {
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
            let (record, strings) = bytes.split_at(expected);
            let record: &UsdtRecord = from_ring(record)?;
            let nargs = (header.aux as usize).min(MAX_USDT_ARGS);
            Body::Usdt {
                spec_id: record.spec_id,
                args: &record.args[..nargs],
                strings,
            }
        }
        Shape::Function => {
            let record: &FunctionRecord = from_ring(bytes)?;
            Body::Call(Call {
                function: record.function,
                sp: record.sp,
                exit: matches!(header.aux, FUNCTION_EXIT | FUNCTION_TAIL_CALL),
                tail_call: header.aux == FUNCTION_TAIL_CALL,
                ..Call::default()
            })
        }
    };
    Ok(Event { header, kind, body })
}

/// Bytes a record of this kind occupies (without the ring's own header;
/// a USDT record's strings after it not counted).
pub fn record_size(kind: EventKind) -> usize {
    match kind.shape() {
        shape @ (Shape::Args(_) | Shape::ArgsAux(_)) => HEADER + 8 * shape.record_args(),
        Shape::Span => size_of::<SpanRecord>(),
        Shape::Marker => size_of::<MarkerRecord>(),
        Shape::Usdt => size_of::<UsdtRecord>(),
        Shape::Function => size_of::<FunctionRecord>(),
    }
}

impl<'a> Event<'a> {
    /// An event of USDT probe `spec_id` with `args`, its header's other
    /// fields 0: for tests.
    #[cfg(test)]
    pub(crate) fn usdt(spec_id: u32, args: &'a [u64]) -> Event<'a> {
        Event {
            header: RecordHeader {
                kind: EventKind::Usdt as u8,
                ..RecordHeader::default()
            },
            kind: EventKind::Usdt,
            body: Body::Usdt {
                spec_id,
                args,
                strings: &[],
            },
        }
    }
}

impl Event<'_> {
    /// The event's name in every output: its kind's probe name, or for a
    /// traced function `fn_entry` / `fn_exit`.
    pub fn name(&self) -> &'static str {
        match &self.body {
            Body::Call(call) if call.exit => "fn_exit",
            Body::Call(_) => "fn_entry",
            _ => self.kind.probe_name(),
        }
    }
}

// Ring buffer records are 8-byte aligned, so they can be borrowed in place.
fn from_ring<T: bytemuck::Pod>(bytes: &[u8]) -> Result<&T, DecodeError> {
    bytemuck::try_from_bytes(bytes).map_err(|_| DecodeError::Misaligned)
}

impl Text<'_> {
    /// The text as UTF-8, invalid bytes replaced.
    pub fn lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(self.bytes)
    }
}

fn text(buf: &[u8], len: u32, max: usize) -> Text<'_> {
    let len = len as usize;
    Text {
        bytes: &buf[..len.min(max)],
        truncated: len > max,
    }
}
