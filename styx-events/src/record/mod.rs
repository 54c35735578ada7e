//! Records as they come from the ring: one event's record decoded in place,
//! a batch record split into its events, and the batches a stopping
//! process's threads still hold, read from its memory. Depends on nothing
//! else in the crate.

pub mod batch;
pub mod batch_items;
pub mod event;
pub mod partial;

/// Items as styx-probe writes them (`styx_common::item`), for tests.
#[cfg(test)]
pub(crate) mod test_items {
    use styx_common::item::{write_event, write_mark, MAX_ITEM_BYTES};
    use styx_common::EventKind;

    /// A time mark at `ns` (10 bytes).
    pub fn mark(ns: u64) -> Vec<u8> {
        let mut out = [0u8; MAX_ITEM_BYTES];
        let len = write_mark(ns, &mut out);
        out[..len].to_vec()
    }

    /// An event of `kind` from its probe's arguments: (value, bytes).
    pub fn event(kind: EventKind, values: &[(u64, usize)]) -> Vec<u8> {
        let mut out = [0u8; MAX_ITEM_BYTES];
        let len = write_event(kind, values, &mut out);
        out[..len].to_vec()
    }

    /// An insn_exec at `pc` of a 64-bit guest: instruction word 0xea, no
    /// length (19 bytes).
    pub fn insn(pc: u64) -> Vec<u8> {
        event(EventKind::InsnExec, &[(pc, 8), (0xea, 8), (0, 1)])
    }

    /// A mem_read of a 64-bit guest: `size` bytes of `val` at `addr` (27 bytes).
    pub fn mem_read(pc: u64, addr: u64, val: u64, size: u64) -> Vec<u8> {
        event(
            EventKind::MemRead,
            &[(pc, 8), (addr, 8), (val, 8), (size, 1)],
        )
    }

    /// A tag no batch holds: a marker's (a text shape).
    pub fn bad_tag() -> Vec<u8> {
        let tag = styx_common::item::CATALOGUE_TAG | (EventKind::Marker as u16) << 8;
        tag.to_le_bytes().to_vec()
    }
}
