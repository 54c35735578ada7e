//! A program that declares its probes with the `usdt` crate
//! (oxidecomputer's), as its README teaches: the end-to-end tests trace it
//! with styx and with bpftrace, and check what each saw against what it
//! fired. On Linux the crate writes SystemTap notes, a 16-bit semaphore
//! per probe, and passes `&str` and serde arguments as the address of a
//! NUL-terminated copy (the latter as `{"ok":JSON}`).
//!
//! Commands on stdin, one a line, each answered by one line:
//! - `go N`: fires N rounds of `request` and `response`; `done N`;
//! - `long`: fires `note` once with a string longer than styx keeps; `done 1`;
//! - `enabled`: the `request` probe's semaphore, `enabled N` (0: detached);
//! - `quit`, or the end of stdin: exits.

use serde::Serialize;
use std::io::{BufRead, Write};

/// What `response` passes: serialized to JSON by the crate.
#[derive(Serialize)]
pub struct Response {
    pub id: u64,
    pub status: u16,
    pub tags: Vec<String>,
}

#[usdt::provider]
mod usdtcrate {
    use crate::Response;
    fn request(id: u64, path: &str, delta: i32) {}
    fn response(body: &Response) {}
    fn note(text: &str) {}
}

unsafe extern "C" {
    /// The crate's semaphore of `request` (weak, hidden, in `.probes`),
    /// named as its stapsdt backend names it.
    static __usdt_sema_usdtcrate_request: u16;
}

/// The path `request` passes in round `i` (the tests compute the same).
pub fn path(i: u64) -> String {
    format!("/rom/{i}/\"quoted\" é")
}

fn round(i: u64) {
    let path = path(i);
    usdtcrate::request!(|| (i, path.as_str(), i as i32 - 5));
    let body = Response {
        id: i,
        status: 200 + (i % 3) as u16,
        tags: vec!["a".into(), format!("t{i}")],
    };
    usdtcrate::response!(|| &body);
}

fn main() {
    usdt::register_probes().expect("registering probes");
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let line = line.expect("reading stdin");
        let mut words = line.split_whitespace();
        let answer = match (words.next(), words.next()) {
            (Some("go"), Some(n)) => {
                let n: u64 = n.parse().expect("go N");
                (0..n).for_each(round);
                format!("done {n}")
            }
            (Some("long"), None) => {
                let text = "x".repeat(300);
                usdtcrate::note!(|| text.as_str());
                "done 1".to_string()
            }
            (Some("enabled"), None) => {
                // SAFETY: a u16 the kernel changes under us: read volatile.
                let n = unsafe { (&raw const __usdt_sema_usdtcrate_request).read_volatile() };
                format!("enabled {n}")
            }
            (Some("quit"), None) => break,
            _ => panic!("unknown command {line:?}"),
        };
        writeln!(out, "{answer}").expect("answering");
        out.flush().expect("flushing");
    }
}
