//! A session's kernel side, set up: the programs a selection needs loaded,
//! then its sites attached in the order batched delivery needs (the flush
//! site before the batch-enable sites).

use super::Settings;
use crate::bpf::attach::{self, Links};
use crate::bpf::load::{self, LoadOptions, Loaded};
use anyhow::{Context, Result};
use std::time::Instant;
use styx_usdt::select::{AttachSite, Role, Selection};
use styx_usdt::target::Target;

pub type Logger = aya_log::EbpfLogger<&'static dyn log::Log>;

/// The links that keep the sites attached.
pub struct Attached {
    /// Every site but the batch-enable ones.
    pub links: Links,
    /// The batch-enable sites: detached first when stopping.
    pub batch_links: Links,
}

/// Loads the programs `selection`'s sites run, sized and filled for
/// `settings`.
pub fn load(target: &Target, selection: &Selection, settings: &Settings) -> Result<Loaded> {
    // Room for a link per site (up to attach::MAX_PER_SITE) before any
    // is attached, rather than EMFILE half-way.
    attach::raise_fd_limit();
    let mut programs: Vec<&'static str> = selection
        .sites
        .iter()
        .map(|s| attach::program_name(s.role))
        .chain(settings.later_programs.iter().copied())
        .collect();
    programs.sort_unstable();
    programs.dedup();
    load::load(&LoadOptions {
        pid: target.pid.unwrap_or(0),
        programs: &programs,
        mode: settings.attach,
        ring_bytes: settings.ring_bytes,
        ebpf_log: settings.ebpf_log,
        usdt: &selection.usdt,
        spare_specs: settings.spare_specs,
        filters: settings.filters.as_ref(),
        counting: settings.counting.as_ref(),
    })
}

/// The programs' own log, forwarded (`--ebpf-log`).
pub fn logger(loaded: &mut Loaded, ebpf_log: bool) -> Result<Option<Logger>> {
    if !ebpf_log {
        return Ok(None);
    }
    let logger = aya_log::EbpfLogger::init(&mut loaded.ebpf).context("starting the eBPF logger")?;
    Ok(Some(logger))
}

/// Attaches `selection`'s sites in `target`: the flush site before the
/// batch-enable sites, since no batch may be handed over before something
/// takes it; `between` runs once the first are attached (lossless mode's
/// first credit).
pub fn attach(
    loaded: &mut Loaded,
    target: &Target,
    selection: &Selection,
    between: impl FnOnce(&Loaded),
) -> Result<Attached> {
    let (enable, rest): (Vec<&AttachSite>, Vec<&AttachSite>) = selection
        .sites
        .iter()
        .partition(|s| matches!(s.role, Role::BatchEnable(_)));
    let links = attach::attach_sites(loaded, target, &rest)?;
    between(loaded);
    let batch_links = if enable.is_empty() {
        Links::default()
    } else {
        attach::attach_sites(loaded, target, &enable)?
    };
    Ok(Attached { links, batch_links })
}

/// Says how many sites were attached and how long that took: the line
/// scripts and tests wait for ("attached").
pub fn announce(attached: &Attached, target: &str, started: Instant) {
    eprintln!(
        "styx-loader: attached {} probe sites in {} in {:.0} ms; Ctrl-C to stop",
        attached.links.attached() + attached.batch_links.attached(),
        target,
        started.elapsed().as_secs_f64() * 1e3
    );
}
