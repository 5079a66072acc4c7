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

/// A row of the table: which allocator, configured as in seed 000.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum AllocatorKind {
    /// (a) the standard buddy system.
    #[serde(rename = "buddy")]
    Buddy,
    /// (b) lazy buddy, batch 1.
    #[serde(rename = "LBS-1")]
    Lbs1,
    /// (c) lazy buddy, batch 31: the seed's baseline.
    #[serde(rename = "LBS-31")]
    Lbs31,
    /// (d) iBuddy, one buddy space per CPU.
    #[serde(rename = "iBuddy")]
    IBuddy,
    /// (e) lazy iBuddy, lists of one frame.
    #[serde(rename = "LiS-1")]
    Lis1,
    /// (f) lazy iBuddy, lists of 31 frames.
    #[serde(rename = "LiS-31")]
    Lis31,
    /// Lazy buddy with today's Linux pcp setting.
    #[serde(rename = "linux-pcp")]
    LinuxPcp,
    /// The crates.io peer.
    #[serde(rename = "bsa")]
    Bsa,
}

impl AllocatorKind {
    /// Every row, in table order.
    pub const ALL: [AllocatorKind; 8] = [
        AllocatorKind::Buddy,
        AllocatorKind::Lbs1,
        AllocatorKind::Lbs31,
        AllocatorKind::IBuddy,
        AllocatorKind::Lis1,
        AllocatorKind::Lis31,
        AllocatorKind::LinuxPcp,
        AllocatorKind::Bsa,
    ];

    /// The name `--alloc` takes and results carry: the registry's name for
    /// nvmos allocators.
    pub const fn name(self) -> &'static str {
        match self.nvmos() {
            Some(kind) => kind.name(),
            None => "bsa",
        }
    }

    /// The row label, with the seed's letter where it has one.
    pub const fn label(self) -> &'static str {
        match self {
            AllocatorKind::Buddy => "(a) buddy",
            AllocatorKind::Lbs1 => "(b) LBS-1",
            AllocatorKind::Lbs31 => "(c) LBS-31",
            AllocatorKind::IBuddy => "(d) iBuddy",
            AllocatorKind::Lis1 => "(e) LiS-1",
            AllocatorKind::Lis31 => "(f) LiS-31",
            AllocatorKind::LinuxPcp => "linux-pcp",
            AllocatorKind::Bsa => "bsa",
        }
    }

    /// The nvmos configuration behind the row; `None` for the peer.
    pub const fn nvmos(self) -> Option<nvmos_sim::AllocatorKind> {
        use nvmos_sim::AllocatorKind as K;
        Some(match self {
            AllocatorKind::Buddy => K::Buddy,
            AllocatorKind::Lbs1 => K::Lbs1,
            AllocatorKind::Lbs31 => K::Lbs31,
            AllocatorKind::IBuddy => K::IBuddy,
            AllocatorKind::Lis1 => K::Lis1,
            AllocatorKind::Lis31 => K::Lis31,
            AllocatorKind::LinuxPcp => K::LinuxPcp,
            AllocatorKind::Bsa => return None,
        })
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
        match (self.nvmos(), lock) {
            (Some(kind), LockKind::Spin) => kind
                .with::<SpinYield, _>(&zones, cpus, Run(job))
                .with_context(context)?,
            (Some(kind), LockKind::Parking) => kind
                .with::<parking_lot::RawMutex, _>(&zones, cpus, Run(job))
                .with_context(context)?,
            (None, LockKind::Spin) => job.run(&Bsa::<SpinYield>::new(frames)),
            (None, LockKind::Parking) => job.run(&Bsa::<parking_lot::RawMutex>::new(frames)),
        }
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
    fn run<A: FrameAllocator + 'static>(self, alloc: A) -> Self::Output {
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

impl FromStr for AllocatorKind {
    type Err = String;

    /// A row name, case-insensitive.
    fn from_str(text: &str) -> Result<Self, String> {
        let wanted = text.trim();
        AllocatorKind::ALL
            .into_iter()
            .find(|kind| kind.name().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| {
                let names: Vec<&str> = AllocatorKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown allocator '{text}': expected one of {}",
                    names.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_case_insensitively() {
        for kind in AllocatorKind::ALL {
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
