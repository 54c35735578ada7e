//! Fires every styx probe in a known sequence, on command, and records what it
//! passed so tests can compare it with what a tracer saw.
//!
//! Reads commands from stdin, one per line, and answers each on stdout:
//! - `fire ROUNDS THREADS`: each of THREADS threads fires ROUNDS rounds of
//!   every event type. Answers `done calls=C evaluated=E`: probe calls made,
//!   and argument closures that ran (0 while no tracer is attached).
//! - `enabled`: answers `enabled any=0|1 kinds=K,…`: what
//!   `styx_probe::any_enabled` says, and each event type `enabled` names.
//! - `fire-main ROUNDS`: fires ROUNDS rounds on the main thread, which stays
//!   (so batched events wait in its batch). Answers like `fire`.
//! - `flush`: calls `styx_probe::flush()` on the main thread; answers `flushed`.
//! - `park ROUNDS THREADS`: THREADS threads fire ROUNDS rounds each and then
//!   wait, their batches pending, until `unpark`. Answers like `fire` once
//!   all have fired.
//! - `unpark`: lets the parked threads exit; answers `unparked` once they have.
//! - `exit-thread CODE`: a new thread calls `exit(CODE)`, the parked ones still
//!   waiting.
//! - `exit CODE`: exits with CODE.
//! - `churn PAIRS`: PAIRS times, two threads at once: one fires an
//!   `insn_exec` in each of 10 batches (a `flush()` between them), the
//!   other one event in one batch; every fourth pair a thread that fires
//!   nothing first. So thread ids come round again (after ~32,000 threads
//!   with the kernel's default `pid_max`), each time with either buffer,
//!   whose batch numbers grow at different rates. Answers like `fire`.
//! - `fork-child ROUNDS`: a thread fires rounds, each followed by
//!   `flush()`, until this command ends (so that it is at its credit's end
//!   while a lossless loader lags); 0.1 s later the main thread forks a
//!   child that fires ROUNDS rounds the same way and exits. Answers
//!   `forked status=S`, S the child's exit status, then waits for the thread.
//! - `recurse DEPTH`: calls `calls::recurse(DEPTH)`; answers `recursed`.
//! - `panic DEPTH AT AFTER`: `calls::recurse_then_panic(DEPTH, AT)` panics
//!   at AT, caught; then `calls::recurse(AFTER)`. Answers `caught`.
//! - `recurse-threads DEPTH THREADS`: each of THREADS threads calls
//!   `calls::recurse(DEPTH)`; answers `recursed`.
//! - `dlopen PATH`: loads the shared library PATH (styx-testlib) at run
//!   time; answers `loaded`.
//! - `lib-fire N THREADS`: calls the loaded library's `styx_testlib_fire`
//!   (N `insn_exec` and N `mem_read` on each of THREADS threads, or on
//!   this thread with THREADS 0); answers
//!   `lib-fired E`, E the events it fired.
//! - `declared N`: fires its own declared event type `testprog_tick(i,
//!   -i)` N times; answers `declared N`.
//! - `quit`: exits (returns from `main`).
//!
//! Its first act is a `marker` "testprog start", which only a tracer that
//! attached before the program started can see.
//!
//! With `--expect FILE`, every event whose closure ran is also written to FILE
//! as a JSON line in styx-loader's jsonl format (without `ts_ns`).

mod calls;

use serde_json::{json, Value};
use std::cell::Cell;
use std::fs::File;
use std::io::{BufRead, BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use styx_probe::{Branch, BranchKind, EventKind, InterruptKind};

styx_probe::event! {
    /// The program's own event type, beside styx-testlib's (`declared N`).
    pub testprog_tick(i: u64, minus_i: i32);
}

static EVALUATED: AtomicU64 = AtomicU64::new(0);
static CALLS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static EVALUATED_HERE: Cell<u64> = const { Cell::new(0) };
}

/// Counts a closure run; returns the probe's arguments unchanged.
fn eval<T>(args: T) -> T {
    EVALUATED.fetch_add(1, Ordering::Relaxed);
    EVALUATED_HERE.with(|n| n.set(n.get() + 1));
    args
}

fn evaluated_here() -> u64 {
    EVALUATED_HERE.with(Cell::get)
}

/// The first marker's text, in the middle of 256 KiB of read-only data
/// nothing else reads: on a page the process has not touched (the kernel
/// maps up to 64 KiB around a page read in), as a `&'static str` in a
/// large emulator's `.rodata` can be.
const START_TEXT: &str = {
    const PAD: usize = 128 * 1024;
    const TEXT: &[u8] = b"testprog start";
    static BYTES: [u8; 2 * PAD] = {
        let mut bytes = [b'.'; 2 * PAD];
        let mut i = 0;
        while i < TEXT.len() {
            bytes[PAD + i] = TEXT[i];
            i += 1;
        }
        bytes
    };
    match std::str::from_utf8(BYTES.split_at(PAD).1.split_at(TEXT.len()).0) {
        Ok(text) => text,
        Err(_) => panic!("ASCII"),
    }
};

/// A marker longer than a record holds (120 bytes), to see truncation reported.
const LONG_MARKER: &str = "this marker text is deliberately longer than the one hundred and twenty bytes a marker record keeps, so it is cut and flagged";
/// A span name longer than a record holds (64 bytes).
const LONG_SPAN_NAME: &str =
    "a span name that is longer than the sixty-four bytes a span record keeps";

/// Writes the events whose closures ran, as the tracer should report them.
struct Recorder {
    out: Option<Mutex<BufWriter<File>>>,
}

impl Recorder {
    /// Writes out what was recorded so far.
    fn flush(&self) {
        if let Some(out) = &self.out {
            out.lock().expect("recorder lock").flush().expect("flush");
        }
    }

    fn record(&self, event: &str, fields: Value) {
        let Some(out) = &self.out else { return };
        let mut line = json!({
            "pid": std::process::id(),
            "tid": gettid(),
            "event": event,
        });
        let line_fields = line.as_object_mut().expect("object");
        for (key, value) in fields.as_object().expect("fields are an object") {
            line_fields.insert(key.clone(), value.clone());
        }
        let mut out = out.lock().expect("recorder lock");
        serde_json::to_writer(&mut *out, &line).expect("writing the expect file");
        out.write_all(b"\n").expect("writing the expect file");
    }
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

/// Calls a probe with a counted closure and records the event if it ran.
macro_rules! fire {
    ($rec:expr, $probe:ident, ($($arg:expr),*), $fields:tt) => {{
        CALLS.fetch_add(1, Ordering::Relaxed);
        let before = evaluated_here();
        styx_probe::$probe!(|| eval(($($arg),*)));
        if evaluated_here() > before {
            $rec.record(stringify!($probe), json!($fields));
        }
    }};
    // The closure returns an `Option` of the values (`Some`).
    ($rec:expr, $probe:ident, Some($($arg:expr),*), $fields:tt) => {{
        CALLS.fetch_add(1, Ordering::Relaxed);
        let before = evaluated_here();
        styx_probe::$probe!(|| Some(eval(($($arg),*))));
        if evaluated_here() > before {
            $rec.record(stringify!($probe), json!($fields));
        }
    }};
}

/// One round: every probe once; the memory access size cycles through 1, 2, 4, 8
/// and the branch kind through every kind, conditional and not.
fn fire_round(rec: &Recorder, thread: u64, i: u64) {
    let pc = 0x1000 + i + (thread << 24);
    let insn = 0xa900_0000 + i;
    // insn_fetch without a length (0 in every output), insn_exec with one.
    fire!(rec, insn_fetch, (pc, insn), {"pc": pc, "insn": insn, "len": 0});
    let len = (i % 15 + 1) as u8;
    fire!(rec, insn_exec, (pc, insn, len), {"pc": pc, "insn": insn, "len": len});
    let size = i % 16 + 1;
    fire!(rec, block, (pc, size), {"pc": pc, "size": size});

    let addr = 0x4000_0000 + i;
    let raw = i.wrapping_mul(0x0101_0101_0101_0101) ^ 0x8000_0000_0000_0000;
    match i % 4 {
        0 => {
            let v = raw as u8;
            fire!(rec, mem_read, (pc, addr, v), {"pc": pc, "addr": addr, "val": v, "size": 1});
            fire!(rec, mem_write, (pc, addr + 1, v), {"pc": pc, "addr": addr + 1, "val": v, "size": 1});
        }
        1 => {
            let v = raw as u16;
            fire!(rec, mem_read, (pc, addr, v), {"pc": pc, "addr": addr, "val": v, "size": 2});
            fire!(rec, mem_write, (pc, addr + 1, v), {"pc": pc, "addr": addr + 1, "val": v, "size": 2});
        }
        2 => {
            let v = raw as u32;
            fire!(rec, mem_read, (pc, addr, v), {"pc": pc, "addr": addr, "val": v, "size": 4});
            fire!(rec, mem_write, (pc, addr + 1, v), {"pc": pc, "addr": addr + 1, "val": v, "size": 4});
        }
        _ => {
            fire!(rec, mem_read, (pc, addr, raw), {"pc": pc, "addr": addr, "val": raw, "size": 8});
            fire!(rec, mem_write, (pc, addr + 1, raw), {"pc": pc, "addr": addr + 1, "val": raw, "size": 8});
        }
    }

    let reg = i % 8;
    fire!(rec, reg_read, (pc, reg, raw), {"pc": pc, "reg": reg, "val": raw});
    fire!(rec, reg_write, (pc, reg, raw, i), {"pc": pc, "reg": reg, "val": raw, "old": i});

    let kind = BranchKind::ALL[(i % 8) as usize];
    let conditional = (i / 8) % 2 == 1;
    let branch = Branch { kind, conditional };
    let target = pc + 0x100;
    fire!(rec, branch, Some(pc, target, branch),
        {"pc": pc, "target": target, "kind": kind.name(), "conditional": conditional});
    // `None` fires nothing (not counted as a call: no event is expected).
    styx_probe::branch!(|| (i == u64::MAX).then(|| eval((pc, target, branch))));

    let irq = if i.is_multiple_of(2) {
        InterruptKind::Entry
    } else {
        InterruptKind::Exit
    };
    let vector = i % 3;
    fire!(rec, interrupt, (irq, vector, pc, target),
        {"kind": irq.name(), "num": vector, "old_pc": pc, "new_pc": target});
    fire!(rec, control, (i, raw, 7u8), {"code": i, "a": raw, "b": 7});

    let id = styx_probe::next_span_id();
    fire!(rec, span_begin, ("round", "fire", id), {"category": "round", "name": "fire", "id": id});
    fire!(rec, span_end, ("round", "fire", id), {"category": "round", "name": "fire", "id": id});
    if i.is_multiple_of(16) {
        let name = LONG_SPAN_NAME;
        fire!(rec, span_begin, ("round", name, id), {"category": "round", "name": &name[..64], "id": id, "truncated": true});
        let text = LONG_MARKER;
        fire!(rec, marker, (text), {"text": &text[..120], "truncated": true});
    }
    let text = format!("round {i}");
    fire!(rec, marker, (text.as_str()), {"text": text});
}

/// Threads that fired and now wait for `unpark`, their batches pending.
struct Parked {
    release: std::sync::mpsc::Sender<()>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

fn park(rec: &'static Recorder, rounds: u64, threads: u64) -> Parked {
    let (release, wait) = std::sync::mpsc::channel::<()>();
    let wait = std::sync::Arc::new(Mutex::new(wait));
    let (fired, done) = std::sync::mpsc::channel();
    let threads = (0..threads)
        .map(|thread| {
            let (wait, fired) = (wait.clone(), fired.clone());
            std::thread::spawn(move || {
                for i in 0..rounds {
                    fire_round(rec, thread, i);
                }
                fired.send(()).expect("main waits");
                // Disconnected by `unpark`: every thread wakes then.
                let _ = wait.lock().expect("lock").recv();
            })
        })
        .collect::<Vec<_>>();
    for _ in &threads {
        done.recv().expect("a parked thread fired");
    }
    Parked { release, threads }
}

fn answer(line: &str) {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .expect("writing stdout");
}

fn done_line() -> String {
    format!(
        "done calls={} evaluated={}",
        CALLS.load(Ordering::Relaxed),
        EVALUATED.load(Ordering::Relaxed)
    )
}

/// Batches the busy thread of each `churn` pair hands over.
const CHURN_BATCHES: u64 = 10;

/// Fires one `insn_exec`, not recorded (`churn` compares counts only).
fn fire_one(pair: u64, i: u64) {
    fire!(NOT_RECORDED, insn_exec, (pair, i), {"pc": pair, "insn": i});
}

static NOT_RECORDED: Recorder = Recorder { out: None };

fn churn(pairs: u64) {
    use std::sync::mpsc::channel;
    for pair in 0..pairs {
        // Shifts which of the pair gets the next thread id, so that an id
        // comes round again on the other buffer.
        if pair % 4 == 0 {
            std::thread::spawn(|| {}).join().expect("an idle thread");
        }
        let (ready, has_buffer) = channel();
        let (go, wait) = channel::<()>();
        // The busy one takes the first free buffer before the other starts.
        let busy = std::thread::spawn(move || {
            fire_one(pair, 0);
            ready.send(()).expect("main waits");
            let _ = wait.recv();
            for i in 1..CHURN_BATCHES {
                styx_probe::flush();
                fire_one(pair, i);
            }
        });
        has_buffer.recv().expect("the busy thread fired");
        std::thread::spawn(move || fire_one(pair, CHURN_BATCHES))
            .join()
            .expect("the quiet thread");
        drop(go);
        busy.join().expect("the busy thread");
    }
}

/// Forks a child that fires `rounds` rounds with a flush after each and
/// exits; returns its exit status once it has.
fn fork_child(rounds: u64) -> i32 {
    // SAFETY: the child has only this thread: it fires probes (which
    // allocate; glibc's fork keeps malloc usable) and exits.
    match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => {
            for i in 0..rounds {
                fire_round(&NOT_RECORDED, 0, i);
                styx_probe::flush();
            }
            // SAFETY: ends the child without running the parent's exit
            // handlers twice over shared files.
            unsafe { libc::_exit(0) }
        }
        child => {
            let mut status = 0;
            // SAFETY: waits for our own child.
            let waited = unsafe { libc::waitpid(child, &mut status, 0) };
            assert_eq!(waited, child, "waitpid");
            status
        }
    }
}

fn run_threads(rec: &Recorder, rounds: u64, threads: u64) {
    std::thread::scope(|scope| {
        for thread in 0..threads {
            scope.spawn(move || {
                for i in 0..rounds {
                    fire_round(rec, thread, i);
                }
            });
        }
    });
}

/// `enabled any=A kinds=K,…`: the probes' own view of which tracers are attached.
fn enabled_line() -> String {
    let kinds: Vec<&str> = EventKind::ALL
        .iter()
        .filter(|&&kind| styx_probe::enabled(kind))
        .map(|kind| kind.probe_name())
        .collect();
    format!(
        "enabled any={} kinds={}",
        u8::from(styx_probe::any_enabled()),
        kinds.join(",")
    )
}

/// styx-testlib's `styx_testlib_fire`.
type LibraryFire = extern "C" fn(u64, u64) -> u64;

/// Loads the library at `path` (never unloaded) and finds its firing
/// function.
fn load_library(path: &str) -> LibraryFire {
    let path = std::ffi::CString::new(path).expect("a path without NUL");
    // SAFETY: a NUL-terminated path; the handle is kept for good.
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW) };
    assert!(!handle.is_null(), "dlopen {path:?} failed");
    // SAFETY: a NUL-terminated name in a library that stays loaded.
    let symbol = unsafe { libc::dlsym(handle, c"styx_testlib_fire".as_ptr()) };
    assert!(!symbol.is_null(), "no styx_testlib_fire in {path:?}");
    // SAFETY: styx-testlib defines it with this signature.
    unsafe { std::mem::transmute::<*mut libc::c_void, LibraryFire>(symbol) }
}

/// The command loop: one arm per command the module's comment lists, in
/// its order. Longer than 80 lines because the protocol is read best as
/// one match, where each command's answer is beside its words.
fn main() {
    // First thing: only a tracer attached before the program started sees
    // it. The eBPF program reads its text without faulting a page in; it
    // sits on a page nothing touched before, which the probe makes
    // resident (the spawn tests see the text whole).
    styx_probe::marker!(|| START_TEXT);
    let args: Vec<String> = std::env::args().collect();
    let out = match args.iter().position(|a| a == "--expect") {
        Some(i) => {
            let path = args.get(i + 1).expect("--expect needs a file");
            Some(Mutex::new(BufWriter::new(
                File::create(path).expect("creating the expect file"),
            )))
        }
        None => None,
    };
    // Static: parked threads outlive the loop's borrows.
    let rec: &'static Recorder = Box::leak(Box::new(Recorder { out }));
    let mut parked: Option<Parked> = None;
    let mut library: Option<LibraryFire> = None;
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("reading stdin");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["fire", rounds, threads] => {
                let rounds = rounds.parse().expect("rounds");
                let threads = threads.parse().expect("threads");
                CALLS.store(0, Ordering::Relaxed);
                EVALUATED.store(0, Ordering::Relaxed);
                run_threads(rec, rounds, threads);
                if let Some(out) = &rec.out {
                    out.lock().expect("recorder lock").flush().expect("flush");
                }
                let mut stdout = stdout.lock();
                writeln!(
                    stdout,
                    "done calls={} evaluated={}",
                    CALLS.load(Ordering::Relaxed),
                    EVALUATED.load(Ordering::Relaxed)
                )
                .and_then(|()| stdout.flush())
                .expect("writing stdout");
            }
            ["enabled"] => {
                let mut stdout = stdout.lock();
                writeln!(stdout, "{}", enabled_line())
                    .and_then(|()| stdout.flush())
                    .expect("writing stdout");
            }
            ["fire-main", rounds] => {
                CALLS.store(0, Ordering::Relaxed);
                EVALUATED.store(0, Ordering::Relaxed);
                for i in 0..rounds.parse().expect("rounds") {
                    fire_round(rec, 0, i);
                }
                rec.flush();
                answer(&done_line());
            }
            ["flush"] => {
                styx_probe::flush();
                answer("flushed");
            }
            ["park", rounds, threads] => {
                CALLS.store(0, Ordering::Relaxed);
                EVALUATED.store(0, Ordering::Relaxed);
                let threads = threads.parse().expect("threads");
                parked = Some(park(rec, rounds.parse().expect("rounds"), threads));
                rec.flush();
                answer(&done_line());
            }
            ["unpark"] => {
                if let Some(Parked { release, threads }) = parked.take() {
                    drop(release);
                    for thread in threads {
                        thread.join().expect("a parked thread");
                    }
                }
                answer("unparked");
            }
            ["exit-thread", code] => {
                let code = code.parse().expect("exit code");
                std::thread::spawn(move || std::process::exit(code))
                    .join()
                    .expect("exits");
            }
            ["exit", code] => std::process::exit(code.parse().expect("exit code")),
            ["churn", pairs] => {
                CALLS.store(0, Ordering::Relaxed);
                EVALUATED.store(0, Ordering::Relaxed);
                churn(pairs.parse().expect("pairs"));
                answer(&done_line());
            }
            ["fork-child", rounds] => {
                let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let busy = {
                    let stop = stop.clone();
                    std::thread::spawn(move || {
                        let mut i = 0;
                        while !stop.load(Ordering::Relaxed) {
                            fire_round(&NOT_RECORDED, 1, i);
                            styx_probe::flush();
                            i += 1;
                        }
                    })
                };
                std::thread::sleep(std::time::Duration::from_millis(100));
                let status = fork_child(rounds.parse().expect("rounds"));
                answer(&format!("forked status={status}"));
                stop.store(true, Ordering::Relaxed);
                busy.join().expect("the busy thread");
            }
            // Fires rounds on this thread, then dies of SIGSEGV (a real
            // fault) or SIGABRT, its batch not handed over.
            ["crash", rounds, how] => {
                for i in 0..rounds.parse().expect("rounds") {
                    fire_round(rec, 0, i);
                }
                rec.flush();
                match *how {
                    // SAFETY: none: the point is to fault.
                    "segv" => unsafe { std::ptr::null_mut::<u64>().write_volatile(1) },
                    _ => std::process::abort(),
                }
            }
            ["recurse", depth] => {
                std::hint::black_box(calls::recurse(depth.parse().expect("depth")));
                answer("recursed");
            }
            ["panic", depth, at, after] => {
                let number = |s: &str| s.parse().expect("a number");
                let caught = calls::panic_then_recurse(number(depth), number(at), number(after));
                answer(if caught { "caught" } else { "not caught" });
            }
            ["recurse-threads", depth, threads] => {
                calls::recurse_on_threads(
                    depth.parse().expect("depth"),
                    threads.parse().expect("threads"),
                );
                answer("recursed");
            }
            ["dlopen", path] => {
                library = Some(load_library(path));
                answer("loaded");
            }
            ["lib-fire", n, threads] => {
                let fire = library.expect("dlopen first");
                let fired = fire(n.parse().expect("n"), threads.parse().expect("threads"));
                answer(&format!("lib-fired {fired}"));
            }
            ["declared", n] => {
                let n: u64 = n.parse().expect("n");
                for i in 0..n {
                    styx_probe::fire!(testprog_tick, || (i, -(i as i32)));
                }
                answer(&format!("declared {n}"));
            }
            ["quit"] => return,
            _ => panic!("unknown command {line:?}"),
        }
    }
}
