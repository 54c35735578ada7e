//! Parquet for SQL engines (DuckDB, pandas/Polars, Spark, ClickHouse),
//! written with the arrow-rs `parquet` crate's column writers.
//!
//! One table, one row per event: `ts_ns`, `pid`, `tid`, `event`, then a
//! nullable column for every field any event type has, derived from the
//! event catalogue (`reg` also gets `reg_name` where the guest names its
//! registers; other providers' probes get `provider`, `probe` and
//! `arg0`… when the session traced any; a declared type a column per
//! field, typed as its kind reads). One table rather than a file per type because the
//! common questions cross types: `GROUP BY event`, `GROUP BY pc` over every
//! type, a time range; a column of nulls costs almost nothing in Parquet.
//! Numbers are unsigned 64-bit (DuckDB's UBIGINT), USDT arguments signed
//! (a column styx's events share with a signed argument is signed).
//!
//! Within a row group, rows are grouped by event type (in time order within
//! each type): a type's columns then hold runs of values and the others
//! runs of nulls, which is what makes writing cheap (definition levels in
//! long runs) and files small (integers delta-coded, then Snappy). Queries
//! that want a timeline say `ORDER BY ts_ns`, as SQL needs anyway.
//!
//! Rows are gathered into row groups of at most [`ROW_GROUP_ROWS`] rows
//! (and [`ROW_GROUP_TEXT_BYTES`] of strings), each written out as it
//! fills: memory stays bounded however long the run. With `--output DIR/`
//! the writer rolls to a new file once one reaches `--roll-size` (default
//! [`crate::formats::ROLL_BYTES`]); a file
//! is written as `NAME.parquet.part` and renamed when complete, so a glob
//! `DIR/*.parquet` only ever sees whole files.
//!
//! Parallel `read` of every event hands each worker runs of a row group's
//! events ([`EventWriter::runs`]): the worker gathers and encodes the
//! group whole, as one thread does ([`GroupEncoding`]), and the writer
//! appends its columns in order; the capture's last group, short, comes
//! as rows. A run whose strings would fill its group before its last
//! event is not one group: then, and for a cut read (`-e`, `--from`,
//! `--to`: which rows a group gets is known only once decoded), the
//! blocks are read as follows. (Whole groups on the workers took ~6% more
//! CPU time than one thread on the demo's 19 M-event capture; the way
//! below ~19%, its pieces faulting in ~0.4 GB.)
//!
//! Parallel `read` gathers each block's rows on a worker ([`RowGatherer`]),
//! with each event's type and bytes of strings; the writer cuts them into
//! the row groups it would have made of the events one by one and hands
//! each group, a few blocks' rows, to the encoder, which writes a type's
//! rows of a column from several blocks as the one call a writer that
//! gathered them all would make ([`Run`]: whole write batches straight
//! from each block's rows, only a batch across two blocks copied): the
//! file is byte for byte the serial one. Blocks' rows go to the encoder
//! as they were gathered (not copied on the calling thread: that copy,
//! and the cache lines it passed between cores, cost more than the
//! encoding it overlapped); of a block across two groups, only the rows
//! of the second are copied out. The workers also encode the row groups
//! between blocks, a column each at a time ([`EncodeOn::Shared`]): an
//! encoder thread of its own, needing over a third of two cores' time,
//! got its fair share against two workers and no more, and held them up.
//!
//! Every way of writing encodes each column of a row group into bytes of
//! its own and appends them to the file in the schema's order
//! (`SerializedRowGroupWriter::append_column`), so the file is the same
//! whoever encoded which column. (On one thread that also took ~7% less
//! time than writing the columns straight into the file's buffer, which
//! faulted in ~4× the pages: the demo's capture, `read --threads 1`.)

use crate::formats::output::{create_file, Output};
use crate::record::event::{Body, Event};
use crate::session::fields::{for_each_field, is_plain, plain_values, Arg, Field, Names};
use crate::session::header::Header;
use crate::session::reading::{Reading, Shows, Stored};
use crate::session::schema::{self, FieldSchema};
use crate::session::usdt::UsdtProbes;
use crate::write::writer::{EventWriter, FormatBlock, Formatted, Helper, Runs, Totals};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use parquet::basic::{Compression, Encoding};
use parquet::column::writer::{
    get_column_writer, get_typed_column_writer_mut, ColumnCloseResult, ColumnWriterImpl,
};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DataType, Int64Type};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::{ColumnPath, SchemaDescPtr, SchemaDescriptor, Type};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use styx_common::schema::FieldKind;
use styx_common::{EventKind, EVENT_KIND_SLOTS};

/// Columns of few-valued strings, dictionary-coded (as are declared enum
/// fields' columns); `event`'s hashing per row costs more than its plain
/// bytes, which compression shrinks.
const DICTIONARY_COLUMNS: &[&str] = &["kind", "reg_name", "category", "name", "provider", "probe"];

/// Rows per row group at most.
pub const ROW_GROUP_ROWS: usize = 1 << 20;
/// Bytes of strings per row group at most.
pub const ROW_GROUP_TEXT_BYTES: usize = 64 << 20;

/// A column's type in the file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ColumnType {
    U64,
    I64,
    Str,
    Bool,
}

/// A column of the schema.
struct ColumnInfo {
    name: String,
    ty: ColumnType,
    /// Every row has a value (`ts_ns`, `pid`, `tid`, `event`).
    required: bool,
    /// Few distinct values (names): dictionary-coded.
    dictionary: bool,
}

impl ColumnInfo {
    fn new(name: &str, ty: ColumnType, required: bool) -> ColumnInfo {
        ColumnInfo {
            name: name.to_string(),
            ty,
            required,
            dictionary: DICTIONARY_COLUMNS.contains(&name),
        }
    }

    fn schema(&self) -> String {
        let rep = if self.required {
            "required"
        } else {
            "optional"
        };
        let (ty, logical) = match self.ty {
            ColumnType::U64 => ("int64", " (INTEGER(64,false))"),
            ColumnType::I64 => ("int64", ""),
            ColumnType::Str => ("binary", " (STRING)"),
            ColumnType::Bool => ("boolean", ""),
        };
        format!("{rep} {ty} {}{logical};", self.name)
    }
}

/// One column's values among one type's rows of the row group being
/// gathered (a column holds one type of value).
#[derive(Default)]
struct Values {
    /// Definition levels, one per row so far; empty while every row has a
    /// value (see [`levels`]).
    def: Vec<i16>,
    ints: Vec<i64>,
    strs: Vec<ByteArray>,
    bools: Vec<bool>,
}

impl Values {
    /// Values so far.
    fn len(&self) -> usize {
        self.ints.len() + self.strs.len() + self.bools.len()
    }

    /// Whether the next value goes at `row`: nulls up to it, then a value.
    #[inline]
    fn at(&mut self, row: usize) -> bool {
        if self.def.is_empty() {
            let n = self.len();
            if n == row {
                return true;
            }
            if n > row {
                return false; // a second value for one row: keep the first
            }
            self.def.resize(n, 1);
        } else if self.def.len() > row {
            return false;
        }
        self.def.resize(row, 0);
        self.def.push(1);
        true
    }

    /// Moves `source`'s first `rows` rows after these `own_rows` rows
    /// (parallel `read`: a block's rows into the row group).
    fn take_front(&mut self, own_rows: usize, source: &mut Values, rows: usize) {
        // Values of the rows moved: with no levels, the first ones' (see
        // `levels`), else one per level 1.
        let leveled = rows.min(source.def.len());
        let values = match source.def.is_empty() {
            true => rows.min(source.len()),
            false => source.def[..leveled].iter().filter(|&&d| d == 1).count(),
        };
        if values > 0 {
            // Levels stay implicit while every row so far has a value.
            let implicit = self.def.is_empty() && self.len() == own_rows && source.def.is_empty();
            if !implicit {
                if self.def.is_empty() {
                    self.def.resize(self.len(), 1);
                }
                self.def.resize(own_rows, 0);
                match source.def.is_empty() {
                    true => self.def.resize(own_rows + values, 1),
                    false => self.def.extend_from_slice(&source.def[..leveled]),
                }
            }
            let mut left = values;
            left -= move_front(&mut self.ints, &mut source.ints, left);
            left -= move_front(&mut self.strs, &mut source.strs, left);
            move_front(&mut self.bools, &mut source.bools, left);
        }
        // Rows past the levels (or values) are nulls, as they are here.
        source.def.drain(..leveled);
    }

    /// Moves the rows after the first `rows` to `to` (empty): a block's
    /// rest, which begins the next row group.
    fn move_back(&mut self, rows: usize, to: &mut Values) {
        // Values of the rows kept: with no levels, the first ones' (see
        // `levels`), else one per level 1.
        let leveled = rows.min(self.def.len());
        let kept = match self.def.is_empty() {
            true => rows.min(self.len()),
            false => self.def[..leveled].iter().filter(|&&d| d == 1).count(),
        };
        // Without levels the rows moved are values then nulls, as here.
        to.def.extend(self.def.drain(leveled..));
        move_back(&mut to.ints, &mut self.ints, kept);
        move_back(&mut to.strs, &mut self.strs, kept);
        move_back(&mut to.bools, &mut self.bools, kept);
    }

    fn clear(&mut self) {
        self.def.clear();
        self.ints.clear();
        self.strs.clear();
        self.bools.clear();
    }
}

/// Moves up to `n` of `from`'s first items to the end of `to`; how many.
fn move_front<T>(to: &mut Vec<T>, from: &mut Vec<T>, n: usize) -> usize {
    let n = n.min(from.len());
    match n == from.len() {
        true => to.append(from),
        false => to.extend(from.drain(..n)),
    }
    n
}

/// Moves `from`'s items after the first `keep` to the end of `to`.
fn move_back<T>(to: &mut Vec<T>, from: &mut Vec<T>, keep: usize) {
    if keep < from.len() {
        to.extend(from.drain(keep..));
    }
}

/// The definition levels of `rows` rows of `col`, which holds `values`
/// values: `ones` while every row has one (no levels kept), its own when
/// it has one for each row, else made in `scratch` (the rows past its
/// levels, or past its values, are nulls).
fn levels<'a>(
    col: &'a Values,
    values: usize,
    rows: usize,
    ones: &'a [i16],
    scratch: &'a mut Vec<i16>,
) -> &'a [i16] {
    if col.def.is_empty() && values == rows {
        return &ones[..rows];
    }
    if col.def.len() >= rows {
        return &col.def[..rows];
    }
    scratch.clear();
    match col.def.is_empty() {
        true => scratch.resize(values, 1),
        false => scratch.extend_from_slice(&col.def),
    }
    scratch.resize(rows, 0);
    scratch
}

/// Where the bytes go: one output, or files rolled in a directory.
enum Sink {
    One(Box<dyn Write>),
    Dir {
        dir: PathBuf,
        stem: String,
        seq: u32,
        /// The file being written and its final name.
        current: Option<(Box<dyn Write>, PathBuf)>,
    },
}

/// A plain kind's fields in order: each one's column, and its `_name`
/// column for a register.
type PlainColumns = Vec<(usize, Option<usize>)>;

/// One event type's rows of the row group being gathered: each schema
/// column's values (`event` is the type's name, not stored per row).
struct Part {
    rows: usize,
    /// Per schema column.
    columns: Vec<Values>,
}

/// Events as Parquet rows: gathered here (or by [`RowGatherer`]s on
/// parallel `read`'s workers), encoded by an [`EncodeOn`].
pub struct ParquetWriter {
    gatherer: Gatherer,
    /// The row group being gathered: the rows this writer gathers, or
    /// blocks' rows as workers gathered them, in order.
    group: Group,
    /// Emptied pieces, to gather into again (at most [`POOL_PIECES`]).
    pool: Group,
    /// The group's last piece is a block's rows taken whole (parallel
    /// `read`).
    last_is_whole: bool,
    /// Columns of the schema.
    columns: usize,
    encoding: EncodeOn,
    /// Encode on a thread of its own once there is a row group.
    own_thread: bool,
    /// Threads at most, for the row groups left when a parallel `read`
    /// ends ([`EncodeOn::Shared`]).
    threads: usize,
    sink: Sink,
    rows: usize,
    /// Rows per group: [`ROW_GROUP_ROWS`], fewer when rolling small files
    /// (a file ends only after a row group).
    group_rows: usize,
    text_bytes: usize,
    /// Bytes of strings per group: [`ROW_GROUP_TEXT_BYTES`] (tests: fewer).
    group_text_bytes: usize,
    files: u32,
    /// Parallel `read`'s runs, encoded by its workers, are written one
    /// group late, as a writer encoding on a thread of its own writes its
    /// groups (so that a read that fails leaves the same bytes).
    hold_back: bool,
    held: Option<Encoded>,
    /// Row groups that came encoded from parallel `read`'s runs.
    groups_from_runs: u64,
}

/// A row group's rows, in order: per piece, per kind id, a [`Part`]. The
/// encoder writes each type's rows of each column as the one call of a
/// writer gathering them all ([`Run`]): they encode to the same bytes.
type Group = Vec<Box<GatheredRows>>;

/// Row groups handed to the encoder (its thread, or parallel `read`'s
/// threads) before the writer waits for one's bytes: one, encoded while
/// the writer gathers the next. A second waiting was only a few blocks'
/// rows more in memory, faulted in (the demo's 19 M-event capture: on two
/// threads 3.21 s of CPU time with two, 3.08 s with one, ~0.48 GB
/// resident against ~0.40 GB; with a filter, the encoder on a thread of
/// its own, 1.99 s against 1.91 s).
const GROUPS_IN_FLIGHT: usize = 1;

/// Emptied pieces kept to gather into again.
const POOL_PIECES: usize = 8;

/// A row group takes a block's rows as they are (not copied into the
/// group's last piece) when they are at least this part of its rows, so
/// a group is of few pieces however small the blocks.
const WHOLE_PIECE_SHARE: usize = 16;

/// Puts events' values into the columns of their type's [`Part`].
#[derive(Clone)]
struct Gatherer {
    names: Names,
    /// Per schema column, its type.
    types: Vec<ColumnType>,
    by_name: FxHashMap<String, usize>,
    /// Per kind id with plain fields: each field's column (and `reg_name`'s).
    plain: Vec<Option<PlainColumns>>,
    /// The guest's register names met so far, by register number.
    register_names: FxHashMap<u64, ByteArray>,
}

/// A parallel `read` worker's side of Parquet: a block's events gathered
/// into rows as [`ParquetWriter`] gathers them, with what it needs to cut
/// them where it would (each event's type and string bytes).
pub struct RowGatherer {
    gatherer: Gatherer,
    rows: Box<GatheredRows>,
    /// Formatting runs ([`EventWriter::runs`]): each a row group, encoded
    /// here.
    group: Option<GroupEncoding>,
}

/// A run's rows encoded as the row group they make, when one thread
/// would have made them one: all its rows, its strings not filling it
/// before its last event.
struct GroupEncoding {
    table: Arc<Table>,
    scratch: Scratch,
    rows: usize,
    text_bytes: usize,
    fits: bool,
}

/// A block's events as rows ([`RowGatherer`]), for [`ParquetWriter`]; or
/// a piece of a row group.
pub struct GatheredRows {
    /// Per kind id: the block's rows of that type.
    parts: Vec<Part>,
    /// Per event: its kind id.
    kinds: Vec<u8>,
    /// Per event with strings (only those: the cuts by strings can only
    /// fall after one): its index, and the block's bytes of strings up to
    /// it, it included.
    texts: Vec<(usize, usize)>,
    /// A run's rows as a row group's columns, encoded on the worker
    /// ([`GroupEncoding`]).
    encoded: Option<Vec<parquet::errors::Result<ColumnChunk>>>,
}

const TS: usize = 0;
const PID: usize = 1;
const TID: usize = 2;
const EVENT: usize = 3;

/// A row group's (or the footer's) bytes from the encoder, in file order.
struct Encoded {
    bytes: Vec<u8>,
    /// The file ends with them (its footer is in them).
    ended: bool,
}

/// What every thread encoding columns reads: the table's columns, their
/// descriptions, the writer's properties.
struct Table {
    columns: Vec<ColumnInfo>,
    schema: Arc<Type>,
    descr: SchemaDescPtr,
    properties: Arc<WriterProperties>,
    event_names: Vec<ByteArray>,
}

/// A thread's own room for encoding a column.
struct Scratch {
    /// Definition levels of a column a type does not have: all null.
    nulls: Vec<i16>,
    /// … and of one it has in every row.
    ones: Vec<i16>,
    /// A part's levels when only some of its rows have a value.
    levels: Vec<i16>,
    /// The rows of a write batch that straddles pieces ([`Run`]).
    carry: Values,
    /// Per kind: its name repeated, the `event` column of its rows.
    event_column: Vec<Vec<ByteArray>>,
}

/// One column of a row group, encoded into bytes of its own; appended to
/// the file as the column writer would have written it there.
struct ColumnChunk {
    bytes: bytes::Bytes,
    close: ColumnCloseResult,
}

/// Rows per kind id of a row group.
type KindRows = [usize; EVENT_KIND_SLOTS as usize];

/// Puts encoded row groups' columns into the file's bytes (the footer at
/// its end), in order.
struct Assembler {
    writer: Option<SerializedFileWriter<Vec<u8>>>,
    /// Files end once this big (`--output DIR/`), else only at the end.
    roll_bytes: Option<u64>,
}

/// Turns gathered row groups into the file's bytes on one thread: the
/// column writers, encoding and compression (about a third of the work),
/// a column at a time.
struct Encoder {
    table: Arc<Table>,
    scratch: Scratch,
    file: Assembler,
}

/// What the encoder thread is asked.
enum Job {
    /// Encode these pieces as a row group (handed back, to be emptied
    /// where their memory was taken); the buffer of the bytes handed back
    /// last, to fill again.
    Group(Group, Vec<u8>),
    /// End the file (`empty_file`: also when it has no row group).
    Close { empty_file: bool },
}

/// The thread's answer to a job: the pieces, the bytes.
type Answer = (Group, io::Result<Option<Encoded>>);

/// Where row groups are encoded.
///
/// A second thread, when allowed, encodes each full row group while the
/// writer gathers the next (double buffering); on parallel `read`, the
/// workers do, a column at a time, between blocks. Every way encodes each
/// column apart and appends the columns in order, so the bytes are the
/// same.
enum EncodeOn {
    Here(Box<Encoder>),
    Thread {
        jobs: Sender<Job>,
        answers: Receiver<Answer>,
        /// Groups handed over and not answered yet (at most
        /// [`GROUPS_IN_FLIGHT`]).
        in_flight: usize,
        /// The last bytes written, for the encoder to reuse.
        buffer: Vec<u8>,
    },
    /// Only while the encoder moves from `Here` to where it goes next.
    Moving,
    /// Parallel `read`: each waiting group's columns encoded by whichever
    /// threads find one left (the workers between blocks, the writer when
    /// it waits for a group's bytes, helpers at the end), not by a thread
    /// of its own: one of those, needing over a third of the cores' time,
    /// got only its fair share of two cores against two workers, and the
    /// workers then waited for it with a core idle. By columns, not whole
    /// groups, so that the last groups, encoded once the blocks are all
    /// read, take every core too (one thread took ~6% of the time alone).
    Shared {
        shared: Arc<Shared>,
        answers: Receiver<Answer>,
        /// Groups handed over and not answered yet (at most
        /// [`GROUPS_IN_FLIGHT`], one more while closing).
        in_flight: usize,
        /// The last bytes written, for the encoder to reuse.
        buffer: Vec<u8>,
    },
}

/// The row groups waiting to be encoded by columns, and the file they go
/// to ([`EncodeOn::Shared`]).
struct Shared {
    table: Arc<Table>,
    work: Mutex<Work>,
    /// Taken to append the groups whose columns are all encoded, in order
    /// (then `work` inside it, never the other way round).
    file: Mutex<Assembler>,
    /// Scratch of threads not encoding now.
    scratch: Mutex<Vec<Scratch>>,
    /// Each group's answer, in order (sent holding `file`).
    answers: Sender<Answer>,
}

/// The groups handed over and not yet appended, in order.
#[derive(Default)]
struct Work {
    groups: VecDeque<GroupWork>,
    /// The number of the first of them (each group's is its place).
    first: u64,
}

/// A row group being encoded by columns.
struct GroupWork {
    /// Shared with the threads encoding its columns; whole again once they
    /// are done, handed back with the answer.
    pieces: Arc<Group>,
    rows: KindRows,
    /// The buffer for the file's bytes, to fill again.
    buffer: Vec<u8>,
    /// The next column to encode.
    next: usize,
    /// Columns being encoded now.
    out: usize,
    chunks: Vec<Option<parquet::errors::Result<ColumnChunk>>>,
}

/// Locks `mutex`, whatever a panicking holder left.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Hands over `pieces` as the next row group.
    fn push(&self, pieces: Group, buffer: Vec<u8>) {
        let rows = kind_rows(&pieces);
        lock(&self.work).groups.push_back(GroupWork {
            pieces: Arc::new(pieces),
            rows,
            buffer,
            next: 0,
            out: 0,
            chunks: (0..self.table.columns.len()).map(|_| None).collect(),
        });
    }

    /// Encodes the next column a waiting group has left, then appends the
    /// groups it completes; whether there was one.
    fn help(&self) -> bool {
        let columns = self.table.columns.len();
        let (seq, column, pieces, rows) = {
            let mut work = lock(&self.work);
            let first = work.first;
            let Some((i, group)) =
                (work.groups.iter_mut().enumerate()).find(|(_, g)| g.next < columns)
            else {
                return false;
            };
            let column = group.next;
            group.next += 1;
            group.out += 1;
            (first + i as u64, column, group.pieces.clone(), group.rows)
        };
        let mut scratch = lock(&self.scratch).pop().unwrap_or_else(Scratch::new);
        let chunk = self
            .table
            .encode_column(column, &pieces, &rows, &mut scratch);
        lock(&self.scratch).push(scratch);
        // Before the column counts as done: the last one done unwraps them.
        drop(pieces);
        {
            let mut work = lock(&self.work);
            let i = (seq - work.first) as usize;
            let group = &mut work.groups[i];
            group.chunks[column] = Some(chunk);
            group.out -= 1;
        }
        self.append_done();
        true
    }

    /// Appends the first groups while their columns are all encoded, and
    /// answers each.
    fn append_done(&self) {
        let columns = self.table.columns.len();
        let mut file = lock(&self.file);
        loop {
            let done = {
                let mut work = lock(&self.work);
                match work.groups.front() {
                    Some(g) if g.next == columns && g.out == 0 => {
                        work.first += 1;
                        work.groups.pop_front()
                    }
                    _ => None,
                }
            };
            let Some(group) = done else {
                return;
            };
            let chunks = group
                .chunks
                .into_iter()
                .map(|c| c.expect("every column encoded"));
            file.reuse(group.buffer);
            let encoded = file.group(&self.table, chunks);
            let pieces = Arc::into_inner(group.pieces).expect("its columns' threads done");
            // The writer gone (a failed read) wants no answer.
            let _ = self.answers.send((pieces, encoded));
        }
    }

    /// The oldest group's answer: encoding the columns waiting meanwhile.
    fn answer(&self, answers: &Receiver<Answer>) -> io::Result<Answer> {
        loop {
            if let Ok(answer) = answers.try_recv() {
                return Ok(answer);
            }
            if !self.help() {
                // None left: the threads encoding the last ones answer.
                return answer(answers);
            }
        }
    }
}

impl ParquetWriter {
    /// Parquet on `out`, or files of about `roll_bytes` rolled in `output`
    /// when it is a directory (`--output DIR/`); row groups encoded on a
    /// second thread when `threads` > 1 (unless parallel `read`'s workers
    /// encode them, see `helper`).
    pub fn new(
        out: Box<dyn Write>,
        header: &Header,
        output: &Output,
        roll_bytes: u64,
        threads: usize,
    ) -> io::Result<ParquetWriter> {
        let columns = columns(header);
        let gatherer = Gatherer::new(header, &columns);
        let (schema, properties) = schema(&columns)?;
        let sink = match output {
            Output::Dir(dir) => Sink::Dir {
                dir: dir.to_path_buf(),
                stem: format!(
                    "styx-{}-{}-{}",
                    file_safe(&header.host),
                    header.pid,
                    header.clock.realtime_ns / 1_000_000_000
                ),
                seq: 0,
                current: None,
            },
            Output::Stdout | Output::File(_) => Sink::One(out),
        };
        let sink_is_dir = matches!(sink, Sink::Dir { .. });
        let column_count = columns.len();
        let event_names = (0..EVENT_KIND_SLOTS as u8)
            .map(|id| {
                let name = EventKind::from_id(id).map_or("?", EventKind::probe_name);
                // Static bytes: a clone per row counts no references.
                ByteArray::from(bytes::Bytes::from_static(name.as_bytes()))
            })
            .collect();
        let table = Arc::new(Table {
            descr: Arc::new(SchemaDescriptor::new(schema.clone())),
            columns,
            schema,
            properties,
            event_names,
        });
        let encoder = Box::new(Encoder {
            table,
            scratch: Scratch::new(),
            file: Assembler {
                writer: None,
                roll_bytes: sink_is_dir.then_some(roll_bytes),
            },
        });
        let encoding = EncodeOn::Here(encoder);
        Ok(ParquetWriter {
            gatherer,
            group: Vec::new(),
            pool: Vec::new(),
            last_is_whole: false,
            columns: column_count,
            encoding,
            // Started with the first row group, unless parallel `read`'s
            // workers encode them (`helper`).
            own_thread: threads > 1,
            threads,
            sink,
            rows: 0,
            // Parquet of styx events is ~10 bytes a row.
            group_rows: match sink_is_dir {
                true => usize::try_from(roll_bytes / 16)
                    .unwrap_or(usize::MAX)
                    .clamp(16 << 10, ROW_GROUP_ROWS),
                false => ROW_GROUP_ROWS,
            },
            text_bytes: 0,
            group_text_bytes: ROW_GROUP_TEXT_BYTES,
            files: 0,
            hold_back: false,
            held: None,
            groups_from_runs: 0,
        })
    }

    /// Row groups of at most `rows` rows and `text_bytes` of strings
    /// (tests: several groups of few events).
    #[cfg(test)]
    pub(crate) fn with_groups(self, rows: usize, text_bytes: usize) -> ParquetWriter {
        ParquetWriter {
            group_rows: rows,
            group_text_bytes: text_bytes,
            ..self
        }
    }

    /// Row groups that came encoded from parallel `read`'s runs (tests).
    #[cfg(test)]
    pub(crate) fn groups_from_runs(&self) -> u64 {
        self.groups_from_runs
    }

    /// Hands the gathered rows on as a row group, and what the encoder
    /// made of them (of the group before, when it runs on a thread) to
    /// the sink; `closing`: the last group.
    fn write_group(&mut self, closing: bool) -> io::Result<()> {
        if let Some(held) = self.held.take() {
            self.hand_on(Some(held))?;
        }
        if self.rows == 0 {
            return Ok(());
        }
        self.rows = 0;
        self.text_bytes = 0;
        if std::mem::take(&mut self.own_thread) {
            let here = std::mem::replace(&mut self.encoding, EncodeOn::Moving);
            self.encoding = match here {
                EncodeOn::Here(encoder) => EncodeOn::thread(encoder)?,
                other => other,
            };
        }
        let full = std::mem::take(&mut self.group);
        let (done, encoded) = match &mut self.encoding {
            EncodeOn::Here(encoder) => {
                let encoded = encoder.group(&full);
                (Some(full), encoded)
            }
            EncodeOn::Thread {
                jobs,
                answers,
                in_flight,
                buffer,
            } => {
                let before = match *in_flight == GROUPS_IN_FLIGHT {
                    true => {
                        let (done, encoded) = answer(answers)?;
                        (Some(done), encoded)
                    }
                    false => {
                        *in_flight += 1;
                        (None, Ok(None))
                    }
                };
                if jobs.send(Job::Group(full, std::mem::take(buffer))).is_err() {
                    return Err(encoder_gone());
                }
                before
            }
            EncodeOn::Shared {
                shared,
                answers,
                in_flight,
                buffer,
            } => {
                shared.push(full, std::mem::take(buffer));
                // Closing, the last group is handed over before any answer
                // is waited for: the helpers then find every group left.
                match *in_flight >= GROUPS_IN_FLIGHT && !closing {
                    true => {
                        let (done, encoded) = shared.answer(answers)?;
                        (Some(done), encoded)
                    }
                    false => {
                        *in_flight += 1;
                        (None, Ok(None))
                    }
                }
            }
            EncodeOn::Moving => unreachable!("the encoder moved"),
        };
        if let Some(done) = done {
            self.recycle(done);
        }
        self.hand_on(encoded?)
    }

    /// Empties encoded pieces (here, not on the encoder's thread: glibc
    /// frees another thread's blocks slowly, and this one's gathered
    /// them or hands them back to the workers) and keeps some to gather
    /// into again.
    fn recycle(&mut self, pieces: Group) {
        for mut piece in pieces {
            piece.clear();
            self.keep_spare(piece);
        }
    }

    /// Keeps an emptied piece to gather into again, if there is room.
    fn keep_spare(&mut self, piece: Box<GatheredRows>) {
        if self.pool.len() < POOL_PIECES {
            self.pool.push(piece);
        }
    }

    /// An emptied piece.
    fn spare_piece(&mut self) -> Box<GatheredRows> {
        (self.pool.pop()).unwrap_or_else(|| Box::new(GatheredRows::new(self.columns)))
    }

    /// The group's last piece, which rows gathered here go to (not a
    /// block's taken whole: its columns would grow, copied).
    #[inline]
    fn last_piece(&mut self) -> &mut GatheredRows {
        if self.group.is_empty() || self.last_is_whole {
            let piece = self.spare_piece();
            self.group.push(piece);
            self.last_is_whole = false;
        }
        self.group.last_mut().expect("a piece pushed above")
    }

    /// Writes the encoder's bytes to the sink; in a directory, renames a
    /// file they end.
    fn hand_on(&mut self, encoded: Option<Encoded>) -> io::Result<()> {
        let Some(Encoded { bytes, ended }) = encoded else {
            return Ok(());
        };
        match &mut self.sink {
            Sink::One(out) => out.write_all(&bytes)?,
            Sink::Dir {
                dir,
                stem,
                seq,
                current,
            } => {
                if current.is_none() {
                    *seq += 1;
                    let name = dir.join(format!("{stem}-{seq:05}.parquet"));
                    let part = name.with_extension("parquet.part");
                    *current = Some((Box::new(create_file(&part)?), name));
                }
                let (out, _) = current.as_mut().expect("opened above");
                out.write_all(&bytes)?;
                if ended {
                    let (mut out, name) = current.take().expect("opened above");
                    out.flush()?;
                    drop(out);
                    std::fs::rename(name.with_extension("parquet.part"), &name)?;
                    self.files += 1;
                }
            }
        }
        // The buffer back, emptied, for the next row group: growing a new
        // one faulted in fresh pages every time.
        let mut bytes = bytes;
        bytes.clear();
        match &mut self.encoding {
            EncodeOn::Here(encoder) => encoder.reuse(bytes),
            EncodeOn::Thread { buffer, .. } | EncodeOn::Shared { buffer, .. } => *buffer = bytes,
            EncodeOn::Moving => unreachable!("the encoder moved"),
        }
        Ok(())
    }

    /// Ends the file: the last row group, then the footer. On parallel
    /// `read` the groups left take every core: the workers are gone, so
    /// threads of its own help this one encode their columns.
    fn close(&mut self) -> io::Result<()> {
        self.write_group(true)?;
        let helpers = match &self.encoding {
            EncodeOn::Shared { shared, .. } => vec![shared.clone(); self.threads.saturating_sub(1)],
            _ => Vec::new(),
        };
        std::thread::scope(|scope| {
            for shared in helpers {
                // Without one, this thread encodes them all.
                let _ = std::thread::Builder::new()
                    .name("parquet-encode".into())
                    .spawn_scoped(scope, move || while shared.help() {});
            }
            self.end_file()
        })
    }

    /// The groups handed over, in order, then the footer.
    fn end_file(&mut self) -> io::Result<()> {
        let empty_file = matches!(self.sink, Sink::One(_));
        let last = loop {
            match &mut self.encoding {
                EncodeOn::Here(encoder) => break encoder.close(empty_file)?,
                // The groups handed over first, in order.
                EncodeOn::Thread {
                    answers, in_flight, ..
                } if *in_flight > 0 => {
                    *in_flight -= 1;
                    let before = answer(answers)?.1?;
                    self.hand_on(before)?;
                }
                EncodeOn::Thread { jobs, answers, .. } => {
                    if jobs.send(Job::Close { empty_file }).is_err() {
                        return Err(encoder_gone());
                    }
                    break answer(answers)?.1?;
                }
                EncodeOn::Shared {
                    shared,
                    answers,
                    in_flight,
                    ..
                } if *in_flight > 0 => {
                    *in_flight -= 1;
                    let before = shared.answer(answers)?.1?;
                    self.hand_on(before)?;
                }
                EncodeOn::Shared { shared, .. } => {
                    break lock(&shared.file).close(&shared.table, empty_file)?;
                }
                EncodeOn::Moving => unreachable!("the encoder moved"),
            }
        };
        self.hand_on(last)
    }
}

impl ParquetWriter {
    /// A block's rows (parallel `read`), cut into row groups where the
    /// rows' events one by one would have cut them: groups fill in the
    /// same order, so they encode to the same bytes.
    fn take_rows(&mut self, block: &mut Box<GatheredRows>) -> io::Result<()> {
        while !block.kinds.is_empty() {
            let (end, text) = self.group_end(block);
            if end < block.kinds.len() {
                // The events past the group begin the next one: moved out
                // (their rows copied once) rather than the ones before
                // them (copied, then the rest moved up to close the gap,
                // then copied again into the next group).
                let mut rest = self.spare_piece();
                block.move_back(end, &mut rest);
                self.take_whole(block);
                let emptied = std::mem::replace(block, rest);
                self.keep_spare(emptied);
            } else {
                self.take_whole(block);
            }
            self.rows += end;
            self.text_bytes = text;
            if self.rows >= self.group_rows || self.text_bytes >= self.group_text_bytes {
                self.write_group(false)?;
            }
        }
        Ok(())
    }

    /// How many of `block`'s events the row group takes before it is
    /// full (of rows or of strings), and its bytes of strings with them.
    fn group_end(&self, block: &GatheredRows) -> (usize, usize) {
        let by_rows = (self.group_rows - self.rows).min(block.kinds.len());
        // The first event that fills the group's strings, if one does
        // before its rows are full: one with strings, and the totals only
        // grow.
        let texts = &block.texts[..block.texts.partition_point(|&(at, _)| at < by_rows)];
        let below =
            texts.partition_point(|&(_, total)| self.text_bytes + total < self.group_text_bytes);
        let end = texts.get(below).map_or(by_rows, |&(at, _)| at + 1);
        (end, self.text_bytes + block.text_through(end))
    }

    /// All of `block`'s rows into the group, leaving it empty: as they
    /// are when they are many (an emptied piece in their place), else
    /// moved to the group's last piece, so a group is of few pieces
    /// however small the blocks.
    fn take_whole(&mut self, block: &mut Box<GatheredRows>) {
        if block.kinds.len() >= self.group_rows / WHOLE_PIECE_SHARE {
            let spare = self.spare_piece();
            self.group.push(std::mem::replace(block, spare));
            self.last_is_whole = true;
            return;
        }
        let piece = self.last_piece();
        for (part, source) in piece.parts.iter_mut().zip(&mut block.parts) {
            if source.rows == 0 {
                continue;
            }
            for (values, from) in part.columns.iter_mut().zip(&mut source.columns) {
                values.take_front(part.rows, from, source.rows);
            }
            part.rows += source.rows;
        }
        block.clear();
    }
}

impl ParquetWriter {
    /// A run's row group, encoded on a worker, as the next group.
    fn append_run(
        &mut self,
        rows: &mut GatheredRows,
        columns: Vec<parquet::errors::Result<ColumnChunk>>,
    ) -> io::Result<()> {
        rows.clear();
        let encoder = match (&mut self.encoding, self.rows) {
            (EncodeOn::Here(encoder), 0) => encoder,
            _ => return Err(io::Error::other("a run's row group amid a group")),
        };
        let encoded = encoder.file.group(&encoder.table, columns.into_iter())?;
        self.groups_from_runs += 1;
        match self.hold_back {
            true => {
                let before = std::mem::replace(&mut self.held, encoded);
                self.hand_on(before)
            }
            false => self.hand_on(encoded),
        }
    }
}

impl RowGatherer {
    /// Rows of the session `header` describes.
    pub fn new(header: &Header) -> RowGatherer {
        let columns = columns(header);
        RowGatherer {
            gatherer: Gatherer::new(header, &columns),
            rows: Box::new(GatheredRows::new(columns.len())),
            group: None,
        }
    }
}

impl GroupEncoding {
    /// The columns of `run` (a run's rows, one piece), if they make a
    /// whole row group; `fits` then says whether the run fits where it
    /// falls: encoded, or short (the capture's last, its rows cut by the
    /// writer), not one whose strings fill its group early.
    fn encode(
        &mut self,
        run: &[Box<GatheredRows>],
    ) -> Option<Vec<parquet::errors::Result<ColumnChunk>>> {
        let [rows] = run else { return None };
        let events = rows.kinds.len();
        self.fits = events < self.rows;
        if events != self.rows || rows.text_through(events - 1) >= self.text_bytes {
            return None;
        }
        self.fits = true;
        let kinds = kind_rows(run);
        let columns = (0..self.table.columns.len())
            .map(|c| self.table.encode_column(c, run, &kinds, &mut self.scratch))
            .collect();
        Some(columns)
    }
}

impl FormatBlock for RowGatherer {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        let rows = &mut self.rows;
        let text = self.gatherer.gather(&mut rows.parts, event);
        if text > 0 {
            let before = rows.texts.last().map_or(0, |&(_, total)| total);
            rows.texts.push((rows.kinds.len(), before + text));
        }
        rows.kinds.push(event.kind as u8);
        Ok(())
    }

    fn take(&mut self, room: Option<Formatted>) -> Formatted {
        let room = match room.map(rows_of) {
            Some(Ok(room)) => room,
            _ => Box::new(GatheredRows::new(self.gatherer.types.len())),
        };
        if let Some(group) = &mut self.group {
            if let Some(columns) = group.encode(std::slice::from_ref(&self.rows)) {
                // The columns go; the rows' room stays here for the next
                // run (a few row groups' rows in flight faulted in
                // hundreds of MB).
                self.rows.clear();
                let mut piece = room;
                piece.clear();
                piece.encoded = Some(columns);
                return Formatted::Rows(piece);
            }
        }
        let rows = std::mem::replace(&mut self.rows, room);
        Formatted::Rows(rows)
    }

    fn run_fits(&self) -> bool {
        self.group.as_ref().is_none_or(|group| group.fits)
    }
}

impl GatheredRows {
    fn new(columns: usize) -> GatheredRows {
        GatheredRows {
            parts: new_parts(columns),
            kinds: Vec::new(),
            texts: Vec::new(),
            encoded: None,
        }
    }

    /// Emptied, its room kept.
    fn clear(&mut self) {
        empty(&mut self.parts);
        self.kinds.clear();
        self.texts.clear();
        self.encoded = None;
    }

    /// Moves the events after the first `events` (their rows, kinds and
    /// strings) to `to` (empty).
    fn move_back(&mut self, events: usize, to: &mut GatheredRows) {
        let mut moved = [0usize; EVENT_KIND_SLOTS as usize];
        self.kinds[events..]
            .iter()
            .for_each(|&k| moved[k as usize] += 1);
        for ((part, rest), moved) in self.parts.iter_mut().zip(&mut to.parts).zip(moved) {
            if moved == 0 {
                continue;
            }
            part.rows -= moved;
            for (values, rest) in part.columns.iter_mut().zip(&mut rest.columns) {
                values.move_back(part.rows, rest);
            }
            rest.rows = moved;
        }
        to.kinds.extend(self.kinds.drain(events..));
        let (texts, text) = (self.texts_before(events), self.text_through(events));
        let texts = self.texts.drain(texts..);
        to.texts
            .extend(texts.map(|(at, total)| (at - events, total - text)));
    }

    /// Events with strings before `event`.
    fn texts_before(&self, event: usize) -> usize {
        self.texts.partition_point(|&(at, _)| at < event)
    }

    /// Bytes of strings of the events before `event`.
    fn text_through(&self, event: usize) -> usize {
        let before = self.texts_before(event);
        before.checked_sub(1).map_or(0, |i| self.texts[i].1)
    }
}

/// Empty parts, one per kind id, of `columns` columns each.
fn new_parts(columns: usize) -> Vec<Part> {
    (0..EVENT_KIND_SLOTS)
        .map(|_| Part {
            rows: 0,
            columns: (0..columns).map(|_| Values::default()).collect(),
        })
        .collect()
}

/// Empties gathered parts, keeping their room.
fn empty(parts: &mut [Part]) {
    for part in parts {
        part.rows = 0;
        part.columns.iter_mut().for_each(Values::clear);
    }
}

/// The encoder thread's next answer.
fn answer(answers: &Receiver<Answer>) -> io::Result<Answer> {
    answers.recv().map_err(|_| encoder_gone())
}

fn encoder_gone() -> io::Error {
    io::Error::other("the Parquet encoder thread stopped")
}

impl EncodeOn {
    /// `encoder` on a thread of its own.
    fn thread(mut encoder: Box<Encoder>) -> io::Result<EncodeOn> {
        let (jobs, queue) = bounded::<Job>(GROUPS_IN_FLIGHT);
        let (answers_to, answers) = bounded::<Answer>(GROUPS_IN_FLIGHT);
        // It ends when the writer drops `jobs`.
        std::thread::Builder::new()
            .name("parquet-encode".into())
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    let answer = match job {
                        Job::Group(pieces, buffer) => {
                            encoder.reuse(buffer);
                            let encoded = encoder.group(&pieces);
                            (pieces, encoded)
                        }
                        Job::Close { empty_file } => (Vec::new(), encoder.close(empty_file)),
                    };
                    if answers_to.send(answer).is_err() {
                        return;
                    }
                }
            })?;
        Ok(EncodeOn::Thread {
            jobs,
            answers,
            in_flight: 0,
            buffer: Vec::new(),
        })
    }
}

impl Encoder {
    /// Writes `pieces` as a row group, a column at a time; the file's bytes
    /// so far.
    fn group(&mut self, pieces: &[Box<GatheredRows>]) -> io::Result<Option<Encoded>> {
        let rows = kind_rows(pieces);
        let columns = (0..self.table.columns.len())
            .map(|c| {
                self.table
                    .encode_column(c, pieces, &rows, &mut self.scratch)
            })
            .collect::<Vec<_>>();
        self.file.group(&self.table, columns.into_iter())
    }

    /// Ends the file (its footer), if one was begun or `empty_file`
    /// asks for one without rows.
    fn close(&mut self, empty_file: bool) -> io::Result<Option<Encoded>> {
        self.file.close(&self.table, empty_file)
    }

    /// An emptied buffer for the file's next bytes.
    fn reuse(&mut self, buffer: Vec<u8>) {
        self.file.reuse(buffer);
    }
}

/// Rows per kind id of the row group `pieces`.
fn kind_rows(pieces: &[Box<GatheredRows>]) -> KindRows {
    let mut rows = [0usize; EVENT_KIND_SLOTS as usize];
    for piece in pieces {
        for (rows, part) in rows.iter_mut().zip(&piece.parts) {
            *rows += part.rows;
        }
    }
    rows
}

impl Table {
    /// Column `c` of the row group `pieces` (`rows` rows of each kind) on
    /// its own: its pages, and what the file's footer says of it.
    fn encode_column(
        &self,
        c: usize,
        pieces: &[Box<GatheredRows>],
        rows: &KindRows,
        scratch: &mut Scratch,
    ) -> parquet::errors::Result<ColumnChunk> {
        let most = rows.iter().copied().max().unwrap_or(0);
        scratch.nulls.resize(most, 0);
        scratch.ones.resize(most, 1);
        let mut sink = TrackedWrite::new(Vec::new());
        let pages = Box::new(SerializedPageWriter::new(&mut sink));
        let mut column = get_column_writer(self.descr.column(c), self.properties.clone(), pages);
        let info = &self.columns[c];
        // Each type's rows in turn: a type's rows are together, so
        // definition levels come in long runs, cheap to encode.
        for (kind, &rows) in rows.iter().enumerate() {
            if rows == 0 {
                continue;
            }
            if c == EVENT {
                let names = &mut scratch.event_column[kind];
                names.resize(rows, self.event_names[kind].clone());
                let writer = get_typed_column_writer_mut::<ByteArrayType>(&mut column);
                writer.write_batch(&names[..rows], None, None)?;
                continue;
            }
            let run = Run {
                kind,
                column: c,
                required: info.required,
                batch: self.properties.write_batch_size(),
                nulls: &scratch.nulls,
                ones: &scratch.ones,
                levels: &mut scratch.levels,
                carry: &mut scratch.carry,
            };
            match info.ty {
                ColumnType::U64 | ColumnType::I64 => run.write(
                    get_typed_column_writer_mut::<Int64Type>(&mut column),
                    pieces,
                ),
                ColumnType::Str => run.write(
                    get_typed_column_writer_mut::<ByteArrayType>(&mut column),
                    pieces,
                ),
                ColumnType::Bool => {
                    run.write(get_typed_column_writer_mut::<BoolType>(&mut column), pieces)
                }
            }?;
        }
        let close = column.close()?;
        let bytes = bytes::Bytes::from(sink.into_inner()?);
        Ok(ColumnChunk { bytes, close })
    }

    /// A writer for the next file, gathering its bytes in memory.
    fn file_writer(&self) -> io::Result<SerializedFileWriter<Vec<u8>>> {
        SerializedFileWriter::new(Vec::new(), self.schema.clone(), self.properties.clone())
            .map_err(io::Error::other)
    }
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            nulls: Vec::new(),
            ones: Vec::new(),
            levels: Vec::new(),
            carry: Values::default(),
            event_column: vec![Vec::new(); EVENT_KIND_SLOTS as usize],
        }
    }
}

impl Assembler {
    /// Appends a row group of `columns`, each encoded apart, in the
    /// schema's order; the file's bytes so far.
    fn group(
        &mut self,
        table: &Table,
        columns: impl Iterator<Item = parquet::errors::Result<ColumnChunk>>,
    ) -> io::Result<Option<Encoded>> {
        let writer = match &mut self.writer {
            Some(writer) => writer,
            None => self.writer.insert(table.file_writer()?),
        };
        let mut group = writer.next_row_group().map_err(io::Error::other)?;
        for column in columns {
            let ColumnChunk { bytes, close } = column.map_err(io::Error::other)?;
            group
                .append_column(&bytes, close)
                .map_err(io::Error::other)?;
        }
        group.close().map_err(io::Error::other)?;
        let roll = (self.roll_bytes).is_some_and(|most| writer.bytes_written() as u64 >= most);
        match roll {
            true => self.end(),
            false => {
                writer.flush()?;
                let bytes = std::mem::take(writer.inner_mut());
                Ok(Some(Encoded {
                    bytes,
                    ended: false,
                }))
            }
        }
    }

    /// Ends the file (its footer), if one was begun or `empty_file`
    /// asks for one without rows.
    fn close(&mut self, table: &Table, empty_file: bool) -> io::Result<Option<Encoded>> {
        if self.writer.is_none() && empty_file {
            // No events: still a valid, empty file.
            self.writer = Some(table.file_writer()?);
        }
        self.end()
    }

    /// The file's last bytes, its footer with them.
    fn end(&mut self) -> io::Result<Option<Encoded>> {
        let Some(writer) = self.writer.take() else {
            return Ok(None);
        };
        let bytes = writer.into_inner().map_err(io::Error::other)?;
        Ok(Some(Encoded { bytes, ended: true }))
    }

    /// An emptied buffer for the file's next bytes.
    fn reuse(&mut self, buffer: Vec<u8>) {
        if let Some(writer) = &mut self.writer {
            if writer.inner_mut().is_empty() {
                *writer.inner_mut() = buffer;
            }
        }
    }
}

/// A column's values of one physical type, as its column writer takes
/// them.
trait Held: DataType {
    fn of(values: &Values) -> &[Self::T];
    fn extend(values: &mut Values, from: &[Self::T]);
}

impl Held for Int64Type {
    fn of(values: &Values) -> &[i64] {
        &values.ints
    }
    fn extend(values: &mut Values, from: &[i64]) {
        values.ints.extend_from_slice(from)
    }
}

impl Held for ByteArrayType {
    fn of(values: &Values) -> &[ByteArray] {
        &values.strs
    }
    fn extend(values: &mut Values, from: &[ByteArray]) {
        values.strs.extend_from_slice(from)
    }
}

impl Held for BoolType {
    fn of(values: &Values) -> &[bool] {
        &values.bools
    }
    fn extend(values: &mut Values, from: &[bool]) {
        values.bools.extend_from_slice(from)
    }
}

/// One type's rows of one column of a row group, in the pieces that hold
/// them, to write as one `write_batch` call over them all would.
///
/// The column writer cuts a call's levels into batches of `batch`
/// (`write_batch_size`) from where the call begins, and only ever ends a
/// page after a batch: calls that each begin `batch` levels after the last
/// one began cut the same batches as one call, so the pages are the same.
/// So each piece's rows go straight from where it holds them, in calls of
/// whole batches, and only a batch that straddles two pieces is copied
/// (into `carry`): not the whole run, which cost the encoder a copy of
/// nearly every row of a row group gathered on parallel `read`'s workers.
struct Run<'a> {
    kind: usize,
    column: usize,
    required: bool,
    batch: usize,
    /// Levels of all nulls and of all values, at least a part's rows long.
    nulls: &'a [i16],
    ones: &'a [i16],
    /// Room for a part's levels, when only some of its rows have values.
    levels: &'a mut Vec<i16>,
    carry: &'a mut Values,
}

impl Run<'_> {
    fn write<T: Held>(
        self,
        writer: &mut ColumnWriterImpl<'_, T>,
        pieces: &[Box<GatheredRows>],
    ) -> parquet::errors::Result<()> {
        let Run {
            kind,
            column,
            required,
            batch,
            nulls,
            ones,
            levels: scratch,
            carry,
        } = self;
        let last = pieces.iter().rposition(|p| p.parts[kind].rows > 0);
        let last = last.expect("a part with the kind's rows");
        carry.clear();
        // Rows in `carry` (its levels, when the column has them).
        let mut carried = 0;
        for (i, piece) in pieces.iter().enumerate().take(last + 1) {
            let part = &piece.parts[kind];
            let rows = part.rows;
            if rows == 0 {
                continue;
            }
            let col = &part.columns[column];
            let values = col.len();
            let def = match (required, values) {
                (true, _) => None,
                (false, 0) => Some(&nulls[..rows]),
                (false, _) => Some(levels(col, values, rows, ones, scratch)),
            };
            let held = T::of(col);
            // Values of the levels `range` (counted only when some rows
            // have one and some not).
            let count = |range: std::ops::Range<usize>| match (values, def) {
                (0, _) => 0,
                (_, Some(d)) if values < rows => d[range].iter().filter(|&&l| l == 1).count(),
                _ => range.len(),
            };
            let (mut at, mut value) = (0, 0);
            // The batch begun in the pieces before, filled from this one.
            if carried > 0 {
                let take = (batch - carried).min(rows);
                let n = count(0..take);
                if let Some(d) = def {
                    carry.def.extend_from_slice(&d[..take]);
                }
                T::extend(carry, &held[..n]);
                (at, value, carried) = (take, n, carried + take);
                if carried == batch || (i == last && at == rows) {
                    let def = (!required).then_some(&carry.def[..]);
                    writer.write_batch(T::of(carry), def, None)?;
                    carry.clear();
                    carried = 0;
                }
            }
            // Whole batches straight from the piece; the last piece's rows
            // all.
            let left = rows - at;
            let straight = match i == last {
                true => left,
                false => left / batch * batch,
            };
            if straight > 0 {
                // The column writer counts the values the levels take.
                let written = match def {
                    None => writer.write_batch(&held[value..value + straight], None, None)?,
                    Some(d) => {
                        writer.write_batch(&held[value..], Some(&d[at..at + straight]), None)?
                    }
                };
                (at, value) = (at + straight, value + written);
            }
            // The rest begins the next batch.
            if at < rows {
                if let Some(d) = def {
                    carry.def.extend_from_slice(&d[at..rows]);
                }
                T::extend(carry, &held[value..]);
                carried += rows - at;
            }
        }
        debug_assert_eq!(carried, 0);
        Ok(())
    }
}

impl Gatherer {
    fn new(header: &Header, columns: &[ColumnInfo]) -> Gatherer {
        let by_name: FxHashMap<String, usize> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        Gatherer {
            names: Names::new(header),
            types: columns.iter().map(|c| c.ty).collect(),
            plain: plain_columns(&by_name),
            by_name,
            register_names: FxHashMap::default(),
        }
    }

    /// `event` as the next row of its type's part; the bytes of strings
    /// it added.
    #[inline]
    fn gather(&mut self, parts: &mut [Part], event: &Event<'_>) -> usize {
        let h = &event.header;
        let part = &mut parts[event.kind as usize];
        let row = part.rows;
        part.rows += 1;
        let columns = &mut part.columns[..];
        columns[TS].ints.push(h.ts_ns as i64);
        columns[PID].ints.push(h.pid.into());
        columns[TID].ints.push(h.tid.into());
        let mut text = 0usize;
        let text_bytes = &mut text;
        match (&event.body, &self.plain[event.kind as usize]) {
            (Body::Args(args), Some(plain)) => {
                // The common case, straight from the record (see fields::is_plain).
                for (&(col, name_col), value) in plain.iter().zip(plain_values(event, args)) {
                    set_int(columns, row, col, value as i64);
                    let Some(name_col) = name_col else { continue };
                    // Each name's bytes made once and shared: an
                    // allocation per row cost a tenth of the gathering.
                    let name = match self.register_names.get(&value) {
                        Some(name) => Some(name),
                        None => self.names.registers.get(value).map(|name| {
                            let bytes = ByteArray::from(static_name(name));
                            &*self.register_names.entry(value).or_insert(bytes)
                        }),
                    };
                    if let Some(name) = name {
                        let c = &mut columns[name_col];
                        if c.at(row) {
                            *text_bytes += name.len();
                            c.strs.push(name.clone());
                        }
                    }
                }
            }
            _ => {
                let by_name = &self.by_name;
                let types = &self.types;
                let col = |name: &str| by_name.get(name).copied();
                // A number into its column, and a named register's name
                // into `NAME_name`: the catalogue's and other probes' alike.
                let value =
                    |columns: &mut [Values], text_bytes: &mut usize, name: &str, arg: &Arg<'_>| {
                        if let Some(c) = col(name) {
                            set_arg(columns, row, c, types[c], arg, text_bytes);
                        }
                        if let Arg::Reg(_, Some(reg_name)) = arg {
                            if let Some(c) = col(&format!("{name}_name")) {
                                set_str(columns, row, c, reg_name.as_bytes(), text_bytes);
                            }
                        }
                    };
                let _ = for_each_field(event, &self.names, |field| {
                    match field {
                        Field::Value(n, arg) => value(columns, text_bytes, n, &arg),
                        Field::Name(n, v) | Field::Str(n, v) => {
                            if let Some(c) = col(n) {
                                set_str(columns, row, c, v.as_bytes(), text_bytes)
                            }
                        }
                        Field::Flag(n, v) => {
                            if let Some(c) = col(n) {
                                if columns[c].at(row) {
                                    columns[c].bools.push(v);
                                }
                            }
                        }
                        Field::Text(n, t) => {
                            if let Some(c) = col(n) {
                                set_str(columns, row, c, t.lossy().as_bytes(), text_bytes)
                            }
                        }
                        Field::Args(args) => {
                            let cut = args.any_string(|s| s.cut);
                            for (name, arg) in args {
                                value(columns, text_bytes, name, &arg);
                            }
                            if let (true, Some(c)) = (cut, col("truncated")) {
                                if columns[c].at(row) {
                                    columns[c].bools.push(true);
                                }
                            }
                        }
                    }
                    Ok::<(), ()>(())
                });
            }
        }
        text
    }
}

impl EventWriter for ParquetWriter {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        if self.group.is_empty() {
            let piece = self.spare_piece();
            self.group.push(piece);
        }
        let piece = self.group.last_mut().expect("a piece pushed above");
        self.text_bytes += self.gatherer.gather(&mut piece.parts, event);
        self.rows += 1;
        if self.rows >= self.group_rows || self.text_bytes >= self.group_text_bytes {
            self.write_group(false)?;
        }
        Ok(())
    }

    // Rows cut into the row groups a serial writer makes (see `formatted`).
    fn formats_apart(&self) -> bool {
        true
    }

    // The row groups encoded by the workers between blocks, and by this
    // writer while it waits (see EncodeOn::Shared), when it was to have a
    // thread of its own and has not started it.
    fn helper(&mut self) -> Option<Helper> {
        if !self.own_thread {
            return None;
        }
        self.own_thread = false;
        let here = std::mem::replace(&mut self.encoding, EncodeOn::Moving);
        let EncodeOn::Here(encoder) = here else {
            self.encoding = here;
            return None;
        };
        let (answers_to, answers) = unbounded();
        let Encoder {
            table,
            scratch,
            file,
        } = *encoder;
        let shared = Arc::new(Shared {
            table,
            work: Mutex::new(Work::default()),
            file: Mutex::new(file),
            scratch: Mutex::new(vec![scratch]),
            answers: answers_to,
        });
        self.encoding = EncodeOn::Shared {
            shared: shared.clone(),
            answers,
            in_flight: 0,
            buffer: Vec::new(),
        };
        Some(Arc::new(move || while shared.help() {}))
    }

    // Parallel `read`'s workers gather and encode whole row groups, as
    // this writer would on one thread (see the module's doc).
    fn runs(&mut self) -> Option<Runs> {
        let EncodeOn::Here(encoder) = &self.encoding else {
            return None;
        };
        if self.rows > 0 {
            return None;
        }
        // Written as this writer would write them, one late on a thread.
        self.hold_back = self.own_thread;
        let (gatherer, table) = (self.gatherer.clone(), encoder.table.clone());
        let (rows, text_bytes) = (self.group_rows, self.group_text_bytes);
        let columns = self.columns;
        let make = move || {
            let formatter = RowGatherer {
                gatherer: gatherer.clone(),
                rows: Box::new(GatheredRows::new(columns)),
                group: Some(GroupEncoding {
                    table: table.clone(),
                    scratch: Scratch::new(),
                    rows,
                    text_bytes,
                    fits: true,
                }),
            };
            Ok(Box::new(formatter) as Box<dyn FormatBlock>)
        };
        Some(Runs {
            events: rows as u64,
            make: Box::new(make),
        })
    }

    fn formatted(&mut self, piece: &mut Formatted) -> io::Result<()> {
        // Nothing holds its place meanwhile (a boxed `()` allocates nothing).
        let placeholder = Formatted::Rows(Box::new(()));
        match rows_of(std::mem::replace(piece, placeholder)) {
            Ok(mut rows) => {
                // A run's group, encoded, is the next group (every run
                // before was one); the capture's last run, short, is rows.
                let taken = match rows.encoded.take() {
                    Some(columns) => self.append_run(&mut rows, columns),
                    None => self.take_rows(&mut rows),
                };
                *piece = Formatted::Rows(rows);
                taken
            }
            Err(_) => Err(io::Error::other("another format's piece handed to Parquet")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        // A row group is written when full: flushing a small one would make
        // many tiny groups, which slow every reader.
        match &mut self.sink {
            Sink::One(out) => out.flush(),
            Sink::Dir { current, .. } => current.as_mut().map_or(Ok(()), |(out, _)| out.flush()),
        }
    }

    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        self.close()?;
        if let Sink::Dir { dir, .. } = &self.sink {
            log::info!("parquet: {} files in {}", self.files, dir.display());
        }
        self.flush()
    }
}

/// The table's columns: the common ones, then every catalogue field's (and
/// the USDT ones if the session traced any), as `header` needs them.
fn columns(header: &Header) -> Vec<ColumnInfo> {
    let mut columns = styx_columns();
    // Other providers' probes: only for a session that traced some, and
    // a column per argument name (each column costs every row a
    // definition level); a name styx's events have shares their column.
    if !header.usdt.is_empty() {
        for (name, ty, dictionary) in [("provider", ColumnType::Str), ("probe", ColumnType::Str)]
            .into_iter()
            .map(|(n, ty)| (n.to_string(), ty, false))
            .chain(usdt_columns(header))
        {
            match columns.iter_mut().find(|c| c.name == name) {
                // A signed argument in an unsigned column of styx's own
                // events: the column is signed for this session (as when
                // two probes' arguments share a name), else -1 would
                // read as 2^64 - 1.
                Some(known) if known.ty == ColumnType::U64 && may_be_negative(header, &name) => {
                    known.ty = ColumnType::I64
                }
                Some(_) => {}
                None => {
                    let column = ColumnInfo::new(&name, ty, false);
                    columns.push(ColumnInfo {
                        dictionary: column.dictionary || dictionary,
                        ..column
                    });
                }
            }
        }
    }
    if header.guest.as_ref().is_none_or(|g| g.registers.is_empty()) {
        columns.retain(|c| c.name != "reg_name");
    }
    columns
}

/// Why a USDT argument, a string or not, may not be called `name`, if it
/// may not: a column of styx's own events of another type (an integer
/// argument may share an integer column, a string one a text column).
pub fn usdt_column_conflict(name: &str, string: bool) -> Option<&'static str> {
    let column = styx_columns().into_iter().find(|c| c.name == name)?;
    match (column.ty, string) {
        (ColumnType::Str, false) => Some("is a text field of styx's own events"),
        (ColumnType::U64 | ColumnType::I64, true) => {
            Some("is an integer field of styx's own events")
        }
        (ColumnType::Bool, _) => Some("is a flag of styx's own events"),
        _ => None,
    }
}

/// The common columns and every catalogue field's.
fn styx_columns() -> Vec<ColumnInfo> {
    let mut columns = vec![
        ColumnInfo::new("ts_ns", ColumnType::U64, true),
        ColumnInfo::new("pid", ColumnType::U64, true),
        ColumnInfo::new("tid", ColumnType::U64, true),
        ColumnInfo::new("event", ColumnType::Str, true),
    ];
    let mut add = |name: &str, ty: ColumnType| {
        if !columns.iter().any(|c| c.name == name) {
            columns.push(ColumnInfo::new(name, ty, false));
        }
    };
    for &kind in EventKind::ALL {
        for field in schema::catalogue(kind) {
            for (name, ty, register) in field_columns(field) {
                add(name, ty);
                if register {
                    add(&format!("{name}_name"), ColumnType::Str);
                }
            }
        }
    }
    add("kind_raw", ColumnType::U64);
    add("truncated", ColumnType::Bool);
    columns
}

/// Other providers' arguments' columns, by name in the order first met:
/// int64, or a string if the name is a string argument of some probe
/// (integers are then written in decimal); a declared type's fields as
/// their kinds read (see [`column`]). Each with whether it is
/// dictionary-coded (an enum's names).
fn usdt_columns(header: &Header) -> Vec<(String, ColumnType, bool)> {
    let probes = UsdtProbes::from_header(header);
    let registers_named = header
        .guest
        .as_ref()
        .is_some_and(|g| !g.registers.is_empty());
    let mut columns: Vec<(String, ColumnType, bool)> = Vec::new();
    // One name, several types: text holds any of them, else signed
    // integers do (unsigned ones up to 2^63, bools as 0 and 1).
    let mut add = |name: &str, ty: ColumnType, dictionary: bool| match columns
        .iter_mut()
        .find(|(n, _, _)| n == name)
    {
        Some((_, known, _)) if *known == ty || *known == ColumnType::Str => {}
        Some((_, known, _)) if ty == ColumnType::Str => *known = ty,
        Some((_, known, _)) => *known = ColumnType::I64,
        None => columns.push((name.to_string(), ty, dictionary)),
    };
    for info in &header.usdt {
        let Some(probe) = probes.get(info.spec_id) else {
            continue;
        };
        for (i, (name, ty)) in probe.args.iter().enumerate() {
            match probe.declared_field(i) {
                Some(field) => {
                    let dictionary = field.reading == Reading::Number(FieldKind::Enum);
                    for (name, ty, register) in field_columns(field) {
                        add(name, ty, dictionary);
                        if register && registers_named {
                            add(&format!("{name}_name"), ColumnType::Str, true);
                        }
                    }
                }
                None if ty.is_string() => add(name, ColumnType::Str, false),
                None => add(name, ColumnType::I64, false),
            }
        }
    }
    columns
}

/// Whether some probe's argument called `name` is signed (a declared
/// type's signed field, or a signed integer as its note says).
fn may_be_negative(header: &Header, name: &str) -> bool {
    let probes = UsdtProbes::from_header(header);
    let signed = probes.iter().any(|(_, probe)| {
        (probe.args.iter().enumerate()).any(|(i, (arg, ty))| {
            arg == name
                && match probe.declared_field(i) {
                    Some(field) => field.reading == Reading::Number(FieldKind::Signed),
                    None => ty.is_signed(),
                }
        })
    });
    signed
}

/// The columns of a field of a schema (the catalogue's or a declared
/// type's): each part's name and column, and whether it is a register
/// (whose name goes beside it in `NAME_name`).
fn field_columns(field: &FieldSchema) -> impl Iterator<Item = (&str, ColumnType, bool)> {
    field.reading.parts().iter().map(|part| {
        let register = part.shows == Shows::Number(FieldKind::Register);
        (
            part.name.unwrap_or(&field.name),
            column(part.shows),
            register,
        )
    })
}

/// The column of a part of a field (see `reading`): of a declared field,
/// a catalogue number, a decoded kind, a flag or a string.
fn column(shows: Shows) -> ColumnType {
    match shows.stored() {
        Stored::Unsigned => ColumnType::U64,
        Stored::Signed => ColumnType::I64,
        Stored::Bool => ColumnType::Bool,
        Stored::Text => ColumnType::Str,
    }
}

/// One USDT argument into its column: a string that could not be read
/// stays null; in a text column, numbers are written in decimal and
/// bools as true or false; in an integer column, an enum value and a bool
/// as the numbers they are. (A capture's header may pair any argument
/// with any column: what does not fit stays null.)
fn set_arg(
    columns: &mut [Values],
    row: usize,
    col: usize,
    ty: ColumnType,
    arg: &Arg<'_>,
    text_bytes: &mut usize,
) {
    let mut text = |bytes: &[u8]| set_str(columns, row, col, bytes, text_bytes);
    match (ty, arg) {
        (ColumnType::Str, Arg::Str(s)) if s.unreadable.is_none() => text(s.lossy().as_bytes()),
        (ColumnType::Str, Arg::Signed(v)) => text(itoa::Buffer::new().format(*v).as_bytes()),
        (ColumnType::Str, Arg::Enum(_, Some(name))) => text(name.as_bytes()),
        (
            ColumnType::Str,
            Arg::Unsigned(v) | Arg::Dec(v) | Arg::Addr(v) | Arg::Reg(v, _) | Arg::Enum(v, None),
        ) => text(itoa::Buffer::new().format(*v).as_bytes()),
        (ColumnType::Str, Arg::Bool(v)) => text(if *v { b"true" } else { b"false" }),
        (ColumnType::U64 | ColumnType::I64, Arg::Signed(v)) => set_int(columns, row, col, *v),
        (
            ColumnType::U64 | ColumnType::I64,
            Arg::Unsigned(v) | Arg::Dec(v) | Arg::Addr(v) | Arg::Reg(v, _) | Arg::Enum(v, _),
        ) => set_int(columns, row, col, *v as i64),
        (ColumnType::U64 | ColumnType::I64, Arg::Bool(v)) => set_int(columns, row, col, *v as i64),
        (ColumnType::Bool, Arg::Bool(v)) if columns[col].at(row) => columns[col].bools.push(*v),
        _ => {}
    }
}

/// Per kind id with plain fields: each field's column (and `reg_name`'s).
fn plain_columns(by_name: &FxHashMap<String, usize>) -> Vec<Option<PlainColumns>> {
    (0..EVENT_KIND_SLOTS as u8)
        .map(|id| {
            let kind = EventKind::from_id(id).filter(|&k| is_plain(k))?;
            Some(
                schema::catalogue(kind)
                    .iter()
                    .map(|f| {
                        let reg_name = (f.reading == Reading::Number(FieldKind::Register))
                            .then(|| by_name.get(format!("{}_name", f.name).as_str()).copied())
                            .flatten();
                        (by_name[&*f.name], reg_name)
                    })
                    .collect(),
            )
        })
        .collect()
}

/// The schema of `columns`, and how each is written.
fn schema(columns: &[ColumnInfo]) -> io::Result<(Arc<Type>, Arc<WriterProperties>)> {
    let message = format!(
        "message styx {{ {} }}",
        columns
            .iter()
            .map(ColumnInfo::schema)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let schema = Arc::new(parse_message_type(&message).map_err(io::Error::other)?);
    let mut properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::None)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS));
    // Min/max per column chunk for the columns queries range over, so a
    // reader skips row groups.
    for name in ["ts_ns", "pc", "addr"] {
        properties = properties
            .set_column_statistics_enabled(ColumnPath::from(name), EnabledStatistics::Chunk);
    }
    // Integers delta-coded: times, pcs and addresses change by little
    // from row to row of a type, so pages shrink before compression.
    for c in columns
        .iter()
        .filter(|c| matches!(c.ty, ColumnType::U64 | ColumnType::I64))
    {
        properties = properties.set_column_encoding(
            ColumnPath::from(c.name.as_str()),
            Encoding::DELTA_BINARY_PACKED,
        );
    }
    for c in columns.iter().filter(|c| c.dictionary) {
        let path = ColumnPath::from(c.name.as_str());
        properties = properties.set_column_dictionary_enabled(path, true);
    }
    Ok((schema, Arc::new(properties.build())))
}

/// Column `col`'s value at `row` (the first one given).
#[inline]
fn set_int(columns: &mut [Values], row: usize, col: usize, value: i64) {
    let c = &mut columns[col];
    if c.at(row) {
        c.ints.push(value);
    }
}

#[inline]
fn set_str(columns: &mut [Values], row: usize, col: usize, value: &[u8], text_bytes: &mut usize) {
    let c = &mut columns[col];
    if c.at(row) {
        *text_bytes += value.len();
        c.strs.push(ByteArray::from(value.to_vec()));
    }
}

/// The rows in a piece a Parquet [`FormatBlock`] made; the piece back if
/// another format made it.
fn rows_of(piece: Formatted) -> Result<Box<GatheredRows>, Formatted> {
    match piece {
        Formatted::Rows(rows) => rows.downcast().map_err(Formatted::Rows),
        bytes => Err(bytes),
    }
}

/// `name`'s bytes for the life of the process, once per distinct name:
/// a clone of them then counts no references. Counting them cost as much
/// as a tenth of the gathering, more when parallel `read`'s workers clone
/// what the calling thread drops (the count's cache line going back and
/// forth). Register names come from capture headers (at most
/// [`crate::formats::raw::MAX_HEADER`] bytes each), a few per process.
fn static_name(name: &str) -> bytes::Bytes {
    static NAMES: std::sync::Mutex<Option<rustc_hash::FxHashSet<&'static str>>> =
        std::sync::Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let names = names.get_or_insert_with(Default::default);
    let kept = match names.get(name) {
        Some(kept) => *kept,
        None => {
            let kept: &'static str = Box::leak(name.to_string().into_boxed_str());
            names.insert(kept);
            kept
        }
    };
    bytes::Bytes::from_static(kept.as_bytes())
}

/// A host name as part of a file name.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::UsdtInfo;
    use styx_common::ArgType;

    /// A USDT argument shares a column of styx's events only of its type.
    #[test]
    fn an_argument_shares_only_a_column_of_its_type() {
        assert_eq!(usdt_column_conflict("id", false), None);
        assert!(usdt_column_conflict("id", true).is_some());
        assert_eq!(usdt_column_conflict("name", true), None);
        assert!(usdt_column_conflict("name", false).is_some());
        assert!(usdt_column_conflict("conditional", false).is_some());
        assert_eq!(usdt_column_conflict("path", true), None);
    }

    /// One column a name, a string one if any probe's argument of that
    /// name is a string.
    #[test]
    fn usdt_columns_are_typed_by_their_arguments() {
        let int = ArgType::int(8, false);
        let usdt = vec![
            UsdtInfo::new(0, "a", "x", [(Some("id".into()), int), (None, int)]),
            UsdtInfo::new(
                1,
                "a",
                "y",
                [(None, ArgType::Str), (Some("id".into()), int)],
            ),
            UsdtInfo::new(2, "a", "z", [(Some("body".into()), ArgType::Json)]),
        ];
        let header = Header::now(1, "exe", usdt);
        let types: Vec<(String, bool)> = usdt_columns(&header)
            .into_iter()
            .map(|(name, ty, _)| (name, ty == ColumnType::Str))
            .collect();
        let want = [
            ("id", false),
            ("arg1", false),
            ("arg0", true),
            ("body", true),
        ];
        let want: Vec<(String, bool)> = want.iter().map(|&(n, s)| (n.to_string(), s)).collect();
        assert_eq!(types, want);
    }

    /// A column of styx's events turns signed for a session whose probe
    /// has a signed argument of its name, not for an unsigned one.
    #[test]
    fn a_signed_argument_makes_a_shared_column_signed() {
        let usdt = vec![UsdtInfo::new(
            0,
            "a",
            "x",
            [
                (Some("val".into()), ArgType::int(4, true)),
                (Some("pc".into()), ArgType::int(8, false)),
            ],
        )];
        let header = Header::now(1, "exe", usdt);
        let column = |name: &str| {
            let all = columns(&header);
            all.into_iter().find(|c| c.name == name).unwrap().ty
        };
        assert!(column("val") == ColumnType::I64);
        assert!(column("pc") == ColumnType::U64);
        assert!(column("addr") == ColumnType::U64);
    }
}
