//! Seed 001's Figure 1, "microbenchmark scalability by thread count"
//! (`nvmos bench scaling`): 1, 2, 4 and 8 threads each faulting in and
//! writing its own pages, then psyncing, either all in one object (one
//! attachment shared by the threads) or each in its own object (one
//! attachment each), in every encryption mode.
//!
//! Each run makes a fresh pool in `dir` (`/dev/shm` standing for
//! persistent memory), attaches, and starts the threads together. A
//! thread's iteration writes one byte of every page it owns (the first
//! iteration takes a missing-page fault per page, later ones a
//! write-protect fault per page, as psync protects what it committed),
//! then calls psync on its attachment. Throughput is all threads' pages
//! over the wall time from the common start to the last thread's end.
//! The seed reports only the shape (more threads, diminishing returns,
//! blamed on persistent memory); on a machine with fewer cores than
//! threads the curve also flattens at the core count: `cpus` says how many.

use std::path::PathBuf;
use std::sync::Barrier;
use std::time::Instant;

use nvmos_pmo::attach::predict::PredictorKind;
use nvmos_pmo::{KdfParams, Mode, Perm, Pool};
use nvmos_sim::study::{Progress, Scale, Study};
use serde::{Deserialize, Serialize};

use crate::{BenchError, Context};

type Result<T, E = BenchError> = std::result::Result<T, E>;

const PAGE: usize = 4096;

/// What to measure.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScalingOptions {
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Modes (plain objects for `plain`, sealed ones otherwise).
    pub modes: Vec<Mode>,
    /// Pages each thread owns.
    pub pages_per_thread: usize,
    /// Write-then-psync iterations per thread.
    pub iterations: usize,
    /// Runs per cell; the median is reported.
    pub rounds: u32,
    /// Directory of the pools.
    pub dir: PathBuf,
}

impl Default for ScalingOptions {
    /// 1, 2, 4, 8 threads; plain, decrypt at fault, DRAM cache, stream-8
    /// (the talk's depth) and adaptive-64 (prediction that backs off);
    /// 256 pages (1 MiB) per thread, 8 iterations, median of 3.
    fn default() -> Self {
        ScalingOptions {
            threads: vec![1, 2, 4, 8],
            modes: vec![
                Mode::Plain,
                Mode::DecryptAtFault,
                Mode::DramCache,
                Mode::Predict {
                    predictor: PredictorKind::Stream,
                    depth: 8,
                },
                Mode::Predict {
                    predictor: PredictorKind::Adaptive,
                    depth: 64,
                },
            ],
            pages_per_thread: 256,
            iterations: 8,
            rounds: 3,
            dir: PathBuf::from("/dev/shm"),
        }
    }
}

impl ScalingOptions {
    /// `Quick`: 4 iterations, one round.
    pub fn at(scale: Scale) -> Self {
        match scale {
            Scale::Full => Self::default(),
            Scale::Quick => ScalingOptions {
                iterations: 4,
                rounds: 1,
                ..Self::default()
            },
        }
    }

    /// Refuse options that cannot run, naming the field.
    pub fn check(&self) -> Result<()> {
        if self.threads.is_empty() || self.threads.contains(&0) {
            return Err(BenchError::Options(
                "threads: at least one count, each at least 1".into(),
            ));
        }
        if self.modes.is_empty() {
            return Err(BenchError::Options("modes: at least one".into()));
        }
        if self.pages_per_thread == 0 || self.iterations == 0 || self.rounds == 0 {
            return Err(BenchError::Options(
                "pages_per_thread, iterations and rounds: at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// One cell: a mode, a sharing, a thread count.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Cell {
    /// The mode's label.
    pub mode: String,
    /// All threads in one object (`true`) or one object each.
    pub shared: bool,
    /// Threads.
    pub threads: usize,
    /// Median pages written and psynced per second, all threads.
    pub pages_per_s: f64,
    /// Over the same mode and sharing with one thread.
    pub speedup: f64,
    /// Faults taken (missing and write-protect), last round.
    pub faults: u64,
    /// psyncs, last round.
    pub psyncs: u64,
    /// Pages committed, last round (a psync commits every page dirty in
    /// its attachment, so in one object one psync may commit pages of
    /// several threads).
    pub pages_synced: u64,
    /// Every round's pages per second.
    pub rounds: Vec<f64>,
}

/// The result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Scaling {
    /// The settings.
    pub options: ScalingOptions,
    /// The cells, by mode, sharing, threads.
    pub cells: Vec<Cell>,
    /// Cores online.
    pub cpus: usize,
    /// Load average at the start.
    pub loadavg: String,
    /// What the data supports, one finding per line ([`conclusions`]).
    #[serde(default)]
    pub conclusions: Vec<String>,
}

/// How throughput grows with threads in one series (a mode and a
/// sharing), from its cells in thread order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Fewer than two thread counts, or a missing figure.
    Unknown,
    /// No step gains more than 10 %.
    Flat,
    /// Every step keeps at least 80 % of its ideal gain.
    Scales,
    /// The first step gains, and no later step gains more than the one
    /// before it (within 5 %): seed 001's Fig. 1.
    Diminishing,
    /// Anything else.
    Irregular,
}

impl Shape {
    /// Of `points` (threads, throughput) in ascending thread order.
    pub fn of(points: &[(usize, f64)]) -> Shape {
        if points.len() < 2 || points.iter().any(|p| p.1.is_nan() || p.1 <= 0.0) {
            return Shape::Unknown;
        }
        let steps: Vec<(f64, f64)> = points
            .windows(2)
            .map(|w| (w[1].1 / w[0].1, w[1].0 as f64 / w[0].0 as f64))
            .collect();
        if steps.iter().all(|&(gain, _)| gain < 1.10) {
            return Shape::Flat;
        }
        if steps.iter().all(|&(gain, ideal)| gain >= 0.8 * ideal) {
            return Shape::Scales;
        }
        let first_gains = steps[0].0 >= 1.10;
        let never_more = steps.windows(2).all(|w| w[1].0 <= w[0].0 + 0.05);
        if first_gains && never_more {
            Shape::Diminishing
        } else {
            Shape::Irregular
        }
    }

    /// In words.
    pub fn words(self) -> &'static str {
        match self {
            Shape::Unknown => "no shape (too few thread counts)",
            Shape::Flat => "flat: more threads gain nothing",
            Shape::Scales => "scales with the threads",
            Shape::Diminishing => "diminishing returns",
            Shape::Irregular => "irregular",
        }
    }
}

/// The series of `cells` (mode and sharing), in the order they first
/// appear: one line of Fig. 1 each.
pub fn series(cells: &[Cell]) -> Vec<(String, bool)> {
    let mut series: Vec<(String, bool)> = Vec::new();
    for c in cells {
        if !series.contains(&(c.mode.clone(), c.shared)) {
            series.push((c.mode.clone(), c.shared));
        }
    }
    series
}

/// The findings the cells support: each series' gain per step and its
/// [`Shape`], prediction against the DRAM cache alone at each thread
/// count, and the summary, with the core count beside it (more threads
/// than cores cannot run at once).
pub fn conclusions(cells: &[Cell], cpus: usize) -> Vec<String> {
    let mut out = Vec::new();
    let series = series(cells);
    let sharing = |shared: bool| {
        if shared {
            "one object"
        } else {
            "an object per thread"
        }
    };
    let mut shapes = Vec::new();
    for (mode, shared) in &series {
        let mut points: Vec<(usize, f64)> = cells
            .iter()
            .filter(|c| &c.mode == mode && c.shared == *shared)
            .map(|c| (c.threads, c.pages_per_s))
            .collect();
        points.sort_by_key(|p| p.0);
        let shape = Shape::of(&points);
        shapes.push(shape);
        let steps: Vec<String> = points
            .windows(2)
            .map(|w| format!("{}→{} ×{:.2}", w[0].0, w[1].0, w[1].1 / w[0].1))
            .collect();
        out.push(format!(
            "{mode}, {}: {}: {}",
            sharing(*shared),
            steps.join(", "),
            shape.words()
        ));
    }
    // Prediction against the DRAM cache alone, thread count by thread count.
    for (mode, shared) in &series {
        if !matches!(mode.parse::<Mode>(), Ok(Mode::Predict { depth, .. }) if depth > 0) {
            continue;
        }
        let ratios: Vec<String> = cells
            .iter()
            .filter(|c| &c.mode == mode && c.shared == *shared)
            .filter_map(|c| {
                let base = cells.iter().find(|b| {
                    b.mode == "dram-cache" && b.shared == *shared && b.threads == c.threads
                })?;
                Some(format!(
                    "{}: ×{:.2}",
                    c.threads,
                    c.pages_per_s / base.pages_per_s
                ))
            })
            .collect();
        if !ratios.is_empty() {
            out.push(format!(
                "{mode} over the DRAM cache alone, {}, by threads: {}",
                sharing(*shared),
                ratios.join(", ")
            ));
        }
    }
    let diminishing = shapes.iter().filter(|&&s| s == Shape::Diminishing).count();
    let flat = shapes.iter().filter(|&&s| s == Shape::Flat).count();
    let max_threads = cells.iter().map(|c| c.threads).max().unwrap_or(0);
    out.push(format!(
        "{diminishing} of {} series show diminishing returns (the talk's Fig. 1), {flat} are flat; with {cpus} core(s) and up to {max_threads} threads, gains past {cpus} thread(s) are bounded by the cores, not by the memory",
        shapes.len()
    ));
    out
}

/// `nvmos bench scaling`.
pub struct ScalingBench;

impl Study for ScalingBench {
    type Options = ScalingOptions;
    type Output = Scaling;
    type Error = BenchError;
    const NAME: &'static str = "bench-scaling";

    fn options(scale: Scale) -> ScalingOptions {
        ScalingOptions::at(scale)
    }

    fn run(options: &ScalingOptions, progress: &mut dyn FnMut(Progress)) -> Result<Scaling> {
        run(options, progress)
    }
}

struct Sample {
    pages_per_s: f64,
    faults: u64,
    psyncs: u64,
    pages_synced: u64,
}

/// Run every cell.
pub fn run(cfg: &ScalingOptions, progress: &mut dyn FnMut(Progress)) -> Result<Scaling> {
    cfg.check()?;
    let loadavg = crate::loadavg();
    let total = (cfg.modes.len() * 2 * cfg.threads.len()) as u64 * cfg.rounds as u64;
    let mut done = 0;
    let mut cells = Vec::new();
    for &mode in &cfg.modes {
        for shared in [true, false] {
            let mut base = None;
            for &threads in &cfg.threads {
                let mut rounds = Vec::new();
                let mut last = None;
                for r in 0..cfg.rounds {
                    progress(Progress {
                        done,
                        total,
                        step: format!(
                            "{}, {} object{}, {threads} thread(s), round {}",
                            mode.label(),
                            if shared { "one" } else { "separate" },
                            if shared { "" } else { "s" },
                            r + 1
                        ),
                    });
                    done += 1;
                    let s = one_run(cfg, mode, shared, threads)?;
                    rounds.push(s.pages_per_s);
                    last = Some(s);
                }
                let last = last.expect("rounds ≥ 1");
                let median = nvmos_measure::stats::median(&rounds).unwrap_or(f64::NAN);
                let one = *base.get_or_insert(median);
                cells.push(Cell {
                    mode: mode.label(),
                    shared,
                    threads,
                    pages_per_s: median,
                    speedup: median / one,
                    faults: last.faults,
                    psyncs: last.psyncs,
                    pages_synced: last.pages_synced,
                    rounds,
                });
            }
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok(Scaling {
        options: cfg.clone(),
        conclusions: conclusions(&cells, cpus),
        cells,
        cpus,
        loadavg,
    })
}

fn one_run(cfg: &ScalingOptions, mode: Mode, shared: bool, threads: usize) -> Result<Sample> {
    let dir = tempfile::tempdir_in(&cfg.dir)
        .with_context(|| format!("creating a temporary directory in {}", cfg.dir.display()))?;
    let path = dir.path().join("scaling.pool");
    let key: Option<&[u8]> = (mode != Mode::Plain).then_some(b"scaling key");
    let per = cfg.pages_per_thread;
    let objects = if shared { 1 } else { threads };
    let object_pages = if shared { per * threads } else { per };
    let pool_size = ((objects * object_pages * 3 + 16384) * PAGE) as u64;
    let pool = Pool::create(&path, pool_size).context("creating the pool")?;
    let mut attachments = Vec::new();
    for i in 0..objects {
        let name = format!("o{i}");
        pool.pcreate_with(
            &name,
            (object_pages * PAGE) as u64,
            key,
            KdfParams::INSECURE_FAST,
        )
        .context("creating an object")?;
        attachments.push(
            pool.attach(&name, Perm::Write, key, mode)
                .with_context(|| format!("attaching in mode {}", mode.label()))?,
        );
    }
    let barrier = Barrier::new(threads + 1);
    let iterations = cfg.iterations;
    let (wall, results) = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for t in 0..threads {
            let (a, first) = if shared {
                (&attachments[0], t * per)
            } else {
                (&attachments[t], 0)
            };
            let barrier = &barrier;
            handles.push(s.spawn(move || -> Result<()> {
                let base = a.as_slice().as_ptr() as *mut u8;
                barrier.wait();
                for it in 0..iterations {
                    for p in first..first + per {
                        // SAFETY: page p of this attachment is this
                        // thread's alone; the mapping outlives the scope.
                        unsafe { base.add(p * PAGE + it % PAGE).write_volatile(it as u8 + 1) };
                    }
                    a.psync().context("psync")?;
                }
                Ok(())
            }));
        }
        barrier.wait();
        let t0 = Instant::now();
        let results: Vec<Result<()>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError::Inconsistent("a thread panicked".into())))
            })
            .collect();
        (t0.elapsed().as_secs_f64(), results)
    });
    for r in results {
        r?;
    }
    let mut sample = Sample {
        pages_per_s: (threads * per * iterations) as f64 / wall,
        faults: 0,
        psyncs: 0,
        pages_synced: 0,
    };
    for a in &attachments {
        let st = a.stats();
        sample.faults += st.faults + st.wp_faults;
        sample.psyncs += st.psyncs;
        sample.pages_synced += st.pages_synced;
    }
    // Every page written is committed: check one byte of each.
    for (i, a) in attachments.into_iter().enumerate() {
        a.detach().context("detaching")?;
        let h = pool
            .open_object(&format!("o{i}"), Perm::Read, key)
            .context("reopening")?;
        let bytes = h.read_all().context("reading back")?;
        let last = iterations - 1;
        for p in 0..object_pages {
            if bytes[p * PAGE + last % PAGE] != last as u8 + 1 {
                return Err(BenchError::Inconsistent(format!(
                    "{} with {threads} threads: page {p} of object o{i} lost its last write",
                    mode.label()
                )));
            }
        }
    }
    Ok(sample)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_runs_and_commits_every_page() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = ScalingOptions {
            threads: vec![1, 3],
            modes: vec![Mode::Plain, Mode::DecryptAtFault],
            pages_per_thread: 8,
            iterations: 3,
            rounds: 1,
            dir: dir.path().to_owned(),
        };
        let r = match run(&cfg, &mut |_| {}) {
            Ok(r) => r,
            Err(e) if std::env::var_os("CI").is_none() && e.to_string().contains("attaching") => {
                eprintln!(
                    "skipped (no userfaultfd here): {}",
                    nvmos_pmo::error_chain(&e)
                );
                return;
            }
            Err(e) => panic!("{}", nvmos_pmo::error_chain(&e)),
        };
        assert_eq!(r.cells.len(), 2 * 2 * 2);
        for c in &r.cells {
            assert!(c.pages_per_s > 0.0);
            assert!(c.psyncs >= (c.threads * 3) as u64, "{c:?}");
            // Every page written in every iteration was committed (in one
            // object a page being faulted in while another thread's psync
            // runs may be committed by both psyncs).
            let written = (c.threads * 8 * 3) as u64;
            if c.shared {
                assert!(c.pages_synced >= written, "{c:?}");
            } else {
                assert_eq!(c.pages_synced, written, "{c:?}");
            }
        }
        assert_eq!(r.cells[0].speedup, 1.0);
        // One line per series, then the summary.
        assert_eq!(r.conclusions.len(), 2 * 2 + 1, "{:?}", r.conclusions);
    }

    #[test]
    fn shapes_of_throughput_curves() {
        let s = |v: &[f64]| {
            let points: Vec<(usize, f64)> = [1, 2, 4, 8]
                .iter()
                .copied()
                .zip(v.iter().copied())
                .collect();
            Shape::of(&points)
        };
        assert_eq!(s(&[100.0, 160.0, 180.0, 185.0]), Shape::Diminishing);
        assert_eq!(s(&[100.0, 190.0, 380.0, 700.0]), Shape::Scales);
        assert_eq!(s(&[100.0, 104.0, 99.0, 101.0]), Shape::Flat);
        assert_eq!(s(&[100.0, 120.0, 180.0, 170.0]), Shape::Irregular);
        assert_eq!(s(&[100.0]), Shape::Unknown);
        assert_eq!(s(&[100.0, f64::NAN]), Shape::Unknown);
    }

    #[test]
    fn conclusions_compare_prediction_with_the_cache_at_each_thread_count() {
        let cell = |mode: &str, shared: bool, threads: usize, pages_per_s: f64| Cell {
            mode: mode.into(),
            shared,
            threads,
            pages_per_s,
            speedup: 0.0,
            faults: 0,
            psyncs: 0,
            pages_synced: 0,
            rounds: vec![pages_per_s],
        };
        let cells = vec![
            cell("dram-cache", true, 1, 100.0),
            cell("dram-cache", true, 2, 160.0),
            cell("dram-cache", true, 4, 170.0),
            cell("stream-8", true, 1, 120.0),
            cell("stream-8", true, 2, 150.0),
            cell("stream-8", true, 4, 150.0),
        ];
        let c = conclusions(&cells, 2);
        assert_eq!(c.len(), 4, "{c:?}");
        assert!(
            c[0].contains("1→2 ×1.60") && c[0].ends_with("diminishing returns"),
            "{}",
            c[0]
        );
        assert!(c[2].contains("1: ×1.20, 2: ×0.94, 4: ×0.88"), "{}", c[2]);
        assert!(
            c[3].starts_with("2 of 2 series show diminishing returns"),
            "{}",
            c[3]
        );
    }
}
