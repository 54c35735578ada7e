//! Probes in shared libraries: one the program links and one it dlopens,
//! traced in a running process (also by bpftrace at the same time), and the
//! dlopened one unmapped while traced.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c");

/// Builds libsdtlib.so, libsdtdl.so and the program linking the first.
fn build(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let dir_str = dir.to_str().unwrap();
    let lib_source = format!("{SOURCES}/sdt_lib.c");
    for provider in ["sdtlib", "sdtdl"] {
        let out = format!("{dir_str}/lib{provider}.so");
        let define = format!("-DPROVIDER={provider}");
        cc(&["-O2", "-shared", "-fPIC", &define, "-o", &out, &lib_source]);
    }
    let program = dir.join("sdt_libuser");
    let rpath = format!("-Wl,-rpath,{dir_str}");
    let libdir = format!("-L{dir_str}");
    cc(&[
        "-O2",
        "-o",
        program.to_str().unwrap(),
        &format!("{SOURCES}/sdt_libuser.c"),
        &libdir,
        "-lsdtlib",
        &rpath,
        "-ldl",
    ]);
    (program, dir.join("libsdtlib.so"), dir.join("libsdtdl.so"))
}

fn parse(lines: Vec<String>) -> Vec<Value> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

#[test]
fn library_probes_are_traced_and_a_dlclosed_library_loses_nothing_else() {
    require_root();
    let dir = scratch("libraries");
    let (program, lib, dl) = build(&dir);
    let mut prog = TestProg::start(&program, &[dl.to_str().unwrap()]);
    prog.run("", "ready");
    let pid = prog.pid();

    // `list` finds the probes of both libraries in the running process.
    let (status, listed, stderr) = run_loader(&["list", "--pid", &pid.to_string(), "sdt*:*"]);
    assert!(status.success(), "{stderr}");
    for (file, probe) in [
        (&program, "sdtmain:tick"),
        (&lib, "sdtlib:fire"),
        (&dl, "sdtdl:fire"),
    ] {
        let header = format!("usdt:{}:{probe}", file.display());
        assert!(
            listed.lines().any(|l| l == header),
            "{header} in:\n{listed}"
        );
    }

    let out = dir.join("traced.jsonl");
    let loader = attach_loader(&[
        "--pid",
        &pid.to_string(),
        "--probes",
        "sdt*:*",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ]);
    // bpftrace prints each library event's round number; it is ready once
    // it has printed one (warm-up rounds are fired until then).
    let lib_probe = format!(
        "usdt:{}:sdtlib:fire {{ printf(\"%d\\n\", arg0); }}",
        lib.display()
    );
    let mut bpftrace = Command::new("bpftrace")
        .args(["-B", "line", "-p", &pid.to_string(), "-e", &lib_probe])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting bpftrace");
    let printed = lines_of(bpftrace.stdout.take().unwrap());
    let mut fired = Vec::new();
    let ready = (0..200).any(|_| {
        fired.extend(parse(prog.run("fire 1", "done")));
        let line = printed.recv_timeout(Duration::from_millis(100));
        line.is_ok_and(|l| l.parse::<usize>().is_ok())
    });
    assert!(ready, "bpftrace never saw a library event");
    let first_measured = fired.len() / 3;
    let measured_rounds = first_measured..first_measured + 50;

    let measured = parse(prog.run("fire 50", "done"));
    assert_eq!(
        measured.len(),
        150,
        "main, lib and dl probes fire while traced"
    );
    fired.extend(measured);
    prog.run("close", "closed");
    fired.extend(parse(prog.run("main 50", "done")));
    // bpftrace drops events still queued when it is interrupted: wait (up
    // to 20 s) until it has printed the measured rounds, then stop it.
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline
        && !measured_rounds
            .clone()
            .all(|round| lines.contains(&round.to_string()))
    {
        if let Ok(line) = printed.recv_timeout(Duration::from_millis(100)) {
            lines.push(line);
        }
    }
    stop_bpftrace_poking(bpftrace, || fired.extend(parse(prog.run("fire 1", "done"))));
    let seen_by_bpftrace = lines
        .into_iter()
        .chain(printed.iter())
        .filter_map(|l| l.parse::<usize>().ok()) // not "Attaching 1 probe..."
        .filter(|round| measured_rounds.contains(round))
        .count();
    prog.finish();

    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    assert!(
        !stderr
            .iter()
            .any(|l| l.contains("warning") || l.contains("error")),
        "{stderr:?}"
    );
    assert_eq!(usdt_events(&out, pid), fired);
    assert_eq!(
        seen_by_bpftrace, 50,
        "bpftrace sees the 50 library events styx-loader saw"
    );
}

/// A Rust library with styx probes that the program loads at run time
/// (`dlopen`), traced by pid: the probes' per-thread batch slot (an
/// initial-exec thread-local, from the C library's spare static TLS,
/// starting as the address of a buffer with no room) works there too, on
/// threads started after the library was loaded and on the one that
/// loaded it, and every event of every thread arrives with its values, in
/// order.
#[test]
fn a_rust_library_loaded_at_run_time_delivers_every_batched_event() {
    require_root();
    let dir = scratch("libraries-dlopen-rust");
    let out = dir.join("events.jsonl");
    let mut prog = TestProg::spawn(None);
    let library = beside_testprog("libstyx_testlib.so", "styx-testlib");
    assert_eq!(
        prog.ask(&format!("dlopen {}", library.display())).trim(),
        "loaded"
    );
    let loader = prog.attach_loader(&jsonl_to(&out, "batched", &[]));
    const N: u64 = 20_000;
    assert_eq!(
        prog.ask(&format!("lib-fire {N} 2")).trim(),
        format!("lib-fired {}", 4 * N)
    );
    // On testprog's own thread, which was there before the library.
    assert_eq!(
        prog.ask(&format!("lib-fire {N} 0")).trim(),
        format!("lib-fired {}", 2 * N)
    );
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    let threads = by_tid(read_jsonl(&out));
    assert_eq!(threads.len(), 3, "{stderr:?}");
    for events in threads.values() {
        assert_eq!(events.len() as u64, 2 * N, "{stderr:?}");
        for (i, pair) in events.chunks(2).enumerate() {
            let i = i as u64;
            let (exec, read) = (&pair[0], &pair[1]);
            assert_eq!(
                (&exec["event"], &exec["pc"], &exec["insn"], &exec["len"]),
                (&"insn_exec".into(), &i.into(), &(3 * i).into(), &4.into()),
                "{exec}"
            );
            assert_eq!(
                (
                    &read["event"],
                    &read["pc"],
                    &read["addr"],
                    &read["val"],
                    &read["size"]
                ),
                (
                    &"mem_read".into(),
                    &i.into(),
                    &(8 * i).into(),
                    &i.into(),
                    &4.into()
                ),
                "{read}"
            );
        }
    }
}
