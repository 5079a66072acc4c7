//! The integrity audit, one test per attack: tamper, restore, fork,
//! substitute, bad parameters. Each asserts the exact error (or, where the
//! pool file alone cannot tell, that the state store refuses the open).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use nvmos_pmo::layout::{record_offset, Record, RecordState, PAGE, RECORD};
use nvmos_pmo::{Access, KdfParams, Perm, PmoError, Pool, PoolOptions};

const KEY: &[u8] = b"correct horse battery staple";
const FAST: KdfParams = KdfParams::INSECURE_FAST;

fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

fn read_at(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    let f = std::fs::File::open(path).unwrap();
    let mut v = vec![0u8; len];
    f.read_exact_at(&mut v, offset).unwrap();
    v
}

/// Flip the bits of `mask` in the byte at `offset`: a damaged byte
/// whatever it held (writing a fixed value is no damage when the byte
/// already held it, 1 time in 256 for a checksum or ciphertext byte).
fn flip(path: &Path, offset: u64, mask: u8) {
    let byte = read_at(path, offset, 1)[0];
    patch(path, offset, &[byte ^ mask]);
}

fn with_state(dir: &Path) -> PoolOptions {
    PoolOptions {
        state_dir: Some(dir.join("state")),
        ..PoolOptions::default()
    }
}

/// A pool with encrypted "obj" (4 pages written) and plain "plain"
/// (2 pages written), used through a state store in `dir/state`.
fn setup(dir: &Path) -> PathBuf {
    let path = dir.join("pool");
    let pool = Pool::create_with(&path, 4 << 20, with_state(dir)).unwrap();
    pool.pcreate_with("obj", 8 * PAGE as u64, Some(KEY), FAST)
        .unwrap();
    pool.pcreate_with("plain", 4 * PAGE as u64, None, FAST)
        .unwrap();
    let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
    for i in 0..4 {
        h.stage(i, &[i as u8 + 1; PAGE]).unwrap();
    }
    h.psync().unwrap();
    let p = pool.open_object("plain", Perm::Write, None).unwrap();
    p.stage(0, &[9; PAGE]).unwrap();
    p.stage(1, &[8; PAGE]).unwrap();
    p.psync().unwrap();
    path
}

fn current(path: &Path, slot: usize) -> (usize, Record) {
    let recs: Vec<Option<Record>> = (0..2)
        .map(|w| Record::decode(&read_at(path, record_offset(slot, w) as u64, RECORD)))
        .collect();
    match (&recs[0], &recs[1]) {
        (Some(a), Some(b)) if b.seq > a.seq => (1, b.clone()),
        (Some(a), _) => (0, a.clone()),
        (None, Some(b)) => (1, b.clone()),
        _ => panic!("no record"),
    }
}

/// Restoring a snapshot and writing again in two forks must
/// never repeat a (key, nonce) pair.
#[test]
fn two_forks_of_one_snapshot_never_repeat_a_key_nonce_pair() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let fork = dir.path().join("fork");
    std::fs::copy(&path, &fork).unwrap();
    let mut seen = Vec::new();
    for p in [&path, &fork] {
        let pool = Pool::open(p, Access::ReadWrite).unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        // The same plaintext at the same page in both forks.
        h.stage(5, &[0x5A; PAGE]).unwrap();
        h.psync().unwrap();
        let (salt, counter) = h.page_nonce(5).unwrap();
        let frame = h.page_location(5).unwrap().0.unwrap();
        seen.push((salt, counter, read_at(p, frame * PAGE as u64, PAGE)));
    }
    assert_eq!(
        seen[0].1, seen[1].1,
        "both forks used counter value {}",
        seen[0].1
    );
    assert_ne!(seen[0].0, seen[1].0, "two sessions drew the same salt");
    assert_ne!(
        seen[0].2, seen[1].2,
        "same plaintext, same ciphertext: the keystream repeated"
    );
}

/// A flipped bit in the current record is an error naming it,
/// not a silent fall back to the previous psync.
#[test]
fn flipped_current_record_is_an_error_not_a_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let (which, rec) = current(&path, 0);
    flip(&path, record_offset(0, which) as u64 + 56, 0x55);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let e = pool.verify("obj", Some(KEY)).unwrap_err();
    assert!(matches!(e, PmoError::Quarantined { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!("object \"obj\" is quarantined: directory record {which} fails its check (checksum mismatch) and may be the current one (epoch {}, the other record has {}): not a torn write, so the older record is not used (directory slot 0)", rec.seq, rec.seq - 1)
    );
    // The rest of the pool is usable.
    assert!(pool.verify("plain", None).unwrap().ok());
}

/// Zeroing the current record (silent deletion / rollback).
#[test]
fn erased_record_is_detected_from_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    {
        // A third epoch, so both records have been written.
        let pool = Pool::open(&path, Access::ReadWrite).unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        h.stage(6, &[6; PAGE]).unwrap();
        h.psync().unwrap();
    }
    let (which, rec) = current(&path, 0);
    patch(&path, record_offset(0, which) as u64, &[0; RECORD]);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let e = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "directory record {which} was erased (record {} has epoch {}, so it held epoch {})",
            1 - which,
            rec.seq - 1,
            rec.seq - 2
        )),
        "{e}"
    );
}

/// Zeroing both records, or the whole directory page at 4096,
/// is a deletion the file cannot show; the state store refuses the open.
#[test]
fn zeroed_directory_page_is_refused_by_the_state_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let (_, obj) = current(&path, 0);
    let (_, plain) = current(&path, 1);
    patch(&path, 4096, &[0; PAGE]);
    let e = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap_err();
    assert!(matches!(e, PmoError::PoolRolledBack { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "pool {} rolled back by {} epochs: object \"obj\" (slot 0) missing: the state store has epoch {}, the slot is empty (records erased or directory restored); object \"plain\" (slot 1) missing: the state store has epoch {}, the slot is empty (records erased or directory restored)",
            path.display(),
            obj.seq + plain.seq,
            obj.seq,
            plain.seq
        )
    );
}

/// A forged tombstone (a valid record the attacker wrote).
#[test]
fn forged_tombstone_is_refused_by_the_state_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let (which, rec) = current(&path, 0);
    let tomb = Record {
        seq: rec.seq + 1,
        state: nvmos_pmo::layout::SlotState::Destroyed,
        root_len: 0,
        root_pfn: 0,
        root_sha: [0; 16],
        ..rec
    };
    patch(&path, record_offset(0, 1 - which) as u64, &tomb.encode());
    let e = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("pool {} is inconsistent: the state store disagrees: object \"obj\" (slot 0) was destroyed outside nvmos: its tombstone (epoch {}) is not in the state store (forged deletion?)", path.display(), rec.seq + 1)
    );
}

/// Flipping a bit of a tombstone must not resurrect the object.
#[test]
fn flipped_tombstone_does_not_resurrect() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    {
        let pool = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap();
        pool.pdestroy("obj", Some(KEY)).unwrap();
    }
    let (which, _) = current(&path, 0);
    flip(&path, record_offset(0, which) as u64 + 24, 0x01);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let e = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap_err();
    assert!(matches!(e, PmoError::Quarantined { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("fails its check (checksum mismatch) and may be the current one"),
        "{e}"
    );
}

/// Restoring only the directory (or any older copy of the
/// pool) rolls objects back: refused, naming each and by how much.
#[test]
fn restored_directory_or_pool_is_refused_with_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let old_dir = read_at(&path, 4096, 8 * PAGE);
    let old_pool = std::fs::read(&path).unwrap();
    let (_, before) = current(&path, 0);
    {
        let pool = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        for round in 0..2u8 {
            h.stage(0, &[round; PAGE]).unwrap();
            h.psync().unwrap();
        }
    }
    patch(&path, 4096, &old_dir);
    let e = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap_err();
    let want = format!(
        "pool {} rolled back by 2 epochs: object \"obj\" (slot 0) by 2 epochs (state store has epoch {}, the pool {})",
        path.display(),
        before.seq + 2,
        before.seq
    );
    assert_eq!(e.to_string(), want);
    std::fs::write(&path, &old_pool).unwrap();
    let e = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap_err();
    assert_eq!(e.to_string(), want);
    // Without the store the file alone cannot tell (documented).
    assert!(Pool::open(&path, Access::ReadOnly).is_ok());
}

/// A deliberate restore is accepted: `accept_rollback` re-bases the state
/// store to the pool's epochs, the pool opens and is written again, and a
/// later rollback is refused as before.
#[test]
fn accepted_restore_rebases_the_store_and_later_rollbacks_are_still_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let old_pool = std::fs::read(&path).unwrap();
    let (_, before) = current(&path, 0);
    {
        let pool = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        for round in 0..3u8 {
            h.stage(0, &[round; PAGE]).unwrap();
            h.psync().unwrap();
        }
    }
    std::fs::write(&path, &old_pool).unwrap();
    assert!(matches!(
        Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())),
        Err(PmoError::PoolRolledBack { epochs: 3, .. })
    ));
    // Accepting needs the pool open for writing, with the mismatch tolerated.
    let tolerant = PoolOptions {
        tolerate_state_mismatch: true,
        ..with_state(dir.path())
    };
    let ro = Pool::open_with(&path, Access::ReadOnly, tolerant.clone()).unwrap();
    assert!(matches!(
        ro.accept_rollback(),
        Err(PmoError::PoolReadOnly { .. })
    ));
    drop(ro);
    let no_store = Pool::open(&path, Access::ReadWrite).unwrap();
    assert!(matches!(
        no_store.accept_rollback(),
        Err(PmoError::State { .. })
    ));
    drop(no_store);
    let pool = Pool::open_with(&path, Access::ReadWrite, tolerant).unwrap();
    let r = pool.accept_rollback().unwrap();
    assert_eq!(r.epochs_back, 3);
    assert_eq!(
        r.rebased,
        vec![format!(
            "object \"obj\" (slot 0): live epoch {} -> live epoch {}",
            before.seq + 3,
            before.seq
        )]
    );
    assert_eq!(r.accepted.len(), 1, "{:?}", r.accepted);
    assert!(r.left.is_empty() && r.forgotten_ids.is_empty());
    assert!(pool.check_report().ok());
    drop(pool);
    // Opens normally now, reads the restored contents, writes on.
    let pool = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap();
    let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
    let mut page = vec![0u8; PAGE];
    h.read(0, &mut page).unwrap();
    assert_eq!(page, vec![1u8; PAGE], "the restored state");
    let restored = std::fs::read(&path).unwrap();
    h.stage(1, &[7; PAGE]).unwrap();
    h.psync().unwrap();
    drop(h);
    drop(pool);
    // Rolling back past the accepted point is refused again.
    std::fs::write(&path, &restored).unwrap();
    let e = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap_err();
    assert!(
        matches!(e, PmoError::PoolRolledBack { epochs: 1, .. }),
        "{e}"
    );
}

/// A changed pool id, or an object copied from another pool.
#[test]
fn changed_pool_id_quarantines_every_object() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let mut header = read_at(&path, 0, 80);
    let old_id = u64::from_le_bytes(header[60..68].try_into().unwrap());
    header[60] ^= 1;
    let crc = crc32fast::hash(&header[..76]);
    header[76..80].copy_from_slice(&crc.to_le_bytes());
    patch(&path, 0, &header);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let e = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("object \"obj\" is quarantined: root bound to pool {old_id:016x}, but this pool's id is {:016x} (object copied from another pool, or the pool id changed) (directory slot 0)", old_id ^ 1)
    );
    let e = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap_err();
    assert!(e.to_string().contains("pool id changed"), "{e}");
}

/// A plain object substituted for an encrypted one: a keyed
/// read of it is an error, never the attacker's plaintext.
#[test]
fn plain_object_substituted_for_an_encrypted_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    for w in 0..2 {
        patch(&path, record_offset(0, w) as u64, &[0; RECORD]);
    }
    {
        // The attacker's own nvmos (no access to the victim's store).
        let pool = Pool::open(&path, Access::ReadWrite).unwrap();
        pool.pcreate_with("obj", PAGE as u64, None, FAST).unwrap();
        let h = pool.open_object("obj", Perm::Write, None).unwrap();
        h.write_at(0, b"attacker").unwrap();
        h.psync().unwrap();
    }
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let e = pool.verify("obj", Some(KEY)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "object \"obj\" is not encrypted; it takes no key"
    );
    let e = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap_err();
    assert!(
        e.to_string()
            .contains("object \"obj\" (slot 0) was replaced by another object"),
        "{e}"
    );
}

/// Plain objects have per-page integrity (against accident).
#[test]
fn flipped_bit_in_a_plain_page_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let frame = {
        let pool = Pool::open(&path, Access::ReadOnly).unwrap();
        let h = pool.open_object("plain", Perm::Read, None).unwrap();
        h.page_location(1).unwrap().0.unwrap()
    };
    patch(&path, frame * PAGE as u64 + 100, &[8 ^ 0x10]);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let r = pool.verify("plain", None).unwrap();
    assert_eq!(
        r.bad_pages,
        vec![(1, "object \"plain\" page 1: hash mismatch (page corrupted; plain objects are protected against accident, not attack)".to_string())]
    );
    let c = pool.check_report();
    assert!(!c.ok());
    assert_eq!(c.objects[1].status, "1 pages fail their hash: [1]");
}

/// Across the `PageBacking` seam a failure keeps its kind: a tampered page
/// is `Integrity`, a write to a read-only handle or a page past the end is
/// `Invalid`, and the pool's own error is still there to downcast.
#[test]
fn backing_errors_are_typed_by_kind() {
    use nvmos_pmo::{BackingErrorKind, PageBacking};
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let frame = {
        let pool = Pool::open(&path, Access::ReadOnly).unwrap();
        let h = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
        h.page_location(2).unwrap().0.unwrap()
    };
    flip(&path, frame * PAGE as u64 + 7, 0xFF);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let h = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
    let mut page = vec![0u8; PAGE];
    let e = PageBacking::read_page(&h, 2, &mut page).unwrap_err();
    assert_eq!(e.kind(), BackingErrorKind::Integrity);
    assert!(matches!(
        e.get_ref().downcast_ref::<PmoError>(),
        Some(PmoError::PageAuth { page: 2, .. })
    ));
    assert_eq!(
        e.to_string(),
        "object \"obj\" page 2: authentication failed (page tampered with, swapped, moved or rolled back)"
    );
    let e = PageBacking::stage_page(&h, 0, &page).unwrap_err();
    assert_eq!(e.kind(), BackingErrorKind::Invalid);
    let e = PageBacking::read_page(&h, 8, &mut page).unwrap_err();
    assert_eq!(e.kind(), BackingErrorKind::Invalid, "{e}");
}

/// KDF parameters are bounded before use (no 100 % CPU spin).
#[test]
fn unbounded_kdf_parameters_are_refused_before_use() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let (which, rec) = current(&path, 0);
    // t_cost at blob offset 172, after the 8-byte frame count; then fix
    // the unkeyed hash and CRC as an attacker can.
    let root = rec.root_pfn * PAGE as u64;
    patch(&path, root + 8 + 172, &u32::MAX.to_le_bytes());
    let stored = read_at(&path, root, 8 + rec.root_len as usize);
    use sha2::Digest;
    let sha = sha2::Sha256::digest(&stored);
    let forged = Record {
        root_sha: sha[..16].try_into().unwrap(),
        ..rec
    };
    patch(&path, record_offset(0, which) as u64, &forged.encode());
    let t = std::time::Instant::now();
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let e = pool.verify("obj", Some(KEY)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "object \"obj\" is quarantined: root: key derivation parameters out of bounds: 4294967295 passes (accepted: 1..=16) (directory slot 0)"
    );
    assert!(t.elapsed().as_secs() < 60, "took {:?}", t.elapsed());
    let e = Pool::create(&dir.path().join("p2"), 4 << 20)
        .unwrap()
        .pcreate_with(
            "x",
            4096,
            Some(KEY),
            KdfParams {
                t_cost: 100,
                ..FAST
            },
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "key derivation parameters refused: 100 passes (accepted: 1..=16)"
    );
}

/// A table entry pointing into another object quarantines that
/// object only; the pool opens, the other object reads, check names it.
#[test]
fn table_entry_into_another_object_quarantines_only_that_object() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let (a_frame, plain_table) = {
        let pool = Pool::open(&path, Access::ReadOnly).unwrap();
        let a = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
        let p = pool.open_object("plain", Perm::Read, None).unwrap();
        (
            a.page_location(0).unwrap().0.unwrap(),
            p.page_location(0).unwrap().1.unwrap(),
        )
    };
    // Entry 0 of plain's table now names obj's page 0 frame.
    patch(&path, plain_table * PAGE as u64, &a_frame.to_le_bytes());
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    assert_eq!(
        pool.open_object("obj", Perm::Read, Some(KEY))
            .unwrap()
            .read_all()
            .unwrap()[0],
        1
    );
    let e = pool.open_object("plain", Perm::Read, None).unwrap_err();
    assert!(
        e.to_string().starts_with("object \"plain\" is quarantined: page table 0 (pages 0..4): hash does not match the root; frame "),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("also claimed by object \"obj\" (slot 0)"),
        "{e}"
    );
    let ls = pool.list();
    assert!(ls.iter().any(|o| o.name == "plain" && o.damaged.is_some()));
    let c = pool.check_report();
    assert!(!c.ok());
    assert!(c.objects.iter().any(|o| o.name == "obj" && o.ok));
    drop(pool);
    // Repair keeps obj, leaves plain untouched, and the pool still opens.
    let pool = Pool::open(&path, Access::ReadWrite).unwrap();
    let r = pool.repair().unwrap();
    assert_eq!(r.salvaged, vec!["obj".to_string()]);
    assert_eq!(r.quarantined.len(), 1);
    drop(pool);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    assert!(pool.verify("obj", Some(KEY)).unwrap().ok());
}

/// A corrupted root is reported by name (from the state store),
/// not as "no object named".
#[test]
fn corrupted_root_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let (_, rec) = current(&path, 0);
    patch(&path, rec.root_pfn * PAGE as u64 + 8 + 40, b"X");
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
    let e = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "object \"obj\" is quarantined: root does not match the hash in its directory record (directory slot 0)"
    );
}

/// Short keys are refused at creation.
#[test]
fn short_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::create(&dir.path().join("p"), 4 << 20).unwrap();
    let e = pool.pcreate_with("k", 4096, Some(b"k"), FAST).unwrap_err();
    assert_eq!(
        e.to_string(),
        "key for object \"k\" is 1 bytes; at least 8 are needed"
    );
}

/// Format change: an old pool is refused with both versions named.
#[test]
fn old_format_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    patch(&path, 8, &1u32.to_le_bytes());
    let e = Pool::open(&path, Access::ReadOnly).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{} is not an nvmos PMO pool: unsupported pool format v1, this nvmos reads v2",
            path.display()
        )
    );
}

/// Create never leaves a partial pool; a 0-byte file is refused.
#[test]
fn create_leaves_nothing_on_failure_and_refuses_an_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p");
    assert!(Pool::create(&p, 12345).is_err());
    assert!(!p.exists());
    std::fs::write(&p, b"").unwrap();
    let e = Pool::create(&p, 4 << 20).unwrap_err();
    assert!(
        e.to_string().contains("exists and is empty (0 bytes"),
        "{e}"
    );
    let e = Pool::open(&p, Access::ReadOnly).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{} is not an nvmos PMO pool: the file is empty (0 bytes)",
            p.display()
        )
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "a temporary was left behind");
    let _ = RecordState::Empty;
}
