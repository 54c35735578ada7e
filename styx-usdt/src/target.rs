//! What to trace: one process (its executable and the libraries it has
//! mapped), a child styx-loader spawned, or every process running a binary.

use crate::needed::needed_libraries;
use crate::note::{read_probe_table, NotesError, ProbeTable};
use log::{info, warn};
use std::collections::BTreeSet;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// An ELF file to find probes in and attach to.
#[derive(Clone, Debug)]
pub struct ElfFile {
    /// How to reach the file: for a process, through `/proc/PID/exe` or
    /// `/proc/PID/root`, which name the mapped inode even if the file was
    /// replaced since, and work across mount namespaces.
    pub read_at: PathBuf,
    /// Where the file lives, for messages.
    pub name: String,
    /// For a file a process has mapped: the start address and file offset
    /// of its first mapping, which give its load bias.
    pub mapped_at: Option<(u64, u64)>,
}

impl ElfFile {
    /// The file at `path`, not (yet) mapped by any process.
    pub fn at(path: &Path) -> ElfFile {
        ElfFile {
            read_at: path.to_path_buf(),
            name: path.display().to_string(),
            mapped_at: None,
        }
    }
}

/// Why a target cannot be traced.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// No process has that pid.
    #[error("no process with pid {0}")]
    NoProcess(u32),
    /// `/proc/PID/exe` may not be read (EACCES, EPERM): reading it needs
    /// the right to ptrace the process (`PTRACE_MODE_READ`), which a user
    /// lacks over another user's process, and root can lack too (a
    /// process of another user namespace, a security module).
    #[error("no permission to read the executable of pid {pid} ({hint})")]
    NoPermission {
        /// The process.
        pid: u32,
        /// What to do: run with sudo, or why root was refused.
        hint: &'static str,
    },
    /// `/proc/PID/exe` cannot be read for another reason than permission.
    #[error(
        "cannot find the executable of pid {pid} (is it a kernel thread, or did it exit?): {cause}"
    )]
    NoExecutable {
        /// The process.
        pid: u32,
        /// What reading the link said.
        cause: io::Error,
    },
    /// `/proc/PID/maps` cannot be read.
    #[error("reading /proc/{pid}/maps (tracing another user's process needs sudo): {cause}")]
    Maps {
        /// The process.
        pid: u32,
        /// What the read said.
        cause: io::Error,
    },
    /// The binary to trace system-wide cannot be used.
    #[error("cannot trace {path}: {reason}")]
    Binary {
        /// The path given.
        path: String,
        /// Why not.
        reason: String,
    },
    /// The executable's probe notes cannot be read.
    #[error("reading the probes of {target}: {cause}")]
    Notes {
        /// The target's name.
        target: String,
        /// Why.
        cause: NotesError,
    },
    /// pidfd_open failed.
    #[error("watching pid {pid} for exit: {cause}")]
    Watch {
        /// The process.
        pid: u32,
        /// What the call said.
        cause: io::Error,
    },
}

/// What to trace, and where its probes can be.
pub struct Target {
    /// The process to trace; None: every process that runs the files, also
    /// ones started later.
    pub pid: Option<u32>,
    /// Where to look for probes; the first is the executable, which must be
    /// readable; the others are the libraries the process has mapped.
    pub files: Vec<ElfFile>,
    /// "pid 123 (/usr/bin/emu)" or "every process running /usr/bin/emu".
    pub name: String,
    /// Whether the processes traced start after attaching (spawned, or
    /// system-wide), which some semaphore layouts break.
    pub new_processes: bool,
    /// With no `pid`: the process whose exit ends the session, the command
    /// that starts the ones running the files (`--binary EMU -- CMD`).
    pub ended_by: Option<u32>,
}

impl Target {
    /// A running process: its executable, then every other file it maps.
    pub fn from_pid(pid: u32) -> Result<Target, TargetError> {
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        if pid == 0 || !proc_dir.exists() {
            return Err(TargetError::NoProcess(pid));
        }
        let exe_link = proc_dir.join("exe");
        let exe = std::fs::read_link(&exe_link).map_err(|cause| match cause.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => TargetError::NoPermission {
                pid,
                // SAFETY: geteuid has no preconditions.
                hint: if unsafe { libc::geteuid() } == 0 {
                    "even root may not ptrace it here: another user namespace, or a \
                     security module says no"
                } else {
                    "another user's process: run it with sudo"
                },
            },
            _ => TargetError::NoExecutable { pid, cause },
        })?;
        let exe_name = exe.display().to_string();
        let mut files = mapped_files(pid)?;
        // The executable first, reached through /proc/PID/exe.
        let exe_at = files.iter().position(|f| f.name == exe_name);
        let mapped_at = exe_at.and_then(|i| files.remove(i).mapped_at);
        files.insert(
            0,
            ElfFile {
                read_at: exe_link,
                name: exe_name.clone(),
                mapped_at,
            },
        );
        Ok(Target {
            pid: Some(pid),
            files,
            name: format!("pid {pid} ({exe_name})"),
            new_processes: false,
            ended_by: None,
        })
    }

    /// A child styx-loader started, held before `exec`: its `/proc/PID/exe`
    /// is still styx-loader and no library is mapped yet, so the program
    /// it will run is known, and the libraries it links (`DT_NEEDED`,
    /// found as the dynamic loader would, near enough: see
    /// [`crate::needed`]), attached by path before it runs. One the
    /// dynamic loader finds elsewhere, or one it `dlopen`s, the loader
    /// follows once mapped.
    pub fn spawned(pid: u32, program: &Path) -> Target {
        let libraries = needed_libraries(program).into_iter();
        Target {
            pid: Some(pid),
            files: std::iter::once(ElfFile::at(program))
                .chain(libraries.map(|l| ElfFile::at(&l)))
                .collect(),
            name: format!("pid {pid} ({})", program.display()),
            new_processes: true,
            ended_by: None,
        }
    }

    /// One file, to list its probes.
    pub fn file(path: &Path) -> Target {
        Target {
            pid: None,
            files: vec![ElfFile::at(path)],
            name: path.display().to_string(),
            new_processes: false,
            ended_by: None,
        }
    }

    /// Every process that runs (or maps) the binary at `path`.
    pub fn binary(path: &Path) -> Result<Target, TargetError> {
        let fail = |reason: String| TargetError::Binary {
            path: path.display().to_string(),
            reason,
        };
        let path = std::fs::canonicalize(path).map_err(|e| fail(e.to_string()))?;
        if !path.is_file() {
            return Err(fail("not a regular file".into()));
        }
        Ok(Target {
            pid: None,
            name: format!("every process running {}", path.display()),
            files: vec![ElfFile::at(&path)],
            new_processes: true,
            ended_by: None,
        })
    }

    /// The same files, traced until process `pid` exits: the command that
    /// starts the processes running them (a script, `cargo run`, a test
    /// runner), whatever it runs meanwhile.
    pub fn until_exit_of(self, pid: u32) -> Target {
        Target {
            ended_by: Some(pid),
            ..self
        }
    }

    /// The probe table of each file that has one, with the file's index.
    /// The executable must be readable ELF; a mapped file that is not ELF
    /// (a font, a locale archive) has no probes; a library that cannot be
    /// read, or whose notes are malformed, gets a warning. So does every
    /// note that had to be skipped.
    pub fn probe_tables(&self) -> Result<Vec<(usize, ProbeTable)>, TargetError> {
        let mut tables = Vec::new();
        for (i, file) in self.files.iter().enumerate() {
            let table = match read_probe_table(&file.read_at) {
                Ok(table) => table,
                Err(cause) if i == 0 => {
                    return Err(TargetError::Notes {
                        target: self.name.clone(),
                        cause,
                    })
                }
                Err(NotesError::NotElf { .. }) => continue,
                Err(e) => {
                    warn!("skipping a library: {e}");
                    continue;
                }
            };
            for problem in &table.problems {
                warn!("{}: {problem}", file.name);
            }
            if table.outside_code > 0 {
                info!(
                    "{}: skipped {} probe notes outside executable code \
                     (left behind by code the linker discarded)",
                    file.name, table.outside_code
                );
            }
            if table.duplicates > 0 {
                info!(
                    "{}: ignored {} duplicate probe notes (same probe, address, \
                     semaphore and arguments as another)",
                    file.name, table.duplicates
                );
            }
            if let (Some(offset), true) = (table.shared_semaphore_page, self.new_processes) {
                warn!(
                    "{}: a semaphore (file offset {offset:#x}) shares its \
                     file page with another writable segment; in processes started after \
                     attaching, the kernel raises it in the wrong mapping and those probes stay \
                     off. Rebuild with a current styx-probe (it page-aligns `.probes`) or trace \
                     the running process with --pid",
                    file.name
                );
            }
            tables.push((i, table));
        }
        Ok(tables)
    }

    /// A descriptor that becomes readable when the process (or the command
    /// that ends the session) exits; None when tracing a binary system-wide
    /// until told to stop.
    pub fn exit_fd(&self) -> Result<Option<OwnedFd>, TargetError> {
        let Some(pid) = self.pid.or(self.ended_by) else {
            return Ok(None);
        };
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            return Err(TargetError::Watch {
                pid,
                cause: io::Error::last_os_error(),
            });
        }
        // SAFETY: a fresh fd owned by nobody else.
        Ok(Some(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }
}

/// The files in `/proc/PID/maps`, each once, with their first mapping.
fn mapped_files(pid: u32) -> Result<Vec<ElfFile>, TargetError> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map_err(|cause| TargetError::Maps { pid, cause })?;
    let mut seen = BTreeSet::new();
    let mut files = Vec::new();
    for line in maps.lines() {
        // start-end perms offset dev inode path; the path may contain spaces.
        let fields: Vec<&str> = line.splitn(6, ' ').collect();
        let [range, _, offset, _, _, path] = fields[..] else {
            continue;
        };
        let path = path.trim_start();
        if !path.starts_with('/') || path.ends_with(" (deleted)") || !seen.insert(path) {
            continue;
        }
        let start = range
            .split('-')
            .next()
            .and_then(|a| u64::from_str_radix(a, 16).ok());
        let offset = u64::from_str_radix(offset, 16).ok();
        files.push(ElfFile {
            read_at: PathBuf::from(format!("/proc/{pid}/root{path}")),
            name: path.to_owned(),
            mapped_at: start.zip(offset),
        });
    }
    Ok(files)
}
