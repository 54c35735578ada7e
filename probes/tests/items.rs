//! What a call site packs into registers (`fire::pack`, at compile time)
//! is the item styx-common's codec describes and the loader reads: the
//! same bytes as `styx_common::item::write_event` for the same values and
//! widths, and read back to the values the per-event site passes.

use styx_common::item::{read, write_event, Item, MAX_ITEM_BYTES, TAG_BYTES};
use styx_common::{BranchKind, EventKind};
use styx_probe::fire::{self, pack, unpack};

/// Checks one batched type's packing of `$values` against the codec.
macro_rules! check {
    ($name:ident, $kind:ident, $values:expr) => {{
        use fire::$name::Args;
        fn packed<T: Args>(values: T) -> (Vec<u8>, [u64; fire::$name::WORDS], Vec<u64>) {
            let site = values.values();
            let words: [u64; fire::$name::WORDS] = pack(T::TAG as u64, TAG_BYTES, &site, T::WIDTHS);
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            let expected: Vec<(u64, usize)> = site
                .iter()
                .copied()
                .zip(T::WIDTHS.iter().copied())
                .collect();
            let mut out = [0u8; MAX_ITEM_BYTES];
            let len = write_event(EventKind::$kind, &expected, &mut out);
            assert_eq!(len, T::BYTES as usize, "{}", stringify!($values));
            assert_eq!(bytes[..len], out[..len], "{}", stringify!($values));
            assert!(bytes[len..].iter().all(|&b| b == 0));
            let back: Vec<u64> = unpack::<4>(&words, TAG_BYTES, T::WIDTHS)[..site.len()].to_vec();
            assert_eq!(back, site.to_vec(), "{}", stringify!($values));
            (out[..len].to_vec(), words, site.to_vec())
        }
        let (item, _, site) = packed($values);
        let (Item::Event { kind, .. }, len) = read(&item).unwrap() else {
            panic!("not an event");
        };
        assert_eq!((kind, len), (EventKind::$kind, item.len()));
        site
    }};
}

#[test]
fn call_sites_pack_the_items_the_codec_reads() {
    assert_eq!(
        check!(mem_read, MemRead, (0x0600u16, 0x10u16, 0x2au8)),
        [0x600, 0x10, 0x2a, 1]
    );
    assert_eq!(
        check!(
            mem_read,
            MemRead,
            (u64::MAX, 1u64 << 63, 0xdead_beef_0bad_f00du64)
        ),
        [u64::MAX, 1 << 63, 0xdead_beef_0bad_f00d, 8]
    );
    assert_eq!(
        check!(mem_write, MemWrite, (7u32, 0x8000u64, 0xbeefu16)),
        [7, 0x8000, 0xbeef, 2]
    );
    assert_eq!(
        check!(
            reg_write,
            RegWrite,
            (u64::MAX - 1, 31u8, u64::MAX, 1u64 << 40)
        ),
        [u64::MAX - 1, 31, u64::MAX, 1 << 40]
    );
    assert_eq!(
        check!(reg_read, RegRead, (0x100u16, 3u8, true)),
        [0x100, 3, 1]
    );
    assert_eq!(
        check!(insn_exec, InsnExec, (0xc000u16, 0xa9u8)),
        [0xc000, 0xa9, 0]
    );
    assert_eq!(
        check!(insn_fetch, InsnFetch, (0x8000_0000u64, 0x0013_0513u32, 4u8)),
        [0x8000_0000, 0x0013_0513, 4]
    );
    assert_eq!(check!(block, Block, (0x400usize, 12u8)), [0x400, 12]);
    let call = styx_common::Branch::from(BranchKind::Call).encode();
    assert_eq!(
        check!(branch, Branch, (1u16, 2u16, BranchKind::Call)),
        [1, 2, call]
    );
}

/// The per-event site passes what the item packed: unpacked, each value
/// widened to a `u64`.
#[test]
fn packed_items_unpack_to_the_per_event_values() {
    use fire::reg_write::Args;
    let values = (0x1234_5678_9abc_def0u64, 5u16, 0xffu8, u32::MAX);
    let site = values.values();
    type T = (u64, u16, u8, u32);
    let words: [u64; 5] = pack(T::TAG as u64, TAG_BYTES, &site, T::WIDTHS);
    let back: [u64; 4] = unpack(&words, TAG_BYTES, T::WIDTHS);
    assert_eq!(back, site);
}

/// What a type's append routine (`append::<T>`) stores: the tag, then
/// each value whole (8 bytes, whatever is above its width) at its offset
/// (`T::AT`), in order, a fixed last byte (`T::FIXED`) as the per-event
/// site passes it, the item `T::BYTES` long. The bytes it leaves are
/// the codec's item.
#[test]
fn the_routines_stores_make_the_codecs_item() {
    macro_rules! stored {
        ($name:ident, $kind:ident, $values:expr) => {{
            use fire::$name::Args;
            fn stored<T: Args>(values: T) -> (Vec<u8>, Vec<u8>) {
                let site = values.values();
                // A fixed last value is the routine's, not a register's.
                if let Some(fixed) = T::FIXED {
                    assert_eq!(site[site.len() - 1], u64::from(fixed));
                    assert_eq!(T::WIDTHS[site.len() - 1], 1);
                }
                let mut buffer = [0xeeu8; 64];
                buffer[..4].copy_from_slice(&u32::from(T::TAG).to_le_bytes());
                for (i, (&value, &bytes)) in site.iter().zip(T::WIDTHS).enumerate() {
                    // The register's bits above the value's width.
                    let dirty = match bytes {
                        8 => value,
                        _ => value | 0xa5a5_a5a5_a5a5_a5a5 << (8 * bytes),
                    };
                    buffer[T::AT[i]..T::AT[i] + 8].copy_from_slice(&dirty.to_le_bytes());
                }
                let expected: Vec<(u64, usize)> = site
                    .iter()
                    .copied()
                    .zip(T::WIDTHS.iter().copied())
                    .collect();
                let mut out = [0u8; MAX_ITEM_BYTES];
                let len = write_event(EventKind::$kind, &expected, &mut out);
                assert_eq!(T::AT[site.len() - 1] + T::WIDTHS[site.len() - 1], len);
                (buffer[..T::BYTES as usize].to_vec(), out[..len].to_vec())
            }
            stored($values)
        }};
    }
    for (got, want) in [
        stored!(mem_read, MemRead, (0x600u16, 0x10u16, 0x2au8)),
        stored!(
            mem_read,
            MemRead,
            (u64::MAX, 1u64 << 63, 0xdead_beef_0bad_f00du64)
        ),
        stored!(mem_write, MemWrite, (7u32, 0x8000u64, 0xbeefu16)),
        stored!(reg_write, RegWrite, (0x1234u16, 5u8, 0xffu8, u32::MAX)),
        stored!(block, Block, (0x400usize, 12u8)),
        stored!(insn_exec, InsnExec, (0xc000u16, 0xa9u8)),
    ] {
        assert_eq!(got, want);
    }
}
