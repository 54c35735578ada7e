//! A batch record's events per kind, from a walk of its item words: what
//! an output that keeps batches whole (a raw capture, the flight recorder)
//! checks before it keeps one. The head's own counts are the traced
//! process's word and may add up while an item is bad; a capture storing
//! such a batch could not be read past it.
//!
//! The loader walks every item of every batch it keeps (~200 M a second
//! from the demo), and each item's length comes from its tag: a walk is a
//! chain of loads, one item's offset waiting for the previous item's tag.
//! So the walk is cut into [`CHAINS`] pieces that the CPU runs side by
//! side, each starting at a time mark (styx-probe writes one every ~1 KiB;
//! found by the high half of its clock, see [`counts_in_chains`]). A piece
//! is proved by the one before ending exactly at its start; where one does
//! not (a guess that was no mark, a batch of declared types or a malformed
//! one), the plain walk from the start decides. The batch's cache lines
//! are all asked for first ([`prefetch`]).

use crate::record::batch::DeclaredTypes;
use bytemuck::pod_read_unaligned;
use memchr::memmem::Finder;
use std::mem::size_of;
use styx_common::batch::{BatchRecord, BATCH_BYTES};
use styx_common::item::{self, Codec, Skimmed, CATALOGUE_TAG, TAG_BYTES, TIME_TAG};
use styx_common::{EventKind, EVENT_KIND_SLOTS};

/// Bytes of a batch record before its items.
const FIXED: usize = size_of::<BatchRecord>();

/// Events per kind id (slot 0, time marks, stays 0).
pub type KindCounts = [u64; EVENT_KIND_SLOTS as usize];

/// The events per kind of `record` (a ring record whose kind is
/// `styx_common::batch::BATCH_RECORD_KIND`, its items laid out as `codec`
/// says), or None when it is not whole: shorter than its fixed part or its
/// items, more items than a batch holds, an item no batch holds (also one
/// of a declared type `declared` does not have, or of another length), or
/// one cut off.
pub fn counts(record: &[u8], codec: Codec, declared: &DeclaredTypes) -> Option<KindCounts> {
    counts_by_type(record, codec, declared, &mut Vec::new())
}

/// What to keep of `record` when it is kept whole: its fixed part and its
/// items, not the ring space after them (a flush reserves a record of one
/// of a few fixed sizes and fills what it holds; the rest is whatever the
/// ring held before, bytes of other records). `record` as it is when
/// shorter than its fixed part.
pub fn kept(record: &[u8]) -> &[u8] {
    let Some(fixed) = record.get(..FIXED) else {
        return record;
    };
    let batch: BatchRecord = pod_read_unaligned(fixed);
    &record[..record.len().min(FIXED + batch.len as usize)]
}

/// [`counts`], and the events of each declared type among them added to
/// `by_spec` as (its spec id, events), when the record is whole.
pub fn counts_by_type(
    record: &[u8],
    codec: Codec,
    declared: &DeclaredTypes,
    by_spec: &mut Vec<(u32, u64)>,
) -> Option<KindCounts> {
    let batch: BatchRecord = pod_read_unaligned(record.get(..FIXED)?);
    let len = batch.len as usize;
    if len > BATCH_BYTES {
        return None;
    }
    let items = record.get(FIXED..FIXED + len)?;
    let file = batch.header.aux;
    prefetch(items);
    if codec == Codec::Current {
        if let Some(found) = counts_in_chains(items) {
            // Tests and the fuzzer hold the chains to the one walk.
            debug_assert_eq!(
                Some(found),
                walk(items, codec, declared, file, &mut Vec::new()),
                "walked in chains and in one"
            );
            return Some(found);
        }
    }
    walk(items, codec, declared, file, by_spec)
}

/// [`counts_by_type`] of `items`, a batch of file `file`, in one walk.
/// Not inlined: inlined, it made the chains' walk of an emulator's
/// stream ~7% slower (`examples/bench-walk.rs`).
#[inline(never)]
fn walk(
    items: &[u8],
    codec: Codec,
    declared: &DeclaredTypes,
    file: u8,
    by_spec: &mut Vec<(u32, u64)>,
) -> Option<KindCounts> {
    let mut found = [0u64; EVENT_KIND_SLOTS as usize];
    // An item whose tag the one before had starts a run (a thread's stream
    // repeats its tags): the run is counted by [`run_from`], whose loads do
    // not wait for each other; perf put the loader's time in the walk's
    // chain of loads, each item's offset waiting for the tag before. A
    // stream whose tags change from item to item (an emulator's
    // instruction, its register and memory accesses) would mispredict the
    // comparison every time: a run is looked for only once a tag has come
    // twice in a row.
    let mut last_tag = TIME_TAG;
    // Declared types' events, kept apart until the record proves whole, by
    // tag: (tag, bytes of values, spec id, events). A batch holds few
    // types: a look along them is cheaper than the session's table per item.
    let mut types: Vec<(u16, usize, u32, u64)> = Vec::new();
    let mut at = 0;
    while at < items.len() {
        let tag = match items.get(at..at + TAG_BYTES) {
            Some(&[low, high]) => u16::from_le_bytes([low, high]),
            _ => return None,
        };
        let again = tag == last_tag && codec == Codec::Current;
        last_tag = tag;
        if tag & CATALOGUE_TAG != 0 && codec == Codec::Current {
            // The tag alone: values are not read here.
            let bytes = item::catalogue_item_bytes(tag);
            if bytes == 0 || at + bytes > items.len() {
                return None;
            }
            let n = match again {
                true => run_from::<TAG_BYTES>(items, at, bytes),
                false => 1,
            };
            *found.get_mut(usize::from(tag >> 8 & 0x7f))? += n as u64;
            at += n * bytes;
            continue;
        }
        let (item, bytes) = codec.skim(&items[at..]).ok()?;
        match item {
            // A declared type's: other providers' probes' kind, as split.
            // A run's items have its first one's length byte too.
            Skimmed::Declared { tag, values } => {
                let n = match again {
                    true => run_from::<{ TAG_BYTES + 1 }>(items, at, bytes),
                    false => 1,
                };
                match types.iter_mut().find(|t| t.0 == tag) {
                    Some(seen) if seen.1 == values => seen.3 += n as u64,
                    Some(_) => return None,
                    None => {
                        let of = declared.get(&(file, tag))?;
                        if of.value_bytes() != values {
                            return None;
                        }
                        types.push((tag, values, of.spec_id, n as u64));
                    }
                }
                at += n * bytes;
            }
            // A version-1 item's first bytes are no tag.
            _ => {
                count(&mut found, item, 1);
                at += bytes;
            }
        }
    }
    for (_, _, spec_id, n) in types {
        found[EventKind::Usdt as usize] += n;
        add(by_spec, spec_id, n);
    }
    Some(found)
}

/// How many items of `bytes` bytes each, from `at` on (the first of
/// them whole in `items`), begin with the first one's `HEAD` bytes (its
/// tag, for a declared type also its length byte) and end within `items`:
/// a run, checked four items at a time, whose offsets are known ahead.
fn run_from<const HEAD: usize>(items: &[u8], at: usize, bytes: usize) -> usize {
    let head = |offset: usize| -> [u8; HEAD] {
        items[offset..offset + HEAD].try_into().expect("HEAD bytes")
    };
    let first = head(at);
    let mut end = at + bytes;
    while end + 4 * bytes <= items.len() {
        let four = (head(end) == first)
            & (head(end + bytes) == first)
            & (head(end + 2 * bytes) == first)
            & (head(end + 3 * bytes) == first);
        if !four {
            break;
        }
        end += 4 * bytes;
    }
    while end + bytes <= items.len() && head(end) == first {
        end += bytes;
    }
    (end - at) / bytes
}

/// Walks side by side: the batch's pieces, at most.
const CHAINS: usize = 8;

/// The events per kind of `items` (catalogue events and time marks only),
/// walked in [`CHAINS`] pieces side by side; None where that cannot say
/// (see the module's comment). Every item is walked once, and a piece
/// counts only when the walk of the one before it ended on its first
/// byte, so a wrong guess costs time, never a wrong count.
fn counts_in_chains(items: &[u8]) -> Option<KindCounts> {
    // Where each piece starts: the first at 0 (a batch begins with a time
    // mark), each other at the first mark past its share of the bytes, or
    // where the one before starts (then that one is empty).
    let mut start = [0usize; CHAINS + 1];
    start[CHAINS] = items.len();
    let first_mark = items.get(..item::MARK_BYTES)?;
    if first_mark[..TAG_BYTES] != TIME_TAG.to_le_bytes() {
        return None;
    }
    // Marks of one batch share the high half of their ns (it changes every
    // ~4.3 s); a value could too, and is then a guess proved wrong.
    let high: [u8; 4] = first_mark[6..10].try_into().expect("4 bytes");
    // A stream that repeats one tag (a tight loop's) walks faster in one
    // chain, its runs taking their length from a register (below).
    let first = items.get(item::MARK_BYTES..item::MARK_BYTES + TAG_BYTES)?;
    let second = item::catalogue_item_bytes(u16::from_le_bytes([first[0], first[1]]));
    if second != 0
        && items.get(item::MARK_BYTES + second..item::MARK_BYTES + second + TAG_BYTES)
            == Some(first)
    {
        return None;
    }
    let high = Finder::new(&high);
    for piece in 1..CHAINS {
        let from = (items.len() * piece / CHAINS).max(start[piece - 1]);
        start[piece] = mark_from(items, from, &high).unwrap_or(start[piece - 1]);
    }
    let mut at: [usize; CHAINS] = start[..CHAINS].try_into().expect("CHAINS");
    let end: [usize; CHAINS] = start[1..].try_into().expect("CHAINS");
    let mut found = [[0u64; EVENT_KIND_SLOTS as usize]; CHAINS];
    // Held in a register: through the static, each step loaded its address.
    let steps = &item::STEP_BYTES;
    // Rounds of one item a chain, every chain in each: while each has an
    // item's room left no chain can pass its end within `safe` rounds, so
    // those run with no test of where a chain is, its offset in a
    // register. The loop that tested every chain's offset at every item
    // kept the offsets on the stack: `examples/bench-walk.rs`'s emulator
    // stream took 2.6 ns an event with it, 1.5 with the rounds (same run),
    // and the loader tracing the demo ~21% less CPU an event.
    loop {
        let safe = (0..CHAINS)
            .map(|c| end[c].saturating_sub(at[c]) / MAX_STEP)
            .min()
            .unwrap_or(0);
        if safe == 0 {
            break;
        }
        for _ in 0..safe {
            for c in 0..CHAINS {
                // SAFETY: `safe` rounds from here no chain passes its end
                // (no step moves more than MAX_STEP bytes: checked at
                // compile time below), so a tag's two bytes at `at[c]` are
                // within `items`.
                let tag = unsafe { items.as_ptr().add(at[c]).cast::<[u8; 2]>().read() };
                let bytes = step(steps, u16::from_le_bytes(tag), &mut found[c]);
                if bytes == 0 {
                    return None;
                }
                at[c] += bytes;
            }
        }
    }
    // The chains' last items, still side by side, each tested.
    loop {
        let mut walking = false;
        for c in 0..CHAINS {
            if at[c] >= end[c] {
                continue;
            }
            walking = true;
            if at[c] + TAG_BYTES > items.len() {
                return None;
            }
            let bytes = step(
                steps,
                u16::from_le_bytes([items[at[c]], items[at[c] + 1]]),
                &mut found[c],
            );
            if bytes == 0 {
                return None;
            }
            at[c] += bytes;
        }
        if !walking {
            break;
        }
    }
    if at != end {
        return None;
    }
    let mut total = [0u64; EVENT_KIND_SLOTS as usize];
    for counts in &found {
        for (total, n) in total.iter_mut().zip(counts) {
            *total += n;
        }
    }
    total[0] = 0;
    Some(total)
}

/// The most bytes a chain's step moves on: a catalogue event's largest item.
const MAX_STEP: usize = if item::MAX_ITEM_BYTES > item::MARK_BYTES {
    item::MAX_ITEM_BYTES
} else {
    item::MARK_BYTES
};

// The rounds' reads without a test of where a chain is rely on no step
// moving further.
const _: () = {
    let mut tag = 0;
    while tag < item::STEP_BYTES.len() {
        assert!(item::STEP_BYTES[tag] as usize <= MAX_STEP);
        tag += 1;
    }
};

/// Bytes of the catalogue event or time mark `tag` begins, counted in
/// `found` by kind (a mark in slot 0), or 0 for any other item. By the
/// whole tag in one table ([`item::STEP_BYTES`]): a test and a branch per
/// kind of tag made each step ~20% slower (`examples/bench-walk.rs`).
#[inline(always)]
fn step(steps: &[u8; 1 << 16], tag: u16, found: &mut KindCounts) -> usize {
    // A catalogue tag the table knows has its kind id (< 16) in these
    // bits; a mark's are 0, the slot that stays 0.
    found[usize::from(tag >> 8) & 0x0f] += 1;
    usize::from(steps[usize::from(tag)])
}

/// The offset of what looks like the first time mark at or past `from`:
/// a mark's tag, then a clock whose high half is `high`.
fn mark_from(items: &[u8], from: usize, high: &Finder<'_>) -> Option<usize> {
    // A mark is its tag, the low half, the high half.
    const HIGH_AT: usize = TAG_BYTES + 4;
    let mut look = from + HIGH_AT;
    while let Some(found) = items.get(look..).and_then(|rest| high.find(rest)) {
        let mark = look + found - HIGH_AT;
        if items[mark..mark + TAG_BYTES] == TIME_TAG.to_le_bytes() {
            return Some(mark);
        }
        look += found + 1;
    }
    None
}

/// Asks the CPU for every cache line of `bytes` at once. A batch comes
/// from the ring, written on the emulator's CPU: from the shared cache or
/// memory, the chains' eight short streams were too short for the
/// hardware's prefetcher to follow, and their loads waited in turn (the
/// demo's capture: 2.9 ns an event from L3, 3.3 from memory; 1.8 either
/// way with this, as from L2).
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for line in bytes.chunks(64) {
        // SAFETY: a prefetch is a hint; the address is in `bytes`.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        };
    }
    // Elsewhere the walk goes without.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// Adds `n` events of spec id `spec_id` to `by_spec` (a batch, or a
/// session, has few probes: a look along the list).
pub fn add(by_spec: &mut Vec<(u32, u64)>, spec_id: u32, n: u64) {
    match by_spec.iter_mut().find(|(id, _)| *id == spec_id) {
        Some((_, count)) => *count += n,
        None => by_spec.push((spec_id, n)),
    }
}

/// Adds `n` items of what `item` is to `found`.
fn count(found: &mut KindCounts, item: Skimmed, n: u64) {
    match item {
        Skimmed::Event(kind) => found[kind as usize] += n,
        Skimmed::Mark => {}
        Skimmed::Declared { .. } => found[EventKind::Usdt as usize] += n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::test_items::{bad_tag, event, insn, mark, mem_read};
    use styx_common::batch::{BatchHead, BATCH_RECORD_KIND};
    use styx_common::RecordHeader;

    /// A batch record whose head claims `claimed` insn_exec events and one
    /// time mark, holding `items`.
    fn record(items: &[u8], claimed: u32) -> Vec<u8> {
        let mut head = BatchHead {
            len: items.len() as u32,
            ..BatchHead::default()
        };
        head.counts[0] = 1;
        head.counts[EventKind::InsnExec as usize] = claimed;
        let fixed = BatchRecord {
            header: RecordHeader {
                kind: BATCH_RECORD_KIND,
                ..RecordHeader::default()
            },
            head,
            start: 0,
            len: head.len,
        };
        let mut bytes = bytemuck::bytes_of(&fixed).to_vec();
        bytes.extend_from_slice(items);
        bytes
    }

    /// A record filled in part keeps its fixed part and items, not the
    /// rest of its ring space (another record's bytes).
    #[test]
    fn kept_ends_at_the_items() {
        let items = [mark(5), insn(0x1000)].concat();
        let whole = record(&items, 1);
        let mut reserved = whole.clone();
        reserved.extend_from_slice(&[0xaa; 1000]);
        assert_eq!(kept(&reserved), &whole[..]);
        assert_eq!(kept(&whole), &whole[..]);
        // Too short to say: as it is.
        assert_eq!(kept(&whole[..100]), &whole[..100]);
    }

    /// A full batch as styx-probe fills one: a mark every ~1 KiB at a
    /// clock like a machine up for hours, then the events `each` gives.
    fn filled(each: impl Fn(u64) -> Vec<u8>) -> Vec<u8> {
        const CLOCK: u64 = 36_000 * 1_000_000_000;
        let mut items = Vec::new();
        let mut since_mark = usize::MAX;
        for i in 0.. {
            let mut next = Vec::new();
            if since_mark > 1024 {
                next = mark(CLOCK + i * 20);
                since_mark = 0;
            }
            next.extend(each(i));
            if items.len() + next.len() > BATCH_BYTES {
                return items;
            }
            since_mark += next.len();
            items.extend(next);
        }
        unreachable!()
    }

    /// An emulator's stream: tags that change from item to item; with
    /// `fake`, every ~30th item holds what looks like a mark (two zero
    /// bytes, four more, the high half of the marks' clock) where none is.
    fn emulator(i: u64, fake: bool) -> Vec<u8> {
        let high = (36_000u64 * 1_000_000_000) >> 32;
        let w = |v: u64| (v, 2);
        match i % 3 {
            0 => event(EventKind::InsnExec, &[w(0x600 + i), (0xa9, 1), (2, 1)]),
            1 if fake && i % 10 == 1 => mem_read(0x600 + i, 0, high << 16, 8),
            1 => mem_read(0x600 + i, 0x10, i & 0xff, 1),
            _ => event(EventKind::RegRead, &[w(0x600 + i), (1, 1), (5, 1)]),
        }
    }

    /// Where each item of `items` starts.
    fn item_starts(items: &[u8]) -> Vec<usize> {
        let mut starts = vec![0];
        while let Ok((_, len)) = item::skim(&items[*starts.last().unwrap()..]) {
            starts.push(starts.last().unwrap() + len);
        }
        starts
    }

    /// The walk in chains counts what one walk counts, proves each piece
    /// by the one before (a value that looks like a mark is no piece's
    /// start), and leaves to the one walk what it cannot prove.
    #[test]
    fn walks_in_chains_count_what_one_walk_counts() {
        let none = &DeclaredTypes::new();
        let items = filled(|i| emulator(i, false));
        let chained = counts_in_chains(&items).expect("the chains walk it");
        let one = walk(&items, Codec::Current, none, 0, &mut Vec::new());
        assert_eq!(Some(chained), one);
        assert_eq!(chained[0], 0, "marks are no events");
        assert!(chained.iter().sum::<u64>() > 700);
        assert_eq!(counts(&record(&items, 0), Codec::Current, none), one);
        // Fake marks: a piece starting at one is not proved, and the one
        // walk counts.
        let faked = filled(|i| emulator(i, true));
        let high = &mark(36_000 * 1_000_000_000)[6..10];
        let looks = faked
            .windows(10)
            .filter(|w| w[..2] == [0, 0] && &w[6..] == high);
        assert!(looks.count() > 20, "the fakes look like marks");
        let one = walk(&faked, Codec::Current, none, 0, &mut Vec::new());
        assert!(one.is_some());
        let chained = counts_in_chains(&faked);
        assert!(chained.is_none() || chained == one);
        assert_eq!(counts(&record(&faked, 0), Codec::Current, none), one);
        // A bad item in any piece: not whole.
        let starts = item_starts(&items);
        assert_eq!(*starts.last().unwrap(), items.len());
        for at in [items.len() / 3, items.len() * 2 / 3, items.len() - 20] {
            let mut spoilt = items.clone();
            let item = *starts.iter().rev().find(|&&i| i <= at).unwrap();
            spoilt[item..item + 2].copy_from_slice(&bad_tag());
            assert_eq!(counts(&record(&spoilt, 0), Codec::Current, none), None);
        }
        // Cut in its last item: not whole.
        assert_eq!(
            counts(&record(&items[..items.len() - 1], 0), Codec::Current, none),
            None
        );
        // Batches of every size, cut at items: pieces empty, short, of
        // unequal lengths, walked in rounds and one by one.
        for &end in starts.iter().step_by(7) {
            let part = &items[..end];
            let one = walk(part, Codec::Current, none, 0, &mut Vec::new());
            assert_eq!(one.map(|c| c.iter().sum::<u64>() > 0), Some(end > 10));
            let chained = counts_in_chains(part);
            assert!(chained.is_none() || chained == one, "{end} bytes");
            if end > items.len() / 2 {
                assert!(chained.is_some(), "{end} bytes walked in chains");
            }
        }
        // One tag repeated, and a batch that starts with no mark: one walk.
        let tight = filled(|i| insn(0x400 + i));
        assert_eq!(counts_in_chains(&tight), None);
        assert!(counts(&record(&tight, 0), Codec::Current, none).is_some());
        assert_eq!(counts_in_chains(&items[10..]), None);
    }

    #[test]
    fn whole_batches_are_counted_from_their_items_not_their_head() {
        let items = [mark(1000), insn(0x400), mem_read(1, 2, 3, 4), insn(0x404)].concat();
        // The head says one insn_exec: the items hold two and a mem_read.
        let found = counts(&record(&items, 1), Codec::Current, &DeclaredTypes::new()).unwrap();
        assert_eq!(found[EventKind::InsnExec as usize], 2);
        assert_eq!(found[EventKind::MemRead as usize], 1);
        assert_eq!(found.iter().sum::<u64>(), 3);
    }

    /// The forged batch of issue 25: a mark and then an item no batch holds.
    /// Runs of one tag are counted as they end, a run cut short by the
    /// batch's end is no run.
    #[test]
    fn runs_of_a_tag_count_each_item() {
        let items = [
            mark(1000),
            insn(0x400),
            insn(0x404),
            insn(0x408),
            mem_read(1, 2, 3, 4),
            insn(0x40c),
            insn(0x410),
            mark(2000),
            insn(0x414),
        ]
        .concat();
        let found = counts(&record(&items, 9), Codec::Current, &DeclaredTypes::new()).unwrap();
        assert_eq!(found[EventKind::InsnExec as usize], 6);
        assert_eq!(found[EventKind::MemRead as usize], 1);
        assert_eq!(found.iter().sum::<u64>(), 7);
        let last = insn(0x404);
        for run in 1..4 {
            let mut cut = mark(1000);
            for _ in 0..run {
                cut.extend(insn(0x400));
            }
            cut.extend_from_slice(&last[..last.len() - 1]);
            assert_eq!(
                counts(
                    &record(&cut, run + 1),
                    Codec::Current,
                    &DeclaredTypes::new()
                ),
                None,
                "{run} whole before the cut one"
            );
        }
        // Tags that change from item to item, as an emulator's stream.
        let mixed: Vec<u8> = (0..50)
            .flat_map(|i| [insn(i), mem_read(i, 2, 3, 4), mem_read(i, 3, 3, 4)].concat())
            .collect();
        let found = counts(&record(&mixed, 0), Codec::Current, &DeclaredTypes::new()).unwrap();
        assert_eq!(found[EventKind::InsnExec as usize], 50);
        assert_eq!(found[EventKind::MemRead as usize], 100);
        assert_eq!(found.iter().sum::<u64>(), 150);
    }

    /// Runs long enough to be checked four items at a time: each item
    /// counted, of any length, up to one that differs (another tag; for a
    /// declared type, another length byte: a batch no reader takes).
    #[test]
    fn long_runs_count_each_item_up_to_one_that_differs() {
        use crate::record::batch::Declared;
        use styx_common::item::{write_declared, MAX_DECLARED_ITEM_BYTES};
        for run in [4, 5, 7, 8, 37] {
            let mut items = mark(1000);
            (0..run).for_each(|i| items.extend(insn(i)));
            items.extend(mem_read(1, 2, 3, 4));
            (0..run).for_each(|i| items.extend(mem_read(i, 2, 3, 4)));
            let found = counts(&record(&items, 0), Codec::Current, &DeclaredTypes::new());
            let found = found.unwrap();
            assert_eq!(found[EventKind::InsnExec as usize], run, "{run}");
            assert_eq!(found[EventKind::MemRead as usize], run + 1, "{run}");
        }
        let declared = |values: &[u64], widths: &[usize]| {
            let mut item = [0u8; MAX_DECLARED_ITEM_BYTES];
            let len = write_declared(0x7ffe, values, widths, &mut item);
            item[..len].to_vec()
        };
        let types: DeclaredTypes = [(
            (0u8, 0x7ffe),
            Declared {
                spec_id: 3,
                fields: vec![(2, false), (1, true)],
            },
        )]
        .into();
        let mut items = mark(1000);
        (0..9).for_each(|i| items.extend(declared(&[i, 9], &[2, 1])));
        let found = counts(&record(&items, 0), Codec::Current, &types).unwrap();
        assert_eq!(found[EventKind::Usdt as usize], 9);
        // The sixth with another length: not whole.
        let mut items = mark(1000);
        (0..5).for_each(|i| items.extend(declared(&[i, 9], &[2, 1])));
        items.extend(declared(&[5, 9], &[2, 2]));
        (0..3).for_each(|i| items.extend(declared(&[i, 9], &[2, 1])));
        assert_eq!(counts(&record(&items, 0), Codec::Current, &types), None);
    }

    #[test]
    fn a_batch_with_a_bad_item_is_not_whole_whatever_its_head_says() {
        let forged = [mark(1000), 0xffffu16.to_le_bytes().to_vec()].concat();
        assert_eq!(
            counts(&record(&forged, 1), Codec::Current, &DeclaredTypes::new()),
            None
        );
        // Text shapes are never items.
        let marker = [mark(1000), bad_tag()].concat();
        assert_eq!(
            counts(&record(&marker, 1), Codec::Current, &DeclaredTypes::new()),
            None
        );
        // Cut inside an item, or shorter than its length says.
        let mut cut = record(&[mark(1000), insn(0x400)].concat(), 1);
        let at = cut.len() - 8;
        cut.truncate(at);
        assert_eq!(counts(&cut, Codec::Current, &DeclaredTypes::new()), None);
        let short = &record(&insn(0x400)[..12], 1);
        assert_eq!(counts(short, Codec::Current, &DeclaredTypes::new()), None);
        assert_eq!(
            counts(&[0u8; 20], Codec::Current, &DeclaredTypes::new()),
            None
        );
    }

    /// A declared type's item is whole only when the session knows its
    /// tag in the batch's file, with that length: else the batch is split,
    /// which says so (a capture could not read it back).
    #[test]
    fn declared_items_count_only_when_the_session_knows_them() {
        use crate::record::batch::Declared;
        use styx_common::item::{write_declared, MAX_DECLARED_ITEM_BYTES};
        let mut item = [0u8; MAX_DECLARED_ITEM_BYTES];
        let len = write_declared(0x7ffe, &[7, 9], &[2, 1], &mut item);
        let batch = record(&[mark(1000), item[..len].to_vec()].concat(), 0);
        let known = |bytes: Vec<(u8, bool)>| -> DeclaredTypes {
            [(
                (0u8, 0x7ffe),
                Declared {
                    spec_id: 3,
                    fields: bytes,
                },
            )]
            .into()
        };
        let found = counts(&batch, Codec::Current, &known(vec![(2, false), (1, true)])).unwrap();
        assert_eq!(found[EventKind::Usdt as usize], 1);
        assert_eq!(counts(&batch, Codec::Current, &DeclaredTypes::new()), None);
        assert_eq!(
            counts(&batch, Codec::Current, &known(vec![(4, false)])),
            None
        );
        // Per type: its spec id's events, added to what was there; nothing
        // for a batch that is not whole.
        let twice = record(&[item[..len].to_vec(), item[..len].to_vec()].concat(), 0);
        let mut by_spec = vec![(9, 5), (3, 1)];
        let types = known(vec![(2, false), (1, true)]);
        counts_by_type(&twice, Codec::Current, &types, &mut by_spec).unwrap();
        assert_eq!(by_spec, [(9, 5), (3, 3)]);
        let unknown = DeclaredTypes::new();
        assert_eq!(
            counts_by_type(&twice, Codec::Current, &unknown, &mut by_spec),
            None
        );
        assert_eq!(by_spec, [(9, 5), (3, 3)]);
    }
}
