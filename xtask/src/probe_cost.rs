//! `cargo xtask probe-cost`: what a probe costs the traced program, measured
//! side by side in one run (the machine is noisy, so ratios, medians).
//!
//! - a mem_read probe in a tight loop: compiled out, detached, attached
//!   (styx-loader streaming every record to /dev/null);
//! - the 6502 demo: instructions/s compiled out, detached, attached to
//!   every event type.

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const ROUNDS: usize = 3;
const DETACHED_CALLS: u64 = 200_000_000;
const ATTACHED_CALLS: u64 = 2_000_000;

pub fn run(root: &Path) -> Result<()> {
    let bins = build(root)?;
    let mut off = Vec::new();
    let mut detached = Vec::new();
    let mut attached = Vec::new();
    let mut bpftrace = Vec::new();
    let (mut fired, mut received) = (0, 0);
    for _ in 0..ROUNDS {
        off.push(bench_detached(&bins.testprog_off)?);
        detached.push(bench_detached(&bins.testprog)?);
        bpftrace.push(bench_bpftrace_count(&bins.testprog)?);
        let run = bench_attached(&bins)?;
        attached.push(run.ns_per_call);
        fired += run.fired;
        received += run.received;
    }
    println!("\nmem_read probe, ns per call (median of {ROUNDS}, interleaved):");
    println!("  compiled out   {:>8.3}", median(&mut off));
    println!("  detached       {:>8.3}", median(&mut detached));
    println!(
        "  attached       {:>8.1}   (styx-loader streaming jsonl to /dev/null)",
        median(&mut attached)
    );
    println!(
        "  bpftrace       {:>8.1}   (count() only: the uprobe trap and a map update)",
        median(&mut bpftrace)
    );
    println!("  events received {received} of {fired} fired");

    let mut demo = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..ROUNDS {
        demo[0].push(demo_speed(&bins.demo_off, None)?);
        demo[1].push(demo_speed(&bins.demo, None)?);
        demo[2].push(demo_speed(&bins.demo, Some(&bins.loader))?);
    }
    let [off, detached, attached] = demo.map(|mut v| median(&mut v));
    println!("\n6502 demo, M instructions/s (median of {ROUNDS}):");
    println!("  compiled out   {off:>8.2}");
    println!(
        "  detached       {detached:>8.2}   ({:+.1}% vs compiled out)",
        (detached / off - 1.0) * 100.0
    );
    println!(
        "  attached, all  {attached:>8.2}   ({:.1}x slower)",
        off / attached
    );
    Ok(())
}

struct Binaries {
    testprog: PathBuf,
    testprog_off: PathBuf,
    demo: PathBuf,
    demo_off: PathBuf,
    loader: PathBuf,
}

fn build(root: &Path) -> Result<Binaries> {
    let cargo =
        |args: &[&str]| crate::run_checked(Command::new("cargo").args(args).current_dir(root));
    cargo(&[
        "build",
        "--release",
        "-p",
        "styx-testprog",
        "-p",
        "styx-demo",
        "-p",
        "styx-loader",
    ])?;
    cargo(&[
        "build",
        "--release",
        "-p",
        "styx-testprog",
        "-p",
        "styx-demo",
        "--features",
        "styx-testprog/probes-off,styx-demo/probes-off",
        "--target-dir",
        "target/probes-off",
    ])?;
    let on = root.join("target/release");
    let off = root.join("target/probes-off/release");
    Ok(Binaries {
        testprog: on.join("styx-testprog"),
        testprog_off: off.join("styx-testprog"),
        demo: on.join("styx-demo"),
        demo_off: off.join("styx-demo"),
        loader: on.join("styx-loader"),
    })
}

struct TestProg {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl TestProg {
    fn spawn(binary: &Path) -> Result<TestProg> {
        let mut child = Command::new(binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(TestProg {
            child,
            stdin,
            stdout,
        })
    }

    /// Sends a command and returns the `key=value` answer's fields.
    fn ask(&mut self, command: &str, key: &str) -> Result<f64> {
        writeln!(self.stdin, "{command}")?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{key}=")))
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {key} in {line:?}"))
    }

    fn quit(mut self) -> Result<()> {
        writeln!(self.stdin, "quit")?;
        self.child.wait()?;
        Ok(())
    }
}

fn bench_detached(binary: &Path) -> Result<f64> {
    let mut prog = TestProg::spawn(binary)?;
    let ns = prog.ask(&format!("bench {DETACHED_CALLS}"), "ns_per_call")?;
    prog.quit()?;
    Ok(ns)
}

/// ns per call with bpftrace counting the same probe: the floor any
/// uprobe-based tracer pays.
fn bench_bpftrace_count(binary: &Path) -> Result<f64> {
    let mut prog = TestProg::spawn(binary)?;
    let mut bpftrace = Command::new("bpftrace")
        .args(["-p", &prog.child.id().to_string(), "-e"])
        .arg("usdt::styx:mem_read { @events = count(); }")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting bpftrace")?;
    // Enabled once the probe's closure runs; then give bpftrace a moment to
    // reach the remaining sites.
    let mut tries = 0;
    while prog.ask("bench 1000", "evaluated")? == 0.0 {
        tries += 1;
        if tries > 300 {
            bail!("bpftrace did not attach within 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let ns = prog.ask(&format!("bench {ATTACHED_CALLS}"), "ns_per_call")?;
    // SAFETY: signalling a child we started.
    unsafe { libc::kill(bpftrace.id() as i32, libc::SIGINT) };
    bpftrace.wait()?;
    prog.quit()?;
    Ok(ns)
}

struct Attached {
    ns_per_call: f64,
    fired: u64,
    received: u64,
}

fn bench_attached(bins: &Binaries) -> Result<Attached> {
    let mut prog = TestProg::spawn(&bins.testprog)?;
    let pid = prog.child.id().to_string();
    let mut loader = Command::new(&bins.loader)
        .args([
            "--pid",
            &pid,
            "-e",
            "mem_read",
            "-o",
            "jsonl",
            "--output",
            "/dev/null",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .context("starting styx-loader")?;
    let mut stderr = BufReader::new(loader.stderr.take().expect("piped"));
    let mut line = String::new();
    while !line.contains("attached") {
        line.clear();
        if stderr.read_line(&mut line)? == 0 {
            bail!("styx-loader exited before attaching");
        }
    }
    let ns_per_call = prog.ask(&format!("bench {ATTACHED_CALLS}"), "ns_per_call")?;
    prog.quit()?;
    let mut summary = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut summary)?;
    loader.wait()?;
    let received = summary
        .lines()
        .find_map(|l| l.trim().strip_prefix("mem_read"))
        .and_then(|n| n.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no mem_read count in {summary:?}"))?;
    Ok(Attached {
        ns_per_call,
        fired: ATTACHED_CALLS,
        received,
    })
}

/// The demo's M instructions/s, optionally traced (every event type) from
/// its first instruction.
fn demo_speed(demo: &Path, loader: Option<&Path>) -> Result<f64> {
    let mut command = Command::new(demo);
    command
        .args(["--quiet", "--repeat"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = match loader {
        None => command.arg("400").spawn()?,
        Some(_) => command.args(["20", "--wait-for-tracer"]).spawn()?,
    };
    let tracer = match loader {
        Some(loader) => Some(
            Command::new(loader)
                .args([
                    "--pid",
                    &child.id().to_string(),
                    "-o",
                    "jsonl",
                    "--output",
                    "/dev/null",
                ])
                .stderr(Stdio::null())
                .spawn()
                .context("starting styx-loader")?,
        ),
        None => None,
    };
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().expect("piped"), &mut out)?;
    child.wait()?;
    if let Some(mut tracer) = tracer {
        tracer.wait()?;
    }
    out.split(": ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no speed in {out:?}"))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
