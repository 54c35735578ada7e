//! Event types an emulator declares itself (`styx_probe::event!`,
//! styx-declared): their notes say what `list` shows, and bpftrace traces
//! their sites with the values in the order declared.

use crate::support::*;
use std::process::{Command, Stdio};

fn program() -> std::path::PathBuf {
    beside_testprog("styx-declared", "styx-testprog")
}

#[test]
fn list_shows_each_declared_type_with_its_fields() {
    let binary = program();
    let (status, stdout, stderr) =
        run_loader(&["list", binary.to_str().unwrap(), "styx_declared:*"]);
    assert!(status.success(), "{stderr}");
    let declared: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("declared "))
        .collect();
    assert_eq!(
        declared,
        [
            "flags_delta(pc: u16, delta: i8, wide: i64)",
            "mmio_write(pc: u32, device: Device { Uart = 0, Timer = 1, Dma = 7 }, addr: Addr<u32>, val: u32)",
            "wide(a: u8, b: u16, c: u32, d: u64, e: bool, f: Reg<u8>, g: i16, h: u64)",
        ],
        "{stdout}"
    );
    // Each type's one site passes its fields in order, a register each.
    assert!(
        stdout.contains("8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9 8@%r10 8@%r11"),
        "{stdout}"
    );
}

/// A bpftrace one-liner on a declared type: its arguments are the fields
/// in the order declared (an enum's value, an address, a value).
#[test]
fn bpftrace_reads_a_declared_types_fields_as_its_arguments() {
    require_root();
    let binary = program();
    let mut prog = TestProg::start(&binary, &[]);
    let pid = prog.pid();
    let script = format!(
        "usdt:{}:styx_declared:mmio_write {{ @device[arg1] = count(); @val = sum(arg3); @addr = max(arg2); }}",
        binary.display()
    );
    let bpftrace = Command::new("bpftrace")
        .args(["-p", &pid.to_string(), "-e", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting bpftrace");
    eventually("bpftrace raised mmio_write's semaphore", || {
        provider_semaphores(pid, &binary, "styx_declared").get("mmio_write") == Some(&1)
            && in_event_loop(bpftrace.id())
    });
    assert_eq!(prog.ask("fire 30").trim(), "fired 30");
    let printed = stop_bpftrace(bpftrace);
    prog.quit();
    // Devices Uart (0), Timer (1), Dma (7) ten times each; values 3 * i.
    for line in [
        "@device[0]: 10",
        "@device[1]: 10",
        "@device[7]: 10",
        "@val: 1305",
        "@addr: 45",
    ] {
        assert!(printed.lines().any(|l| l == line), "{line:?} in {printed}");
    }
}
