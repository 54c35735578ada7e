//! An emulator library as a program loads it at run time (`dlopen`): its
//! probes' per-thread batch slot is an initial-exec thread-local, which a
//! library loaded after start takes from the C library's spare static TLS.
//! The end-to-end tests load it into styx-testprog (`dlopen PATH`), trace
//! the process and fire (`lib-fire N THREADS`). It declares an event type
//! of its own, as the program loading it does.

styx_probe::event! {
    /// The library's own event type: round `i` of a firing thread.
    pub lib_tick(i: u32, odd: bool);
}

/// Fires `n` `insn_exec` events (pc `i`, instruction `i * 3`, length 4),
/// `n` `mem_read`s (pc `i`, address `i * 8`, a 4-byte value `i`) and `n`
/// of its own `lib_tick(i, i odd)` on each of `threads` new threads, or,
/// with `threads` 0, on the calling thread (one that existed before the
/// library was loaded: its batch slot is the one the dynamic linker set
/// up at `dlopen`); returns the catalogue's events fired.
#[no_mangle]
pub extern "C" fn styx_testlib_fire(n: u64, threads: u64) -> u64 {
    if threads == 0 {
        fire_rounds(n);
        return 2 * n;
    }
    let workers: Vec<_> = (0..threads)
        .map(|_| std::thread::spawn(move || fire_rounds(n)))
        .collect();
    for worker in workers {
        worker.join().expect("a firing thread");
    }
    2 * n * threads
}

/// Rounds `0..n` of [`styx_testlib_fire`] on this thread.
fn fire_rounds(n: u64) {
    for i in 0..n {
        styx_probe::insn_exec!(|| (i, i * 3, 4u8));
        styx_probe::mem_read!(|| (i, i * 8, i as u32));
        styx_probe::fire!(lib_tick, || (i as u32, i % 2 == 1));
    }
}

/// Whether a tracer has raised this library's `insn_exec` semaphore (per
/// event or batched): a program that loads the library and must not fire
/// before a tracer following it has attached waits for this.
#[no_mangle]
pub extern "C" fn styx_testlib_enabled() -> bool {
    styx_probe::enabled(styx_probe::EventKind::InsnExec)
}
