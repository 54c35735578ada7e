//! The default command: trace a process, a command started here, or a
//! binary system-wide, from the command line to the exit code.

use crate::cli::{Delivery, TraceArgs};
use crate::outputs::{self, Outputs};
use crate::session::spawn::{self, Held};
use crate::session::{self, Session};
use anyhow::{bail, Result};
use styx_events::header::{Header, UsdtInfo};
use styx_usdt::select::{describe_providers, Selection, Wanted};
use styx_usdt::symbols::Symbols;
use styx_usdt::target::Target;

/// Traces until told to stop; returns the exit code styx-loader should end
/// with: 0, or the spawned command's own. `held` is the command after `--`,
/// forked before the runtime started.
pub async fn run(args: TraceArgs, held: Option<Held>) -> Result<i32> {
    let target = match (&held, &args.binary) {
        (Some(held), _) => Target::spawned(held.pid, &held.program),
        (None, Some(path)) => Target::binary(path)?,
        (None, None) => Target::from_pid(args.pid.expect("clap requires a target"))?,
    };
    if args.lossless && args.delivery == Delivery::PerEvent {
        bail!("--lossless needs --delivery batched: a full ring loses per-event hits");
    }
    if args.lossless && target.pid.is_none() {
        bail!("--lossless needs one process (--pid or a command after --), not --binary");
    }
    // Bad expressions stop here: nothing is attached.
    let filters = args.compile_filters()?;
    let selection = find_sites(&args, &target)?;
    let usdt = selection
        .usdt
        .iter()
        .enumerate()
        .map(|(id, site)| UsdtInfo::from_spec(id as u32, &site.provider, &site.probe, &site.spec))
        .collect();
    let header = Header::now(target.pid.unwrap_or(0), &target.files[0].name, usdt);
    let out = outputs::open(
        &Outputs {
            format: args.format,
            output: args.output.as_deref(),
            capture: args.capture.as_ref(),
            detail: args.detail,
        },
        &header,
    )?;
    let options = session::Options {
        attach: args.attach,
        ring_bytes: args.ring_size,
        ebpf_log: args.ebpf_log,
        duration: args.duration,
        live: session::live_line_wanted(args.quiet, args.output.is_some()),
        lossless: args.lossless,
        filters,
    };
    let mut session = Session::start(&target, &selection, out, options)?;
    let spawned = held.is_some();
    if let Some(held) = held {
        held.release()?;
    }
    let stop = session.stream().await?;
    session.detach().await;
    session.finish(stop)?;
    match (spawned, target.pid) {
        (true, Some(pid)) => spawn::wait_exit_code(pid),
        _ => Ok(0),
    }
}

/// The probe sites to attach in the target, or why there are none.
fn find_sites(args: &TraceArgs, target: &Target) -> Result<Selection> {
    let tables = target.probe_tables()?;
    let kinds = args.kinds();
    let wanted = Wanted {
        kinds: &kinds,
        batched: args.delivery == Delivery::Batched,
        usdt_globs: &args.probes,
    };
    let mut selection = Selection::default();
    for (file, table) in &tables {
        let mut symbols = Symbols::of(&target.files[*file]);
        wanted.pick(*file, table, &mut symbols, &mut selection);
    }
    for rejected in &selection.rejected {
        log::warn!("{rejected}");
    }
    if selection.sites.is_empty() {
        let all_sites = || tables.iter().flat_map(|(_, table)| &table.sites);
        let has_styx = all_sites().any(|s| s.provider == styx_common::PROVIDER);
        let globs: Vec<&str> = args.probes.iter().map(glob::Pattern::as_str).collect();
        let what = match (has_styx, globs.is_empty()) {
            (true, _) => "no usable probe sites for the selected events".to_string(),
            (false, true) => "no styx probes".to_string(),
            (false, false) => format!(
                "no styx probes and none matching --probes {}",
                globs.join(", ")
            ),
        };
        bail!(
            "{} has {what}: {}",
            target.name,
            describe_providers(all_sites())
        );
    }
    Ok(selection)
}
