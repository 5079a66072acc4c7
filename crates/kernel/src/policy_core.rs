//! The kernel's policy cores (`kernel/policy/ibuddy_core.c`,
//! `adaptive_core.c` and `m3_core.c`), compiled for user space against
//! their shim, behind a safe interface, for the differential tests against
//! `nvmos-frames`.
//!
//! [`CoreAdaptive`] is one zone's Adaptive-Buddy core, [`CoreM3`] one
//! zone's M3 core. [`CoreSpace`] composes the space and the bypass list exactly as the
//! kernel patch does: an order-0 allocation tries the lazy list first, an
//! order-0 free goes on it while it has room; everything else goes to the
//! space.

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::ptr::NonNull;

#[repr(C)]
struct Harness {
    _opaque: [u8; 0],
}

extern "C" {
    fn ib_harness_new(start: u64, end: u64, cap: u32) -> *mut Harness;
    fn ib_harness_drop(h: *mut Harness);
    fn ib_harness_space(h: *mut Harness) -> *mut c_void;
    fn ib_harness_lazy(h: *mut Harness) -> *mut c_void;
    fn ib_harness_next_level(h: *const Harness) -> c_int;
    fn ib_harness_coalesces(h: *const Harness) -> u64;
    fn ib_alloc(s: *mut c_void, order: c_uint) -> u64;
    fn ib_free(s: *mut c_void, pfn: u64, order: c_uint) -> c_int;
    fn ib_take_frame(s: *mut c_void, pfn: u64) -> c_int;
    fn ib_nr_free_blocks(s: *const c_void, order: c_uint) -> u64;
    fn ib_nr_free(s: *const c_void) -> u64;
    fn ib_frame_free(s: *const c_void, pfn: u64) -> c_int;
    fn ib_lazy_take(l: *mut c_void, pfn: *mut u64) -> c_int;
    fn ib_lazy_put(l: *mut c_void, pfn: u64) -> c_int;
    fn ib_harness_stage(h: *mut Harness, batch: u32);
    fn ib_harness_staged(h: *mut Harness) -> *mut c_void;
    fn ib_staged_take(st: *mut c_void, pfn: *mut u64) -> c_int;
    fn ib_staged_stage(st: *mut c_void, pfn: u64);
    fn ib_staged_room(st: *const c_void) -> u32;
    fn ib_staged_gather(st: *mut c_void, pfn: u64) -> c_int;
    fn ib_staged_flush(st: *mut c_void, out: *mut u64) -> u32;
    fn ib_staged_unstage(st: *mut c_void, out: *mut u64) -> u32;
}

/// Largest order the core coalesces (`IB_MAX_ORDER`).
pub const CORE_MAX_ORDER: u8 = 10;

/// Most frames a bypass list holds (`IB_LAZY_MAX`).
pub const CORE_LAZY_MAX: u32 = 31;

/// Why [`CoreSpace`] refused a call (the C core itself trusts its caller,
/// as the kernel's page allocator does; this wrapper checks for it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// The range is empty or has more frames than a `u32` index holds.
    #[error("space [{start:#x}, {end:#x}) is empty or too large")]
    BadRange {
        /// First frame.
        start: u64,
        /// One past the last frame.
        end: u64,
    },
    /// A bypass list longer than [`CORE_LAZY_MAX`].
    #[error("bypass list of {0} frames; the core holds at most 31")]
    BadCap(u32),
    /// An order above [`CORE_MAX_ORDER`].
    #[error("order {0} is above the core's largest, 10")]
    BadOrder(u8),
    /// A free of a block this space did not hand out with that order.
    #[error("frame {pfn:#x} is not an allocated block of order {order}")]
    NotAllocated {
        /// First frame of the block.
        pfn: u64,
        /// Its order.
        order: u8,
    },
    /// A CPU the core was not built for.
    #[error("cpu {cpu} of a core for {cpus} CPUs")]
    BadCpu {
        /// The CPU asked for.
        cpu: u32,
        /// CPUs of the core.
        cpus: u32,
    },
    /// A migration pass given a pinned flag for other than every bank.
    #[error("{got} pinned flags for a core of {banks} banks")]
    BadPinned {
        /// Flags given.
        got: usize,
        /// Banks of the core.
        banks: usize,
    },
}

/// What a core said about a free (`enum ib_free_result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreFree {
    /// Taken.
    Ok,
    /// Misaligned, too large, or not wholly inside the space: refused.
    Outside,
    /// A frame of the block is already free: refused.
    Double,
}

impl CoreFree {
    fn from_c(v: c_int) -> CoreFree {
        match v {
            0 => CoreFree::Ok,
            1 => CoreFree::Outside,
            2 => CoreFree::Double,
            other => panic!("ib_free_result {other} is not in ibuddy_core.h"),
        }
    }
}

/// The blocks a wrapped core handed out and not yet freed, by first
/// frame: their order. A wrapper checks a free against it before the C
/// core sees it (the kernel never passes a bad free), and keeps it in
/// step with what the core says.
#[derive(Default)]
struct Live(HashMap<u64, u8>);

impl Live {
    /// The core handed `(pfn, order)` out.
    fn handed(&mut self, pfn: u64, order: u8) {
        self.0.insert(pfn, order);
    }

    /// Take `(pfn, order)` out to free it; refused unless it is live at
    /// that order.
    fn take(&mut self, pfn: u64, order: u8) -> Result<(), CoreError> {
        if self.0.get(&pfn) != Some(&order) {
            return Err(CoreError::NotAllocated { pfn, order });
        }
        self.0.remove(&pfn);
        Ok(())
    }

    /// What the core said (`v`, an `ib_free_result`) about a free that
    /// bypassed [`Live::take`]; a block it took leaves.
    fn raw(&mut self, pfn: u64, v: c_int) -> CoreFree {
        if v == 0 {
            self.0.remove(&pfn);
        }
        CoreFree::from_c(v)
    }
}

/// The core's verdict on a free [`Live::take`] let through: it must take
/// the block.
fn expect_taken(verdict: c_int) {
    assert_eq!(
        verdict, 0,
        "the core refused a free the harness tracked as live"
    );
}

/// One iBuddy space over `[start, end)`, all free, with a bypass list of
/// `cap` frames (0: plain iBuddy).
pub struct CoreSpace {
    h: NonNull<Harness>,
    /// Blocks handed out and not freed.
    live: Live,
    /// A staged (lis31-fair) list instead of a bypass list.
    staged: bool,
}

// SAFETY: the harness is plain memory owned by this value alone.
unsafe impl Send for CoreSpace {}

impl CoreSpace {
    /// A space over `[start, end)` with every frame free.
    pub fn new(start: u64, end: u64, cap: u32) -> Result<CoreSpace, CoreError> {
        if start >= end || end - start >= u64::from(u32::MAX) {
            return Err(CoreError::BadRange { start, end });
        }
        if cap > CORE_LAZY_MAX {
            return Err(CoreError::BadCap(cap));
        }
        // SAFETY: a valid range; the harness owns what it allocates.
        let h = unsafe { ib_harness_new(start, end, cap) };
        let h = NonNull::new(h).expect("out of memory for the core's space");
        Ok(CoreSpace {
            h,
            live: Live::default(),
            staged: false,
        })
    }

    /// A space over `[start, end)` with every frame free and a staged
    /// (lis31-fair) list of `batch` frames, composed as the kernel's
    /// `nvmos_alloc_lazy`/`nvmos_free_lazy` compose it under `lis31-fair`.
    pub fn new_staged(start: u64, end: u64, batch: u32) -> Result<CoreSpace, CoreError> {
        if batch == 0 || batch > CORE_LAZY_MAX {
            return Err(CoreError::BadCap(batch));
        }
        let mut core = CoreSpace::new(start, end, 0)?;
        // SAFETY: live harness.
        unsafe { ib_harness_stage(core.h.as_ptr(), batch) };
        core.staged = true;
        Ok(core)
    }

    fn staged_list(&self) -> *mut c_void {
        // SAFETY: `h` is live until drop.
        unsafe { ib_harness_staged(self.h.as_ptr()) }
    }

    /// Stage up to the list's room from the front of the space.
    fn refill(&mut self) {
        // SAFETY: live harness pointers.
        unsafe {
            let st = self.staged_list();
            for _ in 0..ib_staged_room(st) {
                let p = ib_alloc(self.space(), 0);
                if p == u64::MAX {
                    break;
                }
                ib_staged_stage(st, p);
            }
        }
    }

    /// Give the gathered frees back to the space, in the order freed.
    fn flush(&mut self) {
        self.give_back(ib_staged_flush);
    }

    /// Move the frames `take` empties out of the staged list (at most
    /// IB_LAZY_MAX) into the space, in order. They were handed to the list
    /// by this space, so the space must take each.
    fn give_back(&mut self, take: unsafe extern "C" fn(*mut c_void, *mut u64) -> u32) {
        let mut out = [0u64; CORE_LAZY_MAX as usize];
        // SAFETY: live harness; `out` has IB_LAZY_MAX entries, the most
        // either list holds.
        unsafe {
            let n = take(self.staged_list(), out.as_mut_ptr());
            for &p in &out[..n as usize] {
                let verdict = ib_free(self.space(), p, 0);
                assert_eq!(verdict, 0, "the space refused listed frame {p:#x}");
            }
        }
    }

    /// Give the staged frames (oldest first), then the gathered frees,
    /// back to the space: what `drain_all_pages()` does to a CPU's list
    /// before the kernel retries a failed allocation.
    fn drain_staged(&mut self) {
        self.give_back(ib_staged_unstage);
        self.flush();
    }

    fn alloc_staged(&mut self) -> Option<u64> {
        let mut pfn = 0u64;
        // SAFETY: live harness pointers.
        unsafe {
            if ib_staged_take(self.staged_list(), &mut pfn) != 0 {
                return Some(pfn);
            }
            self.refill();
            if ib_staged_take(self.staged_list(), &mut pfn) != 0 {
                return Some(pfn);
            }
            // The gathered frees may be all that is left.
            self.flush();
            self.refill();
            (ib_staged_take(self.staged_list(), &mut pfn) != 0).then_some(pfn)
        }
    }

    fn space(&self) -> *mut c_void {
        // SAFETY: `h` is live until drop.
        unsafe { ib_harness_space(self.h.as_ptr()) }
    }

    /// Allocate a block of `2^order` frames as the kernel's `rmqueue`
    /// hook does: a single frame off the bypass list when it has one, else
    /// from the space. `None` when the space has no such block.
    pub fn alloc(&mut self, order: u8) -> Result<Option<u64>, CoreError> {
        if order > CORE_MAX_ORDER {
            return Err(CoreError::BadOrder(order));
        }
        let mut pfn = 0u64;
        if order == 0 && self.staged {
            let got = self.alloc_staged();
            if let Some(p) = got {
                self.live.handed(p, 0);
            }
            return Ok(got);
        }
        // SAFETY: the pointers come from the live harness.
        let mut got = unsafe {
            if order == 0 && ib_lazy_take(ib_harness_lazy(self.h.as_ptr()), &mut pfn) != 0 {
                Some(pfn)
            } else {
                let p = ib_alloc(self.space(), c_uint::from(order));
                (p != u64::MAX).then_some(p)
            }
        };
        if got.is_none() && self.staged {
            // The kernel drains the CPU lists and retries.
            self.drain_staged();
            // SAFETY: live harness.
            let p = unsafe { ib_alloc(self.space(), c_uint::from(order)) };
            got = (p != u64::MAX).then_some(p);
        }
        if let Some(p) = got {
            self.live.handed(p, order);
        }
        Ok(got)
    }

    /// Free a block as the kernel's free path does: a single frame onto
    /// the bypass list while it has room, else into the space.
    pub fn free(&mut self, pfn: u64, order: u8) -> Result<(), CoreError> {
        self.live.take(pfn, order)?;
        if order == 0 && self.staged {
            // SAFETY: live harness; the frame was handed out and not freed.
            if unsafe { ib_staged_gather(self.staged_list(), pfn) } != 0 {
                self.flush();
            }
            return Ok(());
        }
        // SAFETY: the block was handed out by this space and not freed.
        unsafe {
            if order == 0 && ib_lazy_put(ib_harness_lazy(self.h.as_ptr()), pfn) != 0 {
                return Ok(());
            }
            expect_taken(ib_free(self.space(), pfn, c_uint::from(order)));
        }
        Ok(())
    }

    /// Free a block straight into the space, without the harness's own
    /// bookkeeping: what the core says about it. A refused free must
    /// leave the space as it was.
    pub fn free_raw(&mut self, pfn: u64, order: u8) -> CoreFree {
        // SAFETY: the core checks the block itself; that is what is tested.
        self.live.raw(pfn, unsafe {
            ib_free(self.space(), pfn, c_uint::from(order))
        })
    }

    /// Take a free frame out of the space, as the kernel does before
    /// handing it back to Linux's buddy lists; whether it was free there.
    pub fn take_frame(&mut self, pfn: u64) -> bool {
        // SAFETY: live harness; the core checks the pfn.
        let taken = unsafe { ib_take_frame(self.space(), pfn) != 0 };
        if taken {
            self.live.handed(pfn, 0);
        }
        taken
    }

    /// Maximal free blocks of exactly `order`, as buddyinfo counts them.
    pub fn free_blocks(&self, order: u8) -> u64 {
        // SAFETY: live harness.
        unsafe { ib_nr_free_blocks(self.space(), c_uint::from(order)) }
    }

    /// Free frames in the space (not counting the bypass list).
    pub fn nr_free(&self) -> u64 {
        // SAFETY: live harness.
        unsafe { ib_nr_free(self.space()) }
    }

    /// Whether `pfn` is free in the space.
    pub fn frame_free(&self, pfn: u64) -> bool {
        // SAFETY: live harness; out-of-range pfns read as not free.
        unsafe { ib_frame_free(self.space(), pfn) != 0 }
    }

    /// The highest order with a wholly free block, -1 when none.
    pub fn next_level(&self) -> i32 {
        // SAFETY: live harness.
        unsafe { ib_harness_next_level(self.h.as_ptr()) }
    }

    /// Bits set at orders >= 1 by frees climbing the bitmap.
    pub fn coalesces(&self) -> u64 {
        // SAFETY: live harness.
        unsafe { ib_harness_coalesces(self.h.as_ptr()) }
    }
}

impl Drop for CoreSpace {
    fn drop(&mut self) {
        // SAFETY: created by ib_harness_new, dropped once.
        unsafe { ib_harness_drop(self.h.as_ptr()) }
    }
}

#[repr(C)]
struct AdHarness {
    _opaque: [u8; 0],
}

/// `struct ad_stats` of `adaptive_core.h`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AdaptiveStats {
    /// Frames handed to kernel (unmovable, reclaimable) requests.
    pub alloc_kernel_frames: u64,
    /// Frames handed to user (movable) requests.
    pub alloc_user_frames: u64,
    /// Of those, frames served by the other pool.
    pub fallback_frames: u64,
    /// Requests nothing could serve.
    pub alloc_failed: u64,
    /// Frames freed.
    pub free_frames: u64,
    /// Offline banks taken into a pool.
    pub bank_adds: u64,
    /// Banks gone offline.
    pub bank_releases: u64,
    /// Free frames taken out of the core (handed back to Linux).
    pub taken_frames: u64,
    /// Frames handed out as homes for migrated pages.
    pub migration_target_frames: u64,
    /// Banks isolated as migration candidates.
    pub isolated_banks: u64,
    /// Of those, banks offline when their isolation ended.
    pub emptied_banks: u64,
}

/// What [`CoreAdaptive::migrate`] did: the kernel's pass, with the
/// page copies left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoreMigration {
    /// Candidate banks, in the order they were emptied.
    pub candidates: Vec<u32>,
    /// Every block moved: (old first frame, new first frame, order), in
    /// the order the targets were taken.
    pub moves: Vec<(u64, u64, u8)>,
    /// Blocks no target had room for (they stay where they were).
    pub blocks_left: u32,
    /// Candidates offline at the end.
    pub banks_emptied: u32,
}

extern "C" {
    fn ad_harness_new(
        start: u64,
        end: u64,
        bank_frames: u64,
        used_start: u64,
        used_end: u64,
    ) -> *mut AdHarness;
    fn ad_harness_drop(h: *mut AdHarness);
    fn ad_harness_core(h: *mut AdHarness) -> *mut c_void;
    fn ad_harness_banks(h: *const AdHarness) -> u32;
    fn ad_harness_bank(h: *const AdHarness, b: u32, free: *mut u64, role: *mut c_int);
    fn ad_harness_stats(h: *const AdHarness) -> *const AdaptiveStats;
    fn ad_alloc(c: *mut c_void, order: c_uint, kernel: c_int) -> u64;
    fn ad_free(c: *mut c_void, pfn: u64, order: c_uint) -> c_int;
    fn ad_free_block_of(c: *const c_void, pfn: u64, order: *mut c_uint) -> u64;
    fn ad_take_block(c: *mut c_void, pfn: u64, order: c_uint);
    fn ad_nr_free_blocks(c: *const c_void, order: c_uint) -> u64;
    fn ad_max_free_order(c: *const c_void) -> c_int;
    fn ad_bank_of(c: *const c_void, pfn: u64) -> u32;
    fn ad_migration_candidates(c: *const c_void, pinned: *const u8, out: *mut u32) -> u32;
    fn ad_isolate_bank(c: *mut c_void, b: u32);
    fn ad_end_isolation(c: *mut c_void, b: u32) -> c_int;
    fn ad_alloc_migration_target(c: *mut c_void, order: c_uint) -> u64;
}

/// What a bank of the kernel's Adaptive-Buddy core is used for
/// (`enum ad_role`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum BankRole {
    /// No frame in use: could be powered down.
    Offline,
    /// In the kernel pool.
    Kernel,
    /// In the user pool.
    User,
}

/// Why [`CoreAdaptive::new`] refused a layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdaptiveLayoutError {
    /// The range is empty or has more frames than a `u32` index holds.
    #[error("core [{start:#x}, {end:#x}) is empty or too large")]
    BadRange {
        /// First frame.
        start: u64,
        /// One past the last frame.
        end: u64,
    },
    /// Banks must be a power of two of at least 2^10 frames (one block of
    /// the largest order), as `nvmos_bank_mib=` demands.
    #[error("banks of {0} frames: a power of two of at least 1024 frames")]
    BadBank(u64),
}

/// The kernel's Adaptive-Buddy core (`kernel/policy/adaptive_core.c`)
/// over `[start, end)`: every frame free (as nvmos-frames' BankBuddy
/// starts) or with a range already in use (as the kernel hands a zone
/// over at activation).
pub struct CoreAdaptive {
    h: NonNull<AdHarness>,
    /// Blocks handed out and not freed.
    live: Live,
}

// SAFETY: the harness is plain memory owned by this value alone.
unsafe impl Send for CoreAdaptive {}

impl CoreAdaptive {
    /// A core with banks of `bank_frames` and every frame free except
    /// `used` (which the caller may free later through [`Self::free_seeded`]).
    pub fn new(
        start: u64,
        end: u64,
        bank_frames: u64,
        used: std::ops::Range<u64>,
    ) -> Result<CoreAdaptive, AdaptiveLayoutError> {
        if start >= end || end - start >= u64::from(u32::MAX) {
            return Err(AdaptiveLayoutError::BadRange { start, end });
        }
        if !bank_frames.is_power_of_two() || bank_frames < 1 << CORE_MAX_ORDER {
            return Err(AdaptiveLayoutError::BadBank(bank_frames));
        }
        // SAFETY: a valid layout; the harness owns what it allocates.
        let h = unsafe { ad_harness_new(start, end, bank_frames, used.start, used.end) };
        let h = NonNull::new(h).expect("out of memory for the core");
        Ok(CoreAdaptive {
            h,
            live: Live::default(),
        })
    }

    fn core(&self) -> *mut c_void {
        // SAFETY: `h` is live until drop.
        unsafe { ad_harness_core(self.h.as_ptr()) }
    }

    /// Allocate `2^order` frames for a kernel or a user request; `None`
    /// when nothing has room.
    pub fn alloc(&mut self, order: u8, kernel: bool) -> Result<Option<u64>, CoreError> {
        if order > CORE_MAX_ORDER {
            return Err(CoreError::BadOrder(order));
        }
        // SAFETY: live harness, valid order.
        let p = unsafe { ad_alloc(self.core(), c_uint::from(order), c_int::from(kernel)) };
        let got = (p != u64::MAX).then_some(p);
        if let Some(p) = got {
            self.live.handed(p, order);
        }
        Ok(got)
    }

    /// Free a block this core handed out.
    pub fn free(&mut self, pfn: u64, order: u8) -> Result<(), CoreError> {
        self.live.take(pfn, order)?;
        // SAFETY: the block was handed out by this core and not freed.
        expect_taken(unsafe { ad_free(self.core(), pfn, c_uint::from(order)) });
        Ok(())
    }

    /// Free a block straight into the core, without the harness's own
    /// bookkeeping: what the core says about it.
    pub fn free_raw(&mut self, pfn: u64, order: u8) -> CoreFree {
        // SAFETY: the core checks the block itself; that is what is tested.
        self.live.raw(pfn, unsafe {
            ad_free(self.core(), pfn, c_uint::from(order))
        })
    }

    /// The free block holding `pfn`: its first frame and order.
    pub fn free_block_of(&self, pfn: u64) -> Option<(u64, u8)> {
        let mut order: c_uint = 0;
        // SAFETY: live harness; the core checks the pfn.
        let head = unsafe { ad_free_block_of(self.core(), pfn, &mut order) };
        (head != u64::MAX).then_some((head, order as u8))
    }

    /// Take the free block holding `pfn` out of the core; it becomes live.
    pub fn take_block_of(&mut self, pfn: u64) -> Option<(u64, u8)> {
        let (head, order) = self.free_block_of(pfn)?;
        // SAFETY: (head, order) is a free block of this core.
        unsafe { ad_take_block(self.core(), head, c_uint::from(order)) };
        self.live.handed(head, order);
        Some((head, order))
    }

    /// Free blocks of exactly `order`.
    pub fn free_blocks(&self, order: u8) -> u64 {
        // SAFETY: live harness.
        unsafe { ad_nr_free_blocks(self.core(), c_uint::from(order)) }
    }

    /// Free a single frame of the range given as in use at creation, as
    /// the kernel frees boot-time memory into the core. A frame that is
    /// free already, or outside the range, is refused and changes nothing.
    pub fn free_seeded(&mut self, pfn: u64) -> Result<(), CoreError> {
        // SAFETY: the core checks the frame itself.
        match unsafe { ad_free(self.core(), pfn, 0) } {
            0 => Ok(()),
            _ => Err(CoreError::NotAllocated { pfn, order: 0 }),
        }
    }

    /// Every bank's free frames and role, in bank order.
    pub fn banks(&self) -> Vec<(u64, BankRole)> {
        // SAFETY: live harness; b below the bank count.
        unsafe {
            (0..ad_harness_banks(self.h.as_ptr()))
                .map(|b| {
                    let (mut free, mut role) = (0u64, 0 as c_int);
                    ad_harness_bank(self.h.as_ptr(), b, &mut free, &mut role);
                    let role = match role {
                        0 => BankRole::Offline,
                        1 => BankRole::Kernel,
                        _ => BankRole::User,
                    };
                    (free, role)
                })
                .collect()
        }
    }

    /// The core's counters.
    pub fn stats(&self) -> AdaptiveStats {
        // SAFETY: live harness; the struct layouts match.
        unsafe { *ad_harness_stats(self.h.as_ptr()) }
    }

    /// One migration pass as the kernel runs it (`mm/nvmos_policy.c`):
    /// `pinned[b]` says bank b holds something no migration can move; the
    /// core picks the candidates up to the break point and isolates them,
    /// each candidate's live blocks, in pfn order, get a target from
    /// `ad_alloc_migration_target` and are freed where they were, and the
    /// candidates' isolation ends. Live blocks follow their moves.
    /// `pinned` needs one flag per bank.
    pub fn migrate(&mut self, pinned: &[bool]) -> Result<CoreMigration, CoreError> {
        // SAFETY: live harness.
        let nbanks = unsafe { ad_harness_banks(self.h.as_ptr()) } as usize;
        if pinned.len() != nbanks {
            return Err(CoreError::BadPinned {
                got: pinned.len(),
                banks: nbanks,
            });
        }
        let flags: Vec<u8> = pinned.iter().map(|&p| u8::from(p)).collect();
        let mut out = vec![0u32; nbanks];
        // SAFETY: both arrays hold nbanks entries.
        let n = unsafe { ad_migration_candidates(self.core(), flags.as_ptr(), out.as_mut_ptr()) };
        out.truncate(n as usize);
        let mut m = CoreMigration {
            candidates: out.clone(),
            ..CoreMigration::default()
        };
        for &b in &out {
            // SAFETY: b is a bank of the core.
            unsafe { ad_isolate_bank(self.core(), b) };
        }
        for &b in &out {
            let mut blocks: Vec<(u64, u8)> = self
                .live
                .0
                .iter()
                // SAFETY: live blocks lie inside the core's range.
                .filter(|(&p, _)| unsafe { ad_bank_of(self.core(), p) } == b)
                .map(|(&p, &o)| (p, o))
                .collect();
            blocks.sort_unstable();
            for (old, order) in blocks {
                // SAFETY: live harness, valid order.
                let new = unsafe { ad_alloc_migration_target(self.core(), c_uint::from(order)) };
                if new == u64::MAX {
                    m.blocks_left += 1;
                    continue;
                }
                self.live.handed(new, order);
                self.free(old, order)?;
                m.moves.push((old, new, order));
            }
        }
        for &b in &out {
            // SAFETY: b was isolated above.
            m.banks_emptied += unsafe { ad_end_isolation(self.core(), b) } as u32;
        }
        Ok(m)
    }

    /// The highest order with a free block, -1 when none.
    pub fn max_free_order(&self) -> i32 {
        // SAFETY: live harness.
        unsafe { ad_max_free_order(self.core()) }
    }
}

impl Drop for CoreAdaptive {
    fn drop(&mut self) {
        // SAFETY: created by ad_harness_new, dropped once.
        unsafe { ad_harness_drop(self.h.as_ptr()) }
    }
}

#[repr(C)]
struct M3Harness {
    _opaque: [u8; 0],
}

/// `struct m3_stats` of `m3_core.h`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct M3Stats {
    /// Single frames handed out.
    pub alloc_single: u64,
    /// Of those, from outside the requesting CPU's colours.
    pub alloc_borrowed: u64,
    /// Blocks of order 1 or more handed out.
    pub alloc_blocks: u64,
    /// Their frames.
    pub alloc_block_frames: u64,
    /// Of those blocks, found around a random free frame.
    pub block_probe_hits: u64,
    /// Requests the core could not serve.
    pub alloc_failed: u64,
    /// Single-frame frees.
    pub free_single: u64,
    /// Frees of order 1 or more.
    pub free_blocks: u64,
    /// Their frames.
    pub free_block_frames: u64,
    /// Frames freed that the core had not handed out (loose).
    pub free_loose_frames: u64,
    /// Allocated blocks made loose for a free of a piece of them.
    pub loosened_blocks: u64,
    /// Free frames taken out of the core.
    pub taken_frames: u64,
}

extern "C" {
    #[allow(clippy::too_many_arguments)]
    fn m3_harness_new(
        start: u64,
        end: u64,
        cpus: u32,
        colours: u32,
        shift: u32,
        partition: c_int,
        seed: u64,
        used_start: u64,
        used_end: u64,
    ) -> *mut M3Harness;
    fn m3_harness_drop(h: *mut M3Harness);
    fn m3_harness_core(h: *mut M3Harness) -> *mut c_void;
    fn m3_harness_stats(h: *const M3Harness) -> *const M3Stats;
    fn m3_alloc(c: *mut c_void, order: c_uint, cpu: u32) -> u64;
    fn m3_free(c: *mut c_void, pfn: u64, order: c_uint) -> c_int;
    fn m3_loosen(c: *mut c_void, pfn: u64, order: c_uint) -> c_int;
    fn m3_frame_free(c: *const c_void, pfn: u64) -> c_int;
    fn m3_take_block(c: *mut c_void, pfn: u64, order: c_uint) -> c_int;
    fn m3_free_frames(c: *const c_void) -> u64;
    fn m3_colour_free(c: *const c_void, colour: u32) -> u32;
    fn m3_nr_free_blocks(c: *const c_void, order: c_uint) -> u64;
    fn m3_max_free_order(c: *const c_void) -> c_int;
    fn m3_colours_of(c: *const c_void, cpu: u32, first: *mut u32, end: *mut u32);
}

/// How an M3 core colours and places frames (`m3_init`'s parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct M3Config {
    /// CPUs allocating from the core.
    pub cpus: u32,
    /// Colours: a power of two, at most 256.
    pub colours: u32,
    /// A frame's colour is `(pfn >> shift) & (colours - 1)`.
    pub shift: u32,
    /// Give each CPU colours of its own.
    pub partition: bool,
    /// Seed of the core's generator.
    pub seed: u64,
}

/// Why [`CoreM3::new`] refused a layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum M3LayoutError {
    /// The range is empty or has more frames than a `u32` index holds.
    #[error("core [{start:#x}, {end:#x}) is empty or too large")]
    BadRange {
        /// First frame.
        start: u64,
        /// One past the last frame.
        end: u64,
    },
    /// Colours must be a power of two from 1 to 256.
    #[error("{0} colours: a power of two from 1 to 256")]
    BadColours(u32),
    /// At least one CPU.
    #[error("a core for no CPU")]
    NoCpu,
    /// A shift past a pfn's bits.
    #[error("colour shift {0} is above 63")]
    BadShift(u32),
}

/// The kernel's M3 core (`kernel/policy/m3_core.c`) over `[start, end)`:
/// every frame free (as nvmos-frames' M3 starts) or with a range already
/// in use (as the kernel hands a zone over).
pub struct CoreM3 {
    h: NonNull<M3Harness>,
    cpus: u32,
    /// Blocks handed out and not freed.
    live: Live,
}

// SAFETY: the harness is plain memory owned by this value alone.
unsafe impl Send for CoreM3 {}

impl CoreM3 {
    /// A core with every frame free except `used` (which the caller may
    /// free later, at any order, through [`Self::free_raw`]).
    pub fn new(
        start: u64,
        end: u64,
        config: M3Config,
        used: std::ops::Range<u64>,
    ) -> Result<CoreM3, M3LayoutError> {
        if start >= end || end - start >= u64::from(u32::MAX) {
            return Err(M3LayoutError::BadRange { start, end });
        }
        if !config.colours.is_power_of_two() || config.colours > 256 {
            return Err(M3LayoutError::BadColours(config.colours));
        }
        if config.cpus == 0 {
            return Err(M3LayoutError::NoCpu);
        }
        if config.shift > 63 {
            return Err(M3LayoutError::BadShift(config.shift));
        }
        // SAFETY: a valid layout; the harness owns what it allocates.
        let h = unsafe {
            m3_harness_new(
                start,
                end,
                config.cpus,
                config.colours,
                config.shift,
                c_int::from(config.partition),
                config.seed,
                used.start,
                used.end,
            )
        };
        let h = NonNull::new(h).expect("out of memory for the core");
        Ok(CoreM3 {
            h,
            cpus: config.cpus,
            live: Live::default(),
        })
    }

    fn core(&self) -> *mut c_void {
        // SAFETY: `h` is live until drop.
        unsafe { m3_harness_core(self.h.as_ptr()) }
    }

    /// Allocate `2^order` frames for `cpu`; `None` when the core has no
    /// such block.
    pub fn alloc(&mut self, order: u8, cpu: u32) -> Result<Option<u64>, CoreError> {
        if order > CORE_MAX_ORDER {
            return Err(CoreError::BadOrder(order));
        }
        if cpu >= self.cpus {
            return Err(CoreError::BadCpu {
                cpu,
                cpus: self.cpus,
            });
        }
        // SAFETY: live harness, valid order and CPU.
        let p = unsafe { m3_alloc(self.core(), c_uint::from(order), cpu) };
        let got = (p != u64::MAX).then_some(p);
        if let Some(p) = got {
            self.live.handed(p, order);
        }
        Ok(got)
    }

    /// Free a block this core handed out, at the order it was handed out.
    pub fn free(&mut self, pfn: u64, order: u8) -> Result<(), CoreError> {
        self.live.take(pfn, order)?;
        // SAFETY: the block was handed out by this core and not freed.
        expect_taken(unsafe { m3_free(self.core(), pfn, c_uint::from(order)) });
        Ok(())
    }

    /// Free a block straight into the core, without the harness's own
    /// bookkeeping: what the core says about it.
    pub fn free_raw(&mut self, pfn: u64, order: u8) -> CoreFree {
        // SAFETY: the core checks the block itself; that is what is tested.
        self.live.raw(pfn, unsafe {
            m3_free(self.core(), pfn, c_uint::from(order))
        })
    }

    /// Make the blocks the core handed out that overlap `(pfn, order)`
    /// loose, as the kernel does before freeing a piece of one; whether
    /// `(pfn, order)` can now be freed. Loosened blocks leave `live`.
    pub fn loosen(&mut self, pfn: u64, order: u8) -> bool {
        // SAFETY: the core checks the block itself.
        let ok = unsafe { m3_loosen(self.core(), pfn, c_uint::from(order)) } != 0;
        if ok {
            let end = pfn + (1u64 << order);
            self.live
                .0
                .retain(|&p, &mut o| p + (1u64 << o) <= pfn || p >= end);
        }
        ok
    }

    /// Take the wholly free block `(pfn, order)` out of the core, as the
    /// kernel hands frames back to Linux's buddy lists; whether it was
    /// wholly free. Its frames become loose (freed later at any order
    /// through [`Self::free_raw`]).
    pub fn take_block(&mut self, pfn: u64, order: u8) -> bool {
        // SAFETY: the core checks the block itself.
        unsafe { m3_take_block(self.core(), pfn, c_uint::from(order)) != 0 }
    }

    /// Whether `pfn` is free in the core.
    pub fn frame_free(&self, pfn: u64) -> bool {
        // SAFETY: live harness; out-of-range pfns read as not free.
        unsafe { m3_frame_free(self.core(), pfn) != 0 }
    }

    /// Free frames.
    pub fn free_frames(&self) -> u64 {
        // SAFETY: live harness.
        unsafe { m3_free_frames(self.core()) }
    }

    /// Free frames of `colour` (0 for a colour the core does not have).
    pub fn colour_free(&self, colour: u32) -> u32 {
        // SAFETY: live harness; the core checks the colour.
        unsafe { m3_colour_free(self.core(), colour) }
    }

    /// The colours `cpu` draws from first.
    pub fn colours_of(&self, cpu: u32) -> std::ops::Range<u32> {
        let (mut first, mut end) = (0u32, 0u32);
        // SAFETY: live harness; cpu reduced below the core's CPUs.
        unsafe { m3_colours_of(self.core(), cpu % self.cpus, &mut first, &mut end) };
        first..end
    }

    /// Maximal wholly free aligned blocks of exactly `order`, as buddy
    /// free lists would hold them.
    pub fn free_blocks(&self, order: u8) -> u64 {
        // SAFETY: live harness.
        unsafe { m3_nr_free_blocks(self.core(), c_uint::from(order)) }
    }

    /// The highest order with a wholly free aligned block, -1 when none.
    pub fn max_free_order(&self) -> i32 {
        // SAFETY: live harness.
        unsafe { m3_max_free_order(self.core()) }
    }

    /// The core's counters.
    pub fn stats(&self) -> M3Stats {
        // SAFETY: live harness; the struct layouts match.
        unsafe { *m3_harness_stats(self.h.as_ptr()) }
    }
}

impl Drop for CoreM3 {
    fn drop(&mut self) {
        // SAFETY: created by m3_harness_new, dropped once.
        unsafe { m3_harness_drop(self.h.as_ptr()) }
    }
}
