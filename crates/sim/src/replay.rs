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

use nvmos_frames::{AllocError, FrameAllocator, MigrateType, Order, Pfn, Request, ZoneMap};
use nvmos_trace::{Event, Op};
use rustc_hash::{FxHashMap, FxHashSet};

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
    /// Allocations the allocator refused (out of memory).
    pub alloc_failures: u64,
    /// Frees of blocks allocated before the recording began: skipped.
    pub frees_before_recording: u64,
    /// Frees of blocks whose allocation failed in this replay: skipped.
    pub frees_of_failed: u64,
    /// Frees of part of a block (Linux's `split_page`, `free_pages_exact`):
    /// the block is given back once all of it has been freed.
    pub partial_frees: u64,
    /// Allocations of a traced block the trace never freed (a free lost to
    /// a ring-buffer overrun): the earlier block is freed first.
    pub lost_frees: u64,
    /// Nanoseconds the replay took, reading the trace included.
    pub elapsed_ns: u64,
    /// Duration of the trace itself, first to last event.
    pub trace_ns: u64,
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
    #[error("reading the trace: {0}")]
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

/// A traced block alive in the replay.
#[derive(Copy, Clone, Debug)]
struct Live {
    /// The allocator's first frame for it.
    ours: Pfn,
    order: Order,
    kind: MigrateType,
    /// Frames of it the trace has freed so far (partial frees).
    freed: u64,
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
    let cpus = alloc.cpus();
    let zones = ZoneMap::new(alloc.zones()).expect("an allocator's zones are valid");
    let mut wear = WearCounter::new(zones, model);
    let mut stats = ReplayStats::default();
    let mut live: FxHashMap<u64, Live> = FxHashMap::default();
    let mut failed: FxHashSet<u64> = FxHashSet::default();
    let mut last_time = 0;
    let start = Instant::now();
    for event in events {
        let event = event.map_err(ReplayError::Trace)?;
        let index = stats.events;
        stats.events += 1;
        last_time = event.time_ns;
        let cpu = event.cpu % cpus;
        match event.op {
            Op::Alloc(kind) => {
                if let Some(old) = live.remove(&event.pfn.0) {
                    stats.lost_frees += 1;
                    give_back(alloc, old, cpu, index)?;
                    stats.frees += 1;
                }
                failed.remove(&event.pfn.0);
                match alloc.alloc(Request::new(event.order, cpu, kind)) {
                    Ok(ours) => {
                        stats.allocs += 1;
                        wear.record_alloc(ours, event.order);
                        live.insert(
                            event.pfn.0,
                            Live {
                                ours,
                                order: event.order,
                                kind,
                                freed: 0,
                            },
                        );
                    }
                    Err(_) => {
                        stats.alloc_failures += 1;
                        failed.insert(event.pfn.0);
                    }
                }
            }
            Op::Free => {
                if let Some(block) = live.get(&event.pfn.0).copied() {
                    if block.order == event.order && block.freed == 0 {
                        live.remove(&event.pfn.0);
                        give_back(alloc, block, cpu, index)?;
                        stats.frees += 1;
                        continue;
                    }
                }
                match find_enclosing(&live, event.pfn, event.order) {
                    Some(head) => {
                        stats.partial_frees += 1;
                        let block = live.get_mut(&head).expect("found above");
                        block.freed += event.order.frames();
                        if block.freed >= block.order.frames() {
                            let block = live.remove(&head).expect("found above");
                            give_back(alloc, block, cpu, index)?;
                            stats.frees += 1;
                        }
                    }
                    None if failed.remove(&event.pfn.0) => stats.frees_of_failed += 1,
                    None => stats.frees_before_recording += 1,
                }
            }
        }
    }
    stats.elapsed_ns = start.elapsed().as_nanos() as u64;
    stats.trace_ns = last_time;
    Ok((stats, wear))
}

/// The live traced block that holds the block of `order` at `pfn`, if any:
/// the head itself (freed in pieces), or a head found by aligning `pfn`
/// down to each larger order.
fn find_enclosing(live: &FxHashMap<u64, Live>, pfn: Pfn, order: Order) -> Option<u64> {
    if live.get(&pfn.0).is_some_and(|b| b.order >= order) {
        return Some(pfn.0);
    }
    Order::all().skip(order.index() + 1).find_map(|o| {
        let head = pfn.0 & !(o.frames() - 1);
        live.get(&head)
            .filter(|b| head + b.order.frames() >= pfn.0 + order.frames())
            .map(|_| head)
    })
}

fn give_back<A, E>(alloc: &A, block: Live, cpu: u32, event: u64) -> Result<(), ReplayError<E>>
where
    A: FrameAllocator + ?Sized,
    E: std::error::Error + 'static,
{
    alloc
        .free(block.ours, Request::new(block.order, cpu, block.kind))
        .map_err(|error| ReplayError::Allocator {
            event,
            pfn: block.ours,
            order: block.order,
            error,
        })
}

/// "Linux (as recorded)": the kernel's own placement, counted straight from
/// the traced pfns over the recorded machine's zones.
pub fn as_recorded<I, E>(
    zones: ZoneMap,
    events: I,
    model: WriteModel,
) -> Result<(ReplayStats, WearCounter), ReplayError<E>>
where
    I: IntoIterator<Item = Result<Event, E>>,
    E: std::error::Error + 'static,
{
    let mut wear = WearCounter::new(zones, model);
    let mut stats = ReplayStats::default();
    let start = Instant::now();
    for event in events {
        let event = event.map_err(ReplayError::Trace)?;
        stats.events += 1;
        stats.trace_ns = event.time_ns;
        match event.op {
            Op::Alloc(_) => {
                stats.allocs += 1;
                wear.record_alloc(event.pfn, event.order);
            }
            Op::Free => stats.frees += 1,
        }
    }
    stats.elapsed_ns = start.elapsed().as_nanos() as u64;
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
        assert_eq!(stats.frees_before_recording, 1);
        assert_eq!(stats.partial_frees, 4);
        assert_eq!(stats.lost_frees, 1);
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
        assert_eq!(err.to_string(), "reading the trace: bad line 7");
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
        assert_eq!((stats.allocs, stats.frees), (3, 1));
        assert_eq!(wear.writes()[3], 2);
        assert_eq!(wear.writes()[8..16], [1; 8]);
    }
}
