//! `cargo xtask test`: what CI runs, and what a developer runs.

use anyhow::Result;
use std::path::Path;
use std::process::Command;

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    crate::setup::run(root)?;
    crate::build_ebpf::run(root, true)?;
    kernel_free(root)?;
    // The end-to-end tests run styx-loader, a binary of another package,
    // and load styx-testlib, a shared library: `cargo test` alone builds
    // neither.
    crate::run_checked(
        Command::new("cargo")
            .args(["build", "--workspace", "--bins", "--lib"])
            .current_dir(root),
    )?;
    crate::run_checked(
        Command::new("cargo")
            .args(["test", "--workspace"])
            .args(args)
            .current_dir(root),
    )
}

/// The parsing side needs no kernel: styx-usdt, styx-events, and styx-loader
/// without its `trace` feature (`list`, `read`) build without aya or tokio.
fn kernel_free(root: &Path) -> Result<()> {
    // `check`, not `build`: a binary built without `trace` would replace
    // the one the end-to-end tests run.
    crate::run_checked(
        Command::new("cargo")
            .args(["check", "-p", "styx-loader", "--no-default-features"])
            .current_dir(root),
    )?;
    for args in [
        &["-p", "styx-usdt", "-p", "styx-events"][..],
        &["-p", "styx-loader", "--no-default-features"][..],
    ] {
        let output = Command::new("cargo")
            .args(["tree", "-e", "normal", "--prefix", "none"])
            .args(args)
            .current_dir(root)
            .output()?;
        anyhow::ensure!(output.status.success(), "cargo tree {args:?} failed");
        let tree = String::from_utf8_lossy(&output.stdout);
        let kernel: Vec<&str> = tree
            .lines()
            .filter(|l| l.starts_with("aya") || l.starts_with("tokio"))
            .collect();
        anyhow::ensure!(
            kernel.is_empty(),
            "{args:?} should build without aya or tokio, but depends on {kernel:?}"
        );
    }
    println!("xtask: styx-usdt, styx-events and `styx-loader --no-default-features` build without aya or tokio");
    Ok(())
}
