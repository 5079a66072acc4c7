"""Type hints of the Rust extension module ``nvmos._nvmos`` (crates/py).

Options cross as JSON text of the engine's serde types and results come
back as JSON text (the documents the CLI writes); bulk arrays cross as
numpy arrays. The ``nvmos`` package wraps these into DataFrames; use it
rather than this module. The docstrings are the extension's own (the
``///`` comments in crates/py/src), copied here for editors.
"""

import os
import types
from typing import Callable, Iterator, Optional, Sequence

import numpy as np
import numpy.typing as npt

__version__: str

class NvmosError(Exception):
    """Base of every error nvmos raises.

    The message is the Rust error's, its causes joined by ': '. Catch
    this to catch any of TraceFileError, OptionsError, StudyError,
    SweepError and PmoError.
    """

class TraceFileError(NvmosError):
    """A trace could not be opened or read (missing file, unknown format,
    bad checksum, truncated or corrupt .nvt, unparsable text line, a pfn
    or CPU beyond the machine).

    Attributes:
        path (str | None): the trace file, when known.
        line (int | None): the 1-based line of a text (ftrace/perf) trace
            where the error is, when known.
        offset (int | None): the byte offset in a .nvt file where the
            error is, when known.
    """
    path: Optional[str]
    line: Optional[int]
    offset: Optional[int]

class OptionsError(NvmosError):
    """Impossible or unknown options: an unknown allocator, study, machine
    or enum value, a size or count out of range, options JSON the engine
    cannot parse. The message names the field.
    """
class StudyError(NvmosError):
    """The study itself failed: an allocator or model refused during a
    run (for example a misbehaving allocator in bench_alloc).
    """

ProgressCallback = Callable[[int, int, str], object]

def allocators() -> list[tuple[str, str]]:
    """The allocators the replay knows, in the CLI's order.

    Returns:
        list[tuple[str, str]]: ``(name, description)`` pairs; the names are
        what ``evaluate``, ``wear`` and the CLI's ``--alloc`` take.
    """
def as_recorded_name() -> str:
    """The row name of the kernel's own placement, as recorded in the trace.

    Returns:
        str: the name (``"Linux (as recorded)"``); ``evaluate`` and ``wear``
        take it (or ``"as-recorded"``) in place of an allocator name.
    """
def default_options(study: str, quick: bool = False) -> str:
    """A study's default options, as the engine defines them.

    Args:
        study (str): ``"evaluate"``, ``"banks"``, ``"swap"`` or ``"power"``.
        quick (bool): the study's quick scale (the CLI's ``--quick``)
            instead of its full scale; ``evaluate`` has one scale.

    Returns:
        str: the options as JSON (the study's serde ``Options`` type).

    Raises:
        OptionsError: an unknown study.
    """
def machine_presets() -> list[str]:
    """The memory-system presets (machines) of ``nvmos-memsys``.

    Returns:
        list[str]: preset names, as ``banks(machine=...)`` and the CLI's
        ``--machine`` take them.
    """
def parse_memory(text: str) -> int:
    """Parse a memory size as the CLI's ``--memory`` reads it.

    Args:
        text (str): a size with a binary unit (``"4GiB"``, ``"512MiB"``,
            ``"64KiB"``, ``"4096B"``; a whole number of 4 KiB frames) or a
            bare number (a count of 4 KiB frames).

    Returns:
        int: the size in 4 KiB frames.

    Raises:
        OptionsError: an unknown unit, a size that is not a whole number of
            frames, or text that is not a size.
    """
def trace_header(path: str | os.PathLike[str], scan: bool = False) -> str:
    """What a trace says about itself, and optionally a one-pass summary.

    Args:
        path (str | os.PathLike): the trace file (``.nvt``, ftrace text or
            perf script text; told apart by content).
        scan (bool): also read every event once for ``info``.

    Returns:
        str: JSON ``{"path", "format", "header", "info"}``: ``format`` is
        ``"nvt"``, ``"ftrace"`` or ``"perf"``; ``header`` the ``.nvt``
        header (recorded machine, counts; ``null`` for text traces);
        ``info`` (only with ``scan``) the ``TraceInfo`` summary: events,
        allocations and frees, counts by CPU, order and migratetype, pfn
        span, duration (ns) and the accounting of unusual events.

    Raises:
        TraceFileError: the file cannot be opened, its format is unknown, or
            (with ``scan``) an event cannot be read.
    """

class TraceBatches(Iterator[dict[str, np.ndarray]]):
    """A trace's events as an iterator of batches of numpy columns.

    ``TraceBatches(path, batch=1048576)`` opens the trace; each ``next()``
    reads up to ``batch`` events (at least 1) and returns a dict of numpy
    arrays, each built in Rust and handed to numpy without a copy:

    - ``time_ns`` (uint64): the event's timestamp (ns).
    - ``cpu`` (uint32): the CPU it happened on.
    - ``op`` (uint8): 0 allocation, 1 free, 2 sampled write.
    - ``migratetype`` (int8): 0 unmovable, 1 movable, 2 reclaimable; -1
      for frees and writes.
    - ``pfn`` (uint64): the first page frame of the block.
    - ``order`` (uint8): the block is 2**order frames.

    Raises:
        OptionsError: ``batch`` is 0.
        TraceFileError: the trace cannot be opened, or (from ``next()``) an
            event cannot be read.
    """
    def __init__(self, path: str | os.PathLike[str], batch: int = 1048576) -> None:
        """Open the trace; see the class docstring."""
    def __iter__(self) -> "TraceBatches":
        """The iterator itself."""
    def __next__(self) -> dict[str, np.ndarray]:
        """The next batch of columns; StopIteration at the end of the trace."""

def evaluate(
    traces: Sequence[tuple[str, Optional[npt.NDArray[np.uint8]]]],
    allocators: Sequence[str],
    options: str,
    progress: Optional[ProgressCallback] = None,
) -> str:
    """Replay traces through allocators: the engine of ``nvmos evaluate``
    and ``nvmos replay``.

    For each trace, one row per entry of ``allocators``, in that order.
    The GIL is released while it runs.

    Args:
        traces (list[tuple[str, numpy.ndarray | None]]): ``(path, None)``
            to read a trace file, or ``(name, data)`` with ``data`` a
            contiguous 1-d uint8 array holding a trace file's bytes (read
            without a copy; ``name`` names the rows and messages).
        allocators (list[str]): allocator names (``allocators()``) and/or
            the recorded placement (``as_recorded_name()`` or
            ``"as-recorded"``); at least one.
        options (str): ``StudyOptions`` as JSON: ``memory_frames`` (4 KiB
            frames managed as one zone, or null for the recorded
            machine's zones), ``cpus`` (CPUs served, or null for the
            recorded machine's), ``model`` (``{"writes_per_alloc": N}``:
            full-page writes each allocated frame receives),
            ``heat_buckets`` (columns of the heat map); optionally
            ``bank_frames`` (frames per bank for the bank-aware
            allocators) and ``migrate_every_ns`` (trace time between
            migration passes, ns).
        progress (Callable[[int, int, str], object] | None): called as
            ``progress(done, total, message)``, counting rows (trace x
            allocator); an exception it raises stops the run and is
            re-raised.

    Returns:
        str: the ``Evaluation`` as JSON, exactly what the CLI writes to
        ``results.json``.

    Raises:
        OptionsError: options that do not parse or cannot be (0 CPUs, 0
            frames, 0 writes per allocation), an unknown allocator, no
            allocator, bad trace bytes.
        TraceFileError: a trace cannot be opened or read, or does not fit
            the memory or CPUs given.
        StudyError: a replay failed.
    """
def wear(
    trace: str, allocator: str, options: str, bytes: Optional[npt.NDArray[np.uint8]] = None
) -> tuple[npt.NDArray[np.uint32], str]:
    """One trace through one allocator, keeping the per-frame write counts.

    Args:
        trace (str): the trace file, or the name of the trace in ``bytes``.
        allocator (str): an allocator name, or the recorded placement
            (``as_recorded_name()`` or ``"as-recorded"``).
        options (str): ``StudyOptions`` as JSON (see ``evaluate``).
        bytes (numpy.ndarray | None): a contiguous 1-d uint8 array holding
            the trace file's bytes, read instead of the file.

    Returns:
        tuple[numpy.ndarray, str]: ``writes``, a uint32 array of writes per
        frame (count) over every frame of the zones in dense zone order
        (moved from the replay's counter, not copied), and the row as JSON,
        as in ``results.json``.

    Raises:
        OptionsError: bad options or an unknown allocator.
        TraceFileError: the trace cannot be opened or read.
        StudyError: the replay failed.
    """
def banks(machine: str, options: str, analyse: bool = True, progress: Optional[ProgressCallback] = None) -> str:
    """The banks study (``nvmos study banks``): frame placement and
    row-buffer conflicts on a modelled memory system.

    Args:
        machine (str): a memsys preset name (``machine_presets()``) or the
            path of a machine TOML file; overrides ``options``' field.
        options (str): ``BanksOptions`` as JSON (``default_options("banks")``
            shows every field: ``cores``, ``placements``, ``accesses``,
            ``kernel``, ``array_bytes`` (bytes), ``passes``, ``mlp``
            (requests in flight per core), ``policy``, ``queue_depth``,
            ``seed``, ``basic_model``).
        analyse (bool): also run the analysing program (recover the
            machine's bank mapping from timing); overrides ``options``.
        progress (Callable[[int, int, str], object] | None): called as
            ``progress(done, total, message)``; an exception it raises stops
            the run and is re-raised.

    Returns:
        str: what the CLI writes to ``banks.json`` (``{"study",
        "headline", "analysis", "checks"}``) as JSON.

    Raises:
        OptionsError: bad options, an unknown preset, or a machine file
            that cannot be read.
        StudyError: the study failed.
    """
def swap(options: str, progress: Optional[ProgressCallback] = None) -> str:
    """The swap study (``nvmos study swap``): SCM as a paging device.

    Args:
        options (str): ``SwapStudyOptions`` as JSON
            (``default_options("swap")`` shows every field: ``traces``
            (folder of ``*.swt.zst`` and ``*.lackey.zst`` traces),
            ``pc_scale``, ``aging_rounds``, ``config`` (reclaim, congestion
            and read-ahead settings), ``seed``, ...).
        progress (Callable[[int, int, str], object] | None): as for
            ``banks``.

    Returns:
        str: the ``SwapStudy`` as JSON (what the CLI writes to
        ``swap.json``).

    Raises:
        OptionsError: bad options.
        TraceFileError: a swap or lackey trace cannot be read.
        StudyError: the model or a trace failed.
    """
def bench_alloc_options(quick: bool = False) -> str:
    """The options of ``nvmos bench alloc``.

    Args:
        quick (bool): ``--quick``'s scale instead of the full one.

    Returns:
        str: ``BenchAllocOptions`` as JSON (allocators, patterns, threads,
        frames, rounds, repeat, mixed_ops, seed, lock, free_order).
    """
def bench_alloc(options: str, progress: Optional[ProgressCallback] = None) -> str:
    """``nvmos bench alloc``: allocation and free latency of the allocators,
    timed on this machine's cores (the iBuddy talk's Table 2).

    Args:
        options (str): ``BenchAllocOptions`` as JSON (see
            ``bench_alloc_options``).
        progress (Callable[[int, int, str], object] | None): as for
            ``banks``.

    Returns:
        str: the ``BenchAlloc`` result as JSON (what ``--json`` prints):
        ``options``, ``cells`` (per allocator x pattern x threads, times in
        ns), ``skipped``, the comparison rows and ``checks``.

    Raises:
        OptionsError: a bad allocator, pattern or field.
        StudyError: an allocator misbehaved (refused frees, failed
            validation).
    """
def power_options(scale: str = "full") -> str:
    """The power study's options at a scale.

    Args:
        scale (str): ``"full"`` (the default options) or ``"quick"``
            (``--quick``).

    Returns:
        str: ``PowerOptions`` as JSON.

    Raises:
        OptionsError: another scale.
    """
def cli_main(argv: list[str]) -> int:
    """Run the ``nvmos`` command-line tool in this process (``argv[0]`` is
    the program's name); its exit status. The ``nvmos`` command
    (``nvmos._cli``) is this; not part of the API."""
    ...

def power(options: str, progress: Optional[ProgressCallback] = None) -> str:
    """The power study (``nvmos study power``): power-aware placement on
    banks that can be powered down.

    Args:
        options (str): ``PowerOptions`` as JSON (see ``power_options``).
        progress (Callable[[int, int, str], object] | None): as for
            ``banks``.

    Returns:
        str: the ``PowerStudy`` as JSON (what the CLI writes to
        ``power.json``).

    Raises:
        OptionsError: options the study refuses, an unknown workload or
            power model, a trace that cannot be opened.
        StudyError: the study failed.
    """

# Persistent memory objects (crates/py/src/pmo.rs).

class PmoError(NvmosError):
    """A persistent-memory-object operation failed: a wrong or missing key,
    a tampered, quarantined or rolled-back object or pool, a busy object,
    a full pool, a heap error, an operation on a detached or read-only
    attachment. The message names the pool or object and the cause.
    """

class MappingOwner:
    """The base object of every numpy array over one attachment's mapping.

    Not made by hand: ``PmoAttachment.buffer`` sets it as the array's
    base. Every view, slice or memoryview derived from the array keeps it
    alive, so its reference count tells whether anything still points
    into the mapping; ``detach`` refuses while anything does.
    """

class PmoPool:
    """A pool file holding persistent memory objects (PMOs), opened.

    Make one with ``Pool.create(path, size)`` or ``Pool.open(path)``; the
    pool stays open (and its lock held) until the object is garbage
    collected. This binding does not use a state store, so a rolled-back
    copy of the whole pool file is not detected (the CLI's ``nvmos pmo``
    always uses one). Bound to the thread that made it.
    """
    @staticmethod
    def create(path: str | os.PathLike[str], size: int) -> PmoPool:
        """Create a pool file and open it for writing.

        Args:
            path (str | os.PathLike): the new pool file (in ``/dev/shm`` or
                on a DAX file system it is treated as persistent memory;
                anywhere else it is made durable with ``msync``).
            size (int): the pool's size (bytes).

        Returns:
            Pool: the new pool, open for writing.

        Raises:
            PmoError: the path exists (never overwritten), the size is too
                small, or the file cannot be made.
        """
    @staticmethod
    def open(path: str | os.PathLike[str], write: bool = False) -> PmoPool:
        """Open an existing pool file.

        Args:
            path (str | os.PathLike): the pool file.
            write (bool): open for writing (create, destroy and write
                objects); otherwise read-only.

        Returns:
            Pool: the open pool. Damaged objects are quarantined (listed
            with ``damaged`` by ``objects()``), the rest of the pool opens.

        Raises:
            PmoError: not a pool, an unsupported format version, a pool
                busy with an open that excludes this one, or an I/O error.
        """
    @property
    def path(self) -> str:
        """The pool file's path (str)."""
    def pcreate(self, name: str, size: int, key: Optional[bytes] = None, fast_kdf: bool = False) -> None:
        """Create an object (the PD-LOaPP talk's ``pcreate``), all zeros.

        Args:
            name (str): the object's name (1 to 64 bytes of UTF-8, no
                control characters, no ``/``).
            size (int): its size (bytes; rounded up to whole 4 KiB pages).
            key (bytes | None): seal every page under this key (at least 8
                bytes; stretched with Argon2id), or store the object plain
                (per-page hashes against accidents, no secrecy) when None.
            fast_kdf (bool): cheap key stretching, for tests only.

        Raises:
            PmoError: the name exists or is invalid, the size is zero or
                too large, the key is too short, the pool is full or
                read-only.
        """
    def pdestroy(self, name: str, key: Optional[bytes] = None) -> None:
        """Destroy an object (the PD-LOaPP talk's ``pdestroy``) and free its
        frames.

        Args:
            name (str): the object's name.
            key (bytes | None): its key (None for a plain object).

        Raises:
            PmoError: no such object, a wrong or missing key, the object is
                attached, or the pool is read-only.
        """
    def objects(self) -> list[dict[str, object]]:
        """Every object of the pool, in directory order.

        Returns:
            list[dict]: one dict per object with the keys ``name`` (str),
            ``size`` (bytes), ``encrypted`` (bool: pages sealed with
            AES-256-GCM), ``base_address`` (the fixed virtual address it is
            attached at), ``epoch`` (commits to its directory slot, count),
            ``pages_written`` (pages ever written; the rest read as zeros),
            ``slot`` (directory slot) and, for a quarantined object only,
            ``damaged`` (why, str).
        """
    def psync_many(self, attachments: list[PmoAttachment]) -> list[dict[str, int]]:
        """psync several attachments of this pool all or nothing.

        Every object's changes since its last psync become durable
        together, or none do: a crash at any point leaves all of them as
        before or all as after. The GIL is released while it runs.

        Args:
            attachments (list[PmoAttachment]): writable attachments made
                from this pool object, each at most once, at most 48.

        Returns:
            list[dict[str, int]]: one ``{"pages": N, "ns": T}`` per
            attachment, in order: pages committed (count) and the wall time
            of the whole group commit (ns).

        Raises:
            PmoError: an attachment detached, given twice, read-only, of
                another pool, or too many; a page that failed its check; an
                I/O error. Nothing is committed then.
        """
    def attach(
        self,
        name: str,
        key: Optional[bytes] = None,
        write: bool = False,
        mode: str = "dram-cache",
        wait: bool = False,
    ) -> PmoAttachment:
        """Attach an object (the PD-LOaPP talk's ``attach``): map it at its
        fixed address, its pages verified (and decrypted) as they are
        touched.

        Args:
            name (str): the object's name.
            key (bytes | None): its key (None for a plain object).
            write (bool): a writable attachment (one writer per object at a
                time); otherwise read-only, seeing the committed version.
            mode (str): how faults are served: ``"plain"`` (object stored
                unencrypted), ``"decrypt-at-fault"`` (decrypt each page at
                its fault), ``"dram-cache"`` (decrypt once into a
                process-wide DRAM cache, serve faults from it), or
                ``"stream-N"``, ``"stride-N"``, ``"markov-N"``, ``"adaptive-N"`` (the DRAM
                cache with a predictor installing up to N pages ahead).
            wait (bool): if another open of the pool has the object
                attached for writing, wait for it instead of raising.

        Returns:
            PmoAttachment: the attachment; use it as a context manager to
            detach (and psync) at the end of a ``with`` block.

        Raises:
            ValueError: an unknown mode.
            PmoError: no such object, a wrong or missing key, a quarantined
                or rolled-back object, the object busy (another writer), the
                object already attached in this process, its address range
                taken, or userfaultfd unavailable.
        """

class PmoAttachment:
    """An attached object: its bytes (``buffer``), ``psync``, ``detach``,
    and the heap inside it (``palloc``, ``pfree``, ``prealloc``, ``root``,
    ``blocks``, ``heap_stats``).

    Made by ``Pool.attach``. ``len(a)`` is the object's size in bytes. A
    context manager: leaving a ``with`` block without an exception detaches
    (psync first); leaving it with an exception drops the attachment
    without psync, as a crash would. Garbage-collected without ``detach``,
    it is unmapped without psync (or, while an array still points into it,
    left mapped). Offsets are bytes from the start of the object. Bound to
    the thread that made it.
    """
    @property
    def buffer(self) -> npt.NDArray[np.uint8]:
        """The object's bytes: a 1-d numpy uint8 array over the mapping, no
        copy, writable for a writable attachment. Use ``.view(dtype)`` for
        other element types and ``memoryview(a.buffer)`` for a memoryview.
        Valid until ``detach``, which refuses while any array over it (or a
        view of one) is alive. Raises PmoError once detached.
        """
    def __len__(self) -> int:
        """The object's size (bytes)."""
    def psync(self) -> dict[str, int]:
        """Make every change since the last psync durable, all or nothing.

        Seals each page written since the last psync and commits them with
        one directory-record flip; the GIL is released while it runs.

        Returns:
            dict[str, int]: ``{"pages": N, "ns": T}``: pages committed
            (count) and the psync's wall time (ns).

        Raises:
            PmoError: detached, read-only, a page that failed its check
                since the last psync, the pool full or truncated, or an I/O
                error; nothing is committed then and the pages stay dirty.
        """
    def detach(self) -> None:
        """psync (a writable attachment), then unmap the object.

        Raises:
            PmoError: already detached; a numpy array, view or memoryview
                of ``buffer`` is still alive (delete them first; the
                attachment is kept); or the final psync failed.
        """
    def __enter__(self) -> PmoAttachment:
        """Enter a ``with`` block: returns the attachment itself."""
    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc_value: Optional[BaseException],
        traceback: Optional[types.TracebackType],
    ) -> bool:
        """Leave a ``with`` block.

        Without an exception, detach (psync first); with one, drop the
        attachment without psync, as a crash would leave it (or, while an
        array still points into the mapping, keep it mapped).

        Args:
            exc_type (type | None): the exception's type, None if none.
            exc_value (BaseException | None): the exception.
            traceback (types.TracebackType | None): its traceback.

        Returns:
            bool: False: an exception is never swallowed.

        Raises:
            PmoError: as ``detach``.
        """
    def palloc(self, size: int, type_num: int = 0) -> int:
        """Allocate a block from the heap inside the object.

        Formats a heap first in a fresh (all-zero) object. The allocation
        is durable when the next psync commits.

        Args:
            size (int): payload size (bytes).
            type_num (int): a type number to find the block by (``blocks``).

        Returns:
            int: the block's offset in the object (bytes).

        Raises:
            PmoError: detached or read-only, no room, or the object holds
                something other than a heap (or a damaged one).
        """
    def pfree(self, offset: int) -> None:
        """Free a heap block.

        Args:
            offset (int): the block's offset (bytes), as ``palloc`` returned.

        Raises:
            PmoError: detached or read-only, no heap, an offset ``palloc``
                did not return, or a block already free.
        """
    def prealloc(self, offset: int, size: int) -> int:
        """Resize a heap block, moving it if it cannot grow in place.

        Args:
            offset (int): the block's offset (bytes).
            size (int): the new payload size (bytes).

        Returns:
            int: the block's offset afterwards (bytes; maybe new, its
            contents kept up to the smaller size).

        Raises:
            PmoError: as ``pfree``, or no room.
        """
    def root(self, size: int) -> int:
        """The heap's root block, created zeroed on first use.

        Args:
            size (int): at least this many bytes (bytes).

        Returns:
            int: the root block's offset (bytes).

        Raises:
            PmoError: detached or read-only, no room, or no heap.
        """
    def blocks(self, type_num: Optional[int] = None) -> list[tuple[int, int, int]]:
        """The allocated heap blocks, in address order.

        Args:
            type_num (int | None): only blocks of this type number.

        Returns:
            list[tuple[int, int, int]]: ``(offset, size, type_num)`` per
            block: offset and payload size in bytes.

        Raises:
            PmoError: detached, no heap, or damaged heap metadata.
        """
    def heap_stats(self) -> dict[str, float]:
        """The heap's space, after checking every invariant of the heap.

        Returns:
            dict: ``region_bytes`` (bytes the heap manages, header
            included), ``allocated_blocks`` (count, root included),
            ``allocated_bytes`` (payload bytes), ``free_blocks`` (count),
            ``free_bytes`` (payload bytes free blocks could hold),
            ``largest_free`` (bytes), ``metadata_bytes`` (heap and block
            headers, bytes), ``fragmentation`` (1 - largest free / all free,
            fraction 0-1).

        Raises:
            PmoError: detached, no heap, or a broken invariant.
        """
