//! `-o folded`: folded stacks of traced functions for flame graphs
//! (inferno, speedscope, Brendan Gregg's flamegraph.pl): one line per
//! distinct stack, `outer;inner;innermost WEIGHT`, the weight being the
//! self time in ns that stack spent (time in the innermost function, not
//! in traced calls it made). Written at the end, stacks in name order.
//! Only calls are drawn; other events are left out.

use crate::questions::calls::MAX_OPEN_CALLS;
use crate::record::event::{Body, Call, Event};
use crate::session::header::Header;
use crate::write::escape;
use crate::write::writer::{Chunked, EventWriter, Totals};
use std::collections::HashMap;
use std::io::{self, Write};

/// Distinct stacks kept at most; time of others is counted in a warning.
pub const MAX_STACKS: usize = 1 << 20;

/// Writes folded stacks.
pub struct FoldedWriter {
    out: Chunked<Box<dyn Write>>,
    names: Vec<String>,
    /// Per (pid, tid): the open calls' functions and their children's time.
    threads: HashMap<(u32, u32), Vec<(u32, u64)>>,
    /// Self time per stack of function ids.
    stacks: HashMap<Vec<u32>, u64>,
    /// Time of stacks past [`MAX_STACKS`].
    left_out_ns: u64,
}

impl FoldedWriter {
    /// Folded stacks of the functions `header` names, to `out`.
    pub fn new(out: Box<dyn Write>, header: &Header) -> FoldedWriter {
        FoldedWriter {
            out: Chunked::new(out, 64 << 10),
            names: header.functions.clone(),
            threads: HashMap::new(),
            stacks: HashMap::new(),
            left_out_ns: 0,
        }
    }
}

impl FoldedWriter {
    /// Takes a call event into the thread's stack and the stacks' times.
    fn call(&mut self, thread: (u32, u32), call: &Call) {
        let stack = self.threads.entry(thread).or_default();
        // The tracker gives each event its depth: what is deeper is gone.
        stack.truncate(call.depth as usize + usize::from(call.exit));
        if !call.exit {
            if stack.len() == call.depth as usize && stack.len() < MAX_OPEN_CALLS {
                stack.push((call.function, 0));
            }
            return;
        }
        let (Some(duration), Some(&(function, children))) = (call.duration_ns, stack.last()) else {
            return;
        };
        if function != call.function || stack.len() != call.depth as usize + 1 {
            return;
        }
        let path: Vec<u32> = stack.iter().map(|&(f, _)| f).collect();
        stack.pop();
        if let Some(caller) = stack.last_mut() {
            caller.1 = caller.1.saturating_add(duration);
        }
        let self_ns = duration.saturating_sub(children);
        if let Some(total) = self.stacks.get_mut(&path) {
            *total = total.saturating_add(self_ns);
        } else if self.stacks.len() < MAX_STACKS {
            self.stacks.insert(path, self_ns);
        } else {
            self.left_out_ns = self.left_out_ns.saturating_add(self_ns);
        }
    }
}

impl EventWriter for FoldedWriter {
    fn event(&mut self, event: &Event<'_>) -> io::Result<()> {
        let Body::Call(call) = &event.body else {
            return Ok(());
        };
        let thread = (event.header.pid, event.header.tid);
        self.call(thread, call);
        // Threads come and go: only those with open calls are kept.
        if self.threads.get(&thread).is_some_and(Vec::is_empty) {
            self.threads.remove(&thread);
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn finish(&mut self, _: &Totals<'_>) -> io::Result<()> {
        let name = |f: &u32| self.names.get(*f as usize).map_or("?", String::as_str);
        let mut lines: Vec<(String, u64)> = self
            .stacks
            .iter()
            .filter(|(_, &ns)| ns > 0)
            .map(|(path, &ns)| {
                // `;` separates frames and a space ends the stack: neither
                // may appear inside a name (C++ names have spaces); names
                // come from files anyone can write: no control characters.
                let frames: Vec<String> = path
                    .iter()
                    .map(|f| escape::controls(name(f)).replace([';', ' '], "_"))
                    .collect();
                (frames.join(";"), ns)
            })
            .collect();
        lines.sort();
        for (stack, ns) in lines {
            self.out.buf.extend_from_slice(stack.as_bytes());
            self.out.buf.push(b' ');
            self.out.buf.dec(ns);
            self.out.buf.push(b'\n');
            self.out.event_done()?;
        }
        if self.left_out_ns > 0 {
            log::warn!(
                "-o folded: more than {MAX_STACKS} distinct stacks; {} ns of self time in \
                 further stacks left out",
                self.left_out_ns
            );
        }
        self.out.flush()
    }
}
