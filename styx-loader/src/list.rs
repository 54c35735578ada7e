//! `styx-loader list`: the USDT probes of a file or a process, like
//! `bpftrace -l` and BCC's tplist, with each site's argument spec checked.

use crate::argspec::parse_spec;
use crate::cli::ListArgs;
use crate::stapsdt::{read_probe_table, ProbeSite};
use crate::target::Target;
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;

/// A file to read probes from: how to reach it, and how to name it.
struct ElfFile {
    read_at: PathBuf,
    name: String,
}

pub fn run(args: &ListArgs) -> Result<()> {
    let (files, pattern) = match (args.pid, args.args.as_slice()) {
        (Some(pid), [] | [_]) => (process_files(pid)?, args.args.first()),
        (None, [path, rest @ ..]) if rest.len() <= 1 => {
            let file = ElfFile {
                read_at: PathBuf::from(path),
                name: path.clone(),
            };
            (vec![file], rest.first())
        }
        (Some(_), _) => bail!("with --pid, give at most a PATTERN"),
        (None, _) => bail!("give an ELF file and at most a PATTERN, or --pid PID"),
    };
    let pattern = pattern.map_or("*", String::as_str);
    let glob = glob::Pattern::new(pattern)
        .with_context(|| format!("{pattern:?} is not a glob pattern"))?;

    let mut out = std::io::stdout().lock();
    let mut listed = 0;
    for (i, file) in files.iter().enumerate() {
        let table = match read_probe_table(&file.read_at) {
            Ok(table) => table,
            // The executable must be readable; a mapped library that is not
            // ELF (a font, a locale archive) simply has no probes.
            Err(e) if i == 0 => return Err(e.into()),
            Err(_) => continue,
        };
        for problem in &table.problems {
            eprintln!("styx-loader: warning: {}: {problem}", file.name);
        }
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
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
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

/// The process's executable, then every other ELF file it has mapped.
fn process_files(pid: u32) -> Result<Vec<ElfFile>> {
    let target = Target::from_pid(pid)?;
    let maps_path = format!("/proc/{pid}/maps");
    let maps = std::fs::read_to_string(&maps_path).with_context(|| {
        format!("reading {maps_path} (tracing another user's process needs sudo)")
    })?;
    let mut files = vec![ElfFile {
        read_at: target.exe_link,
        name: target.exe_name.clone(),
    }];
    let mut seen = BTreeSet::from([target.exe_name]);
    for line in maps.lines() {
        // The path is the sixth field; it may contain spaces.
        let Some(path) = line.splitn(6, ' ').nth(5).map(str::trim_start) else {
            continue;
        };
        if path.starts_with('/') && !path.ends_with(" (deleted)") && seen.insert(path.to_owned()) {
            files.push(ElfFile {
                // Through the process's root, so it works across mount namespaces.
                read_at: PathBuf::from(format!("/proc/{pid}/root{path}")),
                name: path.to_owned(),
            });
        }
    }
    Ok(files)
}
