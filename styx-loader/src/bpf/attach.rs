//! Attaches the loaded programs to the selected sites: one `uprobe_multi`
//! link per program and file (Linux 6.6+), or one perf-event link per site
//! (also the fallback when the kernel refuses a multi link). The cookie of
//! each site tells the shared program its event kind or argument spec.

use super::compat::multi_programs::MultiPrograms;
use super::compat::perf_link::{self, UprobeLink, UprobeTarget};
use super::compat::uprobe_multi::{self, MultiSite};
use super::load::Loaded;
use anyhow::{anyhow, Context, Result};
use aya::programs::UProbe;
use log::warn;
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use styx_common::{EventKind, Shape};
use styx_usdt::select::AttachSite;
use styx_usdt::target::Target;

/// The eBPF program that handles events of this kind.
pub fn program_name(kind: EventKind) -> &'static str {
    match kind.shape() {
        Shape::Args(2) => "styx_args2",
        Shape::Args(3) => "styx_args3",
        Shape::Args(4) => "styx_args4",
        Shape::Args(n) => unreachable!("no styx event has {n} plain arguments"),
        Shape::MemAccess => "styx_mem",
        Shape::Span => "styx_span",
        Shape::Marker => "styx_marker",
        Shape::Usdt => "styx_usdt",
    }
}

/// What keeps the sites attached: dropping it detaches them.
#[derive(Default)]
pub struct Links {
    multi: Vec<OwnedFd>,
    per_site: Vec<UprobeLink>,
}

impl Links {
    /// Sites attached through their own link, which take the kernel ~0.1 s
    /// each to detach.
    pub fn per_site(&self) -> usize {
        self.per_site.len()
    }
}

/// Attaches the programs to `sites` in `target`'s files, with the cookie that
/// tells the shared program which event kind (or argument spec) a site has.
pub fn attach_sites(loaded: &mut Loaded, target: &Target, sites: &[AttachSite]) -> Result<Links> {
    let mut links = Links::default();
    let one_by_one: Vec<&AttachSite> = match &loaded.multi {
        Some(programs) => attach_multi(programs, target, sites, &mut links),
        None => sites.iter().collect(),
    };
    if one_by_one.is_empty() {
        return Ok(links);
    }
    let pmu_type = perf_link::uprobe_pmu_type()
        .context("this kernel has no uprobe PMU (needs CONFIG_UPROBE_EVENTS)")?;
    for selected in one_by_one {
        let name = program_name(selected.kind);
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
        let link = perf_link::attach(
            pmu_type,
            program.fd()?.as_fd(),
            &link_target,
            selected.cookie,
        )
        .with_context(|| {
            format!(
                "attaching to {}:{} at {:#x} in {}",
                site.provider, site.name, site.address, file.name
            )
        })?;
        links.per_site.push(link);
    }
    Ok(links)
}

/// One uprobe_multi link per file and program. Returns the sites of links
/// the kernel refused, to be attached one by one (which names the site at
/// fault if that fails too).
fn attach_multi<'s>(
    programs: &MultiPrograms,
    target: &Target,
    sites: &'s [AttachSite],
    links: &mut Links,
) -> Vec<&'s AttachSite> {
    let mut groups: BTreeMap<(usize, &str), Vec<&AttachSite>> = BTreeMap::new();
    for selected in sites {
        groups
            .entry((selected.file, program_name(selected.kind)))
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
        let program = programs.get(name).expect("loaded for every selected kind");
        match uprobe_multi::attach(program.as_fd(), &file.read_at, &multi_sites, target.pid) {
            Ok(link) => links.multi.push(link),
            Err(e) => {
                warn!(
                    "{} sites of {} for {name}: {e}; attaching them one by one",
                    group.len(),
                    file.name
                );
                refused.extend(group);
            }
        }
    }
    refused
}
