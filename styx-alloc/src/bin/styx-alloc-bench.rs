//! What `styx_alloc::TracedAllocator` costs while detached: `N` pairs of
//! allocation and deallocation (sizes 16 to 128 bytes) made through
//! `System` and through `TracedAllocator<System>`, each called directly,
//! in the same process.
//!
//! `styx-bench-alloc WAY N`: WAY `system` or `traced` (one way, for
//! callgrind), or `both` (alternated, 11 rounds): prints ns per pair.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::Instant;
use styx_alloc::TracedAllocator;

#[global_allocator]
static HEAP: TracedAllocator<System> = TracedAllocator::new(System);

#[inline(never)]
fn pairs<A: GlobalAlloc>(allocator: &A, n: u64) -> f64 {
    let start = Instant::now();
    for i in 0..n {
        let layout = Layout::from_size_align(16 * (1 + (i as usize & 7)), 8).unwrap();
        // SAFETY: the block is freed with its layout.
        unsafe {
            let block = black_box(allocator.alloc(layout));
            allocator.dealloc(block, layout);
        }
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: styx-bench-alloc system|traced|both N";
    let (way, n) = match args.as_slice() {
        [_, way, n] => (way.as_str(), n.parse::<u64>().expect(usage)),
        _ => panic!("{usage}"),
    };
    match way {
        "system" => println!("system {:.2} ns/pair", pairs(&System, n)),
        "traced" => println!("traced {:.2} ns/pair", pairs(&HEAP, n)),
        "both" => {
            let (mut system, mut traced) = (Vec::new(), Vec::new());
            for _ in 0..11 {
                system.push(pairs(&System, n));
                traced.push(pairs(&HEAP, n));
            }
            let (system, traced) = (median(system), median(traced));
            println!(
                "system {system:.2} ns/pair, traced (detached) {traced:.2} ns/pair: +{:.2} ns",
                traced - system
            );
        }
        _ => panic!("{usage}"),
    }
}
