//! Case 9's exact figure: host instructions per guest instruction of each
//! styx-rv build, counted by callgrind. On this project's machines the
//! wall clock of a detached run moves by ~10% with where the linker puts
//! the step loop (two builds of one source, the same instructions at other
//! addresses, differed so); the count does not. Each build runs the guest
//! program 3 and 13 times; the difference over the difference in guest
//! instructions leaves start-up out. Without valgrind the figure is
//! missing, and the report says why.

use super::Binaries;
use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::Command;

/// Runs of the guest program, fewer and more.
pub const FEW: u64 = 3;
pub const MORE: u64 = 13;

/// Host instructions per guest instruction, compiled out and detached.
#[derive(Clone, Copy, Debug)]
pub struct Counts {
    pub compiled_out: f64,
    pub detached: f64,
}

impl Counts {
    /// The detached build's instructions over the compiled-out one's.
    pub fn detached_ratio(&self) -> f64 {
        self.detached / self.compiled_out
    }
}

/// This tree's builds and, with `--probe-baseline`, the baseline's.
#[derive(Debug)]
pub struct Exact {
    pub current: Counts,
    pub baseline: Option<Counts>,
}

/// Counts every styx-rv build; `Err` says why there is no figure.
pub fn measure(bins: &Binaries) -> Result<Exact, String> {
    let count = |off: &Path, on: &Path| -> Result<Counts> {
        Ok(Counts {
            compiled_out: per_guest_instruction(off)?,
            detached: per_guest_instruction(on)?,
        })
    };
    let run = || -> Result<Exact> {
        Ok(Exact {
            current: count(&bins.rv_off, &bins.rv)?,
            baseline: match &bins.baseline {
                Some(b) => Some(count(&b.rv_off, &b.rv)?),
                None => None,
            },
        })
    };
    run().map_err(|e| format!("{e:#}"))
}

fn per_guest_instruction(binary: &Path) -> Result<f64> {
    let (host_few, guest_few) = callgrind(binary, FEW)?;
    let (host_more, guest_more) = callgrind(binary, MORE)?;
    if guest_more <= guest_few || host_more <= host_few {
        bail!(
            "{}: no more instructions in {MORE} runs than in {FEW}",
            binary.display()
        );
    }
    Ok((host_more - host_few) as f64 / (guest_more - guest_few) as f64)
}

/// Host instructions (callgrind's total) and guest instructions (the
/// program's own count) of `repeat` runs.
fn callgrind(binary: &Path, repeat: u64) -> Result<(u64, u64)> {
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(binary)
        .args(["--quiet", "--repeat", &repeat.to_string()])
        .output()
        .context("running valgrind (apt-get install valgrind for this figure)")?;
    if !out.status.success() {
        bail!(
            "valgrind on {} failed: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok((host_instructions(&stderr)?, guest_instructions(&stdout)?))
}

/// `==123== Collected : 51500387`
fn host_instructions(stderr: &str) -> Result<u64> {
    stderr
        .lines()
        .find_map(|line| line.split_once("Collected :")?.1.trim().parse().ok())
        .context("no \"Collected\" line from callgrind")
}

/// `393747 instructions in 0.166 s: 2.37 M instructions/s`
fn guest_instructions(stdout: &str) -> Result<u64> {
    stdout
        .lines()
        .find_map(|line| line.split_once(" instructions in ")?.0.trim().parse().ok())
        .context("no \"N instructions in\" line from styx-rv")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_callgrind_and_styx_rv() {
        let stderr = "==5207== Events    : Ir\n==5207== Collected : 51501964\n==5207==\n";
        assert_eq!(host_instructions(stderr).unwrap(), 51_501_964);
        let stdout = "393747 instructions in 0.166 s: 2.37 M instructions/s\n";
        assert_eq!(guest_instructions(stdout).unwrap(), 393_747);
        assert!(host_instructions("nothing").is_err());
    }
}
