//! Event accounting: which traced blocks are live, and every event that
//! does not fit a clean allocate-then-free story, counted in one place.
//!
//! `nvmos trace info` and the replay engine both feed events through one
//! [`BlockTracker`], so they classify every event the same way and report
//! the same [`Accounting`] (a test checks they agree). The replay attaches
//! its own placement to each live block as a *tag* (the allocator's first
//! frame); `trace info` attaches nothing.
//!
//! # How events are classified
//!
//! The tracker keeps the live blocks by first frame (head). Invariant:
//! every block allocated and not yet wholly freed is live, once.
//!
//! - **Allocation** of a block whose head is live: the earlier block's free
//!   was lost (ring-buffer overrun), so it is dropped (the caller gives back
//!   its placement) and the new block replaces it —
//!   [`Accounting::allocs_of_live_pfn`]. An allocation inside a live larger
//!   block (not at its head) is counted there too; both stay live.
//! - **Free** at the head of a live block of the same order, none of it
//!   freed yet: the block's free.
//! - **Free** at a head with a *larger* order than the block's: the kernel
//!   freed more than the trace allocated there. The block is freed —
//!   [`Accounting::frees_mismatched_order`].
//! - **Free** of part of a live block (a smaller order at its head, or a
//!   block inside it — Linux's `split_page`, `free_pages_exact`): counted
//!   in [`Accounting::partial_frees`]; the block is freed when all its
//!   frames have been.
//! - **Free** of anything else: frames allocated before the recording
//!   began — [`Accounting::frees_before_recording`].
//! - A timestamp earlier than the previous event's:
//!   [`Accounting::time_reversals`] (the event is still used); a source
//!   that saw the timestamps before they became times relative to the
//!   first event adds the reversals those hide
//!   ([`Accounting::add_source_counts`]).
//! - A sampled **write** ([`Op::Write`], `nvmos record --writes`): counted
//!   in [`Accounting::write_samples`]; it lands on the live block that
//!   holds its frame (at its head or inside it), or, when none does, is
//!   counted in [`Accounting::writes_not_live`] (frames allocated before
//!   the recording, page cache of earlier files, the allocation's event
//!   lost). Writes change no block.

use nvmos_frames::{MigrateType, Order, MAX_ORDER};
use rustc_hash::FxHashMap;

use crate::event::{Event, Op};
use crate::source::SourceCounts;
use crate::table::ZeroTable;

/// Counts of everything a trace holds beyond clean allocate-then-free
/// pairs. The same struct in `trace info` and in every replay result.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Accounting {
    /// Events read.
    pub events_read: u64,
    /// Events the kernel lost while recording (`[LOST n EVENTS]` lines,
    /// ring-buffer overruns in the `.nvt` header): the trace is missing
    /// them, so frees and allocations around them do not pair up.
    pub lost_events: u64,
    /// Frees of blocks not allocated in the trace: allocated before the
    /// recording began. Nothing to give back.
    pub frees_before_recording: u64,
    /// Frees at a live block's head with a larger order than its
    /// allocation: the whole block is freed.
    pub frees_mismatched_order: u64,
    /// Frees of part of a live block (a split block freed in pieces): the
    /// block is freed when all its frames are.
    pub partial_frees: u64,
    /// Allocations of a block whose head is live, or inside a live larger
    /// block: a free was lost. At the same head the older block is freed
    /// first.
    pub allocs_of_live_pfn: u64,
    /// Events whose timestamp is earlier than the event before
    /// (out-of-order per-CPU buffers), over the whole trace (not per CPU).
    pub time_reversals: u64,
    /// Sampled write events read (included in `events_read`; 0 for traces
    /// recorded without `--writes`).
    #[serde(default)]
    pub write_samples: u64,
    /// Of those, writes to a frame no live traced block holds: allocated
    /// before the recording began (or its allocation lost). Nothing to
    /// attribute them to.
    #[serde(default)]
    pub writes_not_live: u64,
}

impl Accounting {
    /// Whether any event was lost, unmatched or out of order (writes to
    /// frames with no live block included).
    pub fn anything_unusual(&self) -> bool {
        self.lost_events
            + self.frees_before_recording
            + self.frees_mismatched_order
            + self.partial_frees
            + self.allocs_of_live_pfn
            + self.time_reversals
            + self.writes_not_live
            > 0
    }

    /// Takes what the source reported beside its events (call it once the
    /// source has ended): the events it knows the kernel lost, and
    /// out-of-order timestamps the events' times cannot show
    /// ([`SourceCounts::time_reversals`]). The times only ever hide
    /// reversals (an early timestamp is clamped to 0), never invent them,
    /// so the larger of the two counts is the right one.
    pub fn add_source_counts(&mut self, counts: &SourceCounts) {
        self.lost_events = counts.lost_events;
        self.time_reversals = self.time_reversals.max(counts.time_reversals);
    }

    /// The counts as (name, value) pairs, in the order they are printed.
    pub fn rows(&self) -> [(&'static str, u64); 9] {
        [
            ("events read", self.events_read),
            ("lost events", self.lost_events),
            ("frees before recording", self.frees_before_recording),
            ("frees of a mismatched order", self.frees_mismatched_order),
            ("partial frees", self.partial_frees),
            ("allocations of a live pfn", self.allocs_of_live_pfn),
            ("out-of-order timestamps", self.time_reversals),
            ("sampled writes", self.write_samples),
            ("writes to no live block", self.writes_not_live),
        ]
    }
}

/// A live traced block.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LiveBlock {
    /// The traced first frame.
    pub pfn: u64,
    /// Its order as allocated.
    pub order: Order,
    /// Its migratetype.
    pub kind: MigrateType,
    /// What the caller attached with [`BlockTracker::set_tag`] (a replay:
    /// the allocator's first frame), `None` when nothing (e.g. the
    /// allocator refused the block).
    pub tag: Option<u64>,
    /// Frames of it freed so far by partial frees.
    pub freed: u64,
}

/// What one event did to the live blocks.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// A new block is live (tag `None` until [`BlockTracker::set_tag`]);
    /// `replaced` is an older block at the same head, dropped because its
    /// free was lost: give back its placement.
    Allocated {
        /// The dropped block.
        replaced: Option<LiveBlock>,
    },
    /// A block was wholly freed (its own free, a mismatched-order free or
    /// the last piece of a partial free): give back its placement.
    Freed(LiveBlock),
    /// Part of a live block was freed; it stays live.
    PartlyFreed,
    /// A free of frames allocated before the recording.
    NotLive,
    /// A sampled write to a frame of this live block (`None`: no live
    /// block holds the frame, counted in [`Accounting::writes_not_live`]).
    Written(Option<LiveBlock>),
}

/// Traced pfns below this are kept in a table indexed by pfn; beyond it
/// (a trace from a machine with over a terabyte) in a hash map.
const DIRECT_LIMIT: u64 = 1 << 28;

/// The live traced blocks and the [`Accounting`] so far.
///
/// A table indexed by pfn rather than a hash map: the kernel places
/// neighbouring allocations on neighbouring frames, and a table keeps
/// those entries on the same cache lines where hashing scatters them. A
/// slot is one `u64` (eight slots to a cache line) and an empty slot is
/// zero, so the table ([`ZeroTable`]) comes from zeroed memory the system
/// maps lazily, in huge pages: a 24 GiB machine's 6.5 M slots cost only
/// the 2 MiB pages the trace touches, and a lookup far from the last
/// needs no page-table walk of its own.
/// The replay's cost is mostly this table's cache misses (a free looks
/// up a block allocated long before): [`prefetch`](BlockTracker::prefetch)
/// starts one early. A block whose tag does not fit a slot (≥ 2^44 − 1,
/// beyond any real memory), or whose head is past `DIRECT_LIMIT`, lives
/// in a hash map instead, as a `u128`.
#[derive(Default, Clone)]
pub struct BlockTracker {
    direct: Slots,
    far: FxHashMap<u64, u128>,
    /// The live blocks of order > 0 (head → order), the only ones that can
    /// hold another block: looking for an enclosing block here stays in
    /// cache, where probing the big table at ten aligned heads would miss
    /// it ten times. Invariant: exactly the live blocks with order > 0.
    large: FxHashMap<u64, u8>,
    /// Per 1024-frame region (`head >> MAX_ORDER`), how many of `large`
    /// of order above `NEAR_ORDER` have their head in it. A block of
    /// order `o` enclosing `pfn` has its head at `pfn` aligned down to
    /// `o`, so in `pfn`'s region: a region without one answers
    /// [`enclosing`](Self::enclosing) for those orders with one load from
    /// a small array, where probing `large` at each head hashes. Heads
    /// past `DIRECT_LIMIT` are not counted here (those lookups always
    /// probe `large`).
    large_regions: Vec<u32>,
    /// The same for the blocks of order 1 to `NEAR_ORDER`, per 64-frame
    /// region (`head >> NEAR_ORDER`): most large blocks are small, and a
    /// 1024-frame region holding one of them sent every lookup in it to
    /// the hash map (profiled: a tenth of a replay of compile.nvt).
    near_regions: Vec<u8>,
    live: u64,
    last_time: Option<u64>,
    counts: Accounting,
}

const PRESENT: u128 = 1 << 127;

/// `tag + 1` in bits 0..64 (0: no tag), the order in 64..68, the
/// migratetype in 68..70, frames freed so far in 70..82, bit 127 set.
#[inline]
fn pack(b: &LiveBlock) -> u128 {
    PRESENT
        | u128::from(b.tag.map_or(0, |t| t + 1))
        | u128::from(b.order.get()) << 64
        | u128::from(kind_bits(b.kind)) << 68
        | u128::from(b.freed) << 70
}

#[inline]
fn kind_bits(kind: MigrateType) -> u64 {
    match kind {
        MigrateType::Unmovable => 0,
        MigrateType::Movable => 1,
        MigrateType::Reclaimable => 2,
    }
}

#[inline]
fn kind_of(bits: u64) -> MigrateType {
    match bits & 3 {
        0 => MigrateType::Unmovable,
        1 => MigrateType::Movable,
        _ => MigrateType::Reclaimable,
    }
}

#[inline]
fn unpack(pfn: u64, slot: u128) -> Option<LiveBlock> {
    if slot & PRESENT == 0 {
        return None;
    }
    let tag = slot as u64;
    Some(LiveBlock {
        pfn,
        tag: tag.checked_sub(1),
        order: Order::new((slot >> 64) as u8 & 0xf).expect("packed from an Order"),
        kind: kind_of((slot >> 68) as u64),
        freed: ((slot >> 70) & 0xfff) as u64,
    })
}

/// A table slot: `tag + 1` in bits 0..44 (0: no tag), the order in
/// 44..48, the migratetype in 48..50, frames freed so far in 50..62
/// (fewer than the block's 1024 at most), bit 63 set.
const SLOT_PRESENT: u64 = 1 << 63;
const SLOT_TAG_BITS: u32 = 44;
const SLOT_TAG_MASK: u64 = (1 << SLOT_TAG_BITS) - 1;

/// `b` as a table slot, or `None` when its tag does not fit.
#[inline]
fn pack_slot(b: &LiveBlock) -> Option<u64> {
    let tag = match b.tag {
        None => 0,
        Some(t) if t < SLOT_TAG_MASK => t + 1,
        Some(_) => return None,
    };
    debug_assert!(b.freed < 1 << 12);
    Some(
        SLOT_PRESENT
            | tag
            | u64::from(b.order.get()) << 44
            | kind_bits(b.kind) << 48
            | b.freed << 50,
    )
}

#[inline]
fn unpack_slot(pfn: u64, slot: u64) -> Option<LiveBlock> {
    if slot & SLOT_PRESENT == 0 {
        return None;
    }
    Some(LiveBlock {
        pfn,
        tag: (slot & SLOT_TAG_MASK).checked_sub(1),
        order: Order::new((slot >> 44) as u8 & 0xf).expect("packed from an Order"),
        kind: kind_of(slot >> 48),
        freed: (slot >> 50) & 0xfff,
    })
}

/// The `large_regions` index of a head.
#[inline]
fn region(pfn: u64) -> usize {
    (pfn >> MAX_ORDER) as usize
}

/// Blocks up to this order are counted in `near_regions`, larger ones in
/// `large_regions`.
const NEAR_ORDER: u8 = 6;

/// The `near_regions` index of a head.
#[inline]
fn near_region(pfn: u64) -> usize {
    (pfn >> NEAR_ORDER) as usize
}

/// A hint to the CPU to load `slot`'s cache line (a no-op where there is
/// no such instruction).
#[inline(always)]
fn prefetch_read<T>(slot: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it reads nothing the program
    // sees and cannot fault, and `slot` is a valid reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((slot as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = slot;
}

/// Slots per chunk of [`Slots`] (a power of two): 512 bytes, eight
/// cache lines.
const CHUNK: u64 = 64;

/// The tracker's table: one `u64` slot per traced pfn below
/// `DIRECT_LIMIT`, 0 when empty, kept as a compact remap of the pfns the
/// trace uses. The pfns are cut into chunks of [`CHUNK`]; a small index
/// (4 bytes per chunk of the pfn range: 400 KiB for a 24 GiB machine,
/// cache-resident) gives each chunk written so far its place in `chunks`,
/// in the order they were first written.
///
/// Why not one slot per frame of the machine: a recorded trace reuses
/// few frames (compile.nvt: 1.4 M events on 138 k distinct pfns spread
/// over 16.5 GiB, 22.5 k chunks of 64), so a table over its whole pfn
/// range (35 MB) was mostly zeroed only to be read as empty, and zeroing
/// it was a tenth of a replay; the chunks in use are 11.5 MB, and those
/// first written together lie together.
#[derive(Default, Clone)]
struct Slots {
    /// `pfn / CHUNK` → chunk number + 1 (0: nothing written there).
    index: Vec<u32>,
    /// The chunks, `CHUNK` slots each; `used` of them handed out.
    chunks: ZeroTable<u64>,
    used: u32,
}

impl Slots {
    /// Where `pfn`'s slot is, if its chunk was ever written.
    #[inline]
    fn at(&self, pfn: u64) -> Option<usize> {
        match *self.index.get((pfn / CHUNK) as usize)? {
            0 => None,
            c => Some((c as usize - 1) * CHUNK as usize + (pfn % CHUNK) as usize),
        }
    }

    /// `pfn`'s slot, 0 when empty.
    #[inline]
    fn get(&self, pfn: u64) -> u64 {
        self.at(pfn).map_or(0, |i| self.chunks[i])
    }

    #[inline]
    fn get_mut(&mut self, pfn: u64) -> Option<&mut u64> {
        let i = self.at(pfn)?;
        Some(&mut self.chunks[i])
    }

    /// `pfn`'s slot, its chunk made when it has none.
    #[inline]
    fn slot(&mut self, pfn: u64) -> &mut u64 {
        let i = match self.at(pfn) {
            Some(i) => i,
            None => self.new_chunk(pfn),
        };
        &mut self.chunks[i]
    }

    #[cold]
    fn new_chunk(&mut self, pfn: u64) -> usize {
        let c = (pfn / CHUNK) as usize;
        if c >= self.index.len() {
            self.index
                .resize((c + 1).next_power_of_two().max(1 << 12), 0);
        }
        let first = self.used as usize * CHUNK as usize;
        if first + CHUNK as usize > self.chunks.len() {
            // The mapping moves: nothing is copied (see `ZeroTable`).
            self.chunks.grow(
                (2 * self.chunks.len())
                    .max(1 << 17)
                    .max(first + CHUNK as usize),
            );
        }
        self.used += 1;
        self.index[c] = self.used;
        first + (pfn % CHUNK) as usize
    }

    /// Starts loading `pfn`'s slot into the cache (its chunk's place is
    /// read now: best after [`prefetch_index`](Self::prefetch_index)).
    #[inline]
    fn prefetch(&self, pfn: u64) {
        if let Some(i) = self.at(pfn) {
            prefetch_read(&self.chunks[i]);
        }
    }

    /// Starts loading the index entry of `pfn`'s chunk.
    #[inline]
    fn prefetch_index(&self, pfn: u64) {
        if let Some(c) = self.index.get((pfn / CHUNK) as usize) {
            prefetch_read(c);
        }
    }

    /// Every non-empty slot as `(pfn, slot)`, in pfn order.
    fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.index
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c != 0)
            .flat_map(move |(chunk, &c)| {
                let first = (c as usize - 1) * CHUNK as usize;
                self.chunks[first..first + CHUNK as usize]
                    .iter()
                    .enumerate()
                    .filter(|&(_, &s)| s != 0)
                    .map(move |(k, &s)| (chunk as u64 * CHUNK + k as u64, s))
            })
    }
}

impl BlockTracker {
    /// No live blocks, nothing counted.
    pub fn new() -> BlockTracker {
        BlockTracker::default()
    }

    /// The counts so far. The source's own counts are the caller's to add
    /// ([`Accounting::add_source_counts`]).
    pub fn counts(&self) -> &Accounting {
        &self.counts
    }

    /// Blocks live now.
    pub fn live_blocks(&self) -> u64 {
        self.live
    }

    /// The live block with head `pfn`.
    #[inline]
    pub fn get(&self, pfn: u64) -> Option<LiveBlock> {
        if pfn < DIRECT_LIMIT {
            if let Some(b) = unpack_slot(pfn, self.direct.get(pfn)) {
                return Some(b);
            }
            if self.far.is_empty() {
                return None;
            }
        }
        unpack(pfn, *self.far.get(&pfn)?)
    }

    /// Starts loading the table entry of `pfn` into the cache, for an
    /// event a few events ahead: its lookup then finds it there. Changes
    /// nothing.
    #[inline]
    pub fn prefetch(&self, pfn: u64) {
        self.direct.prefetch(pfn);
    }

    /// The first step of [`prefetch`](Self::prefetch), for an event
    /// further ahead: starts loading the small index that says where
    /// `pfn`'s entry is, so that `prefetch` finds it in cache. Changes
    /// nothing.
    #[inline]
    pub fn prefetch_index(&self, pfn: u64) {
        self.direct.prefetch_index(pfn);
    }

    /// Attaches `tag` to the live block with head `pfn` (after
    /// [`Effect::Allocated`]). Does nothing when no block is live there.
    #[inline]
    pub fn set_tag(&mut self, pfn: u64, tag: u64) {
        if let Some(mut b) = self.get(pfn) {
            b.tag = Some(tag);
            self.put(&b);
        }
    }

    /// Every live block, in pfn order: what is still allocated.
    pub fn live(&self) -> Vec<LiveBlock> {
        let mut v: Vec<LiveBlock> = self
            .direct
            .iter()
            .filter_map(|(pfn, s)| unpack_slot(pfn, s))
            .collect();
        v.extend(self.far.iter().filter_map(|(&p, &s)| unpack(p, s)));
        v.sort_by_key(|b| b.pfn);
        v
    }

    #[inline]
    fn take(&mut self, pfn: u64) -> Option<LiveBlock> {
        let mut b = None;
        if pfn < DIRECT_LIMIT {
            if let Some(slot) = self.direct.get_mut(pfn) {
                b = unpack_slot(pfn, std::mem::take(slot));
            }
        }
        if b.is_none() && !self.far.is_empty() {
            b = self.far.remove(&pfn).and_then(|s| unpack(pfn, s));
        }
        if let Some(b) = &b {
            self.live -= 1;
            if b.order.get() > 0 {
                self.large.remove(&pfn);
                if pfn < DIRECT_LIMIT {
                    if b.order.get() <= NEAR_ORDER {
                        self.near_regions[near_region(pfn)] -= 1;
                    } else {
                        self.large_regions[region(pfn)] -= 1;
                    }
                }
            }
        }
        b
    }

    /// Stores `b` at its head (replacing what is there).
    #[inline]
    fn put(&mut self, b: &LiveBlock) {
        match pack_slot(b) {
            Some(slot) if b.pfn < DIRECT_LIMIT => {
                *self.direct.slot(b.pfn) = slot;
                if !self.far.is_empty() {
                    self.far.remove(&b.pfn);
                }
            }
            _ => {
                if let Some(slot) = self.direct.get_mut(b.pfn) {
                    *slot = 0;
                }
                self.far.insert(b.pfn, pack(b));
            }
        }
    }

    #[inline]
    fn insert(&mut self, b: &LiveBlock) {
        self.put(b);
        self.live += 1;
        if b.order.get() > 0 {
            self.large.insert(b.pfn, b.order.get());
            if b.pfn < DIRECT_LIMIT {
                if b.order.get() <= NEAR_ORDER {
                    let r = near_region(b.pfn);
                    if r >= self.near_regions.len() {
                        self.near_regions.resize(r + 1, 0);
                    }
                    // At most 64 heads in 64 frames: no overflow.
                    self.near_regions[r] += 1;
                } else {
                    let r = region(b.pfn);
                    if r >= self.large_regions.len() {
                        self.large_regions.resize(r + 1, 0);
                    }
                    self.large_regions[r] += 1;
                }
            }
        }
    }

    /// The head of a live block, other than one at `pfn` itself, that
    /// holds the block of `order` at `pfn`: found by aligning `pfn` down
    /// to each larger order.
    #[inline]
    fn enclosing(&self, pfn: u64, order: Order) -> Option<u64> {
        if self.large.is_empty() {
            return None;
        }
        // Which orders can have a block here at all (see the fields).
        let (near, far) = if pfn < DIRECT_LIMIT {
            let some = |n: Option<u32>| n.is_some_and(|n| n > 0);
            (
                some(self.near_regions.get(near_region(pfn)).map(|&n| n.into())),
                some(self.large_regions.get(region(pfn)).copied()),
            )
        } else {
            (true, true)
        };
        if !near && !far {
            return None;
        }
        let mut last = pfn;
        Order::all().skip(order.index() + 1).find_map(|o| {
            if !(if o.get() <= NEAR_ORDER { near } else { far }) {
                return None;
            }
            let head = pfn & !(o.frames() - 1);
            // The same head as the last probed: the same answer.
            if head == last {
                return None;
            }
            last = head;
            self.large
                .get(&head)
                .filter(|&&bo| head + (1u64 << bo) >= pfn + order.frames())
                .map(|_| head)
        })
    }

    /// Classifies one event and updates the live blocks.
    #[inline]
    pub fn step(&mut self, e: &Event) -> Effect {
        self.counts.events_read += 1;
        if let Some(last) = self.last_time {
            if e.time_ns < last {
                self.counts.time_reversals += 1;
            }
        }
        self.last_time = Some(e.time_ns);
        let pfn = e.pfn.get();
        match e.op {
            Op::Write => {
                self.counts.write_samples += 1;
                let block = self
                    .get(pfn)
                    .or_else(|| self.enclosing(pfn, Order::ZERO).and_then(|h| self.get(h)));
                if block.is_none() {
                    self.counts.writes_not_live += 1;
                }
                Effect::Written(block)
            }
            Op::Alloc(kind) => {
                let replaced = self.take(pfn);
                if replaced.is_some() || self.enclosing(pfn, e.order).is_some() {
                    self.counts.allocs_of_live_pfn += 1;
                }
                self.insert(&LiveBlock {
                    pfn,
                    order: e.order,
                    kind,
                    tag: None,
                    freed: 0,
                });
                Effect::Allocated { replaced }
            }
            Op::Free => {
                if let Some(mut b) = self.get(pfn) {
                    if b.order == e.order && b.freed == 0 {
                        self.take(pfn);
                        return Effect::Freed(b);
                    }
                    if e.order > b.order {
                        self.counts.frees_mismatched_order += 1;
                        self.take(pfn);
                        return Effect::Freed(b);
                    }
                    // A piece at the head of a split block.
                    self.counts.partial_frees += 1;
                    b.freed += e.order.frames();
                    if b.freed >= b.order.frames() {
                        self.take(pfn);
                        return Effect::Freed(b);
                    }
                    self.put(&b);
                    return Effect::PartlyFreed;
                }
                match self.enclosing(pfn, e.order) {
                    Some(head) => {
                        self.counts.partial_frees += 1;
                        let mut b = self.get(head).expect("found above");
                        b.freed += e.order.frames();
                        if b.freed >= b.order.frames() {
                            self.take(head);
                            Effect::Freed(b)
                        } else {
                            self.put(&b);
                            Effect::PartlyFreed
                        }
                    }
                    None => {
                        self.counts.frees_before_recording += 1;
                        Effect::NotLive
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmos_frames::Pfn;

    fn ev(time_ns: u64, op: Op, pfn: u64, order: u8) -> Event {
        Event {
            time_ns,
            cpu: 0,
            op,
            pfn: Pfn(pfn),
            order: Order::new(order).unwrap(),
        }
    }

    const A: Op = Op::Alloc(MigrateType::Movable);
    const F: Op = Op::Free;

    #[test]
    fn every_case_is_counted_once() {
        let mut t = BlockTracker::new();
        let effects: Vec<Effect> = [
            ev(0, A, 1000, 0),
            ev(1, A, 2000, 2),
            ev(2, F, 1000, 0), // its free
            ev(3, F, 5555, 0), // before recording
            ev(4, A, 4096, 3), // split later, freed piecewise
            ev(5, F, 4096, 2), // piece at the head
            ev(6, F, 4100, 1), // piece inside
            ev(7, F, 4102, 0),
            ev(8, F, 4103, 0), // the last piece frees the block
            ev(9, A, 2000, 2), // live: a lost free
            ev(8, A, 64, 0),   // time goes back
            ev(10, F, 64, 1),  // larger order than allocated
            ev(11, A, 128, 2),
            ev(12, A, 130, 0), // inside a live block
        ]
        .iter()
        .map(|e| t.step(e))
        .collect();
        assert_eq!(
            effects[2],
            Effect::Freed(LiveBlock {
                pfn: 1000,
                order: Order::new(0).unwrap(),
                kind: MigrateType::Movable,
                tag: None,
                freed: 0
            })
        );
        assert_eq!(effects[3], Effect::NotLive);
        assert_eq!(effects[5], Effect::PartlyFreed);
        assert!(matches!(effects[8], Effect::Freed(b) if b.pfn == 4096 && b.freed == 8));
        assert!(matches!(effects[9], Effect::Allocated { replaced: Some(b) } if b.pfn == 2000));
        assert!(matches!(effects[11], Effect::Freed(b) if b.pfn == 64));
        assert_eq!(
            *t.counts(),
            Accounting {
                events_read: 14,
                lost_events: 0,
                frees_before_recording: 1,
                frees_mismatched_order: 1,
                partial_frees: 4,
                allocs_of_live_pfn: 2,
                time_reversals: 1,
                write_samples: 0,
                writes_not_live: 0,
            }
        );
        // 2000 (order 2), 128 (order 2) and 130 (order 0).
        assert_eq!(t.live_blocks(), 3);
        let live: Vec<u64> = t.live().iter().map(|b| b.pfn).collect();
        assert_eq!(live, [128, 130, 2000]);
    }

    #[test]
    fn writes_land_on_the_live_block_holding_their_frame() {
        let mut t = BlockTracker::new();
        let w = |time, pfn| ev(time, Op::Write, pfn, 0);
        t.step(&ev(0, A, 64, 2)); // frames 64..68
        assert!(matches!(t.step(&w(1, 64)), Effect::Written(Some(b)) if b.pfn == 64));
        assert!(matches!(t.step(&w(2, 66)), Effect::Written(Some(b)) if b.pfn == 64));
        assert_eq!(t.step(&w(3, 68)), Effect::Written(None)); // just past it
        t.step(&ev(4, F, 64, 2));
        assert_eq!(t.step(&w(5, 65)), Effect::Written(None)); // freed
        let c = t.counts();
        assert_eq!(
            (c.events_read, c.write_samples, c.writes_not_live),
            (6, 4, 2)
        );
        assert!(c.anything_unusual());
        assert_eq!(t.live_blocks(), 0);
    }

    #[test]
    fn tags_and_far_pfns() {
        let mut t = BlockTracker::new();
        for pfn in [8, DIRECT_LIMIT + 8, 3 << 20] {
            assert!(matches!(
                t.step(&ev(0, A, pfn, 3)),
                Effect::Allocated { replaced: None }
            ));
            assert_eq!(t.get(pfn).unwrap().tag, None);
            t.set_tag(pfn, 0);
            assert_eq!(t.get(pfn).unwrap().tag, Some(0));
            t.set_tag(pfn, u64::MAX - 1);
            let b = t.get(pfn).unwrap();
            assert_eq!(
                (b.tag, b.order.get(), b.kind),
                (Some(u64::MAX - 1), 3, MigrateType::Movable)
            );
            assert!(
                matches!(t.step(&ev(0, F, pfn, 3)), Effect::Freed(b) if b.tag == Some(u64::MAX - 1))
            );
            assert!(t.get(pfn).is_none());
        }
        assert_eq!(t.live_blocks(), 0);
    }

    /// The tracker against a naive model of the same rules (every live
    /// block in an ordered map, every enclosing head probed): the same
    /// effect for every event, the same counts and live blocks after, on
    /// random events clustered so blocks overlap, near and far from 0
    /// and past `DIRECT_LIMIT`, with tags that do and do not fit a slot.
    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        #[derive(Default)]
        struct Model {
            live: BTreeMap<u64, LiveBlock>,
            counts: Accounting,
            last: Option<u64>,
        }

        impl Model {
            fn enclosing(&self, pfn: u64, order: Order) -> Option<u64> {
                Order::all().skip(order.index() + 1).find_map(|o| {
                    let head = pfn & !(o.frames() - 1);
                    let b = self.live.get(&head).filter(|_| head != pfn)?;
                    (head + b.order.frames() >= pfn + order.frames()).then_some(head)
                })
            }

            fn step(&mut self, e: &Event) -> Effect {
                self.counts.events_read += 1;
                if self.last.is_some_and(|l| e.time_ns < l) {
                    self.counts.time_reversals += 1;
                }
                self.last = Some(e.time_ns);
                let pfn = e.pfn.get();
                match e.op {
                    Op::Write => {
                        self.counts.write_samples += 1;
                        let b =
                            self.live.get(&pfn).copied().or_else(|| {
                                self.enclosing(pfn, Order::ZERO).map(|h| self.live[&h])
                            });
                        if b.is_none() {
                            self.counts.writes_not_live += 1;
                        }
                        Effect::Written(b)
                    }
                    Op::Alloc(kind) => {
                        let replaced = self.live.remove(&pfn);
                        if replaced.is_some() || self.enclosing(pfn, e.order).is_some() {
                            self.counts.allocs_of_live_pfn += 1;
                        }
                        let b = LiveBlock {
                            pfn,
                            order: e.order,
                            kind,
                            tag: None,
                            freed: 0,
                        };
                        self.live.insert(pfn, b);
                        Effect::Allocated { replaced }
                    }
                    Op::Free => {
                        let (head, at_head) = match self.live.get(&pfn) {
                            Some(_) => (pfn, true),
                            None => match self.enclosing(pfn, e.order) {
                                Some(h) => (h, false),
                                None => {
                                    self.counts.frees_before_recording += 1;
                                    return Effect::NotLive;
                                }
                            },
                        };
                        let mut b = self.live[&head];
                        if at_head && b.order == e.order && b.freed == 0 {
                            self.live.remove(&head);
                            return Effect::Freed(b);
                        }
                        if at_head && e.order > b.order {
                            self.counts.frees_mismatched_order += 1;
                            self.live.remove(&head);
                            return Effect::Freed(b);
                        }
                        self.counts.partial_frees += 1;
                        b.freed += e.order.frames();
                        if b.freed >= b.order.frames() {
                            self.live.remove(&head);
                            Effect::Freed(b)
                        } else {
                            self.live.insert(head, b);
                            Effect::PartlyFreed
                        }
                    }
                }
            }
        }

        fn event() -> impl Strategy<Value = (Event, Option<u64>)> {
            let base = prop::sample::select(vec![0u64, 1 << 20, 5 << 22, DIRECT_LIMIT + 1024]);
            let order = prop_oneof![4 => 0u8..3, 1 => 3u8..=MAX_ORDER];
            let op = prop_oneof![
                3 => Just(Op::Alloc(MigrateType::Movable)),
                1 => Just(Op::Alloc(MigrateType::Unmovable)),
                3 => Just(Op::Free),
                1 => Just(Op::Write),
            ];
            let tag = prop_oneof![
                3 => (0u64..1 << 30).prop_map(Some),
                1 => Just(Some(u64::MAX - 7)),
                1 => Just(None),
            ];
            (base, 0u64..3000, order, op, 0u64..100, tag).prop_map(
                |(base, off, order, op, time_ns, tag)| {
                    let order = Order::new(order).unwrap();
                    // Blocks aligned to their order, as the kernel's are.
                    let pfn = (base + off) & !(order.frames() - 1);
                    let e = Event {
                        time_ns,
                        cpu: 0,
                        op,
                        pfn: nvmos_frames::Pfn(pfn),
                        order,
                    };
                    (e, tag)
                },
            )
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(200))]
            #[test]
            fn tracker_agrees_with_the_model(events in prop::collection::vec(event(), 1..600)) {
                let mut t = BlockTracker::new();
                let mut m = Model::default();
                for (e, tag) in &events {
                    let effect = t.step(e);
                    prop_assert_eq!(effect, m.step(e), "{:?}", e);
                    if let (Effect::Allocated { .. }, Some(tag)) = (effect, tag) {
                        t.set_tag(e.pfn.get(), *tag);
                        m.live.get_mut(&e.pfn.get()).unwrap().tag = Some(*tag);
                    }
                    prop_assert_eq!(t.live_blocks(), m.live.len() as u64);
                }
                prop_assert_eq!(t.counts(), &m.counts);
                let live: Vec<LiveBlock> = m.live.values().copied().collect();
                prop_assert_eq!(t.live(), live);
            }
        }
    }
}
