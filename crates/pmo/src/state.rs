//! The state store: freshness beyond the pool file.
//!
//! A pool file alone cannot tell that it was rolled back: an older copy
//! (a backup, a VM snapshot, `cp`) is a perfectly valid pool. So every
//! writer also records, per pool and per directory slot, the object id,
//! name, encryption (plain or sealed), epoch and state (being created,
//! live, being destroyed, destroyed) in a small file in a folder the user
//! names (`--state-dir`, default [`default_dir`]), one JSON file per pool
//! id. Opening a pool with a store compares the pool's directory with it;
//! a slot whose epoch is lower than the store's, an object missing,
//! replaced, renamed or stored plain where the store knows it sealed, an
//! object the store never saw created (a destroyed slot stays empty), or a
//! tombstone the store never saw is refused, naming the object and the
//! epochs.
//!
//! **The store's identity.** The store draws a random identity for each
//! pool it protects ([`PoolState::store_id`]) and the pool records it, in
//! its header and in every root (under the key's MAC for encrypted
//! objects). A pool that names a store is refused when the store at hand
//! does not hold that identity for it: the store was deleted or emptied,
//! another pool's record took its place, or the store looked in is
//! another one (another HOME). Without that check such a pool would open
//! with nothing to compare, and an older copy of it would pass for the
//! latest. Opening anyway is an explicit choice
//! ([`crate::PoolOptions::allow_missing_state`]) that the open reports.
//!
//! Update protocol (crash-safe): take an `flock` on `<pool id>.lock`,
//! read the file, change it, write `<pool id>.json.tmp`, `fsync` it,
//! `rename` it over the file, `fsync` the folder. A crash leaves the old or
//! the new file (a stray temporary is overwritten next time). The store is
//! updated *after* the record flip it describes, so an honest crash leaves
//! the pool at most one epoch ahead of the store, never behind; a destroy
//! also writes its intent *before* the tombstone, so a tombstone the store
//! does not expect is a forged deletion; a create writes its intent
//! (`creating`) before its record too, so an object the store has never
//! heard of is a forged one.
//!
//! **Group commit.** A psync changes one slot ([`StateStore::update_slot`]):
//! the writer first publishes its slot record in a small pending file
//! (`<pool id>.pending-<slot>`, no fsync), then takes the lock. Whoever
//! holds the lock applies every published record newer than the store's
//! (its own and those of writers waiting behind it) in one write and
//! fsync; a writer that gets the lock and finds its record already in the
//! file (durable: written before the lock was released) returns without
//! any I/O. Concurrent writers of different objects thus share fsyncs
//! instead of queueing for one each. A pending record is published only
//! after the flip it describes (or as a destroy's intent), so applying one
//! late keeps the store at or behind the pool, as before.
//!
//! A group commit (`Pool::psync_many`) records all its slots in one write
//! ([`StateStore::update_slots`]) after its last flip, so the store holds
//! either none or all of a group's new epochs: a group rolled forward at
//! open is ahead of the store (allowed), and a group later found partly
//! rolled back is behind it in those slots (refused).
//!
//! **Deferred records.** A durable store write costs two `fsync`s (about
//! a tenth of a millisecond each on a fast disk), many times a psync of a
//! few pages, and no synchronous protocol can cost less than one. So by
//! default ([`StateCommit::Deferred`]) a psync hands its record to the
//! pool open's committer thread ([`Committer`]) and returns; the thread
//! writes every record handed to it since its last write in one write as
//! above (the newest per slot; a group's records are handed together, so
//! they land together), starting each write at least
//! [`crate::PoolOptions::state_gap`] after the last one ended, so the
//! psyncs in between share it (group commit; back to back, the thread's
//! file-system work takes the CPU from psyncs that share it). The store
//! then trails the pool by the gap, at most one write in progress and the
//! records handed meanwhile: what an
//! honest crash leaves is the pool ahead of the store, which the open
//! accepts, as it accepts one epoch ahead after a crash in the synchronous
//! protocol. The cost is a window: an attacker who can both stop the
//! process and roll the pool file back can undo the psyncs of that window
//! undetected; anything older is refused as before. `Pool::sync_state`
//! closes the window on demand (it returns once every record handed so far
//! is durable), the open's end closes it, and [`StateCommit::EveryPsync`]
//! closes it at every psync. Creates and destroys write their intents
//! synchronously in both modes: an intent must be durable before the
//! record it announces. A failed deferred write fails every later psync
//! and `sync_state` of the open (fail closed).
//!
//! Assumptions: the attacker who can rewrite the pool file cannot rewrite
//! the store (another disk, another owner, or a TPM NV counter later); a
//! pool used on two machines has two stores that do not know each other.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{PmoError, Result};

/// The store's default folder: `$XDG_STATE_HOME/nvmos`, else
/// `$HOME/.local/state/nvmos`.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("nvmos"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".local/state/nvmos"))
}

/// What the store records for one directory slot.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A create is under way: the object will be live at `epoch`.
    Creating,
    /// The object is live at `epoch`.
    Live,
    /// A destroy is under way: its tombstone will have `epoch`.
    Destroying,
    /// Destroyed; the tombstone has `epoch`.
    Destroyed,
}

/// One slot's entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRecord {
    /// The object's id (its generation: new at every pcreate).
    pub obj_id: u64,
    /// Its name.
    pub name: String,
    /// Sealed under a key (a keyless read of it is refused).
    pub encrypted: bool,
    /// The epoch (directory record sequence number).
    pub epoch: u64,
    /// Live or destroyed.
    pub kind: Kind,
}

/// One pool's file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolState {
    /// The store's identity for this pool (random, never 0 once set): the
    /// pool's header and roots name it (see the module text). 0: none.
    #[serde(default)]
    pub store_id: u64,
    /// The pool this record belongs to (its header's id): a record copied
    /// over another pool's file name is told apart.
    #[serde(default)]
    pub pool_id: u64,
    /// The pool file, as last seen (informational; used to notice a pool
    /// whose id changed).
    pub path: PathBuf,
    /// By slot.
    pub slots: BTreeMap<usize, SlotRecord>,
}

impl PoolState {
    /// The pool's epoch as the store knows it: the sum of its slots' epochs
    /// (every commit raises exactly one slot's epoch by one).
    pub fn epoch(&self) -> u64 {
        self.slots.values().map(|s| s.epoch).sum()
    }
}

/// A state store folder.
#[derive(Clone, Debug)]
pub struct StateStore {
    dir: PathBuf,
}

impl StateStore {
    /// Use (and create, mode 0700) the folder `dir`.
    pub fn open(dir: &Path) -> Result<StateStore> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| PmoError::State {
                path: dir.to_owned(),
                what: format!("creating the folder: {e}"),
            })?;
        Ok(StateStore {
            dir: dir.to_owned(),
        })
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds pool `pool_id`'s record.
    pub fn file(&self, pool_id: u64) -> PathBuf {
        self.dir.join(format!("{pool_id:016x}.json"))
    }

    fn err(&self, path: &Path, what: String) -> PmoError {
        PmoError::State {
            path: path.to_owned(),
            what,
        }
    }

    /// The pool's state (empty if the store has never seen it).
    pub fn load(&self, pool_id: u64) -> Result<PoolState> {
        let path = self.file(pool_id);
        match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| self.err(&path, format!("unreadable ({e}); remove it only if you accept that rollbacks of this pool go undetected"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PoolState::default()),
            Err(e) => Err(self.err(&path, format!("reading: {e}"))),
        }
    }

    /// Pool ids (other than `pool_id`) the store last saw at `path`.
    pub fn other_ids_at(&self, path: &Path, pool_id: u64) -> Vec<u64> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut v = Vec::new();
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(hex) = name.strip_suffix(".json") else {
                continue;
            };
            let Ok(id) = u64::from_str_radix(hex, 16) else {
                continue;
            };
            if id == pool_id {
                continue;
            }
            if let Ok(s) = self.load(id) {
                if s.path == path {
                    v.push(id);
                }
            }
        }
        v
    }

    /// Forget pool `pool_id` (its pool file was replaced by a new pool).
    pub fn forget(&self, pool_id: u64) -> Result<()> {
        self.drop_pending(pool_id);
        let path = self.file(pool_id);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.err(&path, format!("removing: {e}"))),
        }
    }

    fn pending_prefix(pool_id: u64) -> String {
        format!("{pool_id:016x}.pending-")
    }

    /// Published slot records of `pool_id`: (slot, record); unreadable
    /// ones (being written) are skipped: their writers apply them.
    fn pending(&self, pool_id: u64) -> Vec<(usize, SlotRecord)> {
        let prefix = Self::pending_prefix(pool_id);
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut v = Vec::new();
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(slot) = name.strip_prefix(&prefix) else {
                continue;
            };
            let Ok(slot) = slot.parse::<usize>() else {
                continue;
            };
            if let Ok(b) = std::fs::read(e.path()) {
                if let Ok(r) = serde_json::from_slice::<SlotRecord>(&b) {
                    v.push((slot, r));
                }
            }
        }
        v
    }

    fn drop_pending(&self, pool_id: u64) {
        let prefix = Self::pending_prefix(pool_id);
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }

    /// Record `rec` for `slot`, group-committed with concurrent writers
    /// (see the module text). Returns once `rec` (or a newer record of the
    /// slot) is durable in the store.
    pub fn update_slot(
        &self,
        pool_id: u64,
        pool_path: &Path,
        slot: usize,
        rec: SlotRecord,
        crash_hook: &dyn Fn(),
    ) -> Result<()> {
        let pending = self
            .dir
            .join(format!("{}{slot}", Self::pending_prefix(pool_id)));
        let bytes = serde_json::to_vec(&rec).expect("plain data serializes");
        std::fs::write(&pending, bytes).map_err(|e| self.err(&pending, format!("writing: {e}")))?;
        self.locked_write(pool_id, pool_path, crash_hook, |state| {
            if state
                .slots
                .get(&slot)
                .is_some_and(|have| !newer(&rec, have))
            {
                return false; // Already applied (ours, or newer).
            }
            state.slots.insert(slot, rec);
            for (s, r) in self.pending(pool_id) {
                if state.slots.get(&s).is_none_or(|have| newer(&r, have)) {
                    state.slots.insert(s, r);
                }
            }
            true
        })
    }

    /// Record several slots at once, in one write (a group commit,
    /// `Pool::psync_many`): the store moves every slot of the group
    /// together, so it never holds some of a group's new epochs without the
    /// others. Records older than the store's are skipped; other writers'
    /// published records are applied too (see [`StateStore::update_slot`]).
    pub fn update_slots(
        &self,
        pool_id: u64,
        pool_path: &Path,
        recs: &[(usize, SlotRecord)],
        crash_hook: &dyn Fn(),
    ) -> Result<()> {
        self.locked_write(pool_id, pool_path, crash_hook, |state| {
            let mut changed = false;
            for (slot, rec) in recs {
                if state.slots.get(slot).is_none_or(|have| newer(rec, have)) {
                    state.slots.insert(*slot, rec.clone());
                    changed = true;
                }
            }
            if changed {
                for (s, r) in self.pending(pool_id) {
                    if state.slots.get(&s).is_none_or(|have| newer(&r, have)) {
                        state.slots.insert(s, r);
                    }
                }
            }
            changed
        })
    }

    /// Change the pool's state crash-safely (see the module text).
    /// `crash_hook` is called between the steps (crash injection). Drops
    /// the published records of slot updates (their writers apply their
    /// own if still needed).
    pub fn update(
        &self,
        pool_id: u64,
        pool_path: &Path,
        change: impl FnOnce(&mut PoolState),
        crash_hook: &dyn Fn(),
    ) -> Result<()> {
        self.locked_write(pool_id, pool_path, crash_hook, |state| {
            self.drop_pending(pool_id);
            change(state);
            true
        })
    }

    /// Under the store's lock: load, `change` (false: nothing to write),
    /// write crash-safely.
    fn locked_write(
        &self,
        pool_id: u64,
        pool_path: &Path,
        crash_hook: &dyn Fn(),
        change: impl FnOnce(&mut PoolState) -> bool,
    ) -> Result<()> {
        let lock_path = self.dir.join(format!("{pool_id:016x}.lock"));
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| self.err(&lock_path, format!("opening: {e}")))?;
        // SAFETY: flock on an open fd; released when `lock` is closed.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(self.err(
                &lock_path,
                format!("locking: {}", std::io::Error::last_os_error()),
            ));
        }
        let mut state = self.load(pool_id)?;
        state.path = pool_path.to_owned();
        if !change(&mut state) {
            return Ok(());
        }
        let path = self.file(pool_id);
        let tmp = self.dir.join(format!("{pool_id:016x}.json.tmp"));
        let bytes = serde_json::to_vec_pretty(&state).expect("plain data serializes");
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(&bytes)?;
            crash_hook();
            f.sync_all()?;
            crash_hook();
            std::fs::rename(&tmp, &path)?;
            crash_hook();
            File::open(&self.dir)?.sync_all()
        };
        write().map_err(|e| self.err(&path, format!("writing: {e}")))?;
        drop(lock);
        Ok(())
    }
}

/// When a psync's new epoch reaches the state store (see the module text).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StateCommit {
    /// psync hands its record to the open's committer thread and returns;
    /// the store trails the pool by at most the gap between writes
    /// ([`crate::PoolOptions::state_gap`]), the write in progress and the
    /// records handed meanwhile.
    #[default]
    Deferred,
    /// psync returns once its record is durable in the store (two `fsync`s
    /// per psync, shared with concurrent writers).
    EveryPsync,
}

/// One pool open's committer of deferred records ([`StateCommit::Deferred`]):
/// a thread that writes, with [`StateStore::update_slots`], every record
/// handed to it since its last write.
///
/// Invariants: `durable <= handed`; a write starts no sooner than `gap`
/// after the previous one ended unless `urgent` or `stop` is set (and
/// both wake the thread); a hand-off's records enter `recs`
/// under one lock hold, and the thread takes all of `recs` under one, so
/// a group's records are written in one write; after a failed write
/// `failed` is set for good and nothing more is accepted.
pub(crate) struct Committer {
    shared: std::sync::Arc<CommitShared>,
    thread: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
    store_file: PathBuf,
    /// The process that started the thread: a child made by `fork` has
    /// this struct but not the thread, so it must not hand records to it.
    pid: u32,
}

struct CommitShared {
    queue: parking_lot::Mutex<CommitQueue>,
    /// Wakes the thread: records handed, or the open ends.
    wake: parking_lot::Condvar,
    /// Wakes waiters: a write finished or failed.
    done: parking_lot::Condvar,
}

#[derive(Default)]
struct CommitQueue {
    /// The newest record handed per slot and not yet taken by a write.
    recs: BTreeMap<usize, SlotRecord>,
    /// Hand-offs so far.
    handed: u64,
    /// Hand-offs whose records are durable in the store.
    durable: u64,
    /// The first failed write's error, for good.
    failed: Option<String>,
    /// The open is ending: write what is left, then stop.
    stop: bool,
    /// The thread waits for records (a hand-off must wake it; while it
    /// writes, or waits out the gap after a write, it takes what was
    /// handed meanwhile when it is done).
    idle: bool,
    /// A waiter wants every record handed so far durable now: the thread
    /// skips what is left of the gap.
    urgent: bool,
}

impl Committer {
    /// Start the committer of pool `pool_id` (file `pool_path`, made
    /// absolute before each write as the synchronous path does) in
    /// `store`; `crash_hook` is called between a write's steps.
    pub(crate) fn start(
        store: StateStore,
        pool_id: u64,
        pool_path: PathBuf,
        crash_hook: crate::medium::CrashHook,
        gap: std::time::Duration,
    ) -> Result<Committer> {
        let shared = std::sync::Arc::new(CommitShared {
            queue: parking_lot::Mutex::new(CommitQueue::default()),
            wake: parking_lot::Condvar::new(),
            done: parking_lot::Condvar::new(),
        });
        let store_file = store.file(pool_id);
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("nvmos-state".into())
            .spawn(move || {
                let mut last_write: Option<std::time::Instant> = None;
                loop {
                    let (recs, upto) = {
                        let mut q = worker.queue.lock();
                        while q.recs.is_empty() && !q.stop {
                            q.idle = true;
                            worker.wake.wait(&mut q);
                        }
                        q.idle = false;
                        if q.recs.is_empty() {
                            return;
                        }
                        // Group commit: at most one write per `gap`, so the
                        // records of all the psyncs in between share it.
                        if let Some(at) = last_write.map(|t| t + gap) {
                            while !q.urgent
                                && !q.stop
                                && !worker.wake.wait_until(&mut q, at).timed_out()
                            {
                            }
                        }
                        q.urgent = false;
                        let recs: Vec<(usize, SlotRecord)> =
                            std::mem::take(&mut q.recs).into_iter().collect();
                        (recs, q.handed)
                    };
                    let abs = pool_path
                        .canonicalize()
                        .unwrap_or_else(|_| pool_path.clone());
                    let r = store.update_slots(pool_id, &abs, &recs, &|| crash_hook.fire());
                    last_write = Some(std::time::Instant::now());
                    let mut q = worker.queue.lock();
                    match r {
                        Ok(()) => q.durable = q.durable.max(upto),
                        Err(e) => {
                            q.failed.get_or_insert(e.to_string());
                            q.recs.clear();
                        }
                    }
                    worker.done.notify_all();
                }
            })
            .map_err(|e| PmoError::State {
                path: store_file.clone(),
                what: format!("starting the thread that writes deferred records: {e}"),
            })?;
        Ok(Committer {
            shared,
            thread: parking_lot::Mutex::new(Some(thread)),
            store_file,
            pid: std::process::id(),
        })
    }

    /// Refuse use from a child made by `fork` after the thread started:
    /// records handed there would never be written, and a wait for them
    /// would never end.
    fn same_process(&self) -> Result<()> {
        if std::process::id() == self.pid {
            return Ok(());
        }
        Err(PmoError::State {
            path: self.store_file.clone(),
            what: format!(
                "this pool was opened by process {} and used here after a fork: open it again in this process",
                self.pid
            ),
        })
    }

    fn failed(&self, why: &str) -> PmoError {
        PmoError::State {
            path: self.store_file.clone(),
            what: format!(
                "a deferred record could not be written ({why}); this open records nothing more, so its later commits would go unprotected against rollback"
            ),
        }
    }

    /// Hand `recs` (one commit's, or one group's) to the thread; returns
    /// at once. Refused after a failed write.
    pub(crate) fn hand(&self, recs: &[(usize, SlotRecord)]) -> Result<()> {
        self.same_process()?;
        let mut q = self.shared.queue.lock();
        if let Some(why) = &q.failed {
            return Err(self.failed(why));
        }
        if q.stop {
            return Err(self.failed("the open is ending"));
        }
        for (slot, rec) in recs {
            match q.recs.get(slot) {
                Some(have) if !newer(rec, have) => {}
                _ => {
                    q.recs.insert(*slot, rec.clone());
                }
            }
        }
        q.handed += 1;
        if q.idle {
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    /// Wait until every record handed so far is durable in the store.
    pub(crate) fn flush(&self) -> Result<()> {
        self.same_process()?;
        let mut q = self.shared.queue.lock();
        let target = q.handed;
        if q.durable < target {
            q.urgent = true;
            self.shared.wake.notify_one();
        }
        while q.durable < target && q.failed.is_none() {
            self.shared.done.wait(&mut q);
        }
        match &q.failed {
            Some(why) => Err(self.failed(why)),
            None => Ok(()),
        }
    }

    /// Write what is left and stop the thread (the open's end).
    pub(crate) fn finish(&self) -> Result<()> {
        // A forked child's copy: the thread is its parent's to end, and
        // the child handed it nothing (`hand` refuses there).
        if std::process::id() != self.pid {
            return Ok(());
        }
        self.shared.queue.lock().stop = true;
        // Unconditionally: `idle` is set only once the thread waits.
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.lock().take() {
            if t.join().is_err() {
                let mut q = self.shared.queue.lock();
                q.failed.get_or_insert("its thread panicked".into());
            }
        }
        match &self.shared.queue.lock().failed {
            Some(why) => Err(self.failed(why)),
            None => Ok(()),
        }
    }
}

/// Whether `a` is a later record of a slot than `b`: a higher epoch; at
/// one epoch a create's completion over its intent, or a destroy's; or
/// the intent of a create retried after one that never reached its record
/// (a new object id at the same epoch).
fn newer(a: &SlotRecord, b: &SlotRecord) -> bool {
    let rank = |k: Kind| match k {
        Kind::Creating => 0,
        Kind::Live => 1,
        Kind::Destroying => 2,
        Kind::Destroyed => 3,
    };
    (a.epoch, rank(a.kind)) > (b.epoch, rank(b.kind))
        || (a.epoch == b.epoch
            && a.kind == Kind::Creating
            && b.kind == Kind::Creating
            && a.obj_id != b.obj_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_round_trips_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateStore::open(&dir.path().join("st")).unwrap();
        assert_eq!(s.load(5).unwrap(), PoolState::default());
        s.update(
            5,
            Path::new("/p"),
            |st| {
                st.slots.insert(
                    3,
                    SlotRecord {
                        obj_id: 9,
                        name: "A".into(),
                        encrypted: true,
                        epoch: 4,
                        kind: Kind::Live,
                    },
                );
            },
            &|| {},
        )
        .unwrap();
        let st = s.load(5).unwrap();
        assert_eq!(st.epoch(), 4);
        assert_eq!(st.slots[&3].name, "A");
        assert_eq!(s.other_ids_at(Path::new("/p"), 6), vec![5]);
        let names: Vec<_> = std::fs::read_dir(s.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    }

    #[test]
    fn slot_updates_apply_published_records_and_never_go_back() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateStore::open(&dir.path().join("st")).unwrap();
        let rec = |epoch, kind| SlotRecord {
            obj_id: 9,
            name: "A".into(),
            encrypted: false,
            epoch,
            kind,
        };
        s.update_slot(5, Path::new("/p"), 0, rec(3, Kind::Live), &|| {})
            .unwrap();
        // Another writer's published record (it waits for the lock) is
        // applied by this writer's update.
        std::fs::write(
            s.dir().join(format!("{}1", StateStore::pending_prefix(5))),
            serde_json::to_vec(&rec(7, Kind::Live)).unwrap(),
        )
        .unwrap();
        s.update_slot(5, Path::new("/p"), 0, rec(4, Kind::Live), &|| {})
            .unwrap();
        let st = s.load(5).unwrap();
        assert_eq!(st.slots[&0].epoch, 4);
        assert_eq!(st.slots[&1].epoch, 7);
        // An older record never replaces a newer one; a destroy's
        // completion replaces its intent at the same epoch.
        s.update_slot(5, Path::new("/p"), 0, rec(2, Kind::Live), &|| {})
            .unwrap();
        assert_eq!(s.load(5).unwrap().slots[&0].epoch, 4);
        s.update_slot(5, Path::new("/p"), 0, rec(5, Kind::Destroying), &|| {})
            .unwrap();
        s.update_slot(5, Path::new("/p"), 0, rec(5, Kind::Destroyed), &|| {})
            .unwrap();
        assert_eq!(s.load(5).unwrap().slots[&0].kind, Kind::Destroyed);
        // A create's intent, then its completion; a retried create (a new
        // object at the same epoch) replaces an intent that never landed.
        s.update_slot(5, Path::new("/p"), 0, rec(6, Kind::Creating), &|| {})
            .unwrap();
        let retry = SlotRecord {
            obj_id: 10,
            ..rec(6, Kind::Creating)
        };
        s.update_slot(5, Path::new("/p"), 0, retry.clone(), &|| {})
            .unwrap();
        assert_eq!(s.load(5).unwrap().slots[&0], retry);
        let live = SlotRecord {
            kind: Kind::Live,
            ..retry
        };
        s.update_slot(5, Path::new("/p"), 0, live.clone(), &|| {})
            .unwrap();
        assert_eq!(s.load(5).unwrap().slots[&0], live);
        // A whole-state update (accept_rollback) drops published records.
        s.update(5, Path::new("/p"), |st| st.slots.clear(), &|| {})
            .unwrap();
        s.update_slot(5, Path::new("/p"), 2, rec(1, Kind::Live), &|| {})
            .unwrap();
        let st = s.load(5).unwrap();
        assert_eq!(st.slots.keys().copied().collect::<Vec<_>>(), vec![2]);
    }
}
