//! The pool: a file standing for persistent memory, its directory of
//! objects, and the frame allocator that hands out its frames.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nvmos_frames::{FrameAllocator, IBuddy, Pfn, Request, Zone};
use parking_lot::Mutex;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::attach::{Attachment, Mode};
use crate::crypto::{sha256, KdfParams, ObjectKeys};
use crate::error::{PmoError, Result};
use crate::layout::{
    read_u64, record_offset, write_u64, Entry, Header, Record, Root, SlotState, DATA_START,
    ENTRIES_PER_TABLE, ENTRY, MAX_NAME, MAX_ROOT_FRAMES, PAGE, SLOTS,
};
use crate::medium::{CrashPoint, Durability, Medium};
use crate::object::{Committed, ObjectHandle, ObjectShared, Perm, ZERO_PAGE};

/// How a pool is opened.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Access {
    /// Shared lock: any number of read-only opens, no writer.
    ReadOnly,
    /// Exclusive lock: the one process (and open) that may change the pool.
    ReadWrite,
}

/// Options for opening or creating a pool.
#[derive(Copy, Clone, Debug, Default)]
pub struct PoolOptions {
    /// Fault injection for crash tests (off by default).
    pub crash: CrashPoint,
}

/// An object as `ls` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectInfo {
    /// Its name.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// Pages sealed with AES-256-GCM.
    pub encrypted: bool,
    /// The fixed virtual address it is attached at.
    pub base_address: u64,
    /// Committed epoch (psyncs since pcreate, plus attach reservations).
    pub epoch: u64,
    /// Pages that have ever been written (the rest read as zeros).
    pub pages_written: u64,
    /// Directory slot.
    pub slot: usize,
}

/// The pool as a whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolInfo {
    /// The pool file.
    pub path: PathBuf,
    /// Bytes.
    pub size: u64,
    /// Data frames (the rest are header and directory).
    pub data_frames: u64,
    /// Data frames not in use.
    pub free_frames: u64,
    /// How stores are made durable on this medium.
    pub durability: Durability,
    /// Start and length of the pool's virtual address plan.
    pub plan_base: u64,
    /// Length of the plan.
    pub plan_len: u64,
    /// The objects.
    pub objects: Vec<ObjectInfo>,
}

/// What `verify` found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// The object.
    pub name: String,
    /// Epoch checked against the directory.
    pub epoch: u64,
    /// Table pages checked against the root.
    pub tables: usize,
    /// Pages checked.
    pub pages: usize,
    /// Pages ever written (authenticated; the rest are zero pages).
    pub pages_written: usize,
    /// Pages that failed, with the error.
    pub bad_pages: Vec<(usize, String)>,
}

impl VerifyReport {
    /// Whether every check passed.
    pub fn ok(&self) -> bool {
        self.bad_pages.is_empty()
    }
}

enum Slot {
    Free {
        seq: u64,
        which: Option<usize>,
    },
    Live(Arc<ObjectShared>),
    /// A live record whose root or tables do not load; `name` when known.
    Damaged {
        name: Option<String>,
        error: String,
        frames: Vec<u64>,
    },
}

pub(crate) struct PoolInner {
    pub medium: Medium,
    _file: File,
    header: Header,
    access: Access,
    alloc: IBuddy<parking_lot::RawMutex>,
    dir: Mutex<Vec<Slot>>,
}

/// A pool of persistent memory objects. Cheap to clone (shared).
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("path", &self.inner.medium.path)
            .finish()
    }
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> PmoError + 'a {
    move |source| PmoError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Smallest pool: the header, the directory and 64 data frames.
pub const MIN_POOL_SIZE: u64 = (DATA_START + 64) * PAGE as u64;

impl Pool {
    /// Create a pool file of `size` bytes (a multiple of 4096, at least
    /// [`MIN_POOL_SIZE`]) and open it for writing. Never overwrites a file.
    pub fn create(path: &Path, size: u64) -> Result<Pool> {
        Pool::create_with(path, size, PoolOptions::default())
    }

    /// [`Pool::create`] with options.
    pub fn create_with(path: &Path, size: u64, opts: PoolOptions) -> Result<Pool> {
        if size < MIN_POOL_SIZE || !size.is_multiple_of(PAGE as u64) {
            return Err(PmoError::BadPoolSize {
                size,
                reason: format!("must be a multiple of 4096 and at least {MIN_POOL_SIZE}"),
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    PmoError::PoolExists {
                        path: path.to_owned(),
                    }
                } else {
                    PmoError::Io {
                        op: "creating",
                        path: path.to_owned(),
                        source: e,
                    }
                }
            })?;
        lock(&file, path, Access::ReadWrite)?;
        file.set_len(size).map_err(io("sizing", path))?;
        let total_pages = size / PAGE as u64;
        let data = total_pages - DATA_START;
        // Objects are laid out in a random 1 GiB-aligned window of the
        // address space, so two pools rarely claim the same addresses.
        let plan_len =
            (2 * data * PAGE as u64 + SLOTS as u64 * (4 << 20)).next_multiple_of(1 << 30);
        let mut rng = rand::thread_rng();
        let plan_base = 0x2000_0000_0000u64 + rng.gen_range(0..4096u64) * (1 << 30);
        let header = Header {
            total_pages,
            plan_base,
            plan_len,
            pool_id: rng.gen(),
        };
        let medium = Medium::map(path, &file, size as usize, opts.crash)?;
        // The directory is zero (a fresh file); the header goes last so a
        // crash during create leaves a file that is not a pool.
        medium.persist(0, DATA_START as usize * PAGE);
        medium.drain()?;
        let h = header.encode();
        medium.slice_mut(0, h.len()).copy_from_slice(&h);
        medium.persist(0, h.len());
        medium.drain()?;
        if medium.durability == Durability::Msync {
            file.sync_all().map_err(io("syncing", path))?;
        }
        drop(medium);
        drop(file);
        Pool::open_with(path, Access::ReadWrite, opts)
    }

    /// Open an existing pool.
    pub fn open(path: &Path, access: Access) -> Result<Pool> {
        Pool::open_with(path, access, PoolOptions::default())
    }

    /// [`Pool::open`] with options.
    pub fn open_with(path: &Path, access: Access, opts: PoolOptions) -> Result<Pool> {
        // Mapped read-write even for readers: reads only, but one mapping type.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io("opening", path))?;
        lock(&file, path, access)?;
        let actual = file
            .metadata()
            .map_err(io("reading metadata of", path))?
            .len();
        let mut first = [0u8; 80];
        {
            use std::io::Read;
            let mut f = &file;
            let n = f.read(&mut first).map_err(io("reading", path))?;
            if n < first.len() {
                return Err(PmoError::NotAPool {
                    path: path.to_owned(),
                    reason: format!("{actual} bytes, shorter than a pool header"),
                });
            }
        }
        let header = Header::decode(&first).map_err(|reason| PmoError::NotAPool {
            path: path.to_owned(),
            reason,
        })?;
        let expected = header.total_pages * PAGE as u64;
        if actual < expected {
            return Err(PmoError::Truncated {
                path: path.to_owned(),
                expected,
                actual,
            });
        }
        let medium = Medium::map(path, &file, expected as usize, opts.crash)?;
        let zone = Zone::new(DATA_START, header.total_pages);
        let alloc = IBuddy::<parking_lot::RawMutex>::new(&[zone], 1).map_err(|e| {
            PmoError::Inconsistent {
                path: path.to_owned(),
                what: format!("frame allocator refused the data zone: {e}"),
            }
        })?;
        let inner = PoolInner {
            medium,
            _file: file,
            header,
            access,
            alloc,
            dir: Mutex::new(Vec::new()),
        };
        inner.load_directory()?;
        Ok(Pool {
            inner: Arc::new(inner),
        })
    }

    /// The pool file.
    pub fn path(&self) -> &Path {
        &self.inner.medium.path
    }

    /// The seed's `pcreate(name, size, key)`: a new object of `size` bytes
    /// (rounded up to whole pages), all zeros, sealed under `key` (or
    /// stored plain with `None`), with Argon2id's default cost.
    pub fn pcreate(&self, name: &str, size: u64, key: Option<&[u8]>) -> Result<ObjectInfo> {
        self.pcreate_with(name, size, key, KdfParams::default())
    }

    /// [`Pool::pcreate`] with explicit key-stretching cost.
    pub fn pcreate_with(
        &self,
        name: &str,
        size: u64,
        key: Option<&[u8]>,
        kdf: KdfParams,
    ) -> Result<ObjectInfo> {
        self.inner.pcreate(name, size, key, kdf)
    }

    /// Attach object `name` for reading or writing. With a key, checks it
    /// against the object's verifier, then the root's MAC and epoch; then
    /// every page-table page against the root. A second attach for writing
    /// is refused until the first handle is dropped.
    pub fn open_object(&self, name: &str, perm: Perm, key: Option<&[u8]>) -> Result<ObjectHandle> {
        let inner = &self.inner;
        if perm == Perm::Write && inner.access != Access::ReadWrite {
            return Err(PmoError::PoolReadOnly {
                path: inner.medium.path.clone(),
                op: "attaching for writing",
            });
        }
        let shared = inner.find(name)?;
        shared.authenticate(key)?;
        shared.check_tables(inner)?;
        if perm == Perm::Write
            && shared
                .writer
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return Err(PmoError::AlreadyAttached {
                name: name.to_string(),
            });
        }
        shared.handles.fetch_add(1, Ordering::AcqRel);
        let handle = ObjectHandle {
            shared: shared.clone(),
            pool: inner.clone(),
            perm,
        };
        if perm == Perm::Write {
            // Dropping the handle on error releases the writer flag.
            shared.begin_write(inner)?;
        }
        Ok(handle)
    }

    /// The seed's `pdestroy(name, key)`: with the right key, delete the
    /// object and give its frames back. Refused while it is attached.
    pub fn pdestroy(&self, name: &str, key: Option<&[u8]>) -> Result<()> {
        let base = self.inner.find(name).map(|o| o.base as usize);
        self.inner.pdestroy(name, key)?;
        // The object's plaintext must not outlive it in this process's
        // DRAM cache (a later object may be given the same address).
        if let Ok(base) = base {
            crate::attach::cache::evict(base);
        }
        Ok(())
    }

    /// The seed's `attach`: open object `name` with `key` as
    /// [`Pool::open_object`] does, then map it at its fixed virtual address
    /// in `mode` ([`Attachment`]): pages arrive through userfaultfd faults,
    /// verified and decrypted on the way in; [`Attachment::psync`] seals
    /// every page written since the last psync and commits them all or
    /// nothing; [`Attachment::detach`] psyncs and unmaps. Dropping the
    /// attachment without psync leaves the object as at its last psync.
    pub fn attach(
        &self,
        name: &str,
        perm: Perm,
        key: Option<&[u8]>,
        mode: Mode,
    ) -> Result<Attachment> {
        let handle = self.open_object(name, perm, key)?;
        Attachment::attach(Arc::new(handle), perm, mode).map_err(|source| PmoError::Attach {
            name: name.to_string(),
            source: Box::new(source),
        })
    }

    /// Every object, in directory order.
    pub fn list(&self) -> Vec<ObjectInfo> {
        self.inner.list()
    }

    /// The pool and its objects.
    pub fn info(&self) -> PoolInfo {
        let inner = &self.inner;
        PoolInfo {
            path: inner.medium.path.clone(),
            size: inner.medium.len() as u64,
            data_frames: inner.header.total_pages - DATA_START,
            free_frames: inner.free_frames_count(),
            durability: inner.medium.durability,
            plan_base: inner.header.plan_base,
            plan_len: inner.header.plan_len,
            objects: inner.list(),
        }
    }

    /// Check object `name` in full: key, root MAC and epoch, every table
    /// page, every written page. Root and table failures are errors;
    /// failed pages are listed in the report.
    pub fn verify(&self, name: &str, key: Option<&[u8]>) -> Result<VerifyReport> {
        let h = self.open_object(name, Perm::Read, key)?;
        let mut bad = Vec::new();
        let mut buf = vec![0u8; PAGE];
        for i in 0..h.shared.pages {
            if let Err(e) = h.read(i, &mut buf) {
                bad.push((i, e.to_string()));
            }
        }
        let c = h.shared.committed.read();
        Ok(VerifyReport {
            name: name.to_string(),
            epoch: c.epoch,
            tables: c.tables.len(),
            pages: h.shared.pages,
            pages_written: c.entries.iter().filter(|e| e.pfn != 0).count(),
            bad_pages: bad,
        })
    }

    /// Check the allocator against the directory: every frame held by an
    /// object is allocated, and the allocator's own invariants hold.
    pub fn check(&self) -> Result<()> {
        let inner = &self.inner;
        let bad = |what: String| PmoError::Inconsistent {
            path: inner.medium.path.clone(),
            what,
        };
        inner
            .alloc
            .validate()
            .map_err(|e| bad(format!("frame allocator: {e}")))?;
        let dir = inner.dir.lock();
        for slot in dir.iter() {
            let frames = match slot {
                Slot::Live(o) => o.frames(),
                Slot::Damaged { frames, .. } => frames.clone(),
                Slot::Free { .. } => continue,
            };
            for f in frames {
                if inner
                    .alloc
                    .check_free(Pfn(f), nvmos_frames::Order::ZERO)
                    .is_err()
                {
                    return Err(bad(format!(
                        "frame {f} is in use but the allocator has it free"
                    )));
                }
            }
        }
        Ok(())
    }
}

fn lock(file: &File, path: &Path, access: Access) -> Result<()> {
    let op = match access {
        Access::ReadOnly => libc::LOCK_SH,
        Access::ReadWrite => libc::LOCK_EX,
    };
    // SAFETY: flock on an open fd. The lock belongs to this open file
    // description and goes away when it is closed or the process dies, so
    // a crashed writer never leaves the pool locked.
    if unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Err(PmoError::PoolBusy {
                path: path.to_owned(),
                held: if access == Access::ReadOnly {
                    "for writing"
                } else {
                    "for reading or writing"
                },
                wanted: if access == Access::ReadOnly {
                    "read"
                } else {
                    "write"
                },
            });
        }
        return Err(PmoError::Io {
            op: "locking",
            path: path.to_owned(),
            source: err,
        });
    }
    Ok(())
}

/// A root and page table read from the medium (structure checked; MACs
/// are checked at attach, when the key is known).
struct Loaded {
    root: Root,
    mac: [u8; 32],
    body: Vec<u8>,
    root_frames: Vec<u64>,
    entries: Vec<Entry>,
}

impl PoolInner {
    fn data_range(&self) -> std::ops::Range<u64> {
        DATA_START..self.header.total_pages
    }

    pub fn frame(&self, pfn: u64) -> &[u8] {
        self.medium.slice(pfn as usize * PAGE, PAGE)
    }

    #[allow(clippy::mut_from_ref)]
    pub fn frame_mut(&self, pfn: u64) -> &mut [u8] {
        self.medium.slice_mut(pfn as usize * PAGE, PAGE)
    }

    fn inconsistent(&self, what: String) -> PmoError {
        PmoError::Inconsistent {
            path: self.medium.path.clone(),
            what,
        }
    }

    pub fn alloc_frame(&self, name: &str) -> Result<u64> {
        self.alloc
            .alloc(Request::single(0))
            .map(|p| p.0)
            .map_err(|_| PmoError::PoolFull {
                what: format!("no free frame for object {name:?}"),
            })
    }

    pub fn free_frames(&self, frames: &[u64]) {
        for &f in frames {
            // Frames come from our own bookkeeping; a refusal would mean a
            // bug, and the frame then simply stays allocated (leaked until
            // the pool is reopened, which rebuilds the allocator).
            let _ = self.alloc.free(Pfn(f), Request::single(0));
        }
    }

    fn free_frames_count(&self) -> u64 {
        self.alloc.stats().free_frames
    }

    /// Read and structurally check the root a record names, and its tables.
    fn load(
        &self,
        rec: &Record,
    ) -> std::result::Result<Loaded, (Option<String>, String, Vec<u64>)> {
        let range = self.data_range();
        let mut held = Vec::new();
        if !range.contains(&rec.root_pfn) {
            return Err((
                None,
                format!("root frame {} outside the data area", rec.root_pfn),
                held,
            ));
        }
        let first = self.frame(rec.root_pfn);
        let n = read_u64(first, 0) as usize;
        if n > MAX_ROOT_FRAMES - 1 {
            return Err((None, format!("root lists {n} continuation frames"), held));
        }
        let mut frames = vec![rec.root_pfn];
        for i in 0..n {
            let f = read_u64(first, 8 + 8 * i);
            if !range.contains(&f) {
                return Err((
                    None,
                    format!("root continuation frame {f} outside the data area"),
                    held,
                ));
            }
            frames.push(f);
        }
        held.extend(frames.iter().copied());
        let stored_len = 8 + 8 * n + rec.root_len as usize;
        if stored_len > frames.len() * PAGE {
            return Err((
                None,
                format!(
                    "root of {} bytes does not fit {} frames",
                    rec.root_len,
                    frames.len()
                ),
                held,
            ));
        }
        let mut stored = Vec::with_capacity(frames.len() * PAGE);
        for &f in &frames {
            stored.extend_from_slice(self.frame(f));
        }
        stored.truncate(stored_len);
        if sha256(&[&stored])[..16] != rec.root_sha {
            return Err((
                None,
                "root does not match the hash in its directory record".into(),
                held,
            ));
        }
        let blob = &stored[8 + 8 * n..];
        let (root, mac) =
            Root::decode(blob).map_err(|e| (None, format!("root: {e}"), held.clone()))?;
        let name = Some(root.name.clone());
        if root.obj_id != rec.obj_id {
            return Err((name, "root belongs to another object".into(), held));
        }
        let pages = root.pages as usize;
        let mut entries = vec![Entry::default(); pages];
        let mut bad = None;
        for (t, (pfn, sha)) in root.tables.iter().enumerate() {
            let bytes: &[u8] = if *pfn == 0 {
                &ZERO_PAGE
            } else if range.contains(pfn) {
                held.push(*pfn);
                self.frame(*pfn)
            } else {
                return Err((
                    name,
                    format!("table page {t} at frame {pfn} outside the data area"),
                    held,
                ));
            };
            if sha256(&[bytes]) != *sha && bad.is_none() {
                let first = t * ENTRIES_PER_TABLE;
                bad = Some(format!(
                    "page table {t} (pages {first}..{}): hash does not match the root",
                    (first + ENTRIES_PER_TABLE).min(pages)
                ));
            }
            for k in 0..ENTRIES_PER_TABLE {
                let i = t * ENTRIES_PER_TABLE + k;
                if i >= pages {
                    break;
                }
                let e = Entry::decode(&bytes[k * ENTRY..(k + 1) * ENTRY]);
                if e.pfn != 0 {
                    if range.contains(&e.pfn) {
                        held.push(e.pfn);
                    } else if bad.is_none() {
                        bad = Some(format!("page {i} at frame {} outside the data area", e.pfn));
                    }
                }
                entries[i] = e;
            }
        }
        if let Some(b) = bad {
            return Err((name, b, held));
        }
        let body = blob[..blob.len() - 32].to_vec();
        Ok(Loaded {
            root,
            mac,
            body,
            root_frames: frames,
            entries,
        })
    }

    /// Read the directory, load every live object, and rebuild the
    /// allocator: every frame reachable from a current record is in use,
    /// every other data frame free. A frame reachable twice is an error.
    fn load_directory(&self) -> Result<()> {
        let mut slots = Vec::with_capacity(SLOTS);
        let range = self.data_range();
        let mut used = vec![false; (range.end - range.start) as usize];
        for s in 0..SLOTS {
            let recs: Vec<Option<Record>> = (0..2)
                .map(|w| {
                    Record::decode(
                        self.medium
                            .slice(record_offset(s, w), crate::layout::RECORD),
                    )
                })
                .collect();
            let current = match (&recs[0], &recs[1]) {
                (Some(a), Some(b)) => Some(if a.seq >= b.seq { 0 } else { 1 }),
                (Some(_), None) => Some(0),
                (None, Some(_)) => Some(1),
                (None, None) => None,
            };
            let Some(which) = current else {
                slots.push(Slot::Free {
                    seq: 0,
                    which: None,
                });
                continue;
            };
            let rec = recs[which].clone().expect("current record is valid");
            if rec.state == SlotState::Destroyed {
                slots.push(Slot::Free {
                    seq: rec.seq,
                    which: Some(which),
                });
                continue;
            }
            let (slot, frames) = match self.load(&rec) {
                Ok(l) => {
                    let committed = Committed {
                        epoch: rec.seq,
                        which,
                        nonce_hw: l.root.nonce_hw,
                        root_frames: l.root_frames,
                        root_body: l.body,
                        root_mac: l.mac,
                        tables: l.root.tables.clone(),
                        entries: l.entries,
                    };
                    let shared = Arc::new(ObjectShared::new(s, &l.root, committed));
                    let frames = shared.frames();
                    (Slot::Live(shared), frames)
                }
                Err((name, error, frames)) => (
                    Slot::Damaged {
                        name,
                        error,
                        frames: frames.clone(),
                    },
                    frames,
                ),
            };
            for &f in &frames {
                let u = &mut used[(f - range.start) as usize];
                if *u {
                    return Err(self.inconsistent(format!(
                        "frame {f} is referenced twice (second time by directory slot {s})"
                    )));
                }
                *u = true;
            }
            slots.push(slot);
        }
        // Rebuild the allocator: take every frame, give back the unused
        // ones starting at a random frame, so iBuddy's least-recently-freed
        // order does not restart at the same frames after every open.
        let n = used.len();
        let mut all = vec![Pfn(0); n];
        let got = self.alloc.alloc_bulk(Request::single(0), &mut all);
        if got != n {
            return Err(self.inconsistent(format!("allocator gave {got} of {n} frames")));
        }
        let start = rand::thread_rng().gen_range(0..n);
        for k in 0..n {
            let i = (start + k) % n;
            if !used[i] {
                self.alloc
                    .free(Pfn(range.start + i as u64), Request::single(0))
                    .map_err(|e| self.inconsistent(format!("rebuilding the allocator: {e}")))?;
            }
        }
        *self.dir.lock() = slots;
        Ok(())
    }

    fn find(&self, name: &str) -> Result<Arc<ObjectShared>> {
        let dir = self.dir.lock();
        for (i, slot) in dir.iter().enumerate() {
            match slot {
                Slot::Live(o) if o.name == name => return Ok(o.clone()),
                Slot::Damaged {
                    name: Some(n),
                    error,
                    ..
                } if n == name => {
                    return Err(PmoError::RootAuth {
                        name: name.to_string(),
                        reason: format!("{error} (directory slot {i})"),
                    })
                }
                _ => {}
            }
        }
        Err(PmoError::UnknownObject {
            name: name.to_string(),
        })
    }

    fn list(&self) -> Vec<ObjectInfo> {
        let dir = self.dir.lock();
        dir.iter()
            .filter_map(|s| match s {
                Slot::Live(o) => {
                    let c = o.committed.read();
                    Some(ObjectInfo {
                        name: o.name.clone(),
                        size: (o.pages * PAGE) as u64,
                        encrypted: o.encrypted,
                        base_address: o.base,
                        epoch: c.epoch,
                        pages_written: c.entries.iter().filter(|e| e.pfn != 0).count() as u64,
                        slot: o.slot,
                    })
                }
                _ => None,
            })
            .collect()
    }

    fn writable(&self, op: &'static str) -> Result<()> {
        if self.access == Access::ReadWrite {
            Ok(())
        } else {
            Err(PmoError::PoolReadOnly {
                path: self.medium.path.clone(),
                op,
            })
        }
    }

    /// Store a root out of place: frames for the frame list and blob,
    /// written and persisted (not yet ordered). Returns its frames, first
    /// frame, hash prefix and blob length.
    pub fn write_root(
        &self,
        name: &str,
        body: &[u8],
        mac: &[u8; 32],
        new_frames: &mut Vec<u64>,
    ) -> Result<(Vec<u64>, u64, [u8; 16], u32)> {
        let blob_len = body.len() + mac.len();
        let tables = (body.len() - crate::layout::ROOT_FIXED) / crate::layout::ROOT_TABLE;
        let nframes = Root::frames_for(tables);
        let mut frames = Vec::with_capacity(nframes);
        for _ in 0..nframes {
            let f = self.alloc_frame(name)?;
            new_frames.push(f);
            frames.push(f);
        }
        let mut stored = vec![0u8; nframes * PAGE];
        write_u64(&mut stored, 0, (nframes - 1) as u64);
        for (i, &f) in frames[1..].iter().enumerate() {
            write_u64(&mut stored, 8 + 8 * i, f);
        }
        let off = 8 + 8 * (nframes - 1);
        stored[off..off + body.len()].copy_from_slice(body);
        stored[off + body.len()..off + blob_len].copy_from_slice(mac);
        let sha: [u8; 16] = sha256(&[&stored[..off + blob_len]])[..16]
            .try_into()
            .expect("16");
        for (i, &f) in frames.iter().enumerate() {
            self.frame_mut(f)
                .copy_from_slice(&stored[i * PAGE..(i + 1) * PAGE]);
            self.medium.persist(f as usize * PAGE, PAGE);
        }
        let first = frames[0];
        Ok((frames, first, sha, blob_len as u32))
    }

    /// The atomic update: write record `which` of `slot` and make it durable.
    pub fn write_record(&self, slot: usize, which: usize, rec: &Record) -> Result<()> {
        let _dir = self.dir.lock();
        let off = record_offset(slot, which);
        let bytes = rec.encode();
        self.medium
            .slice_mut(off, bytes.len())
            .copy_from_slice(&bytes);
        self.medium.persist(off, bytes.len());
        self.medium.drain()
    }

    fn write_record_locked(&self, slot: usize, which: usize, rec: &Record) -> Result<()> {
        let off = record_offset(slot, which);
        let bytes = rec.encode();
        self.medium
            .slice_mut(off, bytes.len())
            .copy_from_slice(&bytes);
        self.medium.persist(off, bytes.len());
        self.medium.drain()
    }

    fn pcreate(
        &self,
        name: &str,
        size: u64,
        key: Option<&[u8]>,
        kdf: KdfParams,
    ) -> Result<ObjectInfo> {
        self.writable("pcreate")?;
        check_name(name)?;
        let bad_size = |reason: String| PmoError::BadObjectSize {
            name: name.to_string(),
            size,
            reason,
        };
        if size == 0 {
            return Err(bad_size("an object needs at least one byte".into()));
        }
        let pages = size.div_ceil(PAGE as u64);
        let tables = pages.div_ceil(ENTRIES_PER_TABLE as u64) as usize;
        let max_tables =
            (MAX_ROOT_FRAMES * PAGE - 8 * MAX_ROOT_FRAMES - crate::layout::ROOT_FIXED - 32)
                / crate::layout::ROOT_TABLE;
        if tables > max_tables {
            return Err(bad_size(format!(
                "larger than the largest object ({} bytes)",
                max_tables * ENTRIES_PER_TABLE * PAGE
            )));
        }
        if key.is_some_and(|k| k.is_empty()) {
            return Err(PmoError::WrongKey {
                name: name.to_string(),
            });
        }
        let mut dir = self.dir.lock();
        // Names are unique among live and damaged objects.
        for s in dir.iter() {
            let taken = match s {
                Slot::Live(o) => o.name == name,
                Slot::Damaged { name: Some(n), .. } => n == name,
                _ => false,
            };
            if taken {
                return Err(PmoError::ObjectExists {
                    name: name.to_string(),
                });
            }
        }
        // Room: every live object's pages, tables and root fully written,
        // plus this one's, plus the shadow copies one psync needs.
        let data_frames = self.header.total_pages - DATA_START;
        let need = |pages: u64| {
            let t = pages.div_ceil(ENTRIES_PER_TABLE as u64);
            pages + t + Root::frames_for(t as usize) as u64
        };
        let committed: u64 = dir
            .iter()
            .map(|s| match s {
                Slot::Live(o) => need(o.pages as u64),
                Slot::Damaged { frames, .. } => frames.len() as u64,
                Slot::Free { .. } => 0,
            })
            .sum();
        let slack = (data_frames / 8).max(16);
        if committed + need(pages) + slack > data_frames {
            return Err(PmoError::PoolFull {
                what: format!(
                    "object {name:?} needs {} frames; {} of {data_frames} are promised to objects and {slack} kept for psync's shadow copies",
                    need(pages),
                    committed
                ),
            });
        }
        let Some(slot_index) = dir.iter().position(|s| matches!(s, Slot::Free { .. })) else {
            return Err(PmoError::PoolFull {
                what: format!("all {SLOTS} directory slots are in use"),
            });
        };
        let (seq, which) = match dir[slot_index] {
            Slot::Free { seq, which } => (seq, which),
            _ => unreachable!("position found a free slot"),
        };
        // First fit in the address plan, 2 MiB aligned, with a 2 MiB guard
        // between objects.
        const ALIGN: u64 = 2 << 20;
        let mut taken: Vec<(u64, u64)> = dir
            .iter()
            .filter_map(|s| match s {
                Slot::Live(o) => Some((o.base, (o.pages * PAGE) as u64)),
                _ => None,
            })
            .collect();
        taken.sort_unstable();
        let len = (pages * PAGE as u64).next_multiple_of(ALIGN) + ALIGN;
        let mut base = self.header.plan_base;
        for (b, l) in taken {
            if base + len <= b {
                break;
            }
            base = base.max((b + l).next_multiple_of(ALIGN) + ALIGN);
        }
        if base + len > self.header.plan_base + self.header.plan_len {
            return Err(PmoError::PoolFull {
                what: "the pool's virtual address plan has no room left".into(),
            });
        }
        let mut rng = rand::thread_rng();
        let obj_id: u64 = rng.gen();
        let salt: [u8; 16] = rng.gen();
        let zero_sha = sha256(&[&ZERO_PAGE]);
        let mut root = Root {
            obj_id,
            epoch: seq + 1,
            nonce_hw: 1,
            encrypted: key.is_some(),
            name: name.to_string(),
            pages,
            base,
            salt,
            verifier: [0; 32],
            kdf,
            tables: vec![(0, zero_sha); tables],
        };
        let keys = match key {
            Some(k) => {
                let keys = ObjectKeys::derive(k, &salt, kdf)?;
                root.verifier = keys.verifier(obj_id);
                Some(keys)
            }
            None => None,
        };
        let body = root.encode_body();
        let mac = match &keys {
            Some(k) => k.mac(&[&body]),
            None => sha256(&[&body]),
        };
        let mut new_frames = Vec::new();
        let written = self.write_root(name, &body, &mac, &mut new_frames);
        let (root_frames, root_pfn, root_sha, root_len) = match written {
            Ok(w) => w,
            Err(e) => {
                self.free_frames(&new_frames);
                return Err(e);
            }
        };
        let record = Record {
            seq: seq + 1,
            state: SlotState::Live,
            root_len,
            root_pfn,
            obj_id,
            root_sha,
        };
        let which = which.map_or(0, |w| 1 - w);
        if let Err(e) = self.medium.drain() {
            self.free_frames(&new_frames);
            return Err(e);
        }
        // If the record write fails it may still have reached the medium:
        // the root's frames are then left allocated, not reused.
        self.write_record_locked(slot_index, which, &record)?;
        let committed = Committed {
            epoch: seq + 1,
            which,
            nonce_hw: 1,
            root_frames,
            root_body: body,
            root_mac: mac,
            tables: root.tables.clone(),
            entries: vec![Entry::default(); pages as usize],
        };
        let shared = Arc::new(ObjectShared::new(slot_index, &root, committed));
        if let Some(k) = keys {
            let _ = shared.keys.set(k);
        }
        dir[slot_index] = Slot::Live(shared);
        Ok(ObjectInfo {
            name: name.to_string(),
            size: pages * PAGE as u64,
            encrypted: key.is_some(),
            base_address: base,
            epoch: seq + 1,
            pages_written: 0,
            slot: slot_index,
        })
    }

    fn pdestroy(&self, name: &str, key: Option<&[u8]>) -> Result<()> {
        self.writable("pdestroy")?;
        let shared = self.find(name)?;
        shared.authenticate(key)?;
        let mut dir = self.dir.lock();
        if shared.handles.load(Ordering::Acquire) != 0 {
            return Err(PmoError::AlreadyAttached {
                name: name.to_string(),
            });
        }
        let (epoch, which) = {
            let c = shared.committed.read();
            (c.epoch, c.which)
        };
        let record = Record {
            seq: epoch + 1,
            state: SlotState::Destroyed,
            root_len: 0,
            root_pfn: 0,
            obj_id: shared.obj_id,
            root_sha: [0; 16],
        };
        self.write_record_locked(shared.slot, 1 - which, &record)?;
        shared.destroyed.store(true, Ordering::Release);
        dir[shared.slot] = Slot::Free {
            seq: epoch + 1,
            which: Some(1 - which),
        };
        drop(dir);
        self.free_frames(&shared.frames());
        Ok(())
    }
}

fn check_name(name: &str) -> Result<()> {
    let bad = |reason| {
        Err(PmoError::BadName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > MAX_NAME {
        return bad("longer than 64 bytes");
    }
    if name.chars().any(|c| c.is_control() || c == '/') {
        return bad("control characters and '/' are not allowed");
    }
    Ok(())
}
