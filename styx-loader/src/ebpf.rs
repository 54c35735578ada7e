//! Loads styx's eBPF object and attaches its programs to probe sites.

use crate::sites::{Selected, UsdtSite};
use crate::uprobe_link::{self, UprobeLink, UprobeTarget};
use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, MapData, PerCpuArray, RingBuf};
use aya::programs::UProbe;
use aya::{Ebpf, EbpfLoader};
use std::os::fd::AsFd;
use std::path::Path;
use styx_common::{EventKind, Shape, UsdtSpec, EVENT_KIND_SLOTS};

/// Built from styx-ebpf by `cargo xtask build-ebpf`; committed, so the loader
/// builds with stable Rust alone. CI checks it matches its source.
static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("CARGO_MANIFEST_DIR"), "/ebpf/styx.bpf.o"));

pub struct LoadOptions<'a> {
    /// Only events from this process (0: any process).
    pub pid: u32,
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
    let ring = RingBuf::try_from(
        ebpf.take_map("EVENTS")
            .ok_or_else(|| anyhow!("no EVENTS map"))?,
    )?;
    let drops = PerCpuArray::try_from(
        ebpf.take_map("DROPS")
            .ok_or_else(|| anyhow!("no DROPS map"))?,
    )?;
    Ok(Loaded { ebpf, ring, drops })
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

/// Loads the programs the sites need and attaches one link per site. The
/// cookie tells the shared program which event kind the site reports.
pub fn attach_sites(
    ebpf: &mut Ebpf,
    exe: &Path,
    pid: u32,
    sites: &[Selected],
) -> Result<Vec<UprobeLink>> {
    let pmu_type = uprobe_link::uprobe_pmu_type()
        .context("this kernel has no uprobe PMU (needs CONFIG_UPROBE_EVENTS)")?;
    let mut links = Vec::with_capacity(sites.len());
    for selected in sites {
        let name = program_name(selected.kind);
        let program: &mut UProbe = ebpf
            .program_mut(name)
            .ok_or_else(|| anyhow!("the eBPF object has no program {name}"))?
            .try_into()?;
        if program.fd().is_err() {
            program
                .load()
                .with_context(|| format!("loading eBPF program {name}"))?;
        }
        let site = &selected.site;
        let target = UprobeTarget {
            path: exe,
            offset: site.file_offset,
            ref_ctr_offset: site.semaphore_offset,
            pid: Some(pid),
        };
        let link = uprobe_link::attach(pmu_type, program.fd()?.as_fd(), &target, selected.cookie)
            .with_context(|| {
            format!(
                "attaching to {}:{} at {:#x} in {}",
                site.provider,
                site.name,
                site.address,
                exe.display()
            )
        })?;
        links.push(link);
    }
    Ok(links)
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
