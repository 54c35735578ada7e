//! `cargo xtask test`: what CI runs, and what a developer runs.

use anyhow::Result;
use std::path::Path;
use std::process::Command;

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    crate::setup::run(root)?;
    crate::build_ebpf::run(root, true)?;
    // The end-to-end tests run styx-loader, a binary of another package,
    // which `cargo test` alone does not build.
    crate::run_checked(
        Command::new("cargo")
            .args(["build", "--workspace", "--bins"])
            .current_dir(root),
    )?;
    crate::run_checked(
        Command::new("cargo")
            .args(["test", "--workspace"])
            .args(args)
            .current_dir(root),
    )
}
