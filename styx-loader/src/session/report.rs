//! The end-of-run summary on stderr: events per type, drops, and anything
//! that did not make it to the output.

use super::drain::Sink;
use std::time::Duration;
use styx_common::EventKind;

/// Why tracing ended.
pub enum Stop {
    Interrupted,
    Terminated,
    TargetExited,
    DurationReached,
    OutputClosed,
    OutputFailed,
}

pub struct Summary<'a> {
    /// "pid 123 (/usr/bin/emu)" or "every process running …".
    pub target: &'a str,
    pub stop: Stop,
    pub elapsed: Duration,
    pub sink: &'a Sink,
    /// Ring-full drops per event kind (index = kind id).
    pub drops: &'a [u64],
    pub ring_size: u32,
}

pub fn print(s: &Summary<'_>) {
    let why = match s.stop {
        Stop::Interrupted => "interrupted",
        Stop::Terminated => "terminated",
        Stop::TargetExited => "process exited",
        Stop::DurationReached => "duration reached",
        Stop::OutputClosed => "output closed",
        Stop::OutputFailed => "output failed",
    };
    let written = &s.sink.written;
    let dropped: u64 = s.drops.iter().sum();
    eprintln!(
        "styx-loader: {} events from {} in {:.2} s ({why}); {dropped} dropped",
        written.total(),
        s.target,
        s.elapsed.as_secs_f64(),
    );
    for &kind in EventKind::ALL {
        let (n, lost) = (written.events[kind as usize], s.drops[kind as usize]);
        if n > 0 || lost > 0 {
            let lost = if lost > 0 {
                format!("  ({lost} dropped: ring buffer full)")
            } else {
                String::new()
            };
            eprintln!("  {:<11} {n:>12}{lost}", kind.probe_name());
        }
    }
    if dropped > 0 {
        log::warn!(
            "{dropped} events were dropped because the ring buffer was full; try a larger --ring-size (now {} bytes)",
            s.ring_size
        );
    }
    let unwritten = s.sink.unwritten.total();
    if unwritten > 0 && s.sink.error.is_none() {
        eprintln!(
            "styx-loader: {unwritten} events that arrived after the output closed were not written"
        );
    }
    let undecodable = written.undecodable + s.sink.unwritten.undecodable;
    let first = written.first_undecodable.as_ref();
    if let Some(first) = first.or(s.sink.unwritten.first_undecodable.as_ref()) {
        log::warn!("{undecodable} records could not be decoded (first: {first})");
    }
}
