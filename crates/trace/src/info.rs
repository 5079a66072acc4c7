//! [`TraceInfo`]: what a trace holds, from one pass over any source.

use std::collections::BTreeMap;

use nvmos_frames::{MigrateType, ORDERS};

use crate::accounting::{Accounting, BlockTracker};
use crate::event::{Event, Op};
use crate::source::{EventSource, Format, SourceCounts, TraceHeader};
use crate::TraceError;

/// A summary of a trace.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TraceInfo {
    /// The source's format.
    pub format: Format,
    /// The header, for `.nvt` traces.
    pub header: Option<TraceHeader>,
    /// Events yielded.
    pub events: u64,
    /// Allocation events.
    pub allocs: u64,
    /// Free events.
    pub frees: u64,
    /// Sampled write events (`nvmos record --writes`); the rest of the
    /// events are `allocs + frees`.
    #[serde(default)]
    pub writes: u64,
    /// Allocator events per CPU (writes have no CPU and are not here).
    pub cpus: BTreeMap<u32, u64>,
    /// Allocations per order, index = order (`0..=MAX_ORDER`).
    pub alloc_orders: Vec<u64>,
    /// Frees per order.
    pub free_orders: Vec<u64>,
    /// Allocations per migratetype name.
    pub migratetypes: BTreeMap<String, u64>,
    /// Time of the last event minus the first's.
    pub duration_ns: u64,
    /// Lowest frame an event touched.
    pub pfn_min: Option<u64>,
    /// Highest frame an event touched (last frame of its block).
    pub pfn_max: Option<u64>,
    /// Frames allocated during the trace: `sum(2^order)` over allocations.
    pub frames_allocated: u64,
    /// Everything beyond clean allocate-then-free pairs, classified by the
    /// same [`BlockTracker`] a replay uses (so the counts agree).
    pub accounting: Accounting,
    /// Blocks still allocated at the end of the trace.
    pub live_at_end: u64,
    /// What the source skipped, lost or remapped.
    pub counts: SourceCounts,
}

impl TraceInfo {
    /// Reads `source` to its end.
    pub fn from_source<S: EventSource + ?Sized>(source: &mut S) -> Result<TraceInfo, TraceError> {
        let mut acc = Accumulator::new();
        for event in &mut *source {
            acc.add(&event?);
        }
        Ok(acc.finish(source.format(), source.header().cloned(), source.counts()))
    }
}

/// Collects [`TraceInfo`] one event at a time, for callers that iterate
/// themselves (e.g. while converting).
pub struct Accumulator {
    events: u64,
    allocs: u64,
    frees: u64,
    writes: u64,
    cpus: BTreeMap<u32, u64>,
    alloc_orders: [u64; ORDERS],
    free_orders: [u64; ORDERS],
    migratetypes: [u64; 3],
    first_time: Option<u64>,
    last_time: u64,
    pfn_min: u64,
    pfn_max: u64,
    frames_allocated: u64,
    tracker: BlockTracker,
}

impl Default for Accumulator {
    fn default() -> Self {
        Accumulator::new()
    }
}

impl Accumulator {
    /// An empty summary.
    pub fn new() -> Accumulator {
        Accumulator {
            events: 0,
            allocs: 0,
            frees: 0,
            writes: 0,
            cpus: BTreeMap::new(),
            alloc_orders: [0; ORDERS],
            free_orders: [0; ORDERS],
            migratetypes: [0; 3],
            first_time: None,
            last_time: 0,
            pfn_min: u64::MAX,
            pfn_max: 0,
            frames_allocated: 0,
            tracker: BlockTracker::new(),
        }
    }

    /// Counts one event.
    pub fn add(&mut self, e: &Event) {
        self.events += 1;
        if e.op != Op::Write {
            *self.cpus.entry(e.cpu).or_default() += 1;
        }
        if self.first_time.is_none() {
            self.first_time = Some(e.time_ns);
        }
        self.last_time = self.last_time.max(e.time_ns);
        let pfn = e.pfn.get();
        let frames = e.order.frames();
        self.pfn_min = self.pfn_min.min(pfn);
        self.pfn_max = self.pfn_max.max(pfn + frames - 1);
        match e.op {
            Op::Alloc(kind) => {
                self.allocs += 1;
                self.alloc_orders[e.order.index()] += 1;
                self.migratetypes[kind as usize] += 1;
                self.frames_allocated += frames;
            }
            Op::Free => {
                self.frees += 1;
                self.free_orders[e.order.index()] += 1;
            }
            Op::Write => self.writes += 1,
        }
        self.tracker.step(e);
    }

    /// The summary, with the source's format, header and counts.
    pub fn finish(
        self,
        format: Format,
        header: Option<TraceHeader>,
        counts: SourceCounts,
    ) -> TraceInfo {
        let touched = self.events > 0;
        let mut accounting = self.tracker.counts().clone();
        accounting.add_source_counts(&counts);
        TraceInfo {
            format,
            header,
            events: self.events,
            allocs: self.allocs,
            frees: self.frees,
            writes: self.writes,
            cpus: self.cpus,
            alloc_orders: self.alloc_orders.to_vec(),
            free_orders: self.free_orders.to_vec(),
            migratetypes: MigrateType::ALL
                .iter()
                .map(|&m| (m.name().to_owned(), self.migratetypes[m as usize]))
                .collect(),
            duration_ns: self
                .first_time
                .map_or(0, |first| self.last_time.saturating_sub(first)),
            pfn_min: touched.then_some(self.pfn_min),
            pfn_max: touched.then_some(self.pfn_max),
            frames_allocated: self.frames_allocated,
            accounting,
            live_at_end: self.tracker.live_blocks(),
            counts,
        }
    }
}
