//! `styx-declare FILE [-o HEADER]`: a C or C++ emulator's event types and
//! guest description, declared in FILE (see `styx_probe_c::declare`),
//! made into a header to include beside `styx_probe.h`; on standard
//! output without `-o`.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;

fn main() -> Result<()> {
    let mut args = std::env::args_os().skip(1);
    let (mut input, mut output) = (None, None);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("-o") => output = Some(PathBuf::from(args.next().context("-o wants a file")?)),
            Some("-h" | "--help") => {
                println!("usage: styx-declare FILE [-o HEADER]");
                return Ok(());
            }
            _ if input.is_none() => input = Some(PathBuf::from(arg)),
            _ => bail!(
                "one declaration file, not {arg:?} too (usage: styx-declare FILE [-o HEADER])"
            ),
        }
    }
    let input = input.context("usage: styx-declare FILE [-o HEADER]")?;
    let text =
        std::fs::read_to_string(&input).with_context(|| format!("reading {}", input.display()))?;
    let declarations =
        styx_probe_c::declare::parse(&text).with_context(|| format!("in {}", input.display()))?;
    let name = input.file_name().unwrap_or_default().to_string_lossy();
    let header = styx_probe_c::declare::generate(&declarations, &name)?;
    match output {
        Some(path) => {
            std::fs::write(&path, header).with_context(|| format!("writing {}", path.display()))?
        }
        None => print!("{header}"),
    }
    Ok(())
}
