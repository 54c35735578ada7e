//! Many probe sites. A binary with 1,000 sites: all attach (one
//! uprobe_multi link), every site's event arrives, and letting go is quick.
//! The times are printed (`--nocapture`), not asserted: this machine is
//! noisy. Also the limits: more sites than styx-loader attaches with a link
//! each are refused before anything is attached, and a site the kernel
//! refuses is skipped, the others traced.

use crate::support::*;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SITES: usize = 1000;

/// More sites than styx-loader attaches with a link each (its MAX_PER_SITE,
/// 4,096).
const TOO_MANY_PER_SITE: usize = 5000;

/// A C program with `sites` distinct sites of `many:site`, each passing its
/// own number; "go N" runs them all N times, then prints "done". `extra` are
/// more C files linked in; `more` is C code run after the sites each round.
fn build_with(dir: &Path, sites: usize, extra: &[&Path], more: &str) -> PathBuf {
    let mut source = String::from(
        "#include <stdio.h>\n#include <sys/sdt.h>\n\
         __attribute__((noinline)) static void all(void) {\n",
    );
    for site in 0..sites {
        writeln!(source, "    DTRACE_PROBE1(many, site, {site});").unwrap();
    }
    writeln!(source, "    {more}").unwrap();
    source.push_str(
        "}\nint main(void) {\n    int n;\n    puts(\"ready\");\n    fflush(stdout);\n\
         while (scanf(\"%*s %d\", &n) == 1) {\n        for (int i = 0; i < n; i++) all();\n\
         puts(\"done\");\n        fflush(stdout);\n    }\n    return 0;\n}\n",
    );
    let c = dir.join("many.c");
    std::fs::write(&c, source).unwrap();
    let binary = dir.join("many");
    let mut args = vec!["-O1", "-o", binary.to_str().unwrap(), c.to_str().unwrap()];
    args.extend(extra.iter().map(|p| p.to_str().unwrap()));
    cc(&args);
    binary
}

fn build(dir: &Path) -> PathBuf {
    build_with(dir, SITES, &[], "")
}

/// C code firing the probe of [`odd_semaphore_source`].
const FIRE_REFUSED: &str = "extern void refused_probe(int); refused_probe(1);";

/// A C file with the probe `odd:refused`, whose semaphore sits at an odd
/// address: the kernel refuses such a site (uprobe_register wants
/// `ref_ctr_offset` 2-byte aligned), in a uprobe_multi link as one by one.
/// `refused_probe(n)` fires it.
fn odd_semaphore_source(dir: &Path) -> PathBuf {
    let source = r#"#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
__asm__(".pushsection .probes,\"aw\",@progbits\n"
        ".balign 2\n"
        ".byte 0\n"
        ".globl odd_refused_semaphore\n"
        ".type odd_refused_semaphore,@object\n"
        ".size odd_refused_semaphore,2\n"
        "odd_refused_semaphore: .2byte 0\n"
        ".popsection\n");
extern unsigned short odd_refused_semaphore;
__attribute__((noinline)) void refused_probe(int n) { STAP_PROBE1(odd, refused, n); }
"#;
    let c = dir.join("odd.c");
    std::fs::write(&c, source).unwrap();
    c
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

#[test]
fn per_site_refuses_more_sites_than_its_limit_before_attaching() {
    require_root();
    let dir = scratch("many-sites-per-site-limit");
    let binary = build_with(&dir, TOO_MANY_PER_SITE, &[], "");
    let mut prog = TestProg::start(&binary, &[]);
    prog.run("", "ready");
    let pid = prog.pid().to_string();
    let started = Instant::now();
    let (status, _, stderr) = run_loader(&[
        "--pid",
        &pid,
        "--probes",
        "many:*",
        "--attach",
        "per-site",
        "-o",
        "jsonl",
        "--output",
        dir.join("traced.jsonl").to_str().unwrap(),
    ]);
    let took = started.elapsed();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "refusing to attach {TOO_MANY_PER_SITE} probe sites with a link each"
        )) && stderr.contains("--attach multi"),
        "{stderr}"
    );
    assert!(!stderr.contains("attached"), "{stderr}");
    // Attaching and detaching 5,000 links takes the kernel minutes: this
    // quick an exit means none was.
    assert!(took < Duration::from_secs(20), "took {took:?}: {stderr}");
    // The target never saw a probe: its sites still fire nothing and it runs.
    prog.run("go 1", "done");
    prog.finish();
}

#[test]
fn a_refused_multi_link_does_not_fall_back_to_too_many_per_site_links() {
    require_root();
    let dir = scratch("many-sites-no-fallback");
    let odd = odd_semaphore_source(&dir);
    let binary = build_with(&dir, TOO_MANY_PER_SITE, &[&odd], FIRE_REFUSED);
    let mut prog = TestProg::start(&binary, &[]);
    prog.run("", "ready");
    let pid = prog.pid().to_string();
    let started = Instant::now();
    let (status, _, stderr) = run_loader(&[
        "--pid",
        &pid,
        "--probes",
        "many:*",
        "--probes",
        "odd:*",
        "-o",
        "jsonl",
        "--output",
        dir.join("traced.jsonl").to_str().unwrap(),
    ]);
    let took = started.elapsed();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("the kernel refused the uprobe_multi link")
            && stderr.contains("not falling back to one link per site")
            && stderr.contains(&format!(
                "refusing to attach {} probe sites with a link each",
                TOO_MANY_PER_SITE + 1
            )),
        "{stderr}"
    );
    assert!(!stderr.contains("attached"), "{stderr}");
    assert!(took < Duration::from_secs(20), "took {took:?}: {stderr}");
    prog.run("go 1", "done");
    prog.finish();
}

/// A site the kernel refuses is named in a warning; the others attach and
/// their events arrive (`mode`: --attach).
fn a_refused_site_is_skipped_and_the_rest_traced(mode: &str) {
    require_root();
    let dir = scratch(&format!("many-sites-refused-{mode}"));
    let odd = odd_semaphore_source(&dir);
    let sites = 10;
    let binary = build_with(&dir, sites, &[&odd], FIRE_REFUSED);
    let mut prog = TestProg::start(&binary, &[]);
    prog.run("", "ready");
    let pid = prog.pid();
    let out = dir.join("traced.jsonl");
    let mut loader = spawn_loader(
        &[
            "--pid",
            &pid.to_string(),
            "--probes",
            "many:*",
            "--probes",
            "odd:*",
            "--attach",
            mode,
            "-o",
            "jsonl",
            "--output",
            out.to_str().unwrap(),
        ],
        std::process::Stdio::null(),
    );
    let attached = loader.wait_for_line("attached").unwrap();
    assert!(
        attached.contains(&format!("attached {sites} probe sites")),
        "{attached}"
    );
    prog.run("go 2", "done");
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    let stderr = stderr.join("\n");
    assert!(status.success(), "{stderr}");
    prog.finish();
    if mode == "multi" {
        assert!(
            stderr.contains("attaching them one by one"),
            "the multi link was not refused: {stderr}"
        );
    }
    let warning = stderr
        .lines()
        .find(|l| l.contains("warning: skipping probe odd:refused at 0x"))
        .unwrap_or_else(|| panic!("no warning naming odd:refused: {stderr}"));
    assert!(
        warning.contains(&format!("in {}", binary.display()))
            && warning.contains("the kernel refused"),
        "{warning}"
    );
    let events = usdt_events(&out, pid);
    assert_eq!(events.len(), 2 * sites, "{stderr}");
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["probe"], "site");
        assert_eq!(event["args"][0], (i % sites) as u64, "event {i}");
    }
}

#[test]
fn a_refused_site_is_skipped_multi() {
    a_refused_site_is_skipped_and_the_rest_traced("multi");
}

#[test]
fn a_refused_site_is_skipped_per_site() {
    a_refused_site_is_skipped_and_the_rest_traced("per-site");
}

#[test]
fn per_site_links_do_not_hit_a_low_soft_open_file_limit() {
    require_root();
    let dir = scratch("many-sites-nofile");
    let sites = 200;
    let binary = build_with(&dir, sites, &[], "");
    let mut prog = TestProg::start(&binary, &[]);
    prog.run("", "ready");
    let pid = prog.pid().to_string();
    // 200 sites need ~400 fds; the soft limit of 100 is raised to the hard
    // limit by the loader before attaching.
    let output = std::process::Command::new("sh")
        .args([
            "-c",
            "ulimit -Sn 100 && exec \"$0\" \"$@\"",
            loader_path().to_str().unwrap(),
            "--pid",
            &pid,
            "--probes",
            "many:*",
            "--attach",
            "per-site",
            "--duration",
            "0.2",
            "-o",
            "jsonl",
            "--output",
            dir.join("traced.jsonl").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("attached {sites} probe sites")),
        "{stderr}"
    );
    assert!(!stderr.contains("warning"), "{stderr}");
    prog.run("go 1", "done");
    prog.finish();
}

/// A C program with `sites` probe sites of `many:bulk` (nops and notes
/// written by an assembler loop: a C probe per site takes minutes to
/// compile at this size), in a function symbol, which the loader decodes
/// to check each site starts an instruction.
fn build_bulk(dir: &Path, sites: usize) -> PathBuf {
    let source = format!(
        r#"#include <stdio.h>
#include <sys/sdt.h>
__asm__(".pushsection .text\n.type bulk_sites,@function\nbulk_sites:\n.rept {sites}\n990: nop\n"
        ".pushsection .note.stapsdt,\"?\",\"note\"\n.balign 4\n"
        ".4byte 992f-991f, 994f-993f, 3\n991: .asciz \"stapsdt\"\n992: .balign 4\n"
        "993: .8byte 990b\n.8byte _.stapsdt.base\n.8byte 0\n"
        ".asciz \"many\"\n.asciz \"bulk\"\n.asciz \"\"\n994: .balign 4\n"
        ".popsection\n.endr\nret\n.size bulk_sites,.-bulk_sites\n.popsection\n");
int main(void) {{ DTRACE_PROBE(many, one); puts("ready"); return 0; }}
"#
    );
    let c = dir.join("bulk.c");
    std::fs::write(&c, source).unwrap();
    let binary = dir.join("bulk");
    cc(&["-O1", "-o", binary.to_str().unwrap(), c.to_str().unwrap()]);
    binary
}

#[test]
fn more_sites_than_the_limit_are_refused_before_attaching() {
    require_root();
    let dir = scratch("bulk-sites");
    let binary = build_bulk(&dir, 20_001);
    let (listed, _, _) = run_loader(&["list", binary.to_str().unwrap(), "many:bulk"]);
    assert!(listed.success(), "the bulk binary lists");
    let (status, _, stderr) = run_loader(&[
        "--binary",
        binary.to_str().unwrap(),
        "--probes",
        "many:*",
        "-o",
        "jsonl",
    ]);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("refusing to attach 20002 probe sites (at most 20000"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("attached"),
        "nothing was attached: {stderr}"
    );
}
