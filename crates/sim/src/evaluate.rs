//! The wear study (seed 000): replay one trace through one allocator, or
//! count the kernel's own placement, and summarise wear, lifetime and
//! speed as one row of the comparison.

use std::path::{Path, PathBuf};

use nvmos_frames::sync::SpinYield;
use nvmos_frames::{ConfigError, Zone, ZoneMap};
use nvmos_trace::{Checked, Event, EventSource, Limits, MachineInfo, Needs, TraceError, TraceInfo};

use crate::allocators::{AllocatorJob, AllocatorKind, Setup, StudyAllocator, DEFAULT_BANK_FRAMES};
use crate::replay::{
    as_recorded, run, run_resolved, Migrating, Recorded, ReplayError, ReplayStats, Resolved,
};
use crate::study::Progress;
use crate::wear::{WearCounter, WearSummary, WriteModel};

/// The row name of the kernel's own placement.
pub const AS_RECORDED: &str = "Linux (as recorded)";

/// How to run the study.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct StudyOptions {
    /// Frames of memory the allocators manage, as one zone; `None` for the
    /// recorded machine's zones.
    pub memory_frames: Option<u64>,
    /// CPUs the allocators serve; `None` for the recorded machine's.
    pub cpus: Option<u32>,
    /// How allocations turn into writes.
    pub model: WriteModel,
    /// Columns of the wear heat map.
    pub heat_buckets: usize,
    /// Frames per bank for the bank-aware allocators (their zones are cut
    /// to whole banks; halved on machines too small for it, see
    /// [`Setup::fit_banks`]).
    #[serde(default = "default_bank_frames")]
    pub bank_frames: u64,
    /// Trace time between migration passes of the allocators that migrate.
    #[serde(default = "default_migrate_every_ns")]
    pub migrate_every_ns: u64,
}

fn default_bank_frames() -> u64 {
    DEFAULT_BANK_FRAMES
}

fn default_migrate_every_ns() -> u64 {
    1_000_000_000
}

impl Default for StudyOptions {
    fn default() -> Self {
        StudyOptions {
            memory_frames: None,
            cpus: None,
            model: WriteModel::default(),
            heat_buckets: 256,
            bank_frames: DEFAULT_BANK_FRAMES,
            migrate_every_ns: default_migrate_every_ns(),
        }
    }
}

/// One row of the comparison.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct StudyRow {
    /// `AS_RECORDED` or the allocator's name.
    pub allocator: String,
    /// Counters of the replay.
    pub stats: ReplayStats,
    /// Wear and lifetime.
    pub wear: WearSummary,
    /// The most writes to one frame in each of `heat_buckets` equal slices
    /// of the frames, in pfn order.
    pub heat: Vec<u32>,
    /// Bytes of allocator bookkeeping per frame (0 for the recorded row).
    pub metadata_bytes_per_frame: f64,
    /// Write-weighted wear and the allocation/write correlation, for
    /// traces with sampled writes (`record --writes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<crate::writes::WriteWear>,
}

/// Every row of the study for one trace.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct TraceStudy {
    /// Short name (the file stem).
    pub trace: String,
    /// Where it was read from.
    pub source: String,
    /// The recorded machine (for a text trace: one zone of what it needs,
    /// or of `--memory`).
    pub machine: MachineInfo,
    /// Whether memory or CPUs were inferred from the events (a text trace
    /// without `--memory`/`--cpus`).
    #[serde(default)]
    pub inferred: bool,
    /// Events in the trace.
    pub events: u64,
    /// First to last event.
    pub duration_ns: u64,
    /// `AS_RECORDED` first, then one row per allocator.
    pub rows: Vec<StudyRow>,
}

/// The whole study: every trace, every allocator.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Evaluation {
    /// How it was run.
    pub options: StudyOptions,
    /// One entry per trace.
    pub traces: Vec<TraceStudy>,
    /// Files of the traces folder that are not traces (none of the
    /// formats), skipped: listed so that no output hides them.
    #[serde(default)]
    pub not_traces: Vec<String>,
}

/// Why the study could not run.
#[derive(Debug, thiserror::Error)]
pub enum StudyError<E: std::error::Error + 'static> {
    /// The machine has no usable memory, or the allocator refused it.
    #[error("memory layout")]
    Layout(#[from] ConfigError),
    /// The replay stopped.
    #[error(transparent)]
    Replay(#[from] ReplayError<E>),
}

/// What `nvmos evaluate` and `nvmos replay` run: trace files through
/// registry allocators.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Options {
    /// The trace files, in the order their results are listed.
    pub traces: Vec<PathBuf>,
    /// The allocators, after the kernel's own placement.
    pub allocators: Vec<AllocatorKind>,
    /// How every replay runs.
    pub study: StudyOptions,
    /// Rows replayed at once (threads); `None` for rayon's default: the
    /// `RAYON_NUM_THREADS` environment variable, else every core. The
    /// result does not depend on it (timing fields aside).
    pub jobs: Option<usize>,
}

impl Default for Options {
    /// No traces; every registry allocator; every core.
    fn default() -> Self {
        Options {
            traces: Vec::new(),
            allocators: AllocatorKind::ALL.to_vec(),
            study: StudyOptions::default(),
            jobs: None,
        }
    }
}

/// Why `run` stopped.
#[derive(Debug, thiserror::Error)]
pub enum EvaluateError {
    /// No trace to replay.
    #[error("no traces given")]
    NoTraces,
    /// The options ask for something impossible.
    #[error("{0}")]
    Options(&'static str),
    /// A trace file could not be opened.
    #[error("opening a trace")]
    Open(#[source] TraceError),
    /// The trace does not describe its machine and no memory was given.
    #[error("{0} does not say which machine it was recorded on and has no page-allocation events to infer it from")]
    NoMachine(PathBuf),
    /// The caller's progress callback asked to stop.
    #[error("stopped by the caller")]
    Cancelled,
    /// The threads for the rows could not be started.
    #[error("starting the evaluation's threads: {0}")]
    Threads(String),
    /// A replay failed.
    #[error("{}: {what}", path.display())]
    Replay {
        /// The trace.
        path: PathBuf,
        /// Which row.
        what: String,
        /// Why.
        #[source]
        source: StudyError<TraceError>,
    },
}

/// Freed big blocks kept for the next rows during `evaluate`
/// ([`nvmos_trace::table::KeepFreed`]).
pub const KEEP_FREED_BYTES: usize = 768 << 20;

/// Replay every trace of `options` through the kernel's own placement and
/// every allocator asked for, reporting each replay to `progress`.
///
/// Every (trace, row) pair is an independent task (a fresh allocator, its
/// own pass over the trace), so the tasks run on `options.jobs` threads,
/// largest trace first; the result lists traces and rows in the order
/// asked for, and its numbers are those of a run on one thread (only the
/// timing fields, `elapsed_ns`, differ). A failure is reported as the
/// sequential run would: the first failing trace's first failing step.
/// `progress` is called on the calling thread only (workers report
/// through a channel), once before and once after every row.
pub fn evaluate(
    options: &Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Evaluation, EvaluateError> {
    if options.traces.is_empty() {
        return Err(EvaluateError::NoTraces);
    }
    if options.study.cpus == Some(0) {
        return Err(EvaluateError::Options(
            "cpus = 0: an allocator serves at least one CPU",
        ));
    }
    if options.jobs == Some(0) {
        return Err(EvaluateError::Options("jobs = 0: at least one thread"));
    }
    let pool = match options.jobs {
        Some(n) => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .thread_name(|i| format!("nvmos-evaluate-{i}"))
                .build()
                .map_err(|e| EvaluateError::Threads(e.to_string()))?,
        ),
        None => None,
    };
    // Each row builds its allocator's per-frame tables anew (about 100 MB
    // for a 24 GiB machine): with `HugePageAlloc` as the program's
    // allocator, the blocks one row frees serve the next row's tables,
    // already faulted in, instead of fresh pages the system must zero.
    // Given back when the evaluation ends.
    let _keep = nvmos_trace::table::KeepFreed::new(KEEP_FREED_BYTES);
    let total = (options.traces.len() * (options.allocators.len() + 1)) as u64;
    let (tx, rx) = std::sync::mpsc::channel::<(String, bool)>();
    let mut done = 0;
    let outcome = std::thread::scope(|scope| {
        let worker = scope.spawn(move || {
            let work = || evaluate_tasks(options, &tx);
            match &pool {
                Some(pool) => pool.install(work),
                None => work(),
            }
        });
        // The workers' reports, in the order they were sent, until the
        // last worker is done and the channel closes.
        for (step, finished) in rx {
            if finished {
                done += 1;
            }
            progress(Progress { done, total, step });
        }
        worker
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    let traces = outcome?;
    progress(Progress {
        done,
        total,
        step: String::new(),
    });
    Ok(Evaluation {
        options: options.study.clone(),
        traces,
        not_traces: Vec::new(),
    })
}

/// `evaluate`'s work, on the current rayon pool: every trace's machine,
/// then every (trace, row) task, each reported to `tx` as `(step,
/// finished)` before and after it runs.
fn evaluate_tasks(
    options: &Options,
    tx: &std::sync::mpsc::Sender<(String, bool)>,
) -> Result<Vec<TraceStudy>, EvaluateError> {
    use rayon::prelude::*;
    let study = &options.study;
    let rows: Vec<Option<AllocatorKind>> = std::iter::once(None)
        .chain(options.allocators.iter().copied().map(Some))
        .collect();
    let open = |path: &PathBuf| nvmos_trace::open(path).map_err(EvaluateError::Open);
    // A text trace's machine takes a pass over it: one task per trace.
    let setups: Vec<Result<TraceSetup, EvaluateError>> = options
        .traces
        .par_iter()
        .map(|path| TraceSetup::of(path, &|| open(path), study))
        .collect();
    // Largest trace first (file size), so no thread is left with a big
    // row at the end while the others idle.
    let mut tasks: Vec<(usize, usize)> = setups
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_ok())
        .flat_map(|(t, _)| (0..rows.len()).map(move |r| (t, r)))
        .collect();
    let sizes: Vec<u64> = options
        .traces
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .collect();
    // Within a trace, the rows that cost most first (M³'s random frames
    // miss the cache at every event; migration passes), so the last
    // rows to finish are short ones and both threads end together.
    let slow = |r: usize| match rows[r] {
        Some(AllocatorKind::M3 | AllocatorKind::M3Part) => 0,
        Some(kind) if kind.caps().migrates => 1,
        _ => 2,
    };
    tasks.sort_by_key(|&(t, r)| (std::cmp::Reverse(sizes[t]), t, slow(r), r));
    // Each trace is decoded and matched once, by its first row to start,
    // and dropped when its last row is done.
    let shared: Vec<SharedTrace> = setups
        .iter()
        .map(|_| SharedTrace::new(rows.len()))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Result<StudyRow, EvaluateError>>>> =
        std::sync::Mutex::new((0..tasks.len()).map(|_| None).collect());
    let run_tasks = |tx: std::sync::mpsc::Sender<(String, bool)>| loop {
        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(&(t, r)) = tasks.get(k) else {
            break;
        };
        let path = &options.traces[t];
        let Ok(setup) = &setups[t] else {
            unreachable!("tasks are made for traces with a machine only")
        };
        let step = format!("{}: {}", trace_name(path), row_label(rows[r]));
        // A closed channel (the caller's thread gone) only loses reports.
        let _ = tx.send((step.clone(), false));
        // While another thread resolves this trace, resolve the next one
        // rather than wait: its rows come next.
        if shared[t].busy() {
            if let Some(&u) = tasks[k..].iter().map(|(u, _)| u).find(|&&u| u != t) {
                if let Ok(next_setup) = &setups[u] {
                    let next_path = &options.traces[u];
                    drop(shared[u].get(next_path, &|| open(next_path), next_setup, study));
                }
            }
        }
        let resolved = shared[t].get(path, &|| open(path), setup, study);
        let result = study_row(
            path,
            &|| open(path),
            setup,
            resolved.as_deref(),
            rows[r],
            study,
        );
        drop(resolved);
        shared[t].row_done();
        results.lock().unwrap_or_else(|e| e.into_inner())[k] = Some(result);
        let _ = tx.send((step, true));
    };
    rayon::scope(|scope| {
        for _ in 0..rayon::current_num_threads() {
            let tx = tx.clone();
            scope.spawn(|_| run_tasks(tx));
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    // Back to the order asked for: trace by trace, row by row.
    let mut by_task: Vec<Vec<Option<Result<StudyRow, EvaluateError>>>> = setups
        .iter()
        .map(|_| (0..rows.len()).map(|_| None).collect())
        .collect();
    for (k, &(t, r)) in tasks.iter().enumerate() {
        by_task[t][r] = results[k].take();
    }
    let mut traces = Vec::with_capacity(setups.len());
    let names = trace_names(&options.traces);
    for (((path, setup), rows), name) in options.traces.iter().zip(setups).zip(by_task).zip(names) {
        let setup = setup?;
        let rows = rows
            .into_iter()
            .map(|row| row.expect("every task of a trace with a machine ran"))
            .collect::<Result<Vec<_>, _>>()?;
        let mut study = setup.study(path, rows);
        study.trace = name;
        traces.push(study);
    }
    Ok(traces)
}

/// The machine a trace is replayed on: the recorded one, or for a text
/// trace (no header) one zone of the memory and CPUs it needs, inferred
/// from its events unless `study` names them. Returns the machine,
/// whether anything was inferred, and whether the trace is text.
pub fn trace_machine<S: EventSource>(
    path: &Path,
    open: &dyn Fn() -> Result<S, EvaluateError>,
    study: &StudyOptions,
) -> Result<(MachineInfo, bool, bool), EvaluateError> {
    if let Some(m) = open()?.header().and_then(|h| h.machine.clone()) {
        return Ok((m, false, false));
    }
    let mut source = open()?;
    let info = TraceInfo::from_source(&mut source).map_err(EvaluateError::Open)?;
    let needs = Needs::of(&info).ok_or_else(|| EvaluateError::NoMachine(path.to_owned()))?;
    let frames = study.memory_frames.unwrap_or(needs.frames);
    let cpus = study.cpus.unwrap_or(needs.cpus);
    let inferred = study.memory_frames.is_none() || study.cpus.is_none();
    Ok((single_zone_machine(frames, Some(cpus)), inferred, true))
}

/// What a row's events are checked against. The recorded placement puts
/// every block at its traced pfn, so a text trace's events must lie inside
/// the memory given for it (its only machine); a recorded machine's zones
/// always hold its own trace. An allocator places blocks itself: a memory
/// smaller than the traced pfns is a real question (a memory-size sweep),
/// answered with refusals counted and the row flagged, never with events
/// dropped. CPUs are checked for every row: a per-CPU allocator cannot
/// serve a CPU it does not have.
pub fn row_limits(row: Option<AllocatorKind>, text_trace: bool, study: &StudyOptions) -> Limits {
    Limits {
        frames: if row.is_none() && text_trace {
            study.memory_frames
        } else {
            None
        },
        cpus: study.cpus,
    }
}

/// A trace's short name: its file stem without `.nvt`, as rows are named.
/// Where several traces are studied together, name them with
/// [`trace_names`], which keeps the names apart.
pub fn trace_name(path: &Path) -> String {
    path.file_stem()
        .and_then(|s| s.to_str())
        .map(|s| s.trim_end_matches(".nvt").to_string())
        .unwrap_or_else(|| path.display().to_string())
}

/// The names of traces studied together, in order, each distinct: the
/// short [`trace_name`] where it is unique, else the file name with its
/// extension (`x.nvt` and `x.txt`), else the path as given. Two rows of a
/// table or two series of a figure never share a label.
pub fn trace_names(paths: &[PathBuf]) -> Vec<String> {
    let count = |names: &[String], name: &str| names.iter().filter(|n| *n == name).count();
    let short: Vec<String> = paths.iter().map(|p| trace_name(p)).collect();
    let file: Vec<String> = paths
        .iter()
        .map(|p| {
            p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        })
        .collect();
    paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if count(&short, &short[i]) == 1 {
                short[i].clone()
            } else if count(&file, &file[i]) == 1 {
                file[i].clone()
            } else {
                p.display().to_string()
            }
        })
        .collect()
}

/// One trace's rows, in the order of `rows` (`None`: the kernel's own
/// placement, as recorded): the one place `evaluate`, `replay` and the
/// Python bindings (which also read traces from memory) study a trace.
///
/// `open` opens the trace afresh for each pass (it is named `path` in
/// errors). A trace without a recorded machine (text) gets one zone of
/// the memory and CPUs it needs, inferred from its events unless
/// `study` names them, and the result says so (`inferred`); every event
/// is checked against an explicit machine, so a pfn or CPU beyond it is
/// an error naming it and its line, never a silent drop.
/// `step(label, finished)` is told before and after each row; returning
/// `false` stops with [`EvaluateError::Cancelled`].
pub fn study_trace<S: EventSource>(
    path: &Path,
    open: &dyn Fn() -> Result<S, TraceError>,
    rows: &[Option<AllocatorKind>],
    study: &StudyOptions,
    step: &mut dyn FnMut(&str, bool) -> bool,
) -> Result<TraceStudy, EvaluateError> {
    let open = || open().map_err(EvaluateError::Open);
    let setup = TraceSetup::of(path, &open, study)?;
    let shared = SharedTrace::new(rows.len());
    let mut out = Vec::with_capacity(rows.len());
    for &row in rows {
        let label = row_label(row);
        if !step(label, false) {
            return Err(EvaluateError::Cancelled);
        }
        let resolved = shared.get(path, &open, &setup, study);
        out.push(study_row(
            path,
            &open,
            &setup,
            resolved.as_deref(),
            row,
            study,
        )?);
        drop(resolved);
        shared.row_done();
        if !step(label, true) {
            return Err(EvaluateError::Cancelled);
        }
    }
    Ok(setup.study(path, out))
}

/// A row's name: [`AS_RECORDED`] or the allocator's.
fn row_label(row: Option<AllocatorKind>) -> &'static str {
    row.map_or(AS_RECORDED, |k| k.name())
}

/// What every row of one trace shares: the machine it is replayed on.
struct TraceSetup {
    machine: MachineInfo,
    inferred: bool,
    text_trace: bool,
}

impl TraceSetup {
    fn of<S: EventSource>(
        path: &Path,
        open: &dyn Fn() -> Result<S, EvaluateError>,
        study: &StudyOptions,
    ) -> Result<TraceSetup, EvaluateError> {
        let (machine, inferred, text_trace) = trace_machine(path, open, study)?;
        Ok(TraceSetup {
            machine,
            inferred,
            text_trace,
        })
    }

    /// The trace's study from its rows, in order.
    fn study(self, path: &Path, rows: Vec<StudyRow>) -> TraceStudy {
        let (events, duration_ns) = rows
            .first()
            .map_or((0, 0), |r| (r.stats.events, r.stats.trace_ns));
        TraceStudy {
            trace: trace_name(path),
            source: path.display().to_string(),
            events,
            duration_ns,
            machine: self.machine,
            inferred: self.inferred,
            rows,
        }
    }
}

/// A trace's events matched once ([`Resolved`]) and the source's counts
/// (lost events, out-of-order timestamps), shared by its rows.
struct SharedResolved {
    resolved: Resolved,
    counts: nvmos_trace::SourceCounts,
}

/// One trace's [`SharedResolved`], made by the first row that asks and
/// dropped after the last row is done.
struct SharedTrace {
    state: std::sync::Mutex<Shared>,
    remaining: std::sync::atomic::AtomicUsize,
}

enum Shared {
    NotYet,
    Ready(std::sync::Arc<SharedResolved>),
    /// Every row reads the trace itself: a text trace (its rows' checks
    /// differ and its errors name lines), a trace that could not be read
    /// whole (each row reports the error as it meets it), or all rows
    /// done.
    PerRow,
}

impl SharedTrace {
    fn new(rows: usize) -> SharedTrace {
        SharedTrace {
            state: std::sync::Mutex::new(Shared::NotYet),
            remaining: std::sync::atomic::AtomicUsize::new(rows),
        }
    }

    /// The trace resolved, or `None` when each row reads it itself.
    /// A row asking while another resolves waits for it.
    fn get<S: EventSource>(
        &self,
        path: &Path,
        open: &dyn Fn() -> Result<S, EvaluateError>,
        setup: &TraceSetup,
        study: &StudyOptions,
    ) -> Option<std::sync::Arc<SharedResolved>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Shared::NotYet = *state {
            *state = Shared::PerRow;
            if !setup.text_trace {
                // A recorded machine: every row checks the events
                // against the same limits (the CPUs asked for).
                let limits = row_limits(None, false, study);
                debug_assert!(AllocatorKind::ALL.iter().all(|&k| row_limits(
                    Some(k),
                    false,
                    study
                ) == limits));
                if let Ok(source) = open() {
                    let expected = source.header().map_or(0, |h| h.events);
                    let mut source = Checked::new(source, path, limits);
                    if let Ok(Some(resolved)) = Resolved::of_expecting(&mut source, expected) {
                        *state = Shared::Ready(std::sync::Arc::new(SharedResolved {
                            resolved,
                            counts: source.counts(),
                        }));
                    }
                }
            }
        }
        match &*state {
            Shared::Ready(r) => Some(r.clone()),
            _ => None,
        }
    }

    /// Whether another thread holds the trace (resolving it).
    fn busy(&self) -> bool {
        matches!(
            self.state.try_lock(),
            Err(std::sync::TryLockError::WouldBlock)
        )
    }

    /// One row is done with the trace; after the last, it is dropped.
    fn row_done(&self) {
        if self
            .remaining
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
            == 1
        {
            *self.state.lock().unwrap_or_else(|e| e.into_inner()) = Shared::PerRow;
        }
    }
}

/// One row of a trace: a replay of the trace resolved once for all its
/// rows, or a pass over a freshly opened, checked trace.
fn study_row<S: EventSource>(
    path: &Path,
    open: &dyn Fn() -> Result<S, EvaluateError>,
    setup: &TraceSetup,
    shared: Option<&SharedResolved>,
    row: Option<AllocatorKind>,
    study: &StudyOptions,
) -> Result<StudyRow, EvaluateError> {
    let failed = |what: String| {
        move |source| EvaluateError::Replay {
            path: path.to_owned(),
            what,
            source,
        }
    };
    if let Some(shared) = shared {
        let mut result = match row {
            None => study_as_recorded_resolved(&setup.machine, &shared.resolved, study)
                .map_err(failed("counting the recorded placement".into()))?,
            Some(kind) => study_allocator_resolved::<SpinYield, _>(
                kind,
                &setup.machine,
                &shared.resolved,
                study,
            )
            .map_err(failed(format!("replaying through {kind}")))?,
        };
        result.stats.accounting.add_source_counts(&shared.counts);
        return Ok(result);
    }
    let limits = row_limits(row, setup.text_trace, study);
    let mut source = Checked::new(open()?, path, limits);
    let mut result = match row {
        None => study_as_recorded(&setup.machine, &mut source, study)
            .map_err(failed("counting the recorded placement".into()))?,
        Some(kind) => study_allocator::<SpinYield, _, _>(kind, &setup.machine, &mut source, study)
            .map_err(failed(format!("replaying through {kind}")))?,
    };
    result.stats.accounting.add_source_counts(&source.counts());
    Ok(result)
}

/// A machine of one zone, for text traces that do not describe theirs.
pub fn single_zone_machine(frames: u64, cpus: Option<u32>) -> MachineInfo {
    MachineInfo {
        page_size: 4096,
        memory_bytes: frames * 4096,
        cpus: cpus.unwrap_or(1),
        zones: vec![nvmos_trace::ZoneInfo {
            node: 0,
            name: "Normal".into(),
            start_pfn: 0,
            spanned: frames,
            present: frames,
        }],
        kernel: String::new(),
        ram: Vec::new(),
    }
}

/// The recorded machine's memory: its zones, cut to the frames backed by
/// RAM when the trace says which those are (a zone spans holes: DMA32
/// holds the PCI hole below 4 GiB), so no allocator hands out a frame the
/// machine does not have and wear is averaged over real frames only.
pub fn recorded_zones(machine: &MachineInfo) -> Vec<Zone> {
    let spans = machine
        .zones
        .iter()
        .filter(|z| z.spanned > 0)
        .map(|z| (z.start_pfn, z.start_pfn + z.spanned));
    if machine.ram.is_empty() {
        return spans.map(|(start, end)| Zone::new(start, end)).collect();
    }
    let mut zones: Vec<Zone> = spans
        .flat_map(|(start, end)| {
            machine.ram.iter().filter_map(move |&(ram_start, ram_end)| {
                let (s, e) = (start.max(ram_start), end.min(ram_end));
                (s < e).then(|| Zone::new(s, e))
            })
        })
        .collect();
    zones.sort_by_key(|z| z.start);
    zones
}

/// The zones the allocators manage under `options`.
pub fn study_zones(machine: &MachineInfo, options: &StudyOptions) -> Vec<Zone> {
    match options.memory_frames {
        Some(frames) => vec![Zone::new(0, frames)],
        None => recorded_zones(machine),
    }
}

/// Replay `events` through a fresh allocator of `kind` (built for its
/// concrete type: no virtual calls per event), with its migration passes
/// every `options.migrate_every_ns` of trace time when its registry entry
/// migrates.
pub fn study_allocator<L, I, E>(
    kind: AllocatorKind,
    machine: &MachineInfo,
    events: I,
    options: &StudyOptions,
) -> Result<StudyRow, StudyError<E>>
where
    L: lock_api::RawMutex + Send + Sync + 'static,
    I: IntoIterator<Item = Result<Event, E>>,
    E: std::error::Error + 'static,
{
    study_allocator_wear::<L, I, E>(kind, machine, events, options).map(|(row, _)| row)
}

/// [`study_allocator`], keeping the per-frame write counts: the one place
/// an allocator row is replayed, for the rows and for what needs every
/// frame's writes (hardware levelling beneath it, Python's arrays).
pub fn study_allocator_wear<L, I, E>(
    kind: AllocatorKind,
    machine: &MachineInfo,
    events: I,
    options: &StudyOptions,
) -> Result<(StudyRow, WearCounter), StudyError<E>>
where
    L: lock_api::RawMutex + Send + Sync + 'static,
    I: IntoIterator<Item = Result<Event, E>>,
    E: std::error::Error + 'static,
{
    allocator_row::<L, I, E>(kind, machine, Feed::Events(events), options)
}

/// [`study_allocator`] over a trace resolved once ([`Resolved`]): the
/// same row, without decoding and matching the trace again.
pub fn study_allocator_resolved<L, E>(
    kind: AllocatorKind,
    machine: &MachineInfo,
    trace: &Resolved,
    options: &StudyOptions,
) -> Result<StudyRow, StudyError<E>>
where
    L: lock_api::RawMutex + Send + Sync + 'static,
    E: std::error::Error + 'static,
{
    allocator_row::<L, std::iter::Empty<Result<Event, E>>, E>(
        kind,
        machine,
        Feed::Resolved(trace),
        options,
    )
    .map(|(row, _)| row)
}

/// What a row replays: a trace's events, or the trace resolved once.
enum Feed<'a, I> {
    Events(I),
    Resolved(&'a Resolved),
}

fn allocator_row<L, I, E>(
    kind: AllocatorKind,
    machine: &MachineInfo,
    events: Feed<'_, I>,
    options: &StudyOptions,
) -> Result<(StudyRow, WearCounter), StudyError<E>>
where
    L: lock_api::RawMutex + Send + Sync + 'static,
    I: IntoIterator<Item = Result<Event, E>>,
    E: std::error::Error + 'static,
{
    struct Job<'a, 'b, I> {
        kind: AllocatorKind,
        events: Feed<'b, I>,
        options: &'a StudyOptions,
    }
    impl<I, E> AllocatorJob for Job<'_, '_, I>
    where
        I: IntoIterator<Item = Result<Event, E>>,
        E: std::error::Error + 'static,
    {
        type Output = Result<(StudyRow, WearCounter), StudyError<E>>;
        fn run<A: StudyAllocator + 'static>(self, alloc: A) -> Self::Output {
            let zones = ZoneMap::new(alloc.zones())?;
            let mut wear = WearCounter::new(zones, self.options.model);
            let every = self
                .kind
                .caps()
                .migrates
                .then_some(self.options.migrate_every_ns);
            let stats = match self.events {
                Feed::Events(events) => run(&mut Migrating(&alloc), &mut wear, events, every)?,
                Feed::Resolved(trace) => {
                    run_resolved(&mut Migrating(&alloc), &mut wear, trace, every)?
                }
            };
            let frames = wear.writes().len().max(1) as f64;
            let row = row(
                self.kind.name().to_string(),
                stats,
                &wear,
                self.options.heat_buckets,
                alloc.metadata_bytes() as f64 / frames,
            );
            Ok((row, wear))
        }
    }
    let zones = study_zones(machine, options);
    let cpus = options.cpus.unwrap_or(machine.cpus).max(1);
    let setup = Setup {
        bank_frames: options.bank_frames,
        ..Setup::new(&zones, cpus)
    }
    .fit_banks();
    kind.with::<L, _>(
        &setup,
        Job {
            kind,
            events,
            options,
        },
    )?
}

/// Count the kernel's own placement in `events` over the recorded zones.
pub fn study_as_recorded<I, E>(
    machine: &MachineInfo,
    events: I,
    options: &StudyOptions,
) -> Result<StudyRow, StudyError<E>>
where
    I: IntoIterator<Item = Result<Event, E>>,
    E: std::error::Error + 'static,
{
    study_as_recorded_wear(machine, events, options).map(|(row, _)| row)
}

/// [`study_as_recorded`] over a trace resolved once.
pub fn study_as_recorded_resolved<E: std::error::Error + 'static>(
    machine: &MachineInfo,
    trace: &Resolved,
    options: &StudyOptions,
) -> Result<StudyRow, StudyError<E>> {
    let map = ZoneMap::new(&recorded_zones(machine))?;
    let mut wear = WearCounter::new(map, options.model);
    let stats = run_resolved(&mut Recorded::default(), &mut wear, trace, None)?;
    Ok(row(
        AS_RECORDED.to_string(),
        stats,
        &wear,
        options.heat_buckets,
        0.0,
    ))
}

/// [`study_as_recorded`], keeping the per-frame write counts.
pub fn study_as_recorded_wear<I, E>(
    machine: &MachineInfo,
    events: I,
    options: &StudyOptions,
) -> Result<(StudyRow, WearCounter), StudyError<E>>
where
    I: IntoIterator<Item = Result<Event, E>>,
    E: std::error::Error + 'static,
{
    let map = ZoneMap::new(&recorded_zones(machine))?;
    let (stats, wear) = as_recorded(map, events, options.model)?;
    let row = row(
        AS_RECORDED.to_string(),
        stats,
        &wear,
        options.heat_buckets,
        0.0,
    );
    Ok((row, wear))
}

fn row(
    allocator: String,
    mut stats: ReplayStats,
    wear: &WearCounter,
    buckets: usize,
    metadata_bytes_per_frame: f64,
) -> StudyRow {
    stats.outside = wear.outside;
    StudyRow {
        writes: crate::writes::WriteWear::of(wear, stats.accounting.write_samples, stats.trace_ns),
        allocator,
        wear: wear.summary(stats.trace_ns),
        heat: heat_map(wear.writes(), buckets),
        stats,
        metadata_bytes_per_frame,
    }
}

/// The largest count in each of `buckets` equal slices of `writes`.
pub fn heat_map(writes: &[u32], buckets: usize) -> Vec<u32> {
    let buckets = buckets.clamp(1, writes.len().max(1));
    (0..buckets)
        .map(|b| {
            let from = b * writes.len() / buckets;
            let to = (b + 1) * writes.len() / buckets;
            writes[from..to].iter().copied().max().unwrap_or(0)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmos_frames::{MigrateType, Order, Pfn};
    use nvmos_trace::{Op, ZoneInfo};
    use std::convert::Infallible;

    fn machine() -> MachineInfo {
        MachineInfo {
            page_size: 4096,
            memory_bytes: 8 << 20,
            cpus: 2,
            zones: vec![ZoneInfo {
                node: 0,
                name: "Normal".into(),
                start_pfn: 0x100,
                spanned: 2048,
                present: 2048,
            }],
            kernel: String::new(),
            ram: Vec::new(),
        }
    }

    /// The kernel's habit: the frame just freed is the next one handed out.
    fn lifo_trace() -> Vec<Result<Event, Infallible>> {
        (0..4000u64)
            .flat_map(|i| {
                let e = |op, t| {
                    Ok(Event {
                        time_ns: t,
                        cpu: (i % 2) as u32,
                        op,
                        pfn: Pfn(0x200),
                        order: Order::ZERO,
                    })
                };
                [
                    e(Op::Alloc(MigrateType::Movable), 2 * i),
                    e(Op::Free, 2 * i + 1),
                ]
            })
            .collect()
    }

    #[test]
    fn ibuddy_spreads_what_linux_concentrates() {
        let options = StudyOptions::default();
        let linux = study_as_recorded(&machine(), lifo_trace(), &options).unwrap();
        assert_eq!(linux.wear.max, 4000);
        let ibuddy = study_allocator::<parking_lot::RawMutex, _, _>(
            AllocatorKind::IBuddy,
            &machine(),
            lifo_trace(),
            &options,
        )
        .unwrap();
        assert_eq!(ibuddy.stats.allocs, 4000);
        // Two spaces cut on a 4 MiB boundary: 768 and 1280 frames, 2000
        // allocations each; fair reuse gives at most ceil(2000 / 768).
        assert!(ibuddy.wear.max <= 3, "{}", ibuddy.wear.max);
        assert!(linux.wear.max_over_mean > 1000.0 * ibuddy.wear.max_over_mean);
        assert_eq!(ibuddy.heat.len(), 256);
        assert!(ibuddy.metadata_bytes_per_frame > 8.0 && ibuddy.metadata_bytes_per_frame < 16.0);
    }

    #[test]
    fn memory_override_is_one_zone() {
        let options = StudyOptions {
            memory_frames: Some(512),
            cpus: Some(1),
            ..StudyOptions::default()
        };
        assert_eq!(study_zones(&machine(), &options), vec![Zone::new(0, 512)]);
        let row = study_allocator::<parking_lot::RawMutex, _, _>(
            AllocatorKind::Lis31,
            &machine(),
            lifo_trace(),
            &options,
        )
        .unwrap();
        assert_eq!(row.wear.frames, 512);
    }

    #[test]
    fn recorded_zones_leave_out_the_holes_the_machine_has() {
        let mut m = machine();
        m.zones.push(ZoneInfo {
            node: 0,
            name: "DMA32".into(),
            start_pfn: 0x1000,
            spanned: 0xff000,
            present: 0xbf000,
        });
        assert_eq!(
            recorded_zones(&m),
            vec![Zone::new(0x100, 0x900), Zone::new(0x1000, 0x100000)]
        );
        m.ram = vec![(0x1, 0x9f), (0x100, 0xc0000)];
        assert_eq!(
            recorded_zones(&m),
            vec![Zone::new(0x100, 0x900), Zone::new(0x1000, 0xc0000)]
        );
    }

    /// Rows run in parallel give the sequential run's result, in its
    /// order, and every row is reported before and after it runs.
    #[test]
    fn parallel_rows_equal_one_thread() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let options = |jobs| Options {
            traces: vec![
                root.join("traces/numpy.nvt"),
                root.join("crates/trace/tests/data/every_case.txt"),
            ],
            allocators: vec![
                AllocatorKind::Lis31,
                AllocatorKind::Buddy,
                AllocatorKind::IBuddy,
            ],
            study: StudyOptions::default(),
            jobs: Some(jobs),
        };
        let run = |jobs| {
            let mut reports = Vec::new();
            let evaluation = evaluate(&options(jobs), &mut |p| reports.push(p)).unwrap();
            let mut json = serde_json::to_value(&evaluation).unwrap();
            for trace in json["traces"].as_array_mut().unwrap() {
                for row in trace["rows"].as_array_mut().unwrap() {
                    row["stats"]["elapsed_ns"] = 0.into();
                }
            }
            (serde_json::to_string(&json).unwrap(), reports)
        };
        let (one, one_reports) = run(1);
        let (three, three_reports) = run(3);
        assert_eq!(one, three);
        assert!(one.contains("\"LiS-31\""));
        for reports in [one_reports, three_reports] {
            // Before and after each of 2 × 4 rows, then the end.
            assert_eq!(reports.len(), 2 * 8 + 1);
            assert!(reports.iter().all(|p| p.total == 8));
            assert!(reports.windows(2).all(|w| w[0].done <= w[1].done));
            assert_eq!(reports.last().unwrap().done, 8);
        }
        assert!(matches!(
            evaluate(&options(0), &mut |_| {}),
            Err(EvaluateError::Options(_))
        ));
    }

    /// A row over the trace resolved once is the row of one pass over
    /// the file: every count, the wear, the heat map (timing aside), with
    /// every unusual case of the fixture, sampled writes and migration.
    #[test]
    fn resolved_rows_equal_streamed_rows() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let options = StudyOptions::default();
        let json = |row: StudyRow| {
            let mut v = serde_json::to_value(row).unwrap();
            v["stats"]["elapsed_ns"] = 0.into();
            v
        };
        for name in [
            "traces/compile_writes.nvt",
            "crates/trace/tests/data/every_case.txt",
        ] {
            let path = root.join(name);
            let open = || nvmos_trace::open(&path).unwrap();
            let machine = match open().header().and_then(|h| h.machine.clone()) {
                Some(m) => m,
                None => single_zone_machine(0x8000, Some(4)),
            };
            let resolved = Resolved::of(open()).unwrap().unwrap();
            assert_eq!(resolved.len() as u64, resolved.accounting().events_read);
            let streamed = study_as_recorded(&machine, open(), &options).unwrap();
            let again = study_as_recorded_resolved::<TraceError>(&machine, &resolved, &options);
            assert_eq!(json(streamed), json(again.unwrap()), "{name}: as recorded");
            for kind in [
                AllocatorKind::Lis31,
                AllocatorKind::M3,
                AllocatorKind::AdaptiveMigrate,
            ] {
                let streamed = study_allocator::<parking_lot::RawMutex, _, _>(
                    kind,
                    &machine,
                    open(),
                    &options,
                )
                .unwrap();
                if name.ends_with(".nvt") {
                    // The cases the resolved replay must get right occur.
                    assert!(streamed.stats.writes.attributed > 0);
                    if kind == AllocatorKind::AdaptiveMigrate {
                        assert!(streamed.stats.blocks_migrated > 0);
                    }
                } else {
                    assert!(streamed.stats.accounting.partial_frees > 0);
                    assert!(streamed.stats.accounting.allocs_of_live_pfn > 0);
                }
                let again = study_allocator_resolved::<parking_lot::RawMutex, TraceError>(
                    kind, &machine, &resolved, &options,
                )
                .unwrap();
                assert_eq!(json(streamed), json(again), "{name}: {kind}");
            }
        }
    }

    #[test]
    fn heat_map_takes_slice_maxima() {
        assert_eq!(heat_map(&[1, 5, 2, 2, 0, 9], 3), vec![5, 2, 9]);
        assert_eq!(heat_map(&[1, 2], 10), vec![1, 2]);
        assert_eq!(heat_map(&[], 4), vec![0]);
    }
}
