//! `cargo xtask fuzz [--seconds N] [TARGET…]`: runs the fuzz targets in
//! `fuzz/` (cargo-fuzz, libFuzzer, nightly) for N seconds each: the
//! argument-spec parser and compiler, the USDT note parser, batch records, heads and registries (the splitter and a stopping loader's registry walk), and the capture
//! reader feeding every output format (with batch records from anyone kept
//! whole by a raw capture and flight recorders, read back). Installs
//! cargo-fuzz if missing.
//!
//! Seeds: `fuzz/corpus/TARGET` (committed: specs, real captures, one with
//! a forged batch, forged batch records, and any input that once crashed) plus, for `notes`, ELF files built here from
//! the tests' C program with USDT probes. New inputs the fuzzer keeps go
//! to `fuzz/target/corpus/TARGET`; a crash is saved under `fuzz/artifacts/`
//! and fails the command.

use anyhow::{Context, Result};
use std::path::Path;
use std::process::Command;

/// Every target, in the order they run.
pub const TARGETS: [&str; 4] = ["argspec", "notes", "capture", "batch"];

pub fn run(root: &Path, seconds: u64, targets: &[String]) -> Result<()> {
    crate::setup::run(root)?;
    ensure_cargo_fuzz()?;
    let fuzz = root.join("fuzz");
    let built_seeds = fuzz.join("target/seeds/notes");
    std::fs::create_dir_all(&built_seeds)?;
    let source = root.join("styx-testprog/tests/c/usdt_forms.c");
    for opt in ["-O0", "-O2"] {
        let out = built_seeds.join(format!("usdt_forms{opt}"));
        crate::run_checked(Command::new("cc").args([opt, "-o"]).arg(&out).arg(&source))?;
    }
    let chosen: Vec<&str> = if targets.is_empty() {
        TARGETS.to_vec()
    } else {
        targets.iter().map(String::as_str).collect()
    };
    for target in chosen {
        anyhow::ensure!(
            TARGETS.contains(&target),
            "no fuzz target {target} (there are: {})",
            TARGETS.join(", ")
        );
        let work = fuzz.join("target/corpus").join(target);
        std::fs::create_dir_all(&work)?;
        let mut command = Command::new("cargo");
        command
            .args(["+nightly", "fuzz", "run", target])
            .arg(&work)
            .arg(fuzz.join("corpus").join(target));
        if target == "notes" {
            command.arg(&built_seeds);
        }
        command
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            // A parser of a few KiB of input has no business using more.
            .arg("-rss_limit_mb=1024")
            .arg("-malloc_limit_mb=512")
            .arg("-timeout=10")
            .current_dir(&fuzz);
        println!("xtask fuzz: {target} for {seconds} s");
        crate::run_checked(&mut command).with_context(|| {
            format!(
                "fuzz target {target} failed: the crashing input is under fuzz/artifacts/{target}/"
            )
        })?;
    }
    Ok(())
}

fn ensure_cargo_fuzz() -> Result<()> {
    let present = Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !present {
        println!("xtask fuzz: installing cargo-fuzz (once)");
        crate::run_checked(Command::new("cargo").args(["install", "--locked", "cargo-fuzz"]))?;
    }
    Ok(())
}
