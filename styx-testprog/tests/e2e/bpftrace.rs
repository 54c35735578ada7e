//! The bpftrace one-liners in the README work against styx probes as written.

use crate::support::*;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// The lines of the README's ```sh bpftrace block.
fn readme_one_liners() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("reading README.md");
    let block = readme
        .split("```sh bpftrace\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README.md has a ```sh bpftrace block");
    block.lines().map(str::to_owned).collect()
}

/// The probe a one-liner attaches to: `usdt::styx:NAME`.
fn probe_of(line: &str) -> &str {
    let start = line.find("usdt::styx:").expect("a usdt::styx: probe") + "usdt::styx:".len();
    let rest = &line[start..];
    &rest[..rest
        .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .unwrap_or(rest.len())]
}

/// Runs one one-liner against a fresh styx-testprog firing 16 rounds and
/// returns what bpftrace printed. `streamed` is output the one-liner prints
/// as events arrive (maps print only at exit): it is awaited before SIGINT,
/// since bpftrace does not flush pending events when interrupted.
fn run_one_liner(line: &str, streamed: &[&str]) -> String {
    let mut prog = TestProg::spawn(None);
    let pid = prog.pid();
    let mut bpftrace = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {line}"))
        .env("PID", pid.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting bpftrace");
    let probe = probe_of(line).to_owned();
    let sites = sites_per_probe(pid)[&probe];
    // Ready once every site is attached (the kernel counts one semaphore
    // reference per site) and bpftrace waits in its event loop (every
    // program attached and enabled).
    eventually(&format!("bpftrace attached to every {probe} site"), || {
        assert!(
            bpftrace.try_wait().unwrap().is_none(),
            "bpftrace exited early"
        );
        semaphores(pid).get(&probe) == Some(&sites) && in_event_loop(bpftrace.id())
    });
    prog.fire(16, 1);
    let stdout = bpftrace.stdout.take().unwrap();
    let printed = Arc::new(Mutex::new(String::new()));
    let reader = {
        let printed = Arc::clone(&printed);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let line = line.expect("reading bpftrace output");
                let mut printed = printed.lock().unwrap();
                printed.push_str(&line);
                printed.push('\n');
            }
        })
    };
    eventually("bpftrace printed the streamed events", || {
        let printed = printed.lock().unwrap();
        streamed.iter().all(|s| printed.contains(s))
    });
    // Ask until it prints its maps and exits.
    let mut status = None;
    for attempt in 0..40 {
        // Again only while bpftrace still catches SIGINT: once it is on its
        // way out it may take the default action, and a second SIGINT would
        // kill it while it prints its maps (seen under load).
        if attempt == 0 || catches_sigint(bpftrace.id()) {
            // SAFETY: signalling a child we started.
            unsafe { libc::kill(bpftrace.id() as i32, libc::SIGINT) };
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
        status = bpftrace.try_wait().unwrap();
        if status.is_some() {
            break;
        }
    }
    let status = status.unwrap_or_else(|| panic!("bpftrace ignored SIGINT: {line}"));
    reader.join().unwrap();
    let out = printed.lock().unwrap().clone();
    let mut err = String::new();
    bpftrace
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{line}\n{status}\n{err}");
    prog.quit();
    out
}

#[test]
fn readme_bpftrace_one_liners_give_the_expected_results() {
    require_root();
    let lines = readme_one_liners();
    // What each line prints for 16 rounds of styx-testprog (see its source):
    let expected: [&[&str]; 3] = [
        // mem_write sizes cycle 1, 2, 4, 8: four times 15 bytes.
        &["@bytes_written: 60"],
        // a call (kind 1) at rounds 1 and 9, to pc + 0x100.
        &["@calls[4353]: 1", "@calls[4361]: 1"],
        &["round 0", "round 15"],
    ];
    assert_eq!(
        lines.len(),
        expected.len(),
        "README one-liners changed: {lines:?}"
    );
    for (line, wanted) in lines.iter().zip(expected) {
        let streamed: Vec<&str> = wanted
            .iter()
            .copied()
            .filter(|w| !w.starts_with('@'))
            .collect();
        let out = run_one_liner(line, &streamed);
        for w in wanted {
            assert!(out.contains(w), "{line}\nprinted:\n{out}\nexpected {w:?}");
        }
    }
}
