//! `styx-loader -- CMD ARGS`: starts the command held just before `exec`, so
//! the probes can be attached before it runs its first instruction.
//!
//! This forks by hand (std's `Command::spawn` waits for the `exec`, which
//! here must wait for the attach) and so must run before the async runtime
//! starts any threads.

use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A forked child waiting to `exec` its command.
pub struct Held {
    pub pid: u32,
    /// The executable the child will run.
    pub program: PathBuf,
    go: OwnedFd,
}

/// Forks a child that will exec `command` once [`Held::release`] is called.
pub fn hold(command: &[String]) -> Result<Held> {
    let program = find_program(&command[0])?;
    let path = CString::new(program.as_os_str().as_bytes()).context("program path has a NUL")?;
    let args: Vec<CString> = command
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .context("an argument contains a NUL byte")?;
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());

    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("creating a pipe");
    }
    // SAFETY: fresh descriptors owned by nobody else.
    let (wait_end, go) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the process is single-threaded here; the child only calls
    // async-signal-safe functions (close, read, execv, _exit).
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()).context("fork"),
        0 => unsafe {
            libc::close(go.as_raw_fd());
            let mut byte = 0u8;
            // One byte means go; end of file means the loader gave up.
            if libc::read(wait_end.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) == 1 {
                libc::execv(path.as_ptr(), argv.as_ptr());
                libc::_exit(127);
            }
            libc::_exit(126)
        },
        pid => Ok(Held {
            pid: pid as u32,
            program,
            go,
        }),
    }
}

impl Held {
    /// Lets the child exec its command.
    pub fn release(self) -> Result<()> {
        // SAFETY: writes one byte from a local to our pipe end.
        let n = unsafe { libc::write(self.go.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        if n != 1 {
            return Err(std::io::Error::last_os_error()).context("releasing the command");
        }
        Ok(())
    }
}

/// Waits for the child and turns its end into an exit code, as a shell does.
pub fn wait_exit_code(pid: u32) -> Result<i32> {
    let mut status = 0;
    // SAFETY: waits for our own child.
    if unsafe { libc::waitpid(pid as i32, &mut status, 0) } < 0 {
        return Err(std::io::Error::last_os_error()).context("waiting for the command");
    }
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    })
}

/// The executable `name` names: a path, or a file found on PATH.
fn find_program(name: &str) -> Result<PathBuf> {
    let candidates: Vec<PathBuf> = if name.contains('/') {
        vec![PathBuf::from(name)]
    } else {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .collect()
    };
    for candidate in candidates {
        if is_executable(&candidate) {
            return candidate
                .canonicalize()
                .with_context(|| format!("resolving {}", candidate.display()));
        }
    }
    if name.contains('/') {
        bail!("no executable {name:?}");
    }
    bail!("no executable {name:?} on PATH")
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
