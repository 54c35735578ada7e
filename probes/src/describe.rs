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
        const _: () = {
            const ARCH: &str = $arch;
            const PC: &str = $crate::__describe_pc!($($pc)?);
            const REGISTERS: &[$crate::__guest::RegisterEntry] =
                &[$(($reg, ($num) as u64, ($bits) as u16)),*];
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

#[cfg(feature = "disabled")]
#[doc(hidden)]
#[macro_export]
macro_rules! __describe_note {
    ($($ignored:tt)*) => {};
}
