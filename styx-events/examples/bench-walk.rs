//! The loader's walk of a whole batch's items (`batch_items::counts`: the
//! check and count every batch a raw capture or the flight recorder keeps
//! whole goes through), timed on full batches (`BATCH_BYTES`): an emulator's stream,
//! whose tags change from item to item (the demo's instruction, register
//! and memory events, 16-bit values), a tight loop's single `mem_read` tag
//! with u64 values, the 16-bit `mem_read`, and the same as a declared type
//! of those widths. Prints ns per event, the best of 5 passes:
//!
//! ```text
//! cargo run --release -p styx-events --example bench-walk
//! ```

use std::time::Instant;
use styx_common::batch::{BatchRecord, BATCH_BYTES, BATCH_RECORD_KIND};
use styx_common::item::{
    write_declared, write_event, write_mark, Codec, MAX_DECLARED_ITEM_BYTES, MAX_ITEM_BYTES,
};
use styx_common::{EventKind, RecordHeader};
use styx_events::{batch_items, Declared, DeclaredTypes};

/// An item: a catalogue event's kind and its values with their widths, or
/// the declared type's.
#[derive(Clone, Copy)]
enum Fired {
    Catalogue(EventKind, &'static [(u64, usize)]),
    Declared,
}

/// The declared type's tag in its file (file 0), and its widths.
const DECLARED_TAG: u16 = 0x10;
const DECLARED_WIDTHS: [usize; 3] = [2, 2, 1];

/// A full batch record of `pattern` repeated, a time mark every ~1 KiB as
/// styx-probe writes them.
fn batch(pattern: &[Fired]) -> Vec<u8> {
    let mut items = Vec::new();
    let mut item = [0u8; MAX_ITEM_BYTES];
    let mut declared = [0u8; MAX_DECLARED_ITEM_BYTES];
    let mut since_mark = usize::MAX;
    for i in 0.. {
        if since_mark > 1024 {
            // A clock like a machine up for ten hours: the walk finds marks by it.
            let n = write_mark(36_000_000_000_000 + i as u64 * 20, &mut item);
            items.extend_from_slice(&item[..n]);
            since_mark = 0;
        }
        let bytes = match pattern[i % pattern.len()] {
            Fired::Catalogue(kind, values) => {
                let n = write_event(kind, values, &mut item);
                &item[..n]
            }
            Fired::Declared => {
                let values = [0x600, 0x601, 7];
                let n = write_declared(DECLARED_TAG, &values, &DECLARED_WIDTHS, &mut declared);
                &declared[..n]
            }
        };
        if items.len() + bytes.len() > BATCH_BYTES {
            break;
        }
        items.extend_from_slice(bytes);
        since_mark += bytes.len();
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
    use EventKind::{InsnExec, MemRead, MemWrite, RegRead, RegWrite};
    use Fired::Catalogue;
    let emulator = [
        Catalogue(RegRead, &[(0x600, 2), (1, 1), (5, 1)]),
        Catalogue(MemRead, &[(0x600, 2), (0x601, 2), (7, 1), (1, 1)]),
        Catalogue(InsnExec, &[(0x600, 2), (0xa9, 1), (2, 1)]),
        Catalogue(RegWrite, &[(0x600, 2), (1, 1), (7, 1), (5, 1)]),
        Catalogue(MemRead, &[(0x602, 2), (0x603, 2), (7, 1), (1, 1)]),
        Catalogue(MemWrite, &[(0x602, 2), (0x10, 2), (7, 1), (1, 1)]),
        Catalogue(InsnExec, &[(0x602, 2), (0x85, 1), (2, 1)]),
    ];
    let tight = [Catalogue(
        MemRead,
        &[(0x600, 8), (0x601, 8), (7, 1), (1, 1)],
    )];
    let narrow = [Catalogue(
        MemRead,
        &[(0x600, 2), (0x601, 2), (7, 1), (1, 1)],
    )];
    let declared: DeclaredTypes = [(
        (0, DECLARED_TAG),
        Declared {
            spec_id: 1,
            fields: DECLARED_WIDTHS.map(|w| (w as u8, false)).to_vec(),
        },
    )]
    .into();
    let streams: [(&str, &[Fired]); 4] = [
        ("emulator's stream", &emulator),
        ("tight loop", &tight),
        ("16-bit mem_read", &narrow),
        ("declared, same widths", &[Fired::Declared]),
    ];
    let counted = |record: &[u8]| batch_items::counts(record, Codec::Current, &declared);
    for (name, pattern) in streams {
        let record = batch(pattern);
        let events: u64 = counted(&record).expect("a whole batch").iter().sum();
        let best = best_of_5(20_000 * events, || {
            for _ in 0..20_000 {
                std::hint::black_box(counted(std::hint::black_box(&record)));
            }
        });
        println!("{name}: {events} events a batch, {best:.2} ns an event");
    }
    // The loader meets each batch once, fresh from the ring (written by
    // the emulator's CPU): the same walk over copies far past the caches.
    let record = batch(&emulator);
    let events: u64 = counted(&record).expect("a whole batch").iter().sum();
    let copies = (256 << 20) / record.len();
    let spread: Vec<u8> = record.repeat(copies);
    let best = best_of_5(copies as u64 * events, || {
        for copy in spread.chunks_exact(record.len()) {
            std::hint::black_box(counted(std::hint::black_box(copy)));
        }
    });
    println!("emulator's stream, each batch once (not cached): {best:.2} ns an event");
}

/// The fewest ns an event of 5 passes of `pass`, which walks `events`.
fn best_of_5(events: u64, mut pass: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let started = Instant::now();
            pass();
            started.elapsed().as_secs_f64() * 1e9 / events as f64
        })
        .fold(f64::MAX, f64::min)
}
