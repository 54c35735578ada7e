//! The `disabled` feature of styx-probe removes every probe from the binary.

use crate::support::*;
use object::Object;
use std::path::PathBuf;
use std::process::Command;

#[test]
fn compiled_out_probes_leave_no_notes_and_never_evaluate() {
    let target_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("probes-off");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "styx-testprog",
            "--features",
            "probes-off",
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("running cargo");
    assert!(status.success(), "building styx-testprog with probes-off");
    let binary = target_dir.join("debug/styx-testprog");

    let data = std::fs::read(&binary).unwrap();
    let table = styx_usdt::note::parse_probe_table(&data).expect("an ELF file");
    assert!(
        table.sites.is_empty(),
        "probe notes left: {:?}",
        table.sites
    );
    let elf = object::File::parse(&*data).unwrap();
    for section in [".note.stapsdt", ".probes", ".stapsdt.base"] {
        assert!(
            elf.section_by_name(section).is_none(),
            "{section} is still there"
        );
    }
    // The same binary with probes compiled in does have them, so the check above can fail.
    let with_probes = std::fs::read(testprog_path()).unwrap();
    let table = styx_usdt::note::parse_probe_table(&with_probes).unwrap();
    assert!(
        table.sites.len() >= styx_types(),
        "{} sites",
        table.sites.len()
    );

    let mut prog = TestProg::start(&binary, &[]);
    let fired = prog.fire(10, 1);
    assert!(fired.calls > 100);
    assert_eq!(fired.evaluated, 0);
    prog.quit();
}
