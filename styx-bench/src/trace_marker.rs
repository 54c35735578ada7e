//! crosvm's approach: one `write` per event of a text line to ftrace's
//! `trace_marker`, in an ftrace instance of its own; another process reads
//! the instance's `trace_pipe`. ftrace overwrites its oldest events when the
//! reader falls behind: what the reader misses is the loss.

use crate::{cpu_seconds, event, finished, spawn_reader, Ran};
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TRACEFS: &str = "/sys/kernel/tracing";
/// Ring size across CPUs: styx-loader's default ring.
const RING_BYTES: u64 = 16 << 20;
/// The reader stops once nothing has arrived for this long after the writer finished.
const IDLE: Duration = Duration::from_millis(500);

pub fn run(n: u64) -> Result<Ran> {
    let dir = instance()?;
    let marker = OpenOptions::new()
        .write(true)
        .open(dir.join("trace_marker"))
        .context("opening trace_marker")?;
    let reader = spawn_reader(&[
        "read-trace-pipe",
        dir.to_str().expect("UTF-8 path"),
        &n.to_string(),
    ])?;
    // Let the reader open trace_pipe before the first write.
    std::thread::sleep(Duration::from_millis(100));
    let mut line = Vec::with_capacity(64);
    let started = Instant::now();
    for i in 0..n {
        let (pc, addr, val) = event(i);
        line.clear();
        write!(line, "mem_read pc={pc:#x} addr={addr:#x} val={val:#x}")?;
        // SAFETY: one write(2) of a buffer we own, as crosvm does per event.
        let written = unsafe { libc::write(marker.as_raw_fd(), line.as_ptr().cast(), line.len()) };
        if written < 0 {
            return Err(std::io::Error::last_os_error()).context("writing trace_marker");
        }
    }
    let ran = finished(n, started, reader);
    // An instance whose trace_marker is open is busy: it would stay.
    drop(marker);
    let _ = std::fs::remove_dir(&dir);
    ran
}

/// A fresh ftrace instance with tracing on and a ring of [`RING_BYTES`].
fn instance() -> Result<PathBuf> {
    let tracefs = Path::new(TRACEFS);
    if !tracefs.join("instances").exists() {
        let status = std::process::Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()?;
        anyhow::ensure!(status.success(), "cannot mount tracefs at {TRACEFS}");
    }
    remove_stale_instances(&tracefs.join("instances"));
    let dir = tracefs.join(format!("instances/styx-bench-{}", std::process::id()));
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let cpus = std::thread::available_parallelism()?.get() as u64;
    std::fs::write(
        dir.join("buffer_size_kb"),
        (RING_BYTES / 1024 / cpus).to_string(),
    )?;
    std::fs::write(dir.join("tracing_on"), "1")?;
    Ok(dir)
}

/// Removes the instances of styx-bench processes that are gone (one that
/// failed, or an older build that left its instance busy), whose names a
/// later process with the same pid would find taken.
fn remove_stale_instances(instances: &Path) {
    let Ok(entries) = std::fs::read_dir(instances) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix("styx-bench-"));
        if let Some(pid) = pid.filter(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir(instances.join(format!("styx-bench-{pid}")));
        }
    }
}

/// The reader process: counts the marker lines from `trace_pipe` until `n`
/// arrived or none came for [`IDLE`]; prints `received=N cpu_s=C`.
pub fn read(dir: &Path, n: u64) -> Result<()> {
    let pipe = File::open(dir.join("trace_pipe")).context("opening trace_pipe")?;
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(pipe.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(pipe.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let fd = pipe.as_raw_fd();
    let mut lines = BufReader::with_capacity(1 << 20, pipe);
    let mut received = 0u64;
    let mut line = Vec::new();
    let mut last = Instant::now();
    while received < n && last.elapsed() < IDLE {
        line.clear();
        match lines.read_until(b'\n', &mut line) {
            Ok(0) => wait_readable(fd),
            Ok(_) if line.ends_with(b"\n") => {
                received += u64::from(line.windows(8).any(|w| w == b"mem_read"));
                last = Instant::now();
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => wait_readable(fd),
            Err(e) => return Err(e).context("reading trace_pipe"),
        }
    }
    println!("received={received} cpu_s={:.4}", cpu_seconds());
    Ok(())
}

fn wait_readable(fd: i32) {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd we own.
    unsafe { libc::poll(&mut poll, 1, 50) };
}
