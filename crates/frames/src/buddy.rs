//! Linux's binary buddy system (`mm/page_alloc.c`), one lock per zone.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use lock_api::{Mutex, RawMutex};

use crate::error::ensure;
use crate::meta::{check_block_free, FrameList, FrameMeta, Kind};
use crate::{
    check_cpu, check_cpus, AllocError, CachePadded, ConfigError, FrameAllocator, Order, Pfn,
    Request, Stats, ValidationError, Zone, ZoneMap, MAX_ORDER, ORDERS,
};

/// The binary buddy allocator.
///
/// Each zone has a `free_area` per order: a list of free blocks of that
/// order. An allocation takes the smallest free block that fits and splits
/// it, putting the upper halves on the lower orders' lists (Linux's
/// `expand`); a free merges the block with its buddy, `pfn ^ (1 << order)`,
/// for as long as the buddy is free and whole, up to `MAX_ORDER`. Zones are
/// tried from the highest to the lowest, as Linux's zonelist does.
///
/// Invariants (checked by `validate`): the free blocks and the allocated
/// blocks tile every zone; each free block is on the list of its order
/// exactly once; no free block has a free buddy of the same order in the
/// zone (it would have merged); each list's length is its count.
pub struct Buddy<R: RawMutex> {
    map: ZoneMap,
    areas: Box<[CachePadded<Mutex<R, ZoneArea>>]>,
    cpus: u32,
}

/// One zone's free areas and per-frame metadata, under the zone lock.
struct ZoneArea {
    zone: Zone,
    meta: Vec<FrameMeta>,
    free_area: [FrameList; ORDERS],
}

impl<R: RawMutex> Buddy<R> {
    /// A buddy allocator over `zones` (ascending, disjoint) serving `cpus`
    /// CPUs, with all memory free.
    pub fn new(zones: &[Zone], cpus: u32) -> Result<Self, ConfigError> {
        check_cpus(cpus)?;
        let map = ZoneMap::new(zones)?;
        let areas = map
            .zones()
            .iter()
            .map(|&zone| CachePadded(Mutex::new(ZoneArea::new(zone))))
            .collect();
        Ok(Buddy { map, areas, cpus })
    }
}

impl ZoneArea {
    fn new(zone: Zone) -> ZoneArea {
        let mut area = ZoneArea {
            zone,
            meta: vec![FrameMeta::UNLINKED_TAIL; zone.frames() as usize],
            free_area: [FrameList::EMPTY; ORDERS],
        };
        // Carve the zone into the largest aligned blocks that fit, as
        // memblock hands memory to the buddy at boot.
        let mut pfn = zone.start.0;
        while pfn < zone.end.0 {
            let mut order = (pfn.trailing_zeros() as u8).min(MAX_ORDER);
            while pfn + (1 << order) > zone.end.0 {
                order -= 1;
            }
            let order = Order::new(order).expect("order <= MAX_ORDER");
            area.push_free(Pfn(pfn), order);
            pfn += order.frames();
        }
        area
    }

    #[inline]
    fn index(&self, pfn: Pfn) -> u32 {
        (pfn.0 - self.zone.start.0) as u32
    }

    #[inline]
    fn push_free(&mut self, pfn: Pfn, order: Order) {
        let i = self.index(pfn);
        self.meta[i as usize].state.set_free(order);
        self.free_area[order.index()].push_front(&mut self.meta, i);
    }

    /// Take the smallest free block of at least `order` and split it down.
    fn alloc(&mut self, order: Order) -> Option<Pfn> {
        let (i, mut current) = Order::all()
            .skip(order.index())
            .find_map(|o| Some((self.free_area[o.index()].pop_front(&mut self.meta)?, o)))?;
        let pfn = Pfn(self.zone.start.0 + u64::from(i));
        while current > order {
            current = Order::new(current.get() - 1).expect("order > 0");
            self.push_free(Pfn(pfn.0 + current.frames()), current);
        }
        self.meta[i as usize].state.set_allocated(order);
        Some(pfn)
    }

    /// Free a block already checked by `check_free`, merging with buddies.
    fn free(&mut self, pfn: Pfn, order: Order) {
        let mut pfn = pfn.0;
        let mut order = order;
        while order < Order::MAX {
            let buddy = pfn ^ order.frames();
            if !self.zone.contains_block(Pfn(buddy), order) {
                break;
            }
            let b = self.index(Pfn(buddy));
            if self.meta[b as usize].state.kind() != Kind::Free(order) {
                break;
            }
            self.free_area[order.index()].remove(&mut self.meta, b);
            let upper = self.index(Pfn(pfn.max(buddy)));
            self.meta[upper as usize].state.set_tail();
            pfn = pfn.min(buddy);
            order = Order::new(order.get() + 1).expect("order < MAX_ORDER");
        }
        self.push_free(Pfn(pfn), order);
    }

    /// Whether the block at `pfn` (in this zone and aligned) is allocated
    /// with exactly `order`, and if not, which error a free gets.
    fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError> {
        check_block_free(
            |p| self.meta[self.index(p) as usize].state,
            self.zone.start,
            pfn,
            order,
        )
    }

    fn validate(&self, zone_index: usize) -> Result<(), ValidationError> {
        let zone = self.zone;
        // The blocks tile the zone: walk it block by block.
        let mut heads = [0u64; ORDERS];
        let mut pfn = zone.start.0;
        while pfn < zone.end.0 {
            let i = self.index(Pfn(pfn)) as usize;
            let order = match self.meta[i].state.kind() {
                Kind::Tail => {
                    return Err(ValidationError(alloc::format!(
                        "zone {zone_index}: pfn {pfn:#x} is a tail where a block should start"
                    )))
                }
                Kind::Free(order) => {
                    heads[order.index()] += 1;
                    // A free block's buddy is never free and whole.
                    let buddy = pfn ^ order.frames();
                    if order < Order::MAX && zone.contains_block(Pfn(buddy), order) {
                        let b = self.index(Pfn(buddy)) as usize;
                        ensure!(
                            self.meta[b].state.kind() != Kind::Free(order),
                            "zone {zone_index}: free block {pfn:#x} and its buddy {buddy:#x} (order {order}) were not merged"
                        );
                    }
                    order
                }
                Kind::Allocated(order) => order,
            };
            ensure!(
                Pfn(pfn).is_aligned(order) && zone.contains_block(Pfn(pfn), order),
                "zone {zone_index}: block {pfn:#x} of order {order} is misaligned or leaves the zone"
            );
            for tail in pfn + 1..pfn + order.frames() {
                let t = self.index(Pfn(tail)) as usize;
                ensure!(
                    self.meta[t].state.kind() == Kind::Tail,
                    "zone {zone_index}: pfn {tail:#x} inside block {pfn:#x} (order {order}) is not a tail"
                );
            }
            pfn += order.frames();
        }
        // Each free head is on its order's list once: every list member is
        // a free head of that order, and the counts agree.
        for order in Order::all() {
            let list = &self.free_area[order.index()];
            ensure!(
                list.len() == heads[order.index()],
                "zone {zone_index}: free_area[{order}] holds {} blocks but {} free heads of that order exist",
                list.len(),
                heads[order.index()]
            );
            let name = alloc::format!("zone {zone_index} free_area[{order}]");
            list.check(&self.meta, &name, |i| {
                ensure!(
                    self.meta[i as usize].state.kind() == Kind::Free(order),
                    "{name}: member {:#x} is not a free head of order {order}",
                    zone.start.0 + u64::from(i)
                );
                Ok(())
            })?;
        }
        Ok(())
    }

    fn add_stats(&self, stats: &mut Stats) {
        for order in Order::all() {
            let blocks = self.free_area[order.index()].len();
            stats.free_blocks[order.index()] += blocks;
            stats.free_frames += blocks << order.get();
        }
    }
}

impl<R: RawMutex + Send + Sync> FrameAllocator for Buddy<R> {
    fn alloc(&self, req: Request) -> Result<Pfn, AllocError> {
        check_cpu(req, self.cpus)?;
        self.areas
            .iter()
            .rev()
            .find_map(|area| area.lock().alloc(req.order))
            .ok_or(AllocError::OutOfMemory { order: req.order })
    }

    fn free(&self, pfn: Pfn, req: Request) -> Result<(), AllocError> {
        check_cpu(req, self.cpus)?;
        let z = self.map.zone_of_block(pfn, req.order)?;
        let mut area = self.areas[z].lock();
        area.check_free(pfn, req.order)?;
        area.free(pfn, req.order);
        Ok(())
    }

    fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError> {
        let z = self.map.zone_of_block(pfn, order)?;
        let area = self.areas[z].lock();
        area.check_free(pfn, order)
    }

    fn alloc_bulk(&self, req: Request, out: &mut [Pfn]) -> usize {
        if check_cpu(req, self.cpus).is_err() {
            return 0;
        }
        let mut filled = 0;
        for area in self.areas.iter().rev() {
            let mut area = area.lock();
            while filled < out.len() {
                match area.alloc(req.order) {
                    Some(pfn) => out[filled] = pfn,
                    None => break,
                }
                filled += 1;
            }
            if filled == out.len() {
                break;
            }
        }
        filled
    }

    fn free_bulk(&self, blocks: &[Pfn], req: Request) -> Result<(), (usize, AllocError)> {
        check_cpu(req, self.cpus).map_err(|e| (0, e))?;
        let mut n = 0;
        while n < blocks.len() {
            // Hold one zone's lock for the run of blocks in that zone.
            let z = self
                .map
                .zone_of_block(blocks[n], req.order)
                .map_err(|e| (n, e))?;
            let mut area = self.areas[z].lock();
            while n < blocks.len() && area.zone.contains_block(blocks[n], req.order) {
                let pfn = blocks[n];
                pfn.ensure_aligned(req.order).map_err(|e| (n, e))?;
                area.check_free(pfn, req.order).map_err(|e| (n, e))?;
                area.free(pfn, req.order);
                n += 1;
            }
        }
        Ok(())
    }

    fn stats(&self) -> Stats {
        let mut stats = Stats {
            managed_frames: self.map.frames(),
            ..Stats::default()
        };
        for area in self.areas.iter() {
            area.lock().add_stats(&mut stats);
        }
        stats
    }

    fn validate(&self) -> Result<(), ValidationError> {
        for (z, area) in self.areas.iter().enumerate() {
            area.lock().validate(z)?;
        }
        Ok(())
    }

    fn zones(&self) -> &[Zone] {
        self.map.zones()
    }

    fn cpus(&self) -> u32 {
        self.cpus
    }

    fn metadata_bytes(&self) -> usize {
        self.areas
            .iter()
            .map(|area| {
                core::mem::size_of_val(area)
                    + area.lock().meta.capacity() * core::mem::size_of::<FrameMeta>()
            })
            .sum()
    }
}
