//! The per-function table printed at the end of a trace with
//! `--functions` (and alone with `--summary`, as BCC's `funclatency`
//! would): calls, total time, self time (less the traced calls it made),
//! the longest call, how many were unwound and how many left by a tail
//! call (with a line saying where such a call's time ends).

use crate::write::human::duration;
use std::io::{self, Write};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// Entries seen.
    pub calls: u64,
    /// Calls that ended (returned or unwound) with their entry seen.
    pub ended: u64,
    /// Of those, ended without their `ret` (see [`super`]).
    pub unwound: u64,
    /// Of those, left by a tail call (see [`super`]).
    pub tail_calls: u64,
    /// Time from entry to exit, summed over ended calls.
    pub total_ns: u64,
    /// The same, less the time spent in traced calls they made.
    pub self_ns: u64,
    /// The longest ended call.
    pub max_ns: u64,
}

/// Every traced function's row, by function id, and what could not be
/// paired.
#[derive(Clone, Debug, Default)]
pub struct CallTable {
    /// By function id.
    pub rows: Vec<Row>,
    /// Exits whose entries came before tracing did.
    pub unpaired: u64,
    /// Calls still open when tracing stopped (running, or a thread gone).
    pub still_open: u64,
    /// Calls not tracked: more open at once than the tracker keeps.
    pub untracked: u64,
    /// Returns were probed as uretprobes: a tail-calling call ends when its
    /// callee returns (else at its jump).
    pub uretprobe_exits: bool,
}

impl CallTable {
    /// An empty table for `functions` functions.
    pub fn new(functions: usize) -> CallTable {
        CallTable {
            rows: vec![Row::default(); functions],
            ..CallTable::default()
        }
    }

    /// Room for `functions` functions (more were found later), the rows
    /// counted so far kept.
    pub fn grow(&mut self, functions: usize) {
        if functions > self.rows.len() {
            self.rows.resize(functions, Row::default());
        }
    }

    fn row(&mut self, function: u32) -> Option<&mut Row> {
        self.rows.get_mut(function as usize)
    }

    /// A call of `function` began.
    pub fn enter(&mut self, function: u32) {
        if let Some(row) = self.row(function) {
            row.calls += 1;
        }
    }

    /// A call of `function` was left by a tail call (before its
    /// [`CallTable::exit`]).
    pub fn tail_call(&mut self, function: u32) {
        if let Some(row) = self.row(function) {
            row.tail_calls += 1;
        }
    }

    /// A call of `function` ended after `duration_ns`, `self_ns` of it its own.
    pub fn exit(&mut self, function: u32, duration_ns: u64, self_ns: u64, unwound: bool) {
        if let Some(row) = self.row(function) {
            row.ended += 1;
            row.unwound += u64::from(unwound);
            row.total_ns = row.total_ns.saturating_add(duration_ns);
            row.self_ns = row.self_ns.saturating_add(self_ns);
            row.max_ns = row.max_ns.max(duration_ns);
        }
    }

    /// The table as text, the most total time first; functions never
    /// called are left out.
    pub fn write(&self, names: &[String], out: &mut dyn Write) -> io::Result<()> {
        let mut rows: Vec<(&str, &Row)> = self
            .rows
            .iter()
            .enumerate()
            .filter(|(_, row)| row.calls > 0)
            .map(|(i, row)| (names.get(i).map_or("?", String::as_str), row))
            .collect();
        rows.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(a.0.cmp(b.0)));
        writeln!(
            out,
            "{:>12} {:>12} {:>12} {:>12} {:>10} {:>10}  function",
            "calls", "total", "self", "max", "unwound", "tail"
        )?;
        for (name, row) in &rows {
            writeln!(
                out,
                "{:>12} {:>12} {:>12} {:>12} {:>10} {:>10}  {}",
                row.calls,
                duration(row.total_ns),
                duration(row.self_ns),
                duration(row.max_ns),
                row.unwound,
                row.tail_calls,
                crate::write::escape::controls(name)
            )?;
        }
        if rows.is_empty() {
            writeln!(out, "(no traced function was called)")?;
        }
        let notes = [
            (
                self.still_open,
                "calls had not returned when tracing stopped",
            ),
            (
                self.unpaired,
                "returns were of calls made before tracing began",
            ),
            (self.untracked, "calls were too deep to pair (not timed)"),
        ];
        for (n, what) in notes {
            if n > 0 {
                writeln!(out, "({n} {what})")?;
            }
        }
        let tail_calls: u64 = self.rows.iter().map(|r| r.tail_calls).sum();
        if tail_calls > 0 {
            let ends = if self.uretprobe_exits {
                "when its callee returns (uretprobes), the callee's time in its total"
            } else {
                "at its jump to the callee (ret probes), the callee's time not in it"
            };
            writeln!(
                out,
                "({tail_calls} calls were left by a tail call: each ends {ends})"
            )?;
        }
        Ok(())
    }
}
