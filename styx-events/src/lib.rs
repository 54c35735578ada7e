//! styx's events after the ring buffer, without the kernel: no root, no
//! eBPF, no async runtime. `styx-loader` feeds it records live; `read` and
//! the consumer benchmark feed it captures.
//!
//! The crate is in five rooms, each depending only on those before it:
//! 1. `record`: a ring-buffer record decoded into an [`Event`], borrowed
//!    in place; a batch record split into its events ([`Batches`]);
//!    [`partial`] reads the batches a stopping process's threads still
//!    hold from its memory;
//! 2. `write`: the [`EventWriter`] every format is, its decorators
//!    ([`Tee`], [`Discard`]), the one byte buffer between a format and its
//!    output, [`escape`] and numbers for people ([`si`]);
//! 3. `session`: what every writer starts from, the session's [`Header`]
//!    (who was traced, clocks, probes, the emulator's [`Guest`]), which a
//!    capture also stores, and an event's fields walked from styx-common's
//!    event catalogue: the one place every format learns how an event reads;
//! 4. `questions`: what a run asks beyond writing events: [`Filters`] and
//!    [`Keep`] (`--filter`, `--sample`), `top`'s counts ([`CountWriter`],
//!    [`View`], [`heatmap`]), traced functions' calls paired
//!    ([`CallTracker`], [`CallTable`]), and the [`FlightRecorder`];
//! 5. `formats`: every output format, picked by [`Format`] and made by
//!    [`open`] on an [`Output`] (stdout, a file, a directory), the one
//!    place outputs are created: JSON lines, text, the raw capture (and its
//!    [`Reader`], which gives events back to any format), Chrome JSON,
//!    Perfetto, drcov, Tenet, Parquet, folded stacks.
//!
//! The modules are private; what other crates use is re-exported here.
#![warn(missing_docs)]

mod formats;
mod questions;
mod record;
mod session;
mod write;

pub use formats::drcov::MAX_INSN_GAP as DRCOV_MAX_INSN_GAP;
pub use formats::raw::VERSION as CAPTURE_VERSION;
pub use formats::raw::{read_blocks, MakeFormatter, ParallelError};
pub use formats::raw::{
    BatchDeltas, Block, CaptureError, CaptureWriter, Compression, Ending, Reader, HELD_AT_MOST,
};
pub use formats::{
    create_file, open, open_block_formatter, open_stream, usdt_name_taken, Detail, Format, Options,
    Output, OutputError,
};
pub use questions::calls::{CallTable, CallTracker};
pub use questions::cut::{Bound, Cut, Types};
pub use questions::filter::{FilterError, Filters, Keep};
pub use questions::flight::{FlightRecorder, Limits, OpenDump, Recording, EXITED_KEPT_LOOKS};
pub use questions::top::{heatmap, CountWriter, KeyRef, KeySpec, Table, TableFormat, View};
pub use record::batch::{BatchError, Batches, Declared, DeclaredTypes, Irregular};
pub use record::event::{decode, Body, Call, DecodeError, Event, Text};
pub use record::{batch_items, partial};
pub use session::code::CodeNames;
pub use session::declared::{DeclaredField, DeclaredSites, EnumValues, EventType, SchemaError};
pub use session::guest::{Guest, GuestError, Image, Register, RegisterNames, Within};
pub use session::header::{clock_ns, ClockId, DeclaredInfo, Header, MappedFile, UsdtInfo};
pub use write::escape;
pub use write::human::si;
pub use write::writer::{Discard, EventWriter, FormatBlock, Formatted, Helper, Runs, Tee, Totals};
