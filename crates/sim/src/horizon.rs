//! Wear over a device's lifetime: the long-horizon mode (`--horizon`).
//!
//! A 20-second trace says little about a memory that lives for years: the
//! short-trace lifetime metric divides the mean over *all* frames by the
//! most written one, and in 20 seconds even a perfectly even allocator has
//! touched only a few percent of memory. So the trace is replayed again
//! and again through the same allocator — its state carried from one
//! repetition to the next, times shifted by one period, blocks still live
//! at the end freed when the next repetition's frees of them come — until
//! the wear of the most written frame grows at a steady rate, or a frame
//! reaches its endurance.
//!
//! # The convergence criterion
//!
//! Let `M(k)` be the write count of the most written frame after `k`
//! repetitions. In steady state it grows linearly, `M(k) ≈ a·k + b`: `a`,
//! the hottest frame's writes per repetition, fixes when the first frame
//! fails. `a` is fitted by least squares over the second half of the run,
//! repetitions `(k/2, k]`, and over the quarter before it, `(k/4, k/2]`.
//! The run has converged when the two slopes agree within
//! [`HorizonOptions::tolerance`] (relative) at [`HorizonOptions::stable`]
//! consecutive repetitions, after at least [`HorizonOptions::min_reps`],
//! and the max grew by at least `1 / (2 · tolerance)` writes over the later
//! window (10 at 5 %): it moves in whole writes, so fewer steps would let
//! one step more or less exceed the tolerance.
//! Comparing windows that double is what keeps a slow drift from looking
//! converged: an allocator that is still spreading its writes over fresh
//! frames has a max that grows slower in the later window (each frame
//! written once more only every few repetitions), and one whose hot frames
//! get hotter has a steeper one. A least-squares fit rather than the two
//! end points averages over the staircase of an evenly spreading
//! allocator, whose max grows by one only every `N / W` repetitions.
//!
//! # The figures
//!
//! With `W` writes per repetition over `N` frames (`x = W / N`, the mean
//! frame's writes per repetition) and a period of `T` seconds:
//!
//! - years until the first frame fails at endurance `E`: the repetitions
//!   until `M` reaches `E`, `k + (E − M(k)) / a`, times `T`;
//! - the fraction of the ideal (perfectly even) lifetime: `x / a` — the
//!   ideal device fails when every frame reaches `E` at `x` writes per
//!   repetition together.

use crate::wear::ENDURANCES;

const SECONDS_PER_YEAR: f64 = 365.25 * 24.0 * 3600.0;

/// When to stop repeating.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HorizonOptions {
    /// Relative agreement of the two windows' slopes (0.05: 5 %).
    pub tolerance: f64,
    /// Repetitions before convergence is first checked.
    pub min_reps: u32,
    /// Consecutive repetitions the criterion must hold.
    pub stable: u32,
    /// Repetitions at most; a run that reaches it is reported as not
    /// converged, with the figures at that point.
    pub max_reps: u32,
}

impl Default for HorizonOptions {
    fn default() -> Self {
        HorizonOptions {
            tolerance: 0.05,
            min_reps: 8,
            stable: 3,
            max_reps: 4096,
        }
    }
}

impl HorizonOptions {
    /// The criterion in words, for reports.
    pub fn criterion(&self) -> String {
        format!(
            "the most written frame's writes per repetition, fitted by least squares over repetitions (k/2, k] and (k/4, k/2], agree within {:.0} % at {} consecutive repetitions (k ≥ {}), the max having grown by ≥ {} writes over (k/2, k]; or a frame reaches 10^6 writes; at most {} repetitions",
            self.tolerance * 100.0,
            self.stable,
            self.min_reps,
            (0.5 / self.tolerance).ceil(),
            self.max_reps
        )
    }

    /// Refuses settings that cannot work.
    pub fn check(&self) -> Result<(), String> {
        if !(self.tolerance > 0.0 && self.tolerance < 1.0) {
            return Err(format!(
                "horizon tolerance {} is not in (0, 1)",
                self.tolerance
            ));
        }
        if self.min_reps < 4 || self.min_reps > self.max_reps {
            return Err(format!(
                "horizon needs 4 ≤ min_reps ({}) ≤ max_reps ({})",
                self.min_reps, self.max_reps
            ));
        }
        if self.max_reps > 1 << 20 {
            return Err(format!(
                "horizon max_reps {} is more than 2^20",
                self.max_reps
            ));
        }
        Ok(())
    }
}

/// Why a long-horizon run stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The criterion held.
    Converged,
    /// A frame reached the lowest endurance (10^6 writes).
    Endurance,
    /// [`HorizonOptions::max_reps`] repetitions without convergence.
    MaxReps,
    /// The fixed number of repetitions asked for ([`Reps::Exactly`]).
    Fixed,
}

/// How many repetitions a run makes.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reps {
    /// Until the wear converges.
    Converge(HorizonOptions),
    /// Exactly this many (1: the trace once, as recorded).
    Exactly(u32),
}

impl Reps {
    /// The options a [`Convergence`] runs under, or why not.
    fn options(&self) -> Result<(HorizonOptions, bool), String> {
        match self {
            Reps::Converge(o) => o.check().map(|()| (o.clone(), false)),
            Reps::Exactly(n) if (1..=1 << 20).contains(n) => Ok((
                HorizonOptions {
                    min_reps: *n,
                    max_reps: *n,
                    // Never held long enough: the run stops at `n`.
                    stable: u32::MAX,
                    ..HorizonOptions::default()
                },
                true,
            )),
            Reps::Exactly(n) => Err(format!("{n} repetitions is not in 1..=2^20")),
        }
    }
}

/// One allocator's long-horizon result.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HorizonResult {
    /// Repetitions replayed.
    pub reps: u32,
    /// Why it stopped.
    pub stop: Stop,
    /// Seconds one repetition stands for.
    pub period_s: f64,
    /// Frames the wear is counted over.
    pub frames: u64,
    /// Writes to the most written frame at the end.
    pub max_writes: u64,
    /// Its fitted writes per repetition (`a`).
    pub max_per_rep: f64,
    /// Mean writes per frame per repetition (`x`).
    pub mean_per_rep: f64,
    /// `x / a`: the fraction of the ideal, perfectly even lifetime.
    pub fraction_of_ideal: f64,
    /// Years until the first frame fails at each of [`ENDURANCES`];
    /// `None` when nothing is written.
    pub years_to_first_failure: [Option<f64>; 3],
    /// Years a perfectly even allocator would last at each endurance.
    pub ideal_years: [Option<f64>; 3],
    /// Frames written at least once per repetition on average at the end
    /// (`w ≥ k`): the frames an allocator recycles every time the trace
    /// comes round, rather than spreading over memory.
    pub recycled_frames: u64,
    /// Their share of all writes.
    pub recycled_share: f64,
    /// `M(k)` after every repetition, for plots and checks.
    pub max_series: Vec<u64>,
}

/// Least-squares slope of `M(j)` over repetitions `lo+1..=hi` (1-based
/// repetition numbers; `series[j-1]` is `M(j)`).
fn slope(series: &[u64], lo: usize, hi: usize) -> Option<f64> {
    let n = hi.checked_sub(lo)?;
    if n < 2 {
        return None;
    }
    let xs = (lo + 1..=hi).map(|j| j as f64);
    let mean_x = xs.clone().sum::<f64>() / n as f64;
    let mean_y = series[lo..hi].iter().map(|&m| m as f64).sum::<f64>() / n as f64;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (x, &y) in xs.zip(&series[lo..hi]) {
        sxy += (x - mean_x) * (y as f64 - mean_y);
        sxx += (x - mean_x) * (x - mean_x);
    }
    Some(sxy / sxx)
}

/// Follows `M(k)` repetition by repetition and says when to stop.
#[derive(Clone, Debug)]
pub struct Convergence {
    opts: HorizonOptions,
    series: Vec<u64>,
    held: u32,
}

impl Convergence {
    /// Nothing seen yet.
    pub fn new(opts: HorizonOptions) -> Convergence {
        Convergence {
            opts,
            series: Vec::new(),
            held: 0,
        }
    }

    /// The slope over the later window `(k/2, k]`.
    fn late_slope(&self) -> Option<f64> {
        let k = self.series.len();
        slope(&self.series, k / 2, k)
    }

    /// Records `M(k)` after repetition `k = self.reps() + 1`; `Some` when
    /// the run should stop.
    pub fn push(&mut self, max_writes: u64) -> Option<Stop> {
        self.series.push(max_writes);
        let k = self.series.len();
        if max_writes as f64 >= ENDURANCES[0] {
            return Some(Stop::Endurance);
        }
        // Both windows need repetitions in them (a fixed run may be as
        // short as one).
        if k >= self.opts.min_reps as usize && k >= 4 {
            let late = slope(&self.series, k / 2, k);
            let early = slope(&self.series, k / 4, k / 2);
            // The max moves in whole writes: the later window must hold
            // enough of them that one more or less is within tolerance
            // (half a step of error each end of a least-squares fit).
            let steps = max_writes - self.series[k / 2 - 1];
            let enough = steps as f64 >= (0.5 / self.opts.tolerance).ceil();
            let agree = match (late, early) {
                (Some(a), Some(b)) if a > 0.0 => enough && (a - b).abs() <= self.opts.tolerance * a,
                // A flat max is no steady state while anything is written
                // (the writes are spreading over fresh frames); nothing
                // written at all is.
                _ => max_writes == 0,
            };
            self.held = if agree { self.held + 1 } else { 0 };
            if self.held >= self.opts.stable {
                return Some(Stop::Converged);
            }
        }
        (k >= self.opts.max_reps as usize).then_some(Stop::MaxReps)
    }

    /// Repetitions seen.
    pub fn reps(&self) -> u32 {
        self.series.len() as u32
    }

    /// The figures, given why the run stopped, the total writes of the
    /// whole run, the frames counted and the period in seconds.
    pub fn result(self, stop: Stop, writes: &[u32], period_s: f64) -> HorizonResult {
        let total_writes: u64 = writes.iter().map(|&w| u64::from(w)).sum();
        let frames = writes.len() as u64;
        let reps = self.series.len() as u64;
        let (recycled_frames, recycled_writes) = writes
            .iter()
            .filter(|&&w| reps > 0 && u64::from(w) >= reps)
            .fold((0u64, 0u64), |(n, s), &w| (n + 1, s + u64::from(w)));
        let k = self.series.len();
        let max_writes = self.series.last().copied().unwrap_or(0);
        // Too short a run to fit: the mean growth so far.
        let a = self.late_slope().filter(|a| *a > 0.0).unwrap_or(if k > 0 {
            max_writes as f64 / k as f64
        } else {
            0.0
        });
        let x = if k == 0 || frames == 0 {
            0.0
        } else {
            total_writes as f64 / frames as f64 / k as f64
        };
        let years = |reps: f64| reps * period_s / SECONDS_PER_YEAR;
        HorizonResult {
            reps: k as u32,
            stop,
            period_s,
            frames,
            max_writes,
            max_per_rep: a,
            mean_per_rep: x,
            fraction_of_ideal: if a > 0.0 { (x / a).min(1.0) } else { 1.0 },
            years_to_first_failure: ENDURANCES.map(|e| {
                if a <= 0.0 {
                    None
                } else if max_writes as f64 >= e {
                    // Reached within the run: when it did.
                    let at = self
                        .series
                        .iter()
                        .position(|&m| m as f64 >= e)
                        .unwrap_or(k - 1);
                    Some(years(at as f64 + 1.0))
                } else {
                    Some(years(k as f64 + (e - max_writes as f64) / a))
                }
            }),
            ideal_years: ENDURANCES.map(|e| (x > 0.0).then(|| years(e / x))),
            recycled_frames,
            recycled_share: if total_writes == 0 {
                0.0
            } else {
                recycled_writes as f64 / total_writes as f64
            },
            max_series: self.series,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(opts: &HorizonOptions, mut m: impl FnMut(u32) -> u64) -> (Stop, Convergence) {
        let mut c = Convergence::new(opts.clone());
        for k in 1.. {
            if let Some(stop) = c.push(m(k)) {
                return (stop, c);
            }
        }
        unreachable!()
    }

    #[test]
    fn a_hot_frame_converges_at_once_with_hand_computed_years() {
        // The same frame written twice per repetition: M(k) = 2k. Eight
        // frames, 2 writes per repetition: x = 0.25, fraction 0.125. A
        // 4-second period: 10^6 writes after 500,000 repetitions.
        let opts = HorizonOptions::default();
        let (stop, c) = run(&opts, |k| 2 * u64::from(k));
        assert_eq!(stop, Stop::Converged);
        // From k = 9 the later window holds 10 writes (M(9) - M(4)); 3 in a row.
        let k = c.reps();
        assert_eq!(k, 11);
        let mut writes = vec![0u32; 8];
        writes[3] = 2 * k;
        let r = c.result(stop, &writes, 4.0);
        assert_eq!((r.recycled_frames, r.recycled_share), (1, 1.0));
        assert!((r.max_per_rep - 2.0).abs() < 1e-12);
        assert!((r.mean_per_rep - 0.25).abs() < 1e-12);
        assert!((r.fraction_of_ideal - 0.125).abs() < 1e-12);
        let y = r.years_to_first_failure[0].unwrap();
        assert!(
            (y - 500_000.0 * 4.0 / SECONDS_PER_YEAR).abs() < 1e-12,
            "{y}"
        );
        let ideal = r.ideal_years[0].unwrap();
        assert!((ideal - 4_000_000.0 * 4.0 / SECONDS_PER_YEAR).abs() < 1e-9);
    }

    #[test]
    fn spreading_is_not_mistaken_for_convergence() {
        // Writes spread over fresh frames: the max stays 1 for 100
        // repetitions, then grows by one every 100 (a perfectly even
        // allocator over 100x the trace's footprint).
        let opts = HorizonOptions::default();
        let (stop, c) = run(&opts, |k| u64::from(k).div_ceil(100));
        assert_eq!(stop, Stop::Converged);
        assert!(c.reps() > 1000, "stopped after {} repetitions", c.reps());
        // One write per repetition over 100 frames: x = 0.01.
        let total = c.reps();
        let writes: Vec<u32> = (0..100)
            .map(|i| total / 100 + u32::from(i < total % 100))
            .collect();
        let r = c.result(stop, &writes, 1.0);
        assert_eq!(r.recycled_frames, 0);
        assert!(
            (r.max_per_rep - 0.01).abs() < 0.01 * 0.05,
            "{}",
            r.max_per_rep
        );
        assert!(r.fraction_of_ideal > 0.95, "{}", r.fraction_of_ideal);
    }

    #[test]
    fn endurance_and_max_reps_stop_the_run() {
        let opts = HorizonOptions {
            max_reps: 50,
            ..HorizonOptions::default()
        };
        // Hotter every repetition: never converges.
        let (stop, c) = run(&opts, |k| u64::from(k) * u64::from(k));
        assert_eq!((stop, c.reps()), (Stop::MaxReps, 50));
        let (stop, c) = run(&opts, |k| u64::from(k) * 400_000);
        assert_eq!(stop, Stop::Endurance);
        let r = c.result(stop, &[0], 1.0);
        // 10^6 reached at repetition 3.
        assert!((r.years_to_first_failure[0].unwrap() - 3.0 / SECONDS_PER_YEAR).abs() < 1e-15);
    }
}

// ---------------------------------------------------------------------
// The driver: repetitions through one allocator, state carried over.
// ---------------------------------------------------------------------

use nvmos_frames::{AllocError, Pfn, Zone, ZoneMap};
use nvmos_trace::{Accounting, Event};

use crate::allocators::{AllocatorJob, AllocatorKind, Setup, StudyAllocator};
use crate::levelling::{HotMigrate, HotMigrateOptions, HotMigrateStats};
use crate::replay::{Engine, Migrating, Placement, Recorded, ReplayError};
use crate::wear::{WearCounter, WriteModel};

/// One allocator's long-horizon row.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HorizonRow {
    /// The allocator's name, or [`crate::AS_RECORDED`].
    pub allocator: String,
    /// The figures.
    pub result: HorizonResult,
    /// The first repetition's accounting (every later one repeats the
    /// trace; its blocks live at the end are met again as allocations of a
    /// live pfn in the next).
    pub first_rep: Accounting,
    /// Allocations the allocator refused, over the whole run.
    pub refused: u64,
    /// Frames written outside the replayed memory, over the whole run.
    pub outside: u64,
    /// Wall-clock milliseconds of the run.
    pub elapsed_ms: f64,
    /// For a trace with sampled writes: the write-weighted wear over the
    /// whole run (every repetition's sampled writes land where that
    /// repetition placed their blocks, over the run's length, repetitions
    /// × period), beside the allocation-only figures of `result`; the
    /// correlation is between the run's allocations and sampled writes
    /// per frame. `None` for a trace without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<crate::writes::WriteWear>,
}

/// Why a long-horizon run failed.
#[derive(Debug, thiserror::Error)]
pub enum HorizonError {
    /// Bad options.
    #[error("{0}")]
    Options(String),
    /// The memory layout.
    #[error("memory layout")]
    Layout(#[from] nvmos_frames::ConfigError),
    /// The allocator refused to free its own block: a bug in it.
    #[error("repetition {rep}, event {event}: the allocator refused to free its own block {pfn} (order {order}): {error}")]
    Allocator {
        /// 1-based repetition.
        rep: u32,
        /// 0-based event of the whole run.
        event: u64,
        /// The block.
        pfn: Pfn,
        /// Its order.
        order: nvmos_frames::Order,
        /// What it said.
        #[source]
        error: AllocError,
    },
    /// A migration pass moved a block no traced block is placed at.
    #[error("repetition {rep}, event {event}: migration moved {old}, which holds no traced block")]
    LostMove {
        /// 1-based repetition.
        rep: u32,
        /// 0-based event of the whole run.
        event: u64,
        /// The reported old first frame.
        old: Pfn,
    },
}

impl HorizonError {
    fn of(rep: u32, e: ReplayError<std::convert::Infallible>) -> HorizonError {
        match e {
            ReplayError::Trace(never) => match never {},
            ReplayError::Allocator {
                event,
                pfn,
                order,
                error,
            } => HorizonError::Allocator {
                rep,
                event,
                pfn,
                order,
                error,
            },
            ReplayError::LostMove { event, old, .. } => HorizonError::LostMove { rep, event, old },
        }
    }
}

/// The period one repetition stands for: first to last event plus one
/// mean gap between events, so the next repetition's first event follows
/// the last as the trace's own events follow each other.
pub fn period_ns(events: &[Event]) -> u64 {
    match (events.first(), events.last()) {
        (Some(first), Some(last)) if events.len() > 1 => {
            let span = last.time_ns.saturating_sub(first.time_ns);
            (span + span / (events.len() as u64 - 1)).max(1)
        }
        _ => 1,
    }
}

struct Run<'a> {
    events: &'a [Event],
    map: ZoneMap,
    model: WriteModel,
    opts: &'a HorizonOptions,
    /// The run stops at `opts.max_reps` by design ([`Reps::Exactly`]).
    fixed: bool,
    migrate_every_ns: Option<u64>,
    /// Converge on, and report in `result`, the write-weighted wear
    /// (sampled writes plus migration copies) instead of the allocation
    /// wear.
    on_written: bool,
    /// Hot-page migration over the allocator.
    policy: Option<HotMigrateOptions>,
}

struct Outcome {
    result: HorizonResult,
    first_rep: Accounting,
    refused: u64,
    outside: u64,
    writes: Option<crate::writes::WriteWear>,
    /// With `on_written`: the write-weighted wear per frame at the end.
    written: Option<Vec<u32>>,
    pages_migrated: u64,
    attributed: u64,
    policy: Option<HotMigrateStats>,
}

impl Run<'_> {
    /// Feeds the trace to the one replay engine again and again, times
    /// shifted by a period each time, until the wear converges.
    fn drive<P: Placement + ?Sized>(self, place: &mut P) -> Result<Outcome, HorizonError> {
        let period = period_ns(self.events);
        let mut engine = Engine::new(self.migrate_every_ns);
        let mut wear = WearCounter::new(self.map, self.model);
        let mut conv = Convergence::new(self.opts.clone());
        let mut first_rep = None;
        let stop = loop {
            let rep = conv.reps() + 1;
            let shift = u64::from(rep - 1).saturating_mul(period);
            let events = self
                .events
                .iter()
                .map(|&e| Ok::<_, std::convert::Infallible>(e));
            engine
                .feed(place, &mut wear, events, shift)
                .map_err(|e| HorizonError::of(rep, e))?;
            if first_rep.is_none() {
                first_rep = Some(engine.stats().accounting);
            }
            let max = if self.on_written {
                wear.max_written()
            } else {
                wear.writes().iter().copied().max().unwrap_or(0)
            };
            if let Some(stop) = conv.push(u64::from(max)) {
                break match stop {
                    Stop::MaxReps if self.fixed => Stop::Fixed,
                    stop => stop,
                };
            }
        };
        let first_rep = first_rep.unwrap_or_default();
        let reps = u64::from(conv.reps());
        // Every repetition feeds the same sampled writes; the run lasts
        // `reps` periods.
        let writes = crate::writes::WriteWear::of(
            &wear,
            first_rep.write_samples.saturating_mul(reps),
            period.saturating_mul(reps),
        );
        let written = self.on_written.then(|| {
            wear.written_with_copies()
                .unwrap_or_else(|| vec![0; wear.writes().len()])
        });
        let stats = engine.stats();
        Ok(Outcome {
            result: conv.result(
                stop,
                written.as_deref().unwrap_or(wear.writes()),
                period as f64 / 1e9,
            ),
            first_rep,
            refused: stats.alloc_failures,
            outside: wear.outside,
            writes,
            written,
            pages_migrated: stats.pages_migrated,
            attributed: stats.writes.attributed,
            policy: None,
        })
    }
}

impl AllocatorJob for Run<'_> {
    type Output = Result<Outcome, HorizonError>;
    fn run<A: StudyAllocator + 'static>(self, alloc: A) -> Self::Output {
        match self.policy {
            None => self.drive(&mut Migrating(&alloc)),
            Some(opts) => {
                let mut policy = HotMigrate::new(Migrating(&alloc), self.map.clone(), opts);
                let mut outcome = self.drive(&mut policy)?;
                outcome.policy = Some(policy.stats().clone());
                Ok(outcome)
            }
        }
    }
}

fn row(allocator: String, started: std::time::Instant, o: Outcome) -> HorizonRow {
    HorizonRow {
        allocator,
        result: o.result,
        first_rep: o.first_rep,
        refused: o.refused,
        outside: o.outside,
        elapsed_ms: started.elapsed().as_secs_f64() * 1e3,
        writes: o.writes,
    }
}

/// Replays `events` again and again through a fresh allocator of `kind`
/// over `zones` for `cpus` CPUs, until the wear converges (see the module
/// documentation).
pub fn horizon_allocator<L>(
    kind: AllocatorKind,
    zones: &[Zone],
    cpus: u32,
    events: &[Event],
    model: WriteModel,
    opts: &HorizonOptions,
) -> Result<HorizonRow, HorizonError>
where
    L: lock_api::RawMutex + Send + Sync + 'static,
{
    opts.check().map_err(HorizonError::Options)?;
    let started = std::time::Instant::now();
    let setup = Setup::new(zones, cpus.max(1)).fit_banks();
    let run = Run {
        events,
        map: ZoneMap::new(zones)?,
        model,
        opts,
        fixed: false,
        migrate_every_ns: kind
            .caps()
            .migrates
            .then(|| crate::evaluate::StudyOptions::default().migrate_every_ns),
        on_written: false,
        policy: None,
    };
    let outcome = kind.with::<L, _>(&setup, run)??;
    Ok(row(kind.name().to_owned(), started, outcome))
}

/// A long-horizon run on the write-weighted wear: see [`horizon_written`].
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WrittenHorizon {
    /// The row; its `result` is of the write-weighted wear (sampled
    /// writes plus migration copies), which the run converged on.
    pub row: HorizonRow,
    /// Sampled writes placed on our frames over the whole run (the demand
    /// writes).
    pub demand_writes: u64,
    /// Pages copied by migration over the whole run (the policy's and the
    /// allocator's own).
    pub pages_migrated: u64,
    /// What hot-page migration did, when it ran.
    pub policy: Option<HotMigrateStats>,
    /// Frames never written over the whole run (no sampled write, no
    /// copy): memory the placement never brought into use for written
    /// data.
    pub unwritten_frames: u64,
    /// The write-weighted wear per frame at the end (dense zone order):
    /// what hardware levelling is put beneath.
    #[serde(skip)]
    pub written: Vec<u32>,
}

impl WrittenHorizon {
    /// Extra writes: pages copied, percent of the demand writes.
    pub fn extra_writes_pct(&self) -> f64 {
        if self.demand_writes == 0 {
            0.0
        } else {
            100.0 * self.pages_migrated as f64 / self.demand_writes as f64
        }
    }
}

/// Replays `events` again and again through a fresh allocator of `kind`
/// (with hot-page migration over it when `policy` is given) until the
/// *write-weighted* wear converges: the most written frame's sampled
/// writes plus migration copies per repetition. For traces recorded with
/// `--writes`.
pub fn horizon_written<L>(
    kind: AllocatorKind,
    zones: &[Zone],
    cpus: u32,
    events: &[Event],
    model: WriteModel,
    reps: &Reps,
    policy: Option<HotMigrateOptions>,
) -> Result<WrittenHorizon, HorizonError>
where
    L: lock_api::RawMutex + Send + Sync + 'static,
{
    let (opts, fixed) = reps.options().map_err(HorizonError::Options)?;
    let opts = &opts;
    if let Some(p) = &policy {
        p.check().map_err(HorizonError::Options)?;
    }
    let started = std::time::Instant::now();
    let setup = Setup::new(zones, cpus.max(1)).fit_banks();
    let own = kind
        .caps()
        .migrates
        .then(|| crate::evaluate::StudyOptions::default().migrate_every_ns);
    let run = Run {
        events,
        map: ZoneMap::new(zones)?,
        model,
        opts,
        fixed,
        // The policy's passes run every epoch (the allocator's own
        // migration, if any, runs in them).
        migrate_every_ns: policy.map(|p| p.epoch_ns).or(own),
        on_written: true,
        policy,
    };
    let mut outcome = kind.with::<L, _>(&setup, run)??;
    let written = outcome.written.take().unwrap_or_default();
    let (demand_writes, pages_migrated, policy) = (
        outcome.attributed,
        outcome.pages_migrated,
        outcome.policy.take(),
    );
    let name = match &policy {
        Some(_) => format!("{} + hot-migrate", kind.name()),
        None => kind.name().to_owned(),
    };
    Ok(WrittenHorizon {
        row: row(name, started, outcome),
        demand_writes,
        pages_migrated,
        policy,
        unwritten_frames: written.iter().filter(|&&w| w == 0).count() as u64,
        written,
    })
}

/// The kernel's own placement repeated: every repetition writes the same
/// frames, counted over `zones`.
pub fn horizon_as_recorded(
    zones: &[Zone],
    events: &[Event],
    model: WriteModel,
    opts: &HorizonOptions,
) -> Result<HorizonRow, HorizonError> {
    opts.check().map_err(HorizonError::Options)?;
    let started = std::time::Instant::now();
    let run = Run {
        events,
        map: ZoneMap::new(zones)?,
        model,
        opts,
        fixed: false,
        migrate_every_ns: None,
        on_written: false,
        policy: None,
    };
    let outcome = run.drive(&mut Recorded::default())?;
    Ok(row(crate::AS_RECORDED.to_owned(), started, outcome))
}

#[cfg(test)]
mod driver_tests {
    use super::*;
    use nvmos_frames::{MigrateType, Order};
    use nvmos_trace::Op;

    type Lock = parking_lot::RawMutex;

    /// Two allocate-free pairs at 0, 1, 2 and 3 s: a 4-second period.
    fn pairs() -> Vec<Event> {
        let e = |t: u64, op| Event {
            time_ns: t * 1_000_000_000,
            cpu: 0,
            op,
            pfn: Pfn(100),
            order: Order::ZERO,
        };
        let a = Op::Alloc(MigrateType::Movable);
        vec![e(0, a), e(1, Op::Free), e(2, a), e(3, Op::Free)]
    }

    #[test]
    fn the_buddy_reuses_one_frame_forever_hand_computed() {
        // The buddy system hands the frame just freed out again: one frame
        // takes both writes of every repetition, M(k) = 2k over 8 frames.
        // a = 2, x = 2/8: 12.5 % of the ideal; 10^6 writes after 500,000
        // repetitions of 4 s = 0.0634 years; ideal 4·10^6 reps = 0.507.
        let events = pairs();
        assert_eq!(period_ns(&events), 4_000_000_000);
        let row = horizon_allocator::<Lock>(
            AllocatorKind::Buddy,
            &[Zone::new(0, 8)],
            1,
            &events,
            WriteModel::default(),
            &HorizonOptions::default(),
        )
        .unwrap();
        let r = &row.result;
        assert_eq!((r.stop, r.reps, r.max_writes), (Stop::Converged, 11, 22));
        assert!((r.max_per_rep - 2.0).abs() < 1e-9);
        assert!((r.fraction_of_ideal - 0.125).abs() < 1e-9);
        let y = r.years_to_first_failure.map(Option::unwrap);
        let per_year = SECONDS_PER_YEAR;
        assert!((y[0] - 500_000.0 * 4.0 / per_year).abs() < 1e-9, "{y:?}");
        assert!((y[2] - 50_000_000.0 * 4.0 / per_year).abs() < 1e-6, "{y:?}");
        assert!((r.ideal_years[0].unwrap() - 16e6 / per_year).abs() < 1e-9);
        assert_eq!((row.refused, row.outside), (0, 0));
        assert_eq!(row.first_rep.events_read, 4);
    }

    #[test]
    fn ibuddy_spreads_over_every_frame_in_the_long_run() {
        // iBuddy hands out the frames in turn: each of the 8 is written
        // once every 4 repetitions, so the converged lifetime is the
        // ideal one.
        let row = horizon_allocator::<Lock>(
            AllocatorKind::IBuddy,
            &[Zone::new(0, 8)],
            1,
            &pairs(),
            WriteModel::default(),
            &HorizonOptions::default(),
        )
        .unwrap();
        let r = &row.result;
        assert_eq!(r.stop, Stop::Converged);
        assert!((r.mean_per_rep - 0.25).abs() < 1e-9);
        assert!(r.fraction_of_ideal > 0.95, "{r:?}");
    }

    #[test]
    fn sampled_writes_are_weighted_over_every_repetition() {
        // pairs() with two sampled writes of the live frame in the first
        // pair and one in the second: the buddy places both pairs on one
        // frame, so it takes all 3 sampled writes of every repetition;
        // iBuddy moves the block to a new frame each time.
        let w = |t: u64| Event {
            time_ns: t * 1_000_000_000 + 500_000_000,
            cpu: 0,
            op: Op::Write,
            pfn: Pfn(100),
            order: Order::ZERO,
        };
        let mut events = pairs();
        events.insert(1, w(0));
        events.insert(2, w(0));
        events.insert(5, w(2));
        for (kind, hot_per_rep) in [(AllocatorKind::Buddy, 3.0), (AllocatorKind::IBuddy, 0.0)] {
            let row = horizon_allocator::<Lock>(
                kind,
                &[Zone::new(0, 8)],
                1,
                &events,
                WriteModel::default(),
                &HorizonOptions::default(),
            )
            .unwrap();
            let reps = u64::from(row.result.reps);
            let ww = row
                .writes
                .expect("a trace with writes gets write-weighted wear");
            assert_eq!(ww.wear.total_writes, 3 * reps, "{kind:?}");
            assert_eq!(ww.outside, 0);
            if hot_per_rep > 0.0 {
                assert_eq!(ww.wear.max as f64, hot_per_rep * reps as f64, "{kind:?}");
            } else {
                // Spread: no frame takes every repetition's writes.
                assert!(ww.wear.max < 3 * reps, "{kind:?}: {:?}", ww.wear.max);
            }
        }
        // A trace without writes has none.
        let row = horizon_allocator::<Lock>(
            AllocatorKind::Buddy,
            &[Zone::new(0, 8)],
            1,
            &pairs(),
            WriteModel::default(),
            &HorizonOptions::default(),
        )
        .unwrap();
        assert!(row.writes.is_none());
    }

    #[test]
    fn live_blocks_carry_over_and_are_freed_by_the_next_repetition() {
        // Allocated and never freed in the trace: each repetition's
        // allocation finds the last one's block live and gives it back,
        // so the allocator never runs out.
        let e = |t, pfn| Event {
            time_ns: t,
            cpu: 0,
            op: Op::Alloc(MigrateType::Movable),
            pfn: Pfn(pfn),
            order: Order::ZERO,
        };
        let events = vec![e(0, 1), e(1, 2)];
        let row = horizon_allocator::<Lock>(
            AllocatorKind::Buddy,
            &[Zone::new(0, 2)],
            1,
            &events,
            WriteModel::default(),
            &HorizonOptions::default(),
        )
        .unwrap();
        assert_eq!(row.refused, 0);
        assert_eq!(row.result.stop, Stop::Converged);
    }
}

// ---------------------------------------------------------------------
// The study: traces × allocators, Options → run → Study.
// ---------------------------------------------------------------------

use std::path::{Path, PathBuf};

use nvmos_trace::{Accumulator, Checked, EventSource, Limits, MachineInfo, Needs, TraceError};

/// What the long-horizon study runs.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Options {
    /// Trace files (`.nvt`, ftrace or `perf script` text).
    pub traces: Vec<PathBuf>,
    /// Allocators, in order.
    pub allocators: Vec<AllocatorKind>,
    /// Also repeat the kernel's own placement (needs the recorded zones).
    pub as_recorded: bool,
    /// Memory as one zone of this many frames; `None`: the recorded
    /// machine's zones, or for a text trace what it needs (inferred).
    pub memory_frames: Option<u64>,
    /// CPUs; `None`: the recorded machine's, or what a text trace needs.
    pub cpus: Option<u32>,
    /// How allocations turn into writes.
    pub model: WriteModel,
    /// When to stop repeating.
    pub horizon: HorizonOptions,
    /// Rows run at once (each on its own thread).
    pub threads: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            traces: Vec::new(),
            allocators: AllocatorKind::ALL.to_vec(),
            as_recorded: true,
            memory_frames: None,
            cpus: None,
            model: WriteModel::default(),
            horizon: HorizonOptions::default(),
            threads: 2,
        }
    }
}

/// Progress reports while the study runs.
#[derive(Clone, Debug)]
pub enum Progress<'a> {
    /// A trace was read.
    Trace {
        /// Its name.
        name: &'a str,
        /// Events in it.
        events: u64,
    },
    /// One allocator finished on a trace.
    Row {
        /// The trace.
        trace: &'a str,
        /// The row.
        row: &'a HorizonRow,
    },
}

/// One trace's long-horizon rows.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TraceHorizon {
    /// Short name (the file stem).
    pub trace: String,
    /// The file.
    pub source: String,
    /// Events in one repetition.
    pub events: u64,
    /// What the trace needs (highest pfn + block, highest CPU + 1).
    pub needs: Option<Needs>,
    /// Frames replayed over.
    pub memory_frames: u64,
    /// CPUs the allocators serve.
    pub cpus: u32,
    /// Whether memory and CPUs were inferred from the events (a text
    /// trace without a machine header and no `--memory`/`--cpus`).
    pub inferred: bool,
    /// One repetition's accounting, as `trace info` reports it.
    pub accounting: Accounting,
    /// `AS_RECORDED` first when asked for, then the allocators.
    pub rows: Vec<HorizonRow>,
}

/// The whole long-horizon study.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Study {
    /// How it was run.
    pub options: Options,
    /// The convergence criterion, in words.
    pub criterion: String,
    /// One entry per trace.
    pub traces: Vec<TraceHorizon>,
}

/// Why the study could not run.
#[derive(Debug, thiserror::Error)]
pub enum StudyFailure {
    /// A trace could not be read, or does not fit the machine asked for.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A trace has no events.
    #[error("{0}: no page-allocation events to repeat")]
    Empty(PathBuf),
    /// A row failed.
    #[error("{trace}, {allocator}: {error}")]
    Row {
        /// The trace.
        trace: String,
        /// The allocator.
        allocator: String,
        /// What went wrong.
        #[source]
        error: HorizonError,
    },
    /// Bad options.
    #[error("{0}")]
    Options(String),
}

/// A trace read whole, with the machine to replay it on.
pub struct LoadedTrace {
    /// The events.
    pub events: Vec<Event>,
    /// The recorded machine, when the trace has a header.
    pub machine: Option<MachineInfo>,
    /// What the events need.
    pub needs: Option<Needs>,
    /// The accounting of one pass.
    pub accounting: Accounting,
    /// Zones to replay over.
    pub zones: Vec<Zone>,
    /// CPUs to serve.
    pub cpus: u32,
    /// Whether zones and CPUs were inferred from the events.
    pub inferred: bool,
}

/// Reads `path` whole, refusing it at the first event beyond an explicit
/// `memory_frames` or `cpus` (naming pfn or CPU and line), and decides the
/// machine: the explicit one, else the recorded one, else (a text trace)
/// the one the events need.
pub fn load(
    path: &Path,
    memory_frames: Option<u64>,
    cpus: Option<u32>,
) -> Result<LoadedTrace, TraceError> {
    let source = nvmos_trace::open(path)?;
    let mut source = Checked::new(
        source,
        path,
        Limits {
            frames: memory_frames,
            cpus,
        },
    );
    let mut acc = Accumulator::new();
    let mut events = Vec::new();
    for e in &mut source {
        let e = e?;
        acc.add(&e);
        events.push(e);
    }
    let header = source.header().cloned();
    let info = acc.finish(source.format(), header.clone(), source.counts());
    let needs = Needs::of(&info);
    let machine = header.and_then(|h| h.machine);
    let inferred = machine.is_none() && (memory_frames.is_none() || cpus.is_none());
    let zones = match (memory_frames, &machine) {
        (Some(frames), _) => vec![Zone::new(0, frames)],
        (None, Some(m)) => crate::evaluate::recorded_zones(m),
        (None, None) => vec![Zone::new(0, needs.map_or(1, |n| n.frames))],
    };
    let cpus = match (cpus, &machine) {
        (Some(c), _) => c,
        // A header that names fewer CPUs than the events use is wrong:
        // the events win.
        (None, Some(m)) => m.cpus.max(needs.map_or(1, |n| n.cpus)),
        (None, None) => needs.map_or(1, |n| n.cpus),
    };
    Ok(LoadedTrace {
        events,
        machine,
        needs,
        accounting: info.accounting,
        zones,
        cpus,
        inferred,
    })
}

/// Runs the study.
pub fn run(opts: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Study, StudyFailure> {
    opts.horizon.check().map_err(StudyFailure::Options)?;
    if opts.traces.is_empty() {
        return Err(StudyFailure::Options("no traces given".into()));
    }
    if opts.threads == 0 || opts.threads > 64 {
        return Err(StudyFailure::Options(format!(
            "threads {} is not in 1..=64",
            opts.threads
        )));
    }
    let mut traces = Vec::new();
    let names = crate::evaluate::trace_names(&opts.traces);
    for (path, name) in opts.traces.iter().zip(names) {
        let t = load(path, opts.memory_frames, opts.cpus)?;
        if t.events.is_empty() {
            return Err(StudyFailure::Empty(path.clone()));
        }
        progress(Progress::Trace {
            name: &name,
            events: t.events.len() as u64,
        });
        // Rows in order: the kernel's placement first.
        let jobs: Vec<Option<AllocatorKind>> = opts
            .as_recorded
            .then_some(None)
            .into_iter()
            .chain(opts.allocators.iter().map(|&k| Some(k)))
            .collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..opts.threads.min(jobs.len()) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&job) = jobs.get(i) else { break };
                    let row = match job {
                        None => horizon_as_recorded(&t.zones, &t.events, opts.model, &opts.horizon),
                        Some(kind) => horizon_allocator::<nvmos_frames::sync::SpinYield>(
                            kind,
                            &t.zones,
                            t.cpus,
                            &t.events,
                            opts.model,
                            &opts.horizon,
                        ),
                    };
                    results
                        .lock()
                        .expect("no panic holding it")
                        .push((i, job, row));
                });
            }
        });
        let mut results = results.into_inner().expect("no panic holding it");
        results.sort_by_key(|r| r.0);
        let mut rows = Vec::new();
        for (_, job, row) in results {
            let row = row.map_err(|error| StudyFailure::Row {
                trace: name.clone(),
                allocator: job.map_or(crate::AS_RECORDED.to_owned(), |k| k.name().to_owned()),
                error,
            })?;
            progress(Progress::Row {
                trace: &name,
                row: &row,
            });
            rows.push(row);
        }
        traces.push(TraceHorizon {
            trace: name,
            source: path.display().to_string(),
            events: t.events.len() as u64,
            needs: t.needs,
            memory_frames: t.zones.iter().map(|z| z.end.0 - z.start.0).sum(),
            cpus: t.cpus,
            inferred: t.inferred,
            accounting: t.accounting,
            rows,
        });
    }
    Ok(Study {
        options: opts.clone(),
        criterion: opts.horizon.criterion(),
        traces,
    })
}

#[cfg(test)]
mod study_tests {
    use super::*;

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../trace/tests/data/every_case.txt")
    }

    fn opts() -> Options {
        Options {
            traces: vec![fixture()],
            allocators: vec![AllocatorKind::Buddy, AllocatorKind::IBuddy],
            as_recorded: true,
            ..Options::default()
        }
    }

    #[test]
    fn a_text_trace_gets_the_machine_it_needs_and_says_so() {
        let study = run(&opts(), &mut |_| {}).unwrap();
        let t = &study.traces[0];
        assert!(t.inferred);
        assert_eq!((t.memory_frames, t.cpus), (0x5556, 3));
        assert_eq!(t.accounting.lost_events, 5);
        assert_eq!(t.rows.len(), 3);
        assert!(t.rows.iter().all(|r| r.refused == 0 && r.outside == 0));
    }

    #[test]
    fn too_little_memory_or_too_few_cpus_are_refused_naming_pfn_cpu_and_line() {
        let small = Options {
            memory_frames: Some(0x4000),
            ..opts()
        };
        let e = run(&small, &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("every_case.txt:11: pfn 0x5555 (order 0)"), "{e}");
        let few = Options {
            cpus: Some(2),
            ..opts()
        };
        let e = run(&few, &mut |_| {}).unwrap_err().to_string();
        assert!(
            e.contains("every_case.txt:13: CPU 2 is beyond the 2 CPUs"),
            "{e}"
        );
        // Exactly enough is fine.
        let exact = Options {
            memory_frames: Some(0x5556),
            cpus: Some(3),
            ..opts()
        };
        let study = run(&exact, &mut |_| {}).unwrap();
        assert!(!study.traces[0].inferred);
    }
}
