//! Lossless mode's flow control, the loader's side (the protocol is in
//! `styx_common::batch::FlushSemaphore`): the loader grants the emulator
//! credit for as many batches as half the ring holds beyond those it has
//! taken, rewriting the credit after every drain, and takes the credit
//! away as it stops. The emulator waits for credit before flushing, so the
//! ring never fills, however slow the output.
//!
//! One loader at a time has flow control of a process (two would overwrite
//! each other's credit, and the first to stop would turn it off for the
//! other): it holds an abstract Unix socket named after the process while
//! it does, which the kernel releases when the loader ends, however it
//! ends. A command the loader starts learns the loader's pid from the
//! environment ([`ChildClaim`]) and waits for its first credit before its
//! first flush: flow control holds from its first event.
//!
//! At each grant the loader also reads the emulator's count of flushes:
//! one that reached the credit last granted means the emulator waited (or
//! was about to) since; the end-of-run summary says for how long at most
//! (`styx_common::summary::Waited`), since a user who let the emulator
//! wait should learn how much it did, and what set the pace.

use super::flush_block::{self, remote, FlushSite};
use anyhow::{Context, Result};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::time::{Duration, Instant};
use styx_common::batch::{
    BATCH_RING_BYTES, CONTROLLED_OFFSET, CREDIT_OFFSET, CREDIT_OWNER_OFFSET, FLUSHED_OFFSET,
    LOSSLESS_LOADER_ENV,
};

/// How often a process is looked at again for flush blocks not found yet,
/// once some are (a library it maps later).
const LOOK_AGAIN: Duration = Duration::from_millis(100);

/// Another loader has flow control of the process.
#[derive(Debug)]
pub struct Taken {
    pid: u32,
    holder: String,
}

impl std::fmt::Display for Taken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} is already traced --on-full wait (--lossless) by {}: two waiting loaders \
             would undo each other's flow control",
            self.pid, self.holder
        )
    }
}

impl std::error::Error for Taken {}

/// Flow control of one process, once its flush blocks are found.
pub struct Flow {
    pid: u32,
    /// The process's pid as it sees itself (in its own pid namespace).
    own_pid: u32,
    /// Each flush site's block, once found; none until the process has
    /// mapped the site's file (a command started here has not, at first).
    blocks: Vec<Option<u64>>,
    /// Batches the emulator may have in flight: half the ring, in the
    /// largest batch records.
    window: u64,
    /// When to look for the blocks not found yet.
    next_look: Instant,
    /// The credit last granted, and when.
    granted: Option<(u64, Instant)>,
    /// The intervals between grants at whose end the emulator had used up
    /// its credit, added up.
    held: Duration,
    /// Held while this loader has flow control.
    _lock: UnixListener,
}

impl Flow {
    /// Flow control of `pid` with a ring of `ring_bytes`, through `sites`;
    /// refused when another loader has it.
    pub fn claim(pid: u32, ring_bytes: u32, sites: usize) -> Result<Flow> {
        let name = lock_name(pid)?;
        let address = SocketAddr::from_abstract_name(name.as_bytes())?;
        let lock = match UnixListener::bind_addr(&address) {
            Ok(lock) => lock,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                let holder = holder_of(&address).map_or_else(
                    || "another styx-loader".to_string(),
                    |p| format!("styx-loader pid {p}"),
                );
                return Err(Taken { pid, holder }.into());
            }
            Err(e) => return Err(e).context("taking lossless flow control"),
        };
        let record = BATCH_RING_BYTES as u64;
        Ok(Flow {
            pid,
            own_pid: own_pid(pid),
            blocks: vec![None; sites],
            window: (ring_bytes as u64 / 2 / record).max(1),
            next_look: Instant::now(),
            granted: None,
            held: Duration::ZERO,
            _lock: lock,
        })
    }

    /// One more flush site to find (a library mapped later): looked for
    /// at the next grant.
    pub fn add_site(&mut self) {
        self.blocks.push(None);
        self.next_look = Instant::now();
    }

    /// The process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Grants credit for `taken` batches (received or seen lost since the
    /// start) plus the window; first takes over the blocks found since the
    /// last look (their count of flushes back to 0, this loader their
    /// owner). An error only if the process's memory cannot be written once
    /// found.
    pub fn grant(&mut self, sites: &[FlushSite], taken: u64) -> Result<()> {
        let missing = self.blocks.iter().any(Option::is_none);
        if missing && Instant::now() >= self.next_look {
            self.look(sites, taken)?;
        }
        self.note_held();
        let credit = taken + self.window;
        self.granted = Some((credit, Instant::now()));
        for &block in self.blocks.iter().flatten() {
            remote::write(self.pid, block + CREDIT_OFFSET, &credit.to_le_bytes())
                .context("granting lossless flow control credit")?;
        }
        Ok(())
    }

    /// Adds the time since the last grant to [`Flow::held`] if the
    /// emulator has flushed as many batches as it was granted since (a
    /// block that cannot be read says nothing: `grant` finds out why).
    fn note_held(&mut self) {
        let Some((credit, at)) = self.granted else {
            return;
        };
        let used_up = self.blocks.iter().flatten().any(|&block| {
            let mut flushed = [0u8; 8];
            remote::read(self.pid, block + FLUSHED_OFFSET, &mut flushed)
                .is_ok_and(|()| u64::from_le_bytes(flushed) >= credit)
        });
        if used_up {
            self.held += at.elapsed();
        }
    }

    /// How long the emulator waited for credit, at most: the intervals
    /// between grants at whose end it had used its credit up.
    pub fn held(&self) -> Duration {
        self.held
    }

    /// Takes over the flush blocks of the files the process maps now. None
    /// found yet: looked for again at the next drain (a command started
    /// here may be half-way through `exec`, errors too); some: every
    /// [`LOOK_AGAIN`].
    fn look(&mut self, sites: &[FlushSite], taken: u64) -> Result<()> {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)).unwrap_or_default();
        for (site, block) in sites.iter().zip(&mut self.blocks) {
            if block.is_some() {
                continue;
            }
            let Ok(Some(at)) = flush_block::address(self.pid, &maps, site) else {
                continue;
            };
            let write = |offset: u64, bytes: &[u8]| {
                remote::write(self.pid, at + offset, bytes)
                    .context("starting lossless flow control")
            };
            write(FLUSHED_OFFSET, &0u64.to_le_bytes())?;
            write(CREDIT_OFFSET, &(taken + self.window).to_le_bytes())?;
            write(CONTROLLED_OFFSET, &self.own_pid.to_le_bytes())?;
            write(CREDIT_OWNER_OFFSET, &std::process::id().to_le_bytes())?;
            *block = Some(at);
        }
        if self.blocks.iter().any(Option::is_some) {
            self.next_look = Instant::now() + LOOK_AGAIN;
        }
        Ok(())
    }

    /// Gives flow control up: waiting threads go on (before detaching, so
    /// none waits for a loader that has gone).
    pub fn release(&mut self) {
        for block in std::mem::take(&mut self.blocks).into_iter().flatten() {
            // The process may have exited: nothing to release then.
            let _ = remote::write(self.pid, block + CREDIT_OWNER_OFFSET, &0u32.to_le_bytes());
        }
    }
}

/// The lock's name: the process's pid and start time (so that a pid used
/// again names another lock).
fn lock_name(pid: u32) -> Result<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name (in parentheses, which may hold
    // anything): the start time is the 20th.
    let started = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .with_context(|| format!("no start time in /proc/{pid}/stat"))?;
    Ok(format!("styx-loader/lossless/{pid}/{started}"))
}

/// The pid of the loader holding the lock at `address`, as the kernel
/// recorded it.
fn holder_of(address: &SocketAddr) -> Option<u32> {
    let stream = UnixStream::connect_addr(address).ok()?;
    let cred = getsockopt(&stream, PeerCredentials).ok()?;
    (cred.pid() > 0).then_some(cred.pid() as u32)
}

/// Process `pid`'s own idea of its pid: the last of `NSpid` in its status
/// (the innermost pid namespace), or `pid` on a kernel without it.
fn own_pid(pid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
            line.split_whitespace().last()?.parse().ok()
        })
        .unwrap_or(pid)
}

/// While a command with lossless mode is forked, the loader's pid in the
/// environment it inherits (`styx_common::batch::LOSSLESS_LOADER_ENV`):
/// its styx-probe takes flow control at its first event, before the loader
/// could have found it. Removed from the loader's own environment again
/// when dropped. Set only while the loader is single-threaded (before the
/// async runtime starts), as the environment must be.
pub struct ChildClaim(bool);

impl ChildClaim {
    /// Sets the variable if `lossless`.
    pub fn set(lossless: bool) -> ChildClaim {
        if lossless {
            std::env::set_var(LOSSLESS_LOADER_ENV, std::process::id().to_string());
        }
        ChildClaim(lossless)
    }
}

impl Drop for ChildClaim {
    fn drop(&mut self) {
        if self.0 {
            std::env::remove_var(LOSSLESS_LOADER_ENV);
        }
    }
}
