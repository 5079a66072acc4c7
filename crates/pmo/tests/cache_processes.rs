//! The DRAM cache across processes: after another
//! process psyncs an object, or destroys it and creates another at the
//! same address under another key, a re-attach in DRAM-cache mode must
//! never serve the old plaintext; nor may a copy of the pool file (same
//! ids and epochs, other bytes) be served the other copy's. The cache is
//! keyed by (pool id, object id, committed version, open of the pool).

use std::path::Path;
use std::process::{Command, Stdio};

use nvmos_pmo::layout::PAGE;
use nvmos_pmo::{Access, KdfParams, Mode, Perm, PmoError, Pool};

const KEY1: &[u8] = b"first key of the object";
const KEY2: &[u8] = b"second key, another object";
const ROLE: &str = "NVMOS_PMO_CACHE_CHILD";

/// Child: `rewrite` writes 'B' into obj; `recreate` destroys obj and
/// creates a new obj under KEY2 holding 'C'.
#[test]
fn cache_child() {
    let Ok(spec) = std::env::var(ROLE) else {
        return; // Only does something when the parent test runs it.
    };
    let (role, path) = spec.split_once(':').unwrap();
    let pool = Pool::open(Path::new(path), Access::ReadWrite).unwrap();
    match role {
        "rewrite" => {
            let h = pool.open_object("obj", Perm::Write, Some(KEY1)).unwrap();
            h.write_at(0, &[b'B'; PAGE]).unwrap();
            h.psync().unwrap();
        }
        "recreate" => {
            pool.pdestroy("obj", Some(KEY1)).unwrap();
            pool.pcreate_with("obj", 2 * PAGE as u64, Some(KEY2), KdfParams::INSECURE_FAST)
                .unwrap();
            let h = pool.open_object("obj", Perm::Write, Some(KEY2)).unwrap();
            h.write_at(0, &[b'C'; PAGE]).unwrap();
            h.psync().unwrap();
        }
        other => panic!("unknown role {other}"),
    }
}

fn child(role: &str, path: &Path) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "cache_child", "--test-threads=1"])
        .env(ROLE, format!("{role}:{}", path.display()))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "child {role} failed");
}

fn first_byte(path: &Path, key: &[u8]) -> (u8, usize) {
    let pool = Pool::open(path, Access::ReadOnly).unwrap();
    let a = pool
        .attach("obj", Perm::Read, Some(key), Mode::DramCache)
        .unwrap();
    let r = (a.as_slice()[0], a.as_ptr() as usize);
    a.detach().unwrap();
    r
}

#[test]
fn dram_cache_never_serves_plaintext_across_versions_or_objects() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool");
    {
        let pool = Pool::create(&path, 4 << 20).unwrap();
        pool.pcreate_with("obj", 2 * PAGE as u64, Some(KEY1), KdfParams::INSECURE_FAST)
            .unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY1)).unwrap();
        h.write_at(0, &[b'A'; PAGE]).unwrap();
        h.psync().unwrap();
    }
    let (b, base) = first_byte(&path, KEY1);
    assert_eq!(b, b'A');
    // Another process commits a psync: the cached 'A' must not be served.
    child("rewrite", &path);
    assert_eq!(first_byte(&path, KEY1).0, b'B');
    // Another process destroys the object and creates another at the same
    // address under another key.
    child("recreate", &path);
    let (c, base2) = first_byte(&path, KEY2);
    assert_eq!(base2, base, "the new object took the old address");
    assert_eq!(c, b'C');
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let e = pool
        .attach("obj", Perm::Read, Some(KEY1), Mode::DramCache)
        .unwrap_err();
    assert!(matches!(e, PmoError::WrongKey { .. }), "{e}");
}

/// Two copies of one pool file that diverged after the copy hold the same
/// pool id, object id and epoch but different bytes: reading one must never
/// be served the other's plaintext from the DRAM cache.
#[test]
fn dram_cache_never_serves_one_copy_of_a_pool_for_another() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("pool");
    {
        let pool = Pool::create(&original, 4 << 20).unwrap();
        pool.pcreate_with("obj", 2 * PAGE as u64, Some(KEY1), KdfParams::INSECURE_FAST)
            .unwrap();
    }
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::copy(&original, &a).unwrap();
    std::fs::copy(&original, &b).unwrap();
    // One psync in each copy: both reach the same epoch with other bytes.
    for (path, byte) in [(&a, b'a'), (&b, b'b')] {
        let pool = Pool::open(path, Access::ReadWrite).unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY1)).unwrap();
        h.write_at(0, &[byte; PAGE]).unwrap();
        h.psync().unwrap();
    }
    // Each copy read twice, alternating, and one copy opened twice at
    // once: every read returns that copy's own bytes.
    for _ in 0..2 {
        assert_eq!(first_byte(&a, KEY1).0, b'a');
        assert_eq!(first_byte(&b, KEY1).0, b'b');
    }
    let pool_a = Pool::open(&a, Access::ReadOnly).unwrap();
    let pool_b = Pool::open(&b, Access::ReadOnly).unwrap();
    for (pool, byte) in [(&pool_a, b'a'), (&pool_b, b'b'), (&pool_a, b'a')] {
        let att = pool
            .attach("obj", Perm::Read, Some(KEY1), Mode::DramCache)
            .unwrap();
        assert_eq!(att.as_slice()[0], byte);
        att.detach().unwrap();
    }
}
