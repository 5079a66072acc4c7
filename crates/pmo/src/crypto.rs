//! Keys and seals.
//!
//! - The user's key is stretched with Argon2id under a random per-object
//!   salt into 64 bytes: the first 32 are the AES-256-GCM page key, the
//!   last 32 the HMAC-SHA-256 key of the object root. Neither is stored;
//!   the root keeps a *verifier*, `HMAC(mac_key, "nvmos-pmo key check" ‖
//!   object id)`, which tells a wrong key from a tampered root and reveals
//!   nothing about either key.
//! - A page is sealed with AES-256-GCM (ring's, BoringSSL's AES-NI/VAES
//!   and carry-less-multiply code: about 5× RustCrypto's `aes-gcm` per
//!   core on this machine, which is what lets psync keep up with PMDK);
//!   nonce = 4 zero bytes ‖ a 64-bit
//!   per-object write counter that never repeats (the root persists a
//!   reserved high-water mark ahead of use, so a crash cannot make a
//!   counter value be used twice); associated data = object id ‖ page
//!   index ‖ that counter (the page's version). Swapping pages, moving a
//!   page to another object or putting back an older ciphertext breaks the
//!   tag.

use hmac::{Hmac, KeyInit, Mac};
use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_256_GCM};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{PmoError, Result};

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

impl KdfParams {
    /// The cheapest parameters Argon2 accepts: for tests that derive keys
    /// hundreds of times. Not for real keys.
    pub const INSECURE_FAST: KdfParams = KdfParams {
        m_cost: 8,
        t_cost: 1,
        p_cost: 1,
    };
}

type HmacSha256 = Hmac<Sha256>;

/// The keys of one object, derived from the user key.
pub(crate) struct ObjectKeys {
    aead: LessSafeKey,
    mac_key: [u8; 32],
}

pub(crate) const VERIFIER_LABEL: &[u8] = b"nvmos-pmo key check";

impl ObjectKeys {
    pub fn derive(key: &[u8], salt: &[u8; 16], params: KdfParams) -> Result<ObjectKeys> {
        let p = argon2::Params::new(params.m_cost, params.t_cost, params.p_cost, Some(64))
            .map_err(|e| PmoError::Kdf(e.to_string()))?;
        let argon = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, p);
        let mut out = [0u8; 64];
        argon
            .hash_password_into(key, salt, &mut out)
            .map_err(|e| PmoError::Kdf(e.to_string()))?;
        let aead = LessSafeKey::new(
            UnboundKey::new(&AES_256_GCM, &out[..32]).expect("AES-256 takes a 32-byte key"),
        );
        let mut mac_key = [0u8; 32];
        mac_key.copy_from_slice(&out[32..]);
        out.fill(0);
        Ok(ObjectKeys { aead, mac_key })
    }

    pub fn mac(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut m = <HmacSha256 as KeyInit>::new_from_slice(&self.mac_key).expect("any key length");
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    pub fn mac_matches(&self, parts: &[&[u8]], tag: &[u8]) -> bool {
        let mut m = <HmacSha256 as KeyInit>::new_from_slice(&self.mac_key).expect("any key length");
        for p in parts {
            m.update(p);
        }
        m.verify_slice(tag).is_ok()
    }

    pub fn verifier(&self, obj_id: u64) -> [u8; 32] {
        self.mac(&[VERIFIER_LABEL, &obj_id.to_le_bytes()])
    }

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
            .aead
            .seal_in_place_separate_tag(nonce(version), Aad::from(aad), dst)
            .expect("a 4 KiB page is within AES-GCM's limits");
        tag.as_ref().try_into().expect("a GCM tag is 16 bytes")
    }

    /// Decrypt `buf` in place if the tag checks; on failure `buf` is zeroed
    /// so it never holds unauthenticated plaintext.
    pub fn open(
        &self,
        obj_id: u64,
        page: u64,
        version: u64,
        tag: &[u8; 16],
        buf: &mut [u8],
    ) -> bool {
        let aad = aad(obj_id, page, version);
        if self
            .aead
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

impl Drop for ObjectKeys {
    fn drop(&mut self) {
        self.mac_key.fill(0);
    }
}

fn nonce(version: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&version.to_le_bytes());
    // Unique by construction: `version` is the per-object write counter
    // that the root reserves ahead of use (see the module comment).
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
