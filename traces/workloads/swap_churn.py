"""A desktop-like memory churn for `nvmos record-swap` (seed 003's clean
and aged swap patterns on real Linux).

Phase "clean": fill FOOTPRINT_MB of 1 MiB-page-aligned buffers of random
sizes (an application heap growing on a fresh swap area). Phases
"aged-N": ROUNDS rounds in which the user switches between "applications":
some buffers are freed and replaced by new ones of other sizes (closed and
reopened applications: their swap slots become obsolete), some are read
back (swap-ins) and partly rewritten (their swap copies become obsolete).
Phase boundaries are written to tracefs's trace_marker, which the
recorder keeps as `P` lines.
"""
import os
import random
import sys

FOOTPRINT_MB = int(sys.argv[1]) if len(sys.argv) > 1 else 160
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 6
PAGE = 4096
rng = random.Random(3)


def marker(text):
    for path in ("/sys/kernel/tracing/trace_marker", "/sys/kernel/debug/tracing/trace_marker"):
        try:
            with open(path, "w") as f:
                f.write("nvmos-phase " + text)
            return
        except OSError:
            pass


def new_buffer():
    size = rng.choice([1, 2, 4, 8, 16]) << 20
    b = bytearray(size)
    b[0:size:PAGE] = bytes([rng.randrange(1, 255)]) * (size // PAGE)
    return b


def touch(b, write_fraction):
    n = len(b) // PAGE
    s = sum(b[0 : len(b) : PAGE])  # reads every page: swap-ins
    k = int(n * write_fraction)
    if k:
        start = rng.randrange(0, n - k + 1)
        b[start * PAGE : (start + k) * PAGE : PAGE] = bytes([s % 251 + 1]) * k
    return s


marker("clean")
bufs = []
total = 0
while total < FOOTPRINT_MB << 20:
    bufs.append(new_buffer())
    total += len(bufs[-1])

for r in range(ROUNDS):
    marker("aged-%d" % (r + 1))
    # Close and reopen a quarter of the "applications".
    for _ in range(len(bufs) // 4):
        i = rng.randrange(len(bufs))
        bufs[i] = None
        bufs[i] = new_buffer()
    # Switch to a few of them: read back, rewrite a part.
    for i in rng.sample(range(len(bufs)), len(bufs) // 3):
        touch(bufs[i], rng.choice([0.0, 0.1, 0.5]))
marker("end")
