//! The mapping half of a PMO: attach an object's pages at its fixed virtual
//! address and serve its page faults from user space with userfaultfd.
//!
//! An [`Attachment`] maps `[base, base + pages × 4096)` of an object (a
//! [`PageBacking`]) as anonymous memory with `MAP_FIXED_NOREPLACE`, so
//! absolute pointers stored inside the object stay valid on every attach,
//! and refuses clearly when the range is taken. Nothing is mapped at first:
//! every first touch of a page is a missing-page fault that the kernel hands
//! to this attachment's fault-handler thread, which opens the page
//! (`read_page`: verify and decrypt) and installs it with `UFFDIO_COPY`.
//!
//! **Dirty tracking** (writable attachments): pages are installed
//! write-protected (`UFFDIO_COPY_MODE_WP`, atomically with the copy), so the
//! first write to a clean page is a write-protect fault; the handler marks
//! the page dirty and lifts the protection. A first touch that is itself a
//! write installs the page writable and dirty at once. With the DRAM cache
//! a page is installed writable instead and, at the next psync, compared
//! with its cache frame (the committed plaintext it came from): equal means
//! clean. Comparison also replaces faults for **hot pages**: with the DRAM
//! cache, every page psync stages stays writable and is compared at the
//! next psync (its cache frame now holds exactly what was staged); one
//! found unchanged is write-protected then, and compared once more after
//! its protection so a write in between is not lost. A heap that writes
//! its root and free-list pages between every two psyncs thus pays a
//! memcmp per page and psync instead of a write-protect fault (a round
//! trip through the handler thread) per page and interval. Without the
//! cache, `psync` write-protects every dirty page again (one
//! `UFFDIO_WRITEPROTECT` per run of consecutive pages). psync copies each
//! dirty page out and hands it to `stage_page` (sealed on every CPU when
//! there are many), then `commit`s: the backing makes them durable all or
//! nothing. A write racing psync from another thread lands either in this
//! psync or, through a new write-protect fault or the next comparison, in
//! the next one; psync is meant to be called at a quiescent point, as
//! msync(2) is.
//!
//! **Where the time goes** is counted, not guessed ([`AttachStats`]):
//! faults, `UFFDIO_COPY`/`WRITEPROTECT`/`WAKE` ioctls and pages copied,
//! the handler's wake-ups from poll(2) and what it found while spinning,
//! the workers' wake-ups, time opening (decrypting) pages, and psync's
//! tracking, staging and commit time. [`Tuning`] changes the fault path
//! (a handler that spins before sleeping, several prediction workers,
//! longer install runs, fault-around for predicted runs) without changing
//! what a program sees.
//!
//! **A failed integrity check never hands plaintext to the program.** The
//! page is poisoned (`UFFDIO_POISON`, Linux 6.6): the faulting access, and
//! every later one to that page, raises SIGBUS with `BUS_MCEERR_AR`, which
//! is how Linux reports an uncorrectable memory error on persistent memory
//! too, so a program that already handles media errors handles this one; a
//! kernel-mode access (a `write(2)` from the page) fails with `EFAULT`. The
//! failure is also recorded, and every later `psync`, and `detach`, returns
//! it ([`AttachError::FaultFailed`], naming the object and page) and commits
//! nothing. Where the kernel lacks `UFFDIO_POISON` the page is made
//! `PROT_NONE` instead (SIGSEGV). Resolving with a zero page or leaving the
//! thread blocked is never done.
//!
//! **Modes** (chosen per attach, [`Mode`]):
//! - `Plain`: an object stored without encryption; faults copy the page in.
//! - `DecryptAtFault`: the prior design: every fault decrypts the page into
//!   the mapping; a later attach decrypts again.
//! - `DramCache`: seed 001's DRAM as PM cache: a page is decrypted once into
//!   a DRAM cache ([`cache`]) and faults, in this attach and later ones in the
//!   process, are served from it; psync seals dirty pages back and refreshes
//!   the cache.
//! - `Predict`: the DRAM cache plus a predictor ([`predict`]) of depth N: at
//!   each fault worker threads ([`Tuning::workers`]) decrypt the next pages
//!   the predictor names into the cache and install them, runs of
//!   consecutive pages with one `UFFDIO_COPY` each, before they are
//!   touched, so those pages never fault. With [`Tuning::fault_around`]
//!   the handler installs the first predicted pages itself, with the
//!   faulting page, in one copy.

pub mod cache;
pub mod mem_backing;
pub mod predict;
pub mod probe;
mod uffd;

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::backing::{BackingError, BackingErrorKind, PageBacking};
use crate::pptr::{POff, POffError, PPtr};
use cache::{Lookup, PageCache};
use predict::{new_predictor, Predictor, PredictorKind};
use uffd::{CopyOutcome, Msg, Uffd};

/// The largest prediction depth accepted.
pub const MAX_DEPTH: usize = 1024;

pub use crate::object::Perm;

/// How faults are served; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    /// No encryption (the object must not be sealed).
    Plain,
    /// Decrypt each page into the mapping at its fault (the prior design).
    DecryptAtFault,
    /// Decrypt once into a process-wide DRAM cache; serve faults from it.
    DramCache,
    /// DRAM cache with a predictor of `depth` pages (depth 0: no prediction).
    Predict {
        predictor: PredictorKind,
        depth: usize,
    },
}

impl Mode {
    fn uses_cache(self) -> bool {
        matches!(self, Mode::DramCache | Mode::Predict { .. })
    }

    /// A short name for reports: `plain`, `decrypt-at-fault`, `dram-cache`,
    /// `stream-8`, ...
    pub fn label(self) -> String {
        match self {
            Mode::Plain => "plain".into(),
            Mode::DecryptAtFault => "decrypt-at-fault".into(),
            Mode::DramCache => "dram-cache".into(),
            Mode::Predict { predictor, depth } => format!("{}-{depth}", predictor.name()),
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    /// The inverse of [`Mode::label`]: `plain`, `decrypt-at-fault`,
    /// `dram-cache`, or `stream-N`, `stride-N`, `markov-N`.
    ///
    /// ```
    /// use nvmos_pmo::attach::predict::PredictorKind;
    /// use nvmos_pmo::Mode;
    /// for mode in [
    ///     Mode::Plain,
    ///     Mode::DecryptAtFault,
    ///     Mode::DramCache,
    ///     Mode::Predict { predictor: PredictorKind::Markov, depth: 16 },
    /// ] {
    ///     assert_eq!(mode.label().parse::<Mode>(), Ok(mode));
    /// }
    /// assert!("psychic-3".parse::<Mode>().is_err());
    /// assert!("stream-x".parse::<Mode>().is_err());
    /// ```
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "mode {text:?}: expected plain, decrypt-at-fault, dram-cache or stream-N/stride-N/markov-N/adaptive-N"
            )
        };
        Ok(match text {
            "plain" => Mode::Plain,
            "decrypt-at-fault" => Mode::DecryptAtFault,
            "dram-cache" => Mode::DramCache,
            other => {
                let (name, depth) = other.rsplit_once('-').ok_or_else(bad)?;
                Mode::Predict {
                    predictor: name.parse().map_err(|_| bad())?,
                    depth: depth.parse().map_err(|_| bad())?,
                }
            }
        })
    }
}

/// Counters of one attachment, as plain data ([`AttachStats`]), and their
/// atomic twin (`Counters`), from one list so neither can miss a field.
macro_rules! counters {
    ($($(#[$doc:meta])* pub $name:ident: u64,)*) => {
        /// Counters of one attachment, as plain data.
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct AttachStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl AttachStats {
            /// Add `other`'s counts to these (the counters of a session of
            /// several attachments).
            pub fn add(&mut self, other: &AttachStats) {
                $(self.$name += other.$name;)*
            }
        }

        #[derive(Default)]
        struct Counters {
            $($name: AtomicU64,)*
        }

        impl Counters {
            fn snapshot(&self) -> AttachStats {
                AttachStats {
                    $($name: self.$name.load(Ordering::Relaxed),)*
                }
            }
        }
    };
}

counters! {
    /// Missing-page faults the handler resolved (first touches).
    pub faults: u64,
    /// Write-protect faults: first writes to a clean page.
    pub wp_faults: u64,
    /// Pages opened with `read_page` on a sealed object (decryptions).
    pub pages_decrypted: u64,
    /// Pages opened with `read_page` in all.
    pub pages_read: u64,
    /// Faults and predictions served from the DRAM cache with no decryption.
    pub cache_hits: u64,
    /// Pages the prediction worker installed ahead of use.
    pub predicted: u64,
    /// Predicted pages whose use was seen: written afterwards (a
    /// write-protect fault), or touched while the worker was installing
    /// them (a late prediction). Reads of an installed page cannot be seen
    /// (they do not fault, which is the point), and this kernel has no
    /// idle-page tracking; [`Attachment::predicted_pages`] lets a workload
    /// that knows what it touched count used and wasted exactly.
    pub predicted_seen_used: u64,
    /// Late predictions: the program touched the page while the worker was
    /// still installing it (it waited less than a full fault).
    pub predicted_late: u64,
    /// Pages a predictor named that were already mapped or on their way.
    pub predicted_skipped: u64,
    /// Pages a predictor named past the extent in use
    /// ([`Attachment::set_extent`]), dropped.
    pub predicted_past_extent: u64,
    /// Nanoseconds the handler spent resolving faults (from reading the
    /// fault message to the page being installed).
    pub handler_ns: u64,
    /// Nanoseconds the prediction worker spent opening and installing pages.
    pub worker_ns: u64,
    /// psync calls that committed.
    pub psyncs: u64,
    /// Pages staged by psync in all.
    pub pages_synced: u64,
    /// Nanoseconds spent in psync.
    pub psync_ns: u64,
    /// Pages whose fault failed (integrity or I/O): poisoned.
    pub failed_pages: u64,

    /// `UFFDIO_COPY` ioctls issued (one installs a run of pages).
    pub copy_ioctls: u64,
    /// Pages installed by `UFFDIO_COPY` (4 KiB copies by the kernel).
    pub pages_copied: u64,
    /// `UFFDIO_WRITEPROTECT` ioctls (protect or unprotect, one per run).
    pub wp_ioctls: u64,
    /// `UFFDIO_WAKE` ioctls.
    pub wake_ioctls: u64,
    /// Times the fault handler woke from poll(2) (each a sleep it paid
    /// for: two context switches when the faulting thread is waiting).
    pub handler_wakeups: u64,
    /// Fault messages the handler found while spinning, without sleeping.
    pub handler_spin_hits: u64,
    /// Nanoseconds the handler spun without finding a message (CPU time
    /// it took from whatever else could run on that core).
    pub handler_spin_ns: u64,
    /// Times a prediction worker woke to take a batch.
    pub worker_wakeups: u64,
    /// Nanoseconds spent opening pages (verify and decrypt, `read_page`),
    /// in whichever thread did it.
    pub decrypt_ns: u64,
    /// Pages psync compared with their DRAM-cache frame instead of
    /// tracking them by write-protect faults.
    pub pages_compared: u64,
    /// Pages psync left writable because they were written in the
    /// interval (hot pages, compared at the next psync instead of
    /// write-protected).
    pub pages_kept_writable: u64,
    /// Nanoseconds psync spent write-protecting and comparing.
    pub psync_track_ns: u64,
    /// Nanoseconds psync spent copying out and staging (sealing) pages.
    pub psync_stage_ns: u64,
    /// Nanoseconds psync spent in the backing's commit.
    pub psync_commit_ns: u64,
    /// `PAGEMAP_SCAN` ioctls (asynchronous write-protection: psync's walk
    /// for written pages).
    pub pagemap_scans: u64,
    /// Pages the walks found written (their writes cost no fault message).
    pub pages_found_written: u64,

}

/// What can go wrong attaching, psyncing or detaching.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("cannot attach object at {base:#x}: {reason}")]
    Invalid { base: usize, reason: String },
    #[error("object at {base:#x} is already attached in this process ({perm:?})")]
    AlreadyAttached { base: usize, perm: Perm },
    #[error(
        "cannot attach object at {base:#x}..{end:#x}: the range is already mapped ({occupant})"
    )]
    RangeTaken {
        base: usize,
        end: usize,
        occupant: String,
    },
    #[error("mapping object at {base:#x}..{end:#x}")]
    Map {
        base: usize,
        end: usize,
        source: io::Error,
    },
    #[error("userfaultfd {op} for object at {base:#x}")]
    Uffd {
        base: usize,
        op: &'static str,
        source: io::Error,
    },
    /// `kind` says why the page could not be opened: the backing's
    /// [`BackingErrorKind`] (integrity, truncation, I/O, ...), or `None`
    /// when the page opened but could not be installed.
    #[error("access to {addr:#x} was refused with SIGBUS and nothing is committed: {message}")]
    FaultFailed {
        base: usize,
        page: usize,
        addr: usize,
        kind: Option<BackingErrorKind>,
        message: String,
    },
    #[error("psync of object at {base:#x}: staging {pages} dirty pages from page {first}")]
    Stage {
        base: usize,
        /// The first page of the run that failed (psync stages its dirty
        /// pages in runs, in page order).
        first: usize,
        /// Pages in that run.
        pages: usize,
        source: BackingError,
    },
    #[error("psync of object at {base:#x}: commit")]
    Commit { base: usize, source: BackingError },
}

/// What psync did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PsyncStats {
    /// Dirty pages staged and committed.
    pub pages: u64,
    /// Wall time of the whole psync.
    pub ns: u64,
}

/// How the fault path runs; [`Attachment::attach`] takes the default,
/// [`Attachment::attach_tuned`] any other. None of it changes what a
/// program reads or what psync commits, only where time goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tuning {
    /// After serving its last fault message the handler keeps reading the
    /// descriptor for this many microseconds before it sleeps in poll(2):
    /// a fault arriving meanwhile costs no wake-up (two context switches
    /// fewer), at the price of that much CPU taken from whatever else
    /// could run on the core. 0: sleep at once. At most 1000.
    pub spin_us: u32,
    /// Prediction workers (threads that decrypt and install predicted
    /// pages): 1 to 8. Each takes its own batch from the queue.
    pub workers: usize,
    /// Most pages a worker takes from the queue at a time and installs
    /// with one `UFFDIO_COPY` when they are consecutive: 1 to 512 (512
    /// pages are one 2 MiB huge page).
    pub run_pages: usize,
    /// At a missing-page fault with a predictor, the handler installs up
    /// to this many predicted pages after the faulting one with it, in
    /// one `UFFDIO_COPY` (0: the faulting page alone; the worker brings
    /// the rest). At most 512.
    pub fault_around: usize,
    /// Writable attachments: track writes with asynchronous
    /// write-protection where the kernel has it (`UFFD_FEATURE_WP_ASYNC`,
    /// Linux 6.7): the kernel lifts the protection at a page's first write
    /// itself (no message, no round trip through the handler thread) and
    /// psync finds the written pages, and protects them again, with
    /// `PAGEMAP_SCAN` over the object. Where the kernel lacks it, or with
    /// `false`, each first write is a write-protect fault the handler
    /// serves.
    pub async_wp: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            spin_us: 0,
            workers: 1,
            run_pages: 16,
            fault_around: 0,
            async_wp: true,
        }
    }
}

impl Tuning {
    /// Refuse settings outside the documented ranges, naming the field.
    pub fn check(&self) -> Result<(), String> {
        if self.spin_us > 1000 {
            return Err(format!("spin_us {} is above 1000", self.spin_us));
        }
        if !(1..=8).contains(&self.workers) {
            return Err(format!("workers {} is not 1 to 8", self.workers));
        }
        if !(1..=512).contains(&self.run_pages) {
            return Err(format!("run_pages {} is not 1 to 512", self.run_pages));
        }
        if self.fault_around > 512 {
            return Err(format!("fault_around {} is above 512", self.fault_around));
        }
        Ok(())
    }
}

// Per-page mapping state.
const ABSENT: u8 = 0;
const INFLIGHT: u8 = 1;
const PRESENT: u8 = 2;
const FAILED: u8 = 3;

#[derive(Clone, Debug)]
struct FaultFailure {
    page: usize,
    kind: Option<BackingErrorKind>,
    message: String,
}

/// A bitmap of pages with atomic set/take.
struct PageBits(Box<[AtomicU64]>);

impl PageBits {
    fn new(pages: usize) -> PageBits {
        PageBits((0..pages.div_ceil(64)).map(|_| AtomicU64::new(0)).collect())
    }
    fn set(&self, page: usize) -> bool {
        let bit = 1u64 << (page % 64);
        self.0[page / 64].fetch_or(bit, Ordering::AcqRel) & bit == 0
    }
    fn clear(&self, page: usize) -> bool {
        let bit = 1u64 << (page % 64);
        self.0[page / 64].fetch_and(!bit, Ordering::AcqRel) & bit != 0
    }
    fn collect(&self, take: bool) -> Vec<usize> {
        let mut pages = Vec::new();
        for (w, word) in self.0.iter().enumerate() {
            let mut bits = if take {
                word.swap(0, Ordering::AcqRel)
            } else {
                word.load(Ordering::Acquire)
            };
            while bits != 0 {
                pages.push(w * 64 + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
        pages
    }
}

/// One page of page-aligned scratch memory (UFFDIO_COPY's source).
struct Scratch {
    ptr: *mut u8,
    len: usize,
}

impl Scratch {
    fn new(len: usize) -> io::Result<Scratch> {
        // SAFETY: a fresh anonymous mapping, checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Scratch {
            ptr: ptr.cast(),
            len,
        })
    }
    fn slice(&mut self) -> &mut [u8] {
        // SAFETY: our own mapping of `len` bytes, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // SAFETY: our own mapping; scrub plaintext before returning it.
        unsafe {
            std::ptr::write_bytes(self.ptr, 0, self.len);
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

// SAFETY: a Scratch is plain memory owned by one thread at a time.
unsafe impl Send for Scratch {}

struct Shared {
    backing: Arc<dyn PageBacking>,
    base: usize,
    page_size: usize,
    pages: usize,
    perm: Perm,
    mode: Mode,
    tuning: Tuning,
    uffd: Uffd,
    /// `Some` when writes are tracked asynchronously (see
    /// [`Tuning::async_wp`]): every page is installed write-protected and
    /// psync scans for the written ones.
    pagemap: Option<uffd::Pagemap>,
    poison: bool,
    state: Box<[AtomicU8]>,
    dirty: PageBits,
    predicted: PageBits,
    /// Predicted pages installed writable; dirty iff they differ from their
    /// cache frame (see `install`).
    maybe_dirty: PageBits,
    /// Pages in use from the start of the object ([`Attachment::set_extent`]):
    /// predictions at or past it are dropped. `pages` unless set.
    extent: AtomicUsize,
    cache: Option<Arc<PageCache>>,
    counters: Counters,
    failure: Mutex<Option<FaultFailure>>,
    stop: AtomicBool,
    stop_fd: OwnedFd,
    queue: Mutex<VecDeque<usize>>,
    queue_cv: Condvar,
    psync_lock: Mutex<()>,
}

impl Shared {
    fn writable(&self) -> bool {
        self.perm == Perm::Write
    }

    fn addr(&self, page: usize) -> usize {
        self.base + page * self.page_size
    }

    /// `UFFDIO_COPY` of `pages` pages from `src` to page `page` on, retried
    /// while the kernel says EAGAIN (the mapping is changing), counted.
    ///
    /// # Safety
    /// `src` is readable for `pages` pages.
    unsafe fn copy(
        &self,
        page: usize,
        src: *const u8,
        pages: usize,
        wp: bool,
    ) -> io::Result<CopyOutcome> {
        let c = &self.counters;
        loop {
            c.copy_ioctls.fetch_add(1, Ordering::Relaxed);
            match self
                .uffd
                .copy(self.addr(page), src, pages * self.page_size, wp)
            {
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => std::thread::yield_now(),
                r => {
                    let copied = match r {
                        Ok(CopyOutcome::Installed) => pages,
                        Ok(CopyOutcome::Exists { copied }) => copied / self.page_size,
                        Err(_) => 0,
                    };
                    c.pages_copied.fetch_add(copied as u64, Ordering::Relaxed);
                    break r;
                }
            }
        }
    }

    /// Write-protect (or lift protection from) pages `first..first + pages`.
    fn protect(&self, first: usize, pages: usize, on: bool) -> io::Result<()> {
        self.counters.wp_ioctls.fetch_add(1, Ordering::Relaxed);
        self.uffd
            .write_protect(self.addr(first), pages * self.page_size, on)
    }

    /// Wake threads waiting on page `page`.
    fn wake(&self, page: usize) {
        self.counters.wake_ioctls.fetch_add(1, Ordering::Relaxed);
        let _ = self.uffd.wake(self.addr(page), self.page_size);
    }

    /// Open page `page` for installation: the cache frame or `scratch`
    /// filled by `read_page`.
    fn open_page(&self, page: usize, scratch: &mut Scratch) -> Result<*const u8, BackingError> {
        let c = &self.counters;
        let read = |out: &mut [u8]| {
            c.pages_read.fetch_add(1, Ordering::Relaxed);
            if self.backing.encrypted() {
                c.pages_decrypted.fetch_add(1, Ordering::Relaxed);
            }
            let t = Instant::now();
            let r = self.backing.read_page(page, out);
            c.decrypt_ns
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            r
        };
        match &self.cache {
            Some(cache) => match cache.get_or_fill(page, read)? {
                Lookup::Hit(p) => {
                    c.cache_hits.fetch_add(1, Ordering::Relaxed);
                    Ok(p)
                }
                Lookup::Filled(p) => Ok(p),
            },
            None => {
                let out = scratch.slice();
                if let Err(e) = read(out) {
                    out.fill(0);
                    return Err(e);
                }
                Ok(scratch.ptr)
            }
        }
    }

    /// Resolve page `page`, which this thread moved from ABSENT to INFLIGHT.
    /// `dirty`: the fault is a write, so install it writable and dirty.
    /// `compare`: in a writable attachment with the DRAM cache, install the
    /// page writable (no write-protect fault at its first write, which
    /// would cost as much as a fault prediction saves); psync finds whether
    /// it changed by comparing it with its cache frame, which holds the
    /// committed plaintext it was installed from. After that psync the page
    /// is write-protected and tracked by faults like any other.
    /// Returns whether the page is now mapped.
    fn install(&self, page: usize, dirty: bool, compare: bool, scratch: &mut Scratch) -> bool {
        let src = match self.open_page(page, scratch) {
            Ok(src) => src,
            Err(e) => {
                self.fail(page, Some(e.kind()), e.to_string());
                return false;
            }
        };
        // Before the copy: the woken thread may write and psync at once.
        if dirty {
            self.dirty.set(page);
        }
        let compare = compare && self.writable() && self.cache.is_some() && self.pagemap.is_none();
        if compare {
            self.maybe_dirty.set(page);
        }
        let wp = self.writable() && !dirty && !compare;
        // SAFETY: `src` is a page of our scratch or a READY cache frame.
        let r = unsafe { self.copy(page, src, 1, wp) };
        match r {
            Ok(CopyOutcome::Installed) | Ok(CopyOutcome::Exists { .. }) => {
                self.state[page].store(PRESENT, Ordering::Release);
                true
            }
            Err(e) => {
                self.fail(page, None, format!("installing the page: {e}"));
                false
            }
        }
    }

    /// For a page `PAGEMAP_SCAN` reported written: whether it is mapped.
    /// The walk also reports pages with no page-table entry (nothing to
    /// carry a protection): never claimed, they hold nothing written. A
    /// claimed page may have been installed and written already while its
    /// installer has not yet marked it present: wait for that.
    fn mapped_after_wait(&self, page: usize) -> bool {
        loop {
            match self.state[page].load(Ordering::Acquire) {
                INFLIGHT => std::thread::yield_now(),
                state => return state == PRESENT,
            }
        }
    }

    /// Whether mapped page `page`, installed from its cache frame, differs
    /// from it now.
    fn changed(&self, page: usize) -> bool {
        let Some(frame) = self.cache.as_ref().and_then(|c| c.frame_if_ready(page)) else {
            return true;
        };
        // SAFETY: page `page` is mapped (it was installed) and lies in our
        // mapping; reading it races only a writer psync documents against.
        let now =
            unsafe { std::slice::from_raw_parts(self.addr(page) as *const u8, self.page_size) };
        now != frame
    }

    /// The page could not be opened: record why, and poison it so the
    /// faulting access (and any later one) fails instead of seeing data.
    fn fail(&self, page: usize, kind: Option<BackingErrorKind>, message: String) {
        let addr = self.addr(page);
        self.counters.failed_pages.fetch_add(1, Ordering::Relaxed);
        {
            let mut f = self.failure.lock().unwrap_or_else(|e| e.into_inner());
            if f.is_none() {
                *f = Some(FaultFailure {
                    page,
                    kind,
                    message,
                });
            }
        }
        let poisoned = self.poison && self.uffd.poison(addr, self.page_size).is_ok();
        if !poisoned {
            // SAFETY: `addr` is a page of our own mapping; PROT_NONE makes
            // the retried access SIGSEGV instead of reaching a missing page.
            unsafe { libc::mprotect(addr as *mut libc::c_void, self.page_size, libc::PROT_NONE) };
            self.wake(page);
        }
        self.state[page].store(FAILED, Ordering::Release);
    }

    /// Resolve the missing-page fault on `page` (claimed: INFLIGHT) in a
    /// DRAM-cache attachment with a predictor, installing with it the
    /// predicted pages that follow it (`predicted` from the predictor, in
    /// order) up to `limit` of them ([`Tuning::fault_around`], or what the
    /// predictor asks to have now), all with one
    /// `UFFDIO_COPY` from their consecutive cache frames. The faulting
    /// thread waits for their decryption too, but pays one round trip for
    /// the run instead of one each (the kernel's fault-around, for pages
    /// that must be decrypted). Returns how many predicted pages it took.
    fn fault_around(
        &self,
        page: usize,
        write: bool,
        predicted: &[usize],
        limit: usize,
        scratch: &mut Scratch,
    ) -> usize {
        let Some(cache) = &self.cache else {
            self.install(page, write && self.writable(), true, scratch);
            return 0;
        };
        if let Err(e) = self.open_page(page, scratch) {
            self.fail(page, Some(e.kind()), e.to_string());
            return 0;
        }
        // Claim and open the run after the faulting page.
        let mut len = 1;
        for (k, &next) in predicted.iter().enumerate() {
            if k >= limit
                || next != page + len
                || self.state[next]
                    .compare_exchange(ABSENT, INFLIGHT, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
            {
                break;
            }
            if self.open_page(next, scratch).is_err() {
                // Left for its own fault, which records and poisons it.
                self.state[next].store(ABSENT, Ordering::Release);
                break;
            }
            len += 1;
        }
        // Before the copy, as in `install`: the woken thread may write and
        // psync at once. The faulting page is dirty if written, the others
        // are compared at psync.
        let writable = self.writable();
        // With asynchronous write-protection every page goes in protected
        // (the faulting thread's retried write lifts it in the kernel and
        // psync's scan finds the page).
        let wp = writable && self.pagemap.is_some();
        let compare = writable && !wp;
        if write && writable {
            self.dirty.set(page);
        } else if compare {
            self.maybe_dirty.set(page);
        }
        for p in page + 1..page + len {
            self.predicted.set(p);
            if compare {
                self.maybe_dirty.set(p);
            }
        }
        // SAFETY: frames `page..page+len` are READY and consecutive in the
        // cache's mapping; the destination is in our registered range.
        match unsafe { self.copy(page, cache.frame_ptr(page), len, wp) } {
            Ok(CopyOutcome::Installed) => {
                for p in page..page + len {
                    self.state[p].store(PRESENT, Ordering::Release);
                }
                self.counters
                    .predicted
                    .fetch_add(len as u64 - 1, Ordering::Relaxed);
            }
            r => {
                // Some page appeared meanwhile (or the copy failed): page
                // by page; `install` treats a page already there as
                // installed, and fails (poisons) one it cannot install.
                if let Err(e) = r {
                    if e.raw_os_error() != Some(libc::EEXIST) && len == 1 {
                        self.fail(page, None, format!("installing the page: {e}"));
                        return 0;
                    }
                }
                self.install(page, write && writable, true, scratch);
                for p in page + 1..page + len {
                    if self.install(p, false, true, scratch) {
                        self.counters.predicted.fetch_add(1, Ordering::Relaxed);
                    } else {
                        self.predicted.clear(p);
                        self.maybe_dirty.clear(p);
                    }
                }
            }
        }
        len - 1
    }

    /// Drop predictions at or past the extent ([`Attachment::set_extent`]).
    fn clip_to_extent(&self, out: &mut Vec<usize>) {
        let extent = self.extent.load(Ordering::Relaxed);
        if extent < self.pages {
            let before = out.len();
            out.retain(|&p| p < extent);
            self.counters
                .predicted_past_extent
                .fetch_add((before - out.len()) as u64, Ordering::Relaxed);
        }
    }

    fn handle(
        &self,
        msg: &Msg,
        scratch: &mut Scratch,
        predictor: &mut Option<Box<dyn Predictor>>,
        out: &mut Vec<usize>,
    ) {
        if msg.event != uffd::EVENT_PAGEFAULT {
            return;
        }
        let start = Instant::now();
        let addr = msg.address as usize & !(self.page_size - 1);
        if addr < self.base || addr >= self.addr(self.pages) {
            return;
        }
        let page = (addr - self.base) / self.page_size;
        let c = &self.counters;
        if msg.flags & uffd::PAGEFAULT_FLAG_WP != 0 {
            c.wp_faults.fetch_add(1, Ordering::Relaxed);
            self.dirty.set(page);
            if self.predicted.clear(page) {
                c.predicted_seen_used.fetch_add(1, Ordering::Relaxed);
            }
            if self.protect(page, 1, false).is_err() {
                self.fail(page, None, "lifting write protection failed".into());
            }
        } else {
            c.faults.fetch_add(1, Ordering::Relaxed);
            let write = msg.flags & uffd::PAGEFAULT_FLAG_WRITE != 0;
            let mut predicted_now = false;
            match self.state[page].compare_exchange(
                ABSENT,
                INFLIGHT,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => match predictor.as_mut() {
                    Some(p) if self.cache.is_some() => {
                        out.clear();
                        p.on_fault(page, out);
                        self.clip_to_extent(out);
                        predicted_now = true;
                        let limit = self.tuning.fault_around.max(p.install_now());
                        if limit > 0 {
                            let ahead = self.fault_around(page, write, out, limit, scratch);
                            out.drain(..ahead);
                        } else {
                            self.install(page, write && self.writable(), true, scratch);
                        }
                    }
                    _ => {
                        self.install(page, write && self.writable(), true, scratch);
                    }
                },
                Err(INFLIGHT) => {
                    // The prediction worker is installing it. Its copy (or
                    // its poisoning, if the page fails its check) wakes
                    // every thread waiting on the page, whether or not
                    // this message was read yet, so nothing to wait for.
                    c.predicted_late.fetch_add(1, Ordering::Relaxed);
                    if self.predicted.clear(page) {
                        c.predicted_seen_used.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(_) => {
                    // Mapped (or poisoned) meanwhile: either the prediction
                    // worker's copy landed between the fault and this
                    // message being read (a late prediction: that copy woke
                    // the thread), or a second thread's fault on the same
                    // page. Waking is harmless if nobody waits.
                    if self.predicted.clear(page) {
                        c.predicted_late.fetch_add(1, Ordering::Relaxed);
                        c.predicted_seen_used.fetch_add(1, Ordering::Relaxed);
                    }
                    self.wake(page);
                }
            }
            if let Some(p) = predictor.as_mut() {
                if !predicted_now {
                    out.clear();
                    p.on_fault(page, out);
                    self.clip_to_extent(out);
                }
                let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                // The newest fault's predictions replace the older ones the
                // worker has not reached: the stream has moved on.
                q.clear();
                for &next in out.iter() {
                    if self.state[next].load(Ordering::Relaxed) == ABSENT {
                        q.push_back(next);
                    } else {
                        c.predicted_skipped.fetch_add(1, Ordering::Relaxed);
                    }
                }
                drop(q);
                if self.tuning.workers > 1 {
                    self.queue_cv.notify_all();
                } else {
                    self.queue_cv.notify_one();
                }
            }
        }
        c.handler_ns
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn handler_loop(self: Arc<Self>, mut scratch: Scratch) {
        // A Markov chain learns which page faults after which; that history
        // is the object's, kept with its DRAM cache from one attach to the
        // next (within one attach a page faults at most once).
        let mut predictor = match self.mode {
            Mode::Predict { predictor, depth } if depth > 0 => Some(
                self.cache
                    .as_ref()
                    .filter(|_| predictor == PredictorKind::Markov)
                    .and_then(|c| c.take_predictor(predictor, depth))
                    .unwrap_or_else(|| new_predictor(predictor, depth, self.pages)),
            ),
            _ => None,
        };
        let mut out = Vec::new();
        let mut msgs = [Msg::default(); 16];
        let spin = std::time::Duration::from_micros(u64::from(self.tuning.spin_us));
        let mut fds = [
            libc::pollfd {
                fd: self.uffd.raw(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.stop_fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            // SAFETY: `fds` is a valid array of two pollfds.
            let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if rc < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                break;
            }
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            self.counters
                .handler_wakeups
                .fetch_add(1, Ordering::Relaxed);
            // Serve what is pending, then spin for up to `spin` before
            // sleeping again; every message found while spinning resets it.
            let mut idle: Option<Instant> = None;
            loop {
                let n = self.uffd.read(&mut msgs).unwrap_or_default();
                if n > 0 {
                    if let Some(t) = idle.take() {
                        let c = &self.counters;
                        c.handler_spin_hits.fetch_add(n as u64, Ordering::Relaxed);
                        c.handler_spin_ns
                            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    }
                    for msg in &msgs[..n] {
                        self.handle(msg, &mut scratch, &mut predictor, &mut out);
                    }
                    continue;
                }
                let t = *idle.get_or_insert_with(Instant::now);
                if spin.is_zero() || t.elapsed() >= spin || self.stop.load(Ordering::Relaxed) {
                    self.counters
                        .handler_spin_ns
                        .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    break;
                }
                std::hint::spin_loop();
            }
        }
        if let (
            Mode::Predict {
                predictor: kind,
                depth,
            },
            Some(p),
            Some(c),
        ) = (self.mode, predictor, &self.cache)
        {
            if kind == PredictorKind::Markov {
                c.keep_predictor(kind, depth, p);
            }
        }
    }

    fn worker_loop(self: Arc<Self>, mut scratch: Scratch) {
        let c = &self.counters;
        let max_run = self.tuning.run_pages;
        let mut batch = Vec::with_capacity(max_run);
        loop {
            batch.clear();
            {
                let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if self.stop.load(Ordering::Acquire) {
                        return;
                    }
                    if !q.is_empty() {
                        break;
                    }
                    q = self.queue_cv.wait(q).unwrap_or_else(|e| e.into_inner());
                    c.worker_wakeups.fetch_add(1, Ordering::Relaxed);
                }
                while batch.len() < max_run {
                    match q.pop_front() {
                        Some(p) => batch.push(p),
                        None => break,
                    }
                }
            }
            let start = Instant::now();
            // Claim and open each page into the cache; install runs of
            // consecutive pages with one UFFDIO_COPY each (their cache frames
            // are consecutive too). The first page goes in alone, at once:
            // it is the one the program is most likely to touch next.
            let mut run: Option<(usize, usize)> = None;
            for (i, &page) in batch.iter().enumerate() {
                if self.state[page]
                    .compare_exchange(ABSENT, INFLIGHT, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    c.predicted_skipped.fetch_add(1, Ordering::Relaxed);
                    if let Some(r) = run.take() {
                        self.install_run(r, &mut scratch);
                    }
                    continue;
                }
                if self.cache.is_none() {
                    // Prediction always runs with the cache; stay correct
                    // regardless.
                    self.predicted.set(page);
                    if self.install(page, false, true, &mut scratch) {
                        c.predicted.fetch_add(1, Ordering::Relaxed);
                    } else {
                        self.predicted.clear(page);
                    }
                    continue;
                }
                if let Err(e) = self.open_page(page, &mut scratch) {
                    self.fail(page, Some(e.kind()), e.to_string());
                    if let Some(r) = run.take() {
                        self.install_run(r, &mut scratch);
                    }
                    continue;
                }
                run = match run {
                    Some((first, len)) if first + len == page => Some((first, len + 1)),
                    Some(r) => {
                        self.install_run(r, &mut scratch);
                        Some((page, 1))
                    }
                    None => Some((page, 1)),
                };
                if i == 0 {
                    if let Some(r) = run.take() {
                        self.install_run(r, &mut scratch);
                    }
                }
            }
            if let Some(r) = run.take() {
                self.install_run(r, &mut scratch);
            }
            c.worker_ns
                .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// Install predicted pages `first..first + len`, claimed (INFLIGHT) and
    /// READY in the cache, with one copy from their cache frames; page by
    /// page if that fails.
    fn install_run(&self, (first, len): (usize, usize), scratch: &mut Scratch) {
        let Some(cache) = &self.cache else { return };
        // Tracked by comparison, or (asynchronous write-protection)
        // installed protected and found by psync's scan if written.
        let compare = self.writable() && self.pagemap.is_none();
        let wp = self.writable() && self.pagemap.is_some();
        for p in first..first + len {
            // Before the copy, as in `install`.
            self.predicted.set(p);
            if compare {
                self.maybe_dirty.set(p);
            }
        }
        let src = cache.frame_ptr(first);
        // SAFETY: frames `first..first+len` are READY and consecutive in the
        // cache's mapping; the destination pages are in our registered range.
        let r = unsafe { self.copy(first, src, len, wp) };
        if let Ok(CopyOutcome::Installed) = r {
            for p in first..first + len {
                self.state[p].store(PRESENT, Ordering::Release);
            }
            self.counters
                .predicted
                .fetch_add(len as u64, Ordering::Relaxed);
            return;
        }
        // A partial copy (a page appeared meanwhile): finish page by page;
        // `install` treats a page already there as installed.
        for p in first..first + len {
            if self.install(p, false, true, scratch) {
                self.counters.predicted.fetch_add(1, Ordering::Relaxed);
            } else {
                self.predicted.clear(p);
                self.maybe_dirty.clear(p);
            }
        }
    }
}

/// Dirty pages from which psync seals in parallel.
const PARALLEL_STAGE: usize = 16;

/// Objects attached in this process, by base address: at most one
/// attachment of an object at a time (its range is unique anyway).
fn attached() -> &'static Mutex<BTreeMap<usize, (usize, Perm)>> {
    static ATTACHED: OnceLock<Mutex<BTreeMap<usize, (usize, Perm)>>> = OnceLock::new();
    ATTACHED.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// The line of /proc/self/maps overlapping `[start, end)`, to say what
/// holds a taken range.
fn occupant(start: usize, end: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for line in maps.lines() {
        let Some((range, _)) = line.split_once(' ') else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16)) else {
            continue;
        };
        if a < end && start < b {
            return format!(
                "by {}",
                line.split_whitespace().collect::<Vec<_>>().join(" ")
            );
        }
    }
    "by a mapping that is gone now".into()
}

/// A psync between staging and commit ([`Attachment::psync_prepare`]):
/// the pages staged, their plaintext (for the DRAM cache), and the
/// attachment's psync lock.
pub(crate) struct PreparedPsync<'a> {
    _one: std::sync::MutexGuard<'a, ()>,
    start: Instant,
    commit_start: Instant,
    dirty: Vec<usize>,
    copies: Vec<u8>,
    keep: Vec<usize>,
    cache: Option<Arc<cache::PageCache>>,
}

/// An object attached at its fixed address; see the module documentation.
///
/// ```no_run
/// use std::sync::Arc;
/// use nvmos_pmo::attach::{Attachment, Mode, Perm, mem_backing::MemBacking};
/// use nvmos_pmo::attach::predict::PredictorKind;
///
/// let object = Arc::new(MemBacking::new(0x6000_0000_0000, 16, true));
/// let mode = Mode::Predict { predictor: PredictorKind::Stream, depth: 8 };
/// let mut a = Attachment::attach(object.clone(), Perm::Write, mode)?;
/// a.as_mut_slice().unwrap()[5000] = 42; // a fault on page 1, served decrypted
/// a.psync()?;                 // page 1 sealed and committed
/// let stats = a.detach()?;
/// assert_eq!(stats.pages_synced, 1);
/// # Ok::<(), nvmos_pmo::attach::AttachError>(())
/// ```
pub struct Attachment {
    shared: Arc<Shared>,
    /// The backing's object id ([`CacheIdentity::object`](crate::CacheIdentity)), fixed for its life: what [`POff`]s are checked against.
    object_id: u64,
    handler: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

impl Attachment {
    /// Attach `backing` at its base address with `perm` and `mode`.
    pub fn attach(
        backing: Arc<dyn PageBacking>,
        perm: Perm,
        mode: Mode,
    ) -> Result<Attachment, AttachError> {
        Self::attach_tuned(backing, perm, mode, Tuning::default())
    }

    /// [`Attachment::attach`] with the fault path tuned ([`Tuning`]).
    pub fn attach_tuned(
        backing: Arc<dyn PageBacking>,
        perm: Perm,
        mode: Mode,
        tuning: Tuning,
    ) -> Result<Attachment, AttachError> {
        let base = backing.base_address();
        let page_size = backing.page_size();
        let pages = backing.page_count();
        let invalid = |reason: String| AttachError::Invalid { base, reason };
        tuning
            .check()
            .map_err(|m| invalid(format!("tuning: {m}")))?;
        // SAFETY: sysconf has no preconditions.
        let system_page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        if page_size != system_page {
            return Err(invalid(format!(
                "its page size is {page_size} bytes, the system's is {system_page}"
            )));
        }
        // `page_size` equals the system's, a power of two.
        if base == 0 || base & (page_size - 1) != 0 {
            return Err(invalid(
                "the base address is not a nonzero multiple of the page size".into(),
            ));
        }
        if pages == 0 {
            return Err(invalid("the object has no pages".into()));
        }
        let len = pages
            .checked_mul(page_size)
            .filter(|len| base.checked_add(*len).is_some())
            .ok_or_else(|| invalid(format!("{pages} pages do not fit in the address space")))?;
        let end = base + len;
        match mode {
            Mode::Plain if backing.encrypted() => {
                return Err(invalid(
                    "mode plain needs an object stored without encryption; this one is sealed"
                        .into(),
                ))
            }
            Mode::Predict { depth, .. } if depth > MAX_DEPTH => {
                return Err(invalid(format!(
                    "prediction depth {depth} is above the limit of {MAX_DEPTH}"
                )))
            }
            _ => {}
        }

        let mut registry = attached().lock().unwrap_or_else(|e| e.into_inner());
        if let Some((&other, &(_, other_perm))) = registry.range(..end).next_back() {
            if other == base {
                return Err(AttachError::AlreadyAttached {
                    base,
                    perm: other_perm,
                });
            }
        }

        let prot = match perm {
            Perm::Read => libc::PROT_READ,
            Perm::Write => libc::PROT_READ | libc::PROT_WRITE,
        };
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping.
        let ptr = unsafe {
            libc::mmap(
                base as *mut libc::c_void,
                len,
                prot,
                libc::MAP_PRIVATE
                    | libc::MAP_ANONYMOUS
                    | libc::MAP_NORESERVE
                    | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EEXIST) {
                return Err(AttachError::RangeTaken {
                    base,
                    end,
                    occupant: occupant(base, end),
                });
            }
            return Err(AttachError::Map {
                base,
                end,
                source: e,
            });
        }
        // A kernel older than 4.17 ignores the flag and may map elsewhere.
        let unmap = || {
            // SAFETY: the mapping we just made.
            unsafe { libc::munmap(ptr, len) };
        };
        if ptr as usize != base {
            unmap();
            return Err(AttachError::RangeTaken {
                base,
                end,
                occupant: "the kernel did not honour MAP_FIXED_NOREPLACE".into(),
            });
        }
        // SAFETY: our own mapping. Huge pages would defeat per-page faults.
        // A child of fork(2) would inherit the range without the
        // userfaultfd registration and read zero pages where the object has
        // data, so the range is not inherited at all (the child gets
        // SIGSEGV: an attachment belongs to one process). Plaintext stays
        // out of core dumps.
        unsafe {
            libc::madvise(ptr, len, libc::MADV_NOHUGEPAGE);
            libc::madvise(ptr, len, libc::MADV_DONTFORK);
            libc::madvise(ptr, len, libc::MADV_DONTDUMP);
        }

        let uffd_err = |op, source| AttachError::Uffd { base, op, source };
        // Asynchronous write-protection only with a way to find the
        // written pages again.
        let pagemap = (perm == Perm::Write && tuning.async_wp)
            .then(uffd::Pagemap::open)
            .and_then(Result::ok);
        let setup = || -> Result<(Uffd, OwnedFd), AttachError> {
            let wanted = if perm == Perm::Write {
                uffd::FEATURE_WP
            } else {
                0
            };
            let optional = uffd::FEATURE_POISON
                | if pagemap.is_some() {
                    uffd::FEATURE_WP_ASYNC
                } else {
                    0
                };
            let u = Uffd::open(wanted, optional).map_err(|e| uffd_err("open", e))?;
            u.register(base, len, perm == Perm::Write)
                .map_err(|e| uffd_err("register", e))?;
            // SAFETY: eventfd(2) takes only flags.
            let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            if efd < 0 {
                return Err(uffd_err("eventfd", io::Error::last_os_error()));
            }
            // SAFETY: a fresh descriptor nothing else owns.
            Ok((u, unsafe { OwnedFd::from_raw_fd(efd) }))
        };
        let (u, stop_fd) = match setup() {
            Ok(x) => x,
            Err(e) => {
                unmap();
                return Err(e);
            }
        };
        let cache = if mode.uses_cache() {
            match cache::cache_for(backing.cache_identity(), base, pages, page_size) {
                Ok(c) => Some(c),
                Err(e) => {
                    unmap();
                    return Err(AttachError::Map {
                        base,
                        end,
                        source: e,
                    });
                }
            }
        } else {
            None
        };
        let pagemap = pagemap.filter(|_| u.features & uffd::FEATURE_WP_ASYNC != 0);
        let shared = Arc::new(Shared {
            poison: u.features & uffd::FEATURE_POISON != 0,
            pagemap,
            uffd: u,
            backing,
            base,
            page_size,
            pages,
            perm,
            mode,
            tuning,
            state: (0..pages).map(|_| AtomicU8::new(ABSENT)).collect(),
            dirty: PageBits::new(pages),
            predicted: PageBits::new(pages),
            maybe_dirty: PageBits::new(pages),
            extent: AtomicUsize::new(pages),
            cache,
            counters: Counters::default(),
            failure: Mutex::new(None),
            stop: AtomicBool::new(false),
            stop_fd,
            queue: Mutex::new(VecDeque::new()),
            queue_cv: Condvar::new(),
            psync_lock: Mutex::new(()),
        });
        // Each thread gets its page of scratch here, so a thread that
        // starts can always serve faults.
        let spawn = |name: String, f: fn(Arc<Shared>, Scratch), s: Arc<Shared>| {
            let scratch = Scratch::new(page_size)?;
            std::thread::Builder::new()
                .name(name)
                .spawn(move || f(s, scratch))
        };
        let handler = match spawn(
            format!("pmo-fault-{base:x}"),
            Shared::handler_loop,
            shared.clone(),
        ) {
            Ok(h) => h,
            Err(e) => {
                unmap();
                return Err(uffd_err("handler thread", e));
            }
        };
        let mut attachment = Attachment {
            object_id: shared.backing.cache_identity().object,
            shared: shared.clone(),
            handler: Some(handler),
            workers: Vec::new(),
        };
        if matches!(mode, Mode::Predict { depth, .. } if depth > 0) {
            for i in 0..tuning.workers {
                let name = format!("pmo-predict{i}-{base:x}");
                match spawn(name, Shared::worker_loop, shared.clone()) {
                    Ok(w) => attachment.workers.push(w),
                    Err(e) => {
                        // Dropping the attachment stops the handler and unmaps.
                        drop(registry);
                        drop(attachment);
                        return Err(uffd_err("prediction thread", e));
                    }
                }
            }
        }
        registry.insert(base, (len, perm));
        Ok(attachment)
    }

    /// The object's first byte (its fixed base address).
    pub fn as_ptr(&self) -> *mut u8 {
        self.shared.base as *mut u8
    }

    /// Bytes mapped (pages × page size).
    pub fn len(&self) -> usize {
        self.shared.pages * self.shared.page_size
    }

    /// Never true: an attachment has at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The whole object. Touching a page whose integrity check fails raises
    /// SIGBUS (see the module documentation).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping lives as long as `self`; pages appear on first
        // touch through the fault handler.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len()) }
    }

    /// The whole object, writable; `None` for a read-only attachment.
    pub fn as_mut_slice(&mut self) -> Option<&mut [u8]> {
        if self.shared.perm != Perm::Write {
            return None;
        }
        // SAFETY: as `as_slice`, and `&mut self` makes the view unique.
        Some(unsafe { std::slice::from_raw_parts_mut(self.as_ptr(), self.len()) })
    }

    /// A typed pointer to byte `offset` of this object (see [`PPtr`]).
    pub fn pptr<T>(&self, offset: usize) -> PPtr<T> {
        PPtr::from_offset(self.shared.base, offset)
    }

    /// The `T` that `p` points at, copied out; `None` for a null pointer or
    /// one that does not lie whole and aligned inside this object (such as
    /// a pointer read from a damaged object or another object's). `T` is
    /// plain data (`#[repr(C)]`, no references or heap pointers; [`PPtr`]
    /// fields are fine).
    pub fn get<T: Copy>(&self, p: PPtr<T>) -> Option<T> {
        let offset = p.offset_in(self.shared.base, self.len())?;
        // SAFETY: `offset_in` checked that a whole, aligned T lies inside
        // the mapping, which lives as long as `self`; T is Copy plain data.
        Some(unsafe { std::ptr::read(self.as_ptr().add(offset) as *const T) })
    }

    /// Store `value` where `p` points. Refused (returns `false`, nothing
    /// written) for a read-only attachment or a pointer `get` would refuse.
    pub fn set<T: Copy>(&mut self, p: PPtr<T>, value: T) -> bool {
        let Some(offset) = p.offset_in(self.shared.base, self.len()) else {
            return false;
        };
        if self.shared.perm != Perm::Write {
            return false;
        }
        // SAFETY: as in `get`, and `&mut self` makes the write unique.
        unsafe { std::ptr::write(self.as_ptr().add(offset) as *mut T, value) };
        true
    }

    /// The attached object's id: what a [`POff`] into it holds.
    pub fn object_id(&self) -> u64 {
        self.object_id
    }

    /// A relocatable typed pointer to byte `offset` of this object (see
    /// [`POff`]); it resolves in this object at any attach address.
    pub fn poff<T>(&self, offset: usize) -> POff<T> {
        POff::new(self.object_id, offset as u64)
    }

    /// The [`POff`] of `ptr`, which must point into this attachment.
    pub fn poff_of<T>(&self, ptr: *const T) -> Result<POff<T>, POffError> {
        let (addr, base) = (ptr as usize, self.shared.base);
        let end = base + self.len();
        if addr < base || addr >= end {
            return Err(POffError::NotInObject { addr, base, end });
        }
        Ok(self.poff(addr - base))
    }

    /// Where `p` points in this attachment: refused for null, for a POff of
    /// another object, and unless a whole, aligned `T` lies there.
    pub fn resolve<T>(&self, p: POff<T>) -> Result<*mut T, POffError> {
        let offset = p.check(self.object_id, self.len())?;
        // SAFETY: `check` put `offset + size_of::<T>()` inside the mapping.
        Ok(unsafe { self.as_ptr().add(offset) }.cast())
    }

    /// The `T` that `p` points at, copied out (`T` plain data, as for
    /// [`Attachment::get`]; [`POff`] fields are fine).
    pub fn get_off<T: Copy>(&self, p: POff<T>) -> Result<T, POffError> {
        let ptr = self.resolve(p)?;
        // SAFETY: `resolve` checked bounds and alignment in the mapping,
        // which lives as long as `self`; T is Copy plain data.
        Ok(unsafe { std::ptr::read(ptr) })
    }

    /// Store `value` where `p` points; refused as [`Attachment::resolve`]
    /// refuses, and for a read-only attachment (nothing written then).
    pub fn set_off<T: Copy>(&mut self, p: POff<T>, value: T) -> Result<(), POffError> {
        let ptr = self.resolve(p)?;
        if self.shared.perm != Perm::Write {
            return Err(POffError::ReadOnly);
        }
        // SAFETY: as in `get_off`, and `&mut self` makes the write unique.
        unsafe { std::ptr::write(ptr, value) };
        Ok(())
    }

    /// Whether only user-mode accesses are served (`UFFD_USER_MODE_ONLY`,
    /// when the kernel refuses more to this process): then a system call
    /// that reads an untouched page of the object, such as `write(2)` from
    /// it, fails with `EFAULT` instead of faulting the page in.
    pub fn user_mode_only(&self) -> bool {
        self.shared.uffd.user_mode_only
    }

    /// The permission it was attached with.
    pub fn perm(&self) -> Perm {
        self.shared.perm
    }

    /// The mode it was attached with.
    pub fn mode(&self) -> Mode {
        self.shared.mode
    }

    /// The first fault-time failure, if any: every later psync and detach
    /// return it.
    pub fn fault_error(&self) -> Option<AttachError> {
        let f = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        f.as_ref().map(|f| AttachError::FaultFailed {
            base: self.shared.base,
            page: f.page,
            addr: self.shared.addr(f.page),
            kind: f.kind,
            message: f.message.clone(),
        })
    }

    /// Pages written since the last psync, ascending.
    pub fn dirty_pages(&self) -> Vec<usize> {
        let s = &*self.shared;
        let mut pages = s.dirty.collect(false);
        if let Some(pagemap) = &s.pagemap {
            let mut runs = Vec::new();
            if pagemap
                .written(s.base, s.addr(s.pages), false, &mut runs)
                .is_ok()
            {
                for (start, end) in runs {
                    pages.extend(
                        (start..end)
                            .step_by(s.page_size)
                            .map(|a| (a - s.base) / s.page_size)
                            .filter(|&p| s.mapped_after_wait(p)),
                    );
                }
            } else {
                // The walk failed (psync will report it): every mapped
                // page may have been written, never fewer.
                pages.extend(
                    (0..s.pages).filter(|&p| s.state[p].load(Ordering::Acquire) == PRESENT),
                );
            }
        }
        pages.extend(
            s.maybe_dirty
                .collect(false)
                .into_iter()
                .filter(|&p| s.changed(p)),
        );
        pages.sort_unstable();
        pages.dedup();
        if s.pagemap.is_some() && s.cache.is_some() {
            // As psync: written but equal to the committed plaintext is
            // not a change.
            pages.retain(|&p| s.changed(p));
        }
        pages
    }

    /// Tell the predictor that only the first `pages` pages are in use (a
    /// file's length inside an object made larger for appends, as a file
    /// system knows it from the inode): it names no page at or past them,
    /// as Linux's read-ahead stops at the end of the file. Faults there
    /// are still served. More than the object's pages means all of them.
    pub fn set_extent(&self, pages: usize) {
        self.shared
            .extent
            .store(pages.min(self.shared.pages), Ordering::Relaxed);
    }

    /// Pages the prediction worker installed whose use has not been seen
    /// (see [`AttachStats::predicted_seen_used`]), ascending.
    pub fn predicted_pages(&self) -> Vec<usize> {
        self.shared.predicted.collect(false)
    }

    /// Pages mapped now.
    pub fn resident_pages(&self) -> usize {
        self.shared
            .state
            .iter()
            .filter(|s| s.load(Ordering::Relaxed) == PRESENT)
            .count()
    }

    /// Counters so far.
    pub fn stats(&self) -> AttachStats {
        self.shared.counters.snapshot()
    }

    /// Make every modification since the last psync durable, all or
    /// nothing: stage each dirty page (sealed, out of place) and commit.
    /// On error nothing is committed and the pages stay dirty, so psync can
    /// be retried. A read-only attachment has nothing to do.
    /// (`Pool::psync_many` commits several attachments all or nothing.)
    pub fn psync(&self) -> Result<PsyncStats, AttachError> {
        let Some(prepared) = self.psync_prepare()? else {
            return Ok(PsyncStats::default());
        };
        match self.shared.backing.commit() {
            Ok(()) => Ok(self.psync_finish(prepared, true)),
            Err(source) => {
                self.psync_finish(prepared, false);
                Err(AttachError::Commit {
                    base: self.shared.base,
                    source,
                })
            }
        }
    }

    /// The backing this attachment maps.
    pub(crate) fn backing(&self) -> &dyn PageBacking {
        &*self.shared.backing
    }

    /// psync up to its commit: find the pages written since the last
    /// psync and stage them in the backing. `None` for a read-only
    /// attachment. The attachment's psync lock is held until
    /// [`Attachment::psync_finish`].
    pub(crate) fn psync_prepare(&self) -> Result<Option<PreparedPsync<'_>>, AttachError> {
        let start = Instant::now();
        if let Some(e) = self.fault_error() {
            return Err(e);
        }
        let s = &*self.shared;
        if s.perm == Perm::Read {
            return Ok(None);
        }
        let one = s.psync_lock.lock().unwrap_or_else(|e| e.into_inner());
        let track_start = Instant::now();
        let c = &s.counters;
        let mut dirty = s.dirty.collect(true);
        let maybe = s.maybe_dirty.collect(true);
        // A page marked dirty by its first (write) touch may still be on
        // its way in; it is mapped writable, so wait for it before
        // protecting or copying it.
        for &p in &dirty {
            while s.state[p].load(Ordering::Acquire) == INFLIGHT {
                std::thread::yield_now();
            }
        }
        let put_back = |dirty: &[usize], maybe: &[usize]| {
            for &p in dirty {
                s.dirty.set(p);
            }
            for &p in maybe {
                s.maybe_dirty.set(p);
            }
        };
        let protect_runs = |pages: &[usize]| -> Result<(), AttachError> {
            let mut i = 0;
            while i < pages.len() {
                let mut j = i + 1;
                while j < pages.len() && pages[j] == pages[j - 1] + 1 {
                    j += 1;
                }
                s.protect(pages[i], j - i, true)
                    .map_err(|e| AttachError::Uffd {
                        base: s.base,
                        op: "write-protect",
                        source: e,
                    })?;
                i = j;
            }
            Ok(())
        };
        let note_used = |p: usize| {
            if s.predicted.clear(p) {
                c.predicted_seen_used.fetch_add(1, Ordering::Relaxed);
            }
        };
        // Pages to leave writable after this psync (compared at the next).
        let mut keep: Vec<usize> = Vec::new();
        if let Some(pagemap) = &s.pagemap {
            // Asynchronous write-protection: every page went in protected
            // (or dirty, at a first-touch write); the kernel lifted the
            // protection of each page written since. One walk finds them
            // and protects them again, page by page atomically, so a
            // write after it is found by the next psync.
            let mut runs = Vec::new();
            match pagemap.written(s.base, s.addr(s.pages), true, &mut runs) {
                Ok(calls) => {
                    c.pagemap_scans.fetch_add(calls, Ordering::Relaxed);
                }
                Err(e) => {
                    put_back(&dirty, &maybe);
                    return Err(AttachError::Uffd {
                        base: s.base,
                        op: "PAGEMAP_SCAN",
                        source: e,
                    });
                }
            }
            let before = dirty.len();
            for (start, end) in runs {
                for addr in (start..end).step_by(s.page_size) {
                    let p = (addr - s.base) / s.page_size;
                    if s.mapped_after_wait(p) {
                        dirty.push(p);
                    }
                }
            }
            c.pages_found_written
                .fetch_add((dirty.len() - before) as u64, Ordering::Relaxed);
            dirty.sort_unstable();
            dirty.dedup();
            if s.cache.is_some() {
                // Written is not changed: a page equal to its cache frame
                // (the committed plaintext) needs no staging. It is
                // protected again already, so a later write is found.
                c.pages_compared
                    .fetch_add(dirty.len() as u64, Ordering::Relaxed);
                dirty.retain(|&p| s.changed(p));
            }
            for &p in &dirty {
                note_used(p);
            }
            // Pages installed writable before (none are, in this mode)
            // would be in `maybe`: compare them, as below, to be safe.
            for &p in &maybe {
                if s.changed(p) {
                    dirty.push(p);
                }
            }
        } else if s.cache.is_some() {
            // Write tracking by comparison (DRAM-cache modes): a page
            // written in this interval is likely written in the next one
            // too (a heap's headers, a root block), and a write-protect
            // fault costs a round trip through the handler thread while
            // comparing a page with its cache frame (the committed
            // plaintext) costs a memcmp. So every page written in this
            // interval stays writable and is compared at the next psync;
            // a compared page that did not change goes back to
            // write-protect tracking. Compare first, protect the unchanged
            // ones, then compare those again: a write between the two is
            // caught by the second comparison (the page is protected from
            // then on, so any later write faults).
            c.pages_compared
                .fetch_add(maybe.len() as u64, Ordering::Relaxed);
            let (changed, mut unchanged): (Vec<usize>, Vec<usize>) =
                maybe.iter().partition(|&&p| s.changed(p));
            unchanged.retain(|p| dirty.binary_search(p).is_err());
            if let Err(e) = protect_runs(&unchanged) {
                put_back(&dirty, &maybe);
                return Err(e);
            }
            c.pages_compared
                .fetch_add(unchanged.len() as u64, Ordering::Relaxed);
            for &p in &unchanged {
                if s.changed(p) {
                    dirty.push(p);
                    note_used(p);
                }
            }
            for &p in &changed {
                note_used(p);
            }
            keep = dirty.iter().chain(&changed).copied().collect();
            keep.sort_unstable();
            keep.dedup();
            // Pages found written after their protection are protected
            // and stay tracked by faults: not kept.
            keep.retain(|p| unchanged.binary_search(p).is_err());
            dirty.extend(&changed);
        } else {
            // Re-protect in runs of consecutive pages, before copying: a
            // write after this point faults and marks the page for the
            // next psync.
            let mut protect: Vec<usize> = dirty.iter().chain(&maybe).copied().collect();
            protect.sort_unstable();
            if let Err(e) = protect_runs(&protect) {
                put_back(&dirty, &maybe);
                return Err(e);
            }
            for &p in &maybe {
                if s.changed(p) {
                    dirty.push(p);
                    note_used(p);
                }
            }
        }
        dirty.sort_unstable();
        dirty.dedup();
        c.psync_track_ns
            .fetch_add(track_start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        // From here every page to sync is in `dirty` (protected, or kept
        // writable and compared against what is staged now at the next
        // psync); on an error they are marked dirty again so a retry
        // includes them.
        let restore = || {
            for &p in &dirty {
                s.dirty.set(p);
            }
        };
        let cache = s
            .cache
            .clone()
            .or_else(|| cache::lookup(s.backing.cache_identity()));
        let stage_start = Instant::now();
        let mut copies = vec![0u8; dirty.len() * s.page_size];
        for (&p, buf) in dirty.iter().zip(copies.chunks_mut(s.page_size)) {
            // SAFETY: page `p` is mapped (dirty pages are present) and lies
            // in our mapping; the copy tolerates a racing writer (see above).
            unsafe {
                std::ptr::copy_nonoverlapping(s.addr(p) as *const u8, buf.as_mut_ptr(), s.page_size)
            };
        }
        // Seal and stage, in runs: each page is independent, so many of
        // them are sealed on every CPU (the global rayon pool), a run per
        // task; a few go as one run here (handing them out costs more than
        // it saves).
        let pages: Vec<(usize, &[u8])> = dirty
            .iter()
            .copied()
            .zip(copies.chunks(s.page_size))
            .collect();
        let stage = |run: &[(usize, &[u8])]| {
            s.backing
                .stage_pages(run)
                .map_err(|source| AttachError::Stage {
                    base: s.base,
                    first: run[0].0,
                    pages: run.len(),
                    source,
                })
        };
        let staged = if pages.len() >= PARALLEL_STAGE {
            use rayon::prelude::*;
            pages
                .par_chunks(crate::object::parallel_run(pages.len()))
                .try_for_each(stage)
        } else if pages.is_empty() {
            Ok(())
        } else {
            stage(&pages)
        };
        if let Err(e) = staged {
            restore();
            return Err(e);
        }
        let commit_start = Instant::now();
        c.psync_stage_ns.fetch_add(
            (commit_start - stage_start).as_nanos() as u64,
            Ordering::Relaxed,
        );
        Ok(Some(PreparedPsync {
            _one: one,
            start,
            commit_start,
            dirty,
            copies,
            keep,
            cache,
        }))
    }

    /// psync after its commit: on success the DRAM cache and the pages
    /// kept writable take the committed contents; on failure the pages are
    /// marked dirty again, so a retry includes them.
    pub(crate) fn psync_finish(&self, p: PreparedPsync<'_>, committed: bool) -> PsyncStats {
        let s = &*self.shared;
        let c = &s.counters;
        let PreparedPsync {
            _one,
            start,
            commit_start,
            dirty,
            mut copies,
            keep,
            cache,
        } = p;
        c.psync_commit_ns
            .fetch_add(commit_start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if !committed {
            for &p in &dirty {
                s.dirty.set(p);
            }
            copies.fill(0);
            return PsyncStats::default();
        }
        // Committed: the DRAM cache now holds the new plaintext, exactly
        // what was staged.
        if let Some(cache) = cache {
            for (&p, buf) in dirty.iter().zip(copies.chunks(s.page_size)) {
                cache.update(p, buf);
            }
            cache.set_version(s.backing.cache_identity().version);
        }
        // The cache frames of the kept pages now equal what was staged, so
        // comparing with them at the next psync finds any later write.
        for &p in &keep {
            s.maybe_dirty.set(p);
        }
        c.pages_kept_writable
            .fetch_add(keep.len() as u64, Ordering::Relaxed);
        let buf = &mut copies;
        buf.fill(0);
        let ns = start.elapsed().as_nanos() as u64;
        c.psyncs.fetch_add(1, Ordering::Relaxed);
        c.pages_synced
            .fetch_add(dirty.len() as u64, Ordering::Relaxed);
        c.psync_ns.fetch_add(ns, Ordering::Relaxed);
        PsyncStats {
            pages: dirty.len() as u64,
            ns,
        }
    }

    /// psync (writable attachments), then unmap. The object can be attached
    /// again at the same address. If psync fails the object is still
    /// detached and keeps its state as of the last successful psync; call
    /// `psync` first to be able to retry. Returns the final counters.
    pub fn detach(mut self) -> Result<AttachStats, AttachError> {
        let synced = self.psync();
        self.shutdown();
        synced.map(|_| self.stats())
    }

    fn shutdown(&mut self) {
        let s = &self.shared;
        if self.handler.is_none() && self.workers.is_empty() && s.stop.load(Ordering::Acquire) {
            return;
        }
        s.stop.store(true, Ordering::Release);
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to our eventfd.
        unsafe { libc::write(s.stop_fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
        {
            let _q = s.queue.lock().unwrap_or_else(|e| e.into_inner());
            s.queue_cv.notify_all();
        }
        if let Some(h) = self.handler.take() {
            let _ = h.join();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        let len = self.len();
        // SAFETY: our mapping; `self` is going away, so no view of it lives.
        unsafe {
            libc::munmap(s.base as *mut libc::c_void, len);
        }
        attached()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&s.base);
    }
}

impl Drop for Attachment {
    /// Dropping without `detach` unmaps without psync: the object stays as
    /// at its last psync, as after a crash.
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment")
            .field("base", &format_args!("{:#x}", self.shared.base))
            .field("pages", &self.shared.pages)
            .field("perm", &self.shared.perm)
            .field("mode", &self.shared.mode)
            .finish()
    }
}
