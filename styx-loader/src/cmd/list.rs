//! `styx-loader list`: the USDT probes of a file or a process, like
//! `bpftrace -l` and BCC's tplist, with each site's argument spec checked.

use crate::cli::ListArgs;
use crate::search::{declared_types, find_functions, guest_description, plural, Searched};
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use styx_events::escape;
use styx_usdt::argspec::parse_spec;
use styx_usdt::target::Target;

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
    let declared = declared_types(&target, &tables);
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
            if let Some(declared) = declared.get(&(i, provider.to_string(), name.to_string())) {
                writeln!(
                    out,
                    "    declared {}",
                    escape::controls(&declared.to_string())
                )?;
            }
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
