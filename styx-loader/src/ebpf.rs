//! Loads styx's eBPF object and attaches its programs to probe sites.

use crate::multi_programs::{self, MultiPrograms};
use crate::sites::{Selected, UsdtSite};
use crate::target::Target;
use crate::uprobe_link::{self, UprobeLink, UprobeTarget};
use crate::uprobe_multi::{self, MultiSite};
use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, MapData, PerCpuArray, RingBuf};
use aya::programs::UProbe;
use aya::{Ebpf, EbpfLoader};
use std::collections::BTreeMap;
use std::os::fd::{AsFd, OwnedFd};
use styx_common::{EventKind, Shape, UsdtSpec, EVENT_KIND_SLOTS};

/// Built from styx-ebpf by `cargo xtask build-ebpf`; committed, so the loader
/// builds with stable Rust alone. CI checks it matches its source.
static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("CARGO_MANIFEST_DIR"), "/ebpf/styx.bpf.o"));

/// How sites are attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AttachMode {
    /// One `uprobe_multi` link per program and file (Linux 6.6+): attaches
    /// and detaches any number of sites at once.
    Multi,
    /// One perf-event link per site, as bpftrace does: the kernel needs
    /// ~0.1 s per site to detach them.
    PerSite,
}

pub struct LoadOptions<'a> {
    /// Only events from this process (0: any process).
    pub pid: u32,
    /// The programs the sites need.
    pub programs: &'a [&'static str],
    pub mode: AttachMode,
    pub ring_bytes: u32,
    pub ebpf_log: bool,
    /// Argument specs of the other providers' sites, by cookie.
    pub usdt: &'a [UsdtSite],
}

/// A spec as a map value (aya's Pod is a foreign trait).
#[derive(Clone, Copy)]
#[repr(transparent)]
struct SpecValue(UsdtSpec);
// SAFETY: UsdtSpec is repr(C) plain data without padding (bytemuck::Pod).
unsafe impl aya::Pod for SpecValue {}

pub struct Loaded {
    pub ebpf: Ebpf,
    /// The programs again, loaded for uprobe_multi links; None when
    /// attaching per site.
    multi: Option<MultiPrograms>,
    pub ring: RingBuf<MapData>,
    pub drops: PerCpuArray<MapData, u64>,
}

pub fn load(options: &LoadOptions<'_>) -> Result<Loaded> {
    let log_level: u8 = if options.ebpf_log { 0xff } else { 0 };
    let specs = options.usdt.len().max(1) as u32;
    let mut ebpf = EbpfLoader::new()
        .override_global("TARGET_TGID", &options.pid, true)
        .override_global("AYA_LOG_LEVEL", &log_level, false)
        .map_max_entries("EVENTS", options.ring_bytes)
        .map_max_entries("SPECS", specs)
        .load(OBJECT)
        .context("loading styx's eBPF object into the kernel")?;
    let mut spec_map: Array<_, SpecValue> = Array::try_from(
        ebpf.map_mut("SPECS")
            .ok_or_else(|| anyhow!("no SPECS map"))?,
    )?;
    for (i, site) in options.usdt.iter().enumerate() {
        spec_map
            .set(i as u32, SpecValue(site.spec), 0)
            .context("filling the SPECS map")?;
    }
    let multi = match options.mode {
        AttachMode::PerSite => None,
        AttachMode::Multi => match multi_programs::load(OBJECT, &ebpf, options.programs) {
            Ok(programs) => Some(programs),
            Err(e) => {
                eprintln!(
                    "styx-loader: warning: cannot load programs for uprobe_multi links ({e:#}); attaching one link per site, which is slow to detach"
                );
                None
            }
        },
    };
    // Taken out last: loading for uprobe_multi needs every map in `ebpf`.
    let ring = RingBuf::try_from(
        ebpf.take_map("EVENTS")
            .ok_or_else(|| anyhow!("no EVENTS map"))?,
    )?;
    let drops = PerCpuArray::try_from(
        ebpf.take_map("DROPS")
            .ok_or_else(|| anyhow!("no DROPS map"))?,
    )?;
    Ok(Loaded {
        ebpf,
        multi,
        ring,
        drops,
    })
}

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
pub fn attach_sites(loaded: &mut Loaded, target: &Target, sites: &[Selected]) -> Result<Links> {
    let mut links = Links::default();
    let one_by_one: Vec<&Selected> = match &loaded.multi {
        Some(programs) => attach_multi(programs, target, sites, &mut links),
        None => sites.iter().collect(),
    };
    if one_by_one.is_empty() {
        return Ok(links);
    }
    let pmu_type = uprobe_link::uprobe_pmu_type()
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
        let link = uprobe_link::attach(
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
    sites: &'s [Selected],
    links: &mut Links,
) -> Vec<&'s Selected> {
    let mut groups: BTreeMap<(usize, &str), Vec<&Selected>> = BTreeMap::new();
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
                eprintln!(
                    "styx-loader: warning: {} sites of {} for {name}: {e}; attaching them one by one",
                    group.len(),
                    file.name
                );
                refused.extend(group);
            }
        }
    }
    refused
}

/// Ring-full drops per event kind (index = kind id), summed over CPUs.
pub fn read_drops(drops: &PerCpuArray<MapData, u64>) -> Result<Vec<u64>> {
    (0..EVENT_KIND_SLOTS)
        .map(|kind| {
            let per_cpu = drops.get(&kind, 0).context("reading the DROPS map")?;
            Ok(per_cpu.iter().sum())
        })
        .collect()
}
