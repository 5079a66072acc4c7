//! The medium under a pool: the pool file mapped shared, and how a store is
//! made durable on it.
//!
//! - **Persistent memory** (a file on a DAX file system, or on tmpfs such as
//!   `/dev/shm`, which stands for emulated pmem as PMDK's
//!   `PMEM_IS_PMEM_FORCE` does): a store is durable once its cache lines are
//!   written back (`clwb`, else `clflushopt`, else `clflush`) and an `sfence`
//!   orders the write-backs before whatever follows.
//! - **Any other file**: the kernel's page cache stands between us and the
//!   disk, so written ranges are remembered and `msync(MS_SYNC)`ed at the
//!   next drain.
//!
//! Ordering invariant the pool relies on: everything persisted before a
//! `drain` is durable before anything stored after it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::MmapRaw;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::{PmoError, Result};

/// How stores are made durable.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Durability {
    /// Cache-line write-back and a fence (DAX, or tmpfs as emulated pmem).
    CacheLineFlush,
    /// `msync(MS_SYNC)` of the written ranges (a file on a block device).
    Msync,
}

/// The cache-line write-back instruction in use.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum FlushInsn {
    Clwb,
    Clflushopt,
    Clflush,
}

/// `TMPFS_MAGIC` from `linux/magic.h`.
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// Which durability a pool file gets: cache-line flushes on tmpfs and on a
/// file system mounted with `dax`, `msync` elsewhere.
pub fn detect_durability(path: &Path, file: &File) -> Durability {
    use std::os::fd::AsRawFd;
    // SAFETY: fstatfs writes into the struct we pass; the fd is open.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } == 0 && st.f_type as i64 == TMPFS_MAGIC {
        return Durability::CacheLineFlush;
    }
    if on_dax_mount(path) {
        Durability::CacheLineFlush
    } else {
        Durability::Msync
    }
}

/// Whether `path` lies on a mount whose options include `dax`.
fn on_dax_mount(path: &Path) -> bool {
    let Ok(abs) = path.canonicalize() else {
        return false;
    };
    let Ok(mounts) = std::fs::read_to_string("/proc/mounts") else {
        return false;
    };
    // The longest mount point that prefixes the path is the one it is on.
    let mut best: Option<(usize, bool)> = None;
    for line in mounts.lines() {
        let mut f = line.split_whitespace();
        let (Some(_dev), Some(mnt), Some(_fs), Some(opts)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if abs.starts_with(mnt) && best.is_none_or(|(len, _)| mnt.len() >= len) {
            let dax = opts.split(',').any(|o| o == "dax" || o == "dax=always");
            best = Some((mnt.len(), dax));
        }
    }
    best.is_some_and(|(_, dax)| dax)
}

fn flush_insn() -> FlushInsn {
    // CPUID leaf 7, EBX bit 24 = CLWB, bit 23 = CLFLUSHOPT.
    #[cfg(target_arch = "x86_64")]
    {
        let leaf0 = core::arch::x86_64::__cpuid(0);
        if leaf0.eax >= 7 {
            let l7 = core::arch::x86_64::__cpuid_count(7, 0);
            if l7.ebx & (1 << 24) != 0 {
                return FlushInsn::Clwb;
            }
            if l7.ebx & (1 << 23) != 0 {
                return FlushInsn::Clflushopt;
            }
        }
    }
    FlushInsn::Clflush
}

/// Fault injection for crash tests: after this many persisted ranges, or
/// at a named step of a commit, the process kills itself with SIGKILL, as
/// a power cut would stop it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashPoint {
    /// Die at the `n`-th call to `persist` (1-based); 0 = never.
    pub after_persists: u64,
    /// Die when a commit reaches this step (`None`: never).
    pub at: Option<CrashStep>,
}

/// A named step of a group commit (`Pool::psync_many`), for crash tests
/// that must stop exactly there. Every step is reached with what it names
/// durable (after the drain that follows it), except `Flipped`: the flips
/// share their drains (see `PoolInner::write_records_locked`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CrashStep {
    /// The group commit record's body is written, its group word not yet:
    /// the record is incomplete, nothing is committed.
    GroupBodyWritten,
    /// The group commit record is durable (the commit point); no slot
    /// record has flipped.
    GroupDurable,
    /// The `k`-th slot record (1-based, in slot order) has flipped: its
    /// last step (the sequence word) is stored and written back; the
    /// drain ordering the flips follows the last one.
    Flipped(usize),
    /// Every slot record has flipped; the group record is not retired.
    BeforeRetire,
    /// The group record is retired; the state store is not updated yet.
    Retired,
}

/// A medium's persist count and crash point, for a thread that does not
/// hold the medium ([`Medium::crash_hook_handle`]).
#[derive(Clone)]
pub(crate) struct CrashHook {
    persists: std::sync::Arc<AtomicU64>,
    after_persists: u64,
}

impl CrashHook {
    /// Count one persist; kill the process at the configured one.
    pub(crate) fn fire(&self) {
        count_persist(&self.persists, self.after_persists);
    }
}

/// Crash injection's one rule: count a persist in `persists`, and kill
/// the process at the `after_persists`-th (0: never, and nothing counted).
#[inline]
fn count_persist(persists: &AtomicU64, after_persists: u64) {
    if after_persists != 0 {
        let n = persists.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= after_persists {
            // SAFETY: plain syscalls; the process dies here.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
}

/// The mapped pool file.
pub(crate) struct Medium {
    /// Turns a fault past the file's end into a recorded offset
    /// ([`crate::sigbus`]). The first field, so it is dropped first: the
    /// range is unregistered before `map` unmaps it.
    guard: crate::sigbus::Guard,
    pub path: PathBuf,
    map: MmapRaw,
    len: usize,
    pub durability: Durability,
    insn: FlushInsn,
    /// Ranges written since the last drain (msync media only).
    pending: Mutex<Vec<(usize, usize)>>,
    /// Persists so far, shared with the state store's committer thread
    /// ([`CrashHook`]), so its steps count towards `crash` too.
    persists: std::sync::Arc<AtomicU64>,
    crash: CrashPoint,
    /// The file, for its size when a truncation is found.
    file: File,
}

// SAFETY: the mapping is shared memory; every access goes through raw
// pointers with the pool's own locking deciding who writes which frame.
unsafe impl Send for Medium {}
unsafe impl Sync for Medium {}

const LINE: usize = 64;

impl Medium {
    pub fn map(path: &Path, file: &File, len: usize, crash: CrashPoint) -> Result<Medium> {
        let durability = detect_durability(path, file);
        let mut opts = memmap2::MmapOptions::new();
        opts.len(len);
        if durability == Durability::CacheLineFlush {
            // Persistent memory is memory: fault the whole pool in now
            // (MAP_POPULATE) rather than on first store to each frame,
            // as a DAX mapping of real pmem would behave.
            opts.populate();
        }
        let map = opts.map_raw(file).map_err(|source| PmoError::Io {
            op: "mapping",
            path: path.to_owned(),
            source,
        })?;
        let guard =
            crate::sigbus::register(map.as_ptr() as usize, len).map_err(|e| PmoError::Io {
                op: "guarding the mapping of",
                path: path.to_owned(),
                source: std::io::Error::other(e.to_string()),
            })?;
        let file = file.try_clone().map_err(|source| PmoError::Io {
            op: "duplicating the descriptor of",
            path: path.to_owned(),
            source,
        })?;
        Ok(Medium {
            path: path.to_owned(),
            map,
            file,
            guard,
            len,
            durability,
            insn: flush_insn(),
            pending: Mutex::new(Vec::new()),
            persists: std::sync::Arc::new(AtomicU64::new(0)),
            crash,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The error to report if the file was truncated under the mapping
    /// (an access faulted past its end; see [`crate::sigbus`]).
    pub fn truncation(&self) -> Option<PmoError> {
        let offset = self.guard.fault_offset()?;
        use std::os::fd::AsRawFd;
        // SAFETY: fstat writes into the struct we pass; the fd is open.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let size = if unsafe { libc::fstat(self.file.as_raw_fd(), &mut st) } == 0 {
            Some(st.st_size as u64)
        } else {
            None
        };
        Some(PmoError::TruncatedWhileOpen {
            path: self.path.clone(),
            offset,
            size,
            expected: self.len as u64,
        })
    }

    /// `result`, unless the file was truncated under the mapping meanwhile:
    /// then whatever was computed (from zero pages) gives way to the
    /// truncation error.
    pub fn guarded<T>(&self, result: Result<T>) -> Result<T> {
        match self.truncation() {
            Some(e) => Err(e),
            None => result,
        }
    }

    /// The bytes at `off..off+len`. The caller makes sure nobody writes
    /// them meanwhile (committed frames are never written in place).
    pub fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.len, "medium read out of range");
        // SAFETY: in range of the live mapping; see the caller's contract.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(off), len) }
    }

    /// Mutable bytes at `off..off+len`. The caller owns them exclusively
    /// (a frame it allocated and has not published, or a directory record
    /// under the directory lock).
    #[allow(clippy::mut_from_ref)]
    pub fn slice_mut(&self, off: usize, len: usize) -> &mut [u8] {
        assert!(off + len <= self.len, "medium write out of range");
        // SAFETY: as above; exclusive by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(off), len) }
    }

    /// Store `src` at `off` and write it back: on persistent memory with
    /// non-temporal stores (they bypass the cache, so no line needs
    /// flushing; the next `drain`'s fence orders them), as PMDK's
    /// `pmem_memcpy` does for large copies; elsewhere a plain copy and a
    /// range for the next msync. The caller owns the bytes (see
    /// `slice_mut`). Counts as one persist for crash injection.
    pub fn write_persist(&self, off: usize, src: &[u8]) {
        #[cfg(target_arch = "x86_64")]
        if self.durability == Durability::CacheLineFlush
            && off.is_multiple_of(16)
            && src.len().is_multiple_of(64)
        {
            self.crash_hook();
            use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
            let dst = self.slice_mut(off, src.len()).as_mut_ptr() as *mut __m128i;
            let s = src.as_ptr() as *const __m128i;
            // SAFETY: dst is 16-byte aligned and in our mapping (checked by
            // slice_mut); src is read unaligned; both are src.len() bytes.
            unsafe {
                for i in 0..src.len() / 16 {
                    _mm_stream_si128(dst.add(i), _mm_loadu_si128(s.add(i)));
                }
            }
            return;
        }
        self.slice_mut(off, src.len()).copy_from_slice(src);
        self.persist(off, src.len());
    }

    /// Crash injection: counts one persist, kills the process at the
    /// configured one. Also called between the state store's steps.
    pub(crate) fn crash_hook(&self) {
        // On every persist: no handle (an `Arc` clone) made for it.
        count_persist(&self.persists, self.crash.after_persists);
    }

    /// [`Medium::crash_hook`] for another thread (the state store's
    /// committer): the same count and crash point.
    pub(crate) fn crash_hook_handle(&self) -> CrashHook {
        CrashHook {
            persists: self.persists.clone(),
            after_persists: self.crash.after_persists,
        }
    }

    /// Crash injection at a named step (see [`CrashStep`]).
    pub(crate) fn crash_at(&self, step: CrashStep) {
        if self.crash.at == Some(step) {
            // SAFETY: plain syscalls; the process dies here.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }

    /// Write back `off..off+len` (pmem: cache-line flushes now; file:
    /// remember the range for the next drain). Not ordered until `drain`.
    pub fn persist(&self, off: usize, len: usize) {
        self.crash_hook();
        if len == 0 {
            return;
        }
        match self.durability {
            Durability::CacheLineFlush => self.flush_lines(off, len),
            Durability::Msync => self.pending.lock().push((off, len)),
        }
    }

    /// Order: everything persisted so far is durable before any later store.
    pub fn drain(&self) -> Result<()> {
        // Nothing is ordered after a store that went to a zero page.
        if let Some(e) = self.truncation() {
            return Err(e);
        }
        let r = self.drain_inner();
        self.guarded(r)
    }

    fn drain_inner(&self) -> Result<()> {
        match self.durability {
            Durability::CacheLineFlush => {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: sfence has no preconditions.
                unsafe {
                    core::arch::x86_64::_mm_sfence()
                };
                Ok(())
            }
            Durability::Msync => {
                let mut ranges = std::mem::take(&mut *self.pending.lock());
                ranges.sort_unstable();
                let page = 4096;
                let mut merged: Vec<(usize, usize)> = Vec::new();
                for (off, len) in ranges {
                    let start = off / page * page;
                    let end = (off + len).div_ceil(page) * page;
                    match merged.last_mut() {
                        Some(last) if start <= last.1 => last.1 = last.1.max(end),
                        _ => merged.push((start, end)),
                    }
                }
                for (start, end) in merged {
                    // SAFETY: a page-aligned range inside our live mapping.
                    let rc = unsafe {
                        libc::msync(
                            self.map.as_mut_ptr().add(start).cast(),
                            end.min(self.len) - start,
                            libc::MS_SYNC,
                        )
                    };
                    if rc != 0 {
                        return Err(PmoError::Io {
                            op: "msync",
                            path: self.path.clone(),
                            source: std::io::Error::last_os_error(),
                        });
                    }
                }
                Ok(())
            }
        }
    }

    fn flush_lines(&self, off: usize, len: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let base = self.map.as_ptr() as usize;
            let mut p = (base + off) & !(LINE - 1);
            let end = base + off + len;
            // SAFETY: every address lies inside our mapping; the flush
            // instructions only write back cache lines.
            unsafe {
                match self.insn {
                    FlushInsn::Clwb => {
                        while p < end {
                            std::arch::asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags));
                            p += LINE;
                        }
                    }
                    FlushInsn::Clflushopt => {
                        while p < end {
                            std::arch::asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags));
                            p += LINE;
                        }
                    }
                    FlushInsn::Clflush => {
                        while p < end {
                            core::arch::x86_64::_mm_clflush(p as *const u8);
                            p += LINE;
                        }
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // Elsewhere: fall back to msync of the range at once.
            let _ = (off, len);
            self.pending.lock().push((off, len));
        }
    }
}
