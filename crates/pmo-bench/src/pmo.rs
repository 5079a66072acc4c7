//! Seed 001's evaluation on this machine (`nvmos bench pmo`). Each
//! workload (see [`crate::kernels`]) runs in every configuration
//! ([`Config`]): no encryption, decrypt at fault (the original design),
//! DRAM as cache alone, and DRAM cache with each predictor at each
//! prediction depth, with integrity verification (GCM's tag, a plain
//! object's hashes) and, for the talk's IV claim, the original design,
//! the DRAM cache and the adaptive predictor without it (AES-CTR, the
//! same cipher without the tag). The median of `rounds` runs is kept;
//! rounds go over every configuration in turn.
//!
//! Seed 001's claims become [`Check`]s, each against the talk's own
//! baseline measured in the same run:
//! - DRAM cache with prediction (best depth) at least 1.81× the original
//!   design, per workload;
//! - prediction never hurts: the adaptive predictor at least 0.98× the
//!   DRAM cache alone, per workload, Filebench's personalities included;
//! - the best stream depth on average over the kernels (the talk: 8),
//!   with the best depth of every round as its spread;
//! - IV with prediction against the prior best case without IV (the
//!   original design, no IV), per workload.
//!
//! Also measured: attach and first-touch cost per page in each mode,
//! against a plain kernel page fault and the bare userfaultfd round trip.

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
/// Prediction never hurts: at least this fraction of the DRAM cache
/// alone's speed.
pub const NEVER_HURTS: f64 = 0.98;

/// What one cell runs: a mode, with or without integrity verification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// How faults are served.
    pub mode: Mode,
    /// Integrity verification: GCM's tag (encrypted modes) or a SHA-256
    /// hash per page (plain); without, AES-CTR or nothing.
    pub iv: bool,
}

impl Config {
    /// The cell's name: the mode's label, `plain+hash` for a plain object
    /// with hashes, and `, no IV` after an encrypted mode without.
    pub fn label(self) -> String {
        match (self.mode, self.iv) {
            (Mode::Plain, true) => "plain+hash".into(),
            (Mode::Plain, false) => "plain".into(),
            (m, true) => m.label(),
            (m, false) => format!("{}, no IV", m.label()),
        }
    }
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PmoBenchOptions {
    /// Workloads, in table order.
    pub workloads: Vec<Workload>,
    /// Predictors run at every depth.
    pub predictors: Vec<PredictorKind>,
    /// Prediction depths (0: DRAM cache, no prediction). The adaptive
    /// predictor's depth is its largest window.
    pub depths: Vec<usize>,
    /// Also run without integrity verification: plain objects with
    /// hashes beside plain ones, and decrypt-at-fault, the DRAM cache and
    /// the adaptive predictor at the largest depth without the tag.
    pub iv: bool,
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
    /// The full run: every workload, predictor and depth 0–64, with and
    /// without IV, at the full sizes, median of 3.
    fn default() -> Self {
        PmoBenchOptions {
            workloads: Workload::ALL.to_vec(),
            predictors: vec![
                PredictorKind::Stream,
                PredictorKind::Stride,
                PredictorKind::Markov,
                PredictorKind::Adaptive,
            ],
            depths: vec![0, 1, 2, 4, 8, 16, 32, 64],
            iv: true,
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

    /// The design whose prediction must never hurt: the adaptive
    /// predictor at the largest depth, when both are asked for.
    pub fn design(&self) -> Option<Mode> {
        let depth = self.depths.iter().copied().max().filter(|&d| d > 0)?;
        self.predictors
            .contains(&PredictorKind::Adaptive)
            .then_some(Mode::Predict {
                predictor: PredictorKind::Adaptive,
                depth,
            })
    }

    /// The modes each workload runs in (with IV, and plain without), in
    /// table order.
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

    /// Every cell of a workload, in table order: [`Self::modes`] with IV
    /// (plain without), then, with `iv`, the configurations without it.
    pub fn configs(&self) -> Vec<Config> {
        let mut configs: Vec<Config> = self
            .modes()
            .into_iter()
            .map(|mode| Config {
                mode,
                iv: mode != Mode::Plain,
            })
            .collect();
        if self.iv {
            configs.push(Config {
                mode: Mode::Plain,
                iv: true,
            });
            let mut without = vec![Mode::DecryptAtFault, Mode::DramCache];
            without.extend(self.design());
            configs.extend(without.into_iter().map(|mode| Config { mode, iv: false }));
        }
        configs
    }

    fn workloads(&self) -> Vec<Workload> {
        let mut chosen = self.workloads.clone();
        chosen.dedup();
        chosen
    }

    /// Steps in all, for a progress bar.
    pub fn steps(&self) -> u64 {
        (self.workloads().len() * (self.configs().len() + 1)) as u64 * u64::from(self.rounds) + 7
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    /// `plain`, `decrypt-at-fault`, `dram-cache`, `stream-8`, ...
    /// ([`Config::label`]).
    pub mode: String,
    /// With integrity verification.
    pub iv: bool,
    /// How the objects were protected: `plain`, `hashed`, `encrypted`
    /// (AES-256-CTR) or `sealed` (AES-256-GCM).
    pub protection: String,
    /// The predictor, for prediction modes.
    pub predictor: Option<String>,
    /// The depth, for prediction modes.
    pub depth: Option<usize>,
    /// Median wall time of the session (attach, compute, psync, detach).
    pub ms: f64,
    /// Every run's time, by round.
    pub runs_ms: Vec<f64>,
    /// The DRAM cache alone's time over this one's, of the medians (≥ 1:
    /// at least as fast); prediction modes only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_cache: Option<f64>,
    /// The median run's counters.
    pub session: Session,
    /// decrypt-at-fault's time over this one's (> 1: faster).
    pub speedup: f64,
    /// Filebench's figures for the personalities (seed 001's Fig. 4 is
    /// bandwidth): file operations per second and MiB/s read and written,
    /// of the median run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<Throughput>,
}

/// Filebench's figures of one cell.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Serialize, Deserialize)]
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

/// The best prediction depth of one predictor: from the medians, and in
/// each round alone (its spread).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BestDepth {
    /// The predictor.
    pub predictor: String,
    /// The depth with the shortest median time.
    pub depth: usize,
    /// The best depth of each round on its own.
    pub rounds: Vec<usize>,
}

/// Integrity verification with prediction against the prior best case
/// without it (seed 001's IV claim), for one workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IvReport {
    /// The original design without IV (decrypt-at-fault, AES-CTR), ms.
    pub original_no_iv_ms: f64,
    /// The adaptive predictor with IV (AES-GCM), ms.
    pub predict_iv_ms: f64,
    /// `original_no_iv_ms / predict_iv_ms`: above 1, IV with prediction
    /// is faster.
    pub speedup: f64,
    /// What IV costs each configuration: its time with IV over without
    /// (decrypt-at-fault, dram-cache, the adaptive predictor).
    pub cost: Vec<IvCost>,
}

/// IV's cost in one mode.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IvCost {
    /// The mode's label.
    pub mode: String,
    /// With IV over without, of the medians.
    pub ratio: f64,
}

/// One workload in every mode.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// The stream predictor's best depth, with its spread over rounds.
    #[serde(default)]
    pub best_depth: Option<BestDepth>,
    /// The adaptive predictor (the design) against the DRAM cache alone:
    /// the cache's median time over its (≥ 0.98: never hurts).
    #[serde(default)]
    pub design_vs_cache: Option<f64>,
    /// IV with prediction against the original design without IV.
    #[serde(default)]
    pub iv: Option<IvReport>,
}

/// Attach and first-touch cost in one mode.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// The stream predictor's best depth on average over the kernels
    /// (the shortest geometric mean of each kernel's time over its DRAM
    /// cache alone), with each round's as its spread.
    #[serde(default)]
    pub best_depth_on_average: Option<BestDepth>,
    /// The talk's problem sizes, per kernel, beside ours.
    #[serde(default)]
    pub talk_sizes: Vec<TalkSize>,
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

    let configs = args.configs();
    let design = args.design();
    let mut workloads = Vec::new();
    for w in args.workloads() {
        // Rounds go over all the configurations in turn, so a change in
        // the machine's other load falls on every one alike.
        let mut runs: Vec<Vec<Session>> = vec![Vec::new(); configs.len()];
        let mut dram: Vec<(u64, f64)> = Vec::new();
        for round in 0..rounds {
            if let Some(r) = kernels::in_dram(w, &sizes, args.seed)? {
                dram.push(r);
            }
            on_step(&format!("{} in DRAM round {}", w.name(), round + 1));
            for (i, &config) in configs.iter().enumerate() {
                let s = kernels::run(w, &sizes, config.mode, config.iv, args.tuning, args.seed)
                    .with_context(|| format!("{} in mode {}", w.name(), config.label()))?;
                on_step(&format!(
                    "{} {} round {}",
                    w.name(),
                    config.label(),
                    round + 1
                ));
                runs[i].push(s);
            }
        }
        let mut cells: Vec<Cell> = Vec::new();
        for (&config, mut runs) in configs.iter().zip(runs) {
            let mode = config.mode;
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
                mode: config.label(),
                iv: config.iv,
                protection: kernels::protection(mode, config.iv).name().to_string(),
                vs_cache: None,
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
        let cache_ms = cells
            .iter()
            .find(|c| c.mode == Mode::DramCache.label())
            .map(|c| c.ms);
        if let Some(base) = cache_ms {
            for c in cells.iter_mut().filter(|c| c.iv && c.depth.is_some()) {
                c.vs_cache = Some(base / c.ms.max(f64::MIN_POSITIVE));
            }
        }
        let design_vs_cache = design.and_then(|d| {
            let label = d.label();
            cells.iter().find(|c| c.mode == label)?.vs_cache
        });
        // Only cells whose predictor installed pages can show what
        // prediction gains; one that predicted nothing (a Markov chain on a
        // single pass) differs from the DRAM cache by noise alone.
        let best = cells
            .iter()
            .filter(|c| c.iv && c.depth.is_some_and(|d| d > 0) && c.session.stats.predicted > 0)
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
            best_depth: best_depth(&cells, rounds as usize),
            iv: iv_report(&cells, design),
            design_vs_cache,
            cells,
            dram_ms,
            ceiling,
            best,
        });
    }
    let best_depth_on_average = best_depth_on_average(&workloads, rounds as usize);
    let mut checks = checks(&workloads);
    checks.extend(claim_checks(
        &workloads,
        best_depth_on_average.as_ref(),
        design,
    ));
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
        best_depth_on_average,
        talk_sizes: talk_sizes(&sizes, &args.workloads()),
        checks,
        loadavg_before,
        loadavg_after: crate::loadavg(),
    })
}

/// A kernel's size in the talk and here.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TalkSize {
    /// The workload.
    pub workload: String,
    /// The talk's size, as it gives it.
    pub talk: String,
    /// What ran here.
    pub here: String,
}

/// The talk's sizes (its "Benchmarks" slide) beside this run's.
fn talk_sizes(sizes: &Sizes, workloads: &[Workload]) -> Vec<TalkSize> {
    workloads
        .iter()
        .filter_map(|&w| {
            let talk = match w {
                Workload::Conv2d => "256×1024",
                Workload::Lu => "6144",
                Workload::Gauss => "18432",
                Workload::MatMul => "4096, tile 16",
                _ => return None,
            };
            Some(TalkSize {
                workload: w.name().to_string(),
                talk: talk.to_string(),
                here: sizes.describe(w),
            })
        })
        .collect()
}

/// The depth of `predictor` whose time is shortest, from `time(cell)`
/// over the cells of that predictor with depth > 0.
fn shortest_depth(cells: &[Cell], predictor: &str, time: impl Fn(&Cell) -> f64) -> Option<usize> {
    cells
        .iter()
        .filter(|c| c.iv && c.predictor.as_deref() == Some(predictor))
        .filter(|c| c.depth.is_some_and(|d| d > 0))
        .min_by(|a, b| time(a).total_cmp(&time(b)))
        .and_then(|c| c.depth)
}

/// The stream predictor's best depth of one workload, from the medians
/// and round by round.
fn best_depth(cells: &[Cell], rounds: usize) -> Option<BestDepth> {
    let p = PredictorKind::Stream.name();
    let depth = shortest_depth(cells, p, |c| c.ms)?;
    let rounds = (0..rounds)
        .filter_map(|r| shortest_depth(cells, p, |c| c.runs_ms.get(r).copied().unwrap_or(f64::NAN)))
        .collect();
    Some(BestDepth {
        predictor: p.to_string(),
        depth,
        rounds,
    })
}

/// The stream depth with the shortest geometric mean, over the kernels
/// (workloads with a run on DRAM), of time over the DRAM cache alone's;
/// from the medians and round by round.
fn best_depth_on_average(workloads: &[WorkloadReport], rounds: usize) -> Option<BestDepth> {
    let p = PredictorKind::Stream.name();
    let kernels: Vec<&WorkloadReport> = workloads.iter().filter(|w| w.dram_ms.is_some()).collect();
    fn cache(w: &WorkloadReport) -> Option<&Cell> {
        w.cells.iter().find(|c| c.mode == Mode::DramCache.label())
    }
    let depths: Vec<usize> = {
        let mut d: Vec<usize> = kernels
            .first()?
            .cells
            .iter()
            .filter(|c| c.iv && c.predictor.as_deref() == Some(p))
            .filter_map(|c| c.depth.filter(|&d| d > 0))
            .collect();
        d.sort_unstable();
        d
    };
    let score = |depth: usize, time: &dyn Fn(&Cell) -> f64| -> f64 {
        let logs: Vec<f64> = kernels
            .iter()
            .filter_map(|w| {
                let c = w.cells.iter().find(|c| {
                    c.iv && c.predictor.as_deref() == Some(p) && c.depth == Some(depth)
                })?;
                Some((time(c) / time(cache(w)?)).ln())
            })
            .collect();
        if logs.len() < kernels.len() {
            return f64::NAN;
        }
        logs.iter().sum::<f64>() / logs.len() as f64
    };
    let best = |time: &dyn Fn(&Cell) -> f64| {
        depths
            .iter()
            .map(|&d| (d, score(d, time)))
            .filter(|(_, s)| s.is_finite())
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(d, _)| d)
    };
    let depth = best(&|c: &Cell| c.ms)?;
    let rounds = (0..rounds)
        .filter_map(|r| best(&|c: &Cell| c.runs_ms.get(r).copied().unwrap_or(f64::NAN)))
        .collect();
    Some(BestDepth {
        predictor: p.to_string(),
        depth,
        rounds,
    })
}

/// IV with the design's prediction against the original design without
/// IV; `None` without those cells.
fn iv_report(cells: &[Cell], design: Option<Mode>) -> Option<IvReport> {
    let design = design?;
    let ms = |mode: Mode, iv: bool| {
        let label = Config { mode, iv }.label();
        cells.iter().find(|c| c.mode == label).map(|c| c.ms)
    };
    let original_no_iv_ms = ms(Mode::DecryptAtFault, false)?;
    let predict_iv_ms = ms(design, true)?;
    let cost = [Mode::DecryptAtFault, Mode::DramCache, design]
        .into_iter()
        .filter_map(|m| {
            Some(IvCost {
                mode: m.label(),
                ratio: ms(m, true)? / ms(m, false)?.max(f64::MIN_POSITIVE),
            })
        })
        .collect();
    Some(IvReport {
        original_no_iv_ms,
        predict_iv_ms,
        speedup: original_no_iv_ms / predict_iv_ms.max(f64::MIN_POSITIVE),
        cost,
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

/// The talk's other claims, each against its baseline of the same run:
/// prediction never hurts (per workload), the best depth on average, IV
/// with prediction against the prior best case without (per workload).
fn claim_checks(
    workloads: &[WorkloadReport],
    average: Option<&BestDepth>,
    design: Option<Mode>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    if let Some(design) = design {
        let d = design.label();
        for w in workloads {
            let measured = w.design_vs_cache.unwrap_or(f64::NAN);
            let detail = match w.cells.iter().find(|c| c.mode == d) {
                Some(c) => format!(
                    "{d}: {:.2} ms, {} pages predicted, {} used, {} wasted, {} dropped past the extent",
                    c.ms,
                    c.session.stats.predicted,
                    c.session.predicted_used,
                    c.session.predicted_wasted,
                    c.session.stats.predicted_past_extent
                ),
                None => "not measured: no DRAM-cache or design cell".into(),
            };
            checks.push(
                Check::new(
                    format!(
                        "{}: prediction ({d}) at least {NEVER_HURTS}x the DRAM cache alone",
                        w.name
                    ),
                    "seed 001",
                    measured,
                    "x",
                    Bound::AtLeast(NEVER_HURTS),
                )
                .detail(detail),
            );
        }
    }
    if let Some(a) = average {
        let rounds: Vec<String> = a.rounds.iter().map(|d| d.to_string()).collect();
        checks.push(
            Check::new(
                "best stream prediction depth on average over the kernels is seed 001's 8",
                "seed 001",
                a.depth as f64,
                "pages",
                Bound::Within {
                    value: SEED_BEST_DEPTH as f64,
                    tolerance: 0.0,
                },
            )
            .seed(SEED_BEST_DEPTH as f64)
            .detail(format!(
                "shortest geometric mean of time over the DRAM cache alone; best depth of each round: {}",
                rounds.join(", ")
            )),
        );
    }
    for w in workloads {
        if let Some(iv) = &w.iv {
            let costs: Vec<String> = iv
                .cost
                .iter()
                .map(|c| format!("{} {:.3}x", c.mode, c.ratio))
                .collect();
            checks.push(
                Check::new(
                    format!(
                        "{}: IV with prediction faster than the original design without IV",
                        w.name
                    ),
                    "seed 001",
                    iv.speedup,
                    "x",
                    Bound::AtLeast(1.0),
                )
                .detail(format!(
                    "decrypt-at-fault without IV {:.2} ms, adaptive prediction with IV {:.2} ms; IV's cost (time with over without): {}",
                    iv.original_no_iv_ms,
                    iv.predict_iv_ms,
                    costs.join(", ")
                )),
            );
        }
    }
    checks
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
            iv: false,
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
        assert_eq!(options.design(), None, "no adaptive predictor asked for");
        let with_iv = PmoBenchOptions {
            predictors: vec![PredictorKind::Stream, PredictorKind::Adaptive],
            iv: true,
            ..options.clone()
        };
        let labels: Vec<String> = with_iv.configs().iter().map(|c| c.label()).collect();
        assert_eq!(
            labels,
            [
                "plain",
                "decrypt-at-fault",
                "dram-cache",
                "stream-0",
                "stream-4",
                "adaptive-4",
                "plain+hash",
                "decrypt-at-fault, no IV",
                "dram-cache, no IV",
                "adaptive-4, no IV"
            ]
        );
        let err = serde_json::from_str::<PmoBenchOptions>(r#"{"workloads": ["nosuch"]}"#);
        assert!(err.is_err());
        let none = PmoBenchOptions {
            workloads: vec![],
            ..options
        };
        assert!(none.check().unwrap_err().to_string().contains("workloads"));
    }

    /// A cell of `mode` with IV or without, its time in each round.
    fn cell(mode: Mode, iv: bool, runs_ms: &[f64]) -> Cell {
        let (predictor, depth) = match mode {
            Mode::Predict { predictor, depth } => (Some(predictor.name().to_string()), Some(depth)),
            _ => (None, None),
        };
        let mut sorted = runs_ms.to_vec();
        sorted.sort_by(f64::total_cmp);
        Cell {
            mode: Config { mode, iv }.label(),
            iv,
            protection: crate::kernels::protection(mode, iv).name().to_string(),
            predictor,
            depth,
            ms: sorted[sorted.len() / 2],
            runs_ms: runs_ms.to_vec(),
            vs_cache: None,
            session: Session::default(),
            speedup: 0.0,
            throughput: None,
        }
    }

    fn stream(depth: usize) -> Mode {
        Mode::Predict {
            predictor: PredictorKind::Stream,
            depth,
        }
    }

    fn report(name: &str, cells: Vec<Cell>) -> WorkloadReport {
        WorkloadReport {
            name: name.into(),
            description: String::new(),
            sequential: true,
            cells,
            dram_ms: Some(1.0),
            ceiling: None,
            best: None,
            best_depth: None,
            design_vs_cache: None,
            iv: None,
        }
    }

    #[test]
    fn best_depths_come_from_the_medians_and_each_round() {
        // Depth 8 is best in rounds 1 and 3, depth 16 in round 2.
        let a = vec![
            cell(Mode::DramCache, true, &[100.0, 100.0, 100.0]),
            cell(stream(8), true, &[50.0, 60.0, 50.0]),
            cell(stream(16), true, &[55.0, 52.0, 56.0]),
            // Without IV: never a candidate.
            cell(stream(16), false, &[1.0, 1.0, 1.0]),
        ];
        let d = best_depth(&a, 3).unwrap();
        assert_eq!((d.depth, d.rounds.clone()), (8, vec![8, 16, 8]));
        // A second kernel where 16 wins by far: on average (geometric
        // mean of time over the DRAM cache) 16 is best.
        let b = vec![
            cell(Mode::DramCache, true, &[100.0, 100.0, 100.0]),
            cell(stream(8), true, &[90.0, 90.0, 90.0]),
            cell(stream(16), true, &[20.0, 20.0, 20.0]),
        ];
        let avg = best_depth_on_average(&[report("a", a), report("b", b)], 3).unwrap();
        assert_eq!((avg.depth, avg.rounds), (16, vec![16, 16, 16]));
    }

    #[test]
    fn the_iv_claim_compares_the_design_with_iv_against_the_original_without() {
        let design = Mode::Predict {
            predictor: PredictorKind::Adaptive,
            depth: 64,
        };
        let cells = vec![
            cell(Mode::DecryptAtFault, true, &[120.0]),
            cell(Mode::DecryptAtFault, false, &[100.0]),
            cell(Mode::DramCache, true, &[90.0]),
            cell(Mode::DramCache, false, &[80.0]),
            cell(design, true, &[50.0]),
            cell(design, false, &[40.0]),
        ];
        let iv = iv_report(&cells, Some(design)).unwrap();
        assert_eq!(
            (iv.original_no_iv_ms, iv.predict_iv_ms, iv.speedup),
            (100.0, 50.0, 2.0)
        );
        let costs: Vec<(String, f64)> = iv.cost.iter().map(|c| (c.mode.clone(), c.ratio)).collect();
        assert_eq!(
            costs,
            [
                ("decrypt-at-fault".to_string(), 1.2),
                ("dram-cache".to_string(), 90.0 / 80.0),
                ("adaptive-64".to_string(), 1.25)
            ]
        );
        assert!(iv_report(&cells, None).is_none());
        assert!(
            iv_report(&cells[..2], Some(design)).is_none(),
            "no design cell"
        );

        // The checks: never hurts (unmet below 0.98), the IV claim.
        let mut w = report("conv2d", cells);
        w.design_vs_cache = Some(0.97);
        w.iv = Some(iv);
        let checks = claim_checks(&[w], None, Some(design));
        assert_eq!(checks.len(), 2);
        assert!(!checks[0].met && checks[0].what.contains("at least 0.98x the DRAM cache"));
        assert!(
            checks[1].met && checks[1].measured == 2.0,
            "{:?}",
            checks[1]
        );
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
            best_depth: None,
            design_vs_cache: None,
            iv: None,
        };
        let checks = checks(&[w]);
        assert_eq!(checks.len(), 1);
        assert!(!checks[0].met);
        assert!(checks[0].detail.contains("not measured"));
    }
}
