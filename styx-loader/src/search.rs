//! Searching a target's files for what to trace beyond its probes: the
//! functions `--functions` names (how many, and why none when none match)
//! and the guest its emulator describes. Tracing and `list` both ask; the
//! tables of `top` and `read --by` ask what function a code address is in.

use crate::cli::FunctionArgs;
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use styx_events::escape;
use styx_events::{CodeNames, EventType, Guest, Header, MappedFile};
use styx_usdt::functions::{read_functions, FunctionTable, FunctionsError, Matcher};
use styx_usdt::needed::needed_libraries;
use styx_usdt::note::ProbeTable;
use styx_usdt::symbols;
use styx_usdt::target::{ElfFile, Target};

/// More matching functions than this need `--force`: each gets probes at its
/// entry and every return, and thousands of uprobes slow attaching and the
/// traced program.
pub const MAX_FUNCTIONS: usize = 5000;

/// Which of a target's files were searched for functions: what to say
/// when none matched but a library the target loads has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// Tracing (the `trace` feature) searches commands and binaries too.
#[cfg_attr(not(feature = "trace"), allow(dead_code))]
pub enum Searched {
    /// A running process: its executable and mapped libraries.
    Process,
    /// `-- CMD`: the program alone (nothing else is mapped yet).
    Command,
    /// `--binary PATH`: that file alone.
    Binary,
    /// `list FILE`: that file alone.
    File,
}

/// No function of the target matched `--functions`, and why as far as can
/// be told: tracing a process waits for a library it maps later instead.
#[derive(Debug)]
pub struct NoneMatched(String);

impl std::fmt::Display for NoneMatched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NoneMatched {}

/// The functions of `target`'s files that `select` takes, per file index;
/// an error if none (saying why, as far as can be told), or more than
/// [`MAX_FUNCTIONS`] without `--force`. Functions that cannot be traced
/// safely (`FunctionTable::refused`) are left to the caller to report.
pub fn find_functions(
    target: &Target,
    select: &FunctionArgs,
    searched: Searched,
) -> Result<Vec<(usize, FunctionTable)>> {
    let matcher = Matcher::new(&select.functions, &select.functions_exclude)?;
    let mut tables = Vec::new();
    for (i, file) in target.files.iter().enumerate() {
        match read_functions(&file.read_at, &matcher) {
            Ok(table) => tables.push((i, table)),
            Err(e) if i == 0 => return Err(e.into()),
            Err(FunctionsError::NotElf { .. }) => {}
            Err(e) => log::warn!("skipping a library: {e}"),
        }
    }
    let count: usize = tables.iter().map(|(_, t)| t.functions.len()).sum();
    let patterns = select.functions.join("', '");
    if count == 0 {
        return Err(NoneMatched(format!(
            "no function of {} matches '{patterns}': {}",
            escape::controls(&target.name),
            why_none(target, &tables, &matcher, searched)
        ))
        .into());
    }
    if count > MAX_FUNCTIONS && !select.force {
        bail!(
            "{count} functions match '{patterns}': more than {MAX_FUNCTIONS} would each get a \
             probe at entry and at every return; narrow the pattern (or \
             --functions-exclude), or give --force"
        );
    }
    Ok(tables)
}

/// Why no function of `target` matched, as far as can be told: some did
/// but cannot be traced safely, a file has no symbol table, the function
/// lives in a library the search did not cover, or it has no symbol.
fn why_none(
    target: &Target,
    tables: &[(usize, FunctionTable)],
    matcher: &Matcher,
    searched: Searched,
) -> String {
    let refused: Vec<String> = tables
        .iter()
        .flat_map(|(_, t)| &t.refused)
        .map(|(name, why)| format!("{}: {why}", escape::controls(name)))
        .collect();
    if let Some(first) = refused.first() {
        let more = match refused.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        return format!("the matching ones cannot be traced safely: {first}{more}");
    }
    // A stripped file and a library not searched may both be why.
    let mut reasons: Vec<String> = tables
        .iter()
        .filter_map(|(i, t)| {
            let functions = t.stripped?;
            Some(format!(
                "{} has no symbol table (stripped); its .dynsym has {} (the exported ones)",
                escape::controls(&target.files[*i].name),
                plural(functions, "function")
            ))
        })
        .collect();
    if searched != Searched::Process {
        let exe = &target.files[0];
        let found = needed_libraries(&exe.read_at).into_iter().find(|library| {
            read_functions(library, matcher).is_ok_and(|t| !t.functions.is_empty())
        });
        if let Some(library) = found {
            let name = library.file_name().unwrap_or_default().to_string_lossy();
            let path = library.display().to_string();
            let path = escape::controls(&path);
            let which = match searched {
                // Followed once mapped (session::follow).
                Searched::Command => format!(
                    "which `-- CMD` traces only once the command maps it (its calls before \
                     that are not seen; --binary {path} sees them all)"
                ),
                Searched::Binary => format!("which --binary does not search: use --binary {path}"),
                _ => format!("which `list FILE` does not search: list {path}"),
            };
            reasons.push(format!(
                "found in {} ({path}), {which}",
                escape::controls(&name)
            ));
        }
    }
    if reasons.is_empty() {
        return "a function the compiler inlined everywhere has no symbol, and cannot be traced"
            .to_string();
    }
    reasons.join("; ")
}

/// The guest description of the target's files (`styx_probe::describe!`),
/// warning about any left out.
pub fn guest_description(target: &Target, tables: &[(usize, ProbeTable)]) -> Option<Guest> {
    let notes = tables.iter().flat_map(|(file, table)| {
        let name = target.files[*file].name.as_str();
        table
            .guest_notes
            .iter()
            .map(move |desc| (name, desc.as_slice()))
    });
    let (guest, problems) = Guest::from_notes(notes);
    for problem in problems {
        log::warn!("{problem}");
    }
    guest
}

/// The event types the target's files declare (`styx_probe::event!`), by
/// (file, provider, name), warning about notes that do not decode.
pub fn declared_types(
    target: &Target,
    tables: &[(usize, ProbeTable)],
) -> BTreeMap<(usize, String, String), EventType> {
    let mut types = BTreeMap::new();
    for (file, table) in tables {
        for desc in &table.event_notes {
            match EventType::decode(desc) {
                Ok(declared) => {
                    let key = (*file, declared.provider.clone(), declared.name.clone());
                    types.insert(key, declared);
                }
                Err(e) => log::warn!(
                    "{}: {e}; left out",
                    escape::controls(&target.files[*file].name)
                ),
            }
        }
    }
    types
}

/// `1 return`, `2 returns`.
pub fn plural(n: usize, word: &str) -> String {
    match n {
        1 => format!("1 {word}"),
        n => format!("{n} {word}s"),
    }
}

/// The ELF files `target`'s process has mapped, and where, when the
/// session traces the heap (`styx_alloc`'s types), whose callers are code
/// addresses a table names by function ([`code_names`]); its data files
/// (`/etc/ld.so.cache` during a `dlopen`) name nothing. Only a running
/// process's mappings are known here: a command's are made after this.
#[cfg_attr(not(feature = "trace"), allow(dead_code))]
pub fn mapped_files(target: &Target, header: &Header) -> Vec<MappedFile> {
    if !header.traces_heap() {
        return Vec::new();
    }
    let hex = |id: Vec<u8>| id.iter().map(|b| format!("{b:02x}")).collect();
    (target.files.iter())
        .filter_map(|file| {
            let (start, offset) = file.mapped_at?;
            let build_id = symbols::elf_build_id(file)?;
            Some(MappedFile {
                path: file.name.clone(),
                start,
                offset,
                build_id: build_id.map(hex),
            })
        })
        .collect()
}

/// Names for the code addresses of the process `header` traced, from the
/// functions of the files it had mapped; a file that cannot be read, or
/// was rebuilt since, names nothing and says so once.
pub fn code_names(header: &Header) -> CodeNames {
    if header.traces_heap() && header.mapped.is_empty() {
        log::warn!(
            "callers stay addresses: the session did not keep where the process mapped its \
             files (tracing a running process, --pid, does)"
        );
    }
    let mut functions = Vec::new();
    for mapped in &header.mapped {
        let file = ElfFile {
            read_at: mapped.path.clone().into(),
            name: mapped.path.clone(),
            mapped_at: Some((mapped.start, mapped.offset)),
        };
        let build_id = mapped.build_id.as_deref().map(unhex);
        match symbols::functions_at(&file, build_id.as_deref()) {
            Ok(found) => functions.extend(found.into_iter().map(|f| (f.start, f.size, f.name))),
            Err(e) => log::warn!("code addresses in it stay unnamed: {e}"),
        }
    }
    CodeNames::new(functions)
}

/// Names for a guest's code addresses, from the functions of its images'
/// files (a QEMU guest's program, by the path its description gives,
/// loaded at the image's base): read when the events are, as the host's
/// are ([`code_names`]), so tracing costs nothing more. A file that
/// cannot be read names nothing and says so once.
pub fn guest_code_names(guest: &Guest) -> CodeNames {
    let mut functions = Vec::new();
    for image in &guest.images {
        let file = ElfFile {
            read_at: image.name.clone().into(),
            name: image.name.clone(),
            // Its first byte, the ELF header, is at the base.
            mapped_at: Some((image.base, 0)),
        };
        match symbols::functions_at(&file, None) {
            Ok(found) => functions.extend(found.into_iter().map(|f| (f.start, f.size, f.name))),
            Err(e) => log::warn!("the guest's pcs stay addresses: {e}"),
        }
    }
    CodeNames::new(functions)
}

/// Bytes from hex (a build id as the header keeps it); a malformed one
/// matches no file.
fn unhex(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .filter_map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}
