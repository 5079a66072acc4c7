//! Replay: drive a page-frame allocator with a recorded trace.
//!
//! The trace says which block the kernel allocated and freed, on which CPU,
//! for what kind of data. The replay asks the allocator under test for a
//! block of the same order, on the same CPU (modulo the allocator's CPU
//! count), with the same migratetype, and remembers which of its frames
//! stands for the traced one, so the trace's free of that block frees the
//! allocator's. Where the allocator put the block is its own decision:
//! that placement is what the wear figures measure.

use std::time::Instant;

use nvmos_frames::{AllocError, FrameAllocator, Order, Pfn, Request, ZoneMap};
use nvmos_trace::{Accounting, BlockTracker, Effect, Event, LiveBlock, Op};

use crate::wear::{WearCounter, WriteModel};

/// What happened during a replay, beyond the successful operations.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplayStats {
    /// Events read.
    pub events: u64,
    /// Allocations the allocator served.
    pub allocs: u64,
    /// Blocks given back to the allocator.
    pub frees: u64,
    /// Allocations the allocator refused (out of memory). A row with any
    /// is flagged: the replay no longer follows the trace.
    pub alloc_failures: u64,
    /// Frees of blocks whose allocation the allocator refused: nothing to
    /// give back.
    pub frees_of_failed: u64,
    /// Frames written outside the replayed memory (the kernel's placement
    /// of a trace beyond `--memory`, were it not refused). A row with any
    /// is flagged.
    pub outside: u64,
    /// How every event was classified: the same counts `trace info`
    /// reports, from the same [`BlockTracker`]; `lost_events` from the
    /// source, filled in by the caller that has it.
    #[serde(flatten)]
    pub accounting: Accounting,
    /// Nanoseconds the replay took, reading the trace included.
    pub elapsed_ns: u64,
    /// Duration of the trace itself, first to last event.
    pub trace_ns: u64,
}

impl ReplayStats {
    /// Why this replay's figures should not be taken at face value, if
    /// they should not: allocations refused or writes outside memory.
    pub fn flag(&self) -> Option<String> {
        let mut what = Vec::new();
        if self.alloc_failures > 0 {
            what.push(format!("{} allocations refused", self.alloc_failures));
        }
        if self.outside > 0 {
            what.push(format!("{} frames written outside memory", self.outside));
        }
        (!what.is_empty()).then(|| what.join(", "))
    }
}

impl ReplayStats {
    /// Mean nanoseconds per event.
    pub fn ns_per_event(&self) -> f64 {
        if self.events == 0 {
            0.0
        } else {
            self.elapsed_ns as f64 / self.events as f64
        }
    }

    /// Events replayed per second.
    pub fn events_per_second(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.events as f64 * 1e9 / self.elapsed_ns as f64
        }
    }
}

/// Why a replay stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError<E: std::error::Error + 'static> {
    /// The trace could not be read.
    #[error("reading the trace")]
    Trace(#[source] E),
    /// The allocator refused to free a block it had handed out: a bug in
    /// the allocator.
    #[error(
        "event {event}: the allocator refused to free its own block {pfn} (order {order}): {error}"
    )]
    Allocator {
        /// Index of the event, from 0.
        event: u64,
        /// The allocator's block.
        pfn: Pfn,
        /// Its order.
        order: Order,
        /// What it said.
        #[source]
        error: AllocError,
    },
}

/// Replay `events` through `alloc`, counting writes with `model` over the
/// allocator's zones.
pub fn replay<A, I, E>(
    alloc: &A,
    events: I,
    model: WriteModel,
) -> Result<(ReplayStats, WearCounter), ReplayError<E>>
where
    A: FrameAllocator + ?Sized,
    I: IntoIterator<Item = Result<Event, E>>,
    E: std::error::Error + 'static,
{
    let zones = ZoneMap::new(alloc.zones()).expect("an allocator's zones are valid");
    run(
        &mut Allocator(alloc),
        events,
        WearCounter::new(zones, model),
    )
}

/// "Linux (as recorded)": the kernel's own placement, counted straight from
/// the traced pfns over the recorded machine's zones, with the same
/// matching of frees to allocations as a replay.
pub fn as_recorded<I, E>(
    zones: ZoneMap,
    events: I,
    model: WriteModel,
) -> Result<(ReplayStats, WearCounter), ReplayError<E>>
where
    I: IntoIterator<Item = Result<Event, E>>,
    E: std::error::Error + 'static,
{
    run(&mut Recorded, events, WearCounter::new(zones, model))
}

/// Where a replay puts each traced block.
trait Placement {
    /// CPUs the placement serves; traced CPUs are taken modulo this.
    fn cpus(&self) -> u32;
    /// The first frame for the block `event` allocates, or `None` when
    /// there is no room.
    fn place(&mut self, event: &Event, req: Request) -> Option<Pfn>;
    /// Give back the block placed at `ours`.
    fn give_back(&mut self, block: &LiveBlock, ours: Pfn, cpu: u32) -> Result<(), AllocError>;
}

/// An allocator under test decides.
struct Allocator<'a, A: ?Sized>(&'a A);

impl<A: FrameAllocator + ?Sized> Placement for Allocator<'_, A> {
    fn cpus(&self) -> u32 {
        self.0.cpus()
    }

    #[inline]
    fn place(&mut self, _event: &Event, req: Request) -> Option<Pfn> {
        self.0.alloc(req).ok()
    }

    #[inline]
    fn give_back(&mut self, block: &LiveBlock, ours: Pfn, cpu: u32) -> Result<(), AllocError> {
        self.0
            .free(ours, Request::new(block.order, cpu, block.kind))
    }
}

/// The kernel decided: the traced pfn is the placement.
struct Recorded;

impl Placement for Recorded {
    fn cpus(&self) -> u32 {
        u32::MAX
    }

    #[inline]
    fn place(&mut self, event: &Event, _req: Request) -> Option<Pfn> {
        Some(event.pfn)
    }

    #[inline]
    fn give_back(&mut self, _block: &LiveBlock, _ours: Pfn, _cpu: u32) -> Result<(), AllocError> {
        Ok(())
    }
}

/// The replay proper: the [`BlockTracker`] matches every free to its
/// allocation (and counts what does not match), `placement` places and
/// takes back the blocks; the tracker keeps the placement as each live
/// block's tag.
fn run<P, I, E>(
    placement: &mut P,
    events: I,
    mut wear: WearCounter,
) -> Result<(ReplayStats, WearCounter), ReplayError<E>>
where
    P: Placement,
    I: IntoIterator<Item = Result<Event, E>>,
    E: std::error::Error + 'static,
{
    let cpus = placement.cpus();
    let mut stats = ReplayStats::default();
    let mut tracker = BlockTracker::new();
    let give_back =
        |placement: &mut P, stats: &mut ReplayStats, block: LiveBlock, cpu: u32, event: u64| {
            match block.tag {
                Some(ours) => {
                    placement
                        .give_back(&block, Pfn(ours), cpu)
                        .map_err(|error| ReplayError::Allocator {
                            event,
                            pfn: Pfn(ours),
                            order: block.order,
                            error,
                        })?;
                    stats.frees += 1;
                }
                None => stats.frees_of_failed += 1,
            }
            Ok(())
        };
    let start = Instant::now();
    for event in events {
        let event = event.map_err(ReplayError::Trace)?;
        let index = stats.events;
        stats.events += 1;
        stats.trace_ns = stats.trace_ns.max(event.time_ns);
        let cpu = event.cpu % cpus;
        match tracker.step(&event) {
            Effect::Allocated { replaced } => {
                if let Some(old) = replaced {
                    give_back(placement, &mut stats, old, cpu, index)?;
                }
                let Op::Alloc(kind) = event.op else {
                    unreachable!("the tracker allocates only for allocations")
                };
                match placement.place(&event, Request::new(event.order, cpu, kind)) {
                    Some(ours) => {
                        stats.allocs += 1;
                        wear.record_alloc(ours, event.order);
                        tracker.set_tag(event.pfn.0, ours.0);
                    }
                    None => stats.alloc_failures += 1,
                }
            }
            Effect::Freed(block) => give_back(placement, &mut stats, block, cpu, index)?,
            Effect::PartlyFreed | Effect::NotLive => {}
        }
    }
    stats.elapsed_ns = start.elapsed().as_nanos() as u64;
    stats.accounting = tracker.counts().clone();
    stats.outside = wear.outside;
    Ok((stats, wear))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmos_frames::{Buddy, IBuddy, MigrateType, Zone};
    use std::convert::Infallible;

    type Lock = parking_lot::RawMutex;

    fn ev(time_ns: u64, cpu: u32, op: Op, pfn: u64, order: u8) -> Result<Event, Infallible> {
        Ok(Event {
            time_ns,
            cpu,
            op,
            pfn: Pfn(pfn),
            order: Order::new(order).unwrap(),
        })
    }

    const A: Op = Op::Alloc(MigrateType::Movable);

    #[test]
    fn maps_traced_blocks_and_counts_what_it_skips() {
        let zones = [Zone::new(0, 64)];
        let alloc = Buddy::<Lock>::new(&zones, 2).unwrap();
        let trace = vec![
            ev(0, 0, A, 1000, 0),
            ev(1, 1, A, 2000, 2),
            ev(2, 3, Op::Free, 1000, 0), // cpu 3 maps to cpu 1
            ev(3, 0, Op::Free, 5555, 0), // allocated before recording
            ev(4, 0, A, 4096, 3),        // split later, freed piecewise
            ev(5, 0, Op::Free, 4096, 2),
            ev(6, 0, Op::Free, 4100, 1),
            ev(7, 0, Op::Free, 4102, 0),
            ev(8, 0, Op::Free, 4103, 0),
            ev(9, 0, A, 2000, 2), // 2000 was never freed: a lost free
        ];
        let (stats, wear) = replay(&alloc, trace, WriteModel::default()).unwrap();
        assert_eq!(stats.events, 10);
        assert_eq!(stats.allocs, 4);
        assert_eq!(stats.frees, 3);
        assert_eq!(stats.accounting.frees_before_recording, 1);
        assert_eq!(stats.accounting.partial_frees, 4);
        assert_eq!(stats.accounting.allocs_of_live_pfn, 1);
        assert_eq!(stats.accounting.events_read, 10);
        assert_eq!(stats.trace_ns, 9);
        // Only the last order-2 block is still out.
        assert_eq!(alloc.stats().allocated_frames(), 4);
        let total: u64 = wear.writes().iter().map(|&w| u64::from(w)).sum();
        assert_eq!(total, 1 + 4 + 8 + 4);
        alloc.validate().unwrap();
    }

    #[test]
    fn failures_are_counted_and_their_frees_skipped() {
        let zones = [Zone::new(0, 4)];
        let alloc = IBuddy::<Lock>::new(&zones, 1).unwrap();
        let trace = vec![
            ev(0, 0, A, 10, 2),
            ev(1, 0, A, 20, 0), // no memory left
            ev(2, 0, Op::Free, 20, 0),
            ev(3, 0, Op::Free, 10, 2),
        ];
        let (stats, _) = replay(&alloc, trace, WriteModel::default()).unwrap();
        assert_eq!(
            (stats.alloc_failures, stats.frees_of_failed, stats.frees),
            (1, 1, 1)
        );
        assert_eq!(stats.flag().as_deref(), Some("1 allocations refused"));
        assert_eq!(alloc.stats().allocated_frames(), 0);
    }

    #[test]
    fn trace_errors_stop_the_replay() {
        #[derive(Debug, thiserror::Error)]
        #[error("bad line 7")]
        struct Bad;
        let alloc = Buddy::<Lock>::new(&[Zone::new(0, 8)], 1).unwrap();
        let trace: Vec<Result<Event, Bad>> = vec![Err(Bad)];
        let err = replay(&alloc, trace, WriteModel::default()).unwrap_err();
        assert_eq!(err.to_string(), "reading the trace");
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("bad line 7"));
    }

    #[test]
    fn as_recorded_counts_the_kernels_own_placement() {
        let map = ZoneMap::new(&[Zone::new(0, 16)]).unwrap();
        let trace = vec![
            ev(0, 0, A, 3, 0),
            ev(1, 0, Op::Free, 3, 0),
            ev(2, 0, A, 3, 0),
            ev(3, 0, A, 8, 3),
        ];
        let (stats, wear) = as_recorded(map, trace, WriteModel::default()).unwrap();
        assert_eq!(
            (
                stats.allocs,
                stats.frees,
                stats.accounting.allocs_of_live_pfn
            ),
            (3, 1, 0)
        );
        assert_eq!(wear.writes()[3], 2);
        assert_eq!(wear.writes()[8..16], [1; 8]);
    }
}

/// `trace info` and the replay classify every event the same way: the
/// fixture holding every unusual case gives the same counts both ways,
/// through an allocator and as recorded.
#[cfg(test)]
mod agreement {
    use super::*;
    use nvmos_frames::Zone;

    #[test]
    fn trace_info_and_replay_agree_on_every_count() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../trace/tests/data/every_case.txt");
        let mut source = nvmos_trace::open(&path).unwrap();
        let info = nvmos_trace::TraceInfo::from_source(&mut *source).unwrap();
        let zones = [Zone::new(0, 0x8000)];
        let alloc = nvmos_frames::Buddy::<parking_lot::RawMutex>::new(&zones, 4).unwrap();
        let mut source = nvmos_trace::open(&path).unwrap();
        let (stats, _) = replay(&alloc, &mut source, crate::WriteModel::default()).unwrap();
        let mut replayed = stats.accounting.clone();
        replayed.lost_events = source.counts().lost_events;
        assert_eq!(replayed, info.accounting);
        assert_eq!(stats.flag(), None);
        let (recorded, _) = as_recorded(
            ZoneMap::new(&zones).unwrap(),
            nvmos_trace::open(&path).unwrap(),
            crate::WriteModel::default(),
        )
        .unwrap();
        assert_eq!(
            recorded.accounting.frees_mismatched_order,
            info.accounting.frees_mismatched_order
        );
        assert_eq!(
            Accounting {
                lost_events: info.accounting.lost_events,
                ..recorded.accounting
            },
            info.accounting
        );
        // Blocks still live at the end: the same in both.
        assert_eq!(alloc.stats().allocated_frames(), 4 + 4 + 1);
        assert_eq!(info.live_at_end, 3);
    }
}
