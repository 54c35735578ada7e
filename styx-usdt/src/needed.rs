//! The libraries a program will load: its `DT_NEEDED` entries and theirs,
//! found about as the dynamic loader finds them: the libraries `-- CMD`
//! attaches before the command runs (the ones a process really maps are
//! known only once it runs: the loader follows those), and where a
//! function lives that `--binary` did not find in the file it searched.
//!
//! Best effort, for a message: `DT_RUNPATH`/`DT_RPATH` (with `$ORIGIN`),
//! then the directories `/etc/ld.so.conf` names (and the files it
//! includes), then the default ones; at most [`MAX_LIBRARIES`] files, each
//! read as notes are (`file.rs`: regular files only, within a budget).

use crate::file::parse_file;
use object::read::elf::ElfFile64;
use object::{elf, Endianness};
use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

/// The most libraries looked at.
pub const MAX_LIBRARIES: usize = 64;

/// Where the dynamic loader looks when nothing else says.
const DEFAULT_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// The libraries `program` needs, directly or through other libraries,
/// nearest first, each once.
pub fn needed_libraries(program: &Path) -> Vec<PathBuf> {
    let configured = configured_dirs(Path::new("/etc/ld.so.conf"), 0);
    let mut found = Vec::new();
    let mut seen = HashSet::new();
    let mut queue = VecDeque::from([program.to_path_buf()]);
    while let Some(file) = queue.pop_front() {
        let Some((needed, run_paths)) = dynamic_entries(&file) else {
            continue;
        };
        let origin = file.parent().unwrap_or(Path::new("/"));
        let dirs: Vec<PathBuf> = run_paths
            .iter()
            .flat_map(|p| p.split(':'))
            .map(|dir| PathBuf::from(dir.replace("$ORIGIN", &origin.to_string_lossy())))
            .chain(configured.iter().cloned())
            .chain(DEFAULT_DIRS.iter().map(PathBuf::from))
            .collect();
        for name in needed {
            if !seen.insert(name.clone()) || found.len() >= MAX_LIBRARIES {
                continue;
            }
            let path = if name.contains('/') {
                Some(PathBuf::from(&name))
            } else {
                dirs.iter().map(|d| d.join(&name)).find(|p| p.is_file())
            };
            if let Some(path) = path {
                found.push(path.clone());
                queue.push_back(path);
            }
        }
    }
    found
}

/// A file's `DT_NEEDED` names and its `DT_RUNPATH`/`DT_RPATH` values.
fn dynamic_entries(path: &Path) -> Option<(Vec<String>, Vec<String>)> {
    parse_file(path, |data| {
        let elf = ElfFile64::<Endianness, _>::parse(data).ok()?;
        let table = elf.elf_dynamic_table().ok()?;
        let (mut needed, mut run_paths) = (Vec::new(), Vec::new());
        for entry in &table {
            let list = match entry.tag {
                elf::DT_NEEDED => &mut needed,
                elf::DT_RUNPATH | elf::DT_RPATH => &mut run_paths,
                _ => continue,
            };
            if let Ok(text) = table.string(entry) {
                list.push(String::from_utf8_lossy(text).into_owned());
            }
        }
        Some((needed, run_paths))
    })
    .ok()
    .flatten()
}

/// The directories an `ld.so.conf` file names, following its `include`s
/// (two levels deep at most).
fn configured_dirs(conf: &Path, depth: usize) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(conf) else {
        return Vec::new();
    };
    let mut dirs = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(pattern) = line.strip_prefix("include") {
            let pattern = Path::new("/etc").join(pattern.trim());
            let Ok(paths) = glob::glob(&pattern.to_string_lossy()) else {
                continue;
            };
            for included in paths.flatten().take(MAX_LIBRARIES) {
                if depth < 2 {
                    dirs.extend(configured_dirs(&included, depth + 1));
                }
            }
        } else if line.starts_with('/') {
            dirs.push(PathBuf::from(line));
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_test_binary_needs_libc() {
        let exe = std::env::current_exe().unwrap();
        let libraries = needed_libraries(&exe);
        assert!(
            libraries
                .iter()
                .any(|p| p.file_name().is_some_and(|n| n == "libc.so.6")),
            "{libraries:?}"
        );
    }
}
