"""The ``nvmos`` command that ``pip install`` puts on PATH: the Rust
command-line tool, built into the package's extension module, run in
this process. It behaves as the ``nvmos`` binary that ``cargo build``
makes: same subcommands, output and exit status."""

from __future__ import annotations

import os
import signal
import sys

from . import _nvmos


def main() -> None:
    # Python turns SIGINT into KeyboardInterrupt, which cannot interrupt
    # the Rust code while it runs: let Ctrl-C end the process as it ends
    # the binary (a sweep installs its own handlers for a clean stop).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # `nvmos sweep` runs its cells in Python: this interpreter, which has
    # this package, unless the user named another.
    os.environ.setdefault("NVMOS_PYTHON", sys.executable)
    argv = ["nvmos", *sys.argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(_nvmos.cli_main(argv))


if __name__ == "__main__":
    main()
