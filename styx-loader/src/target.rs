//! The traced process: that it exists, its executable, and knowing when it exits.

use anyhow::{bail, Context, Result};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;

pub struct Target {
    pub pid: u32,
    /// `/proc/PID/exe`: names the running executable's inode even if the file
    /// was replaced or deleted since, and works across mount namespaces.
    pub exe_link: PathBuf,
    /// Where the executable lives, for messages.
    pub exe_name: String,
}

impl Target {
    pub fn from_pid(pid: u32) -> Result<Target> {
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        if pid == 0 || !proc_dir.exists() {
            bail!("no process with pid {pid}");
        }
        let exe_link = proc_dir.join("exe");
        let exe = std::fs::read_link(&exe_link).with_context(|| {
            format!(
                "cannot find the executable of pid {pid} (is it a kernel thread, or did it exit?)"
            )
        })?;
        Ok(Target {
            pid,
            exe_link,
            exe_name: exe.display().to_string(),
        })
    }

    /// A child styx-loader started, held before `exec`: its `/proc/PID/exe`
    /// is still styx-loader, so name the program it will run.
    pub fn spawned(pid: u32, program: &std::path::Path) -> Target {
        Target {
            pid,
            exe_link: program.to_path_buf(),
            exe_name: program.display().to_string(),
        }
    }

    /// A descriptor that becomes readable when the process exits.
    pub fn exit_fd(&self) -> Result<OwnedFd> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, self.pid as libc::pid_t, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("watching pid {} for exit", self.pid));
        }
        // SAFETY: a fresh fd owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }
}
