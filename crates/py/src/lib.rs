//! # nvmos-py: nvmos from Python
//!
//! The extension module `nvmos._nvmos` under the pure-Python package
//! `nvmos` (`python/nvmos/`): traces, replay, the evaluation and the
//! studies of `nvmos-sim`, for pandas, numpy and sweeps (local or on Ray).
//!
//! The seam is deliberately thin. Options come in as JSON text that serde
//! turns into the study's own `Options` type, and results go out as JSON
//! text of the study's own `Serialize` result (the same bytes the CLI
//! writes to `results.json`, `banks.json`, `swap.json`, `power.json`), so a study's
//! binding is a few lines and a field added in `nvmos-sim` reaches Python
//! without touching this crate. Only bulk arrays (trace columns, per-frame
//! write counts) cross as numpy arrays, moved rather than copied.
//!
//! Every long call releases the GIL (`Python::detach`) and reports
//! progress through an optional Python callable, taking the GIL back only
//! for that call; a Python exception raised by the callable (Ctrl-C's
//! `KeyboardInterrupt`) stops the run at the next step.
//!
//! ```python
//! import nvmos
//! df = nvmos.replay("traces/numpy.nvt", allocators=["iBuddy", "buddy"], memory="1GiB")
//! df[["allocator", "max", "lifetime_pct_of_ideal"]]
//! ```

mod pmo;

use std::io::Cursor;

/// Transparent huge pages for the allocators' per-frame tables, as in the
/// `nvmos` binary.
#[global_allocator]
static ALLOC: nvmos_trace::table::HugePageAlloc = nvmos_trace::table::HugePageAlloc;
use std::path::{Path, PathBuf};

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use nvmos_frames::sync::SpinYield;
use nvmos_frames::MigrateType;
use nvmos_sim::{AllocatorKind, Evaluation, StudyOptions, StudyRow, AS_RECORDED};
use nvmos_trace::{
    detect, Event, EventSource, Format, NvtReader, Op, TextReader, TraceError, TraceHeader,
    TraceInfo,
};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

create_exception!(
    _nvmos,
    NvmosError,
    PyException,
    "Base of every error nvmos raises.\n\nThe message is the Rust error's, its causes joined by ': '. Catch\nthis to catch any of TraceFileError, OptionsError, StudyError,\nSweepError and PmoError."
);
create_exception!(
    _nvmos,
    TraceFileError,
    NvmosError,
    "A trace could not be opened or read (missing file, unknown format,\nbad checksum, truncated or corrupt .nvt, unparsable text line, a pfn\nor CPU beyond the machine).\n\nAttributes:\n    path (str | None): the trace file, when known.\n    line (int | None): the 1-based line of a text (ftrace/perf) trace\n        where the error is, when known.\n    offset (int | None): the byte offset in a .nvt file where the\n        error is, when known."
);
create_exception!(
    _nvmos,
    OptionsError,
    NvmosError,
    "Impossible or unknown options: an unknown allocator, study, machine\nor enum value, a size or count out of range, options JSON the engine\ncannot parse. The message names the field."
);
create_exception!(
    _nvmos,
    StudyError,
    NvmosError,
    "The study itself failed: an allocator or model refused during a\nrun (for example a misbehaving allocator in bench_alloc)."
);

/// The first `TraceError` in `error`'s chain.
fn find_trace_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a TraceError> {
    let mut cause = Some(error);
    while let Some(c) = cause {
        if let Some(t) = c.downcast_ref::<TraceError>() {
            return Some(t);
        }
        cause = c.source();
    }
    None
}

/// A Python exception for `error`: `TraceFileError` with `path`, `line`
/// and `offset` attributes when a trace was at fault, else `kind`.
fn to_py(
    context: &str,
    error: &(dyn std::error::Error + 'static),
    kind: fn(String) -> PyErr,
) -> PyErr {
    let message = if context.is_empty() {
        nvmos_pmo::error_chain(error)
    } else {
        format!("{context}: {}", nvmos_pmo::error_chain(error))
    };
    let Some(trace) = find_trace_error(error) else {
        return kind(message);
    };
    let (path, line, offset) = match trace {
        TraceError::Io { path, .. } | TraceError::UnknownFormat { path, .. } => {
            (Some(path), None, None)
        }
        TraceError::Parse { path, line, .. } => (Some(path), Some(*line), None),
        // `at` is ":LINE" in a text trace, ": event #N" in a .nvt.
        TraceError::BeyondMachine { path, at, .. } => (
            Some(path),
            at.trim_start_matches(':').parse::<u64>().ok(),
            None,
        ),
        TraceError::BadMagic { path, offset }
        | TraceError::UnsupportedVersion { path, offset, .. }
        | TraceError::Checksum { path, offset, .. }
        | TraceError::Truncated { path, offset, .. }
        | TraceError::Corrupt { path, offset, .. } => (Some(path), None, Some(*offset)),
        _ => (None, None, None),
    };
    let err = TraceFileError::new_err(message);
    Python::attach(|py| {
        let value = err.value(py);
        // Setting attributes on a fresh exception instance cannot fail
        // short of memory exhaustion; the message carries them anyway.
        let _ = value.setattr("path", path.map(|p| p.display().to_string()));
        let _ = value.setattr("line", line);
        let _ = value.setattr("offset", offset);
    });
    err
}

fn options_error(message: String) -> PyErr {
    OptionsError::new_err(message)
}

fn study_error(message: String) -> PyErr {
    StudyError::new_err(message)
}

/// Parse `json` into a study's options, naming the field serde refused.
fn parse_options<T: serde::de::DeserializeOwned>(what: &str, json: &str) -> PyResult<T> {
    serde_json::from_str(json).map_err(|e| OptionsError::new_err(format!("{what} options: {e}")))
}

fn to_json<T: serde::Serialize>(value: &T) -> PyResult<String> {
    serde_json::to_string(value).map_err(|e| StudyError::new_err(format!("serialising: {e}")))
}

/// A progress callable, called as `progress(done, total, message)` with
/// the GIL taken back for the call only.
struct Progress {
    callback: Option<Py<PyAny>>,
    total: u64,
    done: u64,
}

impl Progress {
    fn new(callback: Option<Py<PyAny>>, total: u64) -> Self {
        Progress {
            callback,
            total,
            done: 0,
        }
    }

    /// Pass a study's own report on; an exception the callable raised
    /// stops the run.
    fn study(&mut self, p: nvmos_sim::Progress) -> PyResult<()> {
        self.done = p.done;
        self.total = p.total;
        self.report(false, &p.step)
    }

    /// Report that `message` is next (or done, when `step`); an exception
    /// the callable raised stops the run.
    fn report(&mut self, step: bool, message: &str) -> PyResult<()> {
        if step {
            self.done += 1;
        }
        let Some(callback) = &self.callback else {
            return Ok(());
        };
        Python::attach(|py| {
            callback.call1(py, (self.done, self.total, message))?;
            // Ctrl-C arrives as a pending signal while Rust runs.
            py.check_signals()
        })
    }
}

/// A trace given from Python: a path, or the bytes of a trace file
/// already in memory (a numpy `uint8` array, e.g. from Ray's object store,
/// read without a copy) with a name for messages.
enum TraceInput<'a> {
    Path(PathBuf),
    Bytes { name: PathBuf, bytes: &'a [u8] },
}

type Source<'a> = Box<dyn EventSource + Send + 'a>;

impl TraceInput<'_> {
    fn path(&self) -> &Path {
        match self {
            TraceInput::Path(p) => p,
            TraceInput::Bytes { name, .. } => name,
        }
    }

    /// The trace's short name: the file stem without `.nvt`, as the CLI
    /// names rows.
    fn stem(&self) -> String {
        let path = self.path();
        path.file_stem()
            .and_then(|s| s.to_str())
            .map(|s| s.trim_end_matches(".nvt").to_string())
            .unwrap_or_else(|| path.display().to_string())
    }

    fn open(&self) -> Result<Source<'_>, TraceError> {
        match self {
            TraceInput::Path(p) => Ok(nvmos_trace::open(p)?),
            TraceInput::Bytes { name, bytes } => {
                let head = &bytes[..bytes.len().min(64 * 1024)];
                match detect(head) {
                    Some(Format::Nvt) => Ok(Box::new(NvtReader::new(Cursor::new(*bytes), name)?)),
                    Some(format) => Ok(Box::new(TextReader::new(*bytes, name, format))),
                    None => Err(TraceError::UnknownFormat {
                        path: name.clone(),
                        reason: if bytes.is_empty() {
                            "the buffer is empty".into()
                        } else {
                            "neither .nvt magic nor ftrace/perf text lines of kmem events".into()
                        },
                    }),
                }
            }
        }
    }
}

/// Borrowed views of what Python passed: paths as they are, buffers as
/// slices of the arrays (which stay borrowed, read-only, meanwhile).
fn trace_inputs<'a>(
    traces: &'a [(String, Option<PyReadonlyArray1<'a, u8>>)],
) -> PyResult<Vec<TraceInput<'a>>> {
    traces
        .iter()
        .map(|(name, bytes)| match bytes {
            None => Ok(TraceInput::Path(PathBuf::from(name))),
            Some(array) => Ok(TraceInput::Bytes {
                name: PathBuf::from(name),
                bytes: array.as_slice().map_err(|e| {
                    OptionsError::new_err(format!(
                        "{name}: trace bytes: {e} (need a contiguous uint8 array)"
                    ))
                })?,
            }),
        })
        .collect()
}

/// The allocators the replay knows, in the CLI's order.
///
/// Returns:
///     list[tuple[str, str]]: ``(name, description)`` pairs; the names are
///     what ``evaluate``, ``wear`` and the CLI's ``--alloc`` take.
#[pyfunction]
fn allocators() -> Vec<(&'static str, &'static str)> {
    AllocatorKind::ALL
        .iter()
        .map(|k| (k.name(), k.describe()))
        .collect()
}

/// The row name of the kernel's own placement, as recorded in the trace.
///
/// Returns:
///     str: the name (``"Linux (as recorded)"``); ``evaluate`` and ``wear``
///     take it (or ``"as-recorded"``) in place of an allocator name.
#[pyfunction]
fn as_recorded_name() -> &'static str {
    AS_RECORDED
}

/// A study's default options, as the engine defines them.
///
/// Args:
///     study (str): ``"evaluate"``, ``"banks"``, ``"swap"`` or ``"power"``.
///     quick (bool): the study's quick scale (the CLI's ``--quick``)
///         instead of its full scale; ``evaluate`` has one scale.
///
/// Returns:
///     str: the options as JSON (the study's serde ``Options`` type).
///
/// Raises:
///     OptionsError: an unknown study.
#[pyfunction]
#[pyo3(signature = (study, quick=false))]
fn default_options(study: &str, quick: bool) -> PyResult<String> {
    use nvmos_sim::study::{Scale, Study};
    let scale = if quick { Scale::Quick } else { Scale::Full };
    match study {
        "evaluate" => to_json(&StudyOptions::default()),
        "banks" => to_json(&nvmos_sim::banks_study::Banks::options(scale)),
        "swap" => to_json(&nvmos_sim::swap_study::Swap::options(scale)),
        "power" => to_json(&nvmos_sim::power::PowerStudy::options(scale)),
        other => Err(OptionsError::new_err(format!(
            "unknown study {other:?}; known: evaluate, banks, swap, power"
        ))),
    }
}

/// The memory-system presets (machines) of ``nvmos-memsys``.
///
/// Returns:
///     list[str]: preset names, as ``banks(machine=...)`` and the CLI's
///     ``--machine`` take them.
#[pyfunction]
fn machine_presets() -> Vec<String> {
    nvmos_memsys::Machine::preset_names()
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Parse a memory size as the CLI's ``--memory`` reads it.
///
/// Args:
///     text (str): a size with a binary unit (``"4GiB"``, ``"512MiB"``,
///         ``"64KiB"``, ``"4096B"``; a whole number of 4 KiB frames) or a
///         bare number (a count of 4 KiB frames).
///
/// Returns:
///     int: the size in 4 KiB frames.
///
/// Raises:
///     OptionsError: an unknown unit, a size that is not a whole number of
///         frames, or text that is not a size.
#[pyfunction]
fn parse_memory(text: &str) -> PyResult<u64> {
    nvmos_sim::units::parse_memory(text).map_err(|e| OptionsError::new_err(format!("memory: {e}")))
}

/// What a trace says about itself, and optionally a one-pass summary.
///
/// Args:
///     path (str | os.PathLike): the trace file (``.nvt``, ftrace text or
///         perf script text; told apart by content).
///     scan (bool): also read every event once for ``info``.
///
/// Returns:
///     str: JSON ``{"path", "format", "header", "info"}``: ``format`` is
///     ``"nvt"``, ``"ftrace"`` or ``"perf"``; ``header`` the ``.nvt``
///     header (recorded machine, counts; ``null`` for text traces);
///     ``info`` (only with ``scan``) the ``TraceInfo`` summary: events,
///     allocations and frees, counts by CPU, order and migratetype, pfn
///     span, duration (ns) and the accounting of unusual events.
///
/// Raises:
///     TraceFileError: the file cannot be opened, its format is unknown, or
///         (with ``scan``) an event cannot be read.
#[pyfunction]
#[pyo3(signature = (path, scan=false))]
fn trace_header(py: Python<'_>, path: PathBuf, scan: bool) -> PyResult<String> {
    py.detach(|| -> Result<String, (String, TraceError)> {
        let mut source = nvmos_trace::open(&path).map_err(|e| (String::new(), e))?;
        let mut out = serde_json::Map::new();
        out.insert("path".into(), path.display().to_string().into());
        out.insert("format".into(), source.format().name().into());
        let header: Option<TraceHeader> = source.header().cloned();
        out.insert(
            "header".into(),
            serde_json::to_value(&header).unwrap_or_default(),
        );
        if scan {
            let info =
                TraceInfo::from_source(&mut *source).map_err(|e| ("summarising".to_string(), e))?;
            out.insert(
                "info".into(),
                serde_json::to_value(&info).unwrap_or_default(),
            );
        }
        Ok(serde_json::Value::Object(out).to_string())
    })
    .map_err(|(context, e)| to_py(&context, &e, options_error))
}

/// A trace's events as an iterator of batches of numpy columns.
///
/// ``TraceBatches(path, batch=1048576)`` opens the trace; each ``next()``
/// reads up to ``batch`` events (at least 1) and returns a dict of numpy
/// arrays, each built in Rust and handed to numpy without a copy:
///
/// - ``time_ns`` (uint64): the event's timestamp (ns).
/// - ``cpu`` (uint32): the CPU it happened on.
/// - ``op`` (uint8): 0 allocation, 1 free, 2 sampled write.
/// - ``migratetype`` (int8): 0 unmovable, 1 movable, 2 reclaimable; -1
///   for frees and writes.
/// - ``pfn`` (uint64): the first page frame of the block.
/// - ``order`` (uint8): the block is 2**order frames.
///
/// Raises:
///     OptionsError: ``batch`` is 0.
///     TraceFileError: the trace cannot be opened, or (from ``next()``) an
///         event cannot be read.
#[pyclass(module = "nvmos._nvmos")]
struct TraceBatches {
    source: Option<Box<dyn EventSource + Send + Sync>>,
    batch: usize,
    path: PathBuf,
}

/// `open` gives a `Send` source; the batches object also has to be
/// `Sync` for pyo3, and only ever touches the source with the GIL held
/// (`&mut self`), so the wrapper's `Sync` is sound.
struct SyncSource(nvmos_trace::BoxedSource);
// SAFETY: the only access is through `&mut`, serialised by the GIL.
unsafe impl Sync for SyncSource {}
impl Iterator for SyncSource {
    type Item = Result<Event, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
}
impl EventSource for SyncSource {
    fn format(&self) -> Format {
        self.0.format()
    }
    fn header(&self) -> Option<&TraceHeader> {
        self.0.header()
    }
    fn counts(&self) -> nvmos_trace::SourceCounts {
        self.0.counts()
    }
}

#[pymethods]
impl TraceBatches {
    #[new]
    #[pyo3(signature = (path, batch=1 << 20))]
    fn new(path: PathBuf, batch: usize) -> PyResult<Self> {
        if batch == 0 {
            return Err(OptionsError::new_err("batch: at least one event per batch"));
        }
        let source = nvmos_trace::open(&path).map_err(|e| to_py("", &e, options_error))?;
        Ok(TraceBatches {
            source: Some(Box::new(SyncSource(source))),
            batch,
            path,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(mut source) = self.source.take() else {
            return Ok(None);
        };
        let batch = self.batch;
        let (columns, source) = py.detach(move || {
            let mut c = Columns::with_capacity(batch.min(1 << 20));
            let mut error = None;
            for event in source.by_ref().take(batch) {
                match event {
                    Ok(e) => c.push(&e),
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
            ((c, error), source)
        });
        let (columns, error) = columns;
        if let Some(e) = error {
            return Err(to_py(
                &format!("reading {}", self.path.display()),
                &e,
                options_error,
            ));
        }
        if columns.time_ns.is_empty() {
            return Ok(None);
        }
        self.source = Some(source);
        columns.into_dict(py).map(Some)
    }
}

/// One batch of events, column by column.
struct Columns {
    time_ns: Vec<u64>,
    cpu: Vec<u32>,
    op: Vec<u8>,
    migratetype: Vec<i8>,
    pfn: Vec<u64>,
    order: Vec<u8>,
}

impl Columns {
    fn with_capacity(n: usize) -> Self {
        Columns {
            time_ns: Vec::with_capacity(n),
            cpu: Vec::with_capacity(n),
            op: Vec::with_capacity(n),
            migratetype: Vec::with_capacity(n),
            pfn: Vec::with_capacity(n),
            order: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, e: &Event) {
        self.time_ns.push(e.time_ns);
        self.cpu.push(e.cpu);
        let (op, mt) = match e.op {
            Op::Alloc(MigrateType::Unmovable) => (0, 0),
            Op::Alloc(MigrateType::Movable) => (0, 1),
            Op::Alloc(MigrateType::Reclaimable) => (0, 2),
            Op::Free => (1, -1),
            Op::Write => (2, -1),
        };
        self.op.push(op);
        self.migratetype.push(mt);
        self.pfn.push(e.pfn.0);
        self.order.push(e.order.get());
    }

    fn into_dict(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("time_ns", self.time_ns.into_pyarray(py))?;
        d.set_item("cpu", self.cpu.into_pyarray(py))?;
        d.set_item("op", self.op.into_pyarray(py))?;
        d.set_item("migratetype", self.migratetype.into_pyarray(py))?;
        d.set_item("pfn", self.pfn.into_pyarray(py))?;
        d.set_item("order", self.order.into_pyarray(py))?;
        Ok(d)
    }
}

/// The rows to produce: the recorded placement and/or allocators.
fn parse_rows(names: &[String]) -> PyResult<Vec<Option<AllocatorKind>>> {
    if names.is_empty() {
        return Err(OptionsError::new_err(
            "allocators: name at least one (or leave it out for all)",
        ));
    }
    names
        .iter()
        .map(|name| {
            if name.eq_ignore_ascii_case(AS_RECORDED) || name.eq_ignore_ascii_case("as-recorded") {
                return Ok(None);
            }
            AllocatorKind::parse(name).map(Some).ok_or_else(|| {
                let known: Vec<_> = AllocatorKind::ALL.iter().map(|k| k.name()).collect();
                OptionsError::new_err(format!(
                    "allocators: unknown allocator {name:?}; known: {}, {AS_RECORDED:?}",
                    known.join(", ")
                ))
            })
        })
        .collect()
}

/// Why a run stopped, carried out of the GIL-free section.
enum Failure {
    /// A library error, with what was being done.
    Rust {
        context: String,
        error: Box<dyn std::error::Error + Send + Sync + 'static>,
        kind: fn(String) -> PyErr,
    },
    /// A plain message.
    Message(PyErr),
}

impl Failure {
    fn rust<E: std::error::Error + Send + Sync + 'static>(
        context: impl Into<String>,
        kind: fn(String) -> PyErr,
    ) -> impl FnOnce(E) -> Failure {
        move |e| Failure::Rust {
            context: context.into(),
            error: Box::new(e),
            kind,
        }
    }

    fn into_py(self) -> PyErr {
        match self {
            Failure::Rust {
                context,
                error,
                kind,
            } => to_py(&context, &*error, kind),
            Failure::Message(e) => e,
        }
    }
}

impl From<PyErr> for Failure {
    fn from(e: PyErr) -> Self {
        Failure::Message(e)
    }
}

/// Replay traces through allocators: the engine of ``nvmos evaluate``
/// and ``nvmos replay``.
///
/// For each trace, one row per entry of ``allocators``, in that order.
/// The GIL is released while it runs.
///
/// Args:
///     traces (list[tuple[str, numpy.ndarray | None]]): ``(path, None)``
///         to read a trace file, or ``(name, data)`` with ``data`` a
///         contiguous 1-d uint8 array holding a trace file's bytes (read
///         without a copy; ``name`` names the rows and messages).
///     allocators (list[str]): allocator names (``allocators()``) and/or
///         the recorded placement (``as_recorded_name()`` or
///         ``"as-recorded"``); at least one.
///     options (str): ``StudyOptions`` as JSON: ``memory_frames`` (4 KiB
///         frames managed as one zone, or null for the recorded
///         machine's zones), ``cpus`` (CPUs served, or null for the
///         recorded machine's), ``model`` (``{"writes_per_alloc": N}``:
///         full-page writes each allocated frame receives),
///         ``heat_buckets`` (columns of the heat map); optionally
///         ``bank_frames`` (frames per bank for the bank-aware
///         allocators) and ``migrate_every_ns`` (trace time between
///         migration passes, ns).
///     progress (Callable[[int, int, str], object] | None): called as
///         ``progress(done, total, message)``, counting rows (trace x
///         allocator); an exception it raises stops the run and is
///         re-raised.
///
/// Returns:
///     str: the ``Evaluation`` as JSON, exactly what the CLI writes to
///     ``results.json``.
///
/// Raises:
///     OptionsError: options that do not parse or cannot be (0 CPUs, 0
///         frames, 0 writes per allocation), an unknown allocator, no
///         allocator, bad trace bytes.
///     TraceFileError: a trace cannot be opened or read, or does not fit
///         the memory or CPUs given.
///     StudyError: a replay failed.
#[pyfunction]
#[pyo3(signature = (traces, allocators, options, progress=None))]
fn evaluate(
    py: Python<'_>,
    traces: Vec<(String, Option<PyReadonlyArray1<'_, u8>>)>,
    allocators: Vec<String>,
    options: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let options: StudyOptions = parse_options("evaluate", options)?;
    check_study_options(&options)?;
    let rows = parse_rows(&allocators)?;
    let inputs = trace_inputs(&traces)?;
    let total = (inputs.len() * rows.len()) as u64;
    let evaluation = py
        .detach(|| -> Result<Evaluation, Failure> {
            let mut progress = Progress::new(progress, total);
            let mut studies = Vec::new();
            for input in &inputs {
                let name = input.stem();
                // The one per-trace study the CLI runs too; a Python error
                // raised by the progress callback stops it and is re-raised.
                let mut stopped: Option<PyErr> = None;
                let study = nvmos_sim::evaluate::study_trace(
                    input.path(),
                    &|| input.open(),
                    &rows,
                    &options,
                    &mut |label, finished| match progress
                        .report(finished, &format!("{name}: {label}"))
                    {
                        Ok(()) => true,
                        Err(e) => {
                            stopped = Some(e);
                            false
                        }
                    },
                );
                match study {
                    Ok(study) => studies.push(study),
                    Err(_) if stopped.is_some() => {
                        return Err(Failure::Message(stopped.take().expect("checked")))
                    }
                    Err(e @ nvmos_sim::evaluate::EvaluateError::Replay { .. }) => {
                        return Err(Failure::rust(String::new(), study_error)(e))
                    }
                    Err(e) => return Err(Failure::rust(String::new(), options_error)(e)),
                }
            }
            Ok(Evaluation {
                options: options.clone(),
                traces: studies,
                not_traces: Vec::new(),
            })
        })
        .map_err(Failure::into_py)?;
    to_json(&evaluation)
}

/// What the CLI refuses before a run.
fn check_study_options(options: &StudyOptions) -> PyResult<()> {
    if options.cpus == Some(0) {
        return Err(OptionsError::new_err(
            "cpus: 0: an allocator serves at least one CPU",
        ));
    }
    if options.memory_frames == Some(0) {
        return Err(OptionsError::new_err("memory: 0 frames"));
    }
    let max = nvmos_sim::WriteModel::MAX_WRITES_PER_ALLOC;
    if options.model.writes_per_alloc == 0 || options.model.writes_per_alloc > max {
        return Err(OptionsError::new_err(format!(
            "model.writes_per_alloc: {}: 1 to {max} writes per allocation",
            options.model.writes_per_alloc
        )));
    }
    Ok(())
}

/// One trace through one allocator, keeping the per-frame write counts.
///
/// Args:
///     trace (str): the trace file, or the name of the trace in ``bytes``.
///     allocator (str): an allocator name, or the recorded placement
///         (``as_recorded_name()`` or ``"as-recorded"``).
///     options (str): ``StudyOptions`` as JSON (see ``evaluate``).
///     bytes (numpy.ndarray | None): a contiguous 1-d uint8 array holding
///         the trace file's bytes, read instead of the file.
///
/// Returns:
///     tuple[numpy.ndarray, str]: ``writes``, a uint32 array of writes per
///     frame (count) over every frame of the zones in dense zone order
///     (moved from the replay's counter, not copied), and the row as JSON,
///     as in ``results.json``.
///
/// Raises:
///     OptionsError: bad options or an unknown allocator.
///     TraceFileError: the trace cannot be opened or read.
///     StudyError: the replay failed.
#[pyfunction]
#[pyo3(signature = (trace, allocator, options, bytes=None))]
fn wear<'py>(
    py: Python<'py>,
    trace: String,
    allocator: String,
    options: &str,
    bytes: Option<PyReadonlyArray1<'py, u8>>,
) -> PyResult<(Bound<'py, PyArray1<u32>>, String)> {
    let options: StudyOptions = parse_options("wear", options)?;
    check_study_options(&options)?;
    let row = parse_rows(std::slice::from_ref(&allocator))?[0];
    let traces = [(trace, bytes)];
    let inputs = trace_inputs(&traces)?;
    let input = &inputs[0];
    let (writes, row) = py
        .detach(|| -> Result<(Vec<u32>, StudyRow), Failure> {
            use nvmos_sim::evaluate::{self as ev, EvaluateError};
            let path = input.path();
            let failed = |e: EvaluateError| Failure::rust(String::new(), options_error)(e);
            // The machine and the checks `evaluate` uses (one place).
            let open = || input.open().map_err(EvaluateError::Open);
            let (machine, _, text_trace) =
                ev::trace_machine(path, &open, &options).map_err(failed)?;
            let mut source = nvmos_trace::Checked::new(
                open().map_err(failed)?,
                path,
                ev::row_limits(row, text_trace, &options),
            );
            let replayed = match row {
                None => ev::study_as_recorded_wear(&machine, &mut source, &options),
                Some(kind) => ev::study_allocator_wear::<SpinYield, _, _>(
                    kind,
                    &machine,
                    &mut source,
                    &options,
                ),
            };
            let (mut row, counter) = replayed.map_err(Failure::rust(
                format!("{}: replaying", path.display()),
                study_error,
            ))?;
            row.stats.accounting.add_source_counts(&source.counts());
            Ok((counter.writes().to_vec(), row))
        })
        .map_err(Failure::into_py)?;
    Ok((writes.into_pyarray(py), to_json(&row)?))
}

/// The banks study (``nvmos study banks``): frame placement and
/// row-buffer conflicts on a modelled memory system.
///
/// Args:
///     machine (str): a memsys preset name (``machine_presets()``) or the
///         path of a machine TOML file; overrides ``options``' field.
///     options (str): ``BanksOptions`` as JSON (``default_options("banks")``
///         shows every field: ``cores``, ``placements``, ``accesses``,
///         ``kernel``, ``array_bytes`` (bytes), ``passes``, ``mlp``
///         (requests in flight per core), ``policy``, ``queue_depth``,
///         ``seed``, ``basic_model``).
///     analyse (bool): also run the analysing program (recover the
///         machine's bank mapping from timing); overrides ``options``.
///     progress (Callable[[int, int, str], object] | None): called as
///         ``progress(done, total, message)``; an exception it raises stops
///         the run and is re-raised.
///
/// Returns:
///     str: what the CLI writes to ``banks.json`` (``{"study",
///     "headline", "analysis", "checks"}``) as JSON.
///
/// Raises:
///     OptionsError: bad options, an unknown preset, or a machine file
///         that cannot be read.
///     StudyError: the study failed.
#[pyfunction]
#[pyo3(signature = (machine, options, analyse=true, progress=None))]
fn banks(
    py: Python<'_>,
    machine: &str,
    options: &str,
    analyse: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    use nvmos_sim::banks::BanksError;
    use nvmos_sim::banks_study::{Banks, BanksOptions};
    use nvmos_sim::study::Study;
    let mut options: BanksOptions = parse_options("banks", options)?;
    options.machine = machine.to_owned();
    options.analyse = analyse;
    let output = py
        .detach(|| -> Result<_, Failure> {
            let mut progress = Progress::new(progress, 0);
            let mut stop = None;
            let output = Banks::run(&options, &mut |p| {
                if stop.is_none() {
                    stop = progress.study(p).err();
                }
            });
            if let Some(e) = stop {
                return Err(e.into());
            }
            output.map_err(|e| {
                // Options and machines the study refuses are the caller's.
                let kind = match e {
                    BanksError::Spec(_)
                    | BanksError::UnknownMachine { .. }
                    | BanksError::Machine { .. } => options_error,
                    _ => study_error,
                };
                Failure::rust("running the banks study", kind)(e)
            })
        })
        .map_err(Failure::into_py)?;
    to_json(&output)
}

/// The swap study (``nvmos study swap``): SCM as a paging device.
///
/// Args:
///     options (str): ``SwapStudyOptions`` as JSON
///         (``default_options("swap")`` shows every field: ``traces``
///         (folder of ``*.swt.zst`` and ``*.lackey.zst`` traces),
///         ``pc_scale``, ``aging_rounds``, ``config`` (reclaim, congestion
///         and read-ahead settings), ``seed``, ...).
///     progress (Callable[[int, int, str], object] | None): as for
///         ``banks``.
///
/// Returns:
///     str: the ``SwapStudy`` as JSON (what the CLI writes to
///     ``swap.json``).
///
/// Raises:
///     OptionsError: bad options.
///     TraceFileError: a swap or lackey trace cannot be read.
///     StudyError: the model or a trace failed.
#[pyfunction]
#[pyo3(signature = (options, progress=None))]
fn swap(py: Python<'_>, options: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    use nvmos_sim::study::Study;
    use nvmos_sim::swap_study::{Swap, SwapStudyError, SwapStudyOptions};
    let options: SwapStudyOptions = parse_options("swap", options)?;
    let study = py
        .detach(|| -> Result<_, Failure> {
            let mut progress = Progress::new(progress, 0);
            let mut stop = None;
            let study = Swap::run(&options, &mut |p| {
                if stop.is_none() {
                    stop = progress.study(p).err();
                }
            });
            if let Some(e) = stop {
                return Err(e.into());
            }
            study.map_err(|e| {
                let kind = match e {
                    SwapStudyError::Options(_) => options_error,
                    _ => study_error,
                };
                Failure::rust("running the swap study", kind)(e)
            })
        })
        .map_err(Failure::into_py)?;
    to_json(&study)
}

/// The options of ``nvmos bench alloc``.
///
/// Args:
///     quick (bool): ``--quick``'s scale instead of the full one.
///
/// Returns:
///     str: ``BenchAllocOptions`` as JSON (allocators, patterns, threads,
///     frames, rounds, repeat, mixed_ops, seed, lock, free_order).
#[pyfunction]
#[pyo3(signature = (quick=false))]
fn bench_alloc_options(quick: bool) -> PyResult<String> {
    use nvmos_sim::bench_alloc::BenchAlloc;
    use nvmos_sim::study::{Scale, Study};
    to_json(&BenchAlloc::options(if quick {
        Scale::Quick
    } else {
        Scale::Full
    }))
}

/// ``nvmos bench alloc``: allocation and free latency of the allocators,
/// timed on this machine's cores (the iBuddy talk's Table 2).
///
/// Args:
///     options (str): ``BenchAllocOptions`` as JSON (see
///         ``bench_alloc_options``).
///     progress (Callable[[int, int, str], object] | None): as for
///         ``banks``.
///
/// Returns:
///     str: the ``BenchAlloc`` result as JSON (what ``--json`` prints):
///     ``options``, ``cells`` (per allocator x pattern x threads, times in
///     ns), ``skipped``, the comparison rows and ``checks``.
///
/// Raises:
///     OptionsError: a bad allocator, pattern or field.
///     StudyError: an allocator misbehaved (refused frees, failed
///         validation).
#[pyfunction]
#[pyo3(signature = (options, progress=None))]
fn bench_alloc(py: Python<'_>, options: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    use nvmos_sim::bench_alloc::{self, BenchAllocOptions};
    let options: BenchAllocOptions = parse_options("bench_alloc", options)?;
    options
        .check()
        .map_err(|e| OptionsError::new_err(format!("bench_alloc options: {e}")))?;
    let result = py
        .detach(|| -> Result<_, Failure> {
            let mut progress = Progress::new(progress, options.steps());
            let mut stop = None;
            let result = bench_alloc::run(&options, &mut |p| {
                if stop.is_none() {
                    progress.done = p.done;
                    stop = progress.report(false, &p.step).err();
                }
            });
            if let Some(e) = stop {
                return Err(e.into());
            }
            result.map_err(Failure::rust("running bench alloc", study_error))
        })
        .map_err(Failure::into_py)?;
    to_json(&result)
}

/// The power study's options at a scale.
///
/// Args:
///     scale (str): ``"full"`` (the default options) or ``"quick"``
///         (``--quick``).
///
/// Returns:
///     str: ``PowerOptions`` as JSON.
///
/// Raises:
///     OptionsError: another scale.
#[pyfunction]
#[pyo3(signature = (scale="full"))]
fn power_options(scale: &str) -> PyResult<String> {
    use nvmos_sim::power::PowerStudy;
    use nvmos_sim::study::{Scale, Study};
    let scale = match scale {
        "full" => Scale::Full,
        "quick" => Scale::Quick,
        other => {
            return Err(OptionsError::new_err(format!(
                "scale: {other:?} is neither \"full\" nor \"quick\""
            )))
        }
    };
    to_json(&PowerStudy::options(scale))
}

/// The power study (``nvmos study power``): power-aware placement on
/// banks that can be powered down.
///
/// Args:
///     options (str): ``PowerOptions`` as JSON (see ``power_options``).
///     progress (Callable[[int, int, str], object] | None): as for
///         ``banks``.
///
/// Returns:
///     str: the ``PowerStudy`` as JSON (what the CLI writes to
///     ``power.json``).
///
/// Raises:
///     OptionsError: options the study refuses, an unknown workload or
///         power model, a trace that cannot be opened.
///     StudyError: the study failed.
#[pyfunction]
#[pyo3(signature = (options, progress=None))]
fn power(py: Python<'_>, options: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    use nvmos_sim::power::{self, PowerOptions, PowerStudyError};
    let options: PowerOptions = parse_options("power", options)?;
    options
        .validate()
        .map_err(|e| to_py("power options", &e, options_error))?;
    let study = py
        .detach(|| -> Result<_, Failure> {
            let mut progress = Progress::new(progress, 0);
            let mut stop = None;
            let study = power::run_study(&options, &mut |p| {
                progress.done = p.done;
                progress.total = p.total;
                stop = progress.report(false, &p.step).err();
                stop.is_none()
            });
            if let Some(e) = stop {
                return Err(e.into());
            }
            study.map_err(|e| {
                let kind = match e {
                    PowerStudyError::Options(_)
                    | PowerStudyError::Workload { .. }
                    | PowerStudyError::Model { .. }
                    | PowerStudyError::Open { .. } => options_error,
                    _ => study_error,
                };
                Failure::rust("running the power study", kind)(e)
            })
        })
        .map_err(Failure::into_py)?;
    to_json(&study)
}

/// Run the ``nvmos`` command-line tool in this process: ``argv`` as
/// ``sys.argv`` gives it (the program's name first). Returns its exit
/// status; usage errors, ``--help`` and ``--version`` end the process
/// from inside, as the binary does. The package's ``nvmos`` command
/// (``nvmos._cli``) is this; it is not part of the Python API.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    // The tool runs for minutes and takes no Python objects.
    py.detach(|| nvmos::main_from(argv))
}

/// The Rust engine of the ``nvmos`` package (built with PyO3).
///
/// Options cross as JSON text of the engine's serde types and results
/// come back as JSON text, the documents the CLI writes; bulk arrays cross
/// as numpy arrays. Use the ``nvmos`` package, which wraps these functions
/// into DataFrames; this module is its implementation.
#[pymodule]
fn _nvmos(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("NvmosError", py.get_type::<NvmosError>())?;
    m.add("TraceFileError", py.get_type::<TraceFileError>())?;
    m.add("OptionsError", py.get_type::<OptionsError>())?;
    m.add("StudyError", py.get_type::<StudyError>())?;
    m.add_class::<TraceBatches>()?;
    pmo::register(m)?;
    m.add_function(wrap_pyfunction!(allocators, m)?)?;
    m.add_function(wrap_pyfunction!(as_recorded_name, m)?)?;
    m.add_function(wrap_pyfunction!(default_options, m)?)?;
    m.add_function(wrap_pyfunction!(machine_presets, m)?)?;
    m.add_function(wrap_pyfunction!(parse_memory, m)?)?;
    m.add_function(wrap_pyfunction!(trace_header, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate, m)?)?;
    m.add_function(wrap_pyfunction!(wear, m)?)?;
    m.add_function(wrap_pyfunction!(banks, m)?)?;
    m.add_function(wrap_pyfunction!(swap, m)?)?;
    m.add_function(wrap_pyfunction!(bench_alloc_options, m)?)?;
    m.add_function(wrap_pyfunction!(bench_alloc, m)?)?;
    m.add_function(wrap_pyfunction!(power_options, m)?)?;
    m.add_function(wrap_pyfunction!(power, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
