//! Where and when a benchmark ran, for its report.

use anyhow::Result;
use std::process::Command;

pub struct Machine {
    pub date: String,
    pub cpu: String,
    pub cpus: usize,
    pub memory_gib: f64,
    pub virtual_machine: bool,
    pub kernel: String,
    pub rustc: String,
    pub bpftrace: String,
}

pub fn describe() -> Result<Machine> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo")?;
    let field = |name: &str| {
        cpuinfo
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let memory_kib: f64 = std::fs::read_to_string("/proc/meminfo")?
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    Ok(Machine {
        date: output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        cpu: field("model name"),
        cpus: std::thread::available_parallelism()?.get(),
        memory_gib: memory_kib / (1024.0 * 1024.0),
        virtual_machine: field("flags").split_whitespace().any(|f| f == "hypervisor"),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")?
            .trim()
            .to_string(),
        rustc: output("rustc", &["--version"]),
        bpftrace: output("bpftrace", &["--version"]),
    })
}

/// A command's first line of output, or what went wrong.
fn output(program: &str, args: &[&str]) -> String {
    match Command::new(program).args(args).output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string(),
        Err(e) => format!("({program}: {e})"),
    }
}

/// What the CPUs did while the benchmark ran: this machine is shared, and
/// whatever else runs shows in the figures.
#[derive(Clone, Copy, Default)]
pub struct CpuUse {
    /// Seconds of all CPUs, busy (user, system, interrupts), and stolen by
    /// the hypervisor.
    pub busy: f64,
    pub steal: f64,
    /// Seconds used by the benchmark's own processes: xtask and every
    /// process it started and waited for (workloads, tracers, readers).
    pub ours: f64,
    /// Seconds of wall time.
    pub wall: f64,
}

impl CpuUse {
    /// The counters now (`wall` from `started`).
    pub fn now(started: std::time::Instant) -> CpuUse {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        // cpu user nice system idle iowait irq softirq steal …, in ticks.
        let ticks: Vec<f64> = stat
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .filter_map(|t| t.parse().ok())
            .collect();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let tick = |i: usize| ticks.get(i).copied().unwrap_or(0.0) / hz;
        CpuUse {
            busy: tick(0) + tick(1) + tick(2) + tick(5) + tick(6),
            steal: tick(7),
            ours: rusage(libc::RUSAGE_SELF) + rusage(libc::RUSAGE_CHILDREN),
            wall: started.elapsed().as_secs_f64(),
        }
    }

    /// From `self` to `later`.
    pub fn until(self, later: CpuUse) -> CpuUse {
        CpuUse {
            busy: later.busy - self.busy,
            steal: later.steal - self.steal,
            ours: later.ours - self.ours,
            wall: later.wall - self.wall,
        }
    }
}

fn rusage(who: libc::c_int) -> f64 {
    // SAFETY: getrusage fills one struct we own.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}
