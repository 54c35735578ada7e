//! Probe sites inside instructions (tests/c/misaligned_sites.c): a USDT
//! note pointing into an immediate of 0x90 bytes, a function symbol
//! `g = f+1` inside `f`'s `movl`, and a note no function symbol covers.
//! Traced as root with the real eBPF programs, the program's functions must
//! return what they return untraced (a uprobe in an immediate would make
//! them return 0x909090cc, 0x90cccccc), and each bad site is refused with
//! one line saying why.

use crate::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// tests/c/misaligned_sites.c, built once per run.
fn program() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("misaligned_sites");
            let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/misaligned_sites.c");
            cc(&["-O1", "-o", out.to_str().unwrap(), source]);
            out
        })
        .clone()
}

/// What the program prints for "go N", traced or not.
const INTACT: &str = "imm=0x90909090 f=0x90c3c3c3 ok=7 loose=5";

/// Runs the program 3 rounds under a loader given `args`: the events it
/// wrote and its stderr.
fn trace(dir: &Path, args: &[&str]) -> (Vec<Value>, String) {
    let out = dir.join("trace.jsonl");
    let mut prog = TestProg::start(&program(), &[]);
    prog.run("", "ready");
    let mut all = vec!["-o", "jsonl", "--output", out.to_str().unwrap()];
    all.extend_from_slice(args);
    let loader = prog.attach_loader(&all);
    let answer = prog.ask("go 3");
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    let stderr = stderr.join("\n");
    assert!(status.success(), "{stderr}");
    // While attached, the code ran as it was written.
    assert_eq!(answer.trim(), INTACT, "{stderr}");
    prog.finish();
    (read_jsonl(&out), stderr)
}

fn count(events: &[Value], key: &str, value: &str) -> usize {
    events.iter().filter(|e| e[key] == value).count()
}

#[test]
fn sites_inside_instructions_are_refused_and_the_target_keeps_its_code() {
    require_root();
    let dir = scratch("misaligned-sites");
    // f itself untraced: an entry uprobe would run its `movl` out of line
    // from the file's bytes, hiding a breakpoint in its immediate.
    let (events, stderr) = trace(
        &dir,
        &["--probes", "hostile:*", "--functions", "^(g|ok_site)$"],
    );
    // The good site fires; the bad ones are not attached.
    assert_eq!(count(&events, "probe", "ok"), 3, "{stderr}");
    assert_eq!(count(&events, "probe", "inside"), 0, "{stderr}");
    assert_eq!(count(&events, "probe", "loose"), 0, "{stderr}");
    assert_eq!(count(&events, "function", "ok_site"), 6, "{stderr}");
    assert_eq!(count(&events, "function", "g"), 0, "{stderr}");
    // One line for each, saying why.
    let line = |what: &str| {
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(what)).collect();
        assert_eq!(lines.len(), 1, "{what}:\n{stderr}");
        lines[0].to_string()
    };
    let inside = line("hostile:inside");
    assert!(
        inside.contains("is inside the instruction at") && inside.contains("of imm_site"),
        "{inside}"
    );
    let g = line(": g: ");
    assert!(
        g.contains("its entry at") && g.contains("inside the instruction") && g.contains("of f"),
        "{g}"
    );
    let loose = line("in no function symbol");
    assert!(
        loose.contains("1 probe site of") && loose.contains("hostile:loose"),
        "{loose}"
    );
    assert!(loose.contains("--allow-unverified-sites"), "{loose}");
}

#[test]
fn a_site_in_no_function_symbol_is_attached_only_when_allowed() {
    require_root();
    let dir = scratch("misaligned-sites-allowed");
    let (events, stderr) = trace(
        &dir,
        &["--probes", "hostile:loose", "--allow-unverified-sites"],
    );
    assert_eq!(count(&events, "probe", "loose"), 3, "{stderr}");
    assert!(!stderr.contains("in no function symbol"), "{stderr}");
}

#[test]
fn list_shows_what_cannot_be_probed() {
    let program = program();
    let (status, stdout, stderr) = run_loader(&["list", program.to_str().unwrap()]);
    assert!(status.success(), "{stderr}");
    assert!(!stdout.contains("hostile:inside"), "{stdout}");
    assert!(stderr.contains("hostile:inside"), "{stderr}");
    let loose = stdout
        .lines()
        .skip_while(|l| !l.ends_with(":hostile:loose"))
        .nth(1)
        .unwrap_or_else(|| panic!("no hostile:loose site in {stdout}"));
    assert!(loose.contains("in no function symbol"), "{loose}");

    let (status, stdout, stderr) =
        run_loader(&["list", "--functions", "^(f|g)$", program.to_str().unwrap()]);
    assert!(status.success(), "{stderr}");
    let g = stdout
        .lines()
        .skip_while(|l| !l.ends_with(":g"))
        .nth(1)
        .unwrap_or_else(|| panic!("no g in {stdout}"));
    assert!(g.contains("cannot be traced") && g.contains("of f"), "{g}");
    assert!(stdout.contains("1 function, 1 return site"), "{stdout}");
}
