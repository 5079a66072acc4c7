//! The managed ranges and the lookup from a pfn to its zone.

use alloc::vec::Vec;

use crate::{AllocError, ConfigError, Order, Pfn, Zone};

/// Per-zone frame indices are `u32`, with `u32::MAX` kept as "none".
pub(crate) const MAX_ZONE_FRAMES: u64 = (u32::MAX - 1) as u64;

/// Validated zones, ascending and disjoint, with a dense index over their
/// frames (holes skipped) for per-frame arrays that span every zone.
#[derive(Clone, Debug)]
pub struct ZoneMap {
    zones: Vec<Zone>,
    /// `first_index[i]`: dense index of `zones[i].start`.
    first_index: Vec<u64>,
    frames: u64,
}

impl ZoneMap {
    /// Check the zones: at least one, none empty, ascending, disjoint, each
    /// addressable with a `u32` frame index.
    pub fn new(zones: &[Zone]) -> Result<ZoneMap, ConfigError> {
        if zones.is_empty() {
            return Err(ConfigError::NoMemory);
        }
        let mut first_index = Vec::with_capacity(zones.len());
        let mut frames = 0;
        for (index, zone) in zones.iter().enumerate() {
            if zone.end <= zone.start {
                return Err(ConfigError::EmptyZone {
                    index,
                    start: zone.start,
                    end: zone.end,
                });
            }
            if index > 0 && zone.start < zones[index - 1].end {
                return Err(ConfigError::Overlap {
                    index,
                    start: zone.start,
                    previous_end: zones[index - 1].end,
                });
            }
            if zone.frames() > MAX_ZONE_FRAMES {
                return Err(ConfigError::ZoneTooLarge {
                    index,
                    frames: zone.frames(),
                    max: MAX_ZONE_FRAMES,
                });
            }
            first_index.push(frames);
            frames += zone.frames();
        }
        Ok(ZoneMap {
            zones: zones.to_vec(),
            first_index,
            frames,
        })
    }

    /// The zones.
    #[inline]
    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    /// Frames in all zones.
    #[inline]
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The zone holding the whole block of `order` at `pfn`, or the error a
    /// free of that block gets: outside every zone, or misaligned.
    #[inline]
    pub fn zone_of_block(&self, pfn: Pfn, order: Order) -> Result<usize, AllocError> {
        let zone = self
            .zone_of(pfn)
            .filter(|&z| self.zones[z].contains_block(pfn, order))
            .ok_or(AllocError::OutOfRange { pfn, order })?;
        pfn.ensure_aligned(order)?;
        Ok(zone)
    }

    /// The zone holding `pfn`.
    #[inline]
    pub fn zone_of(&self, pfn: Pfn) -> Option<usize> {
        // Few zones (Linux has at most a handful): a linear scan beats a
        // binary search and keeps the common one-zone case to one compare.
        self.zones.iter().position(|z| z.contains(pfn))
    }

    /// Dense index of `pfn` over all zones, holes skipped.
    #[inline]
    pub fn dense_index(&self, pfn: Pfn) -> Option<usize> {
        let z = self.zone_of(pfn)?;
        Some((self.first_index[z] + (pfn.0 - self.zones[z].start.0)) as usize)
    }

    /// The pfn at a dense index.
    pub fn pfn_at(&self, index: u64) -> Pfn {
        let z = self.first_index.partition_point(|&first| first <= index) - 1;
        Pfn(self.zones[z].start.0 + (index - self.first_index[z]))
    }
}
