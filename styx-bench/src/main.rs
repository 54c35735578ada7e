//! styx-bench: the event stream through styx-probe's own site (`run nop1
//! N`: `styx_probe::mem_read!` per event; `run nop1-narrow N`: the same
//! events with a 16-bit pc and address; `run nop1-declared N`: those as a
//! type the program declares, `bench_tick`), and `run call N`: N calls of
//! [`styx_bench_call`], for function tracing (`--functions`), beside the
//! ways every styx-bench program has (see the library).

use styx_bench::{timed, Ran};

fn main() -> anyhow::Result<()> {
    styx_bench::serve(|via, n| match via {
        "nop1" => Some(nop1(n)),
        "nop1-narrow" => Some(nop1_narrow(n)),
        "nop1-declared" => Some(nop1_declared(n)),
        "call" => Some(calls(n)),
        _ => None,
    })
}

styx_probe::event! {
    /// `nop1-narrow`'s event as a type the program declares: the same
    /// 16-bit pc and address and 8-bit value.
    pub bench_tick(pc: u16, addr: u16, val: u8);
}

/// The function `--functions '^styx_bench_call$'` traces (and bpftrace's
/// `uprobe:`/`uretprobe:`): a few instructions, never inlined, one name in
/// every tool (not mangled).
#[no_mangle]
#[inline(never)]
pub extern "C" fn styx_bench_call(pc: u64, addr: u64, val: u8) -> u64 {
    std::hint::black_box(pc ^ addr ^ u64::from(val))
}

/// `n` calls of [`styx_bench_call`]; every call counts as evaluated (a
/// function has no semaphore to say whether it is traced).
#[inline(never)]
fn calls(n: u64) -> Ran {
    let ns = timed(n, |pc, addr, val| styx_bench_call(pc, addr, val));
    Ran::plain(ns, n)
}

/// `n` events through `styx_probe::mem_read!`.
#[inline(never)]
fn nop1(n: u64) -> Ran {
    let mut evaluated = 0u64;
    let ns = timed(n, |pc, addr, val| {
        styx_probe::mem_read!(|| {
            evaluated += 1;
            (pc, addr, val)
        });
        0
    });
    Ran::plain(ns, evaluated)
}

/// `n` events through `styx_probe::mem_read!` as a 16-bit guest fires
/// them: the same stream with its pc and address cut to `u16` (the
/// value is a `u8` in both), so each travels in its batch at those
/// widths.
#[inline(never)]
fn nop1_narrow(n: u64) -> Ran {
    let mut evaluated = 0u64;
    let ns = timed(n, |pc, addr, val| {
        styx_probe::mem_read!(|| {
            evaluated += 1;
            (pc as u16, addr as u16, val)
        });
        0
    });
    Ran::plain(ns, evaluated)
}

/// `n` events of the declared type `bench_tick`: `nop1-narrow`'s stream, as
/// an emulator's own type of the same widths.
#[inline(never)]
fn nop1_declared(n: u64) -> Ran {
    let mut evaluated = 0u64;
    let ns = timed(n, |pc, addr, val| {
        styx_probe::fire!(bench_tick, || {
            evaluated += 1;
            (pc as u16, addr as u16, val)
        });
        0
    });
    Ran::plain(ns, evaluated)
}
