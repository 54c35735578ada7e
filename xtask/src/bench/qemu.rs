//! `cargo xtask bench-qemu`: styx-qemu, the QEMU TCG plugin, on a
//! CPU-bound guest (`styx-qemu/bench/cpu_guest.c`, built static) under
//! qemu-x86_64: QEMU without the plugin against QEMU with the plugin
//! loaded and nobody tracing (the detached cost: no callback is
//! registered then), in alternating order round by round; the guest
//! traced with every event type API v1 gives (`--pid`, so that the guest
//! waits for room rather than lose events; a raw capture on /dev/null:
//! events/s), on fewer of its rounds; and QEMU's own log of every block
//! it runs (`-d nochain,exec`, to /dev/null: the log of a second is tens
//! of GB), the text logging styx replaces, on fewer still. Times
//! are the QEMU process's CPU time (user + system, from `wait4`), which
//! other work on the machine disturbs less than wall time; wall time is
//! given beside it. Section 10 of `cargo xtask bench`'s report; `cargo
//! xtask bench-qemu` runs it alone and prints that section.

use super::stats::Samples;
use anyhow::{ensure, Context, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use styx_testkit::{Loader, Summary};

/// The guest's rounds per run: about half a second under QEMU here.
pub const GUEST_ROUNDS: &str = "200";
/// Traced with every type: about 26 times slower.
pub const TRACED_ROUNDS: &str = "10";
/// QEMU's own block log: slower still.
pub const LOGGED_ROUNDS: &str = "2";

/// One run of QEMU: its CPU and wall seconds.
struct Run {
    cpu: f64,
    wall: f64,
}

/// What the QEMU case measures: per round, CPU seconds of the QEMU
/// process (and wall seconds where said).
#[derive(Default)]
pub struct Results {
    /// Without the plugin, [`GUEST_ROUNDS`] guest rounds.
    pub plain: Samples,
    pub plain_wall: Samples,
    /// With the plugin loaded and nobody tracing.
    pub detached: Samples,
    pub detached_wall: Samples,
    /// Detached over plain, per round.
    pub ratio: Samples,
    /// Traced with every type API v1 gives, [`TRACED_ROUNDS`] guest
    /// rounds, and its M events/s (wall).
    pub traced: Samples,
    pub rate: Samples,
    /// QEMU's own block log, [`LOGGED_ROUNDS`] guest rounds, and its M
    /// blocks logged/s (wall).
    pub logged: Samples,
    pub log_rate: Samples,
    /// Events lost over the traced runs.
    pub lost: u64,
}

impl Results {
    /// A run's slowdown per guest round against QEMU without the plugin.
    pub fn per_round_slowdown(&self, samples: &Samples, rounds: &str) -> f64 {
        let per_round = |samples: &Samples, rounds: &str| {
            samples.median() / rounds.parse::<f64>().expect("a number of rounds")
        };
        per_round(samples, rounds) / per_round(&self.plain, GUEST_ROUNDS)
    }
}

/// The programs the case runs, built and copied under `target/bench/qemu`.
pub struct Programs {
    guest: PathBuf,
    /// A copy of its own: `--binary` traces every process mapping the file.
    plugin: PathBuf,
}

/// Builds the guest and copies the plugin (built by the caller: `cargo
/// build --release -p styx-qemu`).
pub fn prepare(root: &Path) -> Result<Programs> {
    let dir = root.join("target/bench/qemu");
    std::fs::create_dir_all(&dir)?;
    let guest = dir.join("cpu_guest");
    crate::run_checked(
        Command::new("cc")
            .args(["-O2", "-static", "-o"])
            .arg(&guest)
            .arg(root.join("styx-qemu/bench/cpu_guest.c")),
    )?;
    let plugin = dir.join("libstyx_qemu.so");
    crate::run_checked(
        Command::new("cp")
            .arg(root.join("target/release/libstyx_qemu.so"))
            .arg(&plugin),
    )?;
    Ok(Programs { guest, plugin })
}

/// `cargo xtask bench-qemu`: the case alone, its figures printed as the
/// full benchmark's report gives them.
pub fn run(root: &Path, rounds: usize) -> Result<()> {
    crate::setup::require_root("bench-qemu")?;
    crate::run_checked(
        Command::new("cargo")
            .args(["build", "--release", "-p", "styx-qemu", "-p", "styx-loader"])
            .current_dir(root),
    )?;
    let programs = prepare(root)?;
    let loader = root.join("target/release/styx-loader");
    let mut results = Results::default();
    for round in 0..rounds {
        self::round(&loader, &programs, round, &mut results)?;
    }
    println!();
    let mut md = String::new();
    super::report::cases::qemu(&mut md, rounds, &results);
    println!("{md}");
    Ok(())
}

/// One round: without the plugin and with it detached, the first of the
/// two alternating with `round`'s parity (a machine warming up or slowing
/// down favours neither); traced; QEMU's own log.
pub fn round(loader: &Path, programs: &Programs, round: usize, r: &mut Results) -> Result<()> {
    let Programs { guest, plugin } = programs;
    let with_plugin = [OsString::from("-plugin"), plugin.clone().into()];
    let (without, with) = if round.is_multiple_of(2) {
        let without = qemu(guest, GUEST_ROUNDS, &[])?;
        (without, qemu(guest, GUEST_ROUNDS, &with_plugin)?)
    } else {
        let with = qemu(guest, GUEST_ROUNDS, &with_plugin)?;
        (qemu(guest, GUEST_ROUNDS, &[])?, with)
    };
    r.plain.push(without.cpu);
    r.detached.push(with.cpu);
    r.plain_wall.push(without.wall);
    r.detached_wall.push(with.wall);
    r.ratio.push(with.cpu / without.cpu);

    let (traced, summary) = traced_run(loader, guest, plugin)?;
    r.traced.push(traced.cpu);
    r.rate.push(summary.events as f64 / traced.wall / 1e6);
    r.lost += summary.dropped;

    let args = [
        OsString::from("-d"),
        "nochain,exec".into(),
        "-D".into(),
        "/dev/null".into(),
    ];
    let logged = qemu(guest, LOGGED_ROUNDS, &args)?;
    // One line a block run: as many as the traced run's blocks, per
    // guest round.
    let blocks = summary.events_of("block") as f64 * logged_per_traced();
    r.logged.push(logged.cpu);
    r.log_rate.push(blocks / logged.wall / 1e6);
    eprintln!(
        "qemu round {}: plain {:.3} s, plugin detached {:.3} s ({:.4}x), traced {:.3} s, QEMU's exec log {:.3} s",
        round + 1,
        without.cpu,
        with.cpu,
        with.cpu / without.cpu,
        traced.cpu,
        logged.cpu
    );
    Ok(())
}

/// Runs QEMU on the guest with `args` before it; its CPU and wall time.
fn qemu(guest: &Path, rounds: &str, args: &[OsString]) -> Result<Run> {
    let started = Instant::now();
    let child = Command::new("qemu-x86_64")
        .args(args)
        .arg(guest)
        .arg(rounds)
        .stdout(Stdio::null())
        .spawn()
        .context("running qemu-x86_64 (scripts/setup installs qemu-user)")?;
    let cpu = reap(child.id())?;
    Ok(Run {
        cpu,
        wall: started.elapsed().as_secs_f64(),
    })
}

/// Waits for child `pid` and returns its user + system CPU seconds.
fn reap(pid: u32) -> Result<f64> {
    let mut status = 0;
    // SAFETY: zeroed rusage is valid; wait4 fills it and the status.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let reaped = libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage);
        ensure!(
            reaped == pid as libc::pid_t,
            "wait4: {}",
            std::io::Error::last_os_error()
        );
        usage
    };
    ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "qemu-x86_64 failed: status {status:#x}"
    );
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(seconds(usage.ru_utime) + seconds(usage.ru_stime))
}

/// The share of the traced run's guest rounds that the logged run runs.
fn logged_per_traced() -> f64 {
    let rounds = |r: &str| r.parse::<f64>().expect("a number of rounds");
    rounds(LOGGED_ROUNDS) / rounds(TRACED_ROUNDS)
}

/// The guest under QEMU with the plugin, traced by styx-loader from its
/// start (`--pid` while it waits for a line; every event type, a raw
/// capture to /dev/null; the guest waits for room, losing nothing).
fn traced_run(loader: &Path, guest: &Path, plugin: &Path) -> Result<(Run, Summary)> {
    let mut child = Command::new("qemu-x86_64")
        .arg("-plugin")
        .arg(plugin)
        .arg(guest)
        .args([TRACED_ROUNDS, "wait"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("running qemu-x86_64 (scripts/setup installs qemu-user)")?;
    let pid = child.id().to_string();
    // `--pid` looks at what the process has mapped when it starts, and
    // the loader writes to the plugin's memory: wait until the guest
    // runs, so QEMU has loaded and installed the plugin.
    let mut said = String::new();
    // Kept open until QEMU exits: the guest prints its result at the end.
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("piped"));
    std::io::BufRead::read_line(&mut stdout, &mut said)?;
    ensure!(said.trim() == "waiting", "the guest said {said:?}");
    let mut tracer = Loader::spawn(
        loader,
        [
            "--pid",
            &pid,
            "-o",
            "raw",
            "--output",
            "/dev/null",
            // /dev/null is not a file on disk: ask for waiting.
            "--on-full",
            "wait",
            "--quiet",
        ],
        Stdio::null(),
    )?;
    tracer.wait_for_line("attached")?;
    let started = Instant::now();
    let mut stdin = child.stdin.take().expect("piped");
    std::io::Write::write_all(&mut stdin, b"go\n")?;
    drop(stdin);
    let cpu = reap(child.id())?;
    let wall = started.elapsed().as_secs_f64();
    drop(stdout);
    let (status, stderr) = tracer.finish();
    ensure!(status.success(), "styx-loader failed: {stderr:?}");
    let summary = Summary::find(&stderr)?;
    if summary.dropped > 0 {
        eprintln!("{}", stderr.join("\n"));
    }
    Ok((Run { cpu, wall }, summary))
}
