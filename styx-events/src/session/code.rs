//! Names for code addresses of the traced process, such as an
//! allocation's caller: the function holding the address and how far in
//! (`known_allocations+0x159`). The loader reads the functions of the
//! files the header's `mapped` lists (styx-usdt reads ELF); this is the
//! lookup.

/// Functions by their address in the traced process.
#[derive(Clone, Debug, Default)]
pub struct CodeNames {
    /// (start, end, name), by start.
    functions: Vec<(u64, u64, String)>,
}

impl CodeNames {
    /// Names for the functions given as (start, size, name).
    pub fn new(functions: impl IntoIterator<Item = (u64, u64, String)>) -> CodeNames {
        let mut functions: Vec<(u64, u64, String)> = functions
            .into_iter()
            .map(|(start, size, name)| (start, start.saturating_add(size), name))
            .collect();
        functions.sort_unstable_by_key(|&(start, _, _)| start);
        CodeNames { functions }
    }

    /// `function+0xoffset` for an address inside a function, else None.
    pub fn name_of(&self, address: u64) -> Option<String> {
        // The last function starting at or below it; nested symbols (a
        // function's cold part inside another's range) are rare enough.
        let after = self
            .functions
            .partition_point(|&(start, _, _)| start <= address);
        let (start, end, name) = self.functions.get(after.checked_sub(1)?)?;
        (address < *end).then(|| match address - start {
            0 => name.clone(),
            offset => format!("{name}+{offset:#x}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_named_by_the_function_holding_it() {
        let names = CodeNames::new([(0x2000, 0x10, "b".into()), (0x1000, 0x100, "a".into())]);
        assert_eq!(names.name_of(0x1000).as_deref(), Some("a"));
        assert_eq!(names.name_of(0x10ff).as_deref(), Some("a+0xff"));
        assert_eq!(names.name_of(0x1100), None);
        assert_eq!(names.name_of(0x0fff), None);
        assert_eq!(names.name_of(0x2004).as_deref(), Some("b+0x4"));
        assert_eq!(names.name_of(u64::MAX), None);
    }
}
