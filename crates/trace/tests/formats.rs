//! Importers on real lines captured on Linux 6.18, the `.nvt` round trip,
//! and every kind of bad input.
//!
//! The fixtures in `tests/data/` are lines of `/sys/kernel/tracing/trace`,
//! `trace_pipe` and `perf script` captured while `gzip` ran; the expected
//! counts below were computed from them with an independent script.
//! `ftrace_pipe_noflags.txt` is `ftrace_pipe.txt` with the irqs-off column
//! removed, as printed with `options/irq-info` off.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use nvmos_frames::{MigrateType, Order, Pfn};
use nvmos_trace::nvt::{END_MAGIC, MAGIC, VERSION};
use nvmos_trace::{
    detect, open, Event, EventSource, Format, NvtReader, NvtWriter, Op, SourceCounts, TextReader,
    TraceError, TraceHeader, TraceInfo,
};
use proptest::prelude::*;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn info_of(name: &str) -> TraceInfo {
    let mut source = open(data(name)).unwrap();
    TraceInfo::from_source(&mut *source).unwrap()
}

#[test]
fn ftrace_trace_file_with_header() {
    let info = info_of("ftrace_trace.txt");
    assert_eq!(info.format, Format::Ftrace);
    assert_eq!((info.allocs, info.frees), (7, 43));
    assert_eq!(info.counts.batched_duplicates, 39);
    // The fixture cuts two batches between their two tracepoints.
    assert_eq!(info.counts.batched_unmatched, 2);
    assert_eq!(
        info.counts.skipped.get("mm_page_alloc_zone_locked"),
        Some(&3)
    );
    assert_eq!(info.counts.skipped_total(), 3);
    assert_eq!(info.counts.failed_allocs, 0);
}

#[test]
fn ftrace_pipe_with_and_without_flags() {
    let info = info_of("ftrace_pipe.txt");
    assert_eq!((info.allocs, info.frees), (41, 22));
    assert_eq!(info.counts.batched_duplicates, 8);
    let info = info_of("ftrace_pipe_noflags.txt");
    assert_eq!(info.format, Format::Ftrace);
    assert_eq!((info.allocs, info.frees), (30, 0));
    // The same lines with and without the flags column give the same events.
    let with: Vec<Event> = open(data("ftrace_pipe.txt"))
        .unwrap()
        .take(30)
        .map(Result::unwrap)
        .collect();
    let without: Vec<Event> = open(data("ftrace_pipe_noflags.txt"))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(with, without);
    assert_eq!(without[0].time_ns, 0);
    assert_eq!(without[1].time_ns, 1_194_629_184_000 - 1_194_629_002_000);
    assert_eq!(without[0].op, Op::Alloc(MigrateType::Reclaimable));
    assert_eq!(without[0].pfn, Pfn(0x1f8a3a));
    assert_eq!(without[0].order, Order::new(1).unwrap());
}

#[test]
fn perf_script() {
    let info = info_of("perf_script.txt");
    assert_eq!(info.format, Format::Perf);
    assert_eq!((info.allocs, info.frees), (50, 11));
    assert_eq!(info.counts.batched_duplicates, 2);
}

#[test]
fn detection() {
    assert_eq!(detect(b""), None);
    assert_eq!(detect(b"hello\nworld\n"), None);
    assert_eq!(detect(&MAGIC), Some(Format::Nvt));
    assert_eq!(detect(b"# tracer: nop\n#\n"), Some(Format::Ftrace));
    let err = open(data("meminfo.txt")).err().unwrap();
    assert!(matches!(err, TraceError::UnknownFormat { .. }), "{err}");
}

#[test]
fn trace_info_known_answers() {
    // Alloc a (order 2), free a; free b never allocated; alloc c order 3 and
    // free one of its frames (split); a failed alloc; another event.
    let text = "\
# tracer: nop
 a-1 [000] ..... 10.000000: mm_page_alloc: page=00000000deadbeef pfn=0x100 order=2 migratetype=1 gfp_flags=GFP_USER
 a-1 [001] ..... 10.000005: mm_page_free: page=00000000deadbeef pfn=0x100 order=2
 a-1 [001] ..... 10.000007: mm_page_free: page=00000000deadbeef pfn=0x204 order=0
 a-1 [000] ..... 10.000010: mm_page_alloc: page=00000000deadbeef pfn=0x208 order=3 migratetype=0 gfp_flags=GFP_KERNEL
 a-1 [003] ..... 10.000011: mm_page_free: page=00000000deadbeef pfn=0x20a order=0
 a-1 [000] ..... 10.000012: mm_page_alloc: page=0000000000000000 pfn=0x0 order=0 migratetype=1 gfp_flags=GFP_USER
 a-1 [000] ..... 10.000013: sched_switch: prev_comm=a
 a-1 [000] ..... 10.002010: mm_page_alloc: page=00000000deadbeef pfn=0x400 order=0 migratetype=2 gfp_flags=GFP_USER
";
    let mut r = TextReader::new(text.as_bytes(), "known.txt", Format::Ftrace);
    let info = TraceInfo::from_source(&mut r).unwrap();
    assert_eq!(info.events, 6);
    assert_eq!((info.allocs, info.frees), (3, 3));
    assert_eq!(info.cpus.keys().copied().collect::<Vec<_>>(), vec![0, 1, 3]);
    assert_eq!(info.alloc_orders[..4], [1, 0, 1, 1]);
    assert_eq!(info.free_orders[..3], [2, 0, 1]);
    assert_eq!(info.migratetypes["movable"], 1);
    assert_eq!(info.migratetypes["unmovable"], 1);
    assert_eq!(info.migratetypes["reclaimable"], 1);
    assert_eq!(info.duration_ns, 2_010_000);
    assert_eq!((info.pfn_min, info.pfn_max), (Some(0x100), Some(0x400)));
    assert_eq!(info.accounting.frees_before_recording, 1);
    assert_eq!(info.accounting.partial_frees, 1);
    assert_eq!(info.accounting.events_read, 6);
    assert_eq!(info.live_at_end, 2);
    assert_eq!(info.frames_allocated, 4 + 8 + 1);
    assert_eq!(info.counts.failed_allocs, 1);
    assert_eq!(info.counts.skipped.get("sched_switch"), Some(&1));
    // Serializable.
    let json = serde_json::to_string(&info).unwrap();
    let back: TraceInfo = serde_json::from_str(&json).unwrap();
    assert_eq!(back, info);
}

// ---- .nvt ----

fn header() -> TraceHeader {
    TraceHeader {
        command: vec!["make".into()],
        source: "test".into(),
        counts: SourceCounts {
            failed_allocs: 3,
            ..SourceCounts::default()
        },
        ..TraceHeader::default()
    }
}

fn write(events: &[Event]) -> Vec<u8> {
    let mut w = NvtWriter::new(Vec::new(), "t.nvt", header()).unwrap();
    for e in events {
        w.push(*e).unwrap();
    }
    let (bytes, summary) = w.finish().unwrap();
    assert_eq!(summary.events, events.len() as u64);
    assert_eq!(summary.bytes, bytes.len() as u64);
    bytes
}

fn read(bytes: &[u8]) -> Result<Vec<Event>, TraceError> {
    NvtReader::new(Cursor::new(bytes), "t.nvt")?.collect()
}

fn sample(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| Event {
            time_ns: i as u64 * 1000,
            cpu: (i % 3) as u32,
            op: if i % 2 == 0 {
                Op::Alloc(MigrateType::Movable)
            } else {
                Op::Free
            },
            pfn: Pfn(0x100000 + (i as u64 / 2) * 8),
            order: Order::new((i % 4) as u8).unwrap(),
        })
        .collect()
}

fn event_strategy() -> impl Strategy<Value = Event> {
    (
        // Any order of times; `.nvt` holds steps below 2^63 ns.
        0u64..(1 << 62),
        0u32..nvmos_trace::MAX_CPUS,
        0u8..4,
        0u64..(nvmos_trace::MAX_PFN - 1024),
        0u8..=10,
    )
        .prop_map(|(time_ns, cpu, op, pfn, order)| Event {
            time_ns,
            cpu,
            op: match op {
                0 => Op::Free,
                1 => Op::Alloc(MigrateType::Unmovable),
                2 => Op::Alloc(MigrateType::Movable),
                _ => Op::Alloc(MigrateType::Reclaimable),
            },
            pfn: Pfn(pfn),
            order: Order::new(order).unwrap(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn nvt_round_trip(events in prop::collection::vec(event_strategy(), 0..3000)) {
        let bytes = write(&events);
        let mut reader = NvtReader::new(Cursor::new(&bytes), "t.nvt").unwrap();
        prop_assert_eq!(reader.header().unwrap().events, events.len() as u64);
        let back: Vec<Event> = reader.by_ref().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(back, events);
        prop_assert_eq!(reader.counts().failed_allocs, 3);
    }

    /// Sorted times and clustered pfns, as real traces have.
    #[test]
    fn nvt_round_trip_realistic(steps in prop::collection::vec((0u64..5000, 0u32..4, -64i64..64, 0u8..3), 1..5000)) {
        let mut t = 0u64;
        let mut pfn = 0x200000i64;
        let events: Vec<Event> = steps.iter().map(|&(dt, cpu, dp, order)| {
            t += dt * 1000;
            pfn = (pfn + dp * 8).max(0);
            Event { time_ns: t, cpu, op: Op::Free, pfn: Pfn(pfn as u64), order: Order::new(order).unwrap() }
        }).collect();
        prop_assert_eq!(read(&write(&events)).unwrap(), events);
    }
}

#[test]
fn round_trip_across_blocks() {
    let events = sample(nvmos_trace::nvt::BLOCK_EVENTS * 2 + 17);
    let bytes = write(&events);
    assert_eq!(read(&bytes).unwrap(), events);
    // Regular events compress well below the 4 bytes/event target.
    assert!(bytes.len() < events.len(), "{} bytes", bytes.len());
}

#[test]
fn empty_trace() {
    let bytes = write(&[]);
    assert!(read(&bytes).unwrap().is_empty());
}

#[test]
fn writer_refuses_impossible_events() {
    let mut w = NvtWriter::new(Vec::new(), "t.nvt", header()).unwrap();
    let mut e = sample(1)[0];
    e.pfn = Pfn(nvmos_trace::MAX_PFN);
    let err = w.push(e).unwrap_err();
    assert!(err.to_string().contains("event #0"), "{err}");
}

#[test]
fn bad_magic() {
    let mut bytes = write(&sample(10));
    bytes[1] = b'X';
    let err = read(&bytes).unwrap_err();
    assert!(
        matches!(err, TraceError::BadMagic { offset: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().starts_with("t.nvt: "), "{err}");
}

#[test]
fn wrong_version() {
    let mut bytes = write(&sample(10));
    bytes[8..12].copy_from_slice(&(VERSION + 1).to_le_bytes());
    let err = read(&bytes).unwrap_err();
    assert!(
        matches!(err, TraceError::UnsupportedVersion { offset: 8, found, .. } if found == VERSION + 1),
        "{err}"
    );
}

#[test]
fn truncated_everywhere() {
    let bytes = write(&sample(5000));
    for cut in (0..bytes.len()).step_by(97).chain([bytes.len() - 1]) {
        let err = read(&bytes[..cut]).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("t.nvt: "), "cut {cut}: {text}");
        assert!(
            matches!(
                err,
                TraceError::Truncated { .. } | TraceError::BadMagic { .. }
            ),
            "cut {cut}: {text}"
        );
    }
    let err = read(&bytes[..bytes.len() - 1]).unwrap_err();
    assert!(
        err.to_string()
            .contains(&format!("offset {}", bytes.len() - 1)),
        "{err}"
    );
}

#[test]
fn flipped_byte_is_a_checksum_error_naming_the_offset() {
    let bytes = write(&sample(3 * nvmos_trace::nvt::BLOCK_EVENTS));
    let header_len = {
        let json = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        16 + json + 4
    };
    // A byte in the second block: find the block starts by walking lengths.
    let first = header_len;
    let first_len = u32::from_le_bytes(bytes[first + 1..first + 5].try_into().unwrap()) as usize;
    let second = first + 5 + first_len + 4;
    let mut bad = bytes.clone();
    bad[second + 100] ^= 0x10;
    let mut reader = NvtReader::new(Cursor::new(&bad), "t.nvt").unwrap();
    let results: Vec<_> = reader.by_ref().collect();
    // The whole first block is read, then the error, then nothing.
    assert_eq!(results.len(), nvmos_trace::nvt::BLOCK_EVENTS + 1);
    let err = results.last().unwrap().as_ref().unwrap_err();
    assert!(
        matches!(err, TraceError::Checksum { offset, what: "block", .. } if *offset == second as u64),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!("offset {second}")),
        "{err}"
    );

    // Header and trailer are checked when opening.
    let mut bad = bytes.clone();
    bad[20] ^= 1;
    assert!(matches!(
        read(&bad).unwrap_err(),
        TraceError::Checksum {
            what: "header",
            offset: 0,
            ..
        }
    ));
    let mut bad = bytes.clone();
    let n = bad.len();
    bad[n - 30] ^= 1;
    assert!(matches!(
        read(&bad).unwrap_err(),
        TraceError::Checksum {
            what: "trailer",
            ..
        } | TraceError::Corrupt { .. }
    ));
    assert_eq!(&bytes[bytes.len() - 8..], &END_MAGIC);
}

#[test]
fn every_single_byte_flip_is_an_error_not_a_panic() {
    let bytes = write(&sample(300));
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x41;
        // Every byte is covered by a checksum or a check.
        assert!(read(&bad).is_err(), "flip at {i} went unnoticed");
    }
}

#[test]
fn malformed_ftrace_line_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.txt");
    let mut text = std::fs::read_to_string(data("ftrace_pipe.txt")).unwrap();
    text.push_str(
        " a-1 [000] ..... 1200.000000: mm_page_free: page=00000000deadbeef pfn=0xzz order=0\n",
    );
    std::fs::write(&path, &text).unwrap();
    let err = open(&path)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap_err();
    let line = text.lines().count();
    let msg = err.to_string();
    assert!(msg.contains(&format!("bad.txt:{line}: ")), "{msg}");
    assert!(msg.contains("pfn=0xzz"), "{msg}");
}

#[test]
fn order_11_is_an_error() {
    let text = " a-1 [000] ..... 1.0: mm_page_alloc: page=00000000deadbeef pfn=0x800 order=11 migratetype=1 gfp_flags=GFP_USER\n";
    let err = TextReader::new(text.as_bytes(), "o.txt", Format::Ftrace)
        .next()
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().starts_with("o.txt:1: "), "{err}");
    assert!(err.to_string().contains("order 11"), "{err}");
}

/// The fuzz targets' entry points on random and mutated inputs, for
/// machines without cargo-fuzz: nothing may panic.
#[test]
fn random_inputs_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let nvt = write(&sample(2000));
    let text = std::fs::read(data("ftrace_trace.txt")).unwrap();
    for _ in 0..3000 {
        for base in [&nvt, &text] {
            let mut input = base.clone();
            for _ in 0..rng.gen_range(1..8) {
                let i = rng.gen_range(0..input.len());
                match rng.gen_range(0..3) {
                    0 => input[i] = rng.gen(),
                    1 => input.truncate(i.max(1)),
                    _ => input.insert(i, rng.gen()),
                }
            }
            if let Ok(r) = NvtReader::new(Cursor::new(&input), "f.nvt") {
                for e in r {
                    if e.is_err() {
                        break;
                    }
                }
            }
            for e in TextReader::new(&input[..], "f.txt", Format::Ftrace) {
                if e.is_err() {
                    break;
                }
            }
        }
    }
}

#[test]
fn chunks_and_iterator_agree() {
    let events = sample(nvmos_trace::nvt::BLOCK_EVENTS + 5000);
    let bytes = write(&events);
    let mut reader = NvtReader::new(Cursor::new(&bytes), "t.nvt").unwrap();
    let mut back = Vec::new();
    // Alternate: one event from the iterator, then a chunk.
    while let Some(e) = reader.next() {
        back.push(e.unwrap());
        match reader.next_chunk() {
            Some(chunk) => back.extend_from_slice(chunk.unwrap()),
            None => break,
        }
    }
    assert_eq!(back, events);
}

/// The fixture with every unusual case: `trace info`'s accounting counts
/// each exactly (the replay engine's agreement is tested in `nvmos-sim`).
#[test]
fn every_case_is_accounted() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/every_case.txt");
    let mut source = nvmos_trace::open(&path).unwrap();
    let info = TraceInfo::from_source(&mut *source).unwrap();
    assert_eq!(
        info.accounting,
        nvmos_trace::Accounting {
            events_read: 14,
            lost_events: 5,
            frees_before_recording: 1,
            frees_mismatched_order: 1,
            partial_frees: 4,
            allocs_of_live_pfn: 2,
            time_reversals: 1,
            write_samples: 0,
            writes_not_live: 0,
        }
    );
    assert_eq!(info.live_at_end, 3);
    assert_eq!(
        nvmos_trace::Needs::of(&info),
        Some(nvmos_trace::Needs {
            frames: 0x5556,
            cpus: 3
        })
    );
}

// ---- sampled writes (version 2) ----

fn with_writes(events: &[Event]) -> Vec<u8> {
    let header = TraceHeader {
        writes: Some(nvmos_trace::WriteSampling {
            interval_ns: 10_000_000,
            samples: 7,
            ..Default::default()
        }),
        ..header()
    };
    let mut w = NvtWriter::new(Vec::new(), "t.nvt", header).unwrap();
    for e in events {
        w.push(*e).unwrap();
    }
    w.finish().unwrap().0
}

fn mixed(n: usize) -> Vec<Event> {
    let mut events = sample(n);
    for (i, e) in events.iter_mut().enumerate().filter(|(i, _)| i % 5 == 4) {
        *e = Event {
            cpu: 0,
            op: Op::Write,
            pfn: Pfn(0x100000 + i as u64),
            order: Order::ZERO,
            ..*e
        };
    }
    events
}

#[test]
fn writes_round_trip_as_version_2_and_old_traces_stay_version_1() {
    let events = mixed(nvmos_trace::nvt::BLOCK_EVENTS + 100);
    let bytes = with_writes(&events);
    assert_eq!(bytes[8..12], 2u32.to_le_bytes());
    let mut reader = NvtReader::new(Cursor::new(&bytes), "t.nvt").unwrap();
    let w = reader.header().unwrap().writes.clone().unwrap();
    assert_eq!((w.interval_ns, w.samples), (10_000_000, 7));
    let back: Vec<Event> = reader.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(back, events);
    // A trace without write sampling is written as before: version 1,
    // readable by builds that predate writes.
    assert_eq!(write(&sample(10))[8..12], 1u32.to_le_bytes());
}

#[test]
fn a_write_never_passes_as_something_else() {
    // A write in a trace whose header announces no sampling is refused.
    let mut w = NvtWriter::new(Vec::new(), "t.nvt", header()).unwrap();
    let err = w.push(mixed(5)[4]).unwrap_err();
    assert!(err.to_string().contains("no write sampling"), "{err}");
    // A version 1 reader (this build's, like the builds before writes) given
    // op 4 says the file is corrupt instead of misreading it: relabel a
    // version 2 file as version 1, checksum fixed.
    let mut bytes = with_writes(&mixed(10));
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let json_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let crc = crc32fast::hash(&bytes[..16 + json_len]);
    bytes[16 + json_len..20 + json_len].copy_from_slice(&crc.to_le_bytes());
    let err = read(&bytes).unwrap_err();
    assert!(err.to_string().contains("op 4"), "{err}");
    // And a build that reads only up to this version refuses a newer one by
    // its version, before anything else.
    let mut bytes = with_writes(&mixed(10));
    bytes[8..12].copy_from_slice(&(VERSION + 1).to_le_bytes());
    assert!(matches!(
        read(&bytes).unwrap_err(),
        TraceError::UnsupportedVersion { found, .. } if found == VERSION + 1
    ));
}

#[test]
fn trace_info_counts_writes_apart() {
    let events = mixed(20);
    let bytes = with_writes(&events);
    let mut reader = NvtReader::new(Cursor::new(&bytes), "t.nvt").unwrap();
    let info = TraceInfo::from_source(&mut reader).unwrap();
    assert_eq!(info.writes, 4);
    assert_eq!(info.events, 20);
    assert_eq!(info.allocs + info.frees + info.writes, info.events);
    assert_eq!(info.accounting.write_samples, 4);
    // Writes have no CPU: the per-CPU counts are the allocator's events.
    assert_eq!(info.cpus.values().sum::<u64>(), 16);
}

// ---- damage that must not pass unnoticed ----

/// One ftrace line of an order-0 allocation (`op` "alloc") or free.
fn line(cpu: u32, ts: &str, op: &str, pfn: u64) -> String {
    match op {
        "alloc" => format!(
            " a-1 [{cpu:03}] ..... {ts}: mm_page_alloc: page=00000000deadbeef pfn={pfn:#x} order=0 migratetype=1 gfp_flags=GFP_USER\n"
        ),
        _ => format!(" a-1 [{cpu:03}] ..... {ts}: mm_page_free: page=00000000deadbeef pfn={pfn:#x} order=0\n"),
    }
}

fn text_info(text: &str) -> Result<TraceInfo, TraceError> {
    let mut fast = TextReader::new(text.as_bytes(), "t.txt", Format::Ftrace);
    let info = TraceInfo::from_source(&mut fast);
    // The reference scanner tells the same story.
    let mut reference =
        TextReader::new(text.as_bytes(), "t.txt", Format::Ftrace).reference_scanner();
    let again = TraceInfo::from_source(&mut reference);
    assert_eq!(
        format!("{info:?}"),
        format!("{again:?}"),
        "the two scanners disagree"
    );
    info
}

/// ftrace's `trace` file says how many events the ring buffer overwrote
/// before they were read: entries written minus entries still in it.
#[test]
fn entries_written_beyond_the_buffer_are_lost_events() {
    let body = line(0, "10.000001", "alloc", 0x100) + &line(1, "10.000002", "free", 0x100);
    let text = format!(
        "# tracer: nop\n#\n# entries-in-buffer/entries-written: 8604/99999   #P:2\n#\n{body}"
    );
    let info = text_info(&text).unwrap();
    assert_eq!(info.counts.lost_events, 99999 - 8604);
    assert_eq!(info.accounting.lost_events, 99999 - 8604);
    // With `[LOST n EVENTS]` lines as well, both are counted.
    let text =
        format!("# entries-in-buffer/entries-written: 10/15   #P:2\nCPU:1 [LOST 3 EVENTS]\n{body}");
    assert_eq!(text_info(&text).unwrap().accounting.lost_events, 5 + 3);
    // Nothing overwritten.
    let text = format!("# entries-in-buffer/entries-written: 2/2   #P:2\n{body}");
    assert_eq!(text_info(&text).unwrap().accounting.lost_events, 0);
    // A line that cannot be read is an error naming it, not 0 lost.
    for bad in [
        "# entries-in-buffer/entries-written: 20/15   #P:2",
        "# entries-in-buffer/entries-written: 20/x   #P:2",
        "# entries-in-buffer/entries-written: 20",
    ] {
        let text = format!("# tracer: nop\n{bad}\n{body}");
        let err = text_info(&text).unwrap_err().to_string();
        assert!(
            err.starts_with("t.txt:2: ") && err.contains("entries-in-buffer"),
            "{bad}: {err}"
        );
    }
}

/// Every event stamped earlier than the event before it is out of order,
/// also one stamped before the first event (whose time becomes 0, as the
/// event before may have), in text and in `.nvt` converted from it.
#[test]
fn backwards_timestamps_are_counted_in_text_and_nvt() {
    // 5, 2 (back), 9, 3 (back), 4, 4: two reversals; four stamped
    // before the first event, whose times become 0.
    let text = [
        line(0, "10.000005", "alloc", 0x100),
        line(1, "10.000002", "alloc", 0x200),
        line(0, "10.000009", "free", 0x100),
        line(1, "10.000003", "free", 0x200),
        line(1, "10.000004", "alloc", 0x300),
        line(1, "10.000004", "free", 0x300),
    ]
    .concat();
    let info = text_info(&text).unwrap();
    assert_eq!(info.accounting.time_reversals, 2);
    assert_eq!(info.counts.early_timestamps, 4);

    let dir = tempfile::tempdir().unwrap();
    let txt = dir.path().join("back.txt");
    std::fs::write(&txt, &text).unwrap();
    let nvt = dir.path().join("back.nvt");
    nvmos_trace::convert::convert(&txt, &nvt, 3, &mut |_| {}).unwrap();
    let mut source = open(&nvt).unwrap();
    let info = TraceInfo::from_source(&mut *source).unwrap();
    assert_eq!(info.accounting.time_reversals, 2);

    // An `.nvt` written with times going back (no source counts).
    let mut events = sample(6);
    events[2].time_ns = 500;
    events[4].time_ns = 0;
    let bytes = write(&events);
    let mut reader = NvtReader::new(Cursor::new(&bytes), "t.nvt").unwrap();
    let info = TraceInfo::from_source(&mut reader).unwrap();
    assert_eq!(info.accounting.time_reversals, 2);
}

/// The offset of the trailer's header JSON in a written `.nvt`.
fn trailer_header_offset(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    u64::from_le_bytes(bytes[n - 16..n - 8].try_into().unwrap()) + 5
}

fn machine() -> nvmos_trace::MachineInfo {
    nvmos_trace::MachineInfo {
        page_size: 4096,
        memory_bytes: 1 << 30,
        cpus: 2,
        zones: vec![
            nvmos_trace::ZoneInfo {
                node: 0,
                name: "DMA32".into(),
                start_pfn: 1,
                spanned: 0xfffff,
                present: 0x80000,
            },
            nvmos_trace::ZoneInfo {
                node: 0,
                name: "Normal".into(),
                start_pfn: 0x100000,
                spanned: 0x40000,
                present: 0x40000,
            },
        ],
        kernel: "6.1".into(),
        ram: vec![(1, 0x9f), (0x100, 0xc0000), (0x100000, 0x140000)],
    }
}

/// A header that describes no possible machine is refused when the file
/// is opened, naming the file, the header's offset and the field.
#[test]
fn crafted_headers_are_refused_naming_offset_and_field() {
    let with = |m: nvmos_trace::MachineInfo| -> Vec<u8> {
        let h = TraceHeader {
            machine: Some(m),
            ..header()
        };
        let mut w = NvtWriter::new(Vec::new(), "t.nvt", h).unwrap();
        for e in sample(10) {
            w.push(e).unwrap();
        }
        w.finish().unwrap().0
    };
    // The realistic machine reads.
    assert_eq!(read(&with(machine())).unwrap().len(), 10);
    type Edit = fn(&mut nvmos_trace::MachineInfo);
    let cases: [(Edit, &str); 10] = [
        (|m| m.cpus = 0, "machine.cpus"),
        (|m| m.page_size = 0, "machine.page_size"),
        (|m| m.page_size = 4097, "machine.page_size"),
        (
            |m| m.zones[1].spanned = u64::MAX - 0x1000,
            "machine.zones[1].spanned",
        ),
        (
            |m| m.zones[1].start_pfn = nvmos_trace::MAX_PFN,
            "machine.zones[1]",
        ),
        (
            |m| m.zones[1].start_pfn = 0x80000,
            "machine.zones[1].start_pfn",
        ),
        (|m| m.zones.swap(0, 1), "machine.zones[1].start_pfn"),
        (
            |m| m.zones[0].present = 0x100000,
            "machine.zones[0].present",
        ),
        (|m| m.ram[1] = (0x200, 0x100), "machine.ram[1]"),
        (|m| m.ram[2] = (0xbff00, 0x140000), "machine.ram[2]"),
    ];
    for (i, (edit, field)) in cases.into_iter().enumerate() {
        let mut m = machine();
        edit(&mut m);
        let bytes = with(m);
        let err = read(&bytes).unwrap_err();
        let text = err.to_string();
        let at = format!("offset {}", trailer_header_offset(&bytes));
        assert!(
            matches!(err, TraceError::Corrupt { .. })
                && text.starts_with("t.nvt: ")
                && text.contains(&at)
                && text.contains(&format!("`{field}")),
            "case {i}: {text} (expected {at} and `{field}`)"
        );
    }
}

/// Rewrites field bytes of the first block of `bytes` (offset `at` in its
/// body) and fixes the block's checksum, as a forger would.
fn forge_first_block(bytes: &[u8], at: usize, value: u64) -> (Vec<u8>, u64) {
    let json = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let block = 16 + json + 4;
    let len = u32::from_le_bytes(bytes[block + 1..block + 5].try_into().unwrap()) as usize;
    let mut b = bytes.to_vec();
    b[block + 5 + at..block + 5 + at + 8].copy_from_slice(&value.to_le_bytes());
    let crc = crc32fast::hash(&b[block..block + 5 + len]);
    b[block + 5 + len..block + 5 + len + 4].copy_from_slice(&crc.to_le_bytes());
    (b, block as u64)
}

/// A block's time unit of 0 (every time the same) or beyond any delta the
/// writer stores, or times that run past 2^64, are refused.
#[test]
fn crafted_time_units_and_times_are_refused() {
    let bytes = write(&sample(50));
    assert_eq!(read(&bytes).unwrap(), sample(50));
    for unit in [0, u64::MAX, 1 << 63] {
        // Body: events u32, first time u64, unit u64.
        let (forged, block) = forge_first_block(&bytes, 12, unit);
        let err = read(&forged).unwrap_err().to_string();
        assert!(
            err.starts_with("t.nvt: ")
                && err.contains(&format!("offset {block}"))
                && err.contains("`unit`"),
            "unit {unit}: {err}"
        );
    }
    // A first time so late that the events' times pass 2^64.
    let (forged, block) = forge_first_block(&bytes, 4, u64::MAX - 5);
    let err = read(&forged).unwrap_err().to_string();
    assert!(
        err.contains(&format!("offset {block}")) && err.contains("time"),
        "{err}"
    );
}

/// The shipped traces describe possible machines: their headers pass the
/// checks, and their times decode within the format's bounds.
#[test]
fn shipped_traces_pass_the_header_and_time_checks() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../traces");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "nvt") {
            let mut reader =
                NvtReader::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(reader.header().unwrap().machine.is_some());
            // The first block's times.
            reader.next().unwrap().unwrap();
            seen += 1;
        }
    }
    assert!(seen >= 4, "{seen} traces in {}", dir.display());
}
