//! Replay: drive a page-frame allocator with a recorded trace.
//!
//! The trace says which block the kernel allocated and freed, on which CPU,
//! for what kind of data. The replay asks the allocator under test for a
//! block of the same order, on the same CPU (modulo the allocator's CPU
//! count), with the same migratetype, and remembers which of its frames
//! stands for the traced one, so the trace's free of that block frees the
//! allocator's. Where the allocator put the block is its own decision:
//! that placement is what the wear figures measure.
//!
//! This is the one replay engine of nvmos: [`run`] matches frees to
//! allocations (frees of blocks allocated before the recording skipped,
//! blocks freed in pieces given back when whole, a traced block allocated
//! again before its free was seen freed first) for any [`Placement`] (an
//! allocator under test, [`ByAllocator`], or the kernel's own,
//! [`Recorded`]), runs migration passes when asked, and tells a [`Hook`]
//! where every block was placed, moved and freed. The wear study's hook is
//! the [`WearCounter`]; the power study's counts allocated frames per bank.

use std::time::Instant;

use nvmos_frames::{AllocError, FrameAllocator, MigrateType, Move, Order, Pfn, Request, ZoneMap};
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
    /// Migration passes run.
    #[serde(default)]
    pub migration_passes: u64,
    /// Blocks moved by migration.
    #[serde(default)]
    pub blocks_migrated: u64,
    /// Page frames copied by migration.
    #[serde(default)]
    pub pages_migrated: u64,
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
    #[error("event {event}: the allocator refused to free its own block {pfn} (order {order})")]
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
    /// A migration pass reported moving a block no traced block is placed
    /// at: a bug in the allocator.
    #[error("event {event}: migration moved {old} (order {order}), which holds no traced block")]
    LostMove {
        /// Index of the event before which the pass ran.
        event: u64,
        /// The reported old first frame.
        old: Pfn,
        /// The reported order.
        order: Order,
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
/// allocator's zones. No migration passes run.
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
    let mut wear = WearCounter::new(zones, model);
    let stats = run(&mut ByAllocator(alloc), &mut wear, events, None)?;
    Ok((stats, wear))
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
    let mut wear = WearCounter::new(zones, model);
    let stats = run(&mut Recorded::default(), &mut wear, events, None)?;
    Ok((stats, wear))
}

/// Where a replay puts each traced block.
pub trait Placement {
    /// CPUs the placement serves; traced CPUs are taken modulo this.
    fn cpus(&self) -> u32;
    /// The first frame for the block `event` allocates (`req` is the
    /// request for it), or `None` when there is no room.
    fn place(&mut self, event: &Event, req: Request) -> Option<Pfn>;
    /// Give back the block placed at `ours`, of `req.order` and
    /// `req.kind`, on `req.cpu`.
    fn give_back(&mut self, ours: Pfn, req: Request) -> Result<(), AllocError>;
    /// One migration pass: the blocks it moved, or `None` when this
    /// placement cannot migrate.
    fn migrate(&mut self) -> Option<Vec<Move>> {
        None
    }
}

/// What a study watches during a replay. Every method has a default that
/// does nothing.
pub trait Hook {
    /// `event` is next; called before migration passes due at its time
    /// and before it is applied (time has passed up to `event.time_ns`).
    #[inline]
    fn event(&mut self, _event: &Event) {}
    /// A block of `order` for data of `kind` was placed at `ours`.
    #[inline]
    fn placed(&mut self, _ours: Pfn, _order: Order, _kind: MigrateType) {}
    /// Migration moved a placed (movable) block: its data was copied.
    #[inline]
    fn moved(&mut self, _m: &Move) {}
    /// The block placed at `ours` was given back.
    #[inline]
    fn freed(&mut self, _ours: Pfn, _order: Order, _kind: MigrateType) {}
}

/// Watch nothing.
impl Hook for () {}

/// Wear: every placement writes its frames, and so does every migration
/// copy (at the block's new place).
impl Hook for WearCounter {
    #[inline]
    fn placed(&mut self, ours: Pfn, order: Order, _kind: MigrateType) {
        self.record_alloc(ours, order);
    }

    #[inline]
    fn moved(&mut self, m: &Move) {
        self.record_alloc(m.new, m.order);
    }
}

/// An allocator under test decides.
pub struct ByAllocator<'a, A: ?Sized>(pub &'a A);

impl<A: FrameAllocator + ?Sized> Placement for ByAllocator<'_, A> {
    fn cpus(&self) -> u32 {
        self.0.cpus()
    }

    #[inline]
    fn place(&mut self, _event: &Event, req: Request) -> Option<Pfn> {
        self.0.alloc(req).ok()
    }

    #[inline]
    fn give_back(&mut self, ours: Pfn, req: Request) -> Result<(), AllocError> {
        self.0.free(ours, req)
    }
}

/// An allocator under test that may migrate: its passes run when the
/// replay asks for them.
pub struct Migrating<'a, A: ?Sized>(pub &'a A);

impl<A: crate::StudyAllocator + ?Sized> Placement for Migrating<'_, A> {
    fn cpus(&self) -> u32 {
        self.0.cpus()
    }

    #[inline]
    fn place(&mut self, _event: &Event, req: Request) -> Option<Pfn> {
        self.0.alloc(req).ok()
    }

    #[inline]
    fn give_back(&mut self, ours: Pfn, req: Request) -> Result<(), AllocError> {
        self.0.free(ours, req)
    }

    fn migrate(&mut self) -> Option<Vec<Move>> {
        self.0.migrate()
    }
}

/// The kernel decided: the traced pfn is the placement, where the block
/// lies below `limit_frames` (a block past it is counted as refused).
#[derive(Copy, Clone, Debug, Default)]
pub struct Recorded {
    /// Frames of the machine the blocks must lie in; `None` for any.
    pub limit_frames: Option<u64>,
}

impl Placement for Recorded {
    fn cpus(&self) -> u32 {
        u32::MAX
    }

    #[inline]
    fn place(&mut self, event: &Event, _req: Request) -> Option<Pfn> {
        match self.limit_frames {
            Some(limit) if event.pfn.0 + event.order.frames() > limit => None,
            _ => Some(event.pfn),
        }
    }

    #[inline]
    fn give_back(&mut self, _ours: Pfn, _req: Request) -> Result<(), AllocError> {
        Ok(())
    }
}

/// The replay proper: match every free to its allocation, let `placement`
/// place and take back the blocks, and tell `hook`. With
/// `migrate_every_ns`, a migration pass runs before the first event at or
/// past each multiple of it after the first event's time (at most one
/// pass per event); every block a pass moves is followed, so its free
/// later frees the new place.
pub fn run<P, H, I, E>(
    placement: &mut P,
    hook: &mut H,
    events: I,
    migrate_every_ns: Option<u64>,
) -> Result<ReplayStats, ReplayError<E>>
where
    P: Placement + ?Sized,
    H: Hook + ?Sized,
    I: IntoIterator<Item = Result<Event, E>>,
    E: std::error::Error + 'static,
{
    let cpus = placement.cpus().max(1);
    let mut stats = ReplayStats::default();
    let mut live = LiveMap::default();
    let mut failed: FxHashSet<u64> = FxHashSet::default();
    // Our first frame -> traced first frame, kept only when migration
    // runs (a move names our frame; the live map is keyed by the traced).
    let mut owner: Option<FxHashMap<u64, u64>> = migrate_every_ns.map(|_| FxHashMap::default());
    let every = migrate_every_ns.unwrap_or(u64::MAX).max(1);
    let mut next_migration = every;
    let mut first_ns = None;
    let start = Instant::now();
    for event in events {
        let event = event.map_err(ReplayError::Trace)?;
        let index = stats.events;
        stats.events += 1;
        stats.trace_ns = event.time_ns;
        hook.event(&event);
        let first = *first_ns.get_or_insert(event.time_ns);
        if let Some(owner) = owner.as_mut() {
            if event.time_ns.saturating_sub(first) >= next_migration {
                next_migration = next_migration.saturating_add(every);
                if let Some(moves) = placement.migrate() {
                    stats.migration_passes += 1;
                    for m in &moves {
                        let traced = owner.remove(&m.old.0);
                        let block = traced.and_then(|t| live.get(t).map(|b| (t, b)));
                        let Some((traced, mut block)) = block.filter(|(_, b)| b.order == m.order)
                        else {
                            return Err(ReplayError::LostMove {
                                event: index,
                                old: m.old,
                                order: m.order,
                            });
                        };
                        block.ours = m.new;
                        live.insert(traced, block);
                        owner.insert(m.new.0, traced);
                        stats.blocks_migrated += 1;
                        stats.pages_migrated += m.order.frames();
                        hook.moved(m);
                    }
                }
            }
        }
        let cpu = event.cpu % cpus;
        let mut give_back = |placement: &mut P, hook: &mut H, block: Live| {
            placement
                .give_back(block.ours, Request::new(block.order, cpu, block.kind))
                .map_err(|error| ReplayError::Allocator {
                    event: index,
                    pfn: block.ours,
                    order: block.order,
                    error,
                })?;
            if let Some(owner) = owner.as_mut() {
                owner.remove(&block.ours.0);
            }
            hook.freed(block.ours, block.order, block.kind);
            Ok(())
        };
        match event.op {
            Op::Alloc(kind) => {
                if let Some(old) = live.remove(event.pfn.0) {
                    stats.lost_frees += 1;
                    give_back(placement, hook, old)?;
                    stats.frees += 1;
                }
                if !failed.is_empty() {
                    failed.remove(&event.pfn.0);
                }
                match placement.place(&event, Request::new(event.order, cpu, kind)) {
                    Some(ours) => {
                        stats.allocs += 1;
                        hook.placed(ours, event.order, kind);
                        if let Some(owner) = owner.as_mut() {
                            owner.insert(ours.0, event.pfn.0);
                        }
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
                        give_back(placement, hook, block)?;
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
                            give_back(placement, hook, block)?;
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
    Ok(stats)
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
