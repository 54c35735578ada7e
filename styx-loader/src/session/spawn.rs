//! `styx-loader -- CMD ARGS`: starts the command held just before `exec`, so
//! the probes can be attached before it runs its first instruction.
//!
//! This forks by hand (std's `Command::spawn` waits for the `exec`, which
//! here must wait for the attach) and so must run before the async runtime
//! starts any threads.
//!
//! With `--user`, the child takes the user's groups, gid and uid (in that
//! order, each checked) just before `exec`, in a session of its own
//! (`setsid`): without a controlling terminal it cannot push input into
//! root's (`TIOCSTI`), and Ctrl-C, which the terminal sends only to the
//! loader then, is passed on by the loader ([`interrupt`]). HOME,
//! USER and LOGNAME are the user's. The user, their groups and the
//! environment are made before forking, so the child only makes system
//! calls. The user database and the child's side of the fork stay on
//! libc: nix's `User` reads `errno` where `getpw*_r` return their error
//! and keeps the name only as UTF-8, and its `execve` allocates, which the
//! child here must not.

use super::follow::Mapping;
use anyhow::{bail, Context, Result};
use nix::fcntl::OFlag;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{pipe2, Pid};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A forked child waiting to `exec` its command.
pub struct Held {
    pub pid: u32,
    /// The executable the child will run.
    pub program: PathBuf,
    /// It runs in a session of its own (`--user`).
    pub own_session: bool,
    go: OwnedFd,
}

/// Who the command runs as, looked up before forking.
#[derive(Debug)]
pub struct RunAs {
    /// The user's name, as the user database spells it.
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    /// Supplementary groups, as `initgroups` would set them.
    pub groups: Vec<libc::gid_t>,
    /// The user's home directory, from the user database.
    pub home: PathBuf,
}

impl RunAs {
    /// Looks up `user`, a name or a numeric uid, in the user database.
    pub fn lookup(user: &str) -> Result<RunAs> {
        let entry = match user.parse::<libc::uid_t>() {
            Ok(uid) => passwd_entry(|pwd, buf, len, found| {
                // SAFETY: every pointer is valid for the call; buf has len bytes.
                unsafe { libc::getpwuid_r(uid, pwd, buf, len, found) }
            })
            .with_context(|| format!("looking up uid {uid}"))?
            .ok_or_else(|| anyhow::anyhow!("--user {user}: no user has uid {uid}"))?,
            Err(_) => {
                let name = CString::new(user).context("the --user name contains a NUL byte")?;
                passwd_entry(|pwd, buf, len, found| {
                    // SAFETY: as above; name is a C string.
                    unsafe { libc::getpwnam_r(name.as_ptr(), pwd, buf, len, found) }
                })
                .with_context(|| format!("looking up user {user:?}"))?
                .ok_or_else(|| anyhow::anyhow!("--user {user:?}: no such user"))?
            }
        };
        let Entry {
            name,
            uid,
            gid,
            home,
        } = entry;
        let groups = group_list(&name, gid)
            .with_context(|| format!("looking up the groups of user {name:?}"))?;
        Ok(RunAs {
            name: name.to_string_lossy().into_owned(),
            uid,
            gid,
            groups,
            home: PathBuf::from(std::ffi::OsStr::from_bytes(home.to_bytes())),
        })
    }

    /// The loader's environment with HOME, USER and LOGNAME the user's, as
    /// `NAME=value` strings for `execve`.
    fn environment(&self) -> Result<Vec<CString>> {
        let from_passwd = [
            ("HOME", self.home.as_os_str().as_bytes()),
            ("USER", self.name.as_bytes()),
            ("LOGNAME", self.name.as_bytes()),
        ];
        let inherited = std::env::vars_os().filter(|(name, _)| {
            !from_passwd
                .iter()
                .any(|(replaced, _)| name.as_bytes() == replaced.as_bytes())
        });
        let pairs = inherited
            .map(|(name, value)| (name.as_bytes().to_vec(), value.as_bytes().to_vec()))
            .chain(
                from_passwd
                    .iter()
                    .map(|(name, value)| (name.as_bytes().to_vec(), value.to_vec())),
            );
        pairs
            .map(|(mut name, value)| {
                name.push(b'=');
                name.extend_from_slice(&value);
                CString::new(name)
            })
            .collect::<Result<_, _>>()
            .context("an environment variable contains a NUL byte")
    }
}

/// What the user database says of a user.
struct Entry {
    name: CString,
    uid: libc::uid_t,
    gid: libc::gid_t,
    home: CString,
}

/// Calls a `getpw*_r` function with a growing buffer: the entry, or None
/// when there is no such user.
fn passwd_entry(
    call: impl Fn(
        *mut libc::passwd,
        *mut libc::c_char,
        libc::size_t,
        *mut *mut libc::passwd,
    ) -> libc::c_int,
) -> Result<Option<Entry>> {
    let mut buf = vec![0 as libc::c_char; 1024];
    loop {
        // SAFETY: passwd is plain data; zeroed is a valid value to overwrite.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        match call(&mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) {
            libc::ERANGE if buf.len() < 1 << 20 => buf.resize(buf.len() * 4, 0),
            0 if found.is_null() => return Ok(None),
            0 => {
                // SAFETY: on success pw_name and pw_dir point to C strings
                // inside buf.
                let (name, home) = unsafe {
                    (
                        std::ffi::CStr::from_ptr(pwd.pw_name).to_owned(),
                        std::ffi::CStr::from_ptr(pwd.pw_dir).to_owned(),
                    )
                };
                return Ok(Some(Entry {
                    name,
                    uid: pwd.pw_uid,
                    gid: pwd.pw_gid,
                    home,
                }));
            }
            // Some NSS modules say "not found" with an errno.
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            errno => return Err(std::io::Error::from_raw_os_error(errno).into()),
        }
    }
}

/// The groups `initgroups(name, gid)` would give, `gid` among them.
fn group_list(name: &CString, gid: libc::gid_t) -> Result<Vec<libc::gid_t>> {
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut n = groups.len() as libc::c_int;
        // SAFETY: groups has room for n entries; name is a C string.
        let ok = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if ok >= 0 {
            groups.truncate(n.max(0) as usize);
            return Ok(groups);
        }
        // -1: too small, n is the size needed.
        let needed = (n.max(0) as usize).max(groups.len() * 2);
        if needed > 1 << 16 {
            bail!("more than 65536 groups");
        }
        groups.resize(needed, 0);
    }
}

/// Forks a child that will exec `command` once [`Held::release`] is called,
/// as `user` when one is given.
pub fn hold(command: &[String], user: Option<&RunAs>) -> Result<Held> {
    let program = find_program(&command[0])?;
    let path = CString::new(program.as_os_str().as_bytes()).context("program path has a NUL")?;
    let args: Vec<CString> = command
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .context("an argument contains a NUL byte")?;
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    // Null: the loader's own environment.
    let environment = user.map(RunAs::environment).transpose()?;
    let mut envp: Vec<*const libc::c_char> =
        environment.iter().flatten().map(|v| v.as_ptr()).collect();
    envp.push(std::ptr::null());

    let (wait_end, go) = pipe2(OFlag::O_CLOEXEC).context("creating a pipe")?;
    // What the child says if it cannot become the user or exec: written
    // now, since the child must not allocate.
    let (switch_failed, exec_failed) = match user {
        Some(u) => (
            format!(
                "styx-loader: error: cannot switch to user {} (uid {}, gid {})\n",
                u.name, u.uid, u.gid
            ),
            format!(
                "styx-loader: error: user {} cannot run {} (can they read and execute it?)\n",
                u.name,
                program.display()
            ),
        ),
        None => (String::new(), String::new()),
    };
    // SAFETY: the process is single-threaded here; the child only calls
    // async-signal-safe functions (close, read, setsid, setgroups, setgid,
    // setuid, write, execv, execve, _exit).
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()).context("fork"),
        0 => unsafe {
            libc::close(go.as_raw_fd());
            let mut byte = 0u8;
            // One byte means go; end of file means the loader gave up.
            if libc::read(wait_end.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) != 1 {
                libc::_exit(126)
            }
            let say = |text: &str| {
                libc::write(2, text.as_ptr().cast(), text.len());
            };
            if let Some(u) = user {
                // A session of its own (no controlling terminal); then
                // groups, gid, uid: after setuid, no more changes.
                if libc::setsid() < 0
                    || libc::setgroups(u.groups.len(), u.groups.as_ptr()) != 0
                    || libc::setgid(u.gid) != 0
                    || libc::setuid(u.uid) != 0
                {
                    say(&switch_failed);
                    libc::_exit(127);
                }
                libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
            } else {
                libc::execv(path.as_ptr(), argv.as_ptr());
            }
            if user.is_some() {
                say(&exec_failed);
            }
            libc::_exit(127)
        },
        pid => Ok(Held {
            pid: pid as u32,
            program,
            own_session: user.is_some(),
            go,
        }),
    }
}

impl Held {
    /// Lets the child exec its command.
    pub fn release(self) -> Result<()> {
        match nix::unistd::write(&self.go, &[1]) {
            Ok(1) => Ok(()),
            Ok(_) => bail!("releasing the command: nothing written"),
            Err(e) => Err(e).context("releasing the command"),
        }
    }
}

/// How long a released command is given to be past its `exec`.
const EXEC_WITHIN: Duration = Duration::from_secs(1);

/// Waits until the released child `pid` is past its `exec` (its
/// executable no longer the loader's, and mapped: the kernel names the new
/// executable in `/proc/PID/exe` before it maps it, and a loader reading
/// the maps in between, as it may on a busy machine, found no executable
/// to name code addresses by), at most [`EXEC_WITHIN`]; whether it then
/// runs `program` (not if the `exec` failed, which leaves a child exiting
/// 127, or ran an interpreter for a script).
pub fn wait_for_exec(pid: u32, program: &Path) -> bool {
    let identity = |path: &Path| std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
    let loader = identity(Path::new("/proc/self/exe"));
    let exe = PathBuf::from(format!("/proc/{pid}/exe"));
    let until = Instant::now() + EXEC_WITHIN;
    while Instant::now() < until {
        match identity(&exe) {
            Some(now) if Some(now) != loader => {
                if Some(now) != identity(program) {
                    return false;
                }
                if maps_file(pid, now) {
                    return true;
                }
            }
            // A zombie's (a failed exec's) exe reads as nothing.
            None if !alive(pid) => return false,
            _ => {}
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

/// Whether process `pid` maps the file of `identity` (device, inode).
fn maps_file(pid: u32, identity: (u64, u64)) -> bool {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    (maps.lines().filter_map(Mapping::parse)).any(|m| m.identity == identity)
}

/// Ctrl-C stopped the loader: the command in a session of its own (which
/// the terminal does not signal) gets SIGINT too, as it would have.
pub fn interrupt(pid: u32) {
    // Our own child, not yet waited for: it cannot have gone.
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGINT);
}

/// Whether process `pid` exists and has not exited (a zombie has).
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, in parentheses that may hold anything.
    stat.rsplit_once(") ")
        .is_some_and(|(_, rest)| !rest.starts_with(['Z', 'X']))
}

/// Waits for the child and turns its end into an exit code, as a shell does.
pub fn wait_exit_code(pid: u32) -> Result<i32> {
    match waitpid(Pid::from_raw(pid as i32), None).context("waiting for the command")? {
        WaitStatus::Exited(_, code) => Ok(code),
        WaitStatus::Signaled(_, signal, _) => Ok(128 + signal as i32),
        // Without WUNTRACED or WCONTINUED waitpid reports nothing else.
        other => bail!("the command ended as {other:?}"),
    }
}

/// The executable `name` names: a path, or a file found on PATH.
fn find_program(name: &str) -> Result<PathBuf> {
    let candidates: Vec<PathBuf> = if name.contains('/') {
        vec![PathBuf::from(name)]
    } else {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .collect()
    };
    for candidate in candidates {
        if is_executable(&candidate) {
            return candidate
                .canonicalize()
                .with_context(|| format!("resolving {}", candidate.display()));
        }
    }
    if name.contains('/') {
        match std::fs::metadata(name) {
            Ok(meta) if meta.is_dir() => bail!("{name:?} is a directory, not a program"),
            Ok(_) => bail!("{name:?} is not executable (chmod +x it, or name the program)"),
            Err(_) => bail!("no executable {name:?}"),
        }
    }
    bail!("no executable {name:?} on PATH")
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
