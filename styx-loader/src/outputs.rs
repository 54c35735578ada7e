//! The session's outputs: the writer for `-o` on `--output` (or stdout),
//! plus a raw capture on `--capture`; errors name the file that failed.

use anyhow::{anyhow, bail, Context, Result};
use std::cell::RefCell;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, IsTerminal, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use styx_events::is_dir_output;
use styx_events::Header;
use styx_events::{CallTable, CallTracker};
use styx_events::{Detail, Format};
use styx_events::{Discard, EventWriter, Labeled, Tee};

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
    /// No main output (`--summary`): only the capture, if any.
    pub discard: bool,
}

/// Opens every output and writes their starts.
#[cfg_attr(not(feature = "trace"), allow(dead_code))]
pub fn open(outputs: &Outputs<'_>, header: &Header) -> Result<Box<dyn EventWriter>> {
    let main = match outputs.discard {
        true => Box::new(Discard),
        false => open_one(
            outputs.format,
            outputs.output,
            outputs.detail,
            outputs.roll_mib,
            header,
        )?,
    };
    Ok(match outputs.capture {
        None => main,
        // When the main output closes or fails, the Tee keeps feeding the
        // capture, and the session still finishes it.
        Some(path) => Box::new(Tee::new(vec![
            main,
            open_one(
                Format::Raw,
                Some(path),
                outputs.detail,
                outputs.roll_mib,
                header,
            )?,
        ])),
    })
}

/// With traced functions (`--functions`): `out` behind the tracker that
/// pairs their calls, and the per-function table it fills.
pub fn track_calls(
    out: Box<dyn EventWriter>,
    header: &Header,
) -> (Box<dyn EventWriter>, Option<Rc<RefCell<CallTable>>>) {
    if header.functions.is_empty() {
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

/// One output, unbuffered: every format gathers its own chunks.
pub fn open_one(
    format: Format,
    path: Option<&Path>,
    detail: Detail,
    roll_mib: u64,
    header: &Header,
) -> Result<Box<dyn EventWriter>> {
    refuse_binary_on_terminal(format, path)?;
    let (out, name): (Box<dyn Write>, String) = match path {
        Some(dir) if format == Format::Parquet && is_dir_output(dir) => {
            // Files rolled in the directory, each created as it begins.
            if !dir.is_dir() {
                std::fs::DirBuilder::new()
                    .mode(0o700)
                    .recursive(true)
                    .create(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            (Box::new(io::sink()), dir.display().to_string())
        }
        Some(path) => {
            let file = create(path)?;
            (Box::new(file), path.display().to_string())
        }
        None => (Box::new(io::stdout()), "stdout".to_string()),
    };
    let labeled = Labeled::new(out, name.clone());
    let options = styx_events::Options {
        // More files beside the output (Tenet's threads, rolled Parquet),
        // created as carefully as the output.
        opener: Rc::new(|path: &Path| {
            create(path)
                .map(|file| Box::new(file) as Box<dyn Write>)
                .map_err(|e| io::Error::other(format!("{e:#}")))
        }),
        roll_bytes: roll_mib << 20,
        ..styx_events::Options::new(path, detail)
    };
    styx_events::open(format, Box::new(labeled), header, &options)
        .with_context(|| format!("writing the start of {name}"))
}

/// A binary format is not written to a terminal: it needs `--output` or a
/// pipe. Checked when an output opens, and before attaching for outputs
/// opened later (the flight recorder's dumps).
pub fn refuse_binary_on_terminal(format: Format, path: Option<&Path>) -> Result<()> {
    if format.is_binary() && path.is_none() && io::stdout().is_terminal() {
        bail!(
            "-o {} is binary: give --output FILE, or pipe it",
            format.name()
        );
    }
    Ok(())
}

/// Opens `path` to write an output, safely when run as root in a directory
/// others can write (/tmp): a symbolic link owned by another user is not
/// followed (`O_NOFOLLOW`), so a link planted there cannot make the run
/// overwrite a file of its choosing or create one where it likes (the rule
/// of the kernel's `fs.protected_symlinks`, applied everywhere); a link of
/// our own, such as `/dev/stdout`, is. Nor is a regular file with other
/// hard links truncated. A new file is created
/// 0600, as perf creates perf.data: a trace holds the traced program's data.
///
/// An existing regular file (one name only) is overwritten, keeping its owner
/// and mode, so `--output` can name the same file run after run; whoever
/// could put a regular file there could write it anyway. Other existing
/// files (`/dev/null`, a named pipe) are written as they are.
pub fn create(path: &Path) -> Result<File> {
    let name = path.display();
    // SAFETY: geteuid has no preconditions.
    let ours = |link: &Metadata| link.uid() == unsafe { libc::geteuid() };
    let follow = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink() && ours(&m));
    let no_follow = if follow { 0 } else { libc::O_NOFOLLOW };
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(no_follow | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::EACCES) if path.is_symlink() => anyhow!(
                "cannot write {name}: it is a symbolic link owned by another user, which \
                 styx-loader does not follow for an output (give the path of the file it \
                 points to)"
            ),
            _ => anyhow::Error::new(e).context(format!("cannot write {name}")),
        })?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot write {name}"))?;
    if meta.file_type().is_file() {
        if meta.nlink() > 1 {
            bail!(
                "cannot write {name}: it has {} hard links, so truncating it would change \
                 the other names too (remove it first, or choose another name)",
                meta.nlink()
            );
        }
        // Truncated only now that it is known to be a file of its own.
        file.set_len(0)
            .with_context(|| format!("cannot write {name}"))?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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
        let err = open_one(Format::Jsonl, Some(&link), Detail::Normal, 1, &header())
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
        assert!(open_one(Format::Raw, Some(&dangling), Detail::Normal, 1, &header()).is_err());
        assert!(!missing.exists());
        // Nor is a second name of a file truncated.
        let hard = dir.join("hard");
        std::fs::hard_link(&target, &hard).unwrap();
        let err = open_one(Format::Jsonl, Some(&hard), Detail::Normal, 1, &header())
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
        let mut writer =
            open_one(Format::Jsonl, Some(&link), Detail::Normal, 1, &header()).unwrap();
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
        let mut writer = open_one(Format::Raw, Some(&new), Detail::Normal, 1, &header()).unwrap();
        writer.flush().unwrap();
        let mode = std::fs::metadata(&new).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        // An existing regular file is overwritten (truncated), keeping its mode.
        let old = dir.join("old.jsonl");
        std::fs::write(&old, "x".repeat(10_000)).unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mut writer = open_one(Format::Jsonl, Some(&old), Detail::Normal, 1, &header()).unwrap();
        writer.flush().unwrap();
        assert_eq!(std::fs::metadata(&old).unwrap().len(), 0);
        let mode = std::fs::metadata(&old).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640, "{mode:o}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
