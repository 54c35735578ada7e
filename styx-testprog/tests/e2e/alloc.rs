//! The emulator's heap (`styx_alloc::TracedAllocator`, styx-alloc): its
//! events are exactly the allocations the program makes, each with its
//! size, alignment and address, and the caller a return address inside
//! the function that made it.

use crate::support::*;
use object::{Object, ObjectSymbol};
use serde_json::Value;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn program() -> PathBuf {
    beside_testprog("styx-alloc", "styx-alloc")
}

/// Blocks `known_allocations` makes (see styx-alloc).
const BLOCKS: u64 = 40;

/// Where styx-alloc's `known_allocations` is while it runs: its start
/// as the program prints it, its length from the symbol table.
fn known_range(binary: &Path, start: u64) -> Range<u64> {
    let data = std::fs::read(binary).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let symbol = elf
        .symbols()
        .find(|s| s.name().is_ok_and(|n| n.contains("known_allocations")))
        .expect("known_allocations in the symbol table");
    assert!(symbol.size() > 0);
    start..start + symbol.size()
}

/// A run of styx-alloc traced while it makes its known allocations.
struct Traced {
    events: Vec<Value>,
    /// Where `known_allocations` was.
    known: Range<u64>,
    /// The loader's.
    stderr: Vec<String>,
    /// What the loader wrote (jsonl, or a raw capture).
    output: PathBuf,
}

/// styx-alloc traced with `--probes 'styx_alloc:*'` and `args`.
fn traced(name: &str, args: &[&str]) -> Traced {
    traced_after(name, args, &[])
}

/// [`traced`], the loader attached once styx-alloc has answered `before`.
fn traced_after(name: &str, args: &[&str], before: &[(&str, &str)]) -> Traced {
    require_root();
    let dir = scratch(name);
    let raw = args.contains(&"raw");
    let out = dir.join(if raw { "run.styx" } else { "out.jsonl" });
    let mut prog = TestProg::start(&program(), &[]);
    for (command, answer) in before {
        assert_eq!(prog.ask(command).trim(), *answer, "{command}");
    }
    let mut all = vec![
        "--probes",
        "styx_alloc:*",
        "--output",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let loader = prog.attach_loader(&all);
    let answer = prog.ask("where");
    let start = answer.trim().strip_prefix("known 0x").expect("known ADDR");
    let known = known_range(&program(), u64::from_str_radix(start, 16).unwrap());
    assert_eq!(
        prog.ask(&format!("allocate {BLOCKS}")).trim(),
        format!("allocated {BLOCKS}")
    );
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    let events = if raw {
        let (status, stdout, stderr) = run_loader(&["read", out.to_str().unwrap(), "-o", "jsonl"]);
        assert!(status.success() && stderr.is_empty(), "{stderr}");
        parse_jsonl(&stdout)
    } else {
        read_jsonl(&out)
    };
    Traced {
        events,
        known,
        stderr,
        output: out,
    }
}

fn number(event: &Value, field: &str) -> u64 {
    event[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no {field} in {event}"))
}

fn is_zeroed(alloc: &Value) -> bool {
    alloc["zeroed"]
        .as_bool()
        .unwrap_or_else(|| panic!("no zeroed in {alloc}"))
}

/// Checks `trace` is what styx-alloc's `known_allocations(BLOCKS)` makes,
/// in order, besides what the rest of the program allocates.
fn assert_known_allocations(trace: &[Value], known: &Range<u64>) {
    for event in trace {
        assert_eq!(event["event"], "usdt", "{event}");
        assert_eq!(event["provider"], "styx_alloc", "{event}");
    }
    let inside: Vec<&Value> = trace
        .iter()
        .filter(|e| known.contains(&number(e, "caller")))
        .collect();
    let n = BLOCKS as usize;
    assert_eq!(inside.len(), n + 1 + n + 2 * n + 2, "{inside:#?}");
    let (blocks, rest) = inside.split_at(n);
    let (grown, rest) = rest.split_first().unwrap();
    let (freed, rest) = rest.split_at(n);
    let (vecs, zeroed_block) = rest.split_at(2 * n);

    let mut addrs = Vec::new();
    for (i, e) in blocks.iter().enumerate() {
        assert_eq!(e["probe"], "alloc", "{e}");
        assert_eq!(
            (number(e, "size"), number(e, "align"), is_zeroed(e)),
            (1000 + i as u64, 64, false),
            "{e}"
        );
        assert!(
            number(e, "addr").is_multiple_of(64) && number(e, "addr") != 0,
            "{e}"
        );
        addrs.push(number(e, "addr"));
    }
    assert_eq!(grown["probe"], "realloc", "{grown}");
    assert_eq!(
        (
            number(grown, "old_addr"),
            number(grown, "old_size"),
            number(grown, "size"),
            number(grown, "align")
        ),
        (addrs[0], 1000, 5000, 64),
        "{grown}"
    );
    addrs[0] = number(grown, "addr");
    for (i, e) in freed.iter().enumerate() {
        let size = if i == 0 { 5000 } else { 1000 + i as u64 };
        assert_eq!(e["probe"], "dealloc", "{e}");
        assert_eq!(
            (number(e, "size"), number(e, "align"), number(e, "addr")),
            (size, 64, addrs[i]),
            "{e}"
        );
    }
    for (i, pair) in vecs.chunks(2).enumerate() {
        let (made, dropped) = (pair[0], pair[1]);
        assert_eq!(
            (&made["probe"], &dropped["probe"]),
            (&"alloc".into(), &"dealloc".into())
        );
        for e in pair {
            assert_eq!(
                (number(e, "size"), number(e, "align")),
                (3000 + i as u64, 1),
                "{e}"
            );
        }
        assert!(!is_zeroed(made), "{made}");
        assert_eq!(number(made, "addr"), number(dropped, "addr"));
    }

    let (made, freed_zeroed) = (zeroed_block[0], zeroed_block[1]);
    assert_eq!(
        (&made["probe"], &freed_zeroed["probe"]),
        (&"alloc".into(), &"dealloc".into())
    );
    assert_eq!(
        (number(made, "size"), number(made, "align"), is_zeroed(made)),
        (6000, 64, true),
        "{made}"
    );
    assert_eq!(
        (number(freed_zeroed, "size"), number(freed_zeroed, "addr")),
        (6000, number(made, "addr"))
    );

    // Each loop's calls are one call site (a loop's first pass may be
    // peeled off by an optimizer: the frees' is left out), the loops'
    // sites differ.
    let site = |events: &[&Value]| -> u64 {
        let mut callers: Vec<u64> = events.iter().map(|e| number(e, "caller")).collect();
        callers.dedup();
        assert_eq!(callers.len(), 1, "one call site: {events:#?}");
        callers[0]
    };
    let made_vecs: Vec<&Value> = vecs.iter().step_by(2).copied().collect();
    let dropped_vecs: Vec<&Value> = vecs.iter().skip(1).step_by(2).copied().collect();
    let mut sites: Vec<u64> = [blocks, &freed[1..], &made_vecs, &dropped_vecs]
        .into_iter()
        .map(site)
        .collect();
    sites.sort();
    sites.dedup();
    assert_eq!(sites.len(), 4, "{sites:x?}");

    // And no allocation of the known ones is put elsewhere.
    let known_shape = |e: &Value| {
        let (size, align) = (e["size"].as_u64(), e["align"].as_u64());
        align == Some(64)
            && size.is_some_and(|s| (1000..1000 + BLOCKS).contains(&s) || s == 5000 || s == 6000)
            || align == Some(1) && size.is_some_and(|s| (3000..3000 + BLOCKS).contains(&s))
    };
    assert_eq!(
        trace.iter().filter(|e| known_shape(e)).count(),
        inside.iter().filter(|e| known_shape(e)).count()
    );
}

/// Batched (the default): one flush site and the three types'
/// batch-enable sites.
#[test]
fn traced_allocator_events_are_the_known_allocations() {
    let run = traced("alloc-batched", &["-o", "jsonl"]);
    assert!(
        run.stderr
            .iter()
            .any(|l| l.contains("attached 4 probe sites")),
        "{:#?}",
        run.stderr
    );
    assert_known_allocations(&run.events, &run.known);
}

/// One hit per event gives the same events.
#[test]
fn traced_allocator_events_per_event() {
    let run = traced(
        "alloc-per-event",
        &["-o", "jsonl", "--delivery", "per-event"],
    );
    assert!(
        run.stderr
            .iter()
            .any(|l| l.contains("attached 3 probe sites")),
        "{:#?}",
        run.stderr
    );
    assert_known_allocations(&run.events, &run.known);
}

/// A raw capture keeps the allocator's types: `read` gives the same
/// events, and `read --by caller` answers who allocates most: the known
/// function's two allocating loops, `BLOCKS` each, ahead of every other
/// call site.
#[test]
fn traced_allocator_capture_reads_back_and_counts_by_caller() {
    let run = traced("alloc-capture", &["-o", "raw"]);
    assert_known_allocations(&run.events, &run.known);
    by_caller_names_the_known_callers(run.output.to_str().unwrap(), &run.known);
}

/// A data file the process has mapped when the loader attaches (as the
/// dynamic loader maps `/etc/ld.so.cache` during a `dlopen`) is not among
/// the files that name its code: `read --by caller` names the callers,
/// with nothing to say about the data file.
#[test]
fn a_mapped_data_file_leaves_the_callers_named() {
    let data = scratch("alloc-data-file").join("ld.so.cache");
    std::fs::write(&data, b"glibc-ld.so.cache1.1\0 not code".repeat(200)).unwrap();
    let map = format!("map {}", data.display());
    let run = traced_after("alloc-data-file-run", &["-o", "raw"], &[(&map, "mapped")]);
    by_caller_names_the_known_callers(run.output.to_str().unwrap(), &run.known);
}

/// Started by the loader (`-- CMD`), styx-alloc maps its files only after
/// the capture opened: the loader waits for its `exec` before the capture
/// writes its header, which then says where, and `read --by caller` names
/// the known function's call sites as for a running process.
#[test]
fn a_command_the_loader_starts_has_its_heap_callers_named() {
    require_root();
    let dir = scratch("alloc-command");
    let out = dir.join("run.styx");
    let mut loader = loader_command()
        .args(["--probes", "styx_alloc:*", "-o", "raw", "--output"])
        .arg(&out)
        .arg("--")
        .arg(program())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting styx-loader");
    let commands = format!("where\nallocate {BLOCKS}\nquit\n");
    let mut stdin = loader.stdin.take().expect("stdin");
    stdin.write_all(commands.as_bytes()).unwrap();
    drop(stdin);
    let output = loader.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("callers stay addresses"), "{stderr}");
    let answers = String::from_utf8_lossy(&output.stdout);
    let start = (answers.lines())
        .find_map(|l| l.strip_prefix("known 0x"))
        .unwrap_or_else(|| panic!("no known ADDR in {answers:?}"));
    let known = known_range(&program(), u64::from_str_radix(start, 16).unwrap());
    by_caller_names_the_known_callers(out.to_str().unwrap(), &known);
}

/// `read CAPTURE --by caller`: the known function's two allocating loops,
/// `BLOCKS` each, ahead of every other call site, each named by its
/// function and the offset into it from the executable the capture's
/// header says the process mapped.
fn by_caller_names_the_known_callers(capture: &str, known: &Range<u64>) {
    let (status, stdout, stderr) = run_loader(&["read", capture, "--by", "caller", "-o", "jsonl"]);
    assert!(status.success() && stderr.is_empty(), "{stderr}");
    let rows: Vec<(u64, u64)> = parse_jsonl(&stdout)
        .iter()
        .filter(|row| row["event"] == "alloc")
        .map(|row| (number(row, "key"), number(row, "count")))
        .collect();
    let (top, rest) = rows.split_at(2);
    for &(caller, count) in top {
        assert!(known.contains(&caller) && count == BLOCKS, "{rows:x?}");
    }
    assert_ne!(top[0].0, top[1].0);
    assert!(rest.iter().all(|&(_, count)| count < BLOCKS), "{rows:x?}");
    // Each caller is named by its function and the offset into it, from
    // the executable the capture's header says the process mapped.
    let named: Vec<(u64, String)> = parse_jsonl(&stdout)
        .iter()
        .filter(|row| row["event"] == "alloc")
        .take(2)
        .map(|row| {
            (
                number(row, "key"),
                row["key_name"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    for (caller, name) in &named {
        let offset = caller - known.start;
        assert_eq!(*name, format!("styx_alloc::known_allocations+{offset:#x}"));
    }
    let (status, text, stderr) = run_loader(&["read", capture, "--by", "caller"]);
    assert!(status.success() && stderr.is_empty(), "{stderr}");
    assert!(
        text.contains(&named[0].1) && text.contains(&named[1].1),
        "{text}"
    );
}

/// Perfetto draws the heap: a counter track of the bytes allocated, net,
/// since tracing began, one value per event that changed it, as the
/// capture's events add up (an allocation its size, a free less its size,
/// a reallocation the difference, a failed one nothing).
#[test]
fn perfetto_draws_the_heap_as_its_events_add_up() {
    let run = traced("alloc-perfetto", &["-o", "raw"]);
    let out = run.output.with_extension("pftrace");
    let (status, _, stderr) = run_loader(&[
        "read",
        run.output.to_str().unwrap(),
        "-o",
        "perfetto",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(status.success(), "{stderr}");
    let decoded = crate::pftrace::decode(&std::fs::read(&out).unwrap());
    let tracks: Vec<u64> = (decoded.tracks.iter())
        .filter(|(_, t)| t.name == "heap bytes allocated (net, since tracing began)")
        .map(|(&uuid, _)| uuid)
        .collect();
    assert_eq!(tracks.len(), 1, "one process, one heap track");
    let drawn: Vec<i64> = (decoded.events.iter())
        .filter(|e| e.track == tracks[0])
        .map(|e| e.counter_value.expect("a counter"))
        .collect();
    assert_eq!(drawn, heap_after_each_change(&run.events));
}

/// The heap's net bytes after each event of `events` that changed them:
/// an allocation its size, a free less its size, a reallocation the
/// difference, a failed one nothing.
fn heap_after_each_change(events: &[Value]) -> Vec<i64> {
    let mut net = 0i64;
    let mut want = Vec::new();
    for e in events {
        let signed = |field| number(e, field) as i64;
        let delta = match e["probe"].as_str().unwrap() {
            "alloc" if signed("addr") != 0 => signed("size"),
            "dealloc" => -signed("size"),
            "realloc" if signed("addr") != 0 => signed("size") - signed("old_size"),
            _ => 0,
        };
        if delta != 0 {
            net += delta;
            want.push(net);
        }
    }
    // The known allocations alone change it 4 × BLOCKS + 3 times.
    assert!(want.len() as u64 > 4 * BLOCKS + 2, "{want:?}");
    want
}

/// Chrome's JSON draws the same counter, its value in `args.bytes`.
#[test]
fn chrome_draws_the_heap_as_its_events_add_up() {
    let run = traced("alloc-chrome", &["-o", "raw"]);
    let out = run.output.with_extension("json");
    let (status, _, stderr) = run_loader(&[
        "read",
        run.output.to_str().unwrap(),
        "-o",
        "chrome",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(status.success(), "{stderr}");
    let trace: Vec<Value> = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let drawn: Vec<i64> = trace
        .iter()
        .filter(|e| {
            e["ph"] == "C" && e["name"] == "heap bytes allocated (net, since tracing began)"
        })
        .map(|e| e["args"]["bytes"].as_i64().unwrap())
        .collect();
    assert_eq!(drawn, heap_after_each_change(&run.events));
}

/// A thread's thread-local freeing a block as the thread exits, after
/// the thread's batch was flushed and released (styx-alloc's
/// `thread-start`): the block's events arrive, on the thread's id, and the
/// program neither hangs nor recurses.
#[test]
fn traced_allocator_sees_a_thread_local_freed_at_thread_exit() {
    require_root();
    let out = scratch("alloc-thread-exit").join("out.jsonl");
    let mut prog = TestProg::start(&program(), &[]);
    assert_eq!(prog.ask("thread-start").trim(), "started");
    let loader = prog.attach_loader(&[
        "--probes",
        "styx_alloc:*",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ]);
    let answer = prog.ask("thread-join");
    let tid: u64 = answer
        .trim()
        .strip_prefix("joined ")
        .unwrap()
        .parse()
        .unwrap();
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    let held: Vec<Value> = read_jsonl(&out)
        .into_iter()
        .filter(|e| e["size"] == 7000 && e["align"] == 1)
        .collect();
    assert_eq!(held.len(), 2, "{held:#?}");
    assert_eq!(
        (&held[0]["probe"], &held[1]["probe"]),
        (&"alloc".into(), &"dealloc".into())
    );
    assert_eq!(held[0]["addr"], held[1]["addr"]);
    assert!(held.iter().all(|e| number(e, "tid") == tid), "{held:#?}");
}

/// `list` shows the allocator's types with their fields, in a program
/// that installs it, and nothing of them (not even notes left by discarded
/// code) in one that does not depend on styx-alloc.
#[test]
fn list_shows_the_allocators_types_only_where_linked() {
    let (declared, stdout) = listed_declared(&program(), "styx_alloc:*");
    assert_eq!(
        declared,
        [
            "alloc(size: u64, align: u64, addr: Addr<u64>, caller: Addr<u64>, zeroed: bool)",
            "dealloc(size: u64, align: u64, addr: Addr<u64>, caller: Addr<u64>)",
            "realloc(old_addr: Addr<u64>, old_size: u64, addr: Addr<u64>, size: u64, align: u64, caller: Addr<u64>)",
        ],
        "{stdout}"
    );
    let other = beside_testprog("styx-declared", "styx-testprog");
    let (status, stdout, stderr) = run_loader(&["list", other.to_str().unwrap()]);
    assert!(status.success(), "{stderr}");
    let allocators = ["styx_alloc:", ":alloc", ":dealloc", ":realloc"];
    assert!(
        !stdout
            .lines()
            .any(|l| allocators.iter().any(|a| l.contains(a)))
            && stderr.is_empty(),
        "{stdout}{stderr}"
    );
}
