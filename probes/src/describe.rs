//! `describe!`: the emulator names its guest once, in an ELF note the loader
//! reads from the file (layout: `styx_common::guest`). Nothing runs and
//! nothing is loaded into memory: the note sits in a non-allocated section.

/// Describes the emulated CPU to tracers: its architecture, the names and
/// widths of the registers by the numbers `reg_read!`/`reg_write!` report,
/// and optionally the name of the program counter and the guest images
/// (name, load address, size) for coverage tools.
///
/// Call it once, at item level, in the emulator's binary crate (`main.rs`):
/// it writes an ELF note, which the linker keeps only from objects it links
/// (a library crate's object may be left out when nothing else is used from
/// it). Names are plain string literals without `"` or `\`.
///
/// ```ignore
/// styx_probe::describe! {
///     arch: "6502",
///     pc: "pc",
///     registers: [("a", 0, 8), ("x", 1, 8), ("y", 2, 8), ("sp", 3, 8), ("p", 4, 8)],
///     images: [("rom.bin", 0x8000, 0x8000)],
/// }
/// ```
///
/// Register numbers and widths (bits) may be constant expressions of any
/// integer type; bases and sizes are `u64` constants. With the `disabled`
/// feature it writes nothing.
#[macro_export]
macro_rules! describe {
    (
        arch: $arch:literal
        $(, pc: $pc:literal)?
        , registers: [$(($reg:literal, $num:expr, $bits:expr)),* $(,)?]
        $(, images: [$(($image:literal, $base:expr, $size:expr)),* $(,)?])?
        $(,)?
    ) => {
        $crate::__describe_note! {
            $arch, ($($pc)?), [$(($reg, $num, $bits)),*], [$($(($image, $base, $size)),*)?]
        }
    };
}

#[cfg(not(feature = "disabled"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __describe_note {
    ($arch:literal, ($($pc:literal)?), [$(($reg:literal, $num:expr, $bits:expr)),*],
     [$(($image:literal, $base:expr, $size:expr)),*]) => {
        core::arch::global_asm!(
            ".pushsection .note.styx, \"\", \"note\"",
            ".balign 4",
            ".4byte 9992f-9991f, 9994f-9993f, {note_type}",
            "9991: .asciz \"styx\"",
            "9992: .balign 4",
            "9993: .byte {version}",
            concat!(".asciz \"", $arch, "\""),
            concat!(".asciz \"" $(, $pc)?, "\""),
            $(
                ".byte {tag_register}",
                ".8byte {}",
                ".2byte {}",
                concat!(".asciz \"", $reg, "\""),
            )*
            $(
                ".byte {tag_image}",
                ".8byte {}",
                ".8byte {}",
                concat!(".asciz \"", $image, "\""),
            )*
            ".byte {tag_end}",
            "9994: .balign 4",
            ".popsection",
            $(const ($num) as u64, const ($bits) as u16,)*
            $(const { let base: u64 = $base; base }, const { let size: u64 = $size; size },)*
            note_type = const $crate::__guest::NT_STYX_GUEST,
            version = const $crate::__guest::GUEST_NOTE_VERSION,
            tag_register = const $crate::__guest::GUEST_TAG_REGISTER,
            tag_image = const $crate::__guest::GUEST_TAG_IMAGE,
            tag_end = const $crate::__guest::GUEST_TAG_END,
        );
    };
}

#[cfg(feature = "disabled")]
#[doc(hidden)]
#[macro_export]
macro_rules! __describe_note {
    ($($ignored:tt)*) => {};
}
