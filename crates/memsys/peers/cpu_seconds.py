#!/usr/bin/env python3
"""CPU seconds (user + sys) a command used, from getrusage of the child
(microseconds; time(1) prints 10 ms steps, near a whole nvmos run here).

    cpu_seconds.py ERRFILE COMMAND [ARG...]

Runs COMMAND with its output discarded and its error output in ERRFILE;
prints the seconds, or exits with COMMAND's status (printing nothing) when
it fails, so a failed run never reads as a time. Used by the peers'
speed scripts.
"""
import resource
import subprocess
import sys


def children():
    # What started this Python (a pyenv shim) may have run children of
    # its own: count only what the command adds.
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


if len(sys.argv) < 3:
    sys.exit("usage: cpu_seconds.py ERRFILE COMMAND [ARG...]")
before = children()
with open(sys.argv[1], "w") as err:
    rc = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=err).returncode
if rc != 0:
    sys.exit(rc)
print(f"{children() - before:.6f}")
