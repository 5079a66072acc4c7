//! Counters every allocator reports.

use crate::{Order, ORDERS};

/// A snapshot of an allocator's free memory.
///
/// `free_blocks[k]` counts free blocks of order `k` in the buddy sense:
/// the decomposition of free memory into maximal aligned free blocks (for
/// [`crate::Buddy`] exactly its free lists; for [`crate::IBuddy`] the
/// largest fully free aligned blocks its bitmaps know). Frames on per-CPU
/// lists are free for the caller but allocated from the inner allocator's
/// point of view: they are counted in `pcp_frames`, not in `free_frames`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Stats {
    /// Frames the allocator manages in all zones.
    pub managed_frames: u64,
    /// Frames free in the allocator proper.
    pub free_frames: u64,
    /// Free blocks by order.
    pub free_blocks: [u64; ORDERS],
    /// Frames held on per-CPU lists.
    pub pcp_frames: u64,
}

impl Stats {
    /// Frames in the hands of callers.
    pub fn allocated_frames(&self) -> u64 {
        self.managed_frames - self.free_frames - self.pcp_frames
    }

    /// Free frames by order, `free_blocks[k] << k`, summed.
    pub fn free_frames_in_blocks(&self) -> u64 {
        self.free_blocks
            .iter()
            .enumerate()
            .map(|(order, &blocks)| blocks << order)
            .sum()
    }

    /// The largest order with a free block, if any.
    pub fn largest_free_order(&self) -> Option<Order> {
        (0..ORDERS)
            .rev()
            .find(|&k| self.free_blocks[k] > 0)
            .and_then(|k| Order::new(k as u8))
    }
}
