//! End to end: the live line on a terminal's stderr, `--quiet`, and how
//! much a text line says (`--detail`).

use crate::support::*;
use std::process::{Command, Stdio};

/// Runs the loader on a pseudo-terminal (util-linux `script`) for 2 s while
/// the test program keeps firing; returns what the terminal showed.
fn on_a_terminal(prog: &mut TestProg, extra: &[&str]) -> String {
    let mut args = vec![
        loader_path().display().to_string(),
        "--pid".into(),
        prog.pid().to_string(),
        "--duration".into(),
        "2".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut child = Command::new("script")
        .args(["-qfec", &args.join(" "), "/dev/null"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("running script (util-linux)");
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut { stdout }, &mut text).unwrap();
        text
    });
    while child.try_wait().unwrap().is_none() {
        prog.fire(200, 1);
    }
    assert!(child.wait().unwrap().success());
    reader.join().unwrap()
}

#[test]
fn live_line_on_a_terminal_unless_quiet() {
    require_root();
    let dir = scratch("live");
    let out = dir.join("events.jsonl");
    let mut prog = TestProg::spawn(None);
    let out_arg = out.to_str().unwrap();

    let shown = on_a_terminal(&mut prog, &["-o", "jsonl", "--output", out_arg]);
    let live: Vec<&str> = shown
        .split(['\r', '\n'])
        .filter(|l| l.contains("ev/s"))
        .collect();
    assert!(live.len() >= 2, "redrawn while tracing: {shown:?}");
    assert!(
        live.iter().any(|l| {
            let per_type = l.split(" | ").nth(1).unwrap_or("");
            l.contains("total") && l.contains("dropped 0") && per_type.contains("/s")
        }),
        "{live:?}"
    );
    assert!(
        shown.contains("events from pid"),
        "the summary stays: {shown:?}"
    );

    let quiet = on_a_terminal(&mut prog, &["-o", "jsonl", "--output", out_arg, "--quiet"]);
    assert!(!quiet.contains("ev/s"), "{quiet:?}");
    assert!(quiet.contains("events from pid"), "{quiet:?}");

    // Not a terminal: no live line either.
    let loader = prog.attach_loader(&["-o", "jsonl", "--output", out_arg]);
    for _ in 0..10 {
        prog.fire(200, 1);
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    assert!(status.success());
    assert!(!stderr.iter().any(|l| l.contains("ev/s")), "{stderr:?}");
    prog.quit();
}

#[test]
fn text_detail_drops_or_adds_fields() {
    require_root();
    let dir = scratch("detail");
    let capture = dir.join("run.styx");
    let mut prog = TestProg::spawn(None);
    let pid = prog.pid().to_string();
    let loader = prog.attach_loader(&[
        "-e",
        "mem_read",
        "-o",
        "raw",
        "--output",
        capture.to_str().unwrap(),
    ]);
    prog.fire(3, 1);
    prog.quit();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));

    let read = |detail: &str| {
        let (status, out, err) =
            run_loader(&["read", capture.to_str().unwrap(), "--detail", detail]);
        assert!(status.success(), "{err}");
        out
    };
    let (brief, normal, full) = (read("brief"), read("normal"), read("full"));
    let first = |s: &str| s.lines().next().expect("a line").to_string();
    let (brief, normal, full) = (first(&brief), first(&normal), first(&full));
    let fields = "mem_read   pc=0x1000 addr=0x40000000 val=0x0 size=1";
    assert!(
        normal.ends_with(fields) && normal.contains(&format!("{pid}/")),
        "{normal}"
    );
    assert!(
        brief.ends_with(fields) && !brief.contains(&format!("{pid}/")),
        "{brief}"
    );
    // Full: the wall-clock time first, then the normal line.
    let (wall, rest) = full.split_once(' ').unwrap();
    assert_eq!(rest.trim_start(), normal.trim_start());
    assert!(
        wall.starts_with("20") && wall.ends_with('Z') && wall.contains('T'),
        "{wall}"
    );
}
