//! `--probe-args 'PROVIDER:PROBE=ARG,…'`: what another provider's probe
//! arguments are, and their names, where its note cannot say. A note's
//! argument spec gives only where each argument is, its size and its sign
//! (`8@%rdi`): a string's address and a `u64` look alike, and no name is
//! recorded (the `usdt` crate's `&str` and JSON arguments, Python's
//! `function__entry` filename and function name). Each ARG is `TYPE` or
//! `NAME:TYPE`, TYPE one of `int` (as the note says), `u8`…`u64`,
//! `i8`…`i64` (the value read, cast), `str` (the address of a
//! NUL-terminated string, copied) or `json` (a string holding JSON).

use crate::note::ProbeSite;
use styx_common::{is_arg_name, ArgType, ARG_STRING, MAX_ARG_NAME, MAX_USDT_ARGS};
use thiserror::Error;

/// One `--probe-args` value: the probes it is for, and their arguments.
#[derive(Clone, Debug)]
pub struct ProbeArgs {
    /// `provider:probe` glob, as `--probes` takes.
    pub pattern: glob::Pattern,
    /// The arguments in order.
    pub args: Vec<DeclaredArg>,
}

/// One declared argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclaredArg {
    /// Its name, if given.
    pub name: Option<String>,
    /// Its type; `None` for `int`, as the note says.
    pub ty: Option<ArgType>,
}

/// What a USDT site's arguments are called and how output shows them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteArg {
    /// The declared name, if any (output then uses `arg0`, `arg1`…).
    pub name: Option<String>,
    /// The declared type, else the note's.
    pub ty: ArgType,
}

/// A `--probe-args` value styx cannot use; each says what is wrong in one line.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ProbeArgsError {
    /// No `=` between the probes and the arguments.
    #[error(
        "--probe-args {0:?}: expected PROVIDER:PROBE=TYPE,… (e.g. 'app:request=id:u64,path:str')"
    )]
    Form(String),
    /// The probe glob does not parse.
    #[error("--probe-args {text:?}: {reason}")]
    Glob {
        /// The value given.
        text: String,
        /// What the glob parser said.
        reason: String,
    },
    /// A type styx does not know.
    #[error("--probe-args {text:?}: unknown type {ty:?} (int, u8…u64, i8…i64, str, json)")]
    Type {
        /// The value given.
        text: String,
        /// The type given.
        ty: String,
    },
    /// A name that is not an identifier, too long, or given twice.
    #[error("--probe-args {text:?}: argument name {name:?} {why}")]
    Name {
        /// The value given.
        text: String,
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// More arguments than a USDT probe can have.
    #[error("--probe-args {text:?}: {count} arguments, at most {MAX_USDT_ARGS}")]
    TooMany {
        /// The value given.
        text: String,
        /// How many it declares.
        count: usize,
    },
}

impl std::str::FromStr for ProbeArgs {
    type Err = ProbeArgsError;

    fn from_str(text: &str) -> Result<ProbeArgs, ProbeArgsError> {
        let (probes, list) = text
            .split_once('=')
            .filter(|(probes, _)| probes.contains(':'))
            .ok_or_else(|| ProbeArgsError::Form(text.to_string()))?;
        let pattern = glob::Pattern::new(probes).map_err(|e| ProbeArgsError::Glob {
            text: text.to_string(),
            reason: e.to_string(),
        })?;
        let items: Vec<&str> = list.split(',').collect();
        if items.len() > MAX_USDT_ARGS {
            return Err(ProbeArgsError::TooMany {
                text: text.to_string(),
                count: items.len(),
            });
        }
        let mut args: Vec<DeclaredArg> = Vec::with_capacity(items.len());
        for item in items {
            let arg = declared_arg(text, item.trim())?;
            if let Some(name) = &arg.name {
                if args.iter().any(|a| a.name.as_ref() == Some(name)) {
                    return Err(name_error(text, name, "is given twice"));
                }
            }
            args.push(arg);
        }
        Ok(ProbeArgs { pattern, args })
    }
}

fn declared_arg(text: &str, item: &str) -> Result<DeclaredArg, ProbeArgsError> {
    let (name, ty) = match item.split_once(':') {
        Some((name, ty)) => (Some(name), ty),
        None => (None, item),
    };
    if let Some(name) = name {
        check_name(text, name)?;
    }
    let ty = match ty {
        "int" => None,
        other => Some(ArgType::parse(other).ok_or_else(|| ProbeArgsError::Type {
            text: text.to_string(),
            ty: other.to_string(),
        })?),
    };
    Ok(DeclaredArg {
        name: name.map(str::to_string),
        ty,
    })
}

fn check_name(text: &str, name: &str) -> Result<(), ProbeArgsError> {
    if is_arg_name(name) {
        return Ok(());
    }
    let why = if name.len() > MAX_ARG_NAME {
        "is longer than 64 bytes"
    } else {
        "is not a name (letters, digits and _, not first a digit)"
    };
    Err(name_error(text, name, why))
}

fn name_error(text: &str, name: &str, why: &'static str) -> ProbeArgsError {
    ProbeArgsError::Name {
        text: text.to_string(),
        name: name.chars().take(80).collect(),
        why,
    }
}

/// Well-known providers' probes whose arguments their notes cannot say
/// (a string's address reads as a `u64`), as their projects document
/// them: what a site of theirs is read as when no `--probe-args` matches
/// it and its note agrees ([`well_known`]). Names stay clear of the
/// fields every event has (`event`, `ts_ns`…), which the loader checks of
/// `--probe-args` too.
const WELL_KNOWN: &[&str] = &[
    // CPython's markers (Doc/howto/instrumentation.rst).
    "python:function__entry=filename:str,funcname:str,lineno:int",
    "python:function__return=filename:str,funcname:str,lineno:int",
    "python:line=filename:str,funcname:str,lineno:int",
    "python:gc__start=generation:int",
    "python:gc__done=collected:int",
    "python:import__find__load__start=modulename:str",
    "python:import__find__load__done=modulename:str,found:int",
    "python:audit=audit_event:str,audit_args:u64",
    // PostgreSQL's probes with a string (the manual's Dynamic Tracing).
    "postgresql:query__start=query:str",
    "postgresql:query__done=query:str",
    "postgresql:query__parse__start=query:str",
    "postgresql:query__parse__done=query:str",
    "postgresql:query__rewrite__start=query:str",
    "postgresql:query__rewrite__done=query:str",
    "postgresql:statement__status=status:str",
];

/// Every [`WELL_KNOWN`] declaration, parsed.
pub fn well_known_list() -> &'static [ProbeArgs] {
    static PARSED: std::sync::LazyLock<Vec<ProbeArgs>> = std::sync::LazyLock::new(|| {
        (WELL_KNOWN.iter())
            .map(|text| text.parse().expect("a well-known declaration parses"))
            .collect()
    });
    &PARSED
}

/// What a well-known provider's `site` is read as ([`WELL_KNOWN`]), if it
/// is one and its compiled `spec` agrees: as many arguments, each string
/// an 8-byte address. A site that does not agree (another program's
/// provider of the same name) is read as its note says, silently: nobody
/// asked for the declaration.
pub fn well_known(site: &ProbeSite, spec: &styx_common::UsdtSpec) -> Option<&'static ProbeArgs> {
    let declared = declared_for(well_known_list(), site)?;
    let nargs = (spec.nargs as usize).min(MAX_USDT_ARGS);
    let fits = declared.args.len() == nargs
        && (declared.args.iter().zip(&spec.args))
            .all(|(arg, note)| !arg.ty.is_some_and(|ty| ty.is_string()) || note.size == 8);
    fits.then_some(declared)
}

/// The first of `declared` for `site` (`provider:probe`), if any.
pub fn declared_for<'a>(declared: &'a [ProbeArgs], site: &ProbeSite) -> Option<&'a ProbeArgs> {
    let name = format!("{}:{}", site.provider, site.name);
    declared.iter().find(|d| d.pattern.matches(&name))
}

/// Applies `declared` (if any) to a site's compiled `spec`: string
/// arguments are marked for the eBPF program to copy. Returns each
/// argument's name and type, and a line for each declaration that does
/// not fit the note (the note's reading is kept for that argument), the
/// same for every site of a probe with the same spec, so said once.
pub fn apply(
    declared: Option<&ProbeArgs>,
    site: &ProbeSite,
    spec: &mut styx_common::UsdtSpec,
) -> (Vec<SiteArg>, Vec<String>) {
    let nargs = (spec.nargs as usize).min(MAX_USDT_ARGS);
    let mut warnings = Vec::new();
    let none = [];
    let given = declared.map_or(&none[..], |d| &d.args[..]);
    if declared.is_some() && given.len() != nargs {
        let rest = if given.len() > nargs {
            "the extra ones are ignored"
        } else {
            "the others are read as the note says"
        };
        warnings.push(format!(
            "{}:{}: --probe-args declares {} arguments, its note has {nargs} ({:?}): {rest}",
            site.provider,
            site.name,
            given.len(),
            site.args,
        ));
    }
    let args =
        spec.args[..nargs]
            .iter_mut()
            .enumerate()
            .map(|(i, arg)| {
                let note_ty = ArgType::int(arg.size, arg.signed != 0);
                let declared = given.get(i);
                let mut ty = declared.and_then(|d| d.ty).unwrap_or(note_ty);
                if ty.is_string() && arg.size != 8 {
                    warnings.push(format!(
                    "{}:{}: argument {i} is {} bytes ({:?}), not an address: shown as {}, not {}",
                    site.provider, site.name, arg.size, site.args, note_ty.name(), ty.name()
                ));
                    ty = note_ty;
                }
                if ty.is_string() {
                    arg.flags |= ARG_STRING;
                }
                SiteArg {
                    name: declared.and_then(|d| d.name.clone()),
                    ty,
                }
            })
            .collect();
    (args, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ProbeArgs, String> {
        text.parse::<ProbeArgs>().map_err(|e| e.to_string())
    }

    #[test]
    fn names_and_types_are_read() {
        let declared = parse("app:req*=id:u64,str,body:json,int").unwrap();
        assert!(declared.pattern.matches("app:request"));
        let want = |name: Option<&str>, ty| DeclaredArg {
            name: name.map(str::to_string),
            ty,
        };
        assert_eq!(
            declared.args,
            [
                want(Some("id"), ArgType::parse("u64")),
                want(None, Some(ArgType::Str)),
                want(Some("body"), Some(ArgType::Json)),
                want(None, None),
            ]
        );
    }

    #[test]
    fn bad_values_get_one_line() {
        for (text, says) in [
            ("app:req", "expected PROVIDER:PROBE=TYPE"),
            ("request=u64", "expected PROVIDER:PROBE=TYPE"),
            ("app:[=u64", "--probe-args \"app:[=u64\": "),
            ("app:req=u128", "unknown type \"u128\""),
            ("app:req=", "unknown type \"\""),
            ("app:req=1x:u64", "argument name \"1x\" is not a name"),
            ("app:req=a-b:u64", "argument name \"a-b\" is not a name"),
            ("app:req=:u64", "argument name \"\" is not a name"),
            ("app:req=a:u8,a:str", "argument name \"a\" is given twice"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
            assert!(!err.contains('\n'), "{text}: {err}");
        }
        let long = format!("app:req={}:u8", "n".repeat(65));
        assert!(parse(&long).unwrap_err().contains("longer than 64 bytes"));
        let many = format!("app:req={}", ["u8"; 13].join(","));
        assert!(parse(&many)
            .unwrap_err()
            .contains("13 arguments, at most 12"));
    }

    fn site(args: &str) -> ProbeSite {
        ProbeSite {
            provider: "app".into(),
            name: "req".into(),
            address: 0x1000,
            file_offset: 0x1000,
            semaphore: 0,
            semaphore_offset: 0,
            args: args.into(),
            start_checked: true,
        }
    }

    fn spec_of(sizes: &[(u8, bool)]) -> styx_common::UsdtSpec {
        let mut spec = styx_common::UsdtSpec {
            nargs: sizes.len() as u32,
            ..Default::default()
        };
        for (arg, &(size, signed)) in spec.args.iter_mut().zip(sizes) {
            arg.size = size;
            arg.signed = signed.into();
        }
        spec
    }

    #[test]
    fn strings_are_marked_and_mismatches_said() {
        let declared = parse("app:*=id:u32,name:str,str").unwrap();
        let mut spec = spec_of(&[(8, false), (8, false), (4, true)]);
        let (args, warnings) = apply(Some(&declared), &site("8@%rdi 8@%rsi -4@%edx"), &mut spec);
        assert_eq!(args[0].ty, ArgType::int(4, false));
        assert_eq!(args[1].ty, ArgType::Str);
        assert_eq!(args[1].name.as_deref(), Some("name"));
        assert_eq!(args[2].ty, ArgType::int(4, true));
        assert_eq!(spec.args[1].flags & ARG_STRING, ARG_STRING);
        assert_eq!(spec.args[0].flags & ARG_STRING, 0);
        assert_eq!(spec.args[2].flags & ARG_STRING, 0);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("argument 2 is 4 bytes"),
            "{warnings:?}"
        );
    }

    #[test]
    fn well_known_probes_are_read_only_where_their_notes_agree() {
        let python = |name: &str, args: &str| ProbeSite {
            provider: "python".into(),
            name: name.into(),
            ..site(args)
        };
        let entry = python("function__entry", "8@%rbp 8@%r12 -4@%eax");
        let spec = spec_of(&[(8, false), (8, false), (4, true)]);
        let declared = well_known(&entry, &spec).expect("CPython's function__entry");
        let mut compiled = spec;
        let (args, warnings) = apply(Some(declared), &entry, &mut compiled);
        assert!(warnings.is_empty(), "{warnings:?}");
        let names: Vec<_> = args.iter().map(|a| a.name.as_deref().unwrap()).collect();
        assert_eq!(names, ["filename", "funcname", "lineno"]);
        assert_eq!([args[0].ty, args[1].ty], [ArgType::Str; 2]);
        assert_eq!(args[2].ty, ArgType::int(4, true));
        // Another program's `python` provider, shaped otherwise: its note's.
        let two = spec_of(&[(8, false), (8, false)]);
        assert!(well_known(&python("function__entry", "8@%rbp 8@%r12"), &two).is_none());
        let narrow = spec_of(&[(4, false), (8, false), (4, true)]);
        assert!(well_known(&entry, &narrow).is_none());
        assert!(well_known(&python("nope", ""), &spec_of(&[])).is_none());
    }

    #[test]
    fn a_count_that_differs_is_said_and_the_note_fills_in() {
        let declared = parse("app:*=str").unwrap();
        let mut spec = spec_of(&[(8, false), (2, true)]);
        let (args, warnings) = apply(Some(&declared), &site("8@%rdi -2@%si"), &mut spec);
        assert_eq!(args[1].ty, ArgType::int(2, true));
        assert!(warnings[0].contains("declares 1 arguments, its note has 2"));
        let (_, warnings) = apply(None, &site("8@%rdi -2@%si"), &mut spec_of(&[(8, false)]));
        assert!(warnings.is_empty());
    }
}
