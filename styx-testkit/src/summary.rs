//! styx-loader's end-of-run summary on stderr:
//!
//! ```text
//! styx-loader: 2043 events from pid 7 (/usr/bin/emu) in 1.52 s (process exited); 12 dropped
//!   mem_read            1000
//!   marker              1043  (12 dropped: ring buffer full)
//! ```
//!
//! a line per event type that had events or drops after the first.

use crate::Error;

/// What styx-loader's summary says.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The summary line itself.
    pub line: String,
    /// Events written.
    pub events: u64,
    /// Whom it traced: `pid 7 (/usr/bin/emu)`, `every process running …`.
    pub target: String,
    pub seconds: f64,
    /// Why tracing ended: `process exited`, `interrupted`, `output failed`, …
    pub stop: String,
    /// Events lost because the ring buffer was full.
    pub dropped: u64,
    /// The event types with events or drops, in the order printed.
    pub types: Vec<TypeCount>,
}

/// One event type's line of the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeCount {
    pub name: String,
    pub events: u64,
    pub dropped: u64,
    /// Left out by `--filter`/`--sample`.
    pub filtered: u64,
}

impl Summary {
    /// The summary among styx-loader's stderr lines (the first line that
    /// says `styx-loader: N events from`), with the event type lines that
    /// follow it.
    pub fn find(stderr: &[impl AsRef<str>]) -> Result<Summary, Error> {
        let at = stderr
            .iter()
            .position(|l| is_summary(l.as_ref()))
            .ok_or_else(|| Error::NoSummary {
                stderr: stderr.iter().map(|l| l.as_ref().to_string()).collect(),
            })?;
        let line = stderr[at].as_ref();
        let mut summary = Summary::parse(line).ok_or_else(|| Error::BadSummary {
            line: line.to_string(),
        })?;
        summary.types = stderr[at + 1..]
            .iter()
            .map_while(|l| type_count(l.as_ref()))
            .collect();
        Ok(summary)
    }

    /// Reads a summary line alone (`types` is empty).
    pub fn parse(line: &str) -> Option<Summary> {
        if !is_summary(line) {
            return None;
        }
        let rest = line.strip_prefix("styx-loader: ")?;
        let (events, rest) = rest.split_once(" events from ")?;
        let (rest, dropped) = rest.rsplit_once("; ")?;
        let (rest, stop) = rest.strip_suffix(')')?.rsplit_once(" (")?;
        let (target, seconds) = rest.rsplit_once(" in ")?;
        Some(Summary {
            line: line.to_string(),
            events: events.parse().ok()?,
            target: target.to_string(),
            seconds: seconds.strip_suffix(" s")?.parse().ok()?,
            stop: stop.to_string(),
            dropped: dropped.strip_suffix(" dropped")?.parse().ok()?,
            types: Vec::new(),
        })
    }

    /// How many events of type `name` were written (0 if it has no line).
    pub fn events_of(&self, name: &str) -> u64 {
        self.types
            .iter()
            .find(|t| t.name == name)
            .map_or(0, |t| t.events)
    }
}

fn is_summary(line: &str) -> bool {
    line.starts_with("styx-loader: ") && line.contains(" events from ")
}

/// `  NAME  N`, then notes such as `(L dropped: ring buffer full)` and
/// `(F filtered out)`.
fn type_count(line: &str) -> Option<TypeCount> {
    if !line.starts_with("  ") {
        return None;
    }
    let mut words = line.split_whitespace();
    let name = words.next()?.to_string();
    let events = words.next()?.parse().ok()?;
    // `(COUNT WHAT…)`
    let note = |what: &str| -> Option<u64> {
        line.split('(').skip(1).find_map(|note| {
            let (count, rest) = note.split_once(' ')?;
            rest.starts_with(what).then(|| count.parse().ok())?
        })
    };
    if words.next().is_some_and(|w| !w.starts_with('(')) {
        return None;
    }
    Some(TypeCount {
        name,
        events,
        dropped: note("dropped").unwrap_or(0),
        filtered: note("filtered out").unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What styx-loader prints (styx-loader/src/session/report.rs).
    const STDERR: [&str; 5] = [
        "styx-loader: attached 26 probe sites in pid 7 (/opt/emu in a dir) in 12 ms; Ctrl-C to stop",
        "styx-loader: 2043 events from pid 7 (/opt/emu in a dir) in 1.52 s (process exited); 12 dropped",
        "  mem_read            1000",
        "  marker              1043  (12 dropped: ring buffer full)  (7 filtered out)",
        "styx-loader: warning: 12 events were dropped because the ring buffer was full; try a larger --ring-size (now 4096 bytes)",
    ];

    #[test]
    fn reads_the_summary_and_the_event_type_lines() {
        let summary = Summary::find(&STDERR).unwrap();
        assert_eq!(summary.line, STDERR[1]);
        assert_eq!(summary.events, 2043);
        assert_eq!(summary.target, "pid 7 (/opt/emu in a dir)");
        assert_eq!(summary.seconds, 1.52);
        assert_eq!(summary.stop, "process exited");
        assert_eq!(summary.dropped, 12);
        assert_eq!(
            summary.types,
            [
                TypeCount {
                    name: "mem_read".into(),
                    events: 1000,
                    dropped: 0,
                    filtered: 0
                },
                TypeCount {
                    name: "marker".into(),
                    events: 1043,
                    dropped: 12,
                    filtered: 7
                },
            ]
        );
        assert_eq!(summary.events_of("marker"), 1043);
        assert_eq!(summary.events_of("branch"), 0);
    }

    #[test]
    fn reads_a_summary_line_alone() {
        let line =
            "styx-loader: 8000000 events from pid 7 (/x) in 1.00 s (process exited); 0 dropped";
        let summary = Summary::parse(line).unwrap();
        assert_eq!((summary.events, summary.dropped), (8_000_000, 0));
        let every = "styx-loader: 0 events from every process running /bin/emu in 0.20 s (interrupted); 0 dropped";
        assert_eq!(
            Summary::parse(every).unwrap().target,
            "every process running /bin/emu"
        );
    }

    #[test]
    fn no_summary_or_a_bad_one_is_an_error() {
        assert!(matches!(
            Summary::find(&STDERR[..1]),
            Err(Error::NoSummary { .. })
        ));
        let bad = ["styx-loader: many events from pid 7 (/x) in 1.00 s (interrupted); 0 dropped"];
        assert!(matches!(Summary::find(&bad), Err(Error::BadSummary { .. })));
        assert_eq!(Summary::parse("styx-loader: attached 26 probe sites"), None);
    }
}
