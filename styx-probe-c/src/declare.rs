//! Event types and a guest description for a C or C++ emulator: a
//! declaration file, read by [`parse`], made into a header by
//! [`generate`] (the `styx-declare` tool), which the emulator includes
//! beside `styx_probe.h`:
//!
//! ```text
//! # What a C emulator declares (comments start with '#').
//! provider emu;
//! enum device: u8 { uart = 0, timer = 1, dma = 7 }
//! event mmio_write(pc: u32, device: device, addr: addr<u32>, val: u32);
//! event flags_delta(pc: u16, delta: i8);
//!
//! arch "z80";
//! pc "pc";
//! register af 0 16;
//! register a 1 8 in af at 8;
//! image "rom.bin" 0x0000 0x4000;
//! ```
//!
//! Field types are those of styx-probe's `event!`: `u8` to `u64`, `i8`
//! to `i64`, `bool`, `addr<uN>`, `reg<uN>` and the file's enums; each
//! travels in its own width. The header fires a type as
//! `STYX_FIRE(emu_mmio_write, pc, EMU_DEVICE_UART, addr, val)`: one load
//! and a branch untraced, the values evaluated only while a tracer is
//! attached, as the catalogue's macros.
//!
//! Why a generator and not preprocessor macros: the notes are then the
//! very bytes styx-probe's `event!` and `describe!` write (the same
//! writers, `styx_common::schema` and `styx_common::guest`, with the same
//! checks), each field's kind and width are taken from styx-probe's
//! `Field` types rather than restated, each type gets a C prototype in
//! its fields' own C types, and a mistake in a declaration is an error
//! naming its line rather than a wall of macro expansions.

use std::fmt::Write;
use std::iter::Peekable;
use std::str::CharIndices;
use styx_common::guest::{ImageEntry, RegisterEntry};
use styx_common::schema::{EnumValue, FieldEntry, FieldKind, MAX_FIELDS};
use styx_probe::{Addr, Field, Reg};

/// What is wrong with a declaration file.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DeclareError {
    /// A mistake at a line.
    #[error("line {line}: {message}")]
    At {
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A mistake in the file as a whole.
    #[error("{0}")]
    File(String),
}

/// A field type a declaration may name: its name there, how it reads,
/// its bytes and C type, from styx-probe's [`Field`] types (one
/// definition of each kind and width).
struct FieldType {
    name: &'static str,
    kind: FieldKind,
    bytes: usize,
    c_type: &'static str,
}

macro_rules! field_types {
    ($($name:literal: $rust:ty => $c:literal),* $(,)?) => {
        /// Every field type but the file's enums.
        const FIELD_TYPES: &[FieldType] = &[$(FieldType {
            name: $name,
            kind: <$rust as Field>::KIND,
            bytes: <$rust as Field>::BYTES,
            c_type: $c,
        }),*];
    };
}
field_types! {
    "u8": u8 => "uint8_t", "u16": u16 => "uint16_t", "u32": u32 => "uint32_t", "u64": u64 => "uint64_t",
    "i8": i8 => "int8_t", "i16": i16 => "int16_t", "i32": i32 => "int32_t", "i64": i64 => "int64_t",
    "bool": bool => "bool",
    "addr<u8>": Addr<u8> => "uint8_t", "addr<u16>": Addr<u16> => "uint16_t",
    "addr<u32>": Addr<u32> => "uint32_t", "addr<u64>": Addr<u64> => "uint64_t",
    "reg<u8>": Reg<u8> => "uint8_t", "reg<u16>": Reg<u16> => "uint16_t",
    "reg<u32>": Reg<u32> => "uint32_t", "reg<u64>": Reg<u64> => "uint64_t",
}

/// The unsigned types an enum may be of.
const ENUM_REPRS: [&str; 4] = ["u8", "u16", "u32", "u64"];

/// An enum of the file.
#[derive(Debug, Clone)]
pub struct Enum {
    /// Its name.
    pub name: String,
    /// Its type (`u8` to `u64`).
    pub repr: String,
    /// Its values and their names.
    pub values: Vec<(u64, String)>,
}

/// A field of a declared type.
#[derive(Debug, Clone)]
pub struct DeclaredField {
    /// Its name.
    pub name: String,
    /// Its type, as written (a field type or an enum's name).
    pub ty: String,
}

/// A declared event type.
#[derive(Debug, Clone)]
pub struct Event {
    /// Its name.
    pub name: String,
    /// Its fields, in order.
    pub fields: Vec<DeclaredField>,
}

/// A register of the guest description.
#[derive(Debug, Clone)]
pub struct Register {
    /// Its name.
    pub name: String,
    /// The number the emulator reports it by.
    pub number: u64,
    /// Its width in bits.
    pub bits: u16,
    /// For a sub-register: its parent's name and the bit it starts at.
    pub within: Option<(String, u16)>,
}

/// What a declaration file declares.
#[derive(Debug, Clone, Default)]
pub struct Declarations {
    /// The types' provider (bpftrace's `usdt:EMU:PROVIDER:NAME`).
    pub provider: String,
    /// The enums.
    pub enums: Vec<Enum>,
    /// The event types.
    pub events: Vec<Event>,
    /// The guest's architecture, if the file describes the guest.
    pub arch: Option<String>,
    /// The program counter's name ("" for "pc").
    pub pc: String,
    /// The guest's registers.
    pub registers: Vec<Register>,
    /// The guest's images: (name, base, size).
    pub images: Vec<(String, u64, u64)>,
}

/// A token of a declaration file and its line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Number(u64),
    Text(String),
    Punct(char),
}

/// The most bytes a declaration file may have: far more than any
/// emulator declares, few enough that a wrong file is refused quickly.
const MAX_FILE_BYTES: usize = 1 << 20;

fn tokens(text: &str) -> Result<Vec<(usize, Token)>, DeclareError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(DeclareError::File(format!(
            "the file has {} bytes, more than the {MAX_FILE_BYTES} a declaration file may have",
            text.len()
        )));
    }
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let at = |message: String| DeclareError::At {
            line: index + 1,
            message,
        };
        let mut chars = line.char_indices().peekable();
        while let Some((start, c)) = chars.next() {
            let token = match c {
                '#' => break,
                c if c.is_whitespace() => continue,
                c if c.is_ascii_alphabetic() || c == '_' => {
                    let end = word_end(&mut chars, start);
                    Token::Word(line[start..end].to_string())
                }
                c if c.is_ascii_digit() => {
                    let end = word_end(&mut chars, start);
                    let literal = line[start..end].replace('_', "");
                    let number = match literal.strip_prefix("0x") {
                        Some(hex) => u64::from_str_radix(hex, 16),
                        None => literal.parse(),
                    };
                    Token::Number(number.map_err(|_| {
                        at(format!(
                            "{:?} is not a number that fits in 64 bits",
                            &line[start..end]
                        ))
                    })?)
                }
                '"' => {
                    let mut text = None;
                    for (i, c) in chars.by_ref() {
                        if c == '"' {
                            text = Some(line[start + 1..i].to_string());
                            break;
                        }
                    }
                    let text =
                        text.ok_or_else(|| at("a string without its closing '\"'".into()))?;
                    if text.contains(['\\', '\0']) {
                        return Err(at(format!("{text:?}: a name has no '\\' or NUL in it")));
                    }
                    Token::Text(text)
                }
                '(' | ')' | '{' | '}' | '<' | '>' | ':' | ',' | '=' | ';' => Token::Punct(c),
                other => return Err(at(format!("{other:?} has no meaning here"))),
            };
            out.push((index + 1, token));
        }
    }
    Ok(out)
}

/// Where the word or number that starts at `start` ends: past its last
/// letter, digit or `_`, taken from `chars`.
fn word_end(chars: &mut Peekable<CharIndices<'_>>, start: usize) -> usize {
    let mut end = start + 1;
    while let Some(&(i, c)) = chars.peek() {
        if !(c.is_ascii_alphanumeric() || c == '_') {
            break;
        }
        end = i + 1;
        chars.next();
    }
    end
}

/// Reads a declaration file's tokens.
struct Parser {
    tokens: Vec<(usize, Token)>,
    at: usize,
}

impl Parser {
    fn line(&self) -> usize {
        match self.tokens.get(self.at).or(self.tokens.last()) {
            Some((line, _)) => *line,
            None => 1,
        }
    }

    fn error(&self, message: impl Into<String>) -> DeclareError {
        DeclareError::At {
            line: self.line(),
            message: message.into(),
        }
    }

    fn next(&mut self, what: &str) -> Result<Token, DeclareError> {
        let token = self.tokens.get(self.at).map(|(_, t)| t.clone());
        let token =
            token.ok_or_else(|| self.error(format!("the file ends where {what} was due")))?;
        self.at += 1;
        Ok(token)
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|(_, t)| t)
    }

    fn punct(&mut self, c: char) -> Result<(), DeclareError> {
        match self.next(&format!("'{c}'"))? {
            Token::Punct(p) if p == c => Ok(()),
            other => Err(self.back(format!("'{c}' expected, not {}", shown(&other)))),
        }
    }

    fn eat(&mut self, c: char) -> bool {
        let here = self.peek() == Some(&Token::Punct(c));
        self.at += here as usize;
        here
    }

    /// An error about the token just read.
    fn back(&mut self, message: String) -> DeclareError {
        self.at -= 1;
        self.error(message)
    }

    /// A C identifier: a name the header's symbols are made of.
    fn word(&mut self, what: &str) -> Result<String, DeclareError> {
        match self.next(what)? {
            Token::Word(w) => Ok(w),
            other => Err(self.back(format!("{what} expected, not {}", shown(&other)))),
        }
    }

    /// A name the notes hold only: a word or a string.
    fn name(&mut self, what: &str) -> Result<String, DeclareError> {
        match self.next(what)? {
            Token::Word(w) | Token::Text(w) => Ok(w),
            other => Err(self.back(format!("{what} expected, not {}", shown(&other)))),
        }
    }

    fn number(&mut self, what: &str) -> Result<u64, DeclareError> {
        match self.next(what)? {
            Token::Number(n) => Ok(n),
            other => Err(self.back(format!("{what} expected, not {}", shown(&other)))),
        }
    }

    fn small(&mut self, what: &str) -> Result<u16, DeclareError> {
        let n = self.number(what)?;
        u16::try_from(n).map_err(|_| self.back(format!("{what} {n} is more than 65535")))
    }
}

fn shown(token: &Token) -> String {
    match token {
        Token::Word(w) => format!("{w:?}"),
        Token::Number(n) => n.to_string(),
        Token::Text(t) => format!("\"{t}\""),
        Token::Punct(c) => format!("'{c}'"),
    }
}

/// Reads a declaration file.
pub fn parse(text: &str) -> Result<Declarations, DeclareError> {
    let mut p = Parser {
        tokens: tokens(text)?,
        at: 0,
    };
    let mut d = Declarations::default();
    while p.peek().is_some() {
        let keyword = p.word("a declaration (provider, enum, event, arch, pc, register, image)")?;
        match keyword.as_str() {
            "provider" => {
                if !d.provider.is_empty() {
                    return Err(p.back("a second provider: a file declares one".into()));
                }
                d.provider = p.word("the provider's name")?;
                check_provider(&d.provider).map_err(|m| p.back(m))?;
            }
            "enum" => enum_declaration(&mut p, &mut d)?,
            "event" => event_declaration(&mut p, &mut d)?,
            "arch" => {
                if d.arch.is_some() {
                    return Err(p.back("a second arch: a guest has one".into()));
                }
                d.arch = Some(p.name("the architecture's name")?);
            }
            "pc" => d.pc = p.name("the program counter's name")?,
            "register" => register_declaration(&mut p, &mut d)?,
            "image" => {
                let name = p.name("the image's name")?;
                let base = p.number("the image's base address")?;
                let size = p.number("the image's size")?;
                d.images.push((name, base, size));
            }
            other => {
                return Err(p.back(format!(
                    "{other:?} declares nothing (provider, enum, event, arch, pc, register, image)"
                )))
            }
        }
        if keyword != "enum" {
            p.punct(';')?;
        }
    }
    check(&d)?;
    Ok(d)
}

/// Words of C11 and C++17 a parameter may not be named, and the prefix
/// the generated functions' own names have.
const C_KEYWORDS: &[&str] = &[
    "alignas",
    "alignof",
    "and",
    "and_eq",
    "asm",
    "auto",
    "bitand",
    "bitor",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "char16_t",
    "char32_t",
    "class",
    "compl",
    "const",
    "const_cast",
    "constexpr",
    "continue",
    "decltype",
    "default",
    "delete",
    "do",
    "double",
    "dynamic_cast",
    "else",
    "enum",
    "explicit",
    "export",
    "extern",
    "false",
    "float",
    "for",
    "friend",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "not_eq",
    "nullptr",
    "operator",
    "or",
    "or_eq",
    "private",
    "protected",
    "public",
    "register",
    "reinterpret_cast",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "static_assert",
    "static_cast",
    "struct",
    "switch",
    "template",
    "this",
    "thread_local",
    "throw",
    "true",
    "try",
    "typedef",
    "typeid",
    "typename",
    "union",
    "unsigned",
    "using",
    "virtual",
    "void",
    "volatile",
    "wchar_t",
    "while",
    "xor",
    "xor_eq",
];

/// A field's name is a parameter of its fire function: not a keyword,
/// nor one of the function's own names (`styx_…`).
fn check_c_name(name: &str) -> Result<(), String> {
    if C_KEYWORDS.contains(&name) || name.starts_with('_') {
        return Err(format!(
            "{name:?} is a word of C or C++ (or reserved): name the field otherwise"
        ));
    }
    if name.starts_with("styx_") {
        return Err(format!(
            "{name:?}: names starting styx_ are the generated code's"
        ));
    }
    Ok(())
}

/// Names the USDT world already means something by.
fn check_provider(provider: &str) -> Result<(), String> {
    match provider {
        "styx" | styx_common::batch::BATCH_PROVIDER => Err(format!(
            "provider {provider:?} is styx's own: name the emulator's"
        )),
        _ => Ok(()),
    }
}

fn enum_declaration(p: &mut Parser, d: &mut Declarations) -> Result<(), DeclareError> {
    let name = p.word("the enum's name")?;
    if d.enums.iter().any(|e| e.name == name) || field_type(&name).is_some() {
        return Err(p.back(format!("{name:?} is already a type")));
    }
    p.punct(':')?;
    let repr = p.word("the enum's type (u8, u16, u32 or u64)")?;
    if !ENUM_REPRS.contains(&repr.as_str()) {
        return Err(p.back(format!("an enum is of u8, u16, u32 or u64, not {repr:?}")));
    }
    let bytes = field_type(&repr).map_or(8, |t| t.bytes);
    p.punct('{')?;
    let mut values = Vec::new();
    while !p.eat('}') {
        let variant = p.word("a value's name")?;
        if values.iter().any(|(_, v)| *v == variant) {
            return Err(p.back(format!("{variant:?} twice in enum {name}")));
        }
        p.punct('=')?;
        let value = p.number("its value")?;
        if bytes < 8 && value >> (8 * bytes) != 0 {
            return Err(p.back(format!("{value} does not fit in {repr}")));
        }
        values.push((value, variant));
        if !p.eat(',') {
            p.punct('}')?;
            break;
        }
    }
    d.enums.push(Enum { name, repr, values });
    Ok(())
}

fn event_declaration(p: &mut Parser, d: &mut Declarations) -> Result<(), DeclareError> {
    let name = p.word("the event type's name")?;
    if d.events.iter().any(|e| e.name == name) {
        return Err(p.back(format!("event {name} twice")));
    }
    p.punct('(')?;
    let mut fields: Vec<DeclaredField> = Vec::new();
    while !p.eat(')') {
        let field = p.word("a field's name")?;
        check_c_name(&field).map_err(|m| p.back(m))?;
        if fields.iter().any(|f| f.name == field) {
            return Err(p.back(format!("field {field} twice in {name}")));
        }
        p.punct(':')?;
        let mut ty = p.word("the field's type")?;
        if p.eat('<') {
            ty = format!("{ty}<{}>", p.word("the integer type inside")?);
            p.punct('>')?;
        }
        if field_type(&ty).is_none() && !d.enums.iter().any(|e| e.name == ty) {
            return Err(p.back(format!(
                "{ty:?} is not a field type (u8..u64, i8..i64, bool, addr<uN>, reg<uN>, or an enum declared above)"
            )));
        }
        fields.push(DeclaredField { name: field, ty });
        if fields.len() > MAX_FIELDS {
            return Err(p.back(format!("{name} has more than {MAX_FIELDS} fields")));
        }
        if !p.eat(',') {
            p.punct(')')?;
            break;
        }
    }
    d.events.push(Event { name, fields });
    Ok(())
}

fn register_declaration(p: &mut Parser, d: &mut Declarations) -> Result<(), DeclareError> {
    let name = p.name("the register's name")?;
    if d.registers.iter().any(|r| r.name == name) {
        return Err(p.back(format!("register {name:?} twice")));
    }
    let number = p.number("the register's number")?;
    let bits = p.small("the register's width in bits")?;
    let within = match p.peek() {
        Some(Token::Word(w)) if w == "in" => {
            p.at += 1;
            let parent = p.name("the parent register's name")?;
            match p.word("'at'")?.as_str() {
                "at" => Some((parent, p.small("the bit it starts at")?)),
                other => return Err(p.back(format!("'at' expected, not {other:?}"))),
            }
        }
        _ => None,
    };
    d.registers.push(Register {
        name,
        number,
        bits,
        within,
    });
    Ok(())
}

fn field_type(name: &str) -> Option<&'static FieldType> {
    FIELD_TYPES.iter().find(|t| t.name == name)
}

/// What only the file as a whole tells: a provider, a guest's arch for
/// its registers, and what the notes' writers refuse.
fn check(d: &Declarations) -> Result<(), DeclareError> {
    let file = |m: String| Err(DeclareError::File(m));
    if d.provider.is_empty() && !d.events.is_empty() {
        return file("the file declares events but no provider (`provider NAME;`)".into());
    }
    let catalogue: Vec<&str> = styx_common::EventKind::ALL
        .iter()
        .map(|k| k.probe_name())
        .collect();
    for event in &d.events {
        let c_name = format!("{}_{}", d.provider, event.name);
        if catalogue.contains(&c_name.as_str()) {
            return file(format!(
                "{c_name} is a styx event type's name: STYX_FIRE({c_name}, ...) would fire that"
            ));
        }
        if let Err(why) = event_note(d, event) {
            return file(format!("event {}: {why}", event.name));
        }
    }
    let mut constants: Vec<String> = Vec::new();
    for e in &d.enums {
        for (_, variant) in &e.values {
            let constant = enum_constant(d, e, variant);
            if constants.contains(&constant) {
                return file(format!("two enum values make the C constant {constant}"));
            }
            constants.push(constant);
        }
    }
    let describes = !d.registers.is_empty() || !d.images.is_empty() || !d.pc.is_empty();
    if describes && d.arch.is_none() {
        return file(
            "registers, images or a pc describe a guest whose arch is not said (`arch \"NAME\";`)"
                .into(),
        );
    }
    if let Err(why) = guest_note(d) {
        return file(format!("the guest description: {why}"));
    }
    Ok(())
}

/// The C constant of an enum's value: `PROVIDER_ENUM_VALUE`, upper case.
fn enum_constant(d: &Declarations, e: &Enum, variant: &str) -> String {
    format!("{}_{}_{}", d.provider, e.name, variant).to_uppercase()
}

/// A declared type's note, by styx-common's writer (what `event!` writes).
fn event_note(d: &Declarations, event: &Event) -> Result<Vec<u8>, &'static str> {
    // The writer takes the `'static` names a Rust declaration has; a
    // generator's run is short, so its few names are leaked.
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    let mut fields: Vec<FieldEntry> = Vec::new();
    for field in &event.fields {
        let entry = match field_type(&field.ty) {
            Some(t) => (leak(&field.name), t.kind, t.bytes, "", &[][..]),
            None => {
                let Some(e) = d.enums.iter().find(|e| e.name == field.ty) else {
                    return Err("a field of an unknown type");
                };
                let values: Vec<EnumValue> = (e.values.iter())
                    .map(|(v, name)| (*v, leak(name)))
                    .collect();
                let bytes = field_type(&e.repr).map_or(8, |t| t.bytes);
                let values: &'static [EnumValue] = Box::leak(values.into_boxed_slice());
                (
                    leak(&field.name),
                    FieldKind::Enum,
                    bytes,
                    leak(&e.name),
                    values,
                )
            }
        };
        fields.push(entry);
    }
    let len = styx_common::schema::note_len(&d.provider, &event.name, &fields);
    let mut note = vec![0u8; len];
    styx_common::schema::write_checked(&mut note, &d.provider, &event.name, &fields)?;
    Ok(note)
}

/// The guest description's note, by styx-common's writer (what
/// `describe!` writes); none without an arch.
fn guest_note(d: &Declarations) -> Result<Option<Vec<u8>>, &'static str> {
    let Some(arch) = &d.arch else {
        return Ok(None);
    };
    let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
    let registers: Vec<RegisterEntry> = (d.registers.iter())
        .map(|r| {
            let within = r
                .within
                .as_ref()
                .map(|(parent, shift)| (leak(parent), *shift));
            (leak(&r.name), r.number, r.bits, within)
        })
        .collect();
    let images: Vec<ImageEntry> = (d.images.iter())
        .map(|(name, base, size)| (leak(name), *base, *size))
        .collect();
    let len = styx_common::guest::note_len(arch, &d.pc, &registers, &images);
    let mut note = vec![0u8; len];
    styx_common::guest::write_checked(&mut note, arch, &d.pc, &registers, &images)?;
    Ok(Some(note))
}

/// The registers a declared type's per-event site passes its fields in,
/// in order (as `event!`'s sites).
const SITE_REGISTERS: [&str; MAX_FIELDS] = ["rdi", "rsi", "rdx", "rcx", "r8", "r9", "r10", "r11"];

/// The header for `d`, which `source` (the declaration file's name) said.
pub fn generate(d: &Declarations, source: &str) -> Result<String, DeclareError> {
    check(d)?;
    let guard = format!("STYX_DECLARED_{}_H", d.provider.to_uppercase());
    let mut h = String::new();
    let _ = write!(
        h,
        "/*\n * Generated by styx-declare from {source}: do not edit.\n *\n \
         * Include it where the emulator fires these types, after styx_probe.h,\n \
         * and in exactly one file with STYX_DECLARE_DEFINITIONS defined first:\n \
         * that file holds the types' semaphore words, their notes and their\n \
         * probe sites. Fire a type with STYX_FIRE(PROVIDER_NAME, values...).\n \
         * Traced in batches with the static library (libstyx_probe_c.a); with\n \
         * the shared one, one event at a time.\n */\n\
         #ifndef {guard}\n#define {guard}\n\n\
         #include <stdint.h>\n#ifndef __cplusplus\n#include <stdbool.h>\n#endif\n\
         #include \"styx_probe.h\"\n\n\
         #ifdef __cplusplus\nextern \"C\" {{\n#endif\n",
        source = source.replace("*/", "* /"),
    );
    for e in &d.enums {
        let c_type = field_type(&e.repr).map_or("uint64_t", |t| t.c_type);
        let _ = writeln!(h, "\n/* enum {}: {} */", e.name, e.repr);
        for (value, variant) in &e.values {
            let constant = enum_constant(d, e, variant);
            let _ = writeln!(h, "#define {constant} (({c_type}){value}u)");
        }
    }
    for event in &d.events {
        declaration(&mut h, d, event);
    }
    h.push_str("\n#ifdef __cplusplus\n}\n#endif\n");
    h.push_str("\n#ifdef STYX_DECLARE_DEFINITIONS\n");
    for event in &d.events {
        definition(&mut h, d, event)?;
    }
    if let Some(note) = guest_note(d).map_err(|why| DeclareError::File(why.into()))? {
        h.push_str("\n/* The guest description (describe!'s note). */\n");
        note_asm(&mut h, &note);
    }
    h.push_str("#endif /* STYX_DECLARE_DEFINITIONS */\n");
    let _ = writeln!(h, "\n#endif /* {guard} */");
    Ok(h)
}

/// A field's C type.
fn c_type<'a>(d: &'a Declarations, field: &DeclaredField) -> &'a str {
    match field_type(&field.ty) {
        Some(t) => t.c_type,
        None => (d.enums.iter())
            .find(|e| e.name == field.ty)
            .and_then(|e| field_type(&e.repr))
            .map_or("uint64_t", |t| t.c_type),
    }
}

/// The names a type's symbols are made of.
fn symbols(d: &Declarations, event: &Event) -> (String, String) {
    let c_name = format!("{}_{}", d.provider, event.name);
    let semaphore = format!("styx_declared_{c_name}_semaphore");
    (c_name, semaphore)
}

/// What every file including the header sees of a type: its semaphore
/// word (hidden: one RIP-relative load inline) and its fire function.
fn declaration(h: &mut String, d: &Declarations, event: &Event) {
    let (c_name, semaphore) = symbols(d, event);
    let params: Vec<String> = (event.fields.iter())
        .map(|f| format!("{} {}", c_type(d, f), f.name))
        .collect();
    let names: Vec<&str> = event.fields.iter().map(|f| f.name.as_str()).collect();
    let params = match params.is_empty() {
        true => "void".to_string(),
        false => params.join(", "),
    };
    let _ = write!(
        h,
        "\n/* {}:{}({}) */\n\
         extern const volatile uint32_t {semaphore} __attribute__((visibility(\"hidden\")));\n\
         #ifdef STYX_PROBES_OFF\n\
         #define STYX_PROBE_WORD_{c_name} 0\n\
         #else\n\
         #define STYX_PROBE_WORD_{c_name} {semaphore}\n\
         #endif\n\
         void styx_fire_{c_name}({params}) __attribute__((visibility(\"hidden\")));\n",
        d.provider,
        event.name,
        names.join(", "),
    );
}

/// The type's definitions: its semaphore word in `.probes` (as
/// styx-probe's), its note, its per-event site and batch-enable site (as
/// `event!`'s), and its fire function.
fn definition(h: &mut String, d: &Declarations, event: &Event) -> Result<(), DeclareError> {
    let (c_name, semaphore) = symbols(d, event);
    let note = event_note(d, event)
        .map_err(|why| DeclareError::File(format!("event {}: {why}", event.name)))?;
    let _ = write!(
        h,
        "\n/* {provider}:{name}: its semaphore word, beside styx-probe's (a batch\n \
         * item's tag is its distance from the flush site's), and its note. */\n\
         __asm__(\".pushsection .probes, \\\"aw\\\", @progbits\\n\"\n        \
         \".balign 4\\n\"\n        \
         \".globl {semaphore}\\n\"\n        \
         \".hidden {semaphore}\\n\"\n        \
         \".type {semaphore}, @object\\n\"\n        \
         \".size {semaphore}, 4\\n\"\n        \
         \"{semaphore}:\\n\"\n        \
         \".4byte 0\\n\"\n        \
         \".popsection\");\n",
        provider = d.provider,
        name = event.name,
    );
    note_asm(h, &note);
    let n = event.fields.len();
    let spec: Vec<String> = SITE_REGISTERS[..n]
        .iter()
        .map(|r| format!("8@%%{r}"))
        .collect();
    let _ = write!(
        h,
        "/* The per-event site, its fields in registers as event!'s, and the\n \
         * batch-enable site, jumped over. */\n\
         __attribute__((noinline, cold)) static void styx_site_{c_name}(const uint64_t *values)\n{{\n"
    );
    for (i, register) in SITE_REGISTERS[..n].iter().enumerate() {
        let _ = writeln!(
            h,
            "    register uint64_t value{i} __asm__(\"{register}\") = values[{i}];"
        );
    }
    if n == 0 {
        h.push_str("    (void)values;\n");
    }
    let operands: Vec<String> = (0..n).map(|i| format!("\"r\"(value{i})")).collect();
    let _ = write!(
        h,
        "    __asm__ __volatile__(\"990: nop\\n\"\n{site}        \"jmp 995f\\n\"\n        \"996: nop\\n\"\n{batch}        \"995:\\n\"\n        : : {operands} : \"memory\");\n}}\n",
        site = stapsdt_note("990b", &semaphore, 0, &d.provider, &event.name, &spec.join(" ")),
        batch = stapsdt_note(
            "996b",
            &semaphore,
            2,
            styx_common::batch::BATCH_PROVIDER,
            &event.name,
            ""
        ),
        operands = operands.join(", "),
    );
    let args: Vec<String> = (event.fields.iter())
        .map(|f| {
            let signed = field_type(&f.ty).is_some_and(|t| t.kind == FieldKind::Signed);
            match signed {
                // Sign-extended, as a signed field's `bits()` in Rust.
                true => format!("(uint64_t)(int64_t){}", f.name),
                false => format!("(uint64_t){}", f.name),
            }
        })
        .collect();
    let widths: Vec<String> = (event.fields.iter())
        .map(|f| match field_type(&f.ty) {
            Some(t) => t.bytes.to_string(),
            None => (d.enums.iter())
                .find(|e| e.name == f.ty)
                .and_then(|e| field_type(&e.repr))
                .map_or(8, |t| t.bytes)
                .to_string(),
        })
        .collect();
    let params: Vec<String> = (event.fields.iter())
        .map(|f| format!("{} {}", c_type(d, f), f.name))
        .collect();
    let (params, values, widths) = match n {
        0 => ("void".to_string(), "0".to_string(), "0".to_string()),
        _ => (params.join(", "), args.join(", "), widths.join(", ")),
    };
    let _ = write!(
        h,
        "/* Called by STYX_FIRE only while a tracer is attached. */\n\
         __attribute__((noinline, cold)) void styx_fire_{c_name}({params})\n{{\n    \
         const uint64_t styx_values[{len}] = {{{values}}};\n    \
         static const uint8_t styx_widths[{len}] = {{{widths}}};\n    \
         styx_fire_declared(&{semaphore}, styx_site_{c_name}, styx_values, styx_widths, {n});\n}}\n",
        len = n.max(1),
    );
    Ok(())
}

/// One `.note.stapsdt` entry for the site at `label`, as styx-probe's
/// sites write theirs (`__probe_site!`), as lines of a C asm string.
fn stapsdt_note(
    label: &str,
    semaphore: &str,
    offset: u32,
    provider: &str,
    name: &str,
    spec: &str,
) -> String {
    let lines = [
        ".pushsection .note.stapsdt, \\\"\\\", \\\"note\\\"".to_string(),
        ".balign 4".into(),
        ".4byte 992f-991f, 994f-993f, 3".into(),
        "991: .asciz \\\"stapsdt\\\"".into(),
        "992: .balign 4".into(),
        format!("993: .8byte {label}"),
        ".8byte _.stapsdt.base".into(),
        format!(".8byte {semaphore}+{offset}"),
        format!(".asciz \\\"{provider}\\\""),
        format!(".asciz \\\"{name}\\\""),
        format!(".asciz \\\"{spec}\\\""),
        "994: .balign 4".into(),
        ".popsection".into(),
        // The base tools compare with the note's second address; one per
        // file, shared by every note (styx-probe's too).
        ".ifndef _.stapsdt.base".into(),
        ".pushsection .stapsdt.base, \\\"aGR\\\", \\\"progbits\\\", .stapsdt.base, comdat".into(),
        ".weak _.stapsdt.base".into(),
        ".hidden _.stapsdt.base".into(),
        "_.stapsdt.base:".into(),
        ".space 1".into(),
        ".size _.stapsdt.base, 1".into(),
        ".popsection".into(),
        ".endif".into(),
    ];
    lines
        .iter()
        .map(|l| format!("        \"{l}\\n\"\n"))
        .collect()
}

/// A note's bytes in `.note.styx`, as the Rust macros' `#[used]` statics.
fn note_asm(h: &mut String, note: &[u8]) {
    h.push_str(
        "__asm__(\".pushsection .note.styx, \\\"a\\\", @note\\n\"\n        \".balign 4\\n\"\n",
    );
    for chunk in note.chunks(16) {
        let bytes: Vec<String> = chunk.iter().map(|b| format!("{b:#04x}")).collect();
        let _ = writeln!(h, "        \".byte {}\\n\"", bytes.join(", "));
    }
    h.push_str("        \".popsection\");\n");
}

#[cfg(test)]
mod tests;
