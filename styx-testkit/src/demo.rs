//! `cargo xtask demo`'s recording, defined once for the demo and for the
//! end-to-end test that checks it keeps every event.

use std::ffi::OsString;
use std::path::Path;

/// styx-loader's arguments recording every event of styx-demo process
/// `pid` for `seconds` into the raw capture `capture`, with the loader's
/// defaults otherwise: every event type, batched, and (a file on disk)
/// batched events waiting for room in the ring rather than being dropped.
pub fn demo_recording(pid: u32, capture: &Path, seconds: f64) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["--pid", &pid.to_string(), "-o", "raw", "--output"]
        .map(OsString::from)
        .to_vec();
    args.push(capture.as_os_str().to_owned());
    args.extend(["--duration", &seconds.to_string(), "--quiet"].map(OsString::from));
    args
}
