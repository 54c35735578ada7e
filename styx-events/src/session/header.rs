//! A session's header: what a reader needs to make sense of its events,
//! also later on another machine: who was traced where, the clocks, and the
//! probes with their argument names and types. Every format starts from it;
//! a raw capture stores it as JSON.

use crate::record::batch::{Declared, DeclaredTypes};
use crate::session::declared::EventType;
use crate::session::guest::Guest;
use serde::{Deserialize, Serialize};
use styx_common::schema::FieldKind;
use styx_common::{ArgType, EventKind, Shape, MAX_USDT_ARGS};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
/// Who was traced where, the clocks, and the probes.
pub struct Header {
    /// `styx-loader` version that wrote it.
    pub loader: String,
    /// Host name (`uname -n`).
    pub host: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// The traced process (0: every process running the binary).
    pub pid: u32,
    /// Its executable.
    pub exe: String,
    /// How record times map to wall-clock time.
    pub clock: ClockMapping,
    /// styx's event types, by kind id.
    pub events: Vec<EventInfo>,
    /// Other providers' probes (`--probes`), by spec id; those of event
    /// types the emulator declared named and typed by their declaration.
    pub usdt: Vec<UsdtInfo>,
    /// The event types the emulator declared that batches carry, by the
    /// file and tag of their items; captures written before them have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared: Vec<DeclaredInfo>,
    /// The guest, as the emulator described it (`styx_probe::describe!`);
    /// captures written before it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<Guest>,
    /// Traced functions' names (`--functions`), by the id their
    /// `fn_entry`/`fn_exit` events carry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
    /// The functions' returns were uretprobes (`--function-exits
    /// uretprobe`): a call that tail-calls another traced function then
    /// returns with it, its own exit right after the callee's (the call
    /// tracker pairs them so). Else `ret` probes, and jumps out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub uretprobe_exits: bool,
    /// The files the traced process had mapped, and where: what names a
    /// code address of the process (an allocation's caller) when its
    /// events are read, here or later (`session::code`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mapped: Vec<MappedFile>,
}

/// A file the traced process mapped.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct MappedFile {
    /// Its path.
    pub path: String,
    /// Its first mapping's start address…
    pub start: u64,
    /// …and file offset: together its load bias.
    pub offset: u64,
    /// Its GNU build id in hex, if it has one: a file rebuilt since names
    /// nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
}

/// Record times are kernel `CLOCK_MONOTONIC` ns; this pair, read one right
/// after the other when tracing started, turns them into wall-clock time:
/// `realtime = ts_ns - monotonic_ns + realtime_ns`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClockMapping {
    /// CLOCK_MONOTONIC, ns.
    pub monotonic_ns: u64,
    /// CLOCK_REALTIME at the same moment, ns since the Unix epoch.
    pub realtime_ns: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
/// One styx event type as the capture describes it.
pub struct EventInfo {
    /// Its kind id.
    pub id: u8,
    /// Its probe name.
    pub name: String,
    /// Its fields, in output order.
    pub args: Vec<ArgInfo>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
/// One field or argument: its name and type.
pub struct ArgInfo {
    /// The name in output.
    pub name: String,
    /// `u64`, `i32`, `u8`, `str`, `branch` (`kind | conditional << 8`),
    /// `interrupt` (0 entry, 1 exit) …
    #[serde(rename = "type")]
    pub ty: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
/// Another provider's probe as the capture describes it.
pub struct UsdtInfo {
    /// Its records' spec id.
    pub spec_id: u32,
    /// The provider.
    pub provider: String,
    /// The probe.
    pub probe: String,
    /// Its arguments: `arg0`, `arg1`… or as `--probe-args` named them,
    /// typed `i32`, `u64`… as the note says or `--probe-args` declared
    /// (also `str`, `json`).
    pub args: Vec<ArgInfo>,
    /// For a site of an event type the emulator declared: the declaration,
    /// which says how each argument reads (an enum's names, an address, a
    /// register, a bool). Captures written before it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared: Option<EventType>,
}

impl Header {
    /// The header for tracing `pid` now.
    pub fn now(pid: u32, exe: &str, usdt: Vec<UsdtInfo>) -> Header {
        let (host, kernel) = uname();
        Header {
            loader: env!("CARGO_PKG_VERSION").to_string(),
            host,
            kernel,
            pid,
            exe: exe.to_string(),
            clock: ClockMapping::now(),
            events: EventKind::ALL
                .iter()
                .filter(|k| k.shape() != Shape::Usdt)
                .map(|&k| event_info(k))
                .collect(),
            usdt,
            declared: Vec::new(),
            guest: None,
            functions: Vec::new(),
            uretprobe_exits: false,
            mapped: Vec::new(),
        }
    }
}

fn event_info(kind: EventKind) -> EventInfo {
    EventInfo {
        id: kind as u8,
        name: kind.probe_name().to_string(),
        args: kind
            .fields()
            .iter()
            .map(|field| ArgInfo {
                name: field.name.to_string(),
                ty: field.ty.capture_type().to_string(),
            })
            .collect(),
    }
}

/// An event type the emulator declared (`styx_probe::event!`), as
/// batches carry it: the items of `tag` in batches of file `file` are its
/// events, USDT events of spec id `spec_id`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeclaredInfo {
    /// The file's number (a batch record's `aux`).
    pub file: u8,
    /// The type's tag there (`styx_common::schema::declared_tag`).
    pub tag: u16,
    /// The spec id its events are named by.
    pub spec_id: u32,
    /// The declaration.
    pub event: EventType,
}

impl Header {
    /// Whether the session traced the heap (`styx_alloc`'s types).
    pub fn traces_heap(&self) -> bool {
        (self.usdt.iter()).any(|u| u.provider == styx_common::schema::HEAP_PROVIDER)
    }

    /// How the batches of this session's declared types read, by (file, tag).
    pub fn declared_types(&self) -> DeclaredTypes {
        self.declared
            .iter()
            .map(|info| {
                let fields = info.event.fields.iter();
                let declared = Declared {
                    spec_id: info.spec_id,
                    fields: fields
                        .map(|f| (f.bytes, f.kind == FieldKind::Signed))
                        .collect(),
                };
                ((info.file, info.tag), declared)
            })
            .collect()
    }
}

impl UsdtInfo {
    /// How a capture names site `spec_id` of a type the emulator declared:
    /// its arguments are the declaration's fields, named so and typed as
    /// integers of their widths (signed ones signed).
    pub fn declared(spec_id: u32, event: &EventType) -> UsdtInfo {
        let args = event.fields.iter().map(|field| {
            let signed = field.kind == FieldKind::Signed;
            (Some(field.name.clone()), ArgType::int(field.bytes, signed))
        });
        UsdtInfo {
            declared: Some(event.clone()),
            ..UsdtInfo::new(spec_id, &event.provider, &event.name, args)
        }
    }

    /// How a capture names site `spec_id`, `provider:probe`, whose
    /// arguments are `args`: each one's name, if declared, and type.
    pub fn new(
        spec_id: u32,
        provider: &str,
        probe: &str,
        args: impl IntoIterator<Item = (Option<String>, ArgType)>,
    ) -> UsdtInfo {
        UsdtInfo {
            spec_id,
            provider: provider.to_string(),
            probe: probe.to_string(),
            args: args
                .into_iter()
                .enumerate()
                .map(|(i, (name, ty))| ArgInfo {
                    name: name.unwrap_or_else(|| default_arg_name(i)),
                    ty: ty.name().to_string(),
                })
                .collect(),
            declared: None,
        }
    }
}

/// The names of USDT arguments nobody named, by position.
pub const DEFAULT_ARG_NAMES: [&str; MAX_USDT_ARGS] = [
    "arg0", "arg1", "arg2", "arg3", "arg4", "arg5", "arg6", "arg7", "arg8", "arg9", "arg10",
    "arg11",
];

/// The name of a USDT argument nobody named: `arg0`, `arg1`…
pub fn default_arg_name(i: usize) -> String {
    format!("arg{i}")
}

impl ClockMapping {
    /// Reads both clocks, keeping the closest of a few tries.
    pub fn now() -> ClockMapping {
        let mut best: Option<(u64, ClockMapping)> = None;
        for _ in 0..5 {
            let before = clock_ns(ClockId::Monotonic);
            let realtime_ns = clock_ns(ClockId::Realtime);
            let after = clock_ns(ClockId::Monotonic);
            let mapping = ClockMapping {
                monotonic_ns: before + (after - before) / 2,
                realtime_ns,
            };
            if best.is_none_or(|(gap, _)| after - before < gap) {
                best = Some((after - before, mapping));
            }
        }
        best.expect("five tries").1
    }

    /// Wall-clock ns since the Unix epoch for a record's `ts_ns`.
    pub fn realtime(&self, ts_ns: u64) -> u64 {
        ts_ns
            .wrapping_sub(self.monotonic_ns)
            .wrapping_add(self.realtime_ns)
    }
}

/// A clock [`clock_ns`] reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockId {
    /// The clock of records' `ts_ns`.
    Monotonic,
    /// Wall-clock time, for the header's mapping of `ts_ns` to dates.
    Realtime,
    /// CPU time of the calling thread.
    ThreadCPUTime,
}

/// Now on `clock`, in ns. Through the C library (its vDSO call), not a
/// crate that parses the vDSO itself: that one crashed under valgrind,
/// which the benchmarks are measured with.
pub fn clock_ns(clock: ClockId) -> u64 {
    let id = match clock {
        ClockId::Monotonic => libc::CLOCK_MONOTONIC,
        ClockId::Realtime => libc::CLOCK_REALTIME,
        ClockId::ThreadCPUTime => libc::CLOCK_THREAD_CPUTIME_ID,
    };
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the one timespec we pass.
    unsafe { libc::clock_gettime(id, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

fn uname() -> (String, String) {
    // SAFETY: utsname is plain data; uname fills it.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a utsname we own.
    if unsafe { libc::uname(&mut name) } != 0 {
        return ("?".into(), "?".into());
    }
    let text = |field: &[libc::c_char]| {
        let bytes: Vec<u8> = field
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (text(&name.nodename), text(&name.release))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_arg_names_are_the_formatted_ones() {
        for (i, name) in DEFAULT_ARG_NAMES.iter().enumerate() {
            assert_eq!(*name, default_arg_name(i));
        }
    }
}
