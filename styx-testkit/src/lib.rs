//! Driving styx-loader from another program, as the end-to-end tests
//! (styx-testprog's `e2e`) and the benchmark (`cargo xtask bench`) do: start
//! it and wait until it says it has attached, stop it, and read its
//! end-of-run summary; and `cargo xtask demo`'s recording.
//!
//! What styx-loader does (does not attach, does not exit, prints no summary)
//! comes back as an [`Error`]; failing to wait for or signal a child of ours,
//! which only a bug here can cause, panics.
//!
//! Only std, libc and styx-common's summary: xtask depends on this crate
//! and must build quickly.

mod demo;
mod loader;
mod summary;

pub use demo::demo_recording;
pub use loader::{Error, Loader};
pub use summary::{Stop, Summary, TypeCount, JSON_SUMMARY_ENV};

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc::{channel, Receiver};

/// The lines `pipe` produces, as they come, read by a thread of its own. The
/// channel closes at the end of the pipe (or at a read error).
pub fn lines_of(pipe: impl Read + Send + 'static) -> Receiver<String> {
    let (send, receive) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

/// Whether process `pid` catches SIGINT (its `SigCgt` mask): bpftrace does
/// from before it attaches until it is on its way out, and a SIGINT it
/// missed (bpftrace 0.17 notices one only at its next event) may be sent
/// again meanwhile, never after (the default action would kill it while it
/// prints its maps).
pub fn catches_sigint(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (libc::SIGINT - 1)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_a_pipe_arrive_in_order_and_the_channel_closes() {
        let lines = lines_of(&b"one\ntwo\nthree"[..]);
        let got: Vec<String> = lines.iter().collect();
        assert_eq!(got, ["one", "two", "three"]);
    }
}
