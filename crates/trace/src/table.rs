//! Zeroed per-frame tables in lazily mapped, huge-page memory.
//!
//! A replay keeps a few tables with one slot per frame of the machine
//! (the block tracker's live blocks by traced pfn, the wear counter's
//! writes by placed frame): tens of megabytes for a 24 GiB machine, read
//! and written at random. Profiling the replay (`perf record` on
//! `replay_speed`) showed their cost is not the work but the memory
//! system: every 4 KiB page touched faults once to be zeroed (twice when
//! it is read before it is written: the shared zero page, then a copy),
//! and every lookup of a slot far from the last misses the TLB and walks
//! the page table (`prefetcht0` on the tracker's slot was a tenth of a
//! replay's samples, stalled on the walk).
//!
//! A [`ZeroTable`] therefore takes its memory straight from the system as
//! an anonymous mapping, asks for transparent huge pages on it
//! (`MADV_HUGEPAGE`: one fault and one TLB entry per 2 MiB), and grows by
//! moving the mapping (`mremap`) instead of copying it. The system hands
//! out zeroed pages only where the table is touched, so a table sized to
//! the whole machine costs what the trace uses. Where no mapping can be
//! had (another system, a mapping refused), it is an ordinary `Vec`: the
//! same contents, only slower.
//!
//! ```
//! use nvmos_trace::table::ZeroTable;
//! let mut t = ZeroTable::<u32>::new(1 << 20);
//! assert_eq!(t[12345], 0);
//! t[12345] += 2;
//! t.grow(1 << 22);
//! assert_eq!((t.len(), t[12345], t[(1 << 22) - 1]), (1 << 22, 2, 0));
//! ```

use std::fmt;
use std::ops::{Deref, DerefMut};

/// A type whose value with every byte zero is `0`: what a table's fresh
/// slots read as.
///
/// # Safety
/// Every bit pattern of all zero bytes must be a valid value of the type.
pub unsafe trait Zero: Copy + Default + 'static {}
// SAFETY: integers are valid for every bit pattern, all-zero included.
unsafe impl Zero for u32 {}
// SAFETY: as above.
unsafe impl Zero for u64 {}
// SAFETY: as above.
unsafe impl Zero for u16 {}
// SAFETY: as above.
unsafe impl Zero for u8 {}

/// Tables smaller than this are plain vectors: a mapping of its own is not
/// worth a system call.
const MAP_MIN_BYTES: usize = 1 << 20;

/// The huge page size mappings are rounded to (x86-64 and arm64 with 4 KiB
/// base pages).
const HUGE: usize = 2 << 20;

/// `len` slots of `T`, all zero until written. Derefs to a slice.
pub struct ZeroTable<T: Zero> {
    backing: Backing<T>,
}

enum Backing<T: Zero> {
    Heap(Vec<T>),
    #[cfg(target_os = "linux")]
    Mapped(mapped::Mapping<T>),
}

impl<T: Zero> ZeroTable<T> {
    /// `len` zero slots.
    pub fn new(len: usize) -> ZeroTable<T> {
        #[cfg(target_os = "linux")]
        if len.saturating_mul(std::mem::size_of::<T>()) >= MAP_MIN_BYTES {
            if let Some(m) = mapped::Mapping::new(len) {
                return ZeroTable {
                    backing: Backing::Mapped(m),
                };
            }
        }
        ZeroTable {
            backing: Backing::Heap(vec![T::default(); len]),
        }
    }

    /// Grows to `len` slots (the new ones zero), keeping the contents; a
    /// smaller `len` changes nothing.
    pub fn grow(&mut self, len: usize) {
        if len <= self.len() {
            return;
        }
        #[cfg(target_os = "linux")]
        {
            let big = len.saturating_mul(std::mem::size_of::<T>()) >= MAP_MIN_BYTES;
            match &mut self.backing {
                Backing::Mapped(m) => {
                    if m.grow(len) {
                        return;
                    }
                }
                Backing::Heap(_) if big => {
                    if let Some(mut m) = mapped::Mapping::new(len) {
                        m[..self.len()].copy_from_slice(self);
                        self.backing = Backing::Mapped(m);
                        return;
                    }
                }
                Backing::Heap(_) => {}
            }
        }
        // No mapping (or it could not move): a vector, copied.
        match &mut self.backing {
            Backing::Heap(v) => v.resize(len, T::default()),
            #[cfg(target_os = "linux")]
            Backing::Mapped(_) => {
                let mut v = vec![T::default(); len];
                v[..self.len()].copy_from_slice(self);
                self.backing = Backing::Heap(v);
            }
        }
    }

    /// Whether the table lives in a mapping of its own (huge pages asked
    /// for), not on the heap.
    pub fn is_mapped(&self) -> bool {
        match &self.backing {
            Backing::Heap(_) => false,
            #[cfg(target_os = "linux")]
            Backing::Mapped(_) => true,
        }
    }
}

impl<T: Zero> Default for ZeroTable<T> {
    fn default() -> Self {
        ZeroTable {
            backing: Backing::Heap(Vec::new()),
        }
    }
}

impl<T: Zero> Deref for ZeroTable<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match &self.backing {
            Backing::Heap(v) => v,
            #[cfg(target_os = "linux")]
            Backing::Mapped(m) => m,
        }
    }
}

impl<T: Zero> DerefMut for ZeroTable<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.backing {
            Backing::Heap(v) => v,
            #[cfg(target_os = "linux")]
            Backing::Mapped(m) => m,
        }
    }
}

impl<T: Zero> Clone for ZeroTable<T> {
    fn clone(&self) -> Self {
        let mut t = ZeroTable::new(self.len());
        t.copy_from_slice(self);
        t
    }
}

impl<T: Zero + fmt::Debug> fmt::Debug for ZeroTable<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZeroTable")
            .field("len", &self.len())
            .field("mapped", &self.is_mapped())
            .finish()
    }
}

impl<T: Zero + PartialEq> PartialEq for ZeroTable<T> {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

#[cfg(target_os = "linux")]
mod mapped {
    use super::{Zero, HUGE};
    use std::ops::{Deref, DerefMut};
    use std::ptr::NonNull;

    /// An anonymous private mapping of `bytes` (a multiple of [`HUGE`])
    /// holding `len` slots of `T`; owned, unmapped on drop.
    pub(super) struct Mapping<T: Zero> {
        ptr: NonNull<T>,
        len: usize,
        bytes: usize,
    }

    // SAFETY: the mapping is owned by this value alone, like a `Vec<T>`'s
    // buffer, and `T: Copy` holds no references.
    unsafe impl<T: Zero + Send> Send for Mapping<T> {}
    // SAFETY: shared access only reads, as for `Vec<T>`.
    unsafe impl<T: Zero + Sync> Sync for Mapping<T> {}

    fn bytes_for<T>(len: usize) -> Option<usize> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?;
        bytes.checked_next_multiple_of(HUGE)?.max(HUGE).into()
    }

    /// Ask for huge pages; a refusal only costs speed.
    fn advise(ptr: *mut libc::c_void, bytes: usize) {
        // SAFETY: `ptr..ptr + bytes` is a mapping this module owns.
        unsafe {
            libc::madvise(ptr, bytes, libc::MADV_HUGEPAGE);
        }
    }

    impl<T: Zero> Mapping<T> {
        pub(super) fn new(len: usize) -> Option<Mapping<T>> {
            let bytes = bytes_for::<T>(len)?;
            // SAFETY: a fresh anonymous mapping at an address the system
            // picks; it overlaps nothing. Its pages read as zero.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if ptr == libc::MAP_FAILED {
                return None;
            }
            advise(ptr, bytes);
            Some(Mapping {
                ptr: NonNull::new(ptr.cast())?,
                len,
                bytes,
            })
        }

        /// Grows to `len` slots by moving the mapping (its pages move, not
        /// their contents). `false` when the system refuses: unchanged.
        pub(super) fn grow(&mut self, len: usize) -> bool {
            let Some(bytes) = bytes_for::<T>(len) else {
                return false;
            };
            if bytes > self.bytes {
                // SAFETY: `ptr..ptr + self.bytes` is our mapping; on
                // success it is gone and the returned one (contents kept,
                // the rest zero) is ours instead.
                let ptr = unsafe {
                    libc::mremap(
                        self.ptr.as_ptr().cast(),
                        self.bytes,
                        bytes,
                        libc::MREMAP_MAYMOVE,
                    )
                };
                if ptr == libc::MAP_FAILED {
                    return false;
                }
                advise(ptr, bytes);
                let Some(ptr) = NonNull::new(ptr.cast()) else {
                    return false;
                };
                self.ptr = ptr;
                self.bytes = bytes;
            }
            self.len = len;
            true
        }
    }

    impl<T: Zero> Drop for Mapping<T> {
        fn drop(&mut self) {
            // SAFETY: our mapping, not used after this.
            unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), self.bytes);
            }
        }
    }

    impl<T: Zero> Deref for Mapping<T> {
        type Target = [T];
        #[inline]
        fn deref(&self) -> &[T] {
            // SAFETY: `len` slots fit in the mapping, which is aligned to
            // a page (so to `T`), zero or written as `T`: valid by `Zero`.
            unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
        }
    }

    impl<T: Zero> DerefMut for Mapping<T> {
        #[inline]
        fn deref_mut(&mut self) -> &mut [T] {
            // SAFETY: as in `deref`, and `&mut self` is the only access.
            unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
        }
    }
}

/// The process's allocator with transparent huge pages for big blocks.
///
/// The allocators a replay builds keep their per-frame metadata in
/// ordinary `Vec`s (`nvmos-frames` is `no_std` and cannot ask the system
/// for anything): about 100 MB per row for a 24 GiB machine, zeroed by
/// one 4 KiB fault at a time and then read at random, a TLB miss per
/// lookup. Where transparent huge pages are `madvise` only (the default
/// of most distributions, and this machine's), a program that installs
/// this as its `#[global_allocator]` gets them for every block of at
/// least [`HugePageAlloc::THRESHOLD`] bytes: the block comes from the
/// system allocator as before (which maps blocks this large by
/// themselves) and its whole 2 MiB pages are advised `MADV_HUGEPAGE`.
/// Contents, alignment and every answer are the system allocator's; only
/// the page size differs. A refused advice only costs speed.
///
/// ```
/// #[global_allocator]
/// static ALLOC: nvmos_trace::table::HugePageAlloc = nvmos_trace::table::HugePageAlloc;
/// let v = vec![0u64; 1 << 20];
/// assert!(v.iter().all(|&x| x == 0));
/// ```
pub struct HugePageAlloc;

impl HugePageAlloc {
    /// Blocks at least this large are advised; smaller ones share pages
    /// with other blocks and gain nothing.
    pub const THRESHOLD: usize = 4 * HUGE;

    /// Advise the whole 2 MiB pages inside `ptr..ptr + size`.
    #[inline]
    fn advise(ptr: *mut u8, size: usize) {
        #[cfg(target_os = "linux")]
        if !ptr.is_null() && size >= Self::THRESHOLD {
            let start = (ptr as usize).next_multiple_of(HUGE);
            let end = (ptr as usize + size) & !(HUGE - 1);
            if end > start {
                // SAFETY: advice on memory this allocation owns; it changes
                // no contents and no mapping.
                unsafe {
                    libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
                }
            }
        }
    }
}

// SAFETY: every block comes from the system allocator and goes back to it;
// `advise` only adds advice on the memory it returned; a kept block (see
// `KeepFreed`) is owned by the pool alone until it is handed out again,
// for a layout it satisfies (size and alignment), or given back.
unsafe impl std::alloc::GlobalAlloc for HugePageAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.size() >= pool::MIN {
            if let Some(ptr) = pool::take(layout) {
                return ptr;
            }
        }
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { std::alloc::System.alloc(layout) };
        Self::advise(ptr, layout.size());
        ptr
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if layout.size() >= pool::MIN {
            if let Some(ptr) = pool::take(layout) {
                // SAFETY: the block holds at least `layout.size()` bytes.
                unsafe { ptr.write_bytes(0, layout.size()) };
                return ptr;
            }
        }
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { std::alloc::System.alloc_zeroed(layout) };
        Self::advise(ptr, layout.size());
        ptr
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        if layout.size() >= pool::MIN && pool::keep(ptr, layout) {
            return;
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        if layout.size() >= pool::MIN {
            // Resized by the system: what the pool knew of its size no
            // longer holds (and its address may be another block's next).
            pool::forget(ptr);
        }
        // SAFETY: the caller's contract, passed on.
        let new = unsafe { std::alloc::System.realloc(ptr, layout, new_size) };
        Self::advise(new, new_size);
        new
    }
}

/// While alive, [`HugePageAlloc`] keeps big freed blocks for reuse.
///
/// A program that builds the same large tables again and again (a replay
/// builds each allocator's per-frame metadata anew for every row of
/// `evaluate`: about 100 MB a row) pays each time for the system to map,
/// fault in and zero fresh pages, only to overwrite them (profiled:
/// a tenth of `evaluate`'s CPU was page faults and `clear_page_erms`).
/// With a `KeepFreed` alive, blocks of at least 32 MiB (which the system
/// allocator would give back to the system) that are freed stay with the
/// allocator (up to `bytes` in all, oldest given back first) and a later
/// request of about the same size (the block no more than twice the size
/// asked for, aligned for it) gets one back instead: already faulted in
/// on huge pages; zeroed in place when zeroed memory is asked for.
/// Contents a program sees are the same as without it (fresh blocks are
/// uninitialised or zeroed just the same); only the memory the process
/// holds differs. When the last `KeepFreed` is dropped the kept blocks
/// go back to the system. Without `HugePageAlloc` as the global allocator
/// it does nothing.
#[must_use = "blocks are kept only while the guard lives"]
pub struct KeepFreed(());

impl KeepFreed {
    /// Keep up to `bytes` of freed big blocks until the guard is dropped
    /// (with several guards alive, the `bytes` of the latest counts).
    pub fn new(bytes: usize) -> KeepFreed {
        pool::enable(bytes);
        KeepFreed(())
    }
}

impl Drop for KeepFreed {
    fn drop(&mut self) {
        pool::disable();
    }
}

impl fmt::Debug for KeepFreed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeepFreed")
            .field("kept_bytes", &pool::kept_bytes())
            .finish()
    }
}

/// The blocks [`KeepFreed`] keeps. No allocation happens inside (a fixed
/// array under a mutex), so the global allocator can call it freely.
mod pool {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::{Mutex, MutexGuard};

    /// Most blocks kept at once.
    const SLOTS: usize = 32;

    /// Blocks at least this large are kept: glibc's `malloc` maps every
    /// block from 32 MiB (its largest mapping threshold) by itself and
    /// unmaps it when freed, so the next one is fresh pages; smaller
    /// blocks it keeps and reuses itself once one has been freed (it
    /// raises its threshold to the freed block's size), and keeping
    /// those here instead would stop that (measured: twice the page
    /// faults).
    pub(super) const MIN: usize = 32 << 20;

    #[derive(Copy, Clone)]
    struct Block {
        ptr: usize,
        /// Bytes the block is known to hold (at least the size it was
        /// last freed with).
        size: usize,
        /// Order kept, for giving back the oldest first.
        age: u64,
    }

    struct Pool {
        /// Live `KeepFreed` guards.
        guards: usize,
        cap: usize,
        held: usize,
        clock: u64,
        blocks: [Option<Block>; SLOTS],
        /// Blocks handed out of the pool (`age` unused): a block lent
        /// for a smaller request than it holds is kept again at its full
        /// size when freed, not shrunk to the request's.
        lent: [Option<Block>; SLOTS],
    }

    static POOL: Mutex<Pool> = Mutex::new(Pool {
        guards: 0,
        cap: 0,
        held: 0,
        clock: 0,
        blocks: [None; SLOTS],
        lent: [None; SLOTS],
    });

    fn lock() -> MutexGuard<'static, Pool> {
        POOL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Give a kept block back to the system.
    fn release(b: Block) {
        // SAFETY: the block came from `System` (through `HugePageAlloc`),
        // was freed to the pool and is owned by it alone; the layout has
        // the alignment of every kept block (see `keep`).
        unsafe { System.dealloc(b.ptr as *mut u8, layout(b.size)) }
    }

    /// The layout blocks are kept and released with: only blocks whose
    /// alignment is at most the system allocator's minimum are kept, so
    /// every one is `malloc`'s and `free` gives it back whatever its size.
    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, ALIGN).expect("a kept block's size fits a layout")
    }

    /// The system allocator's own alignment on 64-bit Unix.
    const ALIGN: usize = 16;

    pub(super) fn enable(bytes: usize) {
        let mut p = lock();
        p.guards += 1;
        p.cap = bytes;
    }

    pub(super) fn disable() {
        let released: [Option<Block>; SLOTS] = {
            let mut p = lock();
            p.guards = p.guards.saturating_sub(1);
            if p.guards > 0 {
                return;
            }
            p.cap = 0;
            p.held = 0;
            p.lent = [None; SLOTS];
            std::mem::replace(&mut p.blocks, [None; SLOTS])
        };
        released.into_iter().flatten().for_each(release);
    }

    pub(super) fn kept_bytes() -> usize {
        lock().held
    }

    /// A kept block for `layout`, taken out of the pool.
    pub(super) fn take(layout: Layout) -> Option<*mut u8> {
        if layout.align() > ALIGN {
            return None;
        }
        let mut p = lock();
        if p.guards == 0 || p.held == 0 {
            return None;
        }
        let want = layout.size();
        let (slot, b) = p
            .blocks
            .iter()
            .enumerate()
            .filter_map(|(k, b)| Some((k, (*b)?)))
            .filter(|(_, b)| b.size >= want && b.size / 2 <= want)
            .min_by_key(|(_, b)| b.size)?;
        p.blocks[slot] = None;
        p.held -= b.size;
        if b.size > want {
            // Remember its size (when no slot is free, it is forgotten:
            // kept at the request's size later, which is only smaller).
            if let Some(k) = p.lent.iter().position(Option::is_none) {
                p.lent[k] = Some(b);
            }
        }
        Some(b.ptr as *mut u8)
    }

    /// Forget what the pool knows of the lent block at `ptr`, if any.
    pub(super) fn forget(ptr: *mut u8) {
        let mut p = lock();
        if let Some(k) = p
            .lent
            .iter()
            .position(|b| b.is_some_and(|b| b.ptr == ptr as usize))
        {
            p.lent[k] = None;
        }
    }

    /// Keep the freed block at `ptr`; `false` when it is not kept (no
    /// guard, an alignment beyond the system's, or larger than the cap).
    pub(super) fn keep(ptr: *mut u8, layout: Layout) -> bool {
        if layout.align() > ALIGN {
            return false;
        }
        let mut released = [None; SLOTS];
        let kept = {
            let mut p = lock();
            let mut size = layout.size();
            if let Some(k) = p
                .lent
                .iter()
                .position(|b| b.is_some_and(|b| b.ptr == ptr as usize))
            {
                size = size.max(p.lent[k].take().expect("a lent block").size);
            }
            if p.guards == 0 || size > p.cap {
                return false;
            }
            // Oldest first out until it fits and a slot is free.
            let mut n = 0;
            while p.held + size > p.cap || p.blocks.iter().all(Option::is_some) {
                let Some(k) = (0..SLOTS)
                    .filter(|&k| p.blocks[k].is_some())
                    .min_by_key(|&k| p.blocks[k].map(|b| b.age))
                else {
                    break;
                };
                let b = p.blocks[k].take().expect("a kept block");
                p.held -= b.size;
                released[n] = Some(b);
                n += 1;
            }
            let age = p.clock;
            p.clock += 1;
            let slot = p.blocks.iter().position(Option::is_none);
            match slot {
                Some(k) if p.held + size <= p.cap => {
                    p.blocks[k] = Some(Block {
                        ptr: ptr as usize,
                        size,
                        age,
                    });
                    p.held += size;
                    true
                }
                _ => false,
            }
        };
        released.into_iter().flatten().for_each(release);
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_huge_page_allocator_keeps_the_system_allocators_contents() {
        use std::alloc::{GlobalAlloc, Layout};
        let a = HugePageAlloc;
        let big = 3 * HugePageAlloc::THRESHOLD + 12345;
        let layout = Layout::from_size_align(big, 64).unwrap();
        // SAFETY: a non-zero layout; every block freed with its layout.
        unsafe {
            let z = a.alloc_zeroed(layout);
            assert!(!z.is_null() && (z as usize).is_multiple_of(64));
            let s = std::slice::from_raw_parts_mut(z, big);
            assert!(s.iter().all(|&b| b == 0));
            s[big - 1] = 7;
            s[HUGE + 3] = 5;
            // Grown and shrunk across the threshold: contents kept.
            let g = a.realloc(z, layout, 2 * big);
            assert_eq!((*g.add(big - 1), *g.add(HUGE + 3)), (7, 5));
            let glayout = Layout::from_size_align(2 * big, 64).unwrap();
            let small = a.realloc(g, glayout, 100);
            assert_eq!(*small.add(3), 0);
            a.dealloc(small, Layout::from_size_align(100, 64).unwrap());
            let p = a.alloc(layout);
            p.write_bytes(9, big);
            assert_eq!(*p.add(big / 2), 9);
            a.dealloc(p, layout);
        }
    }

    #[test]
    fn kept_blocks_are_reused_while_a_guard_lives_and_zeroed_when_asked() {
        use std::alloc::{GlobalAlloc, Layout};
        let a = HugePageAlloc;
        let mib = 1 << 20;
        let layout = |size| Layout::from_size_align(size, 8).unwrap();
        let size = pool::MIN + 3 * mib;
        let guard = KeepFreed::new(4 * size);
        // SAFETY: non-zero layouts; every block freed with its layout.
        unsafe {
            let p = a.alloc(layout(size));
            p.write_bytes(7, size);
            a.dealloc(p, layout(size));
            assert_eq!(pool::kept_bytes(), size);
            // A zeroed request of about that size gets the kept block,
            // zeroed.
            let smaller = pool::MIN + mib;
            let z = a.alloc_zeroed(layout(smaller));
            assert_eq!(z, p);
            assert_eq!(pool::kept_bytes(), 0);
            let s = std::slice::from_raw_parts(z, smaller);
            assert!(s.iter().all(|&b| b == 0));
            a.dealloc(z, layout(smaller));
            // Kept at its full size again: a larger request gets it too.
            assert_eq!(pool::kept_bytes(), size);
            let q = a.alloc(layout(size));
            assert_eq!(q, z);
            q.write_bytes(1, size);
            a.dealloc(q, layout(size));
            // A request larger than any kept block gets a fresh one.
            let r = a.alloc(layout(size + mib));
            assert_ne!(r, z);
            a.dealloc(r, layout(size + mib));
            // Lent for less than it holds and then resized: kept at the
            // size it was freed with, as nothing more is known.
            let t = a.alloc(layout(pool::MIN));
            assert_eq!(t, z, "the smallest block that fits");
            let t = a.realloc(t, layout(pool::MIN), pool::MIN + 2 * mib);
            a.dealloc(t, layout(pool::MIN + 2 * mib));
            assert_eq!(pool::kept_bytes(), (size + mib) + (pool::MIN + 2 * mib));
            // Past the cap the oldest (`r`) goes back to the system.
            let big = a.alloc(layout(3 * size));
            a.dealloc(big, layout(3 * size));
            assert_eq!(pool::kept_bytes(), (pool::MIN + 2 * mib) + 3 * size);
        }
        drop(guard);
        assert_eq!(pool::kept_bytes(), 0);
        // SAFETY: as above.
        unsafe {
            // Without a guard nothing is kept.
            let p = a.alloc(layout(size));
            a.dealloc(p, layout(size));
        }
        assert_eq!(pool::kept_bytes(), 0);
    }

    #[test]
    fn small_tables_are_vectors_large_ones_mappings_with_the_same_contents() {
        let small = ZeroTable::<u64>::new(100);
        assert!(!small.is_mapped());
        assert!(small.iter().all(|&x| x == 0));
        let mut t = ZeroTable::<u64>::new(100);
        t[99] = 7;
        // Growing past the threshold moves it into a mapping, contents kept.
        t.grow(1 << 20);
        #[cfg(target_os = "linux")]
        assert!(t.is_mapped());
        assert_eq!(
            (t.len(), t[99], t[100], t[(1 << 20) - 1]),
            (1 << 20, 7, 0, 0)
        );
        t[(1 << 20) - 1] = 9;
        // And growing the mapping keeps them again, the new slots zero.
        t.grow(3 << 20);
        assert_eq!(t.len(), 3 << 20);
        assert_eq!(
            (t[99], t[(1 << 20) - 1], t[1 << 20], t[(3 << 20) - 1]),
            (7, 9, 0, 0)
        );
        assert_eq!(t.iter().map(|&x| x as u128).sum::<u128>(), 16);
        // Smaller: unchanged.
        t.grow(5);
        assert_eq!(t.len(), 3 << 20);
        let c = t.clone();
        assert_eq!(c, t);
        assert_eq!(c.is_mapped(), t.is_mapped());
    }

    #[test]
    fn odd_lengths_and_empty() {
        let mut t = ZeroTable::<u32>::new(0);
        assert!(t.is_empty());
        t.grow(1_000_003);
        assert_eq!(t.len(), 1_000_003);
        t[1_000_002] = 1;
        assert_eq!(t.iter().filter(|&&x| x == 1).count(), 1);
        assert_eq!(ZeroTable::<u32>::default().len(), 0);
    }
}
