//! The pool: a file standing for persistent memory, its directory of
//! objects, and the frame allocator that hands out its frames.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use nvmos_frames::{FrameAllocator, IBuddy, Pfn, Request, Zone};
use parking_lot::Mutex;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::attach::{Attachment, Mode, PsyncStats};
use crate::crypto::{sha256, KdfParams, ObjectKeys};
use crate::error::{PmoError, Result};
use crate::layout::{
    read_u64, record_offset, write_u64, Entry, GroupEntry, GroupRecord, GroupState, Header, Record,
    RecordState, Root, SlotState, DATA_START, ENTRIES_PER_TABLE, ENTRY, GROUP_AT, HEADER_LEN,
    HEADER_STORE_AT, MAX_GROUP, MAX_NAME, MAX_ROOT_FRAMES, PAGE, RECORD, ROOT_MAGIC, SLOTS,
};
use crate::locks;
use crate::medium::{CrashPoint, CrashStep, Durability, Medium};
use crate::object::{Committed, ObjectHandle, ObjectShared, Perm, ZERO_PAGE};
use crate::state::{Committer, Kind, PoolState, SlotRecord, StateCommit, StateStore};

/// How a pool is opened. Any number of opens of either kind may coexist
/// (in one process or many): writers take a lock per object they write
/// ([`AttachOptions::wait`]), and frames are handed out per arena, so two
/// writers of different objects run at the same time ([`crate::locks`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Access {
    /// Read only: no pcreate, pdestroy or write attachment.
    ReadOnly,
    /// May create, destroy and write objects.
    ReadWrite,
}

/// Options for opening one object ([`Pool::open_object_with`],
/// [`Pool::attach_with`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachOptions {
    /// When another writer holds the object: wait for it instead of
    /// failing with [`PmoError::ObjectBusy`].
    pub wait: bool,
}

/// Options for opening or creating a pool.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// Fault injection for crash tests (off by default).
    pub crash: CrashPoint,
    /// The state store folder ([`crate::state`]): rollback detection beyond
    /// the pool file. `None`: the pool file is all there is (a rollback of
    /// the whole pool, or of one object with its directory record, is then
    /// undetectable).
    pub state_dir: Option<PathBuf>,
    /// Open even when the state store disagrees with the pool (for `check`,
    /// which reports the disagreement instead of refusing).
    pub tolerate_state_mismatch: bool,
    /// Open a pool that names a state store ([`crate::state`]) even when
    /// that store is not at hand: deleted, emptied, holding another pool's
    /// record, another store (another HOME), or no `state_dir` at all.
    /// Such a pool is otherwise refused ([`PmoError::StateMissing`]), as
    /// an older copy of it could not be told from the latest. The open is
    /// then unprotected against rollback and says so
    /// ([`Pool::state_missing`], and `state_missing` in [`PoolInfo`] and
    /// [`CheckReport`]); nothing is recorded in any store meanwhile.
    pub allow_missing_state: bool,
    /// When a psync's new epoch reaches the state store: handed to a
    /// committer thread (the default; the store may trail the pool by one
    /// write, see [`crate::state`]) or durable before psync returns.
    pub state_commit: StateCommit,
    /// With deferred records, the least time from the end of one store
    /// write to the start of the next: the records of every psync in
    /// between share one write (group commit). It bounds the committer's
    /// work, which otherwise writes back to back and takes the CPU from
    /// the psyncs when they share one, and it widens the rollback window
    /// by as much ([`crate::state`]). `Pool::sync_state` and the open's
    /// end do not wait for it. Default [`DEFAULT_STATE_GAP`].
    pub state_gap: std::time::Duration,
}

/// [`PoolOptions::state_gap`]'s default: 2 ms, a few times one store write
/// on a local disk (a write, two `fsync`s and a rename).
pub const DEFAULT_STATE_GAP: std::time::Duration = std::time::Duration::from_millis(2);

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            crash: CrashPoint::default(),
            state_dir: None,
            tolerate_state_mismatch: false,
            allow_missing_state: false,
            state_commit: StateCommit::default(),
            state_gap: DEFAULT_STATE_GAP,
        }
    }
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
    /// Committed epoch (record sequence number: commits to its slot).
    pub epoch: u64,
    /// Pages that have ever been written (the rest read as zeros).
    pub pages_written: u64,
    /// Directory slot.
    pub slot: usize,
    /// Why the object is quarantined (damaged or conflicting metadata);
    /// `None` for an intact object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub damaged: Option<String>,
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
    /// Set when the pool was opened without the state store it names
    /// ([`PoolOptions::allow_missing_state`]): why, and that it is
    /// unprotected against rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_missing: Option<String>,
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

/// One object as `check` sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectCheck {
    /// Directory slot.
    pub slot: usize,
    /// Its name (`?slotN` when unreadable).
    pub name: String,
    /// Sealed under a key.
    pub encrypted: bool,
    /// Whether every check that needs no key passed.
    pub ok: bool,
    /// What was checked, or what failed.
    pub status: String,
}

/// What [`Pool::check_report`] found (as `pmempool check`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    /// The pool file.
    pub path: PathBuf,
    /// Its id.
    pub pool_id: u64,
    /// Every object, intact or quarantined.
    pub objects: Vec<ObjectCheck>,
    /// Tolerated findings: torn (incomplete) record writes fallen back
    /// from, damaged stale records.
    pub notes: Vec<String>,
    /// Where the state store disagrees with the pool (rollbacks).
    pub state_mismatches: Vec<String>,
    /// Set when the file was truncated while the check read it: the
    /// findings above were read partly from zero pages and do not count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncated: Option<String>,
    /// Set when the group commit record (`psync_many`) is damaged: the
    /// objects it names are quarantined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_record: Option<String>,
    /// Data frames held by objects (quarantined ones included).
    pub frames_in_use: u64,
    /// Data frames free.
    pub frames_free: u64,
    /// Set when the pool was opened without the state store it names
    /// ([`PoolOptions::allow_missing_state`]): its freshness is unchecked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_missing: Option<String>,
}

impl CheckReport {
    /// No quarantined object, no state-store disagreement, and the state
    /// store the pool names at hand.
    pub fn ok(&self) -> bool {
        self.objects.iter().all(|o| o.ok)
            && self.state_mismatches.is_empty()
            && self.truncated.is_none()
            && self.group_record.is_none()
            && self.state_missing.is_none()
    }
}

/// What [`Pool::accept_rollback`] changed in the state store.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptReport {
    /// The disagreements the store had with the pool before (as `check`
    /// reports them), now accepted.
    pub accepted: Vec<String>,
    /// Slots whose store entry changed: "object \"a\" (slot 0): epoch 3 -> 2".
    pub rebased: Vec<String>,
    /// Epochs the store went back by, over all slots.
    pub epochs_back: u64,
    /// Records of other pool ids at this path that were dropped (a
    /// different pool restored over this one).
    pub forgotten_ids: Vec<u64>,
    /// Quarantined slots whose store entry was left as it was (what
    /// cannot be verified is not accepted).
    pub left: Vec<String>,
    /// Set when the pool was bound to the store anew (its record there was
    /// missing or another pool's): the new record and identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebound: Option<String>,
}

/// What [`Pool::repair`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairReport {
    /// Intact objects kept as they are.
    pub salvaged: Vec<String>,
    /// Quarantined objects left untouched (their frames stay reserved).
    pub quarantined: Vec<String>,
    /// Incomplete or damaged stale directory records cleared.
    pub records_cleared: Vec<String>,
    /// Free frames zeroed (so no freed root, table or page of a destroyed
    /// object can be brought back by restoring a directory record).
    pub frames_scrubbed: u64,
    /// Why no free frame was zeroed, when none was: a quarantined object
    /// (or a damaged group commit record) may reference frames that cannot
    /// all be found, and nothing it might hold is destroyed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrub_skipped: Option<String>,
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
    /// A live record whose root or tables do not load, or that conflicts
    /// with another; `name` when known. `frames`: every frame either of
    /// its records may reference (reserved: never handed out, never
    /// scrubbed).
    Damaged {
        name: Option<String>,
        error: String,
        frames: Vec<u64>,
        /// The object as loaded, when it loaded intact and was quarantined
        /// for a conflict with another: still compared with the state
        /// store, whose verdict may say which of the two is forged.
        loaded: Option<Arc<ObjectShared>>,
    },
}

pub(crate) struct PoolInner {
    pub medium: Medium,
    /// The open file description all of this open's locks belong to.
    file: File,
    header: Header,
    access: Access,
    /// Hands out frames of the arenas this open holds only; every other
    /// frame is kept allocated here (see [`crate::locks`]).
    alloc: IBuddy<parking_lot::RawMutex>,
    /// Frames per arena (the last arena takes the rest).
    arena_len: u64,
    /// Arenas whose lock this open holds.
    owned: Mutex<Vec<bool>>,
    /// Depth of this open's hold on the pool-wide metadata lock (re-entrant
    /// within a thread; one OFD lock for the whole open).
    meta: parking_lot::ReentrantMutex<std::cell::Cell<usize>>,
    /// Directory slots this open holds for writing (their object locks).
    writing: Mutex<std::collections::HashSet<usize>>,
    dir: Mutex<Vec<Slot>>,
    state: Option<StateStore>,
    /// When psyncs' records reach `state` ([`PoolOptions::state_commit`]).
    state_commit: StateCommit,
    /// The least time between two deferred store writes
    /// ([`PoolOptions::state_gap`]).
    state_gap: std::time::Duration,
    /// The committer of deferred records, started by the first one.
    committer: std::sync::OnceLock<Committer>,
    /// What opening found and tolerated: torn writes fallen back from,
    /// damaged stale records, quarantined objects.
    notes: Mutex<Vec<String>>,
    /// Where the state store disagrees with the pool (empty when it agrees
    /// or there is no store); non-empty only with `tolerate_state_mismatch`.
    mismatches: Mutex<Vec<String>>,
    /// The state store the pool names now (the header's; 0: none): what
    /// new roots record.
    store_id: AtomicU64,
    /// Whether the store holds this pool's record under `store_id`: only
    /// then are commits recorded there and attaches checked against it.
    bound: AtomicBool,
    /// Set when opened without the store the pool names
    /// ([`PoolOptions::allow_missing_state`]).
    state_missing: Mutex<Option<String>>,
    /// This open's number, unique in the process ([`next_open_id`]): part
    /// of the DRAM cache's key, so two copies of one pool file (same ids
    /// and epochs, other bytes) never share cached plaintext.
    open_id: u64,
}

/// A number no other open in this process has had. The DRAM cache is
/// process-wide, so uniqueness within the process is what it needs; a
/// counter cannot collide as random numbers could. Never 0 (the identity
/// of backings that are not pool objects).
fn next_open_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        // The open's end closes the deferred records' window. A drop has
        // no caller to return a failure to: say it where the user sees it
        // (`Pool::sync_state` is the way to get it as an error).
        if let Some(committer) = self.committer.get() {
            if let Err(e) = committer.finish() {
                eprintln!("nvmos-pmo: closing {}: {e}", self.medium.path.display());
            }
        }
        // No attachment or handle of this open is left (each holds the
        // open), so its cached plaintext can never be served again: zero it
        // now rather than at exit.
        crate::attach::cache::evict_open(self.open_id);
    }
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

/// A new identity for a state store's record of a pool: random, never 0
/// (which means "no store").
fn new_store_id() -> u64 {
    loop {
        let id: u64 = rand::rngs::OsRng.gen();
        if id != 0 {
            return id;
        }
    }
}

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
        if let Ok(meta) = std::fs::metadata(path) {
            return Err(if meta.len() == 0 {
                PmoError::NotAPool {
                    path: path.to_owned(),
                    reason: "the file exists and is empty (0 bytes, perhaps left by an interrupted create of an older nvmos); remove it first to create a pool there".into(),
                }
            } else {
                PmoError::PoolExists {
                    path: path.to_owned(),
                }
            });
        }
        // Built in a temporary file in the same folder, then linked into
        // place without replacing anything: a failed or interrupted create
        // leaves no file at `path`, never a truncated pool.
        let folder = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(".nvmos-pool-")
            .tempfile_in(&folder)
            .map_err(io("creating a temporary pool file in", &folder))?;
        let file = tmp.as_file();
        file.set_len(size).map_err(io("sizing", tmp.path()))?;
        let total_pages = size / PAGE as u64;
        let data = total_pages - DATA_START;
        // Objects are laid out in a random 1 GiB-aligned window of the
        // address space, so two pools rarely claim the same addresses.
        let plan_len =
            (2 * data * PAGE as u64 + SLOTS as u64 * (4 << 20)).next_multiple_of(1 << 30);
        let mut rng = rand::rngs::OsRng;
        let plan_base = 0x2000_0000_0000u64 + rng.gen_range(0..4096u64) * (1 << 30);
        let pool_id: u64 = rng.gen();
        // The state store's record first, then the pool that names it: a
        // failed create leaves at most a record of no pool, never a pool
        // naming a store that has no record of it (which no open accepts).
        let store_id = match &opts.state_dir {
            Some(dir) => {
                let store = StateStore::open(dir)?;
                let abs = match (folder.canonicalize(), path.file_name()) {
                    (Ok(f), Some(name)) => f.join(name),
                    _ => path.to_owned(),
                };
                // A new pool at a path the state store knew: the old pool
                // there is gone (create never overwrites), so its record
                // goes too.
                for old in store.other_ids_at(&abs, pool_id) {
                    store.forget(old)?;
                }
                let store_id = new_store_id();
                store.update(
                    pool_id,
                    &abs,
                    |st| {
                        *st = PoolState {
                            store_id,
                            pool_id,
                            path: abs.clone(),
                            ..PoolState::default()
                        }
                    },
                    &|| {},
                )?;
                store_id
            }
            None => 0,
        };
        let header = Header {
            total_pages,
            plan_base,
            plan_len,
            pool_id,
            store_id,
        };
        let medium = Medium::map(tmp.path(), file, size as usize, opts.crash)?;
        let h = header.encode();
        medium.slice_mut(0, h.len()).copy_from_slice(&h);
        medium.persist(0, DATA_START as usize * PAGE);
        medium.drain()?;
        drop(medium);
        file.sync_all().map_err(io("syncing", tmp.path()))?;
        tmp.persist_noclobber(path).map_err(|e| {
            if e.error.kind() == std::io::ErrorKind::AlreadyExists {
                PmoError::PoolExists {
                    path: path.to_owned(),
                }
            } else {
                PmoError::Io {
                    op: "moving the new pool into place at",
                    path: path.to_owned(),
                    source: e.error,
                }
            }
        })?;
        if let Ok(d) = File::open(&folder) {
            let _ = d.sync_all();
        }
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
        presence(&file, path)?;
        let actual = file
            .metadata()
            .map_err(io("reading metadata of", path))?
            .len();
        let mut first = [0u8; HEADER_LEN];
        {
            use std::io::Read;
            let mut f = &file;
            let n = f.read(&mut first).map_err(io("reading", path))?;
            if n < first.len() {
                return Err(PmoError::NotAPool {
                    path: path.to_owned(),
                    reason: if actual == 0 {
                        "the file is empty (0 bytes)".into()
                    } else {
                        format!("{actual} bytes, shorter than a pool header")
                    },
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
        let state = match &opts.state_dir {
            Some(d) => Some(StateStore::open(d)?),
            None => None,
        };
        let zone = Zone::new(DATA_START, header.total_pages);
        let alloc = IBuddy::<parking_lot::RawMutex>::new(&[zone], 1).map_err(|e| {
            PmoError::Inconsistent {
                path: path.to_owned(),
                what: format!("frame allocator refused the data zone: {e}"),
            }
        })?;
        let data = header.total_pages - DATA_START;
        let arenas = (data / ARENA_MIN).clamp(1, MAX_ARENAS);
        let header_store = header.store_id;
        let inner = PoolInner {
            medium,
            file,
            header,
            access,
            alloc,
            arena_len: data / arenas,
            owned: Mutex::new(vec![false; arenas as usize]),
            meta: parking_lot::ReentrantMutex::new(std::cell::Cell::new(0)),
            writing: Mutex::new(std::collections::HashSet::new()),
            dir: Mutex::new(Vec::new()),
            state,
            state_commit: opts.state_commit,
            state_gap: opts.state_gap,
            committer: std::sync::OnceLock::new(),
            notes: Mutex::new(Vec::new()),
            mismatches: Mutex::new(Vec::new()),
            open_id: next_open_id(),
            store_id: AtomicU64::new(header_store),
            bound: AtomicBool::new(false),
            state_missing: Mutex::new(None),
        };
        // A truncation while loading turns whatever was read into its error.
        // Under the metadata lock: no group commit is half done meanwhile
        // (a group record found here is a dead writer's, rolled forward).
        {
            let _m = inner.meta()?;
            inner.medium.guarded(inner.load_directory())?;
            // Under the metadata lock too: no pcreate or pdestroy, which
            // write the state store on both sides of their record, is half
            // done meanwhile.
            let r = inner.check_freshness(&opts);
            inner.medium.guarded(r)?;
        }
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
        let r = self.inner.pcreate(name, size, key, kdf);
        self.inner.medium.guarded(r)
    }

    /// Attach object `name` for reading or writing. With a key, checks it
    /// against the object's verifier, then the root's MAC and epoch; then
    /// every page-table page against the root. Reads see the version
    /// committed when the object is opened. A second attach for writing,
    /// in this process or another, fails with [`PmoError::ObjectBusy`]
    /// until the first handle is dropped ([`Pool::open_object_with`] can
    /// wait instead).
    pub fn open_object(&self, name: &str, perm: Perm, key: Option<&[u8]>) -> Result<ObjectHandle> {
        self.open_object_with(name, perm, key, AttachOptions::default())
    }

    /// [`Pool::open_object`] with options.
    pub fn open_object_with(
        &self,
        name: &str,
        perm: Perm,
        key: Option<&[u8]>,
        opts: AttachOptions,
    ) -> Result<ObjectHandle> {
        let r = self.open_object_unguarded(name, perm, key, opts);
        self.inner.medium.guarded(r)
    }

    fn open_object_unguarded(
        &self,
        name: &str,
        perm: Perm,
        key: Option<&[u8]>,
        opts: AttachOptions,
    ) -> Result<ObjectHandle> {
        let inner = &self.inner;
        if perm == Perm::Write && inner.access != Access::ReadWrite {
            return Err(PmoError::PoolReadOnly {
                path: inner.medium.path.clone(),
                op: "attaching for writing",
            });
        }
        let shared = loop {
            // The latest committed version of the object.
            let shared = {
                let _m = inner.meta()?;
                inner.refresh()?;
                inner.find(name)?
            };
            if perm == Perm::Read {
                break shared;
            }
            let slot = shared.slot;
            inner.lock_object(name, slot, opts.wait)?;
            // Holding the object lock, its slot cannot change under us:
            // read the version the last writer committed.
            let again = {
                let _m = inner.meta();
                let r = _m.and_then(|_m| {
                    inner.refresh()?;
                    inner.find(name)
                });
                match r {
                    Ok(o) => o,
                    Err(e) => {
                        inner.unlock_object(slot);
                        return Err(e);
                    }
                }
            };
            if again.slot == slot {
                break again;
            }
            // Destroyed and created again elsewhere meanwhile: retry.
            inner.unlock_object(slot);
        };
        if perm == Perm::Write {
            shared.writer.store(true, Ordering::Release);
        }
        shared.handles.fetch_add(1, Ordering::AcqRel);
        // From here, dropping the handle on error releases the object.
        let handle = ObjectHandle {
            shared: shared.clone(),
            pool: inner.clone(),
            perm,
        };
        shared.authenticate(key, inner.header.pool_id)?;
        shared.check_tables(inner)?;
        inner.check_object_freshness(&shared)?;
        if perm == Perm::Write {
            shared.begin_write(inner)?;
        }
        Ok(handle)
    }

    /// The seed's `pdestroy(name, key)`: with the right key, delete the
    /// object and give its frames back. Refused while it is attached.
    pub fn pdestroy(&self, name: &str, key: Option<&[u8]>) -> Result<()> {
        let base = self.inner.find(name).map(|o| o.base as usize);
        let r = self.inner.pdestroy(name, key);
        self.inner.medium.guarded(r)?;
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
        self.attach_with(name, perm, key, mode, AttachOptions::default())
    }

    /// [`Pool::attach`] with options (e.g. wait for another writer).
    pub fn attach_with(
        &self,
        name: &str,
        perm: Perm,
        key: Option<&[u8]>,
        mode: Mode,
        opts: AttachOptions,
    ) -> Result<Attachment> {
        let handle = self.open_object_with(name, perm, key, opts)?;
        Attachment::attach(Arc::new(handle), perm, mode).map_err(|source| PmoError::Attach {
            name: name.to_string(),
            source: Box::new(source),
        })
    }

    /// psync of several attachments of this pool, **all or nothing**: the
    /// pages written since each one's last psync are staged, then one group
    /// commit makes every object's new version durable together, or none
    /// of them (a crash at any point leaves every object at its old
    /// version, or every object at its new one). Each attachment must be
    /// attached for writing through this open of this pool (refused with
    /// [`PmoError::NotInGroupPool`] or [`PmoError::ReadOnly`]), at most
    /// once ([`PmoError::DuplicateInGroup`]), at most [`MAX_GROUP`]
    /// attachments ([`PmoError::GroupTooLarge`]). Returns each
    /// attachment's [`PsyncStats`], in the order given. On error nothing is
    /// committed and the pages stay dirty, as with psync.
    ///
    /// The commit ([`Pool::psync_many_handles`]): every object's new
    /// tables and root out of place, then a *group commit record* (each
    /// slot's new directory record, under a group id and a SHA-256) made
    /// durable, then the slot records flipped, then the group record
    /// retired. An open that finds an intact group record with flips
    /// missing rolls them forward; an incomplete one is ignored; a damaged
    /// one quarantines the objects it names.
    pub fn psync_many(&self, attachments: &[&Attachment]) -> Result<Vec<PsyncStats>> {
        let mut handles = Vec::with_capacity(attachments.len());
        for a in attachments {
            let h = a
                .backing()
                .as_any()
                .and_then(|x| x.downcast_ref::<ObjectHandle>())
                .ok_or_else(|| PmoError::NotInGroupPool {
                    name: format!("at {:#x}", a.as_ptr() as usize),
                    path: self.inner.medium.path.clone(),
                    reason: "it is not an object of a pool (another PageBacking)".into(),
                })?;
            handles.push(h);
        }
        let order = self.group_order(&handles)?;
        let mut prepared = Vec::with_capacity(order.len());
        for &i in &order {
            let failed = match attachments[i].psync_prepare() {
                Ok(Some(p)) => {
                    prepared.push((i, p));
                    continue;
                }
                // A read-only mapping over a handle opened for writing.
                Ok(None) => PmoError::ReadOnly {
                    name: handles[i].name().to_string(),
                },
                Err(source) => PmoError::Attach {
                    name: handles[i].name().to_string(),
                    source: Box::new(source),
                },
            };
            for (j, p) in prepared {
                attachments[j].psync_finish(p, false);
            }
            return Err(failed);
        }
        let objs: Vec<Arc<ObjectShared>> =
            order.iter().map(|&i| handles[i].shared.clone()).collect();
        let r = self.inner.psync_group(&objs);
        let r = self.inner.medium.guarded(r);
        let mut stats = vec![PsyncStats::default(); attachments.len()];
        for (i, p) in prepared {
            stats[i] = attachments[i].psync_finish(p, r.is_ok());
        }
        r.map(|()| stats)
    }

    /// [`Pool::psync_many`] for object handles: commit the pages staged in
    /// each ([`ObjectHandle::stage`]) all or nothing. The same rules and
    /// errors.
    pub fn psync_many_handles(&self, handles: &[&ObjectHandle]) -> Result<()> {
        let order = self.group_order(handles)?;
        let objs: Vec<Arc<ObjectShared>> =
            order.iter().map(|&i| handles[i].shared.clone()).collect();
        let r = self.inner.psync_group(&objs);
        self.inner.medium.guarded(r)
    }

    /// Write each item's bytes into its object from offset 0 and commit
    /// them all with one group commit ([`Pool::psync_many_handles`]): what
    /// `nvmos pmo psync-many NAME FILE...` does. Items are `(name, key,
    /// bytes)`; each object is opened for writing (waiting for another
    /// writer with `opts.wait`; objects are taken in name order, so two
    /// such calls never wait for each other in a cycle). Returns each
    /// object's new epoch, in the order given. Nothing is committed if any
    /// name is given twice ([`PmoError::DuplicateInGroup`]), any object
    /// cannot be opened, or any bytes do not fit their object.
    pub fn write_many(&self, items: &[WriteItem<'_>], opts: AttachOptions) -> Result<Vec<u64>> {
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by_key(|&i| items[i].0);
        for w in order.windows(2) {
            if items[w[0]].0 == items[w[1]].0 {
                return Err(PmoError::DuplicateInGroup {
                    name: items[w[0]].0.to_string(),
                });
            }
        }
        if items.len() > MAX_GROUP {
            return Err(PmoError::GroupTooLarge {
                count: items.len(),
                max: MAX_GROUP,
            });
        }
        let mut handles: Vec<Option<ObjectHandle>> = (0..items.len()).map(|_| None).collect();
        for &i in &order {
            let (name, key, _) = items[i];
            handles[i] = Some(self.open_object_with(name, Perm::Write, key, opts)?);
        }
        let handles: Vec<ObjectHandle> = handles.into_iter().flatten().collect();
        for (h, (_, _, bytes)) in handles.iter().zip(items) {
            if bytes.len() > h.size() {
                return Err(PmoError::BadObjectSize {
                    name: h.name().to_string(),
                    size: bytes.len() as u64,
                    reason: format!(
                        "{} bytes to write; the object holds {}",
                        bytes.len(),
                        h.size()
                    ),
                });
            }
            h.write_at(0, bytes)?;
        }
        let refs: Vec<&ObjectHandle> = handles.iter().collect();
        self.psync_many_handles(&refs)?;
        Ok(handles.iter().map(|h| h.epoch()).collect())
    }

    /// Check the members of a group commit; their indices in slot order.
    fn group_order(&self, handles: &[&ObjectHandle]) -> Result<Vec<usize>> {
        if handles.len() > MAX_GROUP {
            return Err(PmoError::GroupTooLarge {
                count: handles.len(),
                max: MAX_GROUP,
            });
        }
        let mut slots = std::collections::BTreeMap::new();
        for (i, h) in handles.iter().enumerate() {
            let name = h.name().to_string();
            if !Arc::ptr_eq(&h.pool, &self.inner) {
                let reason = if h.pool.medium.path == self.inner.medium.path
                    || h.pool.header.pool_id == self.inner.header.pool_id
                {
                    "it was opened through another open of the pool (commit each open's objects with its own Pool)".to_string()
                } else {
                    format!(
                        "it belongs to pool {} (id {:016x})",
                        h.pool.medium.path.display(),
                        h.pool.header.pool_id
                    )
                };
                return Err(PmoError::NotInGroupPool {
                    name,
                    path: self.inner.medium.path.clone(),
                    reason,
                });
            }
            if h.perm != Perm::Write {
                return Err(PmoError::ReadOnly { name });
            }
            if slots.insert(h.shared.slot, i).is_some() {
                return Err(PmoError::DuplicateInGroup { name });
            }
        }
        Ok(slots.into_values().collect())
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
            state_missing: self.state_missing(),
        }
    }

    /// Wait until every psync of this open is recorded durably in the
    /// state store ([`StateCommit::Deferred`] hands the records to a
    /// thread; see [`crate::state`]): after it returns, rolling the pool
    /// back past any of them is refused at open. Returns the error of a
    /// deferred write that failed (the open then records nothing more).
    /// A no-op without a state store.
    pub fn sync_state(&self) -> Result<()> {
        self.inner.sync_state()
    }

    /// Set when this open went ahead without the state store the pool
    /// names ([`PoolOptions::allow_missing_state`]): which store, and why
    /// it is missing. Everything this open reads is then unprotected
    /// against rollback, and every report of it should say so.
    pub fn state_missing(&self) -> Option<String> {
        self.inner.state_missing.lock().clone()
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
        // Pages that failed because the file shrank are not damage to list.
        if let Some(e) = self.inner.medium.truncation() {
            return Err(e);
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

    /// Check the pool as `pmempool check` does, without keys: every
    /// directory record, every root (hash; structure), every page-table page
    /// against its root, every page of plain objects against its hash, the
    /// frame claims, and the state store. Reports every damaged or
    /// conflicting object (quarantined, never hiding the rest) instead of
    /// failing on the first. Encrypted pages and root MACs need the key:
    /// `verify` checks those.
    pub fn check_report(&self) -> CheckReport {
        let inner = &self.inner;
        let dir = inner.dir.lock();
        let mut objects = Vec::new();
        let mut in_use = 0u64;
        for (i, slot) in dir.iter().enumerate() {
            match slot {
                Slot::Free { .. } => {}
                Slot::Damaged {
                    name,
                    error,
                    frames,
                    ..
                } => {
                    in_use += frames.len() as u64;
                    objects.push(ObjectCheck {
                        slot: i,
                        name: name.clone().unwrap_or_else(|| format!("?slot{i}")),
                        encrypted: false,
                        ok: false,
                        status: format!("quarantined: {error}"),
                    });
                }
                Slot::Live(o) => {
                    in_use += o.frames().len() as u64;
                    let mut problem = None;
                    if !o.encrypted {
                        if let Err(e) = o.authenticate(None, inner.header.pool_id) {
                            problem = Some(e.to_string());
                        }
                    }
                    if problem.is_none() {
                        if let Err(e) = o.check_tables(inner) {
                            problem = Some(e.to_string());
                        }
                    }
                    let mut pages = 0;
                    if problem.is_none() && !o.encrypted {
                        let mut buf = vec![0u8; PAGE];
                        let mut bad = Vec::new();
                        for p in 0..o.pages {
                            match o.read_page(inner, p, &mut buf) {
                                Ok(()) => pages += 1,
                                Err(_) => bad.push(p),
                            }
                        }
                        if !bad.is_empty() {
                            problem = Some(format!(
                                "{} pages fail their hash: {:?}",
                                bad.len(),
                                &bad[..bad.len().min(16)]
                            ));
                        }
                    }
                    let epoch = o.committed.read().epoch;
                    objects.push(ObjectCheck {
                        slot: i,
                        name: o.name.clone(),
                        encrypted: o.encrypted,
                        ok: problem.is_none(),
                        status: match problem {
                            Some(p) => p,
                            None if o.encrypted => format!(
                                "ok at epoch {epoch}: record, root hash and structure, page tables (root MAC and pages need the key: verify)"
                            ),
                            None => format!(
                                "ok at epoch {epoch}: record, root, page tables and {pages} page hashes"
                            ),
                        },
                    });
                }
            }
        }
        CheckReport {
            truncated: inner.medium.truncation().map(|e| e.to_string()),
            path: inner.medium.path.clone(),
            pool_id: inner.header.pool_id,
            objects,
            notes: inner.notes.lock().clone(),
            state_mismatches: inner.mismatches.lock().clone(),
            group_record: match inner.read_group() {
                GroupState::Corrupt { reason, slots } => Some(format!(
                    "the group commit record (frame 0, byte {GROUP_AT}) is damaged ({reason}); it names slots {slots:?}, quarantined"
                )),
                _ => None,
            },
            frames_in_use: in_use,
            frames_free: inner.free_frames_in(&dir),
            state_missing: inner.state_missing.lock().clone(),
        }
    }

    /// Repair as `pmempool repair` does: keep every intact object as it
    /// is, leave every quarantined one untouched (its frames stay
    /// reserved: nothing that cannot be verified is changed), clear
    /// incomplete and damaged *stale* directory records, and zero every
    /// free frame that no record of any object references, current or
    /// older. While any object is quarantined (or the group commit record
    /// is damaged) no frame is zeroed: a damaged record may point at
    /// frames that cannot all be found, and what cannot be found cannot
    /// be shown to be free. Needs the pool open for writing and nothing
    /// attached.
    pub fn repair(&self) -> Result<RepairReport> {
        let inner = &self.inner;
        inner.writable("repair")?;
        inner.exclusive("repair", || self.repair_alone())
    }

    fn repair_alone(&self) -> Result<RepairReport> {
        let inner = &self.inner;
        let dir = inner.dir.lock();
        let mut report = RepairReport::default();
        let range = inner.data_range();
        let mut used = vec![false; (range.end - range.start) as usize];
        for (i, slot) in dir.iter().enumerate() {
            let frames = match slot {
                Slot::Live(o) => {
                    if o.handles.load(Ordering::Acquire) != 0 {
                        return Err(PmoError::AlreadyAttached {
                            name: o.name.clone(),
                        });
                    }
                    report.salvaged.push(o.name.clone());
                    // The current version, and what the older record still
                    // references (followed as far as it goes).
                    let mut frames = o.frames();
                    let older = record_offset(i, 1 - o.committed.read().which);
                    if let Some(rec) = Record::raw(inner.medium.slice(older, RECORD)) {
                        if rec.state == SlotState::Live {
                            frames.extend(inner.record_claims(&[rec], false));
                        }
                    }
                    frames
                }
                Slot::Damaged {
                    name,
                    error,
                    frames,
                    ..
                } => {
                    report.quarantined.push(format!(
                        "{} (slot {i}): {error}",
                        name.clone().unwrap_or_else(|| format!("?slot{i}"))
                    ));
                    frames.clone()
                }
                // A free slot's records name a destroyed object's last
                // version (scrubbed) or, when incomplete with a whole body,
                // what may be a committed object whose sequence word was
                // damaged (kept: see `whole_body`).
                Slot::Free { .. } => {
                    let recs: Vec<Record> = (0..2)
                        .map(|w| inner.medium.slice(record_offset(i, w), RECORD))
                        .filter(|b| Record::classify(b) == RecordState::Incomplete && whole_body(b))
                        .filter_map(Record::raw)
                        .filter(|r| r.state == SlotState::Live)
                        .collect();
                    inner.record_claims(&recs, false)
                }
            };
            for f in frames {
                if range.contains(&f) {
                    used[(f - range.start) as usize] = true;
                }
            }
            // The record that is not current, if incomplete or damaged and
            // provably stale (the slot resolved to an intact current one).
            let current = match slot {
                Slot::Live(o) => Some(o.committed.read().which),
                Slot::Free { which, .. } => *which,
                Slot::Damaged { .. } => continue,
            };
            for w in 0..2 {
                if Some(w) == current {
                    continue;
                }
                let off = record_offset(i, w);
                let state = Record::classify(inner.medium.slice(off, crate::layout::RECORD));
                // An incomplete record whose body is whole is a torn write
                // of step 3 only, or a whole record whose sequence word was
                // damaged to zero: the two cannot be told apart, so it is
                // kept (it is not current either way, and the frames it
                // names were kept out of the scrub above).
                if state == RecordState::Incomplete && whole_body(inner.medium.slice(off, RECORD)) {
                    continue;
                }
                if matches!(state, RecordState::Incomplete | RecordState::Corrupt { .. }) {
                    // Rewritten as a whole stale record (epoch n - 1, the
                    // current fields: if it ever became current the root's
                    // epoch would not match it) or, for epoch 1, emptied.
                    let cur = Record::classify(
                        inner
                            .medium
                            .slice(record_offset(i, 1 - w), crate::layout::RECORD),
                    );
                    let bytes = match cur {
                        RecordState::Valid(c) if c.seq > 1 => Record {
                            seq: c.seq - 1,
                            ..c
                        }
                        .encode(),
                        _ => [0u8; crate::layout::RECORD],
                    };
                    inner
                        .medium
                        .slice_mut(off, crate::layout::RECORD)
                        .copy_from_slice(&bytes);
                    inner.medium.persist(off, crate::layout::RECORD);
                    report.records_cleared.push(format!("slot {i} record {w}"));
                }
            }
        }
        let quarantined = report.quarantined.len();
        report.scrub_skipped = if quarantined > 0 {
            Some(format!(
                "{quarantined} quarantined objects may reference frames that cannot all be found: no free frame was zeroed"
            ))
        } else if matches!(inner.read_group(), GroupState::Corrupt { .. }) {
            Some("the group commit record is damaged: the versions it names cannot be followed, so no free frame was zeroed".into())
        } else {
            None
        };
        for (k, &u) in used.iter().enumerate() {
            if !u && report.scrub_skipped.is_none() {
                let f = range.start + k as u64;
                let frame = inner.frame_mut(f);
                if frame.iter().any(|&b| b != 0) {
                    frame.fill(0);
                    inner.medium.persist(f as usize * PAGE, PAGE);
                    report.frames_scrubbed += 1;
                }
            }
        }
        inner.medium.drain()?;
        Ok(report)
    }

    /// Accept a deliberate restore: re-base the state store's record of
    /// this pool to the pool as it is now (every intact slot's object id,
    /// name and epoch), so a pool restored from a backup on purpose opens
    /// again. Quarantined slots keep their store entries. Records of other
    /// pool ids at this file's path are dropped. Needs the pool open for
    /// writing (no other process can commit meanwhile) and a state store;
    /// open it with [`PoolOptions::tolerate_state_mismatch`] (the open
    /// itself would refuse the rollback). When the store holds no record
    /// of this pool under the identity the pool names (lost, emptied,
    /// another pool's, another store), a new record is made under a new
    /// identity, which the pool then names ([`AcceptReport::rebound`]).
    /// Nonce safety does not depend on the store (every write attachment
    /// draws a fresh salt), so going back in epochs here repeats no (key,
    /// nonce) pair.
    pub fn accept_rollback(&self) -> Result<AcceptReport> {
        self.inner.writable("accepting a rollback")?;
        self.inner
            .exclusive("accepting a rollback", || self.accept_alone())
    }

    fn accept_alone(&self) -> Result<AcceptReport> {
        let inner = &self.inner;
        let Some(store) = &inner.state else {
            return Err(PmoError::State {
                path: inner.medium.path.clone(),
                what: "no state store in use: there is nothing to re-base".into(),
            });
        };
        // This open's deferred records first, so none lands after the
        // re-based state.
        inner.sync_state()?;
        let abs = inner
            .medium
            .path
            .canonicalize()
            .unwrap_or_else(|_| inner.medium.path.clone());
        let id = inner.header.pool_id;
        let mut report = AcceptReport {
            accepted: inner.mismatches.lock().clone(),
            ..AcceptReport::default()
        };
        if let Some(m) = inner.state_missing.lock().clone() {
            if !report.accepted.contains(&m) {
                report.accepted.push(m);
            }
        }
        for old in store.other_ids_at(&abs, id) {
            store.forget(old)?;
            report.forgotten_ids.push(old);
        }
        // The store's record of this pool, if it is one: a record of
        // another pool (or none) is replaced by a new one, under a new
        // identity the pool then names.
        let before = store.load(id)?;
        let (before, store_id) = if before.store_id != 0 && before.pool_id == id {
            let sid = before.store_id;
            (before, sid)
        } else {
            let sid = new_store_id();
            report.rebound = Some(format!(
                "state store record {} created for the pool as it is, identity {sid:016x}",
                store.file(id).display()
            ));
            (PoolState::default(), sid)
        };
        let mut slots = std::collections::BTreeMap::new();
        {
            let dir = inner.dir.lock();
            for (i, slot) in dir.iter().enumerate() {
                let old = before.slots.get(&i);
                let new = match slot {
                    Slot::Live(o) => Some(SlotRecord {
                        obj_id: o.obj_id,
                        name: o.name.clone(),
                        encrypted: o.encrypted,
                        epoch: o.committed.read().epoch,
                        kind: Kind::Live,
                    }),
                    // A tombstone keeps the name and id the store knew.
                    Slot::Free { seq, .. } if *seq > 0 => old.map(|r| SlotRecord {
                        epoch: *seq,
                        kind: Kind::Destroyed,
                        ..r.clone()
                    }),
                    Slot::Free { .. } => None,
                    Slot::Damaged { name, .. } => {
                        if let Some(r) = old {
                            report.left.push(format!(
                                "object {:?} (slot {i}): quarantined, store entry kept at epoch {}",
                                name.as_deref().unwrap_or(&r.name),
                                r.epoch
                            ));
                        }
                        old.cloned()
                    }
                };
                if new.as_ref() != old {
                    let name = new.as_ref().or(old).map_or("?", |r| r.name.as_str());
                    let show = |r: Option<&SlotRecord>| match r {
                        None => "none".to_string(),
                        Some(r) => format!("{:?} epoch {}", r.kind, r.epoch).to_lowercase(),
                    };
                    let (a, b) = (
                        old.map_or(0, |r| r.epoch),
                        new.as_ref().map_or(0, |r| r.epoch),
                    );
                    report.epochs_back += a.saturating_sub(b);
                    report.rebased.push(format!(
                        "object {name:?} (slot {i}): {} -> {}",
                        show(old),
                        show(new.as_ref())
                    ));
                }
                if let Some(r) = new {
                    slots.insert(i, r);
                }
            }
        }
        store.update(
            id,
            &abs,
            |st| {
                st.slots = slots;
                st.store_id = store_id;
                st.pool_id = id;
            },
            &|| inner.medium.crash_hook(),
        )?;
        // Then the pool names it. A crash in between leaves the pool naming
        // its old identity, refused as before; accepting again completes it.
        inner.name_store(store_id)?;
        inner.bound.store(true, Ordering::Release);
        *inner.state_missing.lock() = None;
        inner.mismatches.lock().clear();
        Ok(report)
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

/// One object's part of [`Pool::write_many`]: its name, its key (`None`
/// for a plain object) and the bytes written from offset 0.
pub type WriteItem<'a> = (&'a str, Option<&'a [u8]>, &'a [u8]);

/// Arenas have at least this many frames (smaller pools have one arena).
const ARENA_MIN: u64 = 64;
/// At most this many arenas.
const MAX_ARENAS: u64 = 64;

/// Every open's read lock on the presence byte ([`crate::locks`]).
fn presence(file: &File, path: &Path) -> Result<()> {
    match locks::set(file, locks::PRESENCE, locks::Kind::Read, false) {
        Ok(true) => Ok(()),
        Ok(false) => Err(PmoError::PoolBusy {
            path: path.to_owned(),
            held: "for repair or accepting a rollback",
            wanted: "any",
        }),
        Err(source) => Err(PmoError::Io {
            op: "locking",
            path: path.to_owned(),
            source,
        }),
    }
}

/// This open's hold on the pool-wide metadata lock (re-entrant).
pub(crate) struct MetaGuard<'a> {
    inner: &'a PoolInner,
    depth: parking_lot::ReentrantMutexGuard<'a, std::cell::Cell<usize>>,
}

impl Drop for MetaGuard<'_> {
    fn drop(&mut self) {
        let n = self.depth.get() - 1;
        self.depth.set(n);
        if n == 0 {
            // Unlocking a lock we hold cannot fail on an open descriptor.
            let _ = locks::set(&self.inner.file, locks::META, locks::Kind::Unlock, false);
        }
    }
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

impl Loaded {
    fn frames(&self) -> Vec<u64> {
        let mut v = self.root_frames.clone();
        v.extend(self.root.tables.iter().map(|t| t.0).filter(|&p| p != 0));
        v.extend(self.entries.iter().map(|e| e.pfn).filter(|&p| p != 0));
        v
    }
}

/// A slot's two records, resolved.
enum View {
    Free {
        seq: u64,
        which: Option<usize>,
    },
    Current(Record, usize),
    /// Not a state a crash can leave: quarantined. `fields`: the record
    /// that may be current, as written, to claim its frames.
    Bad {
        reason: String,
        fields: Option<Record>,
    },
}

/// Which record of slot `s` is current. The previous record is used only
/// when the other is *provably* a torn write (an incomplete one: sequence
/// word zero, see [`RecordState`]) or is damaged but provably older; that
/// fallback is noted. A damaged record that may be the current one is
/// never skipped.
fn resolve_slot(s: usize, recs: &[RecordState], notes: &mut Vec<String>) -> View {
    use RecordState as R;
    match (&recs[0], &recs[1]) {
        (R::Valid(a), R::Valid(b)) => {
            if a.seq == b.seq {
                View::Bad {
                    reason: format!("both directory records claim epoch {}", a.seq),
                    fields: Some(a.clone()),
                }
            } else if a.seq > b.seq {
                View::Current(a.clone(), 0)
            } else {
                View::Current(b.clone(), 1)
            }
        }
        (R::Valid(a), other) | (other, R::Valid(a)) => {
            let which = if matches!(recs[0], R::Valid(_)) { 0 } else { 1 };
            match other {
                // Records alternate: epoch n > 1 in one means the other was
                // written (epoch n - 1) and is never emptied again.
                R::Empty if a.seq > 1 => View::Bad {
                    reason: format!(
                        "directory record {} was erased (record {which} has epoch {}, so it held epoch {}): records do not empty themselves",
                        1 - which,
                        a.seq,
                        a.seq - 1
                    ),
                    fields: Some(a.clone()),
                },
                R::Empty => View::Current(a.clone(), which),
                R::Incomplete => {
                    notes.push(format!(
                        "slot {s}: record {} holds an incomplete write (a crash during an update): epoch {} is current",
                        1 - which,
                        a.seq
                    ));
                    View::Current(a.clone(), which)
                }
                R::Corrupt {
                    seq_hint,
                    reason,
                    fields,
                } => {
                    if *seq_hint < a.seq {
                        notes.push(format!(
                            "slot {s}: stale record {} (epoch {seq_hint}) is damaged ({reason}); epoch {} is current",
                            1 - which,
                            a.seq
                        ));
                        View::Current(a.clone(), which)
                    } else {
                        View::Bad {
                            reason: format!(
                                "directory record {} fails its check ({reason}) and may be the current one (epoch {seq_hint}, the other record has {}): not a torn write, so the older record is not used",
                                1 - which,
                                a.seq
                            ),
                            fields: Some(fields.clone()),
                        }
                    }
                }
                R::Valid(_) => unreachable!("matched above"),
            }
        }
        (R::Empty, R::Empty) => View::Free {
            seq: 0,
            which: None,
        },
        (R::Empty, R::Incomplete) | (R::Incomplete, R::Empty) => {
            notes.push(format!(
                "slot {s}: an incomplete first write (a crash during pcreate) is ignored"
            ));
            View::Free {
                seq: 0,
                which: None,
            }
        }
        (a, b) => {
            let what = |r: &RecordState| match r {
                R::Empty => "empty".to_string(),
                R::Incomplete => "incomplete".to_string(),
                R::Corrupt {
                    seq_hint, reason, ..
                } => format!("damaged ({reason}, epoch {seq_hint})"),
                R::Valid(r) => format!("epoch {}", r.seq),
            };
            let fields = [a, b].into_iter().find_map(|r| match r {
                R::Corrupt { fields, .. } => Some(fields.clone()),
                _ => None,
            });
            View::Bad {
                reason: format!(
                    "no valid directory record: record 0 {}, record 1 {}",
                    what(a),
                    what(b)
                ),
                fields,
            }
        }
    }
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
        loop {
            if let Ok(p) = self.alloc.alloc(Request::single(0)) {
                return Ok(p.0);
            }
            // None free in the arenas held: pick up what other writers
            // freed there, else take another arena.
            if !self.grow()? {
                let owned = self.owned.lock().iter().filter(|&&o| o).count();
                return Err(PmoError::PoolFull {
                    what: format!(
                        "no free frame for object {name:?} (this open holds {owned} of {} arenas; the others are held by other writers or full)",
                        self.owned.lock().len()
                    ),
                });
            }
        }
    }

    /// The arena frame `f` is in.
    fn arena_of(&self, f: u64) -> usize {
        let n = self.owned.lock().len();
        (((f - DATA_START) / self.arena_len) as usize).min(n - 1)
    }

    /// Arena `k`'s frames.
    fn arena_range(&self, k: usize) -> std::ops::Range<u64> {
        let n = self.owned.lock().len();
        let start = DATA_START + k as u64 * self.arena_len;
        let end = if k + 1 == n {
            self.header.total_pages
        } else {
            start + self.arena_len
        };
        start..end
    }

    /// Take the pool-wide metadata lock (waits; re-entrant in a thread).
    pub(crate) fn meta(&self) -> Result<MetaGuard<'_>> {
        let depth = self.meta.lock();
        if depth.get() == 0 {
            locks::set(&self.file, locks::META, locks::Kind::Write, true).map_err(|source| {
                PmoError::Io {
                    op: "taking the metadata lock of",
                    path: self.medium.path.clone(),
                    source,
                }
            })?;
        }
        depth.set(depth.get() + 1);
        Ok(MetaGuard { inner: self, depth })
    }

    /// More frames for this open: first those other writers' commits freed
    /// in the arenas it holds, then another arena. `false`: neither.
    fn grow(&self) -> Result<bool> {
        if self.access != Access::ReadWrite {
            return Ok(false);
        }
        let _m = self.meta()?;
        let before = self.alloc.stats().free_frames;
        self.refresh()?;
        if self.alloc.stats().free_frames > before {
            return Ok(true);
        }
        let n = self.owned.lock().len();
        // Start at a different arena in each open, so two writers rarely
        // try the same ones.
        let first = (self as *const Self as usize / 64 + std::process::id() as usize) % n;
        for i in 0..n {
            let k = (first + i) % n;
            if self.owned.lock()[k] {
                continue;
            }
            let got = locks::set(&self.file, locks::arena(k), locks::Kind::Write, false).map_err(
                |source| PmoError::Io {
                    op: "locking an arena of",
                    path: self.medium.path.clone(),
                    source,
                },
            )?;
            if !got {
                continue;
            }
            self.owned.lock()[k] = true;
            // Every frame of the arena no slot holds is free: the arena's
            // last holder is gone, and with it whatever it had in flight.
            let range = self.arena_range(k);
            let mut used = vec![false; (range.end - range.start) as usize];
            for slot in self.dir.lock().iter() {
                for f in slot_frames(slot) {
                    if range.contains(&f) {
                        used[(f - range.start) as usize] = true;
                    }
                }
            }
            let mut freed = 0;
            for (i, &u) in used.iter().enumerate() {
                if !u {
                    let f = range.start + i as u64;
                    self.alloc
                        .free(Pfn(f), Request::single(0))
                        .map_err(|e| self.inconsistent(format!("claiming arena {k}: {e}")))?;
                    freed += 1;
                }
            }
            if freed > 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Bring this open's view of the directory up to date with the medium
    /// (other writers' commits, creates and destroys). Frames another
    /// writer's commit stopped using, in arenas this open holds, become
    /// free here. Caller holds the metadata lock.
    pub(crate) fn refresh(&self) -> Result<()> {
        let mut settled = Vec::new();
        let group = self.settle_group(&mut settled)?;
        let mut dir = self.dir.lock();
        let mut notes = Vec::new();
        for s in 0..SLOTS {
            if matches!(&dir[s], Slot::Live(o) if o.writer.load(Ordering::Acquire)) {
                // Only this open changes a slot it writes.
                continue;
            }
            let recs: Vec<RecordState> = (0..2)
                .map(|w| {
                    Record::classify(
                        self.medium
                            .slice(record_offset(s, w), crate::layout::RECORD),
                    )
                })
                .collect();
            let view = resolve_slot(s, &recs, &mut notes);
            let view = overlay_group(s, view, &group);
            let same = match (&dir[s], &view) {
                (Slot::Free { seq, which }, View::Free { seq: q, which: w }) => {
                    seq == q && which == w
                }
                (Slot::Free { seq, which }, View::Current(rec, w))
                    if rec.state == SlotState::Destroyed =>
                {
                    *seq == rec.seq && *which == Some(*w)
                }
                (Slot::Live(o), View::Current(rec, w)) => {
                    let c = o.committed.read();
                    c.epoch == rec.seq && c.which == *w && o.obj_id == rec.obj_id
                }
                // Quarantined for the life of this open: nothing that
                // cannot be verified is reloaded (only `repair`, alone on
                // the pool, changes a damaged slot).
                (Slot::Damaged { .. }, _) => true,
                _ => false,
            };
            if same {
                continue;
            }
            let old: std::collections::HashSet<u64> = slot_frames(&dir[s]).into_iter().collect();
            let (slot, new) = self.slot_from_view(s, view);
            let new: std::collections::HashSet<u64> = new.into_iter().collect();
            let owned = self.owned.lock().clone();
            for &f in old.difference(&new) {
                if self.data_range().contains(&f) && owned[self.arena_of(f)] {
                    let _ = self.alloc.free(Pfn(f), Request::single(0));
                }
            }
            dir[s] = slot;
        }
        quarantine_clashes(&mut dir);
        drop(dir);
        // What settling a dead writer's group record did is reported by
        // `check` (this open's other refresh findings were seen at open).
        if !settled.is_empty() {
            let mut all = self.notes.lock();
            for n in settled {
                if !all.contains(&n) {
                    all.push(n);
                }
            }
        }
        Ok(())
    }

    /// The current record's sequence number of `slot` on the medium now.
    pub(crate) fn medium_seq(&self, slot: usize) -> u64 {
        let recs: Vec<RecordState> = (0..2)
            .map(|w| {
                Record::classify(
                    self.medium
                        .slice(record_offset(slot, w), crate::layout::RECORD),
                )
            })
            .collect();
        match resolve_slot(slot, &recs, &mut Vec::new()) {
            View::Free { seq, .. } => seq,
            View::Current(r, _) => r.seq,
            View::Bad { .. } => 0,
        }
    }

    /// Take slot `slot`'s object lock for writing `name`.
    fn lock_object(&self, name: &str, slot: usize, wait: bool) -> Result<()> {
        loop {
            if self.writing.lock().insert(slot) {
                break;
            }
            if !wait {
                return Err(PmoError::AlreadyAttached {
                    name: name.to_string(),
                });
            }
            // Another handle of this open: it holds no lock we could wait
            // on in the kernel, so poll.
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        match locks::set(&self.file, locks::object(slot), locks::Kind::Write, wait) {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.writing.lock().remove(&slot);
                Err(PmoError::ObjectBusy {
                    name: name.to_string(),
                    holder: "another open of the pool (another process, or another Pool::open in this one)".into(),
                })
            }
            Err(source) => {
                self.writing.lock().remove(&slot);
                Err(PmoError::Io {
                    op: "locking an object of",
                    path: self.medium.path.clone(),
                    source,
                })
            }
        }
    }

    /// Release slot `slot`'s object lock.
    pub(crate) fn unlock_object(&self, slot: usize) {
        if self.writing.lock().remove(&slot) {
            let _ = locks::set(&self.file, locks::object(slot), locks::Kind::Unlock, false);
        }
    }

    /// Run `op` with the pool to this open alone: the presence lock
    /// converted to a write lock (fails while any other open exists).
    fn exclusive<T>(&self, what: &'static str, op: impl FnOnce() -> Result<T>) -> Result<T> {
        let io = |source| PmoError::Io {
            op: "locking",
            path: self.medium.path.clone(),
            source,
        };
        if !locks::set(&self.file, locks::PRESENCE, locks::Kind::Write, false).map_err(io)? {
            return Err(PmoError::PoolBusy {
                path: self.medium.path.clone(),
                held: "by another open",
                wanted: what,
            });
        }
        let r = (|| {
            let _m = self.meta()?;
            self.refresh()?;
            op()
        })();
        locks::set(&self.file, locks::PRESENCE, locks::Kind::Read, false).map_err(io)?;
        r
    }

    pub fn free_frames(&self, frames: &[u64]) {
        let owned = self.owned.lock().clone();
        for &f in frames {
            // A frame outside this open's arenas is free on the medium
            // now; the arena's holder picks it up at its next refresh.
            if !self.data_range().contains(&f) || !owned[self.arena_of(f)] {
                continue;
            }
            // Frames come from our own bookkeeping; a refusal would mean a
            // bug, and the frame then simply stays allocated (leaked until
            // the pool is reopened, which rebuilds the allocator).
            let _ = self.alloc.free(Pfn(f), Request::single(0));
        }
    }

    /// Data frames no object holds, as this open sees the directory.
    fn free_frames_count(&self) -> u64 {
        self.free_frames_in(&self.dir.lock())
    }

    /// [`PoolInner::free_frames_count`] with the directory locked.
    fn free_frames_in(&self, dir: &[Slot]) -> u64 {
        let range = self.data_range();
        let mut used = vec![false; (range.end - range.start) as usize];
        for slot in dir.iter() {
            for f in slot_frames(slot) {
                if range.contains(&f) {
                    used[(f - range.start) as usize] = true;
                }
            }
        }
        used.iter().filter(|&&u| !u).count() as u64
    }

    /// A root stored from frame `pfn` (its frame list, then the blob), with
    /// `len` bytes of blob, or all its frames hold when `len` is `None`;
    /// `None` when the frame list leaves the data area.
    fn stored_root(&self, pfn: u64, len: Option<u32>) -> Option<(Vec<u64>, Vec<u8>)> {
        let range = self.data_range();
        if !range.contains(&pfn) {
            return None;
        }
        let first = self.frame(pfn);
        let n = read_u64(first, 0) as usize;
        if n > MAX_ROOT_FRAMES - 1 {
            return None;
        }
        let mut frames = vec![pfn];
        for i in 0..n {
            let f = read_u64(first, 8 + 8 * i);
            if !range.contains(&f) {
                return None;
            }
            frames.push(f);
        }
        let stored_len = match len {
            Some(l) => 8 + 8 * n + l as usize,
            None => frames.len() * PAGE,
        };
        if stored_len > frames.len() * PAGE {
            return None;
        }
        let mut stored = Vec::with_capacity(frames.len() * PAGE);
        for &f in &frames {
            stored.extend_from_slice(self.frame(f));
        }
        stored.truncate(stored_len);
        Some((frames, stored))
    }

    /// Every frame the records `recs` reference, followed as far as they go
    /// and trusted no further than that (to keep a quarantined object's
    /// frames reserved, and a live object's older version out of repair's
    /// scrub): the root each names, its tables, and their entries' data
    /// frames, all within the data area. A record whose root frame does not
    /// hold the root it hashes may have had its root pointer damaged: with
    /// `search`, the data frames are searched for a stored root matching
    /// the record's hash and length (one pass for all such records; a root
    /// is told by its magic, so a frame costs one word to rule out), so a
    /// flipped root pointer does not leave the object's frames unreserved.
    fn record_claims(&self, recs: &[Record], search: bool) -> Vec<u64> {
        let range = self.data_range();
        let matches = |stored: &[u8], rec: &Record| sha256(&[stored])[..16] == rec.root_sha;
        let mut roots: Vec<(Vec<u64>, Vec<u8>)> = Vec::new();
        let mut lost = Vec::new();
        for rec in recs {
            match self.stored_root(rec.root_pfn, Some(rec.root_len)) {
                Some((frames, stored)) if matches(&stored, rec) => roots.push((frames, stored)),
                _ => lost.push(rec),
            }
        }
        if search && !lost.is_empty() {
            for f in range.clone() {
                let first = self.frame(f);
                // The blob, and so its magic, starts in the first frame.
                let at = match usize::try_from(read_u64(first, 0)) {
                    Ok(n) if n < (PAGE - 8 - ROOT_MAGIC.len()) / 8 => 8 + 8 * n,
                    _ => continue,
                };
                if &first[at..at + ROOT_MAGIC.len()] != ROOT_MAGIC {
                    continue;
                }
                lost.retain(|rec| match self.stored_root(f, Some(rec.root_len)) {
                    Some((frames, stored)) if matches(&stored, rec) => {
                        roots.push((frames, stored));
                        false
                    }
                    _ => true,
                });
                if lost.is_empty() {
                    break;
                }
            }
        }
        // What the unmatched ones point at, unverified.
        for rec in lost {
            if range.contains(&rec.root_pfn) {
                match self.stored_root(rec.root_pfn, None) {
                    Some(r) => roots.push(r),
                    None => roots.push((vec![rec.root_pfn], Vec::new())),
                }
            }
        }
        let mut out = Vec::new();
        for (frames, stored) in roots {
            out.extend_from_slice(&frames);
            let blob = stored.get(8 * frames.len()..).unwrap_or(&[]);
            for (pfn, _, used) in Root::peek_tables(blob).unwrap_or_default() {
                if !range.contains(&pfn) {
                    continue;
                }
                out.push(pfn);
                let table = self.frame(pfn);
                for k in 0..used {
                    let e = Entry::decode(&table[k * ENTRY..(k + 1) * ENTRY]);
                    if range.contains(&e.pfn) {
                        out.push(e.pfn);
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
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
        let (root, mac) = Root::decode(blob).map_err(|e| {
            let path = self.medium.path.display();
            (
                Root::peek_name(blob),
                format!("root in pool {path}: {e}"),
                held.clone(),
            )
        })?;
        let name = Some(root.name.clone());
        if root.obj_id != rec.obj_id {
            return Err((name, "root belongs to another object".into(), held));
        }
        if root.pool_id != self.header.pool_id {
            return Err((
                name,
                format!(
                    "root bound to pool {:016x}, but this pool's id is {:016x} (object copied from another pool, or the pool id changed)",
                    root.pool_id, self.header.pool_id
                ),
                held,
            ));
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

    /// A slot as its resolved records say, and the frames it claims (those
    /// a conflict with another object is judged on). A quarantined slot
    /// also keeps reserved whatever else either of its records references
    /// ([`PoolInner::record_claims`]): its current version may be the one
    /// a damaged record points at, and no frame of it may be handed out or
    /// zeroed.
    fn slot_from_view(&self, s: usize, view: View) -> (Slot, Vec<u64>) {
        let (mut slot, claims) = self.slot_from_view_loaded(s, view);
        if let Slot::Damaged { frames, .. } = &mut slot {
            let recs: Vec<Record> = (0..2)
                .filter_map(|w| Record::raw(self.medium.slice(record_offset(s, w), RECORD)))
                .filter(|r| r.state == SlotState::Live)
                .collect();
            frames.extend(self.record_claims(&recs, true));
            frames.sort_unstable();
            frames.dedup();
        }
        (slot, claims)
    }

    /// [`PoolInner::slot_from_view`] without the extra reservations.
    fn slot_from_view_loaded(&self, s: usize, view: View) -> (Slot, Vec<u64>) {
        match view {
            View::Free { seq, which } => (Slot::Free { seq, which }, Vec::new()),
            View::Current(rec, which) if rec.state == SlotState::Destroyed => (
                Slot::Free {
                    seq: rec.seq,
                    which: Some(which),
                },
                Vec::new(),
            ),
            View::Current(rec, which) => match self.load(&rec) {
                Ok(l) if l.root.slot as usize != s => {
                    let frames = l.frames();
                    (
                        Slot::Damaged {
                            name: Some(l.root.name.clone()),
                            error: format!(
                                "its root names directory slot {}, its record is in slot {s} (record moved)",
                                l.root.slot
                            ),
                            frames: frames.clone(),
                            loaded: None,
                        },
                        frames,
                    )
                }
                Ok(l) => {
                    let committed = Committed {
                        epoch: rec.seq,
                        which,
                        store_id: l.root.store_id,
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
                        loaded: None,
                    },
                    frames,
                ),
            },
            View::Bad { reason, fields } => {
                // Claim what the damaged record names, if it loads, so
                // nothing of an object we cannot verify is reused.
                let (name, frames) = match fields.map(|f| self.load(&f)) {
                    Some(Ok(l)) => (Some(l.root.name.clone()), l.frames()),
                    Some(Err((name, _, frames))) => (name, frames),
                    None => (None, Vec::new()),
                };
                (
                    Slot::Damaged {
                        name,
                        error: reason,
                        frames: frames.clone(),
                        loaded: None,
                    },
                    frames,
                )
            }
        }
    }

    /// Read the directory, load every live object, and rebuild the
    /// allocator: every frame reachable from a current record (or claimed
    /// by a quarantined object) is in use, every other data frame free.
    ///
    /// Nothing here makes the whole pool unopenable: a slot whose records
    /// fail their checks, whose root or tables do not load, or whose frames
    /// another intact object also claims is *quarantined* (kept, its frames
    /// reserved, reported by `ls`, `check` and every attach of it).
    fn load_directory(&self) -> Result<()> {
        let range = self.data_range();
        let mut notes = Vec::new();
        let group = self.settle_group(&mut notes)?;
        let mut slots: Vec<Slot> = Vec::with_capacity(SLOTS);
        let mut claims: Vec<Vec<u64>> = Vec::with_capacity(SLOTS);
        for s in 0..SLOTS {
            let recs: Vec<RecordState> = (0..2)
                .map(|w| {
                    Record::classify(
                        self.medium
                            .slice(record_offset(s, w), crate::layout::RECORD),
                    )
                })
                .collect();
            let view = resolve_slot(s, &recs, &mut notes);
            let view = overlay_group(s, view, &group);
            let (slot, frames) = self.slot_from_view(s, view);
            slots.push(slot);
            claims.push(frames);
        }
        // Frames claimed twice: an intact object keeps its frames against a
        // damaged one; two intact objects claiming one frame are both
        // quarantined (neither can be trusted over the other).
        let n = (range.end - range.start) as usize;
        let mut owner: Vec<Option<usize>> = vec![None; n];
        let mut conflicts: Vec<(usize, usize, u64)> = Vec::new();
        for (s, frames) in claims.iter().enumerate() {
            for &f in frames {
                if !range.contains(&f) {
                    continue;
                }
                let o = &mut owner[(f - range.start) as usize];
                match *o {
                    Some(t) if t != s => conflicts.push((t, s, f)),
                    Some(_) => conflicts.push((s, s, f)),
                    None => *o = Some(s),
                }
            }
        }
        let name_of = |slots: &[Slot], s: usize| match &slots[s] {
            Slot::Live(o) => format!("{:?}", o.name),
            Slot::Damaged { name: Some(n), .. } => format!("{n:?}"),
            _ => format!("in slot {s}"),
        };
        // Grouped by pair of slots: (first frame, count).
        let mut pairs: std::collections::BTreeMap<(usize, usize), (u64, usize)> =
            std::collections::BTreeMap::new();
        for (a, b, f) in conflicts {
            pairs.entry((a, b)).or_insert((f, 0)).1 += 1;
        }
        for ((a, b), (f, count)) in pairs {
            let (na, nb) = (name_of(&slots, a), name_of(&slots, b));
            let frames = if count == 1 {
                format!("frame {f} is")
            } else {
                format!("{count} frames (first {f}) are")
            };
            for (me, other, other_slot) in [(a, &nb, b), (b, &na, a)] {
                let why = if me == other_slot {
                    format!("{frames} referenced twice within the object")
                } else {
                    format!("{frames} also claimed by object {other} (slot {other_slot})")
                };
                let other_live = matches!(slots[other_slot], Slot::Live(_));
                match &mut slots[me] {
                    Slot::Damaged { error, .. } => {
                        error.push_str("; ");
                        error.push_str(&why);
                    }
                    Slot::Live(o) if other_live || me == other_slot => {
                        let frames = o.frames();
                        slots[me] = Slot::Damaged {
                            name: Some(o.name.clone()),
                            error: format!("conflicting objects quarantined: {why}"),
                            frames,
                            loaded: Some(o.clone()),
                        };
                    }
                    _ => {}
                }
            }
        }
        quarantine_clashes(&mut slots);
        // The allocator starts with every frame taken: an open hands out
        // only frames of the arenas it holds, and takes an arena (freeing
        // its unused frames here) when it first needs frames (`grow`).
        let mut all = vec![Pfn(0); n];
        let got = self.alloc.alloc_bulk(Request::single(0), &mut all);
        if got != n {
            return Err(self.inconsistent(format!("allocator gave {got} of {n} frames")));
        }
        *self.dir.lock() = slots;
        *self.notes.lock() = notes;
        Ok(())
    }

    pub(crate) fn pool_id(&self) -> u64 {
        self.header.pool_id
    }

    /// This open's number in the process (see `open_id`).
    pub(crate) fn open_id(&self) -> u64 {
        self.open_id
    }

    /// The group commit area as it is now. Read as a seqlock: the group
    /// word before and after the body; a body is only ever changed while
    /// the word is 0 and every group has a new random id, so equal
    /// non-zero words mean the body read is the one they guard.
    pub(crate) fn read_group(&self) -> GroupState {
        loop {
            let w1 = read_u64(self.medium.slice(GROUP_AT, 8), 0);
            let body = self.medium.slice(GROUP_AT, PAGE - GROUP_AT).to_vec();
            std::sync::atomic::fence(Ordering::Acquire);
            let w2 = read_u64(self.medium.slice(GROUP_AT, 8), 0);
            if w1 != w2 {
                std::thread::yield_now();
                continue;
            }
            return match GroupRecord::classify(&body) {
                GroupState::Valid(g) if g.pool_id != self.header.pool_id => {
                    let slots = g.entries.iter().map(|e| e.slot).collect();
                    GroupState::Corrupt {
                        reason: format!(
                            "bound to pool {:016x}, but this pool's id is {:016x}",
                            g.pool_id, self.header.pool_id
                        ),
                        slots,
                    }
                }
                other => other,
            };
        }
    }

    /// Slot `s`'s two records as they are on the medium.
    fn records(&self, s: usize) -> Vec<RecordState> {
        (0..2)
            .map(|w| {
                Record::classify(
                    self.medium
                        .slice(record_offset(s, w), crate::layout::RECORD),
                )
            })
            .collect()
    }

    /// Write `g` to the group commit area in three ordered steps (zero
    /// group word, body, group word), each drained. When this returns the
    /// group is committed.
    fn write_group(&self, g: &GroupRecord) -> Result<()> {
        // Only a crash leaves a group word (and the open that found it
        // clears it): never under way here, but the rule holds.
        let stale = read_u64(self.medium.slice(GROUP_AT, 8), 0) != 0;
        self.write_sequenced(
            GROUP_AT,
            &g.encode(),
            stale,
            Some(CrashStep::GroupBodyWritten),
        )?;
        self.medium.crash_at(CrashStep::GroupDurable);
        Ok(())
    }

    /// Retire the group record: its fixed part (group word, count, ids,
    /// hash: one cache line) zeroed. A crash in between leaves it
    /// incomplete (ignored); the entries behind it are never read again.
    fn retire_group(&self) -> Result<()> {
        let m = &self.medium;
        m.slice_mut(GROUP_AT, crate::layout::GROUP_FIXED).fill(0);
        m.persist(GROUP_AT, crate::layout::GROUP_FIXED);
        m.drain()
    }

    /// The flips of a group: every record written in the three ordered
    /// steps of [`PoolInner::write_record_locked`], the records side by
    /// side (one drain per step, not per record: once the group record is
    /// durable any subset of finished flips is rolled forward, and each
    /// record still only ever reads as old, incomplete or new).
    fn write_records_locked(&self, entries: &[GroupEntry]) -> Result<()> {
        let m = &self.medium;
        let encoded: Vec<[u8; crate::layout::RECORD]> =
            entries.iter().map(|e| e.record.encode()).collect();
        for e in entries {
            let off = record_offset(e.slot, e.which);
            m.slice_mut(off, 8).fill(0);
            m.persist(off, 8);
        }
        m.drain()?;
        for (e, bytes) in entries.iter().zip(&encoded) {
            let off = record_offset(e.slot, e.which);
            m.slice_mut(off + 8, bytes.len() - 8)
                .copy_from_slice(&bytes[8..]);
            m.persist(off + 8, bytes.len() - 8);
        }
        m.drain()?;
        for (k, (e, bytes)) in entries.iter().zip(&encoded).enumerate() {
            let off = record_offset(e.slot, e.which);
            m.slice_mut(off, 8).copy_from_slice(&bytes[..8]);
            m.persist(off, 8);
            m.crash_at(CrashStep::Flipped(k + 1));
        }
        m.drain()
    }

    /// With the metadata lock held (no group commit of a live writer is
    /// under way): a dead writer's group record is dealt with. Opens for
    /// writing roll an intact one forward (the flips it misses are written,
    /// then it is retired) and clear an incomplete one; read-only opens
    /// change nothing (they see the group rolled forward through
    /// [`overlay_group`]). Returns what the views are to be overlaid with.
    fn settle_group(&self, notes: &mut Vec<String>) -> Result<GroupState> {
        let g = self.read_group();
        if self.access != Access::ReadWrite {
            return Ok(g);
        }
        match &g {
            GroupState::Empty => Ok(g),
            GroupState::Incomplete => {
                self.retire_group()?;
                notes.push(
                    "an incomplete group commit record (a psync_many interrupted before its commit point, or while retiring it) was ignored and cleared".into(),
                );
                Ok(GroupState::Empty)
            }
            GroupState::Corrupt { reason, slots } => {
                notes.push(format!(
                    "the group commit record is damaged ({reason}): objects in slots {slots:?} quarantined"
                ));
                Ok(g)
            }
            GroupState::Valid(gr) => {
                let mut missing = Vec::new();
                let mut fits = true;
                for e in &gr.entries {
                    match group_fit(
                        &resolve_slot(e.slot, &self.records(e.slot), &mut Vec::new()),
                        e,
                    ) {
                        Fit::Missing => missing.push(e),
                        Fit::Done | Fit::Stale => {}
                        Fit::Conflict(_) => fits = false,
                    }
                }
                if !missing.is_empty() {
                    let missing: Vec<GroupEntry> = missing.iter().map(|&e| e.clone()).collect();
                    let _dir = self.dir.lock();
                    self.write_records_locked(&missing)?;
                }
                let slots: Vec<usize> = gr.entries.iter().map(|e| e.slot).collect();
                if !fits {
                    // Kept, so the slots that do not fit stay quarantined.
                    notes.push(format!(
                        "group commit {:016x} (slots {slots:?}) does not fit some of its slots' records: those are quarantined, the rest rolled forward",
                        gr.group_id
                    ));
                    return Ok(g);
                }
                self.retire_group()?;
                if !missing.is_empty() {
                    notes.push(format!(
                        "group commit {:016x} of {} objects (slots {slots:?}) rolled forward: {} of its record flips were missing (a crash after its commit point)",
                        gr.group_id,
                        gr.entries.len(),
                        missing.len()
                    ));
                }
                Ok(GroupState::Empty)
            }
        }
    }

    /// psync_many's commit of `objs` (distinct, in slot order, written
    /// through this open): see [`GroupRecord`]. Objects with nothing
    /// staged keep their epoch.
    pub(crate) fn psync_group(&self, objs: &[Arc<ObjectShared>]) -> Result<()> {
        let _one: Vec<_> = objs.iter().map(|o| o.commit_guard()).collect();
        for o in objs {
            if o.destroyed.load(Ordering::Acquire) {
                return Err(PmoError::UnknownObject {
                    name: o.name.clone(),
                });
            }
        }
        let work: Vec<(&Arc<ObjectShared>, std::collections::BTreeMap<usize, Entry>)> = objs
            .iter()
            .map(|o| (o, o.take_staged()))
            .filter(|(_, p)| !p.is_empty())
            .collect();
        if work.is_empty() {
            return Ok(());
        }
        // 1. Every object's tables and root out of place, durable.
        let mut new_frames = Vec::new();
        let mut built = Vec::with_capacity(work.len());
        let r = (|| {
            for (o, pages) in &work {
                built.push(o.build(self, pages, &mut new_frames)?);
            }
            self.medium.drain()?;
            self.meta()
        })();
        let meta = match r {
            Ok(m) => m,
            Err(e) => {
                self.free_frames(&new_frames);
                for (o, pages) in work {
                    o.put_back(self, pages);
                }
                return Err(e);
            }
        };
        // Under the metadata lock from here to the retirement: group
        // commits run one at a time, and no open's refresh (nor open) sees
        // some flips of a group without the others.
        let group = GroupRecord {
            // Unique per group (the seqlock read of `read_group` relies on
            // it); a user-space generator: no system call per commit.
            group_id: rand::thread_rng().gen_range(1..=u64::MAX),
            pool_id: self.header.pool_id,
            entries: work
                .iter()
                .zip(&built)
                .map(|((o, _), b)| GroupEntry {
                    slot: o.slot,
                    which: b.which,
                    record: b.record.clone(),
                })
                .collect(),
        };
        // From here a failed write may have reached the medium: as at
        // psync's record flip, nothing is freed or put back.
        // 2. The commit point.
        self.write_group(&group)?;
        // 3. The flips, then the in-memory commit of every object, under
        // the directory lock.
        let mut old_frames = Vec::new();
        let mut recs = Vec::with_capacity(work.len());
        {
            let _dir = self.dir.lock();
            self.write_records_locked(&group.entries)?;
            for ((o, pages), b) in work.iter().zip(built) {
                old_frames.extend_from_slice(&b.old_frames);
                recs.push((
                    o.slot,
                    SlotRecord {
                        obj_id: o.obj_id,
                        name: o.name.clone(),
                        encrypted: o.encrypted,
                        epoch: b.record.seq,
                        kind: Kind::Live,
                    },
                ));
                o.apply(b, pages);
            }
        }
        self.medium.crash_at(CrashStep::BeforeRetire);
        // 4. Retired: the next group may use the area.
        self.retire_group()?;
        self.medium.crash_at(CrashStep::Retired);
        drop(meta);
        self.free_frames(&old_frames);
        // 5. The state store, every slot of the group in one write.
        self.record_epochs(&recs)
    }

    /// The state store, when it holds this pool's record under the
    /// identity the pool names (see [`PoolInner::check_freshness`]).
    fn bound_store(&self) -> Option<&StateStore> {
        self.state
            .as_ref()
            .filter(|_| self.bound.load(Ordering::Acquire))
    }

    /// The pool file's path as the state store records it.
    fn abs_path(&self) -> PathBuf {
        self.medium
            .path
            .canonicalize()
            .unwrap_or_else(|_| self.medium.path.clone())
    }

    /// The state store this pool names, as new roots record it (0: none).
    pub(crate) fn store_id(&self) -> u64 {
        self.store_id.load(Ordering::Acquire)
    }

    /// Name state store identity `id` in the header: one aligned 8-byte
    /// word, outside the CRC'd part, so a crash leaves the old or the new
    /// identity. Caller holds the metadata lock (opens read it under it).
    fn name_store(&self, id: u64) -> Result<()> {
        if read_u64(self.medium.slice(HEADER_STORE_AT, 8), 0) != id {
            self.medium
                .slice_mut(HEADER_STORE_AT, 8)
                .copy_from_slice(&id.to_le_bytes());
            self.medium.persist(HEADER_STORE_AT, 8);
            self.medium.drain()?;
        }
        self.store_id.store(id, Ordering::Release);
        Ok(())
    }

    /// The committer of deferred records, started on first use.
    fn committer(&self, store: &StateStore) -> Result<&Committer> {
        if let Some(c) = self.committer.get() {
            return Ok(c);
        }
        let c = Committer::start(
            store.clone(),
            self.header.pool_id,
            self.medium.path.clone(),
            self.medium.crash_hook_handle(),
            self.state_gap,
        )?;
        // Two first psyncs at once: the loser's committer never got a
        // record and ends here.
        if let Err(unused) = self.committer.set(c) {
            unused.finish()?;
        }
        Ok(self.committer.get().expect("set above"))
    }

    /// Wait until every record this open handed to the state store is
    /// durable there (no-op without a store or deferred records).
    pub(crate) fn sync_state(&self) -> Result<()> {
        match self.committer.get() {
            Some(c) => c.flush(),
            None => Ok(()),
        }
    }

    /// Record a group commit in the state store (no-op without one).
    fn record_epochs(&self, recs: &[(usize, SlotRecord)]) -> Result<()> {
        let Some(store) = self.bound_store() else {
            return Ok(());
        };
        if self.state_commit == StateCommit::Deferred {
            return self.committer(store)?.hand(recs);
        }
        store.update_slots(self.header.pool_id, &self.abs_path(), recs, &|| {
            self.medium.crash_hook()
        })
    }

    /// Record a commit in the state store (no-op without one).
    pub(crate) fn record_epoch(
        &self,
        slot: usize,
        obj_id: u64,
        name: &str,
        encrypted: bool,
        epoch: u64,
        kind: Kind,
    ) -> Result<()> {
        let Some(store) = self.bound_store() else {
            return Ok(());
        };
        let rec = SlotRecord {
            obj_id,
            name: name.to_string(),
            encrypted,
            epoch,
            kind,
        };
        // Only a commit's record waits: an intent (creating, destroying)
        // must be durable before the record it announces, and a destroy's
        // end is rare.
        if kind == Kind::Live && self.state_commit == StateCommit::Deferred {
            return self.committer(store)?.hand(&[(slot, rec)]);
        }
        store.update_slot(self.header.pool_id, &self.abs_path(), slot, rec, &|| {
            self.medium.crash_hook()
        })
    }

    /// At open, under the metadata lock: bind the pool to its state store
    /// and compare the directory with it.
    ///
    /// A pool names the store that protects it (its header, and every root
    /// written since, under the MAC for encrypted objects). The store must
    /// hold this pool's record under one of those identities; otherwise
    /// (deleted, emptied, another pool's record, another store) the open
    /// is refused ([`PmoError::StateMissing`]) unless allowed
    /// (`allow_missing_state`: the open goes on unprotected and says so)
    /// or tolerated (`check`, `accept_rollback`: reported as a mismatch).
    /// A pool naming no store is bound to the store by its first open for
    /// writing: the store's record first (a snapshot of the directory as
    /// it is), then the header.
    ///
    /// Bound, every slot is compared ([`PoolInner::slot_problem`]): any
    /// slot behind the store, an object missing, replaced, renamed or
    /// stored plain where the store knows it encrypted, an object the
    /// store never saw created, or a tombstone it did not expect refuses
    /// the open (unless tolerated).
    fn check_freshness(&self, opts: &PoolOptions) -> Result<()> {
        let pool_id = self.header.pool_id;
        // The header's identity now (an open for writing may have named a
        // store since this open read the header).
        let header_id = read_u64(self.medium.slice(HEADER_STORE_AT, 8), 0);
        self.store_id.store(header_id, Ordering::Release);
        let mut named: Vec<u64> = Vec::new();
        if header_id != 0 {
            named.push(header_id);
        }
        for slot in self.dir.lock().iter() {
            if let Slot::Live(o) = slot {
                let id = o.committed.read().store_id;
                if id != 0 && !named.contains(&id) {
                    named.push(id);
                }
            }
        }
        let abs = self.abs_path();
        let recorded = match &self.state {
            Some(store) => store.load(pool_id)?,
            None => PoolState::default(),
        };
        // Bound: the store holds this pool under the identity its header
        // names, or its header names none (zeroed) and no root names
        // another.
        let ours = recorded.store_id != 0 && recorded.pool_id == pool_id;
        let bound = self.state.is_some()
            && ours
            && (header_id == recorded.store_id
                || (header_id == 0 && named.iter().all(|&id| id == recorded.store_id)));
        if !bound {
            if let Some(&claimed) = named.first() {
                let detail = self.missing_detail(&recorded, &abs);
                return self.store_missing(opts, claimed, detail);
            }
            let Some(store) = &self.state else {
                return Ok(());
            };
            // Not protected yet. A record of another pool id at this path:
            // the pool id changed, or another pool was copied over it.
            let others = store.other_ids_at(&abs, pool_id);
            if let Some(old) = others.first() {
                let problem = format!(
                    "the state store knows this file as pool {old:016x}, its header now says {pool_id:016x} (pool id changed, or another pool copied over it)"
                );
                return self.report(opts, vec![problem], 0);
            }
            if self.access == Access::ReadWrite && !opts.allow_missing_state {
                let id = new_store_id();
                let slots = self.snapshot();
                store.update(
                    pool_id,
                    &abs,
                    |st| {
                        *st = PoolState {
                            store_id: id,
                            pool_id,
                            path: abs.clone(),
                            slots,
                        }
                    },
                    &|| self.medium.crash_hook(),
                )?;
                self.name_store(id)?;
                self.bound.store(true, Ordering::Release);
            }
            return Ok(());
        }
        self.bound.store(true, Ordering::Release);
        if header_id != recorded.store_id {
            // The header names no store (zeroed) while the store holds the
            // pool: the store decides, and the header is set right by the
            // next open for writing.
            self.notes.lock().push(format!(
                "the pool's header names no state store, the store's record of it identity {:016x}: the store's record is used",
                recorded.store_id
            ));
            if self.access == Access::ReadWrite {
                self.name_store(recorded.store_id)?;
            }
        }
        let mut problems = Vec::new();
        let mut behind = 0u64;
        {
            let dir = self.dir.lock();
            for (s, slot) in dir.iter().enumerate() {
                if let Some(p) = self.slot_problem(s, recorded.slots.get(&s), slot) {
                    behind += p.behind;
                    problems.push(p.what);
                }
            }
        }
        self.report(opts, problems, behind)
    }

    /// What is wrong with the store's record of this pool (for
    /// [`PmoError::StateMissing`]).
    fn missing_detail(&self, recorded: &PoolState, abs: &Path) -> String {
        let Some(store) = &self.state else {
            return "no state store is in use (give the folder of the store that protects it)"
                .into();
        };
        let pool_id = self.header.pool_id;
        let file = store.file(pool_id);
        if recorded.store_id == 0 {
            let mut d = format!(
                "the state store at {} has no record of it (the store was deleted or emptied, or it is another store: another HOME or XDG_STATE_HOME)",
                file.display()
            );
            if let Some(old) = store.other_ids_at(abs, pool_id).first() {
                d.push_str(&format!(
                    "; the store knows this file as pool {old:016x}, its header now says {pool_id:016x} (pool id changed, or another pool copied over it)"
                ));
            }
            d
        } else if recorded.pool_id != pool_id {
            format!(
                "the state store's record at {} belongs to pool {:016x} (another pool's record in its place)",
                file.display(),
                recorded.pool_id
            )
        } else {
            format!(
                "the state store's record at {} holds identity {:016x} (the store was recreated, or the pool was bound to another store since)",
                file.display(),
                recorded.store_id
            )
        }
    }

    /// The store the pool names is not at hand: refused, or (allowed)
    /// opened unprotected, or (tolerated) reported.
    fn store_missing(&self, opts: &PoolOptions, claimed: u64, detail: String) -> Result<()> {
        let path = self.medium.path.clone();
        if opts.allow_missing_state {
            *self.state_missing.lock() = Some(format!(
                "pool {} is protected by state store {claimed:016x}, but {detail}: opened without it (allow_missing_state), so nothing read from it is protected against rollback",
                path.display()
            ));
        }
        if opts.tolerate_state_mismatch {
            self.mismatches.lock().push(
                PmoError::StateMissing {
                    path,
                    store_id: claimed,
                    detail,
                }
                .to_string(),
            );
            return Ok(());
        }
        if opts.allow_missing_state {
            return Ok(());
        }
        Err(PmoError::StateMissing {
            path,
            store_id: claimed,
            detail,
        })
    }

    /// Refuse the open for `problems` (a rollback when `behind` > 0), or
    /// keep them for `check` when tolerated.
    fn report(&self, opts: &PoolOptions, problems: Vec<String>, behind: u64) -> Result<()> {
        if problems.is_empty() {
            return Ok(());
        }
        if opts.tolerate_state_mismatch {
            self.mismatches.lock().extend(problems);
            return Ok(());
        }
        let detail = problems.join("; ");
        if behind > 0 {
            Err(PmoError::PoolRolledBack {
                path: self.medium.path.clone(),
                epochs: behind,
                detail,
            })
        } else {
            Err(self.inconsistent(format!("the state store disagrees: {detail}")))
        }
    }

    /// Every intact slot as the state store records it (binding a pool
    /// that was unprotected: the pool as it is now is all there is to go
    /// by).
    fn snapshot(&self) -> std::collections::BTreeMap<usize, SlotRecord> {
        self.dir
            .lock()
            .iter()
            .enumerate()
            .filter_map(|(i, slot)| match slot {
                Slot::Live(o) => Some((
                    i,
                    SlotRecord {
                        obj_id: o.obj_id,
                        name: o.name.clone(),
                        encrypted: o.encrypted,
                        epoch: o.committed.read().epoch,
                        kind: Kind::Live,
                    },
                )),
                _ => None,
            })
            .collect()
    }

    /// Whether slot `s` as this open sees it agrees with the state store's
    /// record `rec` of it; `None` when it does (or the slot is quarantined,
    /// which is reported as such).
    fn slot_problem(&self, s: usize, rec: Option<&SlotRecord>, slot: &Slot) -> Option<Problem> {
        let kind = |encrypted: bool| if encrypted { "encrypted" } else { "plain" };
        let (seq, live) = match slot {
            Slot::Live(o)
            | Slot::Damaged {
                loaded: Some(o), ..
            } => (o.committed.read().epoch, Some(o)),
            // Damaged records or roots: quarantined, and reported as such.
            Slot::Damaged { .. } => return None,
            Slot::Free { seq, .. } => (*seq, None),
        };
        let problem = |what: String| {
            Some(Problem {
                what,
                behind: 0,
                known: 0,
            })
        };
        let Some(rec) = rec else {
            // Every create records its intent before its record: an object
            // the store never heard of did not come from nvmos.
            return live.and_then(|o| {
                problem(format!(
                    "object {:?} (slot {s}, {}) is not in the state store: it was not created through nvmos (forged?)",
                    o.name,
                    kind(o.encrypted)
                ))
            });
        };
        let who = format!("object {:?} (slot {s})", rec.name);
        // The last epoch the store knows was committed in the slot (an
        // intent is not a commit yet).
        let known = match rec.kind {
            Kind::Creating | Kind::Destroying => rec.epoch - 1,
            Kind::Live | Kind::Destroyed => rec.epoch,
        };
        // Another writer may have committed after the directory was read
        // and before the store was: the medium now decides.
        let seq = if seq < known {
            seq.max(self.medium_seq(s))
        } else {
            seq
        };
        if seq < known {
            let behind = known - seq;
            let what = if seq == 0 {
                format!(
                    "{who} missing: the state store has epoch {known}, the slot is empty (records erased or directory restored)"
                )
            } else {
                format!("{who} by {behind} epochs (state store has epoch {known}, the pool {seq})")
            };
            return Some(Problem {
                what,
                behind,
                known,
            });
        }
        match (rec.kind, live) {
            (Kind::Creating, None) if seq >= rec.epoch => problem(format!(
                "{who} was destroyed outside nvmos: its tombstone (epoch {seq}) is not in the state store (forged deletion?)"
            )),
            (Kind::Live, None) if seq > known => problem(format!(
                "{who} was destroyed outside nvmos: its tombstone (epoch {seq}) is not in the state store (forged deletion?)"
            )),
            (Kind::Live, None) if seq == known => problem(format!(
                "{who} is live at epoch {known} in the state store, but the slot holds a tombstone of that epoch (forged deletion?)"
            )),
            (_, None) => None,
            (Kind::Creating | Kind::Live, Some(o)) => {
                if o.obj_id != rec.obj_id {
                    problem(format!(
                        "{who} was replaced by another object (id {:016x}, epoch {seq}) the state store never saw created",
                        o.obj_id
                    ))
                } else {
                    identity(&who, rec, o).and_then(problem)
                }
            }
            (Kind::Destroying, Some(o)) if o.obj_id == rec.obj_id && seq == known => {
                identity(&who, rec, o).and_then(problem)
            }
            (Kind::Destroying | Kind::Destroyed, Some(o)) if o.obj_id == rec.obj_id => {
                problem(format!(
                    "{who} was destroyed (state store epoch {}), but the pool holds it live at epoch {seq}: brought back outside nvmos",
                    rec.epoch
                ))
            }
            (Kind::Destroying | Kind::Destroyed, Some(o)) => problem(format!(
                "object {:?} (slot {s}) stands in a slot the state store has as destroyed (object {:?} at epoch {}), and the store never saw it created: a {} object forged outside nvmos",
                o.name,
                rec.name,
                rec.epoch,
                kind(o.encrypted)
            )),
        }
    }

    /// At attach: the object agrees with the state store as it is now
    /// (another process may have advanced the store since the open): not
    /// older than the store's epoch, and the object the store knows in its
    /// slot, with its name and encryption (so no keyless read of an object
    /// the store knows as encrypted).
    fn check_object_freshness(&self, o: &Arc<ObjectShared>) -> Result<()> {
        let Some(store) = self.bound_store() else {
            return Ok(());
        };
        // Read before the medium (which never runs behind the store): a
        // commit by another writer since this open's view is not a
        // rollback.
        let st = store.load(self.header.pool_id)?;
        let slot = Slot::Live(o.clone());
        match self.slot_problem(o.slot, st.slots.get(&o.slot), &slot) {
            None => Ok(()),
            Some(p) if p.behind > 0 => Err(PmoError::ObjectRolledBack {
                name: o.name.clone(),
                epochs: p.behind,
                store_epoch: p.known,
                pool_epoch: p.known - p.behind,
            }),
            Some(p) => Err(self.inconsistent(format!("the state store disagrees: {}", p.what))),
        }
    }

    fn find(&self, name: &str) -> Result<Arc<ObjectShared>> {
        let dir = self.dir.lock();
        let mut unnamed = Vec::new();
        for (i, slot) in dir.iter().enumerate() {
            match slot {
                Slot::Live(o) if o.name == name => return Ok(o.clone()),
                Slot::Damaged {
                    name: Some(n),
                    error,
                    ..
                } if n == name => {
                    return Err(PmoError::Quarantined {
                        name: format!("{name:?}"),
                        reason: format!("{error} (directory slot {i})"),
                    })
                }
                Slot::Damaged {
                    name: None, error, ..
                } => unnamed.push((i, error.clone())),
                _ => {}
            }
        }
        // The state store may know the name of an object whose root is
        // unreadable.
        if let Some(store) = &self.state {
            if let Ok(st) = store.load(self.header.pool_id) {
                for (i, error) in &unnamed {
                    if st.slots.get(i).is_some_and(|r| r.name == name) {
                        return Err(PmoError::Quarantined {
                            name: format!("{name:?}"),
                            reason: format!("{error} (directory slot {i})"),
                        });
                    }
                }
            }
        }
        if let Some((i, error)) = unnamed.first() {
            return Err(PmoError::Quarantined {
                name: format!("{name:?}?"),
                reason: format!(
                    "no intact object has that name, and directory slot {i} holds a damaged object whose name cannot be read: {error}"
                ),
            });
        }
        Err(PmoError::UnknownObject {
            name: name.to_string(),
        })
    }

    fn list(&self) -> Vec<ObjectInfo> {
        let dir = self.dir.lock();
        dir.iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
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
                        damaged: None,
                    })
                }
                Slot::Damaged { name, error, .. } => Some(ObjectInfo {
                    name: name.clone().unwrap_or_else(|| format!("?slot{i}")),
                    size: 0,
                    encrypted: false,
                    base_address: 0,
                    epoch: 0,
                    pages_written: 0,
                    slot: i,
                    damaged: Some(error.clone()),
                }),
                Slot::Free { .. } => None,
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
    ) -> Result<WrittenRoot> {
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
        let t0 = std::time::Instant::now();
        let sha: [u8; 16] = sha256(&[&stored[..off + blob_len]])[..16]
            .try_into()
            .expect("16");
        let hash_ns = t0.elapsed().as_nanos() as u64;
        for (i, &f) in frames.iter().enumerate() {
            self.frame_mut(f)
                .copy_from_slice(&stored[i * PAGE..(i + 1) * PAGE]);
            self.medium.persist(f as usize * PAGE, PAGE);
        }
        let first = frames[0];
        Ok((frames, first, sha, blob_len as u32, hash_ns))
    }

    /// The atomic update: write record `which` of `slot` and make it
    /// durable, then `then` (the in-memory committed state), under the
    /// directory lock so a refresh never sees one without the other.
    pub fn write_record(
        &self,
        slot: usize,
        which: usize,
        rec: &Record,
        then: impl FnOnce(),
    ) -> Result<()> {
        let _dir = self.dir.lock();
        self.write_record_locked(slot, which, rec)?;
        then();
        Ok(())
    }

    /// Three ordered steps (see [`Record`]): a zero sequence word, the
    /// body, the sequence word. A crash leaves the old record (whose slot
    /// partner is current), an incomplete one (sequence word 0), or the
    /// new one; nothing else.
    fn write_record_locked(&self, slot: usize, which: usize, rec: &Record) -> Result<()> {
        self.write_sequenced(record_offset(slot, which), &rec.encode(), true, None)
    }

    /// The three ordered steps a directory record and the group commit
    /// record are written in, each drained: the 8-byte word zeroed (when
    /// `zero_word`), the body, the word. Until the last step lands the
    /// area reads as incomplete (word 0) or as its old contents; after
    /// it, as `bytes`. `body_written`: a crash step between body and word.
    fn write_sequenced(
        &self,
        off: usize,
        bytes: &[u8],
        zero_word: bool,
        body_written: Option<CrashStep>,
    ) -> Result<()> {
        let m = &self.medium;
        if zero_word {
            m.slice_mut(off, 8).fill(0);
            m.persist(off, 8);
            m.drain()?;
        }
        m.slice_mut(off + 8, bytes.len() - 8)
            .copy_from_slice(&bytes[8..]);
        m.persist(off + 8, bytes.len() - 8);
        m.drain()?;
        if let Some(step) = body_written {
            m.crash_at(step);
        }
        m.slice_mut(off, 8).copy_from_slice(&bytes[..8]);
        m.persist(off, 8);
        m.drain()
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
        if let Some(k) = key {
            if k.len() < crate::crypto::MIN_KEY_LEN {
                return Err(PmoError::KeyTooShort {
                    name: name.to_string(),
                    len: k.len(),
                    min: crate::crypto::MIN_KEY_LEN,
                });
            }
            kdf.check().map_err(PmoError::Kdf)?;
        }
        // Directory changes are made under the metadata lock, on an
        // up-to-date view.
        let _m = self.meta()?;
        self.refresh()?;
        let dir = self.dir.lock();
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
        let mut rng = rand::rngs::OsRng;
        let obj_id: u64 = rng.gen();
        let salt: [u8; 16] = rng.gen();
        let zero_sha = sha256(&[&ZERO_PAGE]);
        let mut root = Root {
            obj_id,
            epoch: seq + 1,
            pool_id: self.header.pool_id,
            slot: slot_index as u32,
            store_id: self.store_id(),
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
                root.verifier = keys.verifier(obj_id, &salt, kdf);
                Some(keys)
            }
            None => None,
        };
        let body = root.encode_body();
        let mac = match &keys {
            Some(k) => k.mac(&[&body]),
            None => sha256(&[&body]),
        };
        // Frames may need a refresh of the directory (`grow`): the slot
        // stays free meanwhile, as only holders of the metadata lock
        // change free slots.
        drop(dir);
        let mut new_frames = Vec::new();
        let written = self.write_root(name, &body, &mac, &mut new_frames);
        let (root_frames, root_pfn, root_sha, root_len, _) = match written {
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
        // Intent first: an object the state store has never heard of is a
        // forged one.
        let intent = self.record_epoch(
            slot_index,
            obj_id,
            name,
            key.is_some(),
            seq + 1,
            Kind::Creating,
        );
        if let Err(e) = intent {
            self.free_frames(&new_frames);
            return Err(e);
        }
        // If the record write fails it may still have reached the medium:
        // the root's frames are then left allocated, not reused.
        let mut dir = self.dir.lock();
        self.write_record_locked(slot_index, which, &record)?;
        let committed = Committed {
            epoch: seq + 1,
            which,
            store_id: root.store_id,
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
        drop(dir);
        self.record_epoch(slot_index, obj_id, name, key.is_some(), seq + 1, Kind::Live)?;
        Ok(ObjectInfo {
            name: name.to_string(),
            size: pages * PAGE as u64,
            encrypted: key.is_some(),
            base_address: base,
            epoch: seq + 1,
            pages_written: 0,
            slot: slot_index,
            damaged: None,
        })
    }

    fn pdestroy(&self, name: &str, key: Option<&[u8]>) -> Result<()> {
        self.writable("pdestroy")?;
        let _m = self.meta()?;
        self.refresh()?;
        let shared = self.find(name)?;
        // No writer anywhere while it goes (readers elsewhere then fail
        // with the object unknown, or read pages that fail their check).
        self.lock_object(name, shared.slot, false)?;
        let r = self.pdestroy_locked(name, key, &shared);
        self.unlock_object(shared.slot);
        r
    }

    fn pdestroy_locked(
        &self,
        name: &str,
        key: Option<&[u8]>,
        shared: &Arc<ObjectShared>,
    ) -> Result<()> {
        shared.authenticate(key, self.header.pool_id)?;
        self.check_object_freshness(shared)?;
        let epoch = shared.committed.read().epoch;
        // Intent first: a tombstone the state store does not expect is a
        // forged deletion.
        self.record_epoch(
            shared.slot,
            shared.obj_id,
            name,
            shared.encrypted,
            epoch + 1,
            Kind::Destroying,
        )?;
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
        self.record_epoch(
            shared.slot,
            shared.obj_id,
            name,
            shared.encrypted,
            epoch + 1,
            Kind::Destroyed,
        )
    }
}

/// A slot that disagrees with the state store: what, and by how many
/// epochs the pool is behind the store (`known`: the store's last
/// committed epoch of the slot).
struct Problem {
    what: String,
    behind: u64,
    known: u64,
}

/// Whether live object `o` is the one the state store's record `rec` of
/// its slot describes, in name and encryption (its id already matches).
fn identity(who: &str, rec: &SlotRecord, o: &ObjectShared) -> Option<String> {
    if rec.encrypted && !o.encrypted {
        Some(format!(
            "{who} is encrypted in the state store, but the pool holds it as a plain object: replaced outside nvmos (a forged plain root)"
        ))
    } else if !rec.encrypted && o.encrypted {
        Some(format!(
            "{who} is plain in the state store, but the pool holds it as an encrypted object: replaced outside nvmos"
        ))
    } else if o.name != rec.name {
        Some(format!(
            "{who} is named {:?} in the pool: relabelled outside nvmos",
            o.name
        ))
    } else {
        None
    }
}

/// How a group entry relates to its slot's records.
enum Fit {
    /// The slot holds the record before the entry's: its flip is missing.
    Missing,
    /// The slot holds the entry's record: flipped.
    Done,
    /// The slot is past the entry (committed again since).
    Stale,
    /// Anything else: not a state any crash leaves.
    Conflict(String),
}

fn group_fit(view: &View, e: &GroupEntry) -> Fit {
    match view {
        View::Current(rec, w) if rec.seq + 1 == e.record.seq && *w != e.which => Fit::Missing,
        View::Current(rec, w) if *rec == e.record && *w == e.which => Fit::Done,
        View::Current(rec, _) if rec.seq > e.record.seq => Fit::Stale,
        View::Free { seq, .. } if *seq > e.record.seq => Fit::Stale,
        View::Current(rec, w) => Fit::Conflict(format!(
            "the slot's current record {w} holds epoch {} ({})",
            rec.seq,
            if rec.seq == e.record.seq {
                "another root"
            } else {
                "not the epoch before"
            }
        )),
        View::Free { seq, .. } => Fit::Conflict(format!("the slot is free (epoch {seq})")),
        View::Bad { reason, .. } => Fit::Conflict(reason.clone()),
    }
}

/// Slot `s`'s view with the group commit record applied: an intact group
/// is committed, so a slot whose flip is missing is seen at the group's
/// record (rolled forward); a damaged group quarantines the slots it names
/// (neither version can be trusted to be the committed one).
fn overlay_group(s: usize, view: View, group: &GroupState) -> View {
    match group {
        GroupState::Valid(g) => {
            let Some(e) = g.entries.iter().find(|e| e.slot == s) else {
                return view;
            };
            match group_fit(&view, e) {
                Fit::Missing => View::Current(e.record.clone(), e.which),
                Fit::Done | Fit::Stale => view,
                Fit::Conflict(_) if matches!(view, View::Bad { .. }) => view,
                Fit::Conflict(why) => View::Bad {
                    reason: format!(
                        "the group commit record {:016x} (psync_many) gives this slot epoch {} in record {}, but {why}",
                        g.group_id, e.record.seq, e.which
                    ),
                    fields: match view {
                        View::Current(rec, _) => Some(rec),
                        _ => Some(e.record.clone()),
                    },
                },
            }
        }
        GroupState::Corrupt { reason, slots } if slots.contains(&s) => View::Bad {
            reason: format!(
                "the group commit record (frame 0, byte {GROUP_AT}) is damaged ({reason}) and names this slot: its psync_many cannot be verified, so neither the old nor the new version is used"
            ),
            fields: match view {
                View::Current(rec, _) => Some(rec),
                View::Bad { fields, .. } => fields,
                View::Free { .. } => None,
            },
        },
        _ => view,
    }
}

/// Whether an incomplete record (sequence word 0) holds a whole record's
/// body: with the body's sequence number as its word, it would be valid.
fn whole_body(b: &[u8]) -> bool {
    let mut whole = b.to_vec();
    let seq = read_u64(&whole, 32);
    write_u64(&mut whole, 0, seq);
    seq != 0 && matches!(Record::classify(&whole), RecordState::Valid(_))
}

/// Quarantine intact objects that cannot both be right: two of one name
/// (a forged object must not shadow a real one), or two whose address
/// ranges overlap (each is attached at its fixed address). Neither can be
/// trusted over the other, so both go; their frames stay reserved. (An
/// intact object keeps its name against a quarantined one, as it keeps
/// its frames.)
fn quarantine_clashes(slots: &mut [Slot]) {
    let mut why: std::collections::BTreeMap<usize, Vec<String>> = Default::default();
    let live: Vec<(usize, &str, u64, u64)> = slots
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Slot::Live(o) => Some((i, o.name.as_str(), o.base, (o.pages * PAGE) as u64)),
            _ => None,
        })
        .collect();
    for (k, &(a, name_a, base_a, len_a)) in live.iter().enumerate() {
        for &(b, name_b, base_b, len_b) in &live[k + 1..] {
            if name_a == name_b {
                why.entry(a)
                    .or_default()
                    .push(format!("the object in slot {b} has the same name"));
                why.entry(b)
                    .or_default()
                    .push(format!("the object in slot {a} has the same name"));
            }
            if base_a < base_b.saturating_add(len_b) && base_b < base_a.saturating_add(len_a) {
                for (me, other, other_name, base, len) in
                    [(a, b, name_b, base_a, len_a), (b, a, name_a, base_b, len_b)]
                {
                    why.entry(me).or_default().push(format!(
                        "its address range {base:#x}..{:#x} overlaps that of object {other_name:?} (slot {other})",
                        base.saturating_add(len)
                    ));
                }
            }
        }
    }
    for (i, reasons) in why {
        if let Slot::Live(o) = &slots[i] {
            slots[i] = Slot::Damaged {
                name: Some(o.name.clone()),
                error: format!("conflicting objects quarantined: {}", reasons.join("; ")),
                frames: o.frames(),
                loaded: Some(o.clone()),
            };
        }
    }
}

/// The frames a slot holds (live) or claims (quarantined).
fn slot_frames(slot: &Slot) -> Vec<u64> {
    match slot {
        Slot::Live(o) => o.frames(),
        Slot::Damaged { frames, .. } => frames.clone(),
        Slot::Free { .. } => Vec::new(),
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

/// What `write_root` wrote: its frames, the first one (named by the
/// record), the stored root's hash (held by the record), its length, and
/// the nanoseconds that hash took (psync's authentication time).
type WrittenRoot = (Vec<u64>, u64, [u8; 16], u32, u64);
