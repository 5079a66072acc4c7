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
//! This is the one replay engine of nvmos: [`run`] (or an [`Engine`] fed
//! again and again, as the long-horizon mode does) matches frees to
//! allocations with the [`BlockTracker`] `trace info` uses too, so both
//! count every event the same way (frees of blocks allocated before the
//! recording skipped, blocks freed in pieces given back when whole, a
//! traced block allocated again before its free was seen freed first,
//! a free of a larger order than allocated) for any [`Placement`] (an
//! allocator under test, [`ByAllocator`], or the kernel's own,
//! [`Recorded`]), runs migration passes when asked, and tells a [`Hook`]
//! where every block was placed, moved and freed. The wear study's hook is
//! the [`WearCounter`]; the power study's counts allocated frames per bank.

use std::collections::VecDeque;
use std::time::Instant;

use nvmos_frames::{AllocError, FrameAllocator, MigrateType, Move, Order, Pfn, Request, ZoneMap};
use nvmos_trace::table::ZeroTable;
use nvmos_trace::{Accounting, BlockTracker, Effect, Event, LiveBlock, Op};
use rustc_hash::FxHashMap;

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
    /// Frames written outside the replayed memory. A row with any is
    /// flagged.
    #[serde(default)]
    pub outside: u64,
    /// How every event was classified: the same counts `trace info`
    /// reports, from the same [`BlockTracker`]; the source's own counts
    /// (lost events, out-of-order timestamps only it saw) added by the
    /// caller that has it ([`Accounting::add_source_counts`]).
    #[serde(flatten)]
    pub accounting: Accounting,
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
    /// Sampled writes (`record --writes`) and where they went; all zero
    /// for traces without them. See [`crate::writes`].
    #[serde(default)]
    pub writes: crate::writes::WriteStats,
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

/// Placements told to the hook: at once, or, for a hook whose `placed`
/// commutes ([`Hook::placed_commutes`]), `LATE` placements late with the
/// line asked for at once, so the misses of successive placements overlap.
/// The one rule for [`Engine::feed`] and [`run_resolved`]; `finish` tells
/// the hook of the ones still held.
struct Placements {
    defer: bool,
    late: VecDeque<(Pfn, Order, MigrateType)>,
}

impl Placements {
    const LATE: usize = 8;

    fn new<H: Hook + ?Sized>(hook: &H) -> Placements {
        Placements {
            defer: hook.placed_commutes(),
            late: VecDeque::with_capacity(Self::LATE + 1),
        }
    }

    #[inline(always)]
    fn placed<H: Hook + ?Sized>(
        &mut self,
        hook: &mut H,
        ours: Pfn,
        order: Order,
        kind: MigrateType,
    ) {
        if !self.defer {
            hook.placed(ours, order, kind);
            return;
        }
        hook.prefetch_placed(ours, order);
        self.late.push_back((ours, order, kind));
        if self.late.len() > Self::LATE {
            let (p, o, k) = self.late.pop_front().expect("not empty");
            hook.placed(p, o, k);
        }
    }

    fn finish<H: Hook + ?Sized>(self, hook: &mut H) {
        for (p, o, k) in self.late {
            hook.placed(p, o, k);
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
    let mut stats = run(&mut ByAllocator(alloc), &mut wear, events, None)?;
    stats.outside = wear.outside;
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
    let mut stats = run(&mut Recorded::default(), &mut wear, events, None)?;
    stats.outside = wear.outside;
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
    /// A sampled write landed on our frame `ours` (a write-aware policy
    /// watches them). Default: nothing.
    #[inline]
    fn written(&mut self, _ours: Pfn) {}
    /// A hint: the block placed at `ours` will be given back soon
    /// ([`FrameAllocator::prefetch_free`]). Default: nothing.
    #[inline]
    fn prefetch(&mut self, _ours: Pfn) {}
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
    /// A sampled write of a traced frame landed on our frame `ours` (the
    /// frame the placement chose for it: see [`crate::writes`]).
    #[inline]
    fn written(&mut self, _ours: Pfn) {}
    /// A hint: a sampled write will land on `ours` soon. Default: nothing.
    #[inline]
    fn prefetch_written(&mut self, _ours: Pfn) {}
    /// Whether `placed` only adds to counts, so that it may be called a
    /// few events late (after later calls of the other methods), as
    /// [`run_resolved`] does to overlap the cache misses of successive
    /// placements: it calls [`prefetch_placed`](Self::prefetch_placed) at
    /// once and `placed` for every block before it returns `Ok`. Default:
    /// no.
    fn placed_commutes(&self) -> bool {
        false
    }
    /// A hint: `placed(ours, order, ..)` follows soon. Default: nothing.
    #[inline]
    fn prefetch_placed(&mut self, _ours: Pfn, _order: Order) {}
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
        self.record_copy(m.new, m.order);
    }

    #[inline]
    fn written(&mut self, ours: Pfn) {
        self.record_write(ours);
    }

    #[inline]
    fn prefetch_written(&mut self, ours: Pfn) {
        self.prefetch_write(ours);
    }

    /// Counts are sums: the order they are added in changes nothing.
    fn placed_commutes(&self) -> bool {
        true
    }

    #[inline]
    fn prefetch_placed(&mut self, ours: Pfn, _order: Order) {
        self.prefetch_alloc(ours);
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

    #[inline]
    fn prefetch(&mut self, ours: Pfn) {
        self.0.prefetch_free(ours);
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

    #[inline]
    fn prefetch(&mut self, ours: Pfn) {
        self.0.prefetch_free(ours);
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
    let mut engine = Engine::new(migrate_every_ns);
    engine.feed(placement, hook, events, 0)?;
    Ok(engine.finish())
}

/// What follows a migrating allocator's blocks by our first frame: told
/// when a block is given back.
trait Unfollow {
    fn unfollow(&mut self, ours: u64);
}

impl<V> Unfollow for FxHashMap<u64, V> {
    fn unfollow(&mut self, ours: u64) {
        self.remove(&ours);
    }
}

/// Our first frame -> the slot of the traced block placed there, for a
/// resolved replay with migration, where every allocation and free looks
/// it up: a table indexed by frame (lazily mapped, so it costs the frames
/// used), which a hash map was 4 % of `evaluate`'s CPU for. Frames past
/// [`SlotsByFrame::TABLE_FRAMES`] (machines over 512 GiB) go to a map.
struct SlotsByFrame {
    /// Slot + 1 by frame; 0: nothing placed there is followed.
    table: ZeroTable<u32>,
    beyond: FxHashMap<u64, u32>,
}

impl SlotsByFrame {
    const TABLE_FRAMES: u64 = 1 << 27;

    fn new() -> SlotsByFrame {
        SlotsByFrame {
            table: ZeroTable::new(0),
            beyond: FxHashMap::default(),
        }
    }

    /// Invariant: a frame is in the table or in `beyond`, never both.
    fn insert(&mut self, ours: u64, slot: u32) {
        if ours >= Self::TABLE_FRAMES || slot == u32::MAX {
            if let Some(v) = self.table.get_mut(ours as usize) {
                *v = 0;
            }
            self.beyond.insert(ours, slot);
            return;
        }
        if !self.beyond.is_empty() {
            self.beyond.remove(&ours);
        }
        let i = ours as usize;
        if i >= self.table.len() {
            self.table.grow((i + 1).next_power_of_two().max(1 << 16));
        }
        self.table[i] = slot + 1;
    }

    fn remove(&mut self, ours: &u64) -> Option<u32> {
        match self.table.get_mut(*ours as usize) {
            Some(v) if *ours < Self::TABLE_FRAMES && *v != 0 => Some(std::mem::take(v) - 1),
            _ => self.beyond.remove(ours),
        }
    }
}

impl Unfollow for SlotsByFrame {
    fn unfollow(&mut self, ours: u64) {
        self.remove(&ours);
    }
}

/// A traced block's free: given back to the placement, which put it at
/// `ours` (`None`: the placement refused the block, so there is nothing
/// to give back, only a count), unfollowed for migration, told to the
/// hook, counted. The one rule for [`Engine::feed`] and [`run_resolved`].
fn give_back_block<P, H, O, E>(
    placement: &mut P,
    hook: &mut H,
    owner: Option<&mut O>,
    stats: &mut ReplayStats,
    event: u64,
    ours: Option<Pfn>,
    req: Request,
) -> Result<(), ReplayError<E>>
where
    P: Placement + ?Sized,
    H: Hook + ?Sized,
    O: Unfollow,
    E: std::error::Error + 'static,
{
    let Some(ours) = ours else {
        stats.frees_of_failed += 1;
        return Ok(());
    };
    placement
        .give_back(ours, req)
        .map_err(|error| ReplayError::Allocator {
            event,
            pfn: ours,
            order: req.order,
            error,
        })?;
    if let Some(owner) = owner {
        owner.unfollow(ours.0);
    }
    hook.freed(ours, req.order, req.kind);
    stats.frees += 1;
    Ok(())
}

/// The replay's state between events: the live traced blocks (with the
/// placement of each as its tag), the counts, the migration clock. One
/// [`run`] is one [`feed`](Engine::feed); the long-horizon mode feeds the
/// same trace again and again with its times shifted, so the allocator's
/// state and the blocks still live carry over from one repetition to the
/// next.
pub struct Engine {
    tracker: BlockTracker,
    stats: ReplayStats,
    /// Our first frame -> traced first frame, kept only when migration
    /// runs (a move names our frame; the tracker is keyed by the traced).
    owner: Option<FxHashMap<u64, u64>>,
    every: u64,
    next_migration: u64,
    first_ns: Option<u64>,
}

impl Engine {
    /// Nothing live, nothing counted; migration passes every
    /// `migrate_every_ns` of trace time when given.
    pub fn new(migrate_every_ns: Option<u64>) -> Engine {
        let every = migrate_every_ns.unwrap_or(u64::MAX).max(1);
        Engine {
            tracker: BlockTracker::new(),
            stats: ReplayStats::default(),
            owner: migrate_every_ns.map(|_| FxHashMap::default()),
            every,
            next_migration: every,
            first_ns: None,
        }
    }

    /// The counts so far (`outside` and the source's counts are the
    /// caller's).
    pub fn stats(&self) -> ReplayStats {
        let mut stats = self.stats.clone();
        stats.accounting = self.tracker.counts().clone();
        stats
    }

    /// The counts.
    pub fn finish(self) -> ReplayStats {
        self.stats()
    }

    /// Replays `events` with `shift_ns` added to every time.
    pub fn feed<P, H, I, E>(
        &mut self,
        placement: &mut P,
        hook: &mut H,
        events: I,
        shift_ns: u64,
    ) -> Result<(), ReplayError<E>>
    where
        P: Placement + ?Sized,
        H: Hook + ?Sized,
        I: IntoIterator<Item = Result<Event, E>>,
        E: std::error::Error + 'static,
    {
        let cpus = placement.cpus().max(1);
        let start = Instant::now();
        let stats = &mut self.stats;
        let owner = &mut self.owner;
        let mut ahead = Lookahead::new(events);
        // As recorded, the wear counter's miss on a random frame was most
        // of the loop: placements are told late.
        let mut placements = Placements::new(hook);
        while let Some(mut event) = ahead.next(&self.tracker) {
            event.time_ns = event.time_ns.saturating_add(shift_ns);
            let index = stats.events;
            stats.events += 1;
            stats.trace_ns = stats.trace_ns.max(event.time_ns);
            hook.event(&event);
            let first = *self.first_ns.get_or_insert(event.time_ns);
            if let Some(owner) = owner.as_mut() {
                if event.time_ns.saturating_sub(first) >= self.next_migration {
                    self.next_migration = self.next_migration.saturating_add(self.every);
                    if let Some(moves) = placement.migrate() {
                        stats.migration_passes += 1;
                        for m in &moves {
                            let traced = owner.remove(&m.old.0);
                            let block = traced.and_then(|t| self.tracker.get(t));
                            let Some(block) =
                                block.filter(|b| b.order == m.order && b.tag == Some(m.old.0))
                            else {
                                return Err(ReplayError::LostMove {
                                    event: index,
                                    old: m.old,
                                    order: m.order,
                                });
                            };
                            self.tracker.set_tag(block.pfn, m.new.0);
                            owner.insert(m.new.0, block.pfn);
                            stats.blocks_migrated += 1;
                            stats.pages_migrated += m.order.frames();
                            hook.moved(m);
                        }
                    }
                }
            }
            let cpu = event.cpu % cpus;
            let mut give_back = |placement: &mut P, hook: &mut H, block: LiveBlock| {
                give_back_block(
                    placement,
                    hook,
                    owner.as_mut(),
                    stats,
                    index,
                    block.tag.map(Pfn),
                    Request::new(block.order, cpu, block.kind),
                )
            };
            match self.tracker.step(&event) {
                Effect::Allocated { replaced } => {
                    if let Some(old) = replaced {
                        give_back(placement, hook, old)?;
                    }
                    let Op::Alloc(kind) = event.op else {
                        unreachable!("the tracker allocates only for allocations")
                    };
                    match placement.place(&event, Request::new(event.order, cpu, kind)) {
                        Some(ours) => {
                            stats.allocs += 1;
                            placements.placed(hook, ours, event.order, kind);
                            if let Some(owner) = owner.as_mut() {
                                owner.insert(ours.0, event.pfn.0);
                            }
                            self.tracker.set_tag(event.pfn.0, ours.0);
                        }
                        None => stats.alloc_failures += 1,
                    }
                }
                Effect::Freed(block) => give_back(placement, hook, block)?,
                Effect::PartlyFreed | Effect::NotLive => {}
                Effect::Written(block) => {
                    if let Some(ours) =
                        crate::writes::attribute(hook, &mut stats.writes, &event, block)
                    {
                        placement.written(ours);
                    }
                }
            }
        }
        placements.finish(hook);
        if let Some(e) = ahead.failed {
            return Err(ReplayError::Trace(e));
        }
        stats.elapsed_ns += start.elapsed().as_nanos() as u64;
        Ok(())
    }
}

/// A trace's events read [`Lookahead::AHEAD`] before they are matched,
/// with the [`BlockTracker`]'s entry of each prefetched in two steps: as
/// it is read, the index saying where the entry is; `AHEAD / 2` events
/// later, the entry. The lookup of a block allocated long ago is the
/// matching's main cache miss (the tracker's table spans every traced
/// frame), and by the time its event is matched the entry is in cache
/// (profiled: the prefetch itself stalled on the index when it was one
/// step). A trace error ends the events after those before it, and is
/// then in `failed`, as without the window.
struct Lookahead<I: Iterator<Item = Result<Event, E>>, E> {
    source: I,
    window: VecDeque<Event>,
    /// The source's error, once it gave one.
    failed: Option<E>,
    ended: bool,
}

impl<I: Iterator<Item = Result<Event, E>>, E> Lookahead<I, E> {
    const AHEAD: usize = 16;

    fn new(events: impl IntoIterator<IntoIter = I>) -> Self {
        Lookahead {
            source: events.into_iter(),
            window: VecDeque::with_capacity(Self::AHEAD),
            failed: None,
            ended: false,
        }
    }

    /// The next event, the window topped up first; `None` at the end of
    /// the source or at its error.
    #[inline]
    fn next(&mut self, tracker: &BlockTracker) -> Option<Event> {
        while !self.ended && self.window.len() < Self::AHEAD {
            match self.source.next() {
                Some(Ok(e)) => {
                    tracker.prefetch_index(e.pfn.get());
                    if let Some(mid) = self.window.len().checked_sub(Self::AHEAD / 2) {
                        tracker.prefetch(self.window[mid].pfn.get());
                    }
                    self.window.push_back(e);
                }
                Some(Err(e)) => {
                    self.failed = Some(e);
                    self.ended = true;
                }
                None => self.ended = true,
            }
        }
        self.window.pop_front()
    }
}

/// A trace matched once for many replays: its events, and what each does
/// to the live traced blocks (the [`BlockTracker`]'s classification, the
/// same for every placement), with every block numbered by a *slot*
/// reused once the block is gone. The rows of one trace in `nvmos
/// evaluate` share one: each row then replays the events against a small
/// per-row table of slots instead of decoding the trace and running the
/// tracker again ([`run_resolved`] gives [`run`]'s result exactly).
pub struct Resolved {
    events: Vec<Event>,
    /// Per event: [`ACT_NONE`], or an act tag in the top two bits with a
    /// slot in bits 0..31 and, for an allocation, the replaced block's
    /// slot + 1 (0: none), for a write the frame's offset in its block,
    /// in bits 31..62.
    acts: Vec<u64>,
    slots: usize,
    accounting: Accounting,
}

const ACT_NONE: u64 = 0;
const ACT_ALLOC: u64 = 1 << 62;
const ACT_FREE: u64 = 2 << 62;
const ACT_WRITTEN: u64 = 3 << 62;
const ACT_MASK: u64 = 3 << 62;
const SLOT_BITS: u32 = 31;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

impl Resolved {
    /// Reads and matches every event of `events`. `Ok(None)` when the
    /// trace keeps more blocks live at once than the slot numbers hold
    /// (2^31 - 2): replay it with [`run`].
    pub fn of<I, E>(events: I) -> Result<Option<Resolved>, E>
    where
        I: IntoIterator<Item = Result<Event, E>>,
    {
        Resolved::of_expecting(events, 0)
    }

    /// [`of`](Resolved::of), with room made at once for `expected` events
    /// (a source's header count, say; at most 2^24 are reserved ahead,
    /// and a wrong count only costs speed). Growing the tables by
    /// doubling instead copied them into fresh pages again and again:
    /// half of `evaluate`'s page faults.
    pub fn of_expecting<I, E>(events: I, expected: u64) -> Result<Option<Resolved>, E>
    where
        I: IntoIterator<Item = Result<Event, E>>,
    {
        let mut tracker = BlockTracker::new();
        let mut out = Resolved {
            events: Vec::new(),
            acts: Vec::new(),
            slots: 0,
            accounting: Accounting::default(),
        };
        let mut spare: Vec<u64> = Vec::new();
        let events = events.into_iter();
        let room = events.size_hint().0.max(expected.min(1 << 24) as usize);
        out.events.reserve(room);
        out.acts.reserve(room);
        let mut ahead = Lookahead::new(events);
        while let Some(event) = ahead.next(&tracker) {
            let slot_of = |b: &LiveBlock| b.tag.expect("every live block has a slot");
            let act = match tracker.step(&event) {
                Effect::Allocated { replaced } => {
                    let old = replaced.as_ref().map_or(0, |b| slot_of(b) + 1);
                    if let Some(b) = &replaced {
                        spare.push(slot_of(b));
                    }
                    let slot = spare.pop().unwrap_or_else(|| {
                        out.slots += 1;
                        out.slots as u64 - 1
                    });
                    if slot >= SLOT_MASK {
                        return Ok(None);
                    }
                    tracker.set_tag(event.pfn.0, slot);
                    ACT_ALLOC | slot | old << SLOT_BITS
                }
                Effect::Freed(b) => {
                    spare.push(slot_of(&b));
                    ACT_FREE | slot_of(&b)
                }
                Effect::PartlyFreed | Effect::NotLive | Effect::Written(None) => ACT_NONE,
                Effect::Written(Some(b)) => {
                    // Inside the block: at most 2^MAX_ORDER frames on.
                    let offset = event.pfn.0 - b.pfn;
                    ACT_WRITTEN | slot_of(&b) | offset << SLOT_BITS
                }
            };
            out.events.push(event);
            out.acts.push(act);
        }
        if let Some(e) = ahead.failed {
            return Err(e);
        }
        out.accounting = tracker.counts().clone();
        out.events.shrink_to_fit();
        out.acts.shrink_to_fit();
        Ok(Some(out))
    }

    /// Events in the trace.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the trace has no events.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// How every event was classified (the source's counts are the
    /// caller's to add).
    pub fn accounting(&self) -> &Accounting {
        &self.accounting
    }
}

/// A live block in one replay of a [`Resolved`] trace: where the
/// placement put it (`NO_TAG`: refused), its order and migratetype.
#[derive(Copy, Clone)]
struct Slot {
    tag: u64,
    order: Order,
    kind: MigrateType,
}

const NO_TAG: u64 = u64::MAX;

/// [`run`] over a [`Resolved`] trace: the same placements, hook calls,
/// counts and errors as `run` over the events it was resolved from
/// (`elapsed_ns` is this replay's time; matching the trace was done
/// once, before).
pub fn run_resolved<P, H, E>(
    placement: &mut P,
    hook: &mut H,
    trace: &Resolved,
    migrate_every_ns: Option<u64>,
) -> Result<ReplayStats, ReplayError<E>>
where
    P: Placement + ?Sized,
    H: Hook + ?Sized,
    E: std::error::Error + 'static,
{
    let start = Instant::now();
    let cpus = placement.cpus().max(1);
    let mut stats = ReplayStats::default();
    let every = migrate_every_ns.unwrap_or(u64::MAX).max(1);
    let mut next_migration = every;
    // Our first frame -> slot, kept only when migration runs.
    let mut owner: Option<SlotsByFrame> = migrate_every_ns.map(|_| SlotsByFrame::new());
    let mut first_ns: Option<u64> = None;
    let mut slots = vec![
        Slot {
            tag: NO_TAG,
            order: Order::ZERO,
            kind: MigrateType::Movable,
        };
        trace.slots
    ];
    // The blocks given back and the frames written `AHEAD` events from
    // now are known (the slot's placement, unless the slot is placed
    // again in between: then the hint is only wasted): their metadata is
    // fetched into the cache meanwhile. The misses on a random old
    // block's metadata are most of a replay's time.
    const AHEAD: usize = 12;
    let mut placements = Placements::new(hook);
    for (index, (event, &act)) in trace.events.iter().zip(&trace.acts).enumerate() {
        if let Some(&next) = trace.acts.get(index + AHEAD) {
            let slot = (next & SLOT_MASK) as usize;
            let aux = (next & !ACT_MASK) >> SLOT_BITS;
            let (tag, free) = match next & ACT_MASK {
                ACT_FREE => (slots[slot].tag, true),
                ACT_ALLOC if aux != 0 => (slots[aux as usize - 1].tag, true),
                ACT_WRITTEN => (slots[slot].tag, false),
                _ => (NO_TAG, false),
            };
            if tag != NO_TAG {
                if free {
                    placement.prefetch(Pfn(tag));
                } else {
                    hook.prefetch_written(Pfn(tag + aux));
                }
            }
        }
        let index = index as u64;
        stats.events += 1;
        stats.trace_ns = stats.trace_ns.max(event.time_ns);
        hook.event(event);
        let first = *first_ns.get_or_insert(event.time_ns);
        if let Some(owner) = owner.as_mut() {
            if event.time_ns.saturating_sub(first) >= next_migration {
                next_migration = next_migration.saturating_add(every);
                if let Some(moves) = placement.migrate() {
                    stats.migration_passes += 1;
                    for m in &moves {
                        let slot = owner.remove(&m.old.0);
                        let Some(slot) = slot.filter(|&s| {
                            let b = &slots[s as usize];
                            b.order == m.order && b.tag == m.old.0
                        }) else {
                            return Err(ReplayError::LostMove {
                                event: index,
                                old: m.old,
                                order: m.order,
                            });
                        };
                        slots[slot as usize].tag = m.new.0;
                        owner.insert(m.new.0, slot);
                        stats.blocks_migrated += 1;
                        stats.pages_migrated += m.order.frames();
                        hook.moved(m);
                    }
                }
            }
        }
        let cpu = event.cpu % cpus;
        let mut give_back = |placement: &mut P, hook: &mut H, block: Slot| {
            give_back_block(
                placement,
                hook,
                owner.as_mut(),
                &mut stats,
                index,
                (block.tag != NO_TAG).then_some(Pfn(block.tag)),
                Request::new(block.order, cpu, block.kind),
            )
        };
        let slot = (act & SLOT_MASK) as usize;
        let aux = (act & !ACT_MASK) >> SLOT_BITS;
        match act & ACT_MASK {
            ACT_ALLOC => {
                if aux != 0 {
                    give_back(placement, hook, slots[aux as usize - 1])?;
                }
                let Op::Alloc(kind) = event.op else {
                    unreachable!("the tracker allocates only for allocations")
                };
                let tag = match placement.place(event, Request::new(event.order, cpu, kind)) {
                    Some(ours) => {
                        stats.allocs += 1;
                        placements.placed(hook, ours, event.order, kind);
                        if let Some(owner) = owner.as_mut() {
                            owner.insert(ours.0, slot as u32);
                        }
                        ours.0
                    }
                    None => {
                        stats.alloc_failures += 1;
                        NO_TAG
                    }
                };
                slots[slot] = Slot {
                    tag,
                    order: event.order,
                    kind,
                };
            }
            ACT_FREE => give_back(placement, hook, slots[slot])?,
            ACT_WRITTEN => match slots[slot].tag {
                NO_TAG => stats.writes.of_refused += 1,
                ours => {
                    stats.writes.attributed += 1;
                    hook.written(Pfn(ours + aux));
                    placement.written(Pfn(ours + aux));
                }
            },
            _ => {}
        }
    }
    placements.finish(hook);
    stats.accounting = trace.accounting.clone();
    stats.elapsed_ns = start.elapsed().as_nanos() as u64;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmos_frames::{Buddy, IBuddy, MigrateType, Zone};
    use std::convert::Infallible;

    #[test]
    fn slots_by_frame_answers_as_a_map_does() {
        // Frames low and high (past the table's reach), slots including
        // the one a table cannot hold, removed twice and re-inserted.
        let mut t = SlotsByFrame::new();
        let mut model: FxHashMap<u64, u32> = FxHashMap::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ours = match x % 4 {
                0 => x % 64,
                1 => x % (1 << 20),
                2 => SlotsByFrame::TABLE_FRAMES - 2 + x % 4,
                _ => x >> 20,
            };
            let slot = if step % 1000 == 7 { u32::MAX } else { step };
            if x & 0x10 == 0 {
                t.insert(ours, slot);
                model.insert(ours, slot);
            } else {
                assert_eq!(t.remove(&ours), model.remove(&ours), "frame {ours}");
            }
        }
        for (ours, slot) in model.clone() {
            assert_eq!(t.remove(&ours), Some(slot));
            assert_eq!(t.remove(&ours), None);
        }
    }

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
        // The events read ahead of an error are applied before it is
        // returned, and nothing after it is read.
        let ok = |pfn| {
            Ok(Event {
                time_ns: pfn,
                cpu: 0,
                op: A,
                pfn: Pfn(pfn),
                order: Order::ZERO,
            })
        };
        let trace: Vec<Result<Event, Bad>> = vec![ok(1), ok(2), Err(Bad), ok(3)];
        let mut engine = Engine::new(None);
        let err = engine.feed(&mut ByAllocator(&alloc), &mut (), trace, 0);
        assert!(matches!(err, Err(ReplayError::Trace(Bad))));
        let stats = engine.stats();
        assert_eq!((stats.events, stats.allocs), (2, 2));
        assert_eq!(alloc.stats().allocated_frames(), 2);
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
        replayed.add_source_counts(&source.counts());
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
