//! styx's events after the ring buffer, without the kernel: no root, no
//! eBPF, no async runtime. `styx-loader` feeds it records live; `read` and
//! the consumer benchmark feed it captures.
//!
//! The pipeline, in module order:
//! 1. [`event`]: a ring-buffer record decoded into an [`event::Event`], or
//!    [`batch`]: a batch record split into its events ([`partial`] makes
//!    such records of the batches a process's threads still hold, read
//!    from its memory);
//! 2. [`fields`]: an event's fields in order, named and typed, walked from
//!    styx-common's event catalogue: the one place every format learns how
//!    an event reads;
//! 3. [`writer`]: the [`writer::EventWriter`] every format is, and the one
//!    chunked buffer ([`bytes::Bytes`]) between a format and its output;
//!    every writer starts from the session's [`header::Header`] (who was
//!    traced, clocks, probes), which a capture also stores;
//! 4. the formats, picked by [`formats::Format`]: [`lines`] (JSON lines,
//!    text), [`timeline`] (Chrome JSON, Perfetto: spans as slices, rates as
//!    counters), and [`capture`] (the raw capture, and its reader, which
//!    gives events back to any format);
//! 5. [`calls`]: traced functions' entries paired with their exits (depth,
//!    duration, unwinding), the per-function table and `-o folded`, in
//!    front of any format.
#![warn(missing_docs)]

pub mod batch;
pub mod batch_items;
pub mod bytes;
pub mod calls;
pub mod capture;
pub mod escape;
pub mod event;
pub mod fields;
pub mod filter;
pub mod flight;
pub mod formats;
pub mod guest;
pub mod header;
pub mod lines;
pub mod options;
pub mod partial;
pub mod timeline;
pub mod tools;
pub mod top;
pub mod usdt;
pub mod writer;
