//! Command-line options.

use crate::bpf::AttachMode;
use clap::builder::{BoolishValueParser, PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;
use styx_common::summary::JSON_SUMMARY_ENV;
use styx_common::{Delivery, EventKind};
use styx_events::{Bound, Filters};
use styx_events::{Compression, Detail, Format};
use styx_events::{DeclaredSites, Header, RegisterNames};
use styx_usdt::probe_args::{ProbeArgs, ProbeArgsError};

const EXAMPLES: &str = "\
Examples:
  sudo styx-loader --pid 1234                       every event, as text, until Ctrl-C
  sudo styx-loader --pid 1234 -o jsonl -e mem_write | jq .addr
  sudo styx-loader --pid 1234 -e branch,interrupt --duration 5 --output trace.jsonl -o jsonl
  sudo styx-loader --pid 1234 --probes 'myprov:*'     also another provider's USDT probes
  sudo styx-loader -o jsonl --output t.jsonl -- ./my-emulator rom.bin   run and trace from the start
  sudo styx-loader --user \"$SUDO_USER\" -- ./my-emulator rom.bin   the same, run as you, not root
  sudo styx-loader --binary ./my-emulator -e marker   every process running it, also later ones
  sudo styx-loader --binary target/release/my-emulator -o raw --output run.styx -- cargo run --release
                        the emulator that a command (cargo, a script) starts; build it first
  sudo styx-loader --pid 1234 -o raw --output run.styx   a capture: read it later with `styx-loader read`
  sudo styx-loader --pid 1234 --capture run.styx      text now, and a capture of the same events
  sudo styx-loader --pid 1234 -o jsonl --output t.jsonl --on-full drop
                        never slow the emulator down: drops counted, and why
  sudo styx-loader --pid 1234 -o perfetto --output run.pftrace.gz   for ui.perfetto.dev
  sudo styx-loader --pid 1234 --filter 'mem_write: addr == 0xd020'   who writes to 0xd020?
  sudo styx-loader --pid 1234 -e insn_exec --sample 1000   1 instruction in 1000
  sudo styx-loader top --pid 1234 -e insn_exec           hottest code, live (see top --help)
  sudo styx-loader --pid 1234 --flight-recorder 100000 -o raw --output crash.styx
                        the last 100,000 events a thread, written when the emulator crashes
  sudo styx-loader --pid 1234 --functions '^my_emu::mmu::' -e span_begin,span_end
                        the emulator's own MMU functions: calls, depths, durations
  sudo styx-loader --functions 'my_emu::' -o folded --output out.folded -- ./my-emulator rom.bin
                        folded stacks for a flame graph (inferno, flamegraph.pl)
  styx-loader list ./my-emulator                    what probes a binary has";

/// After the list of event types in the trace command's help.
const NOTES: &str = "\
Unselected probes stay detached and cost the emulator nothing.

On a terminal, a live line on stderr shows events/s, total, drops and the
busiest types (--quiet: none). A summary (events per type, drops) goes to
stderr at the end. Events the kernel could not queue because the ring
buffer was full are counted as drops, never lost silently, and the
summary says why they were lost and what helps: for an output slower than
the emulator, `--on-full wait` or `-o raw --output FILE` then `read`, or
fewer events (-e, --filter); for a burst, a larger --ring-size. Writing to
a file, batched events wait for room by default (--on-full).";

/// Trace a CPU emulator's styx USDT probes with eBPF.
///
/// Finds the styx probes in the process's executable and the libraries it
/// has mapped (and, while tracing, the ones it maps later: dlopen),
/// attaches eBPF programs to them (raising their semaphores, so the
/// emulator starts evaluating probe arguments), and writes every event
/// until Ctrl-C, SIGTERM, --duration, or the process exits. Needs root.
#[derive(Debug, Parser)]
#[command(
    name = "styx-loader",
    version,
    after_help = trace_help(),
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub trace: TraceArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the USDT probes of an ELF file, or of a process's executable and
    /// mapped libraries: providers, probes, sites, argument specs, semaphores.
    #[command(after_help = LIST_EXAMPLES)]
    List(ListArgs),
    /// Convert a raw capture (`-o raw --output FILE`) to any output format
    /// (text, JSON lines, Chrome, Perfetto, Parquet, drcov, Tenet, folded
    /// stacks), whole or a part of it (a time window, types, filters), or
    /// count it by key (`--by`). A capture that was cut short is read up to
    /// its last whole record, with a warning saying what was lost.
    #[command(after_help = READ_EXAMPLES)]
    Read(ReadArgs),
    /// Count events per key while tracing, like top: which code is hot
    /// (`--by pc -e insn_exec`), who touches which address (`--by addr`),
    /// which pages (`--by page`, `--heatmap FILE` draws them). With
    /// per-event delivery the kernel counts (no event is streamed); batched
    /// events are counted by the loader. Counts are exact (unless
    /// --sample); keys beyond --max-keys are counted in an "(other)" row
    /// per type; batched events of one process wait for room in the ring
    /// by default (--on-full wait: the emulator waits rather than a batch
    /// be lost, so it may run at the loader's pace while counted). On a terminal the table is redrawn every --interval; at
    /// the end (Ctrl-C, --duration, the process exits) the final table
    /// goes to stdout or --output, as text or jsonl (-o).
    #[command(
        after_help = TOP_EXAMPLES,
        // A capture is a target too (top's own positional).
        mut_arg("pid", |pid| pid.required_unless_present_any(["command", "binary", "read"]))
    )]
    Top(Box<TopArgs>),
}

const TOP_EXAMPLES: &str = "\
Examples:
  sudo styx-loader top --pid 1234 -e insn_exec              hottest instructions (by pc)
  sudo styx-loader top --pid 1234 --by addr -e mem_write     most written addresses
  sudo styx-loader top --pid 1234 --by page --page-size 256 --heatmap mem.svg
  sudo styx-loader top --by target -e branch --filter 'kind == call' -d 5 -o jsonl -- ./emu rom.bin
  styx-loader top run.styx --by addr -e mem_write --rows 10   the table from a capture
                                            (as `read run.styx --by addr`)";

#[derive(Debug, Args)]
pub struct TopArgs {
    /// Count a raw capture's events instead of tracing (as `read CAPTURE
    /// --by KEY`, KEY pc unless --by says): -e, --filter, --sample,
    /// --rows, -o, --output and --heatmap apply.
    #[arg(value_name = "CAPTURE", conflicts_with_all = ["pid", "binary", "command"])]
    pub read: Option<PathBuf>,

    #[command(flatten)]
    pub top: TopOptions,

    #[command(flatten)]
    pub trace: TraceArgs,
}

/// `top`'s own options.
#[derive(Debug, Args)]
pub struct TopOptions {
    #[command(flatten)]
    pub count: CountArgs,

    /// Redraw the table this often on a terminal (seconds).
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_seconds)]
    pub interval: Duration,

    /// Rows of the text table (the largest counts); jsonl gives every row.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub rows: usize,
}

/// What `top` and `read --by` count per.
#[derive(Debug, Args)]
pub struct CountArgs {
    /// Count per this key: a numeric field (pc, addr, val, size, target,
    /// reg, num, code, insn, kind, tid, …: each type that has it is
    /// counted), `page` (the page of addr, see --page-size) or `event`
    /// (per type). top: pc when not given, and without -e it traces just
    /// the types it counts.
    #[arg(long, value_name = "KEY")]
    pub by: Option<String>,

    /// Bytes per page for `--by page` and --heatmap (a power of two).
    #[arg(long, value_name = "BYTES", default_value_t = 4096)]
    pub page_size: u64,

    /// Also draw reads and writes per page of guest memory as an SVG picture.
    #[arg(long, value_name = "FILE")]
    pub heatmap: Option<PathBuf>,

    /// Keys kept at most (per table); events of keys beyond are counted in
    /// their type's "(other)" row.
    #[arg(long, value_name = "N", default_value_t = 65536)]
    pub max_keys: u32,
}

const READ_EXAMPLES: &str = "\
Examples:
  sudo styx-loader --pid 1234 -o raw --output run.styx      capture now
  styx-loader read run.styx | less                           read later, as text
  styx-loader read run.styx -o jsonl | jq 'select(.event == \"branch\")'
  styx-loader read run.styx -o perfetto --output run.pftrace   open in ui.perfetto.dev
  styx-loader read run.styx --by addr --filter 'mem_write: addr in 0xd000..0xe000'
  styx-loader read run.styx --by page --page-size 256 --heatmap mem.svg
  styx-loader read run.styx --by pc -e insn_exec --rows 10     the 10 hottest pcs
Cutting a big capture (for the Perfetto UI, say):
  styx-loader read run.styx --from 2 --to 2.5 -o perfetto --output cut.pftrace
                                        0.5 s, from 2 s after its first event
  styx-loader read run.styx --from 1640317430816ns --to 1640327430816ns   by ts_ns
  styx-loader read run.styx -e insn_exec,mmio_write          those types only
  styx-loader read run.styx -e 'styx_declared:*'             a provider's probes
  styx-loader read run.styx --filter 'ts_ns >= 1640317430816 && event == mem_write'";

#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The capture to read (`-` for stdin).
    pub file: PathBuf,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub select: SelectArgs,

    /// Only the events of these types, comma-separated: styx's (as
    /// tracing's -e), `usdt` (every other provider's probe and declared
    /// type), a declared type or other provider's probe by name
    /// (`mmio_write`) or PROVIDER:PROBE glob ('styx_declared:*'), and
    /// fn_entry, fn_exit.
    #[arg(short, long = "events", value_name = "TYPES", value_delimiter = ',')]
    pub events: Vec<String>,

    /// Only events from this time on: seconds after the capture's first
    /// event (2.5; to 9 decimals, a ns), or an absolute ts_ns with an `ns`
    /// suffix (1640317430816ns), as jsonl's ts_ns shows it.
    #[arg(long, value_name = "T", value_parser = parse_bound)]
    pub from: Option<Bound>,

    /// Only events before this time (the same two ways as --from; the
    /// --to of one window is the --from of the next, no event in both).
    #[arg(long, value_name = "T", value_parser = parse_bound)]
    pub to: Option<Bound>,

    /// With --by: only the N largest counts (text and jsonl; the rest as a
    /// count of keys, and each type's "other" row).
    #[arg(long, value_name = "N", requires = "by")]
    pub rows: Option<usize>,

    /// For a capture of traced functions (--functions): print only the
    /// per-function table (calls, total and self time, longest call).
    #[arg(long)]
    pub summary: bool,

    /// Instead of the events, their counts per --by KEY (as `top` prints
    /// them; see `top --help`), as text or jsonl (-o); --heatmap alone
    /// draws the picture beside the events.
    #[command(flatten)]
    pub count: CountArgs,

    /// Threads decoding and formatting the capture (default: one per
    /// core). A capture of blocks (written since version 3) with -o jsonl,
    /// text or parquet and no --filter, --sample, --by or traced functions
    /// is read in parallel (-e, --from and --to cut on the workers), its
    /// output byte for byte the one thread's (Parquet: each worker gathers
    /// and encodes whole row groups, or with a cut the blocks' rows, the
    /// groups then encoded by whichever thread is free; on a thread of
    /// their own when not read in parallel); anything else on one thread.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub threads: Option<u64>,
}

const LIST_EXAMPLES: &str = "\
Examples:
  styx-loader list ./my-emulator
  styx-loader list ./my-emulator 'styx:mem_*'
  sudo styx-loader list --pid 1234 '*:*'
  styx-loader list --functions 'styx_demo::cpu::' ./styx-demo
  sudo styx-loader list --pid 1234 --functions '^mmu_' --functions-exclude '_slow$'";

#[derive(Debug, Args)]
pub struct ListArgs {
    /// List the probes of this process's executable and mapped libraries.
    #[arg(short, long)]
    pub pid: Option<u32>,

    /// The ELF file (unless --pid is given), then an optional
    /// PROVIDER:PROBE glob such as 'styx:mem_*' (default: every probe).
    #[arg(value_name = "PATH] [PATTERN")]
    pub args: Vec<String>,

    /// Instead of probes, list the functions `--functions` would trace:
    /// each with its address, size and return sites.
    #[command(flatten)]
    pub functions: FunctionArgs,
}

/// Which functions of the target to trace (or list).
#[derive(Debug, Args)]
pub struct FunctionArgs {
    /// Functions whose demangled names (Rust v0 and legacy, C++) match
    /// REGEX (repeatable; unanchored, as grep): traced (with `list`:
    /// listed), in the executable and its mapped libraries (a command
    /// after --: its executable and linked libraries; tracing, also the
    /// libraries mapped later, once mapped). Tracing gives an
    /// `fn_entry` event at each call and an `fn_exit` at each return, with
    /// the call's depth on its thread and, on exit, its duration. No
    /// rebuild: uprobes on each function's first instruction and on each
    /// of its `ret`s and tail-call `jmp`s (see --function-exits). A call
    /// left by unwinding (exception, panic, longjmp) gets an exit marked
    /// `unwound` once a later call or return further out shows it gone; one
    /// left by a tail call, an exit marked `tail_call` at its jump.
    /// Functions inlined everywhere have no symbol and cannot be traced
    /// (`list --functions` shows what matches); nor can one whose probe
    /// sites lie inside another function symbol's instructions. At the end
    /// a table per function (calls, total, self, max, unwound, tail) goes
    /// to stderr.
    #[arg(long = "functions", value_name = "REGEX")]
    pub functions: Vec<String>,

    /// Leave out functions whose names match REGEX (repeatable).
    #[arg(
        long = "functions-exclude",
        value_name = "REGEX",
        requires = "functions"
    )]
    pub functions_exclude: Vec<String>,

    /// Take more than 5,000 matching functions.
    #[arg(long, requires = "functions")]
    pub force: bool,
}

/// Where events go and how they read: tracing's and `read`'s.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(short = 'o', long = "format", value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Write events to this file instead of stdout.
    #[arg(long = "output", value_name = "FILE")]
    pub path: Option<PathBuf>,

    /// How much a text line says: brief (no pid/tid), normal, or full
    /// (also the wall-clock time).
    #[arg(long, value_enum, default_value_t = Detail::Normal)]
    pub detail: Detail,

    /// With -o parquet --output DIR/: start a new file in DIR once one
    /// holds this many MiB.
    #[arg(long, value_name = "MIB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub roll_size: u64,

    /// With -o raw or --capture: how the capture's blocks are stored.
    /// Worker threads that run only on CPU time the emulator and the
    /// loader leave compress them: auto with zstd while they keep up and
    /// with lz4 (~1.3× faster, ~2× the bytes) for a block taken while
    /// another waits; zstd or lz4 every block one way. A block handed over
    /// while two others wait for the workers is stored as encoded: with
    /// --on-full drop always, never holding the loader back; when the
    /// emulator waits for the loader (--on-full wait, the default into a
    /// file) by auto only while the capture stays within 3 bytes an event,
    /// the rest compressed, the emulator then at the workers' pace (on two
    /// cores the demo ran at ~90–100% of its speed traced to /dev/null,
    /// 3 bytes an event; 1.3 compressing every block, at ~85–92%). none
    /// stores every block as encoded (~7 bytes an event from the demo,
    /// ~20 from u64 values): no CPU spent compressing, the disk then the
    /// only limit. All read alike, in parallel.
    #[arg(long, value_enum, default_value_t = Compression::Auto)]
    pub compression: Compression,
}

/// Which events are kept: tracing's and `read`'s.
#[derive(Debug, Args)]
pub struct SelectArgs {
    /// Keep only events for which EXPR holds (repeatable: all must hold).
    /// EXPR compares an event's fields: `addr == 0xd020`, `pc in
    /// 0x8000..0x9000` (end excluded; `..=` includes it), `val & 0x80 !=
    /// 0`, `size >= 2`, `kind == call`, `reg == sp` (register names where
    /// the emulator describes its guest), `text contains "reset"`, with
    /// `&&`, `||`, `!` and parentheses. `TYPE[,TYPE]: EXPR` applies it to
    /// those types only; without, to every traced type that has its
    /// fields (`tid`, `pid`, `event` and `ts_ns` every type has: `event ==
    /// mem_write`, `ts_ns >= 1640317430816`, the time as jsonl shows it).
    /// Tracing with per-event delivery, the kernel filters (a filtered-out
    /// event writes nothing to the ring; `ts_ns` tests are the loader's);
    /// batched events, text tests and `read` are filtered by the loader.
    /// The summary counts what was filtered out.
    #[arg(long = "filter", value_name = "EXPR")]
    pub filters: Vec<String>,

    /// Keep 1 event in N of each type, per thread, after the filters: the
    /// 1st, (N+1)th, … (a rerun of the same program keeps the same events).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub sample: Option<u64>,
}

/// Options for tracing (the default command).
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Process to trace (all its threads).
    #[arg(
        short,
        long,
        required_unless_present_any = ["command", "binary"],
        conflicts_with_all = ["command", "binary"]
    )]
    pub pid: Option<u32>,

    /// Trace every process that runs this binary (or maps this library),
    /// including processes started later, until Ctrl-C or --duration, or
    /// until the command after `--` exits: `--binary target/release/emu --
    /// cargo run --release` traces the emulator that `cargo run`, a script
    /// or a test runner starts, from its first instruction. The file must
    /// be the one that runs: a file rebuilt after the loader attached (as
    /// `cargo run` rebuilds) is a new one, not traced; build it first.
    #[arg(short, long, value_name = "PATH")]
    pub binary: Option<PathBuf>,

    /// Run this command and trace it from its first instruction; styx-loader
    /// then exits with the command's status. Give it after `--`. The
    /// command's own program is traced (a script's is its interpreter);
    /// with --binary, the processes it starts that run that binary.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,

    /// Run the command after `--` as USER (a name or a numeric uid) instead
    /// of root, as `strace -u` does: with USER's uid, primary group and
    /// supplementary groups, and HOME, USER and LOGNAME from USER's entry
    /// in the user database (the rest of the environment, PATH too, is
    /// passed on). It runs in a session of its own, without a controlling
    /// terminal, so it cannot type into yours (TIOCSTI); it still reads and
    /// writes the loader's stdin and stdout, and Ctrl-C (which the
    /// terminal sends to the loader alone then) is passed on to it.
    /// Without --user the command runs as root, also under sudo (whoever
    /// may run the loader with sudo may run the command so, and an
    /// emulator needing root would otherwise fail only under the tracer);
    /// to run it as yourself, give `--user "$SUDO_USER"`.
    #[arg(short = 'u', long, value_name = "USER")]
    pub user: Option<String>,

    #[command(flatten)]
    pub output: OutputArgs,

    /// Event types to trace, comma-separated (default: all).
    #[arg(short, long = "events", value_delimiter = ',', value_parser = parse_event_kind)]
    pub events: Vec<EventKind>,

    /// Also trace other providers' USDT probes matching this
    /// PROVIDER:PROBE glob (repeatable), e.g. 'myprov:*'. Their arguments
    /// are read as each site's argument spec says.
    #[arg(long = "probes", value_name = "GLOB", value_parser = parse_glob)]
    pub probes: Vec<glob::Pattern>,

    /// What the arguments of --probes' probes matching PROVIDER:PROBE are,
    /// where their notes cannot say (repeatable; the first that matches a
    /// probe is its): each TYPE or NAME:TYPE, TYPE `int` (as the note says),
    /// u8…u64, i8…i64, `str` (the address of a NUL-terminated string, read
    /// up to 256 bytes) or `json` (a string holding JSON, shown as JSON),
    /// e.g. 'app:request=id:u64,path:str,body:json'. Named arguments are
    /// fields of their own in every format. Without it, the probes of
    /// CPython (`python:function__entry`: filename, funcname, lineno…) and
    /// PostgreSQL's with a query or status string are read as their
    /// projects document them.
    #[arg(long = "probe-args", value_name = "PROVIDER:PROBE=ARGS", value_parser = parse_probe_args)]
    pub probe_args: Vec<ProbeArgs>,

    /// Also attach probe sites that no function symbol covers (in a
    /// stripped binary or library). A uprobe inside an instruction would
    /// corrupt the program, so styx decodes the function around each site
    /// from its symbol's start and checks that the site starts an
    /// instruction; without a symbol only the site's `nop` can be checked,
    /// and such sites are left out, with one warning per file.
    #[arg(long)]
    pub allow_unverified_sites: bool,

    #[command(flatten)]
    pub select: SelectArgs,

    /// Flight recorder: keep only the last N events of each thread (in
    /// the loader's memory: nothing is written meanwhile) and write them
    /// out, in time order, in the -o format: when the loader gets SIGUSR1
    /// (`kill -USR1 $(pidof styx-loader)`), when the traced process dies of
    /// a signal it does not handle (SIGSEGV, SIGABRT…: the kernel reports
    /// it, with the events its threads had not handed over yet), on
    /// --trigger, and when tracing stops. Each dump is complete on its own:
    /// with --output FILE, dump n goes to FILE with `.n` before its
    /// extension (run.1.styx, run.2.styx…); without, one after the other
    /// on stdout. Memory: the last N events of every thread (batched
    /// events as their batches, ~33 bytes each; per-event ones ~100
    /// bytes), within --flight-memory.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub flight_recorder: Option<u64>,

    /// With --flight-recorder: the most memory the threads' events take
    /// (K, M, G suffixes; at least 1M). Past it the oldest events of any
    /// thread are forgotten first (threads that made none since go
    /// whole), counted in the summary; a dump then holds fewer than N
    /// events of the threads quiet the longest. A thread that exited is
    /// also forgotten about 10 s after its last event.
    #[arg(long, value_name = "BYTES", default_value = "256M", value_parser = parse_flight_memory, requires = "flight_recorder")]
    pub flight_memory: u64,

    /// With --flight-recorder: dump when an event matches EXPR (the
    /// --filter syntax, e.g. 'control: code == 7' or
    /// 'marker: text contains "panic"'): that event and those before it.
    /// A trigger within --trigger-holdoff of the last dump a trigger made,
    /// or after --max-dumps of them, is counted and not dumped.
    #[arg(long, value_name = "EXPR", requires = "flight_recorder")]
    pub trigger: Option<String>,

    /// With --trigger: at most N dumps caused by triggers (SIGUSR1, the
    /// target's death and the stop still dump): a target that matches
    /// the trigger at will cannot fill the disk.
    #[arg(long, value_name = "N", default_value_t = 100, requires = "trigger")]
    pub max_dumps: u32,

    /// With --trigger: after a trigger's dump, triggers within this many
    /// seconds of it (by the events' times) do not dump.
    #[arg(long, value_name = "SECS", default_value = "1", value_parser = parse_seconds, requires = "trigger")]
    pub trigger_holdoff: Duration,

    /// Also keep a raw capture of the same events in FILE, whatever -o
    /// shows: watch text now, convert the capture later with
    /// `styx-loader read FILE`.
    #[arg(long, value_name = "FILE")]
    pub capture: Option<PathBuf>,

    /// Stop after this many seconds (fractions allowed).
    #[arg(short, long, value_name = "SECS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,

    /// Ring buffer size in bytes: a power of two, at least 4096; K and M
    /// suffixes accepted. The default 64 MiB (locked kernel memory) holds
    /// ~20 ms of a batched emulator at 100 M events/s: room for the loader
    /// to be descheduled without losing any. Batched delivery needs at
    /// least 256K (a few of its 64 KiB batches).
    #[arg(long, value_name = "BYTES", default_value = "64M", value_parser = parse_ring_size)]
    pub ring_size: u32,

    /// How styx's frequent event types (instructions, blocks, memory and
    /// register accesses, branches) and interrupts reach the loader. `batched`: each
    /// emulator thread appends them to its own 64 KiB buffer and hands it
    /// over with one probe hit (~10 ns an event instead of ~600 ns; times
    /// exact every ~32 events and interpolated between; needs the target
    /// built with this styx-probe, else per-event with a warning).
    /// `per-event`: one probe hit (a kernel trap) per event, each with the
    /// kernel's own time. Control events, spans and markers are always
    /// one hit each (they reach the loader at once, the thread's pending
    /// batch handed over first). bpftrace sees every event either way.
    #[arg(long, default_value = "batched", value_parser = parse_delivery())]
    pub delivery: Delivery,

    /// What batched events do when the loader falls behind (the output
    /// is slower than the emulator, or a burst outruns the ring buffer).
    /// `wait`: an emulator thread about to hand over a batch waits (20 µs,
    /// doubling up to 1 ms) while the loader is more than half a ring
    /// behind, so no batch is lost; it costs nothing while the loader
    /// keeps up (a compare per batch), and the emulator runs at the
    /// output's pace when it does not (the summary then says for how
    /// long, at most, what set the pace and what helps). If the loader
    /// dies, waiting threads go on at their next look. Needs one process
    /// (--pid or a command).
    /// `drop`: the emulator never waits; batches the ring has no room for
    /// are dropped, counted and reported. Default: `wait` when every
    /// output is a file on disk (--output FILE or DIR/, and --capture if
    /// given) of one process, and for `top`; `drop` when events also go to
    /// a terminal, a pipe or a device (a reader such as `less` could hold
    /// the emulator indefinitely), for --binary and --flight-recorder. Events of the per-event types
    /// (control, spans, markers) never wait: a full ring drops
    /// them, counted and reported.
    #[arg(long, value_enum, value_name = "WHAT")]
    pub on_full: Option<OnFull>,

    /// The same as `--on-full wait`.
    #[arg(long, conflicts_with = "on_full")]
    pub lossless: bool,

    /// How to attach: `multi` links every site of a file at once and lets go
    /// at once (Linux 6.6+); `per-site` uses one link per site as bpftrace
    /// does, and detaching then takes the kernel ~0.1 s per site (at most
    /// 4,096 sites). If the loader is killed (SIGKILL), the kernel still
    /// releases per-site links one by one, ~0.1 s each, the semaphores
    /// staying raised meanwhile; multi links go at once.
    #[arg(long, value_enum, default_value_t = AttachMode::Multi)]
    pub attach: AttachMode,

    /// Forward the eBPF programs' own log messages (aya-log) to stderr.
    #[arg(long)]
    pub ebpf_log: bool,

    #[command(flatten)]
    pub functions: FunctionArgs,

    /// With --functions: print only the per-function table (calls, total
    /// and self time, longest call), to stdout or --output, and no events.
    #[arg(long, requires = "functions")]
    pub summary: bool,

    /// With --functions, how returns are probed. `ret`: a uprobe on each
    /// `ret` instruction of the function; safe whatever the code does,
    /// but the kernel single-steps a `ret` (two traps a return).
    /// `uretprobe`: the kernel swaps the return address on the stack for
    /// its trampoline (one trap a return, ~40% less per call here; Linux
    /// 6.6+, `--attach multi`), and a C++ exception or a Rust panic
    /// unwinding through a traced call then aborts the program: only for
    /// functions nothing unwinds through. A call that tail-calls another
    /// ends when its callee returns (with `ret`: at its jump).
    #[arg(long, value_enum, default_value_t = FunctionExitsArg::Ret, requires = "functions")]
    pub function_exits: FunctionExitsArg,

    /// No live line on stderr (events/s, total, drops, busiest types; shown
    /// only when stderr is a terminal). The end-of-run summary stays.
    #[arg(short, long)]
    pub quiet: bool,

    /// Also print the end-of-run summary as one line of JSON on stderr,
    /// after the text, for scripts: `styx-loader: summary: ` then
    /// {"events", "target", "seconds", "stop" (interrupted, terminated,
    /// target_exited, duration_reached, output_closed, output_failed),
    /// "dropped", "types": [{"name", "events", "dropped", "lost" (copy from
    /// the process failed), "filtered"}]}.
    #[arg(long, env = JSON_SUMMARY_ENV, value_parser = BoolishValueParser::new())]
    pub json_summary: bool,
}

/// What batched events do when the ring buffer is full (see --on-full).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnFull {
    /// Dropped, counted and reported; the emulator never waits.
    Drop,
    /// The emulator thread waits for room: no batch is lost.
    Wait,
}

/// How traced functions' returns are probed (see --function-exits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FunctionExitsArg {
    /// A uprobe on each `ret` instruction.
    Ret,
    /// A uretprobe on the function's entry.
    Uretprobe,
}

/// `--delivery`'s values, as styx-common's [`Delivery`].
fn parse_delivery() -> impl TypedValueParser<Value = Delivery> {
    PossibleValuesParser::new([
        PossibleValue::new("batched").help(format!(
            "In batches: one probe hit per {} KiB of events",
            styx_common::batch::BATCH_BYTES >> 10
        )),
        PossibleValue::new("per-event").help("One probe hit per event"),
    ])
    .map(|value| match value.as_str() {
        "batched" => Delivery::Batched,
        _ => Delivery::PerEvent,
    })
}

/// The event types `-e` takes: the catalogue's (other providers' probes
/// are `--probes`).
pub fn styx_kinds() -> impl Iterator<Item = EventKind> {
    EventKind::ALL
        .iter()
        .copied()
        .filter(|&k| k != EventKind::Usdt)
}

/// The trace command's examples, the event types from the catalogue (in
/// lines of at most 80 columns), and notes.
fn trace_help() -> String {
    let mut list = String::from("Events (-e):");
    let mut line_starts = 0;
    for name in styx_kinds().map(EventKind::probe_name) {
        if list.len() - line_starts + 1 + name.len() > 80 {
            line_starts = list.len() + 1;
            list.push_str(&format!("\n{:12}", ""));
        }
        list.push(' ');
        list.push_str(name);
    }
    format!("{EXAMPLES}\n\n{list}\n{NOTES}")
}

impl CountArgs {
    /// `--by`, top's default (`pc`) when not given.
    #[cfg_attr(not(feature = "trace"), allow(dead_code))]
    pub fn key(&self) -> &str {
        self.by.as_deref().unwrap_or("pc")
    }
}

impl TraceArgs {
    /// `--on-full` as given, `--lossless` being `--on-full wait`; None
    /// for the default.
    #[cfg_attr(not(feature = "trace"), allow(dead_code))]
    pub fn on_full(&self) -> Option<OnFull> {
        match self.lossless {
            true => Some(OnFull::Wait),
            false => self.on_full,
        }
    }

    /// `--filter` and `--sample` compiled for the selected types; an error
    /// names the expression and points at the offending token.
    #[cfg_attr(not(feature = "trace"), allow(dead_code))]
    pub fn compile_filters(&self, header: &Header) -> anyhow::Result<Option<Filters>> {
        compile_filters(
            &self.select.filters,
            self.select.sample,
            &self.kinds(),
            header,
        )
    }

    /// The selected event kinds, all of them when none were named; with
    /// `-o drcov`, markers too: a QEMU guest's description, which names
    /// drcov's module, is one (`styx_common::guest_marker`), and markers
    /// are rare.
    #[cfg_attr(not(feature = "trace"), allow(dead_code))]
    pub fn kinds(&self) -> Vec<EventKind> {
        if self.events.is_empty() {
            return EventKind::ALL.to_vec();
        }
        let mut kinds = self.events.clone();
        if self.output.format == Format::Drcov && !kinds.contains(&EventKind::Marker) {
            kinds.push(EventKind::Marker);
        }
        kinds
    }
}

/// `--filter` expressions and `--sample` for `kinds` and the event types
/// the emulator declared, in the session `header` describes (register
/// names from its guest); None when neither was given.
pub fn compile_filters(
    filters: &[String],
    sample: Option<u64>,
    kinds: &[EventKind],
    header: &Header,
) -> anyhow::Result<Option<Filters>> {
    if filters.is_empty() && sample.is_none() {
        return Ok(None);
    }
    let registers = RegisterNames::new(header.guest.as_ref());
    let declared = DeclaredSites::of(header);
    match Filters::compile_named(filters, sample.unwrap_or(1), kinds, registers, &declared) {
        Ok(filters) => Ok(Some(filters)),
        Err((expr, e)) => anyhow::bail!("--filter '{expr}': {e}"),
    }
}

fn parse_event_kind(name: &str) -> Result<EventKind, String> {
    EventKind::from_probe_name(name.trim()).ok_or_else(|| {
        let known: Vec<&str> = EventKind::ALL.iter().map(|k| k.probe_name()).collect();
        format!("unknown event type '{name}' (known: {})", known.join(", "))
    })
}

fn parse_probe_args(text: &str) -> Result<ProbeArgs, String> {
    let declared: ProbeArgs = text.parse().map_err(|e: ProbeArgsError| e.to_string())?;
    for arg in &declared.args {
        let Some(name) = arg.name.as_deref() else {
            continue;
        };
        let string = arg.ty.is_some_and(|ty| ty.is_string());
        if let Some(why) = styx_events::usdt_name_taken(name, string) {
            return Err(format!(
                "--probe-args {text:?}: argument name {name:?} {why}"
            ));
        }
    }
    Ok(declared)
}

/// `--from`/`--to`: seconds after the capture's first event (read as a
/// decimal, to the ns: no float rounding), or `NNNns`, an absolute ts_ns.
fn parse_bound(text: &str) -> Result<Bound, String> {
    if let Some(digits) = text.strip_suffix("ns") {
        return digits.parse().map(Bound::At).map_err(|_| {
            format!("'{text}': a ts_ns is a whole number of ns before 'ns' (1640317430816ns)")
        });
    }
    let not_seconds = || {
        format!(
            "'{text}' is neither seconds after the first event (2.5, to 9 decimals) \
             nor a ts_ns (1640317430816ns)"
        )
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return Err(not_seconds());
    }
    if fraction.len() > 9 {
        return Err(format!("'{text}': seconds to 9 decimals at most (1 ns)"));
    }
    let whole: u64 = match whole {
        "" => 0,
        w => w.parse().map_err(|_| not_seconds())?,
    };
    let fraction: u64 = format!("{fraction:0<9}")
        .parse()
        .map_err(|_| not_seconds())?;
    whole
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(fraction))
        .map(Bound::AfterFirst)
        .ok_or_else(|| format!("'{text}' is too many seconds"))
}

fn parse_glob(text: &str) -> Result<glob::Pattern, String> {
    glob::Pattern::new(text).map_err(|e| format!("'{text}' is not a glob pattern: {e}"))
}

fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("'{text}' is not a usable duration"))
}

/// Bytes, with an optional K, M or G suffix (powers of 1024).
fn parse_bytes(text: &str) -> Result<u64, String> {
    let (digits, scale) = match text.as_bytes().last() {
        Some(b'K' | b'k') => (&text[..text.len() - 1], 1u64 << 10),
        Some(b'M' | b'm') => (&text[..text.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("'{text}' is not a size"))
}

fn parse_flight_memory(text: &str) -> Result<u64, String> {
    let bytes = parse_bytes(text)?;
    if bytes < 1 << 20 {
        return Err(format!(
            "the flight recorder needs at least 1M (a batch takes {}K), not {bytes} bytes",
            styx_common::batch::BATCH_BYTES >> 10
        ));
    }
    Ok(bytes)
}

fn parse_ring_size(text: &str) -> Result<u32, String> {
    let bytes = parse_bytes(text)?;
    if bytes < 4096 || !bytes.is_power_of_two() || bytes > 1 << 30 {
        return Err(format!(
            "ring size must be a power of two from 4K to 1024M, not {bytes} bytes"
        ));
    }
    Ok(bytes as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_probe_arguments_pass_what_probe_args_must() {
        for declared in styx_usdt::probe_args::well_known_list() {
            let args: Vec<String> = (declared.args.iter())
                .map(|a| {
                    let ty = a.ty.map_or("int", |ty| ty.name());
                    format!("{}:{ty}", a.name.as_deref().expect("named"))
                })
                .collect();
            let text = format!("{}={}", declared.pattern, args.join(","));
            assert!(parse_probe_args(&text).is_ok(), "{text}");
        }
    }

    #[test]
    fn help_states_the_batch_size_the_least_ring_and_the_stored_budget() {
        // Clap's help is written by hand: it must state what the code does.
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        let kib = styx_common::batch::BATCH_BYTES >> 10;
        let least = styx_common::batch::MIN_BATCHED_RING_BYTES >> 10;
        assert!(help.contains(&format!("own {kib} KiB buffer")), "{help}");
        assert!(
            help.contains(&format!("needs at least {least}K (a few of its {kib} KiB")),
            "{help}"
        );
        assert!(
            help.contains(&format!("one probe hit per {kib} KiB")),
            "{help}"
        );
        let budget = styx_common::capture::STORED_BUDGET;
        assert!(
            help.contains(&format!("within {budget} bytes an event")),
            "{help}"
        );
    }

    #[test]
    fn ring_sizes() {
        assert_eq!(parse_ring_size("16M"), Ok(16 << 20));
        assert_eq!(parse_ring_size("4096"), Ok(4096));
        assert!(parse_ring_size("3000").is_err());
        assert!(parse_ring_size("big").is_err());
        assert_eq!(parse_flight_memory("2G"), Ok(2 << 30));
        assert!(parse_flight_memory("64K").is_err());
    }

    #[test]
    fn the_options_hang_together_and_help_lists_every_event_type() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let help = trace_help();
        let list = &help[help.find("Events (-e):").expect("listed")..];
        for kind in styx_kinds() {
            assert!(
                list.contains(&format!(" {} ", kind.probe_name()))
                    || list.contains(&format!(" {}\n", kind.probe_name())),
                "{kind:?} in {list}"
            );
        }
        assert!(list.lines().all(|l| l.len() <= 80), "{list}");
        assert!(!list.contains(" usdt"), "{list}");
    }

    #[test]
    fn read_bounds_are_seconds_after_the_first_event_or_ts_ns() {
        assert_eq!(parse_bound("2.5"), Ok(Bound::AfterFirst(2_500_000_000)));
        assert_eq!(parse_bound("0"), Ok(Bound::AfterFirst(0)));
        assert_eq!(parse_bound("123ns"), Ok(Bound::At(123)));
        assert_eq!(parse_bound("0.000123457"), Ok(Bound::AfterFirst(123_457)));
        assert_eq!(parse_bound(".5"), Ok(Bound::AfterFirst(500_000_000)));
        assert!(parse_bound("0.0000000001").is_err());
        assert!(parse_bound(".").is_err());
        assert!(parse_bound("-1").is_err());
        assert!(parse_bound("1.5ns").is_err());
        assert!(parse_bound("soon").unwrap_err().contains("1640317430816ns"));
    }

    #[test]
    fn top_takes_a_capture_or_a_target() {
        let top = |args: &[&str]| {
            let line = ["styx-loader", "top"].iter().chain(args).copied();
            match Cli::try_parse_from(line).map(|cli| cli.command) {
                Ok(Some(Command::Top(top))) => Ok(top.read),
                Ok(_) => panic!("not top"),
                Err(e) => Err(e.kind()),
            }
        };
        assert_eq!(
            top(&["run.styx", "--by", "addr"]),
            Ok(Some("run.styx".into()))
        );
        assert_eq!(top(&["--pid", "1"]), Ok(None));
        assert!(top(&[]).is_err());
        assert!(top(&["run.styx", "--pid", "1"]).is_err());
    }

    #[test]
    fn delivery_reads_as_the_catalogues() {
        let cli = Cli::try_parse_from(["styx-loader", "--pid", "1"]).unwrap();
        assert_eq!(cli.trace.delivery, Delivery::Batched);
        let cli = Cli::try_parse_from(["styx-loader", "--pid", "1", "--delivery", "per-event"]);
        assert_eq!(cli.unwrap().trace.delivery, Delivery::PerEvent);
    }

    #[test]
    fn json_summary_from_the_flag() {
        let cli = Cli::try_parse_from(["styx-loader", "--pid", "1", "--json-summary"]).unwrap();
        assert!(cli.trace.json_summary);
    }

    #[test]
    fn unknown_event_names_list_the_known_ones() {
        let err = parse_event_kind("mem_reed").unwrap_err();
        assert!(err.contains("mem_read"), "{err}");
    }
}
