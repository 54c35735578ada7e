//! One event as a line of text for people.

use crate::record::event::{Body, Call, Event};
use crate::session::fields::{for_each_field, Arg, Field, Names, UsdtArgs};
use crate::write::buf::ByteBuf;
use crate::write::escape;
use crate::write::human::duration;
use std::io::Write;

/// Another provider's arguments, `name=value` each: signed numbers in
/// decimal, unsigned in hex, a declared type's fields as their kinds
/// read (see `fields::read_as`: addresses in hex, other unsigned
/// numbers in decimal, enum values and registers by name, true or
/// false), strings quoted (JSON as it is when it
/// parses), `<unreadable: errno N>` for a string that could not be read;
/// then `(truncated)` if a string was cut.
fn usdt_args(out: &mut ByteBuf, args: UsdtArgs<'_>) {
    let cut = args.any_string(|s| s.cut);
    for (name, arg) in args {
        name_eq(out, name);
        text_arg(out, arg);
    }
    if cut {
        out.extend_from_slice(b" (truncated)");
    }
}

/// One value as [`usdt_args`] says (the catalogue's numbers too: an
/// address or value in hex, a count in decimal, a register by name).
fn text_arg(out: &mut ByteBuf, arg: Arg<'_>) {
    match arg {
        Arg::Signed(v) => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
        Arg::Unsigned(v) | Arg::Addr(v) => out.hex(v),
        Arg::Dec(v) | Arg::Reg(v, None) | Arg::Enum(v, None) => out.dec(v),
        Arg::Reg(_, Some(name)) | Arg::Enum(_, Some(name)) => {
            // Names from a note or a capture: no raw control characters.
            out.extend_from_slice(escape::controls(name).as_bytes())
        }
        Arg::Bool(v) => out.extend_from_slice(if v { b"true" } else { b"false" }),
        Arg::Str(s) => match s.unreadable {
            Some(errno) => {
                let _ = write!(out, "<unreadable: errno {errno}>");
            }
            None => match s.json_value() {
                Some(json) => out
                    .extend_from_slice(escape::controls(&String::from_utf8_lossy(json)).as_bytes()),
                None => {
                    let _ = write!(out, "{:?}", s.lossy());
                }
            },
        },
    }
}

/// Appends one event as a line of text; `threads` adds the pid/tid column.
pub fn text(out: &mut ByteBuf, event: &Event<'_>, names: &Names, threads: bool) {
    let h = &event.header;
    pad_left(out, itoa::Buffer::new().format(h.ts_ns / 1_000_000_000), 6);
    out.push(b'.');
    let frac = h.ts_ns % 1_000_000_000;
    pad_left_with(out, itoa::Buffer::new().format(frac), 9, b'0');
    out.push(b' ');
    if threads {
        pad_left(out, itoa::Buffer::new().format(h.pid), 7);
        out.push(b'/');
        pad_right(out, itoa::Buffer::new().format(h.tid), 7);
        out.push(b' ');
    }
    pad_right(out, event.name(), 10);
    if let Body::Call(call) = &event.body {
        return call_line(out, call, names);
    }
    let _ = for_each_field(event, names, |field| {
        match field {
            Field::Value(name, arg) => {
                name_eq(out, name);
                text_arg(out, arg);
            }
            Field::Str(_, v) => {
                // Names from a note or a capture: no raw control characters.
                out.push(b' ');
                out.extend_from_slice(escape::controls(v).as_bytes());
            }
            Field::Args(args) => usdt_args(out, args),
            Field::Name(_, v) => {
                out.push(b' ');
                out.extend_from_slice(v.as_bytes());
            }
            Field::Flag(name, true) => {
                out.extend_from_slice(b" (");
                out.extend_from_slice(name.as_bytes());
                out.push(b')');
            }
            Field::Flag(_, false) => {}
            Field::Text(name, text) => {
                name_eq(out, name);
                // Rust's Debug quoting, as people expect from `{:?}`.
                let _ = write!(out, "{:?}", text.lossy());
            }
        }
        Ok::<(), ()>(())
    });
    out.push(b'\n');
}

/// A traced call as ftrace's function_graph shows it: indented by depth,
/// `name {` on entry, `} name 12.3 µs` on exit.
fn call_line(out: &mut ByteBuf, call: &Call, names: &Names) {
    out.push(b' ');
    out.fill(2 * (call.depth as usize).min(MAX_INDENT), b' ');
    let name = escape::controls(names.function(call.function));
    if !call.exit {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b" {\n");
        return;
    }
    out.extend_from_slice(b"} ");
    out.extend_from_slice(name.as_bytes());
    if let Some(ns) = call.duration_ns {
        out.push(b' ');
        out.extend_from_slice(duration(ns).as_bytes());
    }
    if call.unwound {
        out.extend_from_slice(b" (unwound)");
    }
    if call.tail_call {
        out.extend_from_slice(b" (tail call)");
    }
    out.push(b'\n');
}

/// Deeper calls are indented as much as this depth.
const MAX_INDENT: usize = 64;

#[inline]
fn name_eq(out: &mut ByteBuf, name: &str) {
    out.push(b' ');
    out.extend_from_slice(name.as_bytes());
    out.push(b'=');
}

fn pad_left(out: &mut ByteBuf, s: &str, width: usize) {
    pad_left_with(out, s, width, b' ');
}

fn pad_left_with(out: &mut ByteBuf, s: &str, width: usize, fill: u8) {
    out.fill(width.saturating_sub(s.len()), fill);
    out.extend_from_slice(s.as_bytes());
}

fn pad_right(out: &mut ByteBuf, s: &str, width: usize) {
    out.extend_from_slice(s.as_bytes());
    out.fill(width.saturating_sub(s.len()), b' ');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::event::{Body, Text};
    use crate::session::header::{ArgInfo, UsdtInfo};
    use crate::session::usdt::UsdtProbes;
    use styx_common::{EventKind, RecordHeader};

    fn line(event: &Event<'_>, usdt: &Names) -> String {
        let mut out = ByteBuf::default();
        text(&mut out, event, usdt, true);
        String::from_utf8(out.as_slice().to_vec()).unwrap()
    }

    fn event(kind: EventKind, body: Body<'_>) -> Event<'_> {
        Event {
            header: RecordHeader {
                ts_ns: 1,
                pid: 2,
                tid: 3,
                kind: kind as u8,
                aux: 1,
                _reserved: [0; 6],
            },
            kind,
            body,
        }
    }

    #[test]
    fn control_characters_from_the_probes_are_escaped() {
        let usdt = Names {
            usdt: UsdtProbes::from_infos(&[UsdtInfo {
                spec_id: 1,
                provider: "ev\x1b[2Jil".into(),
                probe: "pro\rbe\u{9b}31m".into(),
                args: vec![ArgInfo {
                    name: "arg0".into(),
                    ty: "u64".into(),
                }],
                declared: None,
            }]),
            ..Names::default()
        };
        let args = [5u64];
        let usdt_line = line(
            &event(
                EventKind::Usdt,
                Body::Usdt {
                    spec_id: 1,
                    args: &args,
                    strings: &[],
                },
            ),
            &usdt,
        );
        let marker = Text {
            bytes: b"bell\x07 and \x1b]0;title\x07",
            truncated: false,
        };
        let marker_line = line(&event(EventKind::Marker, Body::Marker(marker)), &usdt);
        for line in [&usdt_line, &marker_line] {
            let body = line.strip_suffix('\n').unwrap();
            assert!(!body.chars().any(char::is_control), "{line:?}");
        }
        assert!(
            usdt_line.contains(r" ev\x1b[2Jil pro\rbe\u{9b}31m arg0=0x5"),
            "{usdt_line}"
        );
        assert!(
            marker_line.contains(r#"text="bell\u{7} and \u{1b}]0;title\u{7}""#),
            "{marker_line}"
        );
    }
}
