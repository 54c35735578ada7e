//! A raw capture read back through every output format, as `styx-loader
//! read` does (traced functions' calls paired in front, as there). Any input gives events or an error: no panic, no hang, no
//! unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io;
use styx_events::calls::CallTracker;
use styx_events::capture::Reader;
use styx_events::formats::{self, Detail, Format, Options};
use styx_events::writer::{EventWriter, Totals};

// Tenet last: without register names in the header it refuses to open.
const FORMATS: [Format; 9] = [
    Format::Jsonl,
    Format::Folded,
    Format::Text,
    Format::Raw,
    Format::Chrome,
    Format::Perfetto,
    Format::Drcov,
    Format::Parquet,
    Format::Tenet,
];

fuzz_target!(|data: &[u8]| {
    for (i, format) in FORMATS.into_iter().enumerate() {
        let Ok(mut reader) = Reader::open(data) else {
            return;
        };
        let options = Options {
            gzip: i % 2 == 0 && format == Format::Perfetto,
            detail: Detail::Full,
            ..Options::default()
        };
        let Ok(writer) = formats::open(format, Box::new(io::sink()), &reader.header, &options)
        else {
            return;
        };
        let mut writer = CallTracker::new(
            writer,
            reader.header.functions.len(),
            reader.header.uretprobe_exits,
        );
        let table = writer.table();
        let mut counts = [0u64; 16];
        while let Ok(Some(event)) = reader.next() {
            counts[event.kind as usize] += 1;
            let _ = writer.event(&event);
        }
        let _ = writer.finish(&Totals {
            events: &counts,
            drops: &[0; 16],
        });
        let _ = table
            .borrow()
            .write(&reader.header.functions, &mut io::sink());
    }
});
