"""The Python API over the Rust engine (``nvmos._nvmos``).

Every study function takes the CLI's options, runs the engine with the GIL
released, and returns a pandas DataFrame with one row per result row; the
full result (the JSON document the CLI writes) is ``df.attrs["result"]``,
a :class:`Result`. Each such function's docstring lists every column of
the frame it returns under ``Columns:``, as ``name: meaning (unit)``.
"""

from __future__ import annotations

import inspect
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

#: The row name of the kernel's own placement as recorded in the trace
#: (``"Linux (as recorded)"``); pass it in ``allocators`` like an
#: allocator name.
AS_RECORDED: str = _nvmos.as_recorded_name()

#: Seconds in a year, as the engine counts them (365.25 days).
SECONDS_PER_YEAR: float = 365.25 * 24.0 * 3600.0

#: The endurances (writes a frame survives) the engine reports lifetimes
#: for, in the order of the ``lifetime_years_1e6``, ``_1e7`` and ``_1e8``
#: columns.
ENDURANCES = (1e6, 1e7, 1e8)

PathLike = Union[str, "os.PathLike[str]"]
#: A trace: a path, a :class:`Trace`, or ``(name, bytes)`` of a trace file
#: already in memory (bytes, bytearray or a uint8 numpy array).
TraceLike = Union[PathLike, "Trace", tuple]
Progress = Union[None, bool, Callable[[int, int, str], Any]]


def _with_columns(columns: dict) -> Callable:
    """Append a ``Columns:`` section, one ``name: meaning (unit)`` line per
    column of ``columns``, to the decorated function's docstring, so
    several functions returning the same frame share one description."""

    def wrap(f: Callable) -> Callable:
        lines = ["Columns:"]
        for name, meaning in columns.items():
            lines.extend(_wrapped(f"{name}: {meaning}", "    ", "        "))
        f.__doc__ = inspect.cleandoc(f.__doc__ or "") + "\n\n" + "\n".join(lines)
        return f

    return wrap


def _wrapped(text: str, first: str, rest: str, width: int = 76) -> list:
    import textwrap

    return textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def allocators() -> list[str]:
    """The allocator names ``replay``, ``evaluate`` and ``wear`` take.

    Returns:
        list[str]: the names, in the CLI's order (``--alloc`` takes the
        same ones; ``AS_RECORDED`` is not among them).
    """
    return [name for name, _ in _nvmos.allocators()]


def machine_presets() -> list[str]:
    """The memory-system presets.

    Returns:
        list[str]: the preset names ``banks(machine=...)``, banks sweeps
        and the CLI's ``--machine`` take.
    """
    return list(_nvmos.machine_presets())


def parse_memory(memory: str) -> int:
    """A memory size as the CLI's ``--memory`` reads it.

    Args:
        memory (str): a size with its unit: binary (``"4GiB"``,
            ``"512MiB"``, ``"64KiB"``, ``"8192B"``; a whole number of 4 KiB
            frames), decimal (``"4GB"`` is 4·10^9 bytes, rounded down to
            whole frames), or frames spelled out (``"4096frames"``). A bare
            number, a string of digits or an int, is refused: 4 could mean
            bytes, GiB or frames, and each reading gives a plausible result.

    Returns:
        int: the size in 4 KiB frames.

    Raises:
        OptionsError: not a size, no unit, an unknown unit, zero, or bytes
            that are not a whole number of frames.
    """
    if isinstance(memory, bool) or isinstance(memory, (int, np.integer)):
        raise OptionsError(
            f"memory: {memory!r} has no unit: write '{memory}frames' for 4 KiB frames, "
            f"or a size such as '{memory}GiB' or '{memory}GB'"
        )
    if not isinstance(memory, str):
        raise OptionsError(f"memory: {memory!r} is not a size like '4GiB' or '4096frames'")
    return _nvmos.parse_memory(memory)


class Result:
    """A study's full result, kept in ``DataFrame.attrs["result"]``.

    Immutable, so pandas' copies of ``attrs`` share it instead of
    deep-copying it.

    Attributes:
        kind (str): which study: ``"evaluate"``, ``"banks"``, ``"swap"``,
            ``"power"`` or ``"bench_alloc"``.
        raw (dict): the JSON document the CLI writes for it
            (``results.json``, ``banks.json``, ``swap.json``,
            ``power.json``, ``bench alloc --json``) as Python objects.
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
        """The wear heat map of one row of an evaluation.

        Args:
            trace (str): the trace's short name (the ``trace`` column).
            allocator (str): the row's allocator (the ``allocator`` column).

        Returns:
            numpy.ndarray: uint32, one value per each of ``heat_buckets``
            equal slices of the frames in pfn order: the most writes to
            one frame in that slice (writes).

        Raises:
            NvmosError: not an evaluation's result.
            KeyError: no such trace or allocator in it.
        """
        return np.asarray(self._row(trace, allocator)["heat"], dtype=np.uint32)

    def histogram(self, trace: str, allocator: str) -> np.ndarray:
        """The per-frame wear histogram of one row of an evaluation.

        Args:
            trace (str): the trace's short name.
            allocator (str): the row's allocator.

        Returns:
            numpy.ndarray: uint64 of shape ``(n, 2)``: each distinct write
            count (writes) and how many frames have it (frames), ascending
            by write count.

        Raises:
            NvmosError: not an evaluation's result.
            KeyError: no such trace or allocator in it.
        """
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
    if not isinstance(writes_per_alloc, (int, np.integer)) or not 1 <= writes_per_alloc <= 256:
        raise OptionsError(f"writes_per_alloc: {writes_per_alloc!r}: 1 to 256 writes per allocation")
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


# The replay's counters among an evaluation's columns, in order.
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
#: The columns of an evaluation's DataFrame (``replay``, ``evaluate``,
#: ``evaluation_frame``), in order: every column of the CLI's
#: ``summary.csv`` plus the rest of ``results.json``'s per-row numbers
#: (the replay's counts, every event accounted for, and the flag the CLI
#: prints for a row with refused allocations or outside writes).
EVALUATE_COLUMNS = [
    "trace", "allocator", "source", "duration_ns",
    *STATS_COLUMNS, *WEAR_COLUMNS,
    "lifetime_years_1e6", "lifetime_years_1e7", "lifetime_years_1e8",
    "metadata_bytes_per_frame", "ns_per_event", "events_per_second", "flag",
]  # fmt: skip

_LIFETIME = (
    "years until the most written frame reaches {} writes with the "
    "workload repeated: endurance x the trace's duration / max; inf when no frame "
    "was written (years)"
)

# What each column of an evaluation means, with its unit: the Columns
# section of every function returning that frame (and of sweeps).
_EVALUATE_COLUMN_DOCS = {
    "trace": "the trace's short name: its file name without .nvt (text)",
    "allocator": "the allocator, or AS_RECORDED for the kernel's own placement as recorded (text)",
    "source": "the file the trace was read from (path)",
    "duration_ns": "the trace's duration, first to last event (ns)",
    "events": "events replayed (count)",
    "allocs": "allocations the allocator served (count)",
    "frees": "blocks given back to the allocator (count)",
    "alloc_failures": "allocations the allocator refused for lack of memory; any flags the row (count)",
    "frees_of_failed": "frees of blocks whose allocation was refused: nothing to give back (count)",
    "outside": "frames written outside the replayed memory; any flags the row (count)",
    "events_read": "events read from the trace, sampled writes included (count)",
    "lost_events": "events the kernel lost while recording (ring-buffer overruns) (count)",
    "frees_before_recording": "frees of blocks allocated before the recording began (count)",
    "frees_mismatched_order": (
        "frees at a live block's head with a larger order than its allocation; the whole block is freed (count)"
    ),
    "partial_frees": "frees of part of a live block; the block is freed when all its frames are (count)",
    "allocs_of_live_pfn": "allocations of a block whose head is live or inside a live block: a free was lost (count)",
    "time_reversals": "events timestamped earlier than the event before (count)",
    "elapsed_ns": "wall time of the replay, reading the trace included; differs from run to run (ns)",
    "trace_ns": "the trace's duration as replayed, first to last event (ns)",
    "migration_passes": "migration passes run by an allocator that migrates; 0 for the others (count)",
    "blocks_migrated": "blocks moved by migration (count)",
    "pages_migrated": "page frames copied by migration (frames)",
    "frames": "frames the wear is counted over: every frame of the zones (frames)",
    "touched": "frames written at least once (frames)",
    "total_writes": (
        "all writes; the write model counts writes_per_alloc full-page writes per frame of every allocated block "
        "(writes)"
    ),
    "max": "writes to the most written frame (writes)",
    "mean": "mean writes per frame over all frames (writes per frame)",
    "max_over_mean": "max / mean; 1 is perfectly even (ratio)",
    "max_over_touched_mean": "max over the mean of the touched frames only (ratio)",
    "cov": "coefficient of variation of writes over all frames: standard deviation / mean (ratio)",
    "gini": "Gini coefficient of writes over all frames: 0 even, 1 all on one frame (0 to 1)",
    "lifetime_pct_of_ideal": (
        "lifetime as a percentage of a perfectly even spread's: 100 x mean / max, the metric Start-Gap "
        "reports (percent)"
    ),
    "lifetime_years_1e6": _LIFETIME.format("10^6"),
    "lifetime_years_1e7": _LIFETIME.format("10^7"),
    "lifetime_years_1e8": _LIFETIME.format("10^8"),
    "metadata_bytes_per_frame": "the allocator's bookkeeping per managed frame; 0 for AS_RECORDED (bytes)",
    "ns_per_event": "elapsed_ns / events; differs from run to run (ns)",
    "events_per_second": "events / elapsed time; differs from run to run (events/s)",
    "flag": (
        'why the row\'s figures are not the trace\'s ("N allocations refused", "N frames written outside '
        'memory"); empty if none (text)'
    ),
}


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


@_with_columns(_EVALUATE_COLUMN_DOCS)
def evaluation_frame(raw: dict) -> pd.DataFrame:
    """An evaluation's document as a DataFrame.

    Args:
        raw (dict): an evaluation as the CLI writes it to ``results.json``
            (``json.load`` of the file), or ``df.attrs["result"].raw``.

    Returns:
        pandas.DataFrame: one row per trace x allocator, in the document's
        order; ``df.attrs["result"]`` is a :class:`Result` of ``raw``.

    Raises:
        KeyError: ``raw`` is not an evaluation document.
    """
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


@_with_columns(_EVALUATE_COLUMN_DOCS)
def replay(
    trace: Union[TraceLike, Sequence[TraceLike]],
    allocators: Optional[Sequence[str]] = None,
    memory: Optional[str] = None,
    cpus: Optional[int] = None,
    *,
    writes_per_alloc: int = 1,
    heat_buckets: int = 256,
    as_recorded: bool = True,
    progress: Progress = None,
) -> pd.DataFrame:
    """``nvmos replay``: traces through allocators, counting wear.

    Each trace's page allocations and frees are replayed through each
    allocator; every frame of an allocated block counts
    ``writes_per_alloc`` writes. The numbers are the CLI's to the bit.

    Args:
        trace (str | os.PathLike | Trace | tuple | list): a trace file, a
            :class:`Trace`, ``(name, data)`` with ``data`` the bytes of a
            trace file (bytes, bytearray or a 1-d uint8 numpy array; read
            without a copy), or a list of these.
        allocators (str | list[str] | None): allocator names
            (``allocators()``); None: every one, in the CLI's order.
        memory (str | None): memory the allocators manage as one zone:
            a size with its unit (``"4GiB"``, ``"4GB"``, ``"4096frames"``;
            see ``parse_memory``); None: the recorded machine's zones.
        cpus (int | None): CPUs the allocators serve (at least 1); None:
            the recorded machine's.
        writes_per_alloc (int): full-page writes each frame of an
            allocated block receives per allocation (writes, at least 1).
        heat_buckets (int): slices of the frames in the heat map
            (``Result.heat``), at least 1.
        as_recorded (bool): also a row for the kernel's own placement
            (``AS_RECORDED``), first, as the CLI does.
        progress (bool | Callable[[int, int, str], object] | None): None
            or True: a tqdm bar when tqdm is installed, drawn only on a
            terminal; False: none; a callable: called as
            ``progress(done, total, message)`` with ``done`` and ``total``
            counting rows (an exception it raises stops the run and is
            re-raised).

    Returns:
        pandas.DataFrame: one row per trace x allocator (trace-major);
        ``df.attrs["result"]`` is a :class:`Result` whose ``raw`` is the
        JSON ``nvmos replay --json`` prints.

    Raises:
        OptionsError: bad options or an unknown allocator.
        TraceFileError: a trace cannot be opened or read (``path``,
            ``line``, ``offset`` say where), or does not fit ``memory`` or
            ``cpus``.
        StudyError: a replay failed.
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
    """The trace files in a folder, as ``nvmos evaluate`` takes them.

    Args:
        folder (str | os.PathLike): the folder.

    Returns:
        list[pathlib.Path]: its files that are neither hidden nor Markdown
        (``*.md``), sorted by name; subfolders are not descended into.

    Raises:
        OptionsError: ``folder`` is not a folder, or holds no trace.
    """
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


@_with_columns(_EVALUATE_COLUMN_DOCS)
def evaluate(
    traces_dir: PathLike = "traces",
    allocators: Optional[Sequence[str]] = None,
    memory: Optional[str] = None,
    cpus: Optional[int] = None,
    *,
    writes_per_alloc: int = 1,
    heat_buckets: int = 256,
    progress: Progress = None,
) -> pd.DataFrame:
    """``nvmos evaluate``: every trace of a folder through every allocator.

    The kernel's own placement comes first for each trace; the rows and
    numbers are those of the CLI's ``results.json`` and ``summary.csv``.

    Args:
        traces_dir (str | os.PathLike): the folder of traces (see
            ``trace_files``).
        allocators (str | list[str] | None): allocator names; None: every
            one.
        memory (str | None): as for ``replay``.
        cpus (int | None): as for ``replay``.
        writes_per_alloc (int): as for ``replay`` (writes).
        heat_buckets (int): as for ``replay``.
        progress (bool | Callable[[int, int, str], object] | None): as for
            ``replay``.

    Returns:
        pandas.DataFrame: one row per trace x allocator (trace-major);
        ``df.attrs["result"].raw`` is the ``results.json`` document.

    Raises:
        OptionsError: not a folder of traces, bad options, an unknown
            allocator.
        TraceFileError: a trace cannot be read.
        StudyError: a replay failed.
    """
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
    """Per-frame wear of one replay (what ``wear`` returns).

    Attributes:
        writes (numpy.ndarray): uint32, the writes to each frame (writes),
            one entry per frame of the zones in dense zone order, moved
            from the engine without a copy.
        row (dict): the replay's row as in ``results.json``: ``allocator``,
            ``stats`` (the replay's counters), ``wear`` (the summary the
            evaluation's wear columns come from, with ``histogram``),
            ``heat``, ``metadata_bytes_per_frame``.
    """

    def __init__(self, writes: np.ndarray, row: dict):
        self.writes = writes
        self.row = row

    @property
    def histogram(self) -> np.ndarray:
        """numpy.ndarray: uint64 of shape ``(n, 2)``: each distinct write
        count (writes) and how many frames have it (frames), ascending."""
        return np.asarray(self.row["wear"]["histogram"], dtype=np.uint64).reshape(-1, 2)

    def heat_map(self, buckets: int = 256) -> np.ndarray:
        """The heat map: the engine's, for any number of slices.

        Args:
            buckets (int): equal slices of the frames, in zone order (at
                most one per frame).

        Returns:
            numpy.ndarray: uint32, the most writes to one frame in each
            slice (writes).
        """
        n = len(self.writes)
        buckets = max(1, min(buckets, max(n, 1)))
        if n == 0:
            return np.zeros(1, dtype=np.uint32)
        starts = (np.arange(buckets, dtype=np.int64) * n) // buckets
        return np.maximum.reduceat(self.writes, starts)

    def image(self, width: int = 1024) -> np.ndarray:
        """The per-frame counts as a 2-d image, ``width`` frames a line.

        Args:
            width (int): frames per line (at least 1).

        Returns:
            numpy.ndarray: uint32 of shape ``(lines, width)`` (writes): a
            view of ``writes`` (no copy) when ``width`` divides the frame
            count, else a copy padded with zeros.

        Raises:
            OptionsError: ``width`` below 1.
        """
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
    memory: Optional[str] = None,
    cpus: Optional[int] = None,
    *,
    writes_per_alloc: int = 1,
    heat_buckets: int = 256,
) -> Wear:
    """One replay with its per-frame write counts as a numpy array.

    Args:
        trace (str | os.PathLike | Trace | tuple): a trace file, a
            :class:`Trace`, or ``(name, data)`` with the trace file's bytes.
        allocator (str): an allocator name, or ``AS_RECORDED`` for the
            kernel's own placement.
        memory (str | None): as for ``replay``.
        cpus (int | None): as for ``replay``.
        writes_per_alloc (int): as for ``replay`` (writes).
        heat_buckets (int): slices of the heat map in ``row``.

    Returns:
        Wear: the per-frame writes and the replay's row.

    Raises:
        OptionsError: bad options or an unknown allocator.
        TraceFileError: the trace cannot be opened or read.
        StudyError: the replay failed.
    """
    name, data = _trace_arg(trace)
    options = _study_options(memory, cpus, writes_per_alloc, heat_buckets)
    writes, row = _nvmos.wear(name, allocator, options, data)
    return Wear(writes, json.loads(row))


_OPS = np.array(["alloc", "free", "write"])
_MIGRATETYPES = ["unmovable", "movable", "reclaimable"]

# The columns of a trace's events as a DataFrame (``Trace.events``,
# ``Trace.batches``).
_EVENT_COLUMN_DOCS = {
    "time_ns": "the event's timestamp, as the recording's clock gave it (ns)",
    "cpu": "the CPU the event happened on (CPU number)",
    "op": 'what happened: "alloc", "free" or "write" (a sampled write to the block) (category)',
    "migratetype": (
        'the allocation\'s migratetype: "unmovable", "movable" or "reclaimable"; NaN for frees and writes (category)'
    ),
    "pfn": "the block's first page frame number (pfn)",
    "order": "the block's order: it is 2**order frames of 4 KiB (order)",
}


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
    """A trace file: what it says about itself, and its events.

    Made by ``open_trace`` (or ``Trace(path, scan=False)``).

    Attributes:
        path (pathlib.Path): the trace file.
        format (str): ``"nvt"``, ``"ftrace"`` or ``"perf"``.
        header (dict | None): the ``.nvt`` header (recorded machine,
            command, counts of what the recording skipped or lost); None
            for text traces.
        info (dict | None): with ``scan=True``, the one-pass summary
            ``nvmos trace info`` prints: events, allocations, frees and
            writes (counts), counts by CPU, order and migratetype, the pfn
            span, ``duration_ns`` (ns) and the accounting of unusual
            events; else None.

    Raises:
        TraceFileError: (when made) the file cannot be opened, its format
            is unknown, or with ``scan`` an event cannot be read.
    """

    def __init__(self, path: PathLike, scan: bool = False):
        self.path = Path(path)
        meta = json.loads(_nvmos.trace_header(os.fspath(path), scan))
        self.format: str = meta["format"]
        self.header: Optional[dict] = meta["header"]
        self.info: Optional[dict] = meta.get("info")

    @property
    def machine(self) -> Optional[dict]:
        """dict | None: the recorded machine from the header (CPUs, zones
        with their pfn ranges); None for text traces."""
        return None if self.header is None else self.header.get("machine")

    @property
    def counts(self) -> Optional[dict]:
        """dict | None: what the recording skipped, lost or remapped
        (counts, from the header); None for text traces."""
        return None if self.header is None else self.header.get("counts")

    @_with_columns(_EVENT_COLUMN_DOCS)
    def batches(self, batch_size: int = 1 << 20) -> Iterator[pd.DataFrame]:
        """The events as DataFrames of at most ``batch_size`` rows each.

        Args:
            batch_size (int): most events per frame (at least 1).

        Yields:
            pandas.DataFrame: the next events, in trace order, with the
            columns of ``events``.

        Raises:
            OptionsError: ``batch_size`` below 1.
            TraceFileError: the trace cannot be opened or an event cannot
                be read.
        """
        for columns in _nvmos.TraceBatches(os.fspath(self.path), batch_size):
            yield _batch_frame(columns)

    def arrays(self, batch_size: int = 1 << 20) -> Iterator[dict]:
        """The events as batches of numpy columns, without pandas.

        Args:
            batch_size (int): most events per batch (at least 1).

        Returns:
            Iterator[dict[str, numpy.ndarray]]: per batch, the columns of
            ``events`` as numpy arrays made by the engine without a copy:
            ``time_ns`` (uint64, ns), ``cpu`` (uint32), ``op`` (uint8: 0
            alloc, 1 free, 2 write), ``migratetype`` (int8: 0 unmovable, 1
            movable, 2 reclaimable, -1 for frees and writes), ``pfn``
            (uint64), ``order`` (uint8).

        Raises:
            OptionsError: ``batch_size`` below 1.
            TraceFileError: the trace cannot be opened or read.
        """
        return iter(_nvmos.TraceBatches(os.fspath(self.path), batch_size))

    @_with_columns(_EVENT_COLUMN_DOCS)
    def events(self) -> pd.DataFrame:
        """Every event of the trace in one DataFrame.

        Returns:
            pandas.DataFrame: one row per event, in trace order.

        Raises:
            TraceFileError: the trace cannot be opened or an event cannot
                be read.
        """
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
    """Open a trace: ``.nvt``, ftrace text or perf script text, told
    apart by content.

    ``trace.header`` and ``trace.machine`` say what it says about itself;
    ``trace.events()`` gives a DataFrame of its events, ``trace.batches()``
    an iterator of DataFrames.

    Args:
        path (str | os.PathLike): the trace file.
        scan (bool): also read it once for ``trace.info`` (counts by CPU,
            order, migratetype, the pfn span).

    Returns:
        Trace: the opened trace.

    Raises:
        TraceFileError: the file cannot be opened, its format is unknown,
            or (with ``scan``) an event cannot be read.
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


_BANKS_COLUMN_DOCS = {
    "machine": "the modelled memory system: the preset's or machine file's name (text)",
    "cores": "cores running the kernel at once (count)",
    "placement": (
        'frame placement: "sequential" (the buddy system\'s consecutive frames), "random" (M3 without '
        'partitions), "m3" (banks partitioned among the cores) (text)'
    ),
    "access": 'the order the kernel walks its arrays in: "sequential" or "random" (text)',
    "hit_rate": "row-buffer hits / requests (fraction, 0 to 1)",
    "miss_rate": "requests to a closed bank / requests (fraction, 0 to 1)",
    "conflict_rate": "row-buffer conflicts / requests (fraction, 0 to 1)",
    "blp": "bank-level parallelism: mean banks busy (banks)",
    "run_ns": "run time, until the last core finished (ns)",
    "bandwidth_gbs": "bandwidth over the run (GB/s)",
    "latency_ns": "mean memory latency over the cores (ns)",
    "vs_sequential": (
        "run time relative to sequential placement with the same cores and access; below 1 is faster (ratio)"
    ),
}


def _enum(field: str, value: str, names: dict) -> str:
    key = str(value).lower()
    if key not in names:
        raise OptionsError(f"{field}: {value!r} is not one of {', '.join(names)}")
    return names[key]


@_with_columns(_BANKS_COLUMN_DOCS)
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
    """``nvmos study banks``: frame placement and row-buffer conflicts on a
    modelled memory system (the Parallelism talk), with the CLI's options.

    Args:
        machine (str): a memsys preset (``machine_presets()``) or the path
            of a machine TOML file.
        cores (int | list[int]): core counts to run (each 1 to 64).
        kernel (str): the STREAM kernel: ``"copy"``, ``"scale"``, ``"add"``
            or ``"triad"``.
        array_mib (int | None): each core's array size (MiB, 1 to 1024);
            None: the study's at its scale.
        passes (int): passes over the arrays (1 to 100).
        mlp (int): outstanding misses per core (1 to 256).
        policy (str): the row-buffer page policy, ``"open"`` or
            ``"closed"``.
        queue (int): the controller's queue per channel (requests, 1 to
            4096).
        seed (int): seed of the random placements and accesses.
        quick (bool): the study's quick scale (``--quick``).
        analyse (bool): also run the analysing program (recovering the
            machine's bank mapping from timing) into ``raw["analysis"]``.
        placements (list[str] | None): ``"sequential"``, ``"random"``,
            ``"m3"``; None: all three.
        accesses (list[str] | None): ``"sequential"``, ``"random"``; None:
            both.
        basic_model (bool): the basic timing model (blocking scheduler,
            writes queued with reads, no refresh) instead of the full one.
        progress (bool | Callable[[int, int, str], object] | None): as for
            ``replay``.

    Returns:
        pandas.DataFrame: one row per cores x access x placement;
        ``df.attrs["result"].raw`` is ``banks.json`` (``{"study",
        "headline", "analysis", "checks"}``).

    Raises:
        OptionsError: an option out of range, an unknown kernel, policy,
            placement, access or preset, or a machine file that cannot be
            read.
        StudyError: the study failed.
    """
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
        # The basic timing model (`--basic-model`).
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


_SWAP_COLUMN_DOCS = {
    "workload": "the modelled workload (text)",
    "memory_pages": "its memory limit (4 KiB pages)",
    "pages": "pages it touches (4 KiB pages)",
    "refs": "memory references in the measured phase (count)",
    "device": "the swap device modelled (text)",
    "swap_in_s": "time processes spent in swap-in faults (s)",
    "swap_out_s": "time stalled in direct reclaim plus the device's write time (s)",
    "write_busy_s": "the device's write time (s)",
    "congestion_wait_s": "time in congestion waits (s)",
    "merges": "NAND merges on the device (count)",
}


@_with_columns(_SWAP_COLUMN_DOCS)
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
    """``nvmos study swap``: SCM as a paging device (the SCM paging talk),
    with the CLI's options.

    Args:
        traces (str | os.PathLike): the folder of recorded swap traces
            (``*.swt.zst``) and lackey traces (``*.lackey.zst``).
        pc_scale (float | None): the PC scenario's size relative to the
            talk's 1 GB machine (ratio, above 0, at most 4); None: the
            study's.
        aging_rounds (int | None): aging rounds of the aged PC scenario;
            None: the study's.
        no_congestion (bool): turn the block layer's congestion control
            off.
        congestion_timeout_ms (float): the congestion wait's timeout (ms,
            0 or more).
        page_cluster (int): swap read-ahead of 2**page_cluster pages.
        vma_readahead (bool): VMA-based read-ahead instead of slot-window
            read-ahead.
        policy (str): swap-slot allocation, ``"ssd"`` or ``"hdd"``
            (Linux's two policies).
        quick (bool): the study's quick scale (``--quick``).
        progress (bool | Callable[[int, int, str], object] | None): as for
            ``replay``.

    Returns:
        pandas.DataFrame: one row per modelled workload x device;
        ``df.attrs["result"].raw`` is ``swap.json`` (with the recorded
        traces, the congestion figure, lifetimes and checks).

    Raises:
        OptionsError: an option out of range or an unknown policy.
        TraceFileError: a swap or lackey trace cannot be read.
        StudyError: the model or a trace failed.
    """
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

_BENCH_ALLOC_COLUMN_DOCS = {
    "allocator": "the allocator (text)",
    "pattern": 'the request pattern: "bulk", "repeat", "rand" or "mixed" (text)',
    "threads": "threads requesting at once, and the allocator's CPUs (count)",
    "round": "the round kept, 0-based: the one whose mean is the median; None for a skipped cell (index)",
    "validated": "whether the allocator checked its invariants after every pass; False for the peer (bool)",
    "metadata_bytes": "the allocator's bookkeeping after the timed run; None if it reports none (bytes)",
    "skipped": "why the cell was not timed (its figures are then NaN); None for a timed cell (text)",
    "<op>_requests": "requests in the timed run, failed allocations included; <op> is alloc or free (count)",
    "<op>_failures": "allocations refused for lack of memory in the timed run; 0 for free (count)",
    "<op>_mean_ns_amortized": "untimed run: wall time per request, per thread, averaged (ns)",
    "<op>_mean_ns": "timed run: mean time per request (ns)",
    "<op>_sd_ns": "timed run: standard deviation per request (ns)",
    "<op>_mean_cycles": "timed run: mean per request (TSC ticks)",
    "<op>_sd_cycles": "timed run: standard deviation per request (TSC ticks)",
    "<op>_p50_ns": "timed run: median request (ns)",
    "<op>_p99_ns": "timed run: 99th percentile (ns)",
    "<op>_max_ns": "timed run: slowest request (ns)",
}


@_with_columns(_BENCH_ALLOC_COLUMN_DOCS)
def bench_alloc(
    allocators: Optional[Sequence[str]] = None,
    threads: Optional[Sequence[int]] = None,
    patterns: Optional[Sequence[str]] = None,
    memory: Optional[str] = None,
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
    """``nvmos bench alloc``: allocation and free latency of the
    allocators timed on this machine (the iBuddy talk's Table 2), with the
    CLI's options.

    Every ``None`` keeps the CLI's default (with ``quick``,
    ``--quick``'s). Timings are this machine's and differ from run to run.

    Args:
        allocators (str | list[str] | None): allocators to time (those of
            ``allocators()`` and ``"bsa"``, the crates.io peer).
        threads (int | list[int] | None): thread counts.
        patterns (str | list[str] | None): ``"bulk"`` (each thread
            allocates its share of half of memory, then frees it),
            ``"repeat"`` (one frame allocated and freed over and over),
            ``"rand"`` (bulk with the frames shuffled across threads before
            they are freed), ``"mixed"`` (random allocations and frees with
            a Linux-like order mix).
        memory (str | None): memory each allocator manages (a size with
            its unit, as ``parse_memory`` reads it).
        rounds (int | None): rounds per cell; the median round is kept.
        repeat (int | None): alloc/free pairs per thread of the
            ``repeat`` pattern (count).
        mixed_ops (int | None): operations per thread of the ``mixed``
            pattern (count).
        seed (int | None): seed of every random choice (the ``rand``
            shuffle, the ``mixed`` decisions).
        lock (str | None): the lock every allocator is built with:
            ``"spin"`` or ``"parking"`` (a sleeping mutex).
        quick (bool): ``--quick``'s defaults.
        free_order (str | None): ``"accepted"`` (default) or ``"per-cpu"``:
            the order iBuddy applies frees buffered on different CPUs in
            (``--free-order``).
        progress (bool | Callable[[int, int, str], object] | None): as for
            ``replay``.

    Returns:
        pandas.DataFrame: one row per allocator x pattern x threads asked
        for, ordered by pattern, allocator, threads; cells not timed (the
        single-frame allocators on ``mixed``) are rows with ``skipped``.
        ``df.attrs["result"].raw`` is the JSON ``--json`` prints, with the
        talk's comparison rows and checks.

    Raises:
        OptionsError: a bad allocator, pattern, lock, free order or count.
        StudyError: an allocator misbehaved (refused frees, failed
            validation).
    """
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


_POWER_COLUMN_DOCS = {
    "workload": "the synthetic workload; None for a trace's rows (text)",
    "machine": "the synthetic workload's machine; None for a trace's rows (text)",
    "trace": "the trace's name; None for a synthetic workload's rows (text)",
    "kind": "the registry allocator; None for the kernel's own placement (text)",
    "allocator": "the allocator's name (text)",
    "migration": "whether migration ran (bool)",
    "banks": "banks in the machine (count)",
    "bank_frames": "frames per bank (4 KiB frames)",
    "offline_percent": "time-weighted mean share of memory offline, in banks powered down (percent)",
    "optimum_offline_percent": "the same for the optimum: the fewest banks holding what is allocated (percent)",
    "points_off_optimum": "optimum_offline_percent - offline_percent (percentage points)",
    "max_offline_percent": "the most memory offline at one sample (percent)",
    "footprint_percent": "time-weighted mean share of memory allocated (percent)",
    "low_footprint_percent": "the lowest footprint at a sample after the first tenth of the run (percent)",
    "up_percent_at_low_footprint": "share of banks up at that sample (percent)",
    "pages_migrated": "page frames copied by migration (frames)",
    "blocks_migrated": "blocks moved by migration (count)",
    "migration_passes": "migration passes run (count)",
    "alloc_failures": "allocations refused for lack of memory (count)",
    "pinned_banks": "banks holding kernel data at the end, which cannot go down (count)",
    "up_banks": "banks up at the end (count)",
    "energy_<model>": (
        "energy under power model <model>: background power of the banks plus migration's copies, in the "
        "model's unit: mJ for the Micron presets, relative bank-%-seconds for seed004-relative (model's unit)"
    ),
    "saving_percent_<model>": "energy saved against every bank up the whole time, under <model> (percent)",
}


@_with_columns(_POWER_COLUMN_DOCS)
def power(
    sizes: Optional[Sequence[str]] = None,
    bank: Optional[str] = None,
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
    latency_memory: Optional[str] = None,
    latency_rounds: Optional[int] = None,
    quick: bool = False,
    *,
    progress: Progress = None,
) -> pd.DataFrame:
    """``nvmos study power``: power-aware placement on banks that can be
    powered down (the Adaptive-Buddy talk), with the CLI's options.

    Every ``None`` takes the study's value at its scale (``quick`` or the
    full study), as the CLI does.

    Args:
        sizes (str | list | None): machine sizes of the synthetic
            workloads (sizes with their units, as ``parse_memory`` reads them).
        bank (str | None): bank size, the unit powered down (a size with
            its unit; must divide every machine size).
        workloads (list[str] | None): ``"light"`` (footprint 10-50 %),
            ``"medium"`` (30-80 %), or ``"NAME:MIN-MAX"`` for another
            footprint range in percent.
        epochs (int | None): simulated seconds per synthetic run.
        kernel_percent (float | None): share of the footprint that is
            kernel (unmovable) data (percent).
        churn_percent (float | None): share of live blocks freed and
            replaced every epoch (percent).
        seed (int | None): seed of the synthetic workloads.
        allocators (list[str] | None): allocators; the bank-aware ones run
            without and with migration.
        models (list[str] | None): power models (``--power``): presets
            ``"seed004-relative"``, ``"ddr4-2400-micron"``,
            ``"lpddr4-3200-micron"`` or TOML files.
        traces (str | os.PathLike | None): a trace file or folder to
            replay too; None: none (``--no-traces``).
        migrate_every_ms (int | None): trace time between migration passes
            (ms).
        latency (bool): run the latency benchmark (False: ``--no-latency``).
        latency_pages (list[int] | None): successive page requests of each
            latency run (pages).
        latency_memory (str | None): the latency benchmark's memory (a
            size with its unit).
        latency_rounds (int | None): rounds of each latency run.
        quick (bool): the study's quick scale (``--quick``).
        progress (bool | Callable[[int, int, str], object] | None): as for
            ``replay``.

    Returns:
        pandas.DataFrame: one row per allocator x (workload, machine), then
        one per allocator x trace; ``df.attrs["result"].raw`` is
        ``power.json`` (the latency benchmark, the bank maps, the
        timelines, the checks).

    Raises:
        OptionsError: options the study refuses (a bank size that does not
            divide a machine size, an unknown workload or model, a trace
            that cannot be opened).
        StudyError: the study failed.
    """
    options = json.loads(_nvmos.power_options("quick" if quick else "full"))
    if sizes is not None:
        options["sizes"] = [parse_memory(s) for s in ([sizes] if isinstance(sizes, (str, int, np.integer)) else sizes)]
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
