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
