//! Power-aware page allocators of seed 004 (Panwar and Gopinath, "Towards
//! Practical Page Placement for a Green Memory Manager"): the Array-based
//! and List-based Bank-Buddy and the Adaptive-Buddy, with the seed's page
//! migration.
//!
//! A *bank* here is the seed's unit of power management: a contiguous
//! range of `bank_frames` page frames (a PASR segment, a rank, a Linux
//! memory section) that the memory controller can put into self-refresh or
//! deep power-down as a whole, which loses its contents. A bank holding no
//! allocated frame may go down; one allocated frame keeps it up. Unmovable
//! (kernel) pages pin their bank for as long as they live: migration can
//! move user (movable) pages out of a bank, never kernel pages.
//!
//! All three keep a buddy system *per bank*: blocks never straddle a bank
//! and merge only with a buddy in the same bank, so a bank's free frames
//! can be handed over as a whole. They differ in how they choose a bank:
//!
//! - [`BankPolicy::Array`]: the banks are an array; kernel allocations take
//!   the first bank from the low end with a fitting free block, user
//!   allocations the first from the high end. O(banks) per allocation.
//! - [`BankPolicy::List`]: banks sit on lists by state (offline, kernel,
//!   user); an allocation walks its side's list and takes a bank from the
//!   offline list only when none has room. O(banks) in the worst case.
//! - [`BankPolicy::Adaptive`]: the Adaptive-Buddy. The banks of one list
//!   are merged into one *memory pool* with one `free_area` per order, so
//!   allocation and free are O(1) like Linux's buddy. Capacity on demand:
//!   a pool that cannot serve a request takes an offline bank (its free
//!   blocks spliced onto the pool's lists in O(orders)); a bank whose last
//!   frame is freed leaves its pool and goes offline.
//!
//! Kernel data (unmovable and reclaimable migratetypes) and user data
//! (movable) grow from opposite ends of the bank array, so kernel pages
//! stay on the fewest, lowest banks. When a side has no room anywhere it
//! falls back to the other side's banks (as Linux's migratetype fallback)
//! before reporting out of memory.
//!
//! Migration ([`BankBuddy::migrate`]), as the seed describes it: sort the
//! banks in use by free pages, descending; walk them from the emptiest,
//! taking as *candidates* the banks with only movable pages for as long as
//! what they hold fits in the free frames of the banks left (the *break
//! point*); isolate the candidates from allocation so no page is copied
//! twice; move their blocks in sorted order into the banks already up.
//! Every move is reported as a [`Move`] (old pfn, new pfn, order) so the
//! owner of a page can follow it.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use core::cmp::Reverse;

use lock_api::{Mutex, RawMutex};

use crate::error::ensure;
use crate::meta::{check_block_free, FrameList, FrameMeta, Kind};
use crate::{
    check_cpu, check_cpus, AllocError, CachePadded, ConfigError, FrameAllocator, MigrateType,
    Order, Pfn, Request, Stats, ValidationError, Zone, ZoneMap, MAX_ORDER, ORDERS,
};

/// How a bank-aware allocator chooses the bank for an allocation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum BankPolicy {
    /// Array-based Bank-Buddy: first fit from the low end of the bank
    /// array for kernel pages, from the high end for user pages.
    Array,
    /// List-based Bank-Buddy: banks on offline / kernel / user lists.
    List,
    /// Adaptive-Buddy: the banks of each list merged into a memory pool.
    Adaptive,
}

impl BankPolicy {
    /// Every policy.
    pub const ALL: [BankPolicy; 3] = [BankPolicy::Array, BankPolicy::List, BankPolicy::Adaptive];

    /// The seed's name for the allocator.
    pub const fn name(self) -> &'static str {
        match self {
            BankPolicy::Array => "Array-based Bank-Buddy",
            BankPolicy::List => "List-based Bank-Buddy",
            BankPolicy::Adaptive => "Adaptive-Buddy",
        }
    }
}

/// What a bank is used for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum BankRole {
    /// No allocated frame: the bank may be powered down.
    Offline,
    /// Taken for kernel (unmovable, reclaimable) allocations.
    Kernel,
    /// Taken for user (movable) allocations.
    User,
}

impl BankRole {
    const fn index(self) -> usize {
        match self {
            BankRole::Offline => 0,
            BankRole::Kernel => 1,
            BankRole::User => 2,
        }
    }

    /// The side a migratetype allocates from: kernel data pins its bank,
    /// user data can move.
    const fn side(kind: MigrateType) -> BankRole {
        match kind {
            MigrateType::Movable => BankRole::User,
            MigrateType::Unmovable | MigrateType::Reclaimable => BankRole::Kernel,
        }
    }
}

/// One bank as seen from outside: where it is and what it holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BankUsage {
    /// First frame.
    pub start: Pfn,
    /// Frames in the bank.
    pub frames: u64,
    /// Free frames.
    pub free: u64,
    /// Allocated frames of unmovable or reclaimable blocks: they pin the bank.
    pub unmovable: u64,
    /// Allocated frames of movable blocks.
    pub movable: u64,
    /// Its role.
    pub role: BankRole,
}

/// A block moved by migration: whoever held `old` now holds `new`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Move {
    /// The block's first frame before the move (now free).
    pub old: Pfn,
    /// Its first frame after the move.
    pub new: Pfn,
    /// Its order.
    pub order: Order,
}

/// What one migration pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Migration {
    /// Every block moved, in the order moved.
    pub moves: Vec<Move>,
    /// Banks chosen as candidates (before the break point).
    pub candidates: u32,
    /// Candidates left with no allocated frame: now offline.
    pub banks_emptied: u32,
    /// Blocks of candidates that found no room (free space too
    /// fragmented for their order): left where they were.
    pub blocks_left: u64,
}

impl Migration {
    /// Page frames copied.
    pub fn pages_moved(&self) -> u64 {
        self.moves.iter().map(|m| m.order.frames()).sum()
    }
}

/// Why a single block could not be moved. The allocator is unchanged.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MigrateError {
    /// The block is not an allocated block of that order.
    #[error("cannot move the block")]
    Block(#[from] AllocError),
    /// Kernel pages never move.
    #[error("pfn {pfn} (order {order}) holds unmovable data and cannot be migrated")]
    Unmovable {
        /// First frame.
        pfn: Pfn,
        /// Order.
        order: Order,
    },
    /// The target bank does not exist.
    #[error("bank {bank} does not exist: the allocator has banks 0..{banks}")]
    NoSuchBank {
        /// The bank named.
        bank: usize,
        /// How many there are.
        banks: usize,
    },
    /// The target bank lies in another zone than the block.
    #[error("bank {bank} is not in the zone of pfn {pfn}: migration stays inside a zone")]
    OtherZone {
        /// First frame of the block.
        pfn: Pfn,
        /// The bank named.
        bank: usize,
    },
    /// The block already lies in the target bank.
    #[error("pfn {pfn} already lies in bank {bank}")]
    SameBank {
        /// First frame of the block.
        pfn: Pfn,
        /// The bank.
        bank: usize,
    },
    /// The target bank has no free block of the order.
    #[error(
        "migration target bank {bank} is full: no free block of order {order} ({free} frames free)"
    )]
    TargetFull {
        /// The bank named.
        bank: usize,
        /// Order of the block to move.
        order: Order,
        /// Free frames in the bank.
        free: u64,
    },
}

/// Per-bank counters, kept exact on every allocation and free.
#[derive(Copy, Clone, Debug)]
struct Bank {
    free: u64,
    unmovable: u64,
    movable: u64,
    role: BankRole,
    /// Chosen as a migration candidate: no allocation may land here.
    /// Only set inside `migrate`, under the zone lock.
    isolated: bool,
}

impl Bank {
    fn allocated(&self) -> u64 {
        self.unmovable + self.movable
    }
}

/// Splits from this order up prefetch the next split's metadata.
const PREFETCH_FROM_ORDER: u8 = 5;

/// Hint the CPU to bring `value`'s cache line in; nothing elsewhere.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    prefetch_ptr((value as *const T).cast::<u8>());
}

/// Hint the CPU to bring the cache line at `p` in. Never dereferences it.
#[inline(always)]
fn prefetch_ptr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Adaptive-Buddy's list slots: 0 the kernel pool, 1 the user pool, and
/// `PARKED + b` the free blocks of bank `b` while it is out of every pool.
const PARKED: u32 = 2;

/// One zone's banks, free areas and per-frame metadata, under one lock.
///
/// Invariants (checked by `validate`):
/// - the free and allocated blocks tile every bank; no block crosses a
///   bank edge; no free block has a free buddy of its order in its bank;
/// - every free block is on `lists[home[bank]][order]` exactly once;
/// - `banks[b]` counts exactly the free, unmovable and movable frames;
/// - a bank is `Offline` exactly when it has no allocated frame, and is on
///   the role list of its role; no bank is isolated outside `migrate`;
/// - Array/List: `home[b] == b`. Adaptive: an offline bank's blocks are
///   parked (`home = PARKED + b`), a kernel bank's in pool 0, a user
///   bank's in pool 1.
struct BankZone {
    zone: Zone,
    policy: BankPolicy,
    bank_frames: u64,
    /// Global number of this zone's first bank.
    first_bank: usize,
    meta: Vec<FrameMeta>,
    /// Migratetype of each allocated head (meaningless elsewhere).
    kinds: Vec<MigrateType>,
    lists: Vec<[FrameList; ORDERS]>,
    home: Vec<u32>,
    banks: Vec<Bank>,
    /// Links of the role lists, one entry per bank.
    links: Vec<FrameMeta>,
    /// Banks by role: offline, kernel, user.
    roles: [FrameList; 3],
}

impl BankZone {
    fn new(zone: Zone, policy: BankPolicy, bank_frames: u64, first_bank: usize) -> BankZone {
        let n = (zone.frames() / bank_frames) as usize;
        let (lists, home): (usize, Vec<u32>) = match policy {
            BankPolicy::Array | BankPolicy::List => (n, (0..n as u32).collect()),
            BankPolicy::Adaptive => (
                PARKED as usize + n,
                (0..n as u32).map(|b| PARKED + b).collect(),
            ),
        };
        let mut z = BankZone {
            zone,
            policy,
            bank_frames,
            first_bank,
            meta: vec![FrameMeta::UNLINKED_TAIL; zone.frames() as usize],
            kinds: vec![MigrateType::Movable; zone.frames() as usize],
            lists: vec![[FrameList::EMPTY; ORDERS]; lists],
            home,
            banks: vec![
                Bank {
                    free: bank_frames,
                    unmovable: 0,
                    movable: 0,
                    role: BankRole::Offline,
                    isolated: false,
                };
                n
            ],
            links: vec![FrameMeta::UNLINKED_TAIL; n],
            roles: [FrameList::EMPTY; 3],
        };
        for b in 0..n {
            z.roles[BankRole::Offline.index()].push_back(&mut z.links, b as u32);
            // Carve the bank into the largest aligned blocks that fit.
            let (start, end) = z.bank_range(b);
            let mut i = start;
            while i < end {
                let pfn = z.zone.start.0 + u64::from(i);
                let mut order = (pfn.trailing_zeros() as u8).min(MAX_ORDER);
                while u64::from(i) + (1 << order) > u64::from(end) {
                    order -= 1;
                }
                let order = Order::new(order).expect("order <= MAX_ORDER");
                z.push_free(i, order);
                i += order.frames() as u32;
            }
        }
        z
    }

    #[inline]
    fn bank_of(&self, i: u32) -> usize {
        (u64::from(i) / self.bank_frames) as usize
    }

    /// Zone-relative frame indices `[start, end)` of bank `b`.
    #[inline]
    fn bank_range(&self, b: usize) -> (u32, u32) {
        let start = b as u64 * self.bank_frames;
        (start as u32, (start + self.bank_frames) as u32)
    }

    #[inline]
    fn pfn(&self, i: u32) -> Pfn {
        Pfn(self.zone.start.0 + u64::from(i))
    }

    #[inline]
    fn index(&self, pfn: Pfn) -> u32 {
        (pfn.0 - self.zone.start.0) as u32
    }

    #[inline]
    fn push_free(&mut self, i: u32, order: Order) {
        let l = self.home[self.bank_of(i)] as usize;
        self.meta[i as usize].state.set_free(order);
        self.lists[l][order.index()].push_front(&mut self.meta, i);
    }

    /// Whether list `l` holds a free block of at least `order`.
    #[inline]
    fn list_fits(&self, l: usize, order: Order) -> bool {
        self.lists[l][order.index()..]
            .iter()
            .any(|list| list.len() > 0)
    }

    /// Take the smallest free block of at least `order` from list `l` and
    /// split it down, the halves going back to `l` (they lie in the same
    /// bank, whose home is `l`). The frame is marked allocated but not yet
    /// accounted to its bank.
    #[inline]
    fn take_from_list(&mut self, l: usize, order: Order) -> Option<u32> {
        let (i, current) = Order::all()
            .skip(order.index())
            .find_map(|o| Some((self.lists[l][o.index()].pop_front(&mut self.meta)?, o)))?;
        if current.get() >= PREFETCH_FROM_ORDER {
            self.prefetch_next_split(l, current);
        }
        self.split(i, current, order);
        Some(i)
    }

    /// Splitting a large block writes the metadata of one frame in each
    /// of its halves, `2^order` frames apart: a dozen cold cache lines
    /// over a few pages, the slowest step of an allocation. When a large
    /// block is split, the next block of that order (the one split once
    /// this one's pieces are used up) is prefetched, so that split finds
    /// its lines in cache; when the pool's last block of the order goes,
    /// the first block of the offline bank it will bring in next. The work
    /// is a few prefetches once per `2^order` allocations.
    #[inline]
    fn prefetch_next_split(&self, l: usize, order: Order) {
        let next = match self.lists[l][order.index()].front() {
            Some(i) => Some((i, order)),
            None if self.policy == BankPolicy::Adaptive && l < PARKED as usize => {
                let offline = &self.roles[BankRole::Offline.index()];
                let bank = if l == 0 {
                    offline.front()
                } else {
                    offline.back()
                };
                bank.and_then(|b| {
                    // What bringing the bank in touches besides the split.
                    let parked = &self.lists[PARKED as usize + b as usize];
                    for line in (0..core::mem::size_of_val(parked)).step_by(64) {
                        prefetch_ptr((parked as *const _ as *const u8).wrapping_add(line));
                    }
                    prefetch(&self.banks[b as usize]);
                    prefetch(&self.links[b as usize]);
                    Order::all()
                        .rev()
                        .find_map(|o| parked[o.index()].front().map(|i| (i, o)))
                })
            }
            None => None,
        };
        if let Some((i, o)) = next {
            prefetch(&self.kinds[i as usize]);
            prefetch(&self.meta[i as usize]);
            for k in 3..o.get() {
                prefetch(&self.meta[(i + (1u32 << k)) as usize]);
            }
        }
    }

    /// Split the free block at `i` (already off its list) from `current`
    /// down to `order`, putting the upper halves back, and mark it
    /// allocated.
    #[inline]
    fn split(&mut self, i: u32, mut current: Order, order: Order) {
        while current > order {
            current = Order::new(current.get() - 1).expect("order > 0");
            self.push_free(i + current.frames() as u32, current);
        }
        self.meta[i as usize].state.set_allocated(order);
    }

    /// Take a free block of at least `order` inside bank `b`, wherever its
    /// blocks are listed.
    fn take_in_bank(&mut self, b: usize, order: Order) -> Option<u32> {
        let l = self.home[b] as usize;
        if self.policy != BankPolicy::Adaptive || l >= PARKED as usize {
            // The list holds this bank's blocks only.
            return self.take_from_list(l, order);
        }
        // A pooled bank: find one of its free heads by walking it.
        let (start, end) = self.bank_range(b);
        let mut best: Option<(u32, Order)> = None;
        let mut i = start;
        while i < end {
            let (step, free) = match self.meta[i as usize].state.kind() {
                Kind::Free(o) => (o.frames() as u32, Some(o)),
                Kind::Allocated(o) => (o.frames() as u32, None),
                Kind::Tail => (1, None),
            };
            if let Some(o) = free {
                if o >= order && best.is_none_or(|(_, bo)| o < bo) {
                    best = Some((i, o));
                }
            }
            i += step;
        }
        let (i, o) = best?;
        self.lists[l][o.index()].remove(&mut self.meta, i);
        self.split(i, o, order);
        Some(i)
    }

    /// Count a block just marked allocated into its bank, bringing the
    /// bank up if it was offline.
    #[inline]
    fn account_alloc(&mut self, i: u32, order: Order, kind: MigrateType) {
        let b = self.bank_of(i);
        self.kinds[i as usize] = kind;
        let n = order.frames();
        let bank = &mut self.banks[b];
        bank.free -= n;
        match BankRole::side(kind) {
            BankRole::Kernel => bank.unmovable += n,
            _ => bank.movable += n,
        }
        if bank.role == BankRole::Offline {
            self.set_role(b, BankRole::side(kind));
        }
    }

    /// Move bank `b` to another role list; for Adaptive-Buddy, move its
    /// free blocks between its parked lists and the pools.
    fn set_role(&mut self, b: usize, role: BankRole) {
        let old = self.banks[b].role;
        if old == role {
            return;
        }
        self.roles[old.index()].remove(&mut self.links, b as u32);
        match (role, old) {
            // Kernel banks come back to the low end of the offline list,
            // user banks to the high end, so each side finds its own first.
            (BankRole::Offline, BankRole::Kernel) => {
                self.roles[0].push_front(&mut self.links, b as u32)
            }
            _ => self.roles[role.index()].push_back(&mut self.links, b as u32),
        }
        self.banks[b].role = role;
        if self.policy == BankPolicy::Adaptive {
            match role {
                BankRole::Offline => self.park(b),
                BankRole::Kernel => self.unpark(b, 0),
                BankRole::User => self.unpark(b, 1),
            }
        }
    }

    /// Adaptive: take bank `b`'s free blocks out of its pool onto its own
    /// lists. O(blocks in the bank): for an empty bank of aligned size
    /// that is `bank_frames / 2^MAX_ORDER` blocks.
    fn park(&mut self, b: usize) {
        let from = self.home[b] as usize;
        let to = PARKED as usize + b;
        if from == to {
            return;
        }
        let (start, end) = self.bank_range(b);
        let mut i = start;
        while i < end {
            match self.meta[i as usize].state.kind() {
                Kind::Free(o) => {
                    self.lists[from][o.index()].remove(&mut self.meta, i);
                    self.lists[to][o.index()].push_back(&mut self.meta, i);
                    i += o.frames() as u32;
                }
                Kind::Allocated(o) => i += o.frames() as u32,
                Kind::Tail => i += 1,
            }
        }
        self.home[b] = to as u32;
    }

    /// Adaptive: splice bank `b`'s parked blocks onto pool `pool`'s lists,
    /// O(orders).
    fn unpark(&mut self, b: usize, pool: usize) {
        let from = PARKED as usize + b;
        if self.home[b] as usize != from {
            return;
        }
        for o in 0..ORDERS {
            let mut parked = core::mem::replace(&mut self.lists[from][o], FrameList::EMPTY);
            self.lists[pool][o].append(&mut self.meta, &mut parked);
        }
        self.home[b] = pool as u32;
    }

    /// Allocate a block for `kind`, by the policy.
    fn alloc(&mut self, order: Order, kind: MigrateType) -> Option<u32> {
        let side = BankRole::side(kind);
        let i = match self.policy {
            BankPolicy::Array => self.alloc_array(order, side),
            BankPolicy::List => self.alloc_list(order, side),
            BankPolicy::Adaptive => self.alloc_adaptive(order, side),
        }?;
        self.account_alloc(i, order, kind);
        Some(i)
    }

    fn alloc_array(&mut self, order: Order, side: BankRole) -> Option<u32> {
        let n = self.banks.len();
        // The free count first: one read skips a full bank.
        let pick = |z: &BankZone, b: usize| {
            let bank = &z.banks[b];
            bank.free >= order.frames() && !bank.isolated && z.list_fits(b, order)
        };
        let b = if side == BankRole::Kernel {
            (0..n).find(|&b| pick(self, b))
        } else {
            (0..n).rev().find(|&b| pick(self, b))
        }?;
        self.take_from_list(b, order)
    }

    /// The first bank on role list `role` (from the front, or from the
    /// back) that is not isolated and has a block of `order`.
    fn find_on_list(&self, role: BankRole, order: Order, from_back: bool) -> Option<usize> {
        let list = &self.roles[role.index()];
        let mut cur = if from_back {
            list_tail(list)
        } else {
            list_head(list)
        };
        while let Some(b) = cur {
            let bank = &self.banks[b as usize];
            if bank.free >= order.frames()
                && !bank.isolated
                && self.list_fits(self.home[b as usize] as usize, order)
            {
                return Some(b as usize);
            }
            let link = self.links[b as usize];
            cur = next_link(if from_back { link.prev } else { link.next });
        }
        None
    }

    fn alloc_list(&mut self, order: Order, side: BankRole) -> Option<u32> {
        let other = if side == BankRole::Kernel {
            BankRole::User
        } else {
            BankRole::Kernel
        };
        let b = self
            .find_on_list(side, order, false)
            .or_else(|| self.find_on_list(BankRole::Offline, order, side == BankRole::User))
            .or_else(|| self.find_on_list(other, order, false))?;
        self.take_from_list(b, order)
    }

    fn alloc_adaptive(&mut self, order: Order, side: BankRole) -> Option<u32> {
        let (pool, other) = if side == BankRole::Kernel {
            (0, 1)
        } else {
            (1, 0)
        };
        if let Some(i) = self.take_from_list(pool, order) {
            return Some(i);
        }
        // Capacity on demand: bring the next offline bank (from this
        // side's end) into the pool. Its blocks are spliced in O(orders);
        // an empty bank of at least 2^order aligned frames always fits, so
        // the walk stops at the first bank.
        if let Some(b) = self.find_on_list(BankRole::Offline, order, side == BankRole::User) {
            let i = self
                .take_from_list(PARKED as usize + b, order)
                .expect("find_on_list saw a fitting block");
            // `account_alloc` brings the bank into the pool.
            return Some(i);
        }
        self.take_from_list(other, order)
    }

    /// Free a block already checked by `check_free`, merging with buddies
    /// inside its bank.
    fn free(&mut self, i: u32, order: Order) {
        let b = self.bank_of(i);
        let (start, end) = self.bank_range(b);
        let n = order.frames();
        let kind = self.kinds[i as usize];
        let l = self.home[b] as usize;
        let mut i = i;
        let mut order = order;
        while order < Order::MAX {
            let pfn = self.zone.start.0 + u64::from(i);
            let buddy_pfn = pfn ^ order.frames();
            if buddy_pfn < self.zone.start.0 + u64::from(start)
                || buddy_pfn + order.frames() > self.zone.start.0 + u64::from(end)
            {
                break;
            }
            let buddy = self.index(Pfn(buddy_pfn));
            if self.meta[buddy as usize].state.kind() != Kind::Free(order) {
                break;
            }
            self.lists[l][order.index()].remove(&mut self.meta, buddy);
            self.meta[i.max(buddy) as usize].state.set_tail();
            i = i.min(buddy);
            order = Order::new(order.get() + 1).expect("order < MAX_ORDER");
        }
        self.push_free(i, order);
        let bank = &mut self.banks[b];
        bank.free += n;
        match BankRole::side(kind) {
            BankRole::Kernel => bank.unmovable -= n,
            _ => bank.movable -= n,
        }
        if bank.allocated() == 0 && !bank.isolated {
            self.set_role(b, BankRole::Offline);
        }
    }

    /// Whether the block at `pfn` (in this zone and aligned) is allocated
    /// with exactly `order`, and if not, which error a free gets.
    fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError> {
        check_block_free(
            |p| self.meta[self.index(p) as usize].state,
            self.zone.start,
            pfn,
            order,
        )
    }

    /// Relocate the allocated block at `i` to the block `target` (taken
    /// and marked allocated by the caller) and free the old one.
    fn relocate(&mut self, i: u32, order: Order, target: u32) -> Move {
        let kind = self.kinds[i as usize];
        self.account_alloc(target, order, kind);
        self.free(i, order);
        Move {
            old: self.pfn(i),
            new: self.pfn(target),
            order,
        }
    }

    /// A free block of `order` for a migrated page in a bank that is up
    /// and not isolated: never brings an offline bank up.
    fn migration_target(&mut self, order: Order) -> Option<u32> {
        match self.policy {
            BankPolicy::Array => {
                let b = (0..self.banks.len()).rev().find(|&b| {
                    let bank = &self.banks[b];
                    bank.free >= order.frames()
                        && !bank.isolated
                        && bank.role != BankRole::Offline
                        && self.list_fits(b, order)
                })?;
                self.take_from_list(b, order)
            }
            BankPolicy::List => {
                let b = self
                    .find_on_list(BankRole::User, order, false)
                    .or_else(|| self.find_on_list(BankRole::Kernel, order, false))?;
                self.take_from_list(b, order)
            }
            // Isolated banks are parked, offline banks too: the pools hold
            // exactly the banks that may receive pages.
            BankPolicy::Adaptive => self
                .take_from_list(1, order)
                .or_else(|| self.take_from_list(0, order)),
        }
    }

    /// One migration pass over this zone.
    fn migrate(&mut self, out: &mut Migration) {
        // Banks in use, emptiest (most free pages) first.
        let mut sorted: Vec<usize> = (0..self.banks.len())
            .filter(|&b| self.banks[b].allocated() > 0)
            .collect();
        sorted.sort_by_key(|&b| (Reverse(self.banks[b].free), b));
        // The break point: candidates (movable pages only) while what they
        // hold fits in the free frames of the banks that stay up.
        let mut room: u64 = sorted.iter().map(|&b| self.banks[b].free).sum();
        let mut held = 0u64;
        let mut candidates = Vec::new();
        for &b in &sorted {
            let bank = self.banks[b];
            if bank.unmovable > 0 {
                continue;
            }
            if held + bank.allocated() <= room - bank.free {
                held += bank.allocated();
                room -= bank.free;
                candidates.push(b);
            } else {
                break;
            }
        }
        out.candidates += candidates.len() as u32;
        // Isolate them from allocation so nothing is copied twice.
        for &b in &candidates {
            self.banks[b].isolated = true;
            if self.policy == BankPolicy::Adaptive {
                self.park(b);
            }
        }
        // Migrate in sorted order.
        for &b in &candidates {
            let (start, end) = self.bank_range(b);
            let mut blocks = Vec::new();
            let mut i = start;
            while i < end {
                match self.meta[i as usize].state.kind() {
                    Kind::Allocated(o) => {
                        blocks.push((i, o));
                        i += o.frames() as u32;
                    }
                    Kind::Free(o) => i += o.frames() as u32,
                    Kind::Tail => i += 1,
                }
            }
            for (i, o) in blocks {
                match self.migration_target(o) {
                    Some(target) => {
                        let m = self.relocate(i, o, target);
                        out.moves.push(m);
                    }
                    None => out.blocks_left += 1,
                }
            }
        }
        // Emptied candidates go offline; the rest rejoin allocation.
        for &b in &candidates {
            self.banks[b].isolated = false;
            if self.banks[b].allocated() == 0 {
                out.banks_emptied += 1;
                self.set_role(b, BankRole::Offline);
            } else if self.policy == BankPolicy::Adaptive {
                let pool = if self.banks[b].role == BankRole::Kernel {
                    0
                } else {
                    1
                };
                self.unpark(b, pool);
            }
        }
    }

    fn validate(&self, z: usize) -> Result<(), ValidationError> {
        let n = self.banks.len();
        let mut heads = vec![[0u64; ORDERS]; self.lists.len()];
        for b in 0..n {
            let (start, end) = self.bank_range(b);
            let mut counted = (0u64, 0u64, 0u64);
            let mut i = start;
            while i < end {
                let pfn = self.pfn(i).0;
                let order = match self.meta[i as usize].state.kind() {
                    Kind::Tail => {
                        return Err(ValidationError(alloc::format!(
                            "zone {z} bank {b}: pfn {pfn:#x} is a tail where a block should start"
                        )))
                    }
                    Kind::Free(order) => {
                        heads[self.home[b] as usize][order.index()] += 1;
                        counted.0 += order.frames();
                        let buddy = pfn ^ order.frames();
                        let (bs, be) = (self.pfn(start).0, self.pfn(end).0);
                        if order < Order::MAX && buddy >= bs && buddy + order.frames() <= be {
                            ensure!(
                                self.meta[self.index(Pfn(buddy)) as usize].state.kind()
                                    != Kind::Free(order),
                                "zone {z} bank {b}: free block {pfn:#x} and its buddy {buddy:#x} (order {order}) were not merged"
                            );
                        }
                        order
                    }
                    Kind::Allocated(order) => {
                        match BankRole::side(self.kinds[i as usize]) {
                            BankRole::Kernel => counted.1 += order.frames(),
                            _ => counted.2 += order.frames(),
                        }
                        order
                    }
                };
                ensure!(
                    Pfn(pfn).is_aligned(order) && u64::from(i) + order.frames() <= u64::from(end),
                    "zone {z} bank {b}: block {pfn:#x} of order {order} is misaligned or leaves the bank"
                );
                for t in i + 1..i + order.frames() as u32 {
                    ensure!(
                        self.meta[t as usize].state.kind() == Kind::Tail,
                        "zone {z} bank {b}: pfn {:#x} inside block {pfn:#x} (order {order}) is not a tail",
                        self.pfn(t).0
                    );
                }
                i += order.frames() as u32;
            }
            let bank = &self.banks[b];
            ensure!(
                (bank.free, bank.unmovable, bank.movable) == counted,
                "zone {z} bank {b}: counters (free, unmovable, movable) = {:?} but the blocks hold {counted:?}",
                (bank.free, bank.unmovable, bank.movable)
            );
            ensure!(
                !bank.isolated,
                "zone {z} bank {b}: isolated outside migration"
            );
            ensure!(
                (bank.allocated() == 0) == (bank.role == BankRole::Offline),
                "zone {z} bank {b}: role {:?} with {} frames allocated",
                bank.role,
                bank.allocated()
            );
            let want = match (self.policy, bank.role) {
                (BankPolicy::Array | BankPolicy::List, _) => b as u32,
                (BankPolicy::Adaptive, BankRole::Offline) => PARKED + b as u32,
                (BankPolicy::Adaptive, BankRole::Kernel) => 0,
                (BankPolicy::Adaptive, BankRole::User) => 1,
            };
            ensure!(
                self.home[b] == want,
                "zone {z} bank {b}: role {:?} but its blocks are on list {} (want {want})",
                bank.role,
                self.home[b]
            );
        }
        for (l, lists) in self.lists.iter().enumerate() {
            for order in Order::all() {
                let list = &lists[order.index()];
                ensure!(
                    list.len() == heads[l][order.index()],
                    "zone {z}: list {l} order {order} holds {} blocks but {} free heads belong on it",
                    list.len(),
                    heads[l][order.index()]
                );
                let name = alloc::format!("zone {z} list {l} free_area[{order}]");
                list.check(&self.meta, &name, |i| {
                    ensure!(
                        self.meta[i as usize].state.kind() == Kind::Free(order)
                            && self.home[self.bank_of(i)] as usize == l,
                        "{name}: member {:#x} is not a free head of order {order} of a bank listed here",
                        self.pfn(i).0
                    );
                    Ok(())
                })?;
            }
        }
        let mut on_lists = 0;
        for role in [BankRole::Offline, BankRole::Kernel, BankRole::User] {
            let list = &self.roles[role.index()];
            on_lists += list.len();
            let name = alloc::format!("zone {z} {role:?} banks");
            list.check(&self.links, &name, |b| {
                ensure!(
                    self.banks[b as usize].role == role,
                    "{name}: bank {b} has role {:?}",
                    self.banks[b as usize].role
                );
                Ok(())
            })?;
        }
        ensure!(
            on_lists == n as u64,
            "zone {z}: {on_lists} banks on role lists, {n} banks"
        );
        Ok(())
    }

    fn add_stats(&self, stats: &mut Stats) {
        for lists in &self.lists {
            for order in Order::all() {
                let blocks = lists[order.index()].len();
                stats.free_blocks[order.index()] += blocks;
                stats.free_frames += blocks << order.get();
            }
        }
    }

    fn usage(&self, out: &mut Vec<BankUsage>) {
        for (b, bank) in self.banks.iter().enumerate() {
            out.push(BankUsage {
                start: self.pfn(self.bank_range(b).0),
                frames: self.bank_frames,
                free: bank.free,
                unmovable: bank.unmovable,
                movable: bank.movable,
                role: bank.role,
            });
        }
    }
}

fn list_head(list: &FrameList) -> Option<u32> {
    list.front()
}

fn list_tail(list: &FrameList) -> Option<u32> {
    list.back()
}

fn next_link(link: u32) -> Option<u32> {
    (link != crate::meta::NIL).then_some(link)
}

/// A bank-aware buddy allocator: Array-based or List-based Bank-Buddy, or
/// Adaptive-Buddy, by [`BankPolicy`]. One lock per zone, as Linux's
/// buddy; zones are tried highest first.
///
/// ```
/// use nvmos_frames::{BankBuddy, BankPolicy, FrameAllocator, MigrateType, Order, Request, Zone};
/// // 64 MiB in banks of 4 MiB (1024 frames).
/// let a = BankBuddy::<parking_lot::RawMutex>::new(&[Zone::new(0, 16384)], 1, 1024, BankPolicy::Adaptive)?;
/// let kernel = a.alloc(Request::new(Order::ZERO, 0, MigrateType::Unmovable))?;
/// let user = a.alloc(Request::new(Order::ZERO, 0, MigrateType::Movable))?;
/// // Kernel pages from the low end, user pages from the high end.
/// assert_eq!((a.bank_of(kernel), a.bank_of(user)), (Some(0), Some(15)));
/// // Two banks up, fourteen may power down.
/// assert_eq!(a.bank_usage().iter().filter(|b| b.free < b.frames).count(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BankBuddy<R: RawMutex> {
    map: ZoneMap,
    zones: Box<[CachePadded<Mutex<R, BankZone>>]>,
    cpus: u32,
    policy: BankPolicy,
    bank_frames: u64,
    banks: usize,
}

impl<R: RawMutex> BankBuddy<R> {
    /// An allocator over `zones` for `cpus` CPUs, with banks of
    /// `bank_frames` frames that must divide every zone exactly, all
    /// memory free and every bank offline.
    pub fn new(
        zones: &[Zone],
        cpus: u32,
        bank_frames: u64,
        policy: BankPolicy,
    ) -> Result<Self, ConfigError> {
        check_cpus(cpus)?;
        let map = ZoneMap::new(zones)?;
        for (index, zone) in map.zones().iter().enumerate() {
            if bank_frames == 0 || zone.frames() % bank_frames != 0 {
                return Err(ConfigError::BankSize {
                    index,
                    frames: zone.frames(),
                    bank_frames,
                });
            }
        }
        let mut banks = 0;
        let zones = map
            .zones()
            .iter()
            .map(|&zone| {
                let z = BankZone::new(zone, policy, bank_frames, banks);
                banks += z.banks.len();
                CachePadded(Mutex::new(z))
            })
            .collect();
        Ok(BankBuddy {
            map,
            zones,
            cpus,
            policy,
            bank_frames,
            banks,
        })
    }

    /// The bank-choosing policy.
    pub fn policy(&self) -> BankPolicy {
        self.policy
    }

    /// Frames per bank.
    pub fn bank_frames(&self) -> u64 {
        self.bank_frames
    }

    /// Number of banks over all zones, numbered from the lowest pfn.
    pub fn banks(&self) -> usize {
        self.banks
    }

    /// The bank holding `pfn`, if it is managed.
    pub fn bank_of(&self, pfn: Pfn) -> Option<usize> {
        let z = self.map.zone_of(pfn)?;
        let zone = self.zones[z].lock();
        Some(zone.first_bank + zone.bank_of(zone.index(pfn)))
    }

    /// Every bank's counters, in bank order.
    pub fn bank_usage(&self) -> Vec<BankUsage> {
        let mut out = Vec::with_capacity(self.banks);
        for zone in self.zones.iter() {
            zone.lock().usage(&mut out);
        }
        out
    }

    /// One migration pass over every zone (see the module comment). Moves
    /// that find no room are skipped and counted, never half done: a block
    /// is copied to its new place before its old place is freed.
    pub fn migrate(&self) -> Migration {
        let mut out = Migration::default();
        for zone in self.zones.iter() {
            zone.lock().migrate(&mut out);
        }
        out
    }

    /// Move one allocated movable block into bank `to_bank` (in its zone).
    /// Refused, with the allocator unchanged, for a block that is not
    /// allocated with this order, unmovable data, a bank that does not
    /// exist, lies in another zone or already holds the block, and a full
    /// target. Moving into an offline bank brings it up.
    pub fn move_block(&self, pfn: Pfn, order: Order, to_bank: usize) -> Result<Move, MigrateError> {
        let z = self.map.zone_of_block(pfn, order)?;
        let mut zone = self.zones[z].lock();
        zone.check_free(pfn, order)?;
        let i = zone.index(pfn);
        if BankRole::side(zone.kinds[i as usize]) == BankRole::Kernel {
            return Err(MigrateError::Unmovable { pfn, order });
        }
        if to_bank >= self.banks {
            return Err(MigrateError::NoSuchBank {
                bank: to_bank,
                banks: self.banks,
            });
        }
        let Some(tb) = to_bank
            .checked_sub(zone.first_bank)
            .filter(|&b| b < zone.banks.len())
        else {
            return Err(MigrateError::OtherZone { pfn, bank: to_bank });
        };
        if tb == zone.bank_of(i) {
            return Err(MigrateError::SameBank { pfn, bank: to_bank });
        }
        let Some(target) = zone.take_in_bank(tb, order) else {
            return Err(MigrateError::TargetFull {
                bank: to_bank,
                order,
                free: zone.banks[tb].free,
            });
        };
        Ok(zone.relocate(i, order, target))
    }
}

impl<R: RawMutex + Send + Sync> FrameAllocator for BankBuddy<R> {
    fn alloc(&self, req: Request) -> Result<Pfn, AllocError> {
        check_cpu(req, self.cpus)?;
        self.zones
            .iter()
            .rev()
            .find_map(|zone| {
                let mut zone = zone.lock();
                zone.alloc(req.order, req.kind).map(|i| zone.pfn(i))
            })
            .ok_or(AllocError::OutOfMemory { order: req.order })
    }

    fn free(&self, pfn: Pfn, req: Request) -> Result<(), AllocError> {
        check_cpu(req, self.cpus)?;
        let z = self.map.zone_of_block(pfn, req.order)?;
        let mut zone = self.zones[z].lock();
        zone.check_free(pfn, req.order)?;
        let i = zone.index(pfn);
        zone.free(i, req.order);
        Ok(())
    }

    fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError> {
        let z = self.map.zone_of_block(pfn, order)?;
        self.zones[z].lock().check_free(pfn, order)
    }

    fn stats(&self) -> Stats {
        let mut stats = Stats {
            managed_frames: self.map.frames(),
            ..Stats::default()
        };
        for zone in self.zones.iter() {
            zone.lock().add_stats(&mut stats);
        }
        stats
    }

    fn validate(&self) -> Result<(), ValidationError> {
        for (z, zone) in self.zones.iter().enumerate() {
            zone.lock().validate(z)?;
        }
        Ok(())
    }

    fn zones(&self) -> &[Zone] {
        self.map.zones()
    }

    fn cpus(&self) -> u32 {
        self.cpus
    }

    fn metadata_bytes(&self) -> usize {
        self.zones
            .iter()
            .map(|zone| {
                let zone = zone.lock();
                core::mem::size_of::<CachePadded<Mutex<R, BankZone>>>()
                    + zone.meta.capacity() * core::mem::size_of::<FrameMeta>()
                    + zone.kinds.capacity() * core::mem::size_of::<MigrateType>()
                    + zone.lists.capacity() * core::mem::size_of::<[FrameList; ORDERS]>()
                    + zone.home.capacity() * 4
                    + zone.banks.capacity() * core::mem::size_of::<Bank>()
                    + zone.links.capacity() * core::mem::size_of::<FrameMeta>()
            })
            .sum()
    }
}
