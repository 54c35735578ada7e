//! Probes in shared libraries: one the program links and one it dlopens,
//! traced in a running process (also by bpftrace at the same time), and the
//! dlopened one unmapped while traced.

mod support;

use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::*;

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
    let mut prog = CProg::spawn(&program, &[dl.to_str().unwrap()]);
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
    let loader = Loader::attach(&[
        "--pid",
        &pid.to_string(),
        "--probes",
        "sdt*:*",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ]);
    let lib_probe = format!("usdt:{}:sdtlib:fire {{ @fires = count(); }}", lib.display());
    let mut bpftrace = Command::new("bpftrace")
        .args(["-p", &pid.to_string(), "-e", &lib_probe])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting bpftrace");
    eventually("bpftrace attached", || {
        catches_sigint(bpftrace.id()) && perf_events_open(bpftrace.id()) >= 1
    });

    let mut fired = parse(prog.run("fire 50", "done"));
    assert_eq!(
        fired.len(),
        150,
        "main, lib and dl probes fire while traced"
    );
    prog.run("close", "closed");
    fired.extend(parse(prog.run("main 50", "done")));
    // SAFETY: signalling a child we started.
    unsafe { libc::kill(bpftrace.id() as i32, libc::SIGINT) };
    let mut counted = String::new();
    bpftrace
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut counted)
        .unwrap();
    bpftrace.wait().unwrap();
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
    assert!(
        counted.contains("@fires: 50"),
        "bpftrace and styx-loader both see the 50 library events: {counted}"
    );
}
