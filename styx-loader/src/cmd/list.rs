//! `styx-loader list`: the USDT probes of a file or a process, like
//! `bpftrace -l` and BCC's tplist, with each site's argument spec checked.

use crate::cli::{FunctionArgs, ListArgs};
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use styx_events::escape;
use styx_events::guest::Guest;
use styx_usdt::argspec::parse_spec;
use styx_usdt::functions::{read_functions, FunctionTable, FunctionsError, Matcher};
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
                    describe_site(site.address, site.semaphore, &site.args)
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

/// The functions of `target`'s files that `select` takes, per file index;
/// an error if none, or more than [`MAX_FUNCTIONS`] without `--force`.
pub fn find_functions(
    target: &Target,
    select: &FunctionArgs,
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
            "no function of {} matches '{patterns}' (a function the compiler inlined \
             everywhere has no symbol, and cannot be traced)",
            escape::controls(&target.name)
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

/// `list --functions`: the functions tracing them would probe, per file.
fn list_functions(args: &ListArgs) -> Result<()> {
    let target = match (args.pid, args.args.as_slice()) {
        (Some(pid), []) => Target::from_pid(pid)?,
        (None, [path]) => Target::file(Path::new(path)),
        (Some(_), _) => bail!("with --pid and --functions, give no PATH or PATTERN"),
        (None, _) => bail!("give one ELF file, or --pid PID, to list its functions"),
    };
    let tables = find_functions(&target, &args.functions)?;
    let count: usize = tables.iter().map(|(_, t)| t.functions.len()).sum();
    let mut out = std::io::stdout().lock();
    let (mut returns, mut tail_calls, mut no_body) = (0, 0, 0);
    for (i, table) in &tables {
        let file = escape::controls(&target.files[*i].name);
        for f in &table.functions {
            writeln!(out, "fn:{file}:{}", escape::controls(&f.name))?;
            let tails = match f.tail_calls {
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
            tail_calls += f.tail_calls;
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
        "{}, {}{}{}",
        plural(count, "function"),
        plural(returns, "return site"),
        match tail_calls {
            0 => String::new(),
            n => format!(
                ", {} (a function left by a jump returns through its callee)",
                plural(n, "tail call")
            ),
        },
        match no_body {
            0 => String::new(),
            n => format!("; {} without a body", plural(n, "matching symbol")),
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
/// read; control characters in the spec (and the error quoting it) escaped.
fn describe_site(address: u64, semaphore: u64, args: &str) -> String {
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
        let site = describe_site(0x10, 0, "8@%rdi \x1b[8m");
        assert!(!site.chars().any(char::is_control), "{site:?}");
        assert!(
            site.starts_with(r"0x10  no semaphore  8@%rdi \x1b[8m"),
            "{site}"
        );
    }
}
