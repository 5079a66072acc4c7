"""The documentation holds: the book's Python API reference is what
scripts/python_reference.py generates from the installed package, and
every function returning a DataFrame documents exactly the columns it
returns (its docstring's ``Columns:`` section, ``name: meaning (unit)``
a line), checked on small real inputs from traces/."""

from __future__ import annotations

import inspect
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest

import nvmos
from conftest import ROOT, TRACES

NUMPY = TRACES / "numpy.nvt"


def documented_columns(obj) -> list[str]:
    """The column names in ``obj``'s docstring ``Columns:`` section: one
    entry per line at the section's first indentation, deeper lines
    continuing it; a blank or less indented line ends it."""
    doc = inspect.getdoc(obj) or ""
    lines = doc.splitlines()
    try:
        start = [line.strip() for line in lines].index("Columns:")
    except ValueError:
        pytest.fail(f"{obj.__qualname__}: no Columns: section in its docstring")
    names, base = [], None
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        indent = len(line) - len(line.lstrip())
        if base is None:
            base = indent
        if indent < base:
            break
        if indent == base:
            m = re.match(r"^\s*(\S+?): \S", line)
            assert m, f"{obj.__qualname__}: Columns line is not 'name: meaning (unit)': {line!r}"
            names.append(m.group(1))
    assert names, f"{obj.__qualname__}: empty Columns: section"
    assert len(names) == len(set(names)), f"{obj.__qualname__}: a column documented twice: {names}"
    return names


def assert_columns_documented(obj, df: pd.DataFrame) -> None:
    """Every column of ``df`` is documented for ``obj`` and every
    documented column is in ``df``. A documented name with ``<...>`` in it
    (``energy_<model>``) stands for one or more columns."""
    documented = documented_columns(obj)
    patterns = {d: re.compile("^" + re.sub(r"<[^>]+>", ".+", re.escape(d)) + "$") for d in documented if "<" in d}
    exact = set(documented) - set(patterns)
    columns = [str(c) for c in df.columns]
    undocumented = [c for c in columns if c not in exact and not any(p.match(c) for p in patterns.values())]
    absent = [d for d in exact if d not in columns] + [d for d, p in patterns.items() if not any(map(p.match, columns))]
    assert not undocumented, f"{obj.__qualname__}: columns missing from its docstring: {undocumented}"
    assert not absent, f"{obj.__qualname__}: documented columns not returned: {sorted(absent)}"


# ---------------------------------------------------------------------------
# (a) The generated reference page is up to date.


def test_python_reference_is_generated_from_the_docstrings():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/python_reference.py"), "--check"],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (
        f"docs/src/reference/python.md differs from its docstrings:\n{proc.stdout}{proc.stderr}"
    )


def test_every_public_name_is_documented():
    for name in nvmos.__all__:
        obj = getattr(nvmos, name)
        if callable(obj):
            assert inspect.getdoc(obj), f"nvmos.{name} has no docstring"


# ---------------------------------------------------------------------------
# (b) Every DataFrame's columns are its docstring's, on real inputs.


def test_replay_columns():
    df = nvmos.replay(NUMPY, ["iBuddy"], memory="256MiB", progress=False)
    assert_columns_documented(nvmos.replay, df)


def test_evaluate_and_evaluation_frame_columns(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(NUMPY, traces / NUMPY.name)
    df = nvmos.evaluate(traces, ["buddy"], memory="256MiB", progress=False)
    assert_columns_documented(nvmos.evaluate, df)
    again = nvmos.evaluation_frame(df.attrs["result"].raw)
    assert_columns_documented(nvmos.evaluation_frame, again)


def test_trace_events_and_batches_columns():
    trace = nvmos.open_trace(NUMPY)
    assert_columns_documented(nvmos.Trace.events, trace.events())
    assert_columns_documented(nvmos.Trace.batches, next(trace.batches(batch_size=1000)))


def test_banks_columns():
    df = nvmos.banks(cores=[1], quick=True, analyse=False, progress=False)
    assert_columns_documented(nvmos.banks, df)


def test_swap_columns():
    df = nvmos.swap(traces=TRACES / "swap", quick=True, progress=False)
    assert_columns_documented(nvmos.swap, df)


def test_bench_alloc_columns():
    # One timed cell and one skipped (M3 is not timed on `mixed`): both
    # kinds of row, the same columns.
    df = nvmos.bench_alloc(["buddy", "M3"], threads=[1], patterns=["mixed"], memory="16MiB",
                           rounds=1, repeat=500, mixed_ops=500, progress=False)  # fmt: skip
    assert df["skipped"].notna().any() and df["skipped"].isna().any()
    assert_columns_documented(nvmos.bench_alloc, df)


def test_power_columns():
    df = nvmos.power(quick=True, epochs=12, traces=NUMPY, latency=False, progress=False)
    assert_columns_documented(nvmos.power, df)


def test_sweep_columns(tmp_path):
    # One cell with every wear axis, so every documented column appears.
    grid = {
        "study": "wear",
        "output": str(tmp_path / "out"),
        "axes": {
            "traces": [str(NUMPY)],
            "allocators": ["iBuddy"],
            "memory": ["256MiB"],
            "cpus": [2],
            "writes_per_alloc": [1],
            "endurance": [1e7],
        },
        "options": {"heat_buckets": 8},
    }
    result = nvmos.sweep(grid, workers=1, progress=False)
    assert_columns_documented(nvmos.sweep, result.frame)
    assert_columns_documented(nvmos.sweep, pd.read_parquet(result.parquet))
