//! Installs what a fresh machine lacks, through `scripts/setup`.

use anyhow::{bail, Result};
use std::path::Path;
use std::process::Command;

const MANUAL_STEPS: &str = "\
  rustup toolchain install nightly --component rust-src
  # LLVM 22 development files, e.g. on Debian/Ubuntu: apt-get install llvm-22-dev
  PATH=/usr/lib/llvm-22/bin:$PATH cargo install bpf-linker --no-default-features --features llvm-22
  # and for the tests: bpftrace, qemu-user, gcc-aarch64-linux-gnu, and tracefs mounted on /sys/kernel/tracing";

/// Everything: the eBPF toolchain, bpftrace, qemu-user and a cross compiler
/// (styx-qemu's tests), tracefs.
pub fn run(root: &Path) -> Result<()> {
    if !is_root() {
        bail!("setup installs packages and must run as root: sudo -E env \"PATH=$PATH\" cargo xtask setup");
    }
    if !Path::new("/usr/bin/apt-get").exists() {
        bail!("this is not a Debian-like machine; install by hand:\n{MANUAL_STEPS}");
    }
    crate::run_checked(&mut Command::new(root.join("scripts/setup")))
}

/// The demo needs nothing installed (the loader embeds the committed eBPF
/// object and builds with stable Rust), only root to load it.
pub fn require_root(what: &str) -> Result<()> {
    if !is_root() {
        bail!("{what} loads eBPF programs and must run as root: sudo -E env \"PATH=$PATH\" cargo xtask {what}");
    }
    Ok(())
}

/// Just what building eBPF needs; installs it when it can, else says how.
pub fn ensure_ebpf_toolchain(root: &Path) -> Result<()> {
    if has_ebpf_toolchain() {
        return Ok(());
    }
    if is_root() && Path::new("/usr/bin/apt-get").exists() {
        return run(root);
    }
    bail!("building eBPF needs nightly Rust with rust-src and bpf-linker; install them:\n{MANUAL_STEPS}")
}

fn has_ebpf_toolchain() -> bool {
    let rust_src = Command::new("rustup")
        .args(["component", "list", "--toolchain", "nightly", "--installed"])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.starts_with("rust-src"))
        });
    let linker = Command::new("bpf-linker")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    rust_src && linker
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
