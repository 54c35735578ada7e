//! The realistic workload, styx-rv (a RISC-V interpreter from crates.io
//! with a probe at every instruction, access, register write and taken
//! branch), traced from its first instruction: every event type arrives
//! exactly as many times as the emulator itself counted, in both delivery
//! modes, and the first events and the stored answers have their exact values.

use crate::support::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use styx_rv::bus::HALT_PORT;
use styx_rv::guest::{self, Answers, RESULT_CHECKSUM, RESULT_PRIMES, STACK_TOP};
use styx_rv::registers::{RA, SP};

/// The styx-rv binary.
fn rv_path() -> PathBuf {
    beside_testprog("styx-rv", "styx-rv")
}

/// The event types the workload fires, by the names styx gives them, and the
/// counts line's names for them.
const TYPES: [(&str, &str); 5] = [
    ("insn_exec", "instructions"),
    ("mem_read", "mem_read"),
    ("mem_write", "mem_write"),
    ("reg_write", "reg_write"),
    ("branch", "branch"),
];

/// The emulator's own counts from its `counts: instructions N, mem_read N, …`
/// line, by event type.
fn counts_in(stdout: &str) -> BTreeMap<&'static str, u64> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("counts: "))
        .unwrap_or_else(|| panic!("no counts line in {stdout:?}"));
    let said: BTreeMap<&str, u64> = line
        .split(", ")
        .map(|part| {
            let (name, n) = part.split_once(' ').expect("NAME N");
            (name, n.parse().expect("a count"))
        })
        .collect();
    TYPES
        .iter()
        .map(|(kind, name)| (*kind, said[name]))
        .collect()
}

/// styx-rv's own counts for `repeat` untraced runs of its counting machine.
fn own_counts(repeat: u32) -> BTreeMap<&'static str, u64> {
    let output = Command::new(rv_path())
        .args(["--count", "--quiet", "--repeat", &repeat.to_string()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    counts_in(&String::from_utf8_lossy(&output.stdout))
}

/// Traces `styx-rv ARGS` from its first instruction into a raw capture with
/// `delivery`; returns its stdout and the capture converted to JSON lines
/// (converted afterwards, so writing JSON cannot slow the loader into drops).
fn traced(name: &str, delivery: &str, rv_args: &[&str]) -> (String, PathBuf) {
    let dir = scratch(name);
    let capture = dir.join("rv.styx");
    let output = loader_command()
        .args(["-o", "raw", "--delivery", delivery, "--output"])
        .arg(&capture)
        .arg("--")
        .arg(rv_path())
        .args(rv_args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let stderr: Vec<String> = stderr.lines().map(String::from).collect();
    let summary = summary_of(&stderr);
    assert_eq!(summary.dropped, 0, "{stderr:?}");
    let jsonl = dir.join("rv.jsonl");
    let (status, _, read_err) = run_loader(&[
        "read",
        capture.to_str().unwrap(),
        "-o",
        "jsonl",
        "--output",
        jsonl.to_str().unwrap(),
    ]);
    assert!(status.success(), "{read_err}");
    (stdout, jsonl)
}

/// Events per type in a JSON lines file, counted from the lines themselves.
fn events_per_type(jsonl: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(jsonl).unwrap();
    let mut per_type = BTreeMap::new();
    for line in text.lines() {
        let kind = line
            .split_once("\"event\":\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .unwrap_or_else(|| panic!("no event type in {line}"))
            .0;
        *per_type.entry(kind.to_string()).or_insert(0) += 1;
    }
    per_type
}

fn assert_counts_equal(jsonl: &Path, expected: &BTreeMap<&'static str, u64>) {
    let got = events_per_type(jsonl);
    let expected: BTreeMap<String, u64> = expected
        .iter()
        .map(|(kind, n)| (kind.to_string(), *n))
        .collect();
    // Also no event of any other type.
    assert_eq!(got, expected);
}

/// The first two instructions (`lui sp`, `jal ra, sieve`) as events, in
/// order; the answers' stores; the halt, once per run.
fn assert_exact_values(jsonl: &Path, runs: usize) {
    let text = std::fs::read_to_string(jsonl).unwrap();
    let image = guest::image().unwrap();
    let word = |at: usize| u64::from(u32::from_le_bytes(image[at..at + 4].try_into().unwrap()));
    let first: Vec<Value> = parse_jsonl(&text.lines().take(8).collect::<Vec<_>>().join("\n"))
        .into_iter()
        .map(|mut event| {
            let fields = event.as_object_mut().unwrap();
            fields.remove("pid");
            fields.remove("tid");
            event
        })
        .collect();
    let expected = serde_json::json!([
        {"event": "mem_read", "pc": 0, "addr": 0, "val": word(0), "size": 4},
        {"event": "insn_exec", "pc": 0, "insn": word(0), "len": 4},
        {"event": "reg_write", "pc": 0, "reg": SP.0, "reg_name": "sp", "val": STACK_TOP, "old": 0},
        {"event": "mem_read", "pc": 4, "addr": 4, "val": word(4), "size": 4},
        {"event": "insn_exec", "pc": 4, "insn": word(4), "len": 4},
        {"event": "reg_write", "pc": 4, "reg": RA.0, "reg_name": "ra", "val": 8, "old": 0},
    ]);
    assert_eq!(Value::from(first[..6].to_vec()), expected);
    // `call sieve`: a call from 4 to where the next instruction is fetched.
    let (call, next) = (&first[6], &first[7]);
    assert_eq!((&call["event"], &call["pc"]), (&"branch".into(), &4.into()));
    assert_eq!(
        (&call["kind"], &call["conditional"]),
        (&"call".into(), &false.into())
    );
    assert_eq!(next["event"], "mem_read");
    assert_eq!(call["target"], next["pc"], "{call} {next}");

    // Every store the program makes to its answers and the halt port.
    let answers = Answers::expected();
    let stores: Vec<(u64, u64, u64)> = text
        .lines()
        .filter(|l| l.contains("\"event\":\"mem_write\""))
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| {
            let addr = e["addr"].as_u64().unwrap();
            [RESULT_PRIMES, RESULT_CHECKSUM, HALT_PORT].contains(&(addr as u32))
        })
        .map(|e| {
            assert_eq!(e["size"], 4, "{e}");
            (
                e["addr"].as_u64().unwrap(),
                e["val"].as_u64().unwrap(),
                e["pc"].as_u64().unwrap(),
            )
        })
        .collect();
    let one_run = [
        (RESULT_PRIMES, answers.primes),
        (RESULT_CHECKSUM, answers.checksum),
        (HALT_PORT, 0),
    ];
    let expected: Vec<(u64, u64)> = one_run
        .iter()
        .cycle()
        .take(3 * runs)
        .map(|&(addr, val)| (u64::from(addr), u64::from(val)))
        .collect();
    let got: Vec<(u64, u64)> = stores.iter().map(|&(addr, val, _)| (addr, val)).collect();
    assert_eq!(got, expected);
    // The store to the halt port is the last instruction the guest runs.
    let halt_pc = stores.last().unwrap().2;
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(
        (&last["event"], &last["pc"]),
        (&"insn_exec".into(), &halt_pc.into())
    );
}

#[test]
fn the_riscv_workload_traced_batched_delivers_its_own_counts_exactly() {
    require_root();
    // The build measured (no counting machine), traced; its counts from the
    // counting machine in another process: the program is deterministic.
    let (stdout, jsonl) = traced("rv-batched", "batched", &["--repeat", "2"]);
    assert!(stdout.contains("primes 564, "), "{stdout}");
    assert_counts_equal(&jsonl, &own_counts(2));
    assert_exact_values(&jsonl, 2);
}

#[test]
fn the_riscv_workload_traced_per_event_delivers_its_own_counts_exactly() {
    require_root();
    let (stdout, jsonl) = traced("rv-per-event", "per-event", &["--count"]);
    assert_counts_equal(&jsonl, &counts_in(&stdout));
    assert_exact_values(&jsonl, 1);
}

/// With instruction lengths (every RV32IM instruction says 4) and nothing
/// but `insn_exec`, drcov's blocks are runs of instructions each starting
/// where the previous one ended: every 4-byte step of every block was
/// executed, and every executed instruction is in a block. Without lengths
/// a short taken forward jump (the guest has some: checked) would join two
/// runs across bytes never executed.
#[test]
fn drcov_blocks_from_instruction_lengths_hold_only_executed_instructions() {
    require_root();
    let dir = scratch("rv-drcov");
    let capture = dir.join("rv.styx");
    let output = loader_command()
        .args(["-e", "insn_exec", "-o", "raw", "--output"])
        .arg(&capture)
        .arg("--")
        .arg(rv_path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let jsonl = dir.join("rv.jsonl");
    let drcov = dir.join("rv.drcov");
    for (format, out) in [("jsonl", &jsonl), ("drcov", &drcov)] {
        let (status, _, err) = run_loader(&[
            "read",
            capture.to_str().unwrap(),
            "-o",
            format,
            "--output",
            out.to_str().unwrap(),
        ]);
        assert!(status.success(), "{err}");
    }
    let pcs: Vec<u64> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .inspect(|e| assert_eq!(e["len"], 4, "{e}"))
        .map(|e| e["pc"].as_u64().unwrap())
        .collect();
    let executed: BTreeSet<u64> = pcs.iter().copied().collect();
    assert!(
        pcs.windows(2)
            .any(|w| w[1] > w[0] + 4 && w[1] - w[0] <= styx_events::DRCOV_MAX_INSN_GAP),
        "the guest makes a short forward jump"
    );
    let (_, entries) = crate::tools::parse_drcov(&std::fs::read(&drcov).unwrap());
    assert!(!entries.is_empty());
    for &(start, size, _) in &entries {
        let (start, size) = (u64::from(start), u64::from(size));
        assert_eq!(size % 4, 0, "{start:#x}+{size}");
        for pc in (start..start + size).step_by(4) {
            assert!(executed.contains(&pc), "{pc:#x} in {start:#x}+{size}");
        }
    }
    for pc in &executed {
        assert!(
            entries
                .iter()
                .any(|&(s, z, _)| *pc >= u64::from(s) && *pc < u64::from(s) + u64::from(z)),
            "{pc:#x}"
        );
    }
}
