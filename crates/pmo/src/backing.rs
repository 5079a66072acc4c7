//! The seam between an object's storage (pool, sealing, psync) and its mapping (faults, modes).
use std::error::Error as StdError;

use serde::{Deserialize, Serialize};

/// The error a backing's source carries.
pub type Source = Box<dyn StdError + Send + Sync + 'static>;

/// Why a [`PageBacking`] call failed, by kind, so the fault engine and its
/// callers can tell a tampered page from a failing disk, a key problem or a
/// pool file truncated under them. Each variant wraps the backing's own
/// error (for the pool, a [`PmoError`](crate::PmoError); reach it with
/// [`BackingError::get_ref`] and `downcast_ref`) and prints exactly its
/// message.
#[derive(Debug, thiserror::Error)]
pub enum BackingError {
    /// An operating-system call on the medium or the state store failed.
    #[error(transparent)]
    Io(Source),
    /// A check failed: a page, table or root does not authenticate or
    /// match its hash (tampered, corrupted, swapped or rolled back).
    #[error(transparent)]
    Integrity(Source),
    /// The key: missing, wrong, not expected, too short, or its
    /// derivation refused.
    #[error(transparent)]
    Key(Source),
    /// The file under the backing was truncated while it was open.
    #[error(transparent)]
    Truncated(Source),
    /// No room for the new page versions (the pool is full).
    #[error(transparent)]
    Full(Source),
    /// The call was refused as made: a page out of range, a buffer that is
    /// not one page, a read-only or destroyed object.
    #[error(transparent)]
    Invalid(Source),
}

/// [`BackingError`]'s variant without its source, as plain data.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BackingErrorKind {
    /// [`BackingError::Io`].
    Io,
    /// [`BackingError::Integrity`].
    Integrity,
    /// [`BackingError::Key`].
    Key,
    /// [`BackingError::Truncated`].
    Truncated,
    /// [`BackingError::Full`].
    Full,
    /// [`BackingError::Invalid`].
    Invalid,
}

impl BackingError {
    /// Which kind of failure this is.
    pub fn kind(&self) -> BackingErrorKind {
        match self {
            BackingError::Io(_) => BackingErrorKind::Io,
            BackingError::Integrity(_) => BackingErrorKind::Integrity,
            BackingError::Key(_) => BackingErrorKind::Key,
            BackingError::Truncated(_) => BackingErrorKind::Truncated,
            BackingError::Full(_) => BackingErrorKind::Full,
            BackingError::Invalid(_) => BackingErrorKind::Invalid,
        }
    }

    /// The backing's own error.
    pub fn get_ref(&self) -> &(dyn StdError + Send + Sync + 'static) {
        match self {
            BackingError::Io(e)
            | BackingError::Integrity(e)
            | BackingError::Key(e)
            | BackingError::Truncated(e)
            | BackingError::Full(e)
            | BackingError::Invalid(e) => e.as_ref(),
        }
    }

    /// Wrap `source` as a failure of kind `kind`.
    pub fn new(kind: BackingErrorKind, source: impl Into<Source>) -> BackingError {
        let s = source.into();
        match kind {
            BackingErrorKind::Io => BackingError::Io(s),
            BackingErrorKind::Integrity => BackingError::Integrity(s),
            BackingErrorKind::Key => BackingError::Key(s),
            BackingErrorKind::Truncated => BackingError::Truncated(s),
            BackingErrorKind::Full => BackingError::Full(s),
            BackingErrorKind::Invalid => BackingError::Invalid(s),
        }
    }
}

impl From<crate::PmoError> for BackingError {
    fn from(e: crate::PmoError) -> BackingError {
        use crate::PmoError as E;
        let kind = match &e {
            E::Io { .. } | E::State { .. } => BackingErrorKind::Io,
            E::PageAuth { .. }
            | E::TableAuth { .. }
            | E::RootAuth { .. }
            | E::RolledBack { .. }
            | E::Inconsistent { .. }
            | E::PageCorrupt { .. }
            | E::Quarantined { .. }
            | E::PoolRolledBack { .. }
            | E::StateMissing { .. }
            | E::ObjectRolledBack { .. }
            | E::Superseded { .. }
            | E::NotAPool { .. } => BackingErrorKind::Integrity,
            E::WrongKey { .. }
            | E::KeyRequired { .. }
            | E::KeyNotExpected { .. }
            | E::KeyTooShort { .. }
            | E::Kdf(_) => BackingErrorKind::Key,
            E::Truncated { .. } | E::TruncatedWhileOpen { .. } => BackingErrorKind::Truncated,
            E::PoolFull { .. } => BackingErrorKind::Full,
            E::BadPoolSize { .. }
            | E::PoolExists { .. }
            | E::PoolBusy { .. }
            | E::PoolReadOnly { .. }
            | E::UnknownObject { .. }
            | E::ObjectExists { .. }
            | E::BadName { .. }
            | E::BadObjectSize { .. }
            | E::AlreadyAttached { .. }
            | E::ObjectBusy { .. }
            | E::ReadOnly { .. }
            | E::PageOutOfRange { .. }
            | E::BadBuffer { .. }
            | E::DuplicateInGroup { .. }
            | E::NotInGroupPool { .. }
            | E::GroupTooLarge { .. }
            | E::Attach { .. } => BackingErrorKind::Invalid,
        };
        BackingError::new(kind, e)
    }
}
/// An object's pages as the fault engine sees them. Failures are
/// [`BackingError`]s: the kind says what went wrong (I/O, integrity, key,
/// truncation, room, usage), the source names the object and page. Implementations are thread-safe: the
/// fault-handler thread and predictor threads call `read_page` concurrently.
pub trait PageBacking: Send + Sync {
    /// Bytes per page (4096).
    fn page_size(&self) -> usize;
    /// Number of pages in the object.
    fn page_count(&self) -> usize;
    /// The fixed virtual address the object is always attached at (page aligned).
    fn base_address(&self) -> usize;
    /// Whether pages are sealed (encrypted + authenticated) at rest.
    fn encrypted(&self) -> bool;
    /// Verify and decrypt page `index` into `out` (exactly `page_size` bytes). A failed check
    /// is an error naming the object and page; `out` then holds no plaintext.
    fn read_page(&self, index: usize, out: &mut [u8]) -> Result<(), BackingError>;
    /// Stage page `index`'s new contents for the next commit (sealed, written out of place,
    /// not yet durable or visible to readers of the committed state).
    fn stage_page(&self, index: usize, data: &[u8]) -> Result<(), BackingError>;
    /// Stage several pages (index, contents) on this thread, as
    /// `stage_page` on each in order would; psync hands its dirty pages
    /// over this way, in runs. A backing may do a run faster than its
    /// pages one by one (a persistent object seals and writes them with no
    /// lock taken between pages). On an error some pages of the run may be
    /// staged; nothing is committed until `commit`. The default stages
    /// them one by one.
    fn stage_pages(&self, pages: &[(usize, &[u8])]) -> Result<(), BackingError> {
        pages
            .iter()
            .try_for_each(|&(index, data)| self.stage_page(index, data))
    }
    /// Make every page staged since the last commit durable and visible, all or nothing (psync).
    fn commit(&self) -> Result<(), BackingError>;
    /// The backing as `Any`, for callers that commit several backings of
    /// one kind together (`Pool::psync_many` finds its `ObjectHandle`s
    /// this way). `None` (the default): not available.
    fn as_any(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        None
    }
    /// Whose pages these are, for the process-wide DRAM cache: a cache
    /// filled for one identity is never served for another, nor for a later
    /// committed version (e.g. after another process's psync). The default
    /// (address-keyed, version 0, open 0) suits backings with no other
    /// identity.
    fn cache_identity(&self) -> CacheIdentity {
        CacheIdentity {
            pool: 0,
            object: self.base_address() as u64,
            version: 0,
            open: 0,
        }
    }
}

/// What the DRAM cache is keyed by: (pool id, object id = generation,
/// committed version, open). A cache is served only for an identity equal
/// in all four.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheIdentity {
    /// The pool's id.
    pub pool: u64,
    /// The object's id: random at every pcreate, so a destroyed object's
    /// successor at the same address has another.
    pub object: u64,
    /// The committed version (epoch) the cached plaintext reflects.
    pub version: u64,
    /// Which open of the pool file the pages are read through: unique in
    /// the process for every [`Pool::open`](crate::Pool::open). Copies of
    /// one pool file (`cp pool a; cp pool b`, or a restored backup) share
    /// pool id, object ids and epochs while their bytes differ once either
    /// is written; only the open tells them apart. 0 for backings that are
    /// not pool objects.
    pub open: u64,
}
