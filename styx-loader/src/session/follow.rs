//! Libraries the traced process maps after tracing started: QEMU loads its
//! TCG plugin with `dlopen` after `exec`, emulator front ends load their
//! cores as plugins, and a command after `--` maps even its linked
//! libraries only after the loader has attached.
//!
//! Design: the loader looks at `/proc/PID/maps` again every [`LOOK_EVERY`]
//! from its drain loop (one read of a small file; an eBPF program on
//! `mmap` would see a mapping sooner, but the attach that follows would
//! still come from this loop, and a library is mapped once). A file not
//! seen before (by device and inode, so a library mapped, unmapped and
//! mapped again, or under two names, is read once) has its notes read;
//! its sites are selected as the ones found at the start were (styx's own,
//! `--probes`, `--functions`), then attached with the pid filter: the
//! kernel raises their semaphores in the process as it installs the
//! breakpoints (`ref_ctr_offset`), the flush site first, then the
//! batch-enable sites, and the flush site joins the batch plumbing
//! (lossless credit, partial batches). Events the library fires between
//! its `dlopen` and this attach (up to [`LOOK_EVERY`] plus the attach) are
//! not seen: the process is not held meanwhile (stopping it would take
//! ptrace, which a debugger may already hold).
//!
//! Other providers' probes and functions get spec ids and function ids
//! after the ones found at start, named in the session's header as it
//! grows: an output that cannot name them once opened
//! (`EventWriter::header_grew`: a capture's header and Parquet's columns
//! are written when they open) leaves them unattached, with a warning;
//! styx's own event types need no header and are taken in every format.
//! A file's declared event types (`styx_probe::event!`) are taken, when
//! `--probes` names them, one hit per event as any provider's probes (the
//! batches' declared tags are known only from the header at start).
//!
//! A hostile process cannot make this unbounded: at most
//! [`MAX_FILES_SEEN`] files are ever read and [`MAX_LATE_FILES`] attached,
//! files are read for at most [`READ_BUDGET`] a look (the drain loop stays
//! responsive), spec ids stop at the room the `SPECS` map was made with,
//! and functions at `--functions`' own limit.

use super::batches::flush_block::{EnableSite, FlushSite};
use super::batches::Batches;
use super::drain::Sink;
use crate::bpf::attach::{self, Links};
use crate::bpf::load::{self, Loaded};
use crate::search::{plural, MAX_FUNCTIONS};
use anyhow::Result;
use std::collections::{HashSet, VecDeque};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use styx_common::{EventKind, Shape};
use styx_events::escape::controls;
use styx_events::{Header, UsdtInfo};
use styx_usdt::functions::{read_functions, FunctionsError, Matcher};
use styx_usdt::note::{read_probe_table, NotesError};
use styx_usdt::probe_args::ProbeArgs;
use styx_usdt::select::{AttachSite, FunctionExits, Role, Selection, Wanted};
use styx_usdt::symbols::Symbols;
use styx_usdt::target::{ElfFile, Target};

/// How often the process's mappings are looked at.
pub const LOOK_EVERY: Duration = Duration::from_millis(100);

/// Files (device and inode) read at most over a session: a process
/// mapping files without end is followed this far, then no more (said once).
pub const MAX_FILES_SEEN: usize = 4096;

/// Files attached after the start at most.
pub const MAX_LATE_FILES: usize = 64;

/// Time spent reading new files per look at most: the rest wait for the
/// next drain, so the ring is still drained every few ms.
const READ_BUDGET: Duration = Duration::from_millis(10);

/// Files that cannot be read said at most.
const UNREADABLE_SAID: usize = 8;

/// Spec ids kept free in the `SPECS` map for other providers' probes of
/// libraries mapped later.
pub const SPARE_SPECS: u32 = 1024;

/// What to take from a library mapped later: what the command line asked
/// for at the start.
pub struct Asked {
    pub kinds: Vec<EventKind>,
    pub batched: bool,
    pub usdt_globs: Vec<glob::Pattern>,
    pub probe_args: Vec<ProbeArgs>,
    pub allow_unverified: bool,
    /// `--functions` (and its exclusions), how returns are probed, and
    /// whether more than [`MAX_FUNCTIONS`] may be.
    pub functions: Option<(Matcher, FunctionExits, bool)>,
}

impl Asked {
    /// The eBPF programs a library's sites may need, loaded at the start
    /// (a multi link takes only a program loaded for it).
    pub fn programs(&self) -> Vec<&'static str> {
        let mut roles: Vec<Role> = (self.kinds.iter())
            .filter(|k| !matches!(k.shape(), Shape::Usdt | Shape::Function))
            .map(|&k| Role::Event(k))
            .collect();
        roles.push(Role::BatchFlush);
        if !self.usdt_globs.is_empty() {
            roles.push(Role::Event(EventKind::Usdt));
        }
        match &self.functions {
            Some((_, FunctionExits::Ret, _)) => roles.extend([
                Role::FunctionEntry,
                Role::FunctionExit,
                Role::FunctionTailCall,
            ]),
            Some((_, FunctionExits::Uretprobe, _)) => {
                roles.extend([Role::FunctionEntry, Role::FunctionReturn])
            }
            None => {}
        }
        let mut programs: Vec<&'static str> = roles.into_iter().map(attach::program_name).collect();
        programs.sort_unstable();
        programs.dedup();
        programs
    }
}

/// A library attached after the start, for the summary.
pub struct LateFile {
    pub name: String,
    /// Since the session started.
    pub after: Duration,
    pub sites: usize,
}

/// The libraries of one process, followed.
pub struct Follow {
    pid: u32,
    asked: Asked,
    /// The target's files as they grow (sites name files by index).
    target: Target,
    /// Every site selected so far: spec ids and function ids go on from it.
    selection: Selection,
    /// The session's header as it grows.
    pub header: Header,
    /// Spec ids the `SPECS` map has room for.
    spec_room: usize,
    /// Files (device, inode) read already, or queued.
    seen: HashSet<(u64, u64)>,
    /// Files mapped and not read yet (a look reads them for at most
    /// [`READ_BUDGET`]); at most [`MAX_FILES_SEEN`] in all.
    pending: VecDeque<Mapped>,
    /// The loader's own executable: a command held before `exec` still
    /// maps the loader's files, which are not its own.
    loader_exe: Option<(u64, u64)>,
    next_look: Instant,
    started: Instant,
    /// Said that no more files are read.
    full: bool,
    /// Files that could not be read.
    unreadable: usize,
    /// Sites attached at the start.
    pub initial_sites: usize,
    /// Why nothing was attached at the start, when nothing was.
    pub waiting: Option<String>,
    pub late: Vec<LateFile>,
}

impl Follow {
    /// Follows `target`'s process (None for `--binary`, whose processes
    /// map the one file) from `selection`, what was selected at the start,
    /// whose files are not read again; `spec_room` spec ids in all.
    pub fn new(
        target: &Target,
        selection: Selection,
        header: Header,
        asked: Asked,
        spec_room: usize,
    ) -> Option<Follow> {
        let pid = target.pid?;
        let seen = target
            .files
            .iter()
            .filter_map(|f| identity(&std::fs::metadata(&f.read_at).ok()?))
            .collect();
        Some(Follow {
            pid,
            asked,
            target: Target {
                pid: target.pid,
                files: target.files.clone(),
                name: target.name.clone(),
                new_processes: false,
                ended_by: None,
            },
            selection,
            header,
            spec_room,
            seen,
            pending: VecDeque::new(),
            loader_exe: std::fs::metadata("/proc/self/exe")
                .ok()
                .and_then(|m| identity(&m)),
            next_look: Instant::now(),
            started: Instant::now(),
            full: false,
            unreadable: 0,
            initial_sites: 0,
            waiting: None,
            late: Vec::new(),
        })
    }

    /// Whether a look is due.
    pub fn due(&self) -> bool {
        Instant::now() >= self.next_look
    }

    /// Looks at the process's mappings and attaches the sites of files
    /// not seen before; each attached file's spec names are returned
    /// (`provider:probe` by spec id, from the first new one on). Never an
    /// error: what cannot be followed is said as a warning.
    pub fn look(
        &mut self,
        loaded: &mut Loaded,
        sink: &mut Sink,
        batches: &mut Batches,
        links: &mut Links,
        batch_links: &mut Links,
    ) {
        self.next_look = Instant::now() + LOOK_EVERY;
        if self.pending.is_empty() {
            self.queue_new_files();
        }
        let started = Instant::now();
        while let Some(mapped) = self.pending.pop_front() {
            if self.late.len() >= MAX_LATE_FILES {
                self.give_up();
                break;
            }
            if let Some(file) = self.reachable(&mapped) {
                self.attach_file(file, loaded, sink, batches, links, batch_links);
            }
            if started.elapsed() >= READ_BUDGET && !self.pending.is_empty() {
                // The rest after the next drain.
                self.next_look = Instant::now();
                break;
            }
        }
    }

    /// Queues the files the process maps now that were not seen before.
    fn queue_new_files(&mut self) {
        if self.full {
            return;
        }
        // An exited process maps nothing; a command not yet past `exec`
        // maps the loader.
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)) else {
            return;
        };
        let exe = std::fs::metadata(format!("/proc/{}/exe", self.pid))
            .ok()
            .and_then(|m| identity(&m));
        if exe.is_some() && exe == self.loader_exe {
            return;
        }
        for mapping in maps.lines().filter_map(Mapping::parse) {
            if self.seen.contains(&mapping.identity) {
                continue;
            }
            if self.seen.len() >= MAX_FILES_SEEN {
                return self.give_up();
            }
            self.seen.insert(mapping.identity);
            self.pending.push_back(Mapped {
                identity: mapping.identity,
                path: mapping.path.to_string(),
                start: mapping.start,
                offset: mapping.offset,
            });
        }
    }

    /// Past a bound: says so once, and follows no more.
    fn give_up(&mut self) {
        self.pending.clear();
        if !self.full {
            self.full = true;
            log::warn!(
                "pid {} mapped more files than styx follows ({MAX_FILES_SEEN} read, \
                 {MAX_LATE_FILES} attached at most): libraries it maps from now on are not \
                 traced",
                self.pid
            );
        }
    }

    /// The file `mapped`, read through the process's root; None if the
    /// path names another file now (replaced since it was mapped).
    fn reachable(&self, mapped: &Mapped) -> Option<ElfFile> {
        let read_at = PathBuf::from(format!("/proc/{}/root{}", self.pid, mapped.path));
        let meta = std::fs::metadata(&read_at).ok()?;
        if identity(&meta) != Some(mapped.identity) || !meta.is_file() {
            return None;
        }
        Some(ElfFile {
            read_at,
            name: mapped.path.clone(),
            mapped_at: Some((mapped.start, mapped.offset)),
        })
    }

    /// Selects and attaches the sites of `file`, newly mapped.
    fn attach_file(
        &mut self,
        file: ElfFile,
        loaded: &mut Loaded,
        sink: &mut Sink,
        batches: &mut Batches,
        links: &mut Links,
        batch_links: &mut Links,
    ) {
        let index = self.target.files.len();
        let (sites_before, specs_before, functions_before, rejected_before) = (
            self.selection.sites.len(),
            self.selection.usdt.len(),
            self.selection.functions.len(),
            self.selection.rejected.len(),
        );
        let wanted = Wanted {
            kinds: &self.asked.kinds,
            batched: self.asked.batched,
            usdt_globs: &self.asked.usdt_globs,
            probe_args: &self.asked.probe_args,
            allow_unverified: self.asked.allow_unverified,
            // Declared types' batch tags are named by the header at start.
            declared: &|_, _, _| false,
        };
        match read_probe_table(&file.read_at) {
            Ok(table) => {
                let mut symbols = Symbols::of(&file);
                wanted.pick(index, &table, &mut symbols, &mut self.selection);
            }
            // Fonts, locale archives, caches: no probes.
            Err(NotesError::NotElf { .. }) => return,
            Err(e) => return self.unreadable(format!("not following a library: {e}")),
        }
        if let Some((matcher, exits, force)) = &self.asked.functions {
            match read_functions(&file.read_at, matcher) {
                Ok(table) => {
                    let total = functions_before + table.functions.len();
                    if total > MAX_FUNCTIONS && !force {
                        log::warn!(
                            "{}: {} match --functions, more than {MAX_FUNCTIONS} with those \
                             traced already: not traced (--force takes them)",
                            controls(&file.name),
                            plural(table.functions.len(), "function")
                        );
                    } else {
                        for (name, why) in &table.refused {
                            log::warn!(
                                "{}: {}: {}: not traced",
                                controls(&file.name),
                                controls(name),
                                controls(why)
                            );
                        }
                        self.selection.add_functions(index, &table, *exits);
                    }
                }
                Err(FunctionsError::NotElf { .. }) => {}
                Err(e) => self.unreadable(format!("not following a library's functions: {e}")),
            }
        }
        for rejected in &self.selection.rejected[rejected_before..] {
            log::warn!("{rejected}");
        }
        if self.selection.sites.len() == sites_before {
            return;
        }
        self.target.files.push(file);
        let name = controls(&self.target.files[index].name).into_owned();
        if !self.name_new_probes(specs_before, functions_before, sink, &name) {
            self.forget(sites_before, specs_before, functions_before);
            if self.selection.sites.len() == sites_before {
                return;
            }
        }
        if let Err(e) = load::set_specs(loaded, specs_before, &self.selection.usdt[specs_before..])
        {
            log::warn!("{name}: its probes are not traced: {e:#}");
            return self.forget_all(sites_before, specs_before, functions_before);
        }
        match self.attach(sites_before, loaded, batches) {
            Ok((rest, enable)) => {
                let sites = rest.attached() + enable.attached();
                let after = self.started.elapsed();
                eprintln!(
                    "styx-loader: attached {sites} probe sites in {name}, mapped by pid {} \
                     {:.2} s after tracing started (its events before this were not seen)",
                    self.pid,
                    after.as_secs_f64()
                );
                links.absorb(rest);
                batch_links.absorb(enable);
                self.late.push(LateFile { name, after, sites });
            }
            Err(e) => {
                log::warn!("{name}: its probes are not traced: {e:#}");
                self.forget_all(sites_before, specs_before, functions_before);
            }
        }
    }

    /// Says why a file cannot be read, for the first [`UNREADABLE_SAID`]
    /// such files (a process may map thousands of malformed ones).
    fn unreadable(&mut self, why: String) {
        self.unreadable += 1;
        match self.unreadable {
            n if n < UNREADABLE_SAID => log::warn!("{why}"),
            UNREADABLE_SAID => log::warn!("{why} (further files that cannot be read: not said)"),
            _ => {}
        }
    }

    /// Names the new spec ids and functions in the header and asks the
    /// output to take them; false (said) if it cannot.
    fn name_new_probes(
        &mut self,
        specs_before: usize,
        functions_before: usize,
        sink: &mut Sink,
        name: &str,
    ) -> bool {
        let (specs, functions) = (&self.selection.usdt, &self.selection.functions);
        if specs.len() == specs_before && functions.len() == functions_before {
            return true;
        }
        if specs.len() > self.spec_room {
            log::warn!(
                "{name}: its --probes and --functions are not traced: more probes than the {} \
                 styx makes room for",
                self.spec_room
            );
            return false;
        }
        let mut header = self.header.clone();
        for (id, site) in specs.iter().enumerate().skip(specs_before) {
            let args = site.args.iter().map(|a| (a.name.clone(), a.ty));
            header
                .usdt
                .push(UsdtInfo::new(id as u32, &site.provider, &site.probe, args));
        }
        header.functions = functions.clone();
        if !sink.header_grew(&header) {
            log::warn!(
                "{name}: its --probes and --functions are not traced: this output names probes \
                 only as it opens (-o text, jsonl, chrome and perfetto take them; or trace the library with \
                 --binary {name})"
            );
            return false;
        }
        self.header = header;
        true
    }

    /// Attaches the sites from `first` on: the flush site before the
    /// batch-enable sites, and known to the batch plumbing in between.
    fn attach(
        &mut self,
        first: usize,
        loaded: &mut Loaded,
        batches: &mut Batches,
    ) -> Result<(Links, Links)> {
        let new = &self.selection.sites[first..];
        let (enable, rest): (Vec<&AttachSite>, Vec<&AttachSite>) = new
            .iter()
            .partition(|s| matches!(s.role, Role::BatchEnable(_)));
        let rest_links = match rest.is_empty() {
            true => Links::default(),
            false => attach::attach_sites(loaded, &self.target, &rest)?,
        };
        for flush in rest.iter().filter(|s| s.role == Role::BatchFlush) {
            batches.add_site(FlushSite::of(&self.target, flush));
        }
        let enable_links = match enable.is_empty() {
            true => Links::default(),
            false => attach::attach_sites(loaded, &self.target, &enable)?,
        };
        for site in &enable {
            batches.add_enable_site(EnableSite::of(&self.target, site));
        }
        Ok((rest_links, enable_links))
    }

    /// Leaves out the new probes and functions the output cannot name,
    /// keeping styx's own sites.
    fn forget(&mut self, sites: usize, specs: usize, functions: usize) {
        let named = |s: &AttachSite| {
            matches!(
                s.role,
                Role::Event(EventKind::Usdt)
                    | Role::FunctionEntry
                    | Role::FunctionExit
                    | Role::FunctionTailCall
                    | Role::FunctionReturn
            )
        };
        let mut i = 0;
        self.selection.sites.retain(|s| {
            i += 1;
            i <= sites || !named(s)
        });
        self.selection.usdt.truncate(specs);
        self.selection.functions.truncate(functions);
    }

    /// Leaves out every new site (they could not be attached).
    fn forget_all(&mut self, sites: usize, specs: usize, functions: usize) {
        self.selection.sites.truncate(sites);
        self.selection.usdt.truncate(specs);
        self.selection.functions.truncate(functions);
        self.header.usdt.truncate(specs);
        self.header.functions.truncate(functions);
    }

    /// Sites attached, at the start and since.
    pub fn attached(&self) -> usize {
        self.initial_sites + self.late.iter().map(|l| l.sites).sum::<usize>()
    }
}

/// A file's device and inode.
fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    Some((meta.dev(), meta.ino()))
}

/// A file the process mapped, to be read.
struct Mapped {
    identity: (u64, u64),
    path: String,
    start: u64,
    offset: u64,
}

/// One line of `/proc/PID/maps` that maps a file.
pub(super) struct Mapping<'a> {
    start: u64,
    offset: u64,
    /// The file's device and inode.
    pub(super) identity: (u64, u64),
    path: &'a str,
}

impl Mapping<'_> {
    /// `start-end perms offset major:minor inode path` (the path may hold
    /// spaces); None for anonymous mappings, deleted files and the like.
    pub(super) fn parse(line: &str) -> Option<Mapping<'_>> {
        let mut fields = line.splitn(6, ' ');
        let (range, _, offset, dev, inode, path) = (
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
        );
        let path = path.trim_start();
        if !path.starts_with('/') || path.ends_with(" (deleted)") {
            return None;
        }
        let start = u64::from_str_radix(range.split_once('-')?.0, 16).ok()?;
        let offset = u64::from_str_radix(offset, 16).ok()?;
        let (major, minor) = dev.split_once(':')?;
        let (major, minor) = (
            u32::from_str_radix(major, 16).ok()?,
            u32::from_str_radix(minor, 16).ok()?,
        );
        let inode: u64 = inode.parse().ok()?;
        (inode != 0).then_some(Mapping {
            start,
            offset,
            identity: (libc::makedev(major, minor), inode),
            path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_name_files_by_device_and_inode() {
        let line = "7f3c1a000000-7f3c1a021000 r-xp 00002000 fd:01 1234567   /usr/lib/a b.so";
        let m = Mapping::parse(line).expect("a file");
        assert_eq!(m.start, 0x7f3c1a000000);
        assert_eq!(m.offset, 0x2000);
        assert_eq!(m.identity, (libc::makedev(0xfd, 1), 1234567));
        assert_eq!(m.path, "/usr/lib/a b.so");
        for other in [
            "7ffd5000-7ffd6000 rw-p 00000000 00:00 0                  [stack]",
            "7f00-7f01 rw-p 00000000 00:00 0 ",
            "7f00-7f01 r-xp 00000000 fd:01 99 /tmp/lib.so (deleted)",
            "garbage",
        ] {
            assert!(Mapping::parse(other).is_none(), "{other}");
        }
    }
}
