//! Other providers' probes (`--probes`) as outputs name them: provider,
//! probe and each argument's signedness, by spec id. This is what a capture
//! header keeps of them; where the eBPF program found the arguments is the
//! loader's business.

use crate::session::header::UsdtInfo;
use std::collections::HashMap;

/// One other provider's probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsdtProbe {
    pub provider: String,
    pub probe: String,
    /// Per argument: whether it is signed.
    pub signed: Vec<bool>,
}

/// The probes of a session, by spec id.
#[derive(Clone, Debug, Default)]
pub struct UsdtProbes {
    by_id: HashMap<u32, UsdtProbe>,
}

impl UsdtProbes {
    /// The probes a header lists.
    pub fn from_infos(infos: &[UsdtInfo]) -> UsdtProbes {
        let by_id = infos
            .iter()
            .map(|info| {
                let probe = UsdtProbe {
                    provider: info.provider.clone(),
                    probe: info.probe.clone(),
                    signed: info.args.iter().map(|a| a.ty.starts_with('i')).collect(),
                };
                (info.spec_id, probe)
            })
            .collect();
        UsdtProbes { by_id }
    }

    /// The probe with this spec id, if the header named it.
    pub fn get(&self, spec_id: u32) -> Option<&UsdtProbe> {
        self.by_id.get(&spec_id)
    }
}
