//! [`TraceInfo`]: what a trace holds, from one pass over any source.

use std::collections::{BTreeMap, HashMap};

use nvmos_frames::{MigrateType, ORDERS};

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
    /// Events per CPU.
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
    /// Frees of a block that was not allocated earlier in the trace and
    /// does not lie inside a live block: frames allocated before recording
    /// began. A replay skips them.
    pub frees_before_recording: u64,
    /// Frees of part of a live block allocated at a higher order (the
    /// kernel split it, e.g. a huge page): not the block's own free.
    pub frees_inside_live_blocks: u64,
    /// Blocks still allocated at the end of the trace.
    pub live_at_end: u64,
    /// Events whose time is earlier than the event before (out-of-order
    /// CPU buffers).
    pub time_reversals: u64,
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
    cpus: BTreeMap<u32, u64>,
    alloc_orders: [u64; ORDERS],
    free_orders: [u64; ORDERS],
    migratetypes: [u64; 3],
    first_time: Option<u64>,
    last_time: u64,
    pfn_min: u64,
    pfn_max: u64,
    frames_allocated: u64,
    /// Live blocks by first frame → order. Invariant: holds every block
    /// allocated in the trace and not yet freed at the same pfn.
    live: HashMap<u64, u8>,
    /// The same blocks ordered, to find the block a partial free lies in;
    /// only blocks of order > 0, which are the only ones that can contain
    /// another pfn.
    live_large: BTreeMap<u64, u8>,
    frees_before_recording: u64,
    frees_inside_live_blocks: u64,
    time_reversals: u64,
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
            cpus: BTreeMap::new(),
            alloc_orders: [0; ORDERS],
            free_orders: [0; ORDERS],
            migratetypes: [0; 3],
            first_time: None,
            last_time: 0,
            pfn_min: u64::MAX,
            pfn_max: 0,
            frames_allocated: 0,
            live: HashMap::new(),
            live_large: BTreeMap::new(),
            frees_before_recording: 0,
            frees_inside_live_blocks: 0,
            time_reversals: 0,
        }
    }

    /// Counts one event.
    pub fn add(&mut self, e: &Event) {
        self.events += 1;
        *self.cpus.entry(e.cpu).or_default() += 1;
        if self.first_time.is_none() {
            self.first_time = Some(e.time_ns);
        } else if e.time_ns < self.last_time {
            self.time_reversals += 1;
        }
        self.last_time = e.time_ns;
        let pfn = e.pfn.get();
        let frames = e.order.frames();
        self.pfn_min = self.pfn_min.min(pfn);
        self.pfn_max = self.pfn_max.max(pfn + frames - 1);
        let order = e.order.get();
        match e.op {
            Op::Alloc(kind) => {
                self.allocs += 1;
                self.alloc_orders[e.order.index()] += 1;
                self.migratetypes[kind as usize] += 1;
                self.frames_allocated += frames;
                // A second alloc of a live pfn means a free was lost; the
                // newer block replaces the old.
                if let Some(old) = self.live.insert(pfn, order) {
                    if old > 0 {
                        self.live_large.remove(&pfn);
                    }
                }
                if order > 0 {
                    self.live_large.insert(pfn, order);
                }
            }
            Op::Free => {
                self.frees += 1;
                self.free_orders[e.order.index()] += 1;
                if let Some(old) = self.live.remove(&pfn) {
                    if old > 0 {
                        self.live_large.remove(&pfn);
                    }
                    return;
                }
                let inside = self
                    .live_large
                    .range(..pfn)
                    .next_back()
                    .is_some_and(|(&start, &o)| pfn < start + (1u64 << o));
                if inside {
                    self.frees_inside_live_blocks += 1;
                } else {
                    self.frees_before_recording += 1;
                }
            }
        }
    }

    /// The summary, with the source's format, header and counts.
    pub fn finish(
        self,
        format: Format,
        header: Option<TraceHeader>,
        counts: SourceCounts,
    ) -> TraceInfo {
        let touched = self.events > 0;
        TraceInfo {
            format,
            header,
            events: self.events,
            allocs: self.allocs,
            frees: self.frees,
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
            frees_before_recording: self.frees_before_recording,
            frees_inside_live_blocks: self.frees_inside_live_blocks,
            live_at_end: self.live.len() as u64,
            time_reversals: self.time_reversals,
            counts,
        }
    }
}
