"""The ``nvmos`` command the package installs (``nvmos._cli``): the Rust
CLI built into the extension module, which must behave as the binary
``cargo build`` makes; and the wheel, which installs without a network."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, TRACES


def command() -> Path:
    """The installed ``nvmos`` script of this interpreter's environment."""
    script = Path(sysconfig.get_path("scripts")) / "nvmos"
    if not script.exists():
        pytest.fail(f"{script} is missing: the package's [project.scripts] entry was not installed")
    return script


def run(program, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(program), *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_the_command_prints_what_the_binary_prints(nvmos_bin):
    trace = str(TRACES / "numpy.nvt")
    for args in (["trace", "info", trace], ["--version"], ["replay", trace, "--alloc", "iBuddy"]):
        mine, theirs = run(command(), *args), run(nvmos_bin, *args)
        assert mine.returncode == theirs.returncode == 0, (args, mine.stderr, theirs.stderr)
        if args[0] == "replay":
            # The last column is the replay's speed on this run.
            strip = lambda out: [line.rsplit(None, 1)[0] for line in out.splitlines() if line.strip()]
            assert strip(mine.stdout) == strip(theirs.stdout), args
        else:
            assert mine.stdout == theirs.stdout, args


def test_the_command_fails_as_the_binary_does(nvmos_bin):
    missing = run(command(), "trace", "info", "/nonexistent/trace.nvt")
    assert missing.returncode == 1, missing
    assert "/nonexistent/trace.nvt" in missing.stderr
    usage = run(command(), "no-such-subcommand")
    assert usage.returncode == 2, usage
    assert usage.stderr == run(nvmos_bin, "no-such-subcommand").stderr


def test_a_built_wheel_installs_offline_with_its_command(tmp_path):
    """``pip wheel`` (sharing the build in ``target/``), then an install
    that may not use the network: ``--no-index`` and no dependencies, into
    a folder of its own."""
    wheels = tmp_path / "wheels"
    # Without build isolation the backend is this environment's maturin,
    # whose program is beside this interpreter.
    scripts = sysconfig.get_path("scripts")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", "")},
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("nvmos-*.whl")
    with zipfile.ZipFile(wheel) as z:
        entry = [n for n in z.namelist() if n.endswith("entry_points.txt")]
        assert entry and "nvmos=nvmos._cli:main" in z.read(entry[0]).decode().replace(" ", "")
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PIP_NO_INDEX": "1"},
    )
    assert install.returncode == 0, install.stderr
    script = target / "bin" / "nvmos"
    assert script.exists(), sorted(p.name for p in target.iterdir())
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("nvmos "), out.stdout
