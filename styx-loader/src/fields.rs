//! An event's fields in order, named as in the JSON output: the one place
//! that knows how each event type's arguments read, whatever the format.

use crate::record::{Body, Event, Text};
use crate::sites::UsdtSite;
use styx_common::{Branch, EventKind, InterruptKind};

/// One field of an event, with how people like to read it.
pub enum Field<'a> {
    /// An address or value: hex for people.
    Hex(&'static str, u64),
    /// A count, size, number or id: decimal for people.
    Dec(&'static str, u64),
    /// A decoded kind (`call`, `entry`, …).
    Name(&'static str, &'static str),
    /// A flag such as `conditional`.
    Flag(&'static str, bool),
    Text(&'static str, &'a Text<'a>),
    /// A name from the probe's note (provider, probe).
    Str(&'static str, &'a str),
    /// Another provider's probe arguments, in order.
    Args(UsdtArgs<'a>),
}

/// One argument of another provider's probe, as its spec types it.
pub enum Arg {
    Signed(i64),
    Unsigned(u64),
}

/// The arguments of a USDT event, typed by the site's spec.
pub struct UsdtArgs<'a> {
    values: &'a [u64],
    signed: &'a [bool],
}

impl Iterator for UsdtArgs<'_> {
    type Item = Arg;

    fn next(&mut self) -> Option<Arg> {
        let (&value, rest) = self.values.split_first()?;
        self.values = rest;
        let signed = self.signed.first().copied().unwrap_or(false);
        self.signed = self.signed.get(1..).unwrap_or(&[]);
        // The eBPF program sign-extended signed values to 64 bits.
        Some(if signed {
            Arg::Signed(value as i64)
        } else {
            Arg::Unsigned(value)
        })
    }
}

/// Calls `each` with every field of `event` after the common ones
/// (`ts_ns`, `pid`, `tid`, `event`).
pub fn for_each_field<'a, E>(
    event: &'a Event<'a>,
    usdt: &'a [UsdtSite],
    mut each: impl FnMut(Field<'a>) -> Result<(), E>,
) -> Result<(), E> {
    use Field::{Dec, Flag, Hex, Name};
    match &event.body {
        Body::Args(a) => match event.kind {
            EventKind::MemRead | EventKind::MemWrite => {
                each(Hex("pc", a[0]))?;
                each(Hex("addr", a[1]))?;
                each(Hex("val", a[2]))?;
                each(Dec("size", event.header.aux.into()))
            }
            EventKind::RegRead | EventKind::RegWrite => {
                each(Hex("pc", a[0]))?;
                each(Dec("reg", a[1]))?;
                each(Hex("val", a[2]))?;
                if event.kind == EventKind::RegWrite {
                    each(Hex("old", a[3]))?;
                }
                Ok(())
            }
            EventKind::Branch => {
                each(Hex("pc", a[0]))?;
                each(Hex("target", a[1]))?;
                match Branch::decode(a[2]) {
                    Some(b) => {
                        each(Name("kind", b.kind.name()))?;
                        each(Flag("conditional", b.conditional))
                    }
                    None => unknown_kind(&mut each, a[2]),
                }
            }
            EventKind::Interrupt => {
                match InterruptKind::from_id(a[0]) {
                    Some(kind) => each(Name("kind", kind.name()))?,
                    None => unknown_kind(&mut each, a[0])?,
                }
                each(Dec("num", a[1]))?;
                each(Hex("old_pc", a[2]))?;
                each(Hex("new_pc", a[3]))
            }
            EventKind::Block => {
                each(Hex("pc", a[0]))?;
                each(Dec("size", a[1]))
            }
            EventKind::Control => {
                each(Dec("code", a[0]))?;
                each(Hex("a", a[1]))?;
                each(Hex("b", a[2]))
            }
            // insn_fetch, insn_exec: (pc, insn)
            kind => {
                for (name, value) in kind.probe_args().iter().zip(a) {
                    each(Hex(name, *value))?;
                }
                Ok(())
            }
        },
        Body::Span { id, category, name } => {
            each(Field::Text("category", category))?;
            each(Field::Text("name", name))?;
            each(Dec("id", *id))?;
            truncated(&mut each, category.truncated || name.truncated)
        }
        Body::Marker(text) => {
            each(Field::Text("text", text))?;
            truncated(&mut each, text.truncated)
        }
        Body::Usdt { spec_id, args } => {
            let (provider, probe, signed) = match usdt.get(*spec_id as usize) {
                Some(site) => (
                    site.provider.as_str(),
                    site.probe.as_str(),
                    &site.signed[..],
                ),
                None => ("?", "?", &[][..]),
            };
            each(Field::Str("provider", provider))?;
            each(Field::Str("probe", probe))?;
            each(Field::Args(UsdtArgs {
                values: args,
                signed,
            }))
        }
    }
}

/// The names of an event kind's fields when every one is a plain number:
/// the record's arguments in order, then for memory accesses the size
/// (`aux`). Formats may write these straight from the record; None for
/// kinds with decoded fields (branch, interrupt), strings, or USDT.
pub fn plain_fields(kind: EventKind) -> Option<&'static [&'static str]> {
    match kind {
        EventKind::MemRead | EventKind::MemWrite => Some(&["pc", "addr", "val", "size"]),
        EventKind::RegRead => Some(&["pc", "reg", "val"]),
        EventKind::RegWrite => Some(&["pc", "reg", "val", "old"]),
        EventKind::InsnFetch | EventKind::InsnExec => Some(&["pc", "insn"]),
        EventKind::Block => Some(&["pc", "size"]),
        EventKind::Control => Some(&["code", "a", "b"]),
        _ => None,
    }
}

/// A plain-field event's values, in [`plain_fields`] order.
#[inline(always)]
pub fn plain_values(event: &Event<'_>, args: &[u64; 4]) -> [u64; 4] {
    match event.kind {
        EventKind::MemRead | EventKind::MemWrite => {
            [args[0], args[1], args[2], event.header.aux.into()]
        }
        _ => *args,
    }
}

/// A kind value no styx probe writes: said plainly, with the raw value.
fn unknown_kind<'a, E>(
    each: &mut impl FnMut(Field<'a>) -> Result<(), E>,
    raw: u64,
) -> Result<(), E> {
    each(Field::Name("kind", "unknown"))?;
    each(Field::Dec("kind_raw", raw))
}

/// `truncated: true` only when a string was cut, so the usual line stays short.
fn truncated<'a, E>(each: &mut impl FnMut(Field<'a>) -> Result<(), E>, cut: bool) -> Result<(), E> {
    if cut {
        each(Field::Flag("truncated", true))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use styx_common::RecordHeader;

    /// The shortcut says what the full walk says, for every kind it covers.
    #[test]
    fn plain_fields_match_the_full_walk() {
        for &kind in EventKind::ALL {
            let Some(names) = plain_fields(kind) else {
                continue;
            };
            let args = [11, 22, 33, 44];
            let event = Event {
                header: RecordHeader {
                    kind: kind as u8,
                    aux: 4,
                    ..RecordHeader::default()
                },
                kind,
                body: Body::Args(args),
            };
            let mut walked = Vec::new();
            let _ = for_each_field(&event, &[], |field| {
                match field {
                    Field::Hex(name, v) | Field::Dec(name, v) => walked.push((name, v)),
                    _ => panic!("{kind:?} has a field that is not a plain number"),
                }
                Ok::<(), ()>(())
            });
            let values = plain_values(&event, &args);
            let shortcut: Vec<(&str, u64)> = names.iter().copied().zip(values).collect();
            assert_eq!(walked, shortcut, "{kind:?}");
        }
    }
}
