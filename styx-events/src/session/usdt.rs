//! Other providers' probes (`--probes`) as outputs name them: provider,
//! probe and each argument's name and type, by spec id. This is what a
//! capture header keeps of them; where the eBPF program found the
//! arguments is the loader's business.

use crate::session::declared::EventType;
use crate::session::header::{default_arg_name, Header, UsdtInfo};
use crate::session::schema::FieldSchema;
use std::collections::HashMap;
use styx_common::{is_arg_name, ArgType};

/// One other provider's probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsdtProbe {
    pub provider: String,
    pub probe: String,
    /// Per argument: its name (`arg0`… unless named) and how it shows.
    pub args: Vec<(String, ArgType)>,
    /// Some argument was named (`--probe-args`): outputs show each as a
    /// field of its own, not in an `args` list.
    pub named: bool,
    /// The declaration of an event type the emulator declared, which says
    /// how each argument reads.
    pub declared: Option<EventType>,
    /// The declared type's fields as this site names and casts its
    /// arguments: its schema, walked as a catalogue kind's is (see
    /// `session::schema`). Empty for a probe no type declared.
    pub fields: Vec<FieldSchema>,
    /// The site's arguments are the schema's fields, one each, named and
    /// integers: outputs show them as fields, as the catalogue's.
    by_schema: bool,
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
            .map(|info| (info.spec_id, UsdtProbe::from_info(info)))
            .collect();
        UsdtProbes { by_id }
    }

    /// The probes `header` lists, each site of a declared type with its
    /// declaration (from the site, or for captures written before sites
    /// kept it, from the batches' declared types).
    pub fn from_header(header: &Header) -> UsdtProbes {
        let mut probes = UsdtProbes::from_infos(&header.usdt);
        for info in &header.declared {
            match probes.by_id.get_mut(&info.spec_id) {
                Some(probe) if probe.declared.is_none() => probe.declare(info.event.clone()),
                _ => {}
            }
        }
        probes
    }

    /// The probe with this spec id, if the header named it.
    pub fn get(&self, spec_id: u32) -> Option<&UsdtProbe> {
        self.by_id.get(&spec_id)
    }

    /// Every probe, with its spec id.
    pub fn iter(&self) -> impl Iterator<Item = (&u32, &UsdtProbe)> {
        self.by_id.iter()
    }
}

impl UsdtProbe {
    fn from_info(info: &UsdtInfo) -> UsdtProbe {
        let args: Vec<(String, ArgType)> = info
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| {
                // Every format writes a name as it is: a capture's header
                // could hold anything.
                let name = match is_arg_name(&a.name) {
                    true => a.name.clone(),
                    false => default_arg_name(i),
                };
                // A type this reader does not know shows as the number it is.
                (name, ArgType::parse(&a.ty).unwrap_or(U64))
            })
            .collect();
        let named = args
            .iter()
            .enumerate()
            .any(|(i, (name, _))| *name != default_arg_name(i));
        let mut probe = UsdtProbe {
            provider: info.provider.clone(),
            probe: info.probe.clone(),
            args,
            named,
            declared: None,
            fields: Vec::new(),
            by_schema: false,
        };
        if let Some(event) = &info.declared {
            probe.declare(event.clone());
        }
        probe
    }

    /// Takes `event` as the site's declaration: its fields, named as the
    /// site names its arguments, become the site's schema.
    fn declare(&mut self, event: EventType) {
        let arg = |i: usize| match self.args.get(i) {
            Some((name, ty)) => (name.clone(), *ty),
            None => (default_arg_name(i), U64),
        };
        self.fields = (event.fields.iter().enumerate())
            .map(|(i, field)| {
                let (name, ty) = arg(i);
                FieldSchema::declared(i, &name, ty, field)
            })
            .collect();
        let integers = self.args.iter().all(|(_, ty)| !ty.is_string());
        self.by_schema = self.named && integers && self.args.len() == self.fields.len();
        self.declared = Some(event);
    }

    /// Its schema, if a record of `values` arguments is walked by it (else
    /// its arguments show by position, `fields::UsdtArgs`).
    #[inline]
    pub fn schema(&self, values: usize) -> Option<&[FieldSchema]> {
        (self.by_schema && values == self.fields.len()).then_some(&self.fields[..])
    }

    /// The declaration of argument `i`, if its probe is a declared type's
    /// with that many fields.
    pub fn declared_field(&self, i: usize) -> Option<&FieldSchema> {
        self.fields.get(i)
    }
}

const U64: ArgType = ArgType::int(8, false);
