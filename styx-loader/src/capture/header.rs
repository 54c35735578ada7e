//! A capture's header: what a reader needs to make sense of the records
//! later, on another machine: who was traced where, the clocks, and the
//! probes with their argument names and types.

use crate::sites::UsdtSite;
use serde::{Deserialize, Serialize};
use styx_common::{EventKind, Shape, UsdtSpec};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Header {
    /// `styx-loader` version that wrote it.
    pub loader: String,
    /// Host name and kernel release (`uname -n`, `uname -r`).
    pub host: String,
    pub kernel: String,
    /// The traced process and its executable.
    pub pid: u32,
    pub exe: String,
    pub clock: ClockMapping,
    /// styx's event types, by kind id.
    pub events: Vec<EventInfo>,
    /// Other providers' probes (`--probes`), by spec id.
    pub usdt: Vec<UsdtInfo>,
}

/// Record times are kernel `CLOCK_MONOTONIC` ns; this pair, read one right
/// after the other when tracing started, turns them into wall-clock time:
/// `realtime = ts_ns - monotonic_ns + realtime_ns`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClockMapping {
    pub monotonic_ns: u64,
    pub realtime_ns: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct EventInfo {
    pub id: u8,
    pub name: String,
    pub args: Vec<ArgInfo>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ArgInfo {
    pub name: String,
    /// `u64`, `i32`, `u8`, `str`, `branch` (`kind | conditional << 8`),
    /// `interrupt` (0 entry, 1 exit) …
    #[serde(rename = "type")]
    pub ty: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct UsdtInfo {
    pub spec_id: u32,
    pub provider: String,
    pub probe: String,
    pub args: Vec<ArgInfo>,
}

impl Header {
    /// The header for tracing `pid` now.
    pub fn now(pid: u32, exe: &str, usdt: &[UsdtSite]) -> Header {
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
            usdt: usdt
                .iter()
                .enumerate()
                .map(|(id, site)| UsdtInfo {
                    spec_id: id as u32,
                    provider: site.provider.clone(),
                    probe: site.probe.clone(),
                    args: (0..site.spec.nargs as usize)
                        .map(|i| {
                            let arg = &site.spec.args[i];
                            let sign = if arg.signed != 0 { 'i' } else { 'u' };
                            ArgInfo {
                                name: format!("arg{i}"),
                                ty: format!("{sign}{}", u32::from(arg.size) * 8),
                            }
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// The other providers' sites as the formats name them. Their argument
    /// specs are not kept (only the eBPF program needs them).
    pub fn usdt_sites(&self) -> Vec<UsdtSite> {
        let mut sites: Vec<UsdtSite> = Vec::with_capacity(self.usdt.len());
        for info in &self.usdt {
            let index = info.spec_id as usize;
            if sites.len() <= index {
                sites.resize_with(index + 1, unknown_site);
            }
            sites[index] = UsdtSite {
                provider: info.provider.clone(),
                probe: info.probe.clone(),
                spec: UsdtSpec::default(),
                signed: info.args.iter().map(|a| a.ty.starts_with('i')).collect(),
            };
        }
        sites
    }
}

fn unknown_site() -> UsdtSite {
    UsdtSite {
        provider: "?".into(),
        probe: "?".into(),
        spec: UsdtSpec::default(),
        signed: Vec::new(),
    }
}

fn event_info(kind: EventKind) -> EventInfo {
    let arg = |name: &str, ty: &str| ArgInfo {
        name: name.to_string(),
        ty: ty.to_string(),
    };
    let args = match kind {
        EventKind::MemRead | EventKind::MemWrite => vec![
            arg("pc", "u64"),
            arg("addr", "u64"),
            arg("val", "u64"),
            arg("size", "u8"),
        ],
        EventKind::Branch => vec![
            arg("pc", "u64"),
            arg("target", "u64"),
            arg("kind", "branch"),
        ],
        EventKind::Interrupt => vec![
            arg("kind", "interrupt"),
            arg("num", "u64"),
            arg("old_pc", "u64"),
            arg("new_pc", "u64"),
        ],
        EventKind::SpanBegin | EventKind::SpanEnd => {
            vec![arg("category", "str"), arg("name", "str"), arg("id", "u64")]
        }
        EventKind::Marker => vec![arg("text", "str")],
        other => other
            .probe_args()
            .iter()
            .map(|name| arg(name, "u64"))
            .collect(),
    };
    EventInfo {
        id: kind as u8,
        name: kind.probe_name().to_string(),
        args,
    }
}

impl ClockMapping {
    /// Reads both clocks, keeping the closest of a few tries.
    pub fn now() -> ClockMapping {
        let mut best: Option<(u64, ClockMapping)> = None;
        for _ in 0..5 {
            let before = clock(libc::CLOCK_MONOTONIC);
            let realtime_ns = clock(libc::CLOCK_REALTIME);
            let after = clock(libc::CLOCK_MONOTONIC);
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

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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
