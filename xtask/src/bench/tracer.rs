//! The processes a stream measurement needs: the styx-bench workload, and
//! the tracer attached to it (styx-loader or bpftrace), with what each
//! received, lost and spent.

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use styx_testkit::{lines_of, Loader, Summary};

/// styx-bench's handshake events: a probe other than the measured one.
const READY: &str = "ready";

/// The styx-bench workload, driven over stdin.
pub struct Workload {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Memory-read probe arguments evaluated so far: events of the measured
    /// stream the probes fired (the `ready` handshake's are not counted).
    pub fired: u64,
}

/// One `run` answer.
pub struct Run {
    pub ns_per_event: f64,
    pub evaluated: u64,
    /// What the seed approach's reader process got, and its CPU seconds.
    pub received: u64,
    pub reader_cpu_s: f64,
}

impl Workload {
    pub fn spawn(binary: &Path) -> Result<Workload> {
        let mut child = Command::new(binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Workload {
            child,
            stdin,
            stdout,
            fired: 0,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `n` events `via` one of styx-bench's ways and waits for the answer.
    pub fn run(&mut self, via: &str, n: u64) -> Result<Run> {
        writeln!(self.stdin, "run {via} {n}")?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let field = |key: &str| -> Result<f64> {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .with_context(|| format!("no {key} in styx-bench's answer {line:?}"))
        };
        let run = Run {
            ns_per_event: field("ns_per_event")?,
            evaluated: field("evaluated")? as u64,
            received: field("received")? as u64,
            reader_cpu_s: field("reader_cpu_s")?,
        };
        if via != READY {
            self.fired += run.evaluated;
        }
        Ok(run)
    }

    /// Whether the kernel has mapped its uprobe trampoline into the workload:
    /// the sign that it rewrote a 5-byte-nop site into a call.
    pub fn has_uprobe_trampoline(&self) -> Result<bool> {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.pid()))?;
        Ok(maps.lines().any(|l| l.ends_with("[uprobes-trampoline]")))
    }

    pub fn quit(mut self) -> Result<()> {
        writeln!(self.stdin, "quit")?;
        let status = self.child.wait()?;
        anyhow::ensure!(status.success(), "styx-bench failed: {status}");
        Ok(())
    }
}

/// Who traces the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracer {
    /// styx-loader writing a raw capture to /dev/null.
    StyxRaw,
    /// styx-loader writing JSON lines to /dev/null.
    StyxJsonl,
    /// bpftrace counting the events in a map.
    BpftraceCount,
    /// bpftrace printing each event's arguments.
    BpftracePrintf,
}

/// A tracer attached to a workload.
pub struct Session {
    tracer: Tracer,
    process: Process,
    /// The tracer's stdout: (lines, the last of its text).
    stdout: JoinHandle<(u64, String)>,
    /// Events fired before the tracer was told to stop.
    fired_at_stop: u64,
}

/// The tracer's process.
enum Process {
    Styx(Loader),
    Bpftrace {
        child: Child,
        stderr: Receiver<String>,
    },
}

impl Session {
    /// Starts `tracer` on the workload and returns once it is attached.
    pub fn start(tracer: Tracer, loader: &Path, workload: &mut Workload) -> Result<Session> {
        let pid = workload.pid().to_string();
        let (process, mut out) = match tracer {
            Tracer::StyxRaw | Tracer::StyxJsonl => {
                let format = if tracer == Tracer::StyxRaw {
                    "raw"
                } else {
                    "jsonl"
                };
                let args = ["--pid", &pid, "-e", "mem_read", "-o", format];
                let quiet = ["--quiet", "--output", "/dev/null"];
                let mut loader = Loader::spawn(loader, args.iter().chain(&quiet), Stdio::piped())?;
                let out = loader.child.stdout.take().expect("piped");
                (Process::Styx(loader), out)
            }
            Tracer::BpftraceCount | Tracer::BpftracePrintf => {
                // mem_write carries the handshake (see wait_attached); its
                // printf of nothing wakes bpftrace without adding a line.
                let (measured, handshake) = if tracer == Tracer::BpftraceCount {
                    ("@events = count();", "@ready = count();")
                } else {
                    (
                        r#"printf("%lu %lu %lu\n", arg0, arg1, arg2);"#,
                        r#"printf("");"#,
                    )
                };
                let mut child = Command::new("bpftrace")
                    .args(["-p", &pid, "-e"])
                    .arg(format!(
                        "usdt::styx:mem_read {{ {measured} }} usdt::styx:mem_write {{ {handshake} }}"
                    ))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .with_context(|| format!("starting {tracer:?}"))?;
                let out = child.stdout.take().expect("piped");
                let stderr = lines_of(child.stderr.take().expect("piped"));
                (Process::Bpftrace { child, stderr }, out)
            }
        };
        let stdout = std::thread::spawn(move || {
            let mut lines = 0;
            let mut tail = Vec::new();
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
                tail.extend_from_slice(&buf[..n]);
                let cut = tail.len().saturating_sub(4096);
                tail.drain(..cut);
            }
            (lines, String::from_utf8_lossy(&tail).into_owned())
        });
        let mut session = Session {
            tracer,
            process,
            stdout,
            fired_at_stop: 0,
        };
        session.wait_attached(workload)?;
        Ok(session)
    }

    fn wait_attached(&mut self, workload: &mut Workload) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        match &mut self.process {
            Process::Styx(loader) => {
                loader.wait_for_line("attached")?;
                Ok(())
            }
            // bpftrace says nothing when attached: the handshake probe's
            // closure runs once it is. It is attached after the measured one.
            Process::Bpftrace { child, .. } => {
                while workload.run(READY, 1000)?.evaluated == 0 {
                    if Instant::now() > deadline {
                        bail!("bpftrace did not attach within 60 s");
                    }
                    if let Some(status) = child.try_wait()? {
                        bail!("bpftrace exited: {status}");
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                // The measured probe has two sites (nop1 and nop5) sharing
                // one semaphore: give bpftrace time for the last of them.
                std::thread::sleep(Duration::from_millis(500));
                Ok(())
            }
        }
    }

    /// CPU time the tracer has used so far, in seconds.
    pub fn cpu_seconds(&self) -> Result<f64> {
        let pid = match &self.process {
            Process::Styx(loader) => loader.pid(),
            Process::Bpftrace { child, .. } => child.id(),
        };
        cpu_seconds(pid)
    }

    /// Stops the tracer (styx-loader stops when the workload quits) and says
    /// how many of the events the workload fired it did not receive.
    pub fn finish(mut self, mut workload: Workload) -> Result<u64> {
        self.fired_at_stop = workload.fired;
        let (status, stderr) = match self.process {
            Process::Styx(loader) => {
                workload.quit()?;
                loader.finish()
            }
            Process::Bpftrace { mut child, stderr } => {
                // SAFETY: signalling a child we started.
                unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
                // bpftrace 0.17 with printf output notices the signal only at its next event.
                let deadline = Instant::now() + Duration::from_secs(30);
                while child.try_wait()?.is_none() {
                    if Instant::now() > deadline {
                        bail!("bpftrace did not stop within 30 s of SIGINT");
                    }
                    workload.run(READY, 10)?;
                    std::thread::sleep(Duration::from_millis(50));
                }
                workload.quit()?;
                (child.wait()?, stderr.iter().collect())
            }
        };
        let (lines, stdout) = self.stdout.join().expect("stdout reader");
        anyhow::ensure!(
            status.success(),
            "{:?} failed ({status}): {}",
            self.tracer,
            stderr.join("\n")
        );
        let received = match self.tracer {
            Tracer::StyxRaw | Tracer::StyxJsonl => Summary::find(&stderr)?.events,
            Tracer::BpftraceCount => number_after(&stdout, "@events: ")?,
            Tracer::BpftracePrintf => lines,
        };
        Ok(self.fired_at_stop.saturating_sub(received))
    }
}

/// The unsigned number right after `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> Result<u64> {
    text.split(prefix)
        .nth(1)
        .and_then(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .with_context(|| format!("no number after {prefix:?} in {text:?}"))
}

/// A process's CPU time (user + system, all threads), in seconds.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesized command name; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .context("malformed /proc/PID/stat")?
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks as f64 / per_second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_tracer_output() {
        let summary =
            "styx-loader: 8000000 events from pid 7 (/x) in 1.00 s (process exited); 0 dropped";
        assert_eq!(number_after(summary, "styx-loader: ").unwrap(), 8_000_000);
        assert_eq!(
            number_after("\n\n@events: 1234\n", "@events: ").unwrap(),
            1234
        );
        assert!(number_after("nothing", "@events: ").is_err());
    }

    #[test]
    fn own_cpu_time_is_read() {
        let before = cpu_seconds(std::process::id()).unwrap();
        let started = Instant::now();
        let mut x = 0u64;
        while started.elapsed() < Duration::from_millis(100) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(cpu_seconds(std::process::id()).unwrap() - before >= 0.05);
    }
}
