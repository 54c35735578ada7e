//! `styx-loader list`: probes of files and processes, filtered by globs.

use crate::support::*;
use std::collections::BTreeSet;

fn list(args: &[&str]) -> (bool, String, String) {
    let mut full = vec!["list"];
    full.extend_from_slice(args);
    let (status, stdout, stderr) = run_loader(&full);
    (status.success(), stdout, stderr)
}

/// `usdt:FILE:PROVIDER:PROBE` header lines → `PROVIDER:PROBE`.
fn probes(stdout: &str) -> BTreeSet<String> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut parts = line.strip_prefix("usdt:")?.rsplitn(3, ':');
            let probe = parts.next()?;
            let provider = parts.next()?;
            Some(format!("{provider}:{probe}"))
        })
        .collect()
}

#[test]
fn lists_a_files_probes_filtered_by_a_glob() {
    let binary = testprog_path();
    let (ok, stdout, stderr) = list(&[binary.to_str().unwrap(), "styx:mem_*"]);
    assert!(ok, "{stderr}");
    assert_eq!(
        probes(&stdout),
        BTreeSet::from(["styx:mem_read".to_string(), "styx:mem_write".to_string()])
    );
    let table = styx_usdt::note::read_probe_table(&binary).unwrap();
    let mem_sites = table
        .sites
        .iter()
        .filter(|s| s.provider == "styx" && s.name.starts_with("mem_"))
        .count();
    let site_lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("    ")).collect();
    assert_eq!(site_lines.len(), mem_sites);
    for line in site_lines {
        assert!(
            line.contains("semaphore 0x") && line.ends_with("8@%rdi 8@%rsi 8@%rdx 8@%rcx"),
            "{line}"
        );
    }

    // Everything: the 13 event probes, and batched delivery's plumbing (the
    // flush probe and a batch-enable probe per batched type), which
    // bpftrace -l lists too.
    let (ok, stdout, _) = list(&[binary.to_str().unwrap()]);
    assert!(ok);
    let all = probes(&stdout);
    assert_eq!(
        all.iter().filter(|p| p.starts_with("styx:")).count(),
        13,
        "{stdout}"
    );
    assert_eq!(
        all.iter().filter(|p| p.starts_with("styx_batch:")).count(),
        1 + 8,
        "{stdout}"
    );
    assert_eq!(all.len(), 13 + 9, "{stdout}");
}

#[test]
fn lists_a_process_executable_and_libraries() {
    let prog = TestProg::spawn(None);
    let (ok, stdout, stderr) = list(&["--pid", &prog.pid().to_string(), "styx:marker"]);
    prog.quit();
    assert!(ok, "{stderr}");
    let header = stdout.lines().next().unwrap();
    assert!(
        header.starts_with("usdt:/") && header.ends_with("/styx-testprog:styx:marker"),
        "{header}"
    );
}

#[test]
fn reads_real_world_argument_specs() {
    // GCC's libstdc++ carries probes with register and dereference specs.
    let (ok, stdout, stderr) = list(&["/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "libstdcxx:*"]);
    assert!(ok, "{stderr}");
    assert!(probes(&stdout).contains("libstdcxx:throw"), "{stdout}");
    assert!(!stdout.contains("unreadable"), "{stdout}");
}

#[test]
fn bad_targets_are_one_clear_line() {
    let readme = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    for (args, says) in [
        (vec![readme], "is not a 64-bit ELF file"),
        (
            vec!["/nonexistent/binary"],
            "cannot read /nonexistent/binary",
        ),
        (vec!["/bin/true"], "no USDT probes match \"*\" in /bin/true"),
        (vec!["--pid", "4194304"], "no process with pid 4194304"),
        (
            vec![testprog_path().to_str().unwrap(), "[bad"],
            "is not a glob pattern",
        ),
    ] {
        let (ok, _, stderr) = list(&args);
        assert!(!ok, "{args:?}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains(says), "{args:?}: {stderr}");
    }
}
