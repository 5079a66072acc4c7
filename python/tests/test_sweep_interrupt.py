"""A sweep stopped by SIGINT (Ctrl-C) or SIGTERM, from Python and through
the CLI: it stops within a few seconds, keeps every cell that finished
before the signal, says so in one line (no traceback), exits with the
interrupted status (130, 143), leaves no worker running, and a re-run
runs only the cells that had not finished."""

from __future__ import annotations

import os
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

# Cells of a third to half a second each: the sweep is still running well
# after its first cell finishes, even on a fast machine.
ALLOCATORS = ["buddy", "iBuddy", "LiS-31", "M3", "linux-pcp"]
MEMORY = ["256MiB", "512MiB", "1GiB", "2GiB"]
WRITES = [1, 2]
CELLS = len(ALLOCATORS) * len(MEMORY) * len(WRITES)

# Liveness bounds, generous for a loaded two-core machine: the sweep
# itself stops within 2 s of the signal.
STOPS_WITHIN_S = 10.0
STARTS_WITHIN_S = 180.0

DRIVER = """\
import sys
import nvmos

def progress(done, total):
    print(f"finished {done} of {total}", flush=True)

ray = {"backend": "ray", "ray_address": sys.argv[2]} if len(sys.argv) > 2 else {}
try:
    nvmos.sweep(sys.argv[1], workers=2, progress=progress, **ray)
except KeyboardInterrupt as e:
    print(f"{type(e).__name__}: {e}", file=sys.stderr, flush=True)
    sys.exit(3)
print("completed", flush=True)
"""


def write_grid(tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "out"
    grid = tmp_path / "grid.toml"
    grid.write_text(
        f'study = "wear"\noutput = "{out}"\n[axes]\n'
        f'traces = ["{TRACES / "memstress.nvt"}"]\n'
        f"allocators = {ALLOCATORS!r}\nmemory = {MEMORY!r}\nwrites_per_alloc = {WRITES!r}\n"
        "[options]\nheat_buckets = 16\n"
    )
    return grid, out


class Lines:
    """A process's stdout, read line by line in a thread."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream):
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def join(self):
        # Bounded: a worker left running would hold the pipe open.
        self._thread.join(timeout=STOPS_WITHIN_S)


def wait_for(what: str, ready, proc: subprocess.Popen, stderr: Path) -> None:
    """Wait until `ready()`; fail when the process ends first or it takes
    longer than STARTS_WITHIN_S."""
    deadline = time.monotonic() + STARTS_WITHIN_S
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended (status {proc.returncode}) before {what}:\n{stderr.read_text()}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no {what} within {STARTS_WITHIN_S} s")
        time.sleep(0.02)


def stop_within_bound(proc: subprocess.Popen, sig: signal.Signals, group: bool, stderr: Path) -> str:
    """Send `sig` (to the whole process group, as a terminal's Ctrl-C
    does, or to the process alone, as `kill` does); the process must end
    within STOPS_WITHIN_S, and nothing of its group may outlive it.
    Returns its stderr (a file, not a pipe: a process left running would
    hold a pipe open)."""
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    try:
        proc.wait(timeout=STOPS_WITHIN_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"still running {STOPS_WITHIN_S} s after {sig.name}:\n{stderr.read_text()}")
    # Its workers (the pool, the Python under the CLI) end with it.
    deadline = time.monotonic() + STOPS_WITHIN_S
    while _group_alive(proc.pid):
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(
                f"processes of the sweep still running {STOPS_WITHIN_S} s after it exited "
                f"(status {proc.returncode}):\n{stderr.read_text()}"
            )
        time.sleep(0.05)
    return stderr.read_text()


def _group_alive(pgid: int) -> bool:
    """Whether a process other than a zombie is left in group `pgid`."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def kept_cells(out: Path) -> set[str]:
    """The cells whose rows the interrupted sweep left, status ok."""
    parquet = out / "sweep.parquet"
    assert parquet.exists(), f"no {parquet} after the interrupt: {sorted(p.name for p in out.iterdir())}"
    df = pd.read_parquet(parquet)
    return set(df.loc[df["status"] == "ok", "cell_id"])


def assert_resumes(grid: Path, out: Path, kept: set[str]) -> None:
    """A re-run skips the kept cells, runs the rest, and ends with every
    cell and no per-cell files left over."""
    result = nvmos.sweep(grid, workers=2, progress=False)
    assert (result.skipped, result.run) == (len(kept), CELLS - len(kept))
    df = pd.read_parquet(out / "sweep.parquet")
    assert df["cell_id"].nunique() == CELLS and (df["status"] == "ok").all()
    assert not (out / "sweep-cells").exists()


def interrupt_python_sweep(tmp_path: Path, sig: signal.Signals, *ray_address: str) -> tuple[Path, Path, set]:
    """Run DRIVER on the grid, send `sig` once a cell finished, and check
    the interrupt; returns the grid, the output folder and the kept cells."""
    grid, out = write_grid(tmp_path)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    stderr = tmp_path / "stderr"
    with open(stderr, "w") as f:
        proc = subprocess.Popen(
            [sys.executable, str(driver), str(grid), *ray_address],
            stdout=subprocess.PIPE, stderr=f, text=True, start_new_session=True,
        )  # fmt: skip
    lines = Lines(proc.stdout)
    wait_for("a finished cell", lambda: any(line.startswith("finished") for line in lines.lines), proc, stderr)
    err = stop_within_bound(proc, sig, group=False, stderr=stderr)
    lines.join()
    finished = max(int(line.split()[1]) for line in lines.lines if line.startswith("finished"))
    # The caller got an exception (not a kill) that says what happened.
    assert proc.returncode == 3, f"status {proc.returncode}:\n{err}"
    assert "Traceback" not in err, err
    assert err.startswith("SweepInterrupted: "), err
    assert f"interrupted by {sig.name}" in err and "sweep.parquet" in err, err
    kept = kept_cells(out)
    assert finished <= len(kept) < CELLS, (finished, len(kept))
    assert f"{len(kept)} of {CELLS} cells" in err, err
    return grid, out, kept


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_a_python_sweep_keeping_its_finished_cells(tmp_path, sig):
    grid, out, kept = interrupt_python_sweep(tmp_path, sig)
    assert_resumes(grid, out, kept)


def test_sigterm_stops_a_ray_sweep_and_cancels_its_tasks(ray_cluster, tmp_path):
    # SIGTERM: the signal Ray's driver puts its own handler on.
    interrupt_python_sweep(tmp_path, signal.SIGTERM, ray_cluster.address)
    deadline = time.monotonic() + STOPS_WITHIN_S
    while ray_cluster.task_workers("ray_cell"):
        assert time.monotonic() < deadline, "Ray workers still running cells after the sweep stopped"
        time.sleep(0.1)


@pytest.mark.parametrize("sig, group", [(signal.SIGINT, True), (signal.SIGTERM, False)], ids=["ctrl-c", "kill-SIGTERM"])
def test_a_signal_stops_the_cli_sweep_with_one_line_and_the_interrupted_status(nvmos_bin, tmp_path, sig, group):
    grid, out = write_grid(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["NVMOS_PYTHON"] = sys.executable
    stderr = tmp_path / "stderr"
    with open(stderr, "w") as f:
        proc = subprocess.Popen(
            [str(nvmos_bin), "sweep", str(grid), "--workers", "2"],
            stdout=subprocess.DEVNULL, stderr=f, env=env, start_new_session=True,
        )  # fmt: skip
    cells = out / "sweep-cells"
    seen: list[set[str]] = [set()]

    def a_cell_finished() -> bool:
        if cells.is_dir():
            seen[0] = {p.stem for p in cells.glob("*.parquet")}
        return bool(seen[0])

    wait_for(f"a finished cell in {cells}", a_cell_finished, proc, stderr)
    err = stop_within_bound(proc, sig, group=group, stderr=stderr)
    assert proc.returncode == 128 + sig, f"status {proc.returncode}:\n{err}"
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0], err
    kept = kept_cells(out)
    assert seen[0] <= kept and len(kept) < CELLS, (sorted(seen[0] - kept), len(kept))
    assert str(out / "sweep.parquet") in lines[0], err
