//! The commands: trace (the default), `list`, `read`, `top` (`top.rs`
//! also counts for `read --by`).

pub mod list;
pub mod read;
pub mod top;
#[cfg(feature = "trace")]
pub mod trace;
