//! Attaches a loaded eBPF program to one uprobe site with a kernel-managed
//! USDT semaphore, which aya 0.14 cannot do: it has no way to pass
//! `ref_ctr_offset`.
//!
//! The site is opened as a perf event on the `uprobe` PMU, with the semaphore's
//! file offset in `config` bits 32..63; the kernel then raises the semaphore in
//! every process that maps the file (and lowers it when the event is closed,
//! also when this process is killed). `BPF_LINK_CREATE` connects the program
//! to that event together with an attach cookie.

use super::syscall::{bpf_new_fd, perf_event_open};
use aya_obj::generated::{bpf_attach_type, bpf_attr, bpf_cmd, perf_event_attr};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// An attached site. Dropping it detaches the program and lowers the semaphore.
pub struct UprobeLink {
    // Field order is drop order: the link goes before its perf event.
    _link: OwnedFd,
    _perf_event: OwnedFd,
}

/// Where to attach: the file, the probe's file offset, the semaphore's file
/// offset (0 for none), and the process to filter on (None: every process).
pub struct UprobeTarget<'a> {
    pub path: &'a Path,
    pub offset: u64,
    pub ref_ctr_offset: u64,
    pub pid: Option<u32>,
}

/// The uprobe PMU's type id, which the kernel assigns at boot.
pub fn uprobe_pmu_type() -> io::Result<u32> {
    let path = "/sys/bus/event_source/devices/uprobe/type";
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("reading {path}: {e}")))?;
    text.trim()
        .parse()
        .map_err(|_| io::Error::other(format!("{path} holds {text:?}, not a number")))
}

/// Where `config` holds the semaphore's file offset (the kernel's
/// `PERF_UPROBE_REF_CTR_OFFSET_SHIFT`, which is not in its uapi headers).
const REF_CTR_OFFSET_SHIFT: u32 = 32;

/// Attaches `program` at `target`; `cookie` is what `bpf_get_attach_cookie`
/// returns inside the program.
pub fn attach(
    pmu_type: u32,
    program: BorrowedFd<'_>,
    target: &UprobeTarget<'_>,
    cookie: u64,
) -> io::Result<UprobeLink> {
    let perf_event = open_uprobe_event(pmu_type, target)?;
    // SAFETY: bpf_attr is plain data, for which all zeroes is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    attr.link_create.__bindgen_anon_1.prog_fd = program.as_raw_fd() as u32;
    attr.link_create.__bindgen_anon_2.target_fd = perf_event.as_raw_fd() as u32;
    attr.link_create.attach_type = bpf_attach_type::BPF_PERF_EVENT as u32;
    attr.link_create.__bindgen_anon_3.perf_event.bpf_cookie = cookie;
    // SAFETY: attr holds the link_create member with no pointers.
    let link = unsafe { bpf_new_fd(bpf_cmd::BPF_LINK_CREATE, &attr, "BPF_LINK_CREATE") }?;
    Ok(UprobeLink {
        _link: link,
        _perf_event: perf_event,
    })
}

fn open_uprobe_event(pmu_type: u32, target: &UprobeTarget<'_>) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let path = CString::new(target.path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("path contains a NUL byte"))?;
    // SAFETY: perf_event_attr is plain data, for which all zeroes is valid.
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = pmu_type;
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    attr.config = target.ref_ctr_offset << REF_CTR_OFFSET_SHIFT;
    attr.__bindgen_anon_3.config1 = path.as_ptr() as u64;
    attr.__bindgen_anon_4.config2 = target.offset;
    // A per-process event must name no cpu; a system-wide one needs a cpu,
    // and for uprobes any cpu catches every cpu.
    let (pid, cpu) = match target.pid {
        Some(pid) => (pid as libc::pid_t, -1),
        None => (-1, 0),
    };
    // SAFETY: attr is a perf_event_attr with its size set, and `path`
    // outlives the call.
    unsafe { perf_event_open(&attr, pid, cpu, "perf_event_open(uprobe)") }
}
