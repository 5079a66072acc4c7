//! The M³ bank-aware allocator of seed 002: frames handed out at random
//! across the memory's banks, optionally with the banks partitioned among
//! the CPUs.
//!
//! Seed 002 found that sequential frame allocation (the buddy system
//! handing out consecutive frames) puts the pages of concurrently running
//! programs on the same few banks, so their accesses collide in the row
//! buffers, and that random allocation avoids the regularity ("regularities
//! considered harmful"). It proposes an OS-level bank-aware allocator, M³,
//! that randomizes allocation and partitions memory among cores at the
//! granularity of the machine's interleaving (12 MB or 3 MB on its Xeon).
//!
//! This crate knows nothing of DRAM: the caller passes a *colouring*, the
//! colour of every frame (its bank, its rank, its 12 MB region: whatever
//! the partitioning is to follow), built from a memory-system model. With
//! [`M3Policy::partition`] colour `c` belongs to CPU `c * cpus / colours`
//! (contiguous colour ranges, so colouring by rank × bank gives each CPU
//! whole ranks, as OS bank partitioning — PALLOC — does); a CPU whose
//! colours are exhausted borrows any other colour rather than fail.
//!
//! # Structure
//!
//! One lock over: per frame, packed together (one cache line to touch for
//! a random frame), a state byte (free, head of an allocated block with
//! its order, or tail), its colour and its position in its colour's free
//! list; and per colour an array of its free frames, so a random free
//! frame of a colour is taken in O(1) (`swap_remove`). The colours'
//! arrays are ranges of one table (`ColourLists`), each as long as its
//! colour has frames, so none ever grows. Single frames — user pages,
//! what the seed's STREAM runs allocate — take the fast path: a random
//! colour among the CPU's, a random frame of that colour. As the
//! generator's next draws are known, each single-frame allocation
//! prefetches what the next ones will touch (a hint; see `prefetch_next`). Blocks of
//! higher order try the aligned blocks around a few random free frames and
//! then scan the zones for an aligned free block: correct (every free
//! aligned block is found before out of memory is reported) but linear in
//! the worst case; M³ is meant for single frames.
//!
//! Invariants (checked by `validate`): each frame is free exactly when it
//! is on its colour's list, at the position recorded for it; the free
//! count is the lists' total; every allocated block is aligned, inside one
//! zone, a head followed by `2^order - 1` tails; no tail outside a block.

use alloc::vec;
use alloc::vec::Vec;

use lock_api::{Mutex, RawMutex};

use crate::error::ensure;
use crate::{
    check_cpu, check_cpus, AllocError, ConfigError, FrameAllocator, Order, Pfn, Request, Stats,
    ValidationError, Zone, ZoneMap, MAX_ORDER, ORDERS,
};

/// How M³ places frames.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct M3Policy {
    /// Give each CPU its own range of colours (soft: borrow others' when
    /// its own run out). Without it every CPU draws from every colour.
    pub partition: bool,
    /// Seed of the allocator's random choices, for reproducible runs.
    pub seed: u64,
}

impl M3Policy {
    /// Random placement over all colours.
    pub const RANDOM: M3Policy = M3Policy {
        partition: false,
        seed: 0x6d33_5f61_6c6c_6f63,
    };
    /// Random placement within each CPU's colours.
    pub const PARTITIONED: M3Policy = M3Policy {
        partition: true,
        seed: 0x6d33_5f61_6c6c_6f63,
    };
}

/// One step of the allocator's xorshift generator.
#[inline]
fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Partitioned M³ prefetches for the next allocation on every CPU up to
/// this many (the next one's CPU is not known), else for the same CPU.
const PREFETCH_CPUS: u32 = 4;

/// A frame's state byte: `EVER` once it was ever handed out; the low bits
/// `FREE`, `TAIL`, or `HEAD + order`.
const EVER: u8 = 0x80;
const FREE: u8 = 0;
const TAIL: u8 = 1;
const HEAD: u8 = 2;
/// No position: the frame is not on a free list.
const NOWHERE: u32 = u32::MAX;

/// The M³ allocator. See the module documentation.
pub struct M3<R: RawMutex> {
    map: ZoneMap,
    cpus: u32,
    colours: u32,
    partition: bool,
    /// Address of `inner.meta`'s first entry, for `prefetch_free` without
    /// the lock (the table never grows, so its buffer never moves).
    meta_addr: usize,
    inner: Mutex<R, Inner>,
}

/// What M³ keeps per frame, in one place: a random frame's state, colour
/// and list position are one cache miss, not three (packed: 9 bytes).
#[derive(Copy, Clone)]
#[repr(C, packed)]
struct FrameMeta {
    /// Its position in its colour's free list, or `NOWHERE`.
    pos: u32,
    /// Its colour.
    colour: u32,
    /// Its state byte.
    state: u8,
}

/// Every colour's free frames (dense indices), in no order, in one table:
/// colour `c`'s list is `slots[start..start + len]` with `(start, len) =
/// heads[c]`, and its range holds every frame of the colour, so a push
/// always fits. One allocation for all lists, sized exactly, where a
/// vector per colour grown to a power of two holds up to twice the room.
struct ColourLists {
    slots: Vec<u32>,
    /// Per colour: its range's first slot and its list's length.
    heads: Vec<(u32, u32)>,
}

impl ColourLists {
    /// Empty lists with room for `counts[c]` frames of colour `c`.
    fn with_room(counts: &[u32]) -> ColourLists {
        let mut start = 0u32;
        let heads = counts
            .iter()
            .map(|&n| {
                let head = (start, 0);
                start += n;
                head
            })
            .collect();
        ColourLists {
            slots: vec![0; start as usize],
            heads,
        }
    }

    #[inline]
    fn len(&self, c: u32) -> usize {
        self.heads[c as usize].1 as usize
    }

    #[inline]
    fn is_empty(&self, c: u32) -> bool {
        self.heads[c as usize].1 == 0
    }

    /// Colour `c`'s list.
    #[inline]
    fn list(&self, c: u32) -> &[u32] {
        let (start, len) = self.heads[c as usize];
        &self.slots[start as usize..(start + len) as usize]
    }

    /// Address of position `p` of colour `c`'s list (for a prefetch).
    #[inline]
    fn slot_addr(&self, c: u32, p: usize) -> usize {
        self.slots.as_ptr() as usize + (self.heads[c as usize].0 as usize + p) * 4
    }

    /// Append `i` to colour `c`'s list; its position.
    #[inline]
    fn push(&mut self, c: u32, i: u32) -> u32 {
        let (start, len) = &mut self.heads[c as usize];
        let p = *len;
        self.slots[(*start + p) as usize] = i;
        *len += 1;
        p
    }

    /// Take position `p` off colour `c`'s list, the last frame moving into
    /// it: the frame taken, and the frame moved (now at `p`), if any.
    #[inline]
    fn swap_remove(&mut self, c: u32, p: usize) -> (u32, Option<u32>) {
        let (start, len) = &mut self.heads[c as usize];
        let base = *start as usize;
        let last = base + *len as usize - 1;
        *len -= 1;
        let taken = self.slots[base + p];
        if base + p == last {
            (taken, None)
        } else {
            let moved = self.slots[last];
            self.slots[base + p] = moved;
            (taken, Some(moved))
        }
    }

    /// Bytes held.
    fn bytes(&self) -> usize {
        self.slots.capacity() * 4 + self.heads.capacity() * 8
    }
}

struct Inner {
    /// Per frame (dense index).
    meta: Vec<FrameMeta>,
    /// Per colour: its free frames.
    free: ColourLists,
    free_count: u64,
    rng: u64,
    /// The zone in which the last scan for a block of higher order found
    /// one: the next scan starts there, at the zone's first aligned block
    /// (next fit over zones, first fit within a zone).
    cursor: u64,
}

impl<R: RawMutex> M3<R> {
    /// An M³ allocator over `zones` for `cpus` CPUs with `colours` colours;
    /// `colour_of(pfn)` gives each frame's colour, below `colours` (larger
    /// values are taken modulo `colours`). All memory free.
    pub fn new(
        zones: &[Zone],
        cpus: u32,
        colours: u32,
        colour_of: impl Fn(Pfn) -> u32,
        policy: M3Policy,
    ) -> Result<Self, ConfigError> {
        check_cpus(cpus)?;
        if colours == 0 {
            return Err(ConfigError::Policy("M3 needs at least one colour"));
        }
        let map = ZoneMap::new(zones)?;
        let frames = map.frames() as usize;
        let mut inner = Inner {
            meta: Vec::with_capacity(frames),
            free: ColourLists {
                slots: Vec::new(),
                heads: Vec::new(),
            },
            free_count: 0,
            // xorshift needs a non-zero state.
            rng: policy.seed | 1,
            cursor: 0,
        };
        // Every frame free, each colour's list in pfn order: colours and
        // positions first, then the lists filled at once.
        let mut counts = vec![0u32; colours as usize];
        for zone in map.zones() {
            for pfn in zone.start.0..zone.end.0 {
                let c = colour_of(Pfn(pfn));
                // A division per frame was a third of building M³.
                let c = if c < colours { c } else { c % colours };
                let count = &mut counts[c as usize];
                inner.meta.push(FrameMeta {
                    pos: *count,
                    colour: c,
                    state: FREE,
                });
                *count += 1;
            }
        }
        inner.free = ColourLists::with_room(&counts);
        for (i, m) in inner.meta.iter().enumerate() {
            inner.free.push(m.colour, i as u32);
        }
        inner.free_count = frames as u64;
        Ok(M3 {
            map,
            cpus,
            colours,
            partition: policy.partition,
            meta_addr: inner.meta.as_ptr() as usize,
            inner: Mutex::new(inner),
        })
    }

    /// The number of colours.
    pub fn colours(&self) -> u32 {
        self.colours
    }

    /// The colours CPU `cpu` allocates from first: all of them, or its
    /// partition.
    pub fn colours_of(&self, cpu: u32) -> core::ops::Range<u32> {
        if !self.partition {
            return 0..self.colours;
        }
        let (c, n) = (u64::from(self.colours), u64::from(self.cpus));
        // Colour k belongs to CPU k * n / c: the first colour of `cpu` is
        // ceil(cpu * c / n). With fewer colours than CPUs some CPUs own
        // none and borrow.
        let first = |cpu: u64| (cpu * c).div_ceil(n) as u32;
        first(u64::from(cpu))..first(u64::from(cpu) + 1)
    }

    fn dense(&self, pfn: Pfn) -> u32 {
        self.map
            .dense_index(pfn)
            .expect("a checked pfn is in a zone") as u32
    }
}

impl Inner {
    fn next(&mut self) -> u64 {
        self.rng = xorshift(self.rng);
        self.rng
    }

    fn state(&self, i: usize) -> u8 {
        self.meta[i].state
    }

    fn set_state(&mut self, i: usize, state: u8) {
        self.meta[i].state = state;
    }

    fn push_free(&mut self, i: u32) {
        let m = &mut self.meta[i as usize];
        m.pos = self.free.push(m.colour, i);
        m.state = (m.state & EVER) | FREE;
        self.free_count += 1;
    }

    /// Take free frame `i` off its colour's list.
    fn unlink(&mut self, i: u32) {
        let m = self.meta[i as usize];
        let p = m.pos;
        if let (_, Some(moved)) = self.free.swap_remove(m.colour, p as usize) {
            self.meta[moved as usize].pos = p;
        }
        self.meta[i as usize].pos = NOWHERE;
        self.free_count -= 1;
    }

    /// A random non-empty colour in `range`, probing on from a random one.
    fn pick_colour(&mut self, range: core::ops::Range<u32>) -> Option<u32> {
        let n = range.end - range.start;
        if n == 0 {
            return None;
        }
        let first = (self.next() % u64::from(n)) as u32;
        (0..n)
            .map(|k| range.start + (first + k) % n)
            .find(|&c| !self.free.is_empty(c))
    }

    fn alloc_single(&mut self, own: core::ops::Range<u32>, colours: u32) -> Option<u32> {
        let c = self
            .pick_colour(own.clone())
            .or_else(|| self.pick_colour(0..colours))?;
        // Taken off its list by its position, known here: the frame's
        // own metadata is only written (a store, not a load to wait for).
        let r = self.next();
        let p = (r % self.free.len(c) as u64) as usize;
        let (i, moved) = self.free.swap_remove(c, p);
        if let Some(moved) = moved {
            self.meta[moved as usize].pos = p as u32;
        }
        self.free_count -= 1;
        let m = &mut self.meta[i as usize];
        m.pos = NOWHERE;
        m.state = EVER | HEAD;
        Some(i)
    }

    /// The list slot and the frame a single-frame allocation would take:
    /// `(colour, position)` from the two random numbers it would draw
    /// from `rng`, if the colour it would look at first has free frames.
    #[inline]
    fn predict(&self, rng: u64, own: &core::ops::Range<u32>) -> Option<(u32, usize, u64)> {
        let n = own.end - own.start;
        if n == 0 {
            return None;
        }
        let r1 = xorshift(rng);
        let r2 = xorshift(r1);
        let c = own.start + (r1 % u64::from(n)) as u32;
        let len = self.free.len(c);
        (len != 0).then(|| (c, (r2 % len as u64) as usize, r2))
    }

    /// Start loading what the next single-frame allocations will touch
    /// (a hint: reads nothing the answer depends on, changes nothing).
    ///
    /// The random numbers they draw are known now (the generator's next
    /// states), so unless frees change a list's length meanwhile, this
    /// prefetches the list slot of the third allocation from now and, for
    /// the next one (whose slot the call before last prefetched), the
    /// frame it will take and the frame that moves into its slot. Without
    /// this every placement waited for three cache misses in a row (the
    /// slot, then the two frames' entries): 14 % of `evaluate`'s time.
    #[inline]
    fn prefetch_next(&self, own: core::ops::Range<u32>) {
        let Some((c1, p1, r)) = self.predict(self.rng, &own) else {
            return;
        };
        let list = self.free.list(c1);
        let meta = self.meta.as_ptr() as usize;
        let entry = |i: u32| meta + i as usize * core::mem::size_of::<FrameMeta>();
        crate::prefetch_addr(entry(list[p1]));
        crate::prefetch_addr(entry(list[list.len() - 1]));
        let r = xorshift(xorshift(r));
        if let Some((c3, p3, _)) = self.predict(r, &own) {
            crate::prefetch_addr(self.free.slot_addr(c3, p3));
        }
    }

    /// A random free frame of colour `c` (which has one).
    fn random_free_of(&mut self, c: u32) -> u32 {
        let r = self.next();
        let list = self.free.list(c);
        list[(r % list.len() as u64) as usize]
    }

    fn is_free(&self, i: usize) -> bool {
        self.state(i) & !EVER == FREE
    }

    /// Hand out the block of `order` at dense index `i` (all free).
    fn take_block(&mut self, i: u32, order: Order) {
        for f in i..i + order.frames() as u32 {
            self.unlink(f);
            self.set_state(f as usize, EVER | TAIL);
        }
        self.set_state(i as usize, EVER | (HEAD + order.get()));
    }
}

impl<R: RawMutex> M3<R> {
    /// Dense index of the aligned block of `order` holding frame `i`, if
    /// that block lies in one zone and is wholly free.
    fn free_block_around(&self, inner: &Inner, i: u32, order: Order) -> Option<u32> {
        let pfn = self.map.pfn_at(u64::from(i));
        let head = Pfn(pfn.0 & !(order.frames() - 1));
        let z = self.map.zone_of(pfn)?;
        if !self.map.zones()[z].contains_block(head, order) {
            return None;
        }
        let h = self.dense(head);
        (h..h + order.frames() as u32)
            .all(|f| inner.is_free(f as usize))
            .then_some(h)
    }

    fn alloc_block(&self, inner: &mut Inner, cpu: u32, order: Order) -> Option<u32> {
        // Around a few random free frames of the CPU's colours first.
        for _ in 0..8 {
            let Some(c) = inner.pick_colour(self.colours_of(cpu)) else {
                break;
            };
            let i = inner.random_free_of(c);
            if let Some(h) = self.free_block_around(inner, i, order) {
                inner.take_block(h, order);
                return Some(h);
            }
        }
        // Then every aligned block: the cursor's zone first, from its
        // first aligned block, then the zones after it.
        let zones = self.map.zones();
        let n = zones.len();
        let start = (inner.cursor as usize) % n;
        for k in 0..n {
            let zone = zones[(start + k) % n];
            let mut head = zone.start.0.next_multiple_of(order.frames());
            while head + order.frames() <= zone.end.0 {
                let h = self.dense(Pfn(head));
                match (h..h + order.frames() as u32).find(|&f| !inner.is_free(f as usize)) {
                    None => {
                        inner.take_block(h, order);
                        inner.cursor = ((start + k) % n) as u64;
                        return Some(h);
                    }
                    // Skip to the next aligned block past the busy frame.
                    Some(busy) => {
                        let busy_pfn = head + u64::from(busy - h);
                        head = (busy_pfn + 1).next_multiple_of(order.frames());
                    }
                }
            }
        }
        None
    }

    /// What freeing `(pfn, order)` would answer.
    fn check(&self, inner: &Inner, pfn: Pfn, order: Order) -> Result<u32, AllocError> {
        self.map.zone_of_block(pfn, order)?;
        let i = self.dense(pfn);
        let s = inner.state(i as usize);
        match s & !EVER {
            FREE if s & EVER != 0 => Err(AllocError::DoubleFree { pfn, order }),
            FREE | TAIL => Err(AllocError::NotAllocated { pfn, order }),
            head => {
                let allocated = Order::new(head - HEAD).expect("a head holds its order");
                if allocated == order {
                    Ok(i)
                } else {
                    Err(AllocError::WrongOrder {
                        pfn,
                        order,
                        allocated,
                    })
                }
            }
        }
    }
}

impl<R: RawMutex + Send + Sync> FrameAllocator for M3<R> {
    fn alloc(&self, req: Request) -> Result<Pfn, AllocError> {
        check_cpu(req, self.cpus)?;
        let mut inner = self.inner.lock();
        let got = if req.order == Order::ZERO {
            let got = inner.alloc_single(self.colours_of(req.cpu), self.colours);
            // The next allocation's CPU is not known: with partitions,
            // prepare for each of a few CPUs (the traces have 1 or 2).
            if !self.partition || self.cpus > PREFETCH_CPUS {
                inner.prefetch_next(self.colours_of(req.cpu));
            } else {
                (0..self.cpus).for_each(|cpu| inner.prefetch_next(self.colours_of(cpu)));
            }
            got
        } else if inner.free_count < req.order.frames() {
            None
        } else {
            self.alloc_block(&mut inner, req.cpu, req.order)
        };
        got.map(|i| self.map.pfn_at(u64::from(i)))
            .ok_or(AllocError::OutOfMemory { order: req.order })
    }

    fn free(&self, pfn: Pfn, req: Request) -> Result<(), AllocError> {
        check_cpu(req, self.cpus)?;
        let mut inner = self.inner.lock();
        let i = self.check(&inner, pfn, req.order)?;
        for f in i..i + req.order.frames() as u32 {
            inner.push_free(f);
        }
        Ok(())
    }

    fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError> {
        let inner = self.inner.lock();
        self.check(&inner, pfn, order).map(drop)
    }

    #[inline]
    fn prefetch_free(&self, pfn: Pfn) {
        if let Some(i) = self.map.dense_index(pfn) {
            crate::prefetch_addr(self.meta_addr + i * core::mem::size_of::<FrameMeta>());
        }
    }

    fn stats(&self) -> Stats {
        let inner = self.inner.lock();
        let mut stats = Stats {
            managed_frames: self.map.frames(),
            free_frames: inner.free_count,
            ..Stats::default()
        };
        // Decompose free memory into maximal aligned free blocks.
        for zone in self.map.zones() {
            let mut pfn = zone.start.0;
            while pfn < zone.end.0 {
                let i = self.dense(Pfn(pfn)) as usize;
                if !inner.is_free(i) {
                    pfn += 1;
                    continue;
                }
                let mut order = (pfn.trailing_zeros() as u8).min(MAX_ORDER);
                loop {
                    let n = 1u64 << order;
                    if pfn + n <= zone.end.0 && (0..n as usize).all(|k| inner.is_free(i + k)) {
                        break;
                    }
                    order -= 1;
                }
                stats.free_blocks[usize::from(order)] += 1;
                pfn += 1 << order;
            }
        }
        stats
    }

    fn validate(&self) -> Result<(), ValidationError> {
        let inner = self.inner.lock();
        let mut listed = 0u64;
        for c in 0..inner.free.heads.len() as u32 {
            let list = inner.free.list(c);
            for (p, &i) in list.iter().enumerate() {
                ensure!(
                    inner.is_free(i as usize),
                    "colour {c}: frame {} on the free list is not free",
                    self.map.pfn_at(u64::from(i))
                );
                let m = inner.meta[i as usize];
                let (pos, colour) = (m.pos, m.colour);
                ensure!(
                    pos == p as u32 && colour == c,
                    "colour {c}: frame {} is listed at {p} but recorded at {pos} of colour {colour}",
                    self.map.pfn_at(u64::from(i)),
                );
            }
            listed += list.len() as u64;
        }
        ensure!(
            listed == inner.free_count,
            "the colour lists hold {listed} frames but the free count is {}",
            inner.free_count
        );
        for zone in self.map.zones() {
            let mut pfn = zone.start.0;
            while pfn < zone.end.0 {
                let i = self.dense(Pfn(pfn)) as usize;
                match inner.state(i) & !EVER {
                    FREE => {
                        let pos = inner.meta[i].pos;
                        ensure!(pos != NOWHERE, "free frame {pfn:#x} is on no colour list");
                        pfn += 1;
                    }
                    TAIL => {
                        return Err(ValidationError(alloc::format!(
                            "frame {pfn:#x} is a tail outside any allocated block"
                        )))
                    }
                    head => {
                        ensure!(
                            head - HEAD <= MAX_ORDER,
                            "frame {pfn:#x} has a bad state byte {head:#x}"
                        );
                        let order = Order::new(head - HEAD).expect("checked");
                        ensure!(
                            Pfn(pfn).is_aligned(order) && zone.contains_block(Pfn(pfn), order),
                            "block {pfn:#x} of order {order} is misaligned or leaves its zone"
                        );
                        let pos = inner.meta[i].pos;
                        ensure!(pos == NOWHERE, "allocated frame {pfn:#x} is on a free list");
                        for k in 1..order.frames() as usize {
                            let m = inner.meta[i + k];
                            let (state, pos) = (m.state, m.pos);
                            ensure!(
                                state & !EVER == TAIL && pos == NOWHERE,
                                "frame {:#x} inside block {pfn:#x} (order {order}) is not a tail",
                                pfn + k as u64
                            );
                        }
                        pfn += order.frames();
                    }
                }
            }
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
        let inner = self.inner.lock();
        core::mem::size_of::<Self>()
            + inner.meta.capacity() * core::mem::size_of::<FrameMeta>()
            + inner.free.bytes()
    }
}

// 9 bytes per frame beside the free lists' 4: 13 in all.
const _: () = assert!(core::mem::size_of::<FrameMeta>() == 9);

// Every head state byte stays below the EVER flag.
const _: () = assert!(HEAD as usize + ORDERS <= EVER as usize);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MigrateType;

    type Lock = crate::sync::SpinYield;

    fn single(cpu: u32) -> Request {
        Request::single(cpu)
    }

    #[test]
    fn partitions_keep_each_cpu_on_its_colours_until_they_run_out() {
        // 8 colours of 3 consecutive frames each, like the seed's Xeon
        // (a bank changes every three frames).
        let zones = [Zone::new(0, 96 * 8)];
        let a = M3::<Lock>::new(
            &zones,
            4,
            8,
            |p| (p.0 / 3 % 8) as u32,
            M3Policy::PARTITIONED,
        )
        .unwrap();
        assert_eq!(a.colours_of(0), 0..2);
        assert_eq!(a.colours_of(3), 6..8);
        let colour = |p: Pfn| (p.0 / 3 % 8) as u32;
        // Each colour has 96 frames: CPU 1 owns colours 2 and 3.
        for _ in 0..192 {
            let p = a.alloc(single(1)).unwrap();
            assert!(a.colours_of(1).contains(&colour(p)), "{p}");
        }
        // Then it borrows.
        let p = a.alloc(single(1)).unwrap();
        assert!(!a.colours_of(1).contains(&colour(p)));
        a.validate().unwrap();
    }

    #[test]
    fn random_placement_spreads_consecutive_allocations_over_colours() {
        let zones = [Zone::new(0, 4096)];
        let colour = |p: Pfn| (p.0 / 3 % 8) as u32;
        let a = M3::<Lock>::new(&zones, 1, 8, colour, M3Policy::RANDOM).unwrap();
        let got: Vec<u32> = (0..64)
            .map(|_| colour(a.alloc(single(0)).unwrap()))
            .collect();
        // Sequential allocation would give 0,0,0,1,1,1,...: 22 changes at
        // most in 64 frames; random placement changes colour 7/8 of the time.
        let changes = got.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(changes > 40, "{changes}: {got:?}");
        let mut seen = [false; 8];
        got.iter().for_each(|&c| seen[c as usize] = true);
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn blocks_of_higher_order_are_found_and_bad_configs_refused() {
        let zones = [Zone::new(3, 100), Zone::new(200, 300)];
        let a = M3::<Lock>::new(&zones, 2, 4, |p| p.0 as u32, M3Policy::RANDOM).unwrap();
        let req = Request::new(Order::new(5).unwrap(), 0, MigrateType::Movable);
        let b = a.alloc(req).unwrap();
        assert!(b.is_aligned(req.order));
        a.validate().unwrap();
        a.free(b, req).unwrap();
        assert!(a.alloc(req.with_order(Order::new(7).unwrap())).is_err());
        assert!(matches!(
            M3::<Lock>::new(&zones, 2, 0, |_| 0, M3Policy::RANDOM),
            Err(ConfigError::Policy(_))
        ));
        assert!(matches!(
            M3::<Lock>::new(&zones, 0, 4, |_| 0, M3Policy::RANDOM),
            Err(ConfigError::Cpus { .. })
        ));
    }
}
