//! The lazy layer: per-CPU lists of single frames in front of an allocator.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use lock_api::{Mutex, MutexGuard, RawMutex};

use crate::error::ensure;
use crate::{
    check_cpu, AllocError, CachePadded, ConfigError, FrameAllocator, Order, Pfn, Request, Stats,
    ValidationError, Zone, ZoneMap,
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
    /// empty; a free goes straight through when the list is full. No bulk
    /// moves, and frames are reused in the order they were freed.
    Bypass {
        /// Most frames on one CPU's list.
        cap: u32,
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
    /// LiS-1 of seed 000: lazy iBuddy with a list of one frame.
    pub const LIS_1: PcpPolicy = PcpPolicy::Bypass { cap: 1 };
    /// LiS-31 of seed 000: lazy iBuddy with lists of 31 frames.
    pub const LIS_31: PcpPolicy = PcpPolicy::Bypass { cap: 31 };

    /// Largest `batch` or `cap` accepted.
    pub const MAX_LIST: u32 = 1 << 16;

    fn check(self) -> Result<(), ConfigError> {
        match self {
            PcpPolicy::LinuxBulk { batch, high } => {
                if batch == 0 || batch > high || high > Self::MAX_LIST {
                    return Err(ConfigError::Policy(
                        "LinuxBulk needs 1 <= batch <= high <= 65536",
                    ));
                }
            }
            PcpPolicy::Bypass { cap } => {
                if cap > Self::MAX_LIST {
                    return Err(ConfigError::Policy("Bypass needs cap <= 65536"));
                }
            }
        }
        Ok(())
    }
}

/// Where a frame stands with respect to this layer. Only order-0 frames
/// pass through it; every order-0 allocation is marked `HANDED` and every
/// order-0 free must find that mark, which is what lets the layer refuse a
/// double free of a frame sitting on a list (the inner allocator sees such
/// a frame as allocated).
const NOT_HELD: u8 = 0;
const ON_LIST: u8 = 1;
const HANDED: u8 = 2;

/// One CPU's list. `len` mirrors the list length so the bypass policy can
/// see an empty or full list without taking the lock; it is written only
/// under the lock and a stale read merely sends a call down the slow path.
struct Pcp<R: RawMutex> {
    len: AtomicU32,
    list: Mutex<R, VecDeque<Pfn>>,
}

/// Frames moved to or from the inner allocator per call in bulk moves.
const CHUNK: usize = 64;

/// A lazy layer of per-CPU lists in front of the allocator `A`.
///
/// `PerCpu<Buddy>` with [`PcpPolicy::LinuxBulk`] is Linux's lazy buddy;
/// `PerCpu<IBuddy>` with [`PcpPolicy::Bypass`] is lazy iBuddy. Only single
/// frames use the lists; larger blocks go straight to `A`. When `A` runs
/// out, every CPU's list is drained back into it and the request retried
/// once, as Linux does before failing an allocation.
///
/// Invariants (checked by `validate`, with no call in flight): a frame is
/// on at most one list and is marked `ON_LIST` exactly when it is on one;
/// `A` sees every listed or `HANDED` frame as an allocated block of order
/// 0; no list is longer than its bound (`cap`, or `high`).
pub struct PerCpu<A, R: RawMutex> {
    inner: A,
    policy: PcpPolicy,
    pcps: Box<[CachePadded<Pcp<R>>]>,
    map: ZoneMap,
    held: Box<[AtomicU8]>,
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
                    list: Mutex::new(VecDeque::new()),
                })
            })
            .collect();
        Ok(PerCpu {
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

    /// Give the oldest `count` frames of `list` back to the inner
    /// allocator. The caller holds the list's lock.
    fn give_back(&self, list: &mut VecDeque<Pfn>, count: usize, req: Request) {
        let mut buf = [Pfn(0); CHUNK];
        let mut left = count.min(list.len());
        while left > 0 {
            let n = left.min(CHUNK);
            for slot in &mut buf[..n] {
                let pfn = list.pop_front().expect("n <= list length");
                self.held(pfn).store(NOT_HELD, Ordering::Release);
                *slot = pfn;
            }
            if let Err((done, _)) = self.inner.free_bulk(&buf[..n], req.with_order(Order::ZERO)) {
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

    /// The inner allocator is out of memory: drain every list, try again.
    #[cold]
    fn alloc_after_drain(&self, req: Request) -> Result<Pfn, AllocError> {
        self.drain();
        self.inner.alloc(req).map(|pfn| self.hand_out(pfn))
    }

    /// Refill an empty list with up to `batch` frames under the inner
    /// allocator's lock; the first frame taken ends up reused first.
    fn refill(&self, list: &mut VecDeque<Pfn>, batch: u32, req: Request) {
        let mut buf = [Pfn(0); CHUNK];
        let mut left = batch as usize;
        while left > 0 {
            let want = left.min(CHUNK);
            let got = self.inner.alloc_bulk(req, &mut buf[..want]);
            for &pfn in buf[..got].iter() {
                self.held(pfn).store(ON_LIST, Ordering::Release);
                list.push_front(pfn);
            }
            if got < want {
                break;
            }
            left -= want;
        }
    }

    #[inline]
    fn set_len(pcp: &Pcp<R>, list: &VecDeque<Pfn>) {
        pcp.len.store(list.len() as u32, Ordering::Relaxed);
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
}

impl<A: FrameAllocator, R: RawMutex + Send + Sync> FrameAllocator for PerCpu<A, R> {
    fn alloc(&self, req: Request) -> Result<Pfn, AllocError> {
        check_cpu(req, self.inner.cpus())?;
        if req.order != Order::ZERO {
            // Listed single frames may be what keeps a block from being
            // whole: drain them before failing, as for single frames.
            return match self.inner.alloc(req) {
                Err(AllocError::OutOfMemory { .. }) => {
                    self.drain();
                    self.inner.alloc(req)
                }
                result => result,
            };
        }
        let pcp = &self.pcps[req.cpu as usize];
        match self.policy {
            PcpPolicy::LinuxBulk { batch, .. } => {
                let mut list = pcp.list.lock();
                if list.is_empty() {
                    self.refill(&mut list, batch, req);
                }
                let Some(pfn) = list.pop_back() else {
                    Self::set_len(pcp, &list);
                    drop(list);
                    return self.alloc_after_drain(req);
                };
                Self::set_len(pcp, &list);
                Ok(self.hand_out(pfn))
            }
            PcpPolicy::Bypass { .. } => {
                if pcp.len.load(Ordering::Relaxed) > 0 {
                    let mut list = pcp.list.lock();
                    if let Some(pfn) = list.pop_front() {
                        Self::set_len(pcp, &list);
                        return Ok(self.hand_out(pfn));
                    }
                }
                match self.inner.alloc(req) {
                    Ok(pfn) => Ok(self.hand_out(pfn)),
                    Err(AllocError::OutOfMemory { .. }) => self.alloc_after_drain(req),
                    Err(e) => Err(e),
                }
            }
        }
    }

    fn free(&self, pfn: Pfn, req: Request) -> Result<(), AllocError> {
        check_cpu(req, self.inner.cpus())?;
        if req.order != Order::ZERO {
            self.map.zone_of_block(pfn, req.order)?;
            return match self.held(pfn).load(Ordering::Acquire) {
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
            };
        }
        let i = self.map.dense_index(pfn).ok_or(AllocError::OutOfRange {
            pfn,
            order: req.order,
        })?;
        // Claim the free: of two frees of one frame, only one gets past.
        if let Err(mark) =
            self.held[i].compare_exchange(HANDED, NOT_HELD, Ordering::AcqRel, Ordering::Acquire)
        {
            return Err(self.refused_free(pfn, mark));
        }
        let pcp = &self.pcps[req.cpu as usize];
        match self.policy {
            PcpPolicy::LinuxBulk { batch, high } => {
                let mut list = pcp.list.lock();
                self.held[i].store(ON_LIST, Ordering::Release);
                list.push_back(pfn);
                if list.len() > high as usize {
                    self.give_back(&mut list, batch as usize, req);
                }
                Self::set_len(pcp, &list);
                Ok(())
            }
            PcpPolicy::Bypass { cap } => {
                if pcp.len.load(Ordering::Relaxed) < cap {
                    let mut list = pcp.list.lock();
                    if list.len() < cap as usize {
                        self.held[i].store(ON_LIST, Ordering::Release);
                        list.push_back(pfn);
                        Self::set_len(pcp, &list);
                        return Ok(());
                    }
                }
                self.inner.free(pfn, req).inspect_err(|_| {
                    // Cannot happen while the invariants hold; undo the claim
                    // so the refused call leaves no trace.
                    self.held[i].store(HANDED, Ordering::Release);
                })
            }
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
        for (cpu, pcp) in self.pcps.iter().enumerate() {
            let mut list = pcp.list.lock();
            let len = list.len();
            self.give_back(&mut list, len, Request::single(cpu as u32));
            Self::set_len(pcp, &list);
        }
        self.inner.drain();
    }

    fn stats(&self) -> Stats {
        let pcp_frames: u64 = self.pcps.iter().map(|p| p.list.lock().len() as u64).sum();
        let inner = self.inner.stats();
        Stats {
            pcp_frames: pcp_frames + inner.pcp_frames,
            ..inner
        }
    }

    fn validate(&self) -> Result<(), ValidationError> {
        self.inner.validate()?;
        let lists: Vec<MutexGuard<'_, R, VecDeque<Pfn>>> =
            self.pcps.iter().map(|p| p.list.lock()).collect();
        let mut listed = 0u64;
        for (cpu, list) in lists.iter().enumerate() {
            ensure!(
                self.pcps[cpu].len.load(Ordering::Relaxed) as usize == list.len(),
                "pcp {cpu}: length mirror {} but {} frames listed",
                self.pcps[cpu].len.load(Ordering::Relaxed),
                list.len()
            );
            let bound = match self.policy {
                PcpPolicy::LinuxBulk { high, .. } => high,
                PcpPolicy::Bypass { cap } => cap,
            };
            ensure!(
                list.len() <= bound as usize,
                "pcp {cpu}: {} frames listed, above the bound {bound}",
                list.len()
            );
            for &pfn in list.iter() {
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
            listed += list.len() as u64;
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
        let lists: usize = self
            .pcps
            .iter()
            .map(|p| {
                core::mem::size_of_val(p) + p.list.lock().capacity() * core::mem::size_of::<Pfn>()
            })
            .sum();
        self.inner.metadata_bytes() + self.held.len() + lists
    }
}
