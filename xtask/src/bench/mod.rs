//! `cargo xtask bench [--quick]`: styx against the anchors, every case in
//! every round (this machine is noisy: rounds interleave the cases, and the
//! report gives medians with their spread), written to BENCHMARKS.md.
//!
//! - case 1, [`demo`]: the 6502 demo compiled out, detached, attached;
//! - cases 2, 3 and 5, [`stream`]: one event stream through styx (both
//!   probe-site encodings), bpftrace, an ipmpsc ring and ftrace's trace_marker;
//! - case 4, [`consumers`]: capture conversion rates.

mod consumers;
mod demo;
mod machine;
mod report;
mod stats;
mod stream;
mod tracer;

use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// How much to measure.
pub struct Plan {
    pub quick: bool,
    pub rounds: usize,
    /// Back-to-back compiled-out/detached demo runs per round.
    pub demo_pairs: usize,
    /// Demo repeats (all four programs) when not traced, and when traced.
    pub demo_repeat: u64,
    pub demo_repeat_traced_one: u64,
    pub demo_repeat_traced_all: u64,
    /// Events per attached or seed-approach run.
    pub stream_events: u64,
    /// Events per detached run (cheap, so many, for a stable figure).
    pub detached_events: u64,
    pub consumer_events: u64,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                quick,
                rounds: 3,
                demo_pairs: 2,
                demo_repeat: 150,
                demo_repeat_traced_one: 3,
                demo_repeat_traced_all: 1,
                stream_events: 200_000,
                detached_events: 20_000_000,
                consumer_events: 1_000_000,
            }
        } else {
            Plan {
                quick,
                rounds: 7,
                demo_pairs: 3,
                demo_repeat: 400,
                demo_repeat_traced_one: 20,
                demo_repeat_traced_all: 3,
                stream_events: 2_000_000,
                detached_events: 200_000_000,
                consumer_events: 10_000_000,
            }
        }
    }
}

/// The programs measured.
pub struct Binaries {
    pub loader: PathBuf,
    pub bench: PathBuf,
    pub demo: PathBuf,
    pub demo_off: PathBuf,
    pub consumers: PathBuf,
}

#[derive(Default)]
pub struct Results {
    pub demo: demo::Results,
    pub stream: stream::Results,
    pub consumers: consumers::Results,
}

pub fn run(root: &Path, quick: bool) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the benchmark attaches eBPF programs: run it as root (sudo cargo xtask bench)");
    }
    crate::setup::run(root)?;
    let bins = build(root)?;
    let plan = Plan::new(quick);
    let machine = machine::describe()?;
    let started = Instant::now();
    let mut results = Results::default();
    for round in 1..=plan.rounds {
        eprintln!("xtask bench: round {round} of {}", plan.rounds);
        demo::round(&bins, &plan, &mut results.demo)?;
        stream::round(&bins, &plan, &mut results.stream)?;
        consumers::round(&bins, &plan, &mut results.consumers)?;
    }
    let took = started.elapsed();
    let report = report::render(&machine, &plan, &results, took);
    println!("{report}");
    let path = root.join("BENCHMARKS.md");
    std::fs::write(&path, report)?;
    eprintln!(
        "xtask bench: {} rounds in {:.0} s; wrote {}",
        plan.rounds,
        took.as_secs_f64(),
        path.display()
    );
    Ok(())
}

fn build(root: &Path) -> Result<Binaries> {
    let cargo =
        |args: &[&str]| crate::run_checked(Command::new("cargo").args(args).current_dir(root));
    cargo(&["build", "--release", "-p", "styx-loader", "-p", "styx-demo"])?;
    cargo(&["build", "--release", "-p", "styx-bench"])?;
    cargo(&[
        "build",
        "--release",
        "-p",
        "styx-events",
        "--example",
        "bench-consumers",
    ])?;
    cargo(&[
        "build",
        "--release",
        "-p",
        "styx-demo",
        "--features",
        "styx-demo/probes-off",
        "--target-dir",
        "target/probes-off",
    ])?;
    let release = root.join("target/release");
    Ok(Binaries {
        loader: release.join("styx-loader"),
        bench: release.join("styx-bench"),
        demo: release.join("styx-demo"),
        demo_off: root.join("target/probes-off/release/styx-demo"),
        consumers: release.join("examples/bench-consumers"),
    })
}
