//! Loads styx's eBPF object: its programs, the `EVENTS` ring buffer, the
//! per-CPU `DROPS` and `FAULTS` counters and the `SPECS` table of other providers' sites.

use super::compat::multi_programs::{self, MultiPrograms};
use super::AttachMode;
use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, Map, MapData, PerCpuArray, PerCpuHashMap, RingBuf};
use aya::{Ebpf, EbpfLoader};
use log::warn;
use styx_common::count::{CountKey, CountSpec, COUNT_TABLES};
use styx_common::filter::FilterProgram;
use styx_common::{EventKind, UsdtSpec, EVENT_KIND_SLOTS};
use styx_events::Filters;
use styx_events::{KeyRef, Table};
use styx_usdt::select::UsdtSite;

/// Built from styx-ebpf by `cargo xtask build-ebpf`; committed, so the loader
/// builds with stable Rust alone. CI checks it matches its source.
pub(super) static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("CARGO_MANIFEST_DIR"), "/ebpf/styx.bpf.o"));

/// What to load the object for.
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
    /// Room in the spec table beyond `usdt`, for the probes of libraries
    /// the process maps later.
    pub spare_specs: u32,
    /// `--filter`/`--sample` programs, each type's where the kernel can run it.
    pub filters: Option<&'a Filters>,
    /// `top`: count per-event events in the kernel instead of writing them.
    pub counting: Option<&'a Counting>,
}

/// What `top` counts in the kernel: per table, per kind id, where its key
/// is (None: not counted there), in a map of at most `max_keys` keys.
pub struct Counting {
    pub tables: Vec<[Option<KeyRef>; EVENT_KIND_SLOTS as usize]>,
    pub max_keys: u32,
}

/// A spec as a map value (aya's Pod is a foreign trait).
#[derive(Clone, Copy)]
#[repr(transparent)]
struct SpecValue(UsdtSpec);
// SAFETY: UsdtSpec is repr(C) plain data without padding (bytemuck::Pod).
unsafe impl aya::Pod for SpecValue {}

/// A filter program as a map value.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct ProgramValue(FilterProgram);
// SAFETY: FilterProgram is repr(C) plain data without padding (bytemuck::Pod).
unsafe impl aya::Pod for ProgramValue {}

/// A count key and spec as map keys and values.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct CountKeyValue(CountKey);
// SAFETY: CountKey is repr(C) plain data without padding (bytemuck::Pod).
unsafe impl aya::Pod for CountKeyValue {}
#[derive(Clone, Copy)]
#[repr(transparent)]
struct CountSpecValue(CountSpec);
// SAFETY: CountSpec is repr(C) plain data without padding (bytemuck::Pod).
unsafe impl aya::Pod for CountSpecValue {}

/// The loaded object and the maps the session reads.
pub struct Loaded {
    pub ebpf: Ebpf,
    /// The programs again, loaded for uprobe_multi links; None when
    /// attaching per site.
    pub(super) multi: Option<MultiPrograms>,
    pub ring: RingBuf<MapData>,
    pub drops: PerCpuArray<MapData, u64>,
    /// Batched events lost because copying them from the emulator failed.
    pub faults: PerCpuArray<MapData, u64>,
    /// Per-event events the filters left out in the kernel.
    pub filtered: PerCpuArray<MapData, u64>,
    /// `top`'s counts in the kernel, and its "other" counts, when counting.
    pub counts: Option<KernelCounts>,
}

/// `top`'s maps in the kernel.
pub struct KernelCounts {
    counts: PerCpuHashMap<MapData, CountKeyValue, u64>,
    other: PerCpuArray<MapData, u64>,
}

/// Loads the object, sized and filled for `options`.
pub fn load(options: &LoadOptions<'_>) -> Result<Loaded> {
    let kernel_filters = options.filters.filter(|f| {
        EventKind::ALL
            .iter()
            .any(|&k| f.kernel_can(k) && !f.programs[k as usize].keeps_all())
    });
    let mut ebpf = load_object(options, kernel_filters.is_some())?;
    fill_specs(&mut ebpf, options.usdt)?;
    if let Some(filters) = kernel_filters {
        fill_filters(&mut ebpf, filters)?;
    }
    if let Some(counting) = options.counting {
        fill_count_specs(&mut ebpf, counting)?;
    }
    let multi = match options.mode {
        AttachMode::PerSite => None,
        AttachMode::Multi => match multi_programs::load(OBJECT, &ebpf, options.programs) {
            Ok(programs) => Some(programs),
            Err(e) => {
                warn!(
                    "cannot load programs for uprobe_multi links ({e:#}); attaching one link per site, which is slow to detach"
                );
                None
            }
        },
    };
    // Taken out last: loading for uprobe_multi needs every map in `ebpf`.
    let counts = match options.counting {
        None => None,
        Some(_) => Some(KernelCounts {
            counts: PerCpuHashMap::try_from(take_map(&mut ebpf, "COUNTS")?)?,
            other: PerCpuArray::try_from(take_map(&mut ebpf, "COUNT_OTHER")?)?,
        }),
    };
    Ok(Loaded {
        ring: RingBuf::try_from(take_map(&mut ebpf, "EVENTS")?)?,
        drops: PerCpuArray::try_from(take_map(&mut ebpf, "DROPS")?)?,
        faults: PerCpuArray::try_from(take_map(&mut ebpf, "FAULTS")?)?,
        filtered: PerCpuArray::try_from(take_map(&mut ebpf, "FILTERED")?)?,
        counts,
        ebpf,
        multi,
    })
}

/// The object loaded into the kernel, its globals set and its maps sized
/// for `options`.
fn load_object(options: &LoadOptions<'_>, filtering: bool) -> Result<Ebpf> {
    let log_level: u8 = if options.ebpf_log { 0xff } else { 0 };
    let specs = (options.usdt.len() as u32 + options.spare_specs).max(1);
    let filtering = filtering as u32;
    let counting = options.counting.is_some() as u32;
    let max_keys = options.counting.map_or(1, |c| c.max_keys.max(1));
    EbpfLoader::new()
        .override_global("TARGET_TGID", &options.pid, true)
        .override_global("FILTERING", &filtering, true)
        .override_global("COUNTING", &counting, true)
        .map_max_entries("COUNTS", max_keys)
        .override_global("AYA_LOG_LEVEL", &log_level, false)
        .map_max_entries("EVENTS", options.ring_bytes)
        .map_max_entries("SPECS", specs)
        .load(OBJECT)
        .context("loading styx's eBPF object into the kernel")
}

fn map_mut<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut Map> {
    ebpf.map_mut(name).ok_or_else(|| anyhow!("no {name} map"))
}

fn take_map(ebpf: &mut Ebpf, name: &str) -> Result<Map> {
    ebpf.take_map(name).ok_or_else(|| anyhow!("no {name} map"))
}

/// Other providers' argument specs, by cookie.
fn fill_specs(ebpf: &mut Ebpf, usdt: &[UsdtSite]) -> Result<()> {
    let mut spec_map: Array<_, SpecValue> = Array::try_from(map_mut(ebpf, "SPECS")?)?;
    for (i, site) in usdt.iter().enumerate() {
        spec_map
            .set(i as u32, SpecValue(site.spec), 0)
            .context("filling the SPECS map")?;
    }
    Ok(())
}

/// The argument specs of sites found later (a library the process mapped
/// after the start), from spec id `first` on.
pub fn set_specs(loaded: &mut Loaded, first: usize, usdt: &[UsdtSite]) -> Result<()> {
    let mut spec_map: Array<_, SpecValue> = Array::try_from(map_mut(&mut loaded.ebpf, "SPECS")?)?;
    for (i, site) in usdt.iter().enumerate() {
        spec_map
            .set((first + i) as u32, SpecValue(site.spec), 0)
            .context("filling the SPECS map")?;
    }
    Ok(())
}

/// Each type's filter program, where the kernel can run it.
fn fill_filters(ebpf: &mut Ebpf, filters: &Filters) -> Result<()> {
    let mut programs: Array<_, ProgramValue> = Array::try_from(map_mut(ebpf, "FILTERS")?)?;
    for &kind in EventKind::ALL {
        if filters.kernel_can(kind) {
            programs
                .set(
                    kind as u32,
                    ProgramValue(filters.programs[kind as usize]),
                    0,
                )
                .context("filling the FILTERS map")?;
        }
    }
    Ok(())
}

/// Where each table's key is in each type's record, for the kernel's counts.
fn fill_count_specs(ebpf: &mut Ebpf, counting: &Counting) -> Result<()> {
    let mut specs: Array<_, CountSpecValue> = Array::try_from(map_mut(ebpf, "COUNT_SPECS")?)?;
    for (table, keys) in counting
        .tables
        .iter()
        .enumerate()
        .take(COUNT_TABLES as usize)
    {
        for (kind, key) in keys.iter().enumerate() {
            let Some(key) = key else { continue };
            let spec = CountSpec {
                active: 1,
                slot: key.slot,
                shift: key.shift,
                _reserved: [0; 5],
                mask: key.mask,
            };
            let index = table as u32 * EVENT_KIND_SLOTS + kind as u32;
            specs
                .set(index, CountSpecValue(spec), 0)
                .context("filling the COUNT_SPECS map")?;
        }
    }
    Ok(())
}

/// Tells `styx_fatal` where the traced process's batch registry is, and
/// the number of the file whose registry it is.
pub fn set_registry(loaded: &mut Loaded, registry: u64, file: u8) -> Result<()> {
    let mut at: Array<_, u64> = Array::try_from(map_mut(&mut loaded.ebpf, "REGISTRY_AT")?)?;
    at.set(1, u64::from(file), 0)
        .and_then(|()| at.set(0, registry, 0))
        .context("filling the REGISTRY_AT map")
}

/// `top`'s tables as the kernel counted them so far (none when it does not count).
pub fn read_counts(loaded: &Loaded, tables: usize, max_keys: usize) -> Result<Vec<Table>> {
    let Some(KernelCounts { counts, other }) = &loaded.counts else {
        return Ok(Vec::new());
    };
    let mut out: Vec<Table> = (0..tables).map(|_| Table::new(max_keys)).collect();
    for entry in counts.iter() {
        let (CountKeyValue(key), per_cpu) = entry.context("reading the COUNTS map")?;
        if let Some(table) = out.get_mut(key.table as usize) {
            table.add(key.kind, key.key, per_cpu.iter().sum());
        }
    }
    for (t, table) in out.iter_mut().enumerate() {
        for kind in 0..EVENT_KIND_SLOTS {
            let index = t as u32 * EVENT_KIND_SLOTS + kind;
            let per_cpu = other
                .get(&index, 0)
                .context("reading the COUNT_OTHER map")?;
            table.other[kind as usize] += per_cpu.iter().sum::<u64>();
        }
    }
    Ok(out)
}

/// What a per-kind counter map (`DROPS`: ring full; `FAULTS`: the copy
/// from the process failed) holds, summed over CPUs.
pub struct Lost {
    /// Events per kind id (slot 0 is always 0).
    pub events: Vec<u64>,
    /// Batches (slot 0 of the map): lossless mode's flow control counts
    /// them as taken; FAULTS also counts there batches whose head could not
    /// be read, whose events are unknown.
    pub batches: u64,
}

/// Reads a per-kind counter map.
pub fn read_lost(counts: &PerCpuArray<MapData, u64>) -> Result<Lost> {
    let mut events = (0..EVENT_KIND_SLOTS)
        .map(|kind| {
            let per_cpu = counts.get(&kind, 0).context("reading a counter map")?;
            Ok(per_cpu.iter().sum())
        })
        .collect::<Result<Vec<u64>>>()?;
    let batches = std::mem::take(&mut events[0]);
    Ok(Lost { events, batches })
}
