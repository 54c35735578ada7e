//! styx-loader's parts, as a library so tests and tools can reuse them.

pub mod argspec;
pub mod capture;
pub mod chrome;
pub mod cli;
pub mod drain;
pub mod ebpf;
pub mod fields;
pub mod format;
pub mod format_bytes;
pub mod list;
pub mod live;
pub mod perfetto;
pub mod rates;
pub mod read;
pub mod record;
pub mod report;
pub mod sites;
pub mod spans;
pub mod spawn;
pub mod stapsdt;
pub mod target;
pub mod trace;
pub mod uprobe_link;
pub mod usdt_spec;
