//! `styx-loader -- CMD`: traced from its first instruction, exits as CMD does.

use crate::support::*;
use std::io::Write;
use std::process::{Command, Stdio};

#[test]
fn spawned_command_is_traced_from_its_first_instruction() {
    require_root();
    let dir = scratch("spawn");
    let out = dir.join("traced.jsonl");
    let mut loader = Command::new(loader_path())
        .args(["-o", "jsonl", "-e", "marker,mem_read", "--output"])
        .arg(&out)
        .arg("--")
        .arg(testprog_path())
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command inherits the loader's stdin.
    writeln!(loader.stdin.take().unwrap(), "fire 4 1\nexit 3").unwrap();
    let output = loader.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(3),
        "the command's exit code: {stderr}"
    );

    let events = read_jsonl(&out);
    assert_eq!(events[0]["text"], "testprog start", "{events:?}");
    let mem_reads = events.iter().filter(|e| e["event"] == "mem_read").count();
    assert_eq!(mem_reads, 4, "{stderr}");
    assert!(stderr.contains("(process exited); 0 dropped"), "{stderr}");
}

#[test]
fn spawn_errors_are_one_clear_line() {
    require_root();
    for (command, says) in [
        (
            "/nonexistent/emulator",
            "no executable \"/nonexistent/emulator\"",
        ),
        ("true", "(/usr/bin/true) has no styx probes"),
    ] {
        let (status, _, stderr) = run_loader(&["--", command]);
        assert!(!status.success(), "{command}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains(says), "{command}: {stderr}");
    }
}

/// With lld, the first page of the writable data segment is also the RELRO
/// segment's last in the file: a semaphore there is raised in the wrong
/// mapping for processes started after attaching (the spawned test above
/// would see nothing). styx-probe starts `.probes` on a page of its own.
#[test]
fn semaphores_start_on_a_page_of_their_own() {
    use object::{Object, ObjectSection};
    for binary in [testprog_path(), demo_path()] {
        let data = std::fs::read(&binary).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let probes = elf.section_by_name(".probes").expect(".probes");
        assert_eq!(probes.address() % 4096, 0, "{}", binary.display());
    }
}

/// `--user nobody`: the command runs with nobody's uid, gid and groups (the
/// loader stays root), and is traced from its first instruction as before.
#[test]
fn spawned_command_runs_as_the_user_given() {
    use std::io::{BufRead, BufReader};
    require_root();
    let dir = scratch("spawn-user");
    let out = dir.join("traced.jsonl");
    let mut loader = Command::new(loader_path())
        .args(["--user", "nobody", "-o", "jsonl", "-e", "marker,mem_read"])
        .arg("--output")
        .arg(&out)
        .arg("--")
        .arg(testprog_path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = loader.stdin.take().unwrap();
    let mut stdout = BufReader::new(loader.stdout.take().unwrap());
    // The command's answer on the loader's stdout: it runs.
    writeln!(stdin, "fire 4 1").unwrap();
    let mut answer = String::new();
    stdout.read_line(&mut answer).unwrap();
    assert!(answer.starts_with("done calls="), "{answer:?}");

    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", loader.id())).unwrap();
    let child: u32 = children.split_whitespace().next().unwrap().parse().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{child}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {status}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(field("Name:"), "styx-testprog", "{status}");
    assert_eq!(
        field("Uid:"),
        "65534 65534 65534 65534",
        "real, effective, saved, fs"
    );
    assert_eq!(field("Gid:"), "65534 65534 65534 65534");
    assert_eq!(field("Groups:"), "65534", "root's groups are dropped");

    writeln!(stdin, "exit 3").unwrap();
    drop(stdin);
    let output = loader.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    let events = read_jsonl(&out);
    assert_eq!(events[0]["text"], "testprog start", "{events:?}");
    assert!(events.iter().all(|e| e["pid"] == child), "{events:?}");
    let mem_reads = events.iter().filter(|e| e["event"] == "mem_read").count();
    assert_eq!(mem_reads, 4, "{stderr}");
}
