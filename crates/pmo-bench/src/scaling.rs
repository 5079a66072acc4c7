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
    /// 1, 2, 4, 8 threads; plain, decrypt at fault, DRAM cache, stream-8;
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
    Ok(Scaling {
        options: cfg.clone(),
        cells,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
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
    }
}
