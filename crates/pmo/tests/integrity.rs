//! The integrity audit, one test per attack: tamper, restore, fork,
//! substitute, bad parameters. Each asserts the exact error (or, where the
//! pool file alone cannot tell, that the state store refuses the open).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use nvmos_pmo::layout::{record_offset, Record, RecordState, Root, SlotState, PAGE, RECORD};
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

/// The pool file alone, without the state store it names: opened only
/// because the caller says so, and then unprotected against rollback.
fn file_alone() -> PoolOptions {
    PoolOptions {
        allow_missing_state: true,
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
        let pool = Pool::open_with(p, Access::ReadWrite, file_alone()).unwrap();
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
    let pool = Pool::open_with(&path, Access::ReadOnly, file_alone()).unwrap();
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
        let pool = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        h.stage(6, &[6; PAGE]).unwrap();
        h.psync().unwrap();
    }
    let (which, rec) = current(&path, 0);
    patch(&path, record_offset(0, which) as u64, &[0; RECORD]);
    let pool = Pool::open_with(&path, Access::ReadOnly, file_alone()).unwrap();
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
    let pool = Pool::open_with(&path, Access::ReadOnly, file_alone()).unwrap();
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
    // Without the store the file alone cannot tell, so the pool, which
    // names its store, is refused; opened anyway on request, it says so.
    let e = Pool::open(&path, Access::ReadOnly).unwrap_err();
    assert!(matches!(e, PmoError::StateMissing { .. }), "{e}");
    let alone = Pool::open_with(&path, Access::ReadOnly, file_alone()).unwrap();
    let why = alone.state_missing().unwrap();
    assert!(why.contains("no state store is in use"), "{why}");
    assert_eq!(alone.info().state_missing, Some(why.clone()));
    assert_eq!(alone.check_report().state_missing, Some(why));
    assert!(!alone.check_report().ok());
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
    let no_store = Pool::open_with(&path, Access::ReadWrite, file_alone()).unwrap();
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
    let pool = Pool::open_with(&path, Access::ReadOnly, file_alone()).unwrap();
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
        let pool = Pool::open_with(&path, Access::ReadWrite, file_alone()).unwrap();
        pool.pcreate_with("obj", PAGE as u64, None, FAST).unwrap();
        let h = pool.open_object("obj", Perm::Write, None).unwrap();
        h.write_at(0, b"attacker").unwrap();
        h.psync().unwrap();
    }
    let pool = Pool::open_with(&path, Access::ReadOnly, file_alone()).unwrap();
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
        let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
        let h = pool.open_object("plain", Perm::Read, None).unwrap();
        h.page_location(1).unwrap().0.unwrap()
    };
    patch(&path, frame * PAGE as u64 + 100, &[8 ^ 0x10]);
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
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
        let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
        let h = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
        h.page_location(2).unwrap().0.unwrap()
    };
    flip(&path, frame * PAGE as u64 + 7, 0xFF);
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
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
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
    let e = pool.verify("obj", Some(KEY)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "object \"obj\" is quarantined: root in pool {}: key derivation field t_cost out of the format's bounds: 4294967295 passes (accepted: 1..=16); the root was tampered with (directory slot 0)",
            path.display()
        )
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

/// Set the key-stretching cost in `obj`'s root (slot 0) to `m` KiB, `t`
/// passes and `p` lanes, then fix the unkeyed hash and CRC as an attacker
/// can (the root's MAC needs the key, which an attacker lacks).
fn forge_kdf_cost(path: &Path, m: u32, t: u32, p: u32) {
    let (which, rec) = current(path, 0);
    // The blob starts after the 8-byte frame count; its cost fields are at
    // 168 (memory), 172 (passes) and 176 (lanes).
    let root = rec.root_pfn * PAGE as u64;
    let cost: Vec<u8> = [m, t, p].iter().flat_map(|v| v.to_le_bytes()).collect();
    patch(path, root + 8 + 168, &cost);
    let stored = read_at(path, root, 8 + rec.root_len as usize);
    use sha2::Digest;
    let sha = sha2::Sha256::digest(&stored);
    let forged = Record {
        root_sha: sha[..16].try_into().unwrap(),
        ..rec
    };
    patch(path, record_offset(0, which) as u64, &forged.encode());
}

/// A root forged to a costly key stretching (up to the most the format
/// once accepted: 1 GiB, 16 passes, 16 lanes) is refused as tampered
/// before Argon2 runs, naming the pool and the field; it is not blamed on
/// the user's key. Only the cost fields are checked here: no timing.
#[test]
fn costly_kdf_parameters_in_a_root_are_tampering_not_a_wrong_key() {
    for (m, t, p, field) in [
        // 64 MiB × 16 passes: each bound alone holds, their product not.
        (64 << 10, 16, 1, "m_cost × t_cost"),
        (1 << 20, 16, 16, "m_cost"),
        (8, 17, 1, "t_cost"),
        (8 * 17, 1, 17, "p_cost"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = setup(dir.path());
        forge_kdf_cost(&path, m, t, p);
        let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
        let e = pool
            .open_object("obj", Perm::Read, Some(KEY))
            .err()
            .unwrap();
        assert!(
            matches!(e, PmoError::Quarantined { .. }),
            "{m}/{t}/{p}: {e}"
        );
        let msg = e.to_string();
        for part in [
            format!("root in pool {}:", path.display()),
            format!("key derivation field {field} "),
            "the root was tampered with".to_string(),
        ] {
            assert!(msg.contains(&part), "{m}/{t}/{p}: {part:?} not in {msg}");
        }
        // The other objects of the pool still open.
        assert!(pool.open_object("plain", Perm::Read, None).is_ok());
    }
}

/// A table entry pointing into another object quarantines that
/// object only; the pool opens, the other object reads, check names it.
#[test]
fn table_entry_into_another_object_quarantines_only_that_object() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let (a_frame, plain_table) = {
        let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
        let a = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
        let p = pool.open_object("plain", Perm::Read, None).unwrap();
        (
            a.page_location(0).unwrap().0.unwrap(),
            p.page_location(0).unwrap().1.unwrap(),
        )
    };
    // Entry 0 of plain's table now names obj's page 0 frame.
    patch(&path, plain_table * PAGE as u64, &a_frame.to_le_bytes());
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
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
    let pool = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap();
    let r = pool.repair().unwrap();
    assert_eq!(r.salvaged, vec!["obj".to_string()]);
    assert_eq!(r.quarantined.len(), 1);
    drop(pool);
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
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
            "{} is not an nvmos PMO pool: unsupported pool format v1, this nvmos reads v3",
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

/// The pool id in the header (bytes 60..68).
fn pool_id(path: &Path) -> u64 {
    u64::from_le_bytes(read_at(path, 60, 8).try_into().unwrap())
}

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// Store `root` as a plain root (hash, no MAC) at frame `frame` (one
/// frame, no continuation) and make record `which` of `slot` name it at
/// epoch `seq`: what anyone with write access to the pool file can do.
fn write_plain_root(path: &Path, slot: usize, which: usize, seq: u64, frame: u64, root: &Root) {
    let body = root.encode_body();
    let mac = sha256(&[&body]);
    let mut stored = vec![0u8; 8];
    stored.extend_from_slice(&body);
    stored.extend_from_slice(&mac);
    assert!(stored.len() <= PAGE);
    patch(path, frame * PAGE as u64, &stored);
    let rec = Record {
        seq,
        state: SlotState::Live,
        root_len: (body.len() + mac.len()) as u32,
        root_pfn: frame,
        obj_id: root.obj_id,
        root_sha: sha256(&[&stored])[..16].try_into().unwrap(),
    };
    patch(path, record_offset(slot, which) as u64, &rec.encode());
}

/// Rewrite slot `slot`'s current root in place as an attacker can
/// (stored plain), after `change`; the other record of the slot names it
/// at the next epoch, so an open pool sees a new commit.
fn forge_root(path: &Path, slot: usize, change: impl FnOnce(&mut Root)) {
    let (which, rec) = current(path, slot);
    let stored = read_at(path, rec.root_pfn * PAGE as u64, 8 + rec.root_len as usize);
    assert_eq!(&stored[..8], &[0; 8], "a one-frame root");
    let (mut root, _) = Root::decode(&stored[8..]).unwrap();
    change(&mut root);
    root.epoch = rec.seq + 1;
    write_plain_root(path, slot, 1 - which, rec.seq + 1, rec.root_pfn, &root);
}

/// Every page of an object reads as zeros: each table "not written".
fn all_zero_tables(root: &mut Root) {
    let zero = sha256(&[&[0u8; PAGE]]);
    for t in root.tables.iter_mut() {
        *t = (0, zero);
    }
}

/// A pool once used with a state store names that store (its identity
/// is in the pool's authenticated metadata): without it, an older copy of
/// the pool could not be told from the latest, so every open, read-only
/// ones included, is refused naming the pool and the store, whether the
/// store was deleted, emptied, replaced by another pool's, or looked for
/// under another HOME.
#[test]
fn a_protected_pool_without_its_state_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let old = std::fs::read(&path).unwrap();
    {
        let pool = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        h.stage(0, &[0x77; PAGE]).unwrap();
        h.psync().unwrap();
    }
    // A rolled-back copy.
    std::fs::write(&path, &old).unwrap();
    let store = dir.path().join("state");
    let record = store.join(format!("{:016x}.json", pool_id(&path)));
    let saved = std::fs::read(&record).unwrap();
    let refused = |opts: PoolOptions, store_file: &Path| {
        for access in [Access::ReadOnly, Access::ReadWrite] {
            let e = Pool::open_with(&path, access, opts.clone()).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains(&store_file.display().to_string()), "{text}");
        }
    };
    // Another HOME: a store that never saw the pool.
    let elsewhere = dir.path().join("other-home");
    refused(
        PoolOptions {
            state_dir: Some(elsewhere.clone()),
            ..PoolOptions::default()
        },
        &elsewhere.join(format!("{:016x}.json", pool_id(&path))),
    );
    // The record emptied.
    std::fs::write(
        &record,
        format!(
            "{{\"path\": {:?}, \"slots\": {{}}}}",
            path.display().to_string()
        ),
    )
    .unwrap();
    refused(with_state(dir.path()), &record);
    // Another pool's record in its place.
    let other = dir.path().join("other-pool");
    Pool::create_with(&other, 4 << 20, with_state(dir.path()))
        .unwrap()
        .pcreate_with("obj", PAGE as u64, None, FAST)
        .unwrap();
    std::fs::copy(
        store.join(format!("{:016x}.json", pool_id(&other))),
        &record,
    )
    .unwrap();
    refused(with_state(dir.path()), &record);
    // The store deleted.
    std::fs::remove_dir_all(&store).unwrap();
    refused(with_state(dir.path()), &record);
    // No store at all.
    let e = Pool::open(&path, Access::ReadOnly).unwrap_err();
    assert!(matches!(e, PmoError::StateMissing { .. }), "{e}");
    // Opened anyway on request: unprotected, and every report says so;
    // nothing is recorded in the store meanwhile.
    let allowed = PoolOptions {
        allow_missing_state: true,
        ..with_state(dir.path())
    };
    {
        let pool = Pool::open_with(&path, Access::ReadWrite, allowed.clone()).unwrap();
        let why = pool.state_missing().unwrap();
        assert!(why.contains(&record.display().to_string()), "{why}");
        assert_eq!(pool.info().state_missing.as_deref(), Some(why.as_str()));
        assert!(!pool.check_report().ok());
        let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        h.stage(1, &[0x11; PAGE]).unwrap();
        h.psync().unwrap();
    }
    assert!(!record.exists(), "an unprotected open wrote the store");
    // Accepting binds the pool to the store in use, as it is now.
    let tolerant = PoolOptions {
        tolerate_state_mismatch: true,
        ..with_state(dir.path())
    };
    let pool = Pool::open_with(&path, Access::ReadWrite, tolerant).unwrap();
    let r = pool.accept_rollback().unwrap();
    assert!(r.rebound.is_some(), "{r:?}");
    assert!(
        r.accepted[0].contains("is protected by state store"),
        "{r:?}"
    );
    drop(pool);
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
    assert!(pool.check_report().ok());
    assert!(pool.state_missing().is_none());
    drop(pool);
    // The old record back: the pool now names the new one.
    std::fs::write(&record, &saved).unwrap();
    let e = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap_err();
    assert!(matches!(e, PmoError::StateMissing { .. }), "{e}");
}

/// A pool made without a state store is bound to one by its first open
/// for writing through it; read-only opens change nothing.
#[test]
fn a_pool_made_without_a_store_is_bound_by_its_first_open_for_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool");
    Pool::create(&path, 4 << 20)
        .unwrap()
        .pcreate_with("obj", PAGE as u64, Some(KEY), FAST)
        .unwrap();
    let record = dir
        .path()
        .join("state")
        .join(format!("{:016x}.json", pool_id(&path)));
    drop(Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap());
    assert!(!record.exists());
    assert!(Pool::open(&path, Access::ReadOnly).is_ok());
    drop(Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap());
    assert!(record.exists());
    let e = Pool::open(&path, Access::ReadOnly).unwrap_err();
    assert!(matches!(e, PmoError::StateMissing { .. }), "{e}");
    // The object it held is known to the store: it opens and reads.
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
    assert!(pool.verify("obj", Some(KEY)).unwrap().ok());
}

/// The header's copy of the store identity is not the only one: the
/// roots name the store too (an encrypted one under its MAC), so zeroing
/// the header's does not make the pool look unprotected.
#[test]
fn a_header_stripped_of_its_store_still_needs_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    patch(&path, nvmos_pmo::layout::HEADER_STORE_AT as u64, &[0; 8]);
    // With the store, the store decides, and a writer names it again.
    drop(Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap());
    assert_ne!(
        read_at(&path, nvmos_pmo::layout::HEADER_STORE_AT as u64, 8),
        vec![0; 8]
    );
    patch(&path, nvmos_pmo::layout::HEADER_STORE_AT as u64, &[0; 8]);
    std::fs::remove_dir_all(dir.path().join("state")).unwrap();
    let e = Pool::open(&path, Access::ReadOnly).unwrap_err();
    assert!(matches!(e, PmoError::StateMissing { .. }), "{e}");
}

/// A plain root is unkeyed: anyone can rename the object. The state
/// store knows each slot's name, so the relabelled object is refused.
#[test]
fn relabelled_plain_object_is_refused_by_the_state_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    forge_root(&path, 1, |r| r.name = "renamed".into());
    let e = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "pool {} is inconsistent: the state store disagrees: object \"plain\" (slot 1) is named \"renamed\" in the pool: relabelled outside nvmos",
            path.display()
        )
    );
}

/// An encrypted object replaced by a forged plain one (same id, name and
/// slot, its tables emptied): the state store knows it as encrypted, so
/// the open is refused, and so is a keyless read by a pool opened before
/// the forgery.
#[test]
fn encrypted_object_replaced_by_a_forged_plain_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let before = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
    forge_root(&path, 0, |r| {
        r.encrypted = false;
        all_zero_tables(r);
    });
    let e = before.open_object("obj", Perm::Read, None).unwrap_err();
    assert!(
        e.to_string()
            .contains("object \"obj\" (slot 0) is encrypted in the state store, but the pool holds it as a plain object"),
        "{e}"
    );
    drop(before);
    let e = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap_err();
    assert!(
        e.to_string()
            .contains("object \"obj\" (slot 0) is encrypted in the state store, but the pool holds it as a plain object"),
        "{e}"
    );
    // check reports it instead of passing the forgery.
    let tolerant = PoolOptions {
        tolerate_state_mismatch: true,
        ..with_state(dir.path())
    };
    let c = Pool::open_with(&path, Access::ReadOnly, tolerant)
        .unwrap()
        .check_report();
    assert!(!c.ok());
    assert_eq!(c.state_mismatches.len(), 1, "{:?}", c.state_mismatches);
}

/// A plain object forged into a destroyed object's slot, under the name
/// of a live object: the state store keeps the destroyed slot empty, and
/// without the store the two objects of one name are both quarantined
/// (neither can be trusted over the other), never listed as two.
#[test]
fn forged_object_in_a_destroyed_slot_is_refused_and_never_shadows_a_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let (_, last_live) = current(&path, 0);
    {
        let pool = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap();
        pool.pdestroy("obj", Some(KEY)).unwrap();
    }
    let (tomb_which, tomb) = current(&path, 0);
    // "plain"'s root, moved to slot 0 under a new id and address, its
    // pages empty, in the destroyed object's (now free) root frame.
    let (_, plain) = current(&path, 1);
    let stored = read_at(
        &path,
        plain.root_pfn * PAGE as u64,
        8 + plain.root_len as usize,
    );
    let (mut root, _) = Root::decode(&stored[8..]).unwrap();
    root.slot = 0;
    root.obj_id ^= 0x5555;
    root.epoch = tomb.seq + 1;
    root.base += 1 << 30;
    all_zero_tables(&mut root);
    write_plain_root(
        &path,
        0,
        1 - tomb_which,
        tomb.seq + 1,
        last_live.root_pfn,
        &root,
    );
    let e = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap_err();
    assert!(
        e.to_string().contains(
            "object \"plain\" (slot 0) stands in a slot the state store has as destroyed"
        ),
        "{e}"
    );
    // The file alone: one name, two objects, both quarantined.
    let tolerant = PoolOptions {
        tolerate_state_mismatch: true,
        ..with_state(dir.path())
    };
    let pool = Pool::open_with(&path, Access::ReadOnly, tolerant).unwrap();
    let ls = pool.list();
    assert_eq!(ls.len(), 2, "{ls:?}");
    for o in &ls {
        assert_eq!(o.name, "plain");
        let why = o
            .damaged
            .as_deref()
            .unwrap_or_else(|| panic!("{o:?} not quarantined"));
        assert!(why.contains("has the same name"), "{why}");
    }
    let c = pool.check_report();
    assert!(!c.ok());
    assert!(c.objects.iter().all(|o| !o.ok), "{:?}", c.objects);
    let e = pool.open_object("plain", Perm::Read, None).unwrap_err();
    assert!(matches!(e, PmoError::Quarantined { .. }), "{e}");
}

/// Two objects whose address ranges overlap cannot both be attached at
/// their fixed addresses: both are quarantined and check fails.
#[test]
fn objects_overlapping_in_address_are_quarantined() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let obj_base = {
        let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
        pool.list()[0].base_address
    };
    forge_root(&path, 1, |r| r.base = obj_base + PAGE as u64);
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
    let ls = pool.list();
    assert_eq!(ls.len(), 2);
    for o in &ls {
        let why = o
            .damaged
            .as_deref()
            .unwrap_or_else(|| panic!("{o:?} not quarantined"));
        assert!(why.contains("overlaps"), "{why}");
    }
    assert!(!pool.check_report().ok());
}

/// One flipped bit in the root pointer of an object's current directory
/// record quarantines the object. Its frames stay reserved: repair zeroes
/// none of them and later writes take none, so restoring the bit gives
/// the object back whole.
#[test]
fn a_flipped_root_pointer_loses_nothing_to_repair_or_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let data = {
        let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
        pool.open_object("obj", Perm::Read, Some(KEY))
            .unwrap()
            .read_all()
            .unwrap()
    };
    let (which, _) = current(&path, 0);
    let at = record_offset(0, which) as u64 + 16;
    flip(&path, at, 0x01);
    {
        let pool = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap();
        let e = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap_err();
        assert!(matches!(e, PmoError::Quarantined { .. }), "{e}");
        let r = pool.repair().unwrap();
        assert_eq!(r.quarantined.len(), 1, "{r:?}");
        // Writes fill most of the free frames.
        let free = pool.info().free_frames;
        let pages = free * 3 / 5;
        pool.pcreate_with("filler", pages * PAGE as u64, None, FAST)
            .unwrap();
        let h = pool.open_object("filler", Perm::Write, None).unwrap();
        for i in 0..pages as usize {
            h.stage(i, &[0xEE; PAGE]).unwrap();
        }
        h.psync().unwrap();
    }
    flip(&path, at, 0x01);
    let pool = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap();
    let back = pool
        .open_object("obj", Perm::Read, Some(KEY))
        .unwrap()
        .read_all()
        .unwrap();
    assert!(back == data, "obj's data did not survive");
    assert!(pool.verify("obj", Some(KEY)).unwrap().ok());
}

fn store_epoch(dir: &Path, path: &Path, slot: usize) -> u64 {
    let store = nvmos_pmo::state::StateStore::open(&dir.join("state")).unwrap();
    store.load(pool_id(path)).unwrap().slots[&slot].epoch
}

/// Deferred records are group-committed at most once per `state_gap`:
/// the psyncs in between share a write. Neither `sync_state` nor the
/// open's end waits out the gap (here an hour: a wait would fail the
/// deadline below); each leaves every record handed so far in the store.
#[test]
fn the_gap_between_deferred_writes_is_skipped_by_sync_and_by_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let (_, before) = current(&path, 0);
    let opts = PoolOptions {
        state_gap: std::time::Duration::from_secs(3600),
        ..with_state(dir.path())
    };
    let (done, finished) = std::sync::mpsc::channel();
    let (state, file) = (dir.path().to_owned(), path.clone());
    std::thread::spawn(move || {
        let pool = Pool::open_with(&file, Access::ReadWrite, opts).unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        for round in 0..3u8 {
            h.stage(0, &[round; PAGE]).unwrap();
            h.psync().unwrap();
        }
        pool.sync_state().unwrap();
        let synced = store_epoch(&state, &file, 0);
        for round in 3..5u8 {
            h.stage(0, &[round; PAGE]).unwrap();
            h.psync().unwrap();
        }
        drop(h);
        drop(pool);
        done.send((synced, store_epoch(&state, &file, 0))).unwrap();
    });
    let (synced, ended) = finished
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("sync_state and the open's end return without waiting out the gap");
    assert_eq!(synced, before.seq + 3);
    assert_eq!(ended, before.seq + 5);
}

/// Deferred records (the default): psync returns before its record is in
/// the store; `sync_state` waits for it, and a rollback past it is then
/// refused with the open still running, as it is after the open ends.
/// Every psync: the record is in the store when psync returns.
#[test]
fn deferred_records_protect_once_synced_and_every_psync_at_once() {
    use nvmos_pmo::StateCommit;
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let (_, before) = current(&path, 0);
    let snapshot = std::fs::read(&path).unwrap();
    let pool = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap();
    let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
    for round in 0..3u8 {
        h.stage(0, &[round; PAGE]).unwrap();
        h.psync().unwrap();
    }
    pool.sync_state().unwrap();
    assert_eq!(store_epoch(dir.path(), &path, 0), before.seq + 3);
    // The pool is still open (its writer and committer alive): a copy of
    // it as it was is refused.
    let copy = dir.path().join("copy");
    std::fs::write(&copy, &snapshot).unwrap();
    std::fs::copy(&copy, &path).unwrap();
    let e = Pool::open_with(&path, Access::ReadOnly, with_state(dir.path())).unwrap_err();
    assert!(
        e.to_string().contains(&format!(
            "state store has epoch {}, the pool {}",
            before.seq + 3,
            before.seq
        )),
        "{e}"
    );
    drop(h);
    drop(pool);

    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let (_, before) = current(&path, 0);
    let opts = PoolOptions {
        state_commit: StateCommit::EveryPsync,
        ..with_state(dir.path())
    };
    let pool = Pool::open_with(&path, Access::ReadWrite, opts).unwrap();
    let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
    for round in 0..2u8 {
        h.stage(0, &[round; PAGE]).unwrap();
        h.psync().unwrap();
        assert_eq!(
            store_epoch(dir.path(), &path, 0),
            before.seq + 1 + round as u64
        );
    }
}

/// A protected pool open for writing, with "plain" attached for writing
/// and psynced once (its committer thread started).
fn psynced_writer() -> (tempfile::TempDir, PathBuf, Pool, nvmos_pmo::ObjectHandle) {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(dir.path());
    let pool = Pool::open_with(&path, Access::ReadWrite, with_state(dir.path())).unwrap();
    let h = pool.open_object("plain", Perm::Write, None).unwrap();
    h.stage(0, &[1; PAGE]).unwrap();
    h.psync().unwrap();
    (dir, path, pool, h)
}

/// A deferred record that cannot be written fails `sync_state` and every
/// later psync of the open, naming the store's file: nothing goes on
/// unprotected in silence.
#[test]
fn a_failed_deferred_record_fails_the_open_closed() {
    let (dir, path, pool, h) = psynced_writer();
    pool.sync_state().unwrap();
    // The store's file becomes a folder that cannot be read or replaced.
    let record = dir
        .path()
        .join("state")
        .join(format!("{:016x}.json", pool_id(&path)));
    std::fs::remove_file(&record).unwrap();
    std::fs::create_dir_all(record.join("in-the-way")).unwrap();
    h.stage(0, &[2; PAGE]).unwrap();
    h.psync().unwrap();
    let e = pool.sync_state().unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, PmoError::State { .. }), "{text}");
    assert!(
        text.contains("a deferred record could not be written"),
        "{text}"
    );
    assert!(text.contains(&record.display().to_string()), "{text}");
    h.stage(0, &[3; PAGE]).unwrap();
    let e = h.psync().unwrap_err();
    assert!(matches!(e, PmoError::State { .. }), "{e}");
    std::fs::remove_dir_all(&record).unwrap();
}

/// A child made by `fork` has the pool's open but not its committer
/// thread: waiting there for deferred records is refused (it would never
/// end), and the parent's open is unaffected.
#[test]
fn a_forked_child_is_refused_the_parents_deferred_records() {
    let (_dir, _path, pool, _writer) = psynced_writer();
    // SAFETY: the child only calls sync_state, which refuses before it
    // takes any lock, then leaves with _exit.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        let code = match pool.sync_state() {
            Err(e) if e.to_string().contains("used here after a fork") => 0,
            _ => 1,
        };
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "status {status}"
    );
    pool.sync_state().unwrap();
}
