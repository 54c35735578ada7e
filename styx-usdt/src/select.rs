//! Picks the probe sites to attach: styx's own probes, of the selected event
//! types, whose argument specs are the ones the eBPF programs read.

use crate::arch::x86_64::ARGUMENT_REGISTERS;
use crate::argspec::parse_spec;
use crate::compile;
use crate::functions::FunctionTable;
use crate::note::{ProbeSite, ProbeTable};
use crate::probe_args::{self, declared_for, ProbeArgs, SiteArg};
use crate::symbols::Symbols;
use std::collections::BTreeMap;
use styx_common::batch::{
    reads_layout, BATCHED_HALF_OFFSET, BATCH_LAYOUT_VERSION, BATCH_PROVIDER, FLUSH_PROBE,
    OLDEST_BATCH_LAYOUT_VERSION,
};
use styx_common::{Delivery, EventKind, Shape, UsdtSpec, COOKIE_HAS_AUX_ARG, PROVIDER};

/// What attaching to a site is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Its hits are events of this kind ([`EventKind::Usdt`] for other
    /// providers).
    Event(EventKind),
    /// Raises the batched half of this kind's semaphore: the emulator then
    /// appends its events to batches. Never runs. [`EventKind::Usdt`] for
    /// an event type the emulator declared (`styx_probe::event!`): its
    /// events come in batches as other providers' probes' events, named
    /// by the site's spec id ([`Selection::declared`]).
    BatchEnable(EventKind),
    /// Hands over batches (`styx_batch:flush`); the cookie is the file's
    /// number, which the eBPF program writes into each batch record (a
    /// declared type's tag is its file's).
    BatchFlush,
    /// A traced function's first instruction (`--functions`); the cookie
    /// is its index in [`Selection::functions`].
    FunctionEntry,
    /// One of a traced function's `ret` instructions.
    FunctionExit,
    /// One of a traced function's `jmp`s to another function (a tail call),
    /// probed with [`FunctionExits::Ret`]: the callee's `ret` may not be.
    FunctionTailCall,
    /// A traced function's return, as a uretprobe on its entry
    /// ([`FunctionExits::Uretprobe`]).
    FunctionReturn,
}

/// How a traced function's returns are probed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FunctionExits {
    /// A uprobe on each `ret` instruction: nothing on the stack changes, so
    /// exceptions and panics unwind through traced frames as untraced; the
    /// kernel single-steps a `ret` out of line (two traps a return).
    #[default]
    Ret,
    /// A uretprobe (`uprobe_multi` with its return flag, Linux 6.6+): the
    /// kernel swaps the return address for its trampoline (one trap a
    /// return), and an unwinder passing through such a frame aborts the
    /// program: only for code no exception, panic or longjmp leaves.
    Uretprobe,
}

/// A site to attach, what for, and its attach cookie.
pub struct AttachSite {
    /// What its hits are.
    pub role: Role,
    /// Which of the target's files the site is in.
    pub file: usize,
    /// The site as its note describes it.
    pub site: ProbeSite,
    /// The event kind for styx's own probes; the index into the spec table
    /// for other USDT probes.
    pub cookie: u64,
}

/// A USDT site of another provider: how to read its arguments, and how to
/// name them in output.
pub struct UsdtSite {
    /// The site's provider.
    pub provider: String,
    /// The site's probe name.
    pub probe: String,
    /// Where the eBPF program finds each argument, its size and signedness,
    /// and which are strings to copy.
    pub spec: UsdtSpec,
    /// Each argument's name (if declared) and type, as output shows it.
    pub args: Vec<SiteArg>,
}

/// The sites picked from a target's files, and the ones left out.
#[derive(Default)]
pub struct Selection {
    /// The sites to attach.
    pub sites: Vec<AttachSite>,
    /// The spec table for the USDT sites, indexed by their cookie.
    pub usdt: Vec<UsdtSite>,
    /// Sites left out, one line each saying why (one line for all the
    /// sites of a semaphore past [`MAX_SITES_PER_SEMAPHORE`]).
    pub rejected: Vec<String>,
    /// `--probe-args` declarations that do not fit a site's note, one
    /// line each (the site is attached, those arguments read as the note says).
    pub misdeclared: Vec<String>,
    /// The traced functions' names (`--functions`), indexed by the cookie
    /// of their sites.
    pub functions: Vec<String>,
    /// The event types the emulator declared that are taken in batches.
    pub declared: Vec<DeclaredBatch>,
}

/// An event type the emulator declared (`styx_probe::event!`), taken in
/// batches: the items of tag `tag` in the batches of file `file` are its
/// events, named as the USDT site of spec id `spec_id`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredBatch {
    /// The file (its flush site's cookie).
    pub file: usize,
    /// The type's tag there (`styx_common::schema::declared_tag`).
    pub tag: u16,
    /// The spec id of the type's USDT site.
    pub spec_id: u32,
    /// The type's provider (the crate that declared it).
    pub provider: String,
    /// The type's name.
    pub name: String,
}

/// Most sites of one file attached that share one semaphore. The kernel
/// counts a semaphore up once per uprobe in a 16-bit signed counter: past
/// 32,767 it wraps negative, refuses to count down, and the target keeps its
/// probes enabled (and slowed) after styx has gone.
pub const MAX_SITES_PER_SEMAPHORE: usize = i16::MAX as usize;

/// The argument spec styx-probe's probes carry: every argument a u64 in the
/// next SysV argument register, which is where the eBPF programs read them.
pub fn expected_spec(kind: EventKind) -> String {
    spec_of(kind.probe_args().len())
}

/// [`COOKIE_HAS_AUX_ARG`] for the kinds whose sites pass an `aux` argument.
fn aux_flag(kind: EventKind) -> u64 {
    match kind.shape() {
        Shape::ArgsAux(_) => COOKIE_HAS_AUX_ARG,
        _ => 0,
    }
}

/// The spec of `n` u64 arguments in styx-probe's registers.
fn spec_of(n: usize) -> String {
    ARGUMENT_REGISTERS[..n]
        .iter()
        .map(|reg| format!("8@%{reg}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What to pick: styx's own sites of the `kinds` selected, and the sites of
/// other providers whose `provider:probe` matches one of `usdt_globs`.
pub struct Wanted<'a> {
    /// styx event types.
    pub kinds: &'a [EventKind],
    /// Take the batched types ([`Delivery::Batched`]) in batches, from
    /// files that have batch sites; else every type one hit per event.
    pub batched: bool,
    /// `provider:probe` globs of other providers' probes.
    pub usdt_globs: &'a [glob::Pattern],
    /// What their arguments are (`--probe-args`), the first match a site's.
    pub probe_args: &'a [ProbeArgs],
    /// Also take sites no function symbol covers, whose `nop` alone could be
    /// checked ([`ProbeSite::start_checked`]); else they are left out.
    pub allow_unverified: bool,
    /// Whether `provider:name` is an event type file `file` declares
    /// (`styx_probe::event!`, its note read): taken in batches when
    /// `batched`, else one hit per event as any USDT probe.
    pub declared: &'a dyn Fn(usize, &str, &str) -> bool,
}

impl Wanted<'_> {
    /// Adds the sites to pick from `table`, the probes of file number
    /// `file`, to `selection`; `symbols` places that file's symbols.
    pub fn pick(
        &self,
        file: usize,
        table: &ProbeTable,
        symbols: &mut Symbols<'_>,
        selection: &mut Selection,
    ) {
        // styx_batch's sites are styx's own plumbing, not events to match.
        let others = |s: &&ProbeSite| s.provider != PROVIDER && s.provider != BATCH_PROVIDER;
        let batching = self.batched && has_batch_sites(table);
        for site in table.sites.iter().filter(others) {
            let name = format!("{}:{}", site.provider, site.name);
            if !self.usdt_globs.iter().any(|g| g.matches(&name)) {
                continue;
            }
            let declared = declared_for(self.probe_args, site);
            if batching && (self.declared)(file, &site.provider, &site.name) {
                select_declared(file, site, table, symbols, selection);
            } else {
                select_usdt(file, site, declared, symbols, selection);
            }
        }
        // A batched type without a batch-enable site in this file (its
        // styx-probe is older than the type's batching: `interrupt`) is
        // taken one hit per event, as that styx-probe fires it.
        let enable_sites = if batching {
            batch_enable_sites(table)
        } else {
            Vec::new()
        };
        let per_event = |kind: EventKind| {
            kind.delivery() == Delivery::PerEvent || !enable_sites.iter().any(|(k, _)| *k == kind)
        };
        for site in table.sites.iter().filter(|s| s.provider == PROVIDER) {
            select_styx(file, site, self.kinds, per_event, selection);
        }
        if batching {
            select_batch(file, table, &enable_sites, self.kinds, selection);
        } else if self.batched
            && self.kinds.iter().any(|k| {
                k.delivery() == Delivery::Batched
                    && table
                        .sites
                        .iter()
                        .any(|s| s.provider == PROVIDER && s.name == k.probe_name())
            })
        {
            let why = match table.batch_layout {
                Some(layout) if !reads_layout(layout) => format!(
                    "was built with a styx-probe whose batches are in layout {layout}, this \
                     loader reads layouts {OLDEST_BATCH_LAYOUT_VERSION} to \
                     {BATCH_LAYOUT_VERSION}"
                ),
                _ => "has styx probes but no batch flush site this loader reads (built with \
                      another styx-probe)"
                    .to_string(),
            };
            selection.rejected.push(format!(
                "{} {why}: its events are taken one probe hit each, ~100x slower (build it \
                 with this loader's styx-probe, or trace it with a styx-loader of its version)",
                symbols.file().name
            ));
        }
        if !self.allow_unverified {
            refuse_unverified(file, &symbols.file().name, selection);
        }
        limit_semaphore_sites(selection);
    }
}

/// Leaves out the selected sites of file `file` (named `name`) that no
/// function symbol covers, with one line for them all: whether such a site
/// starts an instruction is unknown, and a uprobe inside one corrupts the
/// target. If its flush site goes, its batch-enable sites go too (events
/// would be batched and never handed over).
fn refuse_unverified(file: usize, name: &str, selection: &mut Selection) {
    let unverified = |s: &AttachSite| s.file == file && !s.site.start_checked;
    let Some(first) = selection.sites.iter().find(|s| unverified(s)) else {
        return;
    };
    let first = format!(
        "{}:{} at {:#x}",
        first.site.provider, first.site.name, first.site.address
    );
    let flush_gone = selection
        .sites
        .iter()
        .any(|s| unverified(s) && s.role == Role::BatchFlush);
    let enable = |s: &AttachSite| s.file == file && matches!(s.role, Role::BatchEnable(_));
    let before = selection.sites.len();
    selection
        .sites
        .retain(|s| !(unverified(s) || (flush_gone && enable(s))));
    let (sites, are) = match before - selection.sites.len() {
        1 => ("1 probe site".to_string(), "is"),
        n => (format!("{n} probe sites"), "are"),
    };
    selection.rejected.push(format!(
        "{sites} of {name} (from {first} on) {are} in no function symbol (stripped?), so styx \
         cannot check that they start an instruction (a uprobe inside one corrupts the code): \
         left out (--allow-unverified-sites takes them, their nop alone checked)"
    ));
}

/// Leaves out the sites of a semaphore past [`MAX_SITES_PER_SEMAPHORE`],
/// counted over the whole selection per file and semaphore, keeping the
/// first ones: better some of a probe's sites than a target left slowed
/// for good. Cookies stay valid (a left-out USDT site's spec stays unused).
fn limit_semaphore_sites(selection: &mut Selection) {
    let mut counts: BTreeMap<(usize, u64), usize> = BTreeMap::new();
    let mut first_left_out: BTreeMap<(usize, u64), String> = BTreeMap::new();
    selection.sites.retain(|s| {
        if s.site.semaphore == 0 {
            return true;
        }
        let key = (s.file, s.site.semaphore_offset);
        let count = counts.entry(key).or_default();
        *count += 1;
        if *count <= MAX_SITES_PER_SEMAPHORE {
            return true;
        }
        first_left_out
            .entry(key)
            .or_insert_with(|| format!("{}:{}", s.site.provider, s.site.name));
        false
    });
    for (key, first) in first_left_out {
        selection.rejected.push(format!(
            "{} sites past the first {MAX_SITES_PER_SEMAPHORE} sharing the semaphore at file \
             offset {:#x} (file {}), from {first} on: not attached (the kernel counts a \
             semaphore's uprobes in 16 bits; more would leave the target's probes on for good)",
            counts[&key] - MAX_SITES_PER_SEMAPHORE,
            key.1,
            key.0
        ));
    }
}

/// Whether the file's styx-probe hands over batches as this loader takes
/// them: it has the flush site, with the arguments expected, and its
/// batches are in this loader's layout. (Without one, batch-enable sites
/// must not be attached: events would be batched and never handed over.
/// Nor the flush site: an emulator whose styx-probe took lossless flow
/// control from a loader that starts it waits for credit while something
/// listens there.)
fn has_batch_sites(table: &ProbeTable) -> bool {
    table.batch_layout.is_some_and(reads_layout)
        && table
            .sites
            .iter()
            .any(|s| s.is_batch_flush() && flush_spec_known(&s.args))
}

/// The batch-enable site of each batched kind the file has one for.
/// Only the half of a word some `styx:` site of the kind has: a type the
/// emulator declared may have the same name (its own word), and a kind
/// the program never fires has no word the linker kept (its note's
/// semaphore may point anywhere, such as the file's first bytes).
fn batch_enable_sites(table: &ProbeTable) -> Vec<(EventKind, &ProbeSite)> {
    let enable = |s: &&ProbeSite| s.provider == BATCH_PROVIDER && s.name != FLUSH_PROBE;
    let mut sites = Vec::new();
    for site in table.sites.iter().filter(enable) {
        let batched = |kind: &EventKind| kind.delivery() == Delivery::Batched;
        let Some(kind) = EventKind::from_probe_name(&site.name).filter(batched) else {
            continue;
        };
        let of_kind = |s: &ProbeSite| {
            s.provider == PROVIDER
                && s.name == site.name
                && s.semaphore + BATCHED_HALF_OFFSET == site.semaphore
        };
        if table.sites.iter().any(of_kind) {
            sites.push((kind, site));
        }
    }
    sites
}

/// The flush site, and the batch-enable site of each wanted batched kind
/// (`enable_sites`, the file's).
fn select_batch(
    file: usize,
    table: &ProbeTable,
    enable_sites: &[(EventKind, &ProbeSite)],
    kinds: &[EventKind],
    selection: &mut Selection,
) {
    let wanted = |kind: &EventKind| kinds.contains(kind) && kind.delivery() == Delivery::Batched;
    if !kinds.iter().any(wanted) {
        return;
    }
    select_flush(file, table, selection);
    for &(kind, site) in enable_sites.iter().filter(|(kind, _)| wanted(kind)) {
        selection.sites.push(AttachSite {
            role: Role::BatchEnable(kind),
            file,
            site: site.clone(),
            cookie: 0,
        });
    }
}

/// The file's flush site, once (its cookie the file's number).
fn select_flush(file: usize, table: &ProbeTable, selection: &mut Selection) {
    if selection
        .sites
        .iter()
        .any(|s| s.file == file && s.role == Role::BatchFlush)
    {
        return;
    }
    for site in table.sites.iter().filter(|s| s.is_batch_flush()) {
        if !flush_spec_known(&site.args) {
            selection.rejected.push(format!(
                "{}:{} at {:#x} has argument spec {:?}, expected {FLUSH_SPEC:?}: not attached",
                site.provider, site.name, site.address, site.args
            ));
            continue;
        }
        selection.sites.push(AttachSite {
            role: Role::BatchFlush,
            file,
            site: site.clone(),
            cookie: file as u64,
        });
    }
}

/// A declared event type's site, taken in batches: its spec (which names
/// its events), its batch-enable site (the one whose semaphore is the
/// high half of the site's), the file's flush site, and its tag there.
fn select_declared(
    file: usize,
    site: &ProbeSite,
    table: &ProbeTable,
    symbols: &mut Symbols<'_>,
    selection: &mut Selection,
) {
    let named =
        |d: &DeclaredBatch| d.file == file && d.provider == site.provider && d.name == site.name;
    if selection.declared.iter().any(named) {
        return;
    }
    let enable = table.sites.iter().find(|s| {
        s.provider == BATCH_PROVIDER
            && s.name == site.name
            && s.semaphore == site.semaphore + BATCHED_HALF_OFFSET
    });
    let flush = table.sites.iter().find(|s| s.is_batch_flush());
    let (Some(enable), Some(flush)) = (enable, flush) else {
        // Not batched after all: one hit per event.
        return select_usdt(file, site, None, symbols, selection);
    };
    let spec_id = selection.usdt.len() as u32;
    let Some(mut spec) = compiled_spec(site, symbols, selection) else {
        return;
    };
    // Named and typed by the loader from the type's note (the header).
    let (args, _) = probe_args::apply(None, site, &mut spec);
    selection.usdt.push(UsdtSite {
        provider: site.provider.clone(),
        probe: site.name.clone(),
        spec,
        args,
    });
    select_flush(file, table, selection);
    selection.sites.push(AttachSite {
        role: Role::BatchEnable(EventKind::Usdt),
        file,
        site: enable.clone(),
        cookie: spec_id as u64,
    });
    selection.declared.push(DeclaredBatch {
        file,
        tag: styx_common::schema::declared_tag(site.semaphore, flush.semaphore),
        spec_id,
        provider: site.provider.clone(),
        name: site.name.clone(),
    });
}

/// The flush probe's arguments: (head, start, len, seq, tid, layout)
/// (`styx_common::batch::FLUSH_PROBE`).
const FLUSH_SPEC: &str = "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9";

/// The flush probe of styx-probe's batch layout 3 and before (16 KiB
/// buffers), without `layout`: its batches are taken as well.
const FLUSH_SPEC_LAYOUT_3: &str = "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8";

/// Whether a flush site's arguments are what the eBPF program reads.
fn flush_spec_known(args: &str) -> bool {
    args == FLUSH_SPEC || args == FLUSH_SPEC_LAYOUT_3
}

fn select_styx(
    file: usize,
    site: &ProbeSite,
    kinds: &[EventKind],
    per_event: impl Fn(EventKind) -> bool,
    selection: &mut Selection,
) {
    let kind = EventKind::from_probe_name(&site.name).filter(|k| k.shape() != Shape::Usdt);
    let Some(kind) = kind else {
        selection.rejected.push(format!(
            "{}:{} at {:#x} is not a styx event this loader knows (newer styx-probe?)",
            site.provider, site.name, site.address
        ));
        return;
    };
    if !kinds.contains(&kind) || !per_event(kind) {
        return;
    }
    let expected = expected_spec(kind);
    let cookie = if site.args == expected {
        kind as u64 | aux_flag(kind)
    } else if aux_flag(kind) != 0 && site.args == spec_of(kind.probe_args().len() - 1) {
        // An older site without the aux argument (insn sites before
        // instruction lengths): its events say length 0.
        kind as u64
    } else {
        selection.rejected.push(format!(
            "{}:{} at {:#x} has argument spec {:?}, expected {:?}: not attached",
            site.provider, site.name, site.address, site.args, expected
        ));
        return;
    };
    selection.sites.push(AttachSite {
        role: Role::Event(kind),
        file,
        site: site.clone(),
        cookie,
    });
}

fn select_usdt(
    file: usize,
    site: &ProbeSite,
    declared: Option<&ProbeArgs>,
    symbols: &mut Symbols<'_>,
    selection: &mut Selection,
) {
    if let Some(mut spec) = compiled_spec(site, symbols, selection) {
        let declared = declared.or_else(|| probe_args::well_known(site, &spec));
        let (args, misdeclared) = probe_args::apply(declared, site, &mut spec);
        selection.misdeclared.extend(misdeclared);
        selection.sites.push(AttachSite {
            role: Role::Event(EventKind::Usdt),
            file,
            site: site.clone(),
            cookie: selection.usdt.len() as u64,
        });
        selection.usdt.push(UsdtSite {
            provider: site.provider.clone(),
            probe: site.name.clone(),
            spec,
            args,
        });
    }
}

/// The site's argument spec, compiled; None, said in `selection`'s
/// rejected lines, when styx cannot read it.
fn compiled_spec(
    site: &ProbeSite,
    symbols: &mut Symbols<'_>,
    selection: &mut Selection,
) -> Option<UsdtSpec> {
    let compiled = parse_spec(&site.args)
        .map_err(|e| e.to_string())
        .and_then(|args| {
            compile::compile(&args, &mut |name| symbols.address(name)).map_err(|e| e.to_string())
        });
    match compiled {
        Ok(spec) => Some(spec),
        Err(reason) => {
            selection.rejected.push(format!(
                "{}:{} at {:#x} has argument spec {:?} that styx cannot read ({reason}): not \
                 attached",
                site.provider, site.name, site.address, site.args
            ));
            None
        }
    }
}

impl Selection {
    /// The entry and return sites of `table`'s functions, in file `file`
    /// (see [`crate::functions`]), returns probed as `exits` says (with
    /// `ret` probes, tail-call jumps too).
    pub fn add_functions(&mut self, file: usize, table: &FunctionTable, exits: FunctionExits) {
        for function in &table.functions {
            let cookie = self.functions.len() as u64;
            let site = |role, offset: u64| AttachSite {
                role,
                file,
                site: ProbeSite {
                    provider: "function".to_string(),
                    name: function.name.clone(),
                    address: function.address + (offset - function.entry),
                    file_offset: offset,
                    semaphore: 0,
                    semaphore_offset: 0,
                    args: String::new(),
                    // Its own symbol's start or one of its instructions,
                    // checked by `functions`.
                    start_checked: true,
                },
                cookie,
            };
            self.sites.push(site(Role::FunctionEntry, function.entry));
            match exits {
                FunctionExits::Ret => {
                    for &offset in &function.returns {
                        self.sites.push(site(Role::FunctionExit, offset));
                    }
                    for &offset in &function.tail_calls {
                        self.sites.push(site(Role::FunctionTailCall, offset));
                    }
                }
                FunctionExits::Uretprobe => {
                    self.sites.push(site(Role::FunctionReturn, function.entry));
                }
            }
            self.functions.push(function.name.clone());
        }
    }
}

/// "its USDT providers are: a (3 sites), b (1 sites)" or "it has no USDT
/// probes at all", to say what a target without styx probes does have.
pub fn describe_providers<'a>(sites: impl Iterator<Item = &'a ProbeSite>) -> String {
    let mut providers: BTreeMap<&str, usize> = BTreeMap::new();
    for site in sites {
        *providers.entry(&site.provider).or_default() += 1;
    }
    if providers.is_empty() {
        return "it has no USDT probes at all".to_string();
    }
    let list: Vec<String> = providers
        .iter()
        .map(|(provider, n)| format!("{provider} ({n} sites)"))
        .collect();
    format!("its USDT providers are: {}", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_follow_the_argument_registers() {
        assert_eq!(
            expected_spec(EventKind::MemRead),
            "8@%rdi 8@%rsi 8@%rdx 8@%rcx"
        );
        assert_eq!(
            expected_spec(EventKind::SpanBegin),
            "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8"
        );
    }

    fn site(provider: &str, name: &str, address: u64, semaphore: u64) -> ProbeSite {
        ProbeSite {
            provider: provider.into(),
            name: name.into(),
            address,
            file_offset: address,
            semaphore,
            semaphore_offset: semaphore.saturating_sub(0x1000),
            args: String::new(),
            start_checked: true,
        }
    }

    /// A file with styx-probe's flush site and block (layout `layout`), one
    /// batched kind with its batch-enable site (mem_read) and one without
    /// (interrupt).
    fn batching_file(layout: u16) -> ProbeTable {
        let styx = |kind: EventKind, address: u64, semaphore: u64| ProbeSite {
            args: expected_spec(kind),
            ..site(PROVIDER, kind.probe_name(), address, semaphore)
        };
        let mut table = ProbeTable::default();
        table.sites.push(ProbeSite {
            args: FLUSH_SPEC.into(),
            ..site(BATCH_PROVIDER, FLUSH_PROBE, 0x100, 0x2000)
        });
        table.sites.push(styx(EventKind::MemRead, 0x200, 0x2010));
        table.sites.push(site(
            BATCH_PROVIDER,
            "mem_read",
            0x300,
            0x2010 + BATCHED_HALF_OFFSET,
        ));
        table.sites.push(styx(EventKind::Interrupt, 0x400, 0x2020));
        table.batch_layout = Some(layout);
        table
    }

    /// The roles of the sites picked from `table` for mem_read and
    /// interrupt, batched or not; and what was rejected.
    fn roles(table: &ProbeTable, batched: bool) -> (Vec<Role>, Vec<String>) {
        let file = crate::target::ElfFile::at(std::path::Path::new("/nonexistent"));
        let wanted = Wanted {
            batched,
            kinds: &[EventKind::MemRead, EventKind::Interrupt],
            usdt_globs: &[],
            probe_args: &[],
            allow_unverified: false,
            declared: &|_, _, _| false,
        };
        let mut selection = Selection::default();
        wanted.pick(0, table, &mut Symbols::of(&file), &mut selection);
        let mut roles: Vec<Role> = selection.sites.iter().map(|s| s.role).collect();
        roles.sort_by_key(|r| format!("{r:?}"));
        (roles, selection.rejected)
    }

    /// A file whose styx-probe batched fewer types than this loader (no
    /// `styx_batch:interrupt`) has those types' events taken per event,
    /// the others in batches.
    #[test]
    fn a_batched_type_without_its_batch_site_is_taken_per_event() {
        let table = batching_file(BATCH_LAYOUT_VERSION);
        assert_eq!(
            roles(&table, true).0,
            [
                Role::BatchEnable(EventKind::MemRead),
                Role::BatchFlush,
                Role::Event(EventKind::Interrupt),
            ]
        );
        assert_eq!(
            roles(&table, false).0,
            [
                Role::Event(EventKind::Interrupt),
                Role::Event(EventKind::MemRead),
            ]
        );
    }

    /// A file whose styx-probe makes batches in another layout: neither
    /// its flush site nor a batch-enable site is attached (every event
    /// one hit), and the one line says which layouts.
    #[test]
    fn a_file_whose_batches_are_in_another_layout_is_taken_per_event() {
        let other = BATCH_LAYOUT_VERSION + 1;
        let (roles, rejected) = roles(&batching_file(other), true);
        assert_eq!(
            roles,
            [
                Role::Event(EventKind::Interrupt),
                Role::Event(EventKind::MemRead),
            ]
        );
        let said = format!(
            "batches are in layout {other}, this loader reads layouts \
             {OLDEST_BATCH_LAYOUT_VERSION} to {BATCH_LAYOUT_VERSION}"
        );
        assert!(rejected.iter().any(|r| r.contains(&said)), "{rejected:?}");
    }

    /// A flush site of this layout (six arguments) or of layout 3 (five,
    /// 16 KiB batches) is taken; one of other arguments or of an older
    /// layout is not, and the file's events are taken per event.
    #[test]
    fn flush_sites_of_both_known_layouts_are_taken() {
        let batched_with = |layout: u16, flush_args: &str| {
            let mut table = batching_file(layout);
            table.sites[0].args = flush_args.into();
            let (roles, _) = roles(&table, true);
            let flush = roles.contains(&Role::BatchFlush);
            let per_event = roles.contains(&Role::Event(EventKind::MemRead));
            assert_ne!(flush, per_event, "{layout} {flush_args}");
            flush
        };
        assert!(batched_with(BATCH_LAYOUT_VERSION, FLUSH_SPEC));
        assert!(batched_with(
            OLDEST_BATCH_LAYOUT_VERSION,
            FLUSH_SPEC_LAYOUT_3
        ));
        let four = "8@%rdi 8@%rsi 8@%rdx 8@%rcx";
        assert!(!batched_with(BATCH_LAYOUT_VERSION, four));
        let seven = "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9 8@%r10";
        assert!(!batched_with(BATCH_LAYOUT_VERSION, seven));
        let older = OLDEST_BATCH_LAYOUT_VERSION - 1;
        assert!(!batched_with(older, FLUSH_SPEC_LAYOUT_3));
    }

    #[test]
    fn no_semaphore_gets_more_sites_than_its_16_bit_counter_holds() {
        let mut table = ProbeTable::default();
        // One semaphore shared by 32,770 sites across two probes, another
        // by 3, and 40,000 sites without a semaphore.
        for i in 0..32_770u64 {
            let name = if i % 2 == 0 { "even" } else { "odd" };
            table.sites.push(site("p", name, 0x10_0000 + i, 0x5000));
        }
        for i in 0..3u64 {
            table.sites.push(site("p", "other", 0x20_0000 + i, 0x6000));
        }
        for i in 0..40_000u64 {
            table.sites.push(site("p", "free", 0x30_0000 + i, 0));
        }
        let file = crate::target::ElfFile::at(std::path::Path::new("/nonexistent"));
        let globs = [glob::Pattern::new("p:*").unwrap()];
        let wanted = Wanted {
            batched: true,
            kinds: &[],
            usdt_globs: &globs,
            probe_args: &[],
            allow_unverified: false,
            declared: &|_, _, _| false,
        };
        let mut selection = Selection::default();
        wanted.pick(0, &table, &mut Symbols::of(&file), &mut selection);
        let count = |sema: u64| {
            selection
                .sites
                .iter()
                .filter(|s| s.site.semaphore == sema)
                .count()
        };
        assert_eq!(count(0x5000), MAX_SITES_PER_SEMAPHORE);
        assert_eq!(count(0x6000), 3);
        assert_eq!(count(0), 40_000);
        assert_eq!(selection.rejected.len(), 1, "{:?}", selection.rejected);
        let line = &selection.rejected[0];
        assert!(line.contains("3 sites") && line.contains("32767"), "{line}");
        // Cookies still index the spec table.
        for site in &selection.sites {
            assert_eq!(selection.usdt[site.cookie as usize].probe, site.site.name);
        }
    }
}
