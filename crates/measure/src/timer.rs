//! Per-request timing: the time-stamp counter on x86_64 (a few ns to read,
//! fine enough for 50 ns requests), a monotonic clock elsewhere.

use std::time::{Duration, Instant};

use serde::Serialize;

/// Read the timer: TSC ticks on x86_64, nanoseconds elsewhere.
#[inline(always)]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // `_rdtsc` has no preconditions; it is `unsafe` only on older
        // toolchains.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// CPU seconds the calling thread has run: what a benchmark on a shared
/// machine reports beside wall time (time spent descheduled is left out).
pub fn thread_cpu_seconds() -> f64 {
    clock_seconds(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU seconds the whole process has run, every thread included: the cost
/// of work spread over a thread pool.
pub fn process_cpu_seconds() -> f64 {
    clock_seconds(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// The seconds of a CPU-time clock.
fn clock_seconds(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct we pass; both CPU-time
    // clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// What the timer is and how to turn its ticks into time.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Clock {
    /// `rdtsc`, or `instant` for the fallback.
    pub source: &'static str,
    /// Ticks per nanosecond: the TSC frequency in GHz.
    pub ticks_per_ns: f64,
    /// Median ticks between two back-to-back reads, subtracted from every
    /// sample.
    pub overhead_ticks: u64,
}

impl Clock {
    /// Measure the timer against `Instant` and its own read overhead.
    pub fn calibrate() -> Clock {
        let source = if cfg!(target_arch = "x86_64") {
            "rdtsc"
        } else {
            "instant"
        };
        // Three 10 ms windows; the median shrugs off one preempted window.
        let mut rates: Vec<f64> = (0..3)
            .map(|_| rate_over(Duration::from_millis(10)))
            .collect();
        rates.sort_by(f64::total_cmp);
        Clock {
            source,
            ticks_per_ns: rates[1],
            overhead_ticks: read_overhead(),
        }
    }

    /// Nanoseconds for a tick count.
    pub fn ns(&self, ticks: f64) -> f64 {
        ticks / self.ticks_per_ns
    }
}

/// Ticks per ns over a busy-waited `window`.
fn rate_over(window: Duration) -> f64 {
    let start = Instant::now();
    let t0 = ticks();
    while start.elapsed() < window {
        std::hint::spin_loop();
    }
    let t1 = ticks();
    let ns = start.elapsed().as_nanos() as f64;
    (t1.wrapping_sub(t0)) as f64 / ns
}

/// Median of back-to-back reads: the cost a timed request pays for being
/// timed.
fn read_overhead() -> u64 {
    let mut gaps: Vec<u64> = (0..10_001)
        .map(|_| {
            let a = ticks();
            let b = ticks();
            b.wrapping_sub(a)
        })
        .collect();
    gaps.sort_unstable();
    gaps[gaps.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_gives_a_usable_clock() {
        let clock = Clock::calibrate();
        assert!(clock.ticks_per_ns.is_finite() && clock.ticks_per_ns > 0.0);
    }
}
