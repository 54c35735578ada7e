//! styx-bench-nop5: the event stream through a `styx:mem_read` site on a
//! 5-byte nop (`run nop5 N`, see [`nop5`]), beside the ways every styx-bench
//! program has. A program of its own so that its site is the only
//! `styx:mem_read` site here (see the styx-bench library on bpftrace).

mod nop5;

use styx_bench::{timed, Ran};

fn main() -> anyhow::Result<()> {
    styx_bench::serve(|via, n| (via == "nop5").then(|| run(n)))
}

/// `n` events through the 5-byte-nop site.
#[inline(never)]
fn run(n: u64) -> Ran {
    let mut evaluated = 0u64;
    let ns = timed(n, |pc, addr, val| {
        if nop5::enabled() {
            evaluated += 1;
            nop5::mem_read(pc, addr, val);
        }
        0
    });
    Ran::plain(ns, evaluated)
}
