//! Event types an emulator declares itself (`styx_probe::event!`,
//! styx-declared): their notes say what `list` shows, and bpftrace traces
//! their sites with the values in the order declared.

use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

fn program() -> std::path::PathBuf {
    beside_testprog("styx-declared", "styx-testprog")
}

#[test]
fn list_shows_each_declared_type_with_its_fields() {
    let (declared, stdout) = listed_declared(&program(), "styx_declared:*");
    assert_eq!(
        declared,
        [
            "big(a: u64, b: u64, c: u64, d: u64, e: u64, f: i64)",
            "flags_delta(pc: u16, delta: i8, wide: i64)",
            "mmio_write(pc: u32, device: Device { Uart = 0, Timer = 1, Dma = 7 }, addr: Addr<u32>, val: u32)",
            "wide(a: u8, b: u16, c: u32, d: u64, e: bool, f: Reg<u8>, g: i16, h: u64)",
        ],
        "{stdout}"
    );
    // Each type's one site passes its fields in order, a register each.
    assert!(
        stdout.contains("8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9 8@%r10 8@%r11"),
        "{stdout}"
    );
    // The library's type, under the library's name.
    let (declared, stdout) = listed_declared(&program(), "styx_testdev:*");
    assert_eq!(
        declared,
        ["dma_copy(src: Addr<u64>, dst: Addr<u64>, len: u16)"],
        "{stdout}"
    );
}

/// The providers of styx-declared's types: its own and the library's
/// (styx-testdev), as `--probes` takes them.
const PROBES: [&str; 4] = ["--probes", "styx_declared:*", "--probes", "styx_testdev:*"];

/// The provider a type of styx-declared's is declared under: the name of
/// the crate that declares it.
fn provider_of(probe: &str) -> &'static str {
    match probe {
        "dma_copy" => "styx_testdev",
        _ => "styx_declared",
    }
}

/// A bpftrace one-liner on a declared type: its arguments are the fields
/// in the order declared (an enum's value, an address, a value).
#[test]
fn bpftrace_reads_a_declared_types_fields_as_its_arguments() {
    require_root();
    let binary = program();
    let mut prog = TestProg::start(&binary, &[]);
    let pid = prog.pid();
    let script = format!(
        "usdt:{}:styx_declared:mmio_write {{ @device[arg1] = count(); @val = sum(arg3); @addr = max(arg2); }}",
        binary.display()
    );
    let bpftrace = Command::new("bpftrace")
        .args(["-p", &pid.to_string(), "-e", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting bpftrace");
    // bpftrace 0.17 counts the word up by one or by two, depending on the
    // binary's layout (by two for this one when written); the counts
    // below stay exact, and it counts down as far when it stops.
    eventually("bpftrace raised mmio_write's semaphore", || {
        provider_semaphores(pid, &binary, "styx_declared").get("mmio_write") >= Some(&1)
            && in_event_loop(bpftrace.id())
    });
    assert_eq!(prog.ask("fire 30").trim(), "fired 30");
    let printed = stop_bpftrace(bpftrace);
    prog.quit();
    // Devices Uart (0), Timer (1), Dma (7) ten times each; values 3 * i.
    for line in [
        "@device[0]: 10",
        "@device[1]: 10",
        "@device[7]: 10",
        "@val: 1305",
        "@addr: 45",
    ] {
        assert!(printed.lines().any(|l| l == line), "{line:?} in {printed}");
    }
}

/// Events a round fires.
const PER_ROUND: usize = 5;

/// What round `i` of styx-declared fires: (probe, values as JSON lines
/// show them: numbers, signed ones negative, an enum value by its name,
/// a bool as true or false).
fn round(i: i64) -> [(&'static str, Vec<Value>); PER_ROUND] {
    let device = ["Uart", "Timer", "Dma"][i as usize % 3];
    [
        (
            "mmio_write",
            vec![
                json!(0x1000 + i),
                json!(device),
                json!(0x10 + i),
                json!(3 * i),
            ],
        ),
        (
            "flags_delta",
            vec![json!(0x600 + i), json!(-(i % 5)), json!(-1000 * i)],
        ),
        (
            "wide",
            vec![
                json!(i % 256),
                json!(2 * i),
                json!(3 * i),
                json!(4 * i),
                json!(i % 2 == 1),
                json!(i % 16),
                json!(-i),
                json!(5 * i),
            ],
        ),
        (
            "big",
            [i, i + 1, i + 2, i + 3, i + 4, -i]
                .map(|v| json!(v))
                .to_vec(),
        ),
        (
            "dma_copy",
            vec![json!(0x8000 + 16 * i), json!(0x200 + i), json!(i % 64)],
        ),
    ]
}

/// Every event of `rounds` rounds, in order.
fn rounds(rounds: i64) -> Vec<(String, Vec<Value>)> {
    (0..rounds)
        .flat_map(round)
        .map(|(probe, values)| (probe.to_string(), values))
        .collect()
}

/// styx-declared traced with [`PROBES`] and `args` while it fires
/// `rounds`: what the loader wrote to `out` (jsonl).
fn traced(name: &str, rounds: u64, args: &[&str]) -> (Vec<Value>, Vec<String>) {
    require_root();
    let out = scratch(name).join("out.jsonl");
    let mut prog = TestProg::start(&program(), &[]);
    let mut all = PROBES.to_vec();
    all.extend(["-o", "jsonl", "--output"]);
    all.push(out.to_str().unwrap());
    all.extend_from_slice(args);
    let loader = prog.attach_loader(&all);
    assert_eq!(
        prog.ask(&format!("fire {rounds}")).trim(),
        format!("fired {rounds}")
    );
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    (read_jsonl(&out), stderr)
}

/// `got` is `want`; else the first event that differs (a whole trace
/// would bury it).
fn assert_same(got: &[(String, Vec<Value>)], want: &[(String, Vec<Value>)]) {
    if let Some(at) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        panic!(
            "event {at} of {} (expected {}): {:?}, expected {:?}",
            got.len(),
            want.len(),
            got.get(at),
            want.get(at)
        );
    }
}

/// The fields each declared type of styx-declared has, in order.
fn fields_of(probe: &str) -> &'static [&'static str] {
    match probe {
        "mmio_write" => &["pc", "device", "addr", "val"],
        "flags_delta" => &["pc", "delta", "wide"],
        "wide" => &["a", "b", "c", "d", "e", "f", "g", "h"],
        "big" => &["a", "b", "c", "d", "e", "f"],
        "testprog_tick" => &["i", "minus_i"],
        "lib_tick" => &["i", "odd"],
        "dma_copy" => &["src", "dst", "len"],
        other => panic!("no declared type {other}"),
    }
}

/// (probe, values) of each event of a trace: its fields, by the names
/// the declaration gives them.
fn events(trace: &[Value]) -> Vec<(String, Vec<Value>)> {
    trace
        .iter()
        .map(|e| {
            assert_eq!(e["event"], "usdt", "{e}");
            let probe = e["probe"].as_str().unwrap();
            let values = fields_of(probe)
                .iter()
                .map(|f| match &e[*f] {
                    Value::Null => panic!("no {f} in {e}"),
                    value => value.clone(),
                })
                .collect();
            (probe.to_string(), values)
        })
        .collect()
}

/// Declared types taken in batches (the default) and one hit per event
/// give the same events, each with its values as declared: narrow ones,
/// signed ones sign-extended, an enum's value.
#[test]
fn declared_types_arrive_whole_batched_and_per_event() {
    let want = rounds(300);
    let (batched, stderr) = traced("declared-batched", 300, &[]);
    assert!(batched
        .iter()
        .all(|e| e["provider"] == provider_of(e["probe"].as_str().unwrap())));
    // One flush site and the batch-enable site of each type.
    assert!(
        stderr_says(&stderr, "attached 6 probe sites"),
        "{stderr:#?}"
    );
    assert_same(&events(&batched), &want);
    assert_counted_per_type(&stderr, &want);
    let (per_event, stderr) = traced("declared-per-event", 300, &["--delivery", "per-event"]);
    assert!(
        stderr_says(&stderr, "attached 5 probe sites"),
        "{stderr:#?}"
    );
    assert_same(&events(&per_event), &want);
    assert_counted_per_type(&stderr, &want);
}

/// The summary counts each declared type's events on a line of its own
/// under `usdt` (`  N  PROVIDER:TYPE`), as many as `fired` holds.
fn assert_counted_per_type(stderr: &[String], fired: &[(String, Vec<Value>)]) {
    let mut per_type: std::collections::BTreeMap<&str, usize> = Default::default();
    for (probe, _) in fired {
        *per_type.entry(probe).or_default() += 1;
    }
    for (probe, n) in per_type {
        let line = format!("{n}  {}:{probe}", provider_of(probe));
        assert!(
            stderr.iter().any(|l| l.trim() == line),
            "{line}: {stderr:#?}"
        );
    }
}

/// Whether one of the loader's lines says `what`.
fn stderr_says(stderr: &[String], what: &str) -> bool {
    stderr.iter().any(|line| line.contains(what))
}

/// `--sample 3` keeps one in 3 of the declared types' events, taken in
/// batches (the loader samples) or one hit each (the eBPF site programs
/// do not: the loader samples those too): the same events either way.
#[test]
fn sampling_keeps_one_in_n_declared_events_batched_and_per_event() {
    let every_third: Vec<(String, Vec<Value>)> = rounds(100).into_iter().step_by(3).collect();
    let (batched, _) = traced("declared-sample-batched", 100, &["--sample", "3"]);
    assert_same(&events(&batched), &every_third);
    let per_event = ["--sample", "3", "--delivery", "per-event"];
    let (per_event, _) = traced("declared-sample-per-event", 100, &per_event);
    assert_same(&events(&per_event), &every_third);
}

/// Rounds in the shared capture.
const CAPTURED: i64 = 30;

/// A raw capture of [`CAPTURED`] rounds of styx-declared, batched, made
/// once for the tests that read it.
fn capture() -> &'static Path {
    static CAPTURE: OnceLock<PathBuf> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        require_root();
        let raw = scratch("declared-capture").join("run.styx");
        let mut prog = TestProg::start(&program(), &[]);
        let mut args = PROBES.to_vec();
        args.extend(["-o", "raw", "--output", raw.to_str().unwrap()]);
        let loader = prog.attach_loader(&args);
        let fire = format!("fire {CAPTURED}");
        assert_eq!(prog.ask(&fire).trim(), format!("fired {CAPTURED}"));
        prog.quit();
        let (status, stderr) = loader.finish();
        assert!(status.success(), "{stderr:#?}");
        // Batches stored whole are counted per type too.
        assert_counted_per_type(&stderr, &rounds(CAPTURED));
        raw
    })
}

/// `styx-loader read CAPTURE ARGS…`: its stdout; it must succeed quietly.
fn read(args: &[&str]) -> String {
    let capture = capture().to_str().unwrap();
    let (status, stdout, stderr) = run_loader(&[&["read", capture], args].concat());
    assert!(status.success() && stderr.is_empty(), "{args:?}: {stderr}");
    stdout
}

/// A raw capture of batched declared types keeps what they are: `read`
/// gives the same events.
#[test]
fn a_capture_of_declared_types_reads_back() {
    let stdout = read(&["-o", "jsonl"]);
    assert_same(&events(&parse_jsonl(&stdout)), &rounds(CAPTURED));
}

/// `read -e` takes a declared type by its name, its provider's glob, and
/// `usdt` (every declared type's events are USDT events): exactly that
/// type's events of what the program fired.
#[test]
fn read_e_keeps_a_declared_type_by_name_or_glob() {
    let only = |probe: &str| -> Vec<(String, Vec<Value>)> {
        let all = rounds(CAPTURED).into_iter();
        all.filter(|(p, _)| p == probe).collect()
    };
    let mmio = events(&parse_jsonl(&read(&["-e", "mmio_write", "-o", "jsonl"])));
    assert_eq!(mmio.len(), CAPTURED as usize);
    assert_same(&mmio, &only("mmio_write"));
    let glob = events(&parse_jsonl(&read(&[
        "-e",
        "styx_declared:mmio_*",
        "-o",
        "jsonl",
    ])));
    assert_same(&glob, &only("mmio_write"));
    let library = events(&parse_jsonl(&read(&[
        "-e",
        "styx_testdev:*",
        "-o",
        "jsonl",
    ])));
    assert_eq!(library.len(), CAPTURED as usize);
    assert_same(&library, &only("dma_copy"));
    let usdt = events(&parse_jsonl(&read(&["-e", "usdt", "-o", "jsonl"])));
    assert_same(&usdt, &rounds(CAPTURED));
    // And `event ==` in a filter names it the same way.
    let filtered = read(&["--filter", "event == mmio_write", "-o", "jsonl"]);
    assert_same(&events(&parse_jsonl(&filtered)), &only("mmio_write"));
}

/// Text shows each field as its kind reads: an enum value by name, an
/// address in hex, other numbers in decimal (signed ones negative), a
/// bool as true or false.
#[test]
fn text_shows_declared_fields_as_their_kinds_read() {
    let got: Vec<String> = read(&["-o", "text"])
        .lines()
        .filter_map(|l| {
            let at = l
                .find(" styx_declared ")
                .or_else(|| l.find(" styx_testdev "))?;
            Some(l[at + 1..].to_string())
        })
        .collect();
    let want: Vec<String> = rounds(CAPTURED)
        .iter()
        .map(|(probe, values)| {
            let shown = fields_of(probe).iter().zip(values).map(|(field, value)| {
                match (is_address(probe, field), value) {
                    (true, v) => format!("{field}={:#x}", v.as_u64().unwrap()),
                    (false, Value::String(name)) => format!("{field}={name}"),
                    (false, v) => format!("{field}={v}"),
                }
            });
            format!(
                "{} {probe} {}",
                provider_of(probe),
                shown.collect::<Vec<_>>().join(" ")
            )
        })
        .collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    assert_eq!(
        got[PER_ROUND], // round 1's first event
        "styx_declared mmio_write pc=4097 device=Timer addr=0x11 val=3"
    );
    assert_eq!(
        got[2 * PER_ROUND - 1], // round 1's last, the library's
        "styx_testdev dma_copy src=0x8010 dst=0x201 len=1"
    );
}

/// Whether `probe`'s `field` is an address (`Addr`), which text and
/// Chrome show in hex.
fn is_address(probe: &str, field: &str) -> bool {
    matches!(
        (probe, field),
        ("mmio_write", "addr") | ("dma_copy", "src" | "dst")
    )
}

/// Chrome's args show every field of every type: an address as a
/// `"0x…"` string, as the catalogue's, an enum value by name, a bool as a
/// bool, signed numbers negative.
#[test]
fn chrome_shows_declared_addresses_in_hex_and_enums_by_name() {
    let trace: Value = serde_json::from_str(&read(&["-o", "chrome"])).unwrap();
    let got: Vec<(String, Vec<Value>)> = trace
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| {
            let probe = e["args"]["probe"].as_str()?.to_string();
            let values = fields_of(&probe)
                .iter()
                .map(|f| e["args"][f].clone())
                .collect();
            Some((probe, values))
        })
        .collect();
    let want: Vec<(String, Vec<Value>)> = rounds(CAPTURED)
        .into_iter()
        .map(|(probe, values)| {
            let shown =
                fields_of(&probe).iter().zip(values).map(|(field, value)| {
                    match is_address(&probe, field) {
                        true => json!(format!("{:#x}", value.as_u64().unwrap())),
                        false => value,
                    }
                });
            let shown = shown.collect();
            (probe, shown)
        })
        .collect();
    assert_same(&got, &want);
}

/// DuckDB reads the Parquet's declared columns by name, each typed as
/// its kind: an enum's names as text, an address unsigned, a signed field
/// signed; a name two types give fields of two kinds (wide's bool `e`,
/// big's u64 `e`) signed, a bool in it 0 or 1. (A bool column of its
/// own: two_files_declare_their_own_types_in_one_process.)
#[test]
fn parquet_has_a_typed_column_per_declared_field() {
    let dir = scratch("declared-parquet");
    let parquet = dir.join("run.parquet");
    read(&["-o", "parquet", "--output", parquet.to_str().unwrap()]);
    let table = parquet.to_str().unwrap();
    let types = duckdb(&format!(
        "SELECT column_name, column_type FROM (DESCRIBE SELECT device, e, addr, delta FROM '{table}')"
    ));
    let want = [
        ["device", "VARCHAR"],
        ["e", "BIGINT"],
        ["addr", "UBIGINT"],
        ["delta", "BIGINT"],
    ];
    assert_eq!(types, want.map(|row| row.map(|v| json!(v)).to_vec()));
    let of = |probe: &str| -> Vec<Vec<Value>> {
        rounds(CAPTURED)
            .into_iter()
            .filter(|(p, _)| p == probe)
            .map(|(_, values)| {
                let as_number = |v: Value| v.as_bool().map_or(v, |b| json!(b as i64));
                values.into_iter().map(as_number).collect()
            })
            .collect()
    };
    for probe in ["mmio_write", "flags_delta", "wide", "dma_copy"] {
        let columns = fields_of(probe).join(", ");
        let rows = duckdb(&format!(
            "SELECT {columns} FROM '{table}' WHERE probe = '{probe}' ORDER BY ts_ns"
        ));
        assert_eq!(rows, of(probe), "{probe}");
    }
    let per_device = duckdb(&format!(
        "SELECT device, count(*) FROM '{table}' WHERE probe = 'mmio_write' \
         GROUP BY device ORDER BY device"
    ));
    let want = [("Dma", 10), ("Timer", 10), ("Uart", 10)];
    assert_eq!(
        per_device,
        want.map(|(d, n)| vec![json!(d), json!(n)]).to_vec()
    );
}

/// Perfetto's debug annotations: an enum value's name as a string, an
/// address as a pointer, a bool as a bool, signed numbers as ints.
#[test]
fn perfetto_annotates_declared_fields_as_their_kinds_read() {
    use perfetto_protos::debug_annotation::DebugAnnotation;
    let dir = scratch("declared-perfetto");
    let out = dir.join("run.pftrace");
    read(&["-o", "perfetto", "--output", out.to_str().unwrap()]);
    let decoded = crate::pftrace::decode(&std::fs::read(&out).unwrap());
    let value = |a: &DebugAnnotation| -> (&'static str, Value) {
        if a.has_string_value() {
            ("string", json!(a.string_value()))
        } else if a.has_pointer_value() {
            ("pointer", json!(a.pointer_value()))
        } else if a.has_bool_value() {
            ("bool", json!(a.bool_value()))
        } else if a.has_int_value() {
            ("int", json!(a.int_value()))
        } else {
            ("uint", json!(a.uint_value()))
        }
    };
    let mut got: Vec<(String, Vec<Value>)> = Vec::new();
    let mut kinds: std::collections::BTreeMap<String, &'static str> = Default::default();
    for e in &decoded.events {
        let Some(probe) = e.annotation("probe") else {
            continue;
        };
        let probe = probe.string_value().to_string();
        let values = fields_of(&probe)
            .iter()
            .map(|f| {
                let a = e.annotation(f).unwrap();
                let (kind, v) = value(a);
                kinds.insert(format!("{probe}.{f}"), kind);
                v
            })
            .collect();
        got.push((probe, values));
    }
    assert_same(&got, &rounds(CAPTURED));
    for (field, kind) in [
        ("mmio_write.device", "string"),
        ("mmio_write.addr", "pointer"),
        ("mmio_write.val", "uint"),
        ("wide.e", "bool"),
        ("wide.g", "int"),
        ("flags_delta.wide", "int"),
        ("dma_copy.src", "pointer"),
        ("dma_copy.len", "uint"),
    ] {
        assert_eq!(kinds[field], kind, "{field}");
    }
}

/// Two files of one process, each with its own styx-probe and its own
/// declared types (styx-testprog's `testprog_tick`, the dlopened
/// styx-testlib's `lib_tick`): their batches' tags are their own file's,
/// and every event is its type's with its values.
#[test]
fn two_files_declare_their_own_types_in_one_process() {
    require_root();
    let dir = scratch("declared-two-files");
    let out = dir.join("out.jsonl");
    let capture = dir.join("run.styx");
    let mut prog = TestProg::spawn(None);
    let library = beside_testprog("libstyx_testlib.so", "styx-testlib");
    assert_eq!(
        prog.ask(&format!("dlopen {}", library.display())).trim(),
        "loaded"
    );
    let loader = prog.attach_loader(&jsonl_to(
        &out,
        "batched",
        &[
            "-e",
            "insn_exec",
            "--probes",
            "styx_testprog:*",
            "--probes",
            "styx_testlib:*",
            "--capture",
            capture.to_str().unwrap(),
        ],
    ));
    assert_eq!(prog.ask("declared 500").trim(), "declared 500");
    assert_eq!(prog.ask("lib-fire 300 2").trim(), "lib-fired 1200");
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    let trace = read_jsonl(&out);
    let of = |provider: &str| -> Vec<Vec<Value>> {
        let declared: Vec<Value> = trace
            .iter()
            .filter(|e| e["event"] == "usdt" && e["provider"] == provider)
            .cloned()
            .collect();
        events(&declared)
            .into_iter()
            .map(|(_, values)| values)
            .collect()
    };
    let own: Vec<Vec<Value>> = (0..500).map(|i| vec![json!(i), json!(-i)]).collect();
    assert!(of("styx_testprog") == own, "{stderr:#?}");
    // Two threads, each rounds 0..300 in order.
    let lib = of("styx_testlib");
    assert_eq!(lib.len(), 600, "{stderr:#?}");
    let mut rounds: Vec<i64> = lib.iter().map(|args| args[0].as_i64().unwrap()).collect();
    // `odd` is a bool.
    assert!(
        lib.iter()
            .all(|args| args[1] == json!(args[0].as_i64().unwrap() % 2 == 1)),
        "{lib:?}"
    );
    rounds.sort_unstable();
    let want: Vec<i64> = (0..300).flat_map(|i| [i, i]).collect();
    assert_eq!(rounds, want);
    // The capture's header names each type by its own file's number (tags
    // are per file: where the linker puts them, two files' may be equal;
    // `record::batch`'s unit test splits such a pair).
    let reader = styx_events::Reader::open(std::fs::File::open(&capture).unwrap()).unwrap();
    let file_of = |name: &str| {
        (reader.header.declared.iter())
            .find(|d| d.event.name == name)
            .unwrap_or_else(|| panic!("{name} not in the capture's header"))
            .file
    };
    assert_ne!(file_of("testprog_tick"), file_of("lib_tick"));
    // drcov takes the instructions and ignores the declared types among
    // them: the same file as of the instructions alone.
    let drcov = |events: &[&str]| -> Vec<u8> {
        let out = dir.join(format!("run{}.drcov", events.len()));
        let mut args = vec!["read", capture.to_str().unwrap(), "-o", "drcov", "--output"];
        args.push(out.to_str().unwrap());
        args.extend(events);
        let (status, _, stderr) = run_loader(&args);
        assert!(status.success(), "{stderr}");
        std::fs::read(&out).unwrap()
    };
    let all = drcov(&[]);
    let text = String::from_utf8_lossy(&all);
    assert!(
        text.contains("BB Table: ") && !text.contains("BB Table: 0 bbs"),
        "{text}"
    );
    assert!(
        all == drcov(&["-e", "insn_exec"]),
        "drcov differs with the declared events left in"
    );
    // `odd`, a bool no other type's field shares a name with, is a
    // boolean column.
    let parquet = dir.join("run.parquet");
    let (status, _, stderr) = run_loader(&[
        "read",
        capture.to_str().unwrap(),
        "-o",
        "parquet",
        "--output",
        parquet.to_str().unwrap(),
    ]);
    assert!(status.success(), "{stderr}");
    let odd = duckdb(&format!(
        "SELECT typeof(odd), odd, count(*) FROM '{}' WHERE probe = 'lib_tick' \
         GROUP BY ALL ORDER BY odd",
        parquet.display()
    ));
    let want = [
        json!(["BOOLEAN", false, 300]),
        json!(["BOOLEAN", true, 300]),
    ];
    assert_eq!(
        odd,
        want.map(|row| row.as_array().unwrap().clone()).to_vec()
    );
}

/// The events of [`rounds`] that `mmio_write: device == Uart && addr in
/// 0x10..0x20` keeps: every other type's, and mmio_write's of rounds 0,
/// 3, … 15 (Uart every third round, addresses 0x10 + i).
fn uart_below_0x20(rounds_fired: i64) -> Vec<(String, Vec<Value>)> {
    rounds(rounds_fired)
        .into_iter()
        .filter(|(probe, v)| {
            probe != "mmio_write" || (v[1] == "Uart" && v[2].as_i64() < Some(0x20))
        })
        .collect()
}

const UART_FILTER: &str = "mmio_write: device == Uart && addr in 0x10..0x20";

/// `--filter` on a declared type's enum (by name, in any case) and
/// address range, live (batched and per event) and reading a capture.
#[test]
fn filters_take_declared_enum_names_and_address_ranges() {
    let kept = events(&parse_jsonl(&read(&[
        "--filter",
        UART_FILTER,
        "-o",
        "jsonl",
    ])));
    assert_eq!(kept.iter().filter(|(p, _)| p == "mmio_write").count(), 6);
    assert_same(&kept, &uart_below_0x20(CAPTURED));
    let lower_case = "mmio_write: device == uart && addr in 0x10..0x20";
    for delivery in ["batched", "per-event"] {
        let name = format!("declared-filter-{delivery}");
        let args = ["--delivery", delivery, "--filter", lower_case];
        let (trace, stderr) = traced(&name, 60, &args);
        assert_same(&events(&trace), &uart_below_0x20(60));
        // 20 of 60 mmio_writes are Uart's, 6 of them below 0x20.
        let filtered_out = stderr.iter().any(|l| l.contains("(54 filtered out)"));
        assert!(filtered_out, "{delivery}: {stderr:#?}");
    }
    // A capture keeps what the filter keeps (batches split to be filtered).
    let raw = scratch("declared-filter-raw").join("run.styx");
    let mut prog = TestProg::start(&program(), &[]);
    let output = ["-o", "raw", "--output", raw.to_str().unwrap()];
    let loader =
        prog.attach_loader(&[&PROBES[..], &["--filter", UART_FILTER], &output[..]].concat());
    assert_eq!(prog.ask("fire 60").trim(), "fired 60");
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    let (status, stdout, stderr) = run_loader(&["read", raw.to_str().unwrap(), "-o", "jsonl"]);
    assert!(status.success(), "{stderr}");
    assert_same(&events(&parse_jsonl(&stdout)), &uart_below_0x20(60));
}

/// A filter naming a field the type does not have, or a name its enum
/// does not have, is one line that says what the type has.
#[test]
fn a_filter_on_what_a_declared_type_lacks_is_one_clear_line() {
    let capture = capture().to_str().unwrap();
    for (filter, error) in [
        (
            "mmio_write: device == Uartt",
            "at column 23: 'Uartt' is not a value of 'device' (Uart Timer Dma)",
        ),
        (
            "mmio_write: port == 1",
            "at column 13: mmio_write has no field 'port' (its fields: pc device addr val tid pid)",
        ),
    ] {
        let (status, stdout, stderr) = run_loader(&["read", capture, "--filter", filter]);
        assert!(!status.success() && stdout.is_empty());
        assert_eq!(
            stderr,
            format!("styx-loader: error: --filter '{filter}': {error}\n")
        );
    }
}

/// `read --by` a declared field: an enum keyed by its values' names, an
/// address in hex; as JSON, the enum's number and its name.
#[test]
fn read_by_a_declared_field_counts_per_value_by_name() {
    let table = read(&["--by", "device"]);
    let want = "\
EVENT                   DEVICE          COUNT   SHARE
mmio_write                Uart             10  33.33%
mmio_write               Timer             10  33.33%
mmio_write                 Dma             10  33.33%
";
    assert_eq!(table, want);
    let rows = parse_jsonl(&read(&["--by", "device", "-o", "jsonl"]));
    let keys: Vec<(u64, &str, u64)> = rows
        .iter()
        .map(|r| {
            assert_eq!(r["event"], "mmio_write", "{r}");
            let name = r["key_name"].as_str().unwrap();
            (
                r["key"].as_u64().unwrap(),
                name,
                r["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(keys, [(0, "Uart", 10), (1, "Timer", 10), (7, "Dma", 10)]);
    let by_addr = read(&["--by", "addr"]);
    let addresses: Vec<&str> = by_addr
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    let want: Vec<String> = (0..CAPTURED).map(|i| format!("{:#x}", 0x10 + i)).collect();
    assert_eq!(addresses, want);
}

/// `top --by device` on the running emulator (batched, and one hit per
/// event): exact counts per enum value.
#[test]
fn top_by_a_declared_enum_counts_each_value() {
    require_root();
    for delivery in ["batched", "per-event"] {
        let out = scratch(&format!("declared-top-{delivery}")).join("top.jsonl");
        let mut prog = TestProg::start(&program(), &[]);
        let pid = prog.pid().to_string();
        let mut args = vec!["top", "--pid", &pid, "--by", "device"];
        args.extend(jsonl_to(&out, delivery, &PROBES));
        let loader = attach_loader(&args);
        assert_eq!(prog.ask("fire 61").trim(), "fired 61");
        prog.quit();
        let (status, stderr) = loader.finish();
        assert!(status.success(), "{stderr:#?}");
        let rows: Vec<(String, String, u64)> = read_jsonl(&out)
            .iter()
            .map(|r| {
                let event = r["event"].as_str().unwrap().to_string();
                (
                    event,
                    r["key_name"].as_str().unwrap().to_string(),
                    r["count"].as_u64().unwrap(),
                )
            })
            .collect();
        let want = [("Uart", 21), ("Timer", 20), ("Dma", 20)];
        let want: Vec<(String, String, u64)> = want
            .iter()
            .map(|&(name, n)| ("mmio_write".to_string(), name.to_string(), n))
            .collect();
        assert_eq!(rows, want, "{delivery}");
    }
}

/// A flight-recorder trigger on a declared type's fields dumps the events
/// up to and including the first that matches: round 17's mmio_write
/// (Dma every third round from round 2, addresses 0x10 + i).
#[test]
fn a_flight_recorder_trigger_takes_declared_fields() {
    require_root();
    for delivery in ["batched", "per-event"] {
        let dir = scratch(&format!("declared-flight-{delivery}"));
        let out = dir.join("dump.jsonl");
        let mut prog = TestProg::start(&program(), &[]);
        let trigger = "mmio_write: device == dma && addr >= 0x20";
        let extra = [&PROBES[..], &["--flight-recorder", "8"]].concat();
        let mut args = jsonl_to(&out, delivery, &extra);
        args.extend(["--trigger", trigger]);
        let loader = prog.attach_loader(&args);
        assert_eq!(prog.ask("fire 30").trim(), "fired 30");
        // Batches come when the program flushes them, as it quits.
        prog.quit();
        let (status, stderr) = loader.finish();
        assert!(status.success(), "{stderr:#?}");
        let dumped_at_trigger = stderr
            .iter()
            .any(|l| l.contains("dump 1 (trigger: mmio_write)"));
        assert!(dumped_at_trigger, "{delivery}: {stderr:#?}");
        let dumped = events(&read_jsonl(&dir.join("dump.1.jsonl")));
        let trigger_at = 17 * PER_ROUND;
        assert_same(&dumped, &rounds(30)[trigger_at - 7..=trigger_at]);
    }
}
