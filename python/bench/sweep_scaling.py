"""Sweep scaling on this machine: cells per minute at 1 and 2 workers,
local (process pool) and on a real local Ray cluster (started here on
127.0.0.1 with 2 CPUs, stopped afterwards), and Ray's overhead per cell.

    .venv/bin/python python/bench/sweep_scaling.py [CELLS_GRID_TRACES...]

Every run sweeps the same grid (default: every shipped trace
x buddy, iBuddy, LiS-31 x 256MiB, 1GiB) into a fresh folder.
Overhead per cell = (wall time at 1 worker - the cells' own compute time,
as measured inside the workers) / cells, so it counts scheduling, the
trace handed over, result gathering and the Parquet writes; Ray's
connection (`ray.init`) is timed apart. Prints one line per run; the
machine is shared and noisy, so compare within one run of this program.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python" / "tests"))

import nvmos  # noqa: E402
from conftest import _stop, cluster_pids, _free_port  # noqa: E402


def grid(out: Path, traces) -> dict:
    return {
        "study": "wear",
        "output": str(out),
        "axes": {"traces": traces, "allocators": ["buddy", "iBuddy", "LiS-31"], "memory": ["256MiB", "1GiB"]},
        "options": {"heat_buckets": 16},
    }


def report(label: str, result: nvmos.Sweep, connect_s: float = 0.0) -> None:
    compute = float(result.frame["elapsed_s"].sum())
    cpu = float(result.frame["cpu_s"].sum())
    cells = result.run
    overhead = (result.seconds * result.workers - compute) / cells
    print(
        f"{label:<18} {cells} cells in {result.seconds:6.2f} s = {result.cells_per_minute:6.1f} cells/min; "
        f"compute {compute / cells * 1000:6.1f} ms/cell ({cpu / cells * 1000:6.1f} ms CPU); "
        f"overhead {overhead * 1000:6.1f} ms/cell" + (f"; ray.init {connect_s:.2f} s" if connect_s else ""),
        flush=True,
    )


def main() -> None:
    traces = sys.argv[1:] or [str(ROOT / "traces")]
    work = Path(tempfile.mkdtemp(prefix="nvmos-scaling-"))
    print(f"grid: {traces} x 3 allocators x 2 sizes; load average {os.getloadavg()[0]:.1f}", flush=True)
    for workers in (1, 2):
        r = nvmos.sweep(grid(work / f"local{workers}", traces), workers=workers, progress=False)
        report(f"local, {workers} worker{'s' if workers > 1 else ''}", r)
    import subprocess

    import ray

    temp_dir = tempfile.mkdtemp(prefix="nvr", dir="/tmp")
    port = _free_port()
    ray_bin = Path(sys.executable).with_name("ray")
    subprocess.run(
        [str(ray_bin), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port), "--num-cpus", "2",
         "--include-dashboard=false", "--temp-dir", temp_dir, "--object-store-memory", str(100 << 20),
         "--disable-usage-stats"],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        t = time.perf_counter()
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=False, configure_logging=False)
        connect = time.perf_counter() - t
        for workers in (1, 2):
            r = nvmos.sweep(grid(work / f"ray{workers}", traces), backend="ray", workers=workers, progress=False)
            report(f"ray, {workers} worker{'s' if workers > 1 else ''}", r, connect)
        # Trace-major tasks: the 6 cells of a trace in one task.
        r = nvmos.sweep(grid(work / "ray-batch", traces), backend="ray", workers=2, batch=6, progress=False)
        report("ray, 2, batch 6", r, connect)
        ray.shutdown()
    finally:
        _stop(lambda: cluster_pids(temp_dir, f"--address=127.0.0.1:{port} "))
        subprocess.run(["rm", "-rf", temp_dir, str(work)], check=False)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
