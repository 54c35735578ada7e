//! styx-loader's end-of-run summary, read from its stderr: the JSON line it
//! prints with `--json-summary` (every styx-loader [`crate::Loader`] starts
//! has it, through [`JSON_SUMMARY_ENV`]), in the form `styx_common::summary`
//! defines for both sides. The text it prints for people is rendered from
//! the same struct; [`Summary::find`] checks that it is on stderr too.

use crate::Error;
use std::ops::Deref;
use styx_common::summary::Summary as Report;

pub use styx_common::summary::{Stop, TypeCount, JSON_SUMMARY_ENV};

/// What styx-loader's summary says (its fields through `Deref`), and its
/// text line.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// `styx-loader: N events from … in S s (why); D dropped`, as printed.
    pub line: String,
    report: Report,
}

impl Deref for Summary {
    type Target = Report;

    fn deref(&self) -> &Report {
        &self.report
    }
}

impl Summary {
    /// The summary among styx-loader's stderr lines: its JSON line, whose
    /// text lines must be there as well.
    pub fn find(stderr: &[impl AsRef<str>]) -> Result<Summary, Error> {
        let lines = || stderr.iter().map(AsRef::as_ref);
        let (json, read) = lines()
            .find_map(|l| Some((l, Report::from_json_line(l)?)))
            .ok_or_else(|| Error::NoSummary {
                stderr: lines().map(str::to_string).collect(),
            })?;
        let report = read.map_err(|e| Error::BadSummary {
            line: format!("{json} ({e})"),
        })?;
        let text = report.to_string();
        if let Some(missing) = text.lines().find(|t| !lines().any(|l| l == *t)) {
            return Err(Error::BadSummary {
                line: format!("{json}: its text line {missing:?} is not on stderr"),
            });
        }
        Ok(Summary {
            line: report.line(),
            report,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What styx-loader prints (styx-loader/src/session/report.rs).
    fn stderr() -> Vec<String> {
        let report = Report {
            events: 2043,
            target: "pid 7 (/opt/emu in a dir)".into(),
            seconds: 1.52,
            stop: Stop::TargetExited,
            dropped: 12,
            types: vec![
                TypeCount {
                    name: "mem_read".into(),
                    events: 1000,
                    dropped: 0,
                    lost: 0,
                    filtered: 0,
                    probes: vec![],
                },
                TypeCount {
                    name: "marker".into(),
                    events: 1043,
                    dropped: 12,
                    lost: 0,
                    filtered: 7,
                    probes: vec![],
                },
            ],
            loss: None,
            late: vec![],
            waited: None,
        };
        let mut stderr = vec![
            "styx-loader: attached 26 probe sites in pid 7 (/opt/emu in a dir) in 12 ms; Ctrl-C to stop".to_string(),
        ];
        stderr.extend(report.to_string().lines().map(str::to_string));
        stderr.push(report.json_line());
        stderr.push("styx-loader: warning: 12 events (0.6%) were dropped in bursts the ring buffer could not hold: …".into());
        stderr
    }

    #[test]
    fn reads_the_summary_and_the_event_type_lines() {
        let stderr = stderr();
        assert_eq!(
            stderr[1..4],
            [
                "styx-loader: 2043 events from pid 7 (/opt/emu in a dir) in 1.52 s (process exited); 12 dropped",
                "  mem_read            1000",
                "  marker              1043  (7 filtered out)  (12 dropped: ring buffer full)",
            ]
        );
        let summary = Summary::find(&stderr).unwrap();
        assert_eq!(summary.line, stderr[1]);
        assert_eq!(summary.events, 2043);
        assert_eq!(summary.target, "pid 7 (/opt/emu in a dir)");
        assert_eq!(summary.seconds, 1.52);
        assert_eq!(summary.stop, Stop::TargetExited);
        assert_eq!(summary.dropped, 12);
        assert_eq!(summary.types.len(), 2);
        assert_eq!(
            (summary.types[1].dropped, summary.types[1].filtered),
            (12, 7)
        );
        assert_eq!(summary.events_of("marker"), 1043);
        assert_eq!(summary.events_of("branch"), 0);
    }

    #[test]
    fn no_summary_a_bad_one_or_one_without_its_text_is_an_error() {
        let stderr = stderr();
        assert!(matches!(
            Summary::find(&stderr[..1]),
            Err(Error::NoSummary { .. })
        ));
        let bad = ["styx-loader: summary: {\"events\": \"many\"}"];
        assert!(matches!(Summary::find(&bad), Err(Error::BadSummary { .. })));
        let without_text = [&stderr[0], &stderr[4]];
        assert!(matches!(
            Summary::find(&without_text),
            Err(Error::BadSummary { .. })
        ));
    }
}
