//! # nvmos-frames: page-frame allocators for storage-class memory
//!
//! The physical page allocators nvmos studies, as real concurrent data
//! structures behind one trait, [`FrameAllocator`]:
//!
//! - [`Buddy`]: Linux's binary buddy system: a `free_area` per order, blocks
//!   split on allocation and merged with their buddy on free, one lock per
//!   zone.
//! - [`PerCpu`]: a lazy layer of per-CPU lists in front of any allocator.
//!   With [`PcpPolicy::LinuxBulk`] it is Linux's `pcp` (bulk refill and
//!   drain, hot frames reused first): `PerCpu<Buddy>` is the lazy buddy
//!   system. With [`PcpPolicy::Bypass`] it is the lazy layer of iBuddy
//!   (single frames only, a short capped list), with [`PcpPolicy::Staged`]
//!   the fair lazy layer that keeps iBuddy's reuse order. A thread that
//!   owns a CPU ([`PerCpu::pin`]) gets a [`PinnedCpu`] whose list hits take
//!   no lock and make no atomic read-modify-write.
//! - [`IBuddy`]: the inverse buddy system of seed 000: free frames kept
//!   individually in the order they were freed, coalescing deferred to the
//!   multi-frame requests that need it, per-core buddy spaces with their
//!   own locks. Single-frame allocation and free are O(1), and frames are
//!   reused least recently freed first so SCM wear evens out. A
//!   single-frame free takes no space lock: it claims the frame's handed
//!   bit and is buffered per CPU, applied in batches in the order frees
//!   were accepted, so callers see the same frames as with immediate
//!   frees ([`FreeOrder::Accepted`], the default), or, with
//!   [`FreeOrder::PerCpu`], one CPU's buffer after another, which spares
//!   concurrent callers the write every freeing CPU shares.
//! - [`M3`]: the bank-aware allocator of seed 002: frames at random across
//!   the banks (colours the caller computes from a memory model),
//!   optionally with the colours partitioned among the CPUs.
//! - [`BankBuddy`]: the power-aware allocators of seed 004, which keep
//!   allocations on as few memory banks as possible so the rest can be
//!   powered down: the Array-based and List-based Bank-Buddy and the
//!   Adaptive-Buddy ([`BankPolicy`]), with migration of movable pages out
//!   of sparsely used banks ([`BankBuddy::migrate`]).
//!
//! The crate is `no_std` + `alloc`. Locks come in through [`lock_api`]: a
//! kernel plugs in its spin lock, user space a sleeping mutex such as
//! `parking_lot::RawMutex` or, with the `std` feature, the cheaper
//! `sync::SpinYield` that yields instead of spinning on a descheduled
//! holder.
//!
//! ```
//! use nvmos_frames::{Buddy, FrameAllocator, IBuddy, MigrateType, Order, PcpPolicy, PerCpu, Request, Zone};
//! type Lock = parking_lot::RawMutex;
//!
//! // 64 MiB in two zones with a hole between them, two CPUs.
//! let zones = [Zone::new(0x100, 0x2000), Zone::new(0x3000, 0x4200)];
//! let lazy_ibuddy = PerCpu::<_, Lock>::new(IBuddy::<Lock>::new(&zones, 2)?, PcpPolicy::LIS_31)?;
//! let lazy_buddy = PerCpu::<_, Lock>::new(Buddy::<Lock>::new(&zones, 2)?, PcpPolicy::LBS_31)?;
//!
//! for alloc in [&lazy_ibuddy as &dyn FrameAllocator, &lazy_buddy] {
//!     let req = Request::new(Order::new(2).unwrap(), 1, MigrateType::Unmovable);
//!     let pfn = alloc.alloc(req)?;
//!     assert!(pfn.is_aligned(req.order));
//!     alloc.free(pfn, req)?;
//!     // A second free of the same block is refused and changes nothing.
//!     assert!(alloc.free(pfn, req).is_err());
//!     alloc.validate()?;
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![no_std]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(any(test, feature = "std"))]
extern crate std;

mod bankbuddy;
mod bitmap;
mod buddy;
mod error;
mod ibuddy;
mod m3;
mod meta;
mod percpu;
mod stats;
#[cfg(any(test, feature = "std"))]
pub mod sync;
mod types;
mod zones;

pub use bankbuddy::{BankBuddy, BankPolicy, BankRole, BankUsage, MigrateError, Migration, Move};
pub use buddy::Buddy;
pub use error::{AllocError, ConfigError, PinError, ValidationError};
pub use ibuddy::{FreeOrder, IBuddy};
pub use m3::{M3Policy, M3};
pub use percpu::{PcpPolicy, PerCpu, PinnedCpu};
pub use stats::Stats;
pub use types::{InvalidOrder, MigrateType, Order, Pfn, Request, Zone, MAX_ORDER, ORDERS};
pub use zones::ZoneMap;

/// The most CPUs an allocator can be built for.
pub const MAX_CPUS: u32 = 1024;

/// A physical page-frame allocator.
///
/// # Contract
///
/// - **Blocks.** `alloc` returns the first frame of a block of
///   `2^req.order` frames that lies inside one managed zone, is aligned to
///   its order in absolute pfn terms, and overlaps no block handed out and
///   not yet freed. The block stays the caller's until it passes the same
///   pfn and order to `free`.
/// - **Errors leave no trace.** Every refused call ([`AllocError`]) leaves
///   the allocator exactly as it was. `alloc` fails only with
///   [`AllocError::OutOfMemory`] (when no free block of the order exists,
///   after draining any lazy layer) or [`AllocError::InvalidCpu`]. `free`
///   checks the block and refuses, each with its own variant, a frame
///   outside the managed ranges, one misaligned for its order, a double
///   free, a frame never allocated as the start of a block, and a free with
///   the wrong order.
/// - **Concurrency.** Every method takes `&self`; the allocator does its
///   own locking, so one object serves single-threaded replay and
///   multi-threaded benchmarks alike. `req.cpu` selects per-CPU state; any
///   thread may name any CPU, and frames may be freed on another CPU than
///   the one that allocated them.
/// - **Checking.** `validate` checks every invariant the allocator keeps
///   and returns the first one broken. It takes the allocator's locks, but
///   a lazy layer's cross-checks, and iBuddy's check of its handed bits
///   against its records, assume no other call is in flight.
pub trait FrameAllocator: Send + Sync {
    /// Allocate a block of `2^req.order` frames.
    fn alloc(&self, req: Request) -> Result<Pfn, AllocError>;

    /// Give back the block of `2^req.order` frames starting at `pfn`.
    fn free(&self, pfn: Pfn, req: Request) -> Result<(), AllocError>;

    /// What `free(pfn, order)` would answer, without freeing anything:
    /// `Ok(())` when the block is allocated with exactly this order.
    fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError>;

    /// Allocate up to `out.len()` blocks of `req.order` into `out` and
    /// return how many were allocated: fewer when memory runs out, none
    /// when `alloc` would refuse the request itself (a bad CPU).
    /// Allocators override it to take their lock once for the whole batch,
    /// as Linux's `rmqueue_bulk` does.
    fn alloc_bulk(&self, req: Request, out: &mut [Pfn]) -> usize {
        for (n, slot) in out.iter_mut().enumerate() {
            match self.alloc(req) {
                Ok(pfn) => *slot = pfn,
                Err(_) => return n,
            }
        }
        out.len()
    }

    /// Free every block in `blocks`, all of `req.order`, in order. Stops at
    /// the first refused block and returns its index and the error; the
    /// blocks before it are freed, the rest untouched.
    fn free_bulk(&self, blocks: &[Pfn], req: Request) -> Result<(), (usize, AllocError)> {
        for (n, &pfn) in blocks.iter().enumerate() {
            self.free(pfn, req).map_err(|e| (n, e))?;
        }
        Ok(())
    }

    /// `free_bulk` of single frames whose double-free check the caller has
    /// done already: a lazy layer giving back frames whose own mark it
    /// claimed.
    ///
    /// The caller vouches that every block is an order-0 block it got from
    /// this allocator and owns exclusively until the call returns: it
    /// appears once in `blocks`, and no other call frees or names it in
    /// the meantime (for [`PerCpu`] this holds because a free of one of
    /// its frames must first claim the frame's mark, and a frame being
    /// given back has no `HANDED` mark, so a racing or repeated free is
    /// refused by the layer before it reaches this allocator). An
    /// allocator may then skip the tests only a repeated or racing free
    /// could fail. What a caller breaking the contract gets is the
    /// allocator's to document (iBuddy: refused as by `free_bulk` in debug
    /// builds; in release builds corrupted records, which `validate`
    /// reports). Default: `free_bulk`.
    fn free_bulk_vouched(&self, blocks: &[Pfn], req: Request) -> Result<(), (usize, AllocError)> {
        self.free_bulk(blocks, req)
    }

    /// A hint: the block at `pfn` will be freed soon. An allocator may
    /// start loading what `free` will read for it into the cache; nothing
    /// changes and nothing is checked (any `pfn` is allowed). A replay
    /// that knows its next frees ahead calls it. Default: nothing.
    #[inline]
    fn prefetch_free(&self, pfn: Pfn) {
        let _ = pfn;
    }

    /// The lock a free of the single frame `pfn` takes (iBuddy: its buddy
    /// space's), a number below [`FrameAllocator::lock_groups`]. A caller
    /// giving many frames back at once groups them by it, so that
    /// `free_bulk` takes each lock once, and keeps their order within a
    /// group. Any `pfn` is allowed; a value at or above `lock_groups` is
    /// read as the last group. Default: 0, one lock.
    #[inline]
    fn lock_group(&self, pfn: Pfn) -> u32 {
        let _ = pfn;
        0
    }

    /// How many values [`FrameAllocator::lock_group`] takes. Default: 1.
    fn lock_groups(&self) -> u32 {
        1
    }

    /// Give frames held in lazy per-CPU lists back to the allocator proper
    /// (Linux's `drain_all_pages`). Allocators without such lists do
    /// nothing.
    fn drain(&self) {}

    /// Counters: free frames by order, frames held in per-CPU lists.
    fn stats(&self) -> Stats;

    /// Check every invariant; the first broken one is the error.
    fn validate(&self) -> Result<(), ValidationError>;

    /// The managed ranges, ascending, as given at construction.
    fn zones(&self) -> &[Zone];

    /// Number of CPUs the allocator serves; `req.cpu` is below it.
    fn cpus(&self) -> u32;

    /// Bytes of bookkeeping the allocator keeps for the memory it manages
    /// (per-frame arrays, bitmaps, lists), not counting the frames.
    fn metadata_bytes(&self) -> usize;
}

/// Check the CPU of a request against the allocator's CPU count.
#[inline]
pub(crate) fn check_cpu(req: Request, cpus: u32) -> Result<(), AllocError> {
    if req.cpu < cpus {
        Ok(())
    } else {
        Err(AllocError::InvalidCpu { cpu: req.cpu, cpus })
    }
}

/// Check a CPU count given at construction.
pub(crate) fn check_cpus(cpus: u32) -> Result<(), ConfigError> {
    if (1..=MAX_CPUS).contains(&cpus) {
        Ok(())
    } else {
        Err(ConfigError::Cpus {
            cpus,
            max: MAX_CPUS,
        })
    }
}

/// Forward the trait through references and boxes, so wrappers such as
/// [`PerCpu`] can hold either.
macro_rules! forward_frame_allocator {
    ($($ty:ty),*) => {$(
        impl<A: FrameAllocator + ?Sized> FrameAllocator for $ty {
            fn alloc(&self, req: Request) -> Result<Pfn, AllocError> { (**self).alloc(req) }
            fn free(&self, pfn: Pfn, req: Request) -> Result<(), AllocError> { (**self).free(pfn, req) }
            fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError> { (**self).check_free(pfn, order) }
            fn alloc_bulk(&self, req: Request, out: &mut [Pfn]) -> usize { (**self).alloc_bulk(req, out) }
            fn free_bulk(&self, blocks: &[Pfn], req: Request) -> Result<(), (usize, AllocError)> { (**self).free_bulk(blocks, req) }
            fn free_bulk_vouched(&self, blocks: &[Pfn], req: Request) -> Result<(), (usize, AllocError)> { (**self).free_bulk_vouched(blocks, req) }
            fn prefetch_free(&self, pfn: Pfn) { (**self).prefetch_free(pfn) }
            fn lock_group(&self, pfn: Pfn) -> u32 { (**self).lock_group(pfn) }
            fn lock_groups(&self) -> u32 { (**self).lock_groups() }
            fn drain(&self) { (**self).drain() }
            fn stats(&self) -> Stats { (**self).stats() }
            fn validate(&self) -> Result<(), ValidationError> { (**self).validate() }
            fn zones(&self) -> &[Zone] { (**self).zones() }
            fn cpus(&self) -> u32 { (**self).cpus() }
            fn metadata_bytes(&self) -> usize { (**self).metadata_bytes() }
        }
    )*};
}
forward_frame_allocator!(&A, alloc::boxed::Box<A>, alloc::sync::Arc<A>);

/// Starts loading the cache line at `addr` (a hint: it reads nothing the
/// program sees, cannot fault, and any address is allowed).
#[inline]
pub(crate) fn prefetch_addr(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it dereferences nothing and
    // cannot fault, whatever the address.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(addr as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

/// Pads and aligns a value to a cache line so per-CPU and per-space state
/// of different CPUs never shares one (false sharing).
#[derive(Default, Debug)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub T);

impl<T> core::ops::Deref for CachePadded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}
