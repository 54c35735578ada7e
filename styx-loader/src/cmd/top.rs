//! `top` and `read --by`: events counted per key into tables (styx-events'
//! `top`), shown as a table (redrawn while tracing on a terminal, final at
//! the end) and, with `--heatmap`, a picture of memory pages.
// `read --by` uses the tables without the `trace` feature; the live parts
// (the screen, the kernel's counts) only tracing does.
#![cfg_attr(not(feature = "trace"), allow(dead_code))]

use crate::cli::CountArgs;
use crate::outputs;
use crate::search;
use anyhow::{bail, Context, Result};
use std::cell::{OnceCell, RefCell};
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};
use styx_common::schema::HEAP_CALLER;
use styx_common::EventKind;
use styx_events::Format;
use styx_events::{heatmap, CountWriter, KeySpec, Table, TableFormat, View};
use styx_events::{DeclaredSites, Guest, Header, RegisterNames};

/// What is counted, and the loader's own counts so far.
pub struct Counter {
    /// `--by`, then (with --heatmap) pages of memory accesses.
    pub specs: Vec<KeySpec>,
    /// The loader's counts, one per spec (shared with the [`CountWriter`]).
    pub tables: Vec<Rc<RefCell<Table>>>,
    /// Keys per table at most (`--max-keys`), for the kernel's map too.
    pub max_keys: usize,
    heatmap: Option<PathBuf>,
    format: TableFormat,
    /// The guest description a marker gave (shared with the
    /// [`CountWriter`]): `--by pc` names pcs by its program's functions.
    guest: Rc<RefCell<Option<Guest>>>,
    /// The first spec with those names, made once the description came.
    named: OnceCell<KeySpec>,
}

impl Counter {
    /// Counts `kinds` by `by`; with `heatmap`, also memory accesses by page.
    pub fn new(
        by: &str,
        page_size: u64,
        heatmap: Option<&Path>,
        max_keys: u32,
        format: Format,
        kinds: &[EventKind],
        header: &Header,
    ) -> Result<Counter> {
        let format = match format {
            Format::Text => TableFormat::Text,
            Format::Jsonl => TableFormat::Jsonl,
            other => bail!(
                "counts are printed as text or jsonl, not -o {}",
                other.name()
            ),
        };
        let declared = DeclaredSites::of(header);
        let by = KeySpec::new(by, page_size, kinds, &declared).map_err(anyhow::Error::msg)?;
        let mut specs = vec![by];
        specs[0].registers = RegisterNames::new(header.guest.as_ref());
        if specs[0].by == HEAP_CALLER {
            specs[0].code = search::code_names(header);
        }
        if heatmap.is_some() {
            let memory: Vec<EventKind> = kinds
                .iter()
                .copied()
                .filter(|k| matches!(k, EventKind::MemRead | EventKind::MemWrite))
                .collect();
            if memory.is_empty() {
                bail!("--heatmap draws mem_read and mem_write events: select them (-e)");
            }
            let pages = KeySpec::new("page", page_size, &memory, &[]);
            specs.push(pages.map_err(anyhow::Error::msg)?);
        }
        let max_keys = max_keys.max(1) as usize;
        Ok(Counter {
            tables: specs
                .iter()
                .map(|_| Rc::new(RefCell::new(Table::new(max_keys))))
                .collect(),
            specs,
            max_keys,
            heatmap: heatmap.map(Path::to_path_buf),
            format,
            guest: Rc::default(),
            named: OnceCell::new(),
        })
    }

    /// A writer counting the events it is handed into the loader's tables.
    pub fn writer(&self) -> CountWriter {
        CountWriter {
            tables: self
                .specs
                .iter()
                .cloned()
                .zip(self.tables.iter().cloned())
                .collect(),
            guest: Rc::clone(&self.guest),
        }
    }

    /// The spec the table is shown by: with `--by pc`, once a guest
    /// description came, one naming pcs by the guest program's functions
    /// (its file's symbols, read then, once).
    pub fn shown_spec(&self) -> &KeySpec {
        if let Some(named) = self.named.get() {
            return named;
        }
        let guest = self.guest.borrow();
        match guest.as_ref() {
            Some(guest) if self.specs[0].by == "pc" => self.named.get_or_init(|| {
                let mut spec = self.specs[0].clone();
                spec.guest_code = search::guest_code_names(guest);
                spec
            }),
            _ => &self.specs[0],
        }
    }

    /// The loader's counts plus the kernel's.
    pub fn merged(&self, kernel: &[Table]) -> Vec<Table> {
        self.tables
            .iter()
            .enumerate()
            .map(|(i, mine)| {
                let mut table = mine.borrow().clone();
                if let Some(theirs) = kernel.get(i) {
                    table.merge(theirs);
                }
                table
            })
            .collect()
    }

    /// The final table to `table_to` (`Some(None)`: stdout; None: no
    /// table), and the heatmap.
    pub fn write_final(
        &self,
        tables: &[Table],
        table_to: Option<Option<&Path>>,
        rows: Option<usize>,
        title: &str,
    ) -> Result<()> {
        let view = View {
            spec: self.shown_spec(),
            table: &tables[0],
            previous: None,
            rows,
        };
        let text = view.render(self.format);
        match table_to {
            None => {}
            Some(Some(path)) => {
                let mut file = outputs::create(path)?;
                file.write_all(text.as_bytes())
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            Some(None) => match io::stdout().lock().write_all(text.as_bytes()) {
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
                other => other.context("writing stdout")?,
            },
        }
        if let (Some(path), Some(table)) = (&self.heatmap, tables.get(1)) {
            let svg = heatmap::svg(table, self.specs[1].page_bits, title);
            let mut file = outputs::create(path)?;
            file.write_all(svg.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("styx-loader: heatmap in {}", path.display());
        }
        Ok(())
    }
}

/// The types `top` counts when no `-e` is given: those with the key, and
/// memory accesses for --heatmap.
/// With `probes` (`--probes`), USDT events too: event types the
/// emulator declared are counted by their fields, which are known only
/// once the target's notes are read (`Counter::new` then checks the key).
pub fn counted_kinds(count: &CountArgs, probes: bool) -> Result<Vec<EventKind>> {
    let all: Vec<EventKind> = EventKind::ALL
        .iter()
        .copied()
        .filter(|&k| k != EventKind::Usdt)
        .collect();
    let mut kinds: Vec<EventKind> = match KeySpec::new(count.key(), count.page_size, &all, &[]) {
        Ok(spec) => spec.kinds().collect(),
        Err(_) if probes => Vec::new(),
        Err(e) => bail!(e),
    };
    if probes {
        kinds.push(EventKind::Usdt);
    }
    if count.heatmap.is_some() {
        kinds.extend([EventKind::MemRead, EventKind::MemWrite]);
    }
    kinds.sort_unstable();
    kinds.dedup();
    Ok(kinds)
}

/// Redraws the table on a terminal while tracing; at the end, writes the
/// final one.
pub struct Screen {
    pub counter: Counter,
    /// Redraw on stdout (a terminal, no --output).
    pub live: bool,
    pub rows: usize,
    pub output: Option<PathBuf>,
    pub title: String,
    started: Instant,
    previous: Option<(Vec<Table>, Instant)>,
}

impl Screen {
    pub fn new(counter: Counter, rows: usize, output: Option<PathBuf>, title: String) -> Screen {
        Screen {
            live: output.is_none() && io::stdout().is_terminal(),
            counter,
            rows,
            output,
            title,
            started: Instant::now(),
            previous: None,
        }
    }

    /// Draws the tables (the kernel's counts so far in `kernel`); `done`:
    /// the final table.
    pub fn draw(&mut self, kernel: &[Table], done: bool) {
        let tables = self.counter.merged(kernel);
        if done {
            let in_kernel: u64 = kernel.first().map_or(0, Table::total);
            eprintln!(
                "styx-loader: counted {} events by {} ({in_kernel} of them in the kernel, never streamed)",
                tables[0].total(),
                self.counter.specs[0].by
            );
            let rows = match self.counter.format {
                TableFormat::Text => Some(self.rows),
                TableFormat::Jsonl => None,
            };
            let table_to = Some(self.output.as_deref());
            if let Err(e) = self
                .counter
                .write_final(&tables, table_to, rows, &self.title)
            {
                eprintln!("styx-loader: error: {e:#}");
            }
            return;
        }
        if !self.live {
            return;
        }
        let now = Instant::now();
        let previous = self
            .previous
            .as_ref()
            .map(|(t, at)| (&t[0], now.duration_since(*at)));
        let total = tables[0].total();
        let elapsed = self.started.elapsed().as_secs_f64();
        let view = View {
            spec: self.counter.shown_spec(),
            table: &tables[0],
            previous,
            rows: Some(self.rows),
        };
        let mut screen = String::from("\x1b[H\x1b[2J");
        screen += &format!(
            "{} by {}: {total} events counted in {elapsed:.1} s, {} keys\n\n",
            self.title,
            self.counter.specs[0].by,
            tables[0].keys()
        );
        screen += &view.render(TableFormat::Text);
        let _ = io::stdout().lock().write_all(screen.as_bytes());
        self.previous = Some((tables, now));
    }
}

/// How often a terminal table is redrawn at least.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
