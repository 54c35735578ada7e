//! Function tracing's cost per traced call (entry and return), side by
//! side in each round: styx-bench's loop of calls to `styx_bench_call`
//! untraced, traced by `styx-loader --functions` (probes on its entry and
//! its `ret`; and with `--function-exits uretprobe`), and traced by
//! bpftrace counting `uprobe` + `uretprobe` hits; and untraced again after
//! all detached (nothing stays patched).

use super::stats::Samples;
use super::tracer::Workload;
use super::{Binaries, Plan};
use anyhow::{bail, ensure, Context, Result};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use styx_testkit::{lines_of, Loader, Summary};

/// The traced function (styx-bench, not mangled).
const FUNCTION: &str = "styx_bench_call";

#[derive(Default)]
pub struct Results {
    /// ns per call: before any tracer, after both detached.
    pub untraced: Samples,
    pub untraced_after: Samples,
    /// ns per call traced: returns probed at the `ret`, or by uretprobes.
    pub styx: Samples,
    pub styx_uretprobe: Samples,
    pub bpftrace: Samples,
    /// styx's ns per call over bpftrace's, per round (both ways).
    pub ratio: Samples,
    pub ratio_uretprobe: Samples,
    /// Calls made while styx traced, and the fn events it reported written
    /// and lost.
    pub calls: u64,
    pub written: u64,
    pub lost: u64,
}

pub fn round(bins: &Binaries, plan: &Plan, results: &mut Results) -> Result<()> {
    let n = plan.function_calls;
    let mut workload = Workload::spawn(&bins.bench)?;
    let untraced = workload.run("call", n)?.ns_per_event;

    let styx = styx_calls(bins, &mut workload, n, "ret", results)?;
    let styx_uretprobe = styx_calls(bins, &mut workload, n, "uretprobe", results)?;
    let bpftrace = bpftrace_calls(&bins.bench, &mut workload, n)?;
    let after = workload.run("call", n)?.ns_per_event;
    workload.quit()?;

    results.untraced.push(untraced);
    results.untraced_after.push(after);
    results.styx.push(styx);
    results.styx_uretprobe.push(styx_uretprobe);
    results.bpftrace.push(bpftrace);
    results.ratio.push(styx / bpftrace);
    results.ratio_uretprobe.push(styx_uretprobe / bpftrace);
    Ok(())
}

/// ns per call with styx-loader tracing the function, returns probed as
/// `exits` (`--function-exits`); what it wrote and lost is added up.
fn styx_calls(
    bins: &Binaries,
    workload: &mut Workload,
    n: u64,
    exits: &str,
    results: &mut Results,
) -> Result<f64> {
    let pid = workload.pid().to_string();
    let mut loader = Loader::spawn(
        &bins.loader,
        [
            "--pid",
            pid.as_str(),
            "--functions",
            "^styx_bench_call$",
            "--function-exits",
            exits,
            "-o",
            "raw",
            "--output",
            "/dev/null",
            "--quiet",
        ],
        Stdio::null(),
    )?;
    loader.wait_for_line("attached")?;
    let ns = workload.run("call", n)?.ns_per_event;
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    ensure!(status.success(), "styx-loader failed: {stderr:?}");
    let summary = Summary::find(&stderr)?;
    results.calls += n;
    results.written += summary.events_of("function");
    results.lost += summary.dropped;
    Ok(ns)
}

/// ns per call with bpftrace counting the function's `uprobe` and
/// `uretprobe` hits (checked against the calls made).
fn bpftrace_calls(binary: &std::path::Path, workload: &mut Workload, n: u64) -> Result<f64> {
    let bin = binary.display();
    let program = format!(
        "uprobe:{bin}:{FUNCTION} {{ @entries = count(); }} \
         uretprobe:{bin}:{FUNCTION} {{ @returns = count(); }} \
         usdt::styx:mem_write {{ @ready = count(); }}"
    );
    let mut child = Command::new("bpftrace")
        .args(["-p", &workload.pid().to_string(), "-e", &program])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting bpftrace")?;
    let stdout = lines_of(child.stdout.take().expect("piped"));
    let stderr = lines_of(child.stderr.take().expect("piped"));
    // Attached once the handshake probe (styx-bench's `ready`: mem_write)
    // counts; then a margin for the others.
    let deadline = Instant::now() + Duration::from_secs(60);
    while workload.run("ready", 1000)?.evaluated == 0 {
        if Instant::now() > deadline {
            bail!("bpftrace did not attach within 60 s");
        }
        if let Some(status) = child.try_wait()? {
            let said: Vec<String> = stderr.try_iter().collect();
            bail!("bpftrace exited: {status}: {said:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let ns = workload.run("call", n)?.ns_per_event;
    super::tracer::stop_bpftrace(&mut child, || workload.run("ready", 10).map(drop))?;
    let printed: Vec<String> = stdout.iter().collect();
    let count = |map: &str| -> Option<u64> {
        printed
            .iter()
            .find_map(|l| l.strip_prefix(&format!("@{map}: "))?.trim().parse().ok())
    };
    let (entries, returns) = (count("entries"), count("returns"));
    ensure!(
        entries == Some(n) && returns == Some(n),
        "bpftrace counted {entries:?} entries and {returns:?} returns of {n} calls: {printed:?}"
    );
    Ok(ns)
}
