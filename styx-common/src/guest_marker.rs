//! The marker a QEMU guest's description travels in. `describe!` is a
//! note written at compile time, but QEMU knows its guest only when it
//! runs: styx-qemu fires this marker once tracing starts, before the
//! first block it instruments, and readers (styx-events) turn it into the
//! guest's description. Being an event, it is in every capture the same
//! way: `read` of a raw capture gets what the live trace got.
//!
//! The text, at most [`MARKER_TEXT_MAX`] bytes:
//!
//! ```text
//! qemu ARCH image 0xBASE-0xEND entry 0xENTRY: PATH    (user mode)
//! qemu ARCH system                                     (system mode)
//! ```
//!
//! `ARCH` is QEMU's target name (`x86_64`, `aarch64`); `BASE..END` the
//! guest addresses the program's ELF file spans as loaded (where its
//! first byte, the ELF header, is, to the end of its last segment);
//! `PATH` the program's file, last so that a path too long for the
//! marker loses its head (`...` then starts it) and keeps its file name,
//! which coverage tools match modules by.

use crate::MARKER_TEXT_MAX;
use core::fmt::Write;

/// What starts the text.
const PREFIX: &str = "qemu ";
/// What starts a path that lost its head.
pub const ELIDED: &str = "...";

/// A QEMU guest as the marker describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QemuGuest<'a> {
    /// QEMU's target name.
    pub arch: &'a str,
    /// In user mode, the program.
    pub program: Option<Program<'a>>,
}

/// The program a user-mode QEMU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Program<'a> {
    /// Guest address of its file's first byte as loaded.
    pub base: u64,
    /// Guest address just past its last segment.
    pub end: u64,
    /// Its entry point.
    pub entry: u64,
    /// Its file; starts with [`ELIDED`] when its head was cut.
    pub path: &'a str,
}

impl<'a> QemuGuest<'a> {
    /// The marker's text into `out`; returns its length.
    pub fn write(&self, out: &mut [u8; MARKER_TEXT_MAX]) -> usize {
        let mut text = Bounded { out, len: 0 };
        // Each piece is short; only the path can overflow, handled below.
        let _ = write!(text, "{PREFIX}{}", self.arch);
        let Some(program) = self.program else {
            let _ = write!(text, " system");
            return text.len;
        };
        let _ = write!(
            text,
            " image {:#x}-{:#x} entry {:#x}: ",
            program.base, program.end, program.entry
        );
        let room = MARKER_TEXT_MAX - text.len;
        let path = program.path;
        if path.len() <= room {
            let _ = text.write_str(path);
        } else {
            let keep = room.saturating_sub(ELIDED.len());
            let mut from = path.len() - keep;
            while !path.is_char_boundary(from) {
                from += 1;
            }
            let _ = text.write_str(ELIDED);
            let _ = text.write_str(&path[from..]);
        }
        text.len
    }

    /// The description a marker's text gives, if it is one (another
    /// marker, or one malformed, is None).
    pub fn parse(text: &'a str) -> Option<QemuGuest<'a>> {
        let rest = text.strip_prefix(PREFIX)?;
        let (arch, rest) = rest.split_once(' ')?;
        if arch.is_empty() {
            return None;
        }
        if rest == "system" {
            return Some(QemuGuest {
                arch,
                program: None,
            });
        }
        let rest = rest.strip_prefix("image ")?;
        let (base, rest) = rest.split_once('-')?;
        let (end, rest) = rest.split_once(" entry ")?;
        let (entry, path) = rest.split_once(": ")?;
        let (base, end, entry) = (hex(base)?, hex(end)?, hex(entry)?);
        if end < base || path.is_empty() {
            return None;
        }
        Some(QemuGuest {
            arch,
            program: Some(Program {
                base,
                end,
                entry,
                path,
            }),
        })
    }
}

impl Program<'_> {
    /// Whether the marker kept its whole path.
    pub fn path_is_whole(&self) -> bool {
        !self.path.starts_with(ELIDED)
    }
}

fn hex(text: &str) -> Option<u64> {
    u64::from_str_radix(text.strip_prefix("0x")?, 16).ok()
}

/// Writes what fits of a text into a marker's bytes.
struct Bounded<'o> {
    out: &'o mut [u8; MARKER_TEXT_MAX],
    len: usize,
}

impl Write for Bounded<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        if end > MARKER_TEXT_MAX {
            return Err(core::fmt::Error);
        }
        self.out[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(guest: &QemuGuest<'_>) -> std::string::String {
        let mut out = [0u8; MARKER_TEXT_MAX];
        let len = guest.write(&mut out);
        std::string::String::from_utf8(out[..len].to_vec()).unwrap()
    }

    fn user(path: &str) -> QemuGuest<'_> {
        QemuGuest {
            arch: "x86_64",
            program: Some(Program {
                base: 0x400000,
                end: 0x4c6f38,
                entry: 0x401650,
                path,
            }),
        }
    }

    #[test]
    fn a_description_reads_back_as_written() {
        let guest = user("/tmp/a b/guest");
        let written = text(&guest);
        assert_eq!(
            written,
            "qemu x86_64 image 0x400000-0x4c6f38 entry 0x401650: /tmp/a b/guest"
        );
        assert_eq!(QemuGuest::parse(&written), Some(guest));
        let system = QemuGuest {
            arch: "aarch64",
            program: None,
        };
        assert_eq!(QemuGuest::parse(&text(&system)), Some(system));
    }

    #[test]
    fn a_long_path_keeps_its_file_name() {
        let long = std::format!("/{}/é/guest-program", "d".repeat(200));
        let written = text(&user(&long));
        assert!(written.len() <= MARKER_TEXT_MAX);
        let program = QemuGuest::parse(&written).unwrap().program.unwrap();
        assert!(!program.path_is_whole());
        assert!(program.path.ends_with("/é/guest-program"), "{written}");
    }

    #[test]
    fn other_markers_and_malformed_ones_are_not_descriptions() {
        for text in [
            "reset",
            "qemu ",
            "qemu x86_64",
            "qemu  system",
            "qemu x86_64 image 0x10-0x5 entry 0x10: /g",
            "qemu x86_64 image 0x10-0x20 entry 0x10: ",
            "qemu x86_64 image 10-0x20 entry 0x10: /g",
            "qemu x86_64 image 0x10-0x20 entry 0x1g: /g",
            "qemu x86_64 image 0x10-0x20: /g",
            "qemu x86_64 image 0x10000000000000000-0x20 entry 0x10: /g",
        ] {
            assert_eq!(QemuGuest::parse(text), None, "{text:?}");
        }
    }
}
