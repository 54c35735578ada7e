//! Text from outside made safe to print for people: probe and provider
//! names from a note, file names, what a capture header says. Control
//! characters are escaped, so a name cannot move the cursor, retitle the
//! terminal or hide what follows it. (JSON output is escaped by its own rules.)

use std::borrow::Cow;
use std::fmt::Write;

/// `s` with every control character escaped: `\t`, `\n` and `\r` as such,
/// the other ASCII ones as `\x1b`, the C1 ones (U+0080 to U+009F) as
/// `\u{9b}`; borrowed, as it is, when there is none.
pub fn controls(s: &str) -> Cow<'_, str> {
    // C1 controls are encoded 0xc2 0x80..=0x9f: a byte test finds them all.
    if !s.bytes().any(|b| b < 0x20 || b == 0x7f || b == 0xc2) || !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_the_rest_kept() {
        assert!(matches!(controls("styx:mem_read é"), Cow::Borrowed(_)));
        assert_eq!(
            controls("a\x1b[31mb\tc\nd\re\x7ff\u{9b}g\u{85}é\0"),
            r"a\x1b[31mb\tc\nd\re\x7ff\u{9b}g\u{85}é\x00"
        );
    }
}
