//! Picks the probe sites to attach: styx's own probes, of the selected event
//! types, whose argument specs are the ones the eBPF programs read.

use crate::stapsdt::{ProbeSite, ProbeTable};
use std::collections::BTreeMap;
use styx_common::{EventKind, PROVIDER};

/// A site to attach and the event it reports.
pub struct Selected {
    pub kind: EventKind,
    pub site: ProbeSite,
}

pub struct Selection {
    pub sites: Vec<Selected>,
    /// Sites left out because their argument spec is not what styx-probe
    /// emits: one line each.
    pub rejected: Vec<String>,
}

/// The argument spec styx-probe's probes carry: every argument a u64 in the
/// next SysV argument register, which is where the eBPF programs read them.
pub fn expected_spec(kind: EventKind) -> String {
    const REGS: [&str; 6] = ["%rdi", "%rsi", "%rdx", "%rcx", "%r8", "%r9"];
    REGS[..kind.probe_args().len()]
        .iter()
        .map(|reg| format!("8@{reg}"))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn select(table: &ProbeTable, kinds: &[EventKind]) -> Selection {
    let mut selection = Selection {
        sites: Vec::new(),
        rejected: Vec::new(),
    };
    for site in table.sites.iter().filter(|s| s.provider == PROVIDER) {
        let Some(kind) = EventKind::from_probe_name(&site.name) else {
            selection.rejected.push(format!(
                "{}:{} at {:#x} is not a styx event this loader knows (newer styx-probe?)",
                site.provider, site.name, site.address
            ));
            continue;
        };
        if !kinds.contains(&kind) {
            continue;
        }
        let expected = expected_spec(kind);
        if site.args != expected {
            selection.rejected.push(format!(
                "{}:{} at {:#x} has argument spec {:?}, expected {:?}: not attached",
                site.provider, site.name, site.address, site.args, expected
            ));
            continue;
        }
        selection.sites.push(Selected {
            kind,
            site: site.clone(),
        });
    }
    selection
}

/// "3 probes from providers a, b" or "no USDT probes at all", to say what a
/// binary without styx probes does have.
pub fn describe_providers(table: &ProbeTable) -> String {
    let mut providers: BTreeMap<&str, usize> = BTreeMap::new();
    for site in &table.sites {
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
}
