//! What ends streaming from outside the output: Ctrl-C, SIGTERM, the
//! traced process's exit, `--duration`; and the flight recorder's SIGUSR1,
//! which asks for a dump and goes on.

use super::report::Stop;
use anyhow::Result;
use std::os::fd::OwnedFd;
use styx_usdt::target::Target;
use tokio::io::unix::AsyncFd;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::{sleep_until, Instant};

pub struct Stoppers {
    sigint: Signal,
    sigterm: Signal,
    /// The flight recorder's "dump now".
    sigusr1: Option<Signal>,
    /// Becomes readable when the traced process exits.
    exit_fd: Option<AsyncFd<OwnedFd>>,
    deadline: Option<Instant>,
}

/// What woke the session.
pub enum Wake {
    Stop(Stop),
    DumpNow,
}

impl Stoppers {
    /// Takes the signals over; SIGUSR1 too with a flight recorder. Done
    /// before attaching: a Ctrl-C right after "attached" must stop tracing
    /// cleanly, not kill the loader.
    pub fn install(flight: bool) -> Result<Stoppers> {
        Ok(Stoppers {
            sigint: signal(SignalKind::interrupt())?,
            sigterm: signal(SignalKind::terminate())?,
            sigusr1: match flight {
                true => Some(signal(SignalKind::user_defined1())?),
                false => None,
            },
            exit_fd: None,
            deadline: None,
        })
    }

    /// Watches `target`'s process for its exit, where it has one.
    pub fn watch_exit(&mut self, target: &Target) -> Result<()> {
        if let Some(fd) = target.exit_fd()? {
            // SAFETY: the AsyncFd owns the OwnedFd, so the fd stays open and
            // the same for as long as it is registered.
            let fd = unsafe { AsyncFd::register(fd) }
                .map_err(|e| anyhow::anyhow!("watching {} for exit: {e}", target.name))?;
            self.exit_fd = Some(fd);
        }
        Ok(())
    }

    /// Stops `duration` from now, if given.
    pub fn stop_after(&mut self, duration: Option<std::time::Duration>) {
        self.deadline = duration.map(|d| Instant::now() + d);
    }

    /// Waits for the next of them. Cancel-safe: the session drops it at
    /// every tick.
    pub async fn next(&mut self) -> Wake {
        let (exit_fd, deadline) = (self.exit_fd.as_ref(), self.deadline);
        tokio::select! {
            _ = async { self.sigusr1.as_mut().expect("guarded").recv().await }, if self.sigusr1.is_some() => {
                Wake::DumpNow
            }
            _ = self.sigint.recv() => Wake::Stop(Stop::Interrupted),
            _ = self.sigterm.recv() => Wake::Stop(Stop::Terminated),
            _ = async { exit_fd.expect("guarded").readable().await }, if exit_fd.is_some() => {
                Wake::Stop(Stop::TargetExited)
            }
            _ = async { sleep_until(deadline.expect("guarded")).await }, if deadline.is_some() => {
                Wake::Stop(Stop::DurationReached)
            }
        }
    }
}
