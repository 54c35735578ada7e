//! `styx-loader list`: the USDT probes of a file or a process, like
//! `bpftrace -l` and BCC's tplist, with each site's argument spec checked.

use crate::cli::{FunctionArgs, ListArgs};
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use styx_events::escape;
use styx_events::Guest;
use styx_usdt::argspec::parse_spec;
use styx_usdt::functions::{read_functions, FunctionTable, FunctionsError, Matcher};
use styx_usdt::needed::needed_libraries;
use styx_usdt::note::ProbeTable;
use styx_usdt::target::Target;

/// More matching functions than this need `--force`: each gets probes at its
/// entry and every return, and thousands of uprobes slow attaching and the
/// traced program.
pub const MAX_FUNCTIONS: usize = 5000;

/// Lists the probes (or with --functions, the functions) `args` asks for.
pub fn run(args: &ListArgs) -> Result<()> {
    if !args.functions.functions.is_empty() {
        return list_functions(args);
    }
    let (target, pattern) = match (args.pid, args.args.as_slice()) {
        (Some(pid), [] | [_]) => (Target::from_pid(pid)?, args.args.first()),
        (None, [path, rest @ ..]) if rest.len() <= 1 => {
            (Target::file(Path::new(path)), rest.first())
        }
        (Some(_), _) => bail!("with --pid, give at most a PATTERN"),
        (None, _) => bail!("give an ELF file and at most a PATTERN, or --pid PID"),
    };
    let pattern = pattern.map_or("*", String::as_str);
    let glob = glob::Pattern::new(pattern)
        .with_context(|| format!("{pattern:?} is not a glob pattern"))?;

    let mut out = std::io::stdout().lock();
    let mut listed = 0;
    let tables = target.probe_tables()?;
    for (i, table) in &tables {
        let i = *i;
        let file = &target.files[i];
        let probes: BTreeSet<(&str, &str)> = table
            .sites
            .iter()
            .map(|s| (s.provider.as_str(), s.name.as_str()))
            .collect();
        for (provider, name) in probes {
            if !glob.matches(&format!("{provider}:{name}")) {
                continue;
            }
            listed += 1;
            writeln!(out, "{}", probe_line(&file.name, provider, name))?;
            for site in table
                .sites
                .iter()
                .filter(|s| s.provider == provider && s.name == name)
            {
                writeln!(
                    out,
                    "    {}",
                    describe_site(site.address, site.semaphore, &site.args, site.start_checked)
                )?;
            }
        }
    }
    if let Some(guest) = guest_description(&target, &tables) {
        // What the emulator said about its guest (`styx_probe::describe!`).
        writeln!(out, "guest: {}", guest.summary())?;
    }
    if listed == 0 {
        let names: Vec<_> = target
            .files
            .iter()
            .map(|f| escape::controls(&f.name))
            .collect();
        bail!("no USDT probes match {pattern:?} in {}", names.join(", "));
    }
    Ok(())
}

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
        bail!(
            "no function of {} matches '{patterns}': {}",
            escape::controls(&target.name),
            why_none(target, &tables, &matcher, searched)
        );
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
            let (what, instead) = match searched {
                Searched::Command => ("`-- CMD`", format!("use --pid, or --binary {path}")),
                Searched::Binary => ("--binary", format!("use --binary {path}")),
                _ => ("`list FILE`", format!("list {path}")),
            };
            reasons.push(format!(
                "found in {} ({path}), which {what} does not search: {instead}",
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

/// `list --functions`: the functions tracing them would probe, per file.
fn list_functions(args: &ListArgs) -> Result<()> {
    let (target, searched) = match (args.pid, args.args.as_slice()) {
        (Some(pid), []) => (Target::from_pid(pid)?, Searched::Process),
        (None, [path]) => (Target::file(Path::new(path)), Searched::File),
        (Some(_), _) => bail!("with --pid and --functions, give no PATH or PATTERN"),
        (None, _) => bail!("give one ELF file, or --pid PID, to list its functions"),
    };
    let tables = find_functions(&target, &args.functions, searched)?;
    let count: usize = tables.iter().map(|(_, t)| t.functions.len()).sum();
    let mut out = std::io::stdout().lock();
    let (mut returns, mut tail_calls, mut no_body, mut refused) = (0, 0, 0, 0);
    for (i, table) in &tables {
        let file = escape::controls(&target.files[*i].name);
        for f in &table.functions {
            writeln!(out, "fn:{file}:{}", escape::controls(&f.name))?;
            let tails = match f.tail_calls.len() {
                0 => String::new(),
                n => format!(", {}", plural(n, "tail call")),
            };
            writeln!(
                out,
                "    {:#x}  {} bytes  {}{tails}",
                f.address,
                f.size,
                plural(f.returns.len(), "return")
            )?;
            returns += f.returns.len();
            tail_calls += f.tail_calls.len();
        }
        for (name, why) in &table.refused {
            writeln!(
                out,
                "fn:{file}:{}\n    cannot be traced: {}",
                escape::controls(name),
                escape::controls(why)
            )?;
            refused += 1;
        }
        for name in &table.without_body {
            writeln!(
                out,
                "fn:{file}:{}\n    no out-of-line body (a label, or code elsewhere): cannot be traced",
                escape::controls(name)
            )?;
            no_body += 1;
        }
    }
    writeln!(
        out,
        "{}, {}{}{}{}",
        plural(count, "function"),
        plural(returns, "return site"),
        match tail_calls {
            0 => String::new(),
            n => format!(
                ", {} (jumps to another function: with ret probes a call ends there)",
                plural(n, "tail call")
            ),
        },
        match no_body {
            0 => String::new(),
            n => format!("; {} without a body", plural(n, "matching symbol")),
        },
        match refused {
            0 => String::new(),
            n => format!("; {} not safe to probe", plural(n, "matching function")),
        }
    )?;
    Ok(())
}

/// `1 return`, `2 returns`.
fn plural(n: usize, word: &str) -> String {
    match n {
        1 => format!("1 {word}"),
        n => format!("{n} {word}s"),
    }
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

/// `usdt:FILE:PROVIDER:PROBE`, control characters escaped: the names come
/// from files and notes anyone can write.
fn probe_line(file: &str, provider: &str, name: &str) -> String {
    format!(
        "usdt:{}:{}:{}",
        escape::controls(file),
        escape::controls(provider),
        escape::controls(name)
    )
}

/// `0x5a2f1  semaphore 0xcb8e0  8@%rdi 8@%rsi`, flagging specs styx cannot
/// read and sites no function symbol covers; control characters in the
/// spec (and the error quoting it) escaped.
fn describe_site(address: u64, semaphore: u64, args: &str, start_checked: bool) -> String {
    let semaphore = match semaphore {
        0 => "no semaphore".to_string(),
        address => format!("semaphore {address:#x}"),
    };
    let mut line = format!("{address:#x}  {semaphore}  {}", escape::controls(args));
    if let Err(e) = parse_spec(args) {
        line.push_str(&format!(
            "  (unreadable: {})",
            escape::controls(&e.to_string())
        ));
    }
    if !start_checked {
        line.push_str("  (in no function symbol: left out unless --allow-unverified-sites)");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_specs_print_without_control_characters() {
        let line = probe_line("/tmp/e\x1b]0;x\x07", "pro\x1b[2Jv", "na\rme\u{9b}");
        assert_eq!(line, r"usdt:/tmp/e\x1b]0;x\x07:pro\x1b[2Jv:na\rme\u{9b}");
        assert_eq!(
            probe_line("/usr/lib/libc.so.6", "libc", "setjmp"),
            "usdt:/usr/lib/libc.so.6:libc:setjmp"
        );
        let site = describe_site(0x10, 0, "8@%rdi \x1b[8m", true);
        assert!(!site.chars().any(char::is_control), "{site:?}");
        assert!(
            site.starts_with(r"0x10  no semaphore  8@%rdi \x1b[8m"),
            "{site}"
        );
    }
}
