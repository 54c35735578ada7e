//! `describe!` writes the note styx-events decodes: the macro's assembler
//! and the decoder's reading of `styx_common::guest` cannot drift apart.

const REG_PC: u16 = 7;

styx_probe::describe! {
    arch: "toy-risc",
    pc: "ip",
    registers: [("r0", 0, 32), ("sp", 1 + 1, 32), ("ip", REG_PC, 64), ("wide", u64::MAX, 512)],
    images: [("rom.bin", 0x8000_0000, 0x4000), ("ram", 0, 1 << 20)],
}

#[cfg(not(feature = "disabled"))]
#[test]
fn the_note_decodes_to_what_the_macro_said() {
    use styx_events::{Guest, Image, Register};
    let exe = std::env::current_exe().unwrap();
    let table = styx_usdt::note::read_probe_table(&exe).unwrap();
    assert_eq!(table.guest_notes.len(), 1, "one description, one note");
    let guest = Guest::decode(&table.guest_notes[0]).unwrap();
    let reg = |name: &str, num: u64, bits: u16| Register {
        num,
        name: name.into(),
        bits,
    };
    assert_eq!(
        guest,
        Guest {
            arch: "toy-risc".into(),
            pc: "ip".into(),
            registers: vec![
                reg("r0", 0, 32),
                reg("sp", 2, 32),
                reg("ip", 7, 64),
                reg("wide", u64::MAX, 512)
            ],
            images: vec![
                Image {
                    name: "rom.bin".into(),
                    base: 0x8000_0000,
                    size: 0x4000
                },
                Image {
                    name: "ram".into(),
                    base: 0,
                    size: 1 << 20
                },
            ],
        }
    );
}

#[cfg(feature = "disabled")]
#[test]
fn compiled_out_there_is_no_note() {
    let exe = std::env::current_exe().unwrap();
    let table = styx_usdt::note::read_probe_table(&exe).unwrap();
    assert!(table.guest_notes.is_empty());
}
