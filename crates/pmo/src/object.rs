//! An attached object: its committed state (page table in memory), the
//! pages staged for the next psync, and the commit that makes them durable.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::backing::PageBacking;
use crate::crypto::{plain_tag, session_salt, sha256, KdfParams, ObjectKeys};
use crate::error::{PmoError, Result};
use crate::layout::{Entry, Root, SlotState, ENTRIES_PER_TABLE, ENTRY, PAGE};
use crate::pool::PoolInner;

/// How an object is attached (the seed's `perm`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Perm {
    /// Read the committed state.
    Read,
    /// Read, stage and psync. At most one attachment for writing at a time.
    Write,
}

/// What the fixed part of an object's root says, shared by its handles.
pub(crate) struct ObjectShared {
    pub slot: usize,
    pub name: String,
    pub obj_id: u64,
    pub pages: usize,
    pub base: u64,
    pub encrypted: bool,
    pub salt: [u8; 16],
    pub verifier: [u8; 32],
    pub kdf: KdfParams,
    /// Derived by the first attach with the right key.
    pub keys: OnceLock<ObjectKeys>,
    pub committed: RwLock<Committed>,
    staged: Mutex<Staged>,
    /// One psync at a time.
    commit_lock: Mutex<()>,
    pub writer: AtomicBool,
    pub handles: AtomicUsize,
    /// Set when the object is destroyed: handles still around fail.
    pub destroyed: AtomicBool,
    /// Time psync spent authenticating (see [`AuthTime`]).
    auth: Mutex<AuthTime>,
}

/// Where psync's authentication time goes, summed over this process's
/// psyncs of one object (for benchmarks: `benches/psync_auth.rs`). The
/// parts are timed where psync does them, on its own data; the clock reads
/// (six per psync of one table page) are inside the figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthTime {
    /// psyncs that reached the record flip.
    pub psyncs: u64,
    /// Table sealing: SHA-256 of every new page-table page (the hashes the
    /// root holds).
    pub table_hash_ns: u64,
    /// Root binding: the root body (object id, epoch, pool id, slot,
    /// table hashes) MAC'd with the key (HMAC-SHA-256; SHA-256 for plain
    /// objects).
    pub root_mac_ns: u64,
    /// Record MAC: the SHA-256 of the stored root the directory record
    /// holds (which binds the record to its root).
    pub record_hash_ns: u64,
}

impl AuthTime {
    /// All three parts, in nanoseconds.
    pub fn total_ns(&self) -> u64 {
        self.table_hash_ns + self.root_mac_ns + self.record_hash_ns
    }
}

/// The committed state: what readers see.
pub(crate) struct Committed {
    /// Epoch = seq of the current directory record.
    pub epoch: u64,
    /// Which of the slot's two records is current.
    pub which: usize,
    /// The state store identity the current root names (0: none).
    pub store_id: u64,
    pub root_frames: Vec<u64>,
    pub root_body: Vec<u8>,
    pub root_mac: [u8; 32],
    pub tables: Vec<(u64, [u8; 32])>,
    pub entries: Vec<Entry>,
}

#[derive(Default)]
struct Staged {
    pages: BTreeMap<usize, Entry>,
    /// Next page version (nonce counter under this session's subkey);
    /// valid while attached for writing. Never persisted.
    next_version: u64,
    /// This write session's random salt (HKDF salt of its subkey).
    salt: [u8; 32],
}

impl ObjectShared {
    pub fn new(slot: usize, root: &Root, committed: Committed) -> ObjectShared {
        ObjectShared {
            slot,
            name: root.name.clone(),
            obj_id: root.obj_id,
            pages: root.pages as usize,
            base: root.base,
            encrypted: root.encrypted,
            salt: root.salt,
            verifier: root.verifier,
            kdf: root.kdf,
            keys: OnceLock::new(),
            committed: RwLock::new(committed),
            staged: Mutex::new(Staged::default()),
            commit_lock: Mutex::new(()),
            writer: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
            destroyed: AtomicBool::new(false),
            auth: Mutex::new(AuthTime::default()),
        }
    }

    /// Every frame the committed state holds: root, tables, data.
    pub fn frames(&self) -> Vec<u64> {
        let c = self.committed.read();
        let mut v = c.root_frames.clone();
        v.extend(c.tables.iter().map(|t| t.0).filter(|&p| p != 0));
        v.extend(c.entries.iter().map(|e| e.pfn).filter(|&p| p != 0));
        v
    }

    /// Check the key (if any), the root's MAC or hash, its epoch, and its
    /// binding to this pool and slot.
    pub fn authenticate(&self, key: Option<&[u8]>, pool_id: u64) -> Result<()> {
        match (self.encrypted, key) {
            (true, None) => {
                return Err(PmoError::KeyRequired {
                    name: self.name.clone(),
                })
            }
            (false, Some(_)) => {
                return Err(PmoError::KeyNotExpected {
                    name: self.name.clone(),
                })
            }
            _ => {}
        }
        let c = self.committed.read();
        if let Some(key) = key {
            let derived = ObjectKeys::derive(key, &self.salt, self.kdf)?;
            if !derived.verifier_matches(self.obj_id, &self.salt, self.kdf, &self.verifier) {
                return Err(PmoError::WrongKey {
                    name: self.name.clone(),
                });
            }
            if !derived.mac_matches(&[&c.root_body], &c.root_mac) {
                return Err(PmoError::RootAuth {
                    name: self.name.clone(),
                    reason: "MAC does not match (root tampered with)".into(),
                });
            }
            let _ = self.keys.set(derived);
        } else if sha256(&[&c.root_body]) != c.root_mac {
            return Err(PmoError::RootAuth {
                name: self.name.clone(),
                reason: "hash does not match (root corrupted)".into(),
            });
        }
        let (root, _) =
            Root::decode(&[&c.root_body[..], &c.root_mac[..]].concat()).map_err(|reason| {
                PmoError::RootAuth {
                    name: self.name.clone(),
                    reason,
                }
            })?;
        if root.epoch != c.epoch {
            return Err(PmoError::RolledBack {
                name: self.name.clone(),
                root_epoch: root.epoch,
                pool_epoch: c.epoch,
            });
        }
        if root.pool_id != pool_id {
            return Err(PmoError::RootAuth {
                name: self.name.clone(),
                reason: format!(
                    "bound to pool {:016x}, but this pool's id is {pool_id:016x} (object copied from another pool, or the pool id changed)",
                    root.pool_id
                ),
            });
        }
        if root.slot as usize != self.slot {
            return Err(PmoError::RootAuth {
                name: self.name.clone(),
                reason: format!(
                    "bound to directory slot {}, found in slot {} (record moved)",
                    root.slot, self.slot
                ),
            });
        }
        Ok(())
    }

    /// Check each table page against the hash in the (authenticated) root.
    pub fn check_tables(&self, pool: &PoolInner) -> Result<()> {
        let c = self.committed.read();
        for (t, (pfn, sha)) in c.tables.iter().enumerate() {
            let bytes: &[u8] = if *pfn == 0 {
                &ZERO_PAGE
            } else {
                pool.frame(*pfn)
            };
            // The in-memory entries came from these bytes at pool open;
            // check both the medium and that copy.
            let mut copy = vec![0u8; PAGE];
            let first = t * ENTRIES_PER_TABLE;
            let end = (first + ENTRIES_PER_TABLE).min(self.pages);
            for (i, e) in c.entries[first..end].iter().enumerate() {
                e.encode_into(&mut copy[i * ENTRY..(i + 1) * ENTRY]);
            }
            if sha256(&[bytes]) != *sha || sha256(&[&copy]) != *sha {
                return Err(PmoError::TableAuth {
                    name: self.name.clone(),
                    table: t,
                    first,
                    end,
                });
            }
        }
        Ok(())
    }

    fn check_index(&self, index: usize, len: usize) -> Result<()> {
        if self.destroyed.load(Ordering::Acquire) {
            return Err(PmoError::UnknownObject {
                name: self.name.clone(),
            });
        }
        if index >= self.pages {
            return Err(PmoError::PageOutOfRange {
                name: self.name.clone(),
                page: index,
                pages: self.pages,
            });
        }
        if len != PAGE {
            return Err(PmoError::BadBuffer {
                name: self.name.clone(),
                page: index,
                len,
                page_size: PAGE,
            });
        }
        Ok(())
    }

    pub fn read_page(&self, pool: &PoolInner, index: usize, out: &mut [u8]) -> Result<()> {
        self.check_index(index, out.len())?;
        // Held across the copy: a commit frees old frames only under the
        // write lock, so the frame read here is not reused meanwhile.
        let c = self.committed.read();
        let e = c.entries[index];
        if e.pfn == 0 {
            out.fill(0);
            return Ok(());
        }
        out.copy_from_slice(pool.frame(e.pfn));
        if self.encrypted {
            let keys = self.keys.get().expect("attached with a key");
            if !keys.open(self.obj_id, index as u64, e.version, &e.salt, &e.tag, out) {
                self.superseded(pool, index, c.epoch)?;
                return Err(PmoError::PageAuth {
                    name: self.name.clone(),
                    page: index,
                });
            }
        } else if plain_tag(self.obj_id, index as u64, e.version, out) != e.tag {
            out.fill(0);
            self.superseded(pool, index, c.epoch)?;
            return Err(PmoError::PageCorrupt {
                name: self.name.clone(),
                page: index,
            });
        }
        Ok(())
    }

    /// After a page failed its check: if another writer has committed this
    /// object since this handle's version, the page's frame was reused,
    /// which is not damage ([`PmoError::Superseded`]).
    fn superseded(&self, pool: &PoolInner, page: usize, seen: u64) -> Result<()> {
        let now = pool.medium_seq(self.slot);
        if now > seen {
            return Err(PmoError::Superseded {
                name: self.name.clone(),
                page,
                seen,
                now,
            });
        }
        Ok(())
    }

    pub fn stage_page(&self, pool: &PoolInner, index: usize, data: &[u8]) -> Result<()> {
        self.stage_pages(pool, &[(index, data)])
    }

    /// Seal and write `pages` (index, contents) to new frames and stage
    /// them, as [`ObjectShared::stage_page`] one after another would (a
    /// page given twice: the later contents win). The locks and the frame
    /// allocator are taken before and after the batch, not between its
    /// pages: a locked instruction waits for the streaming stores before
    /// it to reach memory, so with none between pages each page's
    /// write-back overlaps the next page's sealing. On an error nothing of
    /// the batch is staged and its frames are freed.
    ///
    /// Invariant past the first lines: `pages` is in strictly increasing
    /// page order (a batch that is not is put so first).
    pub fn stage_pages(&self, pool: &PoolInner, pages: &[(usize, &[u8])]) -> Result<()> {
        for &(index, data) in pages {
            self.check_index(index, data.len())?;
        }
        if pages.len() > 1 && !pages.windows(2).all(|w| w[0].0 < w[1].0) {
            // Not in increasing page order, so maybe a page given twice:
            // staged once with its later contents, taking one frame as
            // one by one would.
            let mut last: Vec<(usize, usize)> = pages
                .iter()
                .enumerate()
                .map(|(k, &(index, _))| (index, k))
                .collect();
            last.sort_unstable();
            last.dedup_by(|later, kept| {
                let same = later.0 == kept.0;
                if same {
                    kept.1 = later.1;
                }
                same
            });
            let once: Vec<(usize, &[u8])> = last.iter().map(|&(_, k)| pages[k]).collect();
            return self.stage_pages(pool, &once);
        }
        // Versions are drawn for the whole batch at once: each is used at
        // most once under the session's subkey, and a batch that fails
        // leaves its versions unused, which is harmless.
        let (first_version, salt) = {
            let mut s = self.staged.lock();
            let first = s.next_version;
            s.next_version += pages.len() as u64;
            (first, s.salt)
        };
        let mut frames = Vec::with_capacity(pages.len());
        for _ in pages {
            match pool.alloc_frame(&self.name) {
                Ok(pfn) => frames.push(pfn),
                Err(e) => {
                    pool.free_frames(&frames);
                    return Err(e);
                }
            }
        }
        let sealer = match self.keys.get() {
            Some(keys) if self.encrypted => Some(keys.sealer(&salt)),
            _ => None,
        };
        let mut entries = Vec::with_capacity(pages.len());
        for (k, (&(index, data), &pfn)) in pages.iter().zip(&frames).enumerate() {
            let version = first_version + k as u64;
            let off = pfn as usize * PAGE;
            let tag = match &sealer {
                Some(sealer) => SCRATCH.with(|scratch| {
                    // Sealed into a cache-resident scratch page, then
                    // streamed to the frame: the ciphertext is written to
                    // the medium once.
                    let mut scratch = scratch.borrow_mut();
                    let tag =
                        sealer.seal_into(self.obj_id, index as u64, version, data, &mut scratch.0);
                    pool.medium.write_persist(off, &scratch.0);
                    tag
                }),
                None => {
                    pool.medium.write_persist(off, data);
                    plain_tag(self.obj_id, index as u64, version, data)
                }
            };
            let salt = if self.encrypted { salt } else { [0u8; 32] };
            entries.push((
                index,
                Entry {
                    pfn,
                    version,
                    tag,
                    salt,
                },
            ));
        }
        let old: Vec<u64> = {
            let mut s = self.staged.lock();
            entries
                .into_iter()
                .filter_map(|(index, e)| s.pages.insert(index, e).map(|old| old.pfn))
                .collect()
        };
        if !old.is_empty() {
            pool.free_frames(&old);
        }
        Ok(())
    }

    pub fn commit(&self, pool: &PoolInner) -> Result<()> {
        if self.destroyed.load(Ordering::Acquire) {
            return Err(PmoError::UnknownObject {
                name: self.name.clone(),
            });
        }
        let pages = std::mem::take(&mut self.staged.lock().pages);
        if pages.is_empty() {
            return Ok(());
        }
        self.commit_inner(pool, pages)
    }

    /// Start a write attachment (a session): a fresh random salt, so its
    /// subkey is new, and a counter from 0. Nothing is written: no earlier
    /// session, crashed or in a copy of the pool, can have used this
    /// (subkey, nonce) pair.
    pub fn begin_write(&self, _pool: &PoolInner) -> Result<()> {
        let mut s = self.staged.lock();
        s.salt = session_salt();
        s.next_version = 0;
        Ok(())
    }

    /// Drop staged pages (detach without psync).
    pub fn discard_staged(&self, pool: &PoolInner) {
        let pages = std::mem::take(&mut self.staged.lock().pages);
        let frames: Vec<u64> = pages.values().map(|e| e.pfn).collect();
        pool.free_frames(&frames);
    }

    /// The psync: new table pages and a new root out of place, then one
    /// record flip. On an error before the flip, the staged pages are put
    /// back and every new frame freed: the committed state is untouched.
    fn commit_inner(&self, pool: &PoolInner, pages: BTreeMap<usize, Entry>) -> Result<()> {
        let _one = self.commit_lock.lock();
        let mut new_frames: Vec<u64> = Vec::new();
        let mut record_attempted = false;
        let result = self.build_and_flip(pool, &pages, &mut new_frames, &mut record_attempted);
        match result {
            Ok(old_frames) => {
                pool.free_frames(&old_frames);
                // The freshness record outside the pool (if the pool has a
                // state store): after the flip, so the store never runs
                // ahead of the pool.
                let epoch = self.committed.read().epoch;
                pool.record_epoch(
                    self.slot,
                    self.obj_id,
                    &self.name,
                    self.encrypted,
                    epoch,
                    crate::state::Kind::Live,
                )
            }
            Err(e) if record_attempted => {
                // Failed at the record flip (see build_and_flip): nothing
                // can be safely reused.
                Err(e)
            }
            Err(e) => {
                pool.free_frames(&new_frames);
                self.put_back(pool, pages);
                Err(e)
            }
        }
    }

    /// One psync at a time per object (psync and `psync_many`).
    pub(crate) fn commit_guard(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.commit_lock.lock()
    }

    /// Take the pages staged so far (for a commit).
    pub(crate) fn take_staged(&self) -> BTreeMap<usize, Entry> {
        std::mem::take(&mut self.staged.lock().pages)
    }

    /// Give back pages taken for a commit that failed before its record
    /// was written; a page staged again meanwhile is newer and kept.
    pub(crate) fn put_back(&self, pool: &PoolInner, pages: BTreeMap<usize, Entry>) {
        let mut s = self.staged.lock();
        for (i, entry) in pages {
            if let std::collections::btree_map::Entry::Vacant(v) = s.pages.entry(i) {
                v.insert(entry);
            } else {
                pool.free_frames(&[entry.pfn]);
            }
        }
    }

    fn build_and_flip(
        &self,
        pool: &PoolInner,
        pages: &BTreeMap<usize, Entry>,
        new_frames: &mut Vec<u64>,
        record_attempted: &mut bool,
    ) -> Result<Vec<u64>> {
        let built = self.build(pool, pages, new_frames)?;
        // 3. Data, tables and root durable before the record that names them.
        pool.medium.drain()?;
        // If the record write fails it may or may not have reached the
        // medium: the new frames may be live after a reopen, so they are
        // not freed (at worst leaked until the pool is reopened and the
        // allocator rebuilt), and the staged pages are not put back.
        *record_attempted = true;
        // 4. The one atomic update: the slot's other record; 5. visible to
        // readers of the committed state.
        let (which, record) = (built.which, built.record.clone());
        let old_frames = built.old_frames.clone();
        pool.write_record(self.slot, which, &record, || self.apply(built, pages))?;
        Ok(old_frames)
    }

    /// Steps 1 and 2 of a psync: new table pages for every table a staged
    /// page falls in and a new root, written out of place and persisted
    /// (not yet ordered: the caller drains). Returns the record that will
    /// name them.
    pub(crate) fn build(
        &self,
        pool: &PoolInner,
        pages: &BTreeMap<usize, Entry>,
        new_frames: &mut Vec<u64>,
    ) -> Result<Built> {
        let (epoch, which, mut tables) = {
            let c = self.committed.read();
            (c.epoch, c.which, c.tables.clone())
        };
        // 1. New table pages for every table a staged page falls in.
        let mut touched: BTreeMap<usize, Vec<(usize, Entry)>> = BTreeMap::new();
        for (&i, &e) in pages {
            touched
                .entry(i / ENTRIES_PER_TABLE)
                .or_default()
                .push((i, e));
        }
        let mut old_frames = Vec::new();
        let mut table_ns = 0u64;
        {
            let c = self.committed.read();
            for (&t, updates) in &touched {
                let pfn = pool.alloc_frame(&self.name)?;
                new_frames.push(pfn);
                let buf = pool.frame_mut(pfn);
                buf.fill(0);
                let first = t * ENTRIES_PER_TABLE;
                let end = (first + ENTRIES_PER_TABLE).min(self.pages);
                for (k, e) in c.entries[first..end].iter().enumerate() {
                    e.encode_into(&mut buf[k * ENTRY..(k + 1) * ENTRY]);
                }
                for (i, e) in updates {
                    let k = i - first;
                    e.encode_into(&mut buf[k * ENTRY..(k + 1) * ENTRY]);
                    let old = c.entries[*i].pfn;
                    if old != 0 {
                        old_frames.push(old);
                    }
                }
                pool.medium.persist(pfn as usize * PAGE, PAGE);
                if tables[t].0 != 0 {
                    old_frames.push(tables[t].0);
                }
                let t0 = Instant::now();
                tables[t] = (pfn, sha256(&[buf]));
                table_ns += t0.elapsed().as_nanos() as u64;
            }
            old_frames.extend(c.root_frames.iter().copied());
        }
        // 2. The new root, MAC'd with the key (hashed without one).
        let root = Root {
            obj_id: self.obj_id,
            epoch: epoch + 1,
            pool_id: pool.pool_id(),
            slot: self.slot as u32,
            store_id: pool.store_id(),
            encrypted: self.encrypted,
            name: self.name.clone(),
            pages: self.pages as u64,
            base: self.base,
            salt: self.salt,
            verifier: self.verifier,
            kdf: self.kdf,
            tables,
        };
        let body = root.encode_body();
        let t0 = Instant::now();
        let mac = match self.keys.get() {
            Some(k) if self.encrypted => k.mac(&[&body]),
            _ => sha256(&[&body]),
        };
        let mac_ns = t0.elapsed().as_nanos() as u64;
        let (root_frames, root_pfn, root_sha, root_len, record_ns) =
            pool.write_root(&self.name, &body, &mac, new_frames)?;
        {
            let mut a = self.auth.lock();
            a.psyncs += 1;
            a.table_hash_ns += table_ns;
            a.root_mac_ns += mac_ns;
            a.record_hash_ns += record_ns;
        }
        let record = crate::layout::Record {
            seq: epoch + 1,
            state: SlotState::Live,
            root_len,
            root_pfn,
            obj_id: self.obj_id,
            root_sha,
        };
        Ok(Built {
            which: 1 - which,
            store_id: root.store_id,
            record,
            root_frames,
            body,
            mac,
            tables: root.tables,
            old_frames,
        })
    }

    /// The in-memory commit after `built`'s record flipped (under the
    /// directory lock): what readers of the committed state see.
    pub(crate) fn apply(&self, built: Built, pages: &BTreeMap<usize, Entry>) {
        let mut c = self.committed.write();
        c.epoch = built.record.seq;
        c.which = built.which;
        c.store_id = built.store_id;
        c.root_frames = built.root_frames;
        c.root_body = built.body;
        c.root_mac = built.mac;
        c.tables = built.tables;
        for (&i, &e) in pages {
            c.entries[i] = e;
        }
    }
}

/// A psync's new state written out of place ([`ObjectShared::build`]):
/// the record to write and what it names.
pub(crate) struct Built {
    /// The slot record to overwrite (the older one).
    pub which: usize,
    /// The state store identity the new root names.
    store_id: u64,
    /// The new record (its `seq` is the new epoch).
    pub record: crate::layout::Record,
    root_frames: Vec<u64>,
    body: Vec<u8>,
    mac: [u8; 32],
    tables: Vec<(u64, [u8; 32])>,
    /// Frames the committed state stops using once the record flips.
    pub old_frames: Vec<u64>,
}

pub(crate) static ZERO_PAGE: [u8; PAGE] = [0u8; PAGE];

#[repr(align(64))]
struct Scratch([u8; PAGE]);

thread_local! {
    static SCRATCH: std::cell::RefCell<Box<Scratch>> = std::cell::RefCell::new(Box::new(Scratch([0u8; PAGE])));
}

/// Pages per run when a batch is staged on every thread of the current
/// rayon pool: runs long enough that each stays a batch, enough of them
/// (four per thread) that a thread slowed by others still shares the work.
pub(crate) fn parallel_run(pages: usize) -> usize {
    pages.div_ceil(4 * rayon::current_num_threads()).max(4)
}

/// An object attached for reading or writing: the seed's `attach` minus
/// the mapping (which the fault engine builds on this as a [`PageBacking`]).
/// Dropping the handle detaches: pages staged and not psynced are dropped.
pub struct ObjectHandle {
    pub(crate) shared: Arc<ObjectShared>,
    pub(crate) pool: Arc<PoolInner>,
    pub(crate) perm: Perm,
}

impl std::fmt::Debug for ObjectHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectHandle")
            .field("name", &self.shared.name)
            .field("perm", &self.perm)
            .finish()
    }
}

impl ObjectHandle {
    /// The object's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }
    /// How it is attached.
    pub fn perm(&self) -> Perm {
        self.perm
    }
    /// Size in bytes (pages × 4096).
    pub fn size(&self) -> usize {
        self.shared.pages * PAGE
    }
    /// Where page `index`'s committed version lives on the medium: its
    /// data frame (`None` if never written) and its page-table frame
    /// (`None` while the table is all empty). For inspection tools and
    /// tamper tests.
    pub fn page_location(&self, index: usize) -> Option<(Option<u64>, Option<u64>)> {
        let c = self.shared.committed.read();
        let e = c.entries.get(index)?;
        let t = c.tables[index / ENTRIES_PER_TABLE].0;
        Some(((e.pfn != 0).then_some(e.pfn), (t != 0).then_some(t)))
    }
    /// The session salt and counter page `index`'s committed version was
    /// sealed under (`None` if never written): for tests that two forks
    /// never repeat a (key, nonce) pair.
    pub fn page_nonce(&self, index: usize) -> Option<([u8; 32], u64)> {
        let c = self.shared.committed.read();
        let e = c.entries.get(index)?;
        (e.pfn != 0).then_some((e.salt, e.version))
    }
    /// The committed epoch (one more after every psync).
    pub fn epoch(&self) -> u64 {
        self.shared.committed.read().epoch
    }

    /// Time this process's psyncs of the object spent authenticating
    /// (table hashes, root MAC, record hash), for benchmarks.
    pub fn auth_time(&self) -> AuthTime {
        *self.shared.auth.lock()
    }

    fn writable(&self) -> Result<()> {
        if self.perm == Perm::Write {
            Ok(())
        } else {
            Err(PmoError::ReadOnly {
                name: self.shared.name.clone(),
            })
        }
    }

    /// [`PageBacking::read_page`] with this crate's error type.
    pub fn read(&self, index: usize, out: &mut [u8]) -> Result<()> {
        let r = self.shared.read_page(&self.pool, index, out);
        let r = self.pool.medium.guarded(r);
        if r.is_err() {
            out.fill(0); // no plaintext (nor zeros as if read) on failure
        }
        r
    }
    /// [`PageBacking::stage_page`] with this crate's error type.
    pub fn stage(&self, index: usize, data: &[u8]) -> Result<()> {
        self.writable()?;
        let r = self.shared.stage_page(&self.pool, index, data);
        self.pool.medium.guarded(r)
    }
    /// Stage several pages at once on this thread: the same result as
    /// staging them one by one in order, faster (see
    /// [`PageBacking::stage_pages`]); on an error none of them is staged.
    pub fn stage_pages(&self, pages: &[(usize, &[u8])]) -> Result<()> {
        self.writable()?;
        let r = self.shared.stage_pages(&self.pool, pages);
        self.pool.medium.guarded(r)
    }
    /// Stage several pages at once, sealed in parallel on the threads of
    /// the current rayon pool (the global one: one per CPU), as psync of
    /// many dirty pages does: each thread seals a run of them as one
    /// batch ([`ObjectHandle::stage_pages`]). The same result as staging
    /// them one by one, in any order; on an error some pages may be staged
    /// (as with a failed `stage` in a loop), and nothing is committed
    /// until psync.
    pub fn stage_many(&self, pages: &[(usize, &[u8])]) -> Result<()> {
        use rayon::prelude::*;
        self.writable()?;
        let r = pages
            .par_chunks(parallel_run(pages.len()))
            .try_for_each(|run| self.shared.stage_pages(&self.pool, run));
        self.pool.medium.guarded(r)
    }
    /// psync: [`PageBacking::commit`] with this crate's error type.
    pub fn psync(&self) -> Result<()> {
        self.writable()?;
        let r = self.shared.commit(&self.pool);
        self.pool.medium.guarded(r)
    }
    /// Read the whole object (committed state).
    pub fn read_all(&self) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.size()];
        for (i, page) in out.chunks_exact_mut(PAGE).enumerate() {
            self.read(i, page)?;
        }
        Ok(out)
    }
    /// Stage `bytes` at byte offset `offset` (read-modify-write of partial
    /// pages from the committed state); psync makes it durable.
    pub fn write_at(&self, offset: usize, bytes: &[u8]) -> Result<()> {
        self.writable()?;
        if offset + bytes.len() > self.size() {
            return Err(PmoError::PageOutOfRange {
                name: self.shared.name.clone(),
                page: (offset + bytes.len()).div_ceil(PAGE),
                pages: self.shared.pages,
            });
        }
        let mut page = vec![0u8; PAGE];
        let mut done = 0;
        while done < bytes.len() {
            let at = offset + done;
            let (index, within) = (at / PAGE, at % PAGE);
            let n = (PAGE - within).min(bytes.len() - done);
            if n < PAGE {
                self.read(index, &mut page)?;
            }
            page[within..within + n].copy_from_slice(&bytes[done..done + n]);
            self.stage(index, &page)?;
            done += n;
        }
        Ok(())
    }
}

impl Drop for ObjectHandle {
    fn drop(&mut self) {
        if self.perm == Perm::Write {
            self.shared.discard_staged(&self.pool);
            self.shared.writer.store(false, Ordering::Release);
            self.pool.unlock_object(self.shared.slot);
        }
        self.shared.handles.fetch_sub(1, Ordering::AcqRel);
    }
}

use crate::backing::BackingError;

impl PageBacking for ObjectHandle {
    fn page_size(&self) -> usize {
        PAGE
    }
    fn page_count(&self) -> usize {
        self.shared.pages
    }
    fn base_address(&self) -> usize {
        self.shared.base as usize
    }
    fn encrypted(&self) -> bool {
        self.shared.encrypted
    }
    fn read_page(&self, index: usize, out: &mut [u8]) -> std::result::Result<(), BackingError> {
        Ok(self.read(index, out)?)
    }
    fn stage_page(&self, index: usize, data: &[u8]) -> std::result::Result<(), BackingError> {
        Ok(self.stage(index, data)?)
    }
    fn stage_pages(&self, pages: &[(usize, &[u8])]) -> std::result::Result<(), BackingError> {
        Ok(ObjectHandle::stage_pages(self, pages)?)
    }
    fn commit(&self) -> std::result::Result<(), BackingError> {
        Ok(self.psync()?)
    }
    fn as_any(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        Some(self)
    }
    fn cache_identity(&self) -> crate::backing::CacheIdentity {
        crate::backing::CacheIdentity {
            pool: self.pool.pool_id(),
            object: self.shared.obj_id,
            version: self.shared.committed.read().epoch,
            open: self.pool.open_id(),
        }
    }
}
