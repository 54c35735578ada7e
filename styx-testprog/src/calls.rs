//! Functions for function tracing (`--functions 'styx_testprog::calls::'`)
//! whose calls are known exactly: a recursion of a given depth, one that
//! panics part way down (caught further out), and threads recursing at once.
//! Each frame keeps a local whose address escapes, so the compiler cannot
//! turn a recursion into a loop, and none is inlined.

use std::hint::black_box;

/// Recurses `depth` times below this call: `depth + 1` calls, the deepest
/// `depth` levels down.
#[inline(never)]
pub fn recurse(depth: u32) -> u64 {
    let mut frame = [depth as u8; 32];
    black_box(&mut frame);
    if depth == 0 {
        return frame[0].into();
    }
    recurse(depth - 1) + u64::from(frame[1])
}

/// Like [`recurse`], but the call at `panic_at` panics: the calls from
/// `depth` down to it never return, they unwind.
#[inline(never)]
pub fn recurse_then_panic(depth: u32, panic_at: u32) -> u64 {
    let mut frame = [depth as u8; 32];
    black_box(&mut frame);
    if depth == panic_at {
        std::panic::panic_any(Unwound);
    }
    recurse_then_panic(depth - 1, panic_at) + u64::from(frame[1])
}

/// The payload of [`recurse_then_panic`]'s panic.
pub struct Unwound;

/// `recurse_then_panic(depth, panic_at)` under `catch_unwind`, then
/// `recurse(after)`: whether the panic was caught.
pub fn panic_then_recurse(depth: u32, panic_at: u32, after: u32) -> bool {
    // Quiet: the panic is expected.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let caught = std::panic::catch_unwind(|| recurse_then_panic(depth, panic_at)).is_err();
    std::panic::set_hook(hook);
    black_box(recurse(after));
    caught
}

/// `threads` threads each call `recurse(depth)`.
pub fn recurse_on_threads(depth: u32, threads: u32) {
    let handles: Vec<_> = (0..threads)
        .map(|_| std::thread::spawn(move || black_box(recurse(depth))))
        .collect();
    for handle in handles {
        handle.join().expect("a recursing thread");
    }
}
