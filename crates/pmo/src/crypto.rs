//! Keys and seals.
//!
//! - The user's key (at least [`MIN_KEY_LEN`] bytes) is stretched with
//!   Argon2id under a random per-object salt into 64 bytes: the first 32
//!   are the object's *page master key*, the last 32 the HMAC-SHA-256 key
//!   of the object root. Neither is stored; the root keeps a *verifier*,
//!   `HMAC(mac_key, "nvmos-pmo key check v2" ‖ object id ‖ KDF salt ‖ KDF
//!   parameters)`, which tells a wrong key from a tampered root, binds the
//!   cost parameters, and reveals nothing about either key. The cost
//!   parameters are bounded ([`KdfParams::check`]) *before* Argon2 runs:
//!   the verifier can only be checked after the expensive derivation, so
//!   the bounds are what stop a forged root from making every reader pay
//!   a huge cost (and then blame the key). An object is never created
//!   beyond them, so a root beyond them was tampered with.
//! - A page is sealed with AES-256-GCM (ring's, BoringSSL's AES-NI/VAES
//!   and carry-less-multiply code: about 5× RustCrypto's `aes-gcm` per
//!   core on this machine, which is what lets psync keep up with PMDK)
//!   under a **session subkey**: every write attachment draws a fresh
//!   random 256-bit session salt from the operating system
//!   (`getrandom`), and the subkey is `HKDF-SHA256(salt = session salt,
//!   ikm = page master key, info = "nvmos-pmo page key v2")`. The nonce is
//!   `0^32 ‖ LE64(counter)` with the counter kept *in memory* by that
//!   session, starting at 0. Nothing persisted decides a nonce alone, so
//!   restoring, copying or forking a pool, or crashing, cannot repeat a
//!   (key, nonce) pair: a repeat needs two sessions to draw the same
//!   256-bit salt. The salt is stored in the page's table entry (the
//!   table is hashed into the MAC'd root); associated data = object id ‖
//!   page index ‖ counter, so swapping pages, moving a page to another
//!   object or putting back an older ciphertext breaks the tag.
//! - Key material lives in [`Secret`] buffers: `mlock`ed (never swapped;
//!   best effort: failures are counted by [`unlocked_secrets`], and the
//!   first one in a process is reported on stderr) and zeroized on drop. ring's expanded AES key schedules cannot be
//!   zeroized from outside ring (its `LessSafeKey` offers no hook); they
//!   live as long as the object's keys in this process.
//! - Plain objects get no secrecy: each page carries the first 16 bytes of
//!   `SHA-256("nvmos-pmo plain page" ‖ object id ‖ page ‖ counter ‖ data)`,
//!   which catches accidental corruption, not an attacker (who can
//!   recompute it).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hmac::{Hmac, KeyInit, Mac};
use parking_lot::RwLock;
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_256_GCM};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use zeroize::{Zeroize, Zeroizing};

use crate::error::{PmoError, Result};

/// Shortest key (bytes) an object can be created with.
pub const MIN_KEY_LEN: usize = 8;

/// Argon2id cost parameters, stored in each encrypted object's root.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KdfParams {
    /// Memory in KiB.
    pub m_cost: u32,
    /// Passes.
    pub t_cost: u32,
    /// Lanes.
    pub p_cost: u32,
}

impl Default for KdfParams {
    /// OWASP's Argon2id recommendation: 19 MiB, 2 passes, 1 lane.
    fn default() -> Self {
        KdfParams {
            m_cost: 19 * 1024,
            t_cost: 2,
            p_cost: 1,
        }
    }
}

/// Largest Argon2 memory cost accepted (KiB): 256 MiB.
pub const MAX_KDF_MEMORY_KIB: u32 = 256 << 10;
/// Most Argon2 passes accepted.
pub const MAX_KDF_PASSES: u32 = 16;
/// Most Argon2 lanes accepted.
pub const MAX_KDF_LANES: u32 = 16;
/// Most Argon2 work accepted: memory (KiB) × passes, 256 MiB·passes.
/// Argon2's time is proportional to this product, so it bounds what one
/// attach can cost a reader, whatever a root says; it is about seven
/// times the default's (19 MiB × 2) and admits RFC 9106's 64 MiB × 3.
pub const MAX_KDF_WORK: u64 = 256 << 10;

impl KdfParams {
    /// The cheapest parameters Argon2 accepts: for tests that derive keys
    /// hundreds of times. Not for real keys.
    pub const INSECURE_FAST: KdfParams = KdfParams {
        m_cost: 8,
        t_cost: 1,
        p_cost: 1,
    };

    /// Whether the parameters lie within the bounds the pool format
    /// defines (memory 8·lanes KiB ..= 256 MiB, 1..=16 passes, 1..=16
    /// lanes, memory × passes ..= 256 MiB·passes). Checked before any key
    /// stretching, so a tampered root cannot make a reader spin or exhaust
    /// memory.
    pub fn check(&self) -> std::result::Result<(), String> {
        match self.out_of_bounds() {
            Some((_, why)) => Err(why),
            None => Ok(()),
        }
    }

    /// The first bound [`KdfParams::check`] finds broken: the root field(s)
    /// at fault (`m_cost`, `t_cost`, `p_cost`, or `m_cost × t_cost` for
    /// the work) and what they hold against what is accepted.
    pub fn out_of_bounds(&self) -> Option<(&'static str, String)> {
        if self.p_cost == 0 || self.p_cost > MAX_KDF_LANES {
            return Some((
                "p_cost",
                format!("{} lanes (accepted: 1..={MAX_KDF_LANES})", self.p_cost),
            ));
        }
        if self.t_cost == 0 || self.t_cost > MAX_KDF_PASSES {
            return Some((
                "t_cost",
                format!("{} passes (accepted: 1..={MAX_KDF_PASSES})", self.t_cost),
            ));
        }
        let min_m = 8 * self.p_cost;
        if self.m_cost < min_m || self.m_cost > MAX_KDF_MEMORY_KIB {
            return Some((
                "m_cost",
                format!(
                    "memory {} KiB (accepted: {min_m}..={MAX_KDF_MEMORY_KIB} KiB)",
                    self.m_cost
                ),
            ));
        }
        let work = u64::from(self.m_cost) * u64::from(self.t_cost);
        if work > MAX_KDF_WORK {
            return Some((
                "m_cost × t_cost",
                format!(
                    "memory {} KiB × {} passes = {work} KiB·passes of work (accepted: at most {MAX_KDF_WORK})",
                    self.m_cost, self.t_cost
                ),
            ));
        }
        None
    }
}

static UNLOCKED: AtomicU64 = AtomicU64::new(0);

/// How many key buffers `mlock` refused in this process (RLIMIT_MEMLOCK):
/// those keys could be swapped out.
pub fn unlocked_secrets() -> u64 {
    UNLOCKED.load(Ordering::Relaxed)
}

/// Memory holding secrets that `mlock` can refuse to lock.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Unlocked {
    /// Key buffers ([`Secret`], [`KeyBytes`]).
    Keys,
    /// The DRAM cache's frames of decrypted pages.
    Cache,
}

/// Report on stderr, once per process for each kind, that `mlock` refused
/// to lock memory holding secrets (`error`: what it said), which may then
/// be written to swap. Once, because every key and cache after the first
/// is refused for the same reason (the limit), and a library must not
/// flood its caller's stderr; the count stays in [`unlocked_secrets`].
pub(crate) fn warn_unlocked(what: Unlocked, error: &std::io::Error) {
    static KEYS: std::sync::Once = std::sync::Once::new();
    static CACHE: std::sync::Once = std::sync::Once::new();
    let (once, what) = match what {
        Unlocked::Keys => (&KEYS, "key material"),
        Unlocked::Cache => (&CACHE, "the DRAM cache of decrypted pages"),
    };
    once.call_once(|| {
        eprintln!(
            "nvmos-pmo: warning: could not lock {what} in memory (mlock: {error}); it may be written to swap. Raise RLIMIT_MEMLOCK (ulimit -l) to keep it in RAM. Reported once per process."
        );
    });
}

/// A key buffer `mlock` refused: counted, and reported once.
fn key_unlocked() {
    let error = std::io::Error::last_os_error();
    UNLOCKED.fetch_add(1, Ordering::Relaxed);
    warn_unlocked(Unlocked::Keys, &error);
}

/// `N` bytes of key material: on the heap, `mlock`ed, zeroized on drop.
pub struct Secret<const N: usize> {
    bytes: Box<[u8; N]>,
    locked: bool,
}

impl<const N: usize> Secret<N> {
    /// A zeroed, locked buffer.
    pub fn new() -> Secret<N> {
        let bytes = Box::new([0u8; N]);
        // SAFETY: mlock of our own heap allocation of N bytes.
        let locked = unsafe { libc::mlock(bytes.as_ptr().cast(), N) } == 0;
        if !locked {
            key_unlocked();
        }
        Secret { bytes, locked }
    }
    /// The bytes.
    pub fn bytes(&self) -> &[u8; N] {
        &self.bytes
    }
    /// The bytes, to fill.
    pub fn bytes_mut(&mut self) -> &mut [u8; N] {
        &mut self.bytes
    }
}

impl<const N: usize> Default for Secret<N> {
    fn default() -> Self {
        Secret::new()
    }
}

impl<const N: usize> Drop for Secret<N> {
    fn drop(&mut self) {
        self.bytes.zeroize();
        if self.locked {
            // SAFETY: the range we locked in `new`.
            unsafe { libc::munlock(self.bytes.as_ptr().cast(), N) };
        }
    }
}

/// A key of any length (a key file, a passphrase): zeroized on drop and
/// `mlock`ed while it lives.
pub struct KeyBytes {
    bytes: Zeroizing<Vec<u8>>,
    locked: bool,
}

impl KeyBytes {
    /// Take ownership of `bytes` (moved, not copied).
    pub fn new(bytes: Vec<u8>) -> KeyBytes {
        let bytes = Zeroizing::new(bytes);
        // SAFETY: mlock of our own heap buffer (a zero length locks nothing).
        let locked = !bytes.is_empty()
            && unsafe { libc::mlock(bytes.as_ptr().cast(), bytes.capacity()) } == 0;
        if !locked && !bytes.is_empty() {
            key_unlocked();
        }
        KeyBytes { bytes, locked }
    }
}

impl std::fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyBytes({} bytes, redacted)", self.bytes.len())
    }
}

impl std::ops::Deref for KeyBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for KeyBytes {
    fn drop(&mut self) {
        let (p, n) = (self.bytes.as_ptr(), self.bytes.capacity());
        self.bytes.zeroize();
        if self.locked {
            // SAFETY: the range locked in `new` (zeroize keeps the allocation).
            unsafe { libc::munlock(p.cast(), n) };
        }
    }
}

/// The one key-file rule of every entry point (CLI, examples): the file's
/// bytes, less **one** trailing `\n` or `\r\n`; at least [`MIN_KEY_LEN`]
/// bytes remain, or the error says so. The buffer is zeroized when dropped.
pub fn read_key_file(path: &Path) -> std::result::Result<KeyBytes, String> {
    let mut raw = Zeroizing::new(
        std::fs::read(path).map_err(|e| format!("reading the key file {}: {e}", path.display()))?,
    );
    if raw.ends_with(b"\n") {
        raw.pop();
        if raw.ends_with(b"\r") {
            raw.pop();
        }
    }
    if raw.len() < MIN_KEY_LEN {
        return Err(format!(
            "the key file {} holds {} bytes (after one trailing newline is dropped); a key needs at least {MIN_KEY_LEN}",
            path.display(),
            raw.len()
        ));
    }
    // Copy into an exactly-sized buffer so no spare capacity keeps a byte.
    Ok(KeyBytes::new(raw.to_vec()))
}

/// Why a passphrase looks weak, if it does: shorter than 12 characters, or
/// drawn from a single character class. Advice for the CLI's warning; the
/// library refuses only keys shorter than [`MIN_KEY_LEN`].
pub fn passphrase_weakness(key: &[u8]) -> Option<String> {
    if key.len() < 12 {
        return Some(format!(
            "{} bytes; 12 or more are advised (Argon2id slows guessing, it does not prevent it)",
            key.len()
        ));
    }
    let classes = [
        key.iter().any(|b| b.is_ascii_lowercase()),
        key.iter().any(|b| b.is_ascii_uppercase()),
        key.iter().any(|b| b.is_ascii_digit()),
        key.iter().any(|b| !b.is_ascii_alphanumeric()),
    ];
    if classes.iter().filter(|&&c| c).count() < 2 {
        return Some("one character class only (all letters or all digits)".into());
    }
    None
}

type HmacSha256 = Hmac<Sha256>;

/// The keys of one object, derived from the user key.
pub(crate) struct ObjectKeys {
    /// The page master key: HKDF input for session subkeys.
    master: Secret<32>,
    mac_key: Secret<32>,
    /// Session subkeys by session salt (one per write attachment whose
    /// pages are still live).
    subkeys: RwLock<HashMap<[u8; 32], Arc<LessSafeKey>>>,
}

pub(crate) const VERIFIER_LABEL: &[u8] = b"nvmos-pmo key check v2";
const SUBKEY_INFO: &[u8] = b"nvmos-pmo page key v2";
const PLAIN_LABEL: &[u8] = b"nvmos-pmo plain page";

impl ObjectKeys {
    pub fn derive(key: &[u8], salt: &[u8; 16], params: KdfParams) -> Result<ObjectKeys> {
        params.check().map_err(PmoError::Kdf)?;
        let p = argon2::Params::new(params.m_cost, params.t_cost, params.p_cost, Some(64))
            .map_err(|e| PmoError::Kdf(e.to_string()))?;
        let argon = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, p);
        let mut out = Secret::<64>::new();
        argon
            .hash_password_into(key, salt, out.bytes_mut())
            .map_err(|e| PmoError::Kdf(e.to_string()))?;
        let mut master = Secret::<32>::new();
        master.bytes_mut().copy_from_slice(&out.bytes()[..32]);
        let mut mac_key = Secret::<32>::new();
        mac_key.bytes_mut().copy_from_slice(&out.bytes()[32..]);
        Ok(ObjectKeys {
            master,
            mac_key,
            subkeys: RwLock::new(HashMap::new()),
        })
    }

    pub fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut m =
            <HmacSha256 as KeyInit>::new_from_slice(self.mac_key.bytes()).expect("any key length");
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    pub fn mac_matches(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let mut m =
            <HmacSha256 as KeyInit>::new_from_slice(self.mac_key.bytes()).expect("any key length");
        for p in parts {
            m.update(p);
        }
        m.verify_slice(tag).is_ok()
    }

    /// What the root's verifier holds for this key.
    pub fn verifier(&self, obj_id: u64, salt: &[u8; 16], params: KdfParams) -> [u8; 32] {
        self.mac(&verifier_parts(obj_id, salt, params).each())
    }

    pub fn verifier_matches(
        &self,
        obj_id: u64,
        salt: &[u8; 16],
        params: KdfParams,
        v: &[u8; 32],
    ) -> bool {
        self.mac_matches(&verifier_parts(obj_id, salt, params).each(), v)
    }

    /// The session subkey for `salt` (derived once, then cached).
    fn subkey(&self, salt: &[u8; 32]) -> Arc<LessSafeKey> {
        if let Some(k) = self.subkeys.read().get(salt) {
            return k.clone();
        }
        let prk = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, salt).extract(self.master.bytes());
        let okm = prk
            .expand(&[SUBKEY_INFO], &AES_256_GCM)
            .expect("32 bytes is within HKDF-SHA256's output limit");
        let key = Arc::new(LessSafeKey::new(UnboundKey::from(okm)));
        self.subkeys.write().entry(*salt).or_insert(key).clone()
    }

    /// Session `salt`'s subkey, looked up once for many pages.
    pub fn sealer(&self, salt: &[u8; 32]) -> Sealer {
        Sealer {
            key: self.subkey(salt),
        }
    }

    /// Decrypt `buf` in place if the tag checks; on failure `buf` is zeroed
    /// so it never holds unauthenticated plaintext.
    pub fn open(
        &self,
        obj_id: u64,
        page: u64,
        version: u64,
        salt: &[u8; 32],
        tag: &[u8; 16],
        buf: &mut [u8],
    ) -> bool {
        let aad = aad(obj_id, page, version);
        if self
            .subkey(salt)
            .open_in_place_separate_tag(nonce(version), Aad::from(aad), Tag::from(*tag), buf, 0..)
            .is_ok()
        {
            true
        } else {
            buf.fill(0);
            false
        }
    }
}

struct VerifierParts {
    id: [u8; 8],
    salt: [u8; 16],
    kdf: [u8; 12],
}

impl VerifierParts {
    fn each(&self) -> [&[u8]; 4] {
        [VERIFIER_LABEL, &self.id, &self.salt, &self.kdf]
    }
}

fn verifier_parts(obj_id: u64, salt: &[u8; 16], p: KdfParams) -> VerifierParts {
    let mut kdf = [0u8; 12];
    kdf[..4].copy_from_slice(&p.m_cost.to_le_bytes());
    kdf[4..8].copy_from_slice(&p.t_cost.to_le_bytes());
    kdf[8..].copy_from_slice(&p.p_cost.to_le_bytes());
    VerifierParts {
        id: obj_id.to_le_bytes(),
        salt: *salt,
        kdf,
    }
}

/// A fresh session salt from the operating system's generator (not a
/// user-space generator whose state a fork or snapshot could duplicate).
pub(crate) fn session_salt() -> [u8; 32] {
    let mut s = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut s);
    s
}

/// The integrity tag of a plain page (against accident, not attack).
pub(crate) fn plain_tag(obj_id: u64, page: u64, version: u64, data: &[u8]) -> [u8; 16] {
    let h = sha256(&[PLAIN_LABEL, &aad(obj_id, page, version), data]);
    h[..16].try_into().expect("16")
}

/// One session's sealing key ([`ObjectKeys::sealer`]). Sealing with it
/// takes no lock and no atomic read-modify-write, so a batch of pages
/// sealed and streamed to the medium one after another overlaps each
/// page's write-back with the next page's encryption.
pub(crate) struct Sealer {
    key: Arc<LessSafeKey>,
}

impl Sealer {
    /// Encrypt `src` into `dst` (same length) in one pass; returns the tag.
    pub fn seal_into(
        &self,
        obj_id: u64,
        page: u64,
        version: u64,
        src: &[u8],
        dst: &mut [u8],
    ) -> [u8; 16] {
        let aad = aad(obj_id, page, version);
        dst.copy_from_slice(src);
        let tag = self
            .key
            .seal_in_place_separate_tag(nonce(version), Aad::from(aad), dst)
            .expect("a 4 KiB page is within AES-GCM's limits");
        tag.as_ref().try_into().expect("a GCM tag is 16 bytes")
    }
}

fn nonce(version: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&version.to_le_bytes());
    // Unique per subkey: `version` is the in-memory counter of the one
    // session that drew the subkey's salt (see the module comment).
    Nonce::assume_unique_for_key(n)
}

fn aad(obj_id: u64, page: u64, version: u64) -> [u8; 24] {
    let mut a = [0u8; 24];
    a[..8].copy_from_slice(&obj_id.to_le_bytes());
    a[8..16].copy_from_slice(&page.to_le_bytes());
    a[16..].copy_from_slice(&version.to_le_bytes());
    a
}

/// SHA-256 of the concatenated parts.
pub(crate) fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kdf_bounds_are_checked_before_use() {
        assert!(KdfParams::default().check().is_ok());
        assert!(KdfParams::INSECURE_FAST.check().is_ok());
        let spin = KdfParams {
            t_cost: u32::MAX,
            ..KdfParams::default()
        };
        let e = ObjectKeys::derive(b"12345678", &[0; 16], spin)
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "key derivation parameters refused: 4294967295 passes (accepted: 1..=16)"
        );
        let mem = KdfParams {
            m_cost: MAX_KDF_MEMORY_KIB + 1,
            ..KdfParams::default()
        };
        assert!(mem.check().unwrap_err().contains("memory"));
        // The work bound: each field within its own bound, the product not.
        let work = KdfParams {
            m_cost: 64 << 10,
            t_cost: 16,
            p_cost: 1,
        };
        assert_eq!(work.out_of_bounds().unwrap().0, "m_cost × t_cost");
        // RFC 9106's second recommendation (64 MiB, 3 passes) is accepted.
        let rfc = KdfParams {
            m_cost: 64 << 10,
            t_cost: 3,
            p_cost: 4,
        };
        assert_eq!(rfc.out_of_bounds(), None);
    }

    #[test]
    fn two_sessions_never_share_a_subkey_and_nonce() {
        let k = ObjectKeys::derive(b"a long key", &[1; 16], KdfParams::INSECURE_FAST).unwrap();
        let (s1, s2) = (session_salt(), session_salt());
        assert_ne!(s1, s2);
        let page = [7u8; 4096];
        let (mut c1, mut c2) = ([0u8; 4096], [0u8; 4096]);
        // Same object, page and counter value in two sessions (two forks).
        let t1 = k.sealer(&s1).seal_into(1, 0, 0, &page, &mut c1);
        let t2 = k.sealer(&s2).seal_into(1, 0, 0, &page, &mut c2);
        assert_ne!(
            c1, c2,
            "identical ciphertext would mean a repeated keystream"
        );
        assert_ne!(t1, t2);
        assert!(k.open(1, 0, 0, &s1, &t1, &mut c1));
        assert_eq!(c1, page);
        assert!(!k.open(1, 0, 0, &s1, &t2, &mut c2), "wrong session subkey");
    }

    #[test]
    fn key_file_rule_drops_one_newline_and_enforces_the_minimum() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k");
        std::fs::write(&p, b"long enough key\n").unwrap();
        assert_eq!(&*read_key_file(&p).unwrap(), b"long enough key");
        std::fs::write(&p, b"long enough key\r\n\n").unwrap();
        assert_eq!(&*read_key_file(&p).unwrap(), b"long enough key\r\n");
        std::fs::write(&p, b"k\n").unwrap();
        assert!(read_key_file(&p).unwrap_err().contains("holds 1 bytes"));
        assert!(passphrase_weakness(b"short").is_some());
        assert!(passphrase_weakness(b"aaaaaaaaaaaaaaaa").is_some());
        assert!(passphrase_weakness(b"correct horse battery").is_none());
    }
}
