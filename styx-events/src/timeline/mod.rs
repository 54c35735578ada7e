//! The timeline formats, for trace viewers: spans as nested slices per
//! thread ([`spans`] pairs ends with begins), other events as instants, and
//! per-type event rates as counters ([`rates`]).

pub mod chrome;
pub mod perfetto;
pub mod rates;
pub mod spans;
