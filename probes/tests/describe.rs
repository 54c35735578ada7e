//! `describe!` writes the note styx-events decodes: the macro's assembler
//! and the decoder's reading of `styx_common::guest` cannot drift apart.

const REG_PC: u16 = 7;

styx_probe::describe! {
    arch: "toy-risc",
    pc: "ip",
    registers: [
        ("r0", 0, 32),
        ("sp", 1 + 1, 32),
        ("ip", REG_PC, 64),
        ("wide", u64::MAX, 512),
        ("ip_hi", 8, 32, in "ip" at 16 + 16),
        ("fp", 9u8, 32, in "r0" at 0),
    ],
    images: [("rom.bin", 0x8000_0000, 0x4000), ("ram", 0, 1 << 20)],
}

#[cfg(not(feature = "disabled"))]
#[test]
fn the_note_decodes_to_what_the_macro_said() {
    use styx_events::{Guest, Image, Register, Within};
    let exe = std::env::current_exe().unwrap();
    let table = styx_usdt::note::read_probe_table(&exe).unwrap();
    assert_eq!(table.guest_notes.len(), 1, "one description, one note");
    let guest = Guest::decode(&table.guest_notes[0]).unwrap();
    let reg = |name: &str, num: u64, bits: u16| Register {
        num,
        name: name.into(),
        bits,
        within: None,
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
                reg("wide", u64::MAX, 512),
                Register {
                    within: Some(Within {
                        parent: 7,
                        shift: 32
                    }),
                    ..reg("ip_hi", 8, 32)
                },
                Register {
                    within: Some(Within {
                        parent: 0,
                        shift: 0
                    }),
                    ..reg("fp", 9, 32)
                },
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

#[cfg(not(feature = "disabled"))]
#[test]
fn a_summary_shows_where_sub_registers_lie() {
    use styx_events::Guest;
    let exe = std::env::current_exe().unwrap();
    let table = styx_usdt::note::read_probe_table(&exe).unwrap();
    let guest = Guest::decode(&table.guest_notes[0]).unwrap();
    assert!(
        guest
            .summary()
            .starts_with("toy-risc, registers r0 sp ip wide ip_hi=ip[63:32] fp=r0, image"),
        "{}",
        guest.summary()
    );
}
