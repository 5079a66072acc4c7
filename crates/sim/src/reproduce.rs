//! The results pipeline's runs: every study the book publishes, at one
//! [`Scale`], and the timings it publishes.
//!
//! Deterministic studies (wear, levelling, banks, power, swap) run once:
//! the same options give the same numbers on any machine, so the book can
//! hold them exactly. Timings cannot be held that way, so each is taken in
//! `runs` alternating runs, every row of a table once per run and beside a
//! baseline timed in the same run; a front end reports the median and the
//! spread of the samples and of the per-run ratios to the baseline, never
//! an absolute time alone.
//!
//! Contract: [`run`] never prints; it reports every step to `progress` and
//! returns plain data. A study that fails stops the run with its error,
//! naming the study.

use std::path::PathBuf;
use std::time::Instant;

use nvmos_frames::sync::SpinYield;
use nvmos_measure::timer::{process_cpu_seconds, thread_cpu_seconds};
use nvmos_trace::{EventSource as _, NvtReader, TraceError};
use serde::{Deserialize, Serialize};

use crate::allocators::AllocatorKind;
use crate::banks_study::{Banks, BanksOutput};
use crate::bench_alloc::{self, BenchAllocOptions, BenchAllocator, Op, Pattern};
use crate::evaluate::{self, study_allocator, Evaluation, StudyOptions};
use crate::levelling::study::{LevellingStudy, Output as LevellingOutput};
use crate::power::PowerStudy;
use crate::study::{Progress, Scale, Study};
use crate::swap_study::{Swap, SwapStudy};

/// The fewest timing runs a spread can be read from.
pub const MIN_RUNS: u32 = 2;

/// What the pipeline runs: each study at a scale, or not at all.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Options {
    /// The wear study on the traces (`nvmos evaluate`; it has one size).
    pub evaluate: bool,
    /// Hardware wear levelling beneath the allocators, at this scale.
    pub levelling: Option<Scale>,
    /// Frame placement and row-buffer conflicts, at this scale.
    pub banks: Option<Scale>,
    /// Memory power, at this scale.
    pub power: Option<Scale>,
    /// SCM as a paging device, at this scale.
    pub swap: Option<Scale>,
    /// The timings, with the allocation benchmark at this scale.
    pub timings: Option<Scale>,
    /// The folder of traces: every file in it is replayed.
    pub traces: PathBuf,
    /// Alternating runs of every timing.
    pub runs: u32,
    /// Threads for the wear study's rows (`None`: every core). The
    /// deterministic figures do not depend on it.
    pub jobs: Option<usize>,
}

impl Options {
    /// Every study and the timings at `scale` over the traces in
    /// `traces`, with 5 runs of every timing. `Scale::Quick` runs the
    /// studies that have a small version at that size (their figures are
    /// not the seeds' figures).
    pub fn new(scale: Scale, traces: impl Into<PathBuf>) -> Self {
        Options {
            evaluate: true,
            levelling: Some(scale),
            banks: Some(scale),
            power: Some(scale),
            swap: Some(scale),
            timings: Some(scale),
            traces: traces.into(),
            runs: 5,
            jobs: None,
        }
    }
}

/// Everything the pipeline found; `None` for what it was not asked to run.
#[derive(Clone, Debug, Serialize)]
pub struct Reproduction {
    /// How it was run.
    pub options: Options,
    /// Every trace through every allocator (`nvmos evaluate`).
    pub evaluation: Option<Evaluation>,
    /// Hardware wear levelling beneath the allocators.
    pub levelling: Option<LevellingOutput>,
    /// Frame placement and row-buffer conflicts.
    pub banks: Option<BanksOutput>,
    /// Banks powered down, energy and migration (without the timed latency
    /// benchmark, which depends on the machine).
    pub power: Option<PowerStudy>,
    /// SCM and NAND as paging devices.
    pub swap: Option<SwapStudy>,
    /// The timings.
    pub timings: Option<Timings>,
}

/// Every timing the pipeline took.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Alternating runs each table was taken in.
    pub runs: u32,
    /// The tables, in the order they are published.
    pub tables: Vec<TimingTable>,
}

/// One table of timings: rows timed in the same runs as its baseline row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingTable {
    /// A stable identifier ("alloc-rand-2-free").
    pub id: String,
    /// What was timed, in words.
    pub title: String,
    /// The unit of every sample ("ns per request", "M events/s").
    pub unit: String,
    /// Whether a larger sample is better (a rate) or worse (a time).
    pub higher_is_better: bool,
    /// The label of the row every other row is divided by, run by run.
    pub baseline: String,
    /// The rows, baseline included.
    pub rows: Vec<TimingRow>,
}

/// One row's samples, one per run, in run order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingRow {
    /// What was timed ("LiS-31").
    pub label: String,
    /// The samples, in run order.
    pub samples: Vec<f64>,
}

/// Why the pipeline stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The options ask for something impossible.
    #[error("{0}")]
    Options(String),
    /// A trace could not be read.
    #[error("{}: {source}", path.display())]
    Trace {
        /// The trace.
        path: PathBuf,
        /// Why.
        #[source]
        source: TraceError,
    },
    /// A study failed.
    #[error("the {study} study: {source}")]
    Study {
        /// Which study.
        study: &'static str,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

fn study_error<E: std::error::Error + Send + Sync + 'static>(
    study: &'static str,
) -> impl Fn(E) -> Error {
    move |e| Error::Study {
        study,
        source: Box::new(e),
    }
}

/// The allocators whose replay speed is published, after the decoding
/// baseline: Linux's buddy, lazy buddy and the iBuddy family.
const REPLAY_ROWS: [AllocatorKind; 4] = [
    AllocatorKind::Buddy,
    AllocatorKind::Lbs31,
    AllocatorKind::IBuddy,
    AllocatorKind::Lis31,
];

/// The rows of the allocation benchmark: lazy buddy (Linux's per-CPU
/// lists, the iBuddy talk's baseline) first, then the rows it is held
/// against.
const BENCH_ROWS: [AllocatorKind; 4] = [
    AllocatorKind::Lbs31,
    AllocatorKind::Buddy,
    AllocatorKind::IBuddy,
    AllocatorKind::Lis31,
];

/// Run the pipeline.
pub fn run(options: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Reproduction, Error> {
    if options.timings.is_some() && options.runs < MIN_RUNS {
        return Err(Error::Options(format!(
            "runs = {}: a spread needs at least {MIN_RUNS} runs of every timing",
            options.runs
        )));
    }
    if options.jobs == Some(0) {
        return Err(Error::Options("jobs = 0: at least one thread".into()));
    }
    let traces = nvmos_trace::trace_files_in(&options.traces).map_err(|source| Error::Trace {
        path: options.traces.clone(),
        source,
    })?;
    if traces.is_empty() {
        return Err(Error::Options(format!(
            "no traces in {}",
            options.traces.display()
        )));
    }
    let studies = [
        options.evaluate,
        options.levelling.is_some(),
        options.banks.is_some(),
        options.power.is_some(),
        options.swap.is_some(),
    ];
    let timing_steps = if options.timings.is_some() {
        options.runs
    } else {
        0
    };
    let total = studies.iter().filter(|&&s| s).count() as u64 + u64::from(timing_steps);
    let mut done = 0;
    let mut step = |what: &str, progress: &mut dyn FnMut(Progress)| {
        progress(Progress {
            done,
            total,
            step: what.to_string(),
        });
        done += 1;
    };

    let evaluation = if options.evaluate {
        step("wear on the traces", progress);
        let e = evaluate::evaluate(
            &evaluate::Options {
                traces: traces.clone(),
                jobs: options.jobs,
                ..Default::default()
            },
            &mut |_| {},
        )
        .map_err(study_error("wear"))?;
        Some(e)
    } else {
        None
    };
    let levelling = match options.levelling {
        Some(scale) => {
            step("wear levelling", progress);
            let mut o = LevellingStudy::options(scale);
            o.traces = traces.clone();
            Some(LevellingStudy::run(&o, &mut |_| {}).map_err(study_error("levelling"))?)
        }
        None => None,
    };
    let banks = match options.banks {
        Some(scale) => {
            step("banks", progress);
            Some(Banks::run(&Banks::options(scale), &mut |_| {}).map_err(study_error("banks"))?)
        }
        None => None,
    };
    let power = match options.power {
        Some(scale) => {
            step("power", progress);
            let mut o = PowerStudy::options(scale);
            o.traces = Some(options.traces.clone());
            o.latency = None;
            Some(PowerStudy::run(&o, &mut |_| {}).map_err(study_error("power"))?)
        }
        None => None,
    };
    let swap = match options.swap {
        Some(scale) => {
            step("swap", progress);
            Some(Swap::run(&Swap::options(scale), &mut |_| {}).map_err(study_error("swap"))?)
        }
        None => None,
    };
    let timings = match options.timings {
        Some(scale) => {
            let mut timings = TimingRuns::default();
            for run in 0..options.runs {
                step(
                    &format!("timings, run {} of {}", run + 1, options.runs),
                    progress,
                );
                timings.alloc_bench(scale)?;
                timings.replay(&traces)?;
                timings.evaluate(&traces, options.jobs)?;
            }
            Some(Timings {
                runs: options.runs,
                tables: timings.tables,
            })
        }
        None => None,
    };
    progress(Progress {
        done,
        total,
        step: "done".into(),
    });
    Ok(Reproduction {
        options: options.clone(),
        evaluation,
        levelling,
        banks,
        power,
        swap,
        timings,
    })
}

/// Timing tables filled one run at a time.
#[derive(Default)]
struct TimingRuns {
    tables: Vec<TimingTable>,
}

impl TimingRuns {
    /// Add `sample` to the row `label` of the table `id`, making either
    /// where it is new (the table with the given title, unit and
    /// baseline).
    fn push(&mut self, table: TimingTable, label: &str, sample: f64) {
        let t = match self.tables.iter().position(|t| t.id == table.id) {
            Some(i) => &mut self.tables[i],
            None => {
                self.tables.push(table);
                self.tables.last_mut().expect("just pushed")
            }
        };
        match t.rows.iter_mut().find(|r| r.label == label) {
            Some(r) => r.samples.push(sample),
            None => t.rows.push(TimingRow {
                label: label.to_string(),
                samples: vec![sample],
            }),
        }
    }

    /// The iBuddy talk's allocation patterns (bulk, repeat, shuffled
    /// frees) on 1 and 2 threads: every row once, in one process.
    fn alloc_bench(&mut self, scale: Scale) -> Result<(), Error> {
        let options = BenchAllocOptions {
            allocators: BENCH_ROWS.map(BenchAllocator::Nvmos).to_vec(),
            threads: vec![1, 2],
            patterns: vec![Pattern::Bulk, Pattern::Repeat, Pattern::Rand],
            rounds: 1,
            ..BenchAllocOptions::at(scale)
        };
        let bench =
            bench_alloc::run(&options, &mut |_| {}).map_err(study_error("allocation benchmark"))?;
        for cell in &bench.cells {
            for op in Op::BOTH {
                let id = format!("alloc-{}-{}-{}", cell.pattern, cell.threads, op.name());
                let table = TimingTable {
                    id,
                    title: format!(
                        "{} under `{}` on {} thread{}",
                        op.name(),
                        cell.pattern,
                        cell.threads,
                        if cell.threads == 1 { "" } else { "s" }
                    ),
                    unit: "ns per request".into(),
                    higher_is_better: false,
                    baseline: BenchAllocator::Nvmos(BENCH_ROWS[0]).to_string(),
                    rows: Vec::new(),
                };
                self.push(table, &cell.allocator.to_string(), cell.op(op).mean_ns);
            }
        }
        Ok(())
    }

    /// Replay speed from the `.nvt` file, decoding included, on the
    /// largest trace: the decoding alone is the baseline.
    fn replay(&mut self, traces: &[PathBuf]) -> Result<(), Error> {
        let Some(trace) = largest_nvt(traces) else {
            return Ok(());
        };
        let open = || {
            NvtReader::open(&trace).map_err(|source| Error::Trace {
                path: trace.clone(),
                source,
            })
        };
        let header = open()?.header().cloned();
        let machine = header.and_then(|h| h.machine).ok_or_else(|| {
            Error::Options(format!("{} does not describe its machine", trace.display()))
        })?;
        let name = evaluate::trace_name(&trace);
        let table = || TimingTable {
            id: format!("replay-{name}"),
            title: format!("replay of `{name}` from its `.nvt` file, decoding included"),
            unit: "M events per CPU-second".into(),
            higher_is_better: true,
            baseline: "decoding only".into(),
            rows: Vec::new(),
        };
        let start = thread_cpu_seconds();
        let mut events = 0u64;
        for e in open()? {
            e.map_err(|source| Error::Trace {
                path: trace.clone(),
                source,
            })?;
            events += 1;
        }
        let secs = thread_cpu_seconds() - start;
        self.push(table(), "decoding only", events as f64 / secs / 1e6);
        let options = StudyOptions::default();
        for kind in REPLAY_ROWS {
            let start = thread_cpu_seconds();
            let row = study_allocator::<SpinYield, _, _>(kind, &machine, open()?, &options)
                .map_err(study_error("replay speed"))?;
            let secs = thread_cpu_seconds() - start;
            self.push(table(), kind.name(), row.stats.events as f64 / secs / 1e6);
        }
        Ok(())
    }

    /// The whole wear study (every trace, every allocator, on every core
    /// or `jobs`), beside one pass of every trace through Linux's buddy on
    /// one thread: how many buddy replays `evaluate` costs, in CPU time
    /// and in wall time. The study runs on threads of its own, so both are
    /// the process's times.
    fn evaluate(&mut self, traces: &[PathBuf], jobs: Option<usize>) -> Result<(), Error> {
        let table = |id: &str, unit: &str| TimingTable {
            id: format!("evaluate-{id}"),
            title: format!("`nvmos evaluate` on the shipped traces, every allocator ({id})"),
            unit: unit.into(),
            higher_is_better: false,
            baseline: BASELINE_PASS.into(),
            rows: Vec::new(),
        };
        let timed = |allocators: Vec<AllocatorKind>, jobs: Option<usize>| {
            let (cpu, wall) = (process_cpu_seconds(), Instant::now());
            evaluate::evaluate(
                &evaluate::Options {
                    traces: traces.to_vec(),
                    allocators,
                    jobs,
                    ..Default::default()
                },
                &mut |_| {},
            )
            .map_err(study_error("wear"))?;
            Ok::<_, Error>((process_cpu_seconds() - cpu, wall.elapsed().as_secs_f64()))
        };
        let (base_cpu, base_wall) = timed(vec![AllocatorKind::Buddy], Some(1))?;
        let (cpu, wall) = timed(AllocatorKind::ALL.to_vec(), jobs)?;
        self.push(table("CPU", "CPU seconds"), BASELINE_PASS, base_cpu);
        self.push(table("CPU", "CPU seconds"), "evaluate", cpu);
        self.push(table("wall", "wall seconds"), BASELINE_PASS, base_wall);
        self.push(table("wall", "wall seconds"), "evaluate", wall);
        Ok(())
    }
}

/// The baseline of `evaluate`'s timings.
const BASELINE_PASS: &str = "every trace through buddy, one thread";

/// The largest `.nvt` file of `traces`.
fn largest_nvt(traces: &[PathBuf]) -> Option<PathBuf> {
    traces
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "nvt"))
        .max_by_key(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(id: &str) -> TimingTable {
        TimingTable {
            id: id.into(),
            title: id.into(),
            unit: "ns".into(),
            higher_is_better: false,
            baseline: "base".into(),
            rows: Vec::new(),
        }
    }

    #[test]
    fn each_run_adds_one_sample_to_its_row_of_its_table() {
        let mut t = TimingRuns::default();
        for run in 0..3 {
            t.push(table("a"), "base", run as f64);
            t.push(table("a"), "x", 10.0 + run as f64);
            t.push(table("b"), "base", 20.0);
        }
        assert_eq!(t.tables.len(), 2);
        let a = &t.tables[0];
        assert_eq!(a.rows.len(), 2);
        assert_eq!(a.rows[0].samples, vec![0.0, 1.0, 2.0]);
        assert_eq!(a.rows[1].samples, vec![10.0, 11.0, 12.0]);
        assert_eq!(t.tables[1].rows[0].samples.len(), 3);
    }

    #[test]
    fn impossible_options_are_refused_by_name() {
        let mut o = Options::new(Scale::Quick, "no-such-folder");
        o.runs = 1;
        let e = run(&o, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("runs = 1"), "{e}");
        o.runs = 5;
        o.jobs = Some(0);
        assert!(run(&o, &mut |_| {})
            .unwrap_err()
            .to_string()
            .contains("jobs = 0"));
        o.jobs = None;
        let e = run(&o, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("no-such-folder"), "{e}");
        let empty =
            std::env::temp_dir().join(format!("nvmos-reproduce-empty-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        o.traces = empty.clone();
        let e = run(&o, &mut |_| {}).unwrap_err();
        std::fs::remove_dir(&empty).unwrap();
        assert!(e.to_string().contains("no traces in"), "{e}");
    }
}
