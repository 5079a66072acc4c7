//! DRAM as PM cache (seed 001): a page is decrypted once into a DRAM frame,
//! and every later fault on it, in this attachment or a later one through
//! the same open of the pool, is served from that frame with no
//! decryption. psync writes the new plaintext of the dirty pages back into
//! the cache beside sealing them, so the cache always holds the committed
//! state.
//!
//! One `PageCache` per object, found in a process-wide registry by the
//! object's identity (pool id, object id) and valid for one committed
//! version through one open of the pool file ([`CacheIdentity`]): an
//! attach of a later version (another process psynced meanwhile), of
//! another object at the same address (destroyed and re-created) or
//! through another open (perhaps of a copy of the pool file, whose ids and
//! epochs are the same while its bytes differ) gets a fresh, empty cache,
//! so plaintext is never served across objects, generations, versions or
//! copies. A psync through the cache moves it to the new version. The pool
//! calls [`evict`] when an object is destroyed and `evict_open` when an
//! open is closed; eviction zeroes the cached plaintext before the memory
//! is returned.
//!
//! Invariant that makes the unsynchronised page bytes sound: a cache page is
//! written only (a) while it is `FILLING`, by the one thread that moved it
//! there from `EMPTY`, or (b) by psync of the one writable attachment of the
//! object, for a page that attachment has mapped (so no fault of it can be
//! reading the cache page at that time, and the engine's prediction worker
//! skips pages already mapped). It is read only when `READY`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use crate::backing::CacheIdentity;
use std::sync::{Arc, Mutex, OnceLock};

use super::predict::{Predictor, PredictorKind};

const EMPTY: u8 = 0;
const FILLING: u8 = 1;
const READY: u8 = 2;

/// An anonymous private mapping used as the cache's frames: untouched pages
/// cost nothing, and the kernel hands them out zeroed.
struct Frames {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the frames are plain memory; access is ordered by the per-page
// state machine described in the module documentation.
unsafe impl Send for Frames {}
unsafe impl Sync for Frames {}

impl Drop for Frames {
    fn drop(&mut self) {
        // SAFETY: `ptr..ptr+len` is our own mapping, no longer referenced.
        unsafe {
            std::ptr::write_bytes(self.ptr, 0, self.len);
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// The DRAM cache of one object.
pub struct PageCache {
    base: usize,
    /// The open of the pool the pages were read through
    /// ([`CacheIdentity::open`]); fixed for the cache's life.
    open: u64,
    /// The committed version the cached pages reflect.
    version: AtomicU64,
    page_size: usize,
    pages: usize,
    frames: Frames,
    state: Box<[AtomicU8]>,
    /// A predictor whose history belongs to the object (Markov), kept
    /// between attaches.
    predictor: Mutex<Option<KeptPredictor>>,
}

type KeptPredictor = (PredictorKind, usize, Box<dyn Predictor>);

/// What `PageCache::get_or_fill` found.
pub enum Lookup {
    /// The page was in the cache (no decryption).
    Hit(*const u8),
    /// The page was filled by `fill` now.
    Filled(*const u8),
}

impl PageCache {
    #[cfg(test)]
    fn new(pages: usize, page_size: usize) -> std::io::Result<PageCache> {
        PageCache::new_at(0, 0, 0, pages, page_size)
    }

    fn new_at(
        base: usize,
        open: u64,
        version: u64,
        pages: usize,
        page_size: usize,
    ) -> std::io::Result<PageCache> {
        let len = pages * page_size;
        // SAFETY: a fresh anonymous mapping; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(page_size),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: our fresh mapping. Plaintext stays out of children and
        // core dumps.
        unsafe {
            libc::madvise(ptr, len.max(page_size), libc::MADV_DONTFORK);
            libc::madvise(ptr, len.max(page_size), libc::MADV_DONTDUMP);
        }
        // And out of swap: each frame is locked as it is first touched
        // (MLOCK_ONFAULT, so untouched frames still cost nothing); munmap
        // unlocks. Refused beyond RLIMIT_MEMLOCK: the cache works unlocked
        // and the first refusal in the process is reported.
        // SAFETY: mlock2 of our own mapping.
        if unsafe { libc::mlock2(ptr, len.max(page_size), libc::MLOCK_ONFAULT) } != 0 {
            let error = std::io::Error::last_os_error();
            crate::crypto::warn_unlocked(crate::crypto::Unlocked::Cache, &error);
        }
        Ok(PageCache {
            base,
            open,
            version: AtomicU64::new(version),
            page_size,
            pages,
            frames: Frames {
                ptr: ptr.cast(),
                len: len.max(page_size),
            },
            state: (0..pages).map(|_| AtomicU8::new(EMPTY)).collect(),
            predictor: Mutex::new(None),
        })
    }

    fn frame(&self, page: usize) -> *mut u8 {
        debug_assert!(page < self.pages);
        // SAFETY: `page < pages`, so the offset stays inside the mapping.
        unsafe { self.frames.ptr.add(page * self.page_size) }
    }

    /// Page `page`'s frame; frames of consecutive pages are consecutive.
    pub(crate) fn frame_ptr(&self, page: usize) -> *const u8 {
        self.frame(page)
    }

    /// Whether page `page` holds committed plaintext.
    pub fn contains(&self, page: usize) -> bool {
        self.state[page].load(Ordering::Acquire) == READY
    }

    /// The cached page, or fill it with `fill` (which decrypts into the
    /// given frame) and cache it. If `fill` fails the page stays uncached and
    /// its frame is zeroed. Concurrent callers for one page wait for the
    /// first.
    pub fn get_or_fill<E>(
        &self,
        page: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Lookup, E> {
        let state = &self.state[page];
        loop {
            match state.compare_exchange(EMPTY, FILLING, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => break,
                Err(READY) => return Ok(Lookup::Hit(self.frame(page))),
                Err(_) => std::thread::yield_now(),
            }
        }
        // SAFETY: we moved the page to FILLING, so we alone touch its frame.
        let frame = unsafe { std::slice::from_raw_parts_mut(self.frame(page), self.page_size) };
        match fill(frame) {
            Ok(()) => {
                state.store(READY, Ordering::Release);
                Ok(Lookup::Filled(frame.as_ptr()))
            }
            Err(e) => {
                frame.fill(0);
                state.store(EMPTY, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Put the new committed contents of page `page` (psync).
    ///
    /// Callers keep the module's invariant: only the one writable
    /// attachment's psync, for a page it has mapped.
    pub(crate) fn update(&self, page: usize, data: &[u8]) {
        let state = &self.state[page];
        loop {
            match state.compare_exchange(EMPTY, FILLING, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) | Err(READY) => break,
                Err(_) => std::thread::yield_now(),
            }
        }
        // SAFETY: FILLING is ours, or READY with no reader by the invariant.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.frame(page), self.page_size) };
        state.store(READY, Ordering::Release);
    }

    /// The committed plaintext of page `page`, if cached.
    pub fn frame_if_ready(&self, page: usize) -> Option<&[u8]> {
        if !self.contains(page) {
            return None;
        }
        // SAFETY: a READY frame changes only by the owning attachment's
        // psync (module invariant), never while its owner reads it here.
        Some(unsafe { std::slice::from_raw_parts(self.frame(page), self.page_size) })
    }

    /// The kept predictor, if it is of `kind` and `depth`.
    pub(crate) fn take_predictor(
        &self,
        kind: PredictorKind,
        depth: usize,
    ) -> Option<Box<dyn Predictor>> {
        let mut kept = self.predictor.lock().unwrap_or_else(|e| e.into_inner());
        match kept.take() {
            Some((k, d, p)) if k == kind && d == depth => Some(p),
            _ => None,
        }
    }

    /// Keep a predictor for the object's next attach.
    pub(crate) fn keep_predictor(&self, kind: PredictorKind, depth: usize, p: Box<dyn Predictor>) {
        *self.predictor.lock().unwrap_or_else(|e| e.into_inner()) = Some((kind, depth, p));
    }

    /// The cache now holds `version` (after a psync through it).
    pub(crate) fn set_version(&self, version: u64) {
        self.version.store(version, Ordering::Release);
    }

    /// Pages cached now.
    pub fn cached_pages(&self) -> usize {
        self.state
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) == READY)
            .count()
    }
}

type Registry = Mutex<HashMap<(u64, u64), Arc<PageCache>>>;

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The cache of object `id` at `base`, created empty if there is none, or
/// if the one there belongs to another open or version or has another
/// shape (the old one's plaintext is zeroed once its last attachment is
/// gone).
pub(crate) fn cache_for(
    id: CacheIdentity,
    base: usize,
    pages: usize,
    page_size: usize,
) -> std::io::Result<Arc<PageCache>> {
    let mut map = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = map.get(&(id.pool, id.object)) {
        if c.pages == pages
            && c.page_size == page_size
            && c.base == base
            && c.open == id.open
            && c.version.load(Ordering::Acquire) == id.version
        {
            return Ok(c.clone());
        }
    }
    let c = Arc::new(PageCache::new_at(
        base, id.open, id.version, pages, page_size,
    )?);
    map.insert((id.pool, id.object), c.clone());
    Ok(c)
}

/// The cache of object `id`, if one exists for its open and current
/// version.
pub fn lookup(id: CacheIdentity) -> Option<Arc<PageCache>> {
    registry()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(id.pool, id.object))
        .filter(|c| c.open == id.open && c.version.load(Ordering::Acquire) == id.version)
        .cloned()
}

/// Drop the DRAM caches of objects at `base` (pdestroy, or an object
/// changed outside this process). Their plaintext is zeroed once the last
/// attachment using them is gone. Returns whether there was one.
pub fn evict(base: usize) -> bool {
    let mut map = registry().lock().unwrap_or_else(|e| e.into_inner());
    let before = map.len();
    map.retain(|_, c| c.base != base);
    map.len() != before
}

/// Drop the DRAM caches filled through pool open `open` (the open is
/// closed: no identity can name it again). As [`evict`], their plaintext
/// is zeroed once the last attachment using them is gone.
pub(crate) fn evict_open(open: u64) {
    let mut map = registry().lock().unwrap_or_else(|e| e.into_inner());
    map.retain(|_, c| c.open != open);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_once_then_hit_and_failed_fill_leaves_nothing() {
        let c = PageCache::new(4, 4096).unwrap();
        let r = c.get_or_fill(1, |f: &mut [u8]| {
            f.fill(5);
            Ok::<(), ()>(())
        });
        assert!(matches!(r, Ok(Lookup::Filled(_))));
        let r = c.get_or_fill(1, |_f: &mut [u8]| -> Result<(), ()> {
            panic!("a cached page is not filled again")
        });
        let Ok(Lookup::Hit(p)) = r else {
            panic!("expected a hit")
        };
        // SAFETY: a READY frame of 4096 bytes.
        assert!(unsafe { std::slice::from_raw_parts(p, 4096) }
            .iter()
            .all(|&b| b == 5));
        let r = c.get_or_fill(2, |f: &mut [u8]| {
            f.fill(9);
            Err::<(), _>("bad tag")
        });
        assert!(r.is_err());
        assert!(!c.contains(2));
        assert_eq!(c.cached_pages(), 1);
        c.update(3, &[1u8; 4096]);
        assert!(c.contains(3));
    }
}
