//! Hot-page migration (`hot-migrate`): nvmos's write-aware wear levelling
//! in the operating system.
//!
//! Spreading *allocations* does not spread *writes*: a page that lives
//! long and is written often stays on one frame however fairly the
//! allocator chose that frame, and the frame wears out while the rest of
//! the memory is barely used. Hardware levelling (Start-Gap, Security
//! Refresh) moves such lines blindly, on a fixed write count. This policy
//! moves them from what the OS can see: the sampled writes of each page
//! (soft-dirty or dirty bits, as `nvmos record --writes` samples them).
//!
//! # The policy
//!
//! - Every frame has a *wear* estimate: the sampled writes it received,
//!   plus one write for every page copied onto it.
//! - Every movable block has a *heat*: the sampled writes to its frames
//!   since it was placed on them (or last moved there).
//! - A block whose heat reaches [`HotMigrateOptions::threshold`] is hot.
//!   Every [`HotMigrateOptions::epoch_ns`], a pass takes the hot blocks,
//!   hottest first, and moves each to a fresh block of the same order: it
//!   asks the allocator for [`HotMigrateOptions::candidates`] blocks,
//!   keeps the least worn and gives the others back. A block is only moved
//!   to a place less worn than where it is.
//! - Copies are budgeted: the pages copied never exceed
//!   [`HotMigrateOptions::budget_pct`] percent of the sampled writes seen
//!   so far. A hot block the budget cannot pay for waits for a later pass.
//!
//! So a hot page visits many frames, each for about `threshold` writes,
//! and with the allocator's own rotation (iBuddy's least-recently-freed
//! order) the writes of the hottest pages spread over the free memory.
//!
//! # What a move costs
//!
//! Every move is one page write per frame at the destination (the copy:
//! the replay's hook sees it as [`crate::replay::Hook::moved`], so the
//! wear counts it), and one migration. The pass runs on CPU 0, as one
//! kernel thread would.
//!
//! # Invariants
//!
//! `order[f]` is non-zero exactly for the frames of the movable blocks this
//! policy follows (placed through it and not yet given back), and holds
//! the block's order plus one, so a block's first frame is any of its
//! frames aligned down. `heat` is kept at a block's first frame.

use nvmos_frames::{MigrateType, Move, Order, Pfn, Request, ZoneMap};
use nvmos_trace::table::ZeroTable;
use nvmos_trace::{Event, Op};

use crate::replay::Placement;

/// How the policy runs.
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HotMigrateOptions {
    /// Sampled writes to a block since it was placed before it is hot.
    pub threshold: u32,
    /// Pages copied at most, as a percentage of the sampled writes seen.
    pub budget_pct: f64,
    /// Blocks asked of the allocator per move; the least worn is kept.
    pub candidates: u32,
    /// Trace time between two passes, in ns.
    pub epoch_ns: u64,
}

impl Default for HotMigrateOptions {
    /// A block is hot after 12 sampled writes (120 ms of writing at the
    /// recorder's 10 ms sampling); copies at most 5 % of the writes;
    /// the least worn of 4 candidates; a pass every 100 ms.
    fn default() -> Self {
        HotMigrateOptions {
            threshold: 12,
            budget_pct: 5.0,
            candidates: 4,
            epoch_ns: 100_000_000,
        }
    }
}

impl HotMigrateOptions {
    /// Refuses settings that cannot work.
    pub fn check(&self) -> Result<(), String> {
        if self.threshold == 0 {
            return Err("hot-migrate threshold must be at least 1 write".into());
        }
        if !(self.budget_pct.is_finite() && self.budget_pct > 0.0 && self.budget_pct <= 100.0) {
            return Err(format!(
                "hot-migrate budget {} % is not in (0, 100]",
                self.budget_pct
            ));
        }
        if !(1..=64).contains(&self.candidates) {
            return Err(format!(
                "hot-migrate candidates {} not in 1..=64",
                self.candidates
            ));
        }
        if self.epoch_ns == 0 {
            return Err("hot-migrate epoch must be longer than 0 ns".into());
        }
        Ok(())
    }

    /// The policy in words, for reports.
    pub fn describe(&self) -> String {
        format!(
            "hot-migrate: a block with {} sampled writes since placed is moved to the least worn of {} blocks from the allocator, passes every {} ms, copies ≤ {} % of the sampled writes",
            self.threshold,
            self.candidates,
            self.epoch_ns as f64 / 1e6,
            self.budget_pct
        )
    }
}

/// What the policy did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HotMigrateStats {
    /// Passes run.
    pub passes: u64,
    /// Sampled writes seen (the budget's base).
    pub writes_seen: u64,
    /// Sampled writes to frames outside the zones (not followed).
    pub writes_outside: u64,
    /// Blocks moved by this policy.
    pub blocks_moved: u64,
    /// Pages copied by this policy (its extra writes).
    pub pages_copied: u64,
    /// Hot blocks a pass found and left where they were for the budget.
    pub deferred_for_budget: u64,
    /// Hot blocks left where they were because the allocator had no
    /// block of their order to give.
    pub no_destination: u64,
    /// Hot blocks left where they were because no candidate was less worn
    /// than their place.
    pub no_better_place: u64,
    /// Moves made by the allocator's own migration beneath the policy.
    pub inner_moves: u64,
    /// Blocks the allocator refused to take back (a candidate not kept,
    /// or a moved block's old place): an allocator bug, kept out of use.
    pub refused_give_backs: u64,
}

/// Hot-page migration over any placement: see the module documentation.
pub struct HotMigrate<P> {
    inner: P,
    opts: HotMigrateOptions,
    map: ZoneMap,
    /// Sampled writes plus copies, per frame (dense index).
    wear: ZeroTable<u32>,
    /// Writes since placed, at a followed block's first frame.
    heat: ZeroTable<u32>,
    /// Order + 1 of the followed block covering a frame; 0: none.
    order: ZeroTable<u8>,
    /// First frames (pfn) of blocks that became hot since the last pass;
    /// each appears once (`queued`).
    hot: Vec<u64>,
    queued: ZeroTable<u8>,
    now_ns: u64,
    stats: HotMigrateStats,
}

impl<P: Placement> HotMigrate<P> {
    /// The policy over `inner`, for the frames of `map`.
    pub fn new(inner: P, map: ZoneMap, opts: HotMigrateOptions) -> HotMigrate<P> {
        let frames = map.frames() as usize;
        HotMigrate {
            inner,
            opts,
            wear: ZeroTable::new(frames),
            heat: ZeroTable::new(frames),
            order: ZeroTable::new(frames),
            queued: ZeroTable::new(frames),
            map,
            hot: Vec::new(),
            now_ns: 0,
            stats: HotMigrateStats::default(),
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> &HotMigrateStats {
        &self.stats
    }

    /// The placement beneath.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    fn follow(&mut self, ours: Pfn, order: Order) {
        if let Some(i) = self.map.dense_index(ours) {
            let n = order.frames() as usize;
            if i + n <= self.order.len() {
                self.order[i..i + n].fill(order.get() + 1);
                self.heat[i] = 0;
            }
        }
    }

    fn unfollow(&mut self, ours: Pfn, order: Order) {
        if let Some(i) = self.map.dense_index(ours) {
            let n = order.frames() as usize;
            if i + n <= self.order.len() {
                self.order[i..i + n].fill(0);
                self.heat[i] = 0;
            }
        }
    }

    /// Wear of the block of `order` at `pfn`: the most worn of its frames.
    fn block_wear(&self, pfn: Pfn, order: Order) -> u32 {
        match self.map.dense_index(pfn) {
            Some(i) => self.wear[i..i + order.frames() as usize]
                .iter()
                .copied()
                .max()
                .unwrap_or(0),
            None => u32::MAX,
        }
    }

    /// A copy of a block of `order` landed at `pfn`.
    fn copied_to(&mut self, pfn: Pfn, order: Order) {
        if let Some(i) = self.map.dense_index(pfn) {
            for w in &mut self.wear[i..i + order.frames() as usize] {
                *w = w.saturating_add(1);
            }
        }
    }

    /// Copies the budget still allows.
    fn budget_left(&self) -> u64 {
        let allowed = (self.stats.writes_seen as f64 * self.opts.budget_pct / 100.0) as u64;
        allowed.saturating_sub(self.stats.pages_copied)
    }

    /// Move the block of `order` at `old` if a less worn place is to be
    /// had: the move, or `None` (counted).
    fn move_block(&mut self, old: Pfn, order: Order) -> Option<Move> {
        let req = Request::new(order, 0, MigrateType::Movable);
        let probe = Event {
            time_ns: self.now_ns,
            cpu: 0,
            op: Op::Alloc(MigrateType::Movable),
            pfn: old,
            order,
        };
        let mut got: Vec<(u32, Pfn)> = Vec::with_capacity(self.opts.candidates as usize);
        for _ in 0..self.opts.candidates {
            match self.inner.place(&probe, req) {
                Some(p) => got.push((self.block_wear(p, order), p)),
                None => break,
            }
        }
        let best = got
            .iter()
            .enumerate()
            .min_by_key(|(_, (w, p))| (*w, p.0))
            .map(|(i, _)| i);
        let here = self.block_wear(old, order);
        let keep = match best {
            None => {
                self.stats.no_destination += 1;
                None
            }
            Some(i) if got[i].0 >= here => {
                self.stats.no_better_place += 1;
                None
            }
            Some(i) => Some(got.swap_remove(i).1),
        };
        for (_, p) in got {
            // An allocator refusing a block it just gave out is a bug of
            // the allocator: counted, and the block stays out.
            if self.inner.give_back(p, req).is_err() {
                self.stats.refused_give_backs += 1;
            }
        }
        let new = keep?;
        if self.inner.give_back(old, req).is_err() {
            self.stats.refused_give_backs += 1;
        }
        self.unfollow(old, order);
        self.follow(new, order);
        self.copied_to(new, order);
        self.stats.blocks_moved += 1;
        self.stats.pages_copied += order.frames();
        Some(Move { old, new, order })
    }
}

impl<P: Placement> Placement for HotMigrate<P> {
    fn cpus(&self) -> u32 {
        self.inner.cpus()
    }

    #[inline]
    fn place(&mut self, event: &Event, req: Request) -> Option<Pfn> {
        self.now_ns = event.time_ns;
        let ours = self.inner.place(event, req)?;
        if req.kind == MigrateType::Movable {
            self.follow(ours, req.order);
        }
        Some(ours)
    }

    #[inline]
    fn give_back(&mut self, ours: Pfn, req: Request) -> Result<(), nvmos_frames::AllocError> {
        self.inner.give_back(ours, req)?;
        if req.kind == MigrateType::Movable {
            self.unfollow(ours, req.order);
        }
        Ok(())
    }

    #[inline]
    fn written(&mut self, ours: Pfn) {
        self.stats.writes_seen += 1;
        let Some(i) = self.map.dense_index(ours) else {
            self.stats.writes_outside += 1;
            return;
        };
        self.wear[i] = self.wear[i].saturating_add(1);
        let o = self.order[i];
        if o == 0 {
            return;
        }
        let head = i & !((1usize << (o - 1)) - 1);
        self.heat[head] = self.heat[head].saturating_add(1);
        if self.heat[head] >= self.opts.threshold && self.queued[head] == 0 {
            self.queued[head] = 1;
            self.hot.push(self.map.pfn_at(head as u64).0);
        }
    }

    fn migrate(&mut self) -> Option<Vec<Move>> {
        let mut moves = Vec::new();
        // The allocator's own migration first; the policy follows its
        // moves.
        if let Some(inner) = self.inner.migrate() {
            for m in &inner {
                let heat = self
                    .map
                    .dense_index(m.old)
                    .map_or(0, |i| std::mem::take(&mut self.heat[i]));
                let followed = self
                    .map
                    .dense_index(m.old)
                    .is_some_and(|i| self.order[i] != 0);
                if followed {
                    self.unfollow(m.old, m.order);
                    self.follow(m.new, m.order);
                    if let Some(i) = self.map.dense_index(m.new) {
                        self.heat[i] = heat;
                    }
                }
                self.copied_to(m.new, m.order);
            }
            self.stats.inner_moves += inner.len() as u64;
            moves = inner;
        }
        self.stats.passes += 1;
        // Hottest first; blocks given back or moved since they were
        // queued are no longer followed or no longer hot.
        let mut hot = std::mem::take(&mut self.hot);
        let heat_of = |s: &Self, pfn: u64| {
            s.map
                .dense_index(Pfn(pfn))
                .map_or(0, |i| if s.order[i] != 0 { s.heat[i] } else { 0 })
        };
        hot.sort_unstable_by_key(|&p| std::cmp::Reverse((heat_of(self, p), p)));
        let mut waiting = Vec::new();
        for pfn in hot {
            let Some(i) = self.map.dense_index(Pfn(pfn)) else {
                continue;
            };
            let o = self.order[i];
            if o == 0 || self.heat[i] < self.opts.threshold || i & ((1 << (o - 1)) - 1) != 0 {
                self.queued[i] = 0;
                continue;
            }
            let order = Order::new(o - 1).expect("a followed block's order");
            if self.budget_left() < order.frames() {
                self.stats.deferred_for_budget += 1;
                waiting.push(pfn);
                continue;
            }
            self.queued[i] = 0;
            match self.move_block(Pfn(pfn), order) {
                Some(m) => moves.push(m),
                // Stays hot: tried again once it has been written
                // `threshold` more times.
                None => self.heat[i] = 0,
            }
        }
        self.hot = waiting;
        Some(moves)
    }

    #[inline]
    fn prefetch(&mut self, ours: Pfn) {
        self.inner.prefetch(ours);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::{ByAllocator, Engine};
    use crate::wear::{WearCounter, WriteModel};
    use nvmos_frames::{IBuddy, Zone};
    use std::convert::Infallible;

    type Lock = parking_lot::RawMutex;

    fn ev(t: u64, op: Op, pfn: u64) -> Result<Event, Infallible> {
        Ok(Event {
            time_ns: t,
            cpu: 0,
            op,
            pfn: Pfn(pfn),
            order: Order::ZERO,
        })
    }

    /// One page allocated and written `writes` times, 10 ms apart.
    fn one_hot_page(writes: u64) -> Vec<Result<Event, Infallible>> {
        let mut v = vec![ev(0, Op::Alloc(MigrateType::Movable), 7)];
        v.extend((1..=writes).map(|k| ev(k * 10_000_000, Op::Write, 7)));
        v
    }

    fn run(
        opts: HotMigrateOptions,
        frames: u64,
        events: Vec<Result<Event, Infallible>>,
    ) -> (HotMigrateStats, WearCounter, crate::ReplayStats) {
        let zones = [Zone::new(0, frames)];
        let alloc = IBuddy::<Lock>::new(&zones, 1).unwrap();
        let map = ZoneMap::new(&zones).unwrap();
        let mut policy = HotMigrate::new(ByAllocator(&alloc), map.clone(), opts);
        let mut wear = WearCounter::new(map, WriteModel::default());
        let mut engine = Engine::new(Some(opts.epoch_ns));
        engine.feed(&mut policy, &mut wear, events, 0).unwrap();
        let stats = policy.stats().clone();
        (stats, wear, engine.finish())
    }

    #[test]
    fn a_hot_page_visits_many_frames_and_no_frame_takes_more_than_a_stint() {
        let opts = HotMigrateOptions {
            threshold: 10,
            budget_pct: 20.0,
            epoch_ns: 10_000_000,
            ..HotMigrateOptions::default()
        };
        let (s, wear, replay) = run(opts, 1024, one_hot_page(1000));
        let written = wear.written_with_copies().unwrap();
        // 1000 writes, a pass before each (every 10 ms): a move in the
        // pass after the 10th write since the last, 90 moves or so, 9 %
        // extra writes, within the 20 % budget.
        assert!(s.blocks_moved >= 80 && s.blocks_moved <= 100, "{s:?}");
        assert_eq!(s.pages_copied, s.blocks_moved);
        assert_eq!(replay.pages_migrated, s.blocks_moved);
        assert_eq!(s.writes_seen, 1000);
        // Every sampled write and every copy is on some frame.
        let total: u64 = written.iter().map(|&w| u64::from(w)).sum();
        assert_eq!(total, 1000 + s.pages_copied);
        // No frame holds more than one stint (threshold, plus the write
        // before the next pass, plus its copy).
        let max = *written.iter().max().unwrap();
        assert!(max <= 12, "max {max}");
        assert_eq!(wear.max_written(), max);
        assert_eq!(s.no_better_place + s.no_destination, 0, "{s:?}");
    }

    #[test]
    fn the_budget_bounds_the_copies() {
        let opts = HotMigrateOptions {
            threshold: 2,
            budget_pct: 5.0,
            epoch_ns: 10_000_000,
            ..HotMigrateOptions::default()
        };
        let (s, _, _) = run(opts, 1024, one_hot_page(2000));
        assert!(s.pages_copied * 100 <= 5 * s.writes_seen, "{s:?}");
        assert!(s.pages_copied >= 90, "{s:?}");
        assert!(s.deferred_for_budget > 0, "{s:?}");
    }

    #[test]
    fn a_hot_page_alternates_between_two_frames() {
        // Two frames: each move goes to the other, less worn one, so
        // the two share the writes.
        let opts = HotMigrateOptions {
            threshold: 5,
            budget_pct: 100.0,
            candidates: 1,
            ..HotMigrateOptions::default()
        };
        let (s, wear, _) = run(opts, 2, one_hot_page(400));
        assert!(s.blocks_moved >= 20, "{s:?}");
        let written = wear.written_with_copies().unwrap();
        let (a, b) = (written[0], written[1]);
        assert!(a.abs_diff(b) <= 12, "{a} {b}");
    }

    #[test]
    fn no_move_where_nothing_is_less_worn() {
        // Two frames: an unmovable page written 100 times wears one, then
        // is freed; the hot movable page on the other has only the worn
        // frame to go to, and stays.
        let mut events = vec![
            ev(0, Op::Alloc(MigrateType::Movable), 7),
            ev(0, Op::Alloc(MigrateType::Unmovable), 8),
        ];
        events.extend((1..=100).map(|k| ev(k * 1_000_000, Op::Write, 8)));
        events.push(ev(200_000_000, Op::Free, 8));
        events.extend((1..=20).map(|k| ev(200_000_000 + k * 10_000_000, Op::Write, 7)));
        let opts = HotMigrateOptions {
            threshold: 5,
            budget_pct: 100.0,
            candidates: 1,
            epoch_ns: 10_000_000,
        };
        let (s, _, replay) = run(opts, 2, events);
        assert_eq!((s.blocks_moved, replay.pages_migrated), (0, 0), "{s:?}");
        assert!(s.no_better_place >= 2, "{s:?}");
    }

    #[test]
    fn one_frame_has_no_destination() {
        let opts = HotMigrateOptions {
            threshold: 5,
            ..HotMigrateOptions::default()
        };
        let (s, _, _) = run(opts, 1, one_hot_page(100));
        assert_eq!(s.blocks_moved, 0);
        assert!(s.no_destination > 0, "{s:?}");
    }

    #[test]
    fn unmovable_blocks_are_never_moved() {
        let mut events = vec![ev(0, Op::Alloc(MigrateType::Unmovable), 7)];
        events.extend((1..=200).map(|k| ev(k * 10_000_000, Op::Write, 7)));
        let (s, _, replay) = run(HotMigrateOptions::default(), 64, events);
        assert_eq!((s.blocks_moved, replay.pages_migrated), (0, 0));
        assert_eq!(s.writes_seen, 200);
    }

    #[test]
    fn bad_options_are_refused() {
        let d = HotMigrateOptions::default();
        assert!(d.check().is_ok());
        for bad in [
            HotMigrateOptions { threshold: 0, ..d },
            HotMigrateOptions {
                budget_pct: 0.0,
                ..d
            },
            HotMigrateOptions {
                budget_pct: f64::NAN,
                ..d
            },
            HotMigrateOptions { candidates: 0, ..d },
            HotMigrateOptions { epoch_ns: 0, ..d },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
