//! Errors of the pool and its objects. Each names what failed and where:
//! the pool file, the object, the page.

use std::path::PathBuf;

/// Everything the pool and its objects can refuse or detect.
#[derive(Debug, thiserror::Error)]
pub enum PmoError {
    /// An operating-system call on the pool file failed.
    #[error("{op} {path}")]
    Io {
        /// What we were doing.
        op: &'static str,
        /// The pool file.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with a valid pool header.
    #[error("{path} is not an nvmos PMO pool: {reason}")]
    NotAPool {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The file is shorter than its header says.
    #[error("pool {path} is truncated: {actual} bytes, its header says {expected}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Bytes the header promises.
        expected: u64,
        /// Bytes the file has.
        actual: u64,
    },
    /// The file was truncated (by another process) while this process had
    /// it mapped: an access past its new end faulted. The operation's
    /// result is refused, nothing after the fault was committed, and the
    /// open pool stays refused (reopen it after restoring the file).
    #[error("pool {path} was truncated to {} while open (it is {expected} bytes): access at offset {offset} is past its end; nothing after it was committed", size.map_or("an unknown size".to_string(), |s| format!("{s} bytes")))]
    TruncatedWhileOpen {
        /// The file.
        path: PathBuf,
        /// Offset into the pool of the lowest faulting access.
        offset: u64,
        /// The file's size now (when `fstat` can tell).
        size: Option<u64>,
        /// Bytes the pool has (its header's size).
        expected: u64,
    },
    /// A pool cannot be created at this size.
    #[error("pool size {size} bytes is invalid: {reason}")]
    BadPoolSize {
        /// The size asked for.
        size: u64,
        /// Why not.
        reason: String,
    },
    /// The pool file already exists (create never overwrites).
    #[error("{path} already exists; remove it first to create a new pool there")]
    PoolExists {
        /// The file.
        path: PathBuf,
    },
    /// Another open of the pool holds the lock this open needs.
    #[error("pool {path} is open {held} elsewhere (lock held): {wanted} access refused")]
    PoolBusy {
        /// The pool file.
        path: PathBuf,
        /// "for writing" or "for reading".
        held: &'static str,
        /// "write" or "read".
        wanted: &'static str,
    },
    /// The pool was opened read-only and the call changes it.
    #[error("pool {path} is open read-only; {op} needs it open for writing")]
    PoolReadOnly {
        /// The pool file.
        path: PathBuf,
        /// The refused operation.
        op: &'static str,
    },
    /// No object of that name in the pool.
    #[error("no object named {name:?} in the pool")]
    UnknownObject {
        /// The name asked for.
        name: String,
    },
    /// pcreate of a name that exists.
    #[error("an object named {name:?} already exists in the pool")]
    ObjectExists {
        /// The name.
        name: String,
    },
    /// An object name that is empty, too long or not printable.
    #[error("invalid object name {name:?}: {reason}")]
    BadName {
        /// The name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// pcreate with size zero (or a size the layout cannot hold).
    #[error("invalid size {size} bytes for object {name:?}: {reason}")]
    BadObjectSize {
        /// The object.
        name: String,
        /// The size asked for.
        size: u64,
        /// Why.
        reason: String,
    },
    /// The key does not open this object.
    #[error("wrong key for object {name:?}")]
    WrongKey {
        /// The object.
        name: String,
    },
    /// The object is encrypted and no key was given.
    #[error("object {name:?} is encrypted: a key is needed")]
    KeyRequired {
        /// The object.
        name: String,
    },
    /// A key was given for an object stored without encryption.
    #[error("object {name:?} is not encrypted; it takes no key")]
    KeyNotExpected {
        /// The object.
        name: String,
    },
    /// The object is already attached for writing.
    #[error("object {name:?} is already attached for writing")]
    AlreadyAttached {
        /// The object.
        name: String,
    },
    /// Another writer holds the object's write lock (see `AttachOptions::wait`).
    #[error("object {name:?} is busy: attached for writing by {holder}")]
    ObjectBusy {
        /// The object.
        name: String,
        /// Who holds it, as far as known.
        holder: String,
    },
    /// A reader's version of the object was replaced by a later commit of
    /// another writer and its frames reused: the page read no longer holds
    /// that version. Open the object again to read the latest commit.
    #[error("object {name:?}: page {page} of epoch {seen} was reused after another writer committed epoch {now}; open the object again to read the latest version")]
    Superseded {
        /// The object.
        name: String,
        /// The page.
        page: usize,
        /// The epoch this handle reads.
        seen: u64,
        /// The epoch committed now.
        now: u64,
    },
    /// A write to an object attached read-only.
    #[error("object {name:?} is attached read-only")]
    ReadOnly {
        /// The object.
        name: String,
    },
    /// A page index past the end of the object.
    #[error("page {page} is outside object {name:?} ({pages} pages)")]
    PageOutOfRange {
        /// The object.
        name: String,
        /// The index asked for.
        page: usize,
        /// Pages in the object.
        pages: usize,
    },
    /// A buffer that is not exactly one page.
    #[error(
        "buffer of {len} bytes for page {page} of object {name:?}: a page is {page_size} bytes"
    )]
    BadBuffer {
        /// The object.
        name: String,
        /// The page.
        page: usize,
        /// The buffer's length.
        len: usize,
        /// Bytes per page.
        page_size: usize,
    },
    /// No room: not enough free frames (or directory slots, or address plan).
    #[error("pool is full: {what}")]
    PoolFull {
        /// What ran out.
        what: String,
    },
    /// A sealed page failed authentication: tampered, swapped, moved or rolled back.
    #[error("object {name:?} page {page}: authentication failed (page tampered with, swapped, moved or rolled back)")]
    PageAuth {
        /// The object.
        name: String,
        /// The page.
        page: usize,
    },
    /// A page-table page does not match the hash the root holds for it.
    #[error("object {name:?} page table {table} (pages {first}..{end}): hash does not match the root (table tampered with or rolled back)")]
    TableAuth {
        /// The object.
        name: String,
        /// The table page index.
        table: usize,
        /// First object page it maps.
        first: usize,
        /// One past the last.
        end: usize,
    },
    /// The object's root failed its check (MAC with the key, or hash without encryption).
    #[error("object {name:?} root: {reason}")]
    RootAuth {
        /// The object.
        name: String,
        /// What failed.
        reason: String,
    },
    /// The root is authentic but older than the epoch the pool directory records.
    #[error("object {name:?} rolled back: its root is epoch {root_epoch}, the pool records epoch {pool_epoch}")]
    RolledBack {
        /// The object.
        name: String,
        /// Epoch in the (authentic) root.
        root_epoch: u64,
        /// Epoch in the directory.
        pool_epoch: u64,
    },
    /// Pool metadata that cannot be right (a frame used twice, a pointer out of the pool).
    #[error("pool {path} is inconsistent: {what}")]
    Inconsistent {
        /// The pool file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Mapping the object failed (address range taken, userfaultfd, ...).
    #[error("attaching object {name:?}")]
    Attach {
        /// The object.
        name: String,
        /// What the mapping engine reported.
        source: Box<crate::attach::AttachError>,
    },
    /// A page of a plain object does not match its hash (accidental
    /// corruption; plain objects have no protection against an attacker).
    #[error("object {name:?} page {page}: hash mismatch (page corrupted; plain objects are protected against accident, not attack)")]
    PageCorrupt {
        /// The object.
        name: String,
        /// The page.
        page: usize,
    },
    /// The directory slot of an object is damaged or conflicting: the
    /// object is quarantined (the rest of the pool stays usable).
    #[error("object {name} is quarantined: {reason}")]
    Quarantined {
        /// The object's name, or "in slot N" when it cannot be read.
        name: String,
        /// What failed.
        reason: String,
    },
    /// The state store outside the pool records newer epochs than the pool
    /// holds: the pool (or objects in it) was rolled back.
    #[error("pool {path} rolled back by {epochs} epochs: {detail}")]
    PoolRolledBack {
        /// The pool file.
        path: PathBuf,
        /// Epochs missing, over all objects.
        epochs: u64,
        /// Which objects, by how much, or what else the store disagrees on.
        detail: String,
    },
    /// The object is older than the state store records.
    #[error("object {name:?} rolled back by {epochs} epochs (state store has epoch {store_epoch}, the pool {pool_epoch})")]
    ObjectRolledBack {
        /// The object.
        name: String,
        /// store_epoch - pool_epoch.
        epochs: u64,
        /// Epoch the state store records.
        store_epoch: u64,
        /// Epoch the pool holds.
        pool_epoch: u64,
    },
    /// The pool names the state store that protects it, and the store at
    /// hand does not hold it: deleted, emptied, another pool's record in
    /// its place, or another store (another HOME). Without it an older
    /// copy of the pool cannot be told from the latest, so the open is
    /// refused unless `PoolOptions::allow_missing_state` is set.
    #[error("pool {path} is protected by state store {store_id:016x}, but {detail}: without it an older copy of the pool could not be told from the latest")]
    StateMissing {
        /// The pool file.
        path: PathBuf,
        /// The store's identity the pool names.
        store_id: u64,
        /// Where the store's record of the pool was looked for, and what
        /// is wrong with it.
        detail: String,
    },
    /// The state store could not be read or written.
    #[error("state store {path}: {what}")]
    State {
        /// The store's file or folder.
        path: PathBuf,
        /// What failed.
        what: String,
    },
    /// A key shorter than the minimum.
    #[error("key for object {name:?} is {len} bytes; at least {min} are needed")]
    KeyTooShort {
        /// The object.
        name: String,
        /// Its length.
        len: usize,
        /// The minimum.
        min: usize,
    },
    /// Argon2 refused the KDF parameters.
    #[error("key derivation parameters refused: {0}")]
    Kdf(String),
    /// One object given twice to one `psync_many`.
    #[error("object {name:?} is given twice to one psync_many")]
    DuplicateInGroup {
        /// The object.
        name: String,
    },
    /// An object given to `psync_many` that this open of this pool did not
    /// attach (another pool, another open, or not a pool object).
    #[error("object {name:?} cannot be committed by psync_many of pool {path}: {reason}")]
    NotInGroupPool {
        /// The object (its address when it is not a pool object).
        name: String,
        /// The pool psync_many was called on.
        path: PathBuf,
        /// Where the object belongs instead.
        reason: String,
    },
    /// More objects than one group commit record holds.
    #[error("psync_many of {count} objects: at most {max} commit together (the group commit record must fit in the pool header's frame)")]
    GroupTooLarge {
        /// Objects given.
        count: usize,
        /// The most one group holds.
        max: usize,
    },
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, PmoError>;

/// The message of `error` and of every cause not already part of it,
/// joined by ": " (anyhow's `{:#}`, without repeating a cause that a
/// `#[error("...: {source}")]` already printed): how the C library, the
/// Python module and the benches say an error in one line.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = c.source();
    }
    message
}
