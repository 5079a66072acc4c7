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
use nvmos_pmo::{Access, Attachment, KdfParams, Mode, Perm, Pool};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{to_py, NvmosError};

pyo3::create_exception!(
    _nvmos,
    PmoError,
    NvmosError,
    "A persistent-memory-object operation failed: wrong key, tampered or rolled-back pool, heap error, ...; the message names the object and the cause."
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

/// A pool file holding persistent memory objects.
#[pyclass(module = "nvmos._nvmos", unsendable)]
pub struct PmoPool {
    pool: Pool,
    path: PathBuf,
}

#[pymethods]
impl PmoPool {
    /// Create a pool file of `size` bytes (never overwrites a file).
    #[staticmethod]
    fn create(path: PathBuf, size: u64) -> PyResult<Self> {
        let pool = Pool::create(&path, size).map_err(|e| pmo_err("", &e))?;
        Ok(PmoPool { pool, path })
    }

    /// Open a pool: `write=True` takes the exclusive lock.
    #[staticmethod]
    #[pyo3(signature = (path, write = false))]
    fn open(path: PathBuf, write: bool) -> PyResult<Self> {
        let access = if write {
            Access::ReadWrite
        } else {
            Access::ReadOnly
        };
        let pool = Pool::open(&path, access).map_err(|e| pmo_err("", &e))?;
        Ok(PmoPool { pool, path })
    }

    /// The pool file.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Create an object of `size` bytes, sealed under `key` (bytes, at
    /// least 8) or plain when `key` is None. `fast_kdf` uses cheap key
    /// stretching, for tests only.
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

    /// Destroy an object and free its frames.
    #[pyo3(signature = (name, key = None))]
    fn pdestroy(&self, name: &str, key: Option<Vec<u8>>) -> PyResult<()> {
        self.pool
            .pdestroy(name, key.as_deref())
            .map_err(|e| pmo_err("", &e))
    }

    /// Every object: a list of dicts, the fields of `ObjectInfo` (name,
    /// size, encrypted, epoch, ...).
    fn objects<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_value(py, &self.pool.list())
    }

    /// psync several writable attachments of this pool all or nothing:
    /// every object's changes become durable together, or none do (a crash
    /// at any point leaves all as before or all as after). Returns a list
    /// of {"pages": N, "ns": wall time}, one per attachment. An attachment
    /// given twice, read-only, or of another pool raises PmoError naming
    /// the object; nothing is committed then.
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

    /// Attach an object at its fixed address: `write` for a writable
    /// attachment, `mode` one of plain, decrypt-at-fault, dram-cache,
    /// stream-N, stride-N, markov-N; `wait`: if another writer holds the
    /// object, wait for it instead of raising.
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

/// The base object of every array over one attachment's mapping: its
/// reference count is the proof that no array still points there.
#[pyclass(module = "nvmos._nvmos")]
pub struct MappingOwner {}

/// An attached object: its bytes (`buffer`), psync, detach, and its heap.
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
    /// The object's bytes as a numpy uint8 array over the mapping, no
    /// copy (writable for a writable attachment): use `.view(dtype)` for
    /// other element types, `memoryview(a.buffer)` for a memoryview.
    /// Valid until `detach`, which refuses while any array over it lives.
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

    /// Bytes in the object.
    fn __len__(&self) -> PyResult<usize> {
        Ok(self.live()?.len())
    }

    /// Seal every page written since the last psync and commit them all
    /// or nothing. Returns {"pages": N, "ns": wall time}.
    fn psync<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let a = self.live()?;
        let stats = py.detach(|| a.psync()).map_err(|e| pmo_err("", &e))?;
        to_py_value(py, &stats)
    }

    /// psync (a writable attachment), then unmap. Refused while a numpy
    /// array or other export of `buffer` is alive.
    fn detach(&mut self, py: Python<'_>) -> PyResult<()> {
        self.live()?;
        self.check_unexported(py)?;
        let a = self.inner.take().expect("checked live");
        self.owner = None;
        py.detach(|| a.detach()).map_err(|e| pmo_err("", &e))?;
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Leaving a `with` block detaches (psync first) when no exception
    /// was raised; on an exception the attachment is dropped without
    /// psync, as a crash would leave it.
    fn __exit__(
        &mut self,
        py: Python<'_>,
        exc_type: Option<Bound<'_, PyAny>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
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

    /// Allocate `size` bytes from the object's heap (formatting a heap in
    /// a fresh object); returns the block's offset in the object.
    #[pyo3(signature = (size, type_num = 0))]
    fn palloc(&mut self, size: u64, type_num: u32) -> PyResult<u64> {
        let mem = self.writable()?;
        let result = Heap::open_or_format(mem).and_then(|mut h| h.palloc(size, type_num));
        result.map_err(|e| self.heap_error(e))
    }

    /// Free the heap block at `offset`.
    fn pfree(&mut self, offset: u64) -> PyResult<()> {
        let mem = self.writable()?;
        let result = Heap::open(mem).and_then(|mut h| h.pfree(offset));
        result.map_err(|e| self.heap_error(e))
    }

    /// Resize the heap block at `offset`; returns its (maybe new) offset.
    fn prealloc(&mut self, offset: u64, size: u64) -> PyResult<u64> {
        let mem = self.writable()?;
        let result = Heap::open(mem).and_then(|mut h| h.prealloc(offset, size));
        result.map_err(|e| self.heap_error(e))
    }

    /// The heap's root block of at least `size` bytes (created zeroed on
    /// first use); returns its offset.
    fn root(&mut self, size: u64) -> PyResult<u64> {
        let mem = self.writable()?;
        let result = Heap::open_or_format(mem).and_then(|mut h| h.root(size));
        result.map_err(|e| self.heap_error(e))
    }

    /// Allocated heap blocks as (offset, size, type_num), optionally of
    /// one type, in address order.
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

    /// Heap space: a dict of HeapStats (allocated/free bytes and blocks,
    /// largest free, metadata, fragmentation).
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
