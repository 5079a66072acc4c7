//! The vocabulary every allocator speaks: page frame numbers, orders,
//! migratetypes, requests and zones.

use core::fmt;

/// The largest order an allocator hands out: blocks of up to
/// `2^MAX_ORDER` frames (4 MiB with 4 KiB frames), as Linux's
/// `MAX_PAGE_ORDER` (formerly `MAX_ORDER - 1`).
pub const MAX_ORDER: u8 = 10;

/// The number of distinct orders, `0..=MAX_ORDER`.
pub const ORDERS: usize = MAX_ORDER as usize + 1;

/// A page frame number: a physical address divided by the page size.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Pfn(pub u64);

impl Pfn {
    /// The frame number as an integer.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// Whether a block of `order` may start at this frame.
    #[inline]
    pub const fn is_aligned(self, order: Order) -> bool {
        self.0 & (order.frames() - 1) == 0
    }

    /// `Ok` when a block of `order` may start here, else the error a free
    /// of such a block gets.
    #[inline]
    pub fn ensure_aligned(self, order: Order) -> Result<(), crate::AllocError> {
        if self.is_aligned(order) {
            Ok(())
        } else {
            Err(crate::AllocError::Misaligned { pfn: self, order })
        }
    }
}

impl fmt::Display for Pfn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::LowerHex for Pfn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// A block size as a power of two frames, `0..=MAX_ORDER`.
///
/// An `Order` can only be built in range, so allocators never see an
/// impossible order; parsers turn a bad one into their own error.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "u8", into = "u8")
)]
pub struct Order(u8);

impl TryFrom<u8> for Order {
    type Error = InvalidOrder;
    fn try_from(order: u8) -> Result<Order, InvalidOrder> {
        Order::new(order).ok_or(InvalidOrder(order))
    }
}

impl From<Order> for u8 {
    fn from(order: Order) -> u8 {
        order.0
    }
}

/// An order above `MAX_ORDER`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("order {0} is above the largest order {MAX_ORDER}")]
pub struct InvalidOrder(pub u8);

impl Order {
    /// A single frame.
    pub const ZERO: Order = Order(0);
    /// The largest block, `2^MAX_ORDER` frames.
    pub const MAX: Order = Order(MAX_ORDER);

    /// `Some(order)` when `order <= MAX_ORDER`.
    #[inline]
    pub const fn new(order: u8) -> Option<Order> {
        if order <= MAX_ORDER {
            Some(Order(order))
        } else {
            None
        }
    }

    /// The order as an integer.
    #[inline]
    pub const fn get(self) -> u8 {
        self.0
    }

    /// The order as an index into per-order arrays.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The number of frames in a block of this order.
    #[inline]
    pub const fn frames(self) -> u64 {
        1 << self.0
    }

    /// Every order from 0 to `MAX_ORDER`.
    pub fn all() -> impl DoubleEndedIterator<Item = Order> + ExactSizeIterator {
        (0..=MAX_ORDER).map(Order)
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What the frames will hold, as Linux's migratetypes: it decides whether
/// the frames may later be moved (compaction, power-aware migration).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum MigrateType {
    /// Kernel data that stays where it is (`MIGRATE_UNMOVABLE`).
    Unmovable,
    /// User pages and page cache that may be migrated (`MIGRATE_MOVABLE`).
    #[default]
    Movable,
    /// Caches the kernel can drop to reclaim them (`MIGRATE_RECLAIMABLE`).
    Reclaimable,
}

impl MigrateType {
    /// Every migratetype, in Linux's numbering order.
    pub const ALL: [MigrateType; 3] = [
        MigrateType::Unmovable,
        MigrateType::Movable,
        MigrateType::Reclaimable,
    ];

    /// Linux's name for it, as tracepoints print it.
    pub const fn name(self) -> &'static str {
        match self {
            MigrateType::Unmovable => "unmovable",
            MigrateType::Movable => "movable",
            MigrateType::Reclaimable => "reclaimable",
        }
    }
}

/// One allocation or free: how many frames, on behalf of which CPU, for
/// what kind of data. The caller names the CPU because the allocator
/// cannot know which one it runs on (user space, replay of a trace).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Request {
    /// Block size.
    pub order: Order,
    /// The CPU asking, `0..allocator.cpus()`.
    pub cpu: u32,
    /// What the frames hold.
    pub kind: MigrateType,
}

impl Request {
    /// A request for a block of `order` on `cpu`.
    #[inline]
    pub const fn new(order: Order, cpu: u32, kind: MigrateType) -> Request {
        Request { order, cpu, kind }
    }

    /// A movable single frame on `cpu`: the common case.
    #[inline]
    pub const fn single(cpu: u32) -> Request {
        Request::new(Order::ZERO, cpu, MigrateType::Movable)
    }

    /// The same request with another order.
    #[inline]
    pub const fn with_order(self, order: Order) -> Request {
        Request { order, ..self }
    }
}

/// A range of managed frames, `[start, end)`. Zones may start and end at
/// any frame; blocks are aligned to their order in absolute pfn terms, as
/// in Linux, so a zone's unaligned edges hold only smaller blocks.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Zone {
    /// First frame of the zone.
    pub start: Pfn,
    /// One past the last frame.
    pub end: Pfn,
}

impl Zone {
    /// The zone `[start, end)`.
    pub const fn new(start: u64, end: u64) -> Zone {
        Zone {
            start: Pfn(start),
            end: Pfn(end),
        }
    }

    /// Number of frames in the zone.
    #[inline]
    pub const fn frames(&self) -> u64 {
        self.end.0 - self.start.0
    }

    /// Whether the whole block of `order` at `pfn` lies inside the zone.
    #[inline]
    pub const fn contains_block(&self, pfn: Pfn, order: Order) -> bool {
        pfn.0 >= self.start.0 && pfn.0 + order.frames() <= self.end.0
    }

    /// Whether `pfn` lies inside the zone.
    #[inline]
    pub const fn contains(&self, pfn: Pfn) -> bool {
        pfn.0 >= self.start.0 && pfn.0 < self.end.0
    }
}
