"""Sweeps: a grid of 2 traces x 3 allocators x 2 memory sizes run locally
and on a real local Ray cluster gives identical Parquet rows; resume;
failed cells reported, not dropped; a Ray worker killed mid-sweep."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import nvmos
from conftest import TRACES

ALLOCATORS = ["buddy", "iBuddy", "LiS-31"]
MEMORY = ["256MiB", "1GiB"]


def grid(traces, out: Path, **extra) -> dict:
    g = {
        "study": "wear",
        "output": str(out),
        "axes": {"traces": [str(t) for t in traces], "allocators": ALLOCATORS, "memory": MEMORY},
        "options": {"heat_buckets": 16},
    }
    g["axes"].update(extra)
    return g


def deterministic(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in nvmos.TIMING_COLUMNS if c in df]).reset_index(drop=True)


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    traces = [TRACES / "numpy.nvt", TRACES / "files.nvt"]
    result = nvmos.sweep(grid(traces, out), workers=2, progress=False)
    return result, pd.read_parquet(out / "sweep.parquet")


def test_local_sweep_has_every_cell_with_the_apis_numbers(local_sweep):
    result, df = local_sweep
    assert result.run == 12 and result.skipped == 0 and not result.failed
    assert len(df) == 12 and (df["status"] == "ok").all()
    assert set(zip(df["trace"], df["allocator"], df["memory"])) == {
        (t, a, m) for t in ("numpy", "files") for a in ALLOCATORS for m in MEMORY
    }
    # Each cell's numbers are exactly nvmos.replay's for that cell.
    for (trace, memory), part in df.groupby(["trace", "memory"]):
        api = nvmos.replay(TRACES / f"{trace}.nvt", ALLOCATORS, memory=memory, heat_buckets=16, as_recorded=False)
        api = api.set_index("allocator")
        for _, row in part.iterrows():
            for col in ("max", "gini", "lifetime_pct_of_ideal", "lifetime_years_1e7", "allocs", "frames"):
                assert row[col] == api.loc[row["allocator"], col], (trace, memory, col)
    html = result.html.read_text()
    assert html.count('<svg class="chart"') >= 2 and "lifetime_pct_of_ideal" in html


def test_resume_skips_cells_already_done_and_reruns_missing_ones(local_sweep, tmp_path):
    _, full = local_sweep
    out = tmp_path / "resume"
    out.mkdir()
    # An interrupted sweep: 5 of the 12 cells written.
    full.iloc[:5].to_parquet(out / "sweep.parquet", index=False)
    g = grid([TRACES / "numpy.nvt", TRACES / "files.nvt"], out)
    result = nvmos.sweep(g, workers=2, progress=False)
    assert (result.run, result.skipped) == (7, 5)
    again = nvmos.sweep(g, workers=2, progress=False)
    assert (again.run, again.skipped) == (0, 12)
    pd.testing.assert_frame_equal(deterministic(pd.read_parquet(out / "sweep.parquet")), deterministic(full))


def test_endurance_axis_gives_rows_with_the_engines_lifetime(tmp_path):
    g = grid([TRACES / "numpy.nvt"], tmp_path, endurance=[1e6, 1e7, 1e8])
    g["axes"]["allocators"] = ["iBuddy"]
    g["axes"]["memory"] = ["256MiB"]
    result = nvmos.sweep(g, workers=1, progress=False)
    assert result.run == 1 and len(result.frame) == 3
    for _, r in result.frame.iterrows():
        key = {1e6: "lifetime_years_1e6", 1e7: "lifetime_years_1e7", 1e8: "lifetime_years_1e8"}[r["endurance"]]
        assert r["lifetime_years"] == r[key]


def test_failed_cells_are_reported_and_kept_then_rerun(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(TRACES / "numpy.nvt", traces / "numpy.nvt")
    data = bytearray((TRACES / "numpy.nvt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (traces / "broken.nvt").write_bytes(bytes(data))
    out = tmp_path / "out"
    g = grid([traces], out)
    g["axes"]["memory"] = ["256MiB"]
    with pytest.raises(nvmos.SweepError, match="3 of 6 cells failed") as e:
        nvmos.sweep(g, workers=2, progress=False)
    assert "checksum" in str(e.value)
    df = pd.read_parquet(out / "sweep.parquet")
    assert len(df) == 6
    failed = df[df["status"] == "failed"]
    assert len(failed) == 3 and failed["trace_path"].str.endswith("broken.nvt").all()
    assert failed["error"].str.contains("TraceFileError").all()
    assert "Failed cells (3)" in (out / "sweep.html").read_text()
    # Fixed: only the failed cells run again.
    shutil.copy(TRACES / "numpy.nvt", traces / "broken.nvt")
    result = nvmos.sweep(g, workers=2, progress=False)
    assert (result.run, result.skipped) == (3, 3)


def _pool_workers() -> list[int]:
    """This process's child processes (the local pool's workers)."""
    me = os.getpid()
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        kids.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def test_killing_a_local_worker_mid_sweep_still_completes_it(local_sweep, tmp_path):
    traces = [TRACES / "files.nvt", TRACES / "memstress.nvt"]
    outcome = {}

    def run():
        try:
            outcome["result"] = nvmos.sweep(grid(traces, tmp_path / "killed"), workers=2, retries=2, progress=False)
        except BaseException as e:  # noqa: BLE001 - reported below
            outcome["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and thread.is_alive() and time.monotonic() < deadline:
        workers = _pool_workers()
        if workers:
            time.sleep(0.3)  # let it start a cell
            killed = workers[0]
            os.kill(killed, signal.SIGKILL)
        else:
            time.sleep(0.01)
    thread.join(timeout=300)
    assert killed is not None, "no pool worker found to kill"
    assert "error" not in outcome, outcome.get("error")
    df = outcome["result"].frame
    assert len(df) == 12 and (df["status"] == "ok").all()
    # The cell it was running went to a fresh pool (cells it finished
    # before dying keep their rows).
    assert (df["attempts"] >= 1).all() and (df["attempts"] > 1).any()
    local = nvmos.sweep(grid(traces, tmp_path / "again"), workers=2, progress=False).frame
    pd.testing.assert_frame_equal(deterministic(df), deterministic(local))


def test_bad_grids_are_refused(tmp_path):
    with pytest.raises(nvmos.OptionsError, match="unknown allocator 'iBudy'"):
        nvmos.sweep(
            grid([TRACES / "numpy.nvt"], tmp_path)
            | {"axes": {"traces": [str(TRACES / "numpy.nvt")], "allocators": ["iBudy"]}}
        )
    with pytest.raises(nvmos.OptionsError, match="neither a trace file nor a folder"):
        nvmos.sweep(grid([tmp_path / "none.nvt"], tmp_path))
    with pytest.raises(nvmos.OptionsError, match="not an axis or option"):
        nvmos.sweep({"study": "wear", "axes": {"traces": [str(TRACES)], "colour": [1]}})
    bad = tmp_path / "bad.toml"
    bad.write_text("study = 'wear'\n[axes\n")
    with pytest.raises(nvmos.OptionsError, match="bad.toml"):
        nvmos.sweep(bad)


def test_cli_sweep_runs_the_python_engine(nvmos_bin, tmp_path):
    toml = tmp_path / "grid.toml"
    toml.write_text(
        'study = "wear"\noutput = "out"\n[axes]\n'
        f'traces = ["{TRACES / "numpy.nvt"}"]\nallocators = ["iBuddy", "buddy"]\nmemory = ["256MiB"]\n'
    )
    env = dict(os.environ, NVMOS_PYTHON=sys.executable)
    proc = subprocess.run([str(nvmos_bin), "sweep", str(toml), "--workers", "1", "--quiet"],
                          capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "2 cells run" in proc.stdout
    assert len(pd.read_parquet(tmp_path / "out" / "sweep.parquet")) == 2
    # Without the package: a clear message, not a traceback alone.
    env["NVMOS_PYTHON"] = shutil.which("false") or "/bin/false"
    proc = subprocess.run([str(nvmos_bin), "sweep", str(toml)], capture_output=True, text=True, env=env)
    assert proc.returncode != 0 and "Python package nvmos is not installed" in proc.stderr


def test_the_cli_checks_grids_against_the_engines_axes(nvmos_bin, tmp_path):
    """`nvmos sweep` checks a grid before it looks for Python, from its own
    copy of the engine's axes: a grid naming every axis and option the
    engine takes gets past the check (to the missing interpreter), and an
    unknown axis is a grid error naming the file."""
    from nvmos._sweep import STUDY_AXES, WEAR_OPTIONS

    env = dict(os.environ, NVMOS_PYTHON="/nonexistent/python3")
    toml = tmp_path / "grid.toml"
    for study, axes in STUDY_AXES.items():
        lines = [f'study = "{study}"', "[axes]"]
        lines += [f'{a} = ["{TRACES / "numpy.nvt"}"]' if a == "traces" else f"{a} = [1]" for a in axes]
        if study == "wear":
            lines += ["[options]"] + [f"{o} = 1" for o in WEAR_OPTIONS]
        toml.write_text("\n".join(lines) + "\n")
        proc = subprocess.run([str(nvmos_bin), "sweep", str(toml)], capture_output=True, text=True, env=env)
        assert proc.returncode == 1 and "running /nonexistent/python3" in proc.stderr, (study, proc.stderr)
    toml.write_text(f'[axes]\ntraces = ["{TRACES / "numpy.nvt"}"]\ncolour = [1]\n')
    proc = subprocess.run([str(nvmos_bin), "sweep", str(toml)], capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and f"grid {toml}: `colour`" in proc.stderr, proc.stderr


def test_ray_sweep_gives_the_local_rows(local_sweep, ray_cluster, tmp_path):
    _, local = local_sweep
    out = tmp_path / "ray"
    traces = [TRACES / "numpy.nvt", TRACES / "files.nvt"]
    result = nvmos.sweep(grid(traces, out), backend="ray", ray_address=ray_cluster.address, progress=False)
    assert result.run == 12 and not result.failed and result.workers == 2
    ray_df = pd.read_parquet(out / "sweep.parquet")
    pd.testing.assert_frame_equal(deterministic(ray_df), deterministic(local))
    # The cells ran in the cluster's worker processes, not here.
    assert not ray_df["worker"].str.endswith(f":{os.getpid()}").any()
    # Batched: cells of one trace per task, the same rows.
    batched = nvmos.sweep(grid(traces, tmp_path / "batched"), backend="ray", ray_address=ray_cluster.address,
                          batch=4, progress=False)  # fmt: skip
    assert batched.run == 12 and not batched.failed
    pd.testing.assert_frame_equal(deterministic(batched.frame), deterministic(local))


def test_killing_a_ray_worker_mid_sweep_still_completes_it(local_sweep, ray_cluster, tmp_path):
    out = tmp_path / "killed"
    traces = [TRACES / "files.nvt", TRACES / "memstress.nvt"]
    g = grid(traces, out)
    outcome = {}

    def run():
        try:
            outcome["result"] = nvmos.sweep(
                g, backend="ray", ray_address=ray_cluster.address, retries=3, progress=False
            )
        except BaseException as e:  # noqa: BLE001 - reported below
            outcome["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and thread.is_alive() and time.monotonic() < deadline:
        busy = ray_cluster.task_workers("ray_cell")
        if busy:
            killed = busy[0]
            os.kill(killed, signal.SIGKILL)
        else:
            time.sleep(0.01)
    thread.join(timeout=300)
    assert killed is not None, "no worker was found running a cell to kill"
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    df = pd.read_parquet(out / "sweep.parquet")
    assert len(df) == 12 and (df["status"] == "ok").all() and not result.failed
    # The killed worker is gone; its cell was run again by another worker.
    assert not os.path.exists(f"/proc/{killed}/cmdline") or open(f"/proc/{killed}/stat").read().split()[2] == "Z"
    # And the numbers are those of a local run of the same grid.
    local = nvmos.sweep(grid(traces, tmp_path / "local2"), workers=2, progress=False).frame
    pd.testing.assert_frame_equal(deterministic(df), deterministic(local))


def test_summary_charts_are_titled_and_labelled_in_words_with_units(tmp_path):
    from nvmos import _sweep

    # Every metric charted and every axis charted against has words and,
    # but for memory (its ticks carry the unit), a unit.
    for study, metrics in _sweep._METRICS.items():
        for m in metrics:
            words, unit = _sweep._LABELS[m]
            assert words != m and unit, (study, m)
    for axis in ("cpus", "writes_per_alloc", "endurance", "cores", "array_mib", "mlp", "queue",
                 "passes", "pc_scale", "aging_rounds", "page_cluster", "congestion_timeout_ms"):  # fmt: skip
        assert _sweep._LABELS[axis][1], axis

    # A banks sweep over cores, two placements: the page as a person reads it.
    g = _sweep.load_grid(
        {"study": "banks", "output": str(tmp_path), "axes": {"cores": [1, 2, 4], "placement": ["seq", "m3"]}}
    )
    rows = [
        {"cores": c, "placement": p, "run_ns": 1e6 * c, "vs_sequential": 1.0 if p == "seq" else 0.8,
         "hit_rate": 0.5, "blp": 1.5 * c, "status": "ok"}
        for c in (1, 2, 4) for p in ("seq", "m3")
    ]  # fmt: skip
    page = _sweep.summary_html(pd.DataFrame(rows), g, 1.0, "local")
    charts = page.split('<svg class="chart"')[1:]
    assert len(charts) == 4
    texts = [c.split("</svg>")[0] for c in charts]
    for m, title, axis in (
        ("run_ns", "Run time", "Run time (ns)"),
        ("vs_sequential", "Run time relative to sequential placement", "(ratio, below 1 faster)"),
        ("hit_rate", "Row-buffer hit rate", "Row-buffer hit rate (fraction of accesses)"),
        ("blp", "Bank-level parallelism", "Bank-level parallelism (mean banks busy)"),
    ):
        svg = next(t for t in texts if f'font-weight="bold">{title}<' in t)
        assert axis in svg, (m, svg)
        assert "against cores running the kernel" in svg.lower()
        assert ">Cores running the kernel (cores)<" in svg
        # No raw column name as a title or label.
        assert f">{m}<" not in svg and ">cores<" not in svg
    assert "<h2>Across cores running the kernel</h2>" in page.replace("Cores", "cores")
    # The rows table scrolls in its own box.
    assert '<div class="table-wrap"><table' in page and "overflow-x:auto" in page
