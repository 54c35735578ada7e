//! `styx-loader -- CMD`: traced from its first instruction, exits as CMD does.

use crate::support::*;
use std::io::Write;
use std::process::Stdio;

#[test]
fn spawned_command_is_traced_from_its_first_instruction() {
    require_root();
    let dir = scratch("spawn");
    let out = dir.join("traced.jsonl");
    let mut loader = loader_command()
        .args(["-o", "jsonl", "-e", "marker,mem_read", "--output"])
        .arg(&out)
        .arg("--")
        .arg(testprog_path())
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command inherits the loader's stdin.
    writeln!(loader.stdin.take().unwrap(), "fire 4 1\nexit 3").unwrap();
    let output = loader.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(3),
        "the command's exit code: {stderr}"
    );

    let events = read_jsonl(&out);
    assert_eq!(events[0]["text"], "testprog start", "{events:?}");
    let mem_reads = events.iter().filter(|e| e["event"] == "mem_read").count();
    assert_eq!(mem_reads, 4, "{stderr}");
    assert!(stderr.contains("(process exited); 0 dropped"), "{stderr}");
}

#[test]
fn spawn_errors_are_one_clear_line() {
    require_root();
    // A script's program is its interpreter: the line says how to reach
    // the emulator it starts; so does the one for a program without probes.
    let dir = scratch("spawn-errors");
    let script = dir.join("run.sh");
    write_program(&script, b"#!/bin/sh\nexec true\n");
    let script_says = format!(
        "{} is a script (#!/bin/sh): a command after -- is traced as the program it runs, \
         here the interpreter. To trace the emulator it starts, name the emulator's binary: \
         styx-loader --binary EMULATOR [OPTIONS] -- {0}",
        script.display()
    );
    let not_executable = dir.join("emu");
    std::fs::write(&not_executable, b"\x7fELF").unwrap();
    let not_executable_says = format!(
        "{:?} is not executable (chmod +x it, or name the program)",
        not_executable.display().to_string()
    );
    let dir = dir.display().to_string();
    let dir_says = format!("{dir:?} is a directory, not a program");
    for (command, says) in [
        (
            "/nonexistent/emulator",
            "no executable \"/nonexistent/emulator\"",
        ),
        (
            not_executable.to_str().unwrap(),
            not_executable_says.as_str(),
        ),
        (dir.as_str(), dir_says.as_str()),
        ("true", "(/usr/bin/true) has no styx probes"),
        ("true", "name the emulator: --binary EMULATOR -- COMMAND"),
        (script.to_str().unwrap(), script_says.as_str()),
    ] {
        let (status, _, stderr) = run_loader(&["--", command]);
        assert!(!status.success(), "{command}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains(says), "{command}: {stderr}");
    }
}

/// With lld, the first page of the writable data segment is also the RELRO
/// segment's last in the file: a semaphore there is raised in the wrong
/// mapping for processes started after attaching (the spawned test above
/// would see nothing). styx-probe starts `.probes` on a page of its own.
#[test]
fn semaphores_start_on_a_page_of_their_own() {
    use object::{Object, ObjectSection};
    for binary in [testprog_path(), demo_path()] {
        let data = std::fs::read(&binary).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let probes = elf.section_by_name(".probes").expect(".probes");
        assert_eq!(probes.address() % 4096, 0, "{}", binary.display());
    }
}

/// `--user nobody`: the command runs with nobody's uid, gid and groups (the
/// loader stays root), and is traced from its first instruction as before.
#[test]
fn spawned_command_runs_as_the_user_given() {
    use std::io::{BufRead, BufReader};
    require_root();
    let dir = scratch("spawn-user");
    let out = dir.join("traced.jsonl");
    let mut loader = loader_command()
        .args(["--user", "nobody", "-o", "jsonl", "-e", "marker,mem_read"])
        .arg("--output")
        .arg(&out)
        .arg("--")
        .arg(testprog_path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = loader.stdin.take().unwrap();
    let mut stdout = BufReader::new(loader.stdout.take().unwrap());
    // The command's answer on the loader's stdout: it runs.
    writeln!(stdin, "fire 4 1").unwrap();
    let mut answer = String::new();
    stdout.read_line(&mut answer).unwrap();
    assert!(answer.starts_with("done calls="), "{answer:?}");

    let children =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", loader.id())).unwrap();
    let child: u32 = children.split_whitespace().next().unwrap().parse().unwrap();
    let status = std::fs::read_to_string(format!("/proc/{child}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {status}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(field("Name:"), "styx-testprog", "{status}");
    assert_eq!(
        field("Uid:"),
        "65534 65534 65534 65534",
        "real, effective, saved, fs"
    );
    assert_eq!(field("Gid:"), "65534 65534 65534 65534");
    assert_eq!(field("Groups:"), "65534", "root's groups are dropped");

    writeln!(stdin, "exit 3").unwrap();
    drop(stdin);
    let output = loader.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    let events = read_jsonl(&out);
    assert_eq!(events[0]["text"], "testprog start", "{events:?}");
    assert!(events.iter().all(|e| e["pid"] == child), "{events:?}");
    let mem_reads = events.iter().filter(|e| e["event"] == "mem_read").count();
    assert_eq!(mem_reads, 4, "{stderr}");
}

/// Issue 25, 14: a `--user` command kept the loader's session and
/// controlling terminal, and with TIOCSTI allowed (`dev.tty.legacy_tiocsti`)
/// could type commands into root's shell. The loader runs here as a login
/// shell's command would, on a terminal of its own (a pty); the command
/// (tests/c/tiocsti.c) tries to type into it every way it can. It is in a
/// session of its own, every attempt fails and nothing typed shows; HOME,
/// USER and LOGNAME are nobody's; Ctrl-C on the terminal still ends it.
#[test]
fn a_user_command_cannot_type_into_the_loaders_terminal() {
    use std::collections::BTreeMap;
    use std::io::Read;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    require_root();
    let dir = scratch("spawn-tiocsti");
    let helper = dir.join("tiocsti");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/tiocsti.c");
    cc(&["-O1", "-o", helper.to_str().unwrap(), source]);
    let (mut master, mut slave) = (0, 0);
    // SAFETY: out-pointers to two descriptors; no name, default modes (echo,
    // signals from ^C) and size.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: fresh descriptors that nothing else owns.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let out = dir.join("traced.jsonl");
    let mut command = loader_command();
    command
        .args([
            "--user", "nobody", "--quiet", "--probes", "tty:*", "-o", "jsonl",
        ])
        .arg("--output")
        .arg(&out)
        .arg("--")
        .arg(&helper)
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave));
    // SAFETY: only system calls between fork and exec: a session of its
    // own whose controlling terminal (in the foreground) is the pty, and
    // SIGINT as a terminal's shell leaves it. Tests started in the
    // background by a script have it ignored, which the loader and then
    // the command would inherit: the command would not end of Ctrl-C.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0
                || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0
                || libc::signal(libc::SIGINT, libc::SIG_DFL) == libc::SIG_ERR
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    /// Killed if the test fails before it ends.
    struct Running(std::process::Child);
    impl Drop for Running {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut loader = Running(command.spawn().unwrap());
    // The pty's other ends are the loader's and the command's alone now.
    drop(command);
    let mut terminal = std::fs::File::from(master);
    let mut reading = terminal.try_clone().unwrap();
    let (chunks, shown) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // EIO once every other end is closed.
        while let Ok(n @ 1..) = reading.read(&mut buf) {
            if chunks.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut screen = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let report = loop {
        if let Some(line) = screen
            .lines()
            .find(|l| l.starts_with("tiocsti: ") && l.contains("LOGNAME="))
        {
            break line.to_string();
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match shown.recv_timeout(left) {
            Ok(chunk) => screen += &String::from_utf8_lossy(&chunk),
            Err(_) => panic!("no report from the command; the terminal showed: {screen}"),
        }
    };
    let said: BTreeMap<&str, &str> = report
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect();
    assert_eq!(said["sid"], said["pid"], "a session of its own: {report}");
    assert_eq!(said["parent_sid"], loader.0.id().to_string(), "{report}");
    for way in ["fd0", "fd1", "fd2"] {
        assert!(
            ["EPERM", "EIO"].contains(&said[way]),
            "typing through {way}: {report}"
        );
    }
    assert_eq!(
        said["dev_tty"], "ENXIO",
        "no controlling terminal: {report}"
    );
    let name = std::ffi::CString::new("nobody").unwrap();
    // SAFETY: a C string; the entry is read before any other lookup.
    let home = unsafe {
        let entry = libc::getpwnam(name.as_ptr());
        assert!(!entry.is_null());
        std::ffi::CStr::from_ptr((*entry).pw_dir)
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(said["HOME"], home, "{report}");
    assert_eq!((said["USER"], said["LOGNAME"]), ("nobody", "nobody"));

    // Ctrl-C: the terminal signals the loader's process group; the command
    // gets it from the loader and ends of it, and the loader with its status.
    terminal.write_all(b"\x03").unwrap();
    let status = loader.0.wait().unwrap();
    while let Ok(chunk) = shown.recv_timeout(Duration::from_millis(200)) {
        screen += &String::from_utf8_lossy(&chunk);
    }
    assert_eq!(status.code(), Some(130), "{screen}");
    assert!(
        !screen.contains("zq-typed"),
        "typed into the terminal: {screen}"
    );
    let events = read_jsonl(&out);
    assert_eq!(events.len(), 1, "the command was traced: {events:?}");
    assert_eq!(events[0]["probe"], "tried", "{events:?}");
}
