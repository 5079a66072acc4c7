//! Locks on a pool file: open-file-description (OFD) byte-range locks
//! (`fcntl(F_OFD_SETLK)`), one byte per thing locked, at offsets far past
//! any pool's end (locks on bytes that do not exist are allowed and touch
//! no data).
//!
//! OFD locks belong to the open file description, not the process: two
//! opens of one pool conflict whether they are in two processes or in one
//! (two threads each with their own [`crate::Pool::open`]), and every lock
//! goes away when its description is closed or its process dies, so a
//! crashed writer never leaves anything locked.
//!
//! The bytes:
//!
//! - [`PRESENCE`]: every open holds a read lock on it. Operations that need
//!   the pool to themselves (`repair`, `accept_rollback`) convert it to a
//!   write lock, which fails while any other open exists.
//! - [`META`]: the pool-wide metadata lock, a write lock held briefly for
//!   directory changes (pcreate, pdestroy) and for refreshing this open's
//!   view of the directory before it takes more frames.
//! - [`arena`]: the data frames are split into arenas; an arena's frames are
//!   handed out only by the open holding its write lock, so two writers
//!   never take the same frame (frames are freed by whichever open's commit
//!   stops using them, and picked up by the arena's holder at its next
//!   refresh).
//! - [`object`]: an object's write lock, held by its one writer.

use std::fs::File;
use std::os::fd::AsRawFd;

/// Base of the lock bytes (2^62: past any file).
const BASE: i64 = 1 << 62;
/// Every open's read lock; write-locked by exclusive operations.
pub const PRESENCE: i64 = BASE;
/// The pool-wide metadata lock.
pub const META: i64 = BASE + 1;

/// Arena `k`'s lock byte.
pub fn arena(k: usize) -> i64 {
    BASE + 1024 + k as i64
}

/// Object lock byte for directory slot `slot`.
pub fn object(slot: usize) -> i64 {
    BASE + 4096 + slot as i64
}

/// The kind of lock.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Shared.
    Read,
    /// Exclusive.
    Write,
    /// Release.
    Unlock,
}

/// Set (or with `wait`, wait for) a lock on byte `at` of `file`. `Ok(false)`:
/// another open holds a conflicting lock (only without `wait`).
pub fn set(file: &File, at: i64, kind: Kind, wait: bool) -> std::io::Result<bool> {
    // SAFETY: a zeroed flock is a valid value; fcntl reads it.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = match kind {
        Kind::Read => libc::F_RDLCK,
        Kind::Write => libc::F_WRLCK,
        Kind::Unlock => libc::F_UNLCK,
    } as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = at;
    fl.l_len = 1;
    let cmd = if wait {
        libc::F_OFD_SETLKW
    } else {
        libc::F_OFD_SETLK
    };
    loop {
        // SAFETY: fcntl on an open fd with a valid flock.
        if unsafe { libc::fcntl(file.as_raw_fd(), cmd, &fl) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::EACCES) if !wait => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Whether another open holds a lock on byte `at` that conflicts with a
/// write lock (a reader or a writer).
pub fn held_elsewhere(file: &File, at: i64) -> std::io::Result<bool> {
    // SAFETY: as in `set`.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = at;
    fl.l_len = 1;
    // SAFETY: fcntl on an open fd with a valid flock it may rewrite.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_descriptions_of_one_file_conflict_within_one_process() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"x").unwrap();
        let a = File::options().read(true).write(true).open(&p).unwrap();
        let b = File::options().read(true).write(true).open(&p).unwrap();
        assert!(set(&a, object(3), Kind::Write, false).unwrap());
        assert!(!set(&b, object(3), Kind::Write, false).unwrap());
        assert!(held_elsewhere(&b, object(3)).unwrap());
        // Another byte is free.
        assert!(set(&b, object(4), Kind::Write, false).unwrap());
        // Readers share; a write lock then fails until they go.
        assert!(set(&a, PRESENCE, Kind::Read, false).unwrap());
        assert!(set(&b, PRESENCE, Kind::Read, false).unwrap());
        assert!(!set(&a, PRESENCE, Kind::Write, false).unwrap());
        drop(b);
        assert!(set(&a, PRESENCE, Kind::Write, false).unwrap());
        assert!(set(&a, object(3), Kind::Unlock, false).unwrap());
    }
}
