//! `styx-loader list`: the USDT probes of a file or a process, like
//! `bpftrace -l` and BCC's tplist, with each site's argument spec checked.

use crate::cli::ListArgs;
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use styx_usdt::argspec::parse_spec;
use styx_usdt::note::ProbeSite;
use styx_usdt::target::Target;

/// Lists the probes `args` asks for.
pub fn run(args: &ListArgs) -> Result<()> {
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
    for (i, table) in target.probe_tables()? {
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
            writeln!(out, "usdt:{}:{provider}:{name}", file.name)?;
            for site in table
                .sites
                .iter()
                .filter(|s| s.provider == provider && s.name == name)
            {
                writeln!(out, "    {}", describe_site(site))?;
            }
        }
    }
    if listed == 0 {
        let names: Vec<&str> = target.files.iter().map(|f| f.name.as_str()).collect();
        bail!("no USDT probes match {pattern:?} in {}", names.join(", "));
    }
    Ok(())
}

/// `0x5a2f1  semaphore 0xcb8e0  8@%rdi 8@%rsi`, flagging specs styx cannot read.
fn describe_site(site: &ProbeSite) -> String {
    let semaphore = match site.semaphore {
        0 => "no semaphore".to_string(),
        address => format!("semaphore {address:#x}"),
    };
    let mut line = format!("{:#x}  {semaphore}  {}", site.address, site.args);
    if let Err(e) = parse_spec(&site.args) {
        line.push_str(&format!("  (unreadable: {e})"));
    }
    line
}
