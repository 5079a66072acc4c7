//! The lazy layer: per-CPU lists of single frames in front of an allocator.
//!
//! Two ways in:
//!
//! - **The [`FrameAllocator`] trait**: any thread may name any CPU. The
//!   CPU's list sits behind its lock (the `R` type parameter) and a free
//!   claims the frame's mark with one compare-and-swap, so two racing
//!   frees of one frame are told apart exactly.
//! - **A pinned CPU slot** ([`PerCpu::pin`] → [`PinnedCpu`]): the handle
//!   holds the slot's lock for its whole life, as a kernel holds a CPU's
//!   `pcp` with preemption off. A list hit is then a few plain loads and
//!   stores: no lock, no atomic read-modify-write (see [`PinnedCpu`] for
//!   the contract).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};

use lock_api::{Mutex, MutexGuard, RawMutex};

use crate::error::ensure;
use crate::{
    check_cpu, AllocError, CachePadded, ConfigError, FrameAllocator, MigrateType, Order, Pfn,
    PinError, Request, Stats, ValidationError, Zone, ZoneMap,
};

/// How a CPU's list is filled and emptied.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PcpPolicy {
    /// Linux's `pcp` lists (`rmqueue_pcplist`, `free_unref_page`): an empty
    /// list is refilled with `batch` frames taken from the inner allocator
    /// under one lock; a list holding more than `high` frames gives its
    /// `batch` coldest back; the most recently freed frame is reused first.
    LinuxBulk {
        /// Frames moved per refill or drain.
        batch: u32,
        /// List length above which a free drains.
        high: u32,
    },
    /// iBuddy's lazy layer (Algorithms 1 and 2 of seed 000): a list of at
    /// most `cap` single frames; an allocation takes the oldest frame on
    /// the list or goes straight to the inner allocator when the list is
    /// empty. A free that finds the list full is an *overflow free*: with
    /// `batch` 1 it goes straight through, as in the seed; with a larger
    /// `batch` overflow frees are gathered and given back together,
    /// grouped by buddy space and in the order freed within a space (the
    /// order in which the seed's straight-through frees would reach it),
    /// so the inner allocator takes each buddy space's lock once per
    /// gathering instead of once per frame (the random frees of a real
    /// kernel land on other CPUs' spaces). Since random frees spread over
    /// one space per CPU, a gathering holds `batch` frees per CPU the
    /// allocator serves, at most [`PcpPolicy::MAX_GATHER`], so each
    /// space's run stays about `batch` frames long.
    Bypass {
        /// Most frames on one CPU's list.
        cap: u32,
        /// Overflow frees gathered per CPU served before one bulk
        /// give-back; 1 frees each straight through.
        batch: u32,
    },
    /// The fair lazy layer: allocations come from a staging list refilled
    /// `batch` frames at a time from the *front* of the inner allocator
    /// (iBuddy's least recently freed frames), and frees are gathered,
    /// `batch` per CPU served (at most [`PcpPolicy::MAX_GATHER`]), and
    /// given back together, grouped by buddy space and in the order freed,
    /// to its back. A freed frame is never
    /// handed out again before it has passed through the inner allocator,
    /// so the inner allocator's reuse order, and iBuddy's even wear, are
    /// kept, while locks are taken once per `batch` requests.
    Staged {
        /// Frames per refill; frees gathered per CPU served.
        batch: u32,
    },
}

impl PcpPolicy {
    /// LBS-1 of seed 000: lazy buddy with batch 1 (Linux 2.6's `high` of
    /// six batches).
    pub const LBS_1: PcpPolicy = PcpPolicy::LinuxBulk { batch: 1, high: 6 };
    /// LBS-31 of seed 000: lazy buddy with batch 31, `high` 186, Linux
    /// 2.6.32's setting for large zones.
    pub const LBS_31: PcpPolicy = PcpPolicy::LinuxBulk {
        batch: 31,
        high: 186,
    };
    /// Linux 6.x's default for zones of 1 GiB and more: `zone_batchsize`
    /// gives 63, and `zone_highsize` never goes below four batches.
    pub const LINUX_DEFAULT: PcpPolicy = PcpPolicy::LinuxBulk {
        batch: 63,
        high: 252,
    };
    /// LiS-1 of seed 000: lazy iBuddy with a list of one frame, overflow
    /// frees straight through.
    pub const LIS_1: PcpPolicy = PcpPolicy::Bypass { cap: 1, batch: 1 };
    /// LiS-31 of seed 000: lazy iBuddy with lists of 31 frames; overflow
    /// frees given back 31 at a time (the seed passes each through,
    /// which takes a remote space's lock per frame).
    pub const LIS_31: PcpPolicy = PcpPolicy::Bypass { cap: 31, batch: 31 };
    /// The fair lazy iBuddy: staged lists of 31 frames that
    /// never reuse a frame before it went round the inner allocator.
    pub const LIS_31_FAIR: PcpPolicy = PcpPolicy::Staged { batch: 31 };

    /// Largest `batch` or `cap` accepted.
    pub const MAX_LIST: u32 = 1 << 16;

    /// Most overflow frees a [`PcpPolicy::Bypass`] CPU gathers (4 MiB of
    /// 4 KiB frames), however many CPUs.
    pub const MAX_GATHER: u32 = 1024;

    fn check(self) -> Result<(), ConfigError> {
        match self {
            PcpPolicy::LinuxBulk { batch, high } => {
                if batch == 0 || batch > high || high > Self::MAX_LIST {
                    return Err(ConfigError::Policy(
                        "LinuxBulk needs 1 <= batch <= high <= 65536",
                    ));
                }
            }
            PcpPolicy::Bypass { cap, batch } => {
                if cap > Self::MAX_LIST || batch == 0 || batch > Self::MAX_LIST {
                    return Err(ConfigError::Policy(
                        "Bypass needs cap <= 65536 and 1 <= batch <= 65536",
                    ));
                }
            }
            PcpPolicy::Staged { batch } => {
                if batch == 0 || batch > Self::MAX_LIST {
                    return Err(ConfigError::Policy("Staged needs 1 <= batch <= 65536"));
                }
            }
        }
        Ok(())
    }

    /// Most frames on a CPU's list.
    fn list_bound(self) -> u32 {
        match self {
            PcpPolicy::LinuxBulk { high, .. } => high,
            PcpPolicy::Bypass { cap, .. } => cap,
            PcpPolicy::Staged { batch } => batch,
        }
    }

    /// Most frees a CPU gathers before giving them back (0: none), for an
    /// allocator serving `cpus` CPUs.
    fn pending_bound(self, cpus: u32) -> u32 {
        match self {
            PcpPolicy::LinuxBulk { .. } => 0,
            PcpPolicy::Bypass { batch, .. } if batch > 1 => {
                batch.saturating_mul(cpus).min(Self::MAX_GATHER.max(batch))
            }
            PcpPolicy::Bypass { .. } => 0,
            PcpPolicy::Staged { batch } => {
                batch.saturating_mul(cpus).min(Self::MAX_GATHER.max(batch))
            }
        }
    }
}

/// Where a frame stands with respect to this layer. Only order-0 frames
/// pass through it; every order-0 allocation is marked `HANDED` and every
/// order-0 free must find that mark, which is what lets the layer refuse a
/// double free of a frame sitting on a list (the inner allocator sees such
/// a frame as allocated). `ON_LIST` covers both a CPU's list and its
/// gathered frees.
const NOT_HELD: u8 = 0;
const ON_LIST: u8 = 1;
const HANDED: u8 = 2;

/// One CPU's frames: the list allocations are served from, and the frees
/// gathered for one bulk give-back.
struct Slot {
    list: VecDeque<Pfn>,
    pending: Vec<Pfn>,
    /// Scratch for grouping `pending` by the inner allocator's lock: each
    /// frame's group, then the frames grouped (swapped with `pending`).
    groups: Vec<u32>,
    grouped: Vec<Pfn>,
}

/// One CPU's slot and what other CPUs may look at without its lock.
///
/// `len` and `pending_len` mirror the slot's lengths for `stats` and for
/// the trait path's lock-free "list empty" test; they are written only by
/// the slot's holder, and a stale read merely sends a call down the slow
/// path. `pinned` is set while a [`PinnedCpu`] owns the slot;
/// `drain_requested` asks that owner to give its frames back.
struct Pcp<R: RawMutex> {
    len: AtomicU32,
    pending_len: AtomicU32,
    pinned: AtomicBool,
    drain_requested: AtomicBool,
    slot: Mutex<R, Slot>,
}

/// Frames moved to or from the inner allocator per call in bulk moves.
const CHUNK: usize = 64;

/// A lazy layer of per-CPU lists in front of the allocator `A`.
///
/// `PerCpu<Buddy>` with [`PcpPolicy::LinuxBulk`] is Linux's lazy buddy;
/// `PerCpu<IBuddy>` with [`PcpPolicy::Bypass`] is lazy iBuddy, with
/// [`PcpPolicy::Staged`] the fair lazy iBuddy. Only single frames use the
/// lists; larger blocks go straight to `A`. When `A` runs out, every CPU's
/// frames are given back to it and the request retried once, as Linux
/// does before failing an allocation (a pinned CPU's frames only at its
/// owner's next call: see [`PinnedCpu`]).
///
/// Lock order: a CPU's slot, then `A`'s locks; never two slots at once
/// except in `validate`.
///
/// Invariants (checked by `validate`, with no call in flight and no CPU
/// pinned): a frame is on at most one list or gathered once, and is marked
/// `ON_LIST` exactly then; `A` sees every listed, gathered or `HANDED`
/// frame as an allocated block of order 0; no list or gathering is longer
/// than its bound.
pub struct PerCpu<A, R: RawMutex> {
    inner: A,
    policy: PcpPolicy,
    /// `policy.pending_bound(cpus)`: frees gathered before a give-back.
    gather: u32,
    /// `inner.lock_groups()`, at least 1.
    lock_groups: u32,
    pcps: Box<[CachePadded<Pcp<R>>]>,
    map: ZoneMap,
    held: Box<[AtomicU8]>,
}

/// Wait a moment for a slot held by another call. Slots are held only for
/// the length of one call (or pinned, which callers test first), so this
/// spins briefly; in user space it yields now and then so that a holder
/// descheduled on an oversubscribed machine can finish.
#[inline]
fn relax(spins: &mut u32) {
    *spins += 1;
    core::hint::spin_loop();
    #[cfg(any(test, feature = "std"))]
    if spins.is_multiple_of(64) {
        std::thread::yield_now();
    }
}

impl<A: FrameAllocator, R: RawMutex + Send + Sync> PerCpu<A, R> {
    /// Put a lazy layer with `policy` in front of `inner`, one list per CPU
    /// that `inner` serves.
    pub fn new(inner: A, policy: PcpPolicy) -> Result<Self, ConfigError> {
        policy.check()?;
        let map = ZoneMap::new(inner.zones())?;
        let held = (0..map.frames()).map(|_| AtomicU8::new(NOT_HELD)).collect();
        let pcps = (0..inner.cpus())
            .map(|_| {
                CachePadded(Pcp {
                    len: AtomicU32::new(0),
                    pending_len: AtomicU32::new(0),
                    pinned: AtomicBool::new(false),
                    drain_requested: AtomicBool::new(false),
                    slot: Mutex::new(Slot {
                        list: VecDeque::new(),
                        pending: Vec::new(),
                        groups: Vec::new(),
                        grouped: Vec::new(),
                    }),
                })
            })
            .collect();
        Ok(PerCpu {
            gather: policy.pending_bound(inner.cpus()),
            lock_groups: inner.lock_groups().max(1),
            inner,
            policy,
            pcps,
            map,
            held,
        })
    }

    /// The allocator behind the lists.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// The policy the lists follow.
    pub fn policy(&self) -> PcpPolicy {
        self.policy
    }

    /// Own `cpu`'s slot until the handle is dropped: its allocations and
    /// frees then touch the list with plain loads and stores. Refused for
    /// a CPU out of range or already pinned. Waits while a trait call
    /// holds the slot (one call's length).
    pub fn pin(&self, cpu: u32) -> Result<PinnedCpu<'_, A, R>, PinError> {
        let cpus = self.inner.cpus();
        let pcp = self
            .pcps
            .get(cpu as usize)
            .ok_or(PinError::InvalidCpu { cpu, cpus })?;
        // The owner token: one handle per slot. Set before the lock is
        // taken, so trait calls stop queueing for the slot from here on.
        if pcp
            .pinned
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(PinError::Busy { cpu });
        }
        let slot = pcp.slot.lock();
        Ok(PinnedCpu {
            layer: self,
            cpu,
            slot: Some(slot),
        })
    }

    #[inline]
    fn held(&self, pfn: Pfn) -> &AtomicU8 {
        // Frames on lists came from `inner`, so they lie in a zone.
        let i = self
            .map
            .dense_index(pfn)
            .expect("pfn from the inner allocator");
        &self.held[i]
    }

    /// Hand `pfn`, taken off a list or from `inner`, to the caller.
    #[inline]
    fn hand_out(&self, pfn: Pfn) -> Pfn {
        self.held(pfn).store(HANDED, Ordering::Release);
        pfn
    }

    /// The slot of `cpu` for a trait call, or `None` while it is pinned
    /// (the call then bypasses the list).
    #[inline]
    fn lock_slot(&self, cpu: usize) -> Option<MutexGuard<'_, R, Slot>> {
        let pcp = &self.pcps[cpu];
        let mut spins = 0;
        loop {
            if pcp.pinned.load(Ordering::Acquire) {
                return None;
            }
            if let Some(slot) = pcp.slot.try_lock() {
                return Some(slot);
            }
            relax(&mut spins);
        }
    }

    /// Publish the slot's lengths.
    #[inline]
    fn set_len(pcp: &Pcp<R>, slot: &Slot) {
        pcp.len.store(slot.list.len() as u32, Ordering::Relaxed);
        pcp.pending_len
            .store(slot.pending.len() as u32, Ordering::Relaxed);
    }

    /// Give the oldest `count` frames of the list back to the inner
    /// allocator.
    fn give_back(&self, list: &mut VecDeque<Pfn>, count: usize, cpu: u32) {
        let mut buf = [Pfn(0); CHUNK];
        let mut left = count.min(list.len());
        while left > 0 {
            let n = left.min(CHUNK);
            for slot in &mut buf[..n] {
                let pfn = list.pop_front().expect("n <= list length");
                self.held(pfn).store(NOT_HELD, Ordering::Release);
                *slot = pfn;
            }
            if let Err((done, _)) = self
                .inner
                .free_bulk_vouched(&buf[..n], Request::single(cpu))
            {
                // The inner allocator refused a frame it handed us: a broken
                // invariant. Keep the frames we could not return on the list
                // rather than lose them; `validate` reports the breakage.
                debug_assert!(false, "inner allocator refused a listed frame");
                for &pfn in buf[done..n].iter().rev() {
                    self.held(pfn).store(ON_LIST, Ordering::Release);
                    list.push_front(pfn);
                }
                return;
            }
            left -= n;
        }
    }

    /// Give every gathered free back, grouped by the inner allocator's
    /// lock (`lock_group`: iBuddy's buddy space) so that its `free_bulk`
    /// takes each lock once, and in the order they were freed within a
    /// group: the order in which the seed's straight-through overflow
    /// frees reach the inner allocator, which reuses frames in free order.
    /// A stable counting sort, linear in the gathering (the comparison
    /// sort it replaces cost about 4 ns a free at 1 thread).
    fn flush_pending(&self, slot: &mut Slot, cpu: u32) {
        if slot.pending.is_empty() {
            return;
        }
        if self.lock_groups > 1 {
            group_by_lock(&self.inner, self.lock_groups, slot);
        }
        let pending = &mut slot.pending;
        for &pfn in pending.iter() {
            self.held(pfn).store(NOT_HELD, Ordering::Release);
        }
        match self.inner.free_bulk_vouched(pending, Request::single(cpu)) {
            Ok(()) => pending.clear(),
            Err((done, _)) => {
                // As in `give_back`: keep what the inner allocator refused.
                debug_assert!(false, "inner allocator refused a gathered frame");
                pending.drain(..done);
                for &pfn in pending.iter() {
                    self.held(pfn).store(ON_LIST, Ordering::Release);
                }
            }
        }
    }

    /// Give every frame of a slot back.
    fn empty_slot(&self, slot: &mut Slot, cpu: u32) {
        let len = slot.list.len();
        self.give_back(&mut slot.list, len, cpu);
        self.flush_pending(slot, cpu);
    }

    /// Refill an empty list with up to `batch` frames under the inner
    /// allocator's lock. `fifo`: keep the inner allocator's order (the
    /// first frame taken is reused first); otherwise push each to the
    /// front, Linux's order.
    fn refill(&self, list: &mut VecDeque<Pfn>, batch: u32, req: Request, fifo: bool) {
        let mut buf = [Pfn(0); CHUNK];
        let mut left = batch as usize;
        while left > 0 {
            let want = left.min(CHUNK);
            let got = self.inner.alloc_bulk(req, &mut buf[..want]);
            for &pfn in buf[..got].iter() {
                self.held(pfn).store(ON_LIST, Ordering::Release);
                if fifo {
                    list.push_back(pfn);
                } else {
                    list.push_front(pfn);
                }
            }
            if got < want {
                break;
            }
            left -= want;
        }
    }

    /// Honour a drain request another CPU posted while this slot was
    /// pinned: one relaxed load on the fast path.
    #[inline]
    fn check_drain_request(&self, pcp: &Pcp<R>, slot: &mut Slot, cpu: u32) {
        if pcp.drain_requested.load(Ordering::Relaxed) {
            self.honour_drain_request(pcp, slot, cpu);
        }
    }

    #[cold]
    fn honour_drain_request(&self, pcp: &Pcp<R>, slot: &mut Slot, cpu: u32) {
        pcp.drain_requested.store(false, Ordering::Relaxed);
        self.empty_slot(slot, cpu);
        Self::set_len(pcp, slot);
    }

    /// Give back every CPU's frames but `except`'s (the caller's pinned
    /// CPU). A pinned CPU is asked to give its frames back at its next
    /// call. Only a pinned owner calls this holding a slot, and it waits
    /// only for slots held by trait calls, which never wait holding one:
    /// no deadlock.
    fn drain_others(&self, except: Option<usize>) {
        for (cpu, pcp) in self.pcps.iter().enumerate() {
            if Some(cpu) == except {
                continue;
            }
            if let Some(mut slot) = self.lock_slot(cpu) {
                self.empty_slot(&mut slot, cpu as u32);
                Self::set_len(pcp, &slot);
            } else {
                pcp.drain_requested.store(true, Ordering::Release);
            }
        }
        self.inner.drain();
    }

    /// The inner allocator is out of memory and the caller holds no slot
    /// (its own is emptied already): give back every CPU's frames, try
    /// again. `own`: the caller's pinned CPU, whose slot it holds.
    #[cold]
    fn alloc_after_drain(&self, req: Request, own: Option<usize>) -> Result<Pfn, AllocError> {
        self.drain_others(own);
        self.inner.alloc(req).map(|pfn| self.hand_out(pfn))
    }

    /// An order-0 allocation for `req.cpu`, whose slot the caller holds.
    #[inline]
    fn alloc_single(&self, slot: &mut Slot, req: Request) -> Result<Pfn, AllocError> {
        let pcp = &self.pcps[req.cpu as usize];
        self.check_drain_request(pcp, slot, req.cpu);
        let hit = match self.policy {
            PcpPolicy::LinuxBulk { batch, .. } => {
                if slot.list.is_empty() {
                    self.refill(&mut slot.list, batch, req, false);
                }
                slot.list.pop_back()
            }
            PcpPolicy::Bypass { .. } => slot.list.pop_front(),
            PcpPolicy::Staged { batch } => {
                if slot.list.is_empty() {
                    self.refill(&mut slot.list, batch, req, true);
                    if slot.list.is_empty() && !slot.pending.is_empty() {
                        // Our own gathered frees may be all that is left.
                        self.flush_pending(slot, req.cpu);
                        self.refill(&mut slot.list, batch, req, true);
                    }
                }
                slot.list.pop_front()
            }
        };
        let result = match hit {
            Some(pfn) => Ok(self.hand_out(pfn)),
            None => match self.policy {
                PcpPolicy::Bypass { .. } => self.inner.alloc(req).map(|pfn| self.hand_out(pfn)),
                _ => Err(AllocError::OutOfMemory { order: req.order }),
            },
        };
        if let Err(AllocError::OutOfMemory { .. }) = result {
            // Our own frames go back now; the caller drains the others
            // once it can without holding this slot.
            self.empty_slot(slot, req.cpu);
        }
        Self::set_len(pcp, slot);
        result
    }

    /// An order-0 free for `req.cpu`, whose slot the caller holds, of a
    /// frame whose `HANDED` mark the caller has claimed (the mark is now
    /// `NOT_HELD` or still `HANDED`; this sets the final one).
    #[inline]
    fn free_single(
        &self,
        slot: &mut Slot,
        mark: &AtomicU8,
        pfn: Pfn,
        req: Request,
    ) -> Result<(), AllocError> {
        let pcp = &self.pcps[req.cpu as usize];
        self.check_drain_request(pcp, slot, req.cpu);
        let result = match self.policy {
            PcpPolicy::LinuxBulk { batch, high } => {
                mark.store(ON_LIST, Ordering::Release);
                slot.list.push_back(pfn);
                if slot.list.len() > high as usize {
                    self.give_back(&mut slot.list, batch as usize, req.cpu);
                }
                Ok(())
            }
            PcpPolicy::Bypass { cap, batch } => {
                if slot.list.len() < cap as usize {
                    mark.store(ON_LIST, Ordering::Release);
                    slot.list.push_back(pfn);
                    Ok(())
                } else if batch > 1 {
                    mark.store(ON_LIST, Ordering::Release);
                    slot.pending.push(pfn);
                    if slot.pending.len() >= self.gather as usize {
                        self.flush_pending(slot, req.cpu);
                    }
                    Ok(())
                } else {
                    self.free_through(mark, pfn, req)
                }
            }
            PcpPolicy::Staged { .. } => {
                mark.store(ON_LIST, Ordering::Release);
                slot.pending.push(pfn);
                if slot.pending.len() >= self.gather as usize {
                    self.flush_pending(slot, req.cpu);
                }
                Ok(())
            }
        };
        Self::set_len(pcp, slot);
        result
    }

    /// Free a claimed order-0 frame straight into the inner allocator.
    #[inline]
    fn free_through(&self, mark: &AtomicU8, pfn: Pfn, req: Request) -> Result<(), AllocError> {
        // Clear the mark before the frame is the inner allocator's: once
        // it is, another CPU may allocate it and mark it `HANDED`.
        mark.store(NOT_HELD, Ordering::Release);
        self.inner.free(pfn, req).inspect_err(|_| {
            // Cannot happen while the invariants hold; undo the claim so
            // the refused call leaves no trace.
            mark.store(HANDED, Ordering::Release);
        })
    }

    /// Explain why an order-0 free of `pfn` found no `HANDED` mark.
    #[cold]
    fn refused_free(&self, pfn: Pfn, mark: u8) -> AllocError {
        let order = Order::ZERO;
        match mark {
            ON_LIST => AllocError::DoubleFree { pfn, order },
            // Not ours: the inner allocator knows whether it is free, part
            // of a larger block, or in transit in a concurrent call.
            _ => match self.inner.check_free(pfn, order) {
                Err(e) => e,
                Ok(()) => AllocError::NotAllocated { pfn, order },
            },
        }
    }

    /// A free of a block larger than a frame: lists never hold one.
    fn free_block(&self, pfn: Pfn, req: Request) -> Result<(), AllocError> {
        self.map.zone_of_block(pfn, req.order)?;
        match self.held(pfn).load(Ordering::Acquire) {
            ON_LIST => Err(AllocError::DoubleFree {
                pfn,
                order: req.order,
            }),
            HANDED => Err(AllocError::WrongOrder {
                pfn,
                order: req.order,
                allocated: Order::ZERO,
            }),
            _ => self.inner.free(pfn, req),
        }
    }

    /// An allocation of a block larger than a frame. `own`: the caller's
    /// pinned CPU, whose slot it has emptied on failure.
    fn alloc_block(&self, req: Request, own: Option<usize>) -> Result<Pfn, AllocError> {
        // Listed single frames may be what keeps a block from being whole:
        // drain them before failing, as for single frames.
        match self.inner.alloc(req) {
            Err(AllocError::OutOfMemory { .. }) => {
                self.drain_others(own);
                self.inner.alloc(req)
            }
            result => result,
        }
    }
}

/// A CPU slot of a [`PerCpu`] layer owned by one thread: Linux's "this
/// CPU's pcp, preemption off".
///
/// # Contract
///
/// - **One owner at a time.** `pin` refuses a second handle for the same
///   CPU ([`PinError::Busy`]); the handle holds the slot's lock for its
///   whole life and its methods take `&mut self`, so the type system keeps
///   the list to one thread at a time. Nothing here is `unsafe`.
/// - **What a list hit costs.** An allocation served from the list is a
///   pop from the CPU's own list, a store of the frame's mark and a store
///   of the length mirror; a free that stays on the list, a load and a
///   check of the mark, a push and two stores. No lock is taken and no
///   atomic read-modify-write is made (one relaxed load tests for a drain
///   request other CPUs may post).
/// - **Double frees.** A free is refused unless the frame's mark says it
///   is in a caller's hands, exactly as on the trait path, for every
///   double free that is not a race. The mark is written only by the CPU
///   that holds the frame (on its list or gathered), by the CPU handing it
///   out, or by the inner allocator's lock holder's caller when it goes
///   back, so in a correct program no two CPUs write it at once. A caller
///   that frees *one frame on two CPUs at the same instant* races on the
///   mark; in release builds both frees may pass the check (as in Linux,
///   where such a race is undetected), and `validate` then reports the
///   frame listed twice. Debug builds check the claim with a
///   compare-and-swap and refuse the loser.
/// - **Other CPUs.** While a slot is pinned, trait calls naming its CPU
///   bypass its list and go to the inner allocator; `drain` and the
///   out-of-memory retry cannot empty it and post a request instead, which
///   the owner honours at its next call, so up to a list's bound of frames
///   per pinned CPU may sit unused while another CPU runs out. `validate`
///   refuses to run while any CPU is pinned.
pub struct PinnedCpu<'a, A: FrameAllocator, R: RawMutex + Send + Sync> {
    layer: &'a PerCpu<A, R>,
    cpu: u32,
    /// Always `Some` until `drop`, which must release the lock before it
    /// clears `pinned`.
    slot: Option<MutexGuard<'a, R, Slot>>,
}

impl<A: FrameAllocator, R: RawMutex + Send + Sync> PinnedCpu<'_, A, R> {
    /// The CPU this handle owns.
    pub fn cpu(&self) -> u32 {
        self.cpu
    }

    #[inline]
    fn slot(&mut self) -> &mut Slot {
        self.slot.as_mut().expect("the guard lives until drop")
    }

    /// Give this CPU's frames back and clear any drain request.
    #[cold]
    fn drain_own(&mut self) {
        let (layer, cpu) = (self.layer, self.cpu);
        let pcp = &layer.pcps[cpu as usize];
        layer.honour_drain_request(pcp, self.slot(), cpu);
    }

    /// Allocate a block of `2^order` frames on this CPU, as
    /// [`FrameAllocator::alloc`] with this CPU.
    #[inline]
    pub fn alloc(&mut self, order: Order, kind: MigrateType) -> Result<Pfn, AllocError> {
        let req = Request::new(order, self.cpu, kind);
        let layer = self.layer;
        let own = Some(self.cpu as usize);
        if order != Order::ZERO {
            return match layer.inner.alloc(req) {
                Err(AllocError::OutOfMemory { .. }) => {
                    self.drain_own();
                    layer.alloc_block(req, own)
                }
                result => result,
            };
        }
        match layer.alloc_single(self.slot(), req) {
            Err(AllocError::OutOfMemory { .. }) => layer.alloc_after_drain(req, own),
            result => result,
        }
    }

    /// Give back the block of `2^order` frames at `pfn` on this CPU, as
    /// [`FrameAllocator::free`] with this CPU; the same refusals.
    #[inline]
    pub fn free(&mut self, pfn: Pfn, order: Order, kind: MigrateType) -> Result<(), AllocError> {
        let req = Request::new(order, self.cpu, kind);
        let layer = self.layer;
        if order != Order::ZERO {
            return layer.free_block(pfn, req);
        }
        let i = layer.map.dense_index(pfn).ok_or(AllocError::OutOfRange {
            pfn,
            order: req.order,
        })?;
        let mark = &layer.held[i];
        #[cfg(debug_assertions)]
        if let Err(seen) =
            mark.compare_exchange(HANDED, NOT_HELD, Ordering::AcqRel, Ordering::Acquire)
        {
            return Err(layer.refused_free(pfn, seen));
        }
        #[cfg(not(debug_assertions))]
        {
            let seen = mark.load(Ordering::Acquire);
            if seen != HANDED {
                return Err(layer.refused_free(pfn, seen));
            }
        }
        layer.free_single(self.slot(), mark, pfn, req)
    }

    /// Give this CPU's listed and gathered frames back to the inner
    /// allocator now.
    pub fn drain(&mut self) {
        self.drain_own();
    }
}

impl<A: FrameAllocator, R: RawMutex + Send + Sync> Drop for PinnedCpu<'_, A, R> {
    fn drop(&mut self) {
        // Unlock first: while `pinned` is still set, trait calls bypass the
        // slot rather than wait for it.
        drop(self.slot.take());
        self.layer.pcps[self.cpu as usize]
            .pinned
            .store(false, Ordering::Release);
    }
}

impl<A: FrameAllocator, R: RawMutex + Send + Sync> FrameAllocator for PerCpu<A, R> {
    fn alloc(&self, req: Request) -> Result<Pfn, AllocError> {
        check_cpu(req, self.inner.cpus())?;
        if req.order != Order::ZERO {
            return self.alloc_block(req, None);
        }
        let cpu = req.cpu as usize;
        // The seed's LiS fast test: an empty list sends the allocation
        // straight to iBuddy without taking the list's lock (a drain
        // request for a pinned-then-released slot waits for the next call
        // that takes it).
        let skip = matches!(self.policy, PcpPolicy::Bypass { .. })
            && self.pcps[cpu].len.load(Ordering::Relaxed) == 0;
        let result = match self.lock_slot_unless(skip, cpu) {
            Some(mut slot) => self.alloc_single(&mut slot, req),
            // Pinned elsewhere, or nothing listed: the inner allocator.
            None => self.inner.alloc(req).map(|pfn| self.hand_out(pfn)),
        };
        match result {
            // The slot is released by now: drain everyone, own CPU too.
            Err(AllocError::OutOfMemory { .. }) => self.alloc_after_drain(req, None),
            result => result,
        }
    }

    fn free(&self, pfn: Pfn, req: Request) -> Result<(), AllocError> {
        check_cpu(req, self.inner.cpus())?;
        if req.order != Order::ZERO {
            return self.free_block(pfn, req);
        }
        let i = self.map.dense_index(pfn).ok_or(AllocError::OutOfRange {
            pfn,
            order: req.order,
        })?;
        let mark = &self.held[i];
        // Claim the free: of two frees of one frame, only one gets past.
        if let Err(seen) =
            mark.compare_exchange(HANDED, NOT_HELD, Ordering::AcqRel, Ordering::Acquire)
        {
            return Err(self.refused_free(pfn, seen));
        }
        match self.lock_slot(req.cpu as usize) {
            Some(mut slot) => self.free_single(&mut slot, mark, pfn, req),
            None => self.free_through(mark, pfn, req),
        }
    }

    /// Asks for the frame's mark, the byte every order-0 free claims.
    ///
    /// The hint is not passed on to the inner allocator: most frees stay
    /// on a list and never reach it, so its lines (for iBuddy, a handed
    /// word, a record and a bitmap word) would be loads for nothing, and a
    /// give-back asks for them itself. Replaying `traces/compile.nvt` on
    /// LiS-31 the mark alone was the fastest of none, mark alone, and mark
    /// plus the inner hint (the book's performance chapter).
    #[inline]
    fn prefetch_free(&self, pfn: Pfn) {
        // Any pfn is allowed: one outside the zones has no mark.
        if let Some(i) = self.map.dense_index(pfn) {
            crate::prefetch_addr(&self.held[i] as *const AtomicU8 as usize);
        }
    }

    fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError> {
        self.map.zone_of_block(pfn, order)?;
        match (self.held(pfn).load(Ordering::Acquire), order == Order::ZERO) {
            (HANDED, true) => Ok(()),
            (HANDED, false) => Err(AllocError::WrongOrder {
                pfn,
                order,
                allocated: Order::ZERO,
            }),
            (ON_LIST, _) => Err(AllocError::DoubleFree { pfn, order }),
            (_, true) => Err(self.refused_free(pfn, NOT_HELD)),
            (_, false) => self.inner.check_free(pfn, order),
        }
    }

    fn drain(&self) {
        self.drain_others(None);
    }

    fn stats(&self) -> Stats {
        let pcp_frames: u64 = self
            .pcps
            .iter()
            .map(|p| {
                u64::from(p.len.load(Ordering::Relaxed))
                    + u64::from(p.pending_len.load(Ordering::Relaxed))
            })
            .sum();
        let inner = self.inner.stats();
        Stats {
            pcp_frames: pcp_frames + inner.pcp_frames,
            ..inner
        }
    }

    fn validate(&self) -> Result<(), ValidationError> {
        for (cpu, pcp) in self.pcps.iter().enumerate() {
            ensure!(
                !pcp.pinned.load(Ordering::Acquire),
                "cpu {cpu} is pinned: validate needs every slot unpinned"
            );
        }
        self.inner.validate()?;
        let slots: Vec<MutexGuard<'_, R, Slot>> = self.pcps.iter().map(|p| p.slot.lock()).collect();
        let (list_bound, pending_bound) = (self.policy.list_bound(), self.gather);
        let mut listed = 0u64;
        for (cpu, slot) in slots.iter().enumerate() {
            let pcp = &self.pcps[cpu];
            ensure!(
                pcp.len.load(Ordering::Relaxed) as usize == slot.list.len()
                    && pcp.pending_len.load(Ordering::Relaxed) as usize == slot.pending.len(),
                "pcp {cpu}: length mirrors {}/{} but {}/{} frames listed/gathered",
                pcp.len.load(Ordering::Relaxed),
                pcp.pending_len.load(Ordering::Relaxed),
                slot.list.len(),
                slot.pending.len()
            );
            ensure!(
                slot.list.len() <= list_bound as usize,
                "pcp {cpu}: {} frames listed, above the bound {list_bound}",
                slot.list.len()
            );
            ensure!(
                slot.pending.len() <= pending_bound as usize,
                "pcp {cpu}: {} frees gathered, above the bound {pending_bound}",
                slot.pending.len()
            );
            for &pfn in slot.list.iter().chain(slot.pending.iter()) {
                ensure!(
                    self.map.dense_index(pfn).is_some(),
                    "pcp {cpu}: pfn {pfn} outside the zones"
                );
                ensure!(
                    self.held(pfn).load(Ordering::Acquire) == ON_LIST,
                    "pcp {cpu}: pfn {pfn} listed but not marked as listed"
                );
                ensure!(
                    self.inner.check_free(pfn, Order::ZERO).is_ok(),
                    "pcp {cpu}: pfn {pfn} listed but not an allocated single frame in the inner allocator"
                );
            }
            listed += (slot.list.len() + slot.pending.len()) as u64;
        }
        let mut marked_listed = 0u64;
        for (i, mark) in self.held.iter().enumerate() {
            let mark = mark.load(Ordering::Acquire);
            let pfn = self.map.pfn_at(i as u64);
            match mark {
                ON_LIST => marked_listed += 1,
                HANDED => ensure!(
                    self.inner.check_free(pfn, Order::ZERO).is_ok(),
                    "pfn {pfn} handed out as a single frame but not allocated so in the inner allocator"
                ),
                NOT_HELD => {}
                other => ensure!(false, "pfn {pfn}: unknown mark {other}"),
            }
        }
        ensure!(
            marked_listed == listed,
            "{marked_listed} frames marked as listed but {listed} on lists (a frame on two lists?)"
        );
        Ok(())
    }

    fn zones(&self) -> &[Zone] {
        self.inner.zones()
    }

    fn cpus(&self) -> u32 {
        self.inner.cpus()
    }

    fn metadata_bytes(&self) -> usize {
        // A pinned slot's vectors cannot be looked at; count them at their
        // bounds, which they do not outgrow by more than one frame.
        // With the grouping scratch: a copy of the gathering and a `u32`
        // (half a `Pfn`) a gathered frame.
        let bound =
            (self.policy.list_bound() + 1 + 2 * self.gather + self.gather.div_ceil(2)) as usize;
        let lists: usize = self
            .pcps
            .iter()
            .map(|p| {
                let held = match p.slot.try_lock() {
                    Some(slot) => {
                        slot.list.capacity()
                            + slot.pending.capacity()
                            + slot.grouped.capacity()
                            + slot.groups.capacity() * core::mem::size_of::<u32>()
                                / core::mem::size_of::<Pfn>()
                    }
                    None => bound,
                };
                core::mem::size_of_val(p) + held * core::mem::size_of::<Pfn>()
            })
            .sum();
        self.inner.metadata_bytes() + self.held.len() + lists
    }
}

/// Reorder `slot.pending` so that frames of one lock group (of `inner`,
/// which has `groups` of them, more than 1) are together, groups
/// ascending, each in the order gathered.
fn group_by_lock<A: FrameAllocator>(inner: &A, groups: u32, slot: &mut Slot) {
    let last = groups - 1;
    // Already grouped (one group, say: a bulk free, or every frame from
    // the freeing CPU's own space) needs no move; the test stops at the
    // first frame out of order.
    let mut previous = 0;
    let grouped = slot.pending.iter().all(|&pfn| {
        let g = inner.lock_group(pfn).min(last);
        let in_order = g >= previous;
        previous = g;
        in_order
    });
    if grouped {
        return;
    }
    // counts[g + 1] counts group g; after the prefix sum counts[g] is
    // where group g starts.
    let mut small = [0u32; 65];
    let mut big = Vec::new();
    let counts: &mut [u32] = if groups <= 64 {
        &mut small[..groups as usize + 1]
    } else {
        big.resize(groups as usize + 1, 0);
        &mut big
    };
    slot.groups.clear();
    for &pfn in &slot.pending {
        let g = inner.lock_group(pfn).min(last);
        slot.groups.push(g);
        counts[g as usize + 1] += 1;
    }
    for g in 1..counts.len() {
        counts[g] += counts[g - 1];
    }
    slot.grouped.clear();
    slot.grouped.resize(slot.pending.len(), Pfn(0));
    for (&pfn, &g) in slot.pending.iter().zip(&slot.groups) {
        slot.grouped[counts[g as usize] as usize] = pfn;
        counts[g as usize] += 1;
    }
    core::mem::swap(&mut slot.pending, &mut slot.grouped);
}

impl<A: FrameAllocator, R: RawMutex + Send + Sync> PerCpu<A, R> {
    /// `lock_slot`, unless `skip`.
    #[inline]
    fn lock_slot_unless(&self, skip: bool, cpu: usize) -> Option<MutexGuard<'_, R, Slot>> {
        if skip {
            None
        } else {
            self.lock_slot(cpu)
        }
    }
}
