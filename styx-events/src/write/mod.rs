//! The writer machinery every format shares: the `EventWriter` trait and
//! its decorators, the byte buffer formats write into, escaping, and
//! numbers as people read them.

pub mod buf;
pub mod escape;
pub mod human;
pub mod writer;
