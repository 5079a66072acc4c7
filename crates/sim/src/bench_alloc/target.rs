//! The allocators the benchmark compares, behind one small bench-local
//! trait so a peer that is not an nvmos allocator can run beside them.

use std::fmt;
use std::str::FromStr;

use nvmos_frames::sync::SpinYield;
use nvmos_frames::{
    AllocError, FrameAllocator, FreeOrder, MigrateType, Order, Pfn, Request, ValidationError, Zone,
};
use serde::{Deserialize, Serialize};

use super::BenchAllocError;
use crate::{AllocatorKind, Caps};

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
    fn validate(&self) -> Result<(), ValidationError>;
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

    fn validate(&self) -> Result<(), ValidationError> {
        FrameAllocator::validate(self)
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
/// 2^31 frames, far beyond any memory size the benchmark takes.
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

    fn validate(&self) -> Result<(), ValidationError> {
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
/// Serialised as its name (the registry's for nvmos allocators, `bsa`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BenchAllocator {
    /// An nvmos allocator.
    Nvmos(AllocatorKind),
    /// The crates.io peer.
    Bsa,
}

impl BenchAllocator {
    /// Every row the benchmark can time: the registry's allocators, in
    /// its order, then the peer.
    pub fn all() -> Vec<BenchAllocator> {
        AllocatorKind::ALL
            .into_iter()
            .map(BenchAllocator::Nvmos)
            .chain([BenchAllocator::Bsa])
            .collect()
    }

    /// The name options take and results carry: the registry's name for
    /// nvmos allocators.
    pub const fn name(self) -> &'static str {
        match self {
            BenchAllocator::Nvmos(kind) => kind.name(),
            BenchAllocator::Bsa => "bsa",
        }
    }

    /// The row label, with seed 000's letter where it has one.
    pub const fn label(self) -> &'static str {
        use AllocatorKind as K;
        match self {
            BenchAllocator::Nvmos(K::Buddy) => "(a) buddy",
            BenchAllocator::Nvmos(K::Lbs1) => "(b) LBS-1",
            BenchAllocator::Nvmos(K::Lbs31) => "(c) LBS-31",
            BenchAllocator::Nvmos(K::IBuddy) => "(d) iBuddy",
            BenchAllocator::Nvmos(K::Lis1) => "(e) LiS-1",
            BenchAllocator::Nvmos(K::Lis31) => "(f) LiS-31",
            other => other.name(),
        }
    }

    /// The nvmos configuration behind the row; `None` for the peer.
    pub const fn nvmos(self) -> Option<AllocatorKind> {
        match self {
            BenchAllocator::Nvmos(kind) => Some(kind),
            BenchAllocator::Bsa => None,
        }
    }

    /// What the registry says it can do; the peer is a plain buddy
    /// system (no capabilities).
    pub const fn caps(self) -> Caps {
        match self {
            BenchAllocator::Nvmos(kind) => kind.caps(),
            BenchAllocator::Bsa => Caps::NONE,
        }
    }

    /// Build the allocator over `frames` frames (one zone from pfn 0) for
    /// `cpus` CPUs with `lock` (and, iBuddy-based, `free_order`), and hand
    /// it to `job`.
    pub fn with_target<J: TargetJob>(
        self,
        frames: u64,
        cpus: u32,
        (lock, free_order): (LockKind, FreeOrder),
        job: J,
    ) -> Result<J::Output, BenchAllocError> {
        let zones = [Zone::new(0, frames)];
        let built = |source| BenchAllocError::Build {
            allocator: self.name(),
            frames,
            cpus,
            source,
        };
        // Banks as large as a memory section where they divide the memory.
        let setup = crate::Setup {
            bank_frames: gcd(frames, crate::DEFAULT_BANK_FRAMES),
            free_order,
            ..crate::Setup::new(&zones, cpus)
        };
        match (self.nvmos(), lock) {
            (Some(kind), LockKind::Spin) => {
                kind.with::<SpinYield, _>(&setup, Run(job)).map_err(built)?
            }
            (Some(kind), LockKind::Parking) => kind
                .with::<parking_lot::RawMutex, _>(&setup, Run(job))
                .map_err(built)?,
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
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockKind {
    /// `nvmos_frames::sync::SpinYield`: one CAS to lock, a store to
    /// unlock, yields after a short spin.
    #[default]
    Spin,
    /// `parking_lot`'s sleeping mutex.
    Parking,
}

impl LockKind {
    /// Its name.
    pub const fn name(self) -> &'static str {
        match self {
            LockKind::Spin => "spin",
            LockKind::Parking => "parking",
        }
    }
}

impl FromStr for LockKind {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        [LockKind::Spin, LockKind::Parking]
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| format!("unknown lock '{text}': expected spin or parking"))
    }
}

/// Adapts a `TargetJob` to the allocator registry's job.
struct Run<J>(J);

impl<J: TargetJob> crate::AllocatorJob for Run<J> {
    type Output = Result<J::Output, BenchAllocError>;
    fn run<A: crate::StudyAllocator + 'static>(self, alloc: A) -> Self::Output {
        self.0.run(&alloc)
    }
}

/// Work to do on a freshly built allocator, generic over its type so the
/// timed loops are monomorphised (no virtual call inside a measurement).
pub trait TargetJob {
    /// What the work returns.
    type Output;
    /// Do it.
    fn run<T: BenchTarget>(self, target: &T) -> Result<Self::Output, BenchAllocError>;
}

impl fmt::Display for BenchAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for BenchAllocator {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for BenchAllocator {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

impl FromStr for BenchAllocator {
    type Err = String;

    /// A registry name or alias, or `bsa`; case-insensitive.
    fn from_str(text: &str) -> Result<Self, String> {
        let wanted = text.trim();
        if wanted.eq_ignore_ascii_case("bsa") {
            return Ok(BenchAllocator::Bsa);
        }
        AllocatorKind::parse(wanted)
            .map(BenchAllocator::Nvmos)
            .ok_or_else(|| {
                format!(
                    "unknown allocator '{text}': expected one of {}, bsa",
                    AllocatorKind::names().join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_case_insensitively_and_round_trip() {
        for kind in BenchAllocator::all() {
            assert_eq!(
                kind.name().to_uppercase().parse::<BenchAllocator>(),
                Ok(kind)
            );
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(serde_json::from_str::<BenchAllocator>(&json).unwrap(), kind);
        }
        let err = "nosuch".parse::<BenchAllocator>().unwrap_err();
        assert!(err.contains("'nosuch'"), "{err}");
        assert!(serde_json::from_str::<BenchAllocator>("\"nosuch\"").is_err());
        assert_eq!("Parking".parse::<LockKind>(), Ok(LockKind::Parking));
        assert!("mutex".parse::<LockKind>().is_err());
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
