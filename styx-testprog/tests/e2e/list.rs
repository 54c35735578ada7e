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

    // Everything: the event probes, and batched delivery's plumbing (the
    // flush probe and a batch-enable probe per batched type), which
    // bpftrace -l lists too.
    let (ok, stdout, _) = list(&[binary.to_str().unwrap()]);
    assert!(ok);
    let all = probes(&stdout);
    assert_eq!(
        all.iter().filter(|p| p.starts_with("styx:")).count(),
        styx_types(),
        "{stdout}"
    );
    // The flush site, the catalogue's batched types and styx-testprog's
    // own declared type (`testprog_tick`).
    assert_eq!(
        all.iter().filter(|p| p.starts_with("styx_batch:")).count(),
        1 + batched_types() + 1,
        "{stdout}"
    );
    // And the declared type's own site (`styx_testprog:testprog_tick`).
    assert_eq!(
        all.len(),
        styx_types() + 1 + batched_types() + 2,
        "{stdout}"
    );
    assert!(
        all.iter().any(|p| p == "styx_testprog:testprog_tick"),
        "{stdout}"
    );
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
    // An emulator's launcher script, named where its binary should be.
    let script = std::env::temp_dir().join(format!("styx-list-script-{}", std::process::id()));
    std::fs::write(&script, "#!/bin/sh\nexec ./emu \"$@\"\n").unwrap();
    for (args, says) in [
        (vec![readme], "is not a 64-bit ELF file"),
        (
            vec![script.to_str().unwrap()],
            "is not a 64-bit ELF file: it is a script (#!/bin/sh): name the program it runs",
        ),
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
    std::fs::remove_file(script).unwrap();
}

#[test]
fn the_demo_lists_its_guest_description() {
    let (ok, stdout, stderr) = list(&[demo_path().to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains(
            "\nguest: 6502, registers a x y sp p, image 6502-memory at 0x0 (65536 bytes)\n"
        ),
        "{stdout}"
    );
}

/// `fn:FILE:NAME` lines, then `    ADDRESS  N bytes  K returns…`.
fn functions(stdout: &str) -> Vec<(String, u64, usize)> {
    let lines: Vec<&str> = stdout.lines().collect();
    lines
        .windows(2)
        .filter_map(|pair| {
            let name = pair[0].strip_prefix("fn:")?.split_once(':')?.1;
            let mut words = pair[1].split_whitespace();
            let address = u64::from_str_radix(words.next()?.strip_prefix("0x")?, 16).ok()?;
            let returns = words.nth(2)?.parse().ok()?;
            Some((name.to_string(), address, returns))
        })
        .collect()
}

#[test]
fn functions_list_with_their_return_sites_as_objdump_reads_them() {
    let demo = demo_path();
    let (ok, stdout, stderr) = list(&[
        "--functions",
        "styx_demo::cpu::Cpu::",
        "--functions-exclude",
        "::new$",
        demo.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    let listed = functions(&stdout);
    let names: Vec<&str> = listed.iter().map(|(n, _, _)| n.as_str()).collect();
    assert!(
        names.contains(&"styx_demo::cpu::Cpu::run_frame"),
        "{stdout}"
    );
    assert!(!names.iter().any(|n| n.ends_with("::new")), "{stdout}");
    assert!(
        stdout
            .lines()
            .last()
            .unwrap()
            .starts_with(&format!("{} functions, ", listed.len())),
        "{stdout}"
    );
    // binutils' disassembler, independently: each function's `ret`s.
    for (name, address, returns) in &listed {
        let output = std::process::Command::new("objdump")
            .args(["-d", "--no-show-raw-insn"])
            .arg(format!("--start-address={address:#x}"))
            .arg(format!("--stop-address={:#x}", address + 1))
            .arg(&demo)
            .output()
            .unwrap();
        assert!(output.status.success());
        let text = String::from_utf8_lossy(&output.stdout);
        let symbol = text
            .lines()
            .find_map(|l| l.split_once(" <")?.1.strip_suffix(">:"))
            .unwrap_or_else(|| panic!("no symbol at {address:#x}: {text}"))
            .to_string();
        let body = std::process::Command::new("objdump")
            .args(["-d", "--no-show-raw-insn"])
            .arg(format!("--disassemble={symbol}"))
            .arg(&demo)
            .output()
            .unwrap();
        let rets = String::from_utf8_lossy(&body.stdout)
            .lines()
            .filter(|l| l.split('\t').nth(1).is_some_and(|i| i.trim() == "ret"))
            .count();
        assert_eq!(*returns, rets, "{name} ({symbol})");
    }
}

#[test]
fn more_than_five_thousand_functions_need_force() {
    let loader = loader_path();
    let (ok, _, stderr) = list(&["--functions", ".", loader.to_str().unwrap()]);
    assert!(!ok);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let count: usize = stderr
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(count > 5000 && stderr.contains("--force"), "{stderr}");
    let (ok, stdout, stderr) = list(&["--functions", ".", "--force", loader.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert_eq!(functions(&stdout).len(), count);
    let (ok, _, stderr) = list(&["--functions", "(", loader.to_str().unwrap()]);
    assert!(!ok && stderr.lines().count() == 1, "{stderr}");
}
