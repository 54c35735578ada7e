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
//!
//! When events were dropped, [`Loss`] says why, from the rates the loader
//! saw while they were: a burst the ring could not hold (the loader mostly
//! idle meanwhile: a larger ring helps) or an output slower than the
//! emulator (the loader busy writing: a larger ring cannot help; waiting,
//! a raw capture or fewer events do). [`Summary::loss_warning`] is the
//! warning that names what helps.
//!
//! When the emulator waited for the loader instead (`--on-full wait`:
//! nothing dropped, the emulator slowed to the output's pace), [`Waited`]
//! says for how long, and [`Summary::wait_note`] what sets that pace and
//! what helps.

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
    /// Why events were dropped (None when none were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<Loss>,
    /// The libraries the process mapped after tracing started, attached
    /// then (what they fired before was not seen), in that order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub late: Vec<LateLibrary>,
    /// How long the emulator waited for the loader (`--on-full wait`),
    /// when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited: Option<Waited>,
}

/// The emulator held back by lossless flow control: its threads had
/// flushed every batch the loader had granted them room for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Waited {
    /// Seconds of the run in which the emulator used up its credit, at
    /// most (the loader looks at each grant, ~1 ms apart, and counts the
    /// whole interval since the last).
    pub seconds: f64,
    /// Where events went: `-o`'s format name, or `top`.
    pub output: String,
    /// Whether a raw capture's worker threads compress its blocks (while
    /// the emulator waits they take every block the capture's bytes an
    /// event do not leave room to store as it is).
    pub compressing: bool,
}

/// A library attached after tracing started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LateLibrary {
    pub path: String,
    /// When, since tracing started.
    pub seconds: f64,
    /// Probe sites attached in it.
    pub sites: u64,
}

/// Why events were dropped, and the rates that say so.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Loss {
    pub cause: LossCause,
    /// Seconds of the run in which events were dropped (the loader looks
    /// at its counts every ~0.1 s, or after each long write).
    pub seconds: f64,
    /// The share of those seconds the loader spent taking events from the
    /// ring and writing them out (0 to 1).
    pub busy: f64,
    /// Events per second that came meanwhile, written and dropped.
    pub offered_per_s: f64,
    /// Events per second the output took while the loader was busy: its pace.
    pub output_per_s: f64,
    /// Of the dropped events, those of batched types (the rest are of the
    /// per-event types, which never wait).
    pub batched: u64,
    /// Whether batched events waited for room in the ring (`--on-full wait`).
    pub waited: bool,
    pub ring_bytes: u64,
    /// Where events went: `-o`'s format name, or `top`.
    pub output: String,
}

/// Why the ring was full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossCause {
    /// Events came faster than the ring could hold for a while, the loader
    /// mostly idle meanwhile (or not scheduled).
    Burst,
    /// The output is slower than the emulator: the loader was busy writing
    /// most of the time while events were dropped.
    Sustained,
}

/// The share of a run the emulator must have waited for the loader for
/// the summary to say so: less is the odd full ring of a burst.
pub const WAIT_WORTH_SAYING: f64 = 0.02;

/// The loader's share of busy time, while events were dropped, from which
/// a loss is the output's pace rather than a burst.
pub const SUSTAINED_BUSY: f64 = 0.5;

impl LossCause {
    /// The cause, from the loader's share of busy time while events were
    /// dropped.
    pub fn of(busy: f64) -> LossCause {
        if busy >= SUSTAINED_BUSY {
            LossCause::Sustained
        } else {
            LossCause::Burst
        }
    }
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
    /// `usdt`'s events by probe (`provider:probe`: an emulator's declared
    /// types, other providers' probes), most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeCount>,
}

/// One probe's events among `usdt`'s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeCount {
    pub name: String,
    pub events: u64,
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

    /// Why events were dropped and what helps, one line (None when none
    /// were).
    pub fn loss_warning(&self) -> Option<String> {
        let loss = self.loss.as_ref().filter(|_| self.dropped > 0)?;
        let share = self.dropped as f64 * 100.0 / (self.events + self.dropped) as f64;
        let lost = alloc::format!("{} events ({share:.1}%) were dropped", self.dropped);
        let ring = alloc::format!("a larger --ring-size (now {})", size_text(loss.ring_bytes));
        let busy = loss.busy * 100.0;
        let rates = alloc::format!(
            "in the {:.2} s in which events were dropped the loader was busy {busy:.0}% of the \
             time, writing {} events/s while {} events/s came",
            loss.seconds,
            rate(loss.output_per_s),
            rate(loss.offered_per_s)
        );
        if loss.batched > 0 && loss.ring_bytes < crate::batch::BATCH_RING_BYTES as u64 {
            return Some(alloc::format!(
                "{lost}: a ring of {} cannot hold one batch of events ({} bytes): every full \
                 batch is dropped, waiting or not; give a larger --ring-size (at least {})",
                size_text(loss.ring_bytes),
                crate::batch::BATCH_RING_BYTES,
                size_text(crate::batch::MIN_BATCHED_RING_BYTES as u64)
            ));
        }
        let per_event_only = loss.batched == 0 && loss.waited;
        Some(match (loss.cause, per_event_only) {
            (cause, true) => alloc::format!(
                "{lost}, all of per-event types (control, spans, markers, other \
                 providers' probes), which never wait for room (batched events did: none \
                 lost); {rates}; {}",
                match cause {
                    LossCause::Burst => alloc::format!("{ring} holds longer bursts of them"),
                    LossCause::Sustained =>
                        "trace fewer of them (-e, --filter) or write a faster format (-o raw)"
                            .into(),
                }
            ),
            (LossCause::Sustained, false) => {
                let capture = match loss.output.as_str() {
                    "raw" => "write the capture to a faster disk",
                    _ => {
                        "record a capture (-o raw --output FILE) and convert it later with \
                          `styx-loader read`"
                    }
                };
                alloc::format!(
                    "{lost} because the output is slower than the emulator: {rates}; a larger \
                     --ring-size cannot help. To keep every event, let the emulator wait for \
                     the output (--on-full wait), or {capture}; or trace fewer events (-e, \
                     --filter)"
                )
            }
            (LossCause::Burst, false) => {
                let wait = match loss.batched > 0 && !loss.waited {
                    true => "; --on-full wait keeps every batched event",
                    false => "",
                };
                alloc::format!(
                    "{lost} in bursts the ring buffer could not hold: {rates}; {ring} holds \
                     longer bursts{wait}"
                )
            }
        })
    }

    /// How long the emulator waited for the loader, what set that pace
    /// and what helps, one line (None when it waited less than
    /// [`WAIT_WORTH_SAYING`] of the run).
    pub fn wait_note(&self) -> Option<String> {
        let waited = self.waited.as_ref()?;
        let seconds = waited.seconds.min(self.seconds);
        if seconds < WAIT_WORTH_SAYING * self.seconds || seconds <= 0.0 {
            return None;
        }
        let share = seconds * 100.0 / self.seconds.max(1e-9);
        let raw = alloc::format!(
            "the capture's compressing threads take the blocks then (all but those it can \
             store as they are within {} bytes an event), so they or the disk set the pace: \
             --compression lz4 takes less CPU than zstd, and none stores every block as it is \
             (7–20 bytes an event to write, for a disk that takes them)",
            crate::capture::STORED_BUDGET
        );
        let pace = match (waited.output.as_str(), waited.compressing) {
            ("raw", true) => &raw,
            ("raw", false) => {
                "the disk set the pace: a faster disk, or fewer events (-e, --filter)"
            }
            ("top", _) => "counting set the pace: fewer events (-e, --filter), or --sample",
            _ => {
                "the output set the pace: record a capture (-o raw --output FILE) and convert \
                 it later with `styx-loader read`, or trace fewer events (-e, --filter)"
            }
        };
        Some(alloc::format!(
            "styx-loader: the emulator waited for the loader in up to {seconds:.2} s of the \
             {:.2} s ({share:.0}%; --on-full wait: nothing was dropped, the emulator ran at the \
             output's pace meanwhile); {pace}; --on-full drop never waits (what the ring cannot \
             hold is then dropped, counted)",
            self.seconds
        ))
    }

    /// What a loss makes wrong in the output, for outputs whose result is
    /// then wrong rather than just shorter (None for the others, or when
    /// nothing was dropped).
    pub fn spoiled(&self) -> Option<String> {
        let loss = self.loss.as_ref().filter(|_| self.dropped > 0)?;
        let what = match loss.output.as_str() {
            "drcov" => "the coverage misses the blocks only the dropped events reached",
            "tenet" => {
                "the trace misses instructions and their register and memory changes: the \
                 state Tenet replays after a gap is wrong"
            }
            "folded" => "the stacks of calls whose entries or exits were dropped are wrong",
            "top" => "the counts miss the dropped events: the table is not exact",
            _ => return None,
        };
        Some(match loss.output.as_str() {
            "top" => alloc::format!("top: {what}"),
            format => alloc::format!("-o {format}: {what}"),
        })
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
            // Under its type, its numbers in the same column.
            for p in &t.probes {
                write!(f, "\n  {:<11} {:>12}  {}", "", p.events, p.name)?;
            }
        }
        for l in &self.late {
            write!(
                f,
                "\n  attached {:.2} s after tracing started (what it fired before was not \
                 seen): {} ({} sites)",
                l.seconds, l.path, l.sites
            )?;
        }
        Ok(())
    }
}

/// Events per second for people: `15.1 M`, `820 k`, `12`.
fn rate(per_s: f64) -> String {
    match per_s {
        r if r >= 1e6 => alloc::format!("{:.1} M", r / 1e6),
        r if r >= 1e3 => alloc::format!("{:.0} k", r / 1e3),
        r => alloc::format!("{r:.0}"),
    }
}

/// A ring's size as `--ring-size` takes it: `64M`, `4K`.
pub fn size_text(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => alloc::format!("{}M", n >> 20),
        n if n % 1024 == 0 => alloc::format!("{}K", n >> 10),
        n => alloc::format!("{n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    fn summary() -> Summary {
        Summary {
            events: 2073,
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
                    probes: vec![],
                },
                TypeCount {
                    name: "marker".to_string(),
                    events: 1043,
                    dropped: 12,
                    lost: 3,
                    filtered: 7,
                    probes: vec![],
                },
                TypeCount {
                    name: "usdt".to_string(),
                    events: 30,
                    dropped: 0,
                    lost: 0,
                    filtered: 0,
                    probes: vec![
                        ProbeCount {
                            name: "emu:mmio_write".to_string(),
                            events: 20,
                        },
                        ProbeCount {
                            name: "python:function__entry".to_string(),
                            events: 10,
                        },
                    ],
                },
            ],
            loss: None,
            late: vec![LateLibrary {
                path: "/opt/plugin.so".to_string(),
                seconds: 0.25,
                sites: 3,
            }],
            waited: None,
        }
    }

    fn waited(seconds: f64, output: &str, compressing: bool) -> Summary {
        Summary {
            dropped: 0,
            waited: Some(Waited {
                seconds,
                output: output.to_string(),
                compressing,
            }),
            ..summary()
        }
    }

    #[test]
    fn a_wait_note_says_how_long_and_what_set_the_pace() {
        let note = waited(0.61, "raw", true).wait_note().unwrap();
        assert!(
            note.contains("in up to 0.61 s of the 1.52 s (40%"),
            "{note}"
        );
        for helps in [
            "compressing threads",
            "--compression lz4",
            "none stores",
            "--on-full drop",
        ] {
            assert!(note.contains(helps), "{helps}: {note}");
        }
        let note = waited(0.61, "jsonl", false).wait_note().unwrap();
        assert!(
            note.contains("-o raw --output FILE") && note.contains("-e, --filter"),
            "{note}"
        );
        assert!(waited(0.61, "raw", false)
            .wait_note()
            .unwrap()
            .contains("the disk set the pace"));
        // Longer than the run (intervals counted whole): the run.
        let note = waited(9.0, "top", false).wait_note().unwrap();
        assert!(note.contains("up to 1.52 s of the 1.52 s (100%") && note.contains("--sample"));
        // The odd full ring of a burst, or no wait: nothing to say.
        assert_eq!(waited(0.02, "raw", true).wait_note(), None);
        assert_eq!(summary().wait_note(), None);
        // And it travels in the JSON line.
        let summary = waited(0.61, "raw", true);
        let back = Summary::from_json_line(&summary.json_line())
            .unwrap()
            .unwrap();
        assert_eq!(back, summary);
    }

    fn lossy(cause: LossCause, batched: u64, waited: bool, output: &str) -> Summary {
        Summary {
            events: 12_300_000,
            dropped: 271_600_000,
            loss: Some(Loss {
                cause,
                seconds: 2.0,
                busy: if cause == LossCause::Sustained {
                    0.98
                } else {
                    0.05
                },
                offered_per_s: 141.9e6,
                output_per_s: 15.1e6,
                batched,
                waited,
                ring_bytes: 64 << 20,
                output: output.to_string(),
            }),
            ..summary()
        }
    }

    #[test]
    fn a_loss_warning_names_what_helps_for_its_cause() {
        let sustained = lossy(LossCause::Sustained, 271_600_000, false, "jsonl");
        let text = sustained.loss_warning().unwrap();
        assert!(text.starts_with("271600000 events (95.7%) were dropped because the output is slower than the emulator: in the 2.00 s"), "{text}");
        assert!(
            text.contains(
                "busy 98% of the time, writing 15.1 M events/s while 141.9 M events/s came"
            ),
            "{text}"
        );
        for helps in [
            "cannot help",
            "--on-full wait",
            "-o raw --output FILE",
            "styx-loader read",
            "-e, --filter",
        ] {
            assert!(text.contains(helps), "{helps}: {text}");
        }
        let raw = lossy(LossCause::Sustained, 1, false, "raw")
            .loss_warning()
            .unwrap();
        assert!(
            raw.contains("faster disk") && !raw.contains("-o raw"),
            "{raw}"
        );
        let burst = lossy(LossCause::Burst, 5, false, "jsonl")
            .loss_warning()
            .unwrap();
        assert!(
            burst.contains("in bursts the ring buffer could not hold"),
            "{burst}"
        );
        assert!(
            burst.contains("a larger --ring-size (now 64M) holds longer bursts; --on-full wait"),
            "{burst}"
        );
        let per_event = lossy(LossCause::Burst, 0, true, "raw")
            .loss_warning()
            .unwrap();
        assert!(
            per_event.contains("all of per-event types")
                && per_event.contains("--ring-size (now 64M)"),
            "{per_event}"
        );
        assert!(!per_event.contains("--on-full wait"), "{per_event}");
        assert_eq!(summary().loss_warning(), None);
        let mut tiny = lossy(LossCause::Burst, 5, true, "jsonl");
        tiny.loss.as_mut().unwrap().ring_bytes = 4096;
        let tiny = tiny.loss_warning().unwrap();
        assert!(
            tiny.contains("a ring of 4K cannot hold one batch")
                && tiny.contains("larger --ring-size (at least 256K)"),
            "{tiny}"
        );
    }

    #[test]
    fn outputs_a_loss_makes_wrong_say_so() {
        let drcov = lossy(LossCause::Burst, 5, false, "drcov")
            .spoiled()
            .unwrap();
        assert!(
            drcov.starts_with("-o drcov: the coverage misses"),
            "{drcov}"
        );
        let top = lossy(LossCause::Burst, 5, false, "top").spoiled().unwrap();
        assert!(top.starts_with("top: the counts miss"), "{top}");
        let tenet = lossy(LossCause::Sustained, 5, false, "tenet")
            .spoiled()
            .unwrap();
        assert!(
            tenet.starts_with("-o tenet: the trace misses instructions"),
            "{tenet}"
        );
        let folded = lossy(LossCause::Sustained, 5, false, "folded")
            .spoiled()
            .unwrap();
        assert!(
            folded.starts_with("-o folded: the stacks of calls"),
            "{folded}"
        );
        assert_eq!(lossy(LossCause::Burst, 5, false, "jsonl").spoiled(), None);
        // Nothing dropped: nothing wrong to say.
        let mut whole = lossy(LossCause::Burst, 5, false, "drcov");
        whole.dropped = 0;
        assert_eq!(whole.spoiled(), None);
    }

    #[test]
    fn the_text_reads_as_it_always_has() {
        assert_eq!(
            summary().to_string(),
            "styx-loader: 2073 events from pid 7 (/opt/emu in a dir) in 1.52 s (process exited); 12 dropped\n  \
             mem_read            1000\n  \
             marker              1043  (7 filtered out)  (12 dropped: ring buffer full)  (3 lost: copy from the process failed)\n  \
             usdt                  30\n                        \
             20  emu:mmio_write\n                        \
             10  python:function__entry\n  \
             attached 0.25 s after tracing started (what it fired before was not seen): /opt/plugin.so (3 sites)"
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
