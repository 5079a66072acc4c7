//! `repair` against damaged metadata: after any single bit flip in the
//! pool's metadata (header, group commit area, directory records, roots,
//! page tables), repair loses no object: every object readable before it
//! reads the same after it, every object `check` found intact stays
//! intact, and once the bit is restored every object reads as it did
//! before the flip (a quarantined object's frames were neither zeroed nor
//! reused).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nvmos_pmo::layout::{record_offset, Record, RecordState, PAGE, RECORD};
use nvmos_pmo::{Access, KdfParams, Perm, Pool};
use proptest::prelude::*;

const KEY: &[u8] = b"correct horse battery staple";
const FAST: KdfParams = KdfParams::INSECURE_FAST;

/// Objects of the template: name, key, pages.
const OBJECTS: [(&str, Option<&[u8]>, usize); 4] = [
    ("enc", Some(KEY), 8),
    ("pl", None, 4),
    ("one", None, 2),
    ("big", None, 70),
];

struct Template {
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// Every object's contents.
    data: Vec<(&'static str, Vec<u8>)>,
    /// Byte ranges holding metadata.
    regions: Vec<std::ops::Range<u64>>,
}

fn page(seed: u8, i: usize) -> Vec<u8> {
    (0..PAGE)
        .map(|k| seed.wrapping_mul(31) ^ (k as u8).wrapping_add(i as u8))
        .collect()
}

fn read_at(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    let f = std::fs::File::open(path).unwrap();
    let mut v = vec![0u8; len];
    f.read_exact_at(&mut v, offset).unwrap();
    v
}

fn flip(path: &Path, offset: u64, mask: u8) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).unwrap();
    b[0] ^= mask;
    f.write_all_at(&b, offset).unwrap();
}

fn read_object(pool: &Pool, name: &str, key: Option<&[u8]>) -> Option<Vec<u8>> {
    pool.open_object(name, Perm::Read, key)
        .and_then(|h| h.read_all())
        .ok()
}

/// A pool with an encrypted object written twice (both directory records
/// in use), plain objects written twice, once, never, one spanning two
/// page tables, and a destroyed one; no state store.
fn template() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pool");
        let pool = Pool::create(&path, 4 << 20).unwrap();
        for (name, key, pages) in OBJECTS {
            pool.pcreate_with(name, (pages * PAGE) as u64, key, FAST)
                .unwrap();
        }
        pool.pcreate_with("gone", PAGE as u64, None, FAST).unwrap();
        let write = |name: &str, key, pages: std::ops::Range<usize>, seed| {
            let h = pool.open_object(name, Perm::Write, key).unwrap();
            for i in pages {
                h.stage(i, &page(seed, i)).unwrap();
            }
            h.psync().unwrap();
        };
        write("enc", Some(KEY), 0..4, 1);
        write("enc", Some(KEY), 2..6, 2);
        write("pl", None, 0..2, 3);
        write("pl", None, 1..4, 4);
        write("big", None, 60..70, 5);
        write("gone", None, 0..1, 6);
        pool.pdestroy("gone", None).unwrap();
        let mut data = Vec::new();
        let mut regions = vec![0..80, 512..576];
        let mut tables = Vec::new();
        for (name, key, pages) in OBJECTS {
            let h = pool.open_object(name, Perm::Read, key).unwrap();
            data.push((name, h.read_all().unwrap()));
            for i in (0..pages).step_by(64) {
                if let Some((_, Some(t))) = h.page_location(i) {
                    let entries = (pages - i).min(64) as u64;
                    tables.push(t * PAGE as u64..t * PAGE as u64 + entries * 64);
                }
            }
        }
        drop(pool);
        for slot in 0..OBJECTS.len() + 1 {
            for which in 0..2 {
                let off = record_offset(slot, which) as u64;
                regions.push(off..off + RECORD as u64);
                let bytes = read_at(&path, off, RECORD);
                if let RecordState::Valid(r) = Record::classify(&bytes) {
                    if r.root_pfn != 0 {
                        let at = r.root_pfn * PAGE as u64;
                        regions.push(at..at + 8 + r.root_len as u64);
                    }
                }
            }
        }
        regions.extend(tables);
        Template {
            _dir: dir,
            path,
            data,
            regions,
        }
    })
}

fn key_of(name: &str) -> Option<&'static [u8]> {
    OBJECTS.iter().find(|o| o.0 == name).and_then(|o| o.1)
}

/// Names `check` reports intact.
fn intact(pool: &Pool) -> Vec<String> {
    pool.check_report()
        .objects
        .into_iter()
        .filter(|o| o.ok)
        .map(|o| o.name)
        .collect()
}

fn flip_and_repair(region: usize, at: u64, bit: u8) -> Result<(), TestCaseError> {
    let t = template();
    let r = &t.regions[region % t.regions.len()];
    let offset = r.start + at % (r.end - r.start);
    let mask = 1u8 << (bit % 8);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool");
    std::fs::copy(&t.path, &path).unwrap();
    flip(&path, offset, mask);
    let what = format!("bit {} of byte {offset}", bit % 8);
    // A pool that no longer opens cannot be repaired (and is not changed).
    let Ok(pool) = Pool::open(&path, Access::ReadWrite) else {
        return Ok(());
    };
    let readable: Vec<(&str, Vec<u8>)> = t
        .data
        .iter()
        .filter_map(|(n, _)| read_object(&pool, n, key_of(n)).map(|b| (*n, b)))
        .collect();
    let ok_before = intact(&pool);
    let report = pool.repair();
    prop_assert!(report.is_ok(), "{what}: repair failed: {report:?}");
    drop(pool);
    let pool = Pool::open(&path, Access::ReadWrite);
    prop_assert!(pool.is_ok(), "{what}: no longer opens after repair");
    let pool = pool.unwrap();
    for (name, bytes) in &readable {
        let after = read_object(&pool, name, key_of(name));
        prop_assert!(
            after.as_ref() == Some(bytes),
            "{what}: {name:?} was readable before repair, not after ({report:?})"
        );
    }
    let ok_after = intact(&pool);
    for name in &ok_before {
        prop_assert!(
            ok_after.contains(name),
            "{what}: check found {name:?} intact before repair, not after ({report:?})"
        );
    }
    drop(pool);
    // The bit restored: nothing of any object was lost.
    flip(&path, offset, mask);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    for (name, bytes) in &t.data {
        let back = read_object(&pool, name, key_of(name));
        prop_assert!(
            back.as_ref() == Some(bytes),
            "{what}: {name:?} lost its data once the bit was restored ({report:?})"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn repair_loses_no_object_after_any_metadata_bit_flip(
        region in 0usize..1000,
        at in 0u64..1 << 20,
        bit in 0u8..8,
    ) {
        flip_and_repair(region, at, bit)?;
    }
}

/// The case of the audit, always run: the root pointer of the current
/// record of the encrypted object.
#[test]
fn repair_keeps_an_object_whose_root_pointer_flipped() {
    let t = template();
    let recs: Vec<Option<Record>> = (0..2)
        .map(|w| Record::decode(&read_at(&t.path, record_offset(0, w) as u64, RECORD)))
        .collect();
    let which = match (&recs[0], &recs[1]) {
        (Some(a), Some(b)) => usize::from(b.seq > a.seq),
        _ => panic!("slot 0 holds two records"),
    };
    let region = t
        .regions
        .iter()
        .position(|r| r.start == record_offset(0, which) as u64)
        .unwrap();
    for bit in 0..8 {
        flip_and_repair(region, 16, bit).unwrap();
    }
}
