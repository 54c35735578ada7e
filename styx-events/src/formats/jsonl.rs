//! One event as a JSON line.

use super::lines::Repeats;
use crate::record::event::{Body, Event};
use crate::session::fields::Names;
use crate::session::fields::{for_each_field, plain_values, Arg, Field, UsdtArgs};
use crate::write::buf::ByteBuf;

/// Appends one event as a JSON line.
pub fn jsonl(out: &mut ByteBuf, event: &Event<'_>, names: &Names, repeats: &mut Repeats) {
    let h = &event.header;
    out.extend_from_slice(b"{\"ts_ns\":");
    repeats.ts(out, h.ts_ns);
    repeats.json_thread(out, h.pid, h.tid);
    if let (Body::Args(args), Some(keys)) = (&event.body, &repeats.json_keys[event.kind as usize]) {
        // The common case, straight from the record (see fields::is_plain).
        let values = plain_values(event, args);
        for (key, value) in keys.iter().zip(values) {
            out.extend_from_slice(key);
            out.dec(value);
        }
        out.extend_from_slice(b"}\n");
        return;
    }
    out.extend_from_slice(event.name().as_bytes());
    out.push(b'"');
    let _ = for_each_field(event, names, |field| {
        out.extend_from_slice(b",\"");
        match field {
            Field::Value(name, arg) => json_field(out, name, &arg, JsonStyle::Lines),
            Field::Str(name, v) => {
                key(out, name);
                json_string(out, v);
            }
            Field::Args(args) => json_usdt(out, args, JsonStyle::Lines),
            Field::Name(name, v) => {
                key(out, name);
                out.push(b'"');
                out.extend_from_slice(v.as_bytes());
                out.push(b'"');
            }
            Field::Flag(name, v) => {
                key(out, name);
                out.extend_from_slice(if v { b"true" } else { b"false" });
            }
            Field::Text(name, text) => {
                key(out, name);
                json_string(out, &text.lossy());
            }
        }
        Ok::<(), ()>(())
    });
    out.extend_from_slice(b"}\n");
}

/// `name":` (the opening quote is already out).
#[inline]
fn key(out: &mut ByteBuf, name: &str) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// How JSON shows a declared type's addresses and registers: as JSON
/// lines shows the catalogue's (numbers, a named register's name beside
/// it as `NAME_name`), or as Chrome's args do (addresses as `"0x…"`
/// strings, a named register by its name).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum JsonStyle {
    /// JSON lines.
    Lines,
    /// Chrome's trace event args.
    Chrome,
}

/// Another provider's arguments as fields of the event's object (the
/// first key's opening quote is already out): each a field of its own
/// when the probe's arguments are named, else an `args` array; then
/// `truncated: true` if a string was cut and `unreadable: true` if one
/// could not be read (it shows as null).
pub fn json_usdt(out: &mut ByteBuf, args: UsdtArgs<'_>, style: JsonStyle) {
    let cut = args.any_string(|s| s.cut);
    let unreadable = args.any_string(|s| s.unreadable.is_some());
    if args.named {
        for (i, (name, arg)) in args.enumerate() {
            if i > 0 {
                out.extend_from_slice(b",\"");
            }
            json_field(out, name, &arg, style);
        }
    } else {
        key(out, "args");
        out.push(b'[');
        for (i, (_, arg)) in args.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_arg(out, &arg, style);
        }
        out.push(b']');
    }
    if cut {
        out.extend_from_slice(b",\"truncated\":true");
    }
    if unreadable {
        out.extend_from_slice(b",\"unreadable\":true");
    }
}

/// `name":VALUE` (the opening quote is already out), and in JSON lines a
/// named register's name beside it as `NAME_name`.
pub fn json_field(out: &mut ByteBuf, name: &str, arg: &Arg<'_>, style: JsonStyle) {
    key(out, name);
    json_arg(out, arg, style);
    if let (Arg::Reg(_, Some(reg_name)), JsonStyle::Lines) = (arg, style) {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"_name\":");
        json_string(out, reg_name);
    }
}

/// One argument: a number (signed ones negative), an enum value's name,
/// true or false, a string, JSON as the value it holds when it parses,
/// null for a string that could not be read.
pub fn json_arg(out: &mut ByteBuf, arg: &Arg<'_>, style: JsonStyle) {
    match (arg, style) {
        (Arg::Signed(v), _) => out.extend_from_slice(itoa::Buffer::new().format(*v).as_bytes()),
        (Arg::Addr(v), JsonStyle::Chrome) => {
            out.push(b'"');
            out.hex(*v);
            out.push(b'"');
        }
        (Arg::Reg(_, Some(name)) | Arg::Enum(_, Some(name)), JsonStyle::Chrome) => {
            json_string(out, name)
        }
        (Arg::Enum(_, Some(name)), JsonStyle::Lines) => json_string(out, name),
        (
            Arg::Unsigned(v) | Arg::Dec(v) | Arg::Addr(v) | Arg::Reg(v, _) | Arg::Enum(v, None),
            _,
        ) => out.dec(*v),
        (Arg::Bool(v), _) => out.extend_from_slice(if *v { b"true" } else { b"false" }),
        (Arg::Str(s), _) if s.unreadable.is_some() => out.extend_from_slice(b"null"),
        (Arg::Str(s), _) => match s.json_value() {
            Some(json) => json_value(out, json),
            None => json_string(out, &s.lossy()),
        },
    }
}

/// A JSON argument's value as it is, on the event's one line.
fn json_value(out: &mut ByteBuf, json: &[u8]) {
    // Outside its strings, which hold no raw control characters, a line
    // break is whitespace: a space keeps the value.
    for &b in json {
        out.push(if b == b'\n' || b == b'\r' { b' ' } else { b });
    }
}

/// A JSON string: plain printable ASCII straight through, anything else
/// escaped by serde_json.
pub fn json_string(out: &mut ByteBuf, s: &str) {
    if s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, s).expect("writing to a Vec cannot fail");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::text::text;
    use crate::session::declared::{DeclaredField, EnumValues, EventType};
    use crate::session::guest::Guest;
    use crate::session::header::{Header, UsdtInfo};
    use styx_common::schema::FieldKind;
    use styx_common::{EventKind, RecordHeader};

    /// A declared register shows by the guest's name: JSON beside its
    /// number (`NAME_name`, as the catalogue's `reg_name`), text and
    /// Chrome instead of it; an enum value the enum does not name stays a
    /// number.
    #[test]
    fn declared_registers_and_enums_read_by_name() {
        let field = |name, kind, values| DeclaredField::new(name, kind, 1, values);
        let modes = EnumValues {
            name: "Mode".into(),
            values: vec![(3, "Machine".into())],
        };
        let event = EventType {
            provider: "emu".into(),
            name: "trap".into(),
            fields: vec![
                field("r", FieldKind::Register, None),
                field("mode", FieldKind::Enum, Some(modes)),
            ],
        };
        let mut header = Header::now(1, "exe", vec![UsdtInfo::declared(0, &event)]);
        header.guest = Some(Guest::naming(2, "sp"));
        let names = Names::new(&header);
        let line = |args: &[u64], as_text: bool| {
            let event = Event {
                header: RecordHeader {
                    kind: EventKind::Usdt as u8,
                    ..RecordHeader::default()
                },
                kind: EventKind::Usdt,
                body: Body::Usdt {
                    spec_id: 0,
                    args,
                    strings: &[],
                },
            };
            let mut out = ByteBuf::default();
            match as_text {
                true => text(&mut out, &event, &names, false),
                false => jsonl(&mut out, &event, &names, &mut Repeats::new(&names)),
            }
            String::from_utf8(out.as_slice().to_vec()).unwrap()
        };
        let json = line(&[2, 3], false);
        assert!(
            json.ends_with(
                r#""provider":"emu","probe":"trap","r":2,"r_name":"sp","mode":"Machine"}
"#
            ),
            "{json}"
        );
        let json = line(&[5, 4], false);
        assert!(
            json.ends_with(
                r#""r":5,"mode":4}
"#
            ),
            "{json}"
        );
        let text = line(&[2, 3], true);
        assert!(text.ends_with(" emu trap r=sp mode=Machine\n"), "{text}");
    }
}
