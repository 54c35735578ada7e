//! A running styx-loader, its stderr collected line by line.

use crate::{lines_of, JSON_SUMMARY_ENV};
use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long styx-loader may take to print a line waited for (attaching
/// loads eBPF programs: seconds on a busy machine).
const WAIT: Duration = Duration::from_secs(60);

/// How long [`Loader::finish_after`] pokes before giving up.
const EXIT: Duration = Duration::from_secs(30);

/// How long the rest of its stderr may take to arrive once it has exited.
const DRAIN: Duration = Duration::from_secs(10);

/// A running styx-loader whose stderr is collected line by line.
pub struct Loader {
    /// The process; its stdout is what [`Loader::spawn`] was given.
    pub child: Child,
    lines: Receiver<String>,
    /// Its stderr lines received so far.
    stderr: Vec<String>,
}

impl Loader {
    /// Starts `program` (a styx-loader) with `args`, its stdout going to
    /// `stdout`.
    pub fn spawn(
        program: &Path,
        args: impl IntoIterator<Item = impl AsRef<OsStr>>,
        stdout: Stdio,
    ) -> Result<Loader, Error> {
        let mut child = Command::new(program)
            .args(args)
            // Its summary as JSON too, for crate::Summary.
            .env(JSON_SUMMARY_ENV, "1")
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Spawn {
                program: program.to_path_buf(),
                source,
            })?;
        let lines = lines_of(child.stderr.take().expect("stderr is piped"));
        Ok(Loader {
            child,
            lines,
            stderr: Vec::new(),
        })
    }

    /// [`Loader::spawn`], then waits until it says it has attached.
    pub fn attach(
        program: &Path,
        args: impl IntoIterator<Item = impl AsRef<OsStr>>,
        stdout: Stdio,
    ) -> Result<Loader, Error> {
        let mut loader = Self::spawn(program, args, stdout)?;
        loader.wait_for_line("attached")?;
        Ok(loader)
    }

    /// Waits (up to 60 s) for a stderr line containing `needle` and
    /// returns it; the error carries everything it printed if it exits or
    /// stalls first.
    pub fn wait_for_line(&mut self, needle: &str) -> Result<String, Error> {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.stderr.push(line.clone());
                    if line.contains(needle) {
                        return Ok(line);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::Ended {
                        needle: needle.to_string(),
                        stderr: self.stderr.clone(),
                    })
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(Error::Silent {
                        needle: needle.to_string(),
                        stderr: self.stderr.clone(),
                    })
                }
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends it `signal`: SIGINT stops it as Ctrl-C does, SIGKILL without
    /// letting it clean up.
    ///
    /// Panics if kill(2) fails, as it can only once the process was waited for.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill with the pid of a child we started and a signal number.
        let rc = unsafe { libc::kill(self.pid() as i32, signal) };
        assert_eq!(
            rc,
            0,
            "kill({}, {signal}) failed: {}",
            self.pid(),
            io::Error::last_os_error()
        );
    }

    /// Waits for it to exit and returns its status and everything it
    /// printed on stderr.
    pub fn finish(mut self) -> (ExitStatus, Vec<String>) {
        let status = self.child.wait().expect("waiting for styx-loader");
        while let Ok(line) = self.lines.recv_timeout(DRAIN) {
            self.stderr.push(line);
        }
        (status, self.stderr)
    }

    /// Keeps calling `poke` (which should make the traced process fire)
    /// until it exits by itself (within 30 s), then [`Loader::finish`]es.
    pub fn finish_after<T>(
        mut self,
        mut poke: impl FnMut() -> T,
    ) -> Result<(ExitStatus, Vec<String>), Error> {
        let deadline = Instant::now() + EXIT;
        while self.child.try_wait().expect("try_wait").is_none() {
            if Instant::now() > deadline {
                return Err(Error::Running { waited: EXIT });
            }
            poke();
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(self.finish())
    }
}

/// What went wrong with a styx-loader.
pub enum Error {
    /// It could not be started.
    Spawn { program: PathBuf, source: io::Error },
    /// It ended before printing the line waited for; `stderr` is what it printed.
    Ended { needle: String, stderr: Vec<String> },
    /// It did not print the line waited for within 60 s.
    Silent { needle: String, stderr: Vec<String> },
    /// It did not exit by itself within `waited`.
    Running { waited: Duration },
    /// Its stderr has no end-of-run summary.
    NoSummary { stderr: Vec<String> },
    /// Its JSON summary does not read as one, or its text is missing.
    BadSummary { line: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Spawn { program, source } => {
                write!(f, "cannot start {}: {source}", program.display())
            }
            Error::Ended { needle, stderr } => write!(
                f,
                "styx-loader ended before printing {needle:?}; it said:\n{}",
                stderr.join("\n")
            ),
            Error::Silent { needle, stderr } => write!(
                f,
                "styx-loader printed no {needle:?} within {} s; it said:\n{}",
                WAIT.as_secs(),
                stderr.join("\n")
            ),
            Error::Running { waited } => write!(
                f,
                "styx-loader did not exit by itself within {} s",
                waited.as_secs()
            ),
            Error::NoSummary { stderr } => {
                write!(f, "no summary line from styx-loader in {stderr:?}")
            }
            Error::BadSummary { line } => write!(f, "cannot read styx-loader's summary {line:?}"),
        }
    }
}

/// As [`fmt::Display`], so that a failed `unwrap` says it readably.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Spawn { source, .. } => Some(source),
            _ => None,
        }
    }
}
