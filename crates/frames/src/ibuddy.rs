//! iBuddy, the inverse buddy system of seed 000.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use lock_api::{Mutex, MutexGuard, RawMutex};

use crate::bitmap::{FrameBitmap, LevelBitmap, DERIVED};
use crate::error::ensure;
use crate::meta::{FrameList, FrameMeta, Kind};
use crate::{
    check_cpu, check_cpus, AllocError, CachePadded, ConfigError, FrameAllocator, Order, Pfn,
    Request, Stats, ValidationError, Zone, ZoneMap, MAX_ORDER,
};

/// Buddy spaces are cut only at multiples of this many frames (absolute
/// pfn), so an aligned block of any order never straddles two spaces.
const SPACE_ALIGN: u64 = Order::MAX.frames();

/// Non-empty bitmap words a multi-frame allocation looks at for an exact
/// fit before it settles for the first free block it saw.
const FIT_PATIENCE: usize = 16;

/// Frees in one CPU's buffer for a space at which the freeing caller tries
/// to apply the space's buffers itself (if the space's lock is free): one
/// lock acquisition and one overlapped round of metadata misses per this
/// many frees.
const DRAIN_AT: usize = 64;

/// Frees in one CPU's buffer for a space that is not the CPU's home at
/// which the freeing caller tries to apply the space's buffers.
const REMOTE_DRAIN_AT: usize = 512;

/// Frees in one CPU's buffer at which the freeing caller waits for the
/// space's lock and applies the buffers, so buffers stay bounded.
const BUFFER_CAP: usize = 1024;

/// How many frames ahead applying a batch of frees asks for their
/// records.
const PREFETCH_AHEAD: usize = 16;

/// Most free buffers per space: CPUs beyond share them (`cpu % 64`).
const MAX_BUFFERS: usize = 64;

/// The lowest order whose bitmap a space stores (`Space::blocks`); the
/// orders below are derived from the frames' bits.
const STORED: u8 = DERIVED + 1;

/// The inverse buddy allocator.
///
/// Where the buddy system keeps free memory as blocks and splits and
/// merges them on every single-frame allocation and free, iBuddy keeps
/// every free frame individually, on one list in the order frames were
/// freed, and does the block work only for the requests that need blocks:
///
/// - **Single frames, O(1).** An allocation takes the least recently freed
///   frame from the front of the list; a free appends the frame at the
///   back. Reusing frames oldest first hands allocations round the whole
///   space, so allocation counts, and SCM wear, even out across frames.
/// - **Free-block bitmap.** One bitmap per order, a bit per aligned block:
///   at order 0 the bit means "this frame is free", at order `k > 0`
///   "every frame of this block is free, it can be coalesced". A single
///   free sets its frame's bit and climbs while the buddy's bit is set; a
///   single allocation clears bits upward while they are set: at most
///   `MAX_ORDER` bit operations, and usually one or two. The bitmaps of
///   orders 1 to 5 are not stored but derived from the frames' word when
///   a block is looked for (a bit of them is a function of the frames'
///   bits): a free or allocation inside a word that is neither wholly
///   free before nor after writes that word and its largest-block byte
///   only, and a search of those orders derives the words it looks at
///   (`FrameBitmap`). Orders 6 to `MAX_ORDER` are
///   stored and climbed as above, from a word that becomes wholly free.
/// - **Coalescing on multi-frame allocation** (splitting on multi-frame
///   free). A request of order `k` looks up a set bit at order `k`,
///   preferring a block whose buddy is not free (an exact fit, so larger
///   free blocks stay whole), and takes its `2^k` frames off the list:
///   O(2^k), as the seed's table says. Freeing a block puts each of its
///   frames on the list.
/// - **Next allocation level.** Each space keeps the highest order at
///   which it has a free block: raised by frees (Algorithm 2, lines
///   13-14), lowered when that order's last block goes (Algorithm 1, lines
///   18-19). A request above it is refused in O(1) and falls back. Below
///   order 6, where free blocks are not counted, it is an upper bound: an
///   allocation that takes the last block of orders 1 to 5 leaves it, and
///   a search of such an order that finds nothing lowers it below that
///   order, so a later request there is refused in O(1) again. (The check
///   only spares a search that would fail; placements are the same.)
/// - **Buddy spaces.** Memory is cut into one space per CPU, each with its
///   own lock; a CPU allocates from its own space and falls back to the
///   others, highest pfn first (Linux's zonelist order), when its own
///   cannot serve the request. A zone too small to hold half a CPU's share
///   (DMA) is a space of its own that is no CPU's home. A free goes to the
///   space that owns the frame.
///
/// **Single-frame frees do not wait for the space's lock.**
/// Random frees land on every CPU's space, and a free under the space's
/// lock spends its time missing the cache on the frame's 12-byte record
/// while other CPUs queue behind it: at 2 threads a shuffled free cost 6×
/// LLFree's. So a single-frame free only claims the frame's *handed* bit
/// (one bit per frame, set while an order-0 block is in a caller's hands:
/// one atomic `fetch_and`, which also refuses a double free on the spot),
/// takes a stamp from the space's counter (one `fetch_add`) and appends
/// the frame to its CPU's buffer for that space (a lock only that CPU's
/// callers take, so uncontended). The records, list and bitmaps are
/// updated in batches: every holder of the space's lock first applies
/// every CPU's buffer for the space in stamp order, with the batch's
/// metadata prefetched, and a freeing caller applies them once its buffer
/// holds `DRAIN_AT` (64) frees and the space's lock is free (it waits for
/// the lock only at `BUFFER_CAP`, 1024). A CPU freeing into a space that
/// is not its home leaves the applying to the space's home CPU until its
/// buffer holds `REMOTE_DRAIN_AT` (512), and asks for none of the lines:
/// the space's records and list then stay in the home CPU's cache, where
/// the next allocation reads them, instead of moving between CPUs on
/// every application. Because nothing reads a space without applying
/// its buffers first, and stamps keep the order of
/// acceptance, every allocation sees exactly the state an immediate free
/// would have left: single-threaded callers (replay) get the same frames
/// in the same order as before. (Frees racing on different CPUs are
/// applied in stamp order, one valid order of concurrent calls.) That is
/// [`FreeOrder::Accepted`], the default; its stamp is the one write per
/// free that every CPU freeing into a space shares, and under concurrent
/// frees its cache line moves between CPUs. [`FreeOrder::PerCpu`] takes no
/// stamp and applies a space's buffers one CPU after another: each CPU's
/// frees keep their order, and frames freed on different CPUs between two
/// applications may be reused in another order than they were freed.
///
/// Invariants (checked by `validate`, with no call in flight): the list
/// holds exactly the free frames, each once; a bit at order 0 is set
/// exactly for free frames, each stored bit (orders 6 and up) exactly
/// when both halves are wholly free, and each word's kept largest free
/// block agrees with the frames' bits; allocated blocks are aligned,
/// inside one space, and their other frames are tails; the next
/// allocation level is the highest order with a free block, or, when
/// that is below 6, at most 5 and not below it; once the queue is applied, a frame's
/// handed bit is set exactly when it heads an allocated block of order 0.
pub struct IBuddy<R: RawMutex> {
    map: ZoneMap,
    spaces: Box<[Shared<R>]>,
    /// Buffered frees: `buffers[b * spaces + s]` is buffer `b` (CPUs
    /// `b`, `b + 64`, ...) of space `s`.
    /// Padded: a CPU's buffer lock is its own line, never written by
    /// another CPU's frees.
    buffers: Box<[FreeBuffer<R>]>,
    /// Buffers per space: `min(cpus, MAX_BUFFERS)`.
    slots: usize,
    /// Whether frees take stamps (`Accepted` with more than one buffer a
    /// space) and buffers are merged by them.
    stamped: bool,
    free_order: FreeOrder,
    /// `[start, end)` of each space, ascending, for pfn -> space.
    bounds: Box<[(u64, u64)]>,
    /// `space_below` of every pfn of each aligned run of `SPACE_ALIGN`
    /// pfns from `first_chunk` on, or `MIXED_CHUNK` where two spaces
    /// meet inside the run: one load for almost every pfn (spaces are cut
    /// on `SPACE_ALIGN` boundaries but at zone edges). Empty when the
    /// zones lie too far apart for a table to pay.
    chunk_space: Box<[u16]>,
    first_chunk: u64,
    /// The space each CPU allocates from first.
    home: Box<[u32]>,
    /// Every space, highest pfn first: the order a CPU falls back in.
    fallback: Box<[u32]>,
    cpus: u32,
}

/// One buddy space and what a free reaches without the space's lock.
struct Shared<R: RawMutex> {
    space: CachePadded<Mutex<R, Space>>,
    /// The next acceptance stamp of a buffered free of this space.
    stamp: CachePadded<AtomicU32>,
    /// Bit `b` of word `w`: buffer `64 w + b` of this space holds frees
    /// (written under that buffer's lock), so a lock holder finds the
    /// buffers to apply, and an allocation that finds none applies
    /// nothing, with one load.
    nonempty: Box<[AtomicU64]>,
    /// Bit `i`: frame `start + i` is an order-0 block in a caller's hands
    /// (allocated, and no free of it accepted yet).
    handed: Box<[AtomicU64]>,
    /// Addresses of the space's record array and order-0 bitmap (their
    /// buffers never move), so an accepted free can ask for the lines
    /// its application will write without taking the space's lock.
    meta_addr: usize,
    frames_addr: usize,
}

/// One CPU's buffer of accepted frees for one space, on a line of its own.
type FreeBuffer<R> = CachePadded<Mutex<R, Vec<Queued>>>;

/// An accepted single-frame free not applied yet: its stamp and its index
/// in the space.
#[derive(Copy, Clone, Debug)]
struct Queued {
    stamp: u32,
    index: u32,
}

/// One buddy space: a pfn range inside one zone, under its own lock.
struct Space {
    start: u64,
    end: u64,
    /// The buffered frees being applied, gathered from every buffer of
    /// the space and sorted by stamp.
    spare: Vec<Queued>,
    meta: Vec<FrameMeta>,
    /// Free frames, least recently freed first.
    free_list: FrameList,
    /// Order 0 of the bitmap (which frames are free), and the orders up
    /// to `DERIVED` derived from it.
    frames: FrameBitmap,
    /// `blocks[k - STORED]`: which aligned blocks of order `k >= STORED`
    /// are wholly free.
    blocks: [LevelBitmap; (MAX_ORDER - DERIVED) as usize],
    /// Highest order with a wholly free block; -1 when the space is full.
    /// When that is below `STORED`, an upper bound up to `DERIVED`
    /// (lowered by a search that fails, see `alloc_block`).
    next_level: i8,
    /// `cursor[k - 1]`: where the next search for a block of order `k`
    /// starts, just past the last block taken (next fit).
    cursor: [u64; MAX_ORDER as usize],
}

impl<R: RawMutex> IBuddy<R> {
    /// iBuddy over `zones` with one buddy space per CPU, all memory free.
    pub fn new(zones: &[Zone], cpus: u32) -> Result<Self, ConfigError> {
        Self::with_spaces(zones, cpus, cpus)
    }

    /// iBuddy over `zones` serving `cpus` CPUs with memory cut into about
    /// `spaces` buddy spaces (cuts fall on 4 MiB boundaries and zone edges,
    /// so small or many zones change the count). CPUs are homed round
    /// robin on the spaces that hold at least half a CPU's share.
    pub fn with_spaces(zones: &[Zone], cpus: u32, spaces: u32) -> Result<Self, ConfigError> {
        check_cpus(cpus)?;
        check_cpus(spaces)?;
        let map = ZoneMap::new(zones)?;
        let bounds = partition(&map, spaces);
        let slots = (cpus as usize).min(MAX_BUFFERS);
        let spaces: Box<[Shared<R>]> = bounds
            .iter()
            .map(|&(start, end)| {
                let space = Space::new(start, end);
                // Heap buffers: moving `space` into its mutex leaves them
                // where they are.
                let (meta_addr, frames_addr) =
                    (space.meta.as_ptr() as usize, space.frames.words_addr());
                Shared {
                    space: CachePadded(Mutex::new(space)),
                    stamp: CachePadded(AtomicU32::new(0)),
                    nonempty: (0..slots.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
                    handed: (0..(end - start).div_ceil(64))
                        .map(|_| AtomicU64::new(0))
                        .collect(),
                    meta_addr,
                    frames_addr,
                }
            })
            .collect();
        // Buffers start empty and grow to what their CPU frees between
        // two applications (at most about `BUFFER_CAP`).
        let buffers = (0..slots * spaces.len())
            .map(|_| CachePadded(Mutex::new(Vec::new())))
            .collect();
        // Homes are spaces cut from zones large enough to hold a CPU's
        // share: a small zone (DMA's 16 MiB) would make its CPU wrap round
        // a few thousand frames while the rest of memory sits idle.
        let share = map.frames().div_ceil(u64::from(cpus));
        let size = |s: usize| bounds[s].1 - bounds[s].0;
        let mut homes: Vec<u32> = (0..bounds.len())
            .filter(|&s| 2 * size(s) >= share)
            .map(|s| s as u32)
            .collect();
        if homes.is_empty() {
            homes = (0..bounds.len() as u32).collect();
        }
        let home = (0..cpus)
            .map(|cpu| homes[cpu as usize % homes.len()])
            .collect();
        // Fallback prefers high memory, as Linux's zonelist tries Normal
        // before DMA32 before DMA.
        let mut fallback: Vec<u32> = (0..bounds.len() as u32).collect();
        fallback.sort_by_key(|&s| core::cmp::Reverse(bounds[s as usize].0));
        let first_chunk = bounds[0].0 / SPACE_ALIGN;
        let last_chunk = (bounds[bounds.len() - 1].1 - 1) / SPACE_ALIGN;
        // Zones far apart would make the table large for nothing: then
        // every lookup searches `bounds`.
        let chunks = last_chunk - first_chunk + 1;
        let worth = chunks <= 2 * map.frames() / SPACE_ALIGN + 64
            && bounds.len() < usize::from(MIXED_CHUNK);
        let chunk_space = (first_chunk..=last_chunk)
            .take_while(|_| worth)
            .map(|c| {
                // `space_below` is monotonic, so equal at both ends means
                // equal throughout.
                let s = space_below(&bounds, c * SPACE_ALIGN);
                if s == space_below(&bounds, (c + 1) * SPACE_ALIGN - 1) {
                    s as u16
                } else {
                    MIXED_CHUNK
                }
            })
            .collect();
        Ok(IBuddy {
            map,
            spaces,
            buffers,
            slots,
            stamped: slots > 1,
            free_order: FreeOrder::Accepted,
            bounds: bounds.into_boxed_slice(),
            chunk_space,
            first_chunk,
            home,
            fallback: fallback.into_boxed_slice(),
            cpus,
        })
    }

    /// This allocator with frees buffered on different CPUs applied in
    /// `order` (see [`FreeOrder`]). Meant for a fresh allocator; on one in
    /// use, frees already buffered are applied in some order, each once.
    pub fn with_free_order(mut self, order: FreeOrder) -> Self {
        self.free_order = order;
        self.stamped = order == FreeOrder::Accepted && self.slots > 1;
        self
    }

    /// The order frees buffered on different CPUs are applied in.
    pub fn free_order(&self) -> FreeOrder {
        self.free_order
    }

    /// Number of buddy spaces.
    pub fn spaces(&self) -> usize {
        self.spaces.len()
    }

    /// The space holding `pfn`, or for a pfn outside every space the one
    /// below it (the first, below them all). One load from `chunk_space`
    /// unless two spaces meet in the pfn's run of `SPACE_ALIGN` pfns.
    #[inline]
    fn space_of(&self, pfn: Pfn) -> usize {
        if self.bounds.len() == 1 {
            return 0;
        }
        let chunk = (pfn.0 / SPACE_ALIGN).wrapping_sub(self.first_chunk);
        match self.chunk_space.get(chunk as usize) {
            Some(&s) if s != MIXED_CHUNK => usize::from(s),
            _ => space_below(&self.bounds, pfn.0),
        }
    }

    /// The home space could not serve the request: try the others in turn
    /// (Algorithm 1, lines 8-9).
    #[cold]
    fn alloc_fallback(&self, req: Request, home: usize) -> Result<Pfn, AllocError> {
        self.others(home)
            .find_map(|s| self.take(s, &mut self.spaces[s].space.lock(), req.order))
            .ok_or(AllocError::OutOfMemory { order: req.order })
    }

    /// Space `s` under its lock, with its queued frees applied: the only
    /// way to look at a space.
    #[inline]
    fn lock(&self, s: usize) -> MutexGuard<'_, R, Space> {
        let mut space = self.spaces[s].space.lock();
        self.apply_queue(s, &mut space);
        space
    }

    /// Apply space `s`'s buffered frees, in the order they were accepted.
    #[inline]
    fn apply_queue(&self, s: usize, space: &mut Space) {
        let shared = &self.spaces[s];
        if shared
            .nonempty
            .iter()
            .all(|w| w.load(Ordering::Acquire) == 0)
        {
            return;
        }
        self.gather(s, space);
    }

    /// Move every buffer of space `s` into `space.spare`, sort it by
    /// stamp and apply it.
    #[cold]
    fn gather(&self, s: usize, space: &mut Space) {
        let shared = &self.spaces[s];
        let spaces = self.spaces.len();
        let mut gathered = 0;
        for (w, word) in shared.nonempty.iter().enumerate() {
            let mut bits = word.load(Ordering::Acquire);
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let mut buffer = self.buffers[(64 * w + b) * spaces + s].lock();
                space.spare.extend_from_slice(&buffer);
                buffer.clear();
                word.fetch_and(!(1 << b), Ordering::Relaxed);
                gathered += 1;
            }
        }
        // One buffer is in the order its frees were accepted already.
        // Across buffers, stamps of frees not yet applied lie within a
        // window far below 2^31, so the distance from any one of them
        // orders them across the counter's wrap. Without stamps
        // (`FreeOrder::PerCpu`) the buffers stay one after another.
        if let Some(base) = space
            .spare
            .first()
            .map(|q| q.stamp)
            .filter(|_| gathered > 1 && self.stamped)
        {
            space
                .spare
                .sort_unstable_by_key(|q| q.stamp.wrapping_sub(base) as i32);
        }
        space.apply_spare();
    }

    /// Allocate from space `s` (held by the caller as `space`), marking a
    /// single frame handed.
    ///
    /// A single frame comes off the front of the free list, and buffered
    /// frees would all go to its back; the bitmaps and the next allocation
    /// level are functions of the set of free frames, whatever the order
    /// frees are applied in. So taking a frame from a non-empty list and
    /// applying the buffers afterwards leaves exactly the state applying
    /// them first would: only an empty list, or a block request (which
    /// reads the bitmaps), needs the buffers applied first.
    #[inline]
    fn take(&self, s: usize, space: &mut Space, order: Order) -> Option<Pfn> {
        if order != Order::ZERO || space.free_list.len() == 0 {
            self.apply_queue(s, space);
        }
        let pfn = space.alloc(order)?;
        if order == Order::ZERO {
            let (w, bit) = handed_bit(space.start, pfn);
            self.spaces[s].handed[w].fetch_or(bit, Ordering::Relaxed);
        }
        Some(pfn)
    }

    /// Claim the free of single frame `pfn` in space `s`: clear its handed
    /// bit. `false` when the bit was clear (not an order-0 block in a
    /// caller's hands); nothing changes then.
    #[inline]
    fn claim(&self, s: usize, pfn: Pfn) -> bool {
        let (w, bit) = handed_bit(self.bounds[s].0, pfn);
        self.spaces[s].handed[w].fetch_and(!bit, Ordering::AcqRel) & bit != 0
    }

    /// Why a free of `pfn` with `order` is refused, for a single frame
    /// whose claim failed: the space's records, with its queue applied,
    /// know. A frame they still show allocated was freed by a concurrent
    /// call whose free is on its way into the queue.
    #[cold]
    fn refusal(&self, s: usize, pfn: Pfn, order: Order) -> AllocError {
        match self.lock(s).check_free(pfn, order) {
            Err(e) => e,
            Ok(()) => AllocError::DoubleFree { pfn, order },
        }
    }

    /// The first of `n` consecutive stamps for frees into space `s` (0
    /// without stamps: with one buffer a space its order is the order of
    /// acceptance, and `FreeOrder::PerCpu` keeps none).
    #[inline]
    fn take_stamps(&self, s: usize, n: u32) -> u32 {
        if self.stamped {
            self.spaces[s].stamp.fetch_add(n, Ordering::Relaxed)
        } else {
            0
        }
    }

    /// Claimed single frames of space `s`, freed on `cpu`, to the space:
    /// applied at once when `apply_now` can, else buffered.
    #[inline]
    fn hand_over(&self, s: usize, cpu: u32, pfns: &[Pfn]) {
        if !self.apply_now(s, pfns) {
            for chunk in pfns.chunks(DRAIN_AT) {
                self.enqueue(s, cpu, chunk);
            }
        }
    }

    /// Apply claimed single frames of space `s` at once, as immediate
    /// frees, when nothing is buffered for the space and its lock is free
    /// (no buffer lock, no copies, no later gathering); `false`, having
    /// done nothing, otherwise. With the buffers empty, applying now
    /// keeps the order of acceptance: a free accepted on another CPU but
    /// not yet buffered is concurrent with this call, and either order is
    /// one these calls could have had.
    #[inline]
    fn apply_now(&self, s: usize, pfns: &[Pfn]) -> bool {
        let shared = &self.spaces[s];
        let queued = || {
            shared
                .nonempty
                .iter()
                .any(|w| w.load(Ordering::Acquire) != 0)
        };
        if pfns.is_empty() || queued() {
            return false;
        }
        let Some(mut space) = shared.space.try_lock() else {
            return false;
        };
        if queued() {
            return false;
        }
        let start = self.bounds[s].0;
        space.release_frames(pfns.len(), |n| (pfns[n].0 - start) as u32);
        true
    }

    /// Buffer claimed single frames of space `s`, freed on `cpu`; apply
    /// the space's buffers when this one is long enough and the space's
    /// lock is free, or wait for the lock when it is full.
    #[inline]
    fn enqueue(&self, s: usize, cpu: u32, pfns: &[Pfn]) {
        if pfns.is_empty() {
            return;
        }
        let shared = &self.spaces[s];
        let start = self.bounds[s].0;
        let slot = cpu as usize % self.slots;
        let stamp = self.take_stamps(s, pfns.len() as u32);
        let len = {
            let mut buffer = self.buffers[slot * self.spaces.len() + s].lock();
            if buffer.is_empty() {
                shared.nonempty[slot / 64].fetch_or(1 << (slot % 64), Ordering::Release);
            }
            buffer.extend(pfns.iter().zip(0u32..).map(|(pfn, k)| Queued {
                stamp: stamp.wrapping_add(k),
                index: (pfn.0 - start) as u32,
            }));
            buffer.len()
        };
        if len >= DRAIN_AT {
            self.drain_buffers(s, len);
        }
    }

    /// `enqueue` of one frame, the path of every single-frame `free`;
    /// asks for the lines applying the free will write unless the frame
    /// neighbours the one buffered before it (a bulk free: those lines
    /// are cached already) or its space is another CPU's home (that CPU
    /// applies it, and its cache is where the lines belong).
    #[inline]
    fn enqueue_one(&self, s: usize, cpu: u32, pfn: Pfn) {
        let shared = &self.spaces[s];
        let start = self.bounds[s].0;
        let slot = cpu as usize % self.slots;
        let stamp = self.take_stamps(s, 1);
        let index = (pfn.0 - start) as u32;
        let home = self.home[cpu as usize] as usize == s;
        let len = {
            let mut buffer = self.buffers[slot * self.spaces.len() + s].lock();
            if buffer.is_empty() {
                shared.nonempty[slot / 64].fetch_or(1 << (slot % 64), Ordering::Release);
            }
            let scattered = buffer
                .last()
                .is_none_or(|q| q.index.wrapping_sub(index).wrapping_add(8) > 16);
            if home && scattered {
                prefetch_apply(shared, start, pfn);
            }
            buffer.push(Queued { stamp, index });
            buffer.len()
        };
        if len >= if home { DRAIN_AT } else { REMOTE_DRAIN_AT } {
            self.drain_buffers(s, len);
        }
    }

    /// Space `s`'s buffer just reached `len` frees: apply the space's
    /// buffers if its lock is free, or wait for it once `len` reaches
    /// `BUFFER_CAP`.
    #[cold]
    fn drain_buffers(&self, s: usize, len: usize) {
        if let Some(mut space) = self.spaces[s].space.try_lock() {
            self.gather(s, &mut space);
        } else if len >= BUFFER_CAP {
            drop(self.lock(s));
        }
    }

    /// `free_bulk`; `CHECK` as for `free_run`.
    #[inline]
    fn free_bulk_with<const CHECK: bool>(
        &self,
        blocks: &[Pfn],
        req: Request,
    ) -> Result<(), (usize, AllocError)> {
        check_cpu(req, self.cpus).map_err(|e| (0, e))?;
        let mut n = 0;
        while n < blocks.len() {
            self.map
                .zone_of_block(blocks[n], req.order)
                .map_err(|e| (n, e))?;
            let s = self.space_of(blocks[n]);
            let (start, end) = self.bounds[s];
            let run = n + blocks[n..]
                .iter()
                .take_while(|pfn| (start..end).contains(&pfn.0))
                .count();
            if req.order == Order::ZERO {
                self.free_run::<CHECK>(s, blocks, n, run, req.cpu)?;
                n = run;
                continue;
            }
            let mut space = self.lock(s);
            while n < run {
                let pfn = blocks[n];
                pfn.ensure_aligned(req.order).map_err(|e| (n, e))?;
                space.check_free(pfn, req.order).map_err(|e| (n, e))?;
                space.free(pfn, req.order);
                n += 1;
            }
        }
        Ok(())
    }

    /// Free `blocks[n..run]`, single frames of space `s`, on `cpu`: clear
    /// their handed bits (one `fetch_and` per handed word) and apply them
    /// at once if nothing is buffered for the space and its lock is free,
    /// else queue them with one buffer lock per `DRAIN_AT` frames (a lazy
    /// layer's gatherings come grouped by `lock_group`, so a space's
    /// frames are one run).
    /// `CHECK`: test each claim and refuse the first frame not handed, as
    /// `free` does; without it (`free_bulk_vouched` in release builds) the
    /// bits are cleared unconditionally, a `lock and` instead of a
    /// compare-and-swap loop and no refusal branch.
    #[inline]
    fn free_run<const CHECK: bool>(
        &self,
        s: usize,
        blocks: &[Pfn],
        mut n: usize,
        run: usize,
        cpu: u32,
    ) -> Result<(), (usize, AllocError)> {
        let req = Request::single(cpu);
        let start = self.bounds[s].0;
        let mut claimed = [Pfn(0); DRAIN_AT];
        let handed = &self.spaces[s].handed;
        // Scattered frames' lines, asked for before the claims;
        // a dense run (a drained list, a bulk free) needs no hint.
        let mut last = u64::MAX - 64;
        for &pfn in &blocks[n..run] {
            if pfn.0.wrapping_sub(last).wrapping_add(8) > 16 {
                prefetch_apply(&self.spaces[s], start, pfn);
            }
            last = pfn.0;
        }
        if !CHECK {
            // Vouched frames: clear each handed word's bits with one
            // `fetch_and` whose result is not read, and queue the frames
            // straight from `blocks`.
            let first = n;
            while n < run {
                let (w, mut mask) = handed_bit(start, blocks[n]);
                n += 1;
                while n < run {
                    let (w2, bit) = handed_bit(start, blocks[n]);
                    if w2 != w {
                        break;
                    }
                    mask |= bit;
                    n += 1;
                }
                handed[w].fetch_and(!mask, Ordering::AcqRel);
            }
            self.hand_over(s, cpu, &blocks[first..run]);
            return Ok(());
        }
        let mut count = 0;
        while n < run {
            // Claim the next frames that share a handed word with
            // one `fetch_and` (a give-back of a drained list often
            // does); a repeated frame starts a new group, so
            // it is refused as a double free.
            let (w, mut mask) = handed_bit(start, blocks[n]);
            let mut g = n + 1;
            while g < run && count + (g - n) < claimed.len() {
                let (w2, bit) = handed_bit(start, blocks[g]);
                if w2 != w || mask & bit != 0 {
                    break;
                }
                mask |= bit;
                g += 1;
            }
            let old = handed[w].fetch_and(!mask, Ordering::AcqRel);
            if old & mask != mask {
                // Refuse the first frame not handed; give the ones
                // after it their bits back, untouched.
                let bit = |k: usize| handed_bit(start, blocks[k]).1;
                let bad = (n..g).find(|&k| old & bit(k) == 0).unwrap_or(n);
                let after = (bad + 1..g).fold(0, |m, k| m | bit(k)) & old;
                if after != 0 {
                    handed[w].fetch_or(after, Ordering::AcqRel);
                }
                for &pfn in &blocks[n..bad] {
                    claimed[count] = pfn;
                    count += 1;
                }
                self.hand_over(s, cpu, &claimed[..count]);
                return Err((bad, self.refusal(s, blocks[bad], req.order)));
            }
            for &pfn in &blocks[n..g] {
                claimed[count] = pfn;
                count += 1;
            }
            n = g;
            if count == claimed.len() {
                self.hand_over(s, cpu, &claimed);
                count = 0;
            }
        }
        self.hand_over(s, cpu, &claimed[..count]);
        Ok(())
    }

    /// The spaces other than `home`, in fallback order.
    fn others(&self, home: usize) -> impl Iterator<Item = usize> + '_ {
        self.fallback
            .iter()
            .map(|&s| s as usize)
            .filter(move |&s| s != home)
    }
}

/// In what order single-frame frees buffered on different CPUs reach a
/// buddy space's free list, and so are reused (iBuddy hands out the least
/// recently freed frame first). With one CPU, or one buffer a space, both
/// are the order of the calls.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "kebab-case")
)]
pub enum FreeOrder {
    /// The order the frees were accepted in, across CPUs: each takes a
    /// stamp from its space's counter, and a space's buffers are merged by
    /// stamp, so every allocation sees exactly the state immediate frees
    /// would have left. A replay gets the same frames whatever CPUs its
    /// frees name. The counter is written by every CPU freeing into the
    /// space, so under concurrent frees its line moves between CPUs on
    /// every free (bench-peers' `rand` rows with and without `-percpu`
    /// measure the cost).
    #[default]
    Accepted,
    /// Each CPU's own order: no stamp, no write shared by CPUs on a free,
    /// and a space's buffers applied one CPU after another (lowest
    /// first). Between two applications of a space's buffers (at most
    /// `BUFFER_CAP` frees a CPU; `DRAIN_AT` on the space's home CPU,
    /// up to `REMOTE_DRAIN_AT` elsewhere unless the home CPU applies
    /// them first) frames freed on different CPUs may be reused out of
    /// the order they were freed in, as with Linux's per-CPU lists.
    PerCpu,
}

impl FreeOrder {
    /// Both, the default first.
    pub const ALL: [FreeOrder; 2] = [FreeOrder::Accepted, FreeOrder::PerCpu];

    /// Its name, as options take it: `accepted` or `per-cpu`.
    pub const fn name(self) -> &'static str {
        match self {
            FreeOrder::Accepted => "accepted",
            FreeOrder::PerCpu => "per-cpu",
        }
    }
}

impl core::str::FromStr for FreeOrder {
    type Err = alloc::string::String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        FreeOrder::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| {
                alloc::format!("unknown free order '{text}': expected accepted or per-cpu")
            })
    }
}

/// `IBuddy::chunk_space`'s mark of a run of pfns where two spaces meet.
const MIXED_CHUNK: u16 = u16::MAX;

/// The space holding `pfn`, or the one below it (the first, below them
/// all), in `bounds` (ascending).
fn space_below(bounds: &[(u64, u64)], pfn: u64) -> usize {
    bounds
        .partition_point(|&(start, _)| start <= pfn)
        .saturating_sub(1)
}

/// Cut the zones into spaces of about `total / count` frames.
fn partition(map: &ZoneMap, count: u32) -> Vec<(u64, u64)> {
    let target = map
        .frames()
        .div_ceil(u64::from(count))
        .next_multiple_of(SPACE_ALIGN);
    let mut bounds = Vec::new();
    for zone in map.zones() {
        let mut start = zone.start.0;
        while start < zone.end.0 {
            let mut end = ((start + target) & !(SPACE_ALIGN - 1)).min(zone.end.0);
            // Do not leave a sliver of less than half a space behind.
            if zone.end.0 - end < target / 2 {
                end = zone.end.0;
            }
            bounds.push((start, end));
            start = end;
        }
    }
    bounds
}

impl Space {
    fn new(start: u64, end: u64) -> Space {
        let frames = (end - start) as usize;
        let mut free = FrameMeta::UNLINKED_TAIL;
        free.state.set_free(Order::ZERO);
        // Everything free, listed in pfn order so the first allocations
        // sweep the space from its start. Built directly rather than by
        // freeing frame after frame: the same state, without climbing the
        // bitmaps once per frame.
        let (meta, free_list) = FrameList::in_order(free.state, frames as u32);
        let mut space = Space {
            start,
            end,
            spare: Vec::new(),
            meta,
            free_list,
            frames: FrameBitmap::new(start, end - 1),
            blocks: core::array::from_fn(|i| {
                let k = i + STORED as usize;
                LevelBitmap::new(start >> k, (end - 1) >> k)
            }),
            next_level: -1,
            cursor: core::array::from_fn(|i| start >> (i + 1)),
        };
        space.frames.set_range(start, end);
        for k in 1..=MAX_ORDER {
            let first = start.div_ceil(1 << k);
            let last = end >> k;
            if first < last {
                if k >= STORED {
                    space.blocks[usize::from(k - STORED)].set_range(first, last);
                }
                space.next_level = k as i8;
            }
        }
        if frames > 0 && space.next_level < 0 {
            space.next_level = 0;
        }
        space
    }

    #[inline]
    fn index(&self, pfn: u64) -> u32 {
        (pfn - self.start) as u32
    }

    /// Free the frames in `spare` (indices of claimed single frames), in
    /// order, and empty it. Their records are asked for first, so the
    /// cache misses of a batch of random frees overlap.
    fn apply_spare(&mut self) {
        let spare = core::mem::take(&mut self.spare);
        self.release_frames(spare.len(), |n| spare[n].index);
        self.spare = spare;
        self.spare.clear();
    }

    /// Free `count` claimed single frames, the `n`th at index `index(n)`,
    /// in order. Their records are asked for first, so the cache misses
    /// of a batch of random frees overlap.
    #[inline]
    fn release_frames(&mut self, count: usize, index: impl Fn(usize) -> u32) {
        // A sliding window of requests: a CPU tracks only so many misses
        // at once (and drops prefetches beyond them), so asking for the
        // whole batch up front overlaps no more than this does.
        for n in 0..count.min(PREFETCH_AHEAD) {
            crate::bankbuddy::prefetch(&self.meta[index(n) as usize]);
        }
        for n in 0..count {
            if n + PREFETCH_AHEAD < count {
                crate::bankbuddy::prefetch(&self.meta[index(n + PREFETCH_AHEAD) as usize]);
            }
            let i = index(n);
            debug_assert!(self.meta[i as usize].state.is_allocated(Order::ZERO));
            self.release_frame(self.start + u64::from(i));
        }
    }

    /// Whether the aligned block of order `k` with index `block` is wholly
    /// free.
    #[inline]
    fn is_free(&self, k: u8, block: u64) -> bool {
        if k < STORED {
            self.frames.is_free(k, block)
        } else {
            self.blocks[usize::from(k - STORED)].get(block)
        }
    }

    /// Wholly free blocks of stored order `k`.
    #[inline]
    fn stored_count(&self, k: u8) -> u64 {
        self.blocks[usize::from(k - STORED)].count()
    }

    /// Wholly free blocks of every order (orders below `STORED` counted
    /// from the frames' bits in one pass: for statistics and checks).
    fn counts(&self) -> [u64; MAX_ORDER as usize + 1] {
        let mut counts = [0; MAX_ORDER as usize + 1];
        counts[..STORED as usize].copy_from_slice(&self.frames.counts());
        for k in STORED..=MAX_ORDER {
            counts[k as usize] = self.stored_count(k);
        }
        counts
    }

    /// Put one frame on the free list and mark it, and every block it
    /// completes, free.
    #[inline]
    fn release_frame(&mut self, pfn: u64) {
        let i = self.index(pfn);
        self.meta[i as usize].state.set_free(Order::ZERO);
        self.free_list.push_back(&mut self.meta, i);
        let height = self.frames.set(pfn);
        self.block_freed(pfn, height);
    }

    /// The frames' bits of the block holding `pfn` are set and `height`
    /// (of `FrameBitmap::set`) is the largest order of a wholly free block
    /// holding it inside its word: when that is the whole word, mark the
    /// word's block at `STORED` and climb; raise the next allocation level
    /// to the largest block completed.
    #[inline]
    fn block_freed(&mut self, pfn: u64, height: u8) {
        if height >= STORED {
            self.blocks[0].set(pfn >> STORED);
            self.coalesce_up(pfn, STORED);
        } else {
            self.next_level = self.next_level.max(height as i8);
        }
    }

    /// The block of order `from` at `pfn` has just become free: mark its
    /// ancestors free while their other halves are, and raise the next
    /// allocation level to the largest block completed (Algorithm 2, lines
    /// 13-14).
    #[inline]
    fn coalesce_up(&mut self, pfn: u64, from: u8) {
        debug_assert!(from >= STORED);
        let mut k = from;
        while k < MAX_ORDER && self.is_free(k, (pfn >> k) ^ 1) {
            k += 1;
            self.blocks[usize::from(k - STORED)].set(pfn >> k);
        }
        self.next_level = self.next_level.max(k as i8);
    }

    /// The block of order `from - 1` at `pfn` is no longer free (its own
    /// bits are cleared): clear its ancestors' bits while they are set,
    /// then lower the next allocation level past orders left without a
    /// free block (Algorithm 1, lines 18-19).
    #[inline]
    fn uncoalesce_up(&mut self, pfn: u64, from: u8) {
        let mut k = from.max(STORED);
        while k <= MAX_ORDER && self.blocks[usize::from(k - STORED)].test_and_clear(pfn >> k) {
            k += 1;
        }
        self.lower_next_level();
    }

    /// Lower the next allocation level past stored orders left without a
    /// free block (to -1 when no frame is free); below `STORED` it stays,
    /// an upper bound, until a search fails.
    #[inline]
    fn lower_next_level(&mut self) {
        if self.free_list.len() == 0 {
            self.next_level = -1;
            return;
        }
        while self.next_level >= STORED as i8 && self.stored_count(self.next_level as u8) == 0 {
            self.next_level -= 1;
        }
    }

    /// Algorithm 1 without the lazy layer.
    #[inline]
    fn alloc(&mut self, order: Order) -> Option<Pfn> {
        if order == Order::ZERO {
            let i = self.free_list.pop_front(&mut self.meta)?;
            self.meta[i as usize].state.set_allocated(order);
            let pfn = self.start + u64::from(i);
            // Orders below `STORED` are derived. Only a word that was wholly
            // free had its block, and maybe ancestors, marked at `STORED`
            // and up.
            if self.frames.clear(pfn) >= STORED {
                self.uncoalesce_up(pfn, STORED);
            } else {
                self.lower_next_level();
            }
            return Some(Pfn(pfn));
        }
        self.alloc_block(order)
    }

    /// Coalesce: find a wholly free block of `order` and take its frames
    /// off the free list.
    fn alloc_block(&mut self, order: Order) -> Option<Pfn> {
        let k = order.get();
        if self.next_level < k as i8 {
            return None;
        }
        let cursor = self.cursor[k as usize - 1];
        let found = if k < STORED {
            self.frames.find_from(k, cursor, FIT_PATIENCE)
        } else {
            self.blocks[usize::from(k - STORED)].find_from(cursor, FIT_PATIENCE)
        };
        let Some(block) = found else {
            // No free block of order `k` or above.
            if k < STORED {
                self.next_level = k as i8 - 1;
            }
            return None;
        };
        self.cursor[k as usize - 1] = block + 1;
        let first = block << k;
        for pfn in first..first + order.frames() {
            let i = self.index(pfn);
            self.free_list.remove(&mut self.meta, i);
            self.meta[i as usize].state.set_tail();
        }
        // A word at a time: the block is inside one, or whole words.
        for word in (first..first + order.frames()).step_by(64) {
            self.frames.clear_block(word, k.min(6));
        }
        let head = self.index(first) as usize;
        self.meta[head].state.set_allocated(order);
        // Every stored bit inside the block is set; clear them order by
        // order, then the block's own and its ancestors'.
        for level in STORED..k {
            let bitmap = &mut self.blocks[usize::from(level - STORED)];
            for block in (first >> level)..(first >> level) + (1 << (k - level)) {
                let was_set = bitmap.test_and_clear(block);
                debug_assert!(was_set);
            }
        }
        self.uncoalesce_up(first, k);
        Some(Pfn(first))
    }

    /// Algorithm 2 without the lazy layer, for a block checked by
    /// `check_free`.
    #[inline]
    fn free(&mut self, pfn: Pfn, order: Order) {
        if order == Order::ZERO {
            self.release_frame(pfn.0);
        } else {
            self.free_block(pfn.0, order.get());
        }
    }

    /// Split: put every frame of the block on the free list.
    fn free_block(&mut self, first: u64, k: u8) {
        for pfn in first..first + (1 << k) {
            let i = self.index(pfn);
            self.meta[i as usize].state.set_free(Order::ZERO);
            self.free_list.push_back(&mut self.meta, i);
        }
        // A word at a time: the block is inside one, or whole words.
        let mut height = 0;
        for word in (first..first + (1 << k)).step_by(64) {
            height = self.frames.set_block(word, k.min(6));
        }
        if k < STORED {
            // The block's height: it, and whatever its word now holds
            // around it.
            self.block_freed(first, height);
            return;
        }
        for level in STORED..=k {
            let bitmap = &mut self.blocks[usize::from(level - STORED)];
            for block in (first >> level)..(first >> level) + (1 << (k - level)) {
                bitmap.set(block);
            }
        }
        self.coalesce_up(first, k);
    }

    #[inline]
    fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError> {
        let state = self.meta[self.index(pfn.0) as usize].state;
        if state.is_allocated(order) {
            return Ok(());
        }
        Err(match state.kind() {
            Kind::Allocated(allocated) => AllocError::WrongOrder {
                pfn,
                order,
                allocated,
            },
            Kind::Free(_) if state.ever_allocated() => AllocError::DoubleFree { pfn, order },
            // Free and never a block's head, or inside an allocated block.
            Kind::Free(_) | Kind::Tail => AllocError::NotAllocated { pfn, order },
        })
    }

    fn validate(&self, s: usize) -> Result<(), ValidationError> {
        let name = alloc::format!("space {s} [{:#x}, {:#x})", self.start, self.end);
        // The list holds free frames, each once (a well-formed list of
        // exactly as many members as free bits, all of them free frames).
        self.free_list.check(&self.meta, &name, |i| {
            let pfn = self.start + u64::from(i);
            ensure!(
                self.meta[i as usize].state.kind() == Kind::Free(Order::ZERO),
                "{name}: listed frame {pfn:#x} is not free"
            );
            ensure!(
                self.frames.get(pfn),
                "{name}: listed frame {pfn:#x} has no free bit"
            );
            Ok(())
        })?;
        self.frames
            .consistent()
            .map_err(|e| ValidationError(alloc::format!("{name}: frame bitmap: {e}")))?;
        let counts = self.counts();
        ensure!(
            self.free_list.len() == counts[0],
            "{name}: {} frames listed but {} free bits",
            self.free_list.len(),
            counts[0]
        );
        // Allocated blocks and free frames tile the space.
        let mut pfn = self.start;
        while pfn < self.end {
            let i = self.index(pfn) as usize;
            match self.meta[i].state.kind() {
                Kind::Free(order) => {
                    ensure!(
                        order == Order::ZERO,
                        "{name}: frame {pfn:#x} free with order {order}"
                    );
                    pfn += 1;
                }
                Kind::Allocated(order) => {
                    ensure!(
                        Pfn(pfn).is_aligned(order) && pfn + order.frames() <= self.end,
                        "{name}: block {pfn:#x} of order {order} misaligned or leaves the space"
                    );
                    for tail in pfn..pfn + order.frames() {
                        let t = self.index(tail) as usize;
                        ensure!(
                            tail == pfn || self.meta[t].state.kind() == Kind::Tail,
                            "{name}: frame {tail:#x} inside block {pfn:#x} (order {order}) is not a tail"
                        );
                        ensure!(
                            !self.frames.get(tail),
                            "{name}: allocated frame {tail:#x} has its free bit set"
                        );
                    }
                    pfn += order.frames();
                }
                Kind::Tail => ensure!(false, "{name}: frame {pfn:#x} is a tail outside any block"),
            }
        }
        // Each stored bit is the AND of its halves; blocks that leave the
        // space are never marked. (The orders below are derived from the
        // frames' bits, so they hold this by construction.)
        for k in STORED..=MAX_ORDER {
            let level = &self.blocks[usize::from(k - STORED)];
            level
                .consistent()
                .map_err(|e| ValidationError(alloc::format!("{name}: order {k} bitmap: {e}")))?;
            for block in (self.start >> k)..=((self.end - 1) >> k) {
                let inside = block << k >= self.start && (block + 1) << k <= self.end;
                let expect =
                    inside && self.is_free(k - 1, 2 * block) && self.is_free(k - 1, 2 * block + 1);
                ensure!(
                    level.get(block) == expect,
                    "{name}: order {k} bit of block {:#x} is {} but its halves say {expect}",
                    block << k,
                    level.get(block)
                );
            }
        }
        let highest = (0..=MAX_ORDER).rev().find(|&k| counts[k as usize] > 0);
        let exact = highest.map_or(-1, |k| k as i8);
        ensure!(
            self.next_level == exact
                || (exact < self.next_level && self.next_level <= DERIVED as i8),
            "{name}: next allocation level {} but the highest free block has order {highest:?}",
            self.next_level
        );
        Ok(())
    }

    fn add_stats(&self, stats: &mut Stats) {
        stats.free_frames += self.free_list.len();
        // Maximal free blocks: the free blocks of an order less the halves
        // of free blocks one order up (every free block that is not
        // maximal has a free parent, and every free parent two free
        // halves).
        let counts = self.counts();
        for k in 0..=MAX_ORDER as usize {
            let parents = counts.get(k + 1).copied().unwrap_or(0);
            stats.free_blocks[k] += counts[k] - 2 * parents;
        }
    }

    fn metadata_bytes(&self) -> usize {
        core::mem::size_of::<Space>()
            + self.spare.capacity() * core::mem::size_of::<Queued>()
            + self.meta.capacity() * core::mem::size_of::<FrameMeta>()
            + self.frames.bytes()
            + self.blocks.iter().map(LevelBitmap::bytes).sum::<usize>()
    }
}

/// Ask for the lines applying a buffered free of frame `index` of
/// `shared`'s space will write: its record and its order-0 bitmap word
/// (the list's tail, the byte of the word's largest free
/// block and the stored bitmaps are few and hot).
/// Issued when the free is accepted, so by the time a batch is applied,
/// `DRAIN_AT` frees later, its misses are over.
#[inline]
fn prefetch_apply<R: RawMutex>(shared: &Shared<R>, start: u64, pfn: Pfn) {
    let record = shared.meta_addr + (pfn.0 - start) as usize * core::mem::size_of::<FrameMeta>();
    // A 12-byte record may straddle two lines.
    crate::prefetch_addr(record);
    crate::prefetch_addr(record + core::mem::size_of::<FrameMeta>() - 1);
    // The bitmap of order `k` starts at block `(start >> k) & !63`.
    crate::prefetch_addr(shared.frames_addr + ((pfn.0 - (start & !63)) / 64) as usize * 8);
}

/// Word and bit of frame `pfn` in the handed bitmap of the space starting
/// at `start`.
#[inline]
fn handed_bit(start: u64, pfn: Pfn) -> (usize, u64) {
    let i = pfn.0 - start;
    ((i / 64) as usize, 1 << (i % 64))
}

impl<R: RawMutex + Send + Sync> FrameAllocator for IBuddy<R> {
    fn alloc(&self, req: Request) -> Result<Pfn, AllocError> {
        check_cpu(req, self.cpus)?;
        let home = self.home[req.cpu as usize] as usize;
        if let Some(pfn) = self.take(home, &mut self.spaces[home].space.lock(), req.order) {
            return Ok(pfn);
        }
        self.alloc_fallback(req, home)
    }

    fn free(&self, pfn: Pfn, req: Request) -> Result<(), AllocError> {
        check_cpu(req, self.cpus)?;
        self.map.zone_of_block(pfn, req.order)?;
        let s = self.space_of(pfn);
        if req.order == Order::ZERO {
            if !self.claim(s, pfn) {
                return Err(self.refusal(s, pfn, req.order));
            }
            self.enqueue_one(s, req.cpu, pfn);
            return Ok(());
        }
        let mut space = self.lock(s);
        space.check_free(pfn, req.order)?;
        space.free(pfn, req.order);
        Ok(())
    }

    fn check_free(&self, pfn: Pfn, order: Order) -> Result<(), AllocError> {
        self.map.zone_of_block(pfn, order)?;
        let s = self.space_of(pfn);
        self.lock(s).check_free(pfn, order)?;
        let (w, bit) = handed_bit(self.bounds[s].0, pfn);
        if order == Order::ZERO && self.spaces[s].handed[w].load(Ordering::Acquire) & bit == 0 {
            // Claimed by a free that is on its way into the queue.
            return Err(AllocError::DoubleFree { pfn, order });
        }
        Ok(())
    }

    /// Asks for the frame's handed word and the lines applying its free
    /// will write.
    #[inline]
    fn prefetch_free(&self, pfn: Pfn) {
        // Any pfn is allowed: one below every space has no space.
        let Some(s) = self
            .bounds
            .partition_point(|&(start, _)| start <= pfn.0)
            .checked_sub(1)
        else {
            return;
        };
        let (start, end) = self.bounds[s];
        if (start..end).contains(&pfn.0) {
            let (w, _) = handed_bit(start, pfn);
            crate::prefetch_addr(&self.spaces[s].handed[w] as *const AtomicU64 as usize);
            prefetch_apply(&self.spaces[s], start, pfn);
        }
    }

    /// The frame's buddy space (for a pfn outside every space, the one
    /// below it, or the first): each space has its own lock and queue.
    #[inline]
    fn lock_group(&self, pfn: Pfn) -> u32 {
        self.space_of(pfn) as u32
    }

    fn lock_groups(&self) -> u32 {
        self.spaces.len() as u32
    }

    fn alloc_bulk(&self, req: Request, out: &mut [Pfn]) -> usize {
        if check_cpu(req, self.cpus).is_err() {
            return 0;
        }
        let home = self.home[req.cpu as usize] as usize;
        let mut filled = 0;
        for s in core::iter::once(home).chain(self.others(home)) {
            let mut space = self.spaces[s].space.lock();
            while filled < out.len() {
                match self.take(s, &mut space, req.order) {
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
        self.free_bulk_with::<true>(blocks, req)
    }

    /// Single frames without the handed-bit test in release builds (see
    /// `free_run`); debug builds test and refuse as `free_bulk` does, so
    /// a caller breaking the contract is caught there. In release builds
    /// a broken contract corrupts the space's records, which `validate`
    /// reports (a frame listed twice).
    fn free_bulk_vouched(&self, blocks: &[Pfn], req: Request) -> Result<(), (usize, AllocError)> {
        self.free_bulk_with::<{ cfg!(debug_assertions) }>(blocks, req)
    }

    fn stats(&self) -> Stats {
        let mut stats = Stats {
            managed_frames: self.map.frames(),
            ..Stats::default()
        };
        for s in 0..self.spaces.len() {
            self.lock(s).add_stats(&mut stats);
        }
        stats
    }

    fn validate(&self) -> Result<(), ValidationError> {
        // The spaces tile the zones.
        let mut covered = 0;
        for (s, &(start, end)) in self.bounds.iter().enumerate() {
            ensure!(start < end, "space {s} is empty");
            let zone = self.map.zone_of(Pfn(start));
            ensure!(
                zone.is_some_and(|z| end <= self.map.zones()[z].end.0),
                "space {s} [{start:#x}, {end:#x}) does not lie inside one zone"
            );
            covered += end - start;
        }
        ensure!(
            covered == self.map.frames(),
            "spaces cover {covered} frames of {}",
            self.map.frames()
        );
        for s in 0..self.spaces.len() {
            let space = self.lock(s);
            space.validate(s)?;
            // With the queue applied, a handed bit is set exactly for the
            // order-0 blocks the records show allocated.
            let handed = &self.spaces[s].handed;
            for pfn in space.start..space.end {
                let (w, bit) = handed_bit(space.start, Pfn(pfn));
                let marked = handed[w].load(Ordering::Acquire) & bit != 0;
                let single = space.meta[space.index(pfn) as usize]
                    .state
                    .is_allocated(Order::ZERO);
                ensure!(
                    marked == single,
                    "space {s}: frame {pfn:#x} handed bit {marked} but allocated as a single frame {single}"
                );
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
        self.spaces
            .iter()
            .map(|shared| {
                core::mem::size_of_val(shared)
                    + shared.space.lock().metadata_bytes()
                    + (shared.handed.len() + shared.nonempty.len())
                        * core::mem::size_of::<AtomicU64>()
            })
            .sum::<usize>()
            + self
                .buffers
                .iter()
                .map(|b| {
                    core::mem::size_of_val(b) + b.lock().capacity() * core::mem::size_of::<Queued>()
                })
                .sum::<usize>()
            + self.bounds.len() * core::mem::size_of::<(u64, u64)>()
            + self.chunk_space.len() * core::mem::size_of::<u16>()
            + (self.home.len() + self.fallback.len()) * core::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MigrateType;
    use alloc::vec;

    type Lock = parking_lot::RawMutex;

    /// A PC's layout in small: a DMA zone, a DMA32 zone with a quarter of
    /// memory, and Normal with the rest.
    fn pc_zones() -> [Zone; 3] {
        [
            Zone::new(1, 64),
            Zone::new(4096, 32768),
            Zone::new(32768, 131072),
        ]
    }

    /// The chunk table answers what a search of the spaces' bounds does,
    /// for every pfn: inside spaces, in holes, below and above them all,
    /// with zone edges inside a chunk, and with zones so far apart that
    /// no table is built.
    #[test]
    fn the_space_of_a_pfn_is_the_bounds_search_answer() {
        let odd = [
            Zone::new(3, 700),
            Zone::new(1500, 9000),
            Zone::new(9000, 9100),
            Zone::new(12_000, 20_500),
        ];
        let far = [Zone::new(0, 4096), Zone::new(1 << 40, (1 << 40) + 4096)];
        for (zones, cpus, table) in [
            (&pc_zones()[..], 2, true),
            (&pc_zones()[..], 5, true),
            (&odd[..], 3, true),
            (&odd[..], 7, true),
            (&far[..], 2, false),
        ] {
            let a = IBuddy::<Lock>::new(zones, cpus).unwrap();
            assert_eq!(!a.chunk_space.is_empty(), table, "{zones:?}");
            assert!(a.chunk_space.iter().any(|&s| s != MIXED_CHUNK) || !table);
            let end = zones[zones.len() - 1].end.0;
            let pfns = (0..end.min(1 << 20) + 3000).chain(end - 4096..end + 3000);
            for pfn in pfns {
                assert_eq!(
                    a.space_of(Pfn(pfn)),
                    space_below(&a.bounds, pfn),
                    "{zones:?} cpus {cpus} pfn {pfn}"
                );
            }
        }
    }

    #[test]
    fn cpus_are_homed_on_large_spaces_and_fall_back_highest_first() {
        let a = IBuddy::<Lock>::new(&pc_zones(), 2).unwrap();
        for cpu in 0..2 {
            let pfn = a.alloc(Request::single(cpu)).unwrap();
            assert!(pfn.0 >= 32768, "cpu {cpu} got {pfn} outside Normal");
        }
        // Fill Normal: the next allocations come from DMA32, then DMA.
        let normal = 131072 - 32768 - 2;
        for _ in 0..normal {
            assert!(a.alloc(Request::single(0)).unwrap().0 >= 32768);
        }
        assert!((4096..32768).contains(&a.alloc(Request::single(1)).unwrap().0));
        a.validate().unwrap();
    }

    #[test]
    fn a_block_larger_than_any_home_space_holds_comes_from_another() {
        let a =
            IBuddy::<Lock>::new(&[Zone::new(0, 2048), Zone::new(8192, 8192 + 1024)], 2).unwrap();
        let req = Request::new(Order::MAX, 0, MigrateType::Unmovable);
        let first = a.alloc(req).unwrap();
        let second = a.alloc(req).unwrap();
        let third = a.alloc(req).unwrap();
        let mut got = [first.0, second.0, third.0];
        got.sort_unstable();
        assert_eq!(got, [0, 1024, 8192]);
        assert!(a.alloc(req).is_err());
        a.validate().unwrap();
    }

    /// Single-frame frees buffered per CPU and applied later hand frames
    /// out in exactly the order immediate frees would (least recently
    /// freed first), whichever CPUs the calls name, through `free`,
    /// `free_bulk` and `alloc_bulk`: the property replay relies on.
    /// Maximal free blocks of each order, by looking at every aligned
    /// block of every order: free (every frame of it free) while its
    /// parent is not.
    fn maximal_by_scan(a: &IBuddy<Lock>) -> [u64; MAX_ORDER as usize + 1] {
        let mut out = [0; MAX_ORDER as usize + 1];
        for shared in a.spaces.iter() {
            let space = shared.space.lock();
            let free = |k: u8, block: u64| {
                (block << k) >= space.start
                    && ((block + 1) << k) <= space.end
                    && ((block << k)..((block + 1) << k)).all(|pfn| space.frames.get(pfn))
            };
            for k in 0..=MAX_ORDER {
                for block in (space.start >> k)..=((space.end - 1) >> k) {
                    if free(k, block) && (k == MAX_ORDER || !free(k + 1, block >> 1)) {
                        out[k as usize] += 1;
                    }
                }
            }
        }
        out
    }

    #[test]
    fn statistics_count_maximal_free_blocks_of_every_order() {
        use rand::{Rng, SeedableRng};
        let a = IBuddy::<Lock>::with_spaces(&[Zone::new(100, 9000)], 2, 2).unwrap();
        let mut held: Vec<(Pfn, Order)> = Vec::new();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for step in 0..6000 {
            let cpu = rng.gen_range(0..2);
            if rng.gen_range(0..3) > 0 || held.is_empty() {
                let order = Order::new(rng.gen_range(0..=4)).unwrap();
                if let Ok(pfn) = a.alloc(Request::new(order, cpu, MigrateType::Movable)) {
                    held.push((pfn, order));
                }
            } else {
                let (pfn, order) = held.swap_remove(rng.gen_range(0..held.len()));
                a.free(pfn, Request::new(order, cpu, MigrateType::Movable))
                    .unwrap();
            }
            if step % 500 == 0 {
                a.validate().unwrap();
                assert_eq!(a.stats().free_blocks, maximal_by_scan(&a), "step {step}");
            }
        }
    }

    /// Single-frame frees, buffered or applied at once, on the frame's
    /// home CPU or another, leave each space's free list in the order of
    /// the calls: allocations come off a model FIFO per space. Bursts of
    /// frees from a CPU homed elsewhere (left to the home CPU until
    /// `REMOTE_DRAIN_AT`) are among the calls.
    #[test]
    fn buffered_frees_keep_the_order_of_immediate_ones() {
        // One space shared by 4 CPUs, and two spaces homing 2 CPUs each.
        for spaces in [1, 2] {
            buffered_frees_keep_order(spaces);
        }
    }

    fn buffered_frees_keep_order(spaces: u32) {
        use alloc::collections::VecDeque;
        use rand::seq::SliceRandom;
        use rand::{Rng, SeedableRng};
        let frames = 4 * SPACE_ALIGN;
        let a = IBuddy::<Lock>::with_spaces(&[Zone::new(0, frames)], 4, spaces).unwrap();
        assert_eq!(a.spaces(), spaces as usize);
        // The model: one FIFO of free frames per space, in pfn order at
        // the start.
        let mut model: Vec<VecDeque<u64>> = a
            .bounds
            .iter()
            .map(|&(start, end)| (start..end).collect())
            .collect();
        let home = |cpu: u32| a.home[cpu as usize] as usize;
        let mut held: Vec<Pfn> = Vec::new();
        let mut remote_bursts = 0;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(18);
        for step in 0..40_000 {
            if spaces > 1 && step % 8000 == 4000 {
                // A burst: more than `REMOTE_DRAIN_AT` frames of one
                // space, allocated on a CPU homed there and freed in
                // random order on a CPU homed on the other.
                let (owner, other) = if home(0) == 0 { (0, 1) } else { (1, 0) };
                assert_ne!(home(owner), home(other));
                let fifo = home(owner);
                let n = model[fifo].len().min(REMOTE_DRAIN_AT + 100);
                assert!(n > REMOTE_DRAIN_AT, "step {step}: space {fifo} too full");
                let mut burst: Vec<Pfn> = (0..n)
                    .map(|_| {
                        let pfn = a.alloc(Request::single(owner)).unwrap();
                        assert_eq!(Some(pfn.0), model[fifo].pop_front(), "step {step}");
                        pfn
                    })
                    .collect();
                burst.shuffle(&mut rng);
                for pfn in burst {
                    a.free(pfn, Request::single(other)).unwrap();
                    model[fifo].push_back(pfn.0);
                }
                remote_bursts += 1;
            }
            let cpu = rng.gen_range(0..4);
            let fifo = home(cpu);
            match rng.gen_range(0..1000) {
                0..=399 if !model[fifo].is_empty() => {
                    let pfn = a.alloc(Request::single(cpu)).unwrap();
                    assert_eq!(Some(pfn.0), model[fifo].pop_front(), "step {step}");
                    held.push(pfn);
                }
                400..=499 if model[fifo].len() >= 8 => {
                    let mut out = [Pfn(0); 8];
                    assert_eq!(a.alloc_bulk(Request::single(cpu), &mut out), 8);
                    for pfn in out {
                        assert_eq!(Some(pfn.0), model[fifo].pop_front(), "step {step}");
                        held.push(pfn);
                    }
                }
                500..=599 if held.len() >= 40 => {
                    held.shuffle(&mut rng);
                    let mut run: Vec<Pfn> = held.split_off(held.len() - 40);
                    run.sort_unstable();
                    a.free_bulk(&run, Request::single(cpu)).unwrap();
                    for pfn in run {
                        model[a.space_of(pfn)].push_back(pfn.0);
                    }
                }
                _ if !held.is_empty() => {
                    let pfn = held.swap_remove(rng.gen_range(0..held.len()));
                    a.free(pfn, Request::single(cpu)).unwrap();
                    model[a.space_of(pfn)].push_back(pfn.0);
                }
                _ => {}
            }
            if step % 5000 == 0 {
                a.validate().unwrap();
                let free: usize = model.iter().map(VecDeque::len).sum();
                assert_eq!(a.stats().free_frames, free as u64);
            }
        }
        a.validate().unwrap();
        if spaces > 1 {
            assert!(remote_bursts > 0, "no burst of remote frees");
        }
    }

    /// A frame whose free is still buffered is refused a second time, by
    /// `free`, `free_bulk` (neighbours in one handed word included) and
    /// `check_free`, and the refusals change nothing.
    #[test]
    fn a_buffered_free_is_refused_a_second_time() {
        let a = IBuddy::<Lock>::new(&[Zone::new(0, 4096)], 2).unwrap();
        let frames: Vec<Pfn> = (0..8)
            .map(|_| a.alloc(Request::single(0)).unwrap())
            .collect();
        a.free(frames[0], Request::single(1)).unwrap();
        let double = AllocError::DoubleFree {
            pfn: frames[0],
            order: Order::ZERO,
        };
        assert_eq!(a.free(frames[0], Request::single(0)), Err(double));
        assert_eq!(a.check_free(frames[0], Order::ZERO), Err(double));
        // In one bulk call: frames 1 and 2 freed, 0 refused at index 2, 3
        // untouched (still allocated, freeable afterwards).
        let bulk = [frames[1], frames[2], frames[0], frames[3]];
        assert_eq!(a.free_bulk(&bulk, Request::single(1)), Err((2, double)));
        assert!(a.check_free(frames[1], Order::ZERO).is_err());
        assert_eq!(a.check_free(frames[3], Order::ZERO), Ok(()));
        // The same frame twice in one call.
        let twice = [frames[4], frames[4]];
        assert_eq!(
            a.free_bulk(&twice, Request::single(0)),
            Err((
                1,
                AllocError::DoubleFree {
                    pfn: frames[4],
                    order: Order::ZERO
                }
            ))
        );
        assert_eq!(a.stats().free_frames, 4096 - 8 + 4);
        a.validate().unwrap();
        for &pfn in &[frames[3], frames[5], frames[6], frames[7]] {
            a.free(pfn, Request::single(1)).unwrap();
        }
        assert_eq!(a.stats().free_frames, 4096);
        a.validate().unwrap();
    }

    /// The unchecked give-back of vouched frames (what
    /// `free_bulk_vouched` runs in release builds) leaves exactly the
    /// state the checked `free_bulk` does: the same frames come back in
    /// the same order, and the handed bits stay exact (`validate`).
    #[test]
    fn vouched_frees_leave_the_state_checked_ones_do() {
        use rand::seq::SliceRandom;
        use rand::{Rng, SeedableRng};
        let zones = [Zone::new(0, 2048), Zone::new(4096, 4096 + 3072)];
        let checked = IBuddy::<Lock>::new(&zones, 3).unwrap();
        let vouched = IBuddy::<Lock>::new(&zones, 3).unwrap();
        let mut held: Vec<Pfn> = Vec::new();
        let mut rng = rand::rngs::SmallRng::seed_from_u64(31);
        for step in 0..20_000 {
            let cpu = rng.gen_range(0..3);
            let req = Request::single(cpu);
            if rng.gen_range(0..3) > 0 && held.len() < 4000 {
                let n = rng.gen_range(1..40);
                let mut a = vec![Pfn(0); n];
                let mut b = vec![Pfn(0); n];
                let got = checked.alloc_bulk(req, &mut a);
                assert_eq!(vouched.alloc_bulk(req, &mut b), got, "step {step}");
                assert_eq!(a[..got], b[..got], "step {step}");
                held.extend_from_slice(&a[..got]);
            } else if !held.is_empty() {
                // A lazy layer's gathering: random frames, sorted, some
                // runs of neighbours sharing handed words.
                held.shuffle(&mut rng);
                let n = rng.gen_range(1..=held.len().min(200));
                let mut run = held.split_off(held.len() - n);
                run.sort_unstable();
                checked.free_bulk(&run, req).unwrap();
                let mut m = 0;
                while m < run.len() {
                    let s = vouched.space_of(run[m]);
                    let (start, end) = vouched.bounds[s];
                    let end = m + run[m..]
                        .iter()
                        .take_while(|p| (start..end).contains(&p.0))
                        .count();
                    vouched.free_run::<false>(s, &run, m, end, cpu).unwrap();
                    m = end;
                }
            }
            if step % 2000 == 0 {
                checked.validate().unwrap();
                vouched.validate().unwrap();
                assert_eq!(checked.stats(), vouched.stats(), "step {step}");
            }
        }
        for pfn in held.drain(..) {
            assert_eq!(checked.check_free(pfn, Order::ZERO), Ok(()));
            assert_eq!(vouched.check_free(pfn, Order::ZERO), Ok(()));
        }
        // Everything left comes out of both in the same order.
        loop {
            let a = checked.alloc(Request::single(0));
            assert_eq!(a, vouched.alloc(Request::single(0)));
            if a.is_err() {
                break;
            }
        }
        checked.validate().unwrap();
        vouched.validate().unwrap();
    }

    /// A caller that breaks `free_bulk_vouched`'s contract (a frame freed
    /// already) is refused in debug builds, leaving no trace, as the
    /// trait's documentation says; in release builds `validate` reports
    /// the damage.
    #[test]
    fn a_broken_vouch_is_caught_where_documented() {
        let a = IBuddy::<Lock>::new(&[Zone::new(0, 4096)], 2).unwrap();
        let frames: Vec<Pfn> = (0..4)
            .map(|_| a.alloc(Request::single(0)).unwrap())
            .collect();
        a.free_bulk_vouched(&frames[..2], Request::single(1))
            .unwrap();
        a.validate().unwrap();
        let again = [frames[2], frames[0]];
        let result = a.free_bulk_vouched(&again, Request::single(1));
        if cfg!(debug_assertions) {
            let double = AllocError::DoubleFree {
                pfn: frames[0],
                order: Order::ZERO,
            };
            assert_eq!(result, Err((1, double)));
            assert_eq!(a.check_free(frames[3], Order::ZERO), Ok(()));
            a.validate().unwrap();
            assert_eq!(a.stats().free_frames, 4096 - 1);
        } else {
            assert_eq!(result, Ok(()));
            assert!(a.validate().is_err());
        }
    }
}
