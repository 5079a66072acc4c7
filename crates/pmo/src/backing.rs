//! The seam between an object's storage (pool, sealing, psync) and its mapping (faults, modes).
use std::error::Error as StdError;
/// An object's pages as the fault engine sees them. Implementations are thread-safe: the
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
    fn read_page(
        &self,
        index: usize,
        out: &mut [u8],
    ) -> Result<(), Box<dyn StdError + Send + Sync>>;
    /// Stage page `index`'s new contents for the next commit (sealed, written out of place,
    /// not yet durable or visible to readers of the committed state).
    fn stage_page(&self, index: usize, data: &[u8]) -> Result<(), Box<dyn StdError + Send + Sync>>;
    /// Make every page staged since the last commit durable and visible, all or nothing (psync).
    fn commit(&self) -> Result<(), Box<dyn StdError + Send + Sync>>;
    /// Whose pages these are, for the process-wide DRAM cache: a cache
    /// filled for one identity is never served for another, nor for a later
    /// committed version (e.g. after another process's psync). The default
    /// (address-keyed, version 0) suits backings with no other identity.
    fn cache_identity(&self) -> CacheIdentity {
        CacheIdentity {
            pool: 0,
            object: self.base_address() as u64,
            version: 0,
        }
    }
}

/// What the DRAM cache is keyed by: (pool id, object id = generation, committed version).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheIdentity {
    /// The pool's id.
    pub pool: u64,
    /// The object's id: random at every pcreate, so a destroyed object's
    /// successor at the same address has another.
    pub object: u64,
    /// The committed version (epoch) the cached plaintext reflects.
    pub version: u64,
}
