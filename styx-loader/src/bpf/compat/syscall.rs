//! The system calls styx issues itself, for what aya 0.14 cannot do: `bpf(2)`
//! to load a program with an expected attach type aya does not set and to
//! create links with options aya does not pass, and `perf_event_open(2)` to
//! open a uprobe with a semaphore. The attributes are aya-obj's generated
//! kernel types, zeroed and then filled.

use aya_obj::generated::{bpf_attr, bpf_cmd, perf_event_attr, PERF_FLAG_FD_CLOEXEC};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// Issues `cmd` with `attr` and returns the new file descriptor it creates.
/// `what` names the call in the error.
///
/// # Safety
/// `attr` must hold the member `cmd` expects, and every pointer in it be
/// valid for the duration of the call.
pub unsafe fn bpf_new_fd(cmd: bpf_cmd, attr: &bpf_attr, what: &str) -> io::Result<OwnedFd> {
    // SAFETY: the caller vouches for attr; its size is passed along, and the
    // kernel requires whatever of the union it does not know to be zero.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_int,
            attr as *const bpf_attr,
            std::mem::size_of::<bpf_attr>() as libc::c_uint,
        )
    };
    new_fd(fd, what)
}

/// Opens a perf event with `attr` (its `size` set) for process `pid` (-1:
/// every process) on `cpu` (-1: every cpu), close-on-exec, in no group.
/// `what` names the call in the error.
///
/// # Safety
/// Every pointer in `attr` must be valid for the duration of the call.
pub unsafe fn perf_event_open(
    attr: &perf_event_attr,
    pid: libc::pid_t,
    cpu: libc::c_int,
    what: &str,
) -> io::Result<OwnedFd> {
    let group_fd: libc::c_int = -1;
    // SAFETY: the caller vouches for attr.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const perf_event_attr,
            pid,
            cpu,
            group_fd,
            libc::c_ulong::from(PERF_FLAG_FD_CLOEXEC),
        )
    };
    new_fd(fd, what)
}

/// The descriptor a system call returned, or the error it set.
fn new_fd(ret: libc::c_long, what: &str) -> io::Result<OwnedFd> {
    if ret < 0 {
        let err = io::Error::last_os_error();
        return Err(io::Error::new(err.kind(), format!("{what}: {err}")));
    }
    // SAFETY: the syscall returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as i32) })
}
