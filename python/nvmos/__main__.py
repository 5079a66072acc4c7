"""``python -m nvmos sweep GRID.toml ...``: what the CLI's ``nvmos sweep``
runs (see ``nvmos._sweep`` for the grid format)."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Optional

from ._api import NvmosError
from ._sweep import SweepError, SweepInterrupted, _Stop, sweep


class _Signalled(KeyboardInterrupt):
    """SIGINT or SIGTERM outside the sweep's run of cells (which has its
    own handlers): while the grid loads, or the summary is written."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


_signalled: list = []


def _raise(signum, frame):
    # A repeat is the same request as the first: a Ctrl-C reaches both
    # this process and `nvmos sweep`, which passes it on.
    if _signalled or _Stop.stopped_by is not None:
        return
    _signalled.append(signum)
    raise _Signalled(signum)


def _ignore_repeats() -> None:
    """Ignore SIGINT and SIGTERM from here to the exit: a repeat arriving
    while the interpreter shuts down (when Python's own handlers are gone)
    would otherwise end it by the signal, after its message."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def main(argv: Optional[list] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "sweep":
        print("usage: python -m nvmos sweep GRID.toml [options]  (--help for the options)", file=sys.stderr)
        return 2
    argv = argv[1:]
    p = argparse.ArgumentParser(
        prog="nvmos sweep",
        description="Run a design-space sweep: every cell of GRID.toml one task, here or on Ray.",
    )
    p.add_argument("grid", help="the grid: a TOML file (see python -m pydoc nvmos.sweep)")
    p.add_argument("--out", help="output folder (default: the grid's `output`, else sweep-out)")
    p.add_argument(
        "--workers", type=int, help="local worker processes (default: every core); with --ray, cells in flight at most"
    )
    p.add_argument("--ray", metavar="auto|ADDRESS", help="run each cell as a Ray task on this cluster")
    p.add_argument("--no-resume", action="store_true", help="run every cell, even those already in the output")
    p.add_argument("--retries", type=int, default=2, help="extra attempts for a cell whose worker failed (default 2)")
    p.add_argument("--batch", type=int, default=1, help="with --ray: cells of one trace per task (default 1)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        p.error("--workers: at least 1")
    # SIGTERM's default would end the process without a word; both
    # signals end it with one line and the status that says which.
    signal.signal(signal.SIGINT, _raise)
    signal.signal(signal.SIGTERM, _raise)
    try:
        result = sweep(
            args.grid,
            output=args.out,
            backend="ray" if args.ray else "local",
            workers=args.workers,
            ray_address=args.ray,
            resume=not args.no_resume,
            retries=args.retries,
            progress=not args.quiet,
            batch=args.batch,
        )
    except SweepInterrupted as e:
        _ignore_repeats()
        print(f"nvmos sweep: {e}", file=sys.stderr)
        return 128 + e.signal
    except KeyboardInterrupt as e:
        _ignore_repeats()
        signum = e.signum if isinstance(e, _Signalled) else signal.SIGINT
        print(
            f"nvmos sweep: interrupted by {signal.Signals(signum).name} while no cell was running; "
            "the cells that finished are kept in the output folder, and the same command again resumes",
            file=sys.stderr,
        )
        return 128 + signum
    except SweepError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except NvmosError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"{result.run} cells run, {result.skipped} already in the output, in {result.seconds:.1f} s "
        f"({result.cells_per_minute:.1f} cells/min, {result.backend}, {result.workers} workers)\n"
        f"results: {result.parquet}\nsummary: {result.html}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
