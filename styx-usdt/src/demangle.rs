//! Symbol names for people: Rust (v0 and legacy, hash dropped), C++, or as
//! they are. `--functions` matches these, and messages show them.

/// A symbol's name for people: Rust (v0 and legacy, hash dropped), C++, or
/// as it is.
pub fn demangle(raw: &str) -> String {
    if let Ok(rust) = rustc_demangle::try_demangle(raw) {
        return format!("{rust:#}");
    }
    if raw.starts_with("_Z") {
        if let Ok(cpp) = cpp_demangle::Symbol::new(raw) {
            if let Ok(text) = cpp.demangle() {
                return text;
            }
        }
    }
    raw.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_demangle_for_each_language() {
        assert_eq!(
            demangle("_ZN9styx_demo3cpu3Cpu4step17h0123456789abcdefE"),
            "styx_demo::cpu::Cpu::step"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        assert_eq!(demangle("_Z7throweri"), "thrower(int)");
        assert_eq!(demangle("main"), "main");
    }
}
