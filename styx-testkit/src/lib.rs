//! Driving styx-loader from another program, as the end-to-end tests
//! (styx-testprog's `e2e`) and the benchmark (`cargo xtask bench`) do: start
//! it and wait until it says it has attached, stop it, and read its
//! end-of-run summary.
//!
//! What styx-loader does (does not attach, does not exit, prints no summary)
//! comes back as an [`Error`]; failing to wait for or signal a child of ours,
//! which only a bug here can cause, panics.
//!
//! Only std, libc and styx-common's summary: xtask depends on this crate
//! and must build quickly.

mod loader;
mod summary;

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
