"""Shared fixtures: the repository, the CLI binary, a real local Ray
cluster (started with `ray start --head` on 127.0.0.1 and stopped, with
every process it started, even when a test fails)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

# Ray resolves 127.0.0.1 to this machine's outward address unless told
# that this is a single-machine cluster; set before anything imports Ray,
# which reads it at import time. Only loopback addresses are used.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "traces"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def nvmos_bin() -> Path:
    """The CLI: $NVMOS_BIN, else the newest of target/{release,debug}/nvmos."""
    if os.environ.get("NVMOS_BIN"):
        return Path(os.environ["NVMOS_BIN"])
    found = [p for p in (ROOT / "target/release/nvmos", ROOT / "target/debug/nvmos") if p.exists()]
    if not found:
        pytest.fail("no nvmos binary: run `cargo build --release -p nvmos` first (scripts/test does)")
    return max(found, key=lambda p: p.stat().st_mtime)


def run_cli(nvmos_bin: Path, *args: str, cwd: Path = ROOT) -> str:
    proc = subprocess.run([str(nvmos_bin), *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"nvmos {' '.join(args)} failed:\n{proc.stderr}"
    return proc.stdout


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, command line) of every process now."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        out[int(entry)] = (ppid, cmd)
    return out


def cluster_pids(*markers: str) -> set[int]:
    """The processes of one cluster: those naming one of `markers` on
    their command line (its unique session folder: gcs_server, raylet,
    monitors; its GCS address: the client server) and all their
    descendants (workers and agents, which retitle themselves `ray::...`)."""
    procs = _processes()
    mine = {pid for pid, (_, cmd) in procs.items() if any(m in cmd for m in markers)}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in procs.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                grew = True
    mine.discard(os.getpid())
    return mine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RayCluster:
    def __init__(self, address: str, temp_dir: str):
        self.address = address
        self.temp_dir = temp_dir

    def pids(self) -> set[int]:
        return cluster_pids(self.temp_dir, f"--address={self.address} ")

    def task_workers(self, name: str) -> list[int]:
        """Worker processes of this cluster running task `name` now."""
        procs = _processes()
        return [p for p in self.pids() if p in procs and procs[p][1].startswith(f"ray::{name}")]


def _stop(pids_of, deadline_s: float = 10.0) -> set[int]:
    """SIGTERM, then SIGKILL what is left; returns the pids still alive."""
    pids = pids_of()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            alive = {p for p in pids if _alive(p)}
            if not alive:
                return set()
            time.sleep(0.2)
        pids = {p for p in pids if _alive(p)} | pids_of()
    return {p for p in pids if _alive(p)}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="session")
def ray_cluster():
    """A real Ray cluster on this machine: head node on 127.0.0.1, 2 CPUs,
    a small object store, no dashboard; its session files in a fresh
    temporary folder (short: Ray's socket paths must fit 107 bytes)."""
    ray_bin = Path(sys.executable).with_name("ray")
    if not ray_bin.exists():
        pytest.fail(f"{ray_bin} not found: install Ray into this environment (pip install ray)")
    temp_dir = tempfile.mkdtemp(prefix="nvr", dir="/tmp")
    port = _free_port()
    cmd = [
        str(ray_bin), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
        "--num-cpus", "2", "--include-dashboard=false", "--temp-dir", temp_dir,
        "--object-store-memory", str(100 * 1024 * 1024), "--disable-usage-stats",
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        if proc.returncode != 0:
            pytest.fail(f"ray start failed:\n{proc.stdout}\n{proc.stderr}")
        yield RayCluster(f"127.0.0.1:{port}", temp_dir)
    finally:
        try:
            import ray

            if ray.is_initialized():
                ray.shutdown()
        except ImportError:
            pass
        left = _stop(lambda: cluster_pids(temp_dir, f"--address=127.0.0.1:{port} "))
        subprocess.run(["rm", "-rf", temp_dir], check=False)
        assert not left, f"Ray processes still alive after stopping the cluster: {sorted(left)}"
