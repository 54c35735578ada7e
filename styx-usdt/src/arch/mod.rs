//! Architecture-specific facts; styx traces x86-64 processes.

pub mod x86_64;
