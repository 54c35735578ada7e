//! Cutting a capture as it is read (`read --from/--to`, `read -e`): which
//! of its events go on to the filters and the format.
//!
//! Cuts apply to decoded events, above the capture reader, so they cut
//! whatever a reader gives (any capture format, serial or parallel). A
//! window's bounds are seconds after the capture's first event (the first
//! event the reader gives: a capture is a stream, and is read once) or
//! absolute `ts_ns`; its start is in, its end out, so windows side by side
//! split a capture without giving an event twice. The types are a set of
//! catalogue kinds, other providers' sites (and the emulator's declared
//! types) by spec id, and traced functions' entries and exits; the command
//! line resolves names against the capture's header into it.

use crate::record::event::{Body, Event};
use std::collections::HashSet;
use std::fmt;
use styx_common::{EventKind, EVENT_KIND_SLOTS};

/// One end of a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// This many ns after the capture's first event.
    AfterFirst(u64),
    /// This `ts_ns` (kernel `CLOCK_MONOTONIC`, as the outputs show it).
    At(u64),
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::AfterFirst(ns) => write!(f, "{} s", *ns as f64 / 1e9),
            Bound::At(ts) => write!(f, "{ts}ns"),
        }
    }
}

impl Bound {
    /// The `ts_ns` it stands for, the capture's first event at `first`.
    fn ts(self, first: u64) -> u64 {
        match self {
            Bound::AfterFirst(ns) => first.saturating_add(ns),
            Bound::At(ts) => ts,
        }
    }
}

/// The event types kept.
#[derive(Clone, Debug, Default)]
pub struct Types {
    /// By kind id: every event of the kind (for `usdt`: every site's).
    kinds: [bool; EVENT_KIND_SLOTS as usize],
    /// Other providers' sites and declared types' sites kept, by spec id.
    spec_ids: HashSet<u32>,
    /// Traced functions' entries, and their exits.
    fn_entry: bool,
    fn_exit: bool,
}

impl Types {
    /// Keeps every event of `kind`.
    pub fn add_kind(&mut self, kind: EventKind) {
        self.kinds[kind as usize] = true;
    }

    /// Keeps the events of USDT site `spec_id`.
    pub fn add_site(&mut self, spec_id: u32) {
        self.spec_ids.insert(spec_id);
    }

    /// Keeps traced functions' entries (`exit` false) or exits.
    pub fn add_function(&mut self, exit: bool) {
        match exit {
            false => self.fn_entry = true,
            true => self.fn_exit = true,
        }
    }

    /// The catalogue's kinds kept, whole or in part (USDT: some of its
    /// sites), for checking filters and `--by` against.
    pub fn kinds(&self) -> Vec<EventKind> {
        let mut kinds: Vec<EventKind> = (EventKind::ALL.iter().copied())
            .filter(|&k| self.kinds[k as usize])
            .collect();
        if !self.spec_ids.is_empty() && !kinds.contains(&EventKind::Usdt) {
            kinds.push(EventKind::Usdt);
        }
        kinds
    }

    /// Whether `event` is of a type kept.
    #[inline]
    pub fn keeps(&self, event: &Event<'_>) -> bool {
        match &event.body {
            _ if self.kinds[event.kind as usize] => true,
            Body::Usdt { spec_id, .. } => self.spec_ids.contains(spec_id),
            Body::Call(call) => match call.exit {
                false => self.fn_entry,
                true => self.fn_exit,
            },
            _ => false,
        }
    }
}

/// A [`Cut`] with its window in `ts_ns`: what parallel `read`'s workers
/// keep of their blocks.
#[derive(Clone, Debug)]
pub(crate) struct Sieve {
    from: Option<u64>,
    to: Option<u64>,
    types: Option<Types>,
}

impl Sieve {
    #[inline]
    pub(crate) fn keeps(&self, event: &Event<'_>) -> bool {
        in_cut(self.from, self.to, self.types.as_ref(), event)
    }
}

/// Whether `event` is in `from..to` (`ts_ns`) and of `types`.
#[inline]
fn in_cut(from: Option<u64>, to: Option<u64>, types: Option<&Types>, event: &Event<'_>) -> bool {
    let ts = event.header.ts_ns;
    from.is_none_or(|from| ts >= from)
        && to.is_none_or(|to| ts < to)
        && types.is_none_or(|t| t.keeps(event))
}

/// A capture's cut: a window and the types kept.
#[derive(Clone, Debug, Default)]
pub struct Cut {
    /// From here on (None: from the start).
    pub from: Option<Bound>,
    /// Before here (None: to the end).
    pub to: Option<Bound>,
    /// None: every type.
    pub types: Option<Types>,
    /// The capture's first event's time, once seen.
    first: Option<u64>,
    /// The latest time seen.
    last: u64,
    /// Events left out, per kind id.
    pub left_out: [u64; EVENT_KIND_SLOTS as usize],
}

impl Cut {
    /// A cut to `from..to` of the `types` given (None: all).
    pub fn new(from: Option<Bound>, to: Option<Bound>, types: Option<Types>) -> Cut {
        Cut {
            from,
            to,
            types,
            ..Cut::default()
        }
    }

    /// Whether it keeps every event.
    pub fn keeps_all(&self) -> bool {
        self.from.is_none() && self.to.is_none() && self.types.is_none()
    }

    /// Whether to keep `event`; every event of the capture, in order, goes
    /// through here (the first one sets where relative bounds count from).
    #[inline]
    pub fn keeps(&mut self, event: &Event<'_>) -> bool {
        let ts = event.header.ts_ns;
        let first = *self.first.get_or_insert(ts);
        self.last = self.last.max(ts);
        let (from, to) = self.window(first);
        let keep = in_cut(from, to, self.types.as_ref(), event);
        if !keep {
            self.left_out[event.kind as usize] += 1;
        }
        keep
    }

    /// Whether its window counts from the capture's first event.
    pub(crate) fn counts_from_first(&self) -> bool {
        [self.from, self.to]
            .iter()
            .any(|b| matches!(b, Some(Bound::AfterFirst(_))))
    }

    /// The cut as each event alone decides it, the capture's first event
    /// at `first` (None: it has none before its end or a fault, so no
    /// event is kept either way).
    pub(crate) fn sieve(&self, first: Option<u64>) -> Sieve {
        let (from, to) = self.window(first.unwrap_or(0));
        Sieve {
            from,
            to,
            types: self.types.clone(),
        }
    }

    /// Its window's bounds in `ts_ns`, the capture's first event at `first`.
    #[inline]
    fn window(&self, first: u64) -> (Option<u64>, Option<u64>) {
        (self.from.map(|b| b.ts(first)), self.to.map(|b| b.ts(first)))
    }

    /// What [`Cut::keeps`] would have seen of a block read in parallel
    /// (see [`crate::read_blocks`]): its events' first time and latest,
    /// and per kind the events read and those kept. Blocks come in the
    /// capture's order.
    pub(crate) fn saw_block(
        &mut self,
        span: Option<(u64, u64)>,
        read: &[u64; EVENT_KIND_SLOTS as usize],
        kept: &[u64; EVENT_KIND_SLOTS as usize],
    ) {
        if let Some((first, last)) = span {
            self.first.get_or_insert(first);
            self.last = self.last.max(last);
        }
        for ((left_out, read), kept) in self.left_out.iter_mut().zip(read).zip(kept) {
            *left_out += read - kept;
        }
    }

    /// The capture's first event's time and the latest, once an event
    /// was seen.
    pub fn span(&self) -> Option<(u64, u64)> {
        self.first.map(|first| (first, self.last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use styx_common::RecordHeader;

    fn at(kind: EventKind, ts_ns: u64) -> Event<'static> {
        Event {
            header: RecordHeader {
                kind: kind as u8,
                ts_ns,
                ..RecordHeader::default()
            },
            kind,
            body: Body::Args([0; 4]),
        }
    }

    #[test]
    fn windows_count_from_the_first_event_or_are_absolute() {
        let mut cut = Cut::new(Some(Bound::AfterFirst(10)), Some(Bound::At(1030)), None);
        let kept: Vec<u64> = [1000, 1005, 1010, 1029, 1030, 1040, 1001]
            .into_iter()
            .filter(|&ts| cut.keeps(&at(EventKind::InsnExec, ts)))
            .collect();
        assert_eq!(kept, [1010, 1029]);
        assert_eq!(cut.span(), Some((1000, 1040)));
        assert_eq!(cut.left_out[EventKind::InsnExec as usize], 5);
    }

    #[test]
    fn types_keep_kinds_sites_and_function_ends() {
        let mut types = Types::default();
        types.add_kind(EventKind::MemWrite);
        types.add_site(4);
        let mut cut = Cut::new(None, None, Some(types));
        assert!(cut.keeps(&at(EventKind::MemWrite, 1)));
        assert!(!cut.keeps(&at(EventKind::MemRead, 1)));
        assert!(cut.keeps(&Event::usdt(4, &[1])));
        assert!(!cut.keeps(&Event::usdt(5, &[1])));
        let kinds = cut.types.as_ref().unwrap().kinds();
        assert_eq!(kinds, [EventKind::MemWrite, EventKind::Usdt]);
    }
}
