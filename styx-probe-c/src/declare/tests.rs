use super::*;
use object::{Object, ObjectSection};
use std::path::Path;
use std::process::Command;

// The Rust twins of what DECLARATIONS declares, in this test binary: its
// notes are what `event!` and `describe!` write, provider this crate's
// name.
styx_probe::event_enum! {
    #[allow(non_camel_case_types)]
    enum device: u8 { uart = 0, timer = 1, dma = 7 }
}
styx_probe::event! {
    mmio_write(pc: u32, device: device, addr: styx_probe::Addr<u32>, val: u32);
    flags_delta(pc: u16, delta: i8, wide: i64, taken: bool, r: styx_probe::Reg<u8>);
    eight(a: u8, b: u16, c: u32, d: u64, e: i16, f: i32, g: styx_probe::Addr<u64>, h: styx_probe::Reg<u64>);
    tick();
}
styx_probe::describe! {
    arch: "z80",
    pc: "pc",
    registers: [("af", 0, 16), ("a", 1, 8, in "af" at 8), ("pc", 2, 16)],
    images: [("rom.bin", 0, 0x4000)],
}

const DECLARATIONS: &str = r#"
# The same, for C.
provider styx_probe_c;
enum device: u8 { uart = 0, timer = 1, dma = 7 }
event mmio_write(pc: u32, device: device, addr: addr<u32>, val: u32);
event flags_delta(pc: u16, delta: i8, wide: i64, taken: bool, r: reg<u8>);
event eight(a: u8, b: u16, c: u32, d: u64, e: i16, f: i32, g: addr<u64>, h: reg<u64>);
event tick();
arch "z80";
pc "pc";
register af 0 16;
register a 1 8 in af at 8;
register pc 2 16;
image "rom.bin" 0 0x4000;
"#;

/// The whole notes (header, owner, descriptor) of `.note.styx` in `file`.
fn styx_notes(file: &[u8]) -> Vec<Vec<u8>> {
    let elf = object::File::parse(file).unwrap();
    let section = elf
        .section_by_name(".note.styx")
        .expect("a .note.styx section");
    let data = section.data().unwrap();
    let mut notes = Vec::new();
    let mut at = 0;
    let word = |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
    while at + 12 <= data.len() {
        let (name, desc) = (word(at), word(at + 4));
        let end = at + 12 + name.div_ceil(4) * 4 + desc.div_ceil(4) * 4;
        notes.push(data[at..end].to_vec());
        at = end;
    }
    notes
}

/// The header for DECLARATIONS compiled by the C compiler into an object:
/// its `.note.styx`.
fn compiled_notes(dir: &Path) -> Vec<Vec<u8>> {
    let declarations = parse(DECLARATIONS).unwrap();
    std::fs::write(
        dir.join("declared.h"),
        generate(&declarations, "test").unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("declared.c"),
        "#define STYX_DECLARE_DEFINITIONS\n#include \"declared.h\"\n",
    )
    .unwrap();
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/include");
    let object = dir.join("declared.o");
    let status = Command::new("cc")
        .args([
            "-std=c11", "-O2", "-Wall", "-Werror", "-c", "-I", include, "-o",
        ])
        .arg(&object)
        .arg(dir.join("declared.c"))
        .status()
        .unwrap();
    assert!(status.success());
    styx_notes(&std::fs::read(object).unwrap())
}

#[test]
fn the_c_headers_notes_are_the_rust_macros_byte_for_byte() {
    // Fired (untraced: nothing happens) so that the types are surely kept.
    styx_probe::fire!(mmio_write, || (
        1u32,
        device::dma,
        styx_probe::Addr(2u32),
        3u32
    ));
    styx_probe::fire!(tick, || ());
    let dir = std::env::temp_dir().join(format!("styx-declare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let from_c = compiled_notes(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let from_rust = styx_notes(&std::fs::read("/proc/self/exe").unwrap());
    assert_eq!(from_c.len(), 5, "four types and the guest");
    for note in &from_c {
        assert!(
            from_rust.contains(note),
            "the C note {note:02x?} is none of the Rust macros' {from_rust:02x?}"
        );
    }
}

#[test]
fn each_field_type_is_its_rust_twins_kind_and_width() {
    for t in FIELD_TYPES {
        let (kind, bytes) = match t.name {
            "u16" => (FieldKind::Unsigned, 2),
            "i8" => (FieldKind::Signed, 1),
            "bool" => (FieldKind::Bool, 1),
            "addr<u32>" => (FieldKind::Address, 4),
            "reg<u8>" => (FieldKind::Register, 1),
            _ => continue,
        };
        assert_eq!((t.kind, t.bytes), (kind, bytes), "{}", t.name);
    }
}

/// The error `text` gets.
fn error(text: &str) -> String {
    match parse(text) {
        Ok(d) => panic!("{text:?} parsed: {d:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn mistakes_are_errors_that_name_their_line() {
    let cases = [
        (
            "provider emu;\nevent x(a: u128);",
            "line 2: \"u128\" is not a field type",
        ),
        (
            "provider emu;\nevent x(a: u8, a: u8);",
            "line 2: field a twice in x",
        ),
        (
            "provider emu;\nevent x(a: u8 b: u8);",
            "line 2: ')' expected, not \"b\"",
        ),
        (
            "provider emu;\nevent x(a: u8",
            "line 2: the file ends where",
        ),
        ("provider styx;", "line 1: provider \"styx\" is styx's own"),
        (
            "provider emu;\nenum e: u8 { a = 256 }",
            "line 2: 256 does not fit in u8",
        ),
        (
            "provider emu;\nenum e: i8 { a = 1 }",
            "line 2: an enum is of u8, u16, u32 or u64",
        ),
        ("event x();", "declares events but no provider"),
        (
            "provider mem;\nevent read();",
            "mem_read is a styx event type's name",
        ),
        (
            "provider emu; frobnicate;",
            "line 1: \"frobnicate\" declares nothing",
        ),
        (
            "provider emu; event x(a: u8) ;\n@",
            "line 2: '@' has no meaning here",
        ),
        (
            "arch \"z80\"; register a 1 8 in af at 8;",
            "names a parent it does not describe",
        ),
        (
            "arch \"z80\"; register af 0 16; register a 1 8 in af at 12;",
            "does not fit in its parent",
        ),
        ("register af 0 16;", "whose arch is not said"),
        (
            "arch \"z80\"; register af 0 70000;",
            "line 1: the register's width in bits 70000",
        ),
        (
            "arch \"z80\"; register af 0 99999999999999999999;",
            "line 1: \"99999999999999999999\" is not a number",
        ),
        (
            "arch \"z\\80\";",
            "line 1: \"z\\\\80\": a name has no '\\' or NUL",
        ),
        ("arch \"z80;", "line 1: a string without its closing"),
    ];
    for (text, want) in cases {
        let got = error(text);
        assert!(got.contains(want), "{text:?}: {got:?} lacks {want:?}");
    }
    let nine = (0..9)
        .map(|i| format!("f{i}: u8"))
        .collect::<Vec<_>>()
        .join(", ");
    let got = error(&format!("provider emu;\nevent x({nine});"));
    assert!(got.contains("x has more than 8 fields"), "{got}");
    let huge = "#".repeat(MAX_FILE_BYTES + 1);
    assert!(error(&huge).contains("more than"));
}
