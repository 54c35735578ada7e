//! How a raw capture's blocks are best stored (issue 28): zstd of the
//! payload as the workers do today (level 1), against transforms of the
//! payload's batch items then a general compressor:
//!
//! - lz4 at an acceleration (1 is what the workers use).
//! - columns (`columns.rs`): the items' tags in one stream, their values in
//!   one stream per (event kind, value index), each a zigzag varint of its
//!   difference from the stream's previous value; time marks as deltas;
//!   batch headers in a stream of their own; every other byte as it is.
//! - fixed columns: the same, each delta in its value's own width.
//! - deltas (`deltas.rs`): the payload's own layout, each value replaced
//!   in place by its delta in its own width.
//! - items skimmed: the batches' items walked with `item::skim` as the
//!   loader checks them, nothing stored: the least any such transform costs.
//! - items counted: the loader's own check and count of a batch it keeps
//!   whole (`batch_items::counts_by_type`), nothing stored.
//!
//! Reads a capture's blocks (version 3 on; `[BLOCKS]`: the first so many),
//! decompresses them, and times each way on one thread, best of 5 passes:
//! encoding (transform, then compression) and decoding, per event, checking
//! that every block comes back byte for byte; `[WAY]` keeps only the ways
//! whose names hold it. Every transform is total: a batch whose items do not
//! read makes `encode` say so (the block would then be stored as today).
//!
//! ```text
//! cargo run --release -p styx-events --example bench-blocks -- CAPTURE [BLOCKS [WAY]]
//! ```
//!
//! On the 2-CPU machine of issue 28 (another job running), the demo's
//! capture (`styx-loader -o raw --output X -- styx-demo --quiet --repeat
//! 100`, its first 120 blocks: 15.4 M events, 8.24 payload bytes an event)
//! and styx-rv's (`-- styx-rv --quiet --repeat 30`: 11.5 M events, 64-bit
//! values, 13.5 bytes an event), bytes stored and ns an event (the
//! "alone" rows include a copy of their output, as kept to decode):
//!
//! ```text
//!                          demo                      styx-rv
//! way                      bytes  encode  decode     bytes  encode  decode
//! zstd 1 (today)           0.503    5.72    2.71     0.896    8.56    3.80
//! zstd -1                  0.571    5.14    2.55     1.034    7.18    3.42
//! zstd -5                  1.027    4.91    2.48     1.756    6.02    3.03
//! snappy                   1.371    4.70    2.43     2.275    6.12    2.52
//! columns alone            7.398    9.30   14.96     9.052   13.26   16.25
//! columns + zstd 1         0.721   15.12   16.90     0.545   15.08   17.58
//! columns + zstd -1        0.825   14.23   16.72     0.646   14.64   17.09
//! columns + zstd -5        1.014   13.87   16.67     0.832   14.01   17.00
//! columns + snappy         1.271   12.60   16.35     1.199   13.39   16.32
//! items skimmed                -    3.35       -         -    3.36       -
//! deltas alone             8.240    7.99    7.98    13.500    7.60    6.90
//! deltas + zstd 1          0.708   13.83   10.84     0.820   14.22    9.52
//! deltas + zstd -1         0.746   13.56   10.11     0.916   13.11    9.11
//! fixed columns + zstd 1   0.715   15.97   29.81     0.536   14.93   30.82
//! ```
//!
//! So the columns are not adopted as a block codec:
//!
//! - On the demo every transform stores more bytes (0.71–0.72 against
//!   0.50 at zstd 1): its four programs repeat, and zstd finds the raw
//!   items' long repeats better than the deltas'. Nor does zstd work less:
//!   it takes ~5.5–6 ns an event of the transformed bytes, as of the raw
//!   ones, so no transform, however cheap, gives the 25% less CPU sought.
//! - On styx-rv the columns store 40% fewer bytes (0.545 against 0.896),
//!   and zstd takes only ~2–5 ns an event of them, but the transform itself
//!   takes ~9–13 ns: walking the items and touching each value (deltas
//!   alone, no streams: ~7.6 ns) costs as much as zstd of the whole payload,
//!   and the bare walk (items skimmed) 3.4 ns. It would pay only at under
//!   ~5 ns an event, little more than the walk.
//!
//! lz4 (the workers' second codec, C liblz4) at its accelerations, later on
//! the same machine (the demo's capture, 94 blocks, 14.3 M events, 7.07
//! payload bytes an event; zstd 1 there 0.472 bytes at 5.33 ns an event):
//!
//! ```text
//! way      bytes  encode  decode
//! lz4 1    0.881    4.45    1.05
//! lz4 2    0.896    4.29    1.03
//! lz4 4    0.937    4.19    1.03
//! lz4 8    1.077    3.97    1.00
//! lz4 16   1.326    3.90    1.03
//! ```
//!
//! so the workers keep acceleration 1: a higher one saves at most ~12% of
//! the CPU for up to 1.5× the bytes.
//!
//! Version 6 of the capture codes batches of one type's events (the
//! capture's own `BatchDeltas`: each byte of an event's values less the
//! same byte of the event before, tags as they are; mixed batches as they
//! are). The "one-type deltas" ways here find the batch records by
//! scanning; the workers are told where they are. Later on the same
//! machine: the tight loop into a file (`styx-bench`'s `nop1` and
//! `nop1-narrow`, `-e mem_read --compression none`), the demo as above and
//! with `-e insn_exec` alone (bytes stored, encode and decode ns an event):
//!
//! ```text
//!                          tight loop u64     tight loop 16-bit   demo insn_exec    demo, all types
//!                          20.3 B/ev          8.1 B/ev            6.1 B/ev          7.1 B/ev
//! way                      bytes enc  dec     bytes enc  dec      bytes enc dec     bytes enc dec
//! zstd 1                   0.812 28.6 13.7    1.001 19.6 7.8      0.174 3.1 1.6     0.472 6.4 2.9
//! lz4 1                    6.408 22.4  6.6    4.373 11.3 2.1      0.280 1.6 0.6     0.881 5.1 1.1
//! one-type deltas + zstd 1 0.137 11.0 12.6    0.144  9.0 6.7      0.173 7.5 5.5     0.472 6.5 3.3
//! one-type deltas + lz4 1  0.363  8.1 10.4    0.168  5.6 4.7      0.273 5.9 4.5     0.881 5.1 1.5
//! ```
//!
//! So a counter-like stream of one type costs a third of the CPU and a
//! twentieth of the bytes coded, but the demo's instructions alone, whose
//! program repeats, cost 3.5× the CPU for the same bytes: a worker codes
//! only while its last block compressed both ways (every 64th) came out at
//! most half the size coded (`formats/raw/blocks.rs`, `Coding`).
//!
//! Record the capture measured with `--compression none`: stored blocks
//! are never delta coded, and the other transforms here read plain BATCH
//! records only.

mod columns;
mod deltas;

use columns::Columns;
use std::time::Instant;
use styx_events::Reader;

const FRAME_BYTES: usize = 16;

struct Block {
    payload: Vec<u8>,
    events: u64,
}

/// The capture's blocks, decompressed (at most `most`).
fn blocks(path: &str, most: usize) -> anyhow::Result<Vec<Block>> {
    let mut reader = Reader::open(std::io::BufReader::new(std::fs::File::open(path)?))?;
    anyhow::ensure!(reader.reads_blocks(), "a capture of records, not blocks");
    let mut blocks = Vec::new();
    while blocks.len() < most {
        let Some(block) = reader.take_block()? else {
            break;
        };
        blocks.push(Block {
            payload: block.payload()?,
            events: block.events(),
        });
    }
    Ok(blocks)
}

/// A way of storing a payload.
#[derive(Clone, Copy)]
enum Way {
    Zstd(i32),
    /// lz4 at this acceleration (1 as the workers take it).
    Lz4(i32),
    ColumnsZstd(i32),
    Snappy,
    ColumnsSnappy,
    /// The transform alone (its bytes, uncompressed).
    ColumnsOnly,
    DeltasZstd(i32),
    DeltasLz4,
    DeltasOnly,
    /// The capture's own coding of one type's batches (version 6,
    /// `BatchDeltas`), then zstd at this level.
    OneTypeZstd(i32),
    /// The same, then lz4.
    OneTypeLz4,
    /// The items skimmed, nothing stored: the least a transform's walk costs.
    SkimOnly,
    /// The loader's count of a batch kept whole, nothing stored.
    CountOnly,
    /// Columns of deltas in their values' widths, then zstd.
    FixedZstd(i32),
    FixedOnly,
}

impl Way {
    fn name(self) -> String {
        match self {
            Way::Zstd(level) => format!("zstd {level}"),
            Way::Lz4(acceleration) => format!("lz4 {acceleration}"),
            Way::ColumnsZstd(level) => format!("columns + zstd {level}"),
            Way::Snappy => "snappy".into(),
            Way::ColumnsSnappy => "columns + snappy".into(),
            Way::ColumnsOnly => "columns alone".into(),
            Way::DeltasZstd(level) => format!("deltas + zstd {level}"),
            Way::DeltasLz4 => "deltas + lz4 1".into(),
            Way::OneTypeZstd(level) => format!("one-type deltas + zstd {level}"),
            Way::OneTypeLz4 => "one-type deltas + lz4 1".into(),
            Way::DeltasOnly => "deltas alone".into(),
            Way::SkimOnly => "items skimmed".into(),
            Way::CountOnly => "items counted".into(),
            Way::FixedZstd(level) => format!("fixed columns + zstd {level}"),
            Way::FixedOnly => "fixed columns alone".into(),
        }
    }
}

struct Coder {
    one_type: styx_events::BatchDeltas,
    columns: Columns,
    fixed: Columns,
    scratch: Vec<u8>,
    snappy: snap::raw::Encoder,
}

impl Coder {
    /// Decodes a payload's BATCH_DELTAS records in place.
    fn one_type_decode(&mut self, payload: &mut [u8]) {
        let coded = deltas::batch_tags_coded(payload);
        self.one_type.decode_payload(payload, &coded).unwrap();
    }

    fn encode(&mut self, way: Way, payload: &[u8], zstd: &mut zstd::bulk::Compressor) -> Vec<u8> {
        match way {
            Way::Zstd(_) => zstd.compress(payload).unwrap(),
            Way::Lz4(acceleration) => lz4::block::compress(
                payload,
                Some(lz4::block::CompressionMode::FAST(acceleration)),
                false,
            )
            .unwrap(),
            Way::ColumnsZstd(_) => {
                assert!(self.columns.encode(payload, &mut self.scratch));
                zstd.compress(&self.scratch).unwrap()
            }
            Way::Snappy => self.snappy.compress_vec(payload).unwrap(),
            Way::ColumnsSnappy => {
                assert!(self.columns.encode(payload, &mut self.scratch));
                self.snappy.compress_vec(&self.scratch).unwrap()
            }
            Way::ColumnsOnly => {
                assert!(self.columns.encode(payload, &mut self.scratch));
                self.scratch.clone()
            }
            Way::DeltasZstd(_) => {
                assert!(deltas::encode(payload, &mut self.scratch));
                zstd.compress(&self.scratch).unwrap()
            }
            Way::DeltasLz4 => {
                assert!(deltas::encode(payload, &mut self.scratch));
                lz4::block::compress(&self.scratch, None, false).unwrap()
            }
            Way::DeltasOnly => {
                assert!(deltas::encode(payload, &mut self.scratch));
                self.scratch.clone()
            }
            Way::OneTypeZstd(_) => {
                let batches = deltas::batch_tags(payload);
                let coded = self.one_type.code(payload, &batches).unwrap_or(payload);
                zstd.compress(coded).unwrap()
            }
            Way::OneTypeLz4 => {
                let batches = deltas::batch_tags(payload);
                let coded = self.one_type.code(payload, &batches).unwrap_or(payload);
                lz4::block::compress(coded, None, false).unwrap()
            }
            Way::SkimOnly | Way::CountOnly => unreachable!("nothing stored"),
            Way::FixedZstd(_) => {
                assert!(self.fixed.encode(payload, &mut self.scratch));
                zstd.compress(&self.scratch).unwrap()
            }
            Way::FixedOnly => {
                assert!(self.fixed.encode(payload, &mut self.scratch));
                self.scratch.clone()
            }
        }
    }

    fn decode(
        &mut self,
        way: Way,
        stored: &[u8],
        payload_len: usize,
        out: &mut Vec<u8>,
        zstd: &mut zstd::bulk::Decompressor,
    ) {
        // The transform's bytes are at most this many (varints of u64 deltas).
        let columns_most = 2 * payload_len + 4096;
        match way {
            Way::Zstd(_) => {
                out.resize(payload_len, 0);
                zstd.decompress_to_buffer(stored, out).unwrap();
            }
            Way::Lz4(_) => {
                out.resize(payload_len, 0);
                lz4::block::decompress_to_buffer(stored, Some(payload_len as i32), out).unwrap();
            }
            Way::ColumnsZstd(_) => {
                self.scratch.resize(columns_most, 0);
                let n = zstd
                    .decompress_to_buffer(stored, &mut self.scratch)
                    .unwrap();
                self.columns
                    .decode(&self.scratch[..n], payload_len, out)
                    .unwrap();
            }
            Way::Snappy => {
                out.resize(payload_len, 0);
                snap::raw::Decoder::new().decompress(stored, out).unwrap();
            }
            Way::ColumnsSnappy => {
                self.scratch.resize(columns_most, 0);
                let n = snap::raw::Decoder::new()
                    .decompress(stored, &mut self.scratch)
                    .unwrap();
                self.columns
                    .decode(&self.scratch[..n], payload_len, out)
                    .unwrap();
            }
            Way::ColumnsOnly => self.columns.decode(stored, payload_len, out).unwrap(),
            Way::DeltasZstd(_) => {
                out.resize(payload_len, 0);
                zstd.decompress_to_buffer(stored, out).unwrap();
                deltas::decode(out).unwrap();
            }
            Way::DeltasLz4 => {
                out.resize(payload_len, 0);
                lz4::block::decompress_to_buffer(stored, Some(payload_len as i32), out).unwrap();
                deltas::decode(out).unwrap();
            }
            Way::OneTypeZstd(_) => {
                out.resize(payload_len, 0);
                zstd.decompress_to_buffer(stored, out).unwrap();
                self.one_type_decode(out);
            }
            Way::OneTypeLz4 => {
                out.resize(payload_len, 0);
                lz4::block::decompress_to_buffer(stored, Some(payload_len as i32), out).unwrap();
                self.one_type_decode(out);
            }
            Way::DeltasOnly => {
                out.clear();
                out.extend_from_slice(stored);
                deltas::decode(out).unwrap();
            }
            Way::FixedZstd(_) => {
                self.scratch.resize(columns_most, 0);
                let n = zstd
                    .decompress_to_buffer(stored, &mut self.scratch)
                    .unwrap();
                self.fixed
                    .decode(&self.scratch[..n], payload_len, out)
                    .unwrap();
            }
            Way::FixedOnly => self.fixed.decode(stored, payload_len, out).unwrap(),
            Way::SkimOnly | Way::CountOnly => unreachable!("nothing stored to decode"),
        }
    }
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: bench-blocks CAPTURE [BLOCKS [WAY]]"))?;
    let most = match args.next() {
        Some(n) => n.parse()?,
        None => usize::MAX,
    };
    // Only the ways whose names hold this.
    let only = args.next().unwrap_or_default();
    let blocks = blocks(&path, most)?;
    let events: u64 = blocks.iter().map(|b| b.events).sum();
    let payload: usize = blocks.iter().map(|b| b.payload.len()).sum();
    println!(
        "{} blocks, {events} events, payload {:.2} bytes/event",
        blocks.len(),
        payload as f64 / events as f64
    );
    let ways = [
        Way::Zstd(1),
        Way::Zstd(-1),
        Way::Zstd(-5),
        Way::Lz4(1),
        Way::Lz4(2),
        Way::Lz4(4),
        Way::Lz4(8),
        Way::Lz4(16),
        Way::Snappy,
        Way::ColumnsOnly,
        Way::ColumnsZstd(1),
        Way::ColumnsZstd(-1),
        Way::ColumnsZstd(-5),
        Way::ColumnsSnappy,
        Way::SkimOnly,
        Way::CountOnly,
        Way::DeltasOnly,
        Way::DeltasZstd(1),
        Way::DeltasZstd(-1),
        Way::DeltasZstd(-5),
        Way::DeltasLz4,
        Way::OneTypeZstd(1),
        Way::OneTypeLz4,
        Way::FixedOnly,
        Way::FixedZstd(1),
        Way::FixedZstd(-1),
        Way::FixedZstd(-5),
    ];
    println!(
        "{:<22} {:>11} {:>13} {:>13}",
        "way", "bytes/event", "encode ns/ev", "decode ns/ev"
    );
    let mut coder = Coder {
        one_type: styx_events::BatchDeltas::default(),
        columns: Columns::default(),
        fixed: Columns::fixed_width(),
        scratch: Vec::new(),
        snappy: snap::raw::Encoder::new(),
    };
    let mut decompressor = zstd::bulk::Decompressor::new()?;
    let mut out = Vec::new();
    for way in ways.into_iter().filter(|way| way.name().contains(&only)) {
        let level = match way {
            Way::Zstd(level)
            | Way::ColumnsZstd(level)
            | Way::DeltasZstd(level)
            | Way::FixedZstd(level) => level,
            _ => 1,
        };
        if let Way::SkimOnly | Way::CountOnly = way {
            let mut skim = f64::MAX;
            for _ in 0..5 {
                let start = Instant::now();
                let items: u64 = match way {
                    Way::SkimOnly => blocks.iter().map(|b| deltas::skim(&b.payload) as u64).sum(),
                    _ => blocks.iter().map(|b| deltas::counted(&b.payload)).sum(),
                };
                // Counted: events of batches (not the per-event records).
                assert!(items * 10 >= events * 9, "the items were not all found");
                skim = skim.min(start.elapsed().as_nanos() as f64);
            }
            println!(
                "{:<22} {:>11} {:>13.2} {:>13}",
                way.name(),
                "-",
                skim / events as f64,
                "-"
            );
            continue;
        }
        let mut compressor = zstd::bulk::Compressor::new(level)?;
        compressor.include_checksum(true)?;
        let mut stored = Vec::new();
        let mut encode = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            stored = (blocks.iter())
                .map(|b| coder.encode(way, &b.payload, &mut compressor))
                .collect::<Vec<_>>();
            encode = encode.min(start.elapsed().as_nanos() as f64);
        }
        let mut decode = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            for (block, stored) in blocks.iter().zip(&stored) {
                coder.decode(
                    way,
                    stored,
                    block.payload.len(),
                    &mut out,
                    &mut decompressor,
                );
            }
            decode = decode.min(start.elapsed().as_nanos() as f64);
        }
        for (block, stored) in blocks.iter().zip(&stored) {
            coder.decode(
                way,
                stored,
                block.payload.len(),
                &mut out,
                &mut decompressor,
            );
            assert!(
                out == block.payload,
                "{} does not give the payload back",
                way.name()
            );
        }
        let bytes: usize = stored.iter().map(|s| s.len() + FRAME_BYTES).sum();
        println!(
            "{:<22} {:>11.3} {:>13.2} {:>13.2}",
            way.name(),
            bytes as f64 / events as f64,
            encode / events as f64,
            decode / events as f64
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{columns::Columns, deltas};
    use styx_common::batch::{BatchRecord, BATCH_MAGIC, BATCH_RECORD_KIND};
    use styx_common::item::{write_declared, write_event, write_mark, MAX_DECLARED_ITEM_BYTES};
    use styx_common::item::{CATALOGUE_TAG, MAX_ITEM_BYTES};
    use styx_common::{EventKind, RecordHeader};

    /// A BATCH record (tag, length, record) of `items`, with `trailing`
    /// bytes past them as ring records may have.
    fn batch_entry(items: &[u8], trailing: &[u8]) -> Vec<u8> {
        let mut record = BatchRecord {
            header: RecordHeader {
                kind: BATCH_RECORD_KIND,
                ts_ns: 77,
                ..RecordHeader::default()
            },
            len: items.len() as u32,
            ..BatchRecord::default()
        };
        record.head.magic = BATCH_MAGIC;
        let record = [bytemuck::bytes_of(&record), items, trailing].concat();
        styx_events::BatchDeltas::entry(&record)
    }

    /// Items of every sort: marks, catalogue events of each width (values
    /// going up and down, to the widths' ends), declared types' items.
    fn items(seed: u64) -> Vec<u8> {
        let mut items = Vec::new();
        let mut item = [0u8; MAX_ITEM_BYTES];
        let mut declared = [0u8; MAX_DECLARED_ITEM_BYTES];
        for i in 0..300u64 {
            let wobble = (i * 7919 + seed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let n = match i % 6 {
                0 => write_mark(1_000_000 + i * 50 - (i % 4) * 80, &mut item),
                1 => write_event(
                    EventKind::MemRead,
                    &[
                        (0x100 + i, 2),
                        (wobble & 0xffff, 2),
                        (wobble >> 56, 1),
                        (1, 1),
                    ],
                    &mut item,
                ),
                2 => write_event(
                    EventKind::MemWrite,
                    &[
                        (u64::MAX - i, 8),
                        (wobble, 8),
                        (wobble as u32 as u64, 4),
                        (8, 1),
                    ],
                    &mut item,
                ),
                3 => write_event(
                    EventKind::InsnExec,
                    &[(wobble >> 1, 8), (i, 4), (4, 1)],
                    &mut item,
                ),
                4 => write_event(
                    EventKind::RegWrite,
                    &[(i, 2), (3, 1), (wobble, 8), (0xff, 1)],
                    &mut item,
                ),
                _ => {
                    let n = write_declared(0x10, &[i, wobble & 0xff], &[4, 1], &mut declared);
                    items.extend_from_slice(&declared[..n]);
                    continue;
                }
            };
            items.extend_from_slice(&item[..n]);
        }
        items
    }

    /// A payload as a block holds it: a THREAD record, an event record
    /// whose bytes hold the BATCH tag, batches (one with bytes past its
    /// items, one empty), a look-alike of a batch's header in a marker's
    /// text, and an END record.
    fn payload() -> Vec<u8> {
        let mut payload = vec![0x00, 0x9a, 0xa9, 0x01, 0x9a, 0xa9, 0x01];
        payload.extend_from_slice(&[0x0b, 0x20, 0x20, 0x05, b'h', b'i', 0x20]);
        payload.extend(batch_entry(&items(1), &[]));
        payload.extend(batch_entry(&items(2), &[0xaa; 63]));
        payload.extend(batch_entry(&[], &[1, 2, 3]));
        payload.extend_from_slice(&[0x0c, 0x20, 0x81]);
        payload.extend(batch_entry(&items(3), &[]));
        payload.extend_from_slice(&[0x10, 0x05, 0x00, 0x00]);
        payload
    }

    /// Round-trips `payload` through every transform; whether deltas
    /// changed any of its bytes.
    fn round_trip(payload: &[u8]) -> bool {
        let mut encoded = Vec::new();
        assert!(deltas::encode(payload, &mut encoded));
        assert_eq!(encoded.len(), payload.len());
        let turned = encoded != payload;
        deltas::decode(&mut encoded).unwrap();
        assert!(encoded == payload, "deltas do not give the payload back");
        for mut columns in [Columns::default(), Columns::fixed_width()] {
            let mut encoded = Vec::new();
            assert!(columns.encode(payload, &mut encoded));
            // Batches split into columns, not all kept as they are.
            assert!(turned == (encoded.len() < payload.len() || !encoded.ends_with(payload)));
            let mut decoded = Vec::new();
            columns
                .decode(&encoded, payload.len(), &mut decoded)
                .unwrap();
            assert!(decoded == payload, "columns do not give the payload back");
        }
        turned
    }

    #[test]
    fn every_transform_gives_the_payload_back() {
        assert!(round_trip(&payload()), "no value was turned into a delta");
        round_trip(&[]);
        // Records that are not batches alone, and a batch cut short.
        round_trip(&payload()[..20]);
        round_trip(&payload()[..400]);
    }

    #[test]
    fn a_batch_whose_items_do_not_read_is_refused() {
        // A catalogue tag naming no kind a batch holds.
        let bad = (CATALOGUE_TAG | 0x7f00).to_le_bytes();
        for items in [
            [&items(4)[..], &bad].concat(),
            items(5)[..items(5).len() - 1].to_vec(),
        ] {
            let payload = batch_entry(&items, &[]);
            assert!(!Columns::default().encode(&payload, &mut Vec::new()));
            assert!(!Columns::fixed_width().encode(&payload, &mut Vec::new()));
            assert!(!deltas::encode(&payload, &mut Vec::new()));
        }
    }

    #[test]
    fn damaged_columns_are_refused_without_panic() {
        let payload = payload();
        for mut columns in [Columns::default(), Columns::fixed_width()] {
            let mut encoded = Vec::new();
            assert!(columns.encode(&payload, &mut encoded));
            let mut decoded = Vec::new();
            for cut in 0..encoded.len() {
                assert!(columns
                    .decode(&encoded[..cut], payload.len(), &mut decoded)
                    .is_err());
            }
            for at in 0..encoded.len() {
                let mut damaged = encoded.clone();
                damaged[at] ^= 0x5a;
                // Either refused or a payload of the length asked for.
                if columns
                    .decode(&damaged, payload.len(), &mut decoded)
                    .is_ok()
                {
                    assert_eq!(decoded.len(), payload.len());
                }
                assert!(decoded.capacity() <= 2 * payload.len());
            }
            assert!(columns
                .decode(&encoded, payload.len() - 1, &mut decoded)
                .is_err());
        }
    }
}
