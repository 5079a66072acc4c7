"""Design-space sweeps: every cell of a grid one independent task, run on
this machine's cores (a process pool) or on a Ray cluster; results in one
Parquet file plus an HTML summary; resumable.

A grid (TOML file or dict)::

    study = "wear"                  # wear (default) | banks | swap
    output = "sweep-out"            # folder: sweep.parquet, sweep.html

    [axes]                          # the cartesian product is the cells
    traces = ["traces/numpy.nvt", "traces"]   # files or folders of traces
    allocators = ["buddy", "iBuddy", "LiS-31"]
    memory = ["1GiB", "4GiB"]
    cpus = [2, 8]
    writes_per_alloc = [1]
    endurance = [1e6, 1e7]          # rows, not tasks: lifetime per endurance

    [options]                       # fixed for every cell
    heat_buckets = 64

``banks`` axes: ``machine`` (memsys presets), ``cores``, ``placement``,
``access``, ``kernel``, ``array_mib``, ``passes``, ``mlp``, ``policy``,
``queue``, ``seed``. ``swap`` axes: ``pc_scale``, ``aging_rounds``,
``page_cluster``, ``policy``, ``congestion_timeout_ms``, ``no_congestion``,
``vma_readahead``. Any axis may instead be a fixed value in ``[options]``.

Command line: ``python -m nvmos sweep GRID.toml [--out DIR] [--workers N]
[--ray auto|ADDRESS] [--no-resume] [--retries N] [--batch N] [--quiet]``
(what ``nvmos sweep`` runs).

Each cell is saved the moment it finishes, as
``sweep-cells/<cell_id>.parquet`` in the output folder (a temporary file,
then a rename), and those files are folded into ``sweep.parquet``: so a
sweep killed at any moment keeps every cell that finished. SIGINT
(Ctrl-C) and SIGTERM stop a sweep within about 2 s: it stops its
workers, folds what finished into ``sweep.parquet`` and raises
``SweepInterrupted``; run it again to resume.

Output columns: the cell's axes (``trace_path`` for ``traces``,
``allocator`` for ``allocators``, the others by their names), ``cell_id``,
the study's own columns (for ``wear`` the columns of ``nvmos.replay``
but ``source``; for ``banks`` and ``swap`` those of ``nvmos.banks`` and
``nvmos.swap``), ``status`` ("ok" or "failed"), ``error``, ``attempts``,
``worker``, ``elapsed_s`` and ``cpu_s`` (the cell's wall and CPU
seconds), and for an ``endurance`` axis ``endurance`` and
``lifetime_years``. ``nvmos.sweep`` lists them with their units.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import math
import os
import signal
import socket
import threading
import time
from collections import OrderedDict
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np
import pandas as pd

from . import _api
from ._api import NvmosError, OptionsError

#: Columns that measure time or say where a cell ran: they differ between
#: two runs of the same cell; every other column is deterministic.
TIMING_COLUMNS = ("elapsed_ns", "ns_per_event", "events_per_second", "elapsed_s", "cpu_s", "worker", "attempts")

#: The axes each study takes, in cell order.
STUDY_AXES = {
    "wear": ("traces", "allocators", "memory", "cpus", "writes_per_alloc", "endurance"),
    "banks": (
        "machine", "cores", "placement", "access", "kernel", "array_mib", "passes",
        "mlp", "policy", "queue", "seed", "basic_model",
    ),
    "swap": (
        "pc_scale", "aging_rounds", "page_cluster", "policy", "congestion_timeout_ms",
        "no_congestion", "vma_readahead", "traces", "quick",
    ),
}  # fmt: skip

#: Options a wear cell takes besides its axes.
WEAR_OPTIONS = ("heat_buckets",)


class SweepError(NvmosError):
    """A sweep finished with failed cells, or could not start.

    Raised after the output is written: the failed cells are rows of the
    Parquet file with ``status == "failed"`` and their ``error``, and the
    message lists them. Also raised when Ray is missing or unreachable, or
    when an existing output cannot be read to resume.
    """


class SweepInterrupted(KeyboardInterrupt):
    """A sweep stopped by SIGINT (Ctrl-C) or SIGTERM.

    Raised after the sweep stopped its workers and wrote the cells that
    finished into ``sweep.parquet``; running the same sweep again resumes
    from there. A ``KeyboardInterrupt``, so ``except Exception`` does not
    swallow it. The message says which signal and how many cells finished.

    Attributes:
        signal (int): the signal that stopped it (``signal.SIGINT`` or
            ``signal.SIGTERM``).
        done (int): cells in the output, this run's and those kept from
            before (count).
        total (int): cells in the grid (count).
        parquet (pathlib.Path): the Parquet file holding the finished cells.
    """

    def __init__(self, signum: int, done: int, total: int, parquet: Path, failed: int = 0):
        name = signal.Signals(signum).name
        failures = f" ({failed} failed)" if failed else ""
        super().__init__(
            f"interrupted by {name}: {done} of {total} cells finished{failures}, kept in {parquet}; "
            "run the same sweep again to resume"
        )
        self.signal = signum
        self.done = done
        self.total = total
        self.parquet = parquet


class _Stop:
    """SIGINT and SIGTERM while a sweep runs: each only notes the signal
    (``signal``), and the backend, which looks at it several times a
    second, stops its workers. A handler that raised instead could strike
    anywhere, halfway through saving a cell. Installed only in the main
    thread (the only one Python delivers signals to); the previous
    handlers come back on exit."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    #: The signal that stopped a sweep in this process, if one did:
    #: ``python -m nvmos`` takes one arriving after the sweep put the
    #: previous handlers back as a repeat of it.
    stopped_by: Optional[int] = None

    def __init__(self):
        self.signal: Optional[int] = None
        self._previous: dict = {}

    def _note(self, signum, frame) -> None:
        # A repeated signal (Ctrl-C reaches both `nvmos sweep` and this
        # process, and the CLI passes it on) is the same request.
        if self.signal is None:
            self.signal = signum
            _Stop.stopped_by = signum

    def install(self) -> None:
        """Install the handlers, again after a library (Ray) put its own."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in self.SIGNALS:
            previous = signal.signal(sig, self._note)
            self._previous.setdefault(sig, previous)

    def __enter__(self) -> "_Stop":
        self.install()
        return self

    def __exit__(self, *exc) -> None:
        for sig, previous in self._previous.items():
            # None: a handler not installed from Python, which cannot be
            # put back; the default is the nearest.
            signal.signal(sig, signal.SIG_DFL if previous is None else previous)


class Grid:
    """A parsed grid: study, axes (name -> list of values), fixed options,
    output folder."""

    def __init__(self, spec: dict, base: Path = Path(".")):
        spec = dict(spec)
        self.study = spec.pop("study", "wear")
        if self.study not in STUDY_AXES:
            raise OptionsError(f"study: {self.study!r} is not one of {', '.join(STUDY_AXES)}")
        axes = spec.pop("axes", {})
        options = spec.pop("options", {})
        self.output = Path(spec.pop("output", "sweep-out"))
        if not self.output.is_absolute():
            self.output = base / self.output
        if spec:
            raise OptionsError(f"grid: unknown keys {sorted(spec)}; known: study, output, axes, options")
        known = STUDY_AXES[self.study]
        allowed = set(known) | (set(WEAR_OPTIONS) if self.study == "wear" else set())
        for name in list(axes) + list(options):
            if name not in allowed:
                raise OptionsError(
                    f"grid: {name!r} is not an axis or option of study {self.study!r}; "
                    f"known: {', '.join(sorted(allowed))}"
                )
        both = set(axes) & set(options)
        if both:
            raise OptionsError(f"grid: {sorted(both)} both an axis and a fixed option")
        self.axes: dict[str, list] = {}
        for name, values in axes.items():
            if not isinstance(values, list) or not values:
                raise OptionsError(f"axes.{name}: give a non-empty list of values")
            self.axes[name] = list(values)
        self.options = dict(options)
        if self.study == "wear":
            self._wear_axes(base)

    def _wear_axes(self, base: Path) -> None:
        traces = self.axes.get("traces", self.options.pop("traces", None))
        if traces is None:
            raise OptionsError("axes.traces: a wear sweep needs traces (files or folders)")
        if not isinstance(traces, list):
            traces = [traces]
        files: list[str] = []
        for t in traces:
            p = Path(t)
            if not p.is_absolute():
                p = base / p
            if p.is_dir():
                files.extend(os.path.normpath(f) for f in _api.trace_files(p))
            elif p.is_file():
                files.append(os.path.normpath(p))
            else:
                raise OptionsError(f"axes.traces: {t} is neither a trace file nor a folder")
        self.axes["traces"] = list(dict.fromkeys(files))
        if "allocators" not in self.axes:
            self.axes["allocators"] = [self.options.pop("allocators", None) or _api.allocators()]
            if isinstance(self.axes["allocators"][0], list):
                self.axes["allocators"] = self.axes["allocators"][0]
        for name in ("allocators",):
            for a in self.axes[name]:
                if a not in _api.allocators() and a != _api.AS_RECORDED:
                    raise OptionsError(
                        f"axes.allocators: unknown allocator {a!r}; known: "
                        f"{', '.join(_api.allocators())}, {_api.AS_RECORDED!r}"
                    )
        for m in self.axes.get("memory", []):
            _api.parse_memory(m)
        for e in self.axes.get("endurance", []):
            if not isinstance(e, (int, float)) or not e > 0:
                raise OptionsError(f"axes.endurance: {e!r} is not a positive number of writes")

    def task_axes(self) -> list[str]:
        """Axes that make tasks (endurance only makes rows)."""
        return [a for a in STUDY_AXES[self.study] if a in self.axes and a != "endurance"]

    def cells(self) -> list[dict]:
        """Every task cell, in a fixed order, with its id."""
        names = self.task_axes()
        out = []
        for values in itertools.product(*(self.axes[n] for n in names)):
            cell = dict(zip(names, values))
            cell["cell_id"] = cell_id(self.study, cell, self.options)
            out.append(cell)
        return out


def cell_id(study: str, cell: dict, options: dict) -> str:
    """A stable id of a cell: its study, axis values and fixed options, and
    for traces the file's size (a replaced trace is a new cell)."""
    key = {k: v for k, v in cell.items() if k != "cell_id"}
    if "traces" in key and study == "wear":
        try:
            key["trace_bytes"] = os.path.getsize(key["traces"])
        except OSError:
            key["trace_bytes"] = None
    text = json.dumps({"study": study, "cell": key, "options": options}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def load_grid(grid: Union[str, os.PathLike, dict]) -> Grid:
    """A grid from a TOML file (paths in it relative to the file) or a dict.

    Raises:
        OptionsError: the file cannot be read or parsed, or the grid is
            bad (the message names the file and the key).
    """
    if isinstance(grid, Grid):
        return grid
    if isinstance(grid, dict):
        return Grid(grid)
    path = Path(grid)
    try:
        import tomllib  # type: ignore[import-not-found]
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        with open(path, "rb") as f:
            spec = tomllib.load(f)
    except OSError as e:
        raise OptionsError(f"{path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise OptionsError(f"{path}: {e}") from None
    try:
        return Grid(spec, base=path.parent)
    except OptionsError as e:
        raise OptionsError(f"{path}: {e}") from None


# ---------------------------------------------------------------------------
# One cell


_TRACE_CACHE: "OrderedDict[tuple, np.ndarray]" = OrderedDict()
_TRACE_CACHE_BYTES = 1 << 30


def _trace_bytes(path: str) -> np.ndarray:
    """A trace file's bytes, read once per worker process and kept (up to
    1 GiB, least recently used out first)."""
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    data = _TRACE_CACHE.get(key)
    if data is None:
        data = np.fromfile(path, dtype=np.uint8)
        _TRACE_CACHE[key] = data
        while sum(a.nbytes for a in _TRACE_CACHE.values()) > _TRACE_CACHE_BYTES and len(_TRACE_CACHE) > 1:
            _TRACE_CACHE.popitem(last=False)
    else:
        _TRACE_CACHE.move_to_end(key)
    return data


def _wear_cell(cell: dict, options: dict, data: Optional[np.ndarray]) -> pd.DataFrame:
    path = cell["traces"]
    if data is None:
        data = _trace_bytes(path)
    df = _api.replay(
        (path, data),
        [cell["allocators"]],
        memory=cell.get("memory"),
        cpus=cell.get("cpus"),
        writes_per_alloc=cell.get("writes_per_alloc", options.get("writes_per_alloc", 1)),
        heat_buckets=options.get("heat_buckets", 256),
        as_recorded=False,
        progress=False,
    )
    return df.drop(columns=["source"])


def _banks_cell(cell: dict, options: dict) -> pd.DataFrame:
    kw = {**options, **{k: v for k, v in cell.items() if k != "cell_id"}}
    if "cores" in kw and not isinstance(kw["cores"], list):
        kw["cores"] = [kw["cores"]]
    for single, plural in (("placement", "placements"), ("access", "accesses")):
        if single in kw:
            v = kw.pop(single)
            kw[plural] = v if isinstance(v, list) else [v]
    return _api.banks(analyse=False, progress=False, **kw)


def _swap_cell(cell: dict, options: dict) -> pd.DataFrame:
    kw = {**options, **{k: v for k, v in cell.items() if k != "cell_id"}}
    return _api.swap(progress=False, **kw)


#: Output column of an axis whose name is plural in the grid.
_COLUMN = {"traces": "trace_path", "allocators": "allocator"}


def run_cell(study: str, cell: dict, options: dict, data: Optional[np.ndarray] = None) -> list[dict]:
    """Run one cell and return its rows (dicts), each carrying the cell's
    axes, ``status`` "ok", the worker and the seconds it took.

    An ``NvmosError`` (bad input: deterministic, so not worth a retry)
    becomes one row with ``status`` "failed" and the message; anything
    else propagates so the backend retries the cell.
    """
    start, cpu = time.perf_counter(), time.process_time()
    base = {_COLUMN.get(k, k): v for k, v in cell.items()}
    try:
        if study == "wear":
            df = _wear_cell(cell, options, data)
        elif study == "banks":
            df = _banks_cell(cell, options)
        else:
            df = _swap_cell(cell, options)
    except NvmosError as e:
        return [{**base, "status": "failed", "error": f"{type(e).__name__}: {e}"}]
    worker = f"{socket.gethostname()}:{os.getpid()}"
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    rows = []
    for r in df.to_dict("records"):
        for k in list(r):
            if k in base:  # a study column named like an axis: keep the axis
                v = r.pop(k)
                if v != base[k]:
                    r[f"result_{k}"] = v
        rows.append({**base, **r, "status": "ok", "error": None, "worker": worker, "elapsed_s": elapsed, "cpu_s": cpu})
    return rows


def _expand_endurance(rows: list[dict], endurances: Optional[list]) -> list[dict]:
    """One row per endurance: ``lifetime_years`` until the most written
    frame reaches it, the workload repeated (the engine's formula)."""
    if not endurances:
        return rows
    out = []
    for r in rows:
        for e in endurances:
            row = dict(r, endurance=float(e))
            if r.get("status") == "ok":
                mx = r["max"]
                row["lifetime_years"] = (
                    math.inf if mx == 0 else float(e) * (r["trace_ns"] / 1e9) / mx / _api.SECONDS_PER_YEAR
                )
            out.append(row)
    return out


# ---------------------------------------------------------------------------
# Output


def _frame(rows: list[dict], order: dict[str, int]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["_order"] = df["cell_id"].map(order).fillna(len(order)).astype(int)
    sort = ["_order"] + (["endurance"] if "endurance" in df else [])
    df = df.sort_values(sort, kind="stable").drop(columns=["_order"]).reset_index(drop=True)
    return df


def _write_atomic(path: Path, write) -> None:
    """Write atomically: ``write(tmp)`` into a temporary in the same folder,
    then rename over ``path``; a failure leaves no temporary behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _write_parquet(df: pd.DataFrame, path: Path) -> None:
    _write_atomic(path, lambda tmp: df.to_parquet(tmp, index=False))


def _write_text(text: str, path: Path) -> None:
    _write_atomic(path, lambda tmp: tmp.write_text(text))


#: The folder, in the output folder, of the cells finished since the last
#: fold into ``sweep.parquet``: one Parquet file per cell, its rows.
CELLS_FOLDER = "sweep-cells"


def _saved_rows(parquet: Path, cells_dir: Path) -> list[dict]:
    """Every row a sweep into this output folder saved: ``sweep.parquet``'s
    and the per-cell files', a cell's file replacing its rows in
    ``sweep.parquet`` (the file is newer; a kill between a fold's write
    and its removal of the files leaves both)."""
    frames = {}
    if parquet.exists():
        try:
            frames[parquet] = pd.read_parquet(parquet)
        except Exception as e:  # noqa: BLE001 - a damaged file is the user's to look at
            raise SweepError(f"{parquet}: cannot read it to resume ({e}); move it away or pass resume=False") from None
    parts = sorted(cells_dir.glob("*.parquet")) if cells_dir.is_dir() else []
    for part in parts:
        try:
            frames[part] = pd.read_parquet(part)
        except Exception as e:  # noqa: BLE001 - as above
            raise SweepError(
                f"{part}: cannot read this finished cell to resume ({e}); move it away or pass resume=False"
            ) from None
    in_parts = {p.stem for p in parts}
    rows: list[dict] = []
    for path, df in frames.items():
        if path == parquet and "cell_id" in df:
            df = df[~df["cell_id"].isin(in_parts)]
        rows.extend(df.to_dict("records"))
    return [r for r in rows if "cell_id" in r]


def _fold(rows: list[dict], order: dict[str, int], parquet: Path, cells_dir: Path) -> None:
    """Write every row into ``sweep.parquet`` (atomically), then remove
    the per-cell files, whose rows it now holds (or, for cells of another
    grid or failed cells being run again, drops on purpose as resuming
    does)."""
    _write_parquet(_frame(rows, order), parquet)
    if cells_dir.is_dir():
        # Temporaries too: one is left only by a sweep killed mid-write,
        # and the cell it held was not finished.
        for part in [*cells_dir.glob("*.parquet"), *cells_dir.glob(".*.tmp")]:
            part.unlink(missing_ok=True)
        try:
            cells_dir.rmdir()
        except OSError:
            pass  # something else put there: left alone


class Sweep:
    """What a sweep did (``sweep`` returns it).

    Attributes:
        frame (pandas.DataFrame): every row, the Parquet file's content
            (see ``sweep`` for its columns).
        parquet (pathlib.Path): the Parquet file, ``sweep.parquet`` in the
            output folder.
        html (pathlib.Path): the HTML summary, ``sweep.html``.
        run (int): cells run by this call (count).
        skipped (int): cells already in the output, not run again (count).
        failed (list[dict]): ``{"cell", "error"}`` per failed cell (empty
            when ``sweep`` returns; it raises otherwise).
        seconds (float): wall time of the run (s).
        backend (str): ``"local"`` or ``"ray"``.
        workers (int): worker processes (local), or CPUs used at most
            (Ray) (count).
    """

    def __init__(self, frame, parquet, html_path, run, skipped, failed, seconds, backend, workers):
        self.frame = frame
        self.parquet = parquet
        self.html = html_path
        self.run = run
        self.skipped = skipped
        self.failed = failed
        self.seconds = seconds
        self.backend = backend
        self.workers = workers

    @property
    def cells_per_minute(self) -> float:
        """float: cells run per minute of wall time (cells/min; NaN when
        nothing took time)."""
        return self.run / self.seconds * 60 if self.seconds > 0 else float("nan")

    def __repr__(self) -> str:
        return (
            f"<nvmos.Sweep {self.run} cells run, {self.skipped} skipped, {len(self.failed)} failed "
            f"in {self.seconds:.1f} s on {self.backend} ({self.workers} workers): {self.parquet}>"
        )


# ---------------------------------------------------------------------------
# Backends


#: Seconds between looks at a stop request while waiting for cells (s).
_POLL_S = 0.2


def _worker_signals() -> None:
    """A local worker's signals: SIGINT (a terminal's Ctrl-C reaches the
    whole process group) is the driver's to act on, so ignored here;
    SIGTERM, with which the driver stops a worker, does its default and
    ends the process (a forked worker inherits the driver's handler,
    which would only note it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel its queued cells and end its workers,
    running cells included (SIGTERM, then SIGKILL for one that lingers).
    ``shutdown`` alone would wait for every running cell."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14 on
    if terminate is not None:
        terminate()
    else:
        # CPython's own table of the pool's worker processes: before 3.14
        # there is no public way to end them.
        procs = list((getattr(pool, "_processes", None) or {}).values())
        for p in procs:
            p.terminate()
        deadline = time.monotonic() + 1.0
        for p in procs:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(timeout=1.0)
    pool.shutdown(wait=True, cancel_futures=True)


def _local(study, cells, options, workers, retries, on_rows, on_fail, stop):
    """A process pool of ``workers``; a worker that dies (killed, out of
    memory) breaks the pool: its unfinished cells go to a fresh pool, up
    to ``retries`` more times each. A stop request (``stop.signal``) ends
    the workers at once, running cells included."""
    attempts = {c["cell_id"]: 0 for c in cells}
    todo = list(cells)
    while todo and stop.signal is None:
        pool = ProcessPoolExecutor(max_workers=workers, initializer=_worker_signals)
        finished = False
        try:
            futures = {}
            for c in todo:
                attempts[c["cell_id"]] += 1
                futures[pool.submit(run_cell, study, c, options)] = c
            todo = []
            pending = set(futures)
            while pending and stop.signal is None:
                done, pending = wait(pending, timeout=_POLL_S, return_when=FIRST_COMPLETED)
                for f in done:
                    c = futures[f]
                    try:
                        on_rows(c, f.result(), attempts[c["cell_id"]])
                    except BrokenProcessPool as e:
                        if stop.signal is not None:
                            continue  # a worker ended by the stop: not a failure
                        if attempts[c["cell_id"]] <= retries:
                            todo.append(c)
                        else:
                            on_fail(c, f"worker died: {e}", attempts[c["cell_id"]])
                    except Exception as e:  # noqa: BLE001 - retried, then reported
                        if stop.signal is not None:
                            continue  # a worker ended by the stop: not a failure
                        if attempts[c["cell_id"]] <= retries:
                            todo.append(c)
                        else:
                            on_fail(c, f"{type(e).__name__}: {e}", attempts[c["cell_id"]])
            finished = not pending
        finally:
            if finished:
                pool.shutdown(wait=True)
            else:
                # Stopped, or on_rows raised: end the running cells rather
                # than wait for every queued one.
                _stop_pool(pool)


def _ray_remote():
    import ray

    @ray.remote(num_cpus=1)
    def ray_cell(study, cells, options, data):
        # Cells of one trace, run one after the other in this worker.
        return [run_cell(study, cell, options, data) for cell in cells]

    return ray_cell


def _batches(study: str, cells: list[dict], batch: int) -> list[list[dict]]:
    """Consecutive cells in groups of at most ``batch``, a group never
    mixing traces (so a task fetches one trace)."""
    groups: list[list[dict]] = []
    for c in cells:
        g = groups[-1] if groups else None
        if g is not None and len(g) < batch and (study != "wear" or g[0]["traces"] == c["traces"]):
            g.append(c)
        else:
            groups.append([c])
    return groups


def _ray(study, cells, options, address, retries, on_rows, on_fail, workers_seen, stop, workers=None, batch=1):
    """Each cell a Ray task; each trace put in the object store once and
    handed to every task as a reference (workers map it without a copy).
    Ray retries a task whose worker died (``max_retries``) or that raised
    (``retry_exceptions``); a cell failing past that is reported. With
    ``workers``, at most that many cells are in flight at once. A stop
    request (``stop.signal``) cancels the tasks in flight."""
    try:
        import ray
    except ImportError:
        raise SweepError("backend 'ray' needs Ray: pip install 'ray>=2.9'") from None
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = "a new local cluster" if address is None else f"the Ray cluster at {address!r}"
            raise SweepError(
                f"cannot connect to {where}: {e} (start one with `ray start --head`, or give its address)"
            ) from None
        # Ray's driver puts its own SIGTERM handler in; the sweep's stop
        # comes first.
        stop.install()
    cpus = int(ray.cluster_resources().get("CPU", 0))
    workers_seen.append(min(cpus, workers) if workers else cpus)
    try:
        refs = {}
        if study == "wear":
            for path in dict.fromkeys(c["traces"] for c in cells):
                refs[path] = ray.put(np.fromfile(path, dtype=np.uint8))
        remote = _ray_remote().options(max_retries=retries, retry_exceptions=True)
        tasks = {}
        queue = _batches(study, cells, batch)
        limit = workers or len(queue)
        pending: list = []
        while (queue or pending) and stop.signal is None:
            while queue and len(pending) < limit:
                group = queue.pop(0)
                data = refs.get(group[0].get("traces")) if study == "wear" else None
                ref = remote.remote(study, group, options, data)
                tasks[ref] = group
                pending.append(ref)
            done, pending = ray.wait(pending, num_returns=1, timeout=_POLL_S)
            if done and pending:
                # Gather every cell already finished, not one per round trip.
                more, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
                done += more
            for ref in done:
                group = tasks.pop(ref)
                try:
                    results = ray.get(ref)
                except Exception as e:  # noqa: BLE001 - Ray already retried it
                    text = str(e).strip()
                    message = f"{type(e).__name__}: {text.splitlines()[-1] if text else e}"
                    for c in group:
                        on_fail(c, message, retries + 1)
                    continue
                for c, rows in zip(group, results):
                    on_rows(c, rows, None)
        if stop.signal is not None:
            for ref in pending:
                ray.cancel(ref, force=True)
    finally:
        if started_here:
            ray.shutdown()


# ---------------------------------------------------------------------------
# The sweep


# The columns of a wear sweep's frame, with their units (``sweep``'s
# docstring): the axes, the cell id, ``nvmos.replay``'s columns but
# ``source``, what the sweep adds per cell, and the endurance rows.
_SWEEP_COLUMN_DOCS = {
    "trace_path": "the cell's trace file, from the traces axis (path)",
    "allocator": "the cell's allocator, from the allocators axis (text)",
    "memory": 'the cell\'s memory as written in the grid, e.g. "1GiB" (text)',
    "cpus": "the cell's CPU count (count)",
    "writes_per_alloc": "the cell's full-page writes per allocated frame (writes)",
    "cell_id": (
        "the cell's stable id: a hash of the study, its axis values, the fixed options and the trace's size (text)"
    ),
    **{k: v for k, v in _api._EVALUATE_COLUMN_DOCS.items() if k not in ("source", "allocator")},
    "status": '"ok", or "failed" for a cell that raised (its study columns are then empty) (text)',
    "error": "the failure: exception type and message; None for an ok row (text)",
    "attempts": "runs the cell took, retries included (count; local backend, and failed cells on Ray)",
    "worker": "where the cell ran: host:pid of the worker process (text)",
    "elapsed_s": "the cell's wall time in its worker (s)",
    "cpu_s": "the cell's CPU time in its worker (s)",
    "endurance": "the endurance of this row, from the endurance axis (writes per frame)",
    "lifetime_years": (
        "years until the most written frame reaches endurance writes with the workload repeated: "
        "endurance x the trace's duration / max; inf when no frame was written (years)"
    ),
}


@_api._with_columns(_SWEEP_COLUMN_DOCS)
def sweep(
    grid: Union[str, os.PathLike, dict, Grid],
    *,
    output: Union[None, str, os.PathLike] = None,
    backend: str = "local",
    workers: Optional[int] = None,
    ray_address: Optional[str] = None,
    resume: bool = True,
    retries: int = 2,
    progress: Union[bool, Callable[[int, int], Any]] = True,
    checkpoint_s: float = 30.0,
    batch: int = 1,
) -> Sweep:
    """Run every cell of a grid that is not already in the output.

    Each cell (one point of the product of the axes; an ``endurance`` axis
    only adds rows) is an independent task. Writes ``sweep.parquet``
    (every row, failed cells included with their error) and
    ``sweep.html`` (charts of each metric against the first numeric axis
    with several values, failures, the rows) into the output folder.

    Each cell is saved the moment it finishes, as
    ``sweep-cells/<cell_id>.parquet`` (a temporary file, then a rename,
    so never half written); every ``checkpoint_s`` seconds and at the end
    those files are folded into ``sweep.parquet`` and removed. A sweep
    killed at any moment therefore keeps every cell that finished, and
    the next run resumes from there. While the sweep runs in the main
    thread, SIGINT (Ctrl-C) and SIGTERM stop it within about 2 s: its
    workers end (running cells are dropped and run again on resume), the
    finished cells are folded into ``sweep.parquet``, and it raises
    ``SweepInterrupted``.

    Args:
        grid (str | os.PathLike | dict | Grid): a TOML file (paths in it
            relative to the file) or a dict of the same shape (see the
            module ``nvmos._sweep``).
        output (str | os.PathLike | None): the output folder; None: the
            grid's ``output``, else ``sweep-out``.
        backend (str): ``"local"``: a process pool on this machine;
            ``"ray"``: each cell a Ray task.
        workers (int | None): local worker processes (None: every core);
            with Ray, the most cells in flight (None: as many as the
            cluster schedules).
        ray_address (str | None): the Ray cluster: ``"auto"`` (the one
            this machine belongs to), ``"HOST:PORT"``, or None (start a
            local one).
        resume (bool): keep the ``ok`` rows of this grid's cells already
            in the output and run only the others (failed cells again).
        retries (int): extra attempts for a cell whose worker died or
            raised something other than an ``NvmosError`` (bad input is
            deterministic, so not retried).
        progress (bool | Callable[[int, int], object]): True: a tqdm bar
            when tqdm is installed; False: none; a callable: called as
            ``progress(done, total)`` in cells.
        checkpoint_s (float): seconds between folds of the per-cell files
            into the Parquet file (s).
        batch (int): with Ray, cells of one trace per task (fewer tasks and
            trace fetches, a coarser unit of retry).

    Returns:
        Sweep: what ran, with ``frame`` (every row, the Parquet file's
        content). A wear sweep's frame has the columns below (those of
        the grid's axes only; a cell's study columns are empty in a failed
        row). A banks or swap sweep has its axes, ``cell_id``, the columns
        of ``nvmos.banks`` or ``nvmos.swap`` and the same ``status`` to
        ``cpu_s`` columns; a study column named like an axis whose value
        differs from the axis's is kept as ``result_<name>``.

    Raises:
        OptionsError: a bad grid (unknown study, axis or option, a missing
            trace, an unknown allocator or size), backend, retries or
            batch.
        SweepError: after writing the output, when a cell failed; before
            running, when Ray is missing or unreachable or the existing
            output cannot be read to resume.
        SweepInterrupted: after writing the finished cells, when SIGINT or
            SIGTERM stopped the sweep (a ``KeyboardInterrupt``).
    """
    g = load_grid(grid)
    out = Path(output) if output is not None else g.output
    parquet = out / "sweep.parquet"
    html_path = out / "sweep.html"
    cells_dir = out / CELLS_FOLDER
    if backend not in ("local", "ray"):
        raise OptionsError(f"backend: {backend!r} is not 'local' or 'ray'")
    if retries < 0:
        raise OptionsError("retries: zero or more")
    if batch < 1:
        raise OptionsError("batch: at least one cell per task")
    cells = g.cells()
    order = {c["cell_id"]: i for i, c in enumerate(cells)}
    kept: list[dict] = []
    if resume:
        # Keep only rows of this grid's cells (another grid's output is not
        # mixed in) that succeeded; failed cells run again.
        kept = [r for r in _saved_rows(parquet, cells_dir) if r.get("status") == "ok" and r["cell_id"] in order]
    done_ids = {r["cell_id"] for r in kept}
    todo = [c for c in cells if c["cell_id"] not in done_ids]
    endurances = g.axes.get("endurance")
    rows: list[dict] = list(kept)
    failed: list[dict] = []
    bar = None
    if progress is True:
        try:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(todo), desc=f"sweep ({backend})", unit="cell", disable=None)
        except ImportError:
            bar = None
    last_write = [time.monotonic()]
    finished = [0]

    def checkpoint(force: bool = False) -> None:
        if force or time.monotonic() - last_write[0] >= checkpoint_s:
            _fold(rows, order, parquet, cells_dir)
            last_write[0] = time.monotonic()

    def on_rows(cell: dict, cell_rows: list[dict], attempts: Optional[int]) -> None:
        for r in cell_rows:
            if attempts is not None:
                r["attempts"] = attempts
        if any(r.get("status") == "failed" for r in cell_rows):
            failed.append({"cell": cell, "error": cell_rows[0].get("error")})
        cell_rows = _expand_endurance(cell_rows, endurances)
        # Saved before it counts as finished: a kill from here on keeps it.
        _write_parquet(pd.DataFrame(cell_rows), cells_dir / f"{cell['cell_id']}.parquet")
        rows.extend(cell_rows)
        finished[0] += 1
        if bar is not None:
            bar.update(1)
        elif callable(progress):
            progress(finished[0], len(todo))
        checkpoint()

    def on_fail(cell: dict, error: str, attempts: int) -> None:
        base = {_COLUMN.get(k, k): v for k, v in cell.items()}
        on_rows(cell, [{**base, "status": "failed", "error": error}], attempts)

    start = time.perf_counter()
    workers_seen: list[int] = []
    with _Stop() as stop:
        try:
            if todo:
                if backend == "local":
                    n = workers or os.cpu_count() or 1
                    workers_seen.append(n)
                    _local(g.study, todo, g.options, n, retries, on_rows, on_fail, stop)
                else:
                    _ray(
                        g.study, todo, g.options, ray_address, retries, on_rows, on_fail, workers_seen, stop,
                        workers, batch,
                    )  # fmt: skip
        finally:
            if bar is not None:
                bar.close()
            if rows or not parquet.exists():
                checkpoint(force=True)
    if stop.signal is not None:
        done = len({r["cell_id"] for r in rows})
        raise SweepInterrupted(stop.signal, done, len(cells), parquet, len(failed))
    seconds = time.perf_counter() - start
    frame = _frame(rows, order)
    _write_text(summary_html(frame, g, seconds, backend), html_path)
    result = Sweep(
        frame, parquet, html_path, len(todo), len(cells) - len(todo), failed, seconds,
        backend, workers_seen[0] if workers_seen else 0,
    )  # fmt: skip
    if failed:
        lines = "\n".join(f"  {f['cell']}: {f['error']}" for f in failed[:20])
        more = f"\n  ... and {len(failed) - 20} more" if len(failed) > 20 else ""
        raise SweepError(
            f"{len(failed)} of {len(cells)} cells failed (rows with status 'failed' in {parquet}):\n{lines}{more}"
        )
    return result


# ---------------------------------------------------------------------------
# HTML summary

_METRICS = {
    "wear": ["lifetime_pct_of_ideal", "max_over_mean", "gini", "lifetime_years"],
    "banks": ["run_ns", "vs_sequential", "hit_rate", "blp"],
    "swap": ["swap_in_s", "swap_out_s", "congestion_wait_s"],
}
_SERIES = {"wear": "allocator", "banks": "placement", "swap": "device"}

#: What each column plotted or faceted on means, in words, and its unit
#: (``None``: a count or label that needs none). The one place chart
#: titles, axis labels and headings take their words from.
_LABELS: dict[str, tuple[str, Optional[str]]] = {
    # wear: metrics
    "lifetime_pct_of_ideal": ("Lifetime", "% of the ideal (even wear)"),
    "max_over_mean": ("Most writes to one frame over the mean", "ratio"),
    "gini": ("Gini coefficient of writes per frame", "0 even, 1 one frame"),
    "lifetime_years": ("Lifetime until the most written frame wears out", "years"),
    # banks: metrics
    "run_ns": ("Run time", "ns"),
    "vs_sequential": ("Run time relative to sequential placement", "ratio, below 1 faster"),
    "hit_rate": ("Row-buffer hit rate", "fraction of accesses"),
    "blp": ("Bank-level parallelism", "mean banks busy"),
    # swap: metrics
    "swap_in_s": ("Time in swap-in faults", "s"),
    "swap_out_s": ("Swap-out time", "s"),
    "congestion_wait_s": ("Time in congestion waits", "s"),
    # swept axes
    "memory": ("Memory the allocators manage", None),
    "cpus": ("CPUs the allocators serve", "CPUs"),
    "writes_per_alloc": ("Full-page writes per allocated frame", "writes"),
    "endurance": ("Endurance of a frame", "writes"),
    "cores": ("Cores running the kernel", "cores"),
    "array_mib": ("Array per core", "MiB"),
    "mlp": ("Outstanding misses per core", "requests"),
    "queue": ("Queue per channel", "requests"),
    "passes": ("Passes over the arrays", "passes"),
    "pc_scale": ("PC scenario size relative to the seed's 1 GB machine", "ratio"),
    "aging_rounds": ("Aging rounds before the measured one", "rounds"),
    "page_cluster": ("Swap read-ahead, page_cluster", "log2 pages"),
    "congestion_timeout_ms": ("Congestion wait timeout", "ms"),
    # facets
    "trace_path": ("trace", None),
}


def _label(column: str, unit: bool = True) -> str:
    """A column in words, with its unit in parentheses when it has one:
    "Run time (ns)". A column not in ``_LABELS`` is shown as named."""
    words, u = _LABELS.get(column, (column, None))
    return f"{words} ({u})" if unit and u else words


def _facet(column: str, value: Any) -> str:
    """One fixed axis of a chart in words: "trace numpy.nvt", "endurance
    of a frame 1e+07 writes"."""
    words, unit = _LABELS.get(column, (column, None))
    if column == "trace_path":
        value = Path(str(value)).name
    elif isinstance(value, float):
        value = f"{value:g}"
    return f"{_in_sentence(words)} {value}{' ' + unit if unit else ''}"


def _in_sentence(words: str) -> str:
    """``words`` to follow other words: "Memory the…" becomes "memory
    the…", but "CPUs the…" and "PC scenario…" keep their capitals."""
    return words[:1].lower() + words[1:] if words[1:2].islower() else words


#: Series colours and dash patterns, as the Rust report's charts take them
#: (``nvmos_report::chart::PALETTE`` and ``DASHES``): sixteen colours and
#: three dashes, so no two of the first 48 series look alike.
_PALETTE = [
    "#222222", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22", "#8c8c8c", "#003f7f", "#e7298a", "#1b9e77", "#66a61e", "#5a2d82",
]  # fmt: skip
_DASHES = ["", ' stroke-dasharray="7 3"', ' stroke-dasharray="2 2.5"']


def _x_axis(df: pd.DataFrame, g: Grid) -> Optional[str]:
    """The swept axis to plot against: the first with several values,
    memory first (as frames, so sizes sort)."""
    for a in ("memory", "cpus", "writes_per_alloc", "endurance", "cores", "array_mib", "mlp",
              "queue", "passes", "pc_scale", "aging_rounds", "page_cluster", "congestion_timeout_ms"):  # fmt: skip
        if a in g.axes and len(g.axes[a]) > 1 and a in df:
            return a
    return None


def _svg_chart(df: pd.DataFrame, x: str, y: str, series: str, facet: str = "") -> str:
    """One metric ``y`` against the swept axis ``x``, a line per
    ``series``: titled with the metric in words, ``facet`` (the other axes'
    values) on a second line, both axes labelled in words with units."""
    w, h, left, bottom, top, right = 560, 320, 60, 40, 58, 170
    against = "against " + _in_sentence(_label(x, unit=False))
    xs = df["_x"].astype(float)
    ys = df[y].astype(float).replace([np.inf, -np.inf], np.nan)
    if ys.notna().sum() == 0:
        return ""
    # Sizes and counts that span a factor of 8 or more: a log scale, so
    # 256 MiB and 1 GiB do not print over each other.
    log = bool((xs > 0).all()) and float(xs.max()) >= 8 * float(xs.min())
    if log:
        xs = np.log2(xs)
    x0, x1 = float(xs.min()), float(xs.max())
    y0, y1 = 0.0, float(ys.max()) * 1.05 or 1.0
    sx = lambda v: left + (v - x0) / ((x1 - x0) or 1) * (w - left - right)  # noqa: E731
    sy = lambda v: h - bottom - (v - y0) / ((y1 - y0) or 1) * (h - top - bottom)  # noqa: E731
    parts = [
        f'<svg class="chart" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg" font-size="11">',
        f"<title>{html.escape(_label(y, unit=False))} {html.escape(against)}</title>",
        f'<text x="8" y="16" font-size="13" font-weight="bold">{html.escape(_label(y, unit=False))}</text>',
        f'<text x="8" y="31" fill="#555">{html.escape(against + (" · " + facet if facet else ""))}</text>',
        f'<text x="8" y="{top - 10}">{html.escape(_label(y))}</text>',
        f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="#888"/>',
    ]
    for v in sorted(set(xs)):
        label = df.loc[xs == v, x].iloc[0]
        parts.append(
            f'<text x="{sx(v):.1f}" y="{h - bottom + 14}" text-anchor="middle">{html.escape(str(label))}</text>'
        )
    for frac in (0, 0.5, 1):
        v = y0 + frac * (y1 - y0)
        parts.append(f'<text x="{left - 4}" y="{sy(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>')
    axis = _label(x) + (", log scale" if log else "")
    parts.append(f'<text x="{(left + w - right) / 2}" y="{h - 6}" text-anchor="middle">{html.escape(axis)}</text>')
    for i, (name, part) in enumerate(df.groupby(series, sort=False)):
        part = part.assign(_x=xs[part.index], _y=ys[part.index]).dropna(subset=["_y"]).sort_values("_x")
        colour, dash = _PALETTE[i % len(_PALETTE)], _DASHES[i % len(_DASHES)]
        pts = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b in zip(part["_x"].astype(float), part["_y"]))
        parts.append(f'<polyline class="mark" fill="none" stroke="{colour}" stroke-width="2"{dash} points="{pts}"/>')
        for a, b in zip(part["_x"].astype(float), part["_y"]):
            parts.append(f'<circle class="mark" cx="{sx(a):.1f}" cy="{sy(b):.1f}" r="3" fill="{colour}"/>')
        ly = top + 14 * i + 10
        parts.append(
            f'<line x1="{w - right + 8}" y1="{ly - 4}" x2="{w - right + 26}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"{dash}/>'
            f'<text x="{w - right + 30}" y="{ly}" fill="{colour}">{html.escape(str(name))}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def summary_html(df: pd.DataFrame, g: Grid, seconds: float, backend: str) -> str:
    """The sweep's HTML page: what was swept, charts of each metric against
    the first numeric swept axis (one line per allocator/placement/device,
    one chart per combination of the other axes), failures, and the rows."""
    out = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>nvmos sweep</title>',
        "<style>body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1200px}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 5px;text-align:right}"
        "svg.chart{display:inline-block;margin:.5em;border:1px solid #eee}.note{color:#555}"
        ".table-wrap{overflow-x:auto;max-width:100%}</style></head><body>",
        f"<h1>nvmos sweep: {html.escape(g.study)}</h1>",
        f'<p class="note">{len(g.cells())} cells on {html.escape(backend)}; this run {seconds:.1f} s. Axes: '
        + "; ".join(
            f"<b>{html.escape(k)}</b> = {html.escape(', '.join(map(str, v)) if len(v) <= 8 else f'{len(v)} values')}"
            for k, v in g.axes.items()
        )  # fmt: skip
        + "</p>",
    ]
    ok = df[df["status"] == "ok"] if "status" in df else df
    bad = df[df["status"] == "failed"] if "status" in df else df.iloc[0:0]
    if len(bad):
        out.append(f"<h2>Failed cells ({len(bad)})</h2><ul>")
        for _, r in bad.iterrows():
            out.append(f"<li><code>{html.escape(str(r['cell_id']))}</code>: {html.escape(str(r['error']))}</li>")
        out.append("</ul>")
    x = _x_axis(ok, g)
    series = _SERIES[g.study]
    if x and series in ok and len(ok):
        data = ok.copy()
        data["_x"] = data[x].map(_api.parse_memory) if x == "memory" else data[x]
        facets = [
            _COLUMN.get(a, a) for a in g.task_axes()
            if _COLUMN.get(a, a) not in (x, series) and len(g.axes.get(a, [])) > 1
        ]  # fmt: skip
        if "endurance" in g.axes and x != "endurance" and len(g.axes["endurance"]) > 1:
            facets.append("endurance")
        out.append(f"<h2>Across {html.escape(_in_sentence(_label(x, unit=False)))}</h2>")
        groups = data.groupby(facets, sort=False) if facets else [((), data)]
        for key, part in groups:
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(_facet(a, v) for a, v in zip(facets, key))
            for m in _METRICS[g.study]:
                if m in part:
                    out.append(_svg_chart(part, x, m, series, label))
    else:
        out.append('<p class="note">No numeric axis with several values: no charts, the rows are below.</p>')
    shown = ok.drop(columns=[c for c in ("heat",) if c in ok]).head(2000)
    out.append(f"<h2>Rows ({len(ok)}{', first 2000' if len(ok) > 2000 else ''})</h2>")
    # Rows have many columns: the table scrolls sideways in its own box.
    table = shown.to_html(index=False, float_format=lambda v: f"{v:.4g}", na_rep="", border=0)
    out.append(f'<div class="table-wrap">{table}</div>')
    out.append("</body></html>")
    return "".join(out)
