//! The emulator's heap as `styx_alloc::TracedAllocator` reports it, for
//! the timeline formats' counter track: per process, the bytes its
//! `alloc`, `dealloc` and `realloc` events added since tracing began. A
//! block allocated before and freed during the trace counts against it,
//! so the figure is net of what the trace saw, not the heap's size.
//!
//! The types are found by provider ([`HEAP_PROVIDER`]) and name, their
//! fields by name, in the session's declarations: nothing is assumed of
//! their order.

use crate::record::event::{Body, Event};
use crate::session::usdt::UsdtProbes;
use std::collections::HashMap;
pub use styx_common::schema::HEAP_PROVIDER;

/// The heap's counter track's name, in every format that draws it.
pub const HEAP_TRACK: &str = "heap bytes allocated (net, since tracing began)";

/// What an event of one of the heap's types does to the count: the
/// fields (by index) it reads.
#[derive(Clone, Copy)]
enum Change {
    /// `alloc`: `size` bytes more, unless `addr` is 0 (it failed).
    Alloc { size: usize, addr: usize },
    /// `dealloc`: `size` bytes fewer.
    Dealloc { size: usize },
    /// `realloc`: `old_size` becomes `size`, unless `addr` is 0.
    Realloc {
        old_size: usize,
        size: usize,
        addr: usize,
    },
}

/// Net bytes allocated per process, from the heap's events.
pub struct HeapBytes {
    by_spec: HashMap<u32, Change>,
    net: HashMap<u32, i64>,
}

impl HeapBytes {
    /// For a session whose probes are `probes`; None when none is the
    /// heap's (every other event is then nothing to it).
    pub fn new(probes: &UsdtProbes) -> Option<HeapBytes> {
        let by_spec: HashMap<u32, Change> = probes
            .iter()
            .filter(|(_, p)| p.provider == HEAP_PROVIDER && p.declared.is_some())
            .filter_map(|(&spec_id, probe)| {
                let field = |name: &str| probe.args.iter().position(|(n, _)| n == name);
                let change = match probe.probe.as_str() {
                    "alloc" => Change::Alloc {
                        size: field("size")?,
                        addr: field("addr")?,
                    },
                    "dealloc" => Change::Dealloc {
                        size: field("size")?,
                    },
                    "realloc" => Change::Realloc {
                        old_size: field("old_size")?,
                        size: field("size")?,
                        addr: field("addr")?,
                    },
                    _ => return None,
                };
                Some((spec_id, change))
            })
            .collect();
        (!by_spec.is_empty()).then(|| HeapBytes {
            by_spec,
            net: HashMap::new(),
        })
    }

    /// Counts `event`: its process and that process's new figure, if it
    /// is one of the heap's events and changed it.
    pub fn count(&mut self, event: &Event<'_>) -> Option<(u32, i64)> {
        let Body::Usdt { spec_id, args, .. } = event.body else {
            return None;
        };
        let change = *self.by_spec.get(&spec_id)?;
        // Sizes are the process's word: wrapping arithmetic, never a panic.
        let arg = |i: usize| args.get(i).copied().unwrap_or(0) as i64;
        let delta = match change {
            Change::Alloc { size, addr } if arg(addr) != 0 => arg(size),
            Change::Dealloc { size } => arg(size).wrapping_neg(),
            Change::Realloc {
                old_size,
                size,
                addr,
            } if arg(addr) != 0 => arg(size).wrapping_sub(arg(old_size)),
            Change::Alloc { .. } | Change::Realloc { .. } => 0,
        };
        if delta == 0 {
            return None;
        }
        let net = self.net.entry(event.header.pid).or_default();
        *net = net.wrapping_add(delta);
        Some((event.header.pid, *net))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::declared::{DeclaredField, EventType};
    use crate::session::header::UsdtInfo;
    use styx_common::schema::FieldKind;
    use styx_common::RecordHeader;

    fn declared(spec_id: u32, provider: &str, name: &str, fields: &[&str]) -> UsdtInfo {
        let fields = fields
            .iter()
            .map(|name| DeclaredField::new(name, FieldKind::Unsigned, 8, None));
        let event = EventType {
            provider: provider.into(),
            name: name.into(),
            fields: fields.collect(),
        };
        UsdtInfo::declared(spec_id, &event)
    }

    fn event(pid: u32, spec_id: u32, args: &[u64]) -> Event<'_> {
        let event = Event::usdt(spec_id, args);
        Event {
            header: RecordHeader {
                pid,
                ..event.header
            },
            ..event
        }
    }

    /// Fields found by name, in any order; per process; a failed
    /// allocation or reallocation (address 0) changes nothing, and
    /// neither does another provider's `alloc`.
    #[test]
    fn the_heaps_events_add_up_per_process() {
        let probes = UsdtProbes::from_infos(&[
            declared(1, HEAP_PROVIDER, "alloc", &["addr", "size"]),
            declared(2, HEAP_PROVIDER, "dealloc", &["size", "addr"]),
            declared(3, HEAP_PROVIDER, "realloc", &["addr", "old_size", "size"]),
            declared(4, "emu", "alloc", &["addr", "size"]),
        ]);
        let mut heap = HeapBytes::new(&probes).unwrap();
        let counted: Vec<Option<(u32, i64)>> = [
            event(7, 1, &[0x1000, 100]),
            event(8, 1, &[0x2000, 5]),
            event(7, 1, &[0, 100]),
            event(7, 3, &[0x3000, 100, 250]),
            event(7, 3, &[0, 250, 900]),
            event(7, 2, &[250, 0x3000]),
            event(7, 4, &[0x4000, 1]),
        ]
        .iter()
        .map(|e| heap.count(e))
        .collect();
        assert_eq!(
            counted,
            [
                Some((7, 100)),
                Some((8, 5)),
                None,
                Some((7, 250)),
                None,
                Some((7, 0)),
                None
            ]
        );
        assert!(HeapBytes::new(&UsdtProbes::from_infos(&[declared(
            4,
            "emu",
            "alloc",
            &["addr", "size"]
        )]))
        .is_none());
    }
}
