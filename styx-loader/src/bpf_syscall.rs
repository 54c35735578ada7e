//! The `bpf(2)` commands styx issues itself, for what aya 0.14 cannot do:
//! loading a program with an expected attach type aya does not set, and
//! creating links with options aya does not pass.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

pub const BPF_PROG_LOAD: libc::c_long = 5;
pub const BPF_LINK_CREATE: libc::c_long = 28;
/// The attach type of `uprobe_multi` links, and of the programs they take.
pub const BPF_TRACE_UPROBE_MULTI: u32 = 48;

/// Issues `cmd` with `attr` and returns the new file descriptor it creates.
/// `what` names the call in the error.
///
/// # Safety
/// `attr` must be a `#[repr(C)]` prefix of `union bpf_attr` laid out as
/// `cmd` expects, and every pointer in it valid for the duration of the call.
pub unsafe fn bpf_new_fd<T>(cmd: libc::c_long, attr: &T, what: &str) -> io::Result<OwnedFd> {
    // SAFETY: the caller vouches for attr; its size is passed along and the
    // kernel zero-extends the rest of the union.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *const T,
            std::mem::size_of::<T>() as u32,
        )
    };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return Err(io::Error::new(err.kind(), format!("{what}: {err}")));
    }
    // SAFETY: the syscall returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
