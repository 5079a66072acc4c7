//! The state store: freshness beyond the pool file.
//!
//! A pool file alone cannot tell that it was rolled back: an older copy
//! (a backup, a VM snapshot, `cp`) is a perfectly valid pool. So every
//! writer also records, per pool and per directory slot, the object id,
//! name, epoch and state (live, being destroyed, destroyed) in a small
//! file in a folder the user names (`--state-dir`, default
//! [`default_dir`]), one JSON file per pool id. Opening a pool with a
//! store compares the pool's directory with it; a slot whose epoch is
//! lower than the store's, an object missing or replaced, or a tombstone
//! the store never saw is refused, naming the object and the epochs.
//!
//! Update protocol (crash-safe): take an `flock` on `<pool id>.lock`,
//! read the file, change it, write `<pool id>.json.tmp`, `fsync` it,
//! `rename` it over the file, `fsync` the folder. A crash leaves the old or
//! the new file (a stray temporary is overwritten next time). The store is
//! updated *after* the record flip it describes, so an honest crash leaves
//! the pool at most one epoch ahead of the store, never behind; a destroy
//! also writes its intent *before* the tombstone, so a tombstone the store
//! does not expect is a forged deletion.
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
    /// The epoch (directory record sequence number).
    pub epoch: u64,
    /// Live or destroyed.
    pub kind: Kind,
}

/// One pool's file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolState {
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

    fn file(&self, pool_id: u64) -> PathBuf {
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
        let path = self.file(pool_id);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.err(&path, format!("removing: {e}"))),
        }
    }

    /// Change the pool's state crash-safely (see the module text).
    /// `crash_hook` is called between the steps (crash injection).
    pub fn update(
        &self,
        pool_id: u64,
        pool_path: &Path,
        change: impl FnOnce(&mut PoolState),
        crash_hook: &dyn Fn(),
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
        change(&mut state);
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
}
