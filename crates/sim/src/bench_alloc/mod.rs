//! `bench alloc`: seed 000's Table 2 on this machine, as a study.
//!
//! Every cell (allocator, pattern, thread count) builds a fresh allocator
//! for `threads` CPUs, runs the pattern with one thread per CPU (thread t
//! names CPU t), and checks the allocator afterwards. Each round runs the
//! pattern twice on fresh allocators: once timing every request with the
//! TSC (the distribution: mean, sd, percentiles), once untimed (the
//! amortized ns per request, the figure comparable to LLFree's).
//!
//! The rows are the registry's allocators ([`crate::AllocatorKind`]) and a
//! peer that is not an nvmos allocator (`bsa`, through [`BenchTarget`]).
//! The registry's capability flags decide what each runs: an allocator
//! built for single frames ([`crate::Caps::single_frame`], M³) is not
//! timed on `mixed` (orders up to 9 cost it O(2^order)); its cell is
//! listed in [`BenchAlloc::skipped`] with the reason, never left out
//! silently. The seed's comparison rows (`(c-e)/c`, `c/f`) and its two
//! claims (lazy iBuddy 32% faster than lazy buddy; sd 1400 → 400 cycles)
//! are data in the result ([`Comparison`], [`Check`]).
//!
//! ```no_run
//! use nvmos_sim::bench_alloc::{self, BenchAllocOptions};
//! use nvmos_sim::study::{Scale, Study};
//!
//! let mut options = bench_alloc::BenchAlloc::options(Scale::Quick);
//! options.threads = vec![1, 2];
//! let result = bench_alloc::run(&options, &mut |_| {})?;
//! for check in &result.checks {
//!     println!("{}: {:.2} {} (met: {})", check.what, check.measured, check.unit, check.met);
//! }
//! # Ok::<(), nvmos_sim::bench_alloc::BenchAllocError>(())
//! ```

mod target;

use std::fmt;
use std::str::FromStr;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use nvmos_frames::{AllocError, FreeOrder, Order, ValidationError, MAX_CPUS};
use nvmos_measure::stats::{median_index, summarize, Summary};
use nvmos_measure::timer::{ticks, Clock};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::study::{Bound, Check, Progress, Scale, Study};
use crate::AllocatorKind;
pub use target::{BenchAllocator, BenchTarget, Bsa, LockKind, TargetJob};

/// Seed 000's "performance improvement ratio (baseline: lazy buddy)" of
/// lazy iBuddy: 32% (Table 2's `(c-e)/c`, average of six benchmarks).
pub const SEED_LIS1_GAIN_PCT: f64 = 32.0;
/// Seed 000's standard deviations: lazy buddy 1400 cycles, lazy iBuddy
/// 400 cycles, a ratio of 3.5.
pub const SEED_SD_RATIO: f64 = 1400.0 / 400.0;

/// Why the benchmark could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum BenchAllocError {
    /// The options cannot run; the message names the field.
    #[error("{0}")]
    Options(String),
    /// The registry refused to build an allocator.
    #[error("building {allocator} over {frames} frames for {cpus} cpus")]
    Build {
        allocator: &'static str,
        frames: u64,
        cpus: u32,
        #[source]
        source: nvmos_frames::ConfigError,
    },
    /// An allocator refused requests it should have served.
    #[error("{cell}: the allocator refused {refused} requests it should have served; the first: {first}")]
    Refused {
        cell: String,
        refused: u64,
        first: AllocError,
    },
    /// An allocator's invariants did not hold after a pattern.
    #[error("{cell}: validation after the pattern")]
    Invalid {
        cell: String,
        #[source]
        source: ValidationError,
    },
    /// Frames were still allocated after every block was freed.
    #[error("{cell}: {held} frames still allocated after every block was freed")]
    Leaked { cell: String, held: u64 },
    /// A benchmark thread panicked.
    #[error("{cell}: a benchmark thread panicked")]
    Panicked { cell: String },
}

/// What to run. Serialised with every field; missing fields take the
/// full-scale defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BenchAllocOptions {
    /// Memory managed, in 4 KiB frames, as one zone from pfn 0.
    pub frames: u64,
    /// Rows.
    pub allocators: Vec<BenchAllocator>,
    /// Columns: thread counts, each also the allocator's CPU count.
    pub threads: Vec<u32>,
    /// Access patterns.
    pub patterns: Vec<Pattern>,
    /// Rounds per cell; the round with the median mean is kept.
    pub rounds: u32,
    /// `repeat`: alloc/free pairs per thread.
    pub repeat: u64,
    /// `mixed`: operations per thread.
    pub mixed_ops: u64,
    /// Seed of every random choice (`rand` shuffle, `mixed` decisions).
    pub seed: u64,
    /// The lock every allocator is built with.
    pub lock: LockKind,
    /// The order iBuddy (alone and under the lazy layers) applies frees
    /// buffered on different CPUs in: `accepted`, the default and what
    /// replay uses, or `per-cpu` (no write shared by CPUs on a free).
    pub free_order: FreeOrder,
}

impl Default for BenchAllocOptions {
    /// The full run: 4 GiB, every registry allocator and the peer, 1 to 32
    /// threads, every pattern, 3 rounds of 200 000 operations.
    fn default() -> Self {
        BenchAllocOptions {
            frames: 4 << 18,
            allocators: BenchAllocator::all(),
            threads: vec![1, 2, 4, 8, 16, 32],
            patterns: Pattern::ALL.to_vec(),
            rounds: 3,
            repeat: 200_000,
            mixed_ops: 200_000,
            seed: 42,
            lock: LockKind::Spin,
            free_order: FreeOrder::Accepted,
        }
    }
}

impl BenchAllocOptions {
    /// The options at `scale`: `Quick` is 1 GiB, one round, 20 000
    /// `repeat` and `mixed` operations per thread.
    pub fn at(scale: Scale) -> Self {
        match scale {
            Scale::Full => Self::default(),
            Scale::Quick => BenchAllocOptions {
                frames: 1 << 18,
                rounds: 1,
                repeat: 20_000,
                mixed_ops: 20_000,
                ..Self::default()
            },
        }
    }

    /// Refuse options that cannot run, naming the bad value.
    pub fn check(&self) -> Result<(), BenchAllocError> {
        let fail = |m: String| Err(BenchAllocError::Options(m));
        if self.allocators.is_empty() {
            return fail("allocators: no allocator selected".into());
        }
        if self.threads.is_empty() {
            return fail("threads: no thread count given".into());
        }
        if self.patterns.is_empty() {
            return fail("patterns: no pattern selected".into());
        }
        if self.rounds < 1 {
            return fail(format!("rounds: {} must be at least 1", self.rounds));
        }
        if self.repeat < 1 || self.mixed_ops < 1 {
            return fail("repeat, mixed_ops: at least one operation per thread".into());
        }
        for &threads in &self.threads {
            if !(1..=MAX_CPUS).contains(&threads) {
                return fail(format!(
                    "threads: thread count {threads} is out of range 1..={MAX_CPUS}"
                ));
            }
            if self.frames / 2 / u64::from(threads) < 1 {
                return fail(format!(
                    "memory of {} frames is too small for {threads} threads: each needs at least 2 frames",
                    self.frames
                ));
            }
        }
        Ok(())
    }

    /// The rows, thread counts and patterns with repeats removed (first
    /// kept, order kept).
    fn deduplicated(&self) -> BenchAllocOptions {
        let mut o = self.clone();
        dedup_in_order(&mut o.allocators);
        dedup_in_order(&mut o.threads);
        dedup_in_order(&mut o.patterns);
        o
    }

    /// Whether `allocator` is timed on `pattern`, and why not.
    pub fn skip_reason(allocator: BenchAllocator, pattern: Pattern) -> Option<&'static str> {
        (pattern == Pattern::Mixed && allocator.caps().single_frame).then_some(
            "built for single frames (registry caps.single_frame): mixed orders up to 9 cost it O(2^order) per request",
        )
    }

    /// Rounds to run in all: the length of a progress bar.
    pub fn steps(&self) -> u64 {
        let o = self.deduplicated();
        let cells = o
            .patterns
            .iter()
            .flat_map(|&p| o.allocators.iter().map(move |&a| (a, p)))
            .filter(|&(a, p)| Self::skip_reason(a, p).is_none())
            .count();
        (cells * o.threads.len()) as u64 * u64::from(o.rounds)
    }
}

fn dedup_in_order<T: PartialEq + Copy>(items: &mut Vec<T>) {
    let mut seen = Vec::with_capacity(items.len());
    items.retain(|item| {
        let new = !seen.contains(item);
        seen.push(*item);
        new
    });
}

/// How the threads use the allocator; all but `mixed` at order 0, as in
/// LLFree's benchmark (luhsra/llfree-rs).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Each thread allocates its share of half of memory, then frees it.
    Bulk,
    /// Each thread allocates and frees one frame, over and over.
    Repeat,
    /// Like `bulk`, but the frames are shuffled across threads before they
    /// are freed: most frees are cross-CPU.
    Rand,
    /// Random allocations and frees with a Linux-like order mix, holding
    /// about a quarter of each thread's share of memory.
    Mixed,
}

impl Pattern {
    /// Every pattern, in table order.
    pub const ALL: [Pattern; 4] = [
        Pattern::Bulk,
        Pattern::Repeat,
        Pattern::Rand,
        Pattern::Mixed,
    ];

    /// The name options take.
    pub const fn name(self) -> &'static str {
        match self {
            Pattern::Bulk => "bulk",
            Pattern::Repeat => "repeat",
            Pattern::Rand => "rand",
            Pattern::Mixed => "mixed",
        }
    }

    /// Whether allocations and frees alternate in one loop, so an untimed
    /// run has one wall time for both and the amortized figure is the
    /// loop's time per request, the same for both operations.
    pub const fn interleaved(self) -> bool {
        matches!(self, Pattern::Repeat | Pattern::Mixed)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Pattern {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Pattern::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| {
                format!("unknown pattern '{text}': expected bulk, repeat, rand or mixed")
            })
    }
}

/// Allocation or free.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// `alloc`.
    Alloc,
    /// `free`.
    Free,
}

impl Op {
    /// Both, in table order.
    pub const BOTH: [Op; 2] = [Op::Alloc, Op::Free];

    /// `alloc` or `free`.
    pub const fn name(self) -> &'static str {
        match self {
            Op::Alloc => "alloc",
            Op::Free => "free",
        }
    }
}

/// The figures for one operation of one cell.
#[derive(Clone, Debug, Serialize)]
pub struct OpResult {
    /// Which operation.
    pub op: Op,
    /// Requests made in the timed run (failed allocations included).
    pub requests: u64,
    /// Allocations refused for lack of memory in the timed run.
    pub failures: u64,
    /// Untimed run: wall time per request (per thread, averaged).
    pub mean_ns_amortized: f64,
    /// Timed run: mean per request.
    pub mean_ns: f64,
    /// Timed run: standard deviation per request.
    pub sd_ns: f64,
    /// Timed run: mean in TSC ticks.
    pub mean_cycles: f64,
    /// Timed run: standard deviation in TSC ticks.
    pub sd_cycles: f64,
    /// Timed run: median.
    pub p50_ns: f64,
    /// Timed run: 99th percentile.
    pub p99_ns: f64,
    /// Timed run: slowest request.
    pub max_ns: f64,
}

/// One cell of the table.
#[derive(Clone, Debug, Serialize)]
pub struct CellResult {
    /// Row.
    pub allocator: BenchAllocator,
    /// Pattern.
    pub pattern: Pattern,
    /// Column: threads, and the allocator's CPUs.
    pub threads: u32,
    /// The round kept (0-based): the one whose mean is the median.
    pub round: u32,
    /// The allocator's bookkeeping after the timed run, if it reports it.
    pub metadata_bytes: Option<u64>,
    /// Whether the allocator checked its invariants after every pass
    /// (`validate()` passed and no frame was left allocated); `false` for
    /// the peer, which cannot check itself.
    pub validated: bool,
    /// Allocations.
    pub alloc: OpResult,
    /// Frees.
    pub free: OpResult,
}

impl CellResult {
    /// The figures for `op`.
    pub fn op(&self, op: Op) -> &OpResult {
        match op {
            Op::Alloc => &self.alloc,
            Op::Free => &self.free,
        }
    }
}

/// A cell the options asked for that was not timed, and why.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// Row.
    pub allocator: BenchAllocator,
    /// Pattern.
    pub pattern: Pattern,
    /// Column.
    pub threads: u32,
    /// Why.
    pub reason: String,
}

/// Seed 000's bottom rows for one pattern, operation and thread count:
/// LiS-1 against LBS-31 as `(c - e) / c`, LiS-31 against LBS-31 as the
/// ratio `c / f` of the means and of the sds. `None` where a row was not
/// run.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// Pattern.
    pub pattern: Pattern,
    /// Operation.
    pub op: Op,
    /// Threads.
    pub threads: u32,
    /// `(c - e) / c` of the means, in percent.
    pub lis1_gain_pct: Option<f64>,
    /// `c / f` of the means.
    pub lis31_mean_ratio: Option<f64>,
    /// `c / f` of the standard deviations.
    pub lis31_sd_ratio: Option<f64>,
}

/// Everything a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchAlloc {
    /// What was run (rows, columns and patterns without repeats).
    pub options: BenchAllocOptions,
    /// The timer.
    pub clock: Clock,
    /// One per (pattern, allocator, threads) timed, in that nesting.
    pub cells: Vec<CellResult>,
    /// The cells asked for but not timed, with the reason.
    pub skipped: Vec<Skipped>,
    /// Seed 000's comparison rows, per pattern, operation and threads.
    pub comparisons: Vec<Comparison>,
    /// The seed's claims held against this run.
    pub checks: Vec<Check>,
}

impl BenchAlloc {
    /// The cell for a row, pattern and column, if it was run.
    pub fn cell(
        &self,
        allocator: BenchAllocator,
        pattern: Pattern,
        threads: u32,
    ) -> Option<&CellResult> {
        self.cells
            .iter()
            .find(|c| c.allocator == allocator && c.pattern == pattern && c.threads == threads)
    }

    /// Why a cell was not timed, if it was skipped.
    pub fn skipped(
        &self,
        allocator: BenchAllocator,
        pattern: Pattern,
        threads: u32,
    ) -> Option<&Skipped> {
        self.skipped
            .iter()
            .find(|c| c.allocator == allocator && c.pattern == pattern && c.threads == threads)
    }
}

impl Study for BenchAlloc {
    type Options = BenchAllocOptions;
    type Output = BenchAlloc;
    type Error = BenchAllocError;
    const NAME: &'static str = "bench-alloc";

    fn options(scale: Scale) -> BenchAllocOptions {
        BenchAllocOptions::at(scale)
    }

    fn run(
        options: &BenchAllocOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<BenchAlloc, BenchAllocError> {
        run(options, progress)
    }
}

const LBS31: BenchAllocator = BenchAllocator::Nvmos(AllocatorKind::Lbs31);
const LIS1: BenchAllocator = BenchAllocator::Nvmos(AllocatorKind::Lis1);
const LIS31: BenchAllocator = BenchAllocator::Nvmos(AllocatorKind::Lis31);

/// Run every cell of `options`, reporting each round as it starts.
pub fn run(
    options: &BenchAllocOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<BenchAlloc, BenchAllocError> {
    options.check()?;
    let options = options.deduplicated();
    let total = options.steps();
    let clock = Clock::calibrate();
    let mut cells = Vec::new();
    let mut skipped = Vec::new();
    let mut done = 0;
    for &pattern in &options.patterns {
        for &allocator in &options.allocators {
            for &threads in &options.threads {
                if let Some(reason) = BenchAllocOptions::skip_reason(allocator, pattern) {
                    skipped.push(Skipped {
                        allocator,
                        pattern,
                        threads,
                        reason: reason.to_string(),
                    });
                    continue;
                }
                let mut rounds = Vec::with_capacity(options.rounds as usize);
                for round in 0..options.rounds {
                    progress(Progress {
                        done,
                        total,
                        step: format!("{pattern} {allocator} {threads} thr round {}", round + 1),
                    });
                    rounds.push(run_round(
                        &options, &clock, allocator, pattern, threads, round,
                    )?);
                    done += 1;
                }
                let means: Vec<f64> = rounds.iter().map(|r| r.timed_mean_ticks).collect();
                let keep = median_index(&means).unwrap_or(0);
                cells.push(rounds.swap_remove(keep).cell);
            }
        }
    }
    progress(Progress {
        done,
        total,
        step: "done".into(),
    });
    let mut result = BenchAlloc {
        options,
        clock,
        cells,
        skipped,
        comparisons: Vec::new(),
        checks: Vec::new(),
    };
    result.comparisons = comparisons(&result);
    result.checks = checks(&result);
    Ok(result)
}

fn comparisons(r: &BenchAlloc) -> Vec<Comparison> {
    let mut out = Vec::new();
    for &pattern in &r.options.patterns {
        for op in Op::BOTH {
            for &threads in &r.options.threads {
                let get = |a| r.cell(a, pattern, threads).map(|c| c.op(op));
                let c = get(LBS31);
                let pair = |x: Option<&OpResult>, f: fn(&OpResult, &OpResult) -> f64| {
                    c.zip(x).map(|(c, x)| f(c, x))
                };
                out.push(Comparison {
                    pattern,
                    op,
                    threads,
                    lis1_gain_pct: pair(get(LIS1), |c, e| {
                        (c.mean_ns - e.mean_ns) / c.mean_ns * 100.0
                    }),
                    lis31_mean_ratio: pair(get(LIS31), |c, f| c.mean_ns / f.mean_ns),
                    lis31_sd_ratio: pair(get(LIS31), |c, f| c.sd_ns / f.sd_ns),
                });
            }
        }
    }
    out
}

/// The median of the finite values (the mean of the middle two for an
/// even count): one cell preempted on a shared machine moves a mean of
/// ratios by hundreds of percent, the median not.
fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    nvmos_measure::stats::median(&v)
}

/// Seed 000's two claims, where the run has the rows they compare.
fn checks(r: &BenchAlloc) -> Vec<Check> {
    let mut checks = Vec::new();
    let cells = r.comparisons.len();
    if let Some(gain) = median(r.comparisons.iter().filter_map(|c| c.lis1_gain_pct)) {
        checks.push(
            Check::new(
                "lazy iBuddy (LiS-1) at least as fast per request as lazy buddy (LBS-31): (c-e)/c of the timed means",
                "seed 000 Table 2",
                gain,
                "%",
                Bound::AtLeast(0.0),
            )
            .seed(SEED_LIS1_GAIN_PCT)
            .detail(format!(
                "median of (c-e)/c over the {cells} pattern × operation × thread cells; the seed's 32% is the average over six Linux 2.6.32 workloads in cycles"
            )),
        );
    }
    if let Some(ratio) = median(r.comparisons.iter().filter_map(|c| c.lis31_sd_ratio)) {
        checks.push(
            Check::new(
                "lazy iBuddy (LiS-31) steadier than lazy buddy (LBS-31): c/f of the standard deviations",
                "seed 000 (sd 1400 vs 400 cycles)",
                ratio,
                "x",
                Bound::AtLeast(1.0),
            )
            .seed(SEED_SD_RATIO)
            .detail(format!(
                "median of c/f of the per-request sds over the {cells} pattern × operation × thread cells"
            )),
        );
    }
    checks
}

/// One round's cell and the key rounds are ranked by.
struct Round {
    cell: CellResult,
    /// Mean of every timed request, allocations and frees together.
    timed_mean_ticks: f64,
}

fn run_round(
    config: &BenchAllocOptions,
    clock: &Clock,
    allocator: BenchAllocator,
    pattern: Pattern,
    threads: u32,
    round: u32,
) -> Result<Round, BenchAllocError> {
    let cell = format!("{allocator}, pattern {pattern}, {threads} threads, round {round}");
    let pass = |timed| Pass {
        config,
        pattern,
        threads,
        timed,
        cell: &cell,
    };
    let build = (config.lock, config.free_order);
    let timed = allocator.with_target(config.frames, threads, build, pass(true))?;
    let untimed = allocator.with_target(config.frames, threads, build, pass(false))?;

    let mut alloc_ticks = merge(
        timed.logs.iter().map(|l| &l.alloc_ticks),
        clock.overhead_ticks,
    );
    let mut free_ticks = merge(
        timed.logs.iter().map(|l| &l.free_ticks),
        clock.overhead_ticks,
    );
    let alloc_summary = summarize(&mut alloc_ticks);
    let free_summary = summarize(&mut free_ticks);
    let all = (alloc_summary.count + free_summary.count).max(1) as f64;
    let timed_mean_ticks = (alloc_summary.mean * alloc_summary.count as f64
        + free_summary.mean * free_summary.count as f64)
        / all;

    let amortized = Amortized::of(pattern, &untimed.logs);
    let op_result = |op, summary: &Summary| OpResult {
        op,
        requests: timed.logs.iter().map(|l| l.requests(op)).sum(),
        failures: match op {
            Op::Alloc => timed.logs.iter().map(|l| l.failures).sum(),
            Op::Free => 0,
        },
        mean_ns_amortized: amortized.ns(op),
        mean_ns: clock.ns(summary.mean),
        sd_ns: clock.ns(summary.sd),
        mean_cycles: summary.mean,
        sd_cycles: summary.sd,
        p50_ns: clock.ns(summary.p50 as f64),
        p99_ns: clock.ns(summary.p99 as f64),
        max_ns: clock.ns(summary.max as f64),
    };
    Ok(Round {
        cell: CellResult {
            allocator,
            pattern,
            threads,
            round,
            metadata_bytes: timed.metadata_bytes,
            validated: timed.validated && untimed.validated,
            alloc: op_result(Op::Alloc, &alloc_summary),
            free: op_result(Op::Free, &free_summary),
        },
        timed_mean_ticks,
    })
}

/// Every thread's samples in one vector, the timer's own cost taken off.
fn merge<'a>(per_thread: impl Iterator<Item = &'a Vec<u64>> + Clone, overhead: u64) -> Vec<u64> {
    let mut all = Vec::with_capacity(per_thread.clone().map(Vec::len).sum());
    for samples in per_thread {
        all.extend(samples.iter().map(|&t| t.saturating_sub(overhead)));
    }
    all
}

/// Untimed wall time per request, per operation.
struct Amortized {
    alloc_ns: f64,
    free_ns: f64,
}

impl Amortized {
    /// Each thread's time over each thread's requests: the mean latency a
    /// thread saw, as LLFree reports it (not the inverse of throughput).
    fn of(pattern: Pattern, logs: &[ThreadLog]) -> Amortized {
        let sum = |f: fn(&ThreadLog) -> u64| logs.iter().map(f).sum::<u64>();
        let per = |time: u64, requests: u64| time as f64 / requests.max(1) as f64;
        let (allocs, frees) = (sum(|l| l.allocs), sum(|l| l.frees));
        if pattern.interleaved() {
            let both = per(sum(|l| l.loop_time.as_nanos() as u64), allocs + frees);
            Amortized {
                alloc_ns: both,
                free_ns: both,
            }
        } else {
            Amortized {
                alloc_ns: per(sum(|l| l.alloc_time.as_nanos() as u64), allocs),
                free_ns: per(sum(|l| l.free_time.as_nanos() as u64), frees),
            }
        }
    }

    fn ns(&self, op: Op) -> f64 {
        match op {
            Op::Alloc => self.alloc_ns,
            Op::Free => self.free_ns,
        }
    }
}

/// One run of a pattern on a fresh allocator.
struct Pass<'a> {
    config: &'a BenchAllocOptions,
    pattern: Pattern,
    threads: u32,
    timed: bool,
    /// The cell, for error messages.
    cell: &'a str,
}

/// What a pass leaves: each thread's log, and the allocator's bookkeeping.
struct PassOutcome {
    logs: Vec<ThreadLog>,
    metadata_bytes: Option<u64>,
    /// Whether the allocator could check itself (the peer cannot).
    validated: bool,
}

impl TargetJob for Pass<'_> {
    type Output = PassOutcome;

    fn run<T: BenchTarget>(self, target: &T) -> Result<PassOutcome, BenchAllocError> {
        let logs = if self.timed {
            self.drive::<T, true>(target)?
        } else {
            self.drive::<T, false>(target)?
        };
        let cell = || self.cell.to_string();
        let refused: u64 = logs.iter().map(|l| l.errors).sum();
        if let Some(first) = logs.iter().find_map(|l| l.first_error) {
            return Err(BenchAllocError::Refused {
                cell: cell(),
                refused,
                first,
            });
        }
        target
            .validate()
            .map_err(|source| BenchAllocError::Invalid {
                cell: cell(),
                source,
            })?;
        let held = target.allocated_frames();
        if let Some(held) = held.filter(|&h| h != 0) {
            return Err(BenchAllocError::Leaked { cell: cell(), held });
        }
        Ok(PassOutcome {
            logs,
            metadata_bytes: target.metadata_bytes(),
            validated: held.is_some(),
        })
    }
}

impl Pass<'_> {
    /// Run the pattern on `threads` threads started together.
    fn drive<T: BenchTarget, const TIMED: bool>(
        &self,
        target: &T,
    ) -> Result<Vec<ThreadLog>, BenchAllocError> {
        let threads = self.threads as usize;
        let barrier = Barrier::new(threads);
        let exchange = Exchange::new(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..self.threads)
                .map(|cpu| {
                    let (barrier, exchange) = (&barrier, &exchange);
                    scope.spawn(move || match self.pattern {
                        Pattern::Bulk => self.bulk::<T, TIMED>(target, cpu, barrier),
                        Pattern::Repeat => self.repeat::<T, TIMED>(target, cpu, barrier),
                        Pattern::Rand => self.rand::<T, TIMED>(target, cpu, barrier, exchange),
                        Pattern::Mixed => self.mixed::<T, TIMED>(target, cpu, barrier),
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().map_err(|_| BenchAllocError::Panicked {
                        cell: self.cell.to_string(),
                    })
                })
                .collect()
        })
    }

    /// Frames each thread allocates in `bulk` and `rand`: its share of
    /// half of memory.
    fn half_share(&self) -> usize {
        (self.config.frames / 2 / u64::from(self.threads)) as usize
    }

    /// Allocate `count` single frames; the frames got.
    fn alloc_phase<T: BenchTarget, const TIMED: bool>(
        log: &mut ThreadLog,
        target: &T,
        cpu: u32,
        count: usize,
    ) -> Vec<u64> {
        let mut held = Vec::with_capacity(count);
        let start = Instant::now();
        for _ in 0..count {
            if let Some(pfn) = log.alloc::<T, TIMED>(target, Order::ZERO, cpu) {
                held.push(pfn);
            }
        }
        log.alloc_time = start.elapsed();
        held
    }

    /// Free every frame of `held`.
    fn free_phase<T: BenchTarget, const TIMED: bool>(
        log: &mut ThreadLog,
        target: &T,
        cpu: u32,
        held: &[u64],
    ) {
        let start = Instant::now();
        for &pfn in held {
            log.free::<T, TIMED>(target, pfn, Order::ZERO, cpu);
        }
        log.free_time = start.elapsed();
    }

    fn bulk<T: BenchTarget, const TIMED: bool>(
        &self,
        target: &T,
        cpu: u32,
        barrier: &Barrier,
    ) -> ThreadLog {
        let share = self.half_share();
        let mut log = ThreadLog::new(TIMED, share, share);
        barrier.wait();
        let held = Self::alloc_phase::<T, TIMED>(&mut log, target, cpu, share);
        barrier.wait();
        Self::free_phase::<T, TIMED>(&mut log, target, cpu, &held);
        log
    }

    fn repeat<T: BenchTarget, const TIMED: bool>(
        &self,
        target: &T,
        cpu: u32,
        barrier: &Barrier,
    ) -> ThreadLog {
        let n = self.config.repeat as usize;
        let mut log = ThreadLog::new(TIMED, n, n);
        barrier.wait();
        let start = Instant::now();
        for _ in 0..n {
            if let Some(pfn) = log.alloc::<T, TIMED>(target, Order::ZERO, cpu) {
                log.free::<T, TIMED>(target, pfn, Order::ZERO, cpu);
            }
        }
        log.loop_time = start.elapsed();
        log
    }

    fn rand<T: BenchTarget, const TIMED: bool>(
        &self,
        target: &T,
        cpu: u32,
        barrier: &Barrier,
        exchange: &Exchange,
    ) -> ThreadLog {
        let share = self.half_share();
        // Every thread frees at most `share` frames: the shuffled frames
        // are dealt out evenly and there are at most `threads * share`.
        let mut log = ThreadLog::new(TIMED, share, share);
        barrier.wait();
        let held = Self::alloc_phase::<T, TIMED>(&mut log, target, cpu, share);
        exchange.deposit(cpu, held);
        if barrier.wait().is_leader() {
            exchange.shuffle(self.config.seed);
        }
        barrier.wait();
        let mine = exchange.take(cpu);
        Self::free_phase::<T, TIMED>(&mut log, target, cpu, &mine);
        log
    }

    fn mixed<T: BenchTarget, const TIMED: bool>(
        &self,
        target: &T,
        cpu: u32,
        barrier: &Barrier,
    ) -> ThreadLog {
        let ops = self.config.mixed_ops as usize;
        let mut log = ThreadLog::new(TIMED, ops, ops);
        // The band: a quarter of the thread's share, give or take a
        // sixteenth of the share.
        let share = self.config.frames / u64::from(self.threads);
        let (low, high) = (share * 3 / 16, share * 5 / 16);
        let mut rng = StdRng::seed_from_u64(
            self.config.seed ^ (u64::from(cpu) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        let mut live: Vec<(u64, Order)> = Vec::with_capacity(ops);
        let mut live_frames = 0u64;
        barrier.wait();
        let start = Instant::now();
        for _ in 0..ops {
            let grow =
                live.is_empty() || live_frames < low || (live_frames <= high && rng.gen_bool(0.5));
            if grow {
                let order = mixed_order(rng.gen_range(0..100));
                if let Some(pfn) = log.alloc::<T, TIMED>(target, order, cpu) {
                    live.push((pfn, order));
                    live_frames += order.frames();
                }
            } else {
                let (pfn, order) = live.swap_remove(rng.gen_range(0..live.len()));
                live_frames -= order.frames();
                log.free::<T, TIMED>(target, pfn, order, cpu);
            }
        }
        log.loop_time = start.elapsed();
        // Give everything back, untimed and uncounted, so the checks after
        // the pass see an empty allocator.
        for (pfn, order) in live {
            if let Err(e) = target.free(pfn, order, cpu) {
                log.error(e);
            }
        }
        log
    }
}

/// The order of a `mixed` allocation from a percentile roll (0..100).
///
/// A Linux-like mix, as page-allocation traces of ordinary workloads show
/// it: single frames dominate (anonymous memory, page cache: 85%); order 1
/// to 3 come from slab caches and kernel stacks (6%, 4%, 3%); order 4 is
/// rarer (1%); order 9 is a transparent huge page (1%).
fn mixed_order(roll: u32) -> Order {
    const MIX: [(u8, u32); 6] = [(0, 85), (1, 6), (2, 4), (3, 3), (4, 1), (9, 1)];
    let mut below = 0;
    for (order, percent) in MIX {
        below += percent;
        if roll < below {
            return Order::new(order).expect("orders of the mix are valid");
        }
    }
    Order::ZERO
}

/// Where `rand` threads leave their frames to have them shuffled and dealt
/// out again.
struct Exchange {
    slots: Mutex<Vec<Vec<u64>>>,
}

impl Exchange {
    fn new(threads: usize) -> Exchange {
        Exchange {
            slots: Mutex::new(vec![Vec::new(); threads]),
        }
    }

    fn deposit(&self, cpu: u32, frames: Vec<u64>) {
        self.slots.lock()[cpu as usize] = frames;
    }

    /// Pool every slot's frames, shuffle them, deal them out evenly.
    fn shuffle(&self, seed: u64) {
        let mut slots = self.slots.lock();
        let mut all: Vec<u64> = slots.iter_mut().flat_map(std::mem::take).collect();
        all.shuffle(&mut StdRng::seed_from_u64(seed));
        let per_slot = all.len().div_ceil(slots.len()).max(1);
        for (slot, chunk) in slots.iter_mut().zip(all.chunks(per_slot)) {
            *slot = chunk.to_vec();
        }
    }

    fn take(&self, cpu: u32) -> Vec<u64> {
        std::mem::take(&mut self.slots.lock()[cpu as usize])
    }
}

/// What one thread did in one pass.
#[derive(Default)]
struct ThreadLog {
    /// Ticks per allocation (timed passes), preallocated so the timed loop
    /// never allocates.
    alloc_ticks: Vec<u64>,
    /// Ticks per free (timed passes).
    free_ticks: Vec<u64>,
    allocs: u64,
    frees: u64,
    /// Allocations refused for lack of memory.
    failures: u64,
    /// Any other refusal: a bug, reported after the pass.
    errors: u64,
    first_error: Option<AllocError>,
    /// Phase times of `bulk` and `rand`.
    alloc_time: Duration,
    free_time: Duration,
    /// Loop time of `repeat` and `mixed`.
    loop_time: Duration,
}

impl ThreadLog {
    fn new(timed: bool, allocs: usize, frees: usize) -> ThreadLog {
        let room = |n| {
            if timed {
                Vec::with_capacity(n)
            } else {
                Vec::new()
            }
        };
        ThreadLog {
            alloc_ticks: room(allocs),
            free_ticks: room(frees),
            ..ThreadLog::default()
        }
    }

    fn requests(&self, op: Op) -> u64 {
        match op {
            Op::Alloc => self.allocs,
            Op::Free => self.frees,
        }
    }

    #[inline(always)]
    fn alloc<T: BenchTarget, const TIMED: bool>(
        &mut self,
        target: &T,
        order: Order,
        cpu: u32,
    ) -> Option<u64> {
        let t0 = if TIMED { ticks() } else { 0 };
        let result = target.alloc(order, cpu);
        if TIMED {
            let t1 = ticks();
            self.alloc_ticks.push(t1.wrapping_sub(t0));
        }
        self.allocs += 1;
        match result {
            Ok(pfn) => Some(pfn),
            Err(AllocError::OutOfMemory { .. }) => {
                self.failures += 1;
                None
            }
            Err(e) => {
                self.error(e);
                None
            }
        }
    }

    #[inline(always)]
    fn free<T: BenchTarget, const TIMED: bool>(
        &mut self,
        target: &T,
        pfn: u64,
        order: Order,
        cpu: u32,
    ) {
        let t0 = if TIMED { ticks() } else { 0 };
        let result = target.free(pfn, order, cpu);
        if TIMED {
            let t1 = ticks();
            self.free_ticks.push(t1.wrapping_sub(t0));
        }
        self.frees += 1;
        if let Err(e) = result {
            self.error(e);
        }
    }

    #[cold]
    fn error(&mut self, e: AllocError) {
        self.errors += 1;
        self.first_error.get_or_insert(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_mix_adds_up() {
        let mut counts = [0u32; 10];
        for roll in 0..100 {
            counts[mixed_order(roll).index()] += 1;
        }
        assert_eq!(counts, [85, 6, 4, 3, 1, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn shuffled_frames_are_dealt_out_evenly() {
        let exchange = Exchange::new(3);
        exchange.deposit(0, (0..5).collect());
        exchange.deposit(1, (5..10).collect());
        exchange.deposit(2, Vec::new());
        exchange.shuffle(7);
        let mut dealt: Vec<Vec<u64>> = (0..3).map(|cpu| exchange.take(cpu)).collect();
        assert_eq!(dealt.iter().map(Vec::len).collect::<Vec<_>>(), [4, 4, 2]);
        let mut all: Vec<u64> = dealt.iter_mut().flat_map(std::mem::take).collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
    }

    fn tiny(pattern: Pattern, allocator: BenchAllocator) -> BenchAllocOptions {
        BenchAllocOptions {
            frames: 2048,
            allocators: vec![allocator],
            threads: vec![1, 3],
            patterns: vec![pattern],
            rounds: 2,
            repeat: 300,
            mixed_ops: 500,
            seed: 1,
            lock: LockKind::Spin,
            free_order: FreeOrder::Accepted,
        }
    }

    #[test]
    fn every_pattern_runs_on_every_allocator_the_caps_allow() {
        for pattern in Pattern::ALL {
            for (i, allocator) in BenchAllocator::all().into_iter().enumerate() {
                // Both locks and both free orders, alternating, so each
                // pattern runs on each.
                let lock = [LockKind::Spin, LockKind::Parking][i % 2];
                let options = BenchAllocOptions {
                    lock,
                    free_order: FreeOrder::ALL[i / 2 % 2],
                    ..tiny(pattern, allocator)
                };
                let mut reports = Vec::new();
                let result = run(&options, &mut |p| reports.push(p)).unwrap();
                let last = reports.last().unwrap();
                assert_eq!((last.done, last.total), (options.steps(), options.steps()));
                if allocator.caps().single_frame && pattern == Pattern::Mixed {
                    assert!(result.cells.is_empty());
                    assert_eq!(result.skipped.len(), 2, "{allocator}");
                    assert_eq!(options.steps(), 0);
                    continue;
                }
                assert!(result.skipped.is_empty());
                assert_eq!(options.steps(), 4);
                assert_eq!(result.cells.len(), 2);
                for cell in &result.cells {
                    assert_eq!(cell.validated, allocator != BenchAllocator::Bsa);
                    let expect = match pattern {
                        Pattern::Bulk | Pattern::Rand => {
                            1024 / u64::from(cell.threads) * u64::from(cell.threads)
                        }
                        Pattern::Repeat => 300 * u64::from(cell.threads),
                        Pattern::Mixed => cell.alloc.requests,
                    };
                    assert_eq!(cell.alloc.requests, expect, "{pattern} {allocator}");
                    if pattern != Pattern::Mixed {
                        assert_eq!(cell.alloc.failures, 0);
                        assert_eq!(cell.free.requests, expect);
                    } else {
                        assert_eq!(
                            cell.alloc.requests + cell.free.requests,
                            500 * u64::from(cell.threads)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_seed_rows_and_checks_come_with_the_rows_they_compare() {
        let options = BenchAllocOptions {
            allocators: vec![LBS31, LIS1, LIS31, LBS31],
            patterns: vec![Pattern::Repeat],
            threads: vec![1],
            rounds: 1,
            ..tiny(Pattern::Repeat, LBS31)
        };
        let result = BenchAlloc::run(&options, &mut |_| {}).unwrap();
        // Repeats are dropped before the run.
        assert_eq!(result.options.allocators, [LBS31, LIS1, LIS31]);
        assert_eq!(result.cells.len(), 3);
        assert_eq!(result.comparisons.len(), 2);
        for c in &result.comparisons {
            assert!(c.lis1_gain_pct.is_some_and(f64::is_finite));
            assert!(c.lis31_mean_ratio.is_some_and(|r| r > 0.0));
        }
        assert_eq!(result.checks.len(), 2);
        assert_eq!(result.checks[0].seed_figure, Some(SEED_LIS1_GAIN_PCT));
        for check in &result.checks {
            assert_eq!(check.met, check.bound.met_by(check.measured));
        }
        // Without LBS-31 there is nothing to compare against.
        let alone = run(&tiny(Pattern::Repeat, LIS1), &mut |_| {}).unwrap();
        assert!(alone.checks.is_empty());
        assert!(alone.comparisons.iter().all(|c| c.lis1_gain_pct.is_none()));
    }

    #[test]
    fn options_round_trip_and_quick_is_smaller() {
        let quick = BenchAlloc::options(Scale::Quick);
        assert!(quick.frames < BenchAllocOptions::default().frames);
        assert_eq!(
            BenchAlloc::options(Scale::Full),
            BenchAllocOptions::default()
        );
        assert_eq!(quick.allocators.len(), AllocatorKind::ALL.len() + 1);
        let json = serde_json::to_string(&quick).unwrap();
        assert_eq!(
            serde_json::from_str::<BenchAllocOptions>(&json).unwrap(),
            quick
        );
        let err = serde_json::from_str::<BenchAllocOptions>(r#"{"allocators": ["nosuch"]}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("'nosuch'"), "{err}");
        assert!(serde_json::from_str::<BenchAllocOptions>(r#"{"frame": 3}"#).is_err());
    }

    #[test]
    fn impossible_options_are_refused() {
        let mut options = tiny(Pattern::Bulk, BenchAllocator::Nvmos(AllocatorKind::Buddy));
        options.threads = vec![0];
        let err = run(&options, &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("thread count 0"), "{err}");
        options.threads = vec![2048];
        assert!(options.check().is_err());
        options.threads = vec![1];
        options.frames = 1;
        assert!(options
            .check()
            .unwrap_err()
            .to_string()
            .contains("too small"));
        options.frames = 2048;
        options.allocators.clear();
        assert!(options
            .check()
            .unwrap_err()
            .to_string()
            .contains("allocators"));
    }
}
