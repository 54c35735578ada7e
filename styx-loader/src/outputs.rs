//! The session's outputs as the command line asks for them: the writer for
//! `-o` on `--output` (or stdout), plus a raw capture on `--capture`, and
//! the function table. How outputs are opened is styx-events' (`open`).

use anyhow::{Context, Result};
use std::cell::RefCell;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
/// Files beside the outputs (tables, the heatmap) are created as they are.
pub use styx_events::create_file as create;
use styx_events::Header;
use styx_events::{CallTable, CallTracker, Compression, Detail, Discard, EventWriter, Format};
use styx_events::{Options, Output, Tee};

/// Where events go.
#[cfg_attr(not(feature = "trace"), allow(dead_code))]
pub struct Outputs<'a> {
    /// The format of the main output.
    pub format: Format,
    /// The main output's file; stdout if None.
    pub output: Option<&'a Path>,
    /// A raw capture of the same events, if asked for.
    pub capture: Option<&'a PathBuf>,
    /// Text only.
    pub detail: Detail,
    /// Parquet in a directory: MiB per file.
    pub roll_mib: u64,
    /// A raw capture's blocks.
    pub compression: Compression,
    /// The emulator waits for the loader (`--on-full wait`), so a raw
    /// capture may wait for its compressing threads.
    pub emulator_waits: bool,
    /// No main output (`--summary`): only the capture, if any.
    pub discard: bool,
}

/// Opens every output and writes their starts.
#[cfg_attr(not(feature = "trace"), allow(dead_code))]
pub fn open(outputs: &Outputs<'_>, header: &Header) -> Result<Box<dyn EventWriter>> {
    let options = Options {
        wait_for_compression: outputs.emulator_waits,
        ..options(outputs.detail, outputs.roll_mib, outputs.compression)
    };
    let main = match outputs.discard {
        true => Box::new(Discard),
        false => open_with(outputs.format, outputs.output, &options, header)?,
    };
    Ok(match outputs.capture {
        None => main,
        // When the main output closes or fails, the Tee keeps feeding the
        // capture, and the session still finishes it.
        Some(path) => Box::new(Tee::new(vec![
            main,
            open_with(Format::Raw, Some(path), &options, header)?,
        ])),
    })
}

/// With traced functions (`--functions`): `out` behind the tracker that
/// pairs their calls, and the per-function table it fills.
pub fn track_calls(
    out: Box<dyn EventWriter>,
    header: &Header,
    functions_later: bool,
) -> (Box<dyn EventWriter>, Option<Rc<RefCell<CallTable>>>) {
    if header.functions.is_empty() && !functions_later {
        return (out, None);
    }
    let tracker = CallTracker::new(out, header.functions.len(), header.uretprobe_exits);
    let table = tracker.table();
    (Box::new(tracker), Some(table))
}

/// The per-function table: to `to`'s file or stdout (`--summary`), or to
/// stderr after the run's summary (`to` None).
pub fn write_call_table(
    table: &CallTable,
    header: &Header,
    to: Option<Option<&Path>>,
) -> Result<()> {
    let written = match to {
        None => {
            eprintln!("styx-loader: traced functions:");
            table.write(&header.functions, &mut io::stderr().lock())
        }
        Some(None) => table.write(&header.functions, &mut io::stdout().lock()),
        Some(Some(path)) => {
            let mut file = create(path)?;
            table.write(&header.functions, &mut file)
        }
    };
    match written {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing the function table"),
    }
}

/// How outputs write, from the command line's `--detail`, `--roll-size`
/// and `--compression`.
pub fn options(detail: Detail, roll_mib: u64, compression: Compression) -> Options {
    Options {
        detail,
        roll_bytes: roll_mib << 20,
        compression,
        ..Options::default()
    }
}

/// One output, from the command line's format, `--output` (stdout if
/// None) and the format's options. Everything about where it goes and how
/// it is created is styx-events' ([`styx_events::Output`]).
pub fn open_with(
    format: Format,
    path: Option<&Path>,
    options: &Options,
    header: &Header,
) -> Result<Box<dyn EventWriter>> {
    Ok(styx_events::open(
        format,
        &Output::new(path, format),
        header,
        options,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn open_one(
        format: Format,
        path: Option<&Path>,
        detail: Detail,
        roll_mib: u64,
        compression: Compression,
        header: &Header,
    ) -> Result<Box<dyn EventWriter>> {
        open_with(
            format,
            path,
            &options(detail, roll_mib, compression),
            header,
        )
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("styx-outputs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn header() -> Header {
        Header::now(1, "/bin/emu", Vec::new())
    }

    #[test]
    fn a_symlink_is_not_followed() {
        let dir = scratch("symlink");
        let (target, link) = (dir.join("precious"), dir.join("out.jsonl"));
        std::fs::write(&target, "keep me").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // Planted by another user (nobody).
        lchown(&link, 65534);
        let err = open_one(
            Format::Jsonl,
            Some(&link),
            Detail::Normal,
            1,
            Compression::Zstd,
            &header(),
        )
        .err()
        .expect("a symlink is refused");
        let text = format!("{err:#}");
        assert!(
            text.contains(&format!("cannot write {}", link.display()))
                && text.contains("symbolic link"),
            "{text}"
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        // A dangling one is not followed either: nothing is created.
        let (missing, dangling) = (dir.join("missing"), dir.join("dangling"));
        std::os::unix::fs::symlink(&missing, &dangling).unwrap();
        lchown(&dangling, 65534);
        assert!(open_one(
            Format::Raw,
            Some(&dangling),
            Detail::Normal,
            1,
            Compression::Zstd,
            &header()
        )
        .is_err());
        assert!(!missing.exists());
        // Nor is a second name of a file truncated.
        let hard = dir.join("hard");
        std::fs::hard_link(&target, &hard).unwrap();
        let err = open_one(
            Format::Jsonl,
            Some(&hard),
            Detail::Normal,
            1,
            Compression::Zstd,
            &header(),
        )
        .err()
        .expect("a hard link is refused");
        assert!(format!("{err:#}").contains("hard links"), "{err:#}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A link of the user running styx-loader is followed (as `/dev/stdout`).
    #[test]
    fn our_own_symlinks_are_followed() {
        let dir = scratch("own-symlink");
        let (target, link) = (dir.join("real.jsonl"), dir.join("out.jsonl"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut writer = open_one(
            Format::Jsonl,
            Some(&link),
            Detail::Normal,
            1,
            Compression::Zstd,
            &header(),
        )
        .unwrap();
        writer.flush().unwrap();
        assert!(target.is_file(), "written through the link");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn lchown(path: &Path, uid: u32) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path we own.
        let rc = unsafe { libc::lchown(c.as_ptr(), uid, uid) };
        assert_eq!(rc, 0, "lchown {} (the tests run as root)", path.display());
    }

    #[test]
    fn new_outputs_are_private_and_old_ones_overwritten() {
        let dir = scratch("mode");
        let new = dir.join("new.styx");
        let mut writer = open_one(
            Format::Raw,
            Some(&new),
            Detail::Normal,
            1,
            Compression::Zstd,
            &header(),
        )
        .unwrap();
        writer.flush().unwrap();
        let mode = std::fs::metadata(&new).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        // An existing regular file is overwritten (truncated), keeping its mode.
        let old = dir.join("old.jsonl");
        std::fs::write(&old, "x".repeat(10_000)).unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mut writer = open_one(
            Format::Jsonl,
            Some(&old),
            Detail::Normal,
            1,
            Compression::Zstd,
            &header(),
        )
        .unwrap();
        writer.flush().unwrap();
        assert_eq!(std::fs::metadata(&old).unwrap().len(), 0);
        let mode = std::fs::metadata(&old).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640, "{mode:o}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
