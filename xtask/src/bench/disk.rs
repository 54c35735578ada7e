//! What writing a file costs on this machine, for the file captures of
//! case 2: the same bytes written the way styx-loader writes a capture
//! (256 KiB `write`s to the page cache), then `fsync`ed to the disk.

use super::stats::Samples;
use super::Plan;
use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// styx-loader's output piece (a capture's chunk, `styx-events/src/formats/raw/writer.rs`).
const PIECE: usize = 256 << 10;

#[derive(Default)]
pub struct Results {
    /// Where file captures go, and its file system (`/dev/vda ext4`).
    pub place: String,
    /// MB/s into the page cache (`write` returning).
    pub buffered_mb_s: Samples,
    /// CPU time of the writing thread per byte, in ns: the kernel's write path.
    pub cpu_ns_per_byte: Samples,
    /// MB/s to the disk: the writes and the `fsync` after them.
    pub synced_mb_s: Samples,
}

fn path() -> PathBuf {
    std::env::temp_dir().join("styx-bench-disk")
}

pub fn round(plan: &Plan, results: &mut Results) -> Result<()> {
    if results.place.is_empty() {
        results.place = place();
    }
    let path = path();
    let _ = std::fs::remove_file(&path);
    let mut file = std::fs::File::create(&path).with_context(|| format!("{}", path.display()))?;
    let piece = vec![0x5au8; PIECE];
    let pieces = (plan.disk_bytes as usize).div_ceil(PIECE);
    let bytes = (pieces * PIECE) as f64;
    let cpu_before = thread_cpu_seconds();
    let started = Instant::now();
    for _ in 0..pieces {
        file.write_all(&piece)?;
    }
    let buffered = started.elapsed().as_secs_f64();
    let cpu = thread_cpu_seconds() - cpu_before;
    file.sync_all()?;
    let synced = started.elapsed().as_secs_f64();
    drop(file);
    std::fs::remove_file(&path)?;
    sync();
    results.buffered_mb_s.push(bytes / buffered / 1e6);
    results.cpu_ns_per_byte.push(cpu * 1e9 / bytes);
    results.synced_mb_s.push(bytes / synced / 1e6);
    Ok(())
}

/// Writes back every dirty page, so that one run's file does not slow the next.
pub fn sync() {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
}

/// The temporary directory and the device and file system it is on.
fn place() -> String {
    let dir = std::env::temp_dir();
    let fs = std::process::Command::new("findmnt")
        .args(["-T"])
        .arg(&dir)
        .args(["-no", "SOURCE,FSTYPE"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "file system unknown".into());
    format!("`{}` ({fs})", dir.display())
}

/// This thread's CPU time (user + system), in seconds.
fn thread_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills one struct we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}
