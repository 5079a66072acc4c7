//! Seed 001's evaluation on this machine (`nvmos bench pmo`). Each
//! workload (see [`crate::kernels`]) runs in every mode: no encryption,
//! decrypt at fault (the prior design), DRAM as cache, and DRAM cache with
//! each predictor at each prediction depth; the median of `rounds` runs is
//! kept. The figure of merit is seed 001's: the speed-up of DRAM cache
//! with prediction (best depth) over decrypt-at-fault, held against the
//! seed's 1.81× as a [`Check`] per workload. Also measured, in the same
//! run: attach and first-touch cost per page in each mode, against a plain
//! kernel page fault and the bare userfaultfd round trip.

use std::sync::Arc;
use std::time::Instant;

use nvmos_measure::stats::median_index;
use nvmos_pmo::attach::mem_backing::{MemBacking, PAGE_SIZE};
use nvmos_pmo::attach::predict::PredictorKind;
use nvmos_pmo::attach::{cache, probe, Attachment, Mode, Perm, Tuning};
use nvmos_sim::study::{Bound, Check, Progress, Scale, Study};
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::kernels::{self, Session, Sizes, Workload};
use crate::{BenchError, Context};

type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Seed 001's result: DRAM cache with prediction over the original design.
pub const SEED_SPEEDUP: f64 = 1.81;
/// Seed 001's best prediction depth on average.
pub const SEED_BEST_DEPTH: usize = 8;

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PmoBenchOptions {
    /// Workloads, in table order.
    pub workloads: Vec<Workload>,
    /// Predictors run at every depth.
    pub predictors: Vec<PredictorKind>,
    /// Prediction depths (0: DRAM cache, no prediction).
    pub depths: Vec<usize>,
    /// Runs per cell, taken in rounds over every mode in turn; the median
    /// is kept.
    pub rounds: u32,
    /// Pages of the object in the first-touch measurement.
    pub touch_pages: usize,
    /// Problem sizes.
    pub sizes: Sizes,
    /// Seed for the data and the file server's operations.
    pub seed: u64,
    /// How the fault path runs in every mode (handler spin, prediction
    /// workers, run length).
    pub tuning: Tuning,
}

impl Default for PmoBenchOptions {
    /// The full run: every workload, predictor and depth 0–16 at the
    /// full sizes, median of 3.
    fn default() -> Self {
        PmoBenchOptions {
            workloads: Workload::ALL.to_vec(),
            predictors: vec![
                PredictorKind::Stream,
                PredictorKind::Stride,
                PredictorKind::Markov,
            ],
            depths: vec![0, 1, 2, 4, 8, 16],
            rounds: 3,
            touch_pages: 4096,
            sizes: Sizes::full(),
            seed: 1,
            tuning: Tuning::default(),
        }
    }
}

impl PmoBenchOptions {
    /// The options at `scale`: `Quick` is the smaller problems and one
    /// round.
    pub fn at(scale: Scale) -> Self {
        match scale {
            Scale::Full => Self::default(),
            Scale::Quick => PmoBenchOptions {
                rounds: 1,
                sizes: Sizes::quick(),
                ..Self::default()
            },
        }
    }

    /// Refuse options that cannot run, naming the field.
    pub fn check(&self) -> Result<()> {
        let fail = |m: &str| Err(BenchError::Options(m.to_string()));
        if self.workloads.is_empty() {
            return fail("workloads: name at least one");
        }
        if self.rounds == 0 {
            return fail("rounds: at least 1");
        }
        if !(1..=262_144).contains(&self.touch_pages) {
            return fail("touch_pages: 1 to 262144 pages");
        }
        if self.depths.iter().any(|&d| d > 1024) {
            return fail("depths: at most 1024");
        }
        if let Err(m) = self.sizes.check() {
            return fail(&m);
        }
        if let Err(m) = self.tuning.check() {
            return fail(&format!("tuning: {m}"));
        }
        Ok(())
    }

    /// The modes each workload runs in, in table order.
    pub fn modes(&self) -> Vec<Mode> {
        let mut modes = vec![Mode::Plain, Mode::DecryptAtFault, Mode::DramCache];
        let mut depths = self.depths.clone();
        depths.sort_unstable();
        depths.dedup();
        let mut predictors = self.predictors.clone();
        predictors.dedup();
        for (i, &predictor) in predictors.iter().enumerate() {
            for &depth in &depths {
                // Depth 0 predicts nothing: the same for every predictor.
                if depth == 0 && i > 0 {
                    continue;
                }
                modes.push(Mode::Predict { predictor, depth });
            }
        }
        modes
    }

    fn workloads(&self) -> Vec<Workload> {
        let mut chosen = self.workloads.clone();
        chosen.dedup();
        chosen
    }

    /// Steps in all, for a progress bar.
    pub fn steps(&self) -> u64 {
        (self.workloads().len() * (self.modes().len() + 1)) as u64 * u64::from(self.rounds) + 7
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// `plain`, `decrypt-at-fault`, `dram-cache`, `stream-8`, ...
    pub mode: String,
    /// The predictor, for prediction modes.
    pub predictor: Option<String>,
    /// The depth, for prediction modes.
    pub depth: Option<usize>,
    /// Median wall time of the session (attach, compute, psync, detach).
    pub ms: f64,
    /// Every run's time.
    pub runs_ms: Vec<f64>,
    /// The median run's counters.
    pub session: Session,
    /// decrypt-at-fault's time over this one's (> 1: faster).
    pub speedup: f64,
    /// Filebench's figures for the personalities (seed 001's Fig. 4 is
    /// bandwidth): file operations per second and MiB/s read and written,
    /// of the median run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput: Option<Throughput>,
}

/// Filebench's figures of one cell.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Throughput {
    pub ops_per_s: f64,
    pub mib_per_s: f64,
}

impl Throughput {
    fn of(session: &Session) -> Option<Throughput> {
        let io = session.io?;
        let s = session.ns as f64 / 1e9;
        (s > 0.0).then(|| Throughput {
            ops_per_s: io.ops as f64 / s,
            mib_per_s: (io.bytes_read + io.bytes_written) as f64 / (1 << 20) as f64 / s,
        })
    }
}

/// The best prediction of a workload.
#[derive(Clone, Debug, Serialize)]
pub struct Best {
    /// Its mode.
    pub mode: String,
    /// Its depth.
    pub depth: usize,
    /// Its median time.
    pub ms: f64,
    /// decrypt-at-fault's time over its.
    pub speedup: f64,
    /// At least seed 001's 1.81×.
    pub meets_seed: bool,
}

/// One workload in every mode.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadReport {
    /// Its name.
    pub name: String,
    /// What it computes, with its sizes.
    pub description: String,
    /// Whether its first touches sweep its objects in address order (the
    /// seed's kernels).
    pub sequential: bool,
    /// One per mode.
    pub cells: Vec<Cell>,
    /// The kernel's computation alone on ordinary resident memory (no
    /// object, fault or psync), median ms over the rounds: the floor under
    /// every mode's compute phase. `None` for the file server.
    pub dram_ms: Option<f64>,
    /// decrypt-at-fault's time over `dram_ms`: the largest speed-up over
    /// decrypt-at-fault that any fault path could reach (one that made
    /// faults, decryption and psync free). Below seed 001's 1.81×, the
    /// computation dominates and no fault-path change can meet it.
    pub ceiling: Option<f64>,
    /// The fastest prediction that installed pages.
    pub best: Option<Best>,
}

/// Attach and first-touch cost in one mode.
#[derive(Clone, Debug, Serialize)]
pub struct TouchRow {
    /// The mode.
    pub what: String,
    /// The attach call alone (map, userfaultfd, threads), µs.
    pub attach_us: f64,
    /// First touch of every page in address order, per page.
    pub ns_per_page: f64,
    /// The detach call (nothing to psync), µs.
    pub detach_us: f64,
    /// Missing-page faults.
    pub faults: u64,
    /// Pages decrypted.
    pub pages_decrypted: u64,
    /// Pages the predictor installed.
    pub predicted: u64,
}

/// Everything a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct PmoBench {
    /// What was run.
    pub options: PmoBenchOptions,
    /// Runs per cell.
    pub rounds: u32,
    /// Problem sizes.
    pub sizes: Sizes,
    /// Pages in the first-touch measurement.
    pub touch_pages: usize,
    /// A plain anonymous page fault (first write), ns per page.
    pub kernel_fault_ns: f64,
    /// The bare userfaultfd round trip (first read), ns per page.
    pub uffd_round_trip_ns: f64,
    /// Attach and first-touch cost per mode.
    pub touch: Vec<TouchRow>,
    /// One per workload.
    pub workloads: Vec<WorkloadReport>,
    /// Seed 001's speed-up.
    pub seed_speedup: f64,
    /// Seed 001's best depth on average.
    pub seed_best_depth: usize,
    /// The seed's speed-up held against each workload's best.
    pub checks: Vec<Check>,
    /// /proc/loadavg before and after: the machine's other work skews
    /// every timing here (2 cores; the handler and worker threads need one).
    pub loadavg_before: String,
    /// After.
    pub loadavg_after: String,
}

impl Study for PmoBench {
    type Options = PmoBenchOptions;
    type Output = PmoBench;
    type Error = BenchError;
    const NAME: &'static str = "bench-pmo";

    fn options(scale: Scale) -> PmoBenchOptions {
        PmoBenchOptions::at(scale)
    }

    fn run(options: &PmoBenchOptions, progress: &mut dyn FnMut(Progress)) -> Result<PmoBench> {
        run(options, progress)
    }
}

fn median(values: &[f64]) -> usize {
    median_index(values).unwrap_or(0)
}

/// Attach, first-touch and detach costs, medians over `rounds`.
fn touch_row(what: &str, mode: Mode, warm: bool, pages: usize, rounds: u32) -> Result<TouchRow> {
    let base = 0x6200_0000_0000;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
    let bytes: Vec<u8> = (0..pages * PAGE_SIZE).map(|_| rng.gen()).collect();
    let mut samples = Vec::new();
    for _ in 0..rounds {
        cache::evict(base);
        let object = Arc::new(MemBacking::with_contents(base, &bytes, mode != Mode::Plain));
        let sweep = |a: &Attachment| {
            let s = a.as_slice();
            let mut sum = 0u64;
            for p in 0..pages {
                sum += s[p * PAGE_SIZE] as u64;
            }
            std::hint::black_box(sum);
        };
        if warm {
            let a = Attachment::attach(object.clone(), Perm::Read, mode)
                .context("attaching the first-touch object")?;
            sweep(&a);
            a.detach().context("detaching the first-touch object")?;
        }
        let t0 = Instant::now();
        let a = Attachment::attach(object.clone(), Perm::Read, mode)
            .context("attaching the first-touch object")?;
        let t1 = Instant::now();
        sweep(&a);
        let t2 = Instant::now();
        let stats = a.detach().context("detaching the first-touch object")?;
        let t3 = Instant::now();
        samples.push(TouchRow {
            what: what.to_string(),
            attach_us: (t1 - t0).as_nanos() as f64 / 1e3,
            ns_per_page: (t2 - t1).as_nanos() as f64 / pages as f64,
            detach_us: (t3 - t2).as_nanos() as f64 / 1e3,
            faults: stats.faults,
            pages_decrypted: stats.pages_decrypted,
            predicted: stats.predicted,
        });
        cache::evict(base);
    }
    let per_page: Vec<f64> = samples.iter().map(|s| s.ns_per_page).collect();
    Ok(samples.swap_remove(median(&per_page)))
}

/// Run everything, reporting after each run what it was.
pub fn run(args: &PmoBenchOptions, progress: &mut dyn FnMut(Progress)) -> Result<PmoBench> {
    args.check()?;
    let rounds = args.rounds;
    let sizes = args.sizes;
    let pages = args.touch_pages;
    let loadavg_before = crate::loadavg();
    let total = args.steps();
    let mut done = 0;
    let mut on_step = |what: &str| {
        done += 1;
        progress(Progress {
            done,
            total,
            step: what.to_string(),
        });
    };

    let median_of = |f: &dyn Fn() -> std::io::Result<probe::FirstTouch>| -> Result<f64> {
        let mut v = Vec::new();
        for _ in 0..rounds.max(3) {
            v.push(f().context("measuring a fault baseline")?.ns_per_page());
        }
        Ok(v[median(&v)])
    };
    let kernel_fault_ns = median_of(&|| probe::kernel_first_touch(pages))?;
    on_step("kernel page fault");
    let uffd_round_trip_ns = median_of(&|| probe::uffd_first_touch(pages))?;
    on_step("userfaultfd round trip");
    let stream8 = Mode::Predict {
        predictor: PredictorKind::Stream,
        depth: SEED_BEST_DEPTH,
    };
    let mut touch = Vec::new();
    for (what, mode, warm) in [
        ("plain", Mode::Plain, false),
        ("decrypt-at-fault", Mode::DecryptAtFault, false),
        ("dram-cache (cold)", Mode::DramCache, false),
        ("dram-cache (warm: second attach)", Mode::DramCache, true),
        ("stream-8 (cold)", stream8, false),
    ] {
        touch.push(touch_row(what, mode, warm, pages, rounds.max(3))?);
        on_step(what);
    }

    let modes = args.modes();
    let mut workloads = Vec::new();
    for w in args.workloads() {
        // Rounds go over all the modes in turn, so a change in the
        // machine's other load falls on every mode alike.
        let mut runs: Vec<Vec<Session>> = vec![Vec::new(); modes.len()];
        let mut dram: Vec<(u64, f64)> = Vec::new();
        for round in 0..rounds {
            if let Some(r) = kernels::in_dram(w, &sizes, args.seed)? {
                dram.push(r);
            }
            on_step(&format!("{} in DRAM round {}", w.name(), round + 1));
            for (i, &mode) in modes.iter().enumerate() {
                let s = kernels::run(w, &sizes, mode, args.tuning, args.seed)
                    .with_context(|| format!("{} in mode {}", w.name(), mode.label()))?;
                on_step(&format!(
                    "{} {} round {}",
                    w.name(),
                    mode.label(),
                    round + 1
                ));
                runs[i].push(s);
            }
        }
        let mut cells: Vec<Cell> = Vec::new();
        for (&mode, mut runs) in modes.iter().zip(runs) {
            let ms: Vec<f64> = runs.iter().map(|s| s.ns as f64 / 1e6).collect();
            let m = median(&ms);
            let (predictor, depth) = match mode {
                Mode::Predict { predictor, depth } => {
                    (Some(predictor.name().to_string()), Some(depth))
                }
                _ => (None, None),
            };
            let session = runs.swap_remove(m);
            cells.push(Cell {
                mode: mode.label(),
                predictor,
                depth,
                ms: ms[m],
                runs_ms: ms.clone(),
                throughput: Throughput::of(&session),
                session,
                speedup: 0.0,
            });
        }
        // Every mode computes the same thing from the same data.
        if let Some(reference) = cells.first().map(|c| (c.mode.clone(), c.session.checksum)) {
            for c in &cells {
                if c.session.checksum.to_bits() != reference.1.to_bits() {
                    return Err(BenchError::Inconsistent(format!(
                        "{}: mode {} computed checksum {} but mode {} computed {}",
                        w.name(),
                        c.mode,
                        c.session.checksum,
                        reference.0,
                        reference.1
                    )));
                }
            }
        }
        if let (Some(&(_, sum)), Some(c)) = (dram.first(), cells.first()) {
            if sum.to_bits() != c.session.checksum.to_bits() {
                return Err(BenchError::Inconsistent(format!(
                    "{}: the run on DRAM computed checksum {sum} but mode {} computed {}",
                    w.name(),
                    c.mode,
                    c.session.checksum
                )));
            }
        }
        let dram_ms = (!dram.is_empty()).then(|| {
            let ms: Vec<f64> = dram.iter().map(|&(ns, _)| ns as f64 / 1e6).collect();
            ms[median(&ms)]
        });
        let decrypt_ms = cells
            .iter()
            .find(|c| c.mode == Mode::DecryptAtFault.label())
            .map(|c| c.ms);
        let ceiling = decrypt_ms
            .zip(dram_ms)
            .map(|(d, m)| d / m.max(f64::MIN_POSITIVE));
        if let Some(d) = decrypt_ms {
            for c in &mut cells {
                c.speedup = d / c.ms.max(f64::MIN_POSITIVE);
            }
        }
        // Only cells whose predictor installed pages can show what
        // prediction gains; one that predicted nothing (a Markov chain on a
        // single pass) differs from the DRAM cache by noise alone.
        let best = cells
            .iter()
            .filter(|c| c.depth.is_some_and(|d| d > 0) && c.session.stats.predicted > 0)
            .min_by(|a, b| a.ms.total_cmp(&b.ms))
            .filter(|_| decrypt_ms.is_some())
            .map(|c| Best {
                mode: c.mode.clone(),
                depth: c.depth.unwrap_or(0),
                ms: c.ms,
                speedup: c.speedup,
                meets_seed: c.speedup >= SEED_SPEEDUP,
            });
        workloads.push(WorkloadReport {
            name: w.name().to_string(),
            description: sizes.describe(w),
            sequential: w.sequential(),
            cells,
            dram_ms,
            ceiling,
            best,
        });
    }
    let checks = checks(&workloads);
    Ok(PmoBench {
        options: args.clone(),
        rounds,
        sizes,
        touch_pages: pages,
        kernel_fault_ns,
        uffd_round_trip_ns,
        touch,
        workloads,
        seed_speedup: SEED_SPEEDUP,
        seed_best_depth: SEED_BEST_DEPTH,
        checks,
        loadavg_before,
        loadavg_after: crate::loadavg(),
    })
}

/// Seed 001's speed-up held against each workload's best prediction.
/// A workload without one (no decrypt-at-fault cell, or no predictor that
/// installed pages) gets an unmet check saying so.
fn checks(workloads: &[WorkloadReport]) -> Vec<Check> {
    workloads
        .iter()
        .map(|w| {
            let kind = if w.sequential {
                "a sequential kernel, as the seed's"
            } else {
                "not a sequential kernel: the seed's figure is for its kernels"
            };
            let check = |measured| {
                Check::new(
                    format!(
                        "{}: DRAM cache with prediction (best depth) over decrypt-at-fault at least seed 001's {SEED_SPEEDUP}x",
                        w.name
                    ),
                    "seed 001",
                    measured,
                    "x",
                    Bound::AtLeast(SEED_SPEEDUP),
                )
                .seed(SEED_SPEEDUP)
            };
            let bound = match (w.dram_ms, w.ceiling) {
                (Some(ms), Some(c)) if c < SEED_SPEEDUP => format!(
                    "; the computation alone on DRAM takes {ms:.2} ms, so no fault path can beat decrypt-at-fault by more than {c:.2}x: compute-bound at this size"
                ),
                (Some(ms), Some(c)) => format!(
                    "; the computation alone on DRAM takes {ms:.2} ms (ceiling {c:.2}x)"
                ),
                _ => String::new(),
            };
            match &w.best {
                Some(b) => check(b.speedup).detail(format!(
                    "best: {} (depth {}), {:.2} ms; {kind}{bound}",
                    b.mode, b.depth, b.ms
                )),
                None => check(f64::NAN).detail(format!(
                    "not measured: no decrypt-at-fault cell or no predictor installed pages; {kind}"
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_options_and_steps() {
        let quick = PmoBench::options(Scale::Quick);
        assert_eq!(quick.sizes, Sizes::quick());
        let json = serde_json::to_string(&quick).unwrap();
        assert_eq!(
            serde_json::from_str::<PmoBenchOptions>(&json).unwrap(),
            quick
        );
        let options = PmoBenchOptions {
            workloads: vec![Workload::Conv2d],
            predictors: vec![PredictorKind::Stream, PredictorKind::Stride],
            depths: vec![4, 0, 4],
            ..quick
        };
        let labels: Vec<String> = options.modes().iter().map(|m| m.label()).collect();
        assert_eq!(
            labels,
            [
                "plain",
                "decrypt-at-fault",
                "dram-cache",
                "stream-0",
                "stream-4",
                "stride-4"
            ]
        );
        assert_eq!(options.steps(), 7 + 7);
        let err = serde_json::from_str::<PmoBenchOptions>(r#"{"workloads": ["nosuch"]}"#);
        assert!(err.is_err());
        let none = PmoBenchOptions {
            workloads: vec![],
            ..options
        };
        assert!(none.check().unwrap_err().to_string().contains("workloads"));
    }

    #[test]
    fn a_workload_without_a_best_prediction_gets_an_unmet_check() {
        let w = WorkloadReport {
            name: "lu".into(),
            description: String::new(),
            sequential: true,
            cells: vec![],
            dram_ms: None,
            ceiling: None,
            best: None,
        };
        let checks = checks(&[w]);
        assert_eq!(checks.len(), 1);
        assert!(!checks[0].met);
        assert!(checks[0].detail.contains("not measured"));
    }
}
