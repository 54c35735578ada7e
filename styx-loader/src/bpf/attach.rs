//! Attaches the loaded programs to the selected sites: one `uprobe_multi`
//! link per program and file (Linux 6.6+), or one perf-event link per site
//! (also the fallback when the kernel refuses a multi link). The cookie of
//! each site tells the shared program its event kind or argument spec.
//! A site the kernel refuses is skipped with a warning; more sites than
//! [`MAX_PER_SITE`] are never attached one link each.

use super::compat::multi_programs::MultiPrograms;
use super::compat::perf_link::{self, UprobeLink, UprobeTarget};
use super::compat::uprobe_multi::{self, MultiSite};
use super::load::Loaded;
use anyhow::{anyhow, bail, Context, Result};
use aya::programs::UProbe;
use log::warn;
use nix::sys::resource::{getrlimit, setrlimit, Resource};
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use styx_common::Shape;
use styx_usdt::select::{AttachSite, Role};
use styx_usdt::target::Target;

/// The eBPF program a site is attached to. A batch-enable site never runs;
/// it takes the flush program, which is loaded anyway.
pub fn program_name(role: Role) -> &'static str {
    let kind = match role {
        Role::Event(kind) => kind,
        Role::BatchEnable(_) | Role::BatchFlush => return "styx_batch",
        Role::FunctionEntry => return "styx_fn_entry",
        Role::FunctionExit => return "styx_fn_exit",
        Role::FunctionTailCall => return "styx_fn_tail",
        Role::FunctionReturn => return "styx_fn_return",
    };
    match kind.shape() {
        Shape::Args(2) => "styx_args2",
        Shape::Args(3) => "styx_args3",
        Shape::Args(4) => "styx_args4",
        Shape::Args(n) => unreachable!("no styx event has {n} plain arguments"),
        Shape::ArgsAux(2) => "styx_insn",
        Shape::ArgsAux(3) => "styx_mem",
        Shape::ArgsAux(n) => unreachable!("no styx event has {n} arguments and aux"),
        Shape::Span => "styx_span",
        Shape::Marker => "styx_marker",
        Shape::Usdt => "styx_usdt",
        Shape::Function => unreachable!("function sites have their own roles"),
    }
}

/// The most sites attached with a link each (`--attach per-site`, or the
/// sites of multi links the kernel refused). Each costs a perf-event fd and a
/// link fd, and the kernel ~0.1 s to detach, one site at a time: 4,096 sites
/// take ~7 min to let go, and far more would exhaust file descriptors half-way
/// and then leave the loader closing links for tens of minutes. Above this,
/// tracing is refused before anything is attached.
pub const MAX_PER_SITE: usize = 4096;

/// The most sites attached at all. Every process that maps a traced file
/// gets a breakpoint written per site while the kernel maps it (100,000
/// sites held a process started under `--binary` in the kernel for over
/// 20 s before `main`), and each site costs kernel memory; real emulators
/// have hundreds. Above this, tracing is refused before anything is
/// attached.
pub const MAX_SITES: usize = 20_000;

/// File descriptors kept free for everything else the loader opens (maps,
/// programs, outputs, /proc files) when checking room for per-site links.
const SPARE_FDS: u64 = 64;

/// What keeps the sites attached: dropping it detaches them.
#[derive(Default)]
pub struct Links {
    multi: Vec<OwnedFd>,
    per_site: Vec<UprobeLink>,
    /// Sites attached through the multi links.
    multi_sites: usize,
}

impl Links {
    /// Sites attached through their own link, which take the kernel ~0.1 s
    /// each to detach.
    pub fn per_site(&self) -> usize {
        self.per_site.len()
    }

    /// Sites really attached, by either kind of link.
    pub fn attached(&self) -> usize {
        self.multi_sites + self.per_site.len()
    }

    /// Keeps `other`'s links too (a library's, attached later).
    pub fn absorb(&mut self, other: Links) {
        self.multi.extend(other.multi);
        self.per_site.extend(other.per_site);
        self.multi_sites += other.multi_sites;
    }
}

/// Raises the soft limit on open files to the hard limit, so that attaching
/// up to [`MAX_PER_SITE`] sites one by one (two fds each) cannot hit EMFILE
/// half-way (a warning if it cannot).
pub fn raise_fd_limit() {
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(limit) => limit,
        Err(e) => return warn!("cannot read the open-file limit: {e}"),
    };
    if soft < hard {
        if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            warn!("cannot raise the open-file limit from {soft} to {hard}: {e}");
        }
    }
}

/// Whether `count` sites may be attached one link each: refused (before
/// anything is attached that way) above [`MAX_PER_SITE`] or when the
/// open-file limit has no room for two fds per site.
fn check_per_site(count: usize) -> Result<()> {
    if count > MAX_PER_SITE {
        bail!(
            "refusing to attach {count} probe sites with a link each (at most {MAX_PER_SITE}: \
             every one costs two file descriptors and ~0.1 s of kernel time to detach); \
             use --attach multi (Linux 6.6+) or select fewer probes (--probes, --events, --functions)"
        );
    }
    if let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let needed = 2 * count as u64 + SPARE_FDS;
        if soft < needed {
            bail!(
                "refusing to attach {count} probe sites with a link each: that needs ~{needed} \
                 open files and the limit is {} (ulimit -n); use --attach multi (Linux 6.6+) \
                 or select fewer probes (--probes, --events, --functions)",
                soft
            );
        }
    }
    Ok(())
}

/// Attaches the programs to `sites` in `target`'s files, with the cookie that
/// tells the shared program which event kind (or argument spec) a site has.
///
/// A site the kernel refuses is skipped with a warning naming it; only when
/// no site at all could be attached is that an error. Sites to be attached
/// one link each are counted first: above [`MAX_PER_SITE`] nothing more is
/// attached and the whole trace fails.
pub fn attach_sites(loaded: &mut Loaded, target: &Target, sites: &[&AttachSite]) -> Result<Links> {
    if sites.len() > MAX_SITES {
        bail!(
            "refusing to attach {} probe sites (at most {MAX_SITES}: the kernel writes a \
             breakpoint per site into every process that maps the file, delaying each); \
             select fewer probes (--probes, --events, --functions)",
            sites.len()
        );
    }
    if loaded.multi.is_none() && sites.iter().any(|s| s.role == Role::FunctionReturn) {
        bail!("--function-exits uretprobe needs --attach multi (uprobe_multi links, Linux 6.6+)");
    }
    let mut links = Links::default();
    let one_by_one: Vec<&AttachSite> = match &loaded.multi {
        Some(programs) => attach_multi(programs, target, sites, &mut links)?,
        None => {
            check_per_site(sites.len())?;
            sites.to_vec()
        }
    };
    if one_by_one.is_empty() {
        return Ok(links);
    }
    let pmu_type = perf_link::uprobe_pmu_type()
        .context("this kernel has no uprobe PMU (needs CONFIG_UPROBE_EVENTS)")?;
    // One link per site. The kernel lets go of these one at a time, each
    // after an RCU grace period (~0.1 s): on a normal stop Session::detach
    // waits for it, and if the loader is SIGKILLed the kernel still releases
    // them one by one as it closes the fds, the semaphores staying raised
    // (the target running its probe code) until the last is gone. Multi
    // links go at once. Hence MAX_PER_SITE, checked before getting here.
    let mut last_error = None;
    for selected in one_by_one {
        let name = program_name(selected.role);
        let program: &mut UProbe = loaded
            .ebpf
            .program_mut(name)
            .ok_or_else(|| anyhow!("the eBPF object has no program {name}"))?
            .try_into()?;
        if program.fd().is_err() {
            program
                .load()
                .with_context(|| format!("loading eBPF program {name}"))?;
        }
        let site = &selected.site;
        let file = &target.files[selected.file];
        let link_target = UprobeTarget {
            path: &file.read_at,
            offset: site.file_offset,
            ref_ctr_offset: site.semaphore_offset,
            pid: target.pid,
        };
        match perf_link::attach(
            pmu_type,
            program.fd()?.as_fd(),
            &link_target,
            selected.cookie,
        ) {
            Ok(link) => links.per_site.push(link),
            Err(e) => {
                let what = format!(
                    "{}:{} at {:#x} in {}",
                    site.provider, site.name, site.address, file.name
                );
                warn!("skipping probe {what}: the kernel refused to attach it: {e}");
                last_error = Some(anyhow::Error::new(e).context(format!("attaching to {what}")));
            }
        }
    }
    if links.attached() == 0 {
        let error = last_error.expect("at least one site was tried");
        return Err(error.context(format!(
            "none of the {} probe sites could be attached",
            sites.len()
        )));
    }
    Ok(links)
}

/// One uprobe_multi link per file and program. Returns the sites of links
/// the kernel refused, to be attached one by one (which names the site at
/// fault if that fails too), unless there are more of them than
/// [`MAX_PER_SITE`]: then the kernel's refusal is the error.
fn attach_multi<'s>(
    programs: &MultiPrograms,
    target: &Target,
    sites: &[&'s AttachSite],
    links: &mut Links,
) -> Result<Vec<&'s AttachSite>> {
    let mut groups: BTreeMap<(usize, &str), Vec<&AttachSite>> = BTreeMap::new();
    for &selected in sites {
        groups
            .entry((selected.file, program_name(selected.role)))
            .or_default()
            .push(selected);
    }
    let mut refused = Vec::new();
    for ((file, name), group) in groups {
        let file = &target.files[file];
        let multi_sites: Vec<MultiSite> = group
            .iter()
            .map(|s| MultiSite {
                offset: s.site.file_offset,
                ref_ctr_offset: s.site.semaphore_offset,
                cookie: s.cookie,
            })
            .collect();
        let program = programs
            .get(name)
            .ok_or_else(|| anyhow!("eBPF program {name} was not loaded for uprobe_multi"))?;
        let returns = name == program_name(Role::FunctionReturn);
        let attached = uprobe_multi::attach(
            program.as_fd(),
            &file.read_at,
            &multi_sites,
            target.pid,
            returns,
        );
        match attached {
            Ok(link) => {
                links.multi.push(link);
                links.multi_sites += group.len();
            }
            Err(e) if returns => bail!(
                "the kernel refused the uprobe_multi link for the returns of {} functions of {}: \
                 {e}; --function-exits uretprobe needs uprobe_multi (Linux 6.6+)",
                group.len(),
                file.name
            ),
            Err(e) => {
                if let Err(limit) = check_per_site(refused.len() + group.len()) {
                    bail!(
                        "the kernel refused the uprobe_multi link for {} sites of {} ({name}): \
                         {e}; not falling back to one link per site: {limit:#}",
                        group.len(),
                        file.name
                    );
                }
                warn!(
                    "{} sites of {} for {name}: {e}; attaching them one by one",
                    group.len(),
                    file.name
                );
                refused.extend(group);
            }
        }
    }
    Ok(refused)
}

/// The flight recorder's `styx_fatal` on the `signal:signal_deliver`
/// tracepoint (Linux 2.6.32): sees the traced process being killed.
pub fn attach_fatal(loaded: &mut Loaded) -> Result<()> {
    let program: &mut aya::programs::TracePoint = loaded
        .ebpf
        .program_mut("styx_fatal")
        .ok_or_else(|| anyhow::anyhow!("no styx_fatal program"))?
        .try_into()?;
    program.load().context("loading styx_fatal")?;
    program.attach("signal", "signal_deliver").context(
        "attaching styx_fatal to the signal:signal_deliver tracepoint (is tracefs mounted?)",
    )?;
    Ok(())
}
