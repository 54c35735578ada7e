//! The session's outputs: the writer for `-o` on `--output` (or stdout),
//! plus a raw capture on `--capture`; errors name the file that failed.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use styx_events::formats::{self, Detail, Format};
use styx_events::header::Header;
use styx_events::writer::{EventWriter, Labeled, Tee};

/// Where events go.
#[cfg_attr(not(feature = "trace"), allow(dead_code))]
pub struct Outputs<'a> {
    /// The format of the main output.
    pub format: Format,
    /// The main output's file; stdout if None.
    pub output: Option<&'a Path>,
    /// A raw capture of the same events, if asked for.
    pub capture: Option<&'a PathBuf>,
    /// Text only.
    pub detail: Detail,
}

/// Opens every output and writes their starts.
#[cfg_attr(not(feature = "trace"), allow(dead_code))]
pub fn open(outputs: &Outputs<'_>, header: &Header) -> Result<Box<dyn EventWriter>> {
    if outputs.format == Format::Raw && outputs.output.is_none() && io::stdout().is_terminal() {
        bail!("-o raw writes a binary capture: give --output FILE, or pipe it");
    }
    let main = open_one(outputs.format, outputs.output, outputs.detail, header)?;
    Ok(match outputs.capture {
        None => main,
        Some(path) => Box::new(Tee(vec![
            main,
            open_one(Format::Raw, Some(path), outputs.detail, header)?,
        ])),
    })
}

/// One output, unbuffered: every format gathers its own chunks.
pub fn open_one(
    format: Format,
    path: Option<&Path>,
    detail: Detail,
    header: &Header,
) -> Result<Box<dyn EventWriter>> {
    let (out, name): (Box<dyn Write>, String) = match path {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
            (Box::new(file), path.display().to_string())
        }
        None => (Box::new(io::stdout()), "stdout".to_string()),
    };
    let labeled = Labeled::new(out, name.clone());
    formats::open(
        format,
        Box::new(labeled),
        header,
        &formats::Options::new(path, detail),
    )
    .with_context(|| format!("writing the start of {name}"))
}
