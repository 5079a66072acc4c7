"""The Python API over the Rust engine (``nvmos._nvmos``).

Every function takes the CLI's options, runs the engine with the GIL
released, and returns a pandas DataFrame with one row per result row; the
full result (the JSON document the CLI writes) is ``df.attrs["result"]``,
a :class:`Result`.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import numpy as np
import pandas as pd

from . import _nvmos

NvmosError = _nvmos.NvmosError
TraceFileError = _nvmos.TraceFileError
OptionsError = _nvmos.OptionsError
StudyError = _nvmos.StudyError

#: The row name of the kernel's own placement, "Linux (as recorded)".
AS_RECORDED: str = _nvmos.as_recorded_name()

#: Seconds in a year, as the engine counts them (365.25 days).
SECONDS_PER_YEAR: float = 365.25 * 24.0 * 3600.0

#: Endurances the engine reports lifetimes for (``lifetime_years_1e6`` ...).
ENDURANCES = (1e6, 1e7, 1e8)

PathLike = Union[str, "os.PathLike[str]"]
#: A trace: a path, a :class:`Trace`, or ``(name, bytes)`` of a trace file
#: already in memory (bytes, bytearray or a uint8 numpy array).
TraceLike = Union[PathLike, "Trace", tuple]
Progress = Union[None, bool, Callable[[int, int, str], Any]]


def allocators() -> list[str]:
    """The allocator names replay takes, in the CLI's order."""
    return [name for name, _ in _nvmos.allocators()]


def machine_presets() -> list[str]:
    """The memory-system presets (``banks(machine=...)``, sweeps)."""
    return list(_nvmos.machine_presets())


def parse_memory(memory: Union[str, int]) -> int:
    """A memory size as the CLI's ``--memory`` reads it, in 4 KiB frames:
    ``"4GiB"``, ``"512MiB"``, or an int (a frame count)."""
    if isinstance(memory, bool) or not isinstance(memory, (str, int, np.integer)):
        raise OptionsError(f"memory: {memory!r} is neither a size like '4GiB' nor a frame count")
    if isinstance(memory, (int, np.integer)):
        if memory <= 0:
            raise OptionsError(f"memory: {memory} frames: give a positive frame count")
        return int(memory)
    return _nvmos.parse_memory(memory)


class Result:
    """A study's full result: ``raw`` is the JSON document the CLI writes
    (``results.json``, ``banks.json``, ``swap.json``) as Python objects.

    Kept in ``DataFrame.attrs["result"]``; immutable, so pandas' copies of
    ``attrs`` share it instead of deep-copying it.
    """

    def __init__(self, kind: str, raw: Any):
        self.kind = kind
        self.raw = raw

    def __deepcopy__(self, memo: dict) -> "Result":
        return self

    def __repr__(self) -> str:
        return f"<nvmos.Result {self.kind}>"

    def _row(self, trace: str, allocator: str) -> dict:
        if self.kind != "evaluate":
            raise NvmosError(f"a {self.kind} result has no per-allocator rows")
        for t in self.raw["traces"]:
            if t["trace"] == trace:
                for row in t["rows"]:
                    if row["allocator"] == allocator:
                        return row
                names = [r["allocator"] for r in t["rows"]]
                raise KeyError(f"no allocator {allocator!r} for trace {trace!r}; have {names}")
        raise KeyError(f"no trace {trace!r}; have {[t['trace'] for t in self.raw['traces']]}")

    def heat(self, trace: str, allocator: str) -> np.ndarray:
        """The wear heat map: the most writes to one frame in each of
        ``heat_buckets`` equal slices of the frames, in pfn order."""
        return np.asarray(self._row(trace, allocator)["heat"], dtype=np.uint32)

    def histogram(self, trace: str, allocator: str) -> np.ndarray:
        """Per-frame wear histogram: an ``(n, 2)`` uint64 array of distinct
        write counts and how many frames have each, ascending."""
        pairs = self._row(trace, allocator)["wear"]["histogram"]
        return np.asarray(pairs, dtype=np.uint64).reshape(-1, 2)


def _progress(progress: Progress, desc: str) -> tuple[Optional[Callable], Callable[[], None]]:
    """A callback for the engine, and a function closing what it opened.

    ``True``/``None``: a tqdm bar when tqdm is installed (drawn only on a
    terminal, as tqdm's ``disable=None`` does); ``False``: none; a callable:
    called as ``progress(done, total, message)``.
    """
    if progress is False:
        return None, lambda: None
    if callable(progress):
        return progress, lambda: None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None, lambda: None
    bar = tqdm(desc=desc, disable=None, unit="step", leave=False)

    def update(done: int, total: int, message: str) -> None:
        if total and bar.total != total:
            bar.total = total
        bar.set_postfix_str(message, refresh=False)
        bar.update(done - bar.n)

    return update, bar.close


def _trace_arg(trace: TraceLike) -> tuple[str, Optional[np.ndarray]]:
    """``(name, None)`` for a path, ``(name, uint8 array)`` for bytes."""
    if isinstance(trace, Trace):
        return str(trace.path), None
    if isinstance(trace, tuple):
        if len(trace) != 2:
            raise OptionsError("trace: a tuple must be (name, bytes)")
        name, data = trace
        if isinstance(data, (bytes, bytearray, memoryview)):
            data = np.frombuffer(data, dtype=np.uint8)
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
            raise OptionsError(f"trace {name!r}: bytes must be bytes or a 1-d uint8 array")
        return str(name), np.ascontiguousarray(data)
    if isinstance(trace, (str, os.PathLike)):
        return os.fspath(trace), None
    raise OptionsError(f"trace: {trace!r} is neither a path, a Trace nor (name, bytes)")


def _study_options(memory, cpus, writes_per_alloc: int, heat_buckets: int) -> str:
    if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, (int, np.integer))):
        raise OptionsError(f"cpus: {cpus!r} is not a whole number")
    if cpus is not None and cpus < 1:
        raise OptionsError(f"cpus: {cpus}: an allocator serves at least one CPU")
    if not isinstance(writes_per_alloc, (int, np.integer)) or writes_per_alloc < 1:
        raise OptionsError(f"writes_per_alloc: {writes_per_alloc!r}: at least 1")
    if not isinstance(heat_buckets, (int, np.integer)) or heat_buckets < 1:
        raise OptionsError(f"heat_buckets: {heat_buckets!r}: at least 1")
    return json.dumps(
        {
            "memory_frames": None if memory is None else parse_memory(memory),
            "cpus": None if cpus is None else int(cpus),
            "model": {"writes_per_alloc": int(writes_per_alloc)},
            "heat_buckets": int(heat_buckets),
        }
    )


def _rows_arg(allocators: Optional[Sequence[str]], as_recorded: bool) -> list[str]:
    if isinstance(allocators, str):
        allocators = [allocators]
    names = list(allocators) if allocators is not None else globals()["allocators"]()
    if as_recorded and AS_RECORDED not in names:
        names = [AS_RECORDED] + names
    return names


#: The columns of an evaluation's DataFrame, in order: what ``summary.csv``
#: and ``results.json`` hold per row, flattened (``lifetime_years`` split
#: per endurance).
STATS_COLUMNS = [
    "events", "allocs", "frees", "alloc_failures", "frees_of_failed", "outside",
    "events_read", "lost_events", "frees_before_recording", "frees_mismatched_order",
    "partial_frees", "allocs_of_live_pfn", "time_reversals", "elapsed_ns", "trace_ns",
    "migration_passes", "blocks_migrated", "pages_migrated",
]  # fmt: skip
WEAR_COLUMNS = [
    "frames", "touched", "total_writes", "max", "mean", "max_over_mean",
    "max_over_touched_mean", "cov", "gini", "lifetime_pct_of_ideal",
]  # fmt: skip
# Every column of the CLI's summary.csv, plus the rest of results.json's
# per-row numbers: the replay's counts (every event accounted for) and the
# flag the CLI prints for a row with refused allocations or outside writes.
EVALUATE_COLUMNS = [
    "trace", "allocator", "source", "duration_ns",
    *STATS_COLUMNS, *WEAR_COLUMNS,
    "lifetime_years_1e6", "lifetime_years_1e7", "lifetime_years_1e8",
    "metadata_bytes_per_frame", "ns_per_event", "events_per_second", "flag",
]  # fmt: skip


def _lifetime(value: Optional[float]) -> float:
    # JSON has no infinity: serde writes an infinite lifetime (a frame
    # never written) as null.
    return math.inf if value is None else float(value)


def _flag(stats: dict) -> str:
    """The CLI's flag for a row whose figures are not the trace's (empty if none)."""
    what = []
    if stats.get("alloc_failures", 0) > 0:
        what.append(f"{stats['alloc_failures']} allocations refused")
    if stats.get("outside", 0) > 0:
        what.append(f"{stats['outside']} frames written outside memory")
    return ", ".join(what)


def evaluation_frame(raw: dict) -> pd.DataFrame:
    """One row per trace x allocator of an evaluation (``results.json``)."""
    rows = []
    for t in raw["traces"]:
        for r in t["rows"]:
            s, w = r["stats"], r["wear"]
            years = [_lifetime(y) for y in w["lifetime_years"]]
            rows.append(
                {
                    "trace": t["trace"],
                    "allocator": r["allocator"],
                    "source": t["source"],
                    "duration_ns": t["duration_ns"],
                    **{k: s.get(k, 0) for k in STATS_COLUMNS},
                    **{k: w[k] for k in WEAR_COLUMNS},
                    "lifetime_years_1e6": years[0],
                    "lifetime_years_1e7": years[1],
                    "lifetime_years_1e8": years[2],
                    "metadata_bytes_per_frame": r["metadata_bytes_per_frame"],
                    "ns_per_event": s["elapsed_ns"] / s["events"] if s["events"] else 0.0,
                    "events_per_second": s["events"] * 1e9 / s["elapsed_ns"] if s["elapsed_ns"] else 0.0,
                    "flag": _flag(s),
                }
            )
    df = pd.DataFrame(rows, columns=EVALUATE_COLUMNS)
    df.attrs["result"] = Result("evaluate", raw)
    return df


def replay(
    trace: Union[TraceLike, Sequence[TraceLike]],
    allocators: Optional[Sequence[str]] = None,
    memory: Union[None, str, int] = None,
    cpus: Optional[int] = None,
    *,
    writes_per_alloc: int = 1,
    heat_buckets: int = 256,
    as_recorded: bool = True,
    progress: Progress = None,
) -> pd.DataFrame:
    """``nvmos replay``: trace(s) through allocators, one row per trace x
    allocator (the kernel's own placement first, as the CLI does, unless
    ``as_recorded=False``).

    ``memory``: the size the allocators manage as one zone ("4GiB", a frame
    count); default the recorded machine's zones. ``cpus``: default the
    recorded machine's.
    """
    traces = trace if isinstance(trace, list) else [trace]
    args = [_trace_arg(t) for t in traces]
    options = _study_options(memory, cpus, writes_per_alloc, heat_buckets)
    callback, close = _progress(progress, "replay")
    try:
        raw = json.loads(_nvmos.evaluate(args, _rows_arg(allocators, as_recorded), options, callback))
    finally:
        close()
    return evaluation_frame(raw)


def trace_files(folder: PathLike) -> list[Path]:
    """The trace files in ``folder`` as ``nvmos evaluate`` takes them: not
    hidden, not Markdown, sorted; subfolders are not descended into."""
    folder = Path(folder)
    if not folder.is_dir():
        raise OptionsError(f"traces: {folder} is not a folder")
    files = sorted(
        p for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and not p.name.endswith(".md")
    )  # fmt: skip
    if not files:
        raise OptionsError(f"traces: no traces in {folder}")
    return files


def evaluate(
    traces_dir: PathLike = "traces",
    allocators: Optional[Sequence[str]] = None,
    memory: Union[None, str, int] = None,
    cpus: Optional[int] = None,
    *,
    writes_per_alloc: int = 1,
    heat_buckets: int = 256,
    progress: Progress = None,
) -> pd.DataFrame:
    """``nvmos evaluate``: every trace in ``traces_dir`` through every
    allocator (or those named), the kernel's own placement first; the same
    rows and numbers as the CLI's ``results.json`` (``df.attrs["result"].raw``
    is that document)."""
    return replay(
        [str(p) for p in trace_files(traces_dir)],
        allocators,
        memory,
        cpus,
        writes_per_alloc=writes_per_alloc,
        heat_buckets=heat_buckets,
        progress=progress,
    )


class Wear:
    """Per-frame wear of one replay.

    ``writes`` is a uint32 array of write counts per frame, in dense zone
    order, moved from the engine without a copy; ``row`` is the replay's
    row as in ``results.json``.
    """

    def __init__(self, writes: np.ndarray, row: dict):
        self.writes = writes
        self.row = row

    @property
    def histogram(self) -> np.ndarray:
        """``(n, 2)``: distinct write counts and the frames with each."""
        return np.asarray(self.row["wear"]["histogram"], dtype=np.uint64).reshape(-1, 2)

    def heat_map(self, buckets: int = 256) -> np.ndarray:
        """The most writes in each of ``buckets`` equal slices of the frames
        (the engine's heat map, for any bucket count)."""
        n = len(self.writes)
        buckets = max(1, min(buckets, max(n, 1)))
        if n == 0:
            return np.zeros(1, dtype=np.uint32)
        starts = (np.arange(buckets, dtype=np.int64) * n) // buckets
        return np.maximum.reduceat(self.writes, starts)

    def image(self, width: int = 1024) -> np.ndarray:
        """The per-frame counts as a 2-d heat map of ``width`` frames a
        line: a view of ``writes`` (no copy) when ``width`` divides the
        frame count, else padded with zeros (a copy)."""
        n = len(self.writes)
        if width < 1:
            raise OptionsError("width: at least 1")
        if n % width == 0:
            return self.writes.reshape(n // width, width)
        padded = np.zeros(-(-n // width) * width, dtype=self.writes.dtype)
        padded[:n] = self.writes
        return padded.reshape(-1, width)


def wear(
    trace: TraceLike,
    allocator: str,
    memory: Union[None, str, int] = None,
    cpus: Optional[int] = None,
    *,
    writes_per_alloc: int = 1,
    heat_buckets: int = 256,
) -> Wear:
    """One replay with its per-frame write counts as a numpy array."""
    name, data = _trace_arg(trace)
    options = _study_options(memory, cpus, writes_per_alloc, heat_buckets)
    writes, row = _nvmos.wear(name, allocator, options, data)
    return Wear(writes, json.loads(row))


_OPS = np.array(["alloc", "free", "write"])
_MIGRATETYPES = ["unmovable", "movable", "reclaimable"]


def _batch_frame(columns: dict) -> pd.DataFrame:
    mt = columns["migratetype"]
    return pd.DataFrame(
        {
            "time_ns": columns["time_ns"],
            "cpu": columns["cpu"],
            "op": pd.Categorical.from_codes(columns["op"].astype(np.int8), categories=["alloc", "free", "write"]),
            "migratetype": pd.Categorical.from_codes(mt, categories=_MIGRATETYPES),
            "pfn": columns["pfn"],
            "order": columns["order"],
        },
        copy=False,
    )


class Trace:
    """A trace file: its header (machine, counts) and its events.

    ``header`` is the ``.nvt`` header as a dict (``None`` for text
    traces); ``machine`` its recorded machine; ``info`` the one-pass
    summary (``open_trace(path, scan=True)``).
    """

    def __init__(self, path: PathLike, scan: bool = False):
        self.path = Path(path)
        meta = json.loads(_nvmos.trace_header(os.fspath(path), scan))
        self.format: str = meta["format"]
        self.header: Optional[dict] = meta["header"]
        self.info: Optional[dict] = meta.get("info")

    @property
    def machine(self) -> Optional[dict]:
        return None if self.header is None else self.header.get("machine")

    @property
    def counts(self) -> Optional[dict]:
        """What the recording skipped, lost or remapped."""
        return None if self.header is None else self.header.get("counts")

    def batches(self, batch_size: int = 1 << 20) -> Iterator[pd.DataFrame]:
        """The events as DataFrames of at most ``batch_size`` rows: columns
        ``time_ns``, ``cpu``, ``op`` (alloc/free), ``migratetype``
        (unmovable/movable/reclaimable, NaN for frees), ``pfn``, ``order``."""
        for columns in _nvmos.TraceBatches(os.fspath(self.path), batch_size):
            yield _batch_frame(columns)

    def arrays(self, batch_size: int = 1 << 20) -> Iterator[dict]:
        """The events as batches of numpy columns (see ``batches``; ``op``
        0 alloc / 1 free, ``migratetype`` -1 for frees)."""
        return iter(_nvmos.TraceBatches(os.fspath(self.path), batch_size))

    def events(self) -> pd.DataFrame:
        """Every event in one DataFrame."""
        frames = list(self.batches())
        if not frames:
            return _batch_frame(
                {
                    "time_ns": np.zeros(0, np.uint64), "cpu": np.zeros(0, np.uint32),
                    "op": np.zeros(0, np.uint8), "migratetype": np.zeros(0, np.int8),
                    "pfn": np.zeros(0, np.uint64), "order": np.zeros(0, np.uint8),
                }
            )  # fmt: skip
        return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)

    def __repr__(self) -> str:
        events = self.header.get("events") if self.header else "?"
        return f"<nvmos.Trace {self.path} {self.format} {events} events>"


def open_trace(path: PathLike, scan: bool = False) -> Trace:
    """Open a trace (``.nvt``, ftrace or perf text, told apart by content).

    ``trace.header`` / ``trace.machine``: what it says about itself;
    ``trace.events()``: a DataFrame; ``trace.batches()``: an iterator of
    DataFrames; ``scan=True`` also reads it once for ``trace.info``
    (counts by CPU, order, migratetype, pfn span).
    """
    return Trace(path, scan)


def _default(study: str, quick: bool = False) -> dict:
    """The study's options as the engine defines them, at its quick scale
    with ``quick`` (the CLI's ``--quick``): the one place they live."""
    return json.loads(_nvmos.default_options(study, quick))


# The serde names of the engine's enums (BanksOptions' defaults show them).
_KERNELS = {"copy": "copy", "scale": "scale", "add": "add", "triad": "triad"}
_POLICIES = {"open": "open", "closed": "closed"}
_PLACEMENTS = {"sequential": "sequential", "random": "random", "m3": "m3"}
_ACCESSES = {"sequential": "sequential", "random": "random"}


def _enum(field: str, value: str, names: dict) -> str:
    key = str(value).lower()
    if key not in names:
        raise OptionsError(f"{field}: {value!r} is not one of {', '.join(names)}")
    return names[key]


def banks(
    machine: str = "xeon-3ch",
    cores: Sequence[int] = (1, 2, 4),
    kernel: str = "copy",
    array_mib: Optional[int] = None,
    passes: int = 1,
    mlp: int = 10,
    policy: str = "open",
    queue: int = 32,
    seed: int = 2012,
    quick: bool = False,
    analyse: bool = True,
    *,
    placements: Optional[Sequence[str]] = None,
    accesses: Optional[Sequence[str]] = None,
    basic_model: bool = False,
    progress: Progress = None,
) -> pd.DataFrame:
    """``nvmos study banks`` (seed 002) with the CLI's options: one row per
    cores x access x placement; ``df.attrs["result"].raw`` is ``banks.json``
    (``{"study", "headline", "analysis", "checks"}``)."""
    if isinstance(cores, int):
        cores = [cores]
    options = _default("banks", quick)
    if array_mib is None:
        array_mib = options["array_bytes"] >> 20
    if not 1 <= array_mib <= 1024:
        raise OptionsError(f"array_mib: {array_mib} is not in 1..=1024")
    if not 1 <= mlp <= 256:
        raise OptionsError(f"mlp: {mlp} is not in 1..=256")
    if not 1 <= queue <= 4096:
        raise OptionsError(f"queue: {queue} is not in 1..=4096")
    if not 1 <= passes <= 100:
        raise OptionsError(f"passes: {passes} is not in 1..=100")
    if any(not 1 <= c <= 64 for c in cores):
        raise OptionsError(f"cores: {list(cores)}: each in 1..=64")
    options.update(
        cores=[int(c) for c in cores],
        kernel=_enum("kernel", kernel, _KERNELS),
        array_bytes=int(array_mib) << 20,
        passes=int(passes),
        mlp=int(mlp),
        policy=_enum("policy", policy, _POLICIES),
        queue_depth=int(queue),
        seed=int(seed),
    )
    if basic_model:
        # The timing model before issue 18 (`--basic-model`).
        options["basic_model"] = True
    if placements is not None:
        options["placements"] = [_enum("placements", p, _PLACEMENTS) for p in placements]
    if accesses is not None:
        options["accesses"] = [_enum("accesses", a, _ACCESSES) for a in accesses]
    callback, close = _progress(progress, "banks")
    try:
        raw = json.loads(_nvmos.banks(machine, json.dumps(options), analyse, callback))
    finally:
        close()
    df = pd.DataFrame(raw["study"]["rows"])
    df.insert(0, "machine", raw["study"]["machine"])
    df.attrs["result"] = Result("banks", raw)
    return df


def swap(
    traces: PathLike = "traces/swap",
    pc_scale: Optional[float] = None,
    aging_rounds: Optional[int] = None,
    no_congestion: bool = False,
    congestion_timeout_ms: float = 100.0,
    page_cluster: int = 3,
    vma_readahead: bool = False,
    policy: str = "ssd",
    quick: bool = False,
    *,
    progress: Progress = None,
) -> pd.DataFrame:
    """``nvmos study swap`` (seed 003) with the CLI's options: one row per
    modelled workload x device (swap-in/out seconds, congestion waits);
    ``df.attrs["result"].raw`` is ``swap.json``."""
    options = _default("swap", quick)
    options["traces"] = os.fspath(traces)
    if pc_scale is not None:
        if not (0 < pc_scale <= 4):
            raise OptionsError(f"pc_scale: {pc_scale} is not in (0, 4]")
        options["pc_scale"] = float(pc_scale)
    if aging_rounds is not None:
        options["aging_rounds"] = int(aging_rounds)
    if not (math.isfinite(congestion_timeout_ms) and congestion_timeout_ms >= 0):
        raise OptionsError("congestion_timeout_ms: must be zero or more")
    config = options["config"]
    config["congestion"]["enabled"] = not no_congestion
    config["congestion"]["timeout_ns"] = int(congestion_timeout_ms * 1e6)
    config["page_cluster"] = int(page_cluster)
    config["vma_readahead"] = bool(vma_readahead)
    config["policy"] = _swap_policy(policy, config["policy"])
    callback, close = _progress(progress, "swap")
    try:
        raw = json.loads(_nvmos.swap(json.dumps(options), callback))
    finally:
        close()
    rows = []
    for run in raw["model"]:
        for d in run["devices"]:
            rows.append(
                {
                    "workload": run["workload"],
                    "memory_pages": run["memory_pages"],
                    "pages": run["pages"],
                    "refs": run["refs"],
                    **d,
                }
            )
    df = pd.DataFrame(rows)
    df.attrs["result"] = Result("swap", raw)
    return df


def _swap_policy(policy: str, default: Any) -> Any:
    # The slot policy serialises as its serde name; match the default's case.
    names = {"ssd", "hdd"}
    if str(policy).lower() not in names:
        raise OptionsError(f"policy: {policy!r} is not one of ssd, hdd")
    if isinstance(default, str) and default[:1].isupper():
        return str(policy).capitalize()
    return str(policy).lower()


# `nvmos bench alloc`'s per-operation figures, in the CLI's CSV order.
_BENCH_OP_FIELDS = (
    "requests", "failures", "mean_ns_amortized", "mean_ns", "sd_ns", "mean_cycles",
    "sd_cycles", "p50_ns", "p99_ns", "max_ns",
)  # fmt: skip


def bench_alloc(
    allocators: Optional[Sequence[str]] = None,
    threads: Optional[Sequence[int]] = None,
    patterns: Optional[Sequence[str]] = None,
    memory: Optional[Union[str, int]] = None,
    rounds: Optional[int] = None,
    repeat: Optional[int] = None,
    mixed_ops: Optional[int] = None,
    seed: Optional[int] = None,
    lock: Optional[str] = None,
    quick: bool = False,
    *,
    free_order: Optional[str] = None,
    progress: Progress = None,
) -> pd.DataFrame:
    """``nvmos bench alloc`` (seed 000's Table 2 timed on this machine)
    with the CLI's options; ``None`` keeps the CLI's default (``quick``:
    ``--quick``'s). One row per allocator x pattern x threads asked for:
    ``alloc_*`` and ``free_*`` figures (ns per request, timed and
    amortized), ``validated`` (the allocator checked its invariants after
    every pass) and ``skipped`` (why a cell was not timed, else ``None``;
    its figures are NaN). ``df.attrs["result"].raw`` is the JSON
    ``--json`` prints, with the seed's comparison rows and checks.
    ``free_order``: ``"accepted"`` (default) or ``"per-cpu"``, the order
    iBuddy applies frees buffered on different CPUs in (``--free-order``).
    Timings are this machine's, not deterministic."""
    options = json.loads(_nvmos.bench_alloc_options(bool(quick)))
    if allocators is not None:
        options["allocators"] = [str(a) for a in ([allocators] if isinstance(allocators, str) else allocators)]
    if threads is not None:
        options["threads"] = [int(t) for t in ([threads] if isinstance(threads, int) else threads)]
    if patterns is not None:
        options["patterns"] = [str(p).lower() for p in ([patterns] if isinstance(patterns, str) else patterns)]
    if memory is not None:
        options["frames"] = parse_memory(memory)
    for field, value in (("rounds", rounds), ("repeat", repeat), ("mixed_ops", mixed_ops), ("seed", seed)):
        if value is not None:
            options[field] = int(value)
    if lock is not None:
        options["lock"] = str(lock).lower()
    if free_order is not None:
        options["free_order"] = str(free_order).lower()
    callback, close = _progress(progress, "bench alloc")
    try:
        raw = json.loads(_nvmos.bench_alloc(json.dumps(options), callback))
    finally:
        close()
    rows = []
    for cell in raw["cells"]:
        row = {
            "allocator": cell["allocator"],
            "pattern": cell["pattern"],
            "threads": cell["threads"],
            "round": cell["round"],
            "validated": cell["validated"],
            "metadata_bytes": cell["metadata_bytes"],
            "skipped": None,
        }
        for op in ("alloc", "free"):
            for field in _BENCH_OP_FIELDS:
                row[f"{op}_{field}"] = cell[op][field]
        rows.append(row)
    for s in raw["skipped"]:
        row = {
            "allocator": s["allocator"],
            "pattern": s["pattern"],
            "threads": s["threads"],
            "round": None,
            "validated": False,
            "metadata_bytes": None,
            "skipped": s["reason"],
        }
        for op in ("alloc", "free"):
            for field in _BENCH_OP_FIELDS:
                row[f"{op}_{field}"] = math.nan
        rows.append(row)
    # The options' order: pattern, then allocator, then threads.
    order = raw["options"]
    rank = {
        "pattern": {p: i for i, p in enumerate(order["patterns"])},
        "allocator": {a: i for i, a in enumerate(order["allocators"])},
        "threads": {t: i for i, t in enumerate(order["threads"])},
    }
    rows.sort(
        key=lambda r: (
            rank["pattern"][r["pattern"]],
            rank["allocator"][r["allocator"]],
            rank["threads"][r["threads"]],
        )
    )
    df = pd.DataFrame(rows)
    df.attrs["result"] = Result("bench_alloc", raw)
    return df


def power(
    sizes: Optional[Sequence[Union[str, int]]] = None,
    bank: Optional[Union[str, int]] = None,
    workloads: Optional[Sequence[str]] = None,
    epochs: Optional[int] = None,
    kernel_percent: Optional[float] = None,
    churn_percent: Optional[float] = None,
    seed: Optional[int] = None,
    allocators: Optional[Sequence[str]] = None,
    models: Optional[Sequence[str]] = None,
    traces: Optional[PathLike] = "traces",
    migrate_every_ms: Optional[int] = None,
    latency: bool = True,
    latency_pages: Optional[Sequence[int]] = None,
    latency_memory: Optional[Union[str, int]] = None,
    latency_rounds: Optional[int] = None,
    quick: bool = False,
    *,
    progress: Progress = None,
) -> pd.DataFrame:
    """``nvmos study power`` (seed 004) with the CLI's options (``models``
    is ``--power``; ``traces=None`` is ``--no-traces``, ``latency=False``
    ``--no-latency``): one row per allocator x (workload, machine) or
    trace, energy as ``energy_<model>`` columns; ``df.attrs["result"].raw``
    is ``power.json`` (the latency benchmark, the bank maps, the checks).

    Unset options take the study's value at its scale (``quick`` or the
    full study), as the CLI does."""
    options = json.loads(_nvmos.power_options("quick" if quick else "full"))
    if sizes is not None:
        options["sizes"] = [parse_memory(s) for s in ([sizes] if isinstance(sizes, (str, int)) else sizes)]
    if bank is not None:
        options["bank_frames"] = parse_memory(bank)
    if workloads is not None:
        options["workloads"] = [str(w) for w in workloads]
    for name, value, kind in (
        ("epochs", epochs, int),
        ("kernel_percent", kernel_percent, float),
        ("churn_percent", churn_percent, float),
        ("seed", seed, int),
        ("migrate_every_ms", migrate_every_ms, int),
    ):
        if value is not None:
            options[name] = kind(value)
    if allocators is not None:
        options["allocators"] = [str(a) for a in allocators]
    if models is not None:
        options["power"] = [str(m) for m in models]
    options["traces"] = None if traces is None else os.fspath(traces)
    if not latency:
        options["latency"] = None
    elif options["latency"] is not None:
        if latency_pages is not None:
            options["latency"]["pages"] = [int(p) for p in latency_pages]
        if latency_memory is not None:
            options["latency"]["frames"] = parse_memory(latency_memory)
        if latency_rounds is not None:
            options["latency"]["rounds"] = int(latency_rounds)
    callback, close = _progress(progress, "power")
    try:
        raw = json.loads(_nvmos.power(json.dumps(options), callback))
    finally:
        close()
    rows = []
    for s in raw["synthetic"]:
        for r in s["rows"]:
            rows.append(_power_row(r, workload=s["workload"]["name"], machine=s["machine"]["name"], trace=None))
    for t in raw["traces"]:
        for r in t["rows"]:
            rows.append(_power_row(r, workload=None, machine=None, trace=t["trace"]))
    df = pd.DataFrame(rows)
    df.attrs["result"] = Result("power", raw)
    return df


def _power_row(row: dict, **place: Any) -> dict:
    """One ``PowerRow`` as a flat record: the bank map and the timeline
    (Fig. 10) left in the raw result, each model's energy total and saving
    as columns."""
    flat = {**place, **{k: v for k, v in row.items() if k not in ("bank_map", "energy", "timeline")}}
    for e in row["energy"]:
        flat[f"energy_{e['model']}"] = e["report"]["total"]
        flat[f"saving_percent_{e['model']}"] = e["report"]["saving_percent"]
    return flat
