//! `cargo xtask bench [--quick]`: styx against the anchors, every case in
//! every round (this machine is noisy: rounds interleave the cases, and the
//! report gives medians with their spread), written to BENCHMARKS.md.
//!
//! - case 1, [`demo`]: the 6502 demo compiled out, detached, attached
//!   (batched and per-event delivery), and its raw capture's bytes per event;
//! - cases 2, 3 and 5, [`stream`]: one event stream through styx (batched
//!   and per-event delivery, to /dev/null and to a file, both probe-site
//!   encodings), bpftrace, an ipmpsc ring and ftrace's trace_marker; [`disk`]
//!   measures the disk the file captures go to;
//! - case 4, [`consumers`]: capture conversion rates;
//! - [`questions`]: filtered out, counted (`top`), flight-recorded, against
//!   streamed, in both delivery modes;
//! - [`functions`]: function tracing's cost per call, against bpftrace's
//!   `uprobe` + `uretprobe`;
//! - [`site`]: the instructions a detached probe runs, from the binary;
//! - case 9, [`workload`]: the realistic workload (styx-rv, a RISC-V
//!   interpreter probed the README's way) compiled out, detached, traced;
//!   with `--probe-baseline REV` also built against REV's probes
//!   ([`baseline`]), for the detached cost before and after; and REV's
//!   own styx-loader and styx-bench, for the stream's batched cost before
//!   and after (case 2);
//! - case 10, [`qemu`]: styx-qemu, the QEMU plugin, on a CPU-bound guest:
//!   QEMU without it, with it detached, traced, and QEMU's own block log;
//! - case 11, [`c_probes`]: `styx_probe.h`'s check in a C loop while
//!   nobody traces, against the probes compiled out.

mod baseline;
pub mod c_probes;
mod consumers;
mod demo;
mod disk;
mod exact;
#[cfg(test)]
mod example;
mod functions;
mod machine;
pub mod qemu;
mod questions;
mod report;
mod site;
mod stats;
mod stream;
mod tracer;
mod workload;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// How much to measure.
pub struct Plan {
    pub quick: bool,
    pub rounds: usize,
    /// Back-to-back compiled-out/detached demo runs per round.
    pub demo_pairs: usize,
    /// Demo repeats (all four programs) when not traced, and when traced
    /// (`insn_exec` only, all types) with per-event and batched delivery.
    pub demo_repeat: u64,
    pub demo_repeat_per_event_one: u64,
    pub demo_repeat_per_event_all: u64,
    pub demo_repeat_batched_one: u64,
    pub demo_repeat_batched_all: u64,
    /// Demo repeats in the one run captured to a file, for its size, its
    /// Perfetto trace and `read` in parallel: in a full run about what
    /// `cargo xtask demo` records (every event for a second, ~120 M events
    /// on the 2-CPU machine), the captures the targets are about; a
    /// parallel read's fixed cost (faulting its working set in) weighs
    /// more on a small one.
    pub demo_repeat_capture: u64,
    /// Events per per-event or seed-approach run.
    pub stream_events: u64,
    /// Events per batched run to /dev/null.
    pub batched_events: u64,
    /// Events per batched run that goes slower: to a file, or as JSON lines.
    pub batched_slow_events: u64,
    /// Events per detached run (cheap, so many, for a stable figure).
    pub detached_events: u64,
    pub consumer_events: u64,
    /// Calls per function-tracing run.
    pub function_calls: u64,
    /// Bytes written per round to measure the disk.
    pub disk_bytes: u64,
    /// styx-rv: sets of back-to-back untraced runs per round (one run of
    /// each build in a set), guest program runs per untraced run, and per
    /// batched run with `insn_exec` only and with every type.
    pub rv_sets: usize,
    pub rv_repeat: u64,
    pub rv_repeat_batched_one: u64,
    pub rv_repeat_batched_all: u64,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                quick,
                rounds: 3,
                demo_pairs: 2,
                demo_repeat: 150,
                demo_repeat_per_event_one: 3,
                demo_repeat_per_event_all: 1,
                demo_repeat_batched_one: 60,
                demo_repeat_batched_all: 20,
                demo_repeat_capture: 10,
                stream_events: 200_000,
                batched_events: 20_000_000,
                batched_slow_events: 5_000_000,
                detached_events: 20_000_000,
                consumer_events: 1_000_000,
                function_calls: 200_000,
                disk_bytes: 256 << 20,
                rv_sets: 2,
                rv_repeat: 150,
                rv_repeat_batched_one: 30,
                rv_repeat_batched_all: 15,
            }
        } else {
            Plan {
                quick,
                rounds: 7,
                demo_pairs: 3,
                demo_repeat: 400,
                demo_repeat_per_event_one: 20,
                demo_repeat_per_event_all: 3,
                demo_repeat_batched_one: 400,
                demo_repeat_batched_all: 100,
                demo_repeat_capture: 250,
                stream_events: 2_000_000,
                batched_events: 100_000_000,
                batched_slow_events: 50_000_000,
                detached_events: 200_000_000,
                consumer_events: 10_000_000,
                function_calls: 2_000_000,
                disk_bytes: 1 << 30,
                rv_sets: 4,
                rv_repeat: 400,
                rv_repeat_batched_one: 150,
                rv_repeat_batched_all: 60,
            }
        }
    }
}

/// The programs measured.
pub struct Binaries {
    pub loader: PathBuf,
    /// styx-bench (styx-probe's site) and styx-bench-nop5 (the 5-byte one).
    pub bench: PathBuf,
    pub bench_nop5: PathBuf,
    pub demo: PathBuf,
    pub demo_off: PathBuf,
    pub consumers: PathBuf,
    /// styx-rv, and with every probe compiled out.
    pub rv: PathBuf,
    pub rv_off: PathBuf,
    /// The QEMU case's guest and plugin.
    pub qemu: qemu::Programs,
    /// The C loop, built three ways.
    pub c: c_probes::Programs,
    /// `--probe-baseline REV`'s builds: styx-rv against REV's probes, and
    /// REV's own styx-loader and styx-bench.
    pub baseline: Option<baseline::Baseline>,
}

#[derive(Default)]
pub struct Results {
    pub demo: demo::Results,
    pub stream: stream::Results,
    pub consumers: consumers::Results,
    pub questions: questions::Results,
    pub functions: functions::Results,
    pub workload: workload::Results,
    pub qemu: qemu::Results,
    pub c: c_probes::Results,
    /// The detached probe in styx-bench's loop, from its disassembly.
    pub site: site::Detached,
    /// What the CPUs did meanwhile.
    pub cpu: machine::CpuUse,
    /// Where a batched event's time goes (None: no eBPF statistics).
    pub breakdown: Option<stream::Breakdown>,
}

/// `probe_baseline`: a git revision whose styx-probe the realistic workload
/// is also built against, for its detached cost before and after.
pub fn run(root: &Path, quick: bool, probe_baseline: Option<&str>) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the benchmark attaches eBPF programs: run it as root (sudo cargo xtask bench)");
    }
    crate::setup::run(root)?;
    let mut bins = build(root)?;
    if let Some(rev) = probe_baseline {
        bins.baseline = Some(baseline::build(root, rev)?);
    }
    let plan = Plan::new(quick);
    let machine = machine::describe()?;
    let started = Instant::now();
    let cpu_before = machine::CpuUse::now(started);
    let mut results = Results {
        site: site::detached(&bins)?,
        stream: stream::Results::new(bins.baseline.as_ref()),
        workload: workload::Results::new(bins.baseline.as_ref()),
        ..Results::default()
    };
    for round in 1..=plan.rounds {
        eprintln!("xtask bench: round {round} of {}", plan.rounds);
        demo::round(&bins, &plan, &mut results.demo)?;
        stream::round(&bins, &plan, &mut results.stream)?;
        consumers::round(&bins, &plan, &mut results.consumers)?;
        questions::round(&bins, &plan, &mut results.questions)?;
        functions::round(&bins, &plan, &mut results.functions)?;
        workload::round(&bins, &plan, &mut results.workload)?;
        qemu::round(&bins.loader, &bins.qemu, round - 1, &mut results.qemu)?;
        c_probes::round(&bins.c, round - 1, plan.detached_events, &mut results.c)?;
    }
    eprintln!("xtask bench: styx-rv's instructions counted exactly (callgrind)");
    results.workload.exact = Some(exact::measure(&bins));
    eprintln!("xtask bench: a batched run with the kernel's eBPF statistics on");
    results.breakdown = stream::breakdown(&bins, &plan)?;
    eprintln!("xtask bench: the demo traced at all types into a raw capture file");
    results.demo.capture = demo::capture(&bins, &plan)?;
    let took = started.elapsed();
    results.cpu = cpu_before.until(machine::CpuUse::now(started));
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

/// Builds the programs and copies them to `target/bench/`, so that a build
/// running meanwhile in the same tree cannot change what is measured.
fn build(root: &Path) -> Result<Binaries> {
    let cargo =
        |args: &[&str]| crate::run_checked(Command::new("cargo").args(args).current_dir(root));
    cargo(&[
        "build",
        "--release",
        "-p",
        "styx-loader",
        "-p",
        "styx-demo",
        "-p",
        "styx-rv",
        "-p",
        "styx-qemu",
        "-p",
        "styx-probe-c",
    ])?;
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
        "-p",
        "styx-rv",
        "--features",
        "styx-demo/probes-off,styx-rv/probes-off",
        "--target-dir",
        "target/probes-off",
    ])?;
    let release = root.join("target/release");
    let kept = root.join("target/bench");
    std::fs::create_dir_all(&kept)?;
    let keep = |from: PathBuf, name: &str| -> Result<PathBuf> {
        let to = kept.join(name);
        let _ = std::fs::remove_file(&to);
        std::fs::copy(&from, &to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
        Ok(to)
    };
    Ok(Binaries {
        loader: keep(release.join("styx-loader"), "styx-loader")?,
        bench: keep(release.join("styx-bench"), "styx-bench")?,
        bench_nop5: keep(release.join("styx-bench-nop5"), "styx-bench-nop5")?,
        demo: keep(release.join("styx-demo"), "styx-demo")?,
        demo_off: keep(
            root.join("target/probes-off/release/styx-demo"),
            "styx-demo-probes-off",
        )?,
        consumers: keep(release.join("examples/bench-consumers"), "bench-consumers")?,
        rv: keep(release.join("styx-rv"), "styx-rv")?,
        rv_off: keep(
            root.join("target/probes-off/release/styx-rv"),
            "styx-rv-probes-off",
        )?,
        qemu: qemu::prepare(root)?,
        c: c_probes::prepare(root)?,
        baseline: None,
    })
}
