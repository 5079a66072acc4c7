//! The engine of `nvmos bench alloc`: seed 000's Table 2 on this machine.
//!
//! Every cell (allocator, pattern, thread count) builds a fresh allocator
//! for `threads` CPUs, runs the pattern with one thread per CPU (thread t
//! names CPU t), and checks the allocator afterwards. Each round runs the
//! pattern twice on fresh allocators: once timing every request with the
//! TSC (the distribution: mean, sd, percentiles), once untimed (the
//! amortized ns per request, the figure comparable to LLFree's). The
//! engine never prints; it returns a [`Report`].

use std::fmt;
use std::str::FromStr;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use nvmos_frames::{AllocError, Order, MAX_CPUS};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::target::{AllocatorKind, BenchTarget, LockKind, TargetJob};
use nvmos_measure::stats::{median_index, summarize, Summary};
use nvmos_measure::timer::{ticks, Clock};

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct Config {
    /// Memory managed, in 4 KiB frames, as one zone from pfn 0.
    pub frames: u64,
    /// Rows.
    pub allocators: Vec<AllocatorKind>,
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
}

impl Config {
    /// Refuse configurations that cannot run, naming the bad value.
    pub fn check(&self) -> Result<()> {
        ensure!(!self.allocators.is_empty(), "no allocator selected");
        ensure!(!self.threads.is_empty(), "no thread count given");
        ensure!(!self.patterns.is_empty(), "no pattern selected");
        ensure!(
            self.rounds >= 1,
            "--rounds {} must be at least 1",
            self.rounds
        );
        for &threads in &self.threads {
            ensure!(
                (1..=MAX_CPUS).contains(&threads),
                "thread count {threads} is out of range 1..={MAX_CPUS}"
            );
            ensure!(
                self.frames / 2 / u64::from(threads) >= 1,
                "memory of {} frames is too small for {threads} threads: each needs at least 2 frames",
                self.frames
            );
        }
        Ok(())
    }

    /// Rounds to run in all: the length of a progress bar.
    pub fn steps(&self) -> u64 {
        (self.allocators.len() * self.threads.len() * self.patterns.len()) as u64
            * u64::from(self.rounds)
    }
}

/// How the threads use the allocator; all but `mixed` at order 0, as in
/// LLFree's benchmark (luhsra/llfree-rs).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
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

    /// The name `--patterns` takes.
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
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// `alloc`.
    Alloc,
    /// `free`.
    Free,
}

impl Op {
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
    pub allocator: AllocatorKind,
    /// Pattern.
    pub pattern: Pattern,
    /// Column: threads, and the allocator's CPUs.
    pub threads: u32,
    /// The round kept (0-based): the one whose mean is the median.
    pub round: u32,
    /// The allocator's bookkeeping after the timed run, if it reports it.
    pub metadata_bytes: Option<u64>,
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

/// Everything a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// What was run.
    pub config: Config,
    /// The timer.
    pub clock: Clock,
    /// One per (pattern, allocator, threads), in that nesting.
    pub cells: Vec<CellResult>,
}

impl Report {
    /// The cell for a row, pattern and column, if it was run.
    pub fn cell(
        &self,
        allocator: AllocatorKind,
        pattern: Pattern,
        threads: u32,
    ) -> Option<&CellResult> {
        self.cells
            .iter()
            .find(|c| c.allocator == allocator && c.pattern == pattern && c.threads == threads)
    }
}

/// Where the run is, for a progress bar.
#[derive(Clone, Debug)]
pub struct Step {
    /// Row.
    pub allocator: AllocatorKind,
    /// Pattern.
    pub pattern: Pattern,
    /// Column.
    pub threads: u32,
    /// Round starting, 0-based.
    pub round: u32,
}

/// Run every cell of `config`, calling `on_step` as each round starts.
pub fn run(config: &Config, on_step: &mut dyn FnMut(&Step)) -> Result<Report> {
    config.check()?;
    let clock = Clock::calibrate();
    let mut cells = Vec::new();
    for &pattern in &config.patterns {
        for &allocator in &config.allocators {
            for &threads in &config.threads {
                let mut rounds = Vec::with_capacity(config.rounds as usize);
                for round in 0..config.rounds {
                    on_step(&Step {
                        allocator,
                        pattern,
                        threads,
                        round,
                    });
                    rounds.push(run_round(
                        config, &clock, allocator, pattern, threads, round,
                    )?);
                }
                let means: Vec<f64> = rounds.iter().map(|r| r.timed_mean_ticks).collect();
                let keep = median_index(&means).expect("at least one round");
                cells.push(rounds.swap_remove(keep).cell);
            }
        }
    }
    Ok(Report {
        config: config.clone(),
        clock,
        cells,
    })
}

/// One round's cell and the key rounds are ranked by.
struct Round {
    cell: CellResult,
    /// Mean of every timed request, allocations and frees together.
    timed_mean_ticks: f64,
}

fn run_round(
    config: &Config,
    clock: &Clock,
    allocator: AllocatorKind,
    pattern: Pattern,
    threads: u32,
    round: u32,
) -> Result<Round> {
    let pass = |timed| Pass {
        config,
        pattern,
        threads,
        timed,
    };
    let context = || format!("{allocator}, pattern {pattern}, {threads} threads, round {round}");
    let timed = allocator
        .with_target(config.frames, threads, config.lock, pass(true))
        .with_context(context)?;
    let untimed = allocator
        .with_target(config.frames, threads, config.lock, pass(false))
        .with_context(context)?;

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
    config: &'a Config,
    pattern: Pattern,
    threads: u32,
    timed: bool,
}

/// What a pass leaves: each thread's log, and the allocator's bookkeeping.
struct PassOutcome {
    logs: Vec<ThreadLog>,
    metadata_bytes: Option<u64>,
}

impl TargetJob for Pass<'_> {
    type Output = PassOutcome;

    fn run<T: BenchTarget>(self, target: &T) -> Result<PassOutcome> {
        let logs = if self.timed {
            self.drive::<T, true>(target)?
        } else {
            self.drive::<T, false>(target)?
        };
        let refused: u64 = logs.iter().map(|l| l.errors).sum();
        if let Some(first) = logs.iter().find_map(|l| l.first_error) {
            bail!("the allocator refused {refused} requests it should have served; the first: {first}");
        }
        target.validate().context("validation after the pattern")?;
        if let Some(held) = target.allocated_frames() {
            ensure!(
                held == 0,
                "{held} frames still allocated after every block was freed"
            );
        }
        Ok(PassOutcome {
            logs,
            metadata_bytes: target.metadata_bytes(),
        })
    }
}

impl Pass<'_> {
    /// Run the pattern on `threads` threads started together.
    fn drive<T: BenchTarget, const TIMED: bool>(&self, target: &T) -> Result<Vec<ThreadLog>> {
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
                .map(|h| h.join().map_err(|_| anyhow!("a benchmark thread panicked")))
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

    fn tiny(pattern: Pattern, allocator: AllocatorKind) -> Config {
        Config {
            frames: 2048,
            allocators: vec![allocator],
            threads: vec![1, 3],
            patterns: vec![pattern],
            rounds: 2,
            repeat: 300,
            mixed_ops: 500,
            seed: 1,
            lock: LockKind::Spin,
        }
    }

    #[test]
    fn every_pattern_runs_on_every_allocator() {
        for pattern in Pattern::ALL {
            for (i, allocator) in AllocatorKind::all().into_iter().enumerate() {
                // Both locks, alternating, so each pattern runs on each.
                let lock = [LockKind::Spin, LockKind::Parking][i % 2];
                let config = Config {
                    lock,
                    ..tiny(pattern, allocator)
                };
                let mut steps = 0;
                let report = run(&config, &mut |_| steps += 1).unwrap();
                assert_eq!(steps, config.steps());
                assert_eq!(report.cells.len(), 2);
                for cell in &report.cells {
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
    fn impossible_configs_are_refused() {
        let mut config = tiny(
            Pattern::Bulk,
            AllocatorKind::Nvmos(nvmos_sim::AllocatorKind::Buddy),
        );
        config.threads = vec![0];
        assert!(config
            .check()
            .unwrap_err()
            .to_string()
            .contains("thread count 0"));
        config.threads = vec![2048];
        assert!(config.check().is_err());
        config.threads = vec![1];
        config.frames = 1;
        assert!(config
            .check()
            .unwrap_err()
            .to_string()
            .contains("too small"));
    }
}
