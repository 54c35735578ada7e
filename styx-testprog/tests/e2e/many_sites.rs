//! A binary with 1,000 probe sites: all attach (one uprobe_multi link),
//! every site's event arrives, and letting go is quick. The times are
//! printed (`--nocapture`), not asserted: this machine is noisy.

use crate::support::*;
use std::fmt::Write as _;
use std::time::Instant;

const SITES: usize = 1000;

/// A C program with SITES distinct sites of `many:site`, each passing its
/// own number; "go N" runs them all N times, then prints "done".
fn build(dir: &std::path::Path) -> std::path::PathBuf {
    let mut source = String::from(
        "#include <stdio.h>\n#include <sys/sdt.h>\n\
         __attribute__((noinline)) static void all(void) {\n",
    );
    for site in 0..SITES {
        writeln!(source, "    DTRACE_PROBE1(many, site, {site});").unwrap();
    }
    source.push_str(
        "}\nint main(void) {\n    int n;\n    puts(\"ready\");\n    fflush(stdout);\n\
         while (scanf(\"%*s %d\", &n) == 1) {\n        for (int i = 0; i < n; i++) all();\n\
         puts(\"done\");\n        fflush(stdout);\n    }\n    return 0;\n}\n",
    );
    let c = dir.join("many.c");
    std::fs::write(&c, source).unwrap();
    let binary = dir.join("many");
    cc(&["-O1", "-o", binary.to_str().unwrap(), c.to_str().unwrap()]);
    binary
}

#[test]
fn a_thousand_sites_attach_fire_and_detach() {
    require_root();
    let dir = scratch("many-sites");
    let binary = build(&dir);
    let mut prog = TestProg::start(&binary, &[]);
    prog.run("", "ready");
    let pid = prog.pid();
    let out = dir.join("traced.jsonl");
    let started = Instant::now();
    let mut loader = spawn_loader(
        &[
            "--pid",
            &pid.to_string(),
            "--probes",
            "many:*",
            "-o",
            "jsonl",
            "--output",
            out.to_str().unwrap(),
        ],
        std::process::Stdio::null(),
    );
    let attached = loader.wait_for_line("attached").unwrap();
    let to_attach = started.elapsed();
    assert!(
        attached.contains(&format!("attached {SITES} probe sites")),
        "{attached}"
    );
    prog.run("go 3", "done");

    let stopping = Instant::now();
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    let to_detach = stopping.elapsed();
    assert!(status.success(), "{}", stderr.join("\n"));
    prog.finish();
    eprintln!(
        "{SITES} sites: loader start to attached {:.0} ms ({attached}); Ctrl-C to exit {:.0} ms",
        to_attach.as_secs_f64() * 1e3,
        to_detach.as_secs_f64() * 1e3
    );

    let events = usdt_events(&out, pid);
    assert_eq!(events.len(), 3 * SITES);
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["probe"], "site");
        assert_eq!(event["args"][0], (i % SITES) as u64, "event {i}");
    }
}
