//! styx-bench: the event stream through styx-probe's own site (`run nop1
//! N`: `styx_probe::mem_read!` per event), beside the ways every styx-bench
//! program has (see the library).

use styx_bench::{timed, Ran};

fn main() -> anyhow::Result<()> {
    styx_bench::serve(|via, n| (via == "nop1").then(|| nop1(n)))
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
