//! Batched delivery (the default): every event arrives, exactly and in
//! order, however its batch is handed over (full, `flush()`, thread exit,
//! process exit, the loader stopping); both delivery modes give the same
//! events; a full ring counts lost events per type (`--on-full drop`);
//! waiting for room (the default writing a file, `--lossless`) loses
//! none and cannot hold the emulator once the loader is killed.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use styx_common::batch::BATCH_BYTES;

/// A test program and a loader tracing it (`--pid`) into JSON lines.
struct Traced {
    prog: TestProg,
    loader: Loader,
    expect: PathBuf,
    out: PathBuf,
}

fn traced(name: &str, loader_args: &[&str]) -> Traced {
    require_root();
    let dir = scratch(name);
    let (expect, out) = (dir.join("expected.jsonl"), dir.join("traced.jsonl"));
    let prog = TestProg::spawn(Some(&expect));
    let mut args = vec!["-o", "jsonl", "--output", out.to_str().unwrap()];
    args.extend_from_slice(loader_args);
    let loader = prog.attach_loader(&args);
    Traced {
        prog,
        loader,
        expect,
        out,
    }
}

#[test]
fn full_batches_flush_and_thread_exits_hand_over_every_event_in_order() {
    let Traced {
        mut prog,
        loader,
        expect,
        out,
    } = traced("batched-handover", &["-e", BATCHED]);
    // ~8,100 events a thread, ~240 KB: several full batches, then part of
    // one, which waits until the threads exit.
    let parked = prog.fire_by("park 900 2");
    assert_eq!(parked.evaluated, 2 * 900 * 8, "the 8 batched types only");
    eventually("full batches arrive while the threads wait", || {
        lines_in(&out) >= 2 * 2 * BATCH_BYTES / 32
    });
    assert!(lines_in(&out) < parked.evaluated as usize, "the rest waits");
    prog.ask("unpark");
    eventually("thread exits hand over the rest", || {
        lines_in(&out) == parked.evaluated as usize
    });
    // styx_probe::flush(): the main thread's events arrive while it lives.
    let main = prog.fire_by("fire-main 40");
    assert!(
        (main.evaluated as usize) < BATCH_BYTES / 32,
        "less than a batch"
    );
    assert_eq!(prog.ask("flush").trim(), "flushed");
    eventually("flush() hands them over", || {
        lines_in(&out) == (parked.evaluated + main.evaluated) as usize
    });
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    let n = assert_every_event_arrived(&expect, &out);
    let summary = summary_of(&stderr).line;
    assert!(summary.contains(&format!("{n} events")), "{summary}");
    assert!(summary.contains("; 0 dropped"), "{summary}");
}

/// Three parked threads and the main thread, each with part of a batch,
/// then the process ends by `how`: every event arrives.
fn process_exit_hands_over_every_threads_batch(name: &str, how: impl FnOnce(TestProg)) {
    let Traced {
        mut prog,
        loader,
        expect,
        out,
    } = traced(name, &["-e", BATCHED]);
    prog.fire_by("park 40 3");
    prog.fire_by("fire-main 30");
    assert_eq!(lines_in(&out), 0, "all still in partial batches");
    how(prog);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    assert_eq!(assert_every_event_arrived(&expect, &out), (3 * 40 + 30) * 8);
}

#[test]
fn returning_from_main_hands_over_every_threads_batch() {
    // The exit handler flushes the parked threads' batches too.
    process_exit_hands_over_every_threads_batch("batched-return", TestProg::quit);
}

#[test]
fn exit_from_another_thread_hands_over_every_threads_batch() {
    process_exit_hands_over_every_threads_batch("batched-exit", |mut prog| {
        prog.send_only("exit-thread 7");
        let status = prog.child.wait().unwrap();
        assert_eq!(status.code(), Some(7));
    });
}

#[test]
fn stopping_the_loader_takes_the_batches_threads_still_hold() {
    let Traced {
        mut prog,
        loader,
        expect,
        out,
    } = traced("batched-stop", &["-e", BATCHED]);
    // Idle threads, each with part of a batch, and the main thread too.
    prog.fire_by("park 40 2");
    prog.fire_by("fire-main 30");
    assert_eq!(lines_in(&out), 0);
    let stopped = Instant::now();
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    assert!(stopped.elapsed() < Duration::from_secs(2));
    let n = assert_every_event_arrived(&expect, &out);
    assert_eq!(n, (2 * 40 + 30) * 8);

    // The program goes on; a second loader gets what is fired from then
    // on, and nothing the first one took.
    let (expect2, out2) = (
        out.with_file_name("expected2"),
        out.with_file_name("traced2"),
    );
    let loader = prog.attach_loader(&[
        "-e",
        BATCHED,
        "-o",
        "jsonl",
        "--output",
        out2.to_str().unwrap(),
    ]);
    let before = read_jsonl(&expect).len();
    prog.fire_by("fire-main 10");
    prog.ask("unpark");
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    let fired: Vec<Value> = read_jsonl(&expect).split_off(before);
    std::fs::write(
        &expect2,
        fired.iter().map(|v| format!("{v}\n")).collect::<String>(),
    )
    .unwrap();
    assert_eq!(assert_every_event_arrived(&expect2, &out2), 10 * 8);
}

/// Two loaders on one process: the one stopped first leaves the batches
/// idle threads hold to the other (taking them, it took them from the
/// other too: the kernel raises a semaphore once however many tracers
/// attach), and says so; the other takes them when it stops: every event.
/// The first is a flight recorder, whose dump before it stops reads those
/// batches without taking them.
#[test]
fn a_loader_stopped_beside_another_leaves_it_the_batches_threads_hold() {
    let Traced {
        mut prog,
        loader,
        expect,
        out,
    } = traced("batched-beside", &["-e", BATCHED]);
    let dumps = out.with_file_name("dump.jsonl");
    let mut second = prog.attach_loader(&[
        "-e",
        BATCHED,
        "--flight-recorder",
        "1000",
        "-o",
        "jsonl",
        "--output",
        dumps.to_str().unwrap(),
    ]);
    // Idle threads, each with part of a batch, and the main thread too.
    prog.fire_by("park 40 2");
    prog.fire_by("fire-main 30");
    second.signal(libc::SIGUSR1);
    second.wait_for_line("dump 1").unwrap();
    let dumped = read_jsonl(&dumps.with_file_name("dump.1.jsonl"));
    assert_eq!(dumped.len(), (2 * 40 + 30) * 8, "the dump has them all");
    second.signal(libc::SIGINT);
    let (status, stderr) = second.finish();
    assert!(status.success(), "{stderr:?}");
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("another tracer has batched events enabled in pid")),
        "{stderr:?}"
    );
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    assert_eq!(assert_every_event_arrived(&expect, &out), (2 * 40 + 30) * 8);
    prog.ask("unpark");
    prog.quit();
}

#[test]
fn eight_threads_at_once_lose_nothing() {
    let Traced {
        mut prog,
        loader,
        expect,
        out,
    } = traced("batched-eight", &["-e", BATCHED]);
    let fired = prog.fire(1500, 8);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    assert_eq!(
        assert_every_event_arrived(&expect, &out) as u64,
        fired.evaluated
    );
    assert_eq!(by_tid(read_jsonl(&out)).len(), 8);
}

/// One deterministic run (every type, two threads) traced in `mode`,
/// written live as jsonl and as a capture; the capture is then read as
/// jsonl, text, chrome and perfetto.
fn outputs_in(mode: &str) -> BTreeMap<&'static str, Vec<u8>> {
    require_root();
    let dir = scratch(&format!("delivery-{mode}"));
    let (out, capture) = (dir.join("live.jsonl"), dir.join("run.styx"));
    let mut prog = TestProg::spawn(None);
    let loader = prog.attach_loader(&[
        "--delivery",
        mode,
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--capture",
        capture.to_str().unwrap(),
    ]);
    prog.fire(300, 2);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    let mut outputs = BTreeMap::new();
    outputs.insert("live jsonl", std::fs::read(&out).unwrap());
    for format in ["jsonl", "text", "chrome", "perfetto"] {
        let file = dir.join(format!("read.{format}"));
        let (status, _, stderr) = run_loader(&[
            "read",
            capture.to_str().unwrap(),
            "-o",
            format,
            "--output",
            file.to_str().unwrap(),
        ]);
        assert!(status.success(), "{stderr}");
        outputs.insert(format, std::fs::read(&file).unwrap());
    }
    outputs
}

/// Span ids come from a counter both threads share: which thread takes
/// which depends on timing, not on delivery.
const SPAN_ID: &str = "id";

/// What an output says of each thread's events, in order, without times
/// and thread ids (two runs' differ): one sequence per thread, the
/// sequences sorted.
fn normalized(format: &str, bytes: &[u8]) -> Vec<Vec<String>> {
    let mut threads: Vec<u64> = Vec::new();
    let mut per_thread: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut push = |tid: u64, what: String| {
        let index = threads.iter().position(|&t| t == tid).unwrap_or_else(|| {
            threads.push(tid);
            threads.len() - 1
        });
        per_thread.entry(index).or_default().push(what);
    };
    let text = String::from_utf8_lossy(bytes);
    match format {
        "live jsonl" | "jsonl" => {
            for line in text.lines() {
                let mut v: Value = serde_json::from_str(line).unwrap();
                let tid = v["tid"].as_u64().unwrap();
                for key in ["ts_ns", "pid", "tid", SPAN_ID] {
                    v.as_object_mut().unwrap().remove(key);
                }
                push(tid, v.to_string());
            }
        }
        "text" => {
            // time, pid/tid, then the event: keep what follows the tid.
            for line in text.lines() {
                let words: Vec<&str> = line.split_whitespace().collect();
                let tid = words[1]
                    .split_once('/')
                    .and_then(|(_, tid)| tid.parse().ok())
                    .unwrap_or_else(|| panic!("{line}"));
                let event: Vec<&str> = words[2..]
                    .iter()
                    .copied()
                    .filter(|w| !w.starts_with("id="))
                    .collect();
                push(tid, event.join(" "));
            }
        }
        "chrome" => {
            // The JSON array form of the trace-event format.
            let trace: Value = serde_json::from_str(&text).unwrap();
            for e in trace.as_array().unwrap() {
                // Counters are rates over time windows: timing, not events.
                if e["ph"] == "C" || e["ph"] == "M" {
                    continue;
                }
                let mut e = e.clone();
                // Process-wide events (no thread) go with thread 0.
                let tid = e["tid"].as_u64().unwrap_or(0);
                for key in ["ts", "pid", "tid", "dur"] {
                    e.as_object_mut().unwrap().remove(key);
                }
                if let Some(args) = e.get_mut("args").and_then(Value::as_object_mut) {
                    args.remove(SPAN_ID);
                }
                push(tid, e.to_string());
            }
        }
        "perfetto" => {
            use perfetto_protos::track_event::track_event::Type;
            let decoded = crate::pftrace::decode(bytes);
            for e in decoded
                .events
                .iter()
                .filter(|e| e.kind != Type::TYPE_COUNTER)
            {
                let annotations: Vec<String> = (e.annotations.iter())
                    .filter(|(name, _)| name != SPAN_ID)
                    .map(|(name, a)| format!("{name}: {a:?}"))
                    .collect();
                // Fields as counters: by their tracks' names (the tracks
                // themselves differ from run to run).
                let counters: Vec<String> = (e.counters.iter())
                    .map(|(uuid, v)| format!("{} = {v}", decoded.tracks[uuid].name))
                    .collect();
                push(
                    e.track,
                    format!(
                        "{:?} {} {} {}",
                        e.kind,
                        e.name,
                        annotations.join(","),
                        counters.join(",")
                    ),
                );
            }
        }
        other => panic!("{other}"),
    }
    let mut sequences: Vec<Vec<String>> = per_thread.into_values().collect();
    sequences.sort();
    sequences
}

#[test]
fn both_delivery_modes_give_the_same_events_in_every_output() {
    let batched = outputs_in("batched");
    let per_event = outputs_in("per-event");
    for (format, bytes) in &batched {
        let (b, p) = (
            normalized(format, bytes),
            normalized(format, &per_event[format]),
        );
        assert_eq!(b.len(), 2, "{format}: two threads");
        assert!(b.iter().all(|events| events.len() > 1000), "{format}");
        for (thread, (events, other)) in b.iter().zip(&p).enumerate() {
            let first = events.iter().zip(other).position(|(x, y)| x != y);
            assert!(
                first.is_none() && events.len() == other.len(),
                "{format}, thread {thread}: {} events batched, {} per-event; first \
                 difference at {first:?}: {:?} vs {:?}",
                events.len(),
                other.len(),
                first.map(|i| &events[i]),
                first.map(|i| &other[i]),
            );
        }
    }
}

#[test]
fn batched_times_never_step_back_and_interleave_with_per_event_ones() {
    let Traced {
        mut prog,
        loader,
        out,
        ..
    } = traced("batched-times", &[]);
    prog.fire(500, 2);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    let text = std::fs::read_to_string(&out).unwrap();
    let mut last: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    let mut kinds = std::collections::BTreeSet::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let (tid, ts) = (v["tid"].as_u64().unwrap(), v["ts_ns"].as_u64().unwrap());
        let event = v["event"].as_str().unwrap().to_string();
        if let Some((before, what)) = last.get(&tid) {
            // Batched events (times from the thread's clock) and per-event
            // ones (the kernel's) on one clock: a thread's times in the
            // order its events were fired.
            assert!(
                ts >= *before,
                "thread {tid}: {event} at {ts} after {what} at {before}"
            );
        }
        kinds.insert(event.clone());
        last.insert(tid, (ts, event));
    }
    assert_eq!(kinds.len(), styx_types(), "{kinds:?}");
}

#[test]
fn a_full_ring_counts_the_lost_events_per_type() {
    // The smallest ring batched delivery takes (three full batches), and a
    // loader stopped while the threads fire ~1 MB each: the ring fills and
    // the batches after are lost, counted as their events. `--on-full
    // drop`: writing a file, batches would wait for room by default.
    let Traced {
        mut prog,
        loader,
        expect,
        out,
    } = traced(
        "batched-full-ring",
        &[&BATCHED_SMALL_RING[..], &["--on-full", "drop"]].concat(),
    );
    // Stopped once it streams (it has written a first round's events):
    // drops before that are counted, but not timed for the warning.
    let first = prog.fire(1, 1);
    eventually("the loader streams", || {
        lines_in(&out) as u64 >= first.evaluated
    });
    loader.signal(libc::SIGSTOP);
    prog.fire(4000, 2);
    loader.signal(libc::SIGCONT);
    // Time for the loader to look at the drop counters while it runs.
    std::thread::sleep(Duration::from_millis(300));
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    let mut fired: BTreeMap<String, u64> = BTreeMap::new();
    for e in read_jsonl(&expect) {
        *fired
            .entry(e["event"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    let traced = read_jsonl(&out).len() as u64;
    let summary = summary_of(&stderr);
    let mut lost_total = 0;
    for (kind, n) in &fired {
        let written = summary.events_of(kind);
        let lost = dropped_of(&stderr, kind);
        assert!(lost > 0, "{kind}: {stderr:?}");
        assert_eq!(written + lost, *n, "{kind}: written + dropped = fired");
        lost_total += lost;
    }
    assert_eq!(traced + lost_total, fired.values().sum::<u64>());
    let loss = summary.loss.as_ref().expect("a loss says why");
    assert!(!loss.waited && loss.batched == lost_total, "{loss:?}");
}

/// The "(N dropped: ring buffer full)" of a type's summary line.
fn dropped_of(stderr: &[String], kind: &str) -> u64 {
    stderr
        .iter()
        .find(|l| l.split_whitespace().next() == Some(kind))
        .and_then(|l| l.split('(').nth(1))
        .and_then(|l| l.split_whitespace().next())
        .map_or(0, |n| n.parse().unwrap())
}

#[test]
fn lossless_loses_nothing_through_a_small_ring() {
    let Traced {
        mut prog,
        loader,
        expect,
        out,
    } = traced(
        "batched-lossless",
        &[&BATCHED_SMALL_RING[..], &["--lossless"]].concat(),
    );
    let fired = prog.fire(3000, 2);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    assert_eq!(
        assert_every_event_arrived(&expect, &out) as u64,
        fired.evaluated
    );
    assert!(
        summary_of(&stderr).line.contains("; 0 dropped"),
        "{stderr:?}"
    );
}

/// Writing a file, batches wait for room by default (as with `--on-full
/// wait`): an emulator faster than the output (no expect file to write, two
/// threads) through a ring of a few batches loses nothing.
#[test]
fn writing_a_file_loses_nothing_by_default() {
    require_root();
    let out = scratch("batched-default-wait").join("traced.jsonl");
    let mut prog = TestProg::spawn(None);
    let output = ["-o", "jsonl", "--output", out.to_str().unwrap()];
    let loader = prog.attach_loader(&[&BATCHED_SMALL_RING[..], &output].concat());
    let fired = prog.fire(20_000, 2);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    let summary = summary_of(&stderr);
    assert_eq!(summary.dropped, 0, "{stderr:?}");
    assert!(summary.loss.is_none(), "{stderr:?}");
    assert_eq!(summary.events, fired.evaluated, "{stderr:?}");
    assert_eq!(lines_in(&out) as u64, fired.evaluated);
}

#[test]
fn lossless_never_holds_the_emulator_once_the_loader_is_killed() {
    require_root();
    let mut prog = TestProg::spawn(None);
    // Events to a pipe nobody reads: the loader blocks on its output, the
    // ring fills, and the emulator waits for credit.
    let (loader, _unread) = jsonl_to_a_pipe(&prog, &["--lossless"]);
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        loader.signal(libc::SIGKILL);
        loader
    });
    let started = Instant::now();
    let fired = prog.fire(20_000, 2);
    let took = started.elapsed();
    drop(killer.join().unwrap());
    assert!(fired.calls > 0);
    assert!(
        took > Duration::from_millis(400),
        "the emulator should have waited for the stuck loader ({took:?})"
    );
    assert!(
        took < Duration::from_secs(20),
        "the emulator went on once the loader was gone ({took:?})"
    );
    prog.quit();
}

#[test]
fn stopping_the_loader_while_the_emulator_fires_loses_nothing_it_traced() {
    // The loader stops after 0.3 s while a thread fires for longer: every
    // event whose closure ran (so was batched) arrives, none after.
    let Traced {
        mut prog,
        loader,
        expect,
        out,
    } = traced(
        "batched-stop-running",
        &["-e", BATCHED, "--duration", "0.3"],
    );
    let fired = prog.fire(100_000, 1);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    assert!(
        summary_of(&stderr).line.contains("duration reached"),
        "{stderr:?}"
    );
    assert!(
        fired.evaluated > 0 && fired.evaluated < fired.calls * 8 / 16,
        "the loader stopped while the thread fired: {} of {} calls traced",
        fired.evaluated,
        fired.calls
    );
    prog.quit();
    assert_eq!(
        assert_every_event_arrived(&expect, &out) as u64,
        fired.evaluated
    );
}

#[test]
fn thread_ids_coming_round_again_lose_no_batches() {
    // ~45,000 threads, two at a time, one handing over ten batches for the
    // other's one: the kernel gives thread ids out again (after ~32,000 with
    // the default pid_max), to a thread on the other buffer, whose batch
    // numbers are far lower than the last ones under that id.
    let Traced {
        mut prog,
        loader,
        out,
        ..
    } = traced("batched-churn", &["-e", "insn_exec"]);
    let fired = prog.fire_by("churn 20000");
    assert_eq!(fired.evaluated, 20_000 * 11);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    let summary = summary_of(&stderr);
    assert_eq!(summary.events, fired.evaluated, "{stderr:#?}");
    assert_eq!(summary.dropped, 0, "{stderr:#?}");
    assert_eq!(lines_in(&out) as u64, fired.evaluated);
    assert!(!stderr.iter().any(|l| l.contains("warning")), "{stderr:#?}");
}

#[test]
fn more_threads_than_a_registry_block_hand_over_their_partial_batches() {
    // 1,500 idle threads, each holding part of a batch, when the loader
    // stops: the registry holds them all.
    let Traced {
        mut prog,
        loader,
        expect,
        out,
    } = traced("batched-many-threads", &["-e", BATCHED]);
    let parked = prog.fire_by("park 10 1500");
    assert_eq!(parked.evaluated, 1500 * 10 * 8);
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    assert_eq!(
        assert_every_event_arrived(&expect, &out) as u64,
        parked.evaluated
    );
    prog.ask("unpark");
    prog.quit();
}
