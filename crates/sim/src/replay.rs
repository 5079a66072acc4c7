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

/// Traced pfns below this are kept in a table indexed by pfn; beyond it
/// (a trace from a machine with over a terabyte) in a hash map.
const DIRECT_LIMIT: u64 = 1 << 28;

/// The live traced blocks by traced first frame.
///
/// A table indexed by pfn rather than a hash map: the kernel places
/// neighbouring allocations on neighbouring frames, and a table keeps
/// those entries on the same cache lines where hashing scatters them. A
/// slot is one `u128` and an empty slot is zero, so the table comes from
/// zeroed memory the system maps lazily: a 24 GiB machine's 6.5 M slots
/// cost only the pages the trace touches.
#[derive(Default)]
struct LiveMap {
    direct: Vec<u128>,
    far: FxHashMap<u64, Live>,
}

impl Live {
    /// `ours + 1` in bits 0..64 (so zero is "empty"), the order in 64..68,
    /// the migratetype in 68..70, frames freed so far in 70..82.
    #[inline]
    fn pack(self) -> u128 {
        let kind = match self.kind {
            MigrateType::Unmovable => 0u128,
            MigrateType::Movable => 1,
            MigrateType::Reclaimable => 2,
        };
        u128::from(self.ours.0 + 1)
            | u128::from(self.order.get()) << 64
            | kind << 68
            | u128::from(self.freed) << 70
    }

    #[inline]
    fn unpack(slot: u128) -> Option<Live> {
        if slot == 0 {
            return None;
        }
        Some(Live {
            ours: Pfn((slot as u64) - 1),
            order: Order::new((slot >> 64) as u8 & 0xf).expect("packed from an Order"),
            kind: match (slot >> 68) & 3 {
                0 => MigrateType::Unmovable,
                1 => MigrateType::Movable,
                _ => MigrateType::Reclaimable,
            },
            freed: ((slot >> 70) & 0xfff) as u64,
        })
    }
}

impl LiveMap {
    #[inline]
    fn get(&self, pfn: u64) -> Option<Live> {
        if pfn < DIRECT_LIMIT {
            Live::unpack(*self.direct.get(pfn as usize)?)
        } else {
            self.far.get(&pfn).copied()
        }
    }

    #[inline]
    fn remove(&mut self, pfn: u64) -> Option<Live> {
        if pfn < DIRECT_LIMIT {
            Live::unpack(core::mem::take(self.direct.get_mut(pfn as usize)?))
        } else {
            self.far.remove(&pfn)
        }
    }

    #[inline]
    fn insert(&mut self, pfn: u64, live: Live) {
        if pfn < DIRECT_LIMIT {
            let i = pfn as usize;
            if i >= self.direct.len() {
                self.grow(i);
            }
            self.direct[i] = live.pack();
        } else {
            self.far.insert(pfn, live);
        }
    }

    #[cold]
    fn grow(&mut self, index: usize) {
        let len = (index + 1).next_power_of_two().max(1 << 20);
        let mut bigger = vec![0u128; len];
        bigger[..self.direct.len()].copy_from_slice(&self.direct);
        self.direct = bigger;
    }
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
    /// Give a placed block back.
    fn give_back(&mut self, block: &Live, cpu: u32) -> Result<(), AllocError>;
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
    fn give_back(&mut self, block: &Live, cpu: u32) -> Result<(), AllocError> {
        self.0
            .free(block.ours, Request::new(block.order, cpu, block.kind))
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
    fn give_back(&mut self, _block: &Live, _cpu: u32) -> Result<(), AllocError> {
        Ok(())
    }
}

/// The replay proper: match every free to its allocation and let
/// `placement` place and take back the blocks.
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
    let mut live = LiveMap::default();
    let mut failed: FxHashSet<u64> = FxHashSet::default();
    let give_back = |placement: &mut P, block: Live, cpu: u32, event: u64| {
        placement
            .give_back(&block, cpu)
            .map_err(|error| ReplayError::Allocator {
                event,
                pfn: block.ours,
                order: block.order,
                error,
            })
    };
    let start = Instant::now();
    for event in events {
        let event = event.map_err(ReplayError::Trace)?;
        let index = stats.events;
        stats.events += 1;
        stats.trace_ns = event.time_ns;
        let cpu = event.cpu % cpus;
        match event.op {
            Op::Alloc(kind) => {
                if let Some(old) = live.remove(event.pfn.0) {
                    stats.lost_frees += 1;
                    give_back(placement, old, cpu, index)?;
                    stats.frees += 1;
                }
                if !failed.is_empty() {
                    failed.remove(&event.pfn.0);
                }
                match placement.place(&event, Request::new(event.order, cpu, kind)) {
                    Some(ours) => {
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
                    None => {
                        stats.alloc_failures += 1;
                        failed.insert(event.pfn.0);
                    }
                }
            }
            Op::Free => {
                if let Some(block) = live.get(event.pfn.0) {
                    if block.order == event.order && block.freed == 0 {
                        live.remove(event.pfn.0);
                        give_back(placement, block, cpu, index)?;
                        stats.frees += 1;
                        continue;
                    }
                }
                match find_enclosing(&live, event.pfn, event.order) {
                    Some(head) => {
                        stats.partial_frees += 1;
                        let mut block = live.remove(head).expect("found above");
                        block.freed += event.order.frames();
                        if block.freed >= block.order.frames() {
                            give_back(placement, block, cpu, index)?;
                            stats.frees += 1;
                        } else {
                            live.insert(head, block);
                        }
                    }
                    None if failed.remove(&event.pfn.0) => stats.frees_of_failed += 1,
                    None => stats.frees_before_recording += 1,
                }
            }
        }
    }
    stats.elapsed_ns = start.elapsed().as_nanos() as u64;
    Ok((stats, wear))
}

/// The live traced block that holds the block of `order` at `pfn`, if any:
/// the head itself (freed in pieces), or a head found by aligning `pfn`
/// down to each larger order.
fn find_enclosing(live: &LiveMap, pfn: Pfn, order: Order) -> Option<u64> {
    if live.get(pfn.0).is_some_and(|b| b.order >= order) {
        return Some(pfn.0);
    }
    Order::all().skip(order.index() + 1).find_map(|o| {
        let head = pfn.0 & !(o.frames() - 1);
        live.get(head)
            .filter(|b| head + b.order.frames() >= pfn.0 + order.frames())
            .map(|_| head)
    })
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
    fn live_slots_pack_and_far_pfns_use_the_map() {
        let live = Live {
            ours: Pfn(0xdead_beef),
            order: Order::MAX,
            kind: MigrateType::Reclaimable,
            freed: 1024,
        };
        let back = Live::unpack(live.pack()).unwrap();
        assert_eq!(
            (back.ours, back.order, back.kind, back.freed),
            (live.ours, live.order, live.kind, live.freed)
        );
        assert!(Live::unpack(0).is_none());
        let mut map = LiveMap::default();
        for pfn in [5, DIRECT_LIMIT + 7, 3 << 20] {
            map.insert(pfn, live);
            assert_eq!(map.get(pfn).map(|l| l.ours), Some(live.ours));
            assert!(map.remove(pfn).is_some() && map.get(pfn).is_none());
        }
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
        // The second allocation of 3 found it live: its free was lost.
        assert_eq!((stats.allocs, stats.frees, stats.lost_frees), (3, 1, 0));
        assert_eq!(wear.writes()[3], 2);
        assert_eq!(wear.writes()[8..16], [1; 8]);
    }
}
