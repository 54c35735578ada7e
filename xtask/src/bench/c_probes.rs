//! C emulators' probes (`styx_probe.h`, styx-probe-c) while nobody
//! traces: `styx-probe-c/bench/detached_loop.c`, a tight loop of one
//! `STYX_MEM_READ` an iteration as styx-bench's Rust loop fires
//! `mem_read!`, built with the probes compiled out (`STYX_PROBES_OFF`),
//! against the static library (the check: one load of the word and a
//! branch) and against the shared one (`STYX_PROBE_SHARED`: the word's
//! address first). The three run one after the other in each round, the
//! first rotating from round to round. Section 11 of the report.

use super::stats::Samples;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The loop built three ways, under `target/bench/c`.
pub struct Programs {
    off: PathBuf,
    with_static: PathBuf,
    with_shared: PathBuf,
}

/// Per round, ns per iteration of each build, and the detached builds'
/// over the compiled-out one's.
#[derive(Default)]
pub struct Results {
    pub off: Samples,
    pub with_static: Samples,
    pub with_shared: Samples,
    pub static_ratio: Samples,
    pub shared_ratio: Samples,
}

/// Builds the loop three ways (styx-probe-c built by the caller, release).
pub fn prepare(root: &Path) -> Result<Programs> {
    let dir = root.join("target/bench/c");
    std::fs::create_dir_all(&dir)?;
    let release = root.join("target/release");
    let include = root.join("styx-probe-c/include");
    let source = root.join("styx-probe-c/bench/detached_loop.c");
    let build = |name: &str, args: &[&str], libs: &[String]| -> Result<PathBuf> {
        let out = dir.join(name);
        crate::run_checked(
            Command::new("cc")
                .args(["-O2", "-Wall", "-Werror"])
                .args(args)
                .arg("-I")
                .arg(&include)
                .arg("-o")
                .arg(&out)
                .arg(&source)
                .args(libs),
        )?;
        Ok(out)
    };
    let lib_dir = release.display().to_string();
    let system = ["-lpthread", "-ldl", "-lm"].map(String::from);
    let static_lib = [
        vec![release.join("libstyx_probe_c.a").display().to_string()],
        system.to_vec(),
    ];
    let shared_lib = [
        vec![
            format!("-L{lib_dir}"),
            "-lstyx_probe_c".into(),
            format!("-Wl,-rpath,{lib_dir}"),
        ],
        system.to_vec(),
    ];
    Ok(Programs {
        off: build("detached_loop-probes-off", &["-DSTYX_PROBES_OFF"], &[])?,
        with_static: build("detached_loop-static", &[], &static_lib.concat())?,
        with_shared: build(
            "detached_loop-shared",
            &["-DSTYX_PROBE_SHARED"],
            &shared_lib.concat(),
        )?,
    })
}

/// One round: each build once, `iterations` each, the first rotating.
pub fn round(programs: &Programs, round: usize, iterations: u64, r: &mut Results) -> Result<()> {
    let builds = [&programs.off, &programs.with_static, &programs.with_shared];
    let mut ns = [0.0; 3];
    for k in 0..builds.len() {
        let which = (round + k) % builds.len();
        ns[which] = run(builds[which], iterations)?;
    }
    let [off, with_static, with_shared] = ns;
    r.off.push(off);
    r.with_static.push(with_static);
    r.with_shared.push(with_shared);
    r.static_ratio.push(with_static / off);
    r.shared_ratio.push(with_shared / off);
    Ok(())
}

/// ns per iteration of one run of `program`.
fn run(program: &Path, iterations: u64) -> Result<f64> {
    let output = Command::new(program)
        .arg(iterations.to_string())
        .output()
        .with_context(|| format!("running {}", program.display()))?;
    anyhow::ensure!(output.status.success(), "{} failed", program.display());
    let text = String::from_utf8_lossy(&output.stdout);
    text.split_whitespace()
        .find_map(|w| w.strip_prefix("ns_per_event="))
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("no ns_per_event in {}'s {text:?}", program.display()))
}
