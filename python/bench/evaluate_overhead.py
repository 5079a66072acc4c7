"""Python overhead of `nvmos.evaluate` against the CLI's `nvmos evaluate` on
every shipped trace through every allocator, in alternating runs: wall seconds
and CPU seconds (the CLI's from getrusage of the child, Python's from
process_time), medians and their ratio.

    .venv/bin/python python/bench/evaluate_overhead.py [RUNS] [NVMOS_BIN]

Run from the repository root after `cargo build --release -p nvmos`. The
CLI also writes its report folder (to a temporary folder here); Python
returns the DataFrame. On a shared machine compare the CPU seconds.
"""

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import nvmos

N = int(sys.argv[1]) if len(sys.argv) > 1 else 5
BIN = sys.argv[2] if len(sys.argv) > 2 else "target/release/nvmos"
out = tempfile.mkdtemp(prefix="nvmos-overhead-")
cli_w, cli_c, py_w, py_c = [], [], [], []
for i in range(N):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([BIN, "evaluate", "--out", out], check=True, capture_output=True)
    cli_w.append(time.perf_counter() - t)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cli_c.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    t, c = time.perf_counter(), time.process_time()
    df = nvmos.evaluate("traces", progress=False)
    py_w.append(time.perf_counter() - t)
    py_c.append(time.process_time() - c)
    print(
        f"run {i}: cli {cli_w[-1]:.2f} s wall {cli_c[-1]:.2f} s cpu; "
        f"python {py_w[-1]:.2f} s wall {py_c[-1]:.2f} s cpu; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
m = statistics.median
print(f"median wall: cli {m(cli_w):.2f} s, python {m(py_w):.2f} s, ratio {m(py_w) / m(cli_w):.3f}")
print(f"median cpu:  cli {m(cli_c):.2f} s, python {m(py_c):.2f} s, ratio {m(py_c) / m(cli_c):.3f} ({len(df)} rows)")
subprocess.run(["rm", "-rf", out], check=False)
