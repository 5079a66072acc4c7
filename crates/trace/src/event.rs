//! The events every trace source yields, and what a trace says about the
//! machine it was recorded on.

use nvmos_frames::{MigrateType, Order, Pfn};

/// What happened to a block of frames.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// `kmem:mm_page_alloc`: the kernel handed out the block, for data of
    /// this migratetype.
    Alloc(MigrateType),
    /// `kmem:mm_page_free` or `kmem:mm_page_free_batched`: the block came
    /// back.
    Free,
    /// A sampled write (`nvmos record --writes`): the frame at `pfn` was
    /// written by the recorded process tree at some time in the sampling
    /// interval that ends at the event's time (its soft-dirty bit was set).
    /// Always order 0 and CPU 0 (the sampler does not know the CPU). Only
    /// `.nvt` traces recorded with write sampling hold these; text traces
    /// never do.
    Write,
}

impl Op {
    /// Whether this is a sampled write rather than an allocator event.
    #[inline]
    pub fn is_write(self) -> bool {
        matches!(self, Op::Write)
    }
}

/// One page-allocator event, as the kernel traced it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Event {
    /// Nanoseconds since the first event of the trace.
    pub time_ns: u64,
    /// The CPU the event happened on.
    pub cpu: u32,
    /// Allocation or free.
    pub op: Op,
    /// First frame of the block.
    pub pfn: Pfn,
    /// Block size.
    pub order: Order,
}

/// One memory zone of the recorded machine, from `/proc/zoneinfo`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ZoneInfo {
    /// Node number.
    pub node: u32,
    /// Linux's zone name: DMA, DMA32, Normal, Movable, ...
    pub name: String,
    /// First frame (`start_pfn`).
    pub start_pfn: u64,
    /// Frames spanned, holes included (`spanned`).
    pub spanned: u64,
    /// Frames present (`present`).
    pub present: u64,
}

/// What a trace records about the machine and the recording.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MachineInfo {
    /// Bytes per page frame.
    pub page_size: u64,
    /// Bytes of memory (`MemTotal`).
    pub memory_bytes: u64,
    /// Online CPUs while recording.
    pub cpus: u32,
    /// Zones with frames (`spanned > 0`), ascending.
    pub zones: Vec<ZoneInfo>,
    /// `uname -r` of the recording kernel; empty when unknown.
    pub kernel: String,
    /// Frames backed by RAM (`System RAM` in `/proc/iomem`) as pfn ranges
    /// `[start, end)`, ascending. Zones span holes (the PCI hole below
    /// 4 GiB is inside DMA32); these say which frames exist. Empty when
    /// unknown: traces recorded before this field, or without root.
    #[serde(default)]
    pub ram: Vec<(u64, u64)>,
}
