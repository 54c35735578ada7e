//! Batch items, records, heads and registry slots as a hostile process (or
//! a capture's author) makes them: the input walked as items of both item
//! layouts (`styx_common::item`), then a run of records split, taken whole
//! and counted by one splitter of each layout, then the input as a
//! process's memory whose batch registry the partial reader walks, its
//! records split in turn. Each record is also delta coded as a capture's
//! worker codes it (`BatchDeltas`) and must decode to itself. Any input
//! gives events, a counted irregularity or an error: no panic, no hang,
//! no unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io;
use styx_common::item::{Codec, Item};
use styx_events::batch_items;
use styx_events::partial::{self, Memory};
use styx_events::{BatchDeltas, Batches, Declared, DeclaredTypes};

/// Where the input is mapped; the registry's first block starts there.
const BASE: u64 = 0x1000_0000;
/// Bytes past the input that read as zeros (so that a short input can
/// describe a registry block); beyond, reads fail as unmapped memory does.
const ZEROS: u64 = 64 << 10;

/// The input as a process's memory.
struct Fake<'a> {
    bytes: &'a [u8],
    written: Vec<(u64, Vec<u8>)>,
}

impl Memory for Fake<'_> {
    fn read(&mut self, at: u64, buf: &mut [u8]) -> io::Result<()> {
        let fault = || io::Error::from_raw_os_error(14);
        let from = at.checked_sub(BASE).ok_or_else(fault)?;
        let to = from.checked_add(buf.len() as u64).ok_or_else(fault)?;
        if to > self.bytes.len() as u64 + ZEROS {
            return Err(fault());
        }
        buf.fill(0);
        let have = &self.bytes[(from as usize).min(self.bytes.len())..];
        let n = have.len().min(buf.len());
        buf[..n].copy_from_slice(&have[..n]);
        Ok(())
    }
    fn write(&mut self, at: u64, bytes: &[u8]) -> io::Result<()> {
        // Kept apart: the walk must not depend on reading its own marks.
        if self.written.len() < 1 << 16 {
            self.written.push((at, bytes.to_vec()));
        }
        Ok(())
    }
}

/// Declared types the splitter knows, so that items of them are decoded:
/// tags 1 to 3 of file 0, of one, three and eight fields, signed and not.
fn declared() -> DeclaredTypes {
    let fields = |f: &[(u8, bool)]| f.to_vec();
    [
        ((0, 1), fields(&[(8, false)])),
        ((0, 2), fields(&[(2, false), (1, true), (4, false)])),
        (
            (0, 3),
            fields(&[
                (1, true),
                (2, true),
                (4, true),
                (8, true),
                (1, false),
                (2, false),
                (4, false),
                (8, false),
            ]),
        ),
    ]
    .into_iter()
    .map(|(key, fields)| {
        (
            key,
            Declared {
                spec_id: key.1 as u32,
                fields,
            },
        )
    })
    .collect()
}

/// Walks `data` as items until one does not read; every item read stays
/// within what it was given and moves the walk on.
fn walk_items(data: &[u8], codec: Codec) {
    let mut at = 0;
    while let Ok((item, len)) = codec.read(&data[at..]) {
        assert!(len > 0 && at + len <= data.len());
        if let Item::Event { kind, .. } = item {
            assert!(matches!(
                kind.shape(),
                styx_common::Shape::Args(_) | styx_common::Shape::ArgsAux(_)
            ));
        }
        at += len;
    }
}

/// `record` as a capture block's BATCH record, delta coded if it is of
/// one type: what is coded decodes to the record; decoding the record as
/// it is (as if coded) stays within it.
fn code_and_decode(record: &[u8], deltas: &mut BatchDeltas) {
    let payload = BatchDeltas::entry(record);
    let at = payload.len() - record.len();
    if let Some(coded) = deltas.code(&payload, &[0]).map(<[u8]>::to_vec) {
        assert_eq!(coded.len(), payload.len());
        assert_eq!(coded[0], 0x30);
        assert_eq!(deltas.decode(&coded[at..]), Ok(record));
    }
    let _ = deltas.decode(record);
}

fuzz_target!(|data: &[u8]| {
    let mut deltas = BatchDeltas::default();
    for codec in [Codec::Current, Codec::V1] {
        walk_items(data, codec);
        // Records, each preceded by its length (u16 LE), as they would
        // come off the ring one after another (or out of a capture).
        let mut batches = Batches::with(codec, declared());
        let mut rest = data;
        while let [a, b, tail @ ..] = rest {
            let len = (u16::from_le_bytes([*a, *b]) as usize).min(tail.len());
            let (record, after) = tail.split_at(len);
            rest = after;
            let _ = batch_items::counts(record, codec, &declared());
            if codec == Codec::Current {
                code_and_decode(record, &mut deltas);
            }
            let mut counts = [0u64; 16];
            if batches.take_whole(record, &mut counts, &mut Vec::new()).is_none() {
                let _ = batches.split(record, |_| Ok::<(), ()>(()));
            }
        }
        let _ = batches.irregular();
    }

    let mut memory = Fake {
        bytes: data,
        written: Vec::new(),
    };
    let mut taken = Batches::new();
    let _ = partial::take(&mut memory, BASE, (1, 0), 0, |record| {
        let _ = taken.split(record, |_| Ok::<(), ()>(()));
    });
});
