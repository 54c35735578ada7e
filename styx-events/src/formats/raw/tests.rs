//! The capture codec on its own: what goes in comes out, and a capture cut
//! at any byte reads up to its last whole record.

use super::*;
use crate::formats::jsonl::jsonl;
use crate::formats::lines::Repeats;
use crate::formats::parquet::{ROW_GROUP_ROWS, ROW_GROUP_TEXT_BYTES};
use crate::record::event::{Body, Call, Event, Text};
use crate::session::fields::Names;
use crate::session::header::{ClockMapping, Header, UsdtInfo};
use crate::write::buf::ByteBuf;
use crate::write::writer::{EventWriter, SharedOutput, Totals};
use styx_common::{ArgType, EventKind, RecordHeader, StrWord};

fn header() -> Header {
    let (i32, u64) = (ArgType::int(4, true), ArgType::int(8, false));
    let site = UsdtInfo::new(0, "prov", "probe", [(None, i32), (None, u64)]);
    let named = |name: &str, ty| (Some(name.to_string()), ty);
    let strings = UsdtInfo::new(
        1,
        "prov",
        "strings",
        [
            named("id", u64),
            named("name", ArgType::Str),
            named("body", ArgType::Json),
        ],
    );
    let mut header = Header::now(42, "/bin/emu", vec![site, strings]);
    header.functions = vec!["emu::run".into(), "emu::step".into()];
    assert_eq!(header.usdt[0].args[0].ty, "i32");
    assert_eq!(header.usdt[0].args[1].ty, "u64");
    // Fixed, so two headers compare equal.
    header.clock = ClockMapping {
        monotonic_ns: 1,
        realtime_ns: 2,
    };
    header
}

fn event(ts_ns: u64, tid: u32, kind: EventKind, aux: u8, body: Body<'static>) -> Event<'static> {
    Event {
        header: RecordHeader {
            ts_ns,
            pid: 42,
            tid,
            kind: kind as u8,
            aux,
            _reserved: [0; 6],
        },
        kind,
        body,
    }
}

static NEGATIVE: [u64; 2] = [-5i64 as u64, u64::MAX];
static STRING_WORDS: [u64; 3] = [
    7,
    StrWord::Kept { len: 5, cut: false }.encode(),
    StrWord::Kept {
        len: 14,
        cut: false,
    }
    .encode(),
];
/// Two strings, each in its place (see `styx_common::StrWord`).
fn strings() -> &'static [u8] {
    let mut bytes = b"hello".to_vec();
    bytes.resize(styx_common::USDT_STR_MAX, b'-');
    bytes.extend_from_slice(b"{\"ok\":[1,\"a\"]}");
    bytes.leak()
}

/// A mix of every shape, threads switching, time stepping back, extremes.
fn events() -> Vec<Event<'static>> {
    let text = |s: &'static str, truncated| Text {
        bytes: s.as_bytes(),
        truncated,
    };
    vec![
        event(
            1_000,
            7,
            EventKind::MemRead,
            1,
            Body::Args([0x1000, 0x40, 0x2a, 0]),
        ),
        event(
            1_050,
            7,
            EventKind::MemRead,
            8,
            Body::Args([0x1002, 0x42, u64::MAX, 0]),
        ),
        event(
            1_040,
            8,
            EventKind::MemWrite,
            2,
            Body::Args([0x2000, 0x10, 0xbeef, 0]),
        ),
        event(1_060, 7, EventKind::RegWrite, 0, Body::Args([1, 2, 3, 4])),
        event(
            u64::MAX,
            8,
            EventKind::Branch,
            0,
            Body::Args([5, 0, 0x101, 0]),
        ),
        event(0, 9, EventKind::Interrupt, 0, Body::Args([1, 2, 3, 4])),
        event(
            5,
            9,
            EventKind::SpanBegin,
            0,
            Body::Span {
                id: 77,
                category: text("cpu", false),
                name: text("a \"quoted\" name", true),
            },
        ),
        event(6, 7, EventKind::Marker, 0, Body::Marker(text("", false))),
        event(
            7,
            7,
            EventKind::Usdt,
            2,
            Body::Usdt {
                spec_id: 0,
                args: &NEGATIVE,
                strings: &[],
            },
        ),
        event(
            7,
            8,
            EventKind::Usdt,
            3,
            Body::Usdt {
                spec_id: 1,
                args: &STRING_WORDS,
                strings: strings(),
            },
        ),
        event(8, 7, EventKind::Control, 3, Body::Args([0, 0, 0, 0])),
        event(
            9,
            7,
            EventKind::Function,
            0,
            Body::Call(Call {
                function: 1,
                sp: 0x7ffd_1234_5678,
                depth: 3,
                ..Call::default()
            }),
        ),
        event(
            10,
            7,
            EventKind::Function,
            1,
            Body::Call(Call {
                function: 0,
                sp: 0x7ffd_1234_5608,
                exit: true,
                depth: 4,
                duration_ns: Some(0),
                unwound: true,
                tail_call: false,
            }),
        ),
        event(
            11,
            7,
            EventKind::Function,
            styx_common::FUNCTION_TAIL_CALL,
            Body::Call(Call {
                function: 1,
                sp: 0x7ffd_1234_5608,
                exit: true,
                depth: 3,
                duration_ns: Some(9),
                unwound: false,
                tail_call: true,
            }),
        ),
    ]
}

fn lines(events: &[Event<'_>], usdt: &Names) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let mut out = ByteBuf::default();
            jsonl(&mut out, e, usdt, &mut Repeats::default());
            String::from_utf8(out.as_slice().to_vec()).unwrap()
        })
        .collect()
}

/// A capture of `events` as this loader writes it (version 6, zstd blocks).
fn write(events: &[Event<'_>]) -> Vec<u8> {
    finished(
        CaptureWriter::new(Vec::new(), &header(), Compression::Zstd).unwrap(),
        events,
    )
}

/// … with its blocks in lz4.
fn write_lz4(events: &[Event<'_>]) -> Vec<u8> {
    finished(
        CaptureWriter::new(Vec::new(), &header(), Compression::Lz4).unwrap(),
        events,
    )
}

/// … with its blocks stored as they are.
fn write_stored(events: &[Event<'_>]) -> Vec<u8> {
    finished(
        CaptureWriter::new(Vec::new(), &header(), Compression::None).unwrap(),
        events,
    )
}

/// … as version 2 wrote it: records straight in the file.
fn write_v2(events: &[Event<'_>]) -> Vec<u8> {
    finished(
        CaptureWriter::version_2(Vec::new(), &header()).unwrap(),
        events,
    )
}

fn finished(mut writer: CaptureWriter<Vec<u8>>, events: &[Event<'_>]) -> Vec<u8> {
    let mut counts = [0u64; 16];
    for e in events {
        writer.event(e).unwrap();
        counts[e.kind as usize] += 1;
    }
    let drops = [0u64; 16];
    writer
        .finish(&Totals {
            events: &counts,
            drops: &drops,
        })
        .unwrap();
    writer.into_inner()
}

fn read(bytes: &[u8]) -> (Vec<String>, Ending) {
    let (out, reader) = read_to_end(bytes);
    (out, reader.ending)
}

/// Every event of a capture as JSON lines, and the reader at its end.
fn read_to_end(bytes: &[u8]) -> (Vec<String>, Reader<&[u8]>) {
    let mut reader = Reader::open(bytes).unwrap();
    let usdt = Names::new(&reader.header);
    let mut out = Vec::new();
    while let Some(e) = reader.next().unwrap() {
        let mut line = ByteBuf::default();
        jsonl(&mut line, &e, &usdt, &mut Repeats::default());
        out.push(String::from_utf8(line.as_slice().to_vec()).unwrap());
    }
    (out, reader)
}

#[test]
fn what_goes_in_comes_out() {
    for write in [write, write_lz4, write_stored, write_v2] {
        what_goes_in_comes_out_of(write(&events()));
    }
}

fn what_goes_in_comes_out_of(bytes: Vec<u8>) {
    let events = events();
    let (got, ending) = read(&bytes);
    assert_eq!(got, lines(&events, &Names::new(&header())));
    assert!(
        got[8].contains("\"args\":[-5,18446744073709551615]"),
        "{}",
        got[8]
    );
    assert!(
        got[9].contains(r#""probe":"strings","id":7,"name":"hello","body":{"ok":[1,"a"]}}"#),
        "{}",
        got[9]
    );
    assert!(
        matches!(
            ending,
            Ending::Complete {
                events: 14,
                dropped: 0,
                ..
            }
        ),
        "{ending:?}"
    );
    let reader = Reader::open(&bytes[..]).unwrap();
    assert_eq!(reader.header, header());
}

#[test]
fn a_capture_cut_anywhere_reads_to_its_last_whole_record() {
    let events = events();
    let all = lines(&events, &Names::new(&header()));
    let bytes = write_v2(&events);
    let body_start = 16 + u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let mut last = 0;
    for cut in body_start..bytes.len() {
        let (got, ending) = read(&bytes[..cut]);
        assert_eq!(got[..], all[..got.len()], "cut at {cut}");
        assert!(got.len() >= last, "more bytes never give fewer events");
        last = got.len();
        match ending {
            Ending::CutShort {
                offset, partial, ..
            } => {
                assert_eq!(offset as usize + partial, cut, "cut at {cut}");
            }
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    assert_eq!(last, events.len(), "only the END record missing");
}

/// Version 1 differs only in its USDT records, which had no strings.
#[test]
fn a_version_1_capture_is_read() {
    let events: Vec<Event<'static>> = events()
        .iter()
        .filter(|e| e.kind != EventKind::Usdt)
        .map(clone_event)
        .collect();
    let mut bytes = write_v2(&events);
    bytes[8] = 1;
    let (got, ending) = read(&bytes);
    assert_eq!(got, lines(&events, &Names::new(&header())));
    assert!(matches!(ending, Ending::Complete { .. }), "{ending:?}");
}

#[test]
fn bad_input_is_named() {
    let bytes = write_v2(&events());
    let err = |b: &[u8]| Reader::open(b).err().expect("an error").to_string();
    assert!(err(b"{\"ts_ns\":1}\n").contains("not a styx capture"));
    assert!(err(&bytes[..10]).contains("ends inside its header"));
    assert!(err(&bytes[..40]).contains("ends inside its header"));
    let mut newer = bytes.clone();
    newer[8] = VERSION as u8 + 1;
    let says = format!(
        "version {}; this styx-loader reads versions 1 to {VERSION}",
        VERSION + 1
    );
    assert!(err(&newer).contains(&says));
    let mut corrupt = bytes.clone();
    let body_start = 16 + u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    corrupt[body_start] = 0x70; // a meta tag nobody writes
    let mut reader = Reader::open(&corrupt[..]).unwrap();
    let e = reader.next().err().expect("corrupt").to_string();
    assert!(
        e.contains(&format!("corrupt record at byte {body_start}")),
        "{e}"
    );
}

#[test]
fn a_typical_mem_read_takes_few_bytes() {
    // An emulator loop: reads a few ns apart, pc and address moving a little.
    let events: Vec<Event<'static>> = (0..1000u64)
        .map(|i| {
            event(
                1_000_000 + i * 700,
                7,
                EventKind::MemRead,
                1,
                Body::Args([0x8000 + (i * 3) % 64, 0x200 + i % 256, i * 37 % 256, 0]),
            )
        })
        .collect();
    let bytes = write_v2(&events);
    let body_start = 16 + u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let per_event = (bytes.len() - body_start) as f64 / 1000.0;
    assert!(per_event <= 10.0, "{per_event} bytes per mem_read");
}

/// Many events, so that reads cross buffer refills and the fast path runs.
fn many_events() -> Vec<Event<'static>> {
    let base = events();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut out = Vec::new();
    for i in 0..130_000u64 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let mut e = clone_event(&base[(rng % base.len() as u64) as usize]);
        e.header.ts_ns = 1_000_000 + i * 250 + rng % 100;
        e.header.tid = 7 + (rng >> 20) as u32 % 3;
        if let Body::Args(a) = &mut e.body {
            a[0] = rng >> 40;
            a[1] = a[1].wrapping_add(i);
        }
        out.push(e);
    }
    out
}

fn clone_event(e: &Event<'static>) -> Event<'static> {
    let body = match &e.body {
        Body::Args(a) => Body::Args(*a),
        Body::Span { id, category, name } => Body::Span {
            id: *id,
            category: Text {
                bytes: category.bytes,
                truncated: category.truncated,
            },
            name: Text {
                bytes: name.bytes,
                truncated: name.truncated,
            },
        },
        Body::Marker(t) => Body::Marker(Text {
            bytes: t.bytes,
            truncated: t.truncated,
        }),
        Body::Usdt {
            spec_id,
            args,
            strings,
        } => Body::Usdt {
            spec_id: *spec_id,
            args,
            strings,
        },
        Body::Call(call) => Body::Call(*call),
    };
    Event {
        header: e.header,
        kind: e.kind,
        body,
    }
}

/// Hands out a few bytes per read, as a pipe may.
struct Trickle<'a>(&'a [u8], usize);

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.1.min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

#[test]
fn long_captures_read_back_across_refills_however_the_bytes_arrive() {
    for write in [write, write_lz4, write_stored, write_v2] {
        long_capture_reads_back(write(&many_events()));
    }
}

fn long_capture_reads_back(bytes: Vec<u8>) {
    let events = many_events();
    let want = lines(&events, &Names::new(&header()));
    let (got, ending) = read(&bytes);
    assert!(got == want, "whole file");
    assert!(matches!(ending, Ending::Complete { .. }));
    for chunk in [7, 4096] {
        let mut reader = Reader::open(Trickle(&bytes, chunk)).unwrap();
        let usdt = Names::new(&reader.header);
        let mut n = 0;
        while let Some(e) = reader.next().unwrap() {
            let mut line = ByteBuf::default();
            jsonl(&mut line, &e, &usdt, &mut Repeats::default());
            assert_eq!(
                line.as_slice(),
                want[n].as_bytes(),
                "event {n}, {chunk}-byte reads"
            );
            n += 1;
        }
        assert_eq!(n, want.len());
    }
    // Cut in the middle of a later buffer: a prefix, and the bytes dropped.
    let cut = bytes.len() * 3 / 4 + 3;
    let (got, ending) = read(&bytes[..cut]);
    assert_eq!(got[..], want[..got.len()]);
    let Ending::CutShort {
        offset, partial, ..
    } = ending
    else {
        panic!("{ending:?}")
    };
    assert_eq!(offset as usize + partial, cut);
}

/// MAGIC, version and a header length, and nothing else.
fn prelude(header_len: u32) -> Vec<u8> {
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&header_len.to_le_bytes());
    bytes
}

#[test]
fn a_header_longer_than_any_header_is_refused() {
    // 16 bytes claiming a 4 GiB header: refused before anything is allocated.
    let err = Reader::open(&prelude(u32::MAX)[..])
        .err()
        .expect("an error");
    assert!(
        matches!(err, CaptureError::HeaderTooLong { len } if len == u32::MAX as u64),
        "{err}"
    );
    assert!(
        err.to_string().contains("header of 4294967295 bytes"),
        "{err}"
    );
    // Within the limit but the file ends early: read as far as it goes.
    let mut short = prelude(MAX_HEADER as u32);
    short.extend_from_slice(b"{\"loader\":");
    let err = Reader::open(&short[..]).err().expect("an error");
    assert!(matches!(err, CaptureError::HeaderCut(26)), "{err}");
}

/// `header()` with one more probe, `prov:far`, at spec id `id`.
fn header_with_spec(id: u32) -> Header {
    let mut header = header();
    let mut far = header.usdt[0].clone();
    far.spec_id = id;
    far.probe = "far".into();
    header.usdt.push(far);
    header
}

/// Every format over the capture in `bytes`; the number of events read, or
/// the first error. Panics (overflow, slicing) fail the test that calls it.
fn through_every_format(bytes: &[u8]) -> Result<u64, CaptureError> {
    use crate::formats::{open_stream, Detail, Format, Options};
    let mut read = 0;
    // Tenet needs the guest's register names, which these headers lack.
    for format in Format::ALL.into_iter().filter(|&f| f != Format::Tenet) {
        let mut reader = Reader::open(bytes)?;
        let detail = match format {
            Format::Text => Detail::Full,
            _ => Detail::Normal,
        };
        let options = Options {
            detail,
            ..Options::default()
        };
        let mut writer =
            open_stream(format, Box::new(std::io::sink()), &reader.header, &options).unwrap();
        let mut counts = [0u64; 16];
        while let Some(e) = reader.next()? {
            counts[e.kind as usize] += 1;
            writer.event(&e).unwrap();
        }
        writer
            .finish(&Totals {
                events: &counts,
                drops: &[0; 16],
            })
            .unwrap();
        read = reader.events;
    }
    Ok(read)
}

#[test]
fn spec_ids_do_not_size_anything() {
    let mut writer = CaptureWriter::new(
        Vec::new(),
        &header_with_spec(4_000_000_000),
        Compression::Zstd,
    )
    .unwrap();
    let far = event(
        9,
        7,
        EventKind::Usdt,
        2,
        Body::Usdt {
            spec_id: 4_000_000_000,
            args: &NEGATIVE,
            strings: &[],
        },
    );
    writer.event(&far).unwrap();
    let mut counts = [0u64; 16];
    counts[EventKind::Usdt as usize] = 1;
    writer
        .finish(&Totals {
            events: &counts,
            drops: &[0; 16],
        })
        .unwrap();
    let bytes = writer.into_inner();
    let (got, ending) = read(&bytes);
    assert_eq!(got.len(), 1);
    assert!(got[0].contains("\"probe\":\"far\""), "{}", got[0]);
    assert!(matches!(ending, Ending::Complete { events: 1, .. }));
    assert_eq!(through_every_format(&bytes).unwrap(), 1);
}

#[test]
fn times_near_the_end_of_u64_go_through_every_format() {
    let mut events = events();
    for (i, e) in events.iter_mut().enumerate() {
        e.header.ts_ns = u64::MAX - 13_500_000 + i as u64 * 900_000;
    }
    events.push(event(
        u64::MAX,
        7,
        EventKind::Marker,
        0,
        Body::Marker(Text {
            bytes: b"last",
            truncated: false,
        }),
    ));
    let bytes = write(&events);
    assert_eq!(through_every_format(&bytes).unwrap(), events.len() as u64);
}

#[test]
fn any_bytes_give_events_or_an_error() {
    let mut events = events();
    events.extend(many_events().into_iter().take(300));
    // Stored blocks: flipped bytes reach the records (in a zstd block they
    // mostly fail its checksum, which the fuzzer covers).
    for good in [write_stored(&events), write_v2(&events)] {
        any_bytes_of(good);
    }
}

fn any_bytes_of(good: Vec<u8>) {
    let body_start = 16 + u32::from_le_bytes(good[12..16].try_into().unwrap()) as usize;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 0..1000 {
        let mut bytes = good.clone();
        // Mostly the records; sometimes the prelude and header too.
        let from = if round % 4 == 0 { 0 } else { body_start };
        for _ in 0..1 + next() % 4 {
            let at = from + (next() as usize) % (bytes.len() - from);
            bytes[at] = match next() % 4 {
                0 => 0xff,
                1 => 0x00,
                2 => bytes[at] ^ (1 << (next() % 8)),
                _ => next() as u8,
            };
        }
        if round % 3 == 0 {
            bytes.truncate(from + (next() as usize) % (bytes.len() - from));
        }
        // Either is fine: what matters is no panic, hang or huge allocation.
        let _ = through_every_format(&bytes);
    }
}

/// A batch record of thread 9 with `n` insn_exec events (one time mark).
fn batch_record(n: u64) -> Vec<u8> {
    use crate::record::test_items::{event, mark};
    use styx_common::batch::{BatchHead, BatchRecord, BATCH_RECORD_KIND};
    let mut items = mark(5_000);
    for i in 0..n {
        items.extend(event(
            EventKind::InsnExec,
            &[(0x600 + i, 8), (i, 8), (0, 1)],
        ));
    }
    let fixed = BatchRecord {
        header: RecordHeader {
            ts_ns: 5_000 + n,
            pid: 42,
            tid: 9,
            kind: BATCH_RECORD_KIND,
            ..RecordHeader::default()
        },
        head: BatchHead::default(),
        start: 0,
        len: items.len() as u32,
    };
    let mut bytes = bytemuck::bytes_of(&fixed).to_vec();
    bytes.extend_from_slice(&items);
    bytes
}

/// Batches stored whole read back as their events, in place, between the
/// events around them, also across refills and cut anywhere.
#[test]
fn batch_records_read_back_as_their_events_in_place() {
    let events = events();
    let usdt = Names::new(&header());
    // The largest batch there is: ~BATCH_BYTES of items.
    let n = (styx_common::batch::BATCH_BYTES as u64 - 16) / 24;
    let batch = batch_record(n);
    assert!(batch.len() <= MAX_BATCH_RECORD);
    let split = split_lines(&batch, &usdt);
    assert_eq!(split.len() as u64, n);

    let mut writer = CaptureWriter::version_2(Vec::new(), &header()).unwrap();
    assert!(writer.takes_batches());
    write_with_batch(&mut writer, &events, &batch, n);
    writer.flush().unwrap();
    let bytes = writer.into_inner();
    let all = lines(&events, &usdt);
    let expected: Vec<String> = [&all[..5], &split[..], &all[5..]].concat();
    let (got, _) = read(&bytes);
    assert_eq!(got, expected);
    // A batch costs its record and 4 bytes (tag, length) beyond it.
    let without = write_v2(&events).len();
    assert!(
        bytes.len() <= without + batch.len() + 4,
        "{} bytes",
        bytes.len()
    );

    for cut in (0..bytes.len()).step_by(97) {
        let Ok(mut reader) = Reader::open(&bytes[..cut]) else {
            continue;
        };
        let mut n = 0;
        while reader.next().unwrap().is_some() {
            n += 1;
        }
        // Before the batch is whole: only the 5 events before it.
        assert!(n <= 5 || n >= 5 + split.len(), "cut at {cut}: {n}");
    }
}

/// The JSON lines of `batch`'s events, as split.
fn split_lines(batch: &[u8], usdt: &Names) -> Vec<String> {
    let mut split = Vec::new();
    crate::record::batch::Batches::new()
        .split(batch, |e| {
            let mut line = ByteBuf::default();
            jsonl(&mut line, e, usdt, &mut Repeats::default());
            split.push(String::from_utf8(line.as_slice().to_vec()).unwrap());
            Ok::<(), ()>(())
        })
        .unwrap()
        .unwrap();
    split
}

/// The first 5 of `events`, the `n` events of `batch` whole, the rest.
fn write_with_batch<W: std::io::Write>(
    writer: &mut CaptureWriter<W>,
    events: &[Event<'_>],
    batch: &[u8],
    n: u64,
) {
    for e in &events[..5] {
        writer.event(e).unwrap();
    }
    writer.batch(batch, n).unwrap();
    for e in &events[5..] {
        writer.event(e).unwrap();
    }
}

/// Versions 3 (blocks, batches of up to 16 KiB), 4 (zstd or stored
/// blocks) and 5 (lz4 blocks too) read as version 6 does: a capture of the
/// blocks this writer makes, with a batch of ~16 KiB between events, read
/// back in place; stored as it is, under each version number, and
/// compressed, its batch (of one type's events) delta coded.
#[test]
fn a_version_3_capture_with_a_16_kib_batch_is_read() {
    let events = events();
    let usdt = Names::new(&header());
    let n = (16 * 1024 - 16) / 24;
    let batch = batch_record(n);
    let split = split_lines(&batch, &usdt);
    let all = lines(&events, &usdt);
    let expected: Vec<String> = [&all[..5], &split[..], &all[5..]].concat();
    let mut counts = [0u64; 16];
    for e in &events {
        counts[e.kind as usize] += 1;
    }
    let write = |mut writer: CaptureWriter<Vec<u8>>| {
        assert!(writer.takes_batches());
        write_with_batch(&mut writer, &events, &batch, n);
        writer
            .finish(&Totals {
                events: &counts,
                drops: &[0u64; 16],
            })
            .unwrap();
        writer.into_inner()
    };
    let coded = write(CaptureWriter::patient(Vec::new(), &header(), Compression::Zstd).unwrap());
    assert_eq!(coded[8], VERSION as u8);
    assert_eq!(batch_tags(&coded), [TAG_BATCH_DELTAS]);
    let (got, ending) = read(&coded);
    assert_eq!(got, expected);
    assert!(matches!(ending, Ending::Complete { .. }), "{ending:?}");
    let mut stored = write(CaptureWriter::new(Vec::new(), &header(), Compression::None).unwrap());
    assert_eq!(batch_tags(&stored), [TAG_BATCH]);
    for version in [
        VERSION,
        LZ4_BLOCKS_VERSION,
        ZSTD_BLOCKS_VERSION,
        BLOCKS_16K_VERSION,
    ] {
        stored[8] = version as u8;
        let (got, ending) = read(&stored);
        assert_eq!(got, expected, "version {version}");
        assert!(matches!(ending, Ending::Complete { .. }), "{ending:?}");
    }
}

/// The tags of a capture's BATCH records, as its blocks store them
/// (decompressed, not decoded), in order.
fn batch_tags(capture: &[u8]) -> Vec<u8> {
    let mut reader = Reader::open(capture).unwrap();
    let mut tags = Vec::new();
    while let Some(block) = reader.take_block().unwrap() {
        let payload = block.payload().unwrap();
        let mut pos = 0;
        // The events around the batch are few and small: a batch record
        // is found by its tag, its length and its kind.
        let kind_at = std::mem::offset_of!(RecordHeader, kind);
        while pos < payload.len() {
            let tag = payload[pos];
            if matches!(tag, TAG_BATCH | TAG_BATCH_DELTAS) {
                let mut at = pos + 1;
                let len = super::varint::get(&payload, &mut at).unwrap() as usize;
                let batch = payload.get(at..at + len).filter(|r| r.len() > kind_at);
                if batch.is_some_and(|r| r[kind_at] == styx_common::batch::BATCH_RECORD_KIND) {
                    tags.push(tag);
                    pos = at + len;
                    continue;
                }
            }
            pos += 1;
        }
    }
    tags
}

/// A capture written before writers checked batches could hold one whose
/// head's counts add up while an item has no kind (a hostile process's):
/// reading skips it, counts it, and reads every record after it.
#[test]
fn a_malformed_batch_stored_whole_is_skipped_and_counted() {
    use styx_common::item::TIME_TAG;
    let events = events();
    let usdt = Names::new(&header());
    let good = batch_record(3);
    // A time mark, then an item of a tag no batch holds, as the forged
    // batch of issue 25.
    let mut forged = batch_record(1);
    let tid_at = std::mem::offset_of!(RecordHeader, tid);
    forged[tid_at..tid_at + 4].copy_from_slice(&10u32.to_le_bytes());
    let fixed = std::mem::size_of::<styx_common::batch::BatchRecord>();
    forged[fixed + 10..fixed + 12].copy_from_slice(&0xffffu16.to_le_bytes());
    assert_eq!(
        crate::record::batch_items::counts(
            &forged,
            styx_common::item::Codec::Current,
            &Default::default()
        ),
        None
    );
    let first_tag = u16::from_le_bytes(forged[fixed..][..2].try_into().unwrap());
    assert_eq!(first_tag, TIME_TAG);

    let mut writer = CaptureWriter::version_2(Vec::new(), &header()).unwrap();
    for e in &events[..3] {
        writer.event(e).unwrap();
    }
    writer.batch(&forged, 0).unwrap();
    writer.batch(&good, 3).unwrap();
    for e in &events[3..] {
        writer.event(e).unwrap();
    }
    writer.flush().unwrap();
    let bytes = writer.into_inner();

    let (got, reader) = read_to_end(&bytes);
    let all = lines(&events, &usdt);
    assert_eq!(got.len(), events.len() + 3);
    assert_eq!(got[..3], all[..3]);
    assert_eq!(got[6..], all[3..]);
    assert_eq!(reader.malformed_batches, 1);
    let (offset, error) = reader.first_malformed_batch.unwrap();
    assert_eq!(error.to_string(), "batch item 10 has unknown tag 0xffff");
    // The offset of its record: tag, length (two bytes), the record.
    let at = offset as usize;
    assert_eq!(bytes[at], TAG_BATCH);
    assert_eq!(bytes[at + 3..][..forged.len()], forged[..]);
}

/// A BATCH_DELTAS record whose items are not of one type (no writer codes
/// such a batch: a damaged or forged capture) is skipped and counted, and
/// the records after it are read.
#[test]
fn a_delta_coded_batch_not_of_one_type_is_skipped_and_counted() {
    let events = events();
    let usdt = Names::new(&header());
    // Its third event's tag made one no batch holds.
    let mut forged = batch_record(3);
    let third = std::mem::size_of::<styx_common::batch::BatchRecord>() + 10 + 2 * 19;
    forged[third..third + 2].copy_from_slice(&0xffffu16.to_le_bytes());
    let mut counts = [0u64; 16];
    for e in &events {
        counts[e.kind as usize] += 1;
    }
    let mut writer = CaptureWriter::new(Vec::new(), &header(), Compression::None).unwrap();
    write_with_batch(&mut writer, &events, &forged, 3);
    let totals = Totals {
        events: &counts,
        drops: &[0u64; 16],
    };
    writer.finish(&totals).unwrap();
    let mut bytes = writer.into_inner();
    // Stored as it is: tag, length (two bytes), the record; retagged.
    let at = bytes
        .windows(forged.len())
        .position(|w| w == forged)
        .unwrap();
    assert_eq!(bytes[at - 3], TAG_BATCH);
    bytes[at - 3] = TAG_BATCH_DELTAS;

    let (got, reader) = read_to_end(&bytes);
    assert_eq!(got, lines(&events, &usdt));
    assert_eq!(
        (reader.malformed_batches, reader.delta_coded_batches),
        (1, 1)
    );
    let (_, error) = reader.first_malformed_batch.unwrap();
    assert_eq!(
        error.to_string(),
        "delta coded batch item at 48 is not of the batch's one type"
    );
}

/// A capture of format version 1 (batch items a `u64` per value) reads as
/// it did: its batches' events with their values.
#[test]
fn version_one_captures_read_their_batches() {
    use styx_common::batch::{BatchHead, BatchRecord, BATCH_RECORD_KIND};
    let words: [u64; 8] = [
        0,
        5_000,
        EventKind::InsnExec as u64 | 4 << 8,
        0x600,
        0x13,
        2,
        0x700,
        0x93,
    ];
    let fixed = BatchRecord {
        header: RecordHeader {
            ts_ns: 5_100,
            pid: 42,
            tid: 9,
            kind: BATCH_RECORD_KIND,
            ..RecordHeader::default()
        },
        head: BatchHead::default(),
        start: 0,
        len: 64,
    };
    let mut record = bytemuck::bytes_of(&fixed).to_vec();
    for word in words {
        record.extend_from_slice(&word.to_le_bytes());
    }
    let mut writer = CaptureWriter::version_2(Vec::new(), &header()).unwrap();
    writer.batch(&record, 2).unwrap();
    writer.flush().unwrap();
    let mut bytes = writer.into_inner();
    assert_eq!(bytes[8], 2);
    bytes[8] = 1;
    let mut reader = Reader::open(&bytes[..]).unwrap();
    let mut got = Vec::new();
    while let Some(event) = reader.next().unwrap() {
        let Body::Args(args) = event.body else {
            panic!("not an argument event")
        };
        got.push((event.kind, event.header.aux, args[0], args[1]));
    }
    assert_eq!(
        got,
        [
            (EventKind::InsnExec, 4, 0x600, 0x13),
            (EventKind::InsnExec, 0, 0x700, 0x93)
        ]
    );
    assert_eq!(reader.malformed_batches, 0);
}

/// The blocks of a version 3 capture: (offset, frame bytes + stored bytes,
/// events), walked from its frames.
fn blocks_of(bytes: &[u8]) -> Vec<(usize, usize, u64)> {
    let mut at = 16 + u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let mut out = Vec::new();
    while at < bytes.len() {
        let frame = blocks::Frame::parse(bytes[at..at + 16].try_into().unwrap()).unwrap();
        let len = blocks::FRAME_BYTES + frame.stored_len;
        out.push((at, len, frame.events));
        at += len;
    }
    assert_eq!(at, bytes.len());
    out
}

/// Each way of storing blocks writes its codec, every block of it when the
/// workers are waited for however long they take (a loaded machine may
/// give them no CPU for longer than the writer waits): 1 zstd, 2 lz4, 0
/// as encoded.
#[test]
fn each_compression_writes_blocks_of_its_codec() {
    let events = many_events();
    for (compression, codec) in [
        (Compression::Zstd, 1u8),
        (Compression::Lz4, 2),
        (Compression::None, 0),
    ] {
        let writer = CaptureWriter::patient(Vec::new(), &header(), compression).unwrap();
        let bytes = finished(writer, &events);
        let codecs: std::collections::BTreeSet<u8> = blocks_of(&bytes)
            .iter()
            .map(|&(at, _, _)| bytes[at])
            .collect();
        assert_eq!(codecs, [codec].into(), "{compression:?}");
    }
}

#[test]
fn a_capture_cut_in_a_block_reads_its_whole_blocks_and_says_what_it_lost() {
    let events = many_events();
    let want = lines(&events, &Names::new(&header()));
    for bytes in [write(&events), write_lz4(&events), write_stored(&events)] {
        let blocks = blocks_of(&bytes);
        assert!(blocks.len() >= 3, "{} blocks", blocks.len());
        let total: u64 = blocks.iter().map(|b| b.2).sum();
        assert_eq!(total, events.len() as u64, "the frames count every event");
        // Inside the last block with events (the END record's block may
        // be its own, after it), inside the frame of one, and at its start.
        let (at, len, lost) = blocks[blocks.len() - 2];
        for (cut, lost_events) in [(at + len / 2, Some(lost)), (at + 7, None), (at, None)] {
            let (got, ending) = read(&bytes[..cut]);
            assert_eq!(got.len() as u64, total - lost - blocks.last().unwrap().2);
            assert_eq!(got[..], want[..got.len()]);
            assert_eq!(
                ending,
                Ending::CutShort {
                    offset: at as u64,
                    partial: cut - at,
                    lost_events,
                },
                "cut at {cut}"
            );
        }
    }
}

#[test]
fn blocks_claiming_more_than_any_block_are_refused_before_allocating() {
    let bytes = write(&many_events());
    let (at, _, _) = blocks_of(&bytes)[1];
    for (field, value) in [(4, u32::MAX), (8, u32::MAX), (8, 7), (0, 9)] {
        let mut bad = bytes.clone();
        bad[at + field..at + field + 4].copy_from_slice(&value.to_le_bytes());
        if field == 0 {
            bad[at] = value as u8;
        }
        let mut reader = Reader::open(&bad[..]).unwrap();
        let err = loop {
            match reader.next() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("field {field} = {value}: read to the end"),
                Err(e) => break e.to_string(),
            }
        };
        assert!(
            err.starts_with(&format!("corrupt record at byte {at}: ")),
            "{err}"
        );
    }
}

#[test]
fn blocks_read_apart_give_the_events_read_in_a_row() {
    let events = many_events();
    let want = lines(&events, &Names::new(&header()));
    let bytes = write(&events);
    let mut frames = Reader::open(&bytes[..]).unwrap();
    let mut blocks = Vec::new();
    while let Some(block) = frames.take_block().unwrap() {
        blocks.push(block);
    }
    // The frames alone do not say the END record is in the last block.
    let end = Ending::CutShort {
        offset: bytes.len() as u64,
        partial: 0,
        lost_events: None,
    };
    assert_eq!(frames.ending, end);
    // The last block first: each decodes on its own.
    let mut parts = Vec::new();
    let mut reader = Reader::<&[u8]>::for_blocks(header()).unwrap();
    let usdt = Names::new(&header());
    for block in blocks.into_iter().rev() {
        reader.load(block).unwrap();
        let mut part = Vec::new();
        while let Some(e) = reader.next().unwrap() {
            let mut line = ByteBuf::default();
            jsonl(&mut line, &e, &usdt, &mut Repeats::default());
            part.push(String::from_utf8(line.as_slice().to_vec()).unwrap());
        }
        parts.push(part);
        // The END record is in the last block.
        assert_eq!(
            matches!(reader.ending, Ending::Complete { .. }),
            parts.len() == 1
        );
    }
    parts.reverse();
    assert!(parts.concat() == want);
}

/// Compressing workers that never get the CPU (a busy machine: they run
/// at `SCHED_IDLE`) hold nothing up: the blocks handed to them are stored
/// instead once more are pending than the pool keeps, or at the end; every
/// block is written, in order, and the capture reads back whole.
#[test]
fn blocks_the_workers_never_compress_are_stored_in_order() {
    let n = 2_400_000u64;
    let events: Vec<Event<'static>> = (0..n)
        .map(|i| {
            let args = [0x400 + i % 300, 0x8000 + i * 13 % 5000, i & 0xff, 0];
            event(1_000 + i * 7, 7, EventKind::MemRead, 1, Body::Args(args))
        })
        .collect();
    let bytes = finished(
        CaptureWriter::never_compressed(Vec::new(), &header()).unwrap(),
        &events,
    );
    let blocks = blocks_of(&bytes);
    assert!(
        blocks.len() > blocks::MAX_IN_FLIGHT,
        "{} blocks",
        blocks.len()
    );
    for &(at, len, _) in &blocks {
        let frame = blocks::Frame::parse(bytes[at..at + 16].try_into().unwrap()).unwrap();
        assert_eq!(frame.stored_len, frame.payload_len, "block at {at}");
        assert_eq!(len, blocks::FRAME_BYTES + frame.payload_len);
    }
    assert_eq!(blocks.iter().map(|b| b.2).sum::<u64>(), n);
    let mut reader = Reader::open(&bytes[..]).unwrap();
    let mut at = 0u64;
    while let Some(e) = reader.next().unwrap() {
        assert_eq!(e.header.ts_ns, 1_000 + at * 7, "event {at}");
        at += 1;
    }
    assert_eq!(at, n);
    assert!(matches!(reader.ending, Ending::Complete { events, .. } if events == n));
}

/// Workers several blocks behind the loader. While the emulator waits for
/// the loader (`--on-full wait`, the default into a file), `auto` stores a
/// block handed over past [`blocks::COMPRESS_BEHIND`] only while the
/// capture stays within [`blocks::STORED_BUDGET`] bytes an event, the
/// others going to the workers and the loader waiting for them, and `zstd`
/// compresses every block. While it does not, the blocks handed over past
/// [`blocks::COMPRESS_BEHIND`] are stored at once, and every block while
/// the loader is behind the ring (`EventWriter::behind`: the workers leave
/// the CPU to it).
#[test]
fn with_the_emulator_waiting_blocks_are_stored_only_within_the_budget() {
    let per_block = 20_000;
    let events: Vec<Event<'static>> = (0..per_block as u64 * 6)
        .map(|i| {
            let args = [0x400 + i % 300, 0x8000 + i * 13 % 5000, i & 0xff, 0];
            event(1_000 + i * 7, 7, EventKind::MemRead, 1, Body::Args(args))
        })
        .collect();
    let cases = [
        (true, false, Compression::Auto),
        (true, true, Compression::Auto),
        (true, false, Compression::Zstd),
        (false, false, Compression::Auto),
        (false, true, Compression::Auto),
    ];
    for (emulator_waits, behind, compression) in cases {
        let (open, held) = crossbeam_channel::bounded::<()>(0);
        let mut writer = CaptureWriter::with_held_worker(Vec::new(), &header(), held, compression)
            .unwrap()
            .waiting_for_compression(emulator_waits);
        if behind {
            writer.behind();
        }
        for (i, e) in events.iter().enumerate() {
            writer.event(e).unwrap();
            if i % per_block == per_block - 1 {
                writer.cut_block().unwrap();
            }
        }
        drop(open);
        let mut counts = [0u64; 16];
        counts[EventKind::MemRead as usize] = events.len() as u64;
        let totals = Totals {
            events: &counts,
            drops: &[0; 16],
        };
        writer.finish(&totals).unwrap();
        let bytes = writer.into_inner();
        // The six blocks of events; the last holds the END record.
        let frames: Vec<blocks::Frame> = blocks_of(&bytes)[..6]
            .iter()
            .map(|&(at, _, _)| {
                blocks::Frame::parse(bytes[at..at + 16].try_into().unwrap()).unwrap()
            })
            .collect();
        let compressed: Vec<bool> = frames
            .iter()
            .map(|frame| frame.stored_len < frame.payload_len)
            .collect();
        let want: Vec<bool> = match (emulator_waits, behind, compression) {
            (true, _, Compression::Auto) => {
                // The held worker answers nothing before the end: the
                // budget counts the stored blocks' bytes against every
                // event handed over.
                let (mut events, mut stored) = (0, 0);
                let mut at_workers = 0;
                frames
                    .iter()
                    .map(|frame| {
                        events += frame.events;
                        let bytes = (blocks::FRAME_BYTES + frame.payload_len) as u64;
                        let store = at_workers >= blocks::COMPRESS_BEHIND
                            && stored + bytes <= blocks::STORED_BUDGET * events;
                        match store {
                            true => stored += bytes,
                            false => at_workers += 1,
                        }
                        !store
                    })
                    .collect()
            }
            (true, _, _) => vec![true; 6],
            (false, false, _) => (0..6).map(|i| i < blocks::COMPRESS_BEHIND).collect(),
            (false, true, _) => vec![false; 6],
        };
        let case = format!(
            "the emulator waits: {emulator_waits}, the loader behind: {behind}, {compression:?}"
        );
        assert_eq!(compressed, want, "{case}");
        if emulator_waits && compression == Compression::Auto {
            // These blocks (~6 bytes an event as encoded) leave room in the
            // budget for some of them, not all.
            let stored = compressed[blocks::COMPRESS_BEHIND..]
                .iter()
                .filter(|c| !**c)
                .count();
            assert!(
                stored > 0 && stored < 6 - blocks::COMPRESS_BEHIND,
                "{case}: {compressed:?}"
            );
        }
        assert_eq!(read(&bytes).0.len(), events.len());
    }
}

/// A capture of `events` in blocks of `per_block` events, stored as
/// they are (so a test can spoil a record in place).
fn write_in_blocks(events: &[Event<'_>], per_block: usize) -> Vec<u8> {
    let mut writer = CaptureWriter::new(Vec::new(), &header(), Compression::None).unwrap();
    let mut counts = [0u64; 16];
    for (i, e) in events.iter().enumerate() {
        writer.event(e).unwrap();
        counts[e.kind as usize] += 1;
        if i % per_block == per_block - 1 {
            writer.cut_block().unwrap();
        }
    }
    let drops = [0u64; 16];
    let totals = Totals {
        events: &counts,
        drops: &drops,
    };
    writer.finish(&totals).unwrap();
    writer.into_inner()
}

/// An output format as `read` makes it, Parquet in row groups of at
/// most `groups.0` rows and `groups.1` bytes of strings.
#[derive(Clone, Copy, Debug)]
enum Made {
    Lines(crate::Format),
    Parquet(usize, usize),
}

impl Made {
    /// The output's writer on `out`; Parquet's encoder on a thread of its
    /// own when `threads` > 1, as `read --threads` has it.
    fn writer(self, out: SharedOutput, threads: usize) -> Box<dyn EventWriter> {
        let options = crate::Options::default();
        match self {
            Made::Lines(format) => {
                crate::open_stream(format, Box::new(out), &header(), &options).unwrap()
            }
            Made::Parquet(rows, text) => {
                let output = crate::Output::Stdout;
                let roll = crate::formats::ROLL_BYTES;
                let writer = crate::formats::parquet::ParquetWriter::new(
                    Box::new(out),
                    &header(),
                    &output,
                    roll,
                    threads,
                )
                .unwrap();
                Box::new(writer.with_groups(rows, text))
            }
        }
    }

    fn format(self) -> crate::Format {
        match self {
            Made::Lines(format) => format,
            Made::Parquet(..) => crate::Format::Parquet,
        }
    }
}

/// The bytes written, the error if any, the events read, how the capture
/// ended and the delta coded batches read.
type ReadBack = (Vec<u8>, Option<String>, u64, Ending, u64);

/// What `read` writes of `capture` reading it in a row (to a writer
/// made for `threads`) and on `workers` (to one made for 2): the bytes
/// finished when the capture reads to its end, else flushed, as `read`
/// does.
fn read_both_ways(capture: &[u8], made: Made, threads: usize, workers: usize) -> [ReadBack; 2] {
    let [(serial, _), (parallel, _)] =
        read_both_ways_cut(capture, made, threads, workers, &crate::Cut::default());
    [serial, parallel]
}

/// [`read_both_ways`] of the events `cut` keeps, with the cut as each
/// way leaves it and the events it kept.
fn read_both_ways_cut(
    capture: &[u8],
    made: Made,
    threads: usize,
    workers: usize,
    cut: &crate::Cut,
) -> [(ReadBack, (crate::Cut, [u64; 16])); 2] {
    let finish = |writer: &mut dyn EventWriter, error: &Option<String>, counts: &[u64; 16]| {
        let totals = Totals {
            events: counts,
            drops: &[0; 16],
        };
        match error {
            None => writer.finish(&totals).unwrap(),
            Some(_) => writer.flush().unwrap(),
        }
    };
    let serial = {
        let out = SharedOutput::default();
        let mut writer = made.writer(out.clone(), threads);
        let mut reader = Reader::open(capture).unwrap();
        let (mut cut, mut kept) = (cut.clone(), [0u64; 16]);
        let error = loop {
            match reader.next() {
                Ok(Some(event)) if !cut.keeps(&event) => {}
                Ok(Some(event)) => {
                    kept[event.kind as usize] += 1;
                    writer.event(&event).unwrap()
                }
                Ok(None) => break None,
                Err(e) => break Some(e.to_string()),
            }
        };
        finish(&mut *writer, &error, &kept);
        let bytes = out.bytes();
        let coded = reader.delta_coded_batches;
        let read = (bytes, error, reader.events, reader.ending, coded);
        (read, (cut, kept))
    };
    let parallel = {
        let out = SharedOutput::default();
        let mut writer = made.writer(out.clone(), 2);
        let mut reader = Reader::open(capture).unwrap();
        let options = crate::Options::default();
        let make = || Ok(crate::open_block_formatter(made.format(), &header(), &options).unwrap());
        let mut cut = cut.clone();
        let (kept, error) = match read_blocks(&mut reader, workers, &mut cut, &make, &mut *writer) {
            Ok(kept) => (kept, None),
            Err(e) => ([0; 16], Some(e.to_string())),
        };
        finish(&mut *writer, &error, &kept);
        let bytes = out.bytes();
        let coded = reader.delta_coded_batches;
        let read = (bytes, error, reader.events, reader.ending, coded);
        (read, (cut, kept))
    };
    [serial, parallel]
}

/// The row groups of a Parquet file: rows in each.
fn row_groups(file: &[u8]) -> Vec<i64> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let reader = SerializedFileReader::new(bytes::Bytes::from(file.to_vec())).unwrap();
    let groups = reader.metadata().row_groups();
    groups.iter().map(|g| g.num_rows()).collect()
}

/// What every format that formats apart makes: the line formats, and
/// Parquet's rows cut into row groups where one thread cuts them, by
/// rows or by bytes of strings, inside blocks and across them.
fn formats_apart() -> [Made; 6] {
    [
        Made::Lines(crate::Format::Jsonl),
        Made::Lines(crate::Format::Text),
        Made::Parquet(ROW_GROUP_ROWS, ROW_GROUP_TEXT_BYTES),
        Made::Parquet(1000, ROW_GROUP_TEXT_BYTES),
        Made::Parquet(25_000, ROW_GROUP_TEXT_BYTES),
        Made::Parquet(5000, 2000),
    ]
}

/// Mostly `mem_read`s: a type's rows of a row group in several blocks
/// and pages (Parquet ends a page after 20,000 rows at most).
fn long_runs() -> Vec<Event<'static>> {
    let base = many_events();
    (0..200_000u64)
        .map(|i| match i % 10 {
            0 => clone_event(&base[i as usize / 10]),
            _ => event(
                2_000_000 + i * 100,
                7,
                EventKind::MemRead,
                8,
                Body::Args([0x1000 + i % 4096, 0x4000 + i * 8, i * i, 0]),
            ),
        })
        .collect()
}

#[test]
fn blocks_read_in_parallel_give_the_serial_output_in_every_format_apart() {
    // Small blocks, their rows gathered into a group's last piece.
    blocks_in_parallel_give_the_serial_output(&many_events(), 997, &formats_apart());
    // Blocks of many rows, handed to the encoder as they are: each type's
    // rows of a column in several runs.
    let whole_blocks = [
        Made::Parquet(100_000, ROW_GROUP_TEXT_BYTES),
        Made::Parquet(ROW_GROUP_ROWS, ROW_GROUP_TEXT_BYTES),
    ];
    blocks_in_parallel_give_the_serial_output(&long_runs(), 15_000, &whole_blocks);
}

/// `read -e`, `--from` and `--to` in parallel: the workers keep the
/// events of the cut, and the output, the events kept and what the cut
/// saw (its events left out, the capture's first and latest times) are
/// the serial read's. Windows count from the first event or are absolute.
#[test]
fn cuts_read_in_parallel_as_in_a_row() {
    use crate::Bound::{AfterFirst, At};
    let events = many_events();
    let capture = write_in_blocks(&events, 997);
    let mut mem_and_usdt = crate::Types::default();
    mem_and_usdt.add_kind(EventKind::MemRead);
    mem_and_usdt.add_site(0);
    let mut none_here = crate::Types::default();
    none_here.add_kind(EventKind::Block);
    // (from, to, types, whether some events are kept)
    let cuts = [
        (None, None, Some(mem_and_usdt.clone()), true),
        (None, None, Some(none_here), false),
        (
            Some(AfterFirst(5_000_000)),
            Some(AfterFirst(20_000_000)),
            None,
            true,
        ),
        (Some(At(10_000_000)), None, None, true),
        (None, Some(AfterFirst(3_000_000)), Some(mem_and_usdt), true),
        (Some(AfterFirst(100_000_000)), None, None, false),
    ];
    let times = events.iter().map(|e| e.header.ts_ns);
    let span = Some((events[0].header.ts_ns, times.max().unwrap()));
    for (from, to, types, some_kept) in cuts {
        let cut = crate::Cut::new(from, to, types);
        for made in formats_apart() {
            for workers in [1, 3] {
                let [(serial, (serial_cut, serial_kept)), (parallel, (parallel_cut, kept))] =
                    read_both_ways_cut(&capture, made, 1, workers, &cut);
                let case = format!("{made:?} on {workers}, {cut:?}");
                assert_eq!(serial.1, None, "{case}");
                assert_eq!(serial.2, events.len() as u64);
                let kept_in_all: u64 = serial_kept.iter().sum();
                assert_eq!(kept_in_all > 0, some_kept, "{case}");
                assert!(kept_in_all < serial.2);
                assert!(serial.0 == parallel.0, "{case}: bytes differ");
                assert_eq!((serial.2, &serial.3), (parallel.2, &parallel.3));
                assert_eq!(serial_kept, kept, "{case}");
                assert_eq!(serial_cut.left_out, parallel_cut.left_out, "{case}");
                assert_eq!(serial_cut.span(), span);
                assert_eq!(parallel_cut.span(), span, "{case}");
            }
        }
    }
}

fn blocks_in_parallel_give_the_serial_output(
    events: &[Event<'_>],
    per_block: usize,
    formats: &[Made],
) {
    let capture = write_in_blocks(events, per_block);
    assert!(blocks_of(&capture).len() >= events.len() / per_block);
    for &made in formats {
        for workers in [1, 3] {
            let [serial, parallel] = read_both_ways(&capture, made, 1, workers);
            assert_eq!(serial.1, None, "{made:?}");
            assert_eq!(serial.2, events.len() as u64);
            assert!(
                serial.0 == parallel.0,
                "{made:?} on {workers}: bytes differ"
            );
            assert_eq!(serial.1, parallel.1);
            assert_eq!((serial.2, &serial.3), (parallel.2, &parallel.3));
        }
        if let Made::Parquet(rows, text) = made {
            let groups = row_groups(&serial_bytes(&capture, made));
            assert_eq!(groups.iter().sum::<i64>(), events.len() as i64);
            let (last, before) = groups.split_last().unwrap();
            let full = before.iter().all(|&n| n as usize == rows) && *last as usize <= rows;
            match (rows, text) {
                (ROW_GROUP_ROWS, _) => assert_eq!(groups.len(), 1),
                // Cut by rows, the last group what is left.
                (_, ROW_GROUP_TEXT_BYTES) => {
                    assert!(
                        full && groups.len() == events.len().div_ceil(rows),
                        "{groups:?}"
                    )
                }
                // Cut by strings, before the rows are full.
                _ => assert!(groups.len() > 2 * events.len() / rows, "{groups:?}"),
            }
        }
    }
}

/// Parallel `read` of Parquet hands its workers runs of a row group's
/// events, cut by the blocks' frames, and each row group comes encoded
/// whole. A frame that says other than its block holds (a spoilt or
/// hostile capture: the reader does not need it) makes that run and the
/// rest read block by block: the output is still the serial one, also
/// for a frame that lies by more than a run.
#[test]
fn parquet_row_groups_come_whole_from_the_workers_unless_a_frame_lies() {
    use crate::formats::parquet::ParquetWriter;
    let events = many_events();
    let capture = write_in_blocks(&events, 997);
    let rows = 1000;
    let made = Made::Parquet(rows, ROW_GROUP_TEXT_BYTES);
    let serial = serial_bytes(&capture, made);
    let full_groups = (events.len() / rows) as u64;
    let in_runs = |capture: &[u8], workers: usize, text: usize, events: usize| {
        let out = SharedOutput::default();
        let (output, roll) = (crate::Output::Stdout, crate::formats::ROLL_BYTES);
        let writer = ParquetWriter::new(Box::new(out.clone()), &header(), &output, roll, 2);
        let mut writer = writer.unwrap().with_groups(rows, text);
        let mut reader = Reader::open(capture).unwrap();
        let options = crate::Options::default();
        let make = || Ok(crate::open_block_formatter(made.format(), &header(), &options).unwrap());
        let mut cut = crate::Cut::default();
        let kept = read_blocks(&mut reader, workers, &mut cut, &make, &mut writer).unwrap();
        assert_eq!(kept.iter().sum::<u64>(), events as u64);
        assert_eq!(reader.events, events as u64);
        let totals = Totals {
            events: &kept,
            drops: &[0; 16],
        };
        writer.finish(&totals).unwrap();
        (out.bytes(), writer.groups_from_runs())
    };
    for workers in [1, 3] {
        let (bytes, whole) = in_runs(&capture, workers, ROW_GROUP_TEXT_BYTES, events.len());
        assert!(bytes == serial, "on {workers}: bytes differ");
        assert_eq!(whole, full_groups, "on {workers}");
    }
    // Strings that fill a group before its rows: read block by block.
    let (bytes, whole) = in_runs(&capture, 2, 2000, events.len());
    let text_cut = Made::Parquet(rows, 2000);
    assert!(bytes == serial_bytes(&capture, text_cut), "bytes differ");
    assert_eq!(whole, 0);
    // Runs that end amid a batch (delta coded or not), whose blocks a
    // worker may read twice: the end of one run, the start of the next.
    let batches = batches_in_blocks(40, 3);
    let batches_serial = serial_bytes(&batches, made);
    for workers in [1, 2] {
        let (bytes, whole) = in_runs(&batches, workers, ROW_GROUP_TEXT_BYTES, 40 * 600);
        assert!(
            bytes == batches_serial,
            "batches on {workers}: bytes differ"
        );
        assert_eq!(whole, 24, "batches on {workers}");
        // Read again block by block from a block whose frame lies, by
        // workers that read later runs.
        let (at, _, framed) = blocks_of(&batches)[7];
        let mut lying = batches.clone();
        lying[at + 12..at + 16].copy_from_slice(&(framed as u32 + 1).to_le_bytes());
        let (bytes, whole) = in_runs(&lying, workers, ROW_GROUP_TEXT_BYTES, 40 * 600);
        assert!(
            bytes == batches_serial,
            "lying batches on {workers}: bytes differ"
        );
        assert!(
            (12..=14).contains(&whole),
            "lying batches on {workers}: {whole} whole"
        );
    }
    let blocks = blocks_of(&capture);
    let middle = blocks.len() / 2;
    for (block, lie) in [
        (0, 1),
        (middle, -1),
        (middle, 1),
        (middle, 5000),
        // Billions of events: runs made one at a time as handed out.
        (middle, u32::MAX as i64 - 997),
        (blocks.len() - 2, -997),
    ] {
        let (at, _, framed) = blocks[block];
        let mut lying = capture.clone();
        let said = (framed as i64 + lie) as u32;
        lying[at + 12..at + 16].copy_from_slice(&said.to_le_bytes());
        let (bytes, whole) = in_runs(&lying, 2, ROW_GROUP_TEXT_BYTES, events.len());
        let case = format!("block {block} of {}, {lie:+} events", blocks.len());
        assert!(bytes == serial, "{case}: bytes differ");
        // The runs before it came whole (and one it ends, if it holds
        // that run's last events), the rest not.
        let (starts, ends) = (
            (block * 997 / rows) as u64,
            ((block + 1) * 997 / rows) as u64,
        );
        assert!(
            starts <= whole + 1 && whole <= ends,
            "{case}: {whole} whole"
        );
    }
    // Every frame claiming no event: one run would be the whole capture.
    let mut none_said = capture.clone();
    for (at, _, _) in &blocks {
        none_said[at + 12..at + 16].copy_from_slice(&0u32.to_le_bytes());
    }
    let (bytes, whole) = in_runs(&none_said, 2, ROW_GROUP_TEXT_BYTES, events.len());
    assert!(bytes == serial, "no events said: bytes differ");
    assert_eq!(whole, 0);
}

/// A capture of `batches` batch records of 600 `insn_exec`s each, the
/// thread's batches 0, 1, … (the same batch twice is given once),
/// `per_block` to a block, by workers that delta code them.
fn batches_in_blocks(batches: u64, per_block: u64) -> Vec<u8> {
    let mut writer = CaptureWriter::patient(Vec::new(), &header(), Compression::Zstd).unwrap();
    let seq_at = std::mem::offset_of!(styx_common::batch::BatchRecord, head)
        + std::mem::offset_of!(styx_common::batch::BatchHead, seq);
    for seq in 0..batches {
        let mut record = batch_record(600);
        record[seq_at..seq_at + 8].copy_from_slice(&seq.to_le_bytes());
        writer.batch(&record, 600).unwrap();
        if seq % per_block == per_block - 1 {
            writer.cut_block().unwrap();
        }
    }
    let mut counts = [0u64; 16];
    counts[EventKind::InsnExec as usize] = batches * 600;
    let totals = Totals {
        events: &counts,
        drops: &[0u64; 16],
    };
    writer.finish(&totals).unwrap();
    writer.into_inner()
}

/// A capture of delta coded batches (one type's events, several blocks)
/// reads in parallel as in a row: the same bytes in every format apart,
/// and every coded batch counted.
#[test]
fn delta_coded_batches_read_in_parallel_as_in_a_row() {
    let capture = batches_in_blocks(6, 1);
    assert_eq!(batch_tags(&capture), [TAG_BATCH_DELTAS; 6]);
    for made in formats_apart() {
        let [serial, parallel] = read_both_ways(&capture, made, 1, 3);
        assert_eq!((serial.1.as_deref(), serial.2, serial.4), (None, 3600, 6));
        assert!(serial.0 == parallel.0, "{made:?}: bytes differ");
        assert_eq!(
            (serial.2, &serial.3, serial.4),
            (parallel.2, &parallel.3, parallel.4)
        );
    }
}

fn serial_bytes(capture: &[u8], made: Made) -> Vec<u8> {
    let [serial, _] = read_both_ways(capture, made, 1, 1);
    serial.0
}

/// A window counted from the first event, read in parallel, of a capture
/// whose first block is spoilt (before its first event or after it) or
/// cut short: the first block decoded to find that event meets what a
/// serial read meets, and the output, error and cut are the serial ones.
#[test]
fn a_window_of_a_capture_spoilt_at_its_start_reads_in_parallel_as_in_a_row() {
    let events = many_events();
    let capture = write_in_blocks(&events[..20_000], 997);
    let (at, len, _) = blocks_of(&capture)[0];
    let start = at + super::blocks::FRAME_BYTES;
    let mut captures = Vec::new();
    for (i, byte) in [(1, 0xff), (len / 3, 0x10), (len - 20, 0x0f)] {
        let mut spoilt = capture.clone();
        spoilt[start + i] = byte;
        captures.push(spoilt);
    }
    captures.push(capture[..start + len / 2].to_vec());
    let cut = crate::Cut::new(Some(crate::Bound::AfterFirst(100_000)), None, None);
    let mut errors = 0;
    for (n, spoilt) in captures.iter().enumerate() {
        for made in formats_apart() {
            let [(serial, (serial_cut, serial_kept)), (parallel, (parallel_cut, kept))] =
                read_both_ways_cut(spoilt, made, 2, 2, &cut);
            assert!(
                serial.0 == parallel.0,
                "{made:?}, capture {n}: bytes differ"
            );
            assert_eq!(serial.1, parallel.1, "{made:?}, capture {n}");
            assert_eq!((serial.2, &serial.3), (parallel.2, &parallel.3));
            // A failed read's counts are not returned (`read` reports the fault).
            if serial.1.is_none() {
                assert_eq!(serial_kept, kept);
            }
            assert_eq!(serial_cut.span(), parallel_cut.span(), "capture {n}");
            assert_eq!(serial_cut.left_out, parallel_cut.left_out);
            errors += serial.1.is_some() as usize;
        }
    }
    assert!(errors > 0, "no spoilt record was found out");
}

/// A capture whose records are spoilt, one at a time, in a middle
/// block: in parallel, the serial output, the same error (or none) and
/// the same ending, in every format apart. (Parquet's writer for two
/// threads in both: a failed read ends without waiting for the row
/// groups being encoded, which one made for one thread has written.)
#[test]
fn a_spoilt_block_read_in_parallel_gives_the_serial_output_and_error() {
    let events = many_events();
    let capture = write_in_blocks(&events[..20_000], 997);
    let blocks = blocks_of(&capture);
    let (at, len, _) = blocks[blocks.len() / 2];
    let mut errors = 0;
    for (i, byte) in [
        (1, 0xff),
        (len / 3, 0x10),
        (len / 2, 0xff),
        (len - 20, 0x0f),
    ] {
        let mut spoilt = capture.clone();
        spoilt[at + super::blocks::FRAME_BYTES + i] = byte;
        for made in formats_apart() {
            let [serial, parallel] = read_both_ways(&spoilt, made, 2, 2);
            assert!(serial.0 == parallel.0, "{made:?}, byte {i}: bytes differ");
            assert_eq!(serial.1, parallel.1, "{made:?}, byte {i}");
            assert_eq!((serial.2, &serial.3), (parallel.2, &parallel.3));
            errors += serial.1.is_some() as usize;
        }
    }
    assert!(errors > 0, "no spoilt record was found out");
}
