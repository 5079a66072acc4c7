//! Persistent memory objects from Python: pools, pcreate/attach/psync/
//! detach/pdestroy, the object as a numpy `uint8` array over its mapping
//! (no copy; writable for a writable attachment; `memoryview(a.buffer)`
//! gives a memoryview), and the heap inside each object.
//!
//! Memory safety across the boundary: the array points into the mapping,
//! and Python may keep it, or any view, slice or memoryview derived from
//! it, after `detach`. Every such object keeps the array's base alive, and
//! the base is one `MappingOwner` per attachment, so its reference count
//! tells exactly whether anything still points into the mapping: `detach`
//! refuses (raising, attachment kept) while it does, and an attachment
//! garbage-collected while it does is leaked (left mapped, never
//! psynced), never unmapped under a live array.

use std::path::PathBuf;

use numpy::PyArray1;
use nvmos_pmo::heap::Heap;
use nvmos_pmo::{Access, Attachment, KdfParams, Mode, Perm, Pool, PoolOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{to_py, NvmosError};

pyo3::create_exception!(
    _nvmos,
    PmoError,
    NvmosError,
    "A persistent-memory-object operation failed: a wrong or missing key,\na tampered, quarantined or rolled-back object or pool, a busy object,\na full pool, a heap error, an operation on a detached or read-only\nattachment. The message names the pool or object and the cause."
);

/// A serde value as the Python object `json.loads` makes of it: the
/// fields stay those of the Rust type, never a hand-kept copy.
fn to_py_value<'py, T: serde::Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let text = crate::to_json(value)?;
    py.import("json")?.call_method1("loads", (text,))
}

fn pmo_err(context: &str, e: &(dyn std::error::Error + 'static)) -> PyErr {
    to_py(context, e, PmoError::new_err)
}

/// A pool file holding persistent memory objects (PMOs), opened.
///
/// Make one with ``Pool.create(path, size)`` or ``Pool.open(path)``; the
/// pool stays open (and its lock held) until the object is garbage
/// collected. This binding does not use a state store, so a rolled-back
/// copy of the whole pool file is not detected (the CLI's ``nvmos pmo``
/// always uses one). Bound to the thread that made it.
#[pyclass(module = "nvmos._nvmos", unsendable)]
pub struct PmoPool {
    pool: Pool,
    path: PathBuf,
}

#[pymethods]
impl PmoPool {
    /// Create a pool file and open it for writing.
    ///
    /// Args:
    ///     path (str | os.PathLike): the new pool file (in ``/dev/shm`` or
    ///         on a DAX file system it is treated as persistent memory;
    ///         anywhere else it is made durable with ``msync``).
    ///     size (int): the pool's size (bytes).
    ///     state_dir (str | os.PathLike | None): the state store folder
    ///         (as the CLI's ``--state-dir``; its default is
    ///         ``$XDG_STATE_HOME/nvmos`` or ``~/.local/state/nvmos``): the
    ///         pool is protected against rollback through it, and every
    ///         later open must find it. None: no store, the pool file is
    ///         all there is (a rollback of it is undetectable).
    ///
    /// Returns:
    ///     Pool: the new pool, open for writing.
    ///
    /// Raises:
    ///     PmoError: the path exists (never overwritten), the size is too
    ///         small, or the file cannot be made.
    #[staticmethod]
    #[pyo3(signature = (path, size, state_dir = None))]
    fn create(path: PathBuf, size: u64, state_dir: Option<PathBuf>) -> PyResult<Self> {
        let opts = PoolOptions {
            state_dir,
            ..PoolOptions::default()
        };
        let pool = Pool::create_with(&path, size, opts).map_err(|e| pmo_err("", &e))?;
        Ok(PmoPool { pool, path })
    }

    /// Open an existing pool file.
    ///
    /// Args:
    ///     path (str | os.PathLike): the pool file.
    ///     write (bool): open for writing (create, destroy and write
    ///         objects); otherwise read-only.
    ///     state_dir (str | os.PathLike | None): the state store folder the
    ///         pool was protected through (the CLI's default store is
    ///         ``$XDG_STATE_HOME/nvmos`` or ``~/.local/state/nvmos``).
    ///         A protected pool opened without its store is refused, read-
    ///         only opens included: an older copy of it could not be told
    ///         from the latest.
    ///     allow_missing_state (bool): open a protected pool without its
    ///         store anyway, unprotected against rollback; the pool's
    ///         ``state_missing`` then says why.
    ///
    /// Returns:
    ///     Pool: the open pool. Damaged objects are quarantined (listed
    ///     with ``damaged`` by ``objects()``), the rest of the pool opens.
    ///
    /// Raises:
    ///     PmoError: not a pool, an unsupported format version, a pool
    ///         busy with an open that excludes this one, a protected pool
    ///         without its state store, a rolled-back pool, or an I/O
    ///         error.
    #[staticmethod]
    #[pyo3(signature = (path, write = false, state_dir = None, allow_missing_state = false))]
    fn open(
        path: PathBuf,
        write: bool,
        state_dir: Option<PathBuf>,
        allow_missing_state: bool,
    ) -> PyResult<Self> {
        let access = if write {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        let opts = PoolOptions {
            state_dir,
            allow_missing_state,
            ..PoolOptions::default()
        };
        let pool = Pool::open_with(&path, access, opts).map_err(|e| pmo_err("", &e))?;
        Ok(PmoPool { pool, path })
    }

    /// Why this open is unprotected against rollback (a protected pool
    /// opened with ``allow_missing_state``), or None.
    #[getter]
    fn state_missing(&self) -> Option<String> {
        self.pool.state_missing()
    }

    /// Wait until every psync of this open is recorded durably in the
    /// state store. psync hands its record to a background writer and
    /// returns; until the record is written, a rollback of the pool to
    /// just before that psync would not be told apart after a crash.
    /// Closing the pool also waits.
    ///
    /// Raises:
    ///     PmoError: a record could not be written (the open then records
    ///         nothing more, and its later psyncs fail).
    fn sync_state(&self) -> PyResult<()> {
        self.pool.sync_state().map_err(|e| pmo_err("", &e))
    }

    /// The pool file's path (str).
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Create an object (the PD-LOaPP talk's ``pcreate``), all zeros.
    ///
    /// Args:
    ///     name (str): the object's name (1 to 64 bytes of UTF-8, no
    ///         control characters, no ``/``).
    ///     size (int): its size (bytes; rounded up to whole 4 KiB pages).
    ///     key (bytes | None): seal every page under this key (at least 8
    ///         bytes; stretched with Argon2id), or store the object plain
    ///         (per-page hashes against accidents, no secrecy) when None.
    ///     fast_kdf (bool): cheap key stretching, for tests only.
    ///
    /// Raises:
    ///     PmoError: the name exists or is invalid, the size is zero or
    ///         too large, the key is too short, the pool is full or
    ///         read-only.
    #[pyo3(signature = (name, size, key = None, fast_kdf = false))]
    fn pcreate(&self, name: &str, size: u64, key: Option<Vec<u8>>, fast_kdf: bool) -> PyResult<()> {
        let kdf = if fast_kdf {
            KdfParams::INSECURE_FAST
        } else {
            KdfParams::default()
        };
        self.pool
            .pcreate_with(name, size, key.as_deref(), kdf)
            .map_err(|e| pmo_err("", &e))?;
        Ok(())
    }

    /// Destroy an object (the PD-LOaPP talk's ``pdestroy``) and free its
    /// frames.
    ///
    /// Args:
    ///     name (str): the object's name.
    ///     key (bytes | None): its key (None for a plain object).
    ///
    /// Raises:
    ///     PmoError: no such object, a wrong or missing key, the object is
    ///         attached, or the pool is read-only.
    #[pyo3(signature = (name, key = None))]
    fn pdestroy(&self, name: &str, key: Option<Vec<u8>>) -> PyResult<()> {
        self.pool
            .pdestroy(name, key.as_deref())
            .map_err(|e| pmo_err("", &e))
    }

    /// Every object of the pool, in directory order.
    ///
    /// Returns:
    ///     list[dict]: one dict per object with the keys ``name`` (str),
    ///     ``size`` (bytes), ``encrypted`` (bool: pages sealed with
    ///     AES-256-GCM), ``base_address`` (the fixed virtual address it is
    ///     attached at), ``epoch`` (commits to its directory slot, count),
    ///     ``pages_written`` (pages ever written; the rest read as zeros),
    ///     ``slot`` (directory slot) and, for a quarantined object only,
    ///     ``damaged`` (why, str).
    fn objects<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_value(py, &self.pool.list())
    }

    /// psync several attachments of this pool all or nothing.
    ///
    /// Every object's changes since its last psync become durable
    /// together, or none do: a crash at any point leaves all of them as
    /// before or all as after. The GIL is released while it runs.
    ///
    /// Args:
    ///     attachments (list[PmoAttachment]): writable attachments made
    ///         from this pool object, each at most once, at most 48.
    ///
    /// Returns:
    ///     list[dict[str, int]]: one ``{"pages": N, "ns": T}`` per
    ///     attachment, in order: pages committed (count) and the wall time
    ///     of the whole group commit (ns).
    ///
    /// Raises:
    ///     PmoError: an attachment detached, given twice, read-only, of
    ///         another pool, or too many; a page that failed its check; an
    ///         I/O error. Nothing is committed then.
    fn psync_many<'py>(
        &self,
        py: Python<'py>,
        attachments: Vec<PyRef<'py, PmoAttachment>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let live = attachments
            .iter()
            .map(|a| a.live())
            .collect::<PyResult<Vec<&Attachment>>>()?;
        let pool = &self.pool;
        let stats = py
            .detach(|| pool.psync_many(&live))
            .map_err(|e| pmo_err("", &e))?;
        to_py_value(py, &stats)
    }

    /// Attach an object (the PD-LOaPP talk's ``attach``): map it at its
    /// fixed address, its pages verified (and decrypted) as they are
    /// touched.
    ///
    /// Args:
    ///     name (str): the object's name.
    ///     key (bytes | None): its key (None for a plain object).
    ///     write (bool): a writable attachment (one writer per object at a
    ///         time); otherwise read-only, seeing the committed version.
    ///     mode (str): how faults are served: ``"plain"`` (object stored
    ///         unencrypted), ``"decrypt-at-fault"`` (decrypt each page at
    ///         its fault), ``"dram-cache"`` (decrypt once into a
    ///         process-wide DRAM cache, serve faults from it), or
    ///         ``"stream-N"``, ``"stride-N"``, ``"markov-N"``, ``"adaptive-N"`` (the DRAM
    ///         cache with a predictor installing up to N pages ahead).
    ///     wait (bool): if another open of the pool has the object
    ///         attached for writing, wait for it instead of raising.
    ///
    /// Returns:
    ///     PmoAttachment: the attachment; use it as a context manager to
    ///     detach (and psync) at the end of a ``with`` block.
    ///
    /// Raises:
    ///     ValueError: an unknown mode.
    ///     PmoError: no such object, a wrong or missing key, a quarantined
    ///         or rolled-back object, the object busy (another writer), the
    ///         object already attached in this process, its address range
    ///         taken, or userfaultfd unavailable.
    #[pyo3(signature = (name, key = None, write = false, mode = "dram-cache", wait = false))]
    fn attach(
        &self,
        py: Python<'_>,
        name: &str,
        key: Option<Vec<u8>>,
        write: bool,
        mode: &str,
        wait: bool,
    ) -> PyResult<PmoAttachment> {
        let mode: Mode = mode.parse().map_err(PyValueError::new_err)?;
        let perm = if write { Perm::Write } else { Perm::Read };
        let pool = &self.pool;
        let opts = nvmos_pmo::AttachOptions { wait };
        let attachment = py
            .detach(|| pool.attach_with(name, perm, key.as_deref(), mode, opts))
            .map_err(|e| pmo_err("", &e))?;
        Ok(PmoAttachment {
            inner: Some(attachment),
            owner: None,
            name: name.to_string(),
        })
    }
}

/// The base object of every numpy array over one attachment's mapping.
///
/// Not made by hand: ``PmoAttachment.buffer`` sets it as the array's
/// base. Every view, slice or memoryview derived from the array keeps it
/// alive, so its reference count tells whether anything still points
/// into the mapping; ``detach`` refuses while anything does.
#[pyclass(module = "nvmos._nvmos")]
pub struct MappingOwner {}

/// An attached object: its bytes (``buffer``), ``psync``, ``detach``,
/// and the heap inside it (``palloc``, ``pfree``, ``prealloc``, ``root``,
/// ``blocks``, ``heap_stats``).
///
/// Made by ``Pool.attach``. ``len(a)`` is the object's size in bytes. A
/// context manager: leaving a ``with`` block without an exception detaches
/// (psync first); leaving it with an exception drops the attachment
/// without psync, as a crash would. Garbage-collected without ``detach``,
/// it is unmapped without psync (or, while an array still points into it,
/// left mapped). Offsets are bytes from the start of the object. Bound to
/// the thread that made it.
#[pyclass(module = "nvmos._nvmos", unsendable)]
pub struct PmoAttachment {
    inner: Option<Attachment>,
    owner: Option<Py<MappingOwner>>,
    name: String,
}

impl PmoAttachment {
    fn live(&self) -> PyResult<&Attachment> {
        self.inner
            .as_ref()
            .ok_or_else(|| PmoError::new_err(format!("object {:?} is detached", self.name)))
    }

    fn live_mut(&mut self) -> PyResult<&mut Attachment> {
        let name = self.name.clone();
        self.inner
            .as_mut()
            .ok_or_else(|| PmoError::new_err(format!("object {name:?} is detached")))
    }

    fn writable(&mut self) -> PyResult<&mut [u8]> {
        let name = self.name.clone();
        self.live_mut()?
            .as_mut_slice()
            .ok_or_else(|| PmoError::new_err(format!("object {name:?} is attached read-only")))
    }

    /// Arrays (and views of them) still pointing into the mapping.
    fn exported(&self, _py: Python<'_>) -> isize {
        // One reference is ours. SAFETY: reading the count of an object we
        // hold a reference to, with the GIL held (the `Python` token).
        self.owner
            .as_ref()
            .map_or(0, |o| unsafe { pyo3::ffi::Py_REFCNT(o.as_ptr()) } - 1)
    }

    /// Ok when nothing points into the mapping any more.
    fn check_unexported(&self, py: Python<'_>) -> PyResult<()> {
        match self.exported(py) {
            0 => Ok(()),
            n => Err(PmoError::new_err(format!(
                "object {:?}: {n} numpy array(s) or view(s) still point into its mapping; delete them before detaching",
                self.name
            ))),
        }
    }

    fn heap_error(&self, e: nvmos_pmo::heap::HeapError) -> PyErr {
        pmo_err(&format!("object {:?}: heap", self.name), &e)
    }
}

#[pymethods]
impl PmoAttachment {
    /// The object's bytes: a 1-d numpy uint8 array over the mapping, no
    /// copy, writable for a writable attachment. Use ``.view(dtype)`` for
    /// other element types and ``memoryview(a.buffer)`` for a memoryview.
    /// Valid until ``detach``, which refuses while any array over it (or a
    /// view of one) is alive. Raises PmoError once detached.
    #[getter]
    fn buffer<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let (ptr, len, writable) = {
            let a = self.live()?;
            (a.as_ptr(), a.len(), a.perm() == Perm::Write)
        };
        let owner = match &self.owner {
            Some(o) => o.clone_ref(py),
            None => {
                let o = Py::new(py, MappingOwner {})?;
                self.owner = Some(o.clone_ref(py));
                o
            }
        };
        // SAFETY: the mapping is `len` bytes at `ptr` and stays mapped
        // while `owner` (the array's base) is referenced: detach refuses
        // and drop leaks while it is.
        let array = unsafe {
            let view = numpy::ndarray::ArrayView1::from_shape_ptr(len, ptr as *const u8);
            PyArray1::<u8>::borrow_from_array(&view, owner.into_bound(py).into_any())
        };
        if !writable {
            let kw = PyDict::new(py);
            kw.set_item("write", false)?;
            array.call_method("setflags", (), Some(&kw))?;
        }
        Ok(array)
    }

    /// The object's size (bytes).
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.live()?.len())
    }

    /// Make every change since the last psync durable, all or nothing.
    ///
    /// Seals each page written since the last psync and commits them with
    /// one directory-record flip; the GIL is released while it runs.
    ///
    /// Returns:
    ///     dict[str, int]: ``{"pages": N, "ns": T}``: pages committed
    ///     (count) and the psync's wall time (ns).
    ///
    /// Raises:
    ///     PmoError: detached, read-only, a page that failed its check
    ///         since the last psync, the pool full or truncated, or an I/O
    ///         error; nothing is committed then and the pages stay dirty.
    fn psync<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let a = self.live()?;
        let stats = py.detach(|| a.psync()).map_err(|e| pmo_err("", &e))?;
        to_py_value(py, &stats)
    }

    /// psync (a writable attachment), then unmap the object.
    ///
    /// Raises:
    ///     PmoError: already detached; a numpy array, view or memoryview
    ///         of ``buffer`` is still alive (delete them first; the
    ///         attachment is kept); or the final psync failed.
    fn detach(&mut self, py: Python<'_>) -> PyResult<()> {
        self.live()?;
        self.check_unexported(py)?;
        let a = self.inner.take().expect("checked live");
        self.owner = None;
        py.detach(|| a.detach()).map_err(|e| pmo_err("", &e))?;
        Ok(())
    }

    /// Enter a ``with`` block: returns the attachment itself.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Leave a ``with`` block.
    ///
    /// Without an exception, detach (psync first); with one, drop the
    /// attachment without psync, as a crash would leave it (or, while an
    /// array still points into the mapping, keep it mapped).
    ///
    /// Args:
    ///     exc_type (type | None): the exception's type, None if none.
    ///     exc_value (BaseException | None): the exception.
    ///     traceback (types.TracebackType | None): its traceback.
    ///
    /// Returns:
    ///     bool: False: an exception is never swallowed.
    ///
    /// Raises:
    ///     PmoError: as ``detach``.
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyAny>>,
        exc_value: Option<Bound<'_, PyAny>>,
        traceback: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        // Only whether there is an exception matters.
        let _ = (exc_value, traceback);
        if self.inner.is_none() {
            return Ok(false);
        }
        if exc_type.is_none() {
            self.detach(py)?;
        } else if self.check_unexported(py).is_ok() {
            self.inner = None;
        }
        Ok(false)
    }

    /// Allocate a block from the heap inside the object.
    ///
    /// Formats a heap first in a fresh (all-zero) object. The allocation
    /// is durable when the next psync commits.
    ///
    /// Args:
    ///     size (int): payload size (bytes).
    ///     type_num (int): a type number to find the block by (``blocks``).
    ///
    /// Returns:
    ///     int: the block's offset in the object (bytes).
    ///
    /// Raises:
    ///     PmoError: detached or read-only, no room, or the object holds
    ///         something other than a heap (or a damaged one).
    #[pyo3(signature = (size, type_num = 0))]
    fn palloc(&mut self, size: u64, type_num: u32) -> PyResult<u64> {
        let mem = self.writable()?;
        let result = Heap::open_or_format(mem).and_then(|mut h| h.palloc(size, type_num));
        result.map_err(|e| self.heap_error(e))
    }

    /// Free a heap block.
    ///
    /// Args:
    ///     offset (int): the block's offset (bytes), as ``palloc`` returned.
    ///
    /// Raises:
    ///     PmoError: detached or read-only, no heap, an offset ``palloc``
    ///         did not return, or a block already free.
    fn pfree(&mut self, offset: u64) -> PyResult<()> {
        let mem = self.writable()?;
        let result = Heap::open(mem).and_then(|mut h| h.pfree(offset));
        result.map_err(|e| self.heap_error(e))
    }

    /// Resize a heap block, moving it if it cannot grow in place.
    ///
    /// Args:
    ///     offset (int): the block's offset (bytes).
    ///     size (int): the new payload size (bytes).
    ///
    /// Returns:
    ///     int: the block's offset afterwards (bytes; maybe new, its
    ///     contents kept up to the smaller size).
    ///
    /// Raises:
    ///     PmoError: as ``pfree``, or no room.
    fn prealloc(&mut self, offset: u64, size: u64) -> PyResult<u64> {
        let mem = self.writable()?;
        let result = Heap::open(mem).and_then(|mut h| h.prealloc(offset, size));
        result.map_err(|e| self.heap_error(e))
    }

    /// The heap's root block, created zeroed on first use.
    ///
    /// Args:
    ///     size (int): at least this many bytes (bytes).
    ///
    /// Returns:
    ///     int: the root block's offset (bytes).
    ///
    /// Raises:
    ///     PmoError: detached or read-only, no room, or no heap.
    fn root(&mut self, size: u64) -> PyResult<u64> {
        let mem = self.writable()?;
        let result = Heap::open_or_format(mem).and_then(|mut h| h.root(size));
        result.map_err(|e| self.heap_error(e))
    }

    /// The allocated heap blocks, in address order.
    ///
    /// Args:
    ///     type_num (int | None): only blocks of this type number.
    ///
    /// Returns:
    ///     list[tuple[int, int, int]]: ``(offset, size, type_num)`` per
    ///     block: offset and payload size in bytes.
    ///
    /// Raises:
    ///     PmoError: detached, no heap, or damaged heap metadata.
    #[pyo3(signature = (type_num = None))]
    fn blocks(&self, type_num: Option<u32>) -> PyResult<Vec<(u64, u64, u32)>> {
        let heap = Heap::open(self.live()?.as_slice()).map_err(|e| self.heap_error(e))?;
        let mut out = Vec::new();
        for b in heap.blocks() {
            let b = b.map_err(|e| self.heap_error(e))?;
            if type_num.is_none_or(|t| t == b.type_num) {
                out.push((b.offset, b.size, b.type_num));
            }
        }
        Ok(out)
    }

    /// The heap's space, after checking every invariant of the heap.
    ///
    /// Returns:
    ///     dict: ``region_bytes`` (bytes the heap manages, header
    ///     included), ``allocated_blocks`` (count, root included),
    ///     ``allocated_bytes`` (payload bytes), ``free_blocks`` (count),
    ///     ``free_bytes`` (payload bytes free blocks could hold),
    ///     ``largest_free`` (bytes), ``metadata_bytes`` (heap and block
    ///     headers, bytes), ``fragmentation`` (1 - largest free / all free,
    ///     fraction 0-1).
    ///
    /// Raises:
    ///     PmoError: detached, no heap, or a broken invariant.
    fn heap_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let heap = Heap::open(self.live()?.as_slice()).map_err(|e| self.heap_error(e))?;
        let s = heap.check().map_err(|e| self.heap_error(e))?;
        to_py_value(py, &s)
    }
}

impl Drop for PmoAttachment {
    /// Dropped without detach: unmapped without psync (as a crash), unless
    /// a view of it is still exported — then leaked, never unmapped under
    /// a live view.
    fn drop(&mut self) {
        if self.inner.is_none() {
            return;
        }
        let exported = Python::attach(|py| self.exported(py));
        if exported != 0 {
            if let Some(a) = self.inner.take() {
                std::mem::forget(a);
            }
        }
    }
}

/// Register the PMO classes.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PmoPool>()?;
    m.add_class::<PmoAttachment>()?;
    m.add_class::<MappingOwner>()?;
    m.add("PmoError", m.py().get_type::<PmoError>())?;
    Ok(())
}
