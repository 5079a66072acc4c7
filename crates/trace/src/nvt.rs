//! The `.nvt` trace format: compact, checksummed, streamed.
//!
//! # Layout (all integers little-endian)
//!
//! ```text
//! file    = MAGIC (8) | version u32 | len u32 | header JSON (len) | crc32 u32
//!           block* | trailer
//! block   = 'B' | len u32 | body (len) | crc32 u32
//! body    = events u32 | first time_ns u64 | time unit u64 | column × 5
//! column  = raw len u32 | compressed len u32 | zstd frame
//! trailer = 'T' | len u32 | final header JSON (len) | crc32 u32
//!           | trailer offset u64 | END_MAGIC (8)
//! ```
//!
//! Each crc32 covers every byte of its part before it (from the magic, the
//! `'B'` or the `'T'`). The header at the start is written before the first
//! event, so its counts are zero; the trailer repeats it with the final
//! counts (events, lost, skipped). A reader seeks to the trailer first, so
//! the final header is known before the events are read.
//!
//! # Columns of a block
//!
//! Events are stored as five columns, each encoded then compressed with
//! zstd on its own, so that each compresses with its own statistics:
//!
//! 0. **time**: zigzag varints of `(time_ns - previous) / unit`, the first
//!    against the block's first time. `unit` is the gcd of the block's
//!    time deltas: 1000 for ftrace's microsecond timestamps, so a delta of a
//!    few microseconds is one byte. Steps are below 2^63 ns and times
//!    never wrap around 2^64: a reader refuses a unit of 0 or of 2^63 and
//!    more, and a time outside `0..2^64`.
//! 1. **cpu**: varints.
//! 2. **op**: one byte, 0 free, 1 + migratetype number for an allocation,
//!    4 a sampled write (version 2 only).
//! 3. **pfn**: zigzag varints of `pfn - predicted`, where the prediction is
//!    the frame after the previous block on the same CPU: the kernel's
//!    per-CPU lists hand out and take back runs of neighbouring frames, so
//!    most deltas are small. Writes (CPU 0 in the cpu column) have a
//!    prediction of their own, the frame after the previous write: a
//!    sample's writes come in ascending pfn order.
//! 4. **order**: one byte.
//!
//! Every block starts its predictions afresh, so each decodes on its own.
//!
//! # Versions
//!
//! Version 1 holds allocations and frees. Version 2 adds sampled writes
//! ([`Op::Write`], op byte 4) and is written only for traces whose header
//! has [`TraceHeader::writes`] (recorded with `nvmos record --writes`), so
//! a trace without writes stays readable by builds that predate them, and
//! such a build refuses a trace with writes by its version (never
//! misreading op 4). This build reads both; an op byte 4 in a version 1
//! file is corrupt.

use std::fs::File;
use std::io::{BufWriter, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use nvmos_frames::{MigrateType, Order, Pfn, MAX_ORDER};

use crate::event::{Event, Op};
use crate::source::{EventSource, Format, SourceCounts, TraceHeader};
use crate::{TraceError, MAX_CPUS, MAX_PFN};

/// The first bytes of every `.nvt` file. Like PNG's, the high byte and the
/// CR LF / SUB characters catch 7-bit and newline-translating transfers.
pub const MAGIC: [u8; 8] = *b"\x89NVT\r\n\x1a\n";
/// The last bytes of a complete `.nvt` file.
pub const END_MAGIC: [u8; 8] = *b"NVT-END\n";
/// The newest format version this build writes and reads (see the module
/// documentation: 2 for traces with sampled writes, 1 otherwise).
pub const VERSION: u32 = 2;
/// The version of traces without sampled writes.
pub const VERSION_NO_WRITES: u32 = 1;
/// The op byte of a sampled write (version 2).
const WRITE_OP: u8 = 4;
/// Events per block the writer uses.
pub const BLOCK_EVENTS: usize = 1 << 16;
/// The most events a reader accepts in one block (bounds its memory on
/// forged files).
pub const MAX_BLOCK_EVENTS: u32 = 1 << 20;
/// zstd level the writer uses unless told otherwise.
pub const DEFAULT_LEVEL: i32 = 9;

const COLUMNS: usize = 5;
const BLOCK_TAG: u8 = b'B';
const TRAILER_TAG: u8 = b'T';
/// Largest header, block or trailer body a reader accepts (a block of
/// `MAX_BLOCK_EVENTS` compresses to far less).
const MAX_BODY: u32 = 256 << 20;
/// The largest step between two events' times the format holds, ns
/// (2^63 - 1, some 292 years): a step is stored as a signed 64-bit
/// number of time units, and decoding never wraps around.
const MAX_TIME_STEP: u64 = i64::MAX as u64;

/// What the writer wrote.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WriteSummary {
    /// Events written.
    pub events: u64,
    /// Bytes of the whole file.
    pub bytes: u64,
}

impl WriteSummary {
    /// Bytes per event, headers included; 0 for an empty trace.
    pub fn bytes_per_event(&self) -> f64 {
        if self.events == 0 {
            0.0
        } else {
            self.bytes as f64 / self.events as f64
        }
    }
}

/// Writes events to a `.nvt` file as they come, a block at a time.
///
/// A writer dropped without [`finish`](NvtWriter::finish) leaves a file
/// without its trailer, which readers report as truncated.
pub struct NvtWriter<W: Write> {
    out: W,
    path: PathBuf,
    header: TraceHeader,
    pending: Vec<Event>,
    offset: u64,
    events: u64,
    compressor: zstd::bulk::Compressor<'static>,
    columns: [Vec<u8>; COLUMNS],
    body: Vec<u8>,
    predicted: Vec<u64>,
    /// The version written: 2 when the header announces write sampling.
    version: u32,
}

impl NvtWriter<BufWriter<File>> {
    /// Creates (or truncates) `path` and writes the header.
    pub fn create(path: impl AsRef<Path>, header: TraceHeader) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let file = File::create(path).map_err(|e| TraceError::io(path, e))?;
        NvtWriter::new(BufWriter::with_capacity(1 << 20, file), path, header)
    }
}

impl<W: Write> NvtWriter<W> {
    /// A writer to `out` (named `path` in errors), with the default zstd
    /// level. Writes the header now.
    pub fn new(out: W, path: impl AsRef<Path>, header: TraceHeader) -> Result<Self, TraceError> {
        NvtWriter::with_level(out, path, header, DEFAULT_LEVEL)
    }

    /// A writer with zstd level `level` (1 fast … 19 small).
    pub fn with_level(
        out: W,
        path: impl AsRef<Path>,
        header: TraceHeader,
        level: i32,
    ) -> Result<Self, TraceError> {
        let path = path.as_ref().to_owned();
        let compressor =
            zstd::bulk::Compressor::new(level).map_err(|e| TraceError::io(&path, e))?;
        let version = if header.writes.is_some() {
            VERSION
        } else {
            VERSION_NO_WRITES
        };
        let mut writer = NvtWriter {
            version,
            out,
            path,
            header,
            pending: Vec::with_capacity(BLOCK_EVENTS),
            offset: 0,
            events: 0,
            compressor,
            columns: Default::default(),
            body: Vec::new(),
            predicted: Vec::new(),
        };
        let mut start = Vec::with_capacity(256);
        start.extend_from_slice(&MAGIC);
        start.extend_from_slice(&version.to_le_bytes());
        let json = serde_json::to_vec(&writer.header).expect("a header always serializes");
        start.extend_from_slice(&(json.len() as u32).to_le_bytes());
        start.extend_from_slice(&json);
        let crc = crc32fast::hash(&start);
        start.extend_from_slice(&crc.to_le_bytes());
        writer.write_all(&start)?;
        Ok(writer)
    }

    /// The header the trailer will hold; update its counts before
    /// [`finish`](NvtWriter::finish). `events` is set by the writer.
    pub fn header_mut(&mut self) -> &mut TraceHeader {
        &mut self.header
    }

    /// Events accepted so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Bytes written so far (pending events not included).
    pub fn bytes_written(&self) -> u64 {
        self.offset
    }

    /// Adds an event; writes a block when one is full.
    pub fn push(&mut self, event: Event) -> Result<(), TraceError> {
        let pfn = event.pfn.get();
        if pfn >= MAX_PFN || pfn + event.order.frames() > MAX_PFN {
            return Err(self.bad_event(format!("pfn {pfn:#x} is beyond the 52-bit frame space")));
        }
        if event.cpu >= MAX_CPUS {
            return Err(self.bad_event(format!(
                "cpu {} is out of range (at most {})",
                event.cpu,
                MAX_CPUS - 1
            )));
        }
        // Only steps within a block are stored (a block's times start from
        // its first event's), and a reader refuses one that wraps around.
        if let Some(last) = self.pending.last() {
            if event.time_ns.abs_diff(last.time_ns) > MAX_TIME_STEP {
                return Err(self.bad_event(format!(
                    "time {} ns is 2^63 ns or more from the event before's {} ns",
                    event.time_ns, last.time_ns
                )));
            }
        }
        if event.op == Op::Write {
            if self.version < VERSION {
                return Err(self.bad_event(
                    "a write event in a trace whose header announces no write sampling".into(),
                ));
            }
            if event.cpu != 0 || event.order != Order::ZERO {
                return Err(self.bad_event("a write event must be CPU 0, order 0".into()));
            }
        }
        self.pending.push(event);
        self.events += 1;
        if self.pending.len() == BLOCK_EVENTS {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Writes the last block and the trailer, flushes, and returns the
    /// output and what was written.
    pub fn finish(mut self) -> Result<(W, WriteSummary), TraceError> {
        self.flush_block()?;
        self.header.events = self.events;
        let trailer_offset = self.offset;
        let json = serde_json::to_vec(&self.header).expect("a header always serializes");
        let mut trailer = Vec::with_capacity(json.len() + 32);
        trailer.push(TRAILER_TAG);
        trailer.extend_from_slice(&(json.len() as u32).to_le_bytes());
        trailer.extend_from_slice(&json);
        let crc = crc32fast::hash(&trailer);
        trailer.extend_from_slice(&crc.to_le_bytes());
        trailer.extend_from_slice(&trailer_offset.to_le_bytes());
        trailer.extend_from_slice(&END_MAGIC);
        self.write_all(&trailer)?;
        self.out
            .flush()
            .map_err(|e| TraceError::io(&self.path, e))?;
        let summary = WriteSummary {
            events: self.events,
            bytes: self.offset,
        };
        Ok((self.out, summary))
    }

    fn bad_event(&self, reason: String) -> TraceError {
        TraceError::BadEvent {
            path: self.path.clone(),
            index: self.events,
            reason,
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        self.out
            .write_all(bytes)
            .map_err(|e| TraceError::io(&self.path, e))?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    fn flush_block(&mut self) -> Result<(), TraceError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let events = std::mem::take(&mut self.pending);
        let first_time = events[0].time_ns;
        // The unit divides every delta exactly (gcd); 1 when all are equal.
        let mut unit = 0u64;
        let mut prev = first_time;
        for e in &events {
            unit = gcd(unit, (e.time_ns.wrapping_sub(prev) as i64).unsigned_abs());
            prev = e.time_ns;
        }
        let unit = unit.max(1);

        for c in &mut self.columns {
            c.clear();
        }
        let max_cpu = events.iter().map(|e| e.cpu).max().unwrap_or(0) as usize;
        self.predicted.clear();
        self.predicted.resize(max_cpu + 1, 0);
        let mut write_predicted = 0u64;
        let mut prev = first_time;
        for e in &events {
            let delta = e.time_ns.wrapping_sub(prev) as i64;
            put_varint(&mut self.columns[0], zigzag(delta / unit as i64));
            prev = e.time_ns;
            put_varint(&mut self.columns[1], u64::from(e.cpu));
            self.columns[2].push(match e.op {
                Op::Free => 0,
                Op::Alloc(MigrateType::Unmovable) => 1,
                Op::Alloc(MigrateType::Movable) => 2,
                Op::Alloc(MigrateType::Reclaimable) => 3,
                Op::Write => WRITE_OP,
            });
            let predicted = if e.op == Op::Write {
                &mut write_predicted
            } else {
                &mut self.predicted[e.cpu as usize]
            };
            let pfn = e.pfn.get();
            put_varint(
                &mut self.columns[3],
                zigzag(pfn.wrapping_sub(*predicted) as i64),
            );
            *predicted = pfn + e.order.frames();
            self.columns[4].push(e.order.get());
        }

        self.body.clear();
        self.body.push(BLOCK_TAG);
        self.body.extend_from_slice(&[0; 4]); // body length, below
        self.body
            .extend_from_slice(&(events.len() as u32).to_le_bytes());
        self.body.extend_from_slice(&first_time.to_le_bytes());
        self.body.extend_from_slice(&unit.to_le_bytes());
        for i in 0..COLUMNS {
            let compressed = self
                .compressor
                .compress(&self.columns[i])
                .map_err(|e| TraceError::io(&self.path, e))?;
            self.body
                .extend_from_slice(&(self.columns[i].len() as u32).to_le_bytes());
            self.body
                .extend_from_slice(&(compressed.len() as u32).to_le_bytes());
            self.body.extend_from_slice(&compressed);
        }
        let len = (self.body.len() - 5) as u32;
        self.body[1..5].copy_from_slice(&len.to_le_bytes());
        let crc = crc32fast::hash(&self.body);
        self.body.extend_from_slice(&crc.to_le_bytes());
        let body = std::mem::take(&mut self.body);
        let result = self.write_all(&body);
        self.body = body;
        self.pending = events;
        self.pending.clear();
        result
    }
}

/// Reads a `.nvt` file block by block: memory stays at one block whatever
/// the file's size.
pub struct NvtReader<R> {
    input: R,
    path: PathBuf,
    header: TraceHeader,
    /// Offset of the next block.
    offset: u64,
    trailer_offset: u64,
    decompressor: zstd::bulk::Decompressor<'static>,
    raw: Vec<u8>,
    columns: [Vec<u8>; COLUMNS],
    predicted: Vec<u64>,
    /// The write prediction (version 2).
    write_predicted: u64,
    /// The op bytes the file's version allows.
    ops: &'static [Option<Op>],
    cursor: Cursor,
    block: Vec<Event>,
    next: usize,
    events_read: u64,
    done: bool,
}

impl NvtReader<std::io::BufReader<File>> {
    /// Opens `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
        NvtReader::new(std::io::BufReader::new(file), path)
    }
}

impl<R: Read + Seek> NvtReader<R> {
    /// A reader of `input` (named `path` in errors): checks the magic,
    /// the version and the checksums of the header and the trailer now.
    pub fn new(mut input: R, path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_owned();
        let io = |e: std::io::Error| TraceError::io(&path, e);
        let truncated = |offset: u64, what: &str| TraceError::Truncated {
            path: path.clone(),
            offset,
            what: what.to_owned(),
        };

        let mut start = [0u8; 16];
        let got = read_up_to(&mut input, &mut start).map_err(io)?;
        if got < 8 || start[..8] != MAGIC {
            return Err(TraceError::BadMagic {
                path: path.clone(),
                offset: 0,
            });
        }
        if got < 16 {
            return Err(truncated(got as u64, "the file ends inside the header"));
        }
        let version = u32::from_le_bytes(start[8..12].try_into().expect("4 bytes"));
        if !(VERSION_NO_WRITES..=VERSION).contains(&version) {
            return Err(TraceError::UnsupportedVersion {
                path: path.clone(),
                offset: 8,
                found: version,
                supported: VERSION,
            });
        }
        let json_len = u32::from_le_bytes(start[12..16].try_into().expect("4 bytes"));
        if json_len > MAX_BODY {
            return Err(TraceError::Corrupt {
                path: path.clone(),
                offset: 12,
                what: format!("header length {json_len} is implausible"),
            });
        }
        let mut rest = vec![0u8; json_len as usize + 4];
        let got = read_up_to(&mut input, &mut rest).map_err(io)?;
        if got < rest.len() {
            return Err(truncated(
                16 + got as u64,
                "the file ends inside the header",
            ));
        }
        let (json, crc) = rest.split_at(json_len as usize);
        let stored = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&start);
        hasher.update(json);
        let computed = hasher.finalize();
        if stored != computed {
            return Err(TraceError::Checksum {
                path: path.clone(),
                offset: 0,
                what: "header",
                stored,
                computed,
            });
        }
        let data_start = 16 + json_len as u64 + 4;

        // The trailer, from the end marker.
        let file_len = input.seek(SeekFrom::End(0)).map_err(io)?;
        let no_end = || {
            truncated(
                file_len,
                "the file ends without the trailer (was the recording interrupted?)",
            )
        };
        if file_len < data_start + 16 {
            return Err(no_end());
        }
        input.seek(SeekFrom::Start(file_len - 16)).map_err(io)?;
        let mut end = [0u8; 16];
        input.read_exact(&mut end).map_err(io)?;
        if end[8..] != END_MAGIC {
            return Err(no_end());
        }
        let trailer_offset = u64::from_le_bytes(end[..8].try_into().expect("8 bytes"));
        let corrupt = |offset: u64, what: String| TraceError::Corrupt {
            path: path.clone(),
            offset,
            what,
        };
        if trailer_offset < data_start || trailer_offset > file_len - 16 - 9 {
            return Err(corrupt(
                file_len - 16,
                format!("trailer offset {trailer_offset} is outside the file"),
            ));
        }
        input.seek(SeekFrom::Start(trailer_offset)).map_err(io)?;
        let mut trailer = vec![0u8; (file_len - 16 - trailer_offset) as usize];
        input.read_exact(&mut trailer).map_err(io)?;
        let len = u32::from_le_bytes(trailer[1..5].try_into().expect("4 bytes")) as usize;
        if trailer[0] != TRAILER_TAG || len + 9 != trailer.len() {
            return Err(corrupt(
                trailer_offset,
                "no trailer at the trailer offset".into(),
            ));
        }
        let stored = u32::from_le_bytes(trailer[5 + len..].try_into().expect("4 bytes"));
        let computed = crc32fast::hash(&trailer[..5 + len]);
        if stored != computed {
            return Err(TraceError::Checksum {
                path: path.clone(),
                offset: trailer_offset,
                what: "trailer",
                stored,
                computed,
            });
        }
        let header: TraceHeader = serde_json::from_slice(&trailer[5..5 + len])
            .map_err(|e| corrupt(trailer_offset + 5, format!("trailer header: {e}")))?;
        check_header(&header).map_err(|(field, what)| {
            corrupt(trailer_offset + 5, format!("header field `{field}` {what}"))
        })?;
        input.seek(SeekFrom::Start(data_start)).map_err(io)?;

        Ok(NvtReader {
            input,
            header,
            offset: data_start,
            trailer_offset,
            decompressor: zstd::bulk::Decompressor::new().map_err(io)?,
            raw: Vec::new(),
            columns: Default::default(),
            predicted: vec![0; MAX_CPUS as usize],
            write_predicted: 0,
            ops: if version >= VERSION {
                &OPS_V2
            } else {
                &OPS_V2[..4]
            },
            cursor: Cursor::default(),
            block: Vec::with_capacity(2048),
            next: 0,
            events_read: 0,
            done: false,
            path,
        })
    }

    /// The header with the final counts (from the trailer).
    pub fn trace_header(&self) -> &TraceHeader {
        &self.header
    }

    fn corrupt(&self, offset: u64, what: impl Into<String>) -> TraceError {
        TraceError::Corrupt {
            path: self.path.clone(),
            offset,
            what: what.into(),
        }
    }

    /// Reads and decodes the block at `self.offset` into `self.block`;
    /// `Ok(false)` at the trailer.
    fn read_block(&mut self) -> Result<bool, TraceError> {
        let at = self.offset;
        if at == self.trailer_offset {
            if self.events_read != self.header.events {
                return Err(self.corrupt(
                    at,
                    format!(
                        "the blocks hold {} events, the trailer says {}",
                        self.events_read, self.header.events
                    ),
                ));
            }
            return Ok(false);
        }
        let truncated = |what: &str| TraceError::Truncated {
            path: self.path.clone(),
            offset: at,
            what: what.to_owned(),
        };
        let mut head = [0u8; 5];
        read_exact_or(&mut self.input, &mut head, &self.path, || {
            truncated("the file ends inside a block")
        })?;
        if head[0] != BLOCK_TAG {
            return Err(self.corrupt(at, format!("expected a block, found byte {:#04x}", head[0])));
        }
        let len = u32::from_le_bytes(head[1..].try_into().expect("4 bytes"));
        let end = at + 5 + u64::from(len) + 4;
        if len > MAX_BODY || end > self.trailer_offset {
            return Err(self.corrupt(at, format!("block length {len} runs past the trailer")));
        }
        self.raw.resize(len as usize + 4, 0);
        read_exact_or(&mut self.input, &mut self.raw, &self.path, || {
            truncated("the file ends inside a block")
        })?;
        let (body, crc) = self.raw.split_at(len as usize);
        let stored = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&head);
        hasher.update(body);
        let computed = hasher.finalize();
        if stored != computed {
            return Err(TraceError::Checksum {
                path: self.path.clone(),
                offset: at,
                what: "block",
                stored,
                computed,
            });
        }
        self.decode(at, len as usize)?;
        self.offset = end;
        self.events_read += self.cursor.n as u64;
        Ok(true)
    }

    /// Decodes the checked block body in `self.raw[..len]`.
    fn decode(&mut self, at: u64, len: usize) -> Result<(), TraceError> {
        let body = &self.raw[..len];
        let bad = |what: String| TraceError::Corrupt {
            path: self.path.clone(),
            offset: at,
            what,
        };
        if body.len() < 20 {
            return Err(bad("block body too short".into()));
        }
        let n = u32::from_le_bytes(body[0..4].try_into().expect("4 bytes"));
        if n == 0 || n > MAX_BLOCK_EVENTS {
            return Err(bad(format!("block of {n} events")));
        }
        let n = n as usize;
        let first_time = u64::from_le_bytes(body[4..12].try_into().expect("8 bytes"));
        let unit = u64::from_le_bytes(body[12..20].try_into().expect("8 bytes"));
        // The writer's unit divides time steps below 2^63 and is 1 when
        // they are all 0: anything else would decode to times that are
        // all the same or wrap around.
        if unit == 0 || unit > MAX_TIME_STEP {
            return Err(bad(format!(
                "field `unit`: a time unit of {unit} ns (a unit is 1 to 2^63 - 1)"
            )));
        }
        let mut pos = 20;
        // Largest encoded size per column: varints of u64, u32, bytes.
        let max_raw = [n * 10, n * 5, n, n * 10, n];
        for (i, column) in self.columns.iter_mut().enumerate() {
            let Some(lens) = body.get(pos..pos + 8) else {
                return Err(bad(format!("column {i} header missing")));
            };
            let raw_len = u32::from_le_bytes(lens[..4].try_into().expect("4 bytes")) as usize;
            let comp_len = u32::from_le_bytes(lens[4..].try_into().expect("4 bytes")) as usize;
            pos += 8;
            let Some(compressed) = body.get(pos..pos + comp_len) else {
                return Err(bad(format!("column {i} runs past the block")));
            };
            pos += comp_len;
            if raw_len < n || raw_len > max_raw[i] {
                return Err(bad(format!("column {i} of {raw_len} bytes for {n} events")));
            }
            column.clear();
            column.reserve(raw_len);
            let got = self
                .decompressor
                .decompress_to_buffer(compressed, column)
                .map_err(|e| bad(format!("column {i}: zstd: {e}")))?;
            if got != raw_len {
                return Err(bad(format!("column {i}: {got} bytes, expected {raw_len}")));
            }
        }
        if pos != body.len() {
            return Err(bad("bytes after the last column".into()));
        }

        if self.columns[2].len() != n || self.columns[4].len() != n {
            return Err(bad("op or order column of the wrong length".into()));
        }
        self.predicted.fill(0);
        self.write_predicted = 0;
        self.cursor = Cursor {
            at,
            n,
            i: 0,
            time: first_time,
            unit,
            pos: [0; 3],
        };
        Ok(())
    }

    /// Decodes the next (at most) `CHUNK` events of the current block into
    /// `self.block`. Small chunks keep the decoded events in cache until
    /// they are handed out.
    fn decode_chunk(&mut self) -> Result<(), TraceError> {
        const CHUNK: usize = 2048;
        let c = &mut self.cursor;
        let bad = |what: String| TraceError::Corrupt {
            path: self.path.clone(),
            offset: c.at,
            what,
        };
        let [times, cpus, ops, pfns, orders] = &self.columns;
        let mut times = Varints::at(times, c.pos[0]);
        let mut cpus = Varints::at(cpus, c.pos[1]);
        let mut pfns = Varints::at(pfns, c.pos[2]);
        let end = c.n.min(c.i + CHUNK);
        let (ops, orders) = (&ops[c.i..end], &orders[c.i..end]);
        self.block.clear();
        let mut time = c.time;
        for (k, (&op, &order)) in ops.iter().zip(orders).enumerate() {
            let i = c.i + k;
            let (Some(dt), Some(cpu), Some(dp)) =
                (times.next_small(), cpus.next_small(), pfns.next())
            else {
                return Err(bad(format!("event {i}: a varint column ends early")));
            };
            // A time outside 0..2^64 is forged, not wrapped around.
            time = unzigzag(dt)
                .checked_mul(c.unit as i64)
                .and_then(|step| time.checked_add_signed(step))
                .ok_or_else(|| {
                    bad(format!(
                        "event {i}: its time runs outside 0 to 2^64 - 1 ns (from {time}, {} units of {})",
                        unzigzag(dt),
                        c.unit
                    ))
                })?;
            if cpu >= u64::from(MAX_CPUS) {
                return Err(bad(format!("event {i}: cpu {cpu} out of range")));
            }
            let Some(op) = self.ops.get(usize::from(op)).copied().flatten() else {
                return Err(bad(format!("event {i}: op {op}")));
            };
            let Some(order) = Order::new(order) else {
                return Err(bad(format!("event {i}: order {order} > {MAX_ORDER}")));
            };
            let predicted = if op == Op::Write {
                if cpu != 0 || order != Order::ZERO {
                    return Err(bad(format!(
                        "event {i}: a write of cpu {cpu}, order {order}"
                    )));
                }
                &mut self.write_predicted
            } else {
                &mut self.predicted[cpu as usize]
            };
            let pfn = predicted.wrapping_add(unzigzag(dp) as u64);
            if pfn >= MAX_PFN || pfn + order.frames() > MAX_PFN {
                return Err(bad(format!("event {i}: pfn {pfn:#x} out of range")));
            }
            *predicted = pfn + order.frames();
            self.block.push(Event {
                time_ns: time,
                cpu: cpu as u32,
                op,
                pfn: Pfn(pfn),
                order,
            });
        }
        c.time = time;
        c.i = end;
        c.pos = [times.pos, cpus.pos, pfns.pos];
        if end == c.n && !(times.done() && cpus.done() && pfns.done()) {
            return Err(bad("bytes left over in a varint column".into()));
        }
        self.next = 0;
        Ok(())
    }
}

/// The ops by byte: free, allocations by migratetype, and (version 2)
/// sampled writes.
const OPS_V2: [Option<Op>; 5] = [
    Some(Op::Free),
    Some(Op::Alloc(MigrateType::Unmovable)),
    Some(Op::Alloc(MigrateType::Movable)),
    Some(Op::Alloc(MigrateType::Reclaimable)),
    Some(Op::Write),
];

/// Where decoding stands in the current block.
#[derive(Default)]
struct Cursor {
    /// Offset of the block, for errors.
    at: u64,
    /// Events in the block.
    n: usize,
    /// Events decoded so far.
    i: usize,
    /// Time of the last event decoded.
    time: u64,
    unit: u64,
    /// Positions in the time, cpu and pfn columns.
    pos: [usize; 3],
}

impl<R: Read + Seek> NvtReader<R> {
    /// Decodes the next chunk of events into `self.block`: `Ok(false)` at
    /// the end of the trace.
    fn advance(&mut self) -> Result<bool, TraceError> {
        if self.cursor.i < self.cursor.n {
            self.decode_chunk()?;
            return Ok(true);
        }
        if !self.read_block()? {
            return Ok(false);
        }
        self.decode_chunk()?;
        Ok(true)
    }

    /// The next events in bulk (a few thousand at a time), or `None` at the
    /// end: the same events as the iterator, without a `Result` per event,
    /// for consumers that want every cycle (replay). Mixing it with the
    /// iterator is fine; neither repeats or skips events.
    pub fn next_chunk(&mut self) -> Option<Result<&[Event], TraceError>> {
        if self.next < self.block.len() {
            let start = self.next;
            self.next = self.block.len();
            return Some(Ok(&self.block[start..]));
        }
        match self.refill()? {
            Ok(()) => {
                self.next = self.block.len();
                Some(Ok(&self.block[..]))
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// Decode the next events into `block`: `None` at the end, and after an
    /// error (which is returned once), so the reader stops.
    fn refill(&mut self) -> Option<Result<(), TraceError>> {
        if self.done {
            return None;
        }
        let outcome = self.advance();
        if !matches!(outcome, Ok(true)) {
            self.done = true;
            self.block.clear();
        }
        match outcome {
            Ok(true) => Some(Ok(())),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

impl<R: Read + Seek> Iterator for NvtReader<R> {
    type Item = Result<Event, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if let Some(&event) = self.block.get(self.next) {
            self.next += 1;
            return Some(Ok(event));
        }
        match self.refill()? {
            Ok(()) => {
                self.next = 1;
                Some(Ok(self.block[0]))
            }
            Err(e) => Some(Err(e)),
        }
    }
}

impl<R: Read + Seek> EventSource for NvtReader<R> {
    fn format(&self) -> Format {
        Format::Nvt
    }

    fn header(&self) -> Option<&TraceHeader> {
        Some(&self.header)
    }

    fn counts(&self) -> SourceCounts {
        self.header.counts.clone()
    }
}

/// Checks that a header describes a possible machine (checksums only show
/// that the file is as written, not that what was written makes sense):
/// the field at fault and what is wrong with it.
///
/// At least one CPU, at most [`MAX_CPUS`]; a page size that is a power of
/// two; zones ascending and apart, each inside the 52-bit frame space with
/// no more frames present than spanned; RAM ranges `[start, end)` not
/// empty, ascending and apart, inside the frame space.
fn check_header(header: &TraceHeader) -> Result<(), (String, String)> {
    let Some(m) = &header.machine else {
        return Ok(());
    };
    let fault = |field: String, what: String| Err((field, what));
    if m.cpus == 0 || m.cpus > MAX_CPUS {
        return fault(
            "machine.cpus".into(),
            format!("is {}: a machine has 1 to {MAX_CPUS} CPUs", m.cpus),
        );
    }
    if !m.page_size.is_power_of_two() {
        return fault(
            "machine.page_size".into(),
            format!("is {}: a page size is a power of two", m.page_size),
        );
    }
    let mut end_before: Option<(usize, u64)> = None;
    for (i, z) in m.zones.iter().enumerate() {
        let field = |name: &str| format!("machine.zones[{i}].{name}");
        let Some(end) = z.start_pfn.checked_add(z.spanned).filter(|&e| e <= MAX_PFN) else {
            return fault(
                field("spanned"),
                format!(
                    "is {}: from start_pfn {:#x} the zone would end beyond the 52-bit frame space",
                    z.spanned, z.start_pfn
                ),
            );
        };
        if z.present > z.spanned {
            return fault(
                field("present"),
                format!(
                    "is {}: more frames present than the {} spanned",
                    z.present, z.spanned
                ),
            );
        }
        if let Some((j, before)) = end_before.filter(|&(_, e)| z.start_pfn < e) {
            return fault(
                field("start_pfn"),
                format!(
                    "is {:#x}: inside zone {j}, which ends at {before:#x} (zones are ascending and do not overlap)",
                    z.start_pfn
                ),
            );
        }
        end_before = Some((i, end));
    }
    let mut end_before = 0;
    for (i, &(start, end)) in m.ram.iter().enumerate() {
        let field = format!("machine.ram[{i}]");
        if start >= end || end > MAX_PFN {
            return fault(
                field,
                format!("is [{start:#x}, {end:#x}): not a range of frames inside the 52-bit frame space"),
            );
        }
        if start < end_before {
            return fault(
                field,
                format!(
                    "is [{start:#x}, {end:#x}): it starts before the range before it ends at {end_before:#x} (ranges are ascending and do not overlap)"
                ),
            );
        }
        end_before = end;
    }
    Ok(())
}

/// Reads as much of `buf` as the input has; returns how much.
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn read_exact_or(
    input: &mut impl Read,
    buf: &mut [u8],
    path: &Path,
    truncated: impl FnOnce() -> TraceError,
) -> Result<(), TraceError> {
    match input.read_exact(buf) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => Err(truncated()),
        Err(e) => Err(TraceError::io(path, e)),
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[inline]
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// LEB128 varints from a byte slice; `None` past the end or on an
/// over-long encoding.
struct Varints<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Varints<'a> {
    #[cfg(test)]
    fn new(bytes: &'a [u8]) -> Self {
        Varints { bytes, pos: 0 }
    }

    fn at(bytes: &'a [u8], pos: usize) -> Self {
        Varints { bytes, pos }
    }

    fn done(&self) -> bool {
        self.pos == self.bytes.len()
    }

    /// For columns of mostly one-byte values (time deltas, CPUs): the
    /// one-byte case first, a well-predicted branch.
    #[inline(always)]
    fn next_small(&mut self) -> Option<u64> {
        match self.bytes.get(self.pos) {
            Some(&b) if b < 0x80 => {
                self.pos += 1;
                Some(u64::from(b))
            }
            _ => self.next(),
        }
    }

    /// For columns of mixed lengths (pfn deltas).
    #[inline(always)]
    fn next(&mut self) -> Option<u64> {
        // Fast path, without a branch per byte: load 8 bytes, find the
        // first byte with its high bit clear (the last of the varint),
        // keep the bytes up to it and squeeze out the continuation bits.
        if let Some(chunk) = self.bytes.get(self.pos..self.pos + 8) {
            let word = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            let stops = !word & 0x8080_8080_8080_8080;
            if stops != 0 {
                let len = (stops.trailing_zeros() + 1) / 8;
                let w = word & (u64::MAX >> (64 - 8 * len));
                let value = (w & 0x7f)
                    | (w >> 1 & 0x3f80)
                    | (w >> 2 & 0x1f_c000)
                    | (w >> 3 & 0xfe0_0000)
                    | (w >> 4 & 0x7_f000_0000)
                    | (w >> 5 & 0x3f8_0000_0000)
                    | (w >> 6 & 0x1_fc00_0000_0000)
                    | (w >> 7 & 0xfe_0000_0000_0000);
                self.pos += len as usize;
                return Some(value);
            }
        }
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        if b < 0x80 {
            return Some(u64::from(b));
        }
        self.slow(u64::from(b & 0x7f))
    }

    #[cold]
    fn slow(&mut self, mut value: u64) -> Option<u64> {
        let mut shift = 7;
        loop {
            let b = *self.bytes.get(self.pos)?;
            self.pos += 1;
            if shift == 63 && b > 1 {
                return None;
            }
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(value);
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        let mut values = vec![0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX];
        values.extend((0..64).map(|b| 1u64 << b));
        values.extend((1..64).map(|b| (1u64 << b) - 1));
        let mut buf = Vec::new();
        for &v in &values {
            put_varint(&mut buf, v);
        }
        let mut r = Varints::new(&buf);
        for &v in &values {
            assert_eq!(r.next(), Some(v));
        }
        assert!(r.done());
        assert_eq!(r.next(), None);
        // Eleven continuation bytes are not a u64.
        assert_eq!(Varints::new(&[0xff; 11]).next(), None);
    }

    #[test]
    fn zigzag_round_trip() {
        for v in [0i64, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn gcd_of_deltas() {
        assert_eq!(gcd(0, 3000), 3000);
        assert_eq!(gcd(3000, 2000), 1000);
        assert_eq!(gcd(0, 0), 0);
    }
}
