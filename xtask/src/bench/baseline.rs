//! `--probe-baseline REV`: styx-rv's current source built against styx-probe
//! (and styx-common) as they were at git revision REV, so the same run
//! measures the realistic workload's detached cost before and after a
//! change to the probes; and REV's own styx-loader and styx-bench, so it
//! measures the event stream's batched cost before and after too.
//!
//! `target/bench/baseline-src/` becomes a workspace of its own: `probes/`
//! and `styx-common/` exported from REV with `git archive`, a copy of
//! today's `styx-rv/`, and today's root manifest and lock file (so the same
//! dependency versions and release profile) with those three as members.
//! REV's styx-probe manifest loses its `[dev-dependencies]`: they name
//! crates that are not exported, and building the library does not need them.
//!
//! `target/bench/baseline-tree/` is REV's whole tree, exported the same way
//! and built as it was (its own manifest and lock file): its styx-loader
//! embeds REV's committed eBPF object, so nothing else is built. That
//! loader also traces the baseline styx-rv, whose batch layout (REV's
//! styx-probe) today's loader may not know.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The baseline's builds, copied to `target/bench/`.
pub struct Baseline {
    /// What the user gave, and the commit it names.
    pub rev: String,
    pub commit: String,
    pub rv: PathBuf,
    pub rv_off: PathBuf,
    /// REV's own styx-loader and styx-bench.
    pub loader: PathBuf,
    pub bench: PathBuf,
}

/// The instruction length styx-rv gives `insn_exec!` (its third value),
/// which styx-probe before instruction lengths does not take: left out of
/// the copy when REV's catalogue has no `len` field. Detached, the value is
/// never computed, so the two builds differ only in what a tracer sees.
const INSN_WITH_LEN: &str = "styx_probe::insn_exec!(|| (pc, bus.peek_word(pc), 4u8));";
const INSN_WITHOUT_LEN: &str = "styx_probe::insn_exec!(|| (pc, bus.peek_word(pc)));";

fn without_insn_len(machine: &Path, commit: &str, root: &Path) -> Result<()> {
    let catalogue = git(
        root,
        &["show", &format!("{commit}:styx-common/src/event.rs")],
    )?;
    if catalogue.contains("len: Size") {
        return Ok(());
    }
    let source = std::fs::read_to_string(machine)?;
    if !source.contains(INSN_WITH_LEN) {
        bail!(
            "{} no longer has `{INSN_WITH_LEN}`: update xtask/src/bench/baseline.rs",
            machine.display()
        );
    }
    std::fs::write(machine, source.replace(INSN_WITH_LEN, INSN_WITHOUT_LEN))?;
    Ok(())
}

/// The crates taken from REV.
const FROM_REV: [&str; 2] = ["probes", "styx-common"];

pub fn build(root: &Path, rev: &str) -> Result<Baseline> {
    let commit = git(
        root,
        &["rev-parse", "--verify", &format!("{rev}^{{commit}}")],
    )
    .with_context(|| format!("--probe-baseline {rev:?} is not a commit of this repository"))?;
    let src = root.join("target/bench/baseline-src");
    if src.exists() {
        std::fs::remove_dir_all(&src).with_context(|| format!("removing {}", src.display()))?;
    }
    std::fs::create_dir_all(&src)?;
    export(root, &commit, &FROM_REV, &src)?;
    let probe_manifest = src.join("probes/Cargo.toml");
    let manifest = std::fs::read_to_string(&probe_manifest)?;
    std::fs::write(
        &probe_manifest,
        without_table(&manifest, "[dev-dependencies]"),
    )?;
    copy_dir(&root.join("styx-rv"), &src.join("styx-rv"))?;
    without_insn_len(&src.join("styx-rv/src/machine.rs"), &commit, root)?;
    let workspace = std::fs::read_to_string(root.join("Cargo.toml"))?;
    std::fs::write(src.join("Cargo.toml"), baseline_workspace(&workspace)?)?;
    std::fs::copy(root.join("Cargo.lock"), src.join("Cargo.lock"))?;

    let target = root.join("target/probe-baseline");
    let kept = root.join("target/bench");
    let mut built = Vec::new();
    for (features, name) in [
        (None, "styx-rv-baseline"),
        (Some("styx-rv/probes-off"), "styx-rv-baseline-probes-off"),
    ] {
        let mut cargo = Command::new("cargo");
        cargo.args(["build", "--release", "-p", "styx-rv", "--manifest-path"]);
        cargo
            .arg(src.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(&target);
        if let Some(features) = features {
            cargo.args(["--features", features]);
        }
        crate::run_checked(cargo.current_dir(&src))?;
        let to = kept.join(name);
        let _ = std::fs::remove_file(&to);
        std::fs::copy(target.join("release/styx-rv"), &to)
            .with_context(|| format!("copying the baseline build to {}", to.display()))?;
        built.push(to);
    }
    let rv_off = built.pop().expect("two builds");
    let rv = built.pop().expect("two builds");
    let (loader, bench) = build_tree(root, &commit)?;
    Ok(Baseline {
        rev: rev.to_string(),
        commit,
        rv,
        rv_off,
        loader,
        bench,
    })
}

/// REV's whole tree exported to `target/bench/baseline-tree/` and its
/// styx-loader and styx-bench built there, into a target directory of
/// their own; their paths in `target/bench/`.
fn build_tree(root: &Path, commit: &str) -> Result<(PathBuf, PathBuf)> {
    let tree = root.join("target/bench/baseline-tree");
    if tree.exists() {
        std::fs::remove_dir_all(&tree).with_context(|| format!("removing {}", tree.display()))?;
    }
    std::fs::create_dir_all(&tree)?;
    export(root, commit, &[], &tree)?;
    let target = root.join("target/baseline-tree");
    let mut cargo = Command::new("cargo");
    cargo
        .args([
            "build",
            "--release",
            "-p",
            "styx-loader",
            "-p",
            "styx-bench",
        ])
        .arg("--target-dir")
        .arg(&target);
    crate::run_checked(cargo.current_dir(&tree))?;
    let kept = root.join("target/bench");
    let keep = |name: &str| -> Result<PathBuf> {
        let to = kept.join(format!("{name}-baseline"));
        let _ = std::fs::remove_file(&to);
        std::fs::copy(target.join("release").join(name), &to)
            .with_context(|| format!("copying REV's {name} to {}", to.display()))?;
        Ok(to)
    };
    Ok((keep("styx-loader")?, keep("styx-bench")?))
}

fn git(root: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(root)
        .output()
        .context("running git")?;
    if !output.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// `git archive COMMIT PATHS | tar -x -C DIR` (no paths: the whole tree).
fn export(root: &Path, commit: &str, paths: &[&str], dir: &Path) -> Result<()> {
    let archive = Command::new("git")
        .args(["archive", "--format=tar", commit])
        .args(paths)
        .current_dir(root)
        .output()
        .context("running git archive")?;
    if !archive.status.success() {
        bail!(
            "git archive {commit} {}: {}",
            paths.join(" "),
            String::from_utf8_lossy(&archive.stderr).trim()
        );
    }
    let mut tar = Command::new("tar")
        .args(["-x", "-C"])
        .arg(dir)
        .stdin(Stdio::piped())
        .spawn()
        .context("running tar")?;
    tar.stdin
        .take()
        .expect("piped")
        .write_all(&archive.stdout)?;
    let status = tar.wait()?;
    anyhow::ensure!(
        status.success(),
        "tar could not unpack REV's files: {status}"
    );
    Ok(())
}

/// `manifest` without the table headed `header` (up to the next header).
fn without_table(manifest: &str, header: &str) -> String {
    let mut inside = false;
    let mut kept = String::new();
    for line in manifest.lines() {
        if line.starts_with('[') {
            inside = line.trim() == header;
        }
        if !inside {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

/// Today's root manifest with the baseline's members and nothing excluded.
fn baseline_workspace(root_manifest: &str) -> Result<String> {
    let mut manifest = String::new();
    let mut members = false;
    for line in root_manifest.lines() {
        let key = ["members", "exclude"]
            .into_iter()
            .find(|key| line.starts_with(key));
        if let Some(key) = key {
            anyhow::ensure!(
                line.trim_end().ends_with(']'),
                "the root Cargo.toml's `{key}` spans lines; the baseline needs it on one"
            );
        }
        let line = if key == Some("members") {
            members = true;
            r#"members = ["probes", "styx-common", "styx-rv"]"#
        } else if key == Some("exclude") {
            "exclude = []"
        } else {
            line
        };
        manifest.push_str(line);
        manifest.push('\n');
    }
    anyhow::ensure!(members, "the root Cargo.toml has no `members` to replace");
    Ok(manifest)
}

/// Copies `from` into `to` recursively (files and directories only).
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()))?;
        } else if kind.is_file() {
            std::fs::copy(&path, to.join(entry.file_name()))
                .with_context(|| format!("copying {}", path.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_workspace_has_its_own_members_and_no_dev_dependencies() {
        let probes =
            "[package]\nname = \"p\"\n\n[dev-dependencies]\na = 1\nb = 2\n\n[features]\nx = []\n";
        assert_eq!(
            without_table(probes, "[dev-dependencies]"),
            "[package]\nname = \"p\"\n\n[features]\nx = []\n"
        );
        let root = "[workspace]\nmembers = [\"a\", \"b\"]\nexclude = [\"c\"]\n[profile.release]\ndebug = 1\n";
        assert_eq!(
            baseline_workspace(root).unwrap(),
            "[workspace]\nmembers = [\"probes\", \"styx-common\", \"styx-rv\"]\nexclude = []\n[profile.release]\ndebug = 1\n"
        );
        assert!(baseline_workspace("[workspace]\nmembers = [\n  \"a\",\n]\n").is_err());
    }
}
