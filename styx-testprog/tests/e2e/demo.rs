//! The 6502 demo traced for real: from its first instruction (spawned), and
//! attached mid-run, when it switches to its probed CPU at a frame boundary.

use crate::support::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The instruction count of the demo's per-program line (`sieve exit 0, N instructions, …`).
pub fn instructions_of(stdout: &str, program: &str) -> usize {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(program))
        .unwrap_or_else(|| panic!("no {program} line in {stdout:?}"));
    line.split(", ")
        .find_map(|part| part.trim().strip_suffix(" instructions")?.parse().ok())
        .unwrap_or_else(|| panic!("no instruction count in {line:?}"))
}

#[test]
fn the_demo_traced_from_its_start_reports_every_instruction() {
    require_root();
    let dir = scratch("demo-spawned");
    let out = dir.join("sieve.jsonl");
    let output = loader_command()
        .args([
            "-o",
            "jsonl",
            "-e",
            "insn_fetch,insn_exec,interrupt",
            "--output",
        ])
        .arg(&out)
        .arg("--")
        .arg(demo_path())
        .args(["--program", "sieve"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // Neither a note of discarded code attached to nor a semaphore the kernel raises in the wrong mapping.
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(stderr.contains("(process exited); 0 dropped"), "{stderr}");

    let instructions = instructions_of(&stdout, "sieve");
    let events = read_jsonl(&out);
    let count = |kind: &str| events.iter().filter(|e| e["event"] == kind).count();
    assert_eq!(count("insn_fetch"), instructions, "{stderr}");
    assert_eq!(count("insn_exec"), instructions, "{stderr}");
    // Every IRQ's entry and exit, in the thread's batch with its
    // instructions: the next instruction fetched after each is at its
    // `new_pc` (the handler, or where the handler returns to), unless
    // another interrupt came first (an IRQ taken right after an `RTI`).
    let irqs = irqs_of(&stdout, "sieve");
    let kind_count = |kind: &str| {
        (events.iter())
            .filter(|e| e["event"] == "interrupt" && e["kind"] == kind)
            .count() as u64
    };
    assert!(irqs > 0, "sieve takes timer IRQs: {stdout}");
    assert_eq!(kind_count("entry"), irqs, "{stdout}");
    assert_eq!(kind_count("exit"), irqs, "{stdout}");
    for (i, irq) in events.iter().enumerate() {
        if irq["event"] != "interrupt" {
            continue;
        }
        let next = (events[i + 1..].iter())
            .find(|e| e["event"] == "insn_fetch" || e["event"] == "interrupt");
        if let Some(fetch) = next.filter(|e| e["event"] == "insn_fetch") {
            assert_eq!(fetch["pc"], irq["new_pc"], "after event {i}, {irq}");
        }
    }
}

/// The IRQs the demo says `program` took.
fn irqs_of(stdout: &str, program: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(program))
        .unwrap_or_else(|| panic!("no {program} line in {stdout:?}"));
    line.split(", ")
        .find_map(|part| part.trim().strip_suffix(" IRQs")?.parse().ok())
        .unwrap_or_else(|| panic!("no IRQ count in {line:?}"))
}

#[test]
fn attaching_mid_run_switches_the_demo_to_its_probed_cpu_and_back() {
    require_root();
    let mut demo = Command::new(demo_path())
        .args(["--forever", "--program", "fib"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = demo.id().to_string();
    let dir = scratch("demo-attached");
    let out = dir.join("events.jsonl");
    let out_arg = out.to_str().unwrap();
    let loader = attach_loader(&[
        "--pid",
        &pid,
        "-o",
        "jsonl",
        "-e",
        "block",
        "--duration",
        "1",
        "--output",
        out_arg,
    ]);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    assert!(
        summary_of(&stderr).line.contains(" 0 dropped"),
        "{stderr:?}"
    );

    // Blocks seen, each one of fib's (its code is at $0A00-$0AFF).
    let blocks = read_jsonl(&out);
    assert!(blocks.len() > 100, "{} blocks: {stderr:?}", blocks.len());
    for block in &blocks {
        let pc = block["pc"].as_u64().unwrap();
        assert!((0x0a00..0x0b00).contains(&pc), "{block}");
    }
    // Detached again: the semaphores are down and the demo still runs.
    eventually("every semaphore is back to 0", || {
        semaphores(demo.id()).values().all(|&n| n == 0)
    });
    std::thread::sleep(Duration::from_millis(100));
    assert!(demo.try_wait().unwrap().is_none(), "the demo died");
    demo.kill().unwrap();
    demo.wait().unwrap();
    let mut first = String::new();
    BufReader::new(demo.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("fib"), "{first}");
}

/// `cargo xtask demo`'s recording (styx-testkit's `demo_recording`: a raw
/// capture with the loader's defaults) keeps every event: none of any
/// type is lost, and the capture holds as many of each type as the loader
/// counted. (Batched events waiting for a ring too small for them is
/// `lossless::`'s and `batched::`'s to test.)
#[test]
fn the_demos_recording_keeps_every_event() {
    require_root();
    let capture = scratch("demo-recording").join("demo.styx");
    let mut demo = Command::new(demo_path())
        .args(["--forever", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let args = styx_testkit::demo_recording(demo.id(), &capture, 0.5);
    let loader = Loader::attach(&loader_path(), args, Stdio::null()).unwrap();
    let (status, stderr) = loader.finish();
    demo.kill().unwrap();
    demo.wait().unwrap();
    assert!(status.success(), "{stderr:#?}");
    let summary = summary_of(&stderr);
    assert!(summary.loss.is_none(), "{stderr:#?}");
    for t in &summary.types {
        assert_eq!((t.lost, t.dropped), (0, 0), "{}: {stderr:#?}", t.name);
    }
    for name in ["insn_exec", "mem_read", "reg_write", "span_begin", "marker"] {
        assert!(summary.events_of(name) > 0, "{name}: {stderr:#?}");
    }
    // The capture holds what was counted, type by type.
    let (status, stdout, stderr) = run_loader(&[
        "read",
        capture.to_str().unwrap(),
        "--by",
        "event",
        "-o",
        "jsonl",
    ]);
    assert!(status.success(), "{stderr}");
    let rows = parse_jsonl(&stdout);
    for t in &summary.types {
        let row = rows
            .iter()
            .find(|r| r["event"] == t.name.as_str())
            .unwrap_or_else(|| panic!("{} in {stdout}", t.name));
        assert_eq!(row["count"], t.events, "{}: {stdout}", t.name);
    }
}
