//! Case 9: the realistic workload, styx-rv (rrs-lib's RISC-V interpreter
//! with a probe at every instruction, memory access, register write and
//! taken branch, written as the README teaches: no per-frame check, no
//! second CPU): compiled out, detached, and traced by styx-loader (batched,
//! `insn_exec` only and every type) from its first instruction. With
//! `--probe-baseline REV` the same source built against REV's styx-probe
//! runs beside it: compiled out and detached in the same sets, traced
//! (by REV's own styx-loader, which knows its batch layout) right after
//! this tree's traced run of the same kind, in turn first.

use super::baseline::Baseline;
use super::demo::{plain, traced, Row};
use super::stats::Samples;
use super::{Binaries, Plan};
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::Path;
use styx_common::Delivery;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Variant {
    CompiledOut,
    Detached,
    /// Traced, `insn_exec` only: one event per instruction.
    One,
    /// Traced, every type: the 5 the workload fires.
    All,
}

impl Variant {
    pub fn label(self) -> &'static str {
        match self {
            Variant::CompiledOut => "probes compiled out",
            Variant::Detached => "probes detached",
            Variant::One => "batched: `insn_exec` only",
            Variant::All => "batched: all 5 types it fires",
        }
    }

    pub fn repeat(self, plan: &Plan) -> u64 {
        match self {
            Variant::CompiledOut | Variant::Detached => plan.rv_repeat,
            Variant::One => plan.rv_repeat_batched_one,
            Variant::All => plan.rv_repeat_batched_all,
        }
    }
}

/// One build of styx-rv measured untraced: compiled-out and detached speeds
/// and, per set of back-to-back runs, compiled-out speed / detached speed.
#[derive(Default)]
pub struct Untraced {
    pub compiled_out: Samples,
    pub detached: Samples,
    pub detached_slowdown: Samples,
}

/// The same against REV's styx-probe.
pub struct BaselineResults {
    pub rev: String,
    pub commit: String,
    pub untraced: Untraced,
    /// Per set: the baseline's detached speed / the current one's (above 1:
    /// the current probes cost more).
    pub current_vs_baseline: Samples,
    /// The traced rows (`One`, `All`) of the baseline build.
    pub traced: BTreeMap<Variant, Row>,
    /// Per round and traced row: the baseline's speed / the current one's.
    pub traced_vs_baseline: BTreeMap<Variant, Samples>,
}

#[derive(Default)]
pub struct Results {
    /// The traced rows (`One`, `All`): speed, slowdown against the round's
    /// compiled-out median, events, lost.
    pub traced: BTreeMap<Variant, Row>,
    pub current: Untraced,
    pub baseline: Option<BaselineResults>,
    /// Host instructions per guest instruction (callgrind), once after
    /// the rounds; `Err` says why there is no count.
    pub exact: Option<Result<super::exact::Exact, String>>,
}

impl Results {
    pub fn new(baseline: Option<&Baseline>) -> Results {
        Results {
            baseline: baseline.map(|b| BaselineResults {
                rev: b.rev.clone(),
                commit: b.commit.clone(),
                untraced: Untraced::default(),
                current_vs_baseline: Samples::default(),
                traced: BTreeMap::new(),
                traced_vs_baseline: BTreeMap::new(),
            }),
            ..Results::default()
        }
    }
}

/// The untraced builds, each run once per set of back-to-back runs.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Build {
    CompiledOut,
    Detached,
    BaselineCompiledOut,
    BaselineDetached,
}

pub fn round(bins: &Binaries, plan: &Plan, results: &mut Results) -> Result<()> {
    // As for the demo: let the kernel finish with tracers detached just before.
    std::thread::sleep(std::time::Duration::from_secs(1));
    let mut builds: Vec<(Build, &Path)> = vec![
        (Build::CompiledOut, &bins.rv_off),
        (Build::Detached, &bins.rv),
    ];
    if let Some(baseline) = &bins.baseline {
        builds.push((Build::BaselineCompiledOut, &baseline.rv_off));
        builds.push((Build::BaselineDetached, &baseline.rv));
    }
    let mut compiled_out = Samples::default();
    for set in 0..plan.rv_sets {
        // Each build goes first in turn, so drift and whatever ran just
        // before weigh on all alike.
        let mut order = builds.clone();
        order.rotate_left(set % builds.len());
        let mut speeds = BTreeMap::new();
        for (build, binary) in order {
            speeds.insert(build, plain(binary, plan.rv_repeat)?);
        }
        let current = &mut results.current;
        current.compiled_out.push(speeds[&Build::CompiledOut]);
        current.detached.push(speeds[&Build::Detached]);
        current
            .detached_slowdown
            .push(speeds[&Build::CompiledOut] / speeds[&Build::Detached]);
        compiled_out.push(speeds[&Build::CompiledOut]);
        if let Some(baseline) = &mut results.baseline {
            let untraced = &mut baseline.untraced;
            untraced
                .compiled_out
                .push(speeds[&Build::BaselineCompiledOut]);
            untraced.detached.push(speeds[&Build::BaselineDetached]);
            untraced
                .detached_slowdown
                .push(speeds[&Build::BaselineCompiledOut] / speeds[&Build::BaselineDetached]);
            baseline
                .current_vs_baseline
                .push(speeds[&Build::BaselineDetached] / speeds[&Build::Detached]);
        }
    }
    for variant in [Variant::One, Variant::All] {
        let mut runs: Vec<(bool, &Path, &Path)> = vec![(false, &bins.rv, &bins.loader)];
        if let Some(baseline) = &bins.baseline {
            runs.push((true, &baseline.rv, &baseline.loader));
            // Alternate which goes first, round by round.
            if results.traced.get(&variant).map_or(0, |r| r.speed.len()) % 2 == 1 {
                runs.reverse();
            }
        }
        let mut speeds = [None; 2];
        for (is_baseline, rv, loader) in runs {
            let row = match &mut results.baseline {
                Some(baseline) if is_baseline => baseline.traced.entry(variant).or_default(),
                _ => results.traced.entry(variant).or_default(),
            };
            let traced = Traced { loader, rv };
            speeds[usize::from(is_baseline)] = Some(traced_row(
                plan,
                variant,
                traced,
                compiled_out.median(),
                row,
            )?);
        }
        if let (Some(baseline), [Some(current), Some(before)]) = (&mut results.baseline, speeds) {
            let ratios = baseline.traced_vs_baseline.entry(variant).or_default();
            ratios.push(before / current);
        }
    }
    Ok(())
}

/// A styx-rv build and the styx-loader that traces it.
struct Traced<'a> {
    loader: &'a Path,
    rv: &'a Path,
}

/// One traced run (batched, `variant`'s types) added to `row`; returns its
/// speed.
fn traced_row(
    plan: &Plan,
    variant: Variant,
    run: Traced,
    compiled_out: f64,
    row: &mut Row,
) -> Result<f64> {
    let only = (variant == Variant::One).then_some("insn_exec");
    let (speed, events, lost) = traced(
        run.loader,
        run.rv,
        Delivery::Batched,
        only,
        variant.repeat(plan),
        Path::new("/dev/null"),
    )?;
    row.speed.push(speed);
    row.slowdown.push(compiled_out / speed);
    row.events += events;
    row.lost += lost;
    Ok(speed)
}
