//! Attaches a loaded eBPF program to one uprobe site with a kernel-managed
//! USDT semaphore, which aya 0.14 cannot do: it has no way to pass
//! `ref_ctr_offset`.
//!
//! The site is opened as a perf event on the `uprobe` PMU, with the semaphore's
//! file offset in `config` bits 32..63; the kernel then raises the semaphore in
//! every process that maps the file (and lowers it when the event is closed,
//! also when this process is killed). `BPF_LINK_CREATE` connects the program
//! to that event together with an attach cookie.

use crate::bpf_syscall::{bpf_new_fd, BPF_LINK_CREATE};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
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

// The parts of `struct perf_event_attr` (PERF_ATTR_SIZE_VER5, 112 bytes) a
// uprobe needs; everything else stays zero.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved: u16,
}
const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == 112);

const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const REF_CTR_OFFSET_SHIFT: u32 = 32;

// `union bpf_attr`'s BPF_LINK_CREATE member for perf events.
#[repr(C)]
#[derive(Default)]
struct BpfLinkCreateAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    bpf_cookie: u64,
}
const BPF_PERF_EVENT: u32 = 41;

/// Attaches `program` at `target`; `cookie` is what `bpf_get_attach_cookie`
/// returns inside the program.
pub fn attach(
    pmu_type: u32,
    program: BorrowedFd<'_>,
    target: &UprobeTarget<'_>,
    cookie: u64,
) -> io::Result<UprobeLink> {
    let perf_event = open_uprobe_event(pmu_type, target)?;
    let attr = BpfLinkCreateAttr {
        prog_fd: program.as_raw_fd() as u32,
        target_fd: perf_event.as_raw_fd() as u32,
        attach_type: BPF_PERF_EVENT,
        flags: 0,
        bpf_cookie: cookie,
    };
    // SAFETY: attr is the BPF_LINK_CREATE prefix of union bpf_attr.
    let link = unsafe { bpf_new_fd(BPF_LINK_CREATE, &attr, "BPF_LINK_CREATE") }?;
    Ok(UprobeLink {
        _link: link,
        _perf_event: perf_event,
    })
}

fn open_uprobe_event(pmu_type: u32, target: &UprobeTarget<'_>) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let path = CString::new(target.path.as_os_str().as_bytes())
        .map_err(|_| io::Error::other("path contains a NUL byte"))?;
    let attr = PerfEventAttr {
        type_: pmu_type,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: target.ref_ctr_offset << REF_CTR_OFFSET_SHIFT,
        config1: path.as_ptr() as u64,
        config2: target.offset,
        ..Default::default()
    };
    // A per-process event must name no cpu; a system-wide one needs a cpu,
    // and for uprobes any cpu catches every cpu.
    let (pid, cpu) = match target.pid {
        Some(pid) => (pid as libc::pid_t, -1),
        None => (-1, 0),
    };
    // SAFETY: attr is a valid perf_event_attr and `path` outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            pid,
            cpu,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return Err(io::Error::new(
            err.kind(),
            format!("perf_event_open(uprobe): {err}"),
        ));
    }
    // SAFETY: the syscall returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
