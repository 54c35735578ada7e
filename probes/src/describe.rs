//! `describe!`: the emulator names its guest once, in an ELF note the loader
//! reads from the file (layout and writer: `styx_common::guest`). Nothing
//! runs: the note is a static built at compile time, a few hundred bytes.

/// Describes the emulated CPU to tracers: its architecture, the names and
/// widths of the registers by the numbers `reg_read!`/`reg_write!` report,
/// and optionally the name of the program counter and the guest images
/// (name, load address, size) for coverage tools.
///
/// Call it once, at item level, in any crate of the emulator: its binary,
/// or the library that holds the CPU (then every binary built with that
/// library gets the names). Names are string literals without NUL bytes.
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
///
/// A register the emulator also reports as part of a wider one is a
/// sub-register: `in "PARENT" at SHIFT` after its width says it is `bits`
/// bits of PARENT from bit SHIFT. An alias is all of its parent (shift 0,
/// the parent's width). Formats print the number's own name; Tenet, whose
/// register lines know only whole registers, prints the parent with the
/// sub-register's bits merged into the parent's last value (other bits 0
/// until seen). A write through a sub-register keeps the parent's other
/// bits; where the guest zero-extends instead (x86-64's 32-bit registers),
/// report the write as one of the whole register. A parent that is not
/// described, or a slice that does not fit in it, does not compile:
///
/// ```compile_fail
/// styx_probe::describe! {
///     arch: "z80",
///     registers: [("af", 0, 16), ("a", 1, 8, in "af" at 12)],
/// }
/// ```
///
/// ```compile_fail
/// styx_probe::describe! {
///     arch: "z80",
///     registers: [("af", 0, 16), ("a", 1, 8, in "bc" at 8)],
/// }
/// ```
///
/// ```
/// styx_probe::describe! {
///     arch: "z80",
///     registers: [
///         ("af", 0, 16), ("a", 1, 8, in "af" at 8), ("f", 2, 8, in "af" at 0),
///         ("hl", 3, 16), ("h", 4, 8, in "hl" at 8), ("l", 5, 8, in "hl" at 0),
///     ],
/// }
/// ```
#[macro_export]
macro_rules! describe {
    (
        arch: $arch:literal
        $(, pc: $pc:literal)?
        , registers: [$(
            ($reg:literal, $num:expr, $bits:expr $(, in $parent:literal at $shift:expr)?)
        ),* $(,)?]
        $(, images: [$(($image:literal, $base:expr, $size:expr)),* $(,)?])?
        $(,)?
    ) => {
        $crate::__describe_note! {
            $arch, ($($pc)?),
            [$(($reg, $num, $bits, $crate::__describe_within!($($parent, $shift)?))),*],
            [$($(($image, $base, $size)),*)?]
        }
    };
}

#[cfg(not(feature = "disabled"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __describe_note {
    ($arch:literal, ($($pc:literal)?), [$(($reg:literal, $num:expr, $bits:expr, $within:expr)),*],
     [$(($image:literal, $base:expr, $size:expr)),*]) => {
        const _: () = {
            const ARCH: &str = $arch;
            const PC: &str = $crate::__describe_pc!($($pc)?);
            const REGISTERS: &[$crate::__guest::RegisterEntry] =
                &[$(($reg, ($num) as u64, ($bits) as u16, $within)),*];
            const IMAGES: &[$crate::__guest::ImageEntry] = &[$((
                $image,
                { let base: u64 = $base; base },
                { let size: u64 = $size; size },
            )),*];
            const LEN: usize = $crate::__guest::note_len(ARCH, PC, REGISTERS, IMAGES);
            // `#[used]`: rustc links it in from a library crate too.
            #[used]
            #[link_section = ".note.styx"]
            static NOTE: $crate::__guest::Note<LEN> =
                $crate::__guest::Note($crate::__guest::note(ARCH, PC, REGISTERS, IMAGES));
        };
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __describe_pc {
    () => {
        ""
    };
    ($pc:literal) => {
        $pc
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __describe_within {
    () => {
        ::core::option::Option::None
    };
    ($parent:literal, $shift:expr) => {
        ::core::option::Option::Some(($parent, ($shift) as u16))
    };
}

#[cfg(feature = "disabled")]
#[doc(hidden)]
#[macro_export]
macro_rules! __describe_note {
    ($($ignored:tt)*) => {};
}
