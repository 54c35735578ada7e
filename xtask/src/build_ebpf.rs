//! Builds styx-ebpf and puts (or checks) the object the loader embeds.
//!
//! The object is committed so the loader builds with stable Rust alone; for
//! that to be honest, building the same source anywhere must give the same
//! bytes. Two things would make it depend on where the checkout lives:
//! absolute paths in debug info (the crate's `trim-paths` and
//! `-Zremap-cwd-prefix` remove them) and cargo's per-crate hashes, which
//! include the absolute path of path dependencies outside the eBPF crate's own
//! workspace (styx-common). So the build goes through a symlink at a fixed
//! path, and cargo sees the same paths on every machine.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the loader embeds the object from (relative to the workspace root).
pub const OBJECT: &str = "styx-loader/ebpf/styx.bpf.o";
const FIXED_ROOT: &str = "/tmp/styx-ebpf-src";

pub fn run(root: &Path, check: bool) -> Result<()> {
    let built = build(root)?;
    let committed = root.join(OBJECT);
    let new = std::fs::read(&built).with_context(|| format!("reading {}", built.display()))?;
    if check {
        let old = std::fs::read(&committed).unwrap_or_default();
        if old != new {
            bail!(
                "{OBJECT} is stale: it is not what styx-ebpf/ builds ({} vs {} bytes). Run `cargo xtask build-ebpf` and commit it",
                old.len(),
                new.len()
            );
        }
        println!("{OBJECT} matches its source ({} bytes)", new.len());
    } else {
        std::fs::create_dir_all(committed.parent().expect("has a parent"))?;
        std::fs::write(&committed, &new)
            .with_context(|| format!("writing {}", committed.display()))?;
        println!("wrote {OBJECT} ({} bytes)", new.len());
    }
    Ok(())
}

/// Builds the release object and returns its path.
fn build(root: &Path) -> Result<PathBuf> {
    let fixed = Path::new(FIXED_ROOT);
    point_symlink(fixed, root)?;
    let crate_dir = root.join("styx-ebpf");
    let mut cargo = Command::new("cargo");
    cargo
        .args(["build", "--release", "--manifest-path"])
        .arg(fixed.join("styx-ebpf/Cargo.toml"))
        // From here rustup picks the crate's nightly toolchain and cargo its
        // target, build-std and rustflags.
        .current_dir(&crate_dir);
    // The outer `cargo xtask` run must not leak its toolchain or target dir.
    for var in [
        "RUSTUP_TOOLCHAIN",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
    ] {
        cargo.env_remove(var);
    }
    crate::run_checked(&mut cargo).context("building styx-ebpf")?;
    Ok(crate_dir.join("target/bpfel-unknown-none/release/styx"))
}

/// Points `link` at `target`, replacing whatever was there atomically.
fn point_symlink(link: &Path, target: &Path) -> Result<()> {
    let temp = link.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    std::os::unix::fs::symlink(target, &temp)
        .with_context(|| format!("creating {}", temp.display()))?;
    std::fs::rename(&temp, link).with_context(|| format!("replacing {}", link.display()))
}
