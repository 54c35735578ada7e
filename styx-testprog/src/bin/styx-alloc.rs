//! Its heap traced (`styx_probe::TracedAllocator`), and allocations the
//! tests know. Commands on stdin, each answered on stdout:
//! - `where`: answers `known ADDR`, where [`known_allocations`] is.
//! - `allocate N` (N ≤ 64): calls `known_allocations(N)`; answers `allocated N`.
//! - `quit`: exits.
//!
//! `known_allocations(n)` makes, in this order (what the tests expect):
//! - blocks `i` in `0..n` of `1000 + i` bytes aligned to 64
//!   (`std::alloc::alloc`);
//! - block 0 grown to 5000 bytes (`std::alloc::realloc`);
//! - every block freed, in order (`std::alloc::dealloc`);
//! - for each `i` in `0..n`, a `Vec<u8>::with_capacity(3000 + i)`, dropped.

use std::alloc::{alloc, dealloc, realloc, Layout, System};
use std::io::{BufRead, Write};

#[global_allocator]
static HEAP: styx_probe::TracedAllocator<System> = styx_probe::TracedAllocator::new(System);

const MOST_BLOCKS: usize = 64;
const GROWN_BYTES: usize = 5000;

fn block_layout(i: usize) -> Layout {
    Layout::from_size_align(1000 + i, 64).unwrap()
}

#[inline(never)]
fn known_allocations(n: usize) {
    let mut blocks = [std::ptr::null_mut::<u8>(); MOST_BLOCKS];
    // SAFETY: each block is freed once, with the layout it has.
    unsafe {
        for (i, block) in blocks.iter_mut().enumerate().take(n) {
            *block = alloc(block_layout(i));
            assert!(!block.is_null());
        }
        blocks[0] = realloc(blocks[0], block_layout(0), GROWN_BYTES);
        assert!(!blocks[0].is_null());
        for (i, &block) in blocks.iter().enumerate().take(n) {
            let layout = match i {
                0 => Layout::from_size_align(GROWN_BYTES, 64).unwrap(),
                _ => block_layout(i),
            };
            dealloc(block, layout);
        }
    }
    for i in 0..n {
        let bytes: Vec<u8> = Vec::with_capacity(3000 + i);
        drop(std::hint::black_box(bytes));
    }
}

fn main() {
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("reading a command");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["where"] => {
                let known = known_allocations as fn(usize) as usize;
                writeln!(stdout.lock(), "known {known:#x}").unwrap();
            }
            ["allocate", n] => {
                let n: usize = n.parse().expect("allocate N");
                assert!(
                    (1..=MOST_BLOCKS).contains(&n),
                    "allocate 1 to {MOST_BLOCKS}"
                );
                known_allocations(n);
                writeln!(stdout.lock(), "allocated {n}").unwrap();
            }
            ["quit"] => return,
            _ => panic!("unknown command {line:?}"),
        }
    }
}
