//! Truncation guard: a pool file shortened by another process while it is
//! mapped turns into an error naming the pool and offset, not a SIGBUS
//! that kills the process.
//!
//! A shared file mapping faults with SIGBUS on any access past the file's
//! current end. Checking the size before each access cannot prevent that
//! (the file can shrink between the check and the access), a read lease
//! only delays a truncation (by `lease-break-time`), and seals exist only
//! for memfd/shmem files created with them. So the fault itself is handled:
//!
//! - Every [`Medium`](crate::medium::Medium) registers its mapping's range
//!   here (a fixed table of atomics, readable from a signal handler).
//! - A process-wide `SA_SIGINFO` handler for SIGBUS with `BUS_ADRERR`
//!   (access past the end of a file; a media error on DAX memory is
//!   `BUS_MCEERR_*` and is not taken for a truncation) looks the faulting
//!   address up. Inside a registered range it maps anonymous zero pages
//!   over the rest of that mapping (`MAP_FIXED`, from the faulting page to
//!   the end: past the file's end every page faults alike), records the
//!   lowest faulting offset in the range's slot and returns; the access is
//!   retried and completes on the zero page. Anywhere else the signal is
//!   passed on to the handler that was installed before (or the default
//!   action is restored, so the retried access dies as it would have).
//! - The medium checks the slot at every `drain` (so no directory record
//!   and no state-store update follows a write that went to a zero page),
//!   and the pool checks it before returning from every operation that
//!   read or wrote the mapping: a recorded fault replaces the operation's
//!   result, whatever it computed from the zeros, with
//!   [`PmoError::TruncatedWhileOpen`](crate::PmoError::TruncatedWhileOpen).
//!   From then on the medium stays refused: the mapping no longer shows the
//!   file.
//!
//! Only the mapping is patched, never the file: stores that land on the
//! zero pages are lost, which is what a truncated file would do to them
//! anyway, and no commit is published after them (the drain check).
//!
//! Limits: a program that installs its own SIGBUS handler after the pool is
//! opened, without chaining to the one it replaced, takes the fault itself.
//! At most [`SLOTS`] pool mappings can be open at once in a process.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

/// Pool mappings that can be guarded at once.
pub(crate) const SLOTS: usize = 256;

/// No fault recorded.
const NONE: u64 = u64::MAX;

struct Slot {
    claimed: AtomicBool,
    start: AtomicUsize,
    end: AtomicUsize,
    fault: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    claimed: AtomicBool::new(false),
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
    fault: AtomicU64::new(NONE),
};

static REGISTRY: [Slot; SLOTS] = [EMPTY; SLOTS];

/// The handler in place before ours, stored before ours is installed.
static mut PREVIOUS: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();
static INSTALL: Once = Once::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(4096);

/// A registered range; unregistered on drop (before the mapping goes).
pub(crate) struct Guard {
    slot: usize,
}

/// Why a range cannot be guarded.
#[derive(Debug)]
pub(crate) enum GuardError {
    /// Every slot is taken.
    Full,
    /// `sigaction` failed.
    Install(std::io::Error),
}

impl std::fmt::Display for GuardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GuardError::Full => write!(
                f,
                "{SLOTS} pool mappings are already guarded in this process (close a pool first)"
            ),
            GuardError::Install(e) => write!(f, "installing the SIGBUS handler: {e}"),
        }
    }
}

fn install() -> Result<(), GuardError> {
    let mut err = None;
    INSTALL.call_once(|| {
        // SAFETY: sigaction with valid pointers; PREVIOUS is written here,
        // once, before our handler (its only other reader) can run.
        unsafe {
            let ps = libc::sysconf(libc::_SC_PAGESIZE);
            if ps > 0 {
                PAGE_SIZE.store(ps as usize, Ordering::Relaxed);
            }
            let prev = &raw mut PREVIOUS;
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), (*prev).as_mut_ptr()) != 0 {
                err = Some(GuardError::Install(std::io::Error::last_os_error()));
                return;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            if libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut()) != 0 {
                err = Some(GuardError::Install(std::io::Error::last_os_error()));
                return;
            }
            INSTALLED.store(true, Ordering::Release);
        }
    });
    match err {
        Some(e) => Err(e),
        None if INSTALLED.load(Ordering::Acquire) => Ok(()),
        None => Err(GuardError::Install(std::io::Error::other(
            "an earlier attempt failed",
        ))),
    }
}

/// Guard `[start, start + len)`, a mapping of a pool file.
pub(crate) fn register(start: usize, len: usize) -> Result<Guard, GuardError> {
    install()?;
    for (i, s) in REGISTRY.iter().enumerate() {
        if s.claimed
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            s.fault.store(NONE, Ordering::Release);
            s.end.store(start + len, Ordering::Release);
            s.start.store(start, Ordering::Release);
            return Ok(Guard { slot: i });
        }
    }
    Err(GuardError::Full)
}

impl Guard {
    /// The lowest offset into the range at which an access faulted, if any.
    pub(crate) fn fault_offset(&self) -> Option<u64> {
        let f = REGISTRY[self.slot].fault.load(Ordering::Acquire);
        (f != NONE).then_some(f)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let s = &REGISTRY[self.slot];
        s.start.store(0, Ordering::Release);
        s.end.store(0, Ordering::Release);
        s.claimed.store(false, Ordering::Release);
    }
}

/// The SIGBUS handler. Async-signal-safe: atomics, `mmap` and `sigaction`
/// (plain system calls), and a call of the previous handler.
extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler;
    // errno is thread-local and restored before returning.
    unsafe {
        let errno = *libc::__errno_location();
        // Only "nonexistent physical address" (past the end of the file) is
        // ours; a media error on a DAX pool (BUS_MCEERR_AR/AO) and anything
        // else go on as before.
        if (*info).si_code != libc::BUS_ADRERR {
            pass_on(sig, info, ctx);
            return;
        }
        let addr = (*info).si_addr() as usize;
        let page = PAGE_SIZE.load(Ordering::Relaxed);
        for s in REGISTRY.iter() {
            let start = s.start.load(Ordering::Acquire);
            if start == 0 || addr < start {
                continue;
            }
            let end = s.end.load(Ordering::Acquire);
            if addr >= end {
                continue;
            }
            let from = addr & !(page - 1);
            let p = libc::mmap(
                from as *mut libc::c_void,
                end - from,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                break; // cannot patch: the signal takes its course
            }
            s.fault.fetch_min((addr - start) as u64, Ordering::AcqRel);
            *libc::__errno_location() = errno;
            return;
        }
        *libc::__errno_location() = errno;
        pass_on(sig, info, ctx);
    }
}

/// Hand the signal to the handler installed before ours; with none (or an
/// ignored SIGBUS, which a fault cannot honour) restore the default action,
/// so the retried access ends the process as it would have without us.
unsafe fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = &raw const PREVIOUS;
    let prev = (*prev).assume_init_ref();
    let h = prev.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            std::mem::transmute(h);
        f(sig, info, ctx);
    } else {
        let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
        f(sig);
    }
}
