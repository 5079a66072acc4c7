//! The allocators the benchmark compares, behind one small bench-local
//! trait so a peer that is not an nvmos allocator can run beside them.

use std::fmt;
use std::str::FromStr;

use anyhow::{Context, Result};
use nvmos_frames::sync::SpinYield;
use nvmos_frames::{AllocError, FrameAllocator, MigrateType, Order, Pfn, Request, Zone};
use serde::Serialize;

/// What the benchmark needs from an allocator.
///
/// Not nvmos's `FrameAllocator`: the peer (`bsa`) does not check frees, so
/// it cannot keep that trait's contract; here it only has to allocate and
/// free. Every nvmos allocator gets this trait through a blanket impl.
pub trait BenchTarget: Send + Sync {
    /// Allocate a block of `order` for `cpu`; the first pfn, or why not.
    fn alloc(&self, order: Order, cpu: u32) -> Result<u64, AllocError>;
    /// Free the block of `order` at `pfn` on `cpu`. A refusal is a bug in
    /// the benchmark or the allocator: callers count and report it.
    fn free(&self, pfn: u64, order: Order, cpu: u32) -> Result<(), AllocError>;
    /// Check the allocator's invariants, where it can.
    fn validate(&self) -> Result<()>;
    /// Frames in callers' hands, where the allocator counts them.
    fn allocated_frames(&self) -> Option<u64>;
    /// Bookkeeping bytes, where the allocator reports them.
    fn metadata_bytes(&self) -> Option<u64>;
}

impl<A: FrameAllocator> BenchTarget for A {
    #[inline]
    fn alloc(&self, order: Order, cpu: u32) -> Result<u64, AllocError> {
        FrameAllocator::alloc(self, Request::new(order, cpu, MigrateType::Movable)).map(Pfn::get)
    }

    #[inline]
    fn free(&self, pfn: u64, order: Order, cpu: u32) -> Result<(), AllocError> {
        FrameAllocator::free(
            self,
            Pfn(pfn),
            Request::new(order, cpu, MigrateType::Movable),
        )
    }

    fn validate(&self) -> Result<()> {
        Ok(FrameAllocator::validate(self)?)
    }

    fn allocated_frames(&self) -> Option<u64> {
        Some(self.stats().allocated_frames())
    }

    fn metadata_bytes(&self) -> Option<u64> {
        Some(FrameAllocator::metadata_bytes(self) as u64)
    }
}

/// The peer: `buddy_system_allocator`'s frame allocator (rCore's), one
/// global lock of the same kind the nvmos allocators get. Blocks up to
/// 2^31 frames, far beyond any `--memory`.
pub struct Bsa<L: lock_api::RawMutex> {
    inner: lock_api::Mutex<L, buddy_system_allocator::FrameAllocator<32>>,
}

impl<L: lock_api::RawMutex> Bsa<L> {
    /// All of `[0, frames)` free.
    pub fn new(frames: u64) -> Self {
        let mut inner = buddy_system_allocator::FrameAllocator::<32>::new();
        inner.add_frame(0, frames as usize);
        Bsa {
            inner: lock_api::Mutex::new(inner),
        }
    }
}

impl<L: lock_api::RawMutex + Send + Sync> BenchTarget for Bsa<L> {
    #[inline]
    fn alloc(&self, order: Order, _cpu: u32) -> Result<u64, AllocError> {
        self.inner
            .lock()
            .alloc(1 << order.get())
            .map(|pfn| pfn as u64)
            .ok_or(AllocError::OutOfMemory { order })
    }

    #[inline]
    fn free(&self, pfn: u64, order: Order, _cpu: u32) -> Result<(), AllocError> {
        self.inner.lock().dealloc(pfn as usize, 1 << order.get());
        Ok(())
    }

    fn validate(&self) -> Result<()> {
        Ok(())
    }

    fn allocated_frames(&self) -> Option<u64> {
        None
    }

    fn metadata_bytes(&self) -> Option<u64> {
        None
    }
}

/// A row of the table: an allocator of nvmos's registry, or the peer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AllocatorKind {
    /// An nvmos allocator.
    Nvmos(nvmos_sim::AllocatorKind),
    /// The crates.io peer.
    Bsa,
}

impl AllocatorKind {
    /// Every row the benchmark can time: the registry's allocators, then
    /// the peer.
    #[cfg(test)]
    pub fn all() -> Vec<AllocatorKind> {
        nvmos_sim::AllocatorKind::ALL
            .into_iter()
            .map(AllocatorKind::Nvmos)
            .chain([AllocatorKind::Bsa])
            .collect()
    }

    /// The name `--alloc` takes and results carry: the registry's name for
    /// nvmos allocators.
    pub const fn name(self) -> &'static str {
        match self {
            AllocatorKind::Nvmos(kind) => kind.name(),
            AllocatorKind::Bsa => "bsa",
        }
    }

    /// The row label, with seed 000's letter where it has one.
    pub const fn label(self) -> &'static str {
        use nvmos_sim::AllocatorKind as K;
        match self {
            AllocatorKind::Nvmos(K::Buddy) => "(a) buddy",
            AllocatorKind::Nvmos(K::Lbs1) => "(b) LBS-1",
            AllocatorKind::Nvmos(K::Lbs31) => "(c) LBS-31",
            AllocatorKind::Nvmos(K::IBuddy) => "(d) iBuddy",
            AllocatorKind::Nvmos(K::Lis1) => "(e) LiS-1",
            AllocatorKind::Nvmos(K::Lis31) => "(f) LiS-31",
            other => other.name(),
        }
    }

    /// The nvmos configuration behind the row; `None` for the peer.
    pub const fn nvmos(self) -> Option<nvmos_sim::AllocatorKind> {
        match self {
            AllocatorKind::Nvmos(kind) => Some(kind),
            AllocatorKind::Bsa => None,
        }
    }

    /// Build the allocator over `frames` frames (one zone from pfn 0) for
    /// `cpus` CPUs with `lock`, and hand it to `job`.
    pub fn with_target<J: TargetJob>(
        self,
        frames: u64,
        cpus: u32,
        lock: LockKind,
        job: J,
    ) -> Result<J::Output> {
        let zones = [Zone::new(0, frames)];
        let context = || {
            format!(
                "building {} over {frames} frames for {cpus} cpus",
                self.name()
            )
        };
        // Banks as large as a memory section where they divide the memory.
        let setup = nvmos_sim::Setup {
            bank_frames: gcd(frames, nvmos_sim::DEFAULT_BANK_FRAMES),
            ..nvmos_sim::Setup::new(&zones, cpus)
        };
        match (self.nvmos(), lock) {
            (Some(kind), LockKind::Spin) => kind
                .with::<SpinYield, _>(&setup, Run(job))
                .with_context(context)?,
            (Some(kind), LockKind::Parking) => kind
                .with::<parking_lot::RawMutex, _>(&setup, Run(job))
                .with_context(context)?,
            (None, LockKind::Spin) => job.run(&Bsa::<SpinYield>::new(frames)),
            (None, LockKind::Parking) => job.run(&Bsa::<parking_lot::RawMutex>::new(frames)),
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a.max(1)
    } else {
        gcd(b, a % b)
    }
}

/// Which lock every allocator (and the peer) is built with.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LockKind {
    /// `nvmos_frames::sync::SpinYield`: one CAS to lock, a store to
    /// unlock, yields after a short spin.
    Spin,
    /// `parking_lot`'s sleeping mutex.
    Parking,
}

/// Adapts a `TargetJob` to the allocator registry's job.
struct Run<J>(J);

impl<J: TargetJob> nvmos_sim::AllocatorJob for Run<J> {
    type Output = Result<J::Output>;
    fn run<A: nvmos_sim::StudyAllocator + 'static>(self, alloc: A) -> Self::Output {
        self.0.run(&alloc)
    }
}

/// Work to do on a freshly built allocator, generic over its type so the
/// timed loops are monomorphised (no virtual call inside a measurement).
pub trait TargetJob {
    /// What the work returns.
    type Output;
    /// Do it.
    fn run<T: BenchTarget>(self, target: &T) -> Result<Self::Output>;
}

impl fmt::Display for AllocatorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for AllocatorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl FromStr for AllocatorKind {
    type Err = String;

    /// A registry name or alias, or `bsa`; case-insensitive.
    fn from_str(text: &str) -> Result<Self, String> {
        let wanted = text.trim();
        if wanted.eq_ignore_ascii_case("bsa") {
            return Ok(AllocatorKind::Bsa);
        }
        nvmos_sim::AllocatorKind::parse(wanted)
            .map(AllocatorKind::Nvmos)
            .ok_or_else(|| {
                format!(
                    "unknown allocator '{text}': expected one of {}, bsa",
                    nvmos_sim::AllocatorKind::names().join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_case_insensitively() {
        for kind in AllocatorKind::all() {
            assert_eq!(
                kind.name().to_uppercase().parse::<AllocatorKind>(),
                Ok(kind)
            );
        }
        let err = "nosuch".parse::<AllocatorKind>().unwrap_err();
        assert!(err.contains("'nosuch'"), "{err}");
    }

    #[test]
    fn the_peer_allocates_aligned_blocks() {
        let bsa = Bsa::<parking_lot::RawMutex>::new(64);
        let order = Order::new(3).unwrap();
        let pfn = bsa.alloc(order, 0).unwrap();
        assert_eq!(pfn % 8, 0);
        bsa.free(pfn, order, 0).unwrap();
        assert!(bsa.alloc(Order::new(7).unwrap(), 0).is_err());
    }
}
