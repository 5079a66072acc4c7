//! The seam every trace source implements, and what sources report beside
//! their events.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::event::{Event, MachineInfo};
use crate::nvt::{NvtReader, MAGIC};
use crate::text::TextReader;
use crate::TraceError;

/// The formats a trace can come in.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// ftrace text: `/sys/kernel/tracing/trace` or `trace_pipe`.
    Ftrace,
    /// `perf script` output of `perf record -e kmem:...`.
    Perf,
    /// nvmos's binary format.
    Nvt,
}

impl Format {
    /// A short lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Ftrace => "ftrace",
            Format::Perf => "perf",
            Format::Nvt => "nvt",
        }
    }
}

/// What a source saw besides the events it yields: the lines and events it
/// did not turn into [`Event`]s, each counted so nothing is dropped
/// silently.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceCounts {
    /// `mm_page_alloc` lines with no page (`page=0000000000000000 pfn=0x0`,
    /// the kernel's pfn -1): allocations that failed. Not yielded.
    pub failed_allocs: u64,
    /// Lines of other events, by event name. Not yielded.
    pub skipped: BTreeMap<String, u64>,
    /// `mm_page_free_batched` lines that repeat an `mm_page_free` of the
    /// same pfn on the same CPU: the kernel traces a batched free twice
    /// (`free_pages_prepare` fires `mm_page_free`, then
    /// `free_unref_folios` fires `mm_page_free_batched`), so these are
    /// not yielded again.
    pub batched_duplicates: u64,
    /// `mm_page_free_batched` lines with no matching `mm_page_free`: yielded
    /// as order-0 frees.
    pub batched_unmatched: u64,
    /// Allocations whose migratetype number is not one of the three the
    /// allocator models, by number: 3 (`MIGRATE_HIGHATOMIC`) is yielded as
    /// unmovable, 4 (`MIGRATE_CMA`) as movable.
    pub remapped_migratetypes: BTreeMap<i32, u64>,
    /// Events the kernel lost (ring-buffer overruns and drops, or
    /// `[LOST n EVENTS]` lines).
    pub lost_events: u64,
    /// Events whose timestamp is earlier than the first event's; their
    /// `time_ns` is 0.
    pub early_timestamps: u64,
    /// Events stamped earlier than the event before them, counted on the
    /// timestamps as printed (text traces; for `.nvt`, as
    /// counted when it was converted or recorded; 0 in older files). The
    /// events' `time_ns` cannot show them all: an event stamped before the
    /// first has time 0, and after another event at time 0 that is no
    /// step back. [`Accounting::time_reversals`](crate::Accounting::time_reversals)
    /// takes this count where it is the larger.
    #[serde(default)]
    pub time_reversals: u64,
}

impl SourceCounts {
    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &SourceCounts) {
        self.failed_allocs += other.failed_allocs;
        for (name, n) in &other.skipped {
            *self.skipped.entry(name.clone()).or_default() += n;
        }
        self.batched_duplicates += other.batched_duplicates;
        self.batched_unmatched += other.batched_unmatched;
        for (mt, n) in &other.remapped_migratetypes {
            *self.remapped_migratetypes.entry(*mt).or_default() += n;
        }
        self.lost_events += other.lost_events;
        self.early_timestamps += other.early_timestamps;
        self.time_reversals += other.time_reversals;
    }

    /// Lines of other events, all names together.
    pub fn skipped_total(&self) -> u64 {
        self.skipped.values().sum()
    }
}

/// What a trace says about itself: the machine, how it was made, and the
/// counts its source reported. Stored in `.nvt` files; text traces have
/// none.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TraceHeader {
    /// The recorded machine, when known.
    pub machine: Option<MachineInfo>,
    /// The recorded command line; empty for converted traces.
    pub command: Vec<String>,
    /// Wall-clock start of the recording, nanoseconds since the Unix epoch.
    pub start_unix_ns: Option<u64>,
    /// Where the events came from: `record`, or the format converted.
    pub source: String,
    /// Events in the trace (known once the writer finished).
    pub events: u64,
    /// What the source skipped, lost or remapped.
    pub counts: SourceCounts,
    /// Write sampling (`nvmos record --writes`): its interval and counts.
    /// `None` for traces without write events; a `.nvt` file with it is
    /// format version 2, which readers before write events refuse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<WriteSampling>,
}

/// How the writes in a trace were sampled, and what the sampler could not
/// see or had to skip, counted (see [`crate::record`] for the method).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WriteSampling {
    /// Nominal time between samples, ns.
    pub interval_ns: u64,
    /// Samples taken (each reads and clears the soft-dirty bits of every
    /// process of the recorded tree).
    pub samples: u64,
    /// Samples that started later than one interval after the one before
    /// (the scan took longer than the interval, or the sampler was not
    /// scheduled): their writes cover a longer window.
    pub late_samples: u64,
    /// Write events emitted: one per frame per sample in which it was
    /// written.
    pub writes: u64,
    /// Distinct processes of the recorded tree sampled at least once.
    pub processes: u64,
    /// Process samples that failed because the process had exited (or
    /// could not be read): its writes since the sample before are not in
    /// the trace. Every process of the tree that exits while recording
    /// counts once here.
    pub processes_vanished: u64,
    /// Written pages seen in more than one process in the same sample
    /// (shared memory, copy-on-write not yet broken): counted once.
    pub shared_duplicates: u64,
    /// Present, soft-dirty pages mapped to the shared zero page: not a
    /// write, skipped.
    pub zero_page: u64,
    /// Pages reported soft-dirty while swapped out: written, but held by
    /// no frame, so nothing to attribute; skipped.
    pub swapped: u64,
    /// Dirty-reading pages of a mapping that is new or grown since the
    /// sample before whose frame was already present then: the kernel
    /// marks such a mapping soft-dirty as a whole, so their bit says
    /// nothing; skipped (see `softdirty`).
    #[serde(default)]
    pub remarked: u64,
}

/// A trace: an iterator of events plus what it knows about itself.
///
/// # Contract
///
/// - Events come in trace order, `time_ns` relative to the first event.
/// - After an `Err`, the iterator ends (further calls return `None`).
/// - [`counts`](EventSource::counts) covers the lines read so far; after
///   the iterator ended, the whole trace.
pub trait EventSource: Iterator<Item = Result<Event, TraceError>> {
    /// The source's format.
    fn format(&self) -> Format;
    /// The header, when the format has one (`.nvt`).
    fn header(&self) -> Option<&TraceHeader>;
    /// What was skipped, lost or remapped (for `.nvt`: as recorded).
    fn counts(&self) -> SourceCounts;
    /// The line of the last event yielded, for text sources; `None` where
    /// the format has no lines.
    fn line(&self) -> Option<u64> {
        None
    }
}

impl<S: EventSource + ?Sized> EventSource for Box<S> {
    fn format(&self) -> Format {
        (**self).format()
    }

    fn header(&self) -> Option<&TraceHeader> {
        (**self).header()
    }

    fn counts(&self) -> SourceCounts {
        (**self).counts()
    }

    fn line(&self) -> Option<u64> {
        (**self).line()
    }
}

/// Any trace source, ready to iterate on another thread.
pub type BoxedSource = Box<dyn EventSource + Send>;

/// Opens a trace file of any format, telling them apart by content:
/// `.nvt` by its magic bytes, `perf script` output by its `kmem:` event
/// prefix, ftrace text otherwise (a `# tracer:` header or lines of events).
pub fn open(path: impl AsRef<Path>) -> Result<BoxedSource, TraceError> {
    let path = path.as_ref();
    let mut file = File::open(path).map_err(|e| TraceError::io(path, e))?;
    let mut head = vec![0u8; 64 * 1024];
    let mut len = 0;
    // A short read does not mean end of file; fill the sniffing buffer.
    while len < head.len() {
        match file.read(&mut head[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(TraceError::io(path, e)),
        }
    }
    head.truncate(len);
    file.seek(SeekFrom::Start(0))
        .map_err(|e| TraceError::io(path, e))?;
    match detect(&head) {
        Some(Format::Nvt) => Ok(Box::new(NvtReader::new(BufReader::new(file), path)?)),
        Some(format) => Ok(Box::new(TextReader::new(
            BufReader::with_capacity(1 << 16, file),
            path,
            format,
        ))),
        None => Err(TraceError::UnknownFormat {
            path: path.to_owned(),
            reason: if head.is_empty() {
                "the file is empty".into()
            } else {
                "neither .nvt magic nor ftrace/perf text lines of kmem events".into()
            },
        }),
    }
}

/// The format of a trace from its first bytes, or `None` when it is none.
pub fn detect(head: &[u8]) -> Option<Format> {
    if head.starts_with(&MAGIC) {
        return Some(Format::Nvt);
    }
    if head.is_empty() || head.contains(&0) {
        return None;
    }
    // Text: cut at the last newline so a multi-byte character split by the
    // sniffing buffer does not make the head invalid UTF-8.
    let cut = head
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(head.len(), |i| i + 1);
    let text = std::str::from_utf8(&head[..cut]).ok()?;
    let mut ftrace_like = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("# tracer:") {
            return Some(Format::Ftrace);
        }
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        // perf prints the subsystem with the event name (`kmem:mm_page_alloc:`);
        // ftrace does not (`mm_page_alloc:`).
        match crate::text::event_token(trimmed) {
            Some(token) if token.contains(':') => return Some(Format::Perf),
            Some(_) => ftrace_like = true,
            None => {}
        }
    }
    ftrace_like.then_some(Format::Ftrace)
}
