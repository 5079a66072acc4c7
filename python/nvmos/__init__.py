"""nvmos from Python: page-frame allocator replay, wear and the studies as
pandas DataFrames, design-space sweeps run on this machine's cores or on a
Ray cluster, and persistent memory objects with numpy arrays over them.

>>> import nvmos
>>> df = nvmos.replay("traces/numpy.nvt", ["iBuddy", "buddy"], memory="1GiB")
>>> df[["allocator", "max", "lifetime_pct_of_ideal"]]          # doctest: +SKIP
>>> df.attrs["result"].heat("numpy", "iBuddy")                 # doctest: +SKIP
>>> nvmos.sweep("grid.toml", backend="ray", ray_address="auto") # doctest: +SKIP

The engine is the Rust workspace's (``nvmos._nvmos``, built with PyO3);
numbers are the CLI's to the bit, and long calls release the GIL. Every
function returning a DataFrame lists its columns, with their units, in
its docstring. Errors are ``NvmosError`` subclasses carrying the Rust
error's message: ``TraceFileError`` (with ``path``, ``line``,
``offset``), ``OptionsError``, ``StudyError``, ``SweepError``,
``PmoError``; a sweep stopped by SIGINT or SIGTERM raises
``SweepInterrupted`` (a ``KeyboardInterrupt``).

Persistent memory objects (the PD-LOaPP talk's pcreate, attach, psync,
detach and pdestroy) with a heap inside each:

>>> pool = nvmos.Pool.create("/dev/shm/p.pool", 16 << 20)       # doctest: +SKIP
>>> pool.pcreate("grid", 1 << 20, key=b"a long passphrase")     # doctest: +SKIP
>>> with pool.attach("grid", key=b"a long passphrase", write=True) as a:  # doctest: +SKIP
...     cells = a.buffer[4096:].view("float64")   # numpy, no copy
...     cells[:] = 1.0
...     del cells                                  # detach refuses while arrays live
"""

from ._api import (
    AS_RECORDED,
    ENDURANCES,
    EVALUATE_COLUMNS,
    NvmosError,
    OptionsError,
    Result,
    StudyError,
    Trace,
    TraceFileError,
    Wear,
    allocators,
    banks,
    bench_alloc,
    evaluate,
    evaluation_frame,
    machine_presets,
    open_trace,
    parse_memory,
    power,
    replay,
    swap,
    trace_files,
    wear,
)
from ._nvmos import MappingOwner, PmoAttachment, PmoError, __version__
from ._nvmos import PmoPool as Pool
from ._sweep import TIMING_COLUMNS, Sweep, SweepError, SweepInterrupted, sweep

__all__ = [
    "MappingOwner", "PmoAttachment", "PmoError", "Pool",
    "AS_RECORDED", "ENDURANCES", "EVALUATE_COLUMNS", "NvmosError", "OptionsError", "Result",
    "StudyError", "Sweep", "SweepError", "SweepInterrupted", "TIMING_COLUMNS", "Trace", "TraceFileError", "Wear",
    "__version__", "allocators", "banks", "bench_alloc", "evaluate", "evaluation_frame", "machine_presets",
    "open_trace", "parse_memory", "power", "replay", "swap", "sweep", "trace_files", "wear",
]  # fmt: skip
