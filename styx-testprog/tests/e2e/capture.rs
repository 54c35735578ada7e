//! End to end: raw captures of a real traced run, read back later with
//! `styx-loader read`, whole, cut short, or filled up to a full disk.

use crate::support::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// `styx-loader read FILE -o FORMAT`: (success, stdout, stderr).
fn read_capture(file: &Path, format: &str) -> (bool, String, String) {
    let (status, stdout, stderr) = run_loader(&["read", file.to_str().unwrap(), "-o", format]);
    (status.success(), stdout, stderr)
}

/// JSON lines without `ts_ns`, by thread.
fn by_thread(jsonl: &str) -> BTreeMap<u64, Vec<Value>> {
    by_tid(parse_jsonl(jsonl))
}

/// Every thread's events are the first of what it fired, in order.
fn assert_prefix_of_fired(got: &BTreeMap<u64, Vec<Value>>, fired: &BTreeMap<u64, Vec<Value>>) {
    for (tid, events) in got {
        let want = fired
            .get(tid)
            .unwrap_or_else(|| panic!("events from thread {tid}, which fired none"));
        assert!(events.len() <= want.len(), "thread {tid}: more than fired");
        for (i, (g, w)) in events.iter().zip(want).enumerate() {
            assert_eq!(g, w, "thread {tid}, event {i}");
        }
    }
}

#[test]
fn raw_capture_reads_back_as_the_jsonl_of_the_same_run() {
    require_root();
    let dir = scratch("capture-same-run");
    let expect = dir.join("fired.jsonl");
    let (jsonl, raw) = (dir.join("direct.jsonl"), dir.join("run.styx"));
    let mut prog = TestProg::spawn(Some(&expect));
    // One run, written both ways: -o jsonl, and the same events as a capture.
    let loader = prog.attach_loader(&[
        "-o",
        "jsonl",
        "--output",
        jsonl.to_str().unwrap(),
        "--capture",
        raw.to_str().unwrap(),
    ]);
    let fired = prog.fire(2000, 2);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "loader failed: {}", stderr.join("\n"));

    let direct = std::fs::read_to_string(&jsonl).unwrap();
    let (ok, converted, warnings) = read_capture(&raw, "jsonl");
    assert!(ok, "read failed: {warnings}");
    assert_eq!(warnings, "", "a complete capture reads without warnings");
    assert_eq!(direct.lines().count() as u64, fired.calls);
    assert!(
        converted == direct,
        "read of the capture differs from the direct jsonl"
    );
    // And both are what was fired.
    let fired_events = by_tid(read_jsonl(&expect));
    assert_eq!(by_thread(&converted), fired_events);

    // Text from the capture is the text of the same events.
    let (ok, text, _) = read_capture(&raw, "text");
    assert!(ok);
    assert_eq!(text.lines().count() as u64, fired.calls);
    assert!(text
        .lines()
        .any(|l| l.contains("mem_read") && l.contains("addr=0x40000000")));

    let size = std::fs::metadata(&raw).unwrap().len();
    assert!(
        size < fired.calls * 24,
        "{size} bytes for {} events",
        fired.calls
    );
}

#[test]
fn raw_output_keeps_the_run_and_its_header() {
    require_root();
    let dir = scratch("capture-raw");
    let (expect, raw) = (dir.join("fired.jsonl"), dir.join("run.styx"));
    let mut prog = TestProg::spawn(Some(&expect));
    let pid = prog.pid();
    let before = std::time::SystemTime::now();
    let loader = attach_loader(&[
        "--pid",
        &pid.to_string(),
        "-o",
        "raw",
        "--output",
        raw.to_str().unwrap(),
        "-e",
        "mem_read,mem_write,branch,span_begin,span_end,marker",
    ]);
    prog.fire(500, 3);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "loader failed: {}", stderr.join("\n"));

    let wanted = [
        "mem_read",
        "mem_write",
        "branch",
        "span_begin",
        "span_end",
        "marker",
    ];
    let mut fired = by_tid(read_jsonl(&expect));
    for events in fired.values_mut() {
        events.retain(|e| wanted.contains(&e["event"].as_str().unwrap()));
    }
    let (ok, jsonl, warnings) = read_capture(&raw, "jsonl");
    assert!(ok && warnings.is_empty(), "{warnings}");
    assert_eq!(by_thread(&jsonl), fired);

    // The header: who, where, and when in wall-clock time.
    let bytes = std::fs::read(&raw).unwrap();
    assert_eq!(&bytes[..8], b"STYXCAP\0");
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    assert_eq!(version, styx_events::CAPTURE_VERSION);
    let len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[16..16 + len]).unwrap();
    assert_eq!(header["pid"], pid);
    assert_eq!(header["kernel"].as_str().unwrap(), uname("-r"));
    assert_eq!(header["host"].as_str().unwrap(), uname("-n"));
    let mem_read = &header["events"][3];
    assert_eq!(mem_read["name"], "mem_read");
    let arg_names: Vec<&str> = mem_read["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(arg_names, ["pc", "addr", "val", "size"]);
    let since_epoch = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i128
    };
    let clock = &header["clock"];
    let first_ts: i128 = serde_json::from_str::<Value>(jsonl.lines().next().unwrap()).unwrap()
        ["ts_ns"]
        .as_u64()
        .unwrap()
        .into();
    let wall = first_ts - clock["monotonic_ns"].as_u64().unwrap() as i128
        + clock["realtime_ns"].as_u64().unwrap() as i128;
    let (start, now) = (
        since_epoch(before),
        since_epoch(std::time::SystemTime::now()),
    );
    assert!(
        start <= wall && wall <= now,
        "first event at {wall}, outside the run [{start}, {now}]"
    );
}

fn uname(flag: &str) -> String {
    let out = Command::new("uname").arg(flag).output().expect("uname");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn a_capture_of_a_killed_loader_reads_to_its_last_whole_record() {
    require_root();
    let dir = scratch("capture-killed");
    let (expect, raw) = (dir.join("fired.jsonl"), dir.join("run.styx"));
    let mut prog = TestProg::spawn(Some(&expect));
    let loader = prog.attach_loader(&["-o", "raw", "--output", raw.to_str().unwrap()]);
    // Until the capture holds blocks (written as they fill), then kill the
    // loader mid-stream: blocks it had not written yet are lost with it.
    eventually("the capture has blocks", || {
        prog.fire(3000, 2);
        blocks(&raw).len() >= 2
    });
    loader.signal(libc::SIGKILL);
    let _ = loader.finish();
    prog.quit();

    let (ok, jsonl, warnings) = read_capture(&raw, "jsonl");
    assert!(ok, "{warnings}");
    assert!(warnings.contains("was cut short"), "{warnings}");
    let read = jsonl.lines().count();
    // Every whole block's events, as their frames count them.
    let whole: u64 = blocks(&raw).iter().map(|b| b.events).sum();
    assert_eq!(read as u64, whole, "{warnings}");
    assert!(read > 1000, "{read} events");
    assert!(
        warnings.contains(&format!("read {read} events")),
        "{warnings}"
    );
    assert_prefix_of_fired(&by_thread(&jsonl), &by_tid(read_jsonl(&expect)));
}

/// An emulator that fires some events and then idles: while the loader
/// still runs, a reader of the growing capture finds every one (the block
/// holding them goes out once it has waited, no later event pushing it).
#[test]
fn an_idle_emulators_last_events_reach_the_growing_capture() {
    require_root();
    let dir = scratch("capture-idle");
    let (expect, raw) = (dir.join("fired.jsonl"), dir.join("run.styx"));
    let mut prog = TestProg::spawn(Some(&expect));
    let loader = prog.attach_loader(&["-o", "raw", "--output", raw.to_str().unwrap()]);
    prog.fire(50, 2);
    let fired = read_jsonl(&expect).len();
    assert!(fired > 100, "{fired} events");
    eventually("the idle run's events are all in the capture", || {
        let (_, jsonl, _) = read_capture(&raw, "jsonl");
        jsonl.lines().count() == fired
    });
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    prog.quit();
}

/// A capture's blocks (version 3 or 4), from their frames (codec, stored bytes,
/// events): a cut last one left out.
struct Frame {
    at: usize,
    len: usize,
    codec: u8,
    events: u64,
}

fn blocks(file: &Path) -> Vec<Frame> {
    let bytes = std::fs::read(file).unwrap_or_default();
    let mut out = Vec::new();
    let Some(len) = bytes.get(12..16) else {
        return out;
    };
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut at = 16 + u32::from_le_bytes(len.try_into().unwrap()) as usize;
    while at + 16 <= bytes.len() && at + 16 + word(at + 4) <= bytes.len() {
        let len = 16 + word(at + 4);
        let (codec, events) = (bytes[at], word(at + 12) as u64);
        out.push(Frame {
            at,
            len,
            codec,
            events,
        });
        at += len;
    }
    out
}

/// The demo run from its first instruction, every type into a capture
/// (the loader's `options` besides): the per-type counts its summary
/// gives, and the instructions it says it ran.
fn demo_capture(raw: &Path, options: &[&str]) -> (BTreeMap<String, u64>, usize) {
    let output = loader_command()
        .args(["-o", "raw", "--output"])
        .arg(raw)
        .args(options)
        .arg("--")
        .arg(demo_path())
        .args(["--program", "all"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let lines: Vec<String> = stderr.lines().map(String::from).collect();
    let summary = summary_of(&lines);
    assert_eq!(summary.dropped, 0, "{stderr}");
    let counts = summary.types.iter().map(|t| (t.name.clone(), t.events));
    let instructions = ["sieve", "sort", "fib", "squares"]
        .iter()
        .map(|p| crate::demo::instructions_of(&stdout, p))
        .sum();
    (counts.collect(), instructions)
}

/// Events per type in JSON lines.
fn count_types(jsonl: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in jsonl.lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        *counts
            .entry(event["event"].as_str().unwrap().to_string())
            .or_insert(0) += 1;
    }
    counts
}

#[test]
fn a_compressed_capture_holds_every_event_and_reads_alike_on_any_number_of_threads() {
    require_root();
    let dir = scratch("capture-compressed");
    let raw = dir.join("demo.styx");
    // Compressed while the workers keep up, stored when they fall behind.
    // They run at the lowest priority: on a machine whose CPUs other work
    // keeps busy (tests in parallel) a whole run may get none of them, and
    // every block is stored, as designed; a run that compresses nothing
    // three times over is a fault.
    let mut tries = 0;
    let (fired, instructions, frames) = loop {
        let (fired, instructions) = demo_capture(&raw, &[]);
        let frames = blocks(&raw);
        tries += 1;
        if frames.iter().any(|f| f.codec != 0) || tries == 3 {
            break (fired, instructions, frames);
        }
    };
    assert!(frames.len() >= 3, "{} blocks", frames.len());
    // zstd while the workers keep up, lz4 for a block taken while another
    // waits (`--compression auto`).
    assert!(
        frames.iter().any(|f| f.codec != 0),
        "compressed blocks, in {tries} runs"
    );
    assert!(
        frames.iter().all(|f| f.codec <= 2),
        "zstd, lz4 or stored blocks"
    );
    let events: u64 = fired.values().sum();
    assert_eq!(frames.iter().map(|f| f.events).sum::<u64>(), events);
    let packed = frames.iter().filter(|f| f.codec != 0);
    let (bytes, in_packed) = packed.fold((0, 0), |(b, e), f| (b + f.len as u64, e + f.events));
    assert!(
        bytes < in_packed * 2,
        "{bytes} bytes for {in_packed} events"
    );

    // Each type's count is what the loader wrote, and the instructions
    // are the demo's own count.
    let (status, jsonl, warnings) = run_loader(&["read", raw.to_str().unwrap(), "-o", "jsonl"]);
    assert!(status.success() && warnings.is_empty(), "{warnings}");
    assert_eq!(count_types(&jsonl), fired);
    assert_eq!(fired["insn_exec"], instructions as u64);

    // Every format, on one thread and on three: the same bytes (and the
    // same files beside them: Tenet writes one per thread). Parquet also
    // rolled in a directory of 1 MiB files: row groups of 64 Ki rows,
    // several encoded on the second thread, files ended there.
    let formats = [
        "jsonl", "text", "chrome", "perfetto", "drcov", "tenet", "parquet", "folded",
    ];
    let rolled = [("parquet-rolled", "parquet", vec!["--roll-size", "1"])];
    let cases = formats.iter().map(|&f| (f, f, vec![])).chain(rolled);
    for (name, format, options) in cases {
        let mut outputs = Vec::new();
        for threads in ["1", "3"] {
            let out = dir.join(format!("{name}-{threads}"));
            std::fs::create_dir_all(&out).unwrap();
            let file = match options.is_empty() {
                true => out.join(format!("out.{format}")),
                false => out.join(""),
            };
            let mut args = vec![
                "read",
                raw.to_str().unwrap(),
                "-o",
                format,
                "--output",
                file.to_str().unwrap(),
                "--threads",
                threads,
            ];
            args.extend(&options);
            let (status, _, stderr) = run_loader(&args);
            assert!(status.success(), "{format}, {threads} threads: {stderr}");
            let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&out)
                .unwrap()
                .map(|f| {
                    let f = f.unwrap();
                    let name = f.file_name().to_string_lossy().into_owned();
                    (name, std::fs::read(f.path()).unwrap())
                })
                .collect();
            files.sort();
            // Folded stacks are of traced functions, which this run has not.
            let empty = files.is_empty() || files[0].1.is_empty();
            assert_eq!(empty, format == "folded", "{name}");
            if !options.is_empty() {
                assert!(files.len() >= 2, "{name}: {} files", files.len());
            }
            outputs.push(files);
        }
        assert!(
            outputs[0] == outputs[1],
            "{name}: threads changed the output"
        );
    }

    // Cuts are made on the workers: on one thread and on three, the same
    // bytes; `-e` every event of its types and no other, a window some.
    let types = ["mem_read", "span_begin"];
    let (events, window) = (types.join(","), ["--from", "0.001", "--to", "0.003"]);
    let mut cuts = Vec::new();
    for cut in [&["-e", events.as_str()][..], &window[..]] {
        let mut outputs = Vec::new();
        for threads in ["1", "3"] {
            let mut args = vec!["read", raw.to_str().unwrap(), "-o", "jsonl"];
            args.extend(["--threads", threads]);
            args.extend(cut);
            let (status, jsonl, stderr) = run_loader(&args);
            assert!(status.success(), "{cut:?}, {threads} threads: {stderr}");
            outputs.push(jsonl);
        }
        assert!(
            outputs[0] == outputs[1],
            "{cut:?}: threads changed the output"
        );
        cuts.push(outputs.pop().unwrap());
    }
    let wanted: BTreeMap<String, u64> = (fired.iter())
        .filter(|(name, _)| types.contains(&name.as_str()))
        .map(|(name, &n)| (name.clone(), n))
        .collect();
    assert_eq!(wanted.len(), 2);
    assert_eq!(count_types(&cuts[0]), wanted);
    let in_window: u64 = count_types(&cuts[1]).values().sum();
    assert!(
        in_window > 0 && in_window < fired.values().sum::<u64>(),
        "{in_window} events in the window"
    );
}

/// `--compression zstd`, `lz4` and `none`: every event kept, in blocks of
/// that codec, or stored (a worker late at the lowest priority sees its
/// block stored); some of the codec's in one of three runs.
#[test]
fn each_compression_keeps_every_event_in_blocks_of_its_codec() {
    require_root();
    let dir = scratch("capture-each-compression");
    let raw = dir.join("demo.styx");
    for (compression, codec) in [("zstd", 1), ("lz4", 2), ("none", 0)] {
        let mut tries = 0;
        let (fired, instructions, frames) = loop {
            let (fired, instructions) = demo_capture(&raw, &["--compression", compression]);
            let frames = blocks(&raw);
            tries += 1;
            if frames.iter().any(|f| f.codec == codec) || tries == 3 {
                break (fired, instructions, frames);
            }
        };
        let codecs: BTreeSet<u8> = frames.iter().map(|f| f.codec).collect();
        assert!(
            codecs.contains(&codec) && codecs.iter().all(|&c| c == codec || c == 0),
            "{compression}: blocks of codecs {codecs:?}, in {tries} runs"
        );
        let events: u64 = fired.values().sum();
        assert_eq!(
            frames.iter().map(|f| f.events).sum::<u64>(),
            events,
            "{compression}"
        );
        let (status, jsonl, warnings) = run_loader(&["read", raw.to_str().unwrap(), "-o", "jsonl"]);
        assert!(status.success() && warnings.is_empty(), "{warnings}");
        assert_eq!(count_types(&jsonl), fired, "{compression}");
        assert_eq!(fired["insn_exec"], instructions as u64, "{compression}");
    }
}

/// A stream of one type whose values step like counters (styx-testprog's
/// `insn_exec`: pc, instruction word and length one on each round), with
/// `--compression zstd` and `lz4`: its batches are delta coded by the
/// workers, and every event reads back as fired. A worker late at the
/// lowest priority sees its block stored (the tests beside it can keep
/// the CPUs busy): the rounds come in four bursts a block each, cut while
/// the program pauses, and some are coded in one of three runs.
#[test]
fn one_type_batches_are_delta_coded_and_read_back_as_fired() {
    require_root();
    const BURSTS: u64 = 4;
    const ROUNDS: u64 = 2000;
    let dir = scratch("capture-delta-coded");
    let (expect, raw) = (dir.join("fired.jsonl"), dir.join("run.styx"));
    for compression in ["zstd", "lz4"] {
        let mut tries = 0;
        let (calls, coded) = loop {
            let mut prog = TestProg::spawn(Some(&expect));
            let raw_arg = raw.to_str().unwrap();
            let options = ["-e", "insn_exec", "-o", "raw", "--output", raw_arg];
            let loader =
                prog.attach_loader(&[&options[..], &["--compression", compression]].concat());
            let mut calls = 0;
            for _ in 0..BURSTS {
                calls += prog.fire(ROUNDS, 2).calls;
                // Past the age at which a waiting block is cut.
                std::thread::sleep(std::time::Duration::from_millis(400));
            }
            prog.quit();
            let (status, stderr) = loader.finish();
            assert!(status.success(), "{compression}: {}", stderr.join("\n"));
            let mut reader = styx_events::Reader::open(std::fs::File::open(&raw).unwrap()).unwrap();
            while reader.next().unwrap().is_some() {}
            assert_eq!(reader.malformed_batches, 0, "{compression}");
            // One insn_exec a round on each thread.
            assert_eq!(reader.events, BURSTS * ROUNDS * 2, "{compression}");
            tries += 1;
            if reader.delta_coded_batches > 0 || tries == 3 {
                break (calls, reader.delta_coded_batches);
            }
        };
        assert!(
            coded > 0,
            "{compression}: no delta coded batch in {tries} runs"
        );
        let insns: Vec<Value> = read_jsonl(&expect)
            .into_iter()
            .filter(|e| e["event"] == "insn_exec")
            .collect();
        assert_eq!(
            insns.len() as u64,
            BURSTS * ROUNDS * 2,
            "{compression}: {calls} calls"
        );
        let (ok, converted, warnings) = read_capture(&raw, "jsonl");
        assert!(ok && warnings.is_empty(), "{compression}: {warnings}");
        assert_eq!(by_thread(&converted), by_tid(insns), "{compression}");
    }
}

#[test]
fn a_capture_cut_in_a_block_reads_every_whole_block_and_says_what_it_lost() {
    require_root();
    let dir = scratch("capture-cut-block");
    let raw = dir.join("demo.styx");
    demo_capture(&raw, &[]);
    let (status, whole, _) = run_loader(&["read", raw.to_str().unwrap(), "-o", "jsonl"]);
    assert!(status.success());
    let frames = blocks(&raw);
    // Inside the last block (with its events and the END record).
    let last = frames.last().unwrap();
    let bytes = std::fs::read(&raw).unwrap();
    let cut = dir.join("cut.styx");
    std::fs::write(&cut, &bytes[..last.at + last.len / 2]).unwrap();
    let kept: u64 = frames[..frames.len() - 1].iter().map(|f| f.events).sum();
    for threads in ["1", "2"] {
        let (status, part, warnings) = run_loader(&[
            "read",
            cut.to_str().unwrap(),
            "-o",
            "jsonl",
            "--threads",
            threads,
        ]);
        assert!(status.success(), "{warnings}");
        assert_eq!(part.lines().count() as u64, kept, "{warnings}");
        assert!(whole.starts_with(&part), "a cut capture reads as a prefix");
        let said = format!(
            "read {kept} events up to byte {}; the last {} bytes, part of a block of {} events, were dropped",
            last.at,
            last.len / 2,
            last.events
        );
        assert!(warnings.contains(&said), "{warnings}");
    }
}

#[test]
fn bad_captures_are_refused_plainly() {
    require_root();
    let dir = scratch("capture-bad");
    let (not_capture, newer) = (dir.join("a.jsonl"), dir.join("newer.styx"));
    std::fs::write(&not_capture, "{\"ts_ns\":1}\n").unwrap();
    let (ok, _, stderr) = read_capture(&not_capture, "jsonl");
    assert!(!ok && stderr.contains("not a styx capture"), "{stderr}");

    // A real capture with a version this loader does not know.
    let raw = dir.join("run.styx");
    let mut prog = TestProg::spawn(None);
    let loader = prog.attach_loader(&["-o", "raw", "--output", raw.to_str().unwrap()]);
    prog.fire(10, 1);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    let mut bytes = std::fs::read(&raw).unwrap();
    let newer_version = styx_events::CAPTURE_VERSION + 1;
    bytes[8..12].copy_from_slice(&newer_version.to_le_bytes());
    std::fs::write(&newer, &bytes).unwrap();
    let (ok, _, stderr) = read_capture(&newer, "jsonl");
    let says = format!(
        "capture format version {newer_version}; this styx-loader reads versions 1 to {}",
        styx_events::CAPTURE_VERSION
    );
    assert!(!ok && stderr.contains(&says), "{stderr}");
    // (Versions 1 and 2, which no loader writes now, are read by the
    // reader's unit tests from captures their writer makes.)
    let (ok, _, stderr) = read_capture(&dir.join("missing.styx"), "jsonl");
    assert!(!ok && stderr.contains("cannot open"), "{stderr}");
}

/// A small tmpfs, unmounted however the test ends.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("running mount");
        assert!(status.success(), "mounting a tmpfs on {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_stops_with_a_clear_error_and_a_readable_capture() {
    require_root();
    let dir = scratch("capture-full");
    let expect = dir.join("fired.jsonl");
    let disk = Tmpfs::mount(&dir.join("small"), "2m");
    let raw = disk.0.join("run.styx");
    let mut prog = TestProg::spawn(Some(&expect));
    // Stored blocks (1 MiB): compressed, these events would fit.
    let loader = prog.attach_loader(&[
        "-o",
        "raw",
        "--compression",
        "none",
        "--output",
        raw.to_str().unwrap(),
    ]);
    // ~50,000 events: more than 2 MiB holds.
    let (status, stderr) = loader.finish_after(|| prog.fire(2000, 2)).unwrap();
    prog.quit();

    assert!(!status.success(), "a full disk must fail the run");
    let error = stderr
        .iter()
        .find(|l| l.contains("error:"))
        .unwrap_or_else(|| panic!("no error in {stderr:?}"));
    assert!(
        error.contains(&format!("writing events to {}", raw.display()))
            && error.contains("No space left on device"),
        "{error}"
    );
    assert!(
        summary_of(&stderr).line.contains("output failed"),
        "{stderr:?}"
    );

    let size = std::fs::metadata(&raw).unwrap().len();
    assert!(size > 1 << 20, "the disk was filled: {size} bytes");
    let (ok, jsonl, warnings) = read_capture(&raw, "jsonl");
    assert!(ok, "{warnings}");
    assert!(warnings.contains("was cut short"), "{warnings}");
    let read = jsonl.lines().count();
    // The test program flushes its batch before each of its per-event
    // types fires, several times a round: small batch records, ~100 bytes
    // an event here.
    assert!(read > 500, "{read} events in {size} bytes");
    assert_prefix_of_fired(&by_thread(&jsonl), &by_tid(read_jsonl(&expect)));
    drop(disk);
}

#[test]
fn a_closed_main_output_leaves_the_capture_whole() {
    require_root();
    let dir = scratch("capture-closed-output");
    let raw = dir.join("run.styx");
    let mut prog = TestProg::spawn(None);
    let pid = prog.pid().to_string();
    // `-o jsonl --capture FILE | head -n 1`
    let mut loader = spawn_loader(
        &[
            "--pid",
            &pid,
            "-o",
            "jsonl",
            "--capture",
            raw.to_str().unwrap(),
        ],
        std::process::Stdio::piped(),
    );
    loader.wait_for_line("attached").unwrap();
    prog.fire(2000, 2);
    let mut reader = std::io::BufReader::new(loader.child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut reader, &mut first).unwrap();
    drop(reader);
    let (status, stderr) = loader.finish_after(|| prog.fire(10, 1)).unwrap();
    prog.quit();
    assert!(status.success(), "{status}: {}", stderr.join("\n"));
    assert!(!stderr.iter().any(|l| l.contains("error")), "{stderr:?}");
    let summary = summary_of(&stderr);
    assert!(summary.line.contains("output closed"), "{stderr:?}");
    assert!(summary.events > 1, "{stderr:?}");

    // Every event the loader counted as written is in the capture, and it
    // ends with its END record.
    let (ok, jsonl, warnings) = read_capture(&raw, "jsonl");
    assert!(ok, "{warnings}");
    assert!(!warnings.contains("cut short"), "{warnings}");
    assert_eq!(warnings, "", "a complete capture reads without warnings");
    assert_eq!(jsonl.lines().count() as u64, summary.events, "{stderr:?}");
    assert_eq!(
        serde_json::from_str::<Value>(jsonl.lines().next().unwrap()).unwrap(),
        serde_json::from_str::<Value>(&first).unwrap(),
        "the capture starts with the line the pipe read"
    );
}
