//! The flush site's semaphore block (`styx_common::batch::FlushSemaphore`)
//! in the traced process, and the two system calls that read and write
//! the process's memory (through `nix`): how the loader reaches the batch registry
//! ([`super::partial`]) and lossless mode's flow control ([`super::flow`]).

use anyhow::{bail, Context, Result};
use std::fs;
use std::os::unix::fs::MetadataExt;
use styx_common::batch::{
    reads_layout, BATCH_LAYOUT_VERSION, LAYOUT_VERSION_OFFSET, OLDEST_BATCH_LAYOUT_VERSION,
};
use styx_usdt::note::ProbeSite;
use styx_usdt::select::AttachSite;
use styx_usdt::target::{ElfFile, Target};

/// A flush site, in a file of the target.
pub struct FlushSite {
    pub file: ElfFile,
    /// The file's number in the target: what its batch records carry
    /// (`aux`), which names its declared types' tags.
    pub number: u8,
    pub site: ProbeSite,
}

/// The flush site's semaphore block in process `pid` (whose
/// `/proc/PID/maps` is `maps`): its link-time address placed with the load
/// bias of the file's mapping, once its layout version says it is a
/// block this loader knows, of this layout or an older one it reads
/// (nothing is written to a process otherwise).
/// None when the process does not map the file.
pub fn address(pid: u32, maps: &str, flush: &FlushSite) -> Result<Option<u64>> {
    let Some(bias) = load_bias(maps, &flush.file, &flush.site)? else {
        return Ok(None);
    };
    let block = bias.wrapping_add(flush.site.semaphore);
    let mut version = [0u8; 2];
    remote::read(pid, block + LAYOUT_VERSION_OFFSET, &mut version)
        .context("reading the flush site's semaphore block")?;
    let version = u16::from_le_bytes(version);
    if !reads_layout(version) {
        bail!(
            "{} was built with a styx-probe whose batch layout is version {version}, this \
             loader knows versions {OLDEST_BATCH_LAYOUT_VERSION} to {BATCH_LAYOUT_VERSION}",
            flush.file.name
        );
    }
    Ok(Some(block))
}

impl FlushSite {
    /// The selected flush site `selected` of `target`.
    pub fn of(target: &Target, selected: &AttachSite) -> FlushSite {
        FlushSite {
            file: target.files[selected.file].clone(),
            number: super::file_number(selected.file),
            site: selected.site.clone(),
        }
    }
}

/// A batch-enable site, in a file of the target.
pub struct EnableSite {
    pub file: ElfFile,
    pub site: ProbeSite,
}

impl EnableSite {
    /// The selected batch-enable site `selected` of `target`.
    pub fn of(target: &Target, selected: &AttachSite) -> EnableSite {
        EnableSite {
            file: target.files[selected.file].clone(),
            site: selected.site.clone(),
        }
    }
}

/// Whether another tracer keeps batched events enabled in process `pid`
/// (whose `/proc/PID/maps` is `maps`): a semaphore of `enable` still
/// raised once this loader let go of those sites. The kernel raises a
/// site's semaphore once however many tracers attach to it, so this is
/// how a stopping loader learns that its threads still append, and that
/// their pending batches are another tracer's as well.
pub fn others_batching(pid: u32, maps: &str, enable: &[EnableSite]) -> bool {
    enable.iter().any(|e| {
        let Ok(Some(bias)) = load_bias(maps, &e.file, &e.site) else {
            return false;
        };
        let mut count = [0u8; 2];
        remote::read(pid, bias.wrapping_add(e.site.semaphore), &mut count).is_ok()
            && u16::from_le_bytes(count) != 0
    })
}

/// The processes that map a flush site's file (for `--binary`, whose
/// processes the loader does not know by pid).
pub fn pids_mapping(sites: &[FlushSite]) -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = dir
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|pid| {
            let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
            sites
                .iter()
                .any(|site| matches!(load_bias(&maps, &site.file, &site.site), Ok(Some(_))))
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Runtime address minus link-time address for `file` in process `pid`:
/// from the mapping (same device and inode) that holds the site's code.
fn load_bias(maps: &str, file: &ElfFile, site: &ProbeSite) -> Result<Option<u64>> {
    let meta = fs::metadata(&file.read_at).with_context(|| format!("reading {}", file.name))?;
    let (major, minor) = (libc::major(meta.dev()), libc::minor(meta.dev()));
    for line in maps.lines() {
        let mut fields = line.split_whitespace();
        let (Some(range), Some(_perms), Some(offset), Some(dev), Some(inode)) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            continue;
        };
        let same_file = inode.parse::<u64>().ok() == Some(meta.ino())
            && dev == format!("{major:02x}:{minor:02x}");
        let (Some((start, end)), Ok(offset)) =
            (range.split_once('-'), u64::from_str_radix(offset, 16))
        else {
            continue;
        };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
        else {
            continue;
        };
        if same_file && (offset..offset + (end - start)).contains(&site.file_offset) {
            let runtime = start + (site.file_offset - offset);
            return Ok(Some(runtime.wrapping_sub(site.address)));
        }
    }
    Ok(None)
}

/// The traced process's memory: the two system calls.
pub mod remote {
    use nix::sys::uio::{process_vm_readv, process_vm_writev, RemoteIoVec};
    use nix::unistd::Pid;
    use std::io::{self, IoSlice, IoSliceMut};

    /// Fills `buf` from address `at` of process `pid`.
    pub fn read(pid: u32, at: u64, buf: &mut [u8]) -> io::Result<()> {
        let wanted = buf.len();
        let remote = remote(at, wanted);
        let n = process_vm_readv(
            Pid::from_raw(pid as i32),
            &mut [IoSliceMut::new(buf)],
            &remote,
        );
        complete(n, wanted)
    }

    /// Writes `bytes` at address `at` of process `pid`.
    pub fn write(pid: u32, at: u64, bytes: &[u8]) -> io::Result<()> {
        let remote = remote(at, bytes.len());
        let n = process_vm_writev(Pid::from_raw(pid as i32), &[IoSlice::new(bytes)], &remote);
        complete(n, bytes.len())
    }

    fn remote(at: u64, len: usize) -> [RemoteIoVec; 1] {
        [RemoteIoVec {
            base: at as usize,
            len,
        }]
    }

    fn complete(n: nix::Result<usize>, wanted: usize) -> io::Result<()> {
        match n {
            Err(errno) => Err(errno.into()),
            Ok(n) if n != wanted => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{n} of {wanted} bytes"),
            )),
            Ok(_) => Ok(()),
        }
    }
}
