//! A lock for user-space benchmarks and replay (`std` feature).

use core::sync::atomic::{AtomicBool, Ordering};

/// A test-and-test-and-set spin lock that yields the CPU after a short
/// spin, for [`lock_api`].
///
/// Why not a sleeping mutex: an uncontended `parking_lot` lock and unlock
/// costs two locked instructions (its unlock must look for parked
/// waiters), about 25 ns on a 2 GHz Xeon, more than a whole iBuddy
/// operation. Here acquiring is one compare-and-swap and releasing is a
/// plain store. Why not a pure spin lock: with more threads than cores (the
/// benchmark runs 32 threads on 2), a waiter would spin through the time
/// slice of a descheduled holder; after `SPINS` failed looks this lock
/// calls `std::thread::yield_now` so the holder can run.
pub struct SpinYield {
    locked: AtomicBool,
}

const SPINS: u32 = 64;

unsafe impl lock_api::RawMutex for SpinYield {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: SpinYield = SpinYield {
        locked: AtomicBool::new(false),
    };

    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        if !self.try_lock() {
            self.lock_contended();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }
}

impl SpinYield {
    #[cold]
    fn lock_contended(&self) {
        loop {
            for _ in 0..SPINS {
                // Read until it looks free before trying again, so waiters
                // do not bounce the cache line between cores.
                if !self.locked.load(Ordering::Relaxed) && self.try_lock_now() {
                    return;
                }
                core::hint::spin_loop();
            }
            std::thread::yield_now();
        }
    }

    #[inline]
    fn try_lock_now(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::SpinYield;

    #[test]
    fn excludes_under_contention() {
        let counter = lock_api::Mutex::<SpinYield, u64>::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..20_000 {
                        *counter.lock() += 1;
                    }
                });
            }
        });
        assert_eq!(*counter.lock(), 160_000);
    }
}
