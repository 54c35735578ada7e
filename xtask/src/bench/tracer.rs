//! The processes a stream measurement needs: the styx-bench workload, and
//! the tracer attached to it (styx-loader in one of its modes, or
//! bpftrace), with what each received, lost and spent.

use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use styx_common::Delivery;
use styx_testkit::{lines_of, Loader, Summary};

/// styx-bench's handshake events for bpftrace: `styx_probe::mem_write!`, a
/// probe other than the measured one. bpftrace attaches to its per-event
/// sites, so it fires per event whatever styx-loader's delivery; styx-loader
/// sessions trace `-e mem_read` only and say themselves when attached.
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

/// styx-loader's `--delivery` value for `delivery` (of the types batched
/// by default; the others always go per event).
pub fn delivery_arg(delivery: Delivery) -> &'static str {
    match delivery {
        Delivery::Batched => "batched",
        Delivery::PerEvent => "per-event",
    }
}

/// How styx-loader is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Styx {
    pub delivery: Delivery,
    /// `-o raw` (a capture) or `-o jsonl`.
    pub raw: bool,
    /// To [`capture_path`] rather than /dev/null.
    pub to_file: bool,
    pub lossless: bool,
    /// A question asked instead of streaming everything.
    pub question: Question,
    /// The stream is styx-bench's declared type ([`DECLARED_PROBE`]), not
    /// `mem_read`.
    pub declared: bool,
}

/// styx-bench's declared type, as `--probes` selects it.
pub const DECLARED_PROBE: &str = "styx_bench:bench_tick";

/// What styx-loader is asked (issue: filters, top, flight recorder).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Question {
    /// Every event streamed.
    #[default]
    None,
    /// `--filter 'tid == 0'`: every event filtered out.
    FilterAll,
    /// `top --by pc`: every event counted (256 keys: the loop's pcs).
    Top,
    /// `--flight-recorder 100000`: every event kept, the last ones dumped.
    FlightRecorder,
}

impl Question {
    /// The loader's arguments for it: before the usual ones (a
    /// subcommand), and after.
    fn args(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Question::None => (&[], &[]),
            Question::FilterAll => (&[], &["--filter", "tid == 0"]),
            Question::Top => (&["top"], &["--by", "pc"]),
            Question::FlightRecorder => (&[], &["--flight-recorder", "100000"]),
        }
    }
}

impl Styx {
    /// styx-loader's arguments for tracing process `pid` this way.
    fn args(self, pid: &str) -> Vec<std::ffi::OsString> {
        let format = if self.raw && self.question != Question::Top {
            "raw"
        } else {
            "jsonl"
        };
        let (before, after) = self.question.args();
        let output = if self.to_file || self.question == Question::FlightRecorder {
            let path = capture_path();
            let _ = std::fs::remove_file(&path);
            path
        } else {
            PathBuf::from("/dev/null")
        };
        let mut args: Vec<std::ffi::OsString> = before.iter().map(Into::into).collect();
        let events: &[&str] = match self.declared {
            true => &["-e", "usdt", "--probes", DECLARED_PROBE],
            false => &["-e", "mem_read"],
        };
        args.extend(["--pid", pid].iter().chain(events).map(Into::into));
        args.extend(
            [
                "-o",
                format,
                "--delivery",
                delivery_arg(self.delivery),
                "--quiet",
                "--output",
            ]
            .iter()
            .map(Into::into),
        );
        args.push(output.into_os_string());
        args.extend(after.iter().map(Into::into));
        if self.lossless {
            args.push("--lossless".into());
        } else if self.to_file && self.question == Question::None {
            // Waiting is the default for a file: this way measures dropping.
            args.extend(["--on-full".into(), "drop".into()]);
        }
        args
    }
}

/// bpftrace attached to process `pid`, counting or printing the measured
/// probe's events.
fn bpftrace(tracer: Tracer, pid: &str) -> Result<Child> {
    // mem_write carries the handshake (see wait_attached); its printf of
    // nothing wakes bpftrace without adding a line.
    let (measured, handshake) = if tracer == Tracer::BpftraceCount {
        ("@events = count();", "@ready = count();")
    } else {
        (
            r#"printf("%lu %lu %lu\n", arg0, arg1, arg2);"#,
            r#"printf("");"#,
        )
    };
    Command::new("bpftrace")
        .args(["-p", pid, "-e"])
        .arg(format!(
            "usdt::styx:mem_read {{ {measured} }} usdt::styx:mem_write {{ {handshake} }}"
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {tracer:?}"))
}

/// Reads a tracer's stdout to its end: the lines, and the last of its text.
fn count_lines(mut out: ChildStdout) -> (u64, String) {
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
}

/// Who traces the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracer {
    Styx(Styx),
    /// bpftrace counting the events in a map.
    BpftraceCount,
    /// bpftrace printing each event's arguments.
    BpftracePrintf,
}

/// Where file captures go: the temporary directory (on this machine's
/// disk, not a tmpfs, which [`super::disk`] reports), removed after each run.
pub fn capture_path() -> PathBuf {
    std::env::temp_dir().join("styx-bench-capture.styx")
}

/// A tracer attached to a workload.
pub struct Session {
    tracer: Tracer,
    process: Process,
    /// The tracer's stdout: (lines, the last of its text).
    stdout: JoinHandle<(u64, String)>,
}

/// The tracer's process.
enum Process {
    Styx(Loader),
    Bpftrace {
        child: Child,
        stderr: Receiver<String>,
    },
}

/// What a session got, once stopped.
pub struct Finished {
    /// Events of the measured stream fired while it was attached.
    pub fired: u64,
    /// Of them, received (styx-loader: written, from its summary).
    pub received: u64,
    /// fired − received.
    pub lost: u64,
    /// styx-loader's own count of what it lost: dropped because the ring
    /// was full, and batched events it could not copy from the process.
    pub reported_lost: u64,
    /// The capture file's size, for file captures.
    pub file_bytes: Option<u64>,
}

impl Session {
    /// Starts `tracer` on the workload and returns once it is attached.
    pub fn start(tracer: Tracer, loader: &Path, workload: &mut Workload) -> Result<Session> {
        let pid = workload.pid().to_string();
        let (process, out) = match tracer {
            Tracer::Styx(styx) => {
                let mut loader = Loader::spawn(loader, styx.args(&pid), Stdio::piped())?;
                let out = loader.child.stdout.take().expect("piped");
                (Process::Styx(loader), out)
            }
            Tracer::BpftraceCount | Tracer::BpftracePrintf => {
                let mut child = bpftrace(tracer, &pid)?;
                let out = child.stdout.take().expect("piped");
                let stderr = lines_of(child.stderr.take().expect("piped"));
                (Process::Bpftrace { child, stderr }, out)
            }
        };
        let mut session = Session {
            tracer,
            process,
            stdout: std::thread::spawn(move || count_lines(out)),
        };
        session.wait_attached(workload)?;
        Ok(session)
    }

    fn wait_attached(&mut self, workload: &mut Workload) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        match &mut self.process {
            Process::Styx(loader) => {
                // The loop starts at once, as an emulator already running
                // would go on: `--lossless` flow control must be in force
                // by then.
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
                // Margin for the measured probe, should bpftrace attach
                // its programs in another order.
                std::thread::sleep(Duration::from_millis(500));
                Ok(())
            }
        }
    }

    pub fn pid(&self) -> u32 {
        match &self.process {
            Process::Styx(loader) => loader.pid(),
            Process::Bpftrace { child, .. } => child.id(),
        }
    }

    /// CPU time the tracer has used so far, in seconds.
    pub fn cpu_seconds(&self) -> Result<f64> {
        cpu_seconds(self.pid())
    }

    /// CPU time styx-loader's threads compressing a capture
    /// (`styx-capture-N`) have used so far, in seconds (0 for bpftrace).
    pub fn compressing_cpu_seconds(&self) -> f64 {
        match &self.process {
            Process::Styx(loader) => {
                threads_ns(loader.pid(), |name| name.starts_with(COMPRESSING_THREAD))
                    .map_or(0.0, |ns| ns as f64 / 1e9)
            }
            Process::Bpftrace { .. } => 0.0,
        }
    }

    /// The tracer's (user, system) CPU time so far, in 10 ms ticks' seconds.
    pub fn cpu_split(&self) -> Result<(f64, f64)> {
        cpu_split(self.pid())
    }

    /// The tracer's CPU time once it has caught up with what was sent: when
    /// it used less than a quarter of a CPU over 20 ms (at most 5 s later).
    /// An idle styx-loader still wakes every 1 ms to look at its ring (4%
    /// of a CPU here, 9% with `--lossless`, which also grants credit then).
    pub fn cpu_seconds_when_idle(&self) -> Result<f64> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut last = self.cpu_seconds()?;
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let now = self.cpu_seconds()?;
            if now - last < 5e-3 || Instant::now() > deadline {
                return Ok(now);
            }
            last = now;
        }
    }

    /// Stops the tracer (styx-loader stops when the workload quits) and says
    /// what it received of the events the workload fired.
    pub fn finish(self, mut workload: Workload) -> Result<Finished> {
        let fired = workload.fired;
        let (status, stderr) = match self.process {
            Process::Styx(loader) => {
                workload.quit()?;
                loader.finish()
            }
            Process::Bpftrace { mut child, stderr } => {
                let status = stop_bpftrace(&mut child, || workload.run(READY, 10).map(drop))?;
                workload.quit()?;
                (status, stderr.iter().collect())
            }
        };
        let (lines, stdout) = self.stdout.join().expect("stdout reader");
        anyhow::ensure!(
            status.success(),
            "{:?} failed ({status}): {}",
            self.tracer,
            stderr.join("\n")
        );
        let (received, reported_lost) = match self.tracer {
            Tracer::Styx(_) => {
                let summary = Summary::find(&stderr)?;
                (summary.events, summary.dropped + copy_failures(&stderr))
            }
            Tracer::BpftraceCount => (number_after(&stdout, "@events: ")?, 0),
            Tracer::BpftracePrintf => (lines, 0),
        };
        if let Tracer::Styx(Styx {
            question: Question::FlightRecorder,
            ..
        }) = self.tracer
        {
            // Its one dump, at the end.
            let _ = std::fs::remove_file(capture_path().with_extension("1.styx"));
        }
        let file_bytes = match self.tracer {
            Tracer::Styx(Styx { to_file: true, .. }) => {
                let path = capture_path();
                let bytes = std::fs::metadata(&path)?.len();
                std::fs::remove_file(&path)?;
                Some(bytes)
            }
            _ => None,
        };
        Ok(Finished {
            fired,
            received,
            lost: fired.saturating_sub(received),
            reported_lost,
            file_bytes,
        })
    }
}

/// The time its eBPF programs have run in the kernel, in ns, and how many
/// times they ran, summed over the programs `pid` holds (`/proc/PID/fdinfo`
/// shows them while `kernel.bpf_stats_enabled` is 1).
pub fn bpf_run_stats(pid: u32) -> Result<(u64, u64)> {
    let mut total = (0, 0);
    for fd in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))? {
        let Ok(text) = std::fs::read_to_string(fd?.path()) else {
            continue;
        };
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
        };
        if let (Some(ns), Some(runs)) = (field("run_time_ns:"), field("run_cnt:")) {
            total.0 += ns;
            total.1 += runs;
        }
    }
    Ok(total)
}

/// Batched events styx-loader's summary says it could not copy from the
/// process: `  mem_read  N  (M lost: copy from the process failed)`.
pub fn copy_failures(stderr: &[String]) -> u64 {
    const NOTE: &str = " lost: copy from the process failed)";
    stderr
        .iter()
        .filter_map(|line| {
            let before = &line[..line.find(NOTE)?];
            before.rsplit('(').next()?.trim().parse::<u64>().ok()
        })
        .sum()
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

/// A process's CPU time (user + system, all threads), in seconds: the
/// scheduler's nanosecond count summed over its threads, or where that is
/// missing the 10 ms ticks of `/proc/PID/stat`.
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    if let Some(ns) = schedstat_ns(pid) {
        return Ok(ns as f64 / 1e9);
    }
    let (user, system) = cpu_split(pid)?;
    Ok(user + system)
}

/// A process's (user, system) CPU time in seconds, all threads, exited
/// ones included: `/proc/PID/stat`, in 10 ms ticks.
pub fn cpu_split(pid: u32) -> Result<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the parenthesized command name; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .context("malformed /proc/PID/stat")?
        .1
        .split_whitespace()
        .collect();
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let seconds = |i: usize| -> Result<f64> { Ok(fields[i].parse::<u64>()? as f64 / per_second) };
    Ok((seconds(11)?, seconds(12)?))
}

/// Nanoseconds on a CPU of every live thread of `pid` (the first field of
/// each `/proc/PID/task/TID/schedstat`). The tracers keep their threads for
/// the length of a run, so the difference of two readings is the run's.
fn schedstat_ns(pid: u32) -> Option<u64> {
    threads_ns(pid, |_| true)
}

/// What styx-loader names the threads compressing a capture, then a number.
const COMPRESSING_THREAD: &str = "styx-capture-";

/// [`schedstat_ns`] of the threads whose name `named` takes.
fn threads_ns(pid: u32, named: impl Fn(&str) -> bool) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let task = task.ok()?.path();
        let name = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if !named(name.trim_end()) {
            continue;
        }
        let text = std::fs::read_to_string(task.join("schedstat")).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// Stops bpftrace with SIGINT, `poke`ing the workload meanwhile: bpftrace
/// 0.17 with printf output notices the signal only at its next event, and
/// may miss one, so it is sent again every 2 s while bpftrace still catches
/// it; killed, and an error, if it has not stopped within 30 s.
pub fn stop_bpftrace(
    child: &mut std::process::Child,
    mut poke: impl FnMut() -> Result<()>,
) -> Result<std::process::ExitStatus> {
    let started = Instant::now();
    let mut sent = None;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            bail!("bpftrace did not stop within 30 s of SIGINT");
        }
        let due = sent.is_none_or(|at: Instant| at.elapsed() > Duration::from_secs(2));
        if due && (sent.is_none() || styx_testkit::catches_sigint(child.id())) {
            // SAFETY: signalling a child we started.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            sent = Some(Instant::now());
        }
        poke()?;
        std::thread::sleep(Duration::from_millis(50));
    }
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
    fn copy_failures_are_summed() {
        let stderr = [
            "styx-loader: 10 events from pid 7 (/x) in 1.00 s (process exited); 3 dropped",
            "  mem_read           7  (3 dropped: ring buffer full)  (12 lost: copy from the process failed)",
            "  branch             3  (5 lost: copy from the process failed)",
        ]
        .map(String::from);
        assert_eq!(copy_failures(&stderr), 17);
    }

    #[test]
    fn own_cpu_time_is_read() {
        // Spins until the count shows 50 ms of its CPU (or 10 s went by:
        // a loaded machine may give this thread little of its time). The
        // reading that ended the loop is the one judged: the count is of live
        // threads, and the harness's other tests' threads end meanwhile.
        let before = cpu_seconds(std::process::id()).unwrap();
        let started = Instant::now();
        let mut x = 0u64;
        let mut used = 0.0;
        while used < 0.05 && started.elapsed() < Duration::from_secs(10) {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            used = cpu_seconds(std::process::id()).unwrap() - before;
        }
        assert!(used >= 0.05, "{used} s of CPU counted after spinning");
    }
}
