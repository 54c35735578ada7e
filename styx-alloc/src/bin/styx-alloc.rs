//! Its heap traced (`styx_alloc::TracedAllocator`), and allocations the
//! tests know. Commands on stdin, each answered on stdout:
//! - `where`: answers `known ADDR`, where [`known_allocations`] is.
//! - `allocate N` (N ≤ 64): calls `known_allocations(N)`; answers `allocated N`.
//! - `thread-start`: starts a thread that touches a thread-local
//!   (registering its destructor) and waits; answers `started`.
//! - `thread-join`: that thread puts a block of [`THREAD_HELD_BYTES`] in
//!   the thread-local, whose destructor frees it as the thread exits;
//!   answers `joined TID`. Traced from between the two, the thread's first
//!   event comes after the thread-local's destructor was registered: the
//!   destructor runs after the thread's batch was flushed and released.
//! - `map PATH`: maps the file at PATH (read-only, for good), as the
//!   dynamic loader maps `/etc/ld.so.cache` during a `dlopen`: a mapped
//!   file that is not code; answers `mapped`.
//! - `quit`: exits.
//!
//! `known_allocations(n)` makes, in this order (what the tests expect):
//! - blocks `i` in `0..n` of `1000 + i` bytes aligned to 64
//!   (`std::alloc::alloc`);
//! - block 0 grown to 5000 bytes (`std::alloc::realloc`);
//! - every block freed, in order (`std::alloc::dealloc`);
//! - for each `i` in `0..n`, a `Vec<u8>::with_capacity(3000 + i)`, dropped;
//! - a zeroed block of 6000 bytes aligned to 64
//!   (`std::alloc::alloc_zeroed`), freed.

use std::alloc::{alloc, alloc_zeroed, dealloc, realloc, Layout, System};
use std::io::{BufRead, Write};

#[global_allocator]
static HEAP: styx_alloc::TracedAllocator<System> = styx_alloc::TracedAllocator::new(System);

const MOST_BLOCKS: usize = 64;
const THREAD_HELD_BYTES: usize = 7000;

thread_local! {
    static HELD: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A thread that will leave a block to its thread-local's destructor,
/// once `go` is passed.
fn thread_freeing_at_exit(go: std::sync::Arc<std::sync::Barrier>) -> std::thread::JoinHandle<i32> {
    std::thread::spawn(move || {
        HELD.with(|held| held.borrow().capacity());
        go.wait();
        HELD.with(|held| held.borrow_mut().reserve_exact(THREAD_HELD_BYTES));
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() }
    })
}

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
    let zeroed = Layout::from_size_align(6000, 64).unwrap();
    // SAFETY: freed with its layout.
    unsafe { dealloc(std::hint::black_box(alloc_zeroed(zeroed)), zeroed) };
}

fn main() {
    let stdout = std::io::stdout();
    let mut thread = None;
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
            ["thread-start"] => {
                let go = std::sync::Arc::new(std::sync::Barrier::new(2));
                thread = Some((thread_freeing_at_exit(go.clone()), go));
                writeln!(stdout.lock(), "started").unwrap();
            }
            ["thread-join"] => {
                let (handle, go) = thread.take().expect("thread-start first");
                go.wait();
                let tid = handle.join().unwrap();
                writeln!(stdout.lock(), "joined {tid}").unwrap();
            }
            ["map", path] => {
                let file = std::fs::File::open(path).expect("map PATH");
                let len = file.metadata().unwrap().len() as usize;
                // SAFETY: a new private read-only mapping of an open file,
                // never unmapped; nothing reads it.
                let at = unsafe {
                    use std::os::fd::AsRawFd;
                    let prot = libc::PROT_READ;
                    libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        prot,
                        libc::MAP_PRIVATE,
                        file.as_raw_fd(),
                        0,
                    )
                };
                assert_ne!(at, libc::MAP_FAILED, "mmap {path}");
                writeln!(stdout.lock(), "mapped").unwrap();
            }
            ["quit"] => return,
            _ => panic!("unknown command {line:?}"),
        }
    }
}
