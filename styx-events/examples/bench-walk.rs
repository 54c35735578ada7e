//! The loader's walk of a whole batch's items (`batch_items::counts`: the
//! check and count every batch a raw capture or the flight recorder keeps
//! whole goes through), timed on two 16 KiB batches: an emulator's stream,
//! whose tags change from item to item (the demo's instruction, register
//! and memory events, 16-bit values), and a tight loop's single `mem_read`
//! tag with u64 values. Prints ns per event, the best of 5 passes:
//!
//! ```text
//! cargo run --release -p styx-events --example bench-walk
//! ```

use std::time::Instant;
use styx_common::batch::{BatchRecord, BATCH_BYTES, BATCH_RECORD_KIND};
use styx_common::item::{write_event, write_mark, Codec, MAX_ITEM_BYTES};
use styx_common::{EventKind, RecordHeader};
use styx_events::{batch_items, DeclaredTypes};

/// An event's kind and its values with their widths.
type Fired = (EventKind, &'static [(u64, usize)]);

/// A full batch record of `pattern` repeated, a time mark every ~1 KiB as
/// styx-probe writes them.
fn batch(pattern: &[Fired]) -> Vec<u8> {
    let mut items = Vec::new();
    let mut item = [0u8; MAX_ITEM_BYTES];
    let mut since_mark = usize::MAX;
    for i in 0.. {
        if since_mark > 1024 {
            let n = write_mark(i as u64, &mut item);
            items.extend_from_slice(&item[..n]);
            since_mark = 0;
        }
        let (kind, values) = pattern[i % pattern.len()];
        let n = write_event(kind, values, &mut item);
        if items.len() + n > BATCH_BYTES {
            break;
        }
        items.extend_from_slice(&item[..n]);
        since_mark += n;
    }
    let fixed = BatchRecord {
        header: RecordHeader {
            kind: BATCH_RECORD_KIND,
            ..RecordHeader::default()
        },
        len: items.len() as u32,
        ..BatchRecord::default()
    };
    [bytemuck::bytes_of(&fixed), &items].concat()
}

fn main() {
    let emulator: &[Fired] = &[
        (EventKind::RegRead, &[(0x600, 2), (1, 1), (5, 1)]),
        (
            EventKind::MemRead,
            &[(0x600, 2), (0x601, 2), (7, 1), (1, 1)],
        ),
        (EventKind::InsnExec, &[(0x600, 2), (0xa9, 1), (2, 1)]),
        (EventKind::RegWrite, &[(0x600, 2), (1, 1), (7, 1), (5, 1)]),
        (
            EventKind::MemRead,
            &[(0x602, 2), (0x603, 2), (7, 1), (1, 1)],
        ),
        (
            EventKind::MemWrite,
            &[(0x602, 2), (0x10, 2), (7, 1), (1, 1)],
        ),
        (EventKind::InsnExec, &[(0x602, 2), (0x85, 1), (2, 1)]),
    ];
    let tight: &[Fired] = &[(
        EventKind::MemRead,
        &[(0x600, 8), (0x601, 8), (7, 1), (1, 1)],
    )];
    let declared = DeclaredTypes::new();
    for (name, pattern) in [("emulator's stream", emulator), ("tight loop", tight)] {
        let record = batch(pattern);
        let counted = |record: &[u8]| batch_items::counts(record, Codec::Current, &declared);
        let events: u64 = counted(&record).expect("a whole batch").iter().sum();
        let passes = 20_000;
        let mut best = f64::MAX;
        for _ in 0..5 {
            let started = Instant::now();
            for _ in 0..passes {
                std::hint::black_box(counted(std::hint::black_box(&record)));
            }
            let ns = started.elapsed().as_secs_f64() * 1e9;
            best = best.min(ns / (passes as f64 * events as f64));
        }
        println!("{name}: {events} events a batch, {best:.2} ns an event");
    }
}
