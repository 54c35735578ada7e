//! An emulator's device library, as a crate of its own: it declares the
//! event type its device fires (`styx_probe::event!` in a library, its
//! provider this crate's name), and the program linking it declares its
//! own beside it, with no numbering agreed between the two. styx-declared
//! links it and fires [`copy`] once a round; the end-to-end tests expect
//! `dma_copy(src 0x8000 + 16 * i, dst 0x200 + i, len i % 64)` in round `i`.

use styx_probe::Addr;

styx_probe::event! {
    /// A DMA transfer of `len` bytes.
    pub dma_copy(src: Addr<u64>, dst: Addr<u64>, len: u16);
}

/// Round `i`'s transfer.
#[inline(never)]
pub fn copy(i: u64) {
    styx_probe::fire!(dma_copy, || (
        Addr(0x8000 + 16 * i),
        Addr(0x200 + i),
        (i % 64) as u16
    ));
}
