//! Shared pieces of the end-to-end tests: the programs under test, the
//! loader (started and read through styx-testkit), what it writes, and a
//! live process's semaphores.

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use styx_common::{Delivery, EventKind};
pub use styx_testkit::{lines_of, Loader, Summary};

pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "these tests load eBPF programs and must run as root: sudo cargo xtask test"
    );
}

pub fn testprog_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_styx-testprog"))
}

pub fn loader_path() -> PathBuf {
    beside_testprog("styx-loader", "styx-loader")
}

/// The styx event types, from the catalogue (other providers' probes,
/// `usdt`, are not one of them).
pub fn styx_types() -> usize {
    EventKind::ALL
        .iter()
        .filter(|&&k| k != EventKind::Usdt)
        .count()
}

/// The styx event types delivered in batches (by default).
pub fn batched_types() -> usize {
    EventKind::ALL
        .iter()
        .filter(|k| k.delivery() == Delivery::Batched)
        .count()
}

/// A command running styx-loader that also prints its summary as JSON, for
/// [`summary_of`] (as styx-testkit's `Loader` does).
pub fn loader_command() -> Command {
    let mut command = Command::new(loader_path());
    command.env(styx_testkit::JSON_SUMMARY_ENV, "1");
    command
}

/// The 6502 demo emulator.
pub fn demo_path() -> PathBuf {
    beside_testprog("styx-demo", "styx-demo")
}

/// The file `name` that another package, `package`, builds beside
/// styx-testprog under `cargo xtask test` (plain `cargo test` does not
/// build other packages' binaries and libraries).
pub fn beside_testprog(name: &str, package: &str) -> PathBuf {
    let path = testprog_path().with_file_name(name);
    assert!(
        path.exists(),
        "{} is missing: run the tests with `cargo xtask test`, or `cargo build -p {package}` first",
        path.display()
    );
    path
}

/// Writes `bytes` to `path` as a program anyone may run (a test program's
/// copy with bytes changed).
pub fn write_program(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// A scratch directory for one test, removed and recreated.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating scratch dir");
    dir
}

/// A program under test driven line by line over stdin/stdout:
/// styx-testprog, or one of the C programs.
pub struct TestProg {
    pub child: Child,
    binary: PathBuf,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// What styx-testprog says a `fire` did: probe calls, and closures run.
pub struct Fired {
    pub calls: u64,
    pub evaluated: u64,
}

impl TestProg {
    /// styx-testprog, writing each event it fires to `expect_file` if given.
    pub fn spawn(expect_file: Option<&Path>) -> TestProg {
        let expect = expect_file.map(|f| f.to_str().expect("a UTF-8 path"));
        match expect {
            Some(file) => Self::start(&testprog_path(), &["--expect", file]),
            None => Self::start(&testprog_path(), &[]),
        }
    }

    pub fn start(binary: &Path, args: &[&str]) -> TestProg {
        let mut child = Command::new(binary)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        TestProg {
            child,
            binary: binary.to_path_buf(),
            stdin,
            stdout,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// styx-loader tracing this program (`--pid` and then `args`), once it
    /// says it has attached.
    pub fn attach_loader(&self, args: &[&str]) -> Loader {
        let pid = self.pid().to_string();
        let mut all = vec!["--pid", &pid];
        all.extend_from_slice(args);
        attach_loader(&all)
    }

    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").expect("sending a command");
        self.stdin.flush().expect("flush");
    }

    fn read_line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("reading an answer");
        line
    }

    /// Sends `command` (unless empty) and returns the lines printed up to
    /// `end` (excluded).
    pub fn run(&mut self, command: &str, end: &str) -> Vec<String> {
        if !command.is_empty() {
            self.send(command);
        }
        let mut lines = Vec::new();
        loop {
            let line = self.read_line();
            assert!(
                !line.is_empty(),
                "the program ended before printing {end:?}"
            );
            let line = line.trim_end();
            if line == end {
                return lines;
            }
            lines.push(line.to_string());
        }
    }

    /// Sends `command` without waiting for an answer.
    pub fn send_only(&mut self, command: &str) {
        self.send(command);
    }

    /// Sends `command` and returns its one-line answer.
    pub fn ask(&mut self, command: &str) -> String {
        self.send(command);
        self.read_line()
    }

    /// styx-testprog: fires `rounds` rounds of every probe on each of
    /// `threads` threads.
    pub fn fire(&mut self, rounds: u64, threads: u64) -> Fired {
        self.fire_by(&format!("fire {rounds} {threads}"))
    }

    /// styx-testprog: a command answered like `fire` (`fire-main`, `park`).
    pub fn fire_by(&mut self, command: &str) -> Fired {
        let answer = self.ask(command);
        let number = |name: &str| -> u64 { field(&answer, name).parse().expect("number") };
        Fired {
            calls: number("calls"),
            evaluated: number("evaluated"),
        }
    }

    /// styx-testprog: what its probes say is attached (any, the enabled types).
    pub fn enabled(&mut self) -> (bool, String) {
        let answer = self.ask("enabled");
        (
            field(&answer, "any") == "1",
            field(&answer, "kinds").to_string(),
        )
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// styx-testprog: asks it to quit, and waits for a clean exit.
    pub fn quit(mut self) {
        self.send("quit");
        self.finish();
    }

    /// Closes stdin and waits for a clean exit.
    pub fn finish(self) {
        let TestProg {
            mut child,
            binary,
            stdin,
            ..
        } = self;
        drop(stdin);
        let status = child.wait().expect("waiting for the program");
        assert!(status.success(), "{} failed: {status}", binary.display());
    }
}

/// The value of the `NAME=VALUE` word `name` in an answer of styx-testprog.
fn field<'a>(answer: &'a str, name: &str) -> &'a str {
    answer
        .split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name} in answer {answer:?}"))
}

/// Starts styx-loader with `args` and waits until it says it has attached;
/// panics with everything it printed if it exits or stalls first.
pub fn attach_loader(args: &[&str]) -> Loader {
    Loader::attach(&loader_path(), args, Stdio::null()).unwrap_or_else(|e| panic!("{e}"))
}

/// The event types styx-probe batches.
pub const BATCHED: &str = "insn_fetch,insn_exec,block,mem_read,mem_write,reg_read,reg_write,branch";

/// Those types through a ring of three batches, which an emulator faster
/// than the output fills at once.
pub const BATCHED_SMALL_RING: [&str; 4] = ["-e", BATCHED, "--ring-size", "256K"];

/// styx-loader writing `prog`'s batched events as JSON lines to a pipe
/// (a 256 KiB ring; `more` options), once attached, and the pipe's end
/// nobody reads until the test does.
pub fn jsonl_to_a_pipe(prog: &TestProg, more: &[&str]) -> (Loader, ChildStdout) {
    let pid = prog.pid().to_string();
    let mut args = vec!["--pid", &pid, "-o", "jsonl"];
    args.extend(BATCHED_SMALL_RING);
    args.extend(more);
    let mut loader = spawn_loader(&args, Stdio::piped());
    loader.wait_for_line("attached").unwrap();
    let stdout = loader.child.stdout.take().unwrap();
    (loader, stdout)
}

/// Starts styx-loader with `args`, its stdout going to `stdout`.
pub fn spawn_loader(args: &[&str], stdout: Stdio) -> Loader {
    Loader::spawn(&loader_path(), args, stdout).unwrap_or_else(|e| panic!("{e}"))
}

/// `styx-loader list BINARY PROBES`: the declared types it shows
/// (`declared NAME(FIELDS)` lines, without `declared `), and all it printed.
pub fn listed_declared(binary: &Path, probes: &str) -> (Vec<String>, String) {
    let (status, stdout, stderr) = run_loader(&["list", binary.to_str().unwrap(), probes]);
    assert!(status.success(), "{stderr}");
    let declared = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("declared "))
        .map(String::from)
        .collect();
    (declared, stdout)
}

/// Runs the loader to completion and returns (status, stdout, stderr).
pub fn run_loader(args: &[&str]) -> (ExitStatus, String, String) {
    let output = loader_command()
        .args(args)
        .output()
        .expect("running styx-loader");
    (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `-o jsonl --output OUT --delivery DELIVERY`, then `extra`.
pub fn jsonl_to<'a>(out: &'a Path, delivery: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "-o",
        "jsonl",
        "--output",
        out.to_str().expect("a UTF-8 path"),
        "--delivery",
        delivery,
    ];
    args.extend_from_slice(extra);
    args
}

/// The loader's end-of-run summary, from its stderr.
pub fn summary_of(stderr: &[String]) -> Summary {
    Summary::find(stderr).unwrap_or_else(|e| panic!("{e}"))
}

/// Reads JSON lines, dropping `ts_ns` (only the tracer knows it).
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_string(&mut text))
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    parse_jsonl(&text)
}

/// JSON lines, without `ts_ns`.
pub fn parse_jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .map(|line| {
            let mut value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("bad JSON line {line:?}: {e}"));
            value.as_object_mut().expect("object").remove("ts_ns");
            value
        })
        .collect()
}

/// Every event styx-testprog fired (its `--expect` file) arrived in the
/// loader's JSON lines `out`, exactly, each thread's in the order fired;
/// returns how many.
pub fn assert_every_event_arrived(expect: &Path, out: &Path) -> usize {
    let expected = read_jsonl(expect);
    let traced = read_jsonl(out);
    assert_eq!(traced.len(), expected.len(), "events traced vs fired");
    let (expected, traced) = (by_tid(expected), by_tid(traced));
    assert_eq!(
        traced.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (tid, want) in &expected {
        for (i, (w, g)) in want.iter().zip(&traced[tid]).enumerate() {
            assert_eq!(g, w, "thread {tid}, event {i}");
        }
    }
    expected.values().map(Vec::len).sum()
}

/// Lines written to `path` so far (0 before it exists).
pub fn lines_in(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}

/// Groups events by thread id, keeping their order.
pub fn by_tid(events: Vec<Value>) -> BTreeMap<u64, Vec<Value>> {
    let mut map: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    for event in events {
        let tid = event["tid"].as_u64().expect("tid");
        map.entry(tid).or_default().push(event);
    }
    map
}

/// The current value of every styx semaphore word in a live process, by
/// probe name, read from its memory through /proc: the low half counts
/// per-event sites attached (bpftrace, `--delivery per-event`), the high
/// half batch-enable sites (`styx_batch:<type>`, the default delivery).
pub fn semaphores(pid: u32) -> BTreeMap<String, u32> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("readlink exe");
    file_semaphores(pid, &exe)
}

/// The semaphores of the probes in `file` (the executable or a library) as
/// process `pid` sees them, by probe name.
pub fn file_semaphores(pid: u32, file: &Path) -> BTreeMap<String, u32> {
    provider_semaphores(pid, file, "styx")
}

/// The semaphores of `provider`'s probes in `file` as process `pid` sees
/// them, by probe name.
pub fn provider_semaphores(pid: u32, file: &Path, provider: &str) -> BTreeMap<String, u32> {
    let table = styx_usdt::note::read_probe_table(file).expect("reading probe notes");
    let styx = |s: &&styx_usdt::note::ProbeSite| s.provider == provider && s.semaphore != 0;
    let sites: Vec<_> = table.sites.iter().filter(styx).collect();
    // A process just started may still be changing its mappings (its
    // dynamic loader's RELRO), and /proc/PID/maps read meanwhile can miss
    // a line: read it again until every semaphore is mapped.
    let deadline = Instant::now() + Duration::from_secs(2);
    let addresses = loop {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("reading maps");
        let found: Result<Vec<u64>, &str> = sites
            .iter()
            .map(|site| {
                runtime_address(&maps, file, site.semaphore_offset).ok_or(site.name.as_str())
            })
            .collect();
        match found {
            Ok(addresses) => break addresses,
            Err(name) if Instant::now() > deadline => panic!("semaphore of {name} not mapped"),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).expect("opening /proc/PID/mem");
    let mut values = BTreeMap::new();
    for (site, address) in sites.iter().zip(addresses) {
        let mut bytes = [0u8; 4];
        std::os::unix::fs::FileExt::read_exact_at(&mem, &mut bytes, address)
            .expect("reading semaphore");
        values.insert(site.name.clone(), u32::from_ne_bytes(bytes));
    }
    values
}

/// How many per-event sites each styx probe has in a live process's
/// executable.
pub fn sites_per_probe(pid: u32) -> BTreeMap<String, u32> {
    let exe = PathBuf::from(format!("/proc/{pid}/exe"));
    let table = styx_usdt::note::read_probe_table(&exe).expect("reading probe notes");
    let mut counts = BTreeMap::new();
    for site in table.sites.iter().filter(|s| s.provider == "styx") {
        *counts.entry(site.name.clone()).or_default() += 1;
    }
    counts
}

/// The semaphore words one loader with the default (batched) delivery
/// raises, attached to every type: a batch-enable site for each batched
/// type (high half), every per-event site of the others (low half).
pub fn words_of_one_batched_loader(pid: u32) -> BTreeMap<String, u32> {
    sites_per_probe(pid)
        .into_iter()
        .map(|(name, sites)| {
            let kind = styx_common::EventKind::from_probe_name(&name).expect("a styx event");
            let word = match kind.delivery() {
                styx_common::Delivery::Batched => 1 << 16,
                styx_common::Delivery::PerEvent => sites,
            };
            (name, word)
        })
        .collect()
}

/// Where a file offset of `exe` is mapped in a process, from its maps.
fn runtime_address(maps: &str, exe: &Path, file_offset: u64) -> Option<u64> {
    let exe = exe.to_str()?;
    maps.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 6 || fields[5] != exe {
            return None;
        }
        let (start, end) = fields[0].split_once('-')?;
        let start = u64::from_str_radix(start, 16).ok()?;
        let end = u64::from_str_radix(end, 16).ok()?;
        let offset = u64::from_str_radix(fields[2], 16).ok()?;
        (file_offset >= offset && file_offset < offset + (end - start))
            .then(|| start + (file_offset - offset))
    })
}

pub use styx_testkit::catches_sigint;

/// Whether bpftrace (`pid`) is in its event loop, waiting in `epoll_wait`
/// for output: it enters the loop only after every probe has its program
/// attached and enabled. Its SIGINT handler, and the semaphores the kernel
/// raises when a uprobe is opened, come before that.
pub fn in_event_loop(pid: u32) -> bool {
    const EPOLL_WAIT: &str = "232";
    std::fs::read_to_string(format!("/proc/{pid}/syscall"))
        .is_ok_and(|s| s.split_whitespace().next() == Some(EPOLL_WAIT))
}

/// Polls until `check` holds or 10 s pass; the kernel releases a killed
/// process's links asynchronously.
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the C compiler (Debian's systemtap-sdt-dev provides <sys/sdt.h>).
pub fn cc(args: &[&str]) {
    let status = Command::new("cc").args(args).status().expect("running cc");
    assert!(
        status.success(),
        "cc {args:?} failed (is systemtap-sdt-dev installed?)"
    );
}

/// Events of a jsonl trace without the fields a C program cannot predict
/// (event, pid, tid), after checking they name `pid`'s usdt events.
pub fn usdt_events(path: &Path, pid: u32) -> Vec<Value> {
    read_jsonl(path)
        .into_iter()
        .map(|mut event| {
            let object = event.as_object_mut().unwrap();
            assert_eq!(object.remove("event").unwrap(), "usdt");
            assert_eq!(object.remove("pid").unwrap().as_u64(), Some(pid as u64));
            object.remove("tid");
            event
        })
        .collect()
}

/// Stops bpftrace with SIGINT (it then prints its maps) and returns what it
/// printed (nothing if its stdout was taken); fails rather than hang if it
/// does not end within 20 s.
/// bpftrace running `script` on process `pid`, once it is ready: waiting
/// in its event loop with a perf event for each of the probe's `sites`
/// (the kernel counts one semaphore reference per attached site, however
/// many tracers share it, so the word cannot tell).
pub fn bpftrace_attached(pid: u32, script: &str, sites: u32) -> Child {
    let bpftrace = Command::new("bpftrace")
        .args(["-p", &pid.to_string(), "-e", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting bpftrace");
    eventually("bpftrace attached too", || {
        in_event_loop(bpftrace.id()) && perf_events_open(bpftrace.id()) >= sites as usize
    });
    bpftrace
}

pub fn stop_bpftrace(bpftrace: Child) -> String {
    stop_bpftrace_poking(bpftrace, || {})
}

/// Like [`stop_bpftrace`], calling `poke` while waiting: bpftrace 0.17
/// streaming printf output only notices SIGINT when an event wakes it.
pub fn stop_bpftrace_poking(mut bpftrace: Child, mut poke: impl FnMut()) -> String {
    // SAFETY: signalling a child we started.
    unsafe { libc::kill(bpftrace.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(20);
    while bpftrace.try_wait().unwrap().is_none() {
        poke();
        if Instant::now() > deadline {
            let _ = bpftrace.kill();
            let _ = bpftrace.wait();
            panic!("bpftrace ignored SIGINT for 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut printed = String::new();
    if let Some(mut out) = bpftrace.stdout.take() {
        out.read_to_string(&mut printed).unwrap();
    }
    printed
}

/// How many perf events process `pid` holds open: bpftrace opens one per
/// uprobe site it attaches.
pub fn perf_events_open(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
                .filter(|target| target.to_string_lossy().contains("perf_event"))
                .count()
        })
        .unwrap_or(0)
}

/// DuckDB (installed by scripts/setup into /opt/styx-py) runs `sql`; the
/// rows come back as JSON.
pub fn duckdb(sql: &str) -> Vec<Vec<Value>> {
    let python = std::env::var("STYX_PYTHON").unwrap_or_else(|_| "/opt/styx-py/bin/python".into());
    let script = format!(
        "import duckdb, json\nprint(json.dumps([list(r) for r in duckdb.sql({sql:?}).fetchall()]))"
    );
    let output = Command::new(&python)
        .args(["-c", &script])
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{python}: {e}: run scripts/setup (cargo xtask test does), which installs DuckDB"
            )
        });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{sql}: {stderr}");
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Runs a C test program (c_probes.c, c_declared.c) with no tracer: it
/// ends well and says it evaluated no probe's arguments.
pub fn untraced_evaluates_nothing(program: &Path) {
    let run = Command::new(program).stdin(Stdio::null()).output().unwrap();
    assert!(run.status.success(), "{}: {run:?}", program.display());
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(
        said.contains("evaluated 0"),
        "{}: {said}",
        program.display()
    );
}

/// How a C test program is built against styx-probe-c.
#[derive(Clone, Copy, Debug)]
pub enum CBuild {
    C11,
    Cxx17,
    /// C against the shared library (`-DSTYX_PROBE_SHARED`).
    Shared,
    /// C with the probes compiled out (`-DSTYX_PROBES_OFF`), no library.
    ProbesOff,
}

/// `source` built as `build` into `out` (`-O2 -Wall -Werror`) against
/// `styx_probe.h` and styx-probe-c's static or shared library; headers
/// also looked for in `include`.
pub fn build_c(build: CBuild, source: &str, out: &Path, include: Option<&Path>) -> PathBuf {
    const HEADERS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../styx-probe-c/include");
    let lib = testprog_path().with_file_name("libstyx_probe_c.a");
    let (compiler, mut args): (&str, Vec<String>) = match build {
        CBuild::C11 => ("cc", vec!["-std=c11".into()]),
        CBuild::Cxx17 => ("c++", vec!["-std=c++17".into(), "-x".into(), "c++".into()]),
        CBuild::Shared => ("cc", vec!["-std=c11".into(), "-DSTYX_PROBE_SHARED".into()]),
        CBuild::ProbesOff => ("cc", vec!["-std=c11".into(), "-DSTYX_PROBES_OFF".into()]),
    };
    args.extend(["-O2", "-Wall", "-Werror", "-I", HEADERS].map(String::from));
    if let Some(include) = include {
        args.extend(["-I".into(), include.to_str().unwrap().into()]);
    }
    args.extend(["-o".into(), out.to_str().unwrap().into(), source.into()]);
    if let CBuild::Cxx17 = build {
        args.extend(["-x".into(), "none".into()]);
    }
    match build {
        CBuild::Shared => {
            let lib_dir = lib.parent().unwrap().to_str().unwrap();
            args.extend([
                format!("-L{lib_dir}"),
                "-lstyx_probe_c".into(),
                format!("-Wl,-rpath,{lib_dir}"),
            ]);
        }
        CBuild::ProbesOff => {}
        _ => args.push(lib.to_str().unwrap().into()),
    }
    args.extend(["-lpthread", "-ldl", "-lm"].map(String::from));
    let status = Command::new(compiler).args(&args).status().unwrap();
    assert!(status.success(), "{compiler} {args:?}");
    out.to_path_buf()
}
