//! The DRAM cache across processes: after another
//! process psyncs an object, or destroys it and creates another at the
//! same address under another key, a re-attach in DRAM-cache mode must
//! never serve the old plaintext. The cache is keyed by (pool id, object
//! id, committed version).

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
