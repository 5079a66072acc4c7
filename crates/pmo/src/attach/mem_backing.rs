//! `MemBacking`: a volatile [`PageBacking`] held in process memory, for tests
//! and benchmarks of the mapping engine. It protects pages for real (a fresh
//! random key per backing) so the cost of opening a page on the fault path
//! is the real one, but nothing survives the process: it is not the pool.
//!
//! [`Protection`] says how, with integrity verification (IV) or without,
//! so the cost of IV can be measured against the same object without it:
//! - `Sealed`: AES-256-GCM; the tag verifies every page read (IV).
//! - `Encrypted`: AES-256-CTR, the same cipher without the tag:
//!   confidential, unauthenticated (no IV), the prior designs' best case.
//! - `Hashed`: stored plain with the pool's plain-page tag (SHA-256 of
//!   the page and its place, `crypto::plain_tag`), checked at every read
//!   (a plain object's IV, as the pool does it).
//! - `Plain`: stored plain, unchecked.
//!
//! Page `i` at version `v` is encrypted under nonce `i ‖ v` (4 + 8 bytes,
//! little-endian; CTR counts blocks in the 4 bytes after it); GCM's
//! associated data and the plain tag cover `base ‖ i ‖ v`. A page is re-sealed
//! only under a higher version, so a nonce is never reused with the
//! backing's key. Staged pages live beside the committed ones until
//! `commit` swaps them in under one lock: readers see the old state or the
//! new one, never a mix.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use aes::cipher::{InnerIvInit, KeyInit, StreamCipher};
use rand::RngCore;
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_256_GCM};
use serde::{Deserialize, Serialize};

use crate::backing::{BackingError, BackingErrorKind, PageBacking};

/// Bytes per page of a `MemBacking`.
pub const PAGE_SIZE: usize = 4096;

/// What went wrong in a `MemBacking`, naming the object (by base address)
/// and page.
#[derive(Debug, thiserror::Error)]
pub enum MemBackingError {
    #[error("object at {base:#x}, page {page}: integrity check failed (tampered or wrong key)")]
    Integrity { base: usize, page: usize },
    #[error("object at {base:#x}: page {page} is out of range ({pages} pages)")]
    OutOfRange {
        base: usize,
        page: usize,
        pages: usize,
    },
    #[error("object at {base:#x}, page {page}: buffer of {len} bytes, a page is {PAGE_SIZE}")]
    BadLength {
        base: usize,
        page: usize,
        len: usize,
    },
}

impl From<MemBackingError> for BackingError {
    fn from(e: MemBackingError) -> BackingError {
        let kind = match e {
            MemBackingError::Integrity { .. } => BackingErrorKind::Integrity,
            MemBackingError::OutOfRange { .. } | MemBackingError::BadLength { .. } => {
                BackingErrorKind::Invalid
            }
        };
        BackingError::new(kind, e)
    }
}

/// How a [`MemBacking`] protects its pages; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protection {
    /// Stored plain, unchecked.
    Plain,
    /// Stored plain with the pool's plain-page tag, checked at every read.
    Hashed,
    /// AES-256-CTR: encrypted, no integrity verification.
    Encrypted,
    /// AES-256-GCM: encrypted and verified by the tag.
    Sealed,
}

impl Protection {
    /// Whether pages are encrypted (and need a mode other than `plain`).
    pub fn encrypted(self) -> bool {
        matches!(self, Protection::Encrypted | Protection::Sealed)
    }

    /// Whether every read is verified (integrity verification).
    pub fn verified(self) -> bool {
        matches!(self, Protection::Hashed | Protection::Sealed)
    }

    /// `plain`, `hashed`, `encrypted` or `sealed`.
    pub fn name(self) -> &'static str {
        match self {
            Protection::Plain => "plain",
            Protection::Hashed => "hashed",
            Protection::Encrypted => "encrypted",
            Protection::Sealed => "sealed",
        }
    }
}

type Aes256Ctr = ctr::Ctr32BE<aes::Aes256>;

/// The keyed transform of a protection.
enum Cipher {
    Plain,
    Hashed,
    Ctr(Box<aes::Aes256>),
    Gcm(Box<LessSafeKey>),
}

struct Sealed {
    version: u64,
    /// GCM's tag, or the plain-page tag; unused otherwise.
    tag: [u8; 16],
    bytes: Box<[u8]>,
}

/// A volatile, optionally sealed object; see the module documentation.
pub struct MemBacking {
    base: usize,
    pages: usize,
    protection: Protection,
    cipher: Cipher,
    committed: RwLock<Vec<Sealed>>,
    staged: Mutex<BTreeMap<usize, Sealed>>,
    last_commit: Mutex<Vec<usize>>,
    reads: AtomicU64,
    commits: AtomicU64,
}

impl MemBacking {
    /// An object of `pages` zero pages attached at `base` (page aligned),
    /// sealed with AES-256-GCM under a fresh random key when `encrypted`.
    /// The nonce holds the page index in 32 bits: at most 2^32 pages (16
    /// TiB), far beyond any volatile test object.
    pub fn new(base: usize, pages: usize, encrypted: bool) -> MemBacking {
        let protection = if encrypted {
            Protection::Sealed
        } else {
            Protection::Plain
        };
        MemBacking::protected(base, pages, protection)
    }

    /// An object of `pages` zero pages attached at `base`, protected as
    /// `protection` says under a fresh random key.
    pub fn protected(base: usize, pages: usize, protection: Protection) -> MemBacking {
        let mut key = zeroize::Zeroizing::new([0u8; 32]);
        rand::rngs::OsRng.fill_bytes(&mut key[..]);
        let cipher = match protection {
            Protection::Plain => Cipher::Plain,
            Protection::Hashed => Cipher::Hashed,
            Protection::Encrypted => Cipher::Ctr(Box::new(aes::Aes256::new(key.as_slice().into()))),
            Protection::Sealed => Cipher::Gcm(Box::new(LessSafeKey::new(
                UnboundKey::new(&AES_256_GCM, &key[..]).expect("a 32-byte key"),
            ))),
        };
        let backing = MemBacking {
            base,
            pages,
            protection,
            cipher,
            committed: RwLock::new(Vec::with_capacity(pages)),
            staged: Mutex::new(BTreeMap::new()),
            last_commit: Mutex::new(Vec::new()),
            reads: AtomicU64::new(0),
            commits: AtomicU64::new(0),
        };
        let zero = vec![0u8; PAGE_SIZE];
        {
            let mut committed = backing.committed.write().unwrap_or_else(|e| e.into_inner());
            for i in 0..pages {
                committed.push(backing.seal(i, 1, &zero));
            }
        }
        backing
    }

    /// An object whose committed contents are `data` (zero-padded to whole
    /// pages).
    pub fn with_contents(base: usize, data: &[u8], encrypted: bool) -> MemBacking {
        let protection = if encrypted {
            Protection::Sealed
        } else {
            Protection::Plain
        };
        MemBacking::protected_with_contents(base, data, protection)
    }

    /// An object protected as `protection` says whose committed contents
    /// are `data` (zero-padded to whole pages).
    pub fn protected_with_contents(base: usize, data: &[u8], protection: Protection) -> MemBacking {
        let pages = data.len().div_ceil(PAGE_SIZE).max(1);
        let backing = MemBacking::protected(base, pages, protection);
        {
            let mut committed = backing.committed.write().unwrap_or_else(|e| e.into_inner());
            let mut page = vec![0u8; PAGE_SIZE];
            for (i, chunk) in data.chunks(PAGE_SIZE).enumerate() {
                page.fill(0);
                page[..chunk.len()].copy_from_slice(chunk);
                committed[i] = backing.seal(i, 2, &page);
            }
        }
        backing
    }

    fn nonce(page: usize, version: u64) -> [u8; 12] {
        let mut n = [0u8; 12];
        n[..4].copy_from_slice(&(page as u32).to_le_bytes());
        n[4..].copy_from_slice(&version.to_le_bytes());
        n
    }

    fn aad(&self, page: usize, version: u64) -> [u8; 24] {
        let mut a = [0u8; 24];
        a[..8].copy_from_slice(&(self.base as u64).to_le_bytes());
        a[8..16].copy_from_slice(&(page as u64).to_le_bytes());
        a[16..].copy_from_slice(&version.to_le_bytes());
        a
    }

    /// CTR's keystream over `bytes`, for page `page` at `version`.
    fn ctr(aes: &aes::Aes256, page: usize, version: u64, bytes: &mut [u8]) {
        let mut iv = [0u8; 16];
        iv[..12].copy_from_slice(&Self::nonce(page, version));
        let core = ctr::CtrCore::<aes::Aes256, ctr::flavors::Ctr32BE>::inner_iv_init(
            aes.clone(),
            &iv.into(),
        );
        Aes256Ctr::from_core(core).apply_keystream(bytes);
    }

    /// The plain-page tag of page `page` at `version`: the pool's own
    /// (the base address stands for the object id).
    fn plain_tag(&self, page: usize, version: u64, bytes: &[u8]) -> [u8; 16] {
        crate::crypto::plain_tag(self.base as u64, page as u64, version, bytes)
    }

    /// The protection this backing was made with.
    pub fn protection(&self) -> Protection {
        self.protection
    }

    fn seal(&self, page: usize, version: u64, data: &[u8]) -> Sealed {
        let mut bytes: Box<[u8]> = data.into();
        let mut tag = [0u8; 16];
        match &self.cipher {
            Cipher::Plain => {}
            Cipher::Hashed => tag = self.plain_tag(page, version, &bytes),
            Cipher::Ctr(aes) => Self::ctr(aes, page, version, &mut bytes),
            Cipher::Gcm(cipher) => {
                let nonce = Self::nonce(page, version);
                let t = cipher
                    .seal_in_place_separate_tag(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::from(self.aad(page, version)),
                        &mut bytes,
                    )
                    .expect("a 4 KiB page is far below AES-GCM's message limit");
                tag.copy_from_slice(t.as_ref());
            }
        }
        Sealed {
            version,
            tag,
            bytes,
        }
    }

    fn check(&self, page: usize, len: usize) -> Result<(), MemBackingError> {
        if page >= self.pages {
            return Err(MemBackingError::OutOfRange {
                base: self.base,
                page,
                pages: self.pages,
            });
        }
        if len != PAGE_SIZE {
            return Err(MemBackingError::BadLength {
                base: self.base,
                page,
                len,
            });
        }
        Ok(())
    }

    /// Flip one bit of page `page`'s stored ciphertext, as an attacker who
    /// can write the medium would: the next `read_page` of it must fail.
    pub fn tamper(&self, page: usize, bit: usize) {
        let mut committed = self.committed.write().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = committed.get_mut(page) {
            let byte = (bit / 8) % p.bytes.len();
            p.bytes[byte] ^= 1 << (bit % 8);
        }
    }

    /// The pages the last `commit` made visible, in ascending order.
    pub fn last_commit(&self) -> Vec<usize> {
        self.last_commit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many `read_page` calls succeeded or failed so far.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// How many commits were made.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }
}

impl PageBacking for MemBacking {
    fn page_size(&self) -> usize {
        PAGE_SIZE
    }

    fn page_count(&self) -> usize {
        self.pages
    }

    fn base_address(&self) -> usize {
        self.base
    }

    fn encrypted(&self) -> bool {
        self.protection.encrypted()
    }

    fn read_page(&self, index: usize, out: &mut [u8]) -> Result<(), BackingError> {
        self.check(index, out.len())?;
        self.reads.fetch_add(1, Ordering::Relaxed);
        let committed = self.committed.read().unwrap_or_else(|e| e.into_inner());
        let page = &committed[index];
        out.copy_from_slice(&page.bytes);
        let ok = match &self.cipher {
            Cipher::Plain => true,
            Cipher::Hashed => self.plain_tag(index, page.version, out) == page.tag,
            Cipher::Ctr(aes) => {
                Self::ctr(aes, index, page.version, out);
                true
            }
            Cipher::Gcm(cipher) => {
                let nonce = Self::nonce(index, page.version);
                cipher
                    .open_in_place_separate_tag(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::from(self.aad(index, page.version)),
                        Tag::from(page.tag),
                        out,
                        0..,
                    )
                    .is_ok()
            }
        };
        if !ok {
            // AES-GCM in place leaves keystream-XORed bytes behind on
            // failure, and a hashed page failed its check: neither may
            // reach the caller as if it were the page.
            out.fill(0);
            return Err(MemBackingError::Integrity {
                base: self.base,
                page: index,
            }
            .into());
        }
        Ok(())
    }

    fn stage_page(&self, index: usize, data: &[u8]) -> Result<(), BackingError> {
        self.check(index, data.len())?;
        let version = {
            let staged = self.staged.lock().unwrap_or_else(|e| e.into_inner());
            match staged.get(&index) {
                Some(s) => s.version + 1,
                None => {
                    let committed = self.committed.read().unwrap_or_else(|e| e.into_inner());
                    committed[index].version + 1
                }
            }
        };
        // Sealed outside the lock, so psync seals pages on several threads
        // (it stages each page once; the version is per page).
        let sealed = self.seal(index, version, data);
        self.staged
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(index, sealed);
        Ok(())
    }

    fn commit(&self) -> Result<(), BackingError> {
        let mut staged = self.staged.lock().unwrap_or_else(|e| e.into_inner());
        let mut committed = self.committed.write().unwrap_or_else(|e| e.into_inner());
        let mut pages = Vec::with_capacity(staged.len());
        for (index, page) in std::mem::take(&mut *staged) {
            committed[index] = page;
            pages.push(index);
        }
        *self.last_commit.lock().unwrap_or_else(|e| e.into_inner()) = pages;
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_round_trip_and_commit_is_all_or_nothing() {
        let b = MemBacking::new(0x7000_0000_0000, 3, true);
        let mut out = vec![1u8; PAGE_SIZE];
        b.read_page(1, &mut out).unwrap();
        assert!(out.iter().all(|&x| x == 0));
        b.stage_page(1, &[7u8; PAGE_SIZE]).unwrap();
        b.read_page(1, &mut out).unwrap();
        assert!(out.iter().all(|&x| x == 0), "staged is not yet visible");
        b.commit().unwrap();
        b.read_page(1, &mut out).unwrap();
        assert!(out.iter().all(|&x| x == 7));
        assert_eq!(b.last_commit(), vec![1]);
    }

    #[test]
    fn a_flipped_bit_is_an_error_naming_the_page_and_no_plaintext() {
        let b = MemBacking::with_contents(0x7000_0000_0000, &[9u8; 3 * PAGE_SIZE], true);
        b.tamper(2, 77);
        let mut out = vec![0u8; PAGE_SIZE];
        let e = b.read_page(2, &mut out).unwrap_err();
        assert_eq!(e.kind(), BackingErrorKind::Integrity);
        let e = e.to_string();
        assert!(e.contains("page 2") && e.contains("0x700000000000"), "{e}");
        assert!(out.iter().all(|&x| x == 0));
        b.read_page(1, &mut out).unwrap();
        assert!(out.iter().all(|&x| x == 9));
    }

    #[test]
    fn every_protection_round_trips_and_only_verified_ones_catch_a_flipped_bit() {
        let data: Vec<u8> = (0..3 * PAGE_SIZE).map(|i| (i * 7 % 251) as u8).collect();
        for protection in [
            Protection::Plain,
            Protection::Hashed,
            Protection::Encrypted,
            Protection::Sealed,
        ] {
            let b = MemBacking::protected_with_contents(0x7000_0000_0000, &data, protection);
            assert_eq!(b.encrypted(), protection.encrypted());
            let stored = b.committed.read().unwrap()[1].bytes.clone();
            assert_eq!(
                stored[..] == data[PAGE_SIZE..2 * PAGE_SIZE],
                !protection.encrypted(),
                "{protection:?}: stored in the clear iff not encrypted"
            );
            let mut out = vec![0u8; PAGE_SIZE];
            for page in 0..3 {
                b.read_page(page, &mut out).unwrap();
                assert_eq!(&out[..], &data[page * PAGE_SIZE..(page + 1) * PAGE_SIZE]);
            }
            // A new version reads back through stage and commit.
            b.stage_page(2, &[5u8; PAGE_SIZE]).unwrap();
            b.commit().unwrap();
            b.read_page(2, &mut out).unwrap();
            assert!(out.iter().all(|&x| x == 5), "{protection:?}");
            b.tamper(1, 9);
            let r = b.read_page(1, &mut out);
            if protection.verified() {
                assert_eq!(r.unwrap_err().kind(), BackingErrorKind::Integrity);
                assert!(out.iter().all(|&x| x == 0), "{protection:?}");
            } else {
                // Without IV the flipped bit reaches the reader.
                r.unwrap();
                assert_ne!(&out[..], &data[PAGE_SIZE..2 * PAGE_SIZE], "{protection:?}");
            }
        }
    }

    #[test]
    fn bad_index_and_length_are_errors() {
        let b = MemBacking::new(0x7000_0000_0000, 2, false);
        let mut out = vec![0u8; PAGE_SIZE];
        for e in [
            b.read_page(2, &mut out).unwrap_err(),
            b.read_page(0, &mut out[..10]).unwrap_err(),
            b.stage_page(0, &out[..10]).unwrap_err(),
        ] {
            assert_eq!(e.kind(), BackingErrorKind::Invalid, "{e}");
        }
    }
}
