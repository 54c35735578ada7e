//! When no function matches `--functions`, the error names the likely
//! cause: a stripped file (only its exported functions have symbols), or a
//! library the target's mode does not search.

use crate::support::*;
use std::path::PathBuf;

#[test]
fn a_stripped_file_is_said_to_be_stripped() {
    let dir = scratch("function-errors-stripped");
    let stripped = dir.join("stripped");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/tail_calls.c");
    cc(&["-O2", "-s", "-o", stripped.to_str().unwrap(), source]);
    let (status, _, stderr) =
        run_loader(&["list", "--functions", "^tail$", stripped.to_str().unwrap()]);
    assert!(!status.success());
    assert!(
        stderr.contains("has no symbol table (stripped); its .dynsym has 0 functions"),
        "{stderr}"
    );
    assert!(!stderr.contains("inlined"), "{stderr}");
}

/// A command's linked libraries are searched too (found as the dynamic
/// loader would, attached before it runs): a function there is traced.
#[test]
fn a_library_function_under_a_command_is_traced() {
    require_root();
    let program: PathBuf = crate::tail_calls::program();
    let (status, stdout, stderr) = run_loader(&[
        "--functions",
        "^mmap$",
        "--",
        program.to_str().unwrap(),
        "1",
    ]);
    assert!(status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("done"), "the command ran: {stdout}");
    let attached = stderr
        .lines()
        .find(|l| l.contains("attached"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(!attached.contains("attached 0 "), "{stderr}");
    assert!(
        !stderr.contains("warning") && !stderr.contains("error"),
        "{stderr}"
    );
}
