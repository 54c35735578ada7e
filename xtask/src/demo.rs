//! `cargo xtask demo`: the 6502 demo emulator, traced by styx-loader.

use anyhow::{Context, Result};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Events shown on the terminal: the ones a person can follow.
const SHOWN: &str = "interrupt,control,span_begin,span_end,marker";
const SHOWN_LINES: usize = 40;

pub fn run(root: &Path) -> Result<()> {
    crate::setup::require_root("demo")?;
    crate::run_checked(
        Command::new("cargo")
            .args(["build", "--release", "-p", "styx-loader", "-p", "styx-demo"])
            .current_dir(root),
    )?;
    let bin = root.join("target/release");
    let mut demo = KillOnDrop(
        Command::new(bin.join("styx-demo"))
            .args(["--forever", "--quiet"])
            .stdout(Stdio::null())
            .spawn()
            .context("starting styx-demo")?,
    );
    let pid = demo.0.id().to_string();
    let loader = bin.join("styx-loader");

    println!("\n== the first {SHOWN_LINES} {SHOWN} events of styx-demo (pid {pid}), as text ==");
    let mut shown = Command::new(&loader)
        .args(["--pid", &pid, "-e", SHOWN, "--duration", "5"])
        .stdout(Stdio::piped())
        .spawn()
        .context("starting styx-loader")?;
    let stdout = shown.stdout.take().expect("piped");
    for line in BufReader::new(stdout).lines().take(SHOWN_LINES) {
        println!("{}", line?);
    }
    // Closing the pipe ends the loader quietly, like `| head`.
    shown.wait()?;

    let trace = root.join("target/demo-trace.jsonl");
    println!(
        "\n== every event for 2 s, as JSON lines, into {} ==",
        trace.display()
    );
    crate::run_checked(Command::new(&loader).args([
        "--pid",
        &pid,
        "-o",
        "jsonl",
        "--duration",
        "2",
        "--output",
        trace.to_str().context("trace path is not UTF-8")?,
    ]))?;
    demo.0.kill()?;
    demo.0.wait()?;
    println!(
        "\nTry: jq -c 'select(.event == \"interrupt\")' {} | head",
        trace.display()
    );
    Ok(())
}

/// The demo must not outlive a failed run.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
