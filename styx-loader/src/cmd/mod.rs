//! The commands: trace (the default), `list`, `read`.

pub mod list;
pub mod read;
#[cfg(feature = "trace")]
pub mod trace;
