//! The formats other tools load, checked on real traces of the 6502 demo
//! against the same capture's events: register names (from the demo's
//! `describe!`), drcov blocks, Tenet lines, and Parquet queried by DuckDB.

use crate::support::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

/// The demo's register names, by number (styx-demo's `registers::NAMES`).
const NAMES: [&str; 5] = ["a", "x", "y", "sp", "p"];

/// Traces the demo running `program` from its start into a raw capture:
/// `events` (every type: "").
fn capture_demo(dir: &Path, program: &str, events: &str) -> PathBuf {
    let capture = dir.join(format!("{program}.styx"));
    let select: &[&str] = if events.is_empty() {
        &[]
    } else {
        &["-e", events]
    };
    let output = loader_command()
        .args(select)
        .args(["-o", "raw", "--output"])
        .arg(&capture)
        .arg("--")
        .arg(demo_path())
        .args(["--program", program])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains(" 0 dropped"), "{stderr}");
    capture
}

/// `styx-loader read CAPTURE -o FORMAT --output OUT [extra]`.
fn read_as(capture: &Path, format: &str, out: &Path, extra: &[&str]) -> String {
    let out = out.to_str().unwrap();
    let (status, _, stderr) = read(capture, &[&["-o", format, "--output", out], extra].concat());
    assert!(status.success(), "{format}: {stderr}");
    stderr
}

/// `styx-loader read CAPTURE ARGS…`: status, stdout, stderr.
fn read(capture: &Path, args: &[&str]) -> (ExitStatus, String, String) {
    run_loader(&[&["read", capture.to_str().unwrap()], args].concat())
}

fn jsonl_of(capture: &Path, dir: &Path) -> Vec<Value> {
    let out = dir.join("events.jsonl");
    read_as(capture, "jsonl", &out, &[]);
    read_jsonl(&out)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn register_names_show_in_every_format_and_numbers_stay() {
    require_root();
    let dir = scratch("tools-registers");
    let capture = capture_demo(&dir, "fib", "reg_read,reg_write");
    let events = jsonl_of(&capture, &dir);
    assert!(events.len() > 100, "{}", events.len());
    for e in &events {
        let reg = u(&e["reg"]) as usize;
        assert_eq!(e["reg_name"], NAMES[reg], "{e}");
    }

    let text = dir.join("events.txt");
    read_as(&capture, "text", &text, &[]);
    let text = std::fs::read_to_string(&text).unwrap();
    let named: Vec<&str> = text
        .lines()
        .map(|l| l.split(" reg=").nth(1).unwrap().split(' ').next().unwrap())
        .collect();
    let want: Vec<&str> = events
        .iter()
        .map(|e| NAMES[u(&e["reg"]) as usize])
        .collect();
    assert_eq!(named, want);

    let chrome = dir.join("events.json");
    read_as(&capture, "chrome", &chrome, &[]);
    let chrome: Value = serde_json::from_str(&std::fs::read_to_string(&chrome).unwrap()).unwrap();
    let chrome_regs: Vec<String> = chrome
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "reg_read" || e["name"] == "reg_write")
        .map(|e| e["args"]["reg"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(chrome_regs, want);

    let pftrace = dir.join("events.pftrace");
    read_as(&capture, "perfetto", &pftrace, &[]);
    // Register accesses are on their register's counter tracks, named
    // `reg_read sp val`: the register is the track name's second word.
    let decoded = crate::pftrace::decode(&std::fs::read(&pftrace).unwrap());
    let perfetto_regs: Vec<String> = (decoded.events.iter())
        .filter(|e| e.name == "reg_read" || e.name == "reg_write")
        .map(|e| {
            let (uuid, _) = e.counters.first().expect("its fields' counters");
            let track = &decoded.tracks[uuid].name;
            track.split(' ').nth(1).unwrap().to_string()
        })
        .collect();
    assert_eq!(perfetto_regs, want);

    // `read --by reg`: the same counts, keyed by name beside the number.
    let (status, stdout, stderr) = read(&capture, &["--by", "reg", "-o", "jsonl"]);
    assert!(status.success(), "{stderr}");
    let rows = parse_jsonl(&stdout);
    let mut counted: BTreeMap<(String, String), u64> = BTreeMap::new();
    for row in rows.iter().filter(|r| r.get("key").is_some()) {
        assert_eq!(row["key_name"], NAMES[u(&row["key"]) as usize], "{row}");
        let key = (row["event"].to_string(), row["key_name"].to_string());
        counted.insert(key, u(&row["count"]));
    }
    let mut want: BTreeMap<(String, String), u64> = BTreeMap::new();
    for e in &events {
        let name = Value::from(NAMES[u(&e["reg"]) as usize]).to_string();
        *want.entry((e["event"].to_string(), name)).or_default() += 1;
    }
    assert_eq!(counted, want);

    // Filters take the names too; a name the guest lacks says which it has.
    let filtered = dir.join("sp.jsonl");
    read_as(
        &capture,
        "jsonl",
        &filtered,
        &["--filter", "reg_write: reg == sp"],
    );
    let sp_writes = events
        .iter()
        .filter(|e| e["event"] == "reg_write" && e["reg"] == 3)
        .count();
    let kept = read_jsonl(&filtered);
    assert!(sp_writes > 0);
    assert_eq!(
        kept.iter().filter(|e| e["event"] == "reg_write").count(),
        sp_writes
    );
    let (status, _, stderr) = read(&capture, &["--filter", "reg_write: reg == r9"]);
    assert!(!status.success());
    assert!(
        stderr.contains("'r9' is not a value of 'reg' (a x y sp p)"),
        "{stderr}"
    );
}

#[test]
fn a_program_without_a_description_keeps_numbers_and_tenet_says_why_not() {
    require_root();
    let dir = scratch("tools-no-description");
    let out = dir.join("events.jsonl");
    let capture = dir.join("run.styx");
    let mut prog = TestProg::spawn(None);
    let loader = prog.attach_loader(&[
        "-o",
        "jsonl",
        "-e",
        "reg_write",
        "--output",
        out.to_str().unwrap(),
        "--capture",
        capture.to_str().unwrap(),
    ]);
    prog.fire(50, 1);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    let events = read_jsonl(&out);
    assert_eq!(events.len(), 50, "one reg_write a round: {stderr:?}");
    for e in &events {
        assert!(e["reg"].is_u64() && e.get("reg_name").is_none(), "{e}");
    }
    let tenet = dir.join("t.tenet");
    let (status, _, stderr) = read(
        &capture,
        &["-o", "tenet", "--output", tenet.to_str().unwrap()],
    );
    assert!(!status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("-o tenet needs register names"), "{stderr}");
}

/// A drcov module: base, end, path.
type Module = (u64, u64, String);

/// drcov version 2, parsed as its published description says: text lines,
/// then `BB Table: N bbs` and N entries `{u32 start; u16 size; u16 module}`.
pub(crate) fn parse_drcov(bytes: &[u8]) -> (Vec<Module>, Vec<(u32, u16, u16)>) {
    let mut rest = bytes;
    let mut line = || {
        let end = rest.iter().position(|&b| b == b'\n').expect("a line");
        let text = String::from_utf8(rest[..end].to_vec()).unwrap();
        rest = &rest[end + 1..];
        text
    };
    assert_eq!(line(), "DRCOV VERSION: 2");
    assert!(line().starts_with("DRCOV FLAVOR: "));
    let table = line();
    let count: usize = table
        .strip_prefix("Module Table: version 2, count ")
        .unwrap_or_else(|| panic!("{table}"))
        .parse()
        .unwrap();
    assert_eq!(line(), "Columns: id, base, end, entry, path");
    let mut modules = Vec::new();
    for id in 0..count {
        let l = line();
        let cols: Vec<&str> = l.split(", ").collect();
        assert_eq!(cols.len(), 5, "{l}");
        assert_eq!(cols[0].parse::<usize>().unwrap(), id);
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        modules.push((hex(cols[1]), hex(cols[2]), cols[4].to_string()));
    }
    let bbs = line();
    let n: usize = bbs
        .strip_prefix("BB Table: ")
        .and_then(|s| s.strip_suffix(" bbs"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(rest.len(), n * 8, "the table is {n} entries of 8 bytes");
    let entries = rest
        .chunks_exact(8)
        .map(|c| {
            (
                u32::from_le_bytes(c[0..4].try_into().unwrap()),
                u16::from_le_bytes(c[4..6].try_into().unwrap()),
                u16::from_le_bytes(c[6..8].try_into().unwrap()),
            )
        })
        .collect();
    (modules, entries)
}

#[test]
fn drcov_holds_each_executed_block_once_in_the_described_image() {
    require_root();
    let dir = scratch("tools-drcov");
    let capture = capture_demo(&dir, "sieve", "block");
    let events = jsonl_of(&capture, &dir);
    let want: BTreeSet<(u64, u64)> = events
        .iter()
        .map(|e| (u(&e["pc"]), u(&e["size"])))
        .collect();
    assert!(
        want.len() > 10 && events.len() > want.len(),
        "blocks repeat in sieve"
    );

    let out = dir.join("sieve.drcov");
    read_as(&capture, "drcov", &out, &[]);
    let (modules, entries) = parse_drcov(&std::fs::read(&out).unwrap());
    assert_eq!(modules, vec![(0, 0x10000, "6502-memory".to_string())]);
    let got: Vec<(u64, u64)> = entries
        .iter()
        .map(|&(start, size, module)| {
            assert_eq!(module, 0);
            (u64::from(start), u64::from(size))
        })
        .collect();
    assert_eq!(got.len(), want.len(), "each block once");
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
}

#[test]
fn drcov_without_block_events_covers_exactly_the_executed_instructions() {
    require_root();
    let dir = scratch("tools-drcov-runs");
    let capture = capture_demo(&dir, "sort", "insn_exec,branch");
    let events = jsonl_of(&capture, &dir);
    let executed: BTreeSet<u64> = events
        .iter()
        .filter(|e| e["event"] == "insn_exec")
        .map(|e| u(&e["pc"]))
        .collect();
    let out = dir.join("sort.drcov");
    read_as(&capture, "drcov", &out, &[]);
    let (_, entries) = parse_drcov(&std::fs::read(&out).unwrap());
    let blocks: Vec<(u64, u64)> = entries
        .iter()
        .map(|&(s, z, _)| (u64::from(s), u64::from(z)))
        .collect();
    // Every executed instruction is in a block, every block starts and ends
    // on one (its size reaches its last instruction's first byte).
    for pc in &executed {
        assert!(
            blocks.iter().any(|&(s, z)| *pc >= s && *pc < s + z),
            "{pc:#x}"
        );
    }
    for &(start, size) in &blocks {
        assert!(executed.contains(&start), "{start:#x}");
        assert!(executed.contains(&(start + size - 1)), "{start:#x}+{size}");
    }
}

#[test]
fn tenet_lines_replay_the_instructions_registers_and_memory_of_the_capture() {
    require_root();
    let dir = scratch("tools-tenet");
    let capture = capture_demo(
        &dir,
        "fib",
        "insn_fetch,insn_exec,reg_read,reg_write,mem_read,mem_write",
    );
    let events = jsonl_of(&capture, &dir);
    let out = dir.join("fib.tenet");
    read_as(&capture, "tenet", &out, &[]);
    let text = std::fs::read_to_string(&out).unwrap();

    // Tenet's own reading: each line `key=value` entries.
    let mut pcs = Vec::new();
    let mut regs: BTreeMap<String, u64> = BTreeMap::new();
    let mut reads = Vec::new();
    let mut writes = Vec::new();
    for line in text.lines() {
        for entry in line.split(',') {
            let (key, value) = entry.split_once('=').unwrap_or_else(|| panic!("{line}"));
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
            match key {
                "pc" => pcs.push(hex(value)),
                "mr" | "mw" => {
                    let (addr, bytes) = value.split_once(':').unwrap();
                    let bytes: Vec<u8> = (0..bytes.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&bytes[i..i + 2], 16).unwrap())
                        .collect();
                    let access = (hex(addr), bytes);
                    if key == "mr" {
                        reads.push(access)
                    } else {
                        writes.push(access)
                    }
                }
                name => {
                    assert!(NAMES.contains(&name), "{line}");
                    regs.insert(name.to_string(), hex(value));
                }
            }
        }
    }
    // The instructions, in order: each insn_fetch, after the reset's reads.
    let fetched: Vec<u64> = events
        .iter()
        .filter(|e| e["event"] == "insn_fetch")
        .map(|e| u(&e["pc"]))
        .collect();
    assert!(fetched.len() > 100);
    assert_eq!(pcs[pcs.len() - fetched.len()..], fetched[..]);
    let access = |kind: &str| -> Vec<(u64, Vec<u8>)> {
        events
            .iter()
            .filter(|e| e["event"] == kind)
            .map(|e| {
                let size = u(&e["size"]) as usize;
                (u(&e["addr"]), u(&e["val"]).to_le_bytes()[..size].to_vec())
            })
            .collect()
    };
    assert_eq!(reads, access("mem_read"));
    assert_eq!(writes, access("mem_write"));
    // The registers as the last write left each.
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for e in events.iter().filter(|e| e["event"] == "reg_write") {
        last.insert(NAMES[u(&e["reg"]) as usize].to_string(), u(&e["val"]));
    }
    for (name, value) in &last {
        assert_eq!(regs.get(name), Some(value), "{name}");
    }
}

/// `(key, count)` rows from DuckDB, as a map.
fn counted(rows: Vec<Vec<Value>>) -> BTreeMap<String, u64> {
    rows.into_iter()
        .map(|r| (r[0].to_string(), u(&r[1])))
        .collect()
}

#[test]
fn duckdb_queries_of_the_parquet_output_match_the_capture() {
    require_root();
    let dir = scratch("tools-parquet");
    let capture = capture_demo(&dir, "sieve", "");
    let events = jsonl_of(&capture, &dir);
    let out = dir.join("sieve.parquet");
    read_as(&capture, "parquet", &out, &[]);
    let file = out.display();

    let mut per_type: BTreeMap<String, u64> = BTreeMap::new();
    let mut per_pc: BTreeMap<String, u64> = BTreeMap::new();
    for e in &events {
        *per_type.entry(e["event"].to_string()).or_default() += 1;
        if let Some(pc) = e.get("pc") {
            *per_pc.entry(pc.to_string()).or_default() += 1;
        }
    }
    assert!(per_type.len() >= 10, "{per_type:?}");
    let sql = format!("SELECT event, count(*) FROM '{file}' GROUP BY event");
    assert_eq!(counted(duckdb(&sql)), per_type);
    let sql = format!("SELECT pc, count(*) FROM '{file}' WHERE pc IS NOT NULL GROUP BY pc");
    assert_eq!(counted(duckdb(&sql)), per_pc);
    // Typed columns: times in order, register names beside numbers, text.
    let sql =
        format!("SELECT count(*) FROM '{file}' WHERE event = 'reg_write' AND reg_name IS NOT NULL");
    assert_eq!(u(&duckdb(&sql)[0][0]), per_type["\"reg_write\""]);
    let sql =
        format!("SELECT min(ts_ns) > 0, typeof(ts_ns), typeof(pc) FROM '{file}' GROUP BY ALL");
    assert_eq!(
        duckdb(&sql)[0],
        vec![Value::Bool(true), "UBIGINT".into(), "UBIGINT".into()]
    );
    let texts = format!("SELECT text FROM '{file}' WHERE event = 'marker' ORDER BY ts_ns");
    let want: Vec<Value> = events
        .iter()
        .filter(|e| e["event"] == "marker")
        .map(|e| e["text"].clone())
        .collect();
    let got: Vec<Value> = duckdb(&texts).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(got, want);
}

#[test]
fn parquet_rolls_files_in_a_directory_and_a_glob_reads_them_all() {
    require_root();
    let dir = scratch("tools-parquet-roll");
    let capture = capture_demo(&dir, "all", "");
    let events = jsonl_of(&capture, &dir);
    let rolled = dir.join("rolled");
    // A trailing slash: a directory of files, 1 MiB each.
    let target = format!("{}/", rolled.display());
    read_as(
        &capture,
        "parquet",
        Path::new(&target),
        &["--roll-size", "1"],
    );
    let names: Vec<String> = std::fs::read_dir(&rolled)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(names.len() > 1, "rolled: {names:?}");
    assert!(
        names.iter().all(|n| n.ends_with(".parquet")),
        "only whole files: {names:?}"
    );
    let sql = format!("SELECT count(*) FROM '{}/*.parquet'", rolled.display());
    assert_eq!(u(&duckdb(&sql)[0][0]), events.len() as u64);
}

/// A guest description with sub-registers (a toy Z80's A and F are the
/// halves of AF, H and L of HL), the emulator traced from its start: `list`
/// shows where each lies, JSON lines and filters name each register by its
/// own number, Tenet merges the halves into the pairs it knows.
#[test]
fn sub_registers_keep_their_names_and_tenet_merges_them_into_their_parents() {
    require_root();
    let dir = scratch("tools-subregs");
    let emulator = env!("CARGO_BIN_EXE_styx-subregs");
    let (status, stdout, stderr) = run_loader(&["list", emulator]);
    assert!(status.success(), "{stderr}");
    assert!(
        stdout.contains("guest: z80, registers af a=af[15:8] f=af[7:0] hl h=hl[15:8] l=hl[7:0]"),
        "{stdout}"
    );

    let tenet = dir.join("z80.tenet");
    let tenet_arg = tenet.to_str().unwrap();
    let (status, stdout, stderr) =
        run_loader(&["-o", "tenet", "--output", tenet_arg, "--", emulator]);
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, "af=0x5678 hl=0xbc9a\n");
    assert_eq!(
        std::fs::read_to_string(&tenet).unwrap(),
        "af=0x0,pc=0x100\naf=0x1234,pc=0x101\naf=0x5634,pc=0x102\naf=0x5678,pc=0x103\n\
         hl=0x9a,pc=0x104\nhl=0xbc9a\n"
    );

    let out = dir.join("halves.jsonl");
    let (status, _, stderr) = run_loader(&[
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--filter",
        "reg_write: reg == a || reg == h",
        "--",
        emulator,
    ]);
    assert!(status.success(), "{stderr}");
    let writes: Vec<(String, u64, u64)> = read_jsonl(&out)
        .iter()
        .filter(|e| e["event"] == "reg_write")
        .map(|e| {
            (
                e["reg_name"].as_str().unwrap().to_string(),
                u(&e["val"]),
                u(&e["old"]),
            )
        })
        .collect();
    assert_eq!(writes, [("a".into(), 0x56, 0x12), ("h".into(), 0xbc, 0)]);
}
