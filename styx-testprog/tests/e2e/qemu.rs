//! styx-qemu, the QEMU TCG plugin: a static guest (tests/c/qemu_guest.c)
//! under qemu-user with the plugin, traced by styx-loader, against what
//! QEMU itself logs executing in the same run (`-d nochain,exec`: a
//! `Trace` line per translation block run; with `-singlestep` every block
//! is one instruction), and against the guest's `touch` loop, whose
//! instructions and memory accesses are known. For x86-64 and AArch64.
//! qemu-user and gcc-aarch64-linux-gnu come from `scripts/setup`.

use crate::support::*;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const GUEST_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/qemu_guest.c");

/// A guest architecture: its QEMU and C compiler.
#[derive(Clone, Copy)]
struct Arch {
    qemu: &'static str,
    cc: &'static str,
    /// The bytes of `touch`'s return instruction.
    ret_len: u64,
    /// System call numbers: write, exit_group.
    write: i64,
    exit_group: i64,
}

const X86_64: Arch = Arch {
    qemu: "qemu-x86_64",
    cc: "cc",
    ret_len: 1,
    write: 1,
    exit_group: 231,
};
const AARCH64: Arch = Arch {
    qemu: "qemu-aarch64",
    cc: "aarch64-linux-gnu-gcc",
    ret_len: 4,
    write: 64,
    exit_group: 94,
};

/// The plugin, copied into the test's directory: `--binary` traces every
/// process that maps the file, and other tests run QEMU meanwhile.
fn plugin_in(dir: &Path) -> PathBuf {
    let built = beside_testprog("libstyx_qemu.so", "styx-qemu");
    let copy = dir.join("libstyx_qemu.so");
    // `cp`, as binary.rs says why.
    let copied = Command::new("cp").arg(&built).arg(&copy).status();
    assert!(copied.expect("running cp").success(), "copying the plugin");
    copy
}

fn build_guest(dir: &Path, arch: Arch) -> PathBuf {
    build_guest_linked(dir, arch, "-static")
}

/// The guest linked by `link` (`-static`; `-pie`: loaded where QEMU
/// chooses, with the host's C library for an x86-64 guest).
fn build_guest_linked(dir: &Path, arch: Arch, link: &str) -> PathBuf {
    let guest = dir.join("qemu_guest");
    let status = Command::new(arch.cc)
        .args(["-O1", link, "-o"])
        .arg(&guest)
        .arg(GUEST_SOURCE)
        .status()
        .unwrap_or_else(|e| panic!("running {} (scripts/setup installs it): {e}", arch.cc));
    assert!(status.success(), "{} failed to build the guest", arch.cc);
    guest
}

/// Where the guest says its loop and buffer are.
struct Layout {
    touch: u64,
    end: u64,
    buf: u64,
}

fn layout(stdout: &str) -> Layout {
    let first = stdout.lines().next().expect("the guest's first line");
    let field = |name: &str| -> u64 {
        let word = first
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {name} in {first:?}"));
        u64::from_str_radix(word.trim_start_matches("0x"), 16).expect("a hex address")
    };
    Layout {
        touch: field("touch"),
        end: field("end"),
        buf: field("buf"),
    }
}

/// Runs the guest under QEMU with the plugin, traced by styx-loader
/// (`--binary`, started first, with the plugin's own system call events),
/// QEMU logging each block it runs to a file; returns the events, the pcs
/// QEMU logged and the guest's layout, after checking the guest's system
/// calls: its one line written, and `exit_group(0)` last, without return.
fn traced_run(
    name: &str,
    arch: Arch,
    singlestep: bool,
    guest_args: &[&str],
) -> (Vec<Value>, PathBuf, Layout) {
    require_root();
    let dir = scratch(name);
    let plugin = plugin_in(&dir);
    let guest = build_guest(&dir, arch);
    let out = dir.join("events.jsonl");
    let log = dir.join("exec.log");
    let loader_args = [
        "--probes",
        "styx_qemu:*",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
    ];
    let (output, stderr) = run_traced(
        arch,
        &plugin,
        &guest,
        guest_args,
        Some(&log),
        singlestep,
        &loader_args,
    );
    assert!(summary_of(&stderr).loss.is_none(), "{stderr:?}");
    let events = read_jsonl(&out);
    let stdout = String::from_utf8_lossy(&output.stdout);
    check_syscalls(&events, arch, stdout.len() as u64);
    (events, log, layout(&stdout))
}

/// QEMU for `arch` running `guest guest_args` with the plugin (its own
/// block log, `-d nochain,exec`, to `log` if given; one instruction a
/// block with `singlestep`), traced by styx-loader on the plugin
/// (`--binary`, started first) with `loader_args`: QEMU's output and the
/// loader's stderr, both ended well and nothing dropped.
fn run_traced(
    arch: Arch,
    plugin: &Path,
    guest: &Path,
    guest_args: &[&str],
    log: Option<&Path>,
    singlestep: bool,
    loader_args: &[&str],
) -> (std::process::Output, Vec<String>) {
    let mut args = vec!["--binary", plugin.to_str().unwrap()];
    args.extend_from_slice(loader_args);
    let loader = attach_loader(&args);
    let mut qemu = Command::new(arch.qemu);
    if singlestep {
        qemu.arg("-singlestep");
    }
    if let Some(log) = log {
        qemu.args(["-d", "nochain,exec", "-D"]).arg(log);
    }
    let output = qemu
        .arg("-plugin")
        .arg(plugin)
        .arg(guest)
        .args(guest_args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {} (scripts/setup installs it): {e}", arch.qemu));
    assert!(output.status.success(), "{}: {output:?}", arch.qemu);
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    assert_eq!(summary_of(&stderr).dropped, 0, "nothing lost: {stderr:?}");
    (output, stderr)
}

/// The guest's system calls as the plugin's `syscall`/`syscall_ret`
/// events: its one `write` of `written` bytes to stdout, answered with
/// `written`; `exit_group(0)` last, never returning. Of the thread that
/// wrote: other threads' batches arrive in their own turn.
fn check_syscalls(events: &[Value], arch: Arch, written: u64) {
    let all: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "usdt" && e["provider"] == "styx_qemu")
        .collect();
    let writer = all
        .iter()
        .find(|c| c["probe"] == "syscall" && c["num"] == arch.write)
        .expect("the guest's write")["tid"]
        .clone();
    let calls: Vec<&Value> = all.into_iter().filter(|c| c["tid"] == writer).collect();
    assert!(calls.len() > 4, "{calls:?}");
    let write = calls
        .iter()
        .position(|c| c["probe"] == "syscall" && c["num"] == arch.write)
        .expect("the guest's write");
    assert_eq!(
        (&calls[write]["a1"], &calls[write]["a3"]),
        (&1.into(), &written.into()),
        "{}",
        calls[write]
    );
    let answer = calls[write + 1];
    assert_eq!(
        (&answer["probe"], &answer["num"], &answer["ret"]),
        (&"syscall_ret".into(), &arch.write.into(), &written.into()),
        "{answer}"
    );
    let last = calls.last().unwrap();
    assert_eq!(
        (&last["probe"], &last["num"], &last["a1"]),
        (&"syscall".into(), &arch.exit_group.into(), &0.into()),
        "{last}"
    );
}

/// The pc of each block QEMU logged running: `Trace CPU: HOST
/// [CS_BASE/PC/FLAGS/CFLAGS] SYMBOL` (QEMU 7.2), less those it then logged
/// as not run, `Stopped execution of TB chain before HOST [PC]` (a vCPU
/// told to stop as it entered the block; the plugin's callbacks in it did
/// not run either: with threads this happens now and then).
fn logged_pcs(log: &Path) -> Vec<u64> {
    logged_by_vcpu(log).into_values().flatten().collect()
}

/// [`logged_pcs`] by vCPU index, each vCPU's in order.
fn logged_by_vcpu(log: &Path) -> BTreeMap<u32, Vec<u64>> {
    let text = std::fs::read_to_string(log).expect("QEMU's log");
    let mut by_vcpu: BTreeMap<u32, Vec<Option<u64>>> = BTreeMap::new();
    // The latest entry of each (host code, pc), which a "Stopped" line
    // names: the vCPU's and its place in that vCPU's list.
    let mut latest: HashMap<(String, u64), (u32, usize)> = HashMap::new();
    let hex = |text: &str| u64::from_str_radix(text, 16).expect("a hex pc");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Stopped execution of TB chain before ") {
            let (host, pc) = rest.split_once(" [").expect("HOST [PC]");
            let pc = hex(pc.split(']').next().expect("[PC]"));
            if let Some((vcpu, at)) = latest.remove(&(host.to_string(), pc)) {
                by_vcpu.get_mut(&vcpu).expect("its vCPU")[at] = None;
            }
            continue;
        }
        let Some(rest) = line.strip_prefix("Trace ") else {
            continue;
        };
        let (vcpu, rest) = rest.split_once(": ").expect("a vCPU index");
        let vcpu: u32 = vcpu.parse().expect("a vCPU number");
        let host = rest.split(' ').next().expect("the block's host code");
        let fields = rest.split('[').nth(1).expect("a [..] part");
        let pc = hex(fields.split('/').nth(1).expect("a pc field"));
        let pcs = by_vcpu.entry(vcpu).or_default();
        latest.insert((host.to_string(), pc), (vcpu, pcs.len()));
        pcs.push(Some(pc));
    }
    (by_vcpu.into_iter())
        .map(|(vcpu, pcs)| (vcpu, pcs.into_iter().flatten().collect()))
        .collect()
}

fn of_type<'a>(events: &'a [Value], event: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == event).collect()
}

fn pcs(events: &[&Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["pc"].as_u64().expect("pc"))
        .collect()
}

/// Every instruction QEMU executed, in order, one `insn_exec` each with
/// its bytes' length; one thread; nothing lost.
fn instructions_match_qemus_log(name: &str, arch: Arch) {
    let (events, log, layout) = traced_run(name, arch, true, &["1000"]);
    let logged = logged_pcs(&log);
    let execs = of_type(&events, "insn_exec");
    assert!(logged.len() > 10_000, "QEMU logged {} blocks", logged.len());
    assert_eq!(
        pcs(&execs),
        logged,
        "insn_exec pcs = the single-instruction blocks QEMU logged"
    );
    let tids: std::collections::BTreeSet<_> = events.iter().map(|e| e["tid"].as_u64()).collect();
    assert_eq!(tids.len(), 1, "one guest thread");
    // The loop's instructions: 6 a round and the return.
    let in_touch = execs
        .iter()
        .filter(|e| (layout.touch..layout.end).contains(&e["pc"].as_u64().unwrap()))
        .count();
    assert_eq!(in_touch, 6 * 1000 + 1);
    for exec in &execs {
        let len = exec["len"].as_u64().unwrap();
        assert!((1..=15).contains(&len), "{exec}");
    }
}

/// Blocks as QEMU logged running them (no chaining: every block is
/// logged), and the loop's memory accesses exactly: address and size.
fn blocks_and_accesses_are_exact(name: &str, arch: Arch) {
    const ROUNDS: u64 = 500;
    let (events, log, layout) = traced_run(name, arch, false, &[&ROUNDS.to_string()]);
    let logged = logged_pcs(&log);
    let blocks = of_type(&events, "block");
    assert_eq!(pcs(&blocks), logged, "block pcs = the blocks QEMU logged");
    let in_touch = |e: &&&Value| (layout.touch..layout.end).contains(&e["pc"].as_u64().unwrap());
    let accesses = |event: &str| -> Vec<(u64, u64, u64)> {
        of_type(&events, event)
            .iter()
            .filter(in_touch)
            // Not x86's `ret`, which loads from the stack.
            .filter(|e| e["pc"].as_u64().unwrap() < layout.end - arch.ret_len)
            .map(|e| {
                assert_eq!(e["val"], 0, "API v1 gives no values: {e}");
                let addr = e["addr"].as_u64().unwrap();
                (addr - layout.buf, e["size"].as_u64().unwrap(), 0)
            })
            .collect()
    };
    let reads = accesses("mem_read");
    let writes = accesses("mem_write");
    let expected = |pattern: &[(u64, u64, u64)]| -> Vec<(u64, u64, u64)> {
        (0..ROUNDS).flat_map(|_| pattern.iter().copied()).collect()
    };
    assert_eq!(
        reads,
        expected(&[(0, 8, 0), (16, 1, 0)]),
        "the loop's loads"
    );
    assert_eq!(
        writes,
        expected(&[(8, 4, 0), (18, 2, 0)]),
        "the loop's stores"
    );
    // The loop's body up to its branch is one block, run every round; a
    // block's size is its instructions' bytes.
    let loop_blocks: Vec<_> = blocks
        .iter()
        .filter(|b| b["pc"].as_u64() == Some(layout.touch))
        .collect();
    assert_eq!(loop_blocks.len() as u64, ROUNDS);
    for block in loop_blocks {
        assert_eq!(
            block["size"],
            layout.end - layout.touch - arch.ret_len,
            "{block}"
        );
    }
    let execs = of_type(&events, "insn_exec");
    let in_touch_execs = execs.iter().filter(in_touch).count() as u64;
    assert_eq!(in_touch_execs, 6 * ROUNDS + 1);
}

/// Guest threads are threads: each vCPU's instructions, as QEMU logs them
/// (by vCPU index), arrive in order as one thread's `insn_exec` events,
/// and each of the two loop threads runs the loop whole.
fn threads_are_threads(name: &str, arch: Arch) {
    const ROUNDS: u64 = 300;
    let (events, log, layout) = traced_run(name, arch, true, &[&ROUNDS.to_string(), "threads"]);
    let mut logged: Vec<Vec<u64>> = logged_by_vcpu(&log).into_values().collect();
    assert_eq!(logged.len(), 3, "QEMU logged three vCPUs");
    let threads = by_tid(events);
    let mut traced: Vec<Vec<u64>> = threads
        .values()
        .map(|events| {
            events
                .iter()
                .filter(|e| e["event"] == "insn_exec")
                .map(|e| e["pc"].as_u64().unwrap())
                .collect()
        })
        .collect();
    logged.sort();
    traced.sort();
    assert_eq!(traced, logged, "each thread's instructions = a vCPU's");
    let in_loop: Vec<usize> = traced
        .iter()
        .map(|pcs| {
            pcs.iter()
                .filter(|pc| (layout.touch..layout.end).contains(pc))
                .count()
        })
        .filter(|&n| n > 0)
        .collect();
    assert_eq!(in_loop, [6 * ROUNDS as usize + 1; 2]);
}

#[test]
fn qemu_x86_64_threads_are_threads() {
    threads_are_threads("qemu-x86_64-threads", X86_64);
}

#[test]
fn qemu_aarch64_threads_are_threads() {
    threads_are_threads("qemu-aarch64-threads", AARCH64);
}

#[test]
fn qemu_x86_64_instructions_match_qemus_own_log() {
    instructions_match_qemus_log("qemu-x86_64-insns", X86_64);
}

#[test]
fn qemu_aarch64_instructions_match_qemus_own_log() {
    instructions_match_qemus_log("qemu-aarch64-insns", AARCH64);
}

#[test]
fn qemu_x86_64_blocks_and_memory_accesses_are_exact() {
    blocks_and_accesses_are_exact("qemu-x86_64-blocks", X86_64);
}

#[test]
fn qemu_aarch64_blocks_and_memory_accesses_are_exact() {
    blocks_and_accesses_are_exact("qemu-aarch64-blocks", AARCH64);
}

/// `--pid` on a running QEMU whose guest has already run its loop with
/// nobody tracing (so the loop is translated without callbacks): after
/// the guest's next system call the plugin has QEMU retranslate, and the
/// loop's second run arrives whole. The loader waits for room (one
/// process), and stops when QEMU exits.
#[test]
fn qemu_attached_later_retranslates_and_sees_the_loop_exactly() {
    require_root();
    const ROUNDS: u64 = 2000;
    let dir = scratch("qemu-pid");
    let plugin = plugin_in(&dir);
    let guest = build_guest(&dir, X86_64);
    let out = dir.join("events.jsonl");
    let mut qemu = TestProg::start(
        Path::new(X86_64.qemu),
        &[
            "-plugin",
            plugin.to_str().unwrap(),
            guest.to_str().unwrap(),
            &ROUNDS.to_string(),
            "wait",
        ],
    );
    let first = qemu.run("", "waiting");
    let layout = layout(&first.join("\n"));
    let loader = qemu.attach_loader(&["-o", "jsonl", "--output", out.to_str().unwrap()]);
    qemu.send_only("go");
    qemu.finish();
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{}", stderr.join("\n"));
    let summary = summary_of(&stderr);
    assert_eq!(summary.dropped, 0, "{stderr:?}");
    let events = read_jsonl(&out);
    let in_touch = |e: &&Value| (layout.touch..layout.end).contains(&e["pc"].as_u64().unwrap());
    let execs = events
        .iter()
        .filter(|e| e["event"] == "insn_exec")
        .filter(in_touch)
        .count() as u64;
    assert_eq!(execs, 6 * ROUNDS + 1, "the second run, whole: {stderr:?}");
    let accesses = |event: &str| {
        events
            .iter()
            .filter(|e| e["event"] == event)
            .filter(in_touch)
            .count() as u64
    };
    // 2 loads a round, and x86's `ret` loading the return address.
    assert_eq!(accesses("mem_read"), 2 * ROUNDS + 1);
    assert_eq!(accesses("mem_write"), 2 * ROUNDS);
    let loop_blocks = events
        .iter()
        .filter(|e| e["event"] == "block" && e["pc"].as_u64() == Some(layout.touch))
        .count() as u64;
    // Chained blocks run one after another with one block event each.
    assert_eq!(loop_blocks, ROUNDS);
}

/// Each tracer gets the guest's description, also one attaching after
/// another left (`--pid` twice on one QEMU): the plugin fires it again
/// after the retranslation a change of tracers brings. Both markers are
/// the description `readelf` and the guest's path give.
#[test]
fn qemu_each_tracer_gets_the_guest_description() {
    require_root();
    let dir = scratch("qemu-described-twice");
    let plugin = plugin_in(&dir);
    let guest = build_guest(&dir, X86_64);
    let mut qemu = TestProg::start(
        Path::new(X86_64.qemu),
        &[
            "-plugin",
            plugin.to_str().unwrap(),
            guest.to_str().unwrap(),
            "10",
            "wait",
        ],
    );
    qemu.run("", "waiting");
    let trace = |qemu: &mut TestProg, name: &str| -> PathBuf {
        let out = dir.join(name);
        let loader = qemu.attach_loader(&[
            "-e",
            "block,marker",
            "-o",
            "jsonl",
            "--output",
            out.to_str().unwrap(),
        ]);
        // Its system calls: a retranslation, then translations.
        qemu.run("ping", "pong");
        loader.signal(libc::SIGINT);
        let (status, stderr) = loader.finish();
        assert!(status.success(), "{}", stderr.join("\n"));
        out
    };
    let first = trace(&mut qemu, "first.jsonl");
    // Nobody traces at this one: the plugin drops its callbacks.
    qemu.run("ping", "pong");
    let second = trace(&mut qemu, "second.jsonl");
    qemu.send_only("go");
    qemu.finish();

    let (base, end) = loaded_span(&guest);
    let path = guest.canonicalize().expect("the guest's path");
    let described = format!("qemu x86_64 image {base:#x}-{end:#x} entry ");
    for out in [first, second] {
        let events = read_jsonl(&out);
        let markers: Vec<&str> = (events.iter())
            .filter(|e| e["event"] == "marker")
            .map(|e| e["text"].as_str().expect("a marker's text"))
            .collect();
        assert_eq!(markers.len(), 1, "{}: {markers:?}", out.display());
        assert!(markers[0].starts_with(&described), "{markers:?}");
        assert!(
            markers[0].ends_with(&format!(": {}", path.display())),
            "{markers:?}"
        );
        assert!(!of_type(&events, "block").is_empty(), "{}", out.display());
    }
}

/// Where the guest's ELF file lies as loaded, by `readelf -lW`: from its
/// first byte (the lowest `LOAD` segment's address less its file offset)
/// to the end of its last segment in memory. A static non-PIE guest is
/// loaded where it was linked.
fn loaded_span(guest: &Path) -> (u64, u64) {
    let out = Command::new("readelf")
        .arg("-lW")
        .arg(guest)
        .output()
        .expect("running readelf");
    assert!(out.status.success(), "{out:?}");
    let hex = |w: &str| u64::from_str_radix(w.trim_start_matches("0x"), 16).expect("hex");
    let loads: Vec<(u64, u64, u64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.first() == Some(&"LOAD")).then(|| (hex(w[1]), hex(w[2]), hex(w[5])))
        })
        .collect();
    assert!(!loads.is_empty(), "LOAD segments in {}", guest.display());
    let base = loads
        .iter()
        .map(|&(off, vaddr, _)| vaddr - off)
        .min()
        .unwrap();
    let end = loads
        .iter()
        .map(|&(_, vaddr, mem)| vaddr + mem)
        .max()
        .unwrap();
    (base, end)
}

/// A drcov file's module lines (after the Columns line) and its blocks
/// by guest address, module 0's base added, each listed once.
fn read_drcov(path: &Path) -> (Vec<String>, BTreeMap<u64, u64>) {
    let bytes = std::fs::read(path).expect("the drcov file");
    let table_at = bytes
        .windows(9)
        .position(|w| w == b"BB Table:")
        .expect("a BB table");
    let header = String::from_utf8_lossy(&bytes[..table_at]);
    let modules: Vec<String> = header
        .lines()
        .skip_while(|l| !l.starts_with("Columns:"))
        .skip(1)
        .map(str::to_string)
        .collect();
    let base = modules
        .first()
        .and_then(|l| l.strip_prefix("0, 0x"))
        .map(|l| u64::from_str_radix(&l[..16], 16).expect("a hex base"))
        .expect("module 0");
    let table = &bytes[table_at..];
    let entries = &table[table.iter().position(|&b| b == b'\n').unwrap() + 1..];
    assert_eq!(entries.len() % 8, 0);
    let blocks: BTreeMap<u64, u64> = entries
        .chunks(8)
        .map(|e| {
            let start = u32::from_le_bytes(e[..4].try_into().unwrap()) as u64;
            let size = u16::from_le_bytes(e[4..6].try_into().unwrap()) as u64;
            assert_eq!(u16::from_le_bytes(e[6..8].try_into().unwrap()), 0);
            (base + start, size)
        })
        .collect();
    assert_eq!(blocks.len() * 8, entries.len(), "each block once");
    (modules, blocks)
}

/// The module line drcov should have for the guest: its real path and
/// where `readelf` says its file lies as loaded, for coverage tools
/// (Lighthouse, bncov) to match by file name.
fn guest_module_line(guest: &Path) -> String {
    let (base, end) = loaded_span(guest);
    let path = guest.canonicalize().expect("the guest's path");
    format!(
        "0, {base:#018x}, {end:#018x}, {:#018x}, {}",
        0,
        path.display()
    )
}

/// `-o drcov` from the plugin's `block` events: the one module is the
/// guest program, by its path and where its file is loaded (from the
/// plugin's description marker, which `-o drcov` takes whatever `-e`
/// says); each block QEMU logged running (`-d nochain,exec`) once in the
/// table, nothing else, every block's size the bytes of its instructions
/// (the guest loop's: its body up to the branch).
#[test]
fn qemu_drcov_blocks_are_the_blocks_qemu_ran() {
    require_root();
    let dir = scratch("qemu-drcov");
    let plugin = plugin_in(&dir);
    let guest = build_guest(&dir, X86_64);
    let out = dir.join("coverage.drcov");
    let log = dir.join("exec.log");
    let loader_args = [
        "-e",
        "block",
        "-o",
        "drcov",
        "--output",
        out.to_str().unwrap(),
    ];
    let (output, _) = run_traced(
        X86_64,
        &plugin,
        &guest,
        &["100"],
        Some(&log),
        false,
        &loader_args,
    );
    let layout = layout(&String::from_utf8_lossy(&output.stdout));

    let (modules, blocks) = read_drcov(&out);
    assert_eq!(modules, vec![guest_module_line(&guest)]);
    let ran: std::collections::BTreeSet<u64> = logged_pcs(&log).into_iter().collect();
    let listed: std::collections::BTreeSet<u64> = blocks.keys().copied().collect();
    assert_eq!(listed, ran, "drcov's blocks = the blocks QEMU ran");
    assert_eq!(
        blocks[&layout.touch],
        layout.end - layout.touch - X86_64.ret_len
    );
}

/// The description reaches a raw capture as it reaches a live output: an
/// AArch64 guest traced `-e block,marker -o raw`, then `read -o drcov`,
/// lists the guest program as its module (its path, where readelf says
/// its file is loaded) and exactly the blocks QEMU logged running; the
/// capture's marker names the architecture.
#[test]
fn qemu_drcov_from_a_capture_names_the_guest_program() {
    require_root();
    let dir = scratch("qemu-drcov-read");
    let plugin = plugin_in(&dir);
    let guest = build_guest(&dir, AARCH64);
    let capture = dir.join("guest.styx");
    let log = dir.join("exec.log");
    let loader_args = [
        "-e",
        "block,marker",
        "-o",
        "raw",
        "--output",
        capture.to_str().unwrap(),
    ];
    run_traced(
        AARCH64,
        &plugin,
        &guest,
        &["10"],
        Some(&log),
        false,
        &loader_args,
    );

    let out = dir.join("coverage.drcov");
    let (status, _, stderr) = run_loader(&[
        "read",
        capture.to_str().unwrap(),
        "-e",
        "block",
        "-o",
        "drcov",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(status.success(), "{stderr}");
    let (modules, blocks) = read_drcov(&out);
    assert_eq!(modules, vec![guest_module_line(&guest)]);
    let ran: std::collections::BTreeSet<u64> = logged_pcs(&log).into_iter().collect();
    let listed: std::collections::BTreeSet<u64> = blocks.keys().copied().collect();
    assert_eq!(listed, ran, "drcov's blocks = the blocks QEMU ran");

    let events = dir.join("events.jsonl");
    let (status, _, stderr) = run_loader(&[
        "read",
        capture.to_str().unwrap(),
        "-e",
        "marker",
        "-o",
        "jsonl",
        "--output",
        events.to_str().unwrap(),
    ]);
    assert!(status.success(), "{stderr}");
    let markers = read_jsonl(&events);
    assert_eq!(markers.len(), 1, "one description: {markers:?}");
    let text = markers[0]["text"].as_str().expect("a marker's text");
    assert!(text.starts_with("qemu aarch64 image "), "{text}");
}

/// `-o parquet` of a QEMU guest, queried with DuckDB against QEMU's own
/// log of the same run (`-d nochain,exec`): the `block` rows' pcs in time
/// order are exactly the blocks QEMU logged running, the loop's block
/// once a round with its bytes as `size`; the plugin's declared
/// `styx_qemu:syscall`/`syscall_ret` rows have typed columns by name
/// (`num`, `a1`…`a6` and `ret`): the guest's one `write` to stdout of as
/// many bytes as QEMU's stdout got, answered with that count, every call
/// answered but `exit_group(0)`, the last; all on the thread that ran the
/// blocks. The description marker's `text` names the guest program where
/// `readelf` says it is loaded.
#[test]
fn qemu_parquet_queried_with_duckdb_matches_qemus_own_log() {
    require_root();
    let dir = scratch("qemu-parquet");
    let plugin = plugin_in(&dir);
    let guest = build_guest(&dir, X86_64);
    let out = dir.join("guest.parquet");
    let log = dir.join("exec.log");
    const ROUNDS: u64 = 200;
    let loader_args = [
        "-e",
        "block,marker",
        "--probes",
        "styx_qemu:*",
        "-o",
        "parquet",
        "--output",
        out.to_str().unwrap(),
    ];
    let (output, _) = run_traced(
        X86_64,
        &plugin,
        &guest,
        &[&ROUNDS.to_string()],
        Some(&log),
        false,
        &loader_args,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let layout = layout(&stdout);
    let written = stdout.len() as u64;
    let file = out.display();
    let int = |v: &Value| v.as_i64().unwrap_or_else(|| panic!("an integer: {v}"));

    let logged = logged_pcs(&log);
    assert!(logged.len() > 1000, "QEMU logged {} blocks", logged.len());
    let blocks: Vec<u64> = duckdb(&format!(
        "SELECT pc FROM '{file}' WHERE event = 'block' ORDER BY ts_ns"
    ))
    .iter()
    .map(|r| r[0].as_u64().expect("a block's pc"))
    .collect();
    assert_eq!(blocks, logged, "block pcs = the blocks QEMU logged");
    assert_eq!(
        duckdb(&format!(
            "SELECT size, count(*) FROM '{file}' WHERE event = 'block' AND pc = {} GROUP BY size",
            layout.touch
        )),
        vec![vec![
            Value::from(layout.end - layout.touch - X86_64.ret_len),
            Value::from(ROUNDS)
        ]],
        "the loop's block: its body up to the branch, once a round"
    );

    // The declared types' fields, typed columns by name.
    let types = duckdb(&format!(
        "SELECT column_name, column_type FROM (DESCRIBE SELECT num, a1, a3, ret FROM '{file}')"
    ));
    let want = [
        ["num", "BIGINT"],
        ["a1", "UBIGINT"],
        ["a3", "UBIGINT"],
        ["ret", "BIGINT"],
    ];
    assert_eq!(
        types,
        want.map(|row| row.map(Value::from).to_vec()).to_vec()
    );
    let write = X86_64.write;
    let writes = duckdb(&format!(
        "SELECT a1, a3, tid FROM '{file}' \
         WHERE provider = 'styx_qemu' AND probe = 'syscall' AND num = {write}"
    ));
    assert_eq!(writes.len(), 1, "the guest's one write: {writes:?}");
    assert_eq!(
        writes[0][..2],
        [Value::from(1), Value::from(written)],
        "write(1, buf, {written})"
    );
    let tid = int(&writes[0][2]);
    assert_eq!(
        duckdb(&format!(
            "SELECT ret FROM '{file}' WHERE probe = 'syscall_ret' AND num = {write}"
        )),
        vec![vec![Value::from(written)]],
        "write returned what QEMU's stdout got"
    );
    let last = duckdb(&format!(
        "SELECT probe, num, a1 FROM '{file}' WHERE provider = 'styx_qemu' \
         ORDER BY ts_ns DESC LIMIT 1"
    ));
    assert_eq!(
        last,
        vec![vec![
            Value::from("syscall"),
            Value::from(X86_64.exit_group),
            Value::from(0)
        ]]
    );
    let answered = duckdb(&format!(
        "SELECT count(*) FILTER (probe = 'syscall'), count(*) FILTER (probe = 'syscall_ret'), \
         count(DISTINCT tid), min(tid) FROM '{file}' WHERE provider = 'styx_qemu'"
    ));
    let [calls, returns, threads, only] = &answered[0][..] else {
        panic!("{answered:?}")
    };
    assert!(int(calls) > 4, "{answered:?}");
    assert_eq!(int(returns), int(calls) - 1, "all but exit_group return");
    assert_eq!((int(threads), int(only)), (1, tid), "{answered:?}");
    assert_eq!(
        duckdb(&format!(
            "SELECT count(DISTINCT tid), min(tid) FROM '{file}' WHERE event = 'block'"
        )),
        vec![vec![Value::from(1), Value::from(tid)]],
        "the blocks ran on the thread that wrote"
    );

    let (base, end) = loaded_span(&guest);
    let path = guest.canonicalize().expect("the guest's path");
    let markers = duckdb(&format!("SELECT text FROM '{file}' WHERE event = 'marker'"));
    assert_eq!(markers.len(), 1, "one description: {markers:?}");
    let text = markers[0][0].as_str().expect("a marker's text");
    assert!(
        text.starts_with(&format!("qemu x86_64 image {base:#x}-{end:#x} entry ")),
        "{text}"
    );
    assert!(text.ends_with(&format!(": {}", path.display())), "{text}");
}

/// `styx-loader -- qemu … -plugin LIB,wait=5`: the loader starts QEMU,
/// finds the plugin once QEMU has loaded it (a library mapped later), and
/// the plugin holds the guest back until then: every block QEMU logged
/// running arrives, from the first.
#[test]
fn qemu_started_by_the_loader_waits_for_it_and_loses_nothing() {
    require_root();
    let dir = scratch("qemu-command");
    let plugin = plugin_in(&dir);
    let guest = build_guest(&dir, X86_64);
    let out = dir.join("events.jsonl");
    let log = dir.join("exec.log");
    let plugin_arg = format!("{},wait=5", plugin.display());
    let (status, _, stderr) = run_loader(&[
        "-e",
        "block",
        "-o",
        "jsonl",
        "--output",
        out.to_str().unwrap(),
        "--",
        X86_64.qemu,
        "-d",
        "nochain,exec",
        "-D",
        log.to_str().unwrap(),
        "-plugin",
        &plugin_arg,
        guest.to_str().unwrap(),
        "300",
    ]);
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("libstyx_qemu.so"),
        "the late library is said: {stderr}"
    );
    let events = read_jsonl(&out);
    let blocks = of_type(&events, "block");
    let logged = logged_pcs(&log);
    assert!(logged.len() > 1000, "QEMU logged {} blocks", logged.len());
    assert_eq!(pcs(&blocks), logged, "block pcs = the blocks QEMU logged");
}

/// A position-independent, dynamically linked guest, loaded where QEMU
/// chooses: `-o drcov`'s module is the program where it was loaded (its
/// load bias, from where the guest says `touch` is against `nm`'s
/// address for it, added to `readelf`'s span), holding exactly the
/// blocks QEMU logged running in that span (those in the C library and
/// the dynamic loader are outside it); and `read --by pc` names the pcs
/// in it by `nm -S`'s functions moved by the same bias.
#[test]
fn qemu_pie_guest_is_described_where_it_was_loaded() {
    require_root();
    let dir = scratch("qemu-pie");
    let plugin = plugin_in(&dir);
    let guest = build_guest_linked(&dir, X86_64, "-pie");
    let capture = dir.join("guest.styx");
    let log = dir.join("exec.log");
    let loader_args = [
        "-e",
        "block,marker",
        "-o",
        "raw",
        "--output",
        capture.to_str().unwrap(),
    ];
    let (output, _) = run_traced(
        X86_64,
        &plugin,
        &guest,
        &["10"],
        Some(&log),
        false,
        &loader_args,
    );

    let functions = guest_functions(&guest);
    let touch_link = address_in_file(&guest, "touch");
    let bias = layout(&String::from_utf8_lossy(&output.stdout)).touch - touch_link;
    assert_ne!(bias, 0, "a PIE guest is moved");
    let (base, end) = loaded_span(&guest);
    let (base, end) = (base + bias, end + bias);

    let out = dir.join("coverage.drcov");
    let (status, _, stderr) = run_loader(&[
        "read",
        capture.to_str().unwrap(),
        "-o",
        "drcov",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(status.success(), "{stderr}");
    let (modules, blocks) = read_drcov(&out);
    let path = guest.canonicalize().expect("the guest's path");
    let line = format!(
        "0, {base:#018x}, {end:#018x}, {:#018x}, {}",
        0,
        path.display()
    );
    assert_eq!(modules, vec![line]);
    let ran: std::collections::BTreeSet<u64> = (logged_pcs(&log).into_iter())
        .filter(|pc| (base..end).contains(pc))
        .collect();
    let listed: std::collections::BTreeSet<u64> = blocks.keys().copied().collect();
    assert!(ran.len() > 10, "{} blocks in the program", ran.len());
    assert_eq!(
        listed, ran,
        "drcov's blocks = the program's blocks QEMU ran"
    );

    let (status, stdout, stderr) = run_loader(&[
        "read",
        capture.to_str().unwrap(),
        "-e",
        "block",
        "--by",
        "pc",
        "--max-keys",
        "100000",
        "-o",
        "jsonl",
    ]);
    assert!(status.success(), "{stderr}");
    let moved: Vec<(u64, u64, String)> = (functions.into_iter())
        .map(|(start, size, name)| (start + bias, size, name))
        .collect();
    let mut in_main = 0;
    for row in stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a row"))
    {
        let pc = row["key"].as_u64().expect("a pc");
        if !(base..end).contains(&pc) {
            continue;
        }
        let holding = holding(&moved, pc);
        match row["key_name"].as_str() {
            Some(name) => {
                assert!(
                    holding.iter().any(|h| h == name),
                    "{pc:#x}: {name} not in {holding:?}"
                );
                in_main += usize::from(name == "main" || name.starts_with("main+"));
            }
            None => assert!(holding.is_empty(), "{pc:#x} unnamed, in {holding:?}"),
        }
    }
    assert!(in_main > 0, "main's blocks named");
}

/// `name`'s address in the guest file, by `nm`.
fn address_in_file(guest: &Path, name: &str) -> u64 {
    let out = Command::new("nm")
        .arg("--defined-only")
        .arg(guest)
        .output()
        .expect("running nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 3 && w[2] == name).then(|| u64::from_str_radix(w[0], 16).expect("hex"))
        })
        .unwrap_or_else(|| panic!("{name} in nm's list"))
}

/// How each function of `functions` holding `pc` names it:
/// `name+0xoffset`.
fn holding(functions: &[(u64, u64, String)], pc: u64) -> Vec<String> {
    (functions.iter())
        .filter(|&&(start, size, _)| pc >= start && pc - start < size)
        .map(|(start, _, name)| match pc - start {
            0 => name.clone(),
            offset => format!("{name}+{offset:#x}"),
        })
        .collect()
}

/// The guest program's functions by `nm -S`: (start, size, name) of each
/// sized code symbol (what names a pc: a symbol without a size names
/// none).
fn guest_functions(guest: &Path) -> Vec<(u64, u64, String)> {
    let out = Command::new("nm")
        .args(["-S", "--defined-only"])
        .arg(guest)
        .output()
        .expect("running nm");
    assert!(out.status.success(), "{out:?}");
    let hex = |w: &str| u64::from_str_radix(w, 16).expect("hex");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let code = w.len() == 4 && matches!(w[2], "T" | "t" | "W" | "w" | "i");
            (code && hex(w[1]) > 0).then(|| (hex(w[0]), hex(w[1]), w[3].to_string()))
        })
        .collect()
}

/// Guest symbols, read from the guest's ELF file when the capture is
/// read (the plugin's description names it): `read --by pc` of a capture
/// (taken `-e block,marker`, read `-e block`) names each block's pc by
/// the function `nm` says holds it, `name+0xoffset`, and leaves a pc in
/// none a number; the guest's `main` is among them.
#[test]
fn qemu_read_by_pc_names_the_guest_functions() {
    require_root();
    let dir = scratch("qemu-symbols");
    let plugin = plugin_in(&dir);
    let guest = build_guest(&dir, X86_64);
    let capture = dir.join("guest.styx");
    let loader_args = [
        "-e",
        "block,marker",
        "-o",
        "raw",
        "--output",
        capture.to_str().unwrap(),
    ];
    run_traced(X86_64, &plugin, &guest, &["10"], None, false, &loader_args);

    let (status, stdout, stderr) = run_loader(&[
        "read",
        capture.to_str().unwrap(),
        "-e",
        "block",
        "--by",
        "pc",
        "--max-keys",
        "100000",
        "-o",
        "jsonl",
    ]);
    assert!(status.success(), "{stderr}");
    let functions = guest_functions(&guest);
    let rows: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON row"))
        .collect();
    assert!(rows.len() > 100, "{} rows", rows.len());
    let mut named = Vec::new();
    for row in &rows {
        let pc = row["key"].as_u64().expect("a pc");
        let holding = holding(&functions, pc);
        match row["key_name"].as_str() {
            Some(name) => {
                assert!(
                    holding.iter().any(|h| h == name),
                    "{pc:#x}: {name} not in {holding:?}"
                );
                named.push(name.to_string());
            }
            None => assert!(holding.is_empty(), "{pc:#x} unnamed, in {holding:?}"),
        }
    }
    assert!(
        named.iter().any(|n| n == "main" || n.starts_with("main+")),
        "main among {named:?}"
    );
}
