//! Seed 004's synthetic latency benchmark (Table 5): successive
//! single-page (user) requests on a fresh allocator, each timed with the
//! time-stamp counter ([`nvmos_measure::timer`]).
//!
//! The figures are timings of this machine: they differ run to run (the
//! rest of the study is deterministic). Each run repeats the same
//! requests on a fresh allocator `rounds` times; the allocators are
//! deterministic, so request i does the same work every round and its
//! fastest round strips the preemption and interrupts of a shared VM
//! (`worst_ns`), which the raw maximum (`raw_max_ns`) keeps.

use nvmos_frames::sync::SpinYield;
use nvmos_frames::{MigrateType, Order, Pfn, Request, Zone};
use nvmos_measure::stats::percentile;
use nvmos_measure::timer::{ticks, Clock};
use serde::{Deserialize, Serialize};

use super::PowerStudyError;
use crate::allocators::{AllocatorKind, Setup};
use crate::units::format_frames;

/// The most page requests one run may make (4 GiB of frames).
pub const MAX_LATENCY_PAGES: u64 = 1 << 30;

/// What the latency benchmark runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyOptions {
    /// Successive page requests of each run (seed 004: 10^4 … 4×10^6).
    pub pages: Vec<u64>,
    /// Frames of the benchmark's machine (one zone from pfn 0).
    pub frames: u64,
    /// Rounds of each run: the same requests on a fresh allocator.
    pub rounds: u32,
}

impl Default for LatencyOptions {
    /// The seed's: 10^4 to 4×10^6 pages on 32 GiB, 3 rounds.
    fn default() -> Self {
        LatencyOptions {
            pages: vec![10_000, 100_000, 1_000_000, 2_000_000, 4_000_000],
            frames: 8 << 20,
            rounds: 3,
        }
    }
}

impl LatencyOptions {
    /// `--quick`: up to 10^5 pages on 1 GiB.
    pub fn quick() -> Self {
        LatencyOptions {
            pages: vec![10_000, 100_000],
            frames: 1 << 18,
            ..LatencyOptions::default()
        }
    }

    /// Refuse what cannot run, naming the option.
    pub fn validate(&self) -> Result<(), PowerStudyError> {
        let bad = |m: String| Err(PowerStudyError::Options(m));
        if self.rounds == 0 {
            return bad("latency.rounds: at least one round".into());
        }
        if self.pages.is_empty() {
            return bad("latency.pages: give at least one count of page requests".into());
        }
        if let Some(p) = self
            .pages
            .iter()
            .find(|&&p| p == 0 || p > MAX_LATENCY_PAGES)
        {
            return bad(format!(
                "latency.pages: {p}: each count of page requests must be in 1..={MAX_LATENCY_PAGES}"
            ));
        }
        if let Some(p) = self.pages.iter().find(|&&p| p > self.frames) {
            return bad(format!(
                "latency benchmark: {p} pages do not fit in {} (give a larger latency memory)",
                format_frames(self.frames)
            ));
        }
        Ok(())
    }
}

/// One allocator in the latency benchmark at one request count.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyRow {
    /// Allocator.
    pub allocator: String,
    /// The registry allocator.
    pub kind: AllocatorKind,
    /// Successive page requests.
    pub pages: u64,
    /// Mean ns per allocation, each request at its fastest over the rounds.
    pub mean_ns: f64,
    /// Mean ns per allocation of the first round, as measured.
    pub raw_mean_ns: f64,
    /// 99th percentile (fastest over rounds), ns.
    pub p99_ns: f64,
    /// 99.9th percentile.
    pub p999_ns: f64,
    /// 99.99th percentile.
    pub p9999_ns: f64,
    /// Slowest request in any round, ns, preemption and interrupts included.
    pub raw_max_ns: f64,
    /// Slowest request after taking each request's fastest time over the
    /// rounds (the allocator is deterministic: request i does the same
    /// work every round, so the minimum strips the VM's noise).
    pub worst_ns: f64,
    /// The untimed warm-up request on a fresh allocator (every structure
    /// cold), fastest over the rounds, ns.
    pub first_ns: f64,
    /// `raw_max_ns / raw_mean_ns`.
    pub raw_max_over_mean: f64,
    /// `worst_ns / mean_ns`.
    pub worst_over_mean: f64,
}

/// The latency benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyResult {
    /// Frames of the machine.
    pub frames: u64,
    /// Frames per bank.
    pub bank_frames: u64,
    /// Rounds per run.
    pub rounds: u32,
    /// The timer.
    pub clock: Clock,
    /// Rows by request count, then allocator.
    pub rows: Vec<LatencyRow>,
}

/// Run `pages` successive single-page requests through `kind` on a fresh
/// allocator of `options.frames` frames in banks of `bank_frames`,
/// `options.rounds` times.
pub(super) fn run_one(
    kind: AllocatorKind,
    pages: u64,
    options: &LatencyOptions,
    bank_frames: u64,
    clock: &Clock,
) -> Result<LatencyRow, PowerStudyError> {
    let n = pages as usize;
    let zone = [Zone::new(0, options.frames)];
    let mut first: Vec<u64> = Vec::new();
    let mut best: Vec<u64> = vec![u64::MAX; n];
    let mut raw_max = 0u64;
    let mut first_call = u64::MAX;
    let name = kind.name();
    let oom = |allocated: usize| PowerStudyError::LatencyOutOfMemory {
        allocator: name,
        allocated: allocated as u64,
        pages,
    };
    let refused = |pfn: Pfn, error| PowerStudyError::Allocator {
        allocator: name,
        pfn,
        order: Order::ZERO,
        error,
    };
    for round in 0..options.rounds {
        let setup = Setup {
            bank_frames,
            ..Setup::new(&zone, 1)
        };
        let built = kind
            .build::<SpinYield>(&setup)
            .map_err(|source| PowerStudyError::Layout {
                frames: options.frames,
                bank_frames,
                source,
            })?;
        let alloc = &*built;
        let mut held: Vec<Pfn> = Vec::with_capacity(n);
        let mut samples: Vec<u64> = Vec::with_capacity(n);
        let req = Request::new(Order::ZERO, 0, MigrateType::Movable);
        // One untimed request first: the very first call on a freshly
        // built allocator misses the cache on every structure it touches,
        // which no allocator in a running system does (it is reported as
        // `first_ns`).
        let t0 = ticks();
        let warm = alloc.alloc(req).map_err(|_| oom(0))?;
        let t1 = ticks();
        first_call = first_call.min(t1.wrapping_sub(t0));
        alloc.free(warm, req).map_err(|e| refused(warm, e))?;
        for _ in 0..n {
            let t0 = ticks();
            let got = alloc.alloc(req);
            let t1 = ticks();
            let pfn = got.map_err(|_| oom(held.len()))?;
            held.push(std::hint::black_box(pfn));
            samples.push(t1.wrapping_sub(t0).saturating_sub(clock.overhead_ticks));
        }
        for (b, &s) in best.iter_mut().zip(&samples) {
            *b = (*b).min(s);
        }
        raw_max = raw_max.max(samples.iter().copied().max().unwrap_or(0));
        for pfn in held {
            alloc.free(pfn, req).map_err(|e| refused(pfn, e))?;
        }
        if round == 0 {
            first = samples;
        }
    }
    let mean = |v: &[u64]| v.iter().map(|&s| s as f64).sum::<f64>() / n.max(1) as f64;
    let ns = |t: f64| clock.ns(t);
    let raw_mean_ns = ns(mean(&first));
    let mean_ns = ns(mean(&best));
    best.sort_unstable();
    let worst = best.last().copied().unwrap_or(0);
    Ok(LatencyRow {
        allocator: name.to_owned(),
        kind,
        pages,
        mean_ns,
        raw_mean_ns,
        p99_ns: ns(percentile(&best, 99.0) as f64),
        p999_ns: ns(percentile(&best, 99.9) as f64),
        p9999_ns: ns(percentile(&best, 99.99) as f64),
        raw_max_ns: ns(raw_max as f64),
        worst_ns: ns(worst as f64),
        raw_max_over_mean: ns(raw_max as f64) / raw_mean_ns,
        first_ns: ns(first_call as f64),
        worst_over_mean: ns(worst as f64) / mean_ns,
    })
}
