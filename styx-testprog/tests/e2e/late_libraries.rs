//! Libraries a process maps after tracing started (`dlopen`, as QEMU loads
//! its TCG plugin): a program without probes of its own loads styx-testlib
//! (styx probes, batched) or a C library with a <sys/sdt.h> probe, and
//! fires once the loader following it has raised the library's semaphore.
//! Traced as a command (`--`) and by pid (attached before the `dlopen`),
//! every event arrives, with its values; `list --pid` shows the library
//! once it is mapped; a command that never maps one ends in an error.

use crate::support::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;

const SOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c");

/// Events each run fires.
const N: u64 = 3000;

/// Builds late_dlopen and libsdtdl.so (the sdt library, provider sdtdl).
fn build(dir: &Path) -> (PathBuf, PathBuf) {
    let program = dir.join("late_dlopen");
    let sdt = dir.join("libsdtdl.so");
    cc(&[
        "-O2",
        "-o",
        program.to_str().unwrap(),
        &format!("{SOURCES}/late_dlopen.c"),
        "-ldl",
    ]);
    cc(&[
        "-O2",
        "-shared",
        "-fPIC",
        "-DPROVIDER=sdtdl",
        "-o",
        sdt.to_str().unwrap(),
        &format!("{SOURCES}/sdt_lib.c"),
    ]);
    (program, sdt)
}

/// Which library, and what the loader is asked for.
#[derive(Clone, Copy)]
enum Library {
    /// styx-testlib: styx's own probes, batched.
    Styx,
    /// The sdt library: `--probes 'sdtdl:*'`.
    Sdt,
}

impl Library {
    fn kind(self) -> &'static str {
        match self {
            Library::Styx => "styx",
            Library::Sdt => "sdt",
        }
    }

    fn args(self) -> Vec<&'static str> {
        match self {
            Library::Styx => vec!["-e", "insn_exec,mem_read"],
            Library::Sdt => vec!["--probes", "sdtdl:*"],
        }
    }

    /// The events it fires, as jsonl shows them (pid and tid left out).
    fn expected(self) -> Vec<Value> {
        match self {
            Library::Styx => (0..N)
                .flat_map(|i| {
                    [
                        json!({"event": "insn_exec", "pc": i, "insn": 3 * i, "len": 4}),
                        json!({"event": "mem_read", "pc": i, "addr": 8 * i, "val": i, "size": 4}),
                    ]
                })
                .collect(),
            Library::Sdt => (0..N as i64)
                .map(|i| {
                    json!({"event": "usdt", "provider": "sdtdl", "probe": "fire",
                           "args": [i, 3 * i - 7]})
                })
                .collect(),
        }
    }
}

/// The events of a jsonl trace, each checked to come from `pid` (if
/// known), without pid and tid.
fn events(out: &Path, pid: Option<u32>) -> Vec<Value> {
    read_jsonl(out)
        .into_iter()
        .map(|mut event| {
            let object = event.as_object_mut().unwrap();
            let from = object.remove("pid").unwrap();
            if let Some(pid) = pid {
                assert_eq!(from.as_u64(), Some(pid as u64), "{event}");
            }
            object.remove("tid");
            event
        })
        .collect()
}

/// The library's path and the loader's line saying it attached it late.
fn check_followed(stderr: &[String], library: &Path) {
    let name = library.display().to_string();
    assert!(
        stderr.iter().any(|l| l.contains("probe sites in")
            && l.contains(&name)
            && l.contains("mapped by pid")),
        "no line saying {name} was attached late: {stderr:#?}"
    );
    let late = summary_of(stderr).late.clone();
    assert_eq!(late.len(), 1, "{stderr:#?}");
    assert_eq!(late[0].path, name);
    assert!(late[0].sites > 0 && late[0].seconds > 0.0, "{late:?}");
    assert!(
        !stderr
            .iter()
            .any(|l| l.contains("warning") || l.contains("error")),
        "{stderr:#?}"
    );
}

fn library_path(library: Library, sdt: &Path) -> PathBuf {
    match library {
        Library::Styx => beside_testprog("libstyx_testlib.so", "styx-testlib"),
        Library::Sdt => sdt.to_path_buf(),
    }
}

/// `-- late_dlopen 100 LIB KIND N`: the program has no probes, so the
/// loader says it waits; it follows the library the program maps 0.1 s
/// later, and the program fires once the semaphore is raised.
fn as_command(library: Library, name: &str) {
    require_root();
    let dir = scratch(name);
    let (program, sdt) = build(&dir);
    let lib = library_path(library, &sdt);
    let out = dir.join("events.jsonl");
    let n = N.to_string();
    let mut args = vec!["-o", "jsonl", "--output", out.to_str().unwrap()];
    args.extend(library.args());
    args.extend([
        "--",
        program.to_str().unwrap(),
        "100",
        lib.to_str().unwrap(),
        library.kind(),
        &n,
    ]);
    let (status, stderr) = spawn_loader(&args, Stdio::null()).finish();
    assert!(status.success(), "{stderr:#?}");
    assert!(
        stderr.iter().any(|l| l.contains("waiting for a library")),
        "{stderr:#?}"
    );
    check_followed(&stderr, &lib);
    assert_eq!(events(&out, None), library.expected(), "{stderr:#?}");
}

/// `--pid` on late_dlopen waiting on stdin, attached before it loads the
/// library: the loader follows it, and `list --pid` shows the library
/// once mapped (not before).
fn by_pid(library: Library, name: &str) {
    require_root();
    let dir = scratch(name);
    let (program, sdt) = build(&dir);
    let lib = library_path(library, &sdt);
    let out = dir.join("events.jsonl");
    let n = N.to_string();
    let mut prog = TestProg::start(
        &program,
        &["stdin", lib.to_str().unwrap(), library.kind(), &n],
    );
    let pid = prog.pid();
    let pattern = match library {
        Library::Styx => "styx:*",
        Library::Sdt => "sdtdl:*",
    };
    let listed = || run_loader(&["list", "--pid", &pid.to_string(), pattern]);
    let (status, _, before) = listed();
    assert!(
        !status.success(),
        "nothing to list before the dlopen: {before}"
    );

    let mut args = vec!["-o", "jsonl", "--output", out.to_str().unwrap()];
    args.extend(library.args());
    let loader = prog.attach_loader(&args);
    prog.run("go", "done");
    // Still mapped: the program waits for the end of its input.
    let header = format!("usdt:{}:{}", lib.display(), pattern.replace('*', ""));
    let (status, stdout, stderr) = listed();
    assert!(status.success(), "{stderr}");
    assert!(
        stdout.lines().any(|l| l.starts_with(&header)),
        "{header} in:\n{stdout}"
    );
    prog.finish();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:#?}");
    check_followed(&stderr, &lib);
    assert_eq!(events(&out, Some(pid)), library.expected(), "{stderr:#?}");
}

#[test]
fn a_command_dlopening_a_library_with_styx_probes_is_followed() {
    as_command(Library::Styx, "late-command-styx");
}

#[test]
fn a_command_dlopening_a_library_with_sdt_probes_is_followed() {
    as_command(Library::Sdt, "late-command-sdt");
}

#[test]
fn a_process_dlopening_a_library_with_styx_probes_is_followed() {
    by_pid(Library::Styx, "late-pid-styx");
}

#[test]
fn a_process_dlopening_a_library_with_sdt_probes_is_followed() {
    by_pid(Library::Sdt, "late-pid-sdt");
}

/// A command that never maps a library with the probes asked for: the
/// loader waits, the command runs to its end, and the loader then fails
/// saying nothing was traced.
#[test]
fn a_command_that_never_maps_probes_ends_in_an_error() {
    require_root();
    let dir = scratch("late-never");
    let (program, _) = build(&dir);
    let out = dir.join("events.jsonl");
    // dlopen of a library that does not exist: the program fails at once.
    let (status, stderr) = spawn_loader(
        &[
            "-o",
            "jsonl",
            "--output",
            out.to_str().unwrap(),
            "--",
            program.to_str().unwrap(),
            "0",
            "/nonexistent/lib.so",
            "styx",
            "1",
        ],
        Stdio::null(),
    )
    .finish();
    assert!(!status.success(), "{stderr:#?}");
    assert!(
        stderr.iter().any(|l| l.contains("waiting for a library")),
        "{stderr:#?}"
    );
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("error") && l.contains("nothing was traced")),
        "{stderr:#?}"
    );
}

/// A process that maps thousands of files, then maps and unmaps one over
/// and over: the loader reads each file once (by device and inode), stops
/// following past its bound with one warning, and stays responsive (it
/// ends when the process does).
#[test]
fn a_process_mapping_files_without_end_is_followed_within_bounds() {
    require_root();
    let dir = scratch("late-many");
    let program = dir.join("map_many");
    cc(&[
        "-O2",
        "-o",
        program.to_str().unwrap(),
        &format!("{SOURCES}/map_many.c"),
    ]);
    // On tmpfs: creating thousands of files on the scratch disk takes seconds.
    let files = PathBuf::from(format!("/dev/shm/styx-late-many-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&files);
    std::fs::create_dir(&files).unwrap();
    let mut prog = TestProg::start(&program, &[files.to_str().unwrap(), "5000", "3000"]);
    let out = dir.join("events.jsonl");
    let mut loader = prog.attach_loader(&[
        "-e",
        "insn_exec",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ]);
    prog.run("go", "done");
    // A loader stuck reading files would not say it (wait_for_line gives up).
    loader
        .wait_for_line("mapped more files than styx follows")
        .unwrap_or_else(|e| panic!("{e}"));
    prog.finish();
    std::fs::remove_dir_all(&files).unwrap();
    let (status, stderr) = loader.finish();
    // Nothing with probes was ever mapped.
    assert!(!status.success(), "{stderr:#?}");
    let warnings: Vec<_> = stderr.iter().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "said once: {stderr:#?}");
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("error") && l.contains("nothing was traced")),
        "{stderr:#?}"
    );
}

/// `--functions` in a library a command loads later: each call's entry
/// and exit, around the probe it fires (`--probes` too, so that the
/// program knows when the tracer has reached the library).
#[test]
fn a_command_dlopening_a_library_is_followed_for_its_functions() {
    require_root();
    let dir = scratch("late-command-functions");
    let (program, sdt) = build(&dir);
    let out = dir.join("events.jsonl");
    let n = N.to_string();
    let (status, stderr) = spawn_loader(
        &[
            "-o",
            "jsonl",
            "--output",
            out.to_str().unwrap(),
            "--probes",
            "sdtdl:*",
            "--functions",
            "^sdtdl_fire$",
            "--",
            program.to_str().unwrap(),
            "100",
            sdt.to_str().unwrap(),
            "sdt",
            &n,
        ],
        Stdio::null(),
    )
    .finish();
    assert!(status.success(), "{stderr:#?}");
    check_followed(&stderr, &sdt);
    let events = events(&out, None);
    let of = |event: &str| {
        events
            .iter()
            .filter(|e| e["event"] == event && (event == "usdt" || e["function"] == "sdtdl_fire"))
            .count() as u64
    };
    assert_eq!(
        (
            of("fn_entry"),
            of("usdt"),
            of("fn_exit"),
            events.len() as u64
        ),
        (N, N, N, 3 * N),
        "{stderr:#?}"
    );
    // The per-function table names the library's function.
    assert!(
        stderr
            .iter()
            .any(|l| l.ends_with("sdtdl_fire") && l.contains(&n)),
        "{stderr:#?}"
    );
}

/// A capture (`-o raw`), whose header is written when it opens: styx's own
/// events of a library loaded later need no more of it and are all there
/// (batches kept whole), read back exactly; another provider's probes in
/// that library cannot be named there, which a warning says.
#[test]
fn a_capture_takes_a_later_librarys_styx_events_and_says_what_it_cannot_name() {
    require_root();
    let dir = scratch("late-command-raw");
    let (program, _) = build(&dir);
    let lib = library_path(Library::Styx, Path::new(""));
    let capture = dir.join("run.styx");
    let n = N.to_string();
    let (status, stderr) = spawn_loader(
        &[
            "-o",
            "raw",
            "--output",
            capture.to_str().unwrap(),
            "-e",
            "insn_exec,mem_read",
            "--probes",
            "styx_testlib:*",
            "--",
            program.to_str().unwrap(),
            "100",
            lib.to_str().unwrap(),
            "styx",
            &n,
        ],
        Stdio::null(),
    )
    .finish();
    assert!(status.success(), "{stderr:#?}");
    assert!(
        stderr.iter().any(|l| l.contains("warning")
            && l.contains("--probes and --functions are not traced")
            && l.contains("libstyx_testlib.so")),
        "{stderr:#?}"
    );
    let out = dir.join("read.jsonl");
    let (status, _, read_stderr) = run_loader(&[
        "read",
        capture.to_str().unwrap(),
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(status.success(), "{read_stderr}");
    assert_eq!(events(&out, None), Library::Styx.expected(), "{stderr:#?}");
}
