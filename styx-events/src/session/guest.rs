//! The guest an emulator described (`styx_probe::describe!`): architecture,
//! register names and widths, guest images. Decoded from the note's bytes
//! (layout: `styx_common::guest`), kept in the capture header, and used by
//! the formats: register names beside numbers, drcov's module table,
//! Tenet's register lines (sub-registers merged into their parents).
//!
//! The note comes from a file someone else built: decoding checks every
//! length, and a malformed note is an error that names what is wrong.

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use styx_common::guest::{
    GUEST_NOTE_VERSION, GUEST_TAG_END, GUEST_TAG_IMAGE, GUEST_TAG_REGISTER, GUEST_TAG_SUBREGISTER,
};
use styx_common::guest_marker::QemuGuest;
use thiserror::Error;

/// What the emulator said about its guest.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Guest {
    /// The architecture's name, e.g. `6502`.
    pub arch: String,
    /// The program counter's name in register lines (Tenet): `pc` unless
    /// the emulator named it.
    pub pc: String,
    /// Registers by the numbers `reg_read`/`reg_write` events carry.
    pub registers: Vec<Register>,
    /// Guest images (ROMs, kernels, programs) by load address.
    #[serde(default)]
    pub images: Vec<Image>,
}

/// One register.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Register {
    /// The number events carry.
    pub num: u64,
    /// Its name, e.g. `sp`.
    pub name: String,
    /// Its width in bits.
    pub bits: u16,
    /// For a sub-register, where it lies in its parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within: Option<Within>,
}

/// Where a sub-register lies in its parent: bits `shift..shift + bits`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Within {
    /// The parent's number.
    pub parent: u64,
    /// The bit the sub-register starts at.
    pub shift: u16,
}

/// One guest image: a program, ROM or kernel loaded at `base`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Image {
    /// Its name (a file name, as coverage tools match it).
    pub name: String,
    /// Guest address of its first byte.
    pub base: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// Why a guest description note could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum GuestError {
    /// A version this reader does not know.
    #[error(
        "guest description of version {0}; this styx-loader reads version {GUEST_NOTE_VERSION}"
    )]
    Version(u8),
    /// The bytes end before the description does.
    #[error("guest description cut short")]
    Short,
    /// An entry tag this reader does not know.
    #[error("guest description has an entry of unknown tag {0}")]
    Tag(u8),
    /// A name that is not UTF-8.
    #[error("guest description has a name that is not UTF-8")]
    Name,
    /// A register number given twice.
    #[error("guest description names register {0} twice")]
    Duplicate(u64),
    /// A sub-register whose parent is not a register of the description.
    #[error("guest description has sub-register {0} of {1}, which it does not describe")]
    Parent(String, String),
    /// A sub-register outside its parent's bits.
    #[error("guest description has sub-register {0}, which does not fit in {1}")]
    Slice(String, String),
}

impl Guest {
    /// A guest description naming one 32-bit register, all else default:
    /// for tests of how register numbers show.
    #[cfg(test)]
    pub(crate) fn naming(num: u64, name: &str) -> Guest {
        Guest {
            registers: vec![Register {
                num,
                name: name.into(),
                bits: 32,
                within: None,
            }],
            ..Guest::default()
        }
    }

    /// Decodes a note's descriptor.
    pub fn decode(desc: &[u8]) -> Result<Guest, GuestError> {
        let mut r = Cursor(desc);
        let version = r.u8()?;
        if version != GUEST_NOTE_VERSION {
            return Err(GuestError::Version(version));
        }
        let arch = r.str()?;
        let pc = match r.str()? {
            name if name.is_empty() => "pc".to_string(),
            name => name,
        };
        let mut guest = Guest {
            arch,
            pc,
            ..Guest::default()
        };
        // Sub-registers by their parents' names, placed once all are read.
        let mut parents = Vec::new();
        loop {
            match r.u8()? {
                GUEST_TAG_END => break,
                tag @ (GUEST_TAG_REGISTER | GUEST_TAG_SUBREGISTER) => {
                    let num = r.u64()?;
                    let bits = u16::from_le_bytes(r.take()?);
                    if tag == GUEST_TAG_SUBREGISTER {
                        let shift = u16::from_le_bytes(r.take()?);
                        parents.push((guest.registers.len(), r.str()?, shift));
                    }
                    let name = r.str()?;
                    if guest.registers.iter().any(|reg| reg.num == num) {
                        return Err(GuestError::Duplicate(num));
                    }
                    guest.registers.push(Register {
                        num,
                        name,
                        bits,
                        within: None,
                    });
                }
                GUEST_TAG_IMAGE => {
                    let base = r.u64()?;
                    let size = r.u64()?;
                    let name = r.str()?;
                    guest.images.push(Image { name, base, size });
                }
                tag => return Err(GuestError::Tag(tag)),
            }
        }
        guest.place_subregisters(&parents)?;
        Ok(guest)
    }

    /// Gives each sub-register, `(index, parent's name, shift)`, its
    /// place: a whole register of the description that holds its bits.
    fn place_subregisters(&mut self, subs: &[(usize, String, u16)]) -> Result<(), GuestError> {
        let mut by_name = HashMap::new();
        for (index, reg) in self.registers.iter().enumerate() {
            by_name.entry(reg.name.as_str()).or_insert(index);
        }
        let mut is_sub = vec![false; self.registers.len()];
        for &(index, ..) in subs {
            is_sub[index] = true;
        }
        let mut places = Vec::with_capacity(subs.len());
        for (index, parent, shift) in subs {
            let sub = &self.registers[*index];
            let whole = match by_name.get(parent.as_str()) {
                Some(&at) if !is_sub[at] => &self.registers[at],
                _ => return Err(GuestError::Parent(sub.name.clone(), parent.clone())),
            };
            if sub.bits == 0 || u32::from(*shift) + u32::from(sub.bits) > u32::from(whole.bits) {
                return Err(GuestError::Slice(sub.name.clone(), parent.clone()));
            }
            places.push((
                *index,
                Within {
                    parent: whole.num,
                    shift: *shift,
                },
            ));
        }
        for (index, within) in places {
            self.registers[index].within = Some(within);
        }
        Ok(())
    }

    /// The description from the notes of a process's files, `(file name,
    /// descriptor)` in file order (the executable first): the first that
    /// decodes. Returns it with a line for each note left out and why.
    pub fn from_notes<'a>(
        notes: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> (Option<Guest>, Vec<String>) {
        let mut found: Option<(Guest, &str)> = None;
        let mut problems = Vec::new();
        for (file, desc) in notes {
            match (Guest::decode(desc), &found) {
                (Err(e), _) => problems.push(format!("{file}: {e}; left out")),
                (Ok(guest), None) => found = Some((guest, file)),
                (Ok(guest), Some((kept, kept_file))) if guest != *kept => problems.push(format!(
                    "{file}: a second guest description ({}); kept the one in {kept_file} ({})",
                    guest.arch, kept.arch
                )),
                (Ok(_), Some(_)) => {}
            }
        }
        (found.map(|(guest, _)| guest), problems)
    }

    /// The description a QEMU guest's marker gives
    /// (`styx_common::guest_marker`): its architecture and, in user mode,
    /// its program as an image named by the program's path. None for any
    /// other marker, a malformed one, or one cut short (its path would be
    /// wrong).
    pub fn from_marker(text: &[u8], truncated: bool) -> Option<Guest> {
        if truncated {
            return None;
        }
        let guest = QemuGuest::parse(std::str::from_utf8(text).ok()?)?;
        Some(Guest {
            arch: guest.arch.to_string(),
            pc: "pc".to_string(),
            registers: Vec::new(),
            images: (guest.program.iter())
                .map(|program| Image {
                    name: program.path.to_string(),
                    base: program.base,
                    size: program.end - program.base,
                })
                .collect(),
        })
    }

    /// A line for people: `6502, registers a x y sp p, images 6502-memory`.
    pub fn summary(&self) -> String {
        let mut line = self.arch.clone();
        if !self.registers.is_empty() {
            let names: Vec<String> = self.registers.iter().map(|r| self.slice_name(r)).collect();
            line += &format!(", registers {}", names.join(" "));
        }
        for image in &self.images {
            line += &format!(
                ", image {} at {:#x} ({} bytes)",
                image.name, image.base, image.size
            );
        }
        crate::write::escape::controls(&line).into_owned()
    }
}

impl Guest {
    /// A register's name, and for a sub-register where it lies:
    /// `a=af[15:8]`, or `sp=r13` for an alias.
    fn slice_name(&self, reg: &Register) -> String {
        let Some(within) = reg.within else {
            return reg.name.clone();
        };
        let Some(parent) = self.registers.iter().find(|r| r.num == within.parent) else {
            return reg.name.clone();
        };
        if within.shift == 0 && reg.bits == parent.bits {
            return format!("{}={}", reg.name, parent.name);
        }
        let top = u32::from(within.shift) + u32::from(reg.bits) - 1;
        format!("{}={}[{top}:{}]", reg.name, parent.name, within.shift)
    }
}

impl Image {
    /// Whether guest address `addr` is in the image.
    pub fn contains(&self, addr: u64) -> bool {
        addr.checked_sub(self.base)
            .is_some_and(|offset| offset < self.size)
    }
}

/// Register names by number, for the formats (looked up per register
/// event: Fx, not std's SipHash, which took 4% of reading a capture).
#[derive(Clone, Debug, Default)]
pub struct RegisterNames {
    by_num: FxHashMap<u64, String>,
    /// Sub-registers: where each lies, and its width.
    within: FxHashMap<u64, (Within, u16)>,
}

impl RegisterNames {
    /// The names `guest` gives (none without a description).
    pub fn new(guest: Option<&Guest>) -> RegisterNames {
        let registers = guest.map_or(&[][..], |g| &g.registers);
        RegisterNames {
            by_num: registers.iter().map(|r| (r.num, r.name.clone())).collect(),
            within: registers
                .iter()
                .filter_map(|r| Some((r.num, (r.within?, r.bits))))
                .collect(),
        }
    }

    /// Whether any register is a sub-register of another.
    pub fn has_sub_registers(&self) -> bool {
        !self.within.is_empty()
    }

    /// Where register `num` lies in its parent, and its width, if it is
    /// a sub-register.
    pub fn within(&self, num: u64) -> Option<(Within, u16)> {
        self.within.get(&num).copied()
    }

    /// Whether any register has a name.
    pub fn is_empty(&self) -> bool {
        self.by_num.is_empty()
    }

    /// The number of the register named `name`.
    pub fn num_of(&self, name: &str) -> Option<u64> {
        self.by_num
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(&num, _)| num)
    }

    /// Every name, by number.
    pub fn names(&self) -> Vec<&str> {
        let mut named: Vec<(&u64, &String)> = self.by_num.iter().collect();
        named.sort();
        named.into_iter().map(|(_, n)| n.as_str()).collect()
    }

    /// Register `num`'s name, if the emulator gave one.
    pub fn get(&self, num: u64) -> Option<&str> {
        self.by_num.get(&num).map(String::as_str)
    }
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], GuestError> {
        let (head, rest) = self.0.split_first_chunk::<N>().ok_or(GuestError::Short)?;
        self.0 = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, GuestError> {
        Ok(self.take::<1>()?[0])
    }

    fn u64(&mut self) -> Result<u64, GuestError> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    fn str(&mut self) -> Result<String, GuestError> {
        let end = self
            .0
            .iter()
            .position(|&b| b == 0)
            .ok_or(GuestError::Short)?;
        let name = std::str::from_utf8(&self.0[..end]).map_err(|_| GuestError::Name)?;
        self.0 = &self.0[end + 1..];
        Ok(name.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A descriptor as `describe!` lays it out.
    fn desc(entries: &[u8]) -> Vec<u8> {
        let mut d = vec![GUEST_NOTE_VERSION];
        d.extend_from_slice(b"6502\0\0");
        d.extend_from_slice(entries);
        d
    }

    fn register(num: u64, bits: u16, name: &str) -> Vec<u8> {
        let mut e = vec![GUEST_TAG_REGISTER];
        e.extend_from_slice(&num.to_le_bytes());
        e.extend_from_slice(&bits.to_le_bytes());
        e.extend_from_slice(name.as_bytes());
        e.push(0);
        e
    }

    #[test]
    fn decodes_registers_and_images() {
        let mut entries = register(3, 8, "sp");
        entries.push(GUEST_TAG_IMAGE);
        entries.extend_from_slice(&0x8000u64.to_le_bytes());
        entries.extend_from_slice(&0x100u64.to_le_bytes());
        entries.extend_from_slice(b"rom\0");
        entries.push(GUEST_TAG_END);
        let guest = Guest::decode(&desc(&entries)).unwrap();
        assert_eq!(guest.arch, "6502");
        assert_eq!(guest.pc, "pc");
        assert_eq!(
            guest.registers,
            vec![Register {
                num: 3,
                name: "sp".into(),
                bits: 8,
                within: None,
            }]
        );
        assert!(guest.images[0].contains(0x80ff));
        assert!(!guest.images[0].contains(0x8100));
        assert!(!guest.images[0].contains(0x7fff));
        assert_eq!(RegisterNames::new(Some(&guest)).get(3), Some("sp"));
    }

    fn subregister(num: u64, bits: u16, shift: u16, parent: &str, name: &str) -> Vec<u8> {
        let mut e = vec![GUEST_TAG_SUBREGISTER];
        e.extend_from_slice(&num.to_le_bytes());
        e.extend_from_slice(&bits.to_le_bytes());
        e.extend_from_slice(&shift.to_le_bytes());
        e.extend_from_slice(parent.as_bytes());
        e.push(0);
        e.extend_from_slice(name.as_bytes());
        e.push(0);
        e
    }

    fn decode_entries(entries: &[Vec<u8>]) -> Result<Guest, GuestError> {
        let mut bytes = entries.concat();
        bytes.push(GUEST_TAG_END);
        Guest::decode(&desc(&bytes))
    }

    /// A sub-register may come before its parent; it is placed by name.
    #[test]
    fn sub_registers_are_placed_in_their_parents() {
        let guest = decode_entries(&[
            subregister(1, 8, 8, "af", "a"),
            register(0, 16, "af"),
            subregister(2, 16, 0, "af", "af2"),
        ])
        .unwrap();
        assert_eq!(
            guest.registers[0].within,
            Some(Within {
                parent: 0,
                shift: 8
            })
        );
        assert_eq!(guest.registers[1].within, None);
        assert_eq!(guest.summary(), "6502, registers a=af[15:8] af af2=af");
        let names = RegisterNames::new(Some(&guest));
        assert_eq!(names.get(1), Some("a"));
        let (within, bits) = names.within(1).unwrap();
        assert_eq!((within.parent, within.shift, bits), (0, 8, 8));
        assert!(names.within(0).is_none());
    }

    #[test]
    fn sub_registers_outside_a_whole_register_are_errors() {
        let parent = |sub: &str, parent: &str| GuestError::Parent(sub.into(), parent.into());
        let slice = |sub: &str, parent: &str| GuestError::Slice(sub.into(), parent.into());
        for (entries, error) in [
            (vec![subregister(1, 8, 0, "bc", "a")], parent("a", "bc")),
            (vec![subregister(1, 8, 0, "a", "a")], parent("a", "a")),
            (
                vec![
                    register(0, 16, "af"),
                    subregister(1, 8, 8, "af", "a"),
                    subregister(2, 4, 0, "a", "nibble"),
                ],
                parent("nibble", "a"),
            ),
            (
                vec![register(0, 16, "af"), subregister(1, 8, 9, "af", "a")],
                slice("a", "af"),
            ),
            (
                vec![register(0, 16, "af"), subregister(1, 0, 0, "af", "a")],
                slice("a", "af"),
            ),
            (
                vec![register(0, 16, "af"), subregister(0, 8, 0, "af", "f")],
                GuestError::Duplicate(0),
            ),
        ] {
            assert_eq!(decode_entries(&entries), Err(error));
        }
    }

    #[test]
    fn a_qemu_guest_marker_is_a_description_with_its_program() {
        let text = b"qemu x86_64 image 0x400000-0x4c0ee8 entry 0x4015b0: /tmp/g64";
        let guest = Guest::from_marker(text, false).unwrap();
        assert_eq!((guest.arch.as_str(), guest.pc.as_str()), ("x86_64", "pc"));
        assert_eq!(
            guest.images,
            vec![Image {
                name: "/tmp/g64".into(),
                base: 0x400000,
                size: 0xc0ee8,
            }]
        );
        assert_eq!(Guest::from_marker(text, true), None, "cut short");
        assert_eq!(Guest::from_marker(b"reset", false), None);
        assert_eq!(Guest::from_marker(&[b'q', 0xff], false), None);
        let system = Guest::from_marker(b"qemu aarch64 system", false).unwrap();
        assert!(system.images.is_empty());
    }

    #[test]
    fn malformed_descriptions_are_errors_never_panics() {
        let mut good = register(1, 8, "x");
        good.extend(subregister(2, 4, 4, "x", "hi"));
        good.push(GUEST_TAG_END);
        let good = desc(&good);
        // Every prefix is cut short; every byte changed either decodes or
        // says why.
        for end in 0..good.len() {
            assert!(Guest::decode(&good[..end]).is_err(), "prefix {end}");
        }
        for i in 0..good.len() {
            for b in [0u8, 1, 2, 0x7f, 0xff] {
                let mut bad = good.clone();
                bad[i] = b;
                let _ = Guest::decode(&bad);
            }
        }
        assert_eq!(Guest::decode(&[9]), Err(GuestError::Version(9)));
        let mut twice = register(1, 8, "x");
        twice.extend(register(1, 8, "y"));
        twice.push(GUEST_TAG_END);
        assert_eq!(Guest::decode(&desc(&twice)), Err(GuestError::Duplicate(1)));
    }
}
