//! What can go wrong: building an allocator, asking it for frames, giving
//! them back, and checking its invariants.

use alloc::string::String;

use crate::{Order, Pfn};

/// Why an allocation or a free was refused. After any of these the
/// allocator's state is exactly what it was before the call.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// No free block of the requested order anywhere, after draining the
    /// per-CPU lists.
    #[error("out of memory: no free block of order {order}")]
    OutOfMemory {
        /// The order asked for.
        order: Order,
    },
    /// The request named a CPU the allocator was not built for.
    #[error("cpu {cpu} is out of range: the allocator serves cpus 0..{cpus}")]
    InvalidCpu {
        /// The CPU named.
        cpu: u32,
        /// How many CPUs the allocator serves.
        cpus: u32,
    },
    /// The block does not lie inside one managed zone.
    #[error("pfn {pfn} (order {order}) lies outside the managed ranges")]
    OutOfRange {
        /// First frame of the block.
        pfn: Pfn,
        /// Its order.
        order: Order,
    },
    /// The frame cannot start a block of this order.
    #[error("pfn {pfn} is not aligned to order {order}")]
    Misaligned {
        /// First frame of the block.
        pfn: Pfn,
        /// Its order.
        order: Order,
    },
    /// The frame was allocated as the start of a block before and has been
    /// freed since: freeing it again is a double free.
    #[error("double free: pfn {pfn} (order {order}) is already free")]
    DoubleFree {
        /// First frame of the block.
        pfn: Pfn,
        /// Its order.
        order: Order,
    },
    /// The frame is not the first frame of an allocated block: it was never
    /// handed out, or it lies inside a block that starts elsewhere.
    #[error("pfn {pfn} (order {order}) was never allocated as the start of a block")]
    NotAllocated {
        /// First frame of the block.
        pfn: Pfn,
        /// Its order.
        order: Order,
    },
    /// The block was allocated with another order.
    #[error("pfn {pfn} was allocated with order {allocated} but freed with order {order}")]
    WrongOrder {
        /// First frame of the block.
        pfn: Pfn,
        /// The order given to free.
        order: Order,
        /// The order it was allocated with.
        allocated: Order,
    },
}

/// Why an allocator could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// No zones, or only empty ones.
    #[error("no memory to manage: give at least one non-empty zone")]
    NoMemory,
    /// A zone ends before it starts.
    #[error("zone {index} is empty or reversed: [{start}, {end})")]
    EmptyZone {
        /// Position in the zone list.
        index: usize,
        /// Its start.
        start: Pfn,
        /// Its end.
        end: Pfn,
    },
    /// Zones overlap or are not in ascending order.
    #[error("zone {index} starts at {start}, inside or before the zone before it (which ends at {previous_end})")]
    Overlap {
        /// Position in the zone list.
        index: usize,
        /// Its start.
        start: Pfn,
        /// End of the previous zone.
        previous_end: Pfn,
    },
    /// A zone is larger than the per-zone frame index can address.
    #[error("zone {index} has {frames} frames; at most {max} are supported per zone")]
    ZoneTooLarge {
        /// Position in the zone list.
        index: usize,
        /// Its size.
        frames: u64,
        /// The limit.
        max: u64,
    },
    /// Zero CPUs, or more than supported.
    #[error("cpu count {cpus} is out of range 1..={max}")]
    Cpus {
        /// Given.
        cpus: u32,
        /// Limit.
        max: u32,
    },
    /// A bank (the power-management unit of the bank-aware allocators)
    /// must be at least one frame and divide every zone exactly.
    #[error("bank size of {bank_frames} frames does not divide zone {index} ({frames} frames): give a bank size that divides every zone")]
    BankSize {
        /// Position in the zone list.
        index: usize,
        /// The zone's size in frames.
        frames: u64,
        /// The bank size given, in frames.
        bank_frames: u64,
    },
    /// A policy parameter is out of range.
    #[error("invalid policy: {0}")]
    Policy(&'static str),
}

/// An invariant the allocator keeps does not hold: a bug in the allocator,
/// never the caller's fault. The text says which invariant and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invariant broken: {0}")]
pub struct ValidationError(pub String);

/// Return a [`ValidationError`] built with `format!` unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::ValidationError(alloc::format!($($fmt)+)));
        }
    };
}
pub(crate) use ensure;

/// Why [`crate::PerCpu::pin`] refused to hand out a CPU slot.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// The CPU is out of range.
    #[error("cpu {cpu} is out of range: the allocator serves cpus 0..{cpus}")]
    InvalidCpu {
        /// The CPU named.
        cpu: u32,
        /// How many CPUs the allocator serves.
        cpus: u32,
    },
    /// Another `PinnedCpu` holds the slot: one thread per CPU slot at a
    /// time.
    #[error("cpu {cpu}'s per-CPU list is already pinned by another handle")]
    Busy {
        /// The CPU named.
        cpu: u32,
    },
}
