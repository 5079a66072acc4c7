//! # nvmos-pmo: persistent memory objects (seed 001, PD-LOaPP)
//!
//! Persistent memory organised as named objects (PMOs) holding
//! pointer-rich data, with no file behind each object: a *pool* (one file
//! standing for persistent memory, on a DAX file system or `/dev/shm`, or
//! any file) holds a directory of objects whose pages are handed out by an
//! nvmos [`FrameAllocator`](nvmos_frames::FrameAllocator) (iBuddy, so
//! writes spread over the medium).
//!
//! The seed's primitives: [`Pool::pcreate`], [`Pool::attach`] (map the
//! whole object at its fixed virtual address), [`Attachment::psync`],
//! [`Attachment::detach`] and [`Pool::pdestroy`]. Two halves meet at the
//! [`PageBacking`] trait (failures typed by kind: [`BackingError`]):
//!
//! - **storage** ([`Pool`], [`ObjectHandle`]): **security** — the user's
//!   key stretched with Argon2id (bounded parameters) and never stored (a
//!   separately derived verifier tells a wrong key); every page sealed with
//!   AES-256-GCM under a per-write-attachment HKDF subkey of a fresh random
//!   salt, so no restore, copy, fork or crash can repeat a (key, nonce)
//!   pair ([`crypto`]); the object id, page index and counter in the
//!   associated data (swapped, moved or rolled-back pages fail); a
//!   per-object root, a Merkle tree of page-table hashes MAC'd with the
//!   key, bound to its pool and slot, carries an epoch the directory record
//!   also holds; plain objects get per-page hashes (against accident).
//!   **Freshness** beyond the file: an optional [`state`] store refuses
//!   rolled-back pools and objects, and objects it never saw created,
//!   renamed or stripped of their encryption; a pool once protected names
//!   its store and is refused without it
//!   ([`PoolOptions::allow_missing_state`] opens it unprotected).
//!   **Availability**: damaged objects are quarantined, the rest of the pool opens ([`Pool::check_report`],
//!   [`Pool::repair`]); a restore made on purpose is accepted with
//!   [`Pool::accept_rollback`]; a pool file truncated by another process
//!   while open is an error naming pool and offset
//!   ([`PmoError::TruncatedWhileOpen`]), not a SIGBUS. **Crash consistency** — psync writes new page
//!   versions, new table pages and a new root out of place, then flips one
//!   64-byte directory record (a shadow pair, written in three ordered
//!   steps so a torn write is provably one), ordered with cache-line
//!   flushes and fences on persistent memory or `msync` elsewhere. A crash
//!   at any point leaves every object exactly as at its previous psync or
//!   the new one. **Concurrent writers**: any number of opens of a pool,
//!   in one process or many; a writer locks only its object
//!   ([`PmoError::ObjectBusy`], or wait with [`AttachOptions`]) and takes
//!   frames from its own arenas, so writers of different objects psync at
//!   the same time ([`locks`]). **Several objects at once**:
//!   [`Pool::psync_many`] commits several attachments all or nothing
//!   through a group commit record made durable before any directory
//!   record flips and rolled forward by the next open after a crash.
//! - **mapping** ([`attach`]): the object attached at its fixed address,
//!   pages arriving through userfaultfd faults (verified and decrypted on
//!   the way in), writes found with userfaultfd write protection, four
//!   [`Mode`]s per attach — no encryption, decrypt at fault, DRAM as
//!   cache, DRAM cache with stream, stride or Markov prediction of depth N.
//!
//! [`tools`] holds the pmo shell's operations beyond one pool call
//! (`nvmos pmo write`, `dump`, `info --stats`), returning data and
//! [`tools::ToolError`]; the CLI only parses, asks for keys and prints.
//!
//! ```
//! use nvmos_pmo::{KdfParams, Mode, Perm, Pool};
//! let dir = tempfile::tempdir()?;
//! let pool = Pool::create(&dir.path().join("pool"), 4 << 20)?;
//! // Cheap key stretching for the example; real keys use the default.
//! pool.pcreate_with("list", 64 << 10, Some(b"a secret key"), KdfParams::INSECURE_FAST)?;
//! let obj = pool.open_object("list", Perm::Write, Some(b"a secret key"))?;
//! obj.write_at(100, b"hello")?;
//! obj.psync()?; // durable, all or nothing
//! drop(obj);
//! drop(pool);
//!
//! let pool = Pool::open(&dir.path().join("pool"), nvmos_pmo::Access::ReadOnly)?;
//! assert!(pool.open_object("list", Perm::Read, Some(b"wrong")).is_err());
//! // Map it at its fixed address; pages arrive at their first touch.
//! let a = pool.attach("list", Perm::Read, Some(b"a secret key"), Mode::DecryptAtFault)?;
//! assert_eq!(&a.as_slice()[100..105], b"hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

#[allow(missing_docs)]
// error fields and mode parameters: their messages and the module text say what they are
pub mod attach;
pub mod backing;
pub mod crypto;
pub mod error;
pub mod heap;
#[allow(missing_docs)] // format internals, described in the module text
pub mod layout;
pub mod locks;
pub mod medium;
mod object;
mod pool;
pub mod pptr;
mod sigbus;
pub mod state;
pub mod tools;

pub use attach::{AttachError, AttachStats, Attachment, Mode, Tuning};
pub use backing::{BackingError, BackingErrorKind, CacheIdentity, PageBacking};
pub use crypto::{read_key_file, KdfParams, KeyBytes, MIN_KEY_LEN};
pub use error::{error_chain, PmoError, Result};
pub use medium::{CrashPoint, CrashStep, Durability};
pub use object::{AuthTime, ObjectHandle, Perm};
pub use pool::{
    AcceptReport, Access, AttachOptions, CheckReport, ObjectCheck, ObjectInfo, Pool, PoolInfo,
    PoolOptions, RepairReport, VerifyReport, WriteItem, DEFAULT_STATE_GAP, MIN_POOL_SIZE,
};
pub use pptr::{POff, POffError, PPtr};
pub use state::StateCommit;
