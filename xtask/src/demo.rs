//! `cargo xtask demo`: the 6502 demo emulator, traced.

use anyhow::Result;
use std::path::Path;

pub fn run(root: &Path) -> Result<()> {
    crate::setup::run(root)?;
    anyhow::bail!("the demo emulator is not wired up yet")
}
