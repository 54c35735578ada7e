//! The emulator's side of traced batched events, counted exactly under
//! callgrind: raises styx-probe's semaphore words by hand (no kernel, no
//! loader), so batches fill and flush through a site nothing is attached
//! to, and appends run as they do under a batch tracer. What the kernel
//! and the loader do with a batch is not counted (it is the same for any
//! append routine).
//!
//! `append_count MODE N [detached]`: `tight` (`mem_read!` with u64 values
//! in styx-bench's tight loop, N events), `narrow` (u16 pc and address),
//! `declared` (a declared type of the narrow event's size), `interrupt`
//! (`interrupt!` with a u8 number and u16 pcs), `rv` (N runs of
//! styx-rv's program, its five types), `demo` (N runs of styx-demo's four
//! programs, every type: per-event types' low half raised too). Count two
//! lengths and divide the difference, so that start-up cancels out:
//!
//! ```text
//! cargo build --release -p styx-bench --example append_count
//! valgrind --tool=callgrind target/release/examples/append_count tight 1000000
//! valgrind --tool=callgrind target/release/examples/append_count tight 2000000
//! ```
//!
//! (`--features probes-off --target-dir target/probes-off` for the
//! compiled-out counts.) The semaphores are found by name in the binary's
//! symbol table (`nm`), as nothing else can reach them.

use std::hint::black_box;
use std::process::Command;
use styx_common::Delivery;
use styx_probe::{EventKind, InterruptKind};

/// The high half: one batch tracer.
const BATCH: u32 = 1 << 16;
/// The low half: one per-event tracer.
const PER_EVENT: u32 = 1;

styx_probe::event! {
    /// A declared type the size of the narrow `mem_read`.
    pub count_tick(pc: u16, addr: u16, val: u8);
}

/// A function whose address places the symbol table in memory.
#[no_mangle]
#[inline(never)]
pub extern "C" fn append_count_anchor() -> u64 {
    black_box(1)
}

/// The symbol table (`nm -C`) of this program.
fn symbols() -> String {
    let exe = std::fs::read_link("/proc/self/exe").expect("/proc/self/exe");
    let listed = Command::new("nm").arg("-C").arg(&exe).output().expect("nm");
    String::from_utf8_lossy(&listed.stdout).into_owned()
}

/// Sets the word of each static whose demangled name ends in one of
/// `names` to `word`; whether every one was found.
fn raise(symbols: &str, names: &[&str], word: u32) -> bool {
    let find = |name: &str| {
        symbols.lines().find_map(|line| {
            let mut parts = line.splitn(3, ' ');
            let (address, _, symbol) = (parts.next()?, parts.next()?, parts.next()?);
            symbol
                .ends_with(name)
                .then(|| u64::from_str_radix(address, 16).expect("nm's address"))
        })
    };
    let anchor = find("append_count_anchor").expect("the anchor");
    let bias = append_count_anchor as *const () as u64 - anchor;
    let mut found = true;
    for name in names {
        match find(name) {
            // SAFETY: a semaphore word (4 bytes, writable, in `.probes`),
            // which only the kernel writes otherwise.
            Some(at) => unsafe { ((bias + at) as *mut u32).write_volatile(word) },
            None => {
                eprintln!("no {name} (probes compiled out?)");
                found = false;
            }
        }
    }
    found
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (mode, n) = (args[1].as_str(), args[2].parse::<u64>().expect("N"));
    let traced = args.get(3).map(String::as_str) != Some("detached");
    let semaphores = |names: &[&str]| {
        names
            .iter()
            // `styx_probe_vX_Y_semaphore_NAME` (styx-probe's `enabled.rs`).
            .map(|n| format!("_semaphore_{n}"))
            .collect::<Vec<_>>()
    };
    let symbols = if traced { symbols() } else { String::new() };
    // A word not found would leave the run detached, its count no traced
    // one's (unless the probes are compiled out: the compiled-out counts).
    let raise = |symbols: &str, names: &[&str], word| {
        let found = raise(symbols, names, word);
        assert!(
            found || cfg!(feature = "probes-off"),
            "semaphores not found: {names:?}"
        );
    };
    let up = |names: &[&str], word| {
        if traced {
            let names = semaphores(names);
            raise(
                &symbols,
                &names.iter().map(String::as_str).collect::<Vec<_>>(),
                word,
            );
        }
    };
    let mut evaluated = 0u64;
    match mode {
        "tight" => {
            up(&["mem_read"], BATCH);
            styx_bench::timed(n, |pc, addr, val| {
                styx_probe::mem_read!(|| {
                    evaluated += 1;
                    (pc, addr, val)
                });
                0
            });
        }
        "narrow" => {
            up(&["mem_read"], BATCH);
            styx_bench::timed(n, |pc, addr, val| {
                styx_probe::mem_read!(|| {
                    evaluated += 1;
                    (pc as u16, addr as u16, val)
                });
                0
            });
        }
        "declared" => {
            if traced {
                raise(&symbols, &["::SEMAPHORE"], BATCH);
            }
            styx_bench::timed(n, |pc, addr, val| {
                styx_probe::fire!(count_tick, || {
                    evaluated += 1;
                    (pc as u16, addr as u16, val)
                });
                0
            });
        }
        "rv" => {
            up(
                &["insn_exec", "mem_read", "mem_write", "reg_write", "branch"],
                BATCH,
            );
            let mut machine = styx_rv::Machine::<false>::new().expect("the machine");
            for _ in 0..n {
                evaluated += machine.run().expect("a run").counts.instructions;
            }
        }
        "interrupt" => {
            up(&["interrupt"], BATCH);
            styx_bench::timed(n, |pc, addr, val| {
                styx_probe::interrupt!(|| {
                    evaluated += 1;
                    (InterruptKind::Entry, val, pc as u16, addr as u16)
                });
                0
            });
        }
        "demo" => {
            // Each type's half as one loader with its default delivery
            // raises it.
            let (batched, per_event): (Vec<_>, Vec<_>) = EventKind::ALL
                .iter()
                .filter(|&&k| k != EventKind::Usdt)
                .partition(|k| k.delivery() == Delivery::Batched);
            let names = |kinds: Vec<&EventKind>| kinds.iter().map(|k| k.probe_name()).collect();
            let (batched, per_event): (Vec<_>, Vec<_>) = (names(batched), names(per_event));
            up(&batched, BATCH);
            up(&per_event, PER_EVENT);
            let mut machine = styx_demo::Machine::new();
            for _ in 0..n {
                for program in styx_demo::programs::ALL {
                    evaluated += machine.run(program).expect("a run").instructions;
                }
            }
        }
        _ => panic!("MODE: tight, narrow, declared, interrupt, rv or demo"),
    }
    // Events evaluated, or guest instructions run.
    println!("{mode} {n}: {evaluated}");
}
