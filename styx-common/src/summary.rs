//! styx-loader's end-of-run summary, the one definition of what it says and
//! how it reads: the loader fills a [`Summary`] and prints it as text on
//! stderr (for people), and with `--json-summary` also as one JSON line
//! ([`Summary::json_line`]); styx-testkit reads that line back
//! ([`Summary::from_json_line`]) for the end-to-end tests and the benchmark.
//! Here (behind the `summary` feature) so that both build on it without the
//! testkit depending on the loader's binary or its heavy dependencies.
//!
//! ```text
//! styx-loader: 2043 events from pid 7 (/usr/bin/emu) in 1.52 s (process exited); 12 dropped
//!   mem_read            1000
//!   marker              1043  (12 dropped: ring buffer full)
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use serde::{Deserialize, Serialize};

/// What starts the JSON line on stderr.
pub const JSON_PREFIX: &str = "styx-loader: summary: ";

/// The environment variable that turns `--json-summary` on.
pub const JSON_SUMMARY_ENV: &str = "STYX_JSON_SUMMARY";

/// What a tracing run did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Events written.
    pub events: u64,
    /// Whom it traced: `pid 7 (/usr/bin/emu)`, `every process running …`.
    pub target: String,
    pub seconds: f64,
    pub stop: Stop,
    /// Events lost because the ring buffer was full.
    pub dropped: u64,
    /// The event types with anything to say, in catalogue order.
    pub types: Vec<TypeCount>,
}

/// One event type's line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypeCount {
    pub name: String,
    /// Written.
    pub events: u64,
    /// Ring buffer full.
    pub dropped: u64,
    /// Batched events whose copy from the process failed.
    pub lost: u64,
    /// Left out by `--filter`/`--sample`.
    pub filtered: u64,
}

/// Why tracing ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    Interrupted,
    Terminated,
    TargetExited,
    DurationReached,
    OutputClosed,
    OutputFailed,
}

impl Stop {
    /// As the text summary says it.
    pub fn says(self) -> &'static str {
        match self {
            Stop::Interrupted => "interrupted",
            Stop::Terminated => "terminated",
            Stop::TargetExited => "process exited",
            Stop::DurationReached => "duration reached",
            Stop::OutputClosed => "output closed",
            Stop::OutputFailed => "output failed",
        }
    }
}

impl Summary {
    /// The first line of the text.
    pub fn line(&self) -> String {
        alloc::format!(
            "styx-loader: {} events from {} in {:.2} s ({}); {} dropped",
            self.events,
            self.target,
            self.seconds,
            self.stop.says(),
            self.dropped
        )
    }

    /// How many events of type `name` were written (0 if it has no line).
    pub fn events_of(&self, name: &str) -> u64 {
        self.types
            .iter()
            .find(|t| t.name == name)
            .map_or(0, |t| t.events)
    }

    /// `styx-loader: summary: {…}`, one line.
    pub fn json_line(&self) -> String {
        let json = serde_json::to_string(self).expect("a summary always serializes");
        alloc::format!("{JSON_PREFIX}{json}")
    }

    /// The summary a [`Summary::json_line`] holds; None for another line,
    /// an error for one that starts so but does not read as a summary.
    pub fn from_json_line(line: &str) -> Option<Result<Summary, serde_json::Error>> {
        line.strip_prefix(JSON_PREFIX).map(serde_json::from_str)
    }
}

/// The text: the summary line, then a line per event type.
impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.line())?;
        for t in &self.types {
            write!(f, "\n  {:<11} {:>12}", t.name, t.events)?;
            if t.filtered > 0 {
                write!(f, "  ({} filtered out)", t.filtered)?;
            }
            if t.dropped > 0 {
                write!(f, "  ({} dropped: ring buffer full)", t.dropped)?;
            }
            if t.lost > 0 {
                write!(f, "  ({} lost: copy from the process failed)", t.lost)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    fn summary() -> Summary {
        Summary {
            events: 2043,
            target: "pid 7 (/opt/emu in a dir)".to_string(),
            seconds: 1.5234,
            stop: Stop::TargetExited,
            dropped: 12,
            types: vec![
                TypeCount {
                    name: "mem_read".to_string(),
                    events: 1000,
                    dropped: 0,
                    lost: 0,
                    filtered: 0,
                },
                TypeCount {
                    name: "marker".to_string(),
                    events: 1043,
                    dropped: 12,
                    lost: 3,
                    filtered: 7,
                },
            ],
        }
    }

    #[test]
    fn the_text_reads_as_it_always_has() {
        assert_eq!(
            summary().to_string(),
            "styx-loader: 2043 events from pid 7 (/opt/emu in a dir) in 1.52 s (process exited); 12 dropped\n  \
             mem_read            1000\n  \
             marker              1043  (7 filtered out)  (12 dropped: ring buffer full)  (3 lost: copy from the process failed)"
        );
    }

    #[test]
    fn the_json_line_reads_back_as_the_same_summary() {
        let line = summary().json_line();
        assert!(line.starts_with("styx-loader: summary: {"), "{line}");
        assert!(!line.contains('\n'));
        assert!(line.contains(r#""stop":"target_exited""#), "{line}");
        assert_eq!(Summary::from_json_line(&line).unwrap().unwrap(), summary());
        assert!(Summary::from_json_line("styx-loader: attached 3 probe sites").is_none());
        assert!(Summary::from_json_line("styx-loader: summary: {")
            .unwrap()
            .is_err());
    }
}
