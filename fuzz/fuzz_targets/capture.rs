//! Captures and batch records from anyone. The input is read twice:
//! - as a raw capture, through every output format, as `styx-loader read`
//!   does (traced functions' calls paired in front, as there): any input
//!   gives events or an error, no panic, no hang, no unbounded allocation;
//!   a capture of blocks (versions 3 and 4) also read in parallel as JSON lines,
//!   text and Parquet, which must give the serial bytes, error or not;
//! - as ring records (a u16 length, then the record, each taken as a batch
//!   record whatever its kind byte says), handed over as the loader's
//!   drain does (whole when every item parses, else split) to a raw
//!   capture and to flight recorders, whose captures and dumps must then
//!   read back whole: every event counted, nothing malformed stored.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;
use std::io::{self, Write};
use std::rc::Rc;
use std::sync::OnceLock;
use styx_common::batch::BATCH_RECORD_KIND;
use styx_common::{EventKind, EVENT_KIND_SLOTS};
use styx_events::Batches;
use styx_events::CallTracker;
use styx_events::Filters;
use styx_events::Header;
use styx_events::{read_blocks, CaptureWriter, Compression, Cut, Ending, Reader};
use styx_events::{Detail, Format, Options};
use styx_events::{EventWriter, Totals};
use styx_events::{FlightRecorder, Limits, OpenDump};

const SLOTS: usize = EVENT_KIND_SLOTS as usize;

fuzz_target!(|data: &[u8]| {
    through_every_format(data);
    in_parallel_as_in_a_row(data);
    batch_records_kept_whole(data);
});

/// JSON lines, text and Parquet of the capture in `data` on one thread
/// and on two: the same bytes, the same count, the same error or none.
/// (Parquet's writer encodes on a thread of its own in both, as `read
/// --threads 2` has it: a read that fails does not wait for the row
/// groups being encoded.)
fn in_parallel_as_in_a_row(data: &[u8]) {
    for format in [Format::Jsonl, Format::Text, Format::Parquet] {
        let Ok(mut serial) = Reader::open(data) else {
            return;
        };
        if !serial.reads_blocks() {
            return;
        }
        let options = Options {
            threads: 2,
            ..Options::default()
        };
        let header = serial.header.clone();
        let open = |out: Shared| {
            styx_events::open_stream(format, Box::new(out), &header, &options).unwrap()
        };
        let one = Shared::default();
        let mut writer = open(one.clone());
        let serial_error = loop {
            match serial.next() {
                Ok(Some(event)) => writer.event(&event).unwrap(),
                Ok(None) => break None,
                Err(e) => break Some(e.to_string()),
            }
        };
        end(&mut *writer, serial_error.is_none(), serial.events);
        let mut parallel = Reader::open(data).unwrap();
        let two = Shared::default();
        let mut writer = open(two.clone());
        let make = || {
            styx_events::open_block_formatter(format, &header, &options)
                .ok_or_else(|| io::Error::other("not formatted apart"))
        };
        let mut cut = Cut::default();
        let parallel_error = read_blocks(&mut parallel, 2, &mut cut, &make, &mut *writer)
            .err()
            .map(|e| e.to_string());
        end(&mut *writer, parallel_error.is_none(), parallel.events);
        assert_eq!(serial_error, parallel_error);
        assert!(*one.0.borrow() == *two.0.borrow(), "parallel bytes differ");
        assert_eq!(serial.events, parallel.events);
        assert_eq!(serial.ending, parallel.ending);
        assert_eq!(serial.malformed_batches, parallel.malformed_batches);
    }
}

/// Ends a read's output as `read` does: finished when the capture was
/// read to its end, else flushed.
fn end(writer: &mut dyn EventWriter, read_whole: bool, events: u64) {
    let mut counts = [0u64; SLOTS];
    counts[0] = events;
    match read_whole {
        true => writer.finish(&Totals {
            events: &counts,
            drops: &[0; SLOTS],
        }),
        false => writer.flush(),
    }
    .unwrap();
}

fn through_every_format(data: &[u8]) {
    for format in Format::ALL {
        let Ok(mut reader) = Reader::open(data) else {
            return;
        };
        let options = Options {
            detail: Detail::Full,
            ..Options::default()
        };
        // Tenet refuses a header without register names; the others go on.
        let Ok(writer) =
            styx_events::open_stream(format, Box::new(io::sink()), &reader.header, &options)
        else {
            continue;
        };
        let mut writer = CallTracker::new(
            writer,
            reader.header.functions.len(),
            reader.header.uretprobe_exits,
        );
        let table = writer.table();
        let mut counts = [0u64; SLOTS];
        while let Ok(Some(event)) = reader.next() {
            counts[event.kind as usize] += 1;
            let _ = writer.event(&event);
        }
        let _ = writer.finish(&Totals {
            events: &counts,
            drops: &[0; SLOTS],
        });
        let _ = table
            .borrow()
            .write(&reader.header.functions, &mut io::sink());
    }
}

/// Bytes written to a shared buffer (a dump's capture).
#[derive(Clone, Default)]
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn header() -> &'static Header {
    static HEADER: OnceLock<Header> = OnceLock::new();
    HEADER.get_or_init(|| Header::now(1, "/fuzz", Vec::new()))
}

/// A recorder whose dumps are captures, each kept to be read back.
fn recorder(trigger: Option<Filters>) -> (FlightRecorder, Rc<RefCell<Vec<Shared>>>) {
    let dumps: Rc<RefCell<Vec<Shared>>> = Rc::default();
    let kept = dumps.clone();
    let open: OpenDump = Box::new(move |n| {
        let out = Shared::default();
        kept.borrow_mut().push(out.clone());
        let writer = CaptureWriter::new(out, header(), Compression::None)?;
        Ok((
            Box::new(writer) as Box<dyn EventWriter>,
            format!("dump {n}"),
        ))
    });
    let limits = Limits {
        per_thread: 64,
        memory: 1 << 20,
        trigger_dumps: 3,
        trigger_holdoff_ns: 0,
    };
    (FlightRecorder::new(limits, trigger, open), dumps)
}

/// Reads a capture to its end: it must be whole, hold `events` events and
/// no malformed batch.
fn reads_back(bytes: &[u8], events: u64) {
    let mut reader = Reader::open(bytes).expect("a capture written here opens");
    while let Some(_event) = reader.next().expect("a capture written here reads") {}
    assert_eq!(reader.malformed_batches, 0, "a malformed batch was stored");
    assert_eq!(reader.events, events);
    let Ending::Complete { events: said, .. } = reader.ending else {
        panic!("not complete: {:?}", reader.ending)
    };
    assert_eq!(said, events);
}

fn batch_records_kept_whole(data: &[u8]) {
    let mut records = Vec::new();
    let mut rest = data;
    while let [lo, hi, tail @ ..] = rest {
        let len = usize::from(u16::from_le_bytes([*lo, *hi])).min(tail.len());
        let mut record = tail[..len].to_vec();
        if let Some(kind) = record.get_mut(16) {
            *kind = BATCH_RECORD_KIND;
        }
        records.push(record);
        rest = &tail[len..];
    }
    if records.is_empty() {
        return;
    }
    let mut capture = CaptureWriter::new(Vec::new(), header(), Compression::Zstd).unwrap();
    let (mut whole, whole_dumps) = recorder(None);
    let trigger = Filters::compile(&["insn_exec: pc < 0x1000".into()], 1, EventKind::ALL).unwrap();
    let (mut split, split_dumps) = recorder(Some(trigger));
    assert!(whole.takes_batches() && !split.takes_batches());
    let (mut batches, mut split_batches) = (Batches::new(), Batches::new());
    let mut counts = [0u64; SLOTS];
    for record in &records {
        // As the loader's drain: whole only when every item parses.
        let mut found = [0u64; SLOTS];
        if let Some(events) = batches.take_whole(record, &mut found, &mut Vec::new()) {
            assert_eq!(events, found.iter().sum::<u64>());
            for (count, n) in counts.iter_mut().zip(found) {
                *count += n;
            }
            capture.batch(record, events).unwrap();
            whole.batch(record, events).unwrap();
        } else {
            let _ = batches.split(record, |event| {
                counts[event.kind as usize] += 1;
                capture.event(event)?;
                whole.event(event)
            });
        }
        let _ = split_batches.split(record, |event| split.event(event));
    }
    capture
        .finish(&Totals {
            events: &counts,
            drops: &[0; SLOTS],
        })
        .unwrap();
    reads_back(&capture.into_inner(), counts.iter().sum());
    whole.dump("fuzz", None);
    split.dump("fuzz", None);
    for (recorder, dumps) in [(&whole, whole_dumps), (&split, split_dumps)] {
        assert!(recorder.memory() <= 1 << 20);
        for (made, bytes) in recorder.made.iter().zip(dumps.borrow().iter()) {
            let made = made.as_ref().expect("a dump into memory");
            reads_back(&bytes.0.borrow(), made.events);
        }
    }
}
