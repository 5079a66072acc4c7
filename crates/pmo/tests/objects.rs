//! The pool and its objects: round trips across reopening, the allocator
//! rebuilt from the directory, tampering detected, bad input refused with
//! nothing changed.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use nvmos_pmo::layout::{record_offset, Record, PAGE, RECORD};
use nvmos_pmo::{Access, KdfParams, PageBacking, Perm, PmoError, Pool};

const KEY: &[u8] = b"correct horse battery staple";
const FAST: KdfParams = KdfParams::INSECURE_FAST;

fn pool_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("pool")
}

fn page_of(seed: u64, page: usize) -> Vec<u8> {
    let mut v = vec![0u8; PAGE];
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (page as u64 + 1);
    for chunk in v.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    v
}

fn file_bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

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

/// A pool with one encrypted object "obj" of `pages` pages, pages
/// 0..written holding `page_of(1, i)`, psynced; returns the path.
fn setup(dir: &tempfile::TempDir, pages: usize, written: usize) -> PathBuf {
    let path = pool_path(dir);
    let pool = Pool::create(&path, 4 << 20).unwrap();
    pool.pcreate_with("obj", (pages * PAGE) as u64, Some(KEY), FAST)
        .unwrap();
    let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
    for i in 0..written {
        h.stage(i, &page_of(1, i)).unwrap();
    }
    h.psync().unwrap();
    path
}

#[test]
fn round_trip_across_reopen_with_allocator_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let path = pool_path(&dir);
    let (free_before_close, base_a);
    {
        let pool = Pool::create(&path, 8 << 20).unwrap();
        let a = pool.pcreate_with("a", 300 * 4096, Some(KEY), FAST).unwrap();
        let b = pool.pcreate_with("b", 10_000, None, FAST).unwrap();
        assert!(a.encrypted && !b.encrypted);
        assert_eq!(b.size, 3 * 4096, "size rounds up to whole pages");
        assert_eq!(a.base_address % (2 << 20), 0);
        assert!(
            b.base_address >= a.base_address + a.size,
            "address ranges do not overlap"
        );
        base_a = a.base_address;
        let ha = pool.open_object("a", Perm::Write, Some(KEY)).unwrap();
        let hb = pool.open_object("b", Perm::Write, None).unwrap();
        assert!(ha.encrypted() && !hb.encrypted());
        assert_eq!(ha.base_address(), base_a as usize);
        for i in (0..300).step_by(7) {
            ha.stage(i, &page_of(2, i)).unwrap();
        }
        hb.write_at(5000, b"plain text").unwrap();
        // Staged is not committed: readers still see zeros.
        let mut buf = vec![1u8; PAGE];
        ha.read(7, &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 0));
        ha.psync().unwrap();
        hb.psync().unwrap();
        ha.read(7, &mut buf).unwrap();
        assert_eq!(buf, page_of(2, 7));
        // Ciphertext at rest is not the plaintext.
        let (frame, _) = ha.page_location(7).unwrap();
        assert_ne!(
            read_at(&path, frame.unwrap() * PAGE as u64, PAGE),
            page_of(2, 7)
        );
        pool.check().unwrap();
        free_before_close = pool.info().free_frames;
    }
    let pool = Pool::open(&path, Access::ReadWrite).unwrap();
    pool.check().unwrap();
    assert_eq!(pool.info().free_frames, free_before_close);
    let names: Vec<_> = pool.list().into_iter().map(|o| o.name).collect();
    assert_eq!(names, ["a", "b"]);
    let ha = pool.open_object("a", Perm::Read, Some(KEY)).unwrap();
    assert_eq!(
        ha.base_address(),
        base_a as usize,
        "same address every attach"
    );
    let all = ha.read_all().unwrap();
    for i in 0..300 {
        let want = if i % 7 == 0 {
            page_of(2, i)
        } else {
            vec![0; PAGE]
        };
        assert_eq!(&all[i * PAGE..(i + 1) * PAGE], &want[..], "page {i}");
    }
    let hb = pool.open_object("b", Perm::Read, None).unwrap();
    assert_eq!(&hb.read_all().unwrap()[5000..5010], b"plain text");
    let report = pool.verify("a", Some(KEY)).unwrap();
    assert!(report.ok());
    assert_eq!(report.pages_written, 300usize.div_ceil(7));
    drop((ha, hb));
    // pdestroy gives every frame back.
    let before = pool.info().free_frames;
    pool.pdestroy("a", Some(KEY)).unwrap();
    assert!(pool.info().free_frames > before + 40);
    pool.check().unwrap();
    assert!(matches!(
        pool.open_object("a", Perm::Read, Some(KEY)),
        Err(PmoError::UnknownObject { .. })
    ));
    drop(pool);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    assert_eq!(pool.list().len(), 1);
    pool.check().unwrap();
}

#[test]
fn overwrites_free_old_versions_and_concurrent_readers_see_committed_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 64, 64);
    let pool = Pool::open(&path, Access::ReadWrite).unwrap();
    let h = std::sync::Arc::new(pool.open_object("obj", Perm::Write, Some(KEY)).unwrap());
    let free0 = pool.info().free_frames;
    std::thread::scope(|s| {
        let reader = h.clone();
        s.spawn(move || {
            let mut buf = vec![0u8; PAGE];
            for round in 0..200 {
                let i = round % 64;
                reader.read_page(i, &mut buf).unwrap();
                // Always a whole committed version, never torn.
                assert!(
                    (1..=6).any(|g| buf == page_of(g, i)),
                    "page {i} is not a committed version"
                );
            }
        });
        for g in 2..=6 {
            for i in 0..64 {
                h.stage(i, &page_of(g, i)).unwrap();
            }
            h.psync().unwrap();
        }
    });
    // Rewriting every page five times leaked nothing.
    assert_eq!(pool.info().free_frames, free0);
    pool.check().unwrap();
}

#[test]
fn tamper_flipped_ciphertext_bit_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 8, 8);
    let frame = {
        let pool = Pool::open(&path, Access::ReadOnly).unwrap();
        let h = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
        h.page_location(5).unwrap().0.unwrap()
    };
    let off = frame * PAGE as u64 + 1234;
    flip(&path, off, 0x10);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let h = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
    let mut buf = vec![0xAAu8; PAGE];
    let err = h.read(5, &mut buf).unwrap_err();
    assert!(matches!(err, PmoError::PageAuth { ref name, page: 5 } if name == "obj"));
    assert!(err.to_string().contains("page 5"), "{err}");
    assert!(buf.iter().all(|&b| b == 0), "no plaintext on failure");
    h.read(4, &mut buf).unwrap();
    let report = pool.verify("obj", Some(KEY)).unwrap();
    assert_eq!(
        report.bad_pages.iter().map(|b| b.0).collect::<Vec<_>>(),
        [5]
    );
}

#[test]
fn tamper_swapped_pages_are_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 8, 8);
    let (f1, f2) = {
        let pool = Pool::open(&path, Access::ReadOnly).unwrap();
        let h = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
        (
            h.page_location(1).unwrap().0.unwrap(),
            h.page_location(2).unwrap().0.unwrap(),
        )
    };
    let p1 = read_at(&path, f1 * PAGE as u64, PAGE);
    let p2 = read_at(&path, f2 * PAGE as u64, PAGE);
    patch(&path, f1 * PAGE as u64, &p2);
    patch(&path, f2 * PAGE as u64, &p1);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let report = pool.verify("obj", Some(KEY)).unwrap();
    assert_eq!(
        report.bad_pages.iter().map(|b| b.0).collect::<Vec<_>>(),
        [1, 2]
    );
}

#[test]
fn tamper_page_moved_to_another_object_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 8, 8);
    {
        let pool = Pool::open(&path, Access::ReadWrite).unwrap();
        pool.pcreate_with("other", 8 * 4096, Some(KEY), FAST)
            .unwrap();
        let h = pool.open_object("other", Perm::Write, Some(KEY)).unwrap();
        h.stage(3, &page_of(9, 3)).unwrap();
        h.psync().unwrap();
    }
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let src = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
    let dst = pool.open_object("other", Perm::Read, Some(KEY)).unwrap();
    let from = src.page_location(3).unwrap().0.unwrap();
    let to = dst.page_location(3).unwrap().0.unwrap();
    drop((src, dst));
    drop(pool);
    patch(
        &path,
        to * PAGE as u64,
        &read_at(&path, from * PAGE as u64, PAGE),
    );
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let dst = pool.open_object("other", Perm::Read, Some(KEY)).unwrap();
    let mut buf = vec![0u8; PAGE];
    assert!(matches!(
        dst.read(3, &mut buf),
        Err(PmoError::PageAuth { page: 3, .. })
    ));
}

#[test]
fn tamper_page_rolled_back_is_detected_with_and_without_its_table_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 8, 8);
    let (old_page, old_table_bytes, new_page_frame, new_table_frame) = {
        let pool = Pool::open(&path, Access::ReadWrite).unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        let (f_old, t_old) = h.page_location(6).unwrap();
        let old_page = read_at(&path, f_old.unwrap() * PAGE as u64, PAGE);
        let old_table = read_at(&path, t_old.unwrap() * PAGE as u64, PAGE);
        h.stage(6, &page_of(7, 6)).unwrap();
        h.psync().unwrap();
        let (f_new, t_new) = h.page_location(6).unwrap();
        (old_page, old_table, f_new.unwrap(), t_new.unwrap())
    };
    // 1. The old ciphertext put back in place of the new one.
    patch(&path, new_page_frame * PAGE as u64, &old_page);
    {
        let pool = Pool::open(&path, Access::ReadOnly).unwrap();
        let h = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
        let mut buf = vec![0u8; PAGE];
        assert!(matches!(
            h.read(6, &mut buf),
            Err(PmoError::PageAuth { page: 6, .. })
        ));
    }
    // 2. And the old page-table page too (old version number, old tag):
    // the root's hash of the table catches it.
    patch(&path, new_table_frame * PAGE as u64, &old_table_bytes);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let err = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap_err();
    assert!(err.to_string().contains("page table 0"), "{err}");
}

fn current_record(path: &Path, slot: usize) -> (usize, Record) {
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

#[test]
fn tamper_whole_object_rolled_back_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 8, 8);
    let (_, old) = current_record(&path, 0);
    {
        let pool = Pool::open(&path, Access::ReadWrite).unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        for i in 0..8 {
            h.stage(i, &page_of(3, i)).unwrap();
        }
        h.psync().unwrap();
    }
    let (which, new) = current_record(&path, 0);
    assert!(new.seq > old.seq);
    // The attacker points the object back at its old (authentic) root and
    // pages; the epoch the pool directory records stays.
    let forged = Record {
        seq: new.seq,
        ..old.clone()
    };
    patch(&path, record_offset(0, which) as u64, &forged.encode());
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let err = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap_err();
    assert!(
        matches!(err, PmoError::RolledBack { root_epoch, pool_epoch, .. } if root_epoch == old.seq && pool_epoch == new.seq),
        "{err}"
    );
    assert!(err.to_string().contains("rolled back"));
}

#[test]
fn tamper_root_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 8, 8);
    let (which, rec) = current_record(&path, 0);
    // Move the object's base address in the root (offset 112 of the blob,
    // after the 8-byte frame count) and fix the unkeyed hash in the record:
    // only the MAC can tell.
    let root_off = rec.root_pfn * PAGE as u64 + 8;
    let base = u64::from_le_bytes(read_at(&path, root_off + 112, 8).try_into().unwrap());
    patch(&path, root_off + 112, &(base + (2 << 20)).to_le_bytes());
    let stored = read_at(&path, rec.root_pfn * PAGE as u64, 8 + rec.root_len as usize);
    use sha2::Digest;
    let sha = sha2::Sha256::digest(&stored);
    let forged = Record {
        root_sha: sha[..16].try_into().unwrap(),
        ..rec
    };
    patch(&path, record_offset(0, which) as u64, &forged.encode());
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let err = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap_err();
    assert!(matches!(err, PmoError::RootAuth { .. }), "{err}");
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 8, 4);
    let before = file_bytes(&path);
    {
        let pool = Pool::open(&path, Access::ReadWrite).unwrap();
        let e = pool
            .open_object("obj", Perm::Write, Some(b"wrong"))
            .unwrap_err();
        assert!(matches!(e, PmoError::WrongKey { .. }), "{e}");
        let e = pool.open_object("obj", Perm::Read, None).unwrap_err();
        assert!(matches!(e, PmoError::KeyRequired { .. }), "{e}");
        let e = pool.open_object("nope", Perm::Read, Some(KEY)).unwrap_err();
        assert!(matches!(e, PmoError::UnknownObject { .. }), "{e}");
        assert!(e.to_string().contains("nope"));
        let e = pool.pcreate_with("zero", 0, Some(KEY), FAST).unwrap_err();
        assert!(matches!(e, PmoError::BadObjectSize { .. }), "{e}");
        let e = pool.pcreate_with("obj", 4096, Some(KEY), FAST).unwrap_err();
        assert!(matches!(e, PmoError::ObjectExists { .. }), "{e}");
        let e = pool.pcreate_with("", 4096, None, FAST).unwrap_err();
        assert!(matches!(e, PmoError::BadName { .. }), "{e}");
        let e = pool.pcreate_with("huge", 1 << 30, None, FAST).unwrap_err();
        assert!(matches!(e, PmoError::PoolFull { .. }), "{e}");
        let e = pool.pdestroy("obj", Some(b"wrong")).unwrap_err();
        assert!(matches!(e, PmoError::WrongKey { .. }), "{e}");
        // Other opens of the pool, for writing or reading, coexist with
        // this one (writers lock per object); what needs the pool alone
        // (repair) is refused while they are open.
        let other = Pool::open(&path, Access::ReadWrite).unwrap();
        let reader = Pool::open(&path, Access::ReadOnly).unwrap();
        let e = pool.repair().unwrap_err();
        assert!(matches!(e, PmoError::PoolBusy { .. }), "{e}");
        drop((other, reader));
        pool.check().unwrap();
    }
    assert!(
        file_bytes(&path) == before,
        "refused calls changed the pool"
    );
    // Attaching twice for writing: refused; the first stays usable, and
    // once it is dropped a new writer may attach.
    {
        let pool = Pool::open(&path, Access::ReadWrite).unwrap();
        let w = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        let e = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap_err();
        assert!(matches!(e, PmoError::AlreadyAttached { .. }), "{e}");
        let e = pool.pdestroy("obj", Some(KEY)).unwrap_err();
        assert!(matches!(e, PmoError::AlreadyAttached { .. }), "{e}");
        let r = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
        let e = r.stage(0, &[0u8; PAGE]).unwrap_err();
        assert!(matches!(e, PmoError::ReadOnly { .. }), "{e}");
        let e = w.stage(8, &[0u8; PAGE]).unwrap_err();
        assert!(matches!(e, PmoError::PageOutOfRange { page: 8, .. }), "{e}");
        let e = w.stage(0, &[0u8; 100]).unwrap_err();
        assert!(matches!(e, PmoError::BadBuffer { len: 100, .. }), "{e}");
        w.stage(0, &page_of(5, 0)).unwrap();
        w.psync().unwrap();
        drop(w);
        let w2 = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        let mut buf = vec![0u8; PAGE];
        w2.read(0, &mut buf).unwrap();
        assert_eq!(buf, page_of(5, 0));
    }
    // A read-only pool refuses writes.
    {
        let pool = Pool::open(&path, Access::ReadOnly).unwrap();
        let e = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap_err();
        assert!(matches!(e, PmoError::PoolReadOnly { .. }), "{e}");
    }
    // Unencrypted objects take no key.
    {
        let pool = Pool::open(&path, Access::ReadWrite).unwrap();
        pool.pcreate_with("plain", 4096, None, FAST).unwrap();
        let e = pool
            .open_object("plain", Perm::Read, Some(KEY))
            .unwrap_err();
        assert!(matches!(e, PmoError::KeyNotExpected { .. }), "{e}");
    }
}

#[test]
fn not_a_pool_truncated_and_missing_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 8, 4);
    let bytes = file_bytes(&path);
    let truncated = dir.path().join("truncated");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let e = Pool::open(&truncated, Access::ReadOnly).unwrap_err();
    assert!(matches!(e, PmoError::Truncated { .. }), "{e}");
    assert!(e.to_string().contains("truncated"));
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![7u8; 1 << 20]).unwrap();
    let e = Pool::open(&junk, Access::ReadOnly).unwrap_err();
    assert!(matches!(e, PmoError::NotAPool { .. }), "{e}");
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let e = Pool::open(&empty, Access::ReadOnly).unwrap_err();
    assert!(matches!(e, PmoError::NotAPool { .. }), "{e}");
    // A flipped bit in the header.
    let flipped = dir.path().join("flipped");
    let mut b = bytes.clone();
    b[20] ^= 1;
    std::fs::write(&flipped, &b).unwrap();
    let e = Pool::open(&flipped, Access::ReadOnly).unwrap_err();
    assert!(e.to_string().contains("checksum"), "{e}");
    let e = Pool::open(&dir.path().join("missing"), Access::ReadOnly).unwrap_err();
    assert!(matches!(e, PmoError::Io { .. }), "{e}");
    let e = Pool::create(&path, 4 << 20).unwrap_err();
    assert!(matches!(e, PmoError::PoolExists { .. }), "{e}");
    let e = Pool::create(&dir.path().join("tiny"), 4096).unwrap_err();
    assert!(matches!(e, PmoError::BadPoolSize { .. }), "{e}");
    assert_eq!(file_bytes(&path), bytes);
}

#[test]
fn torn_record_falls_back_to_the_previous_psync_and_a_flipped_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 8, 8);
    {
        let pool = Pool::open(&path, Access::ReadWrite).unwrap();
        let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
        h.stage(2, &page_of(4, 2)).unwrap();
        h.psync().unwrap();
    }
    let clean = file_bytes(&path);
    // A power cut in mid-write leaves the newest record with a zero
    // sequence word (written first): provably torn, so the previous
    // commit is current, and the fallback is reported.
    let (which, rec) = current_record(&path, 0);
    patch(&path, record_offset(0, which) as u64, &[0; 8]);
    patch(&path, record_offset(0, which) as u64 + 20, &[0xFF; 8]);
    {
        let pool = Pool::open(&path, Access::ReadWrite).unwrap();
        pool.check().unwrap();
        let report = pool.check_report();
        assert!(
            report.notes.iter().any(|n| n.contains("incomplete write")),
            "{report:?}"
        );
        let h = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
        let mut buf = vec![0u8; PAGE];
        h.read(2, &mut buf).unwrap();
        assert_eq!(buf, page_of(1, 2));
    }
    // One flipped bit in the whole current record is not a crash state:
    // the object is quarantined, never silently rolled back.
    std::fs::write(&path, &clean).unwrap();
    flip(&path, record_offset(0, which) as u64 + 57, 0xFF);
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    let e = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "object \"obj\" is quarantined: directory record {which} fails its check (checksum mismatch) and may be the current one (epoch {}, the other record has {}): not a torn write, so the older record is not used (directory slot 0)",
            rec.seq,
            rec.seq - 1
        )
    );
}

#[test]
fn a_frame_reachable_twice_quarantines_the_damaged_claimant_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 8, 8);
    // Copy object 0's current record into slot 1: two records would share
    // every frame. The copy's root names slot 0, so it is the damaged one:
    // quarantined, its claims never handed out; object 0 stays usable.
    let (_, rec) = current_record(&path, 0);
    patch(&path, record_offset(1, 0) as u64, &rec.encode());
    let pool = Pool::open(&path, Access::ReadOnly).unwrap();
    pool.check().unwrap();
    let h = pool.open_object("obj", Perm::Read, Some(KEY)).unwrap();
    assert_eq!(h.read_all().unwrap()[..PAGE], page_of(1, 0)[..]);
    let ls = pool.list();
    assert_eq!(ls.len(), 2);
    let q = ls[1].damaged.as_deref().unwrap();
    assert!(
        q.starts_with("directory record 1 was erased (record 0 has epoch 2, so it held epoch 1)"),
        "{q}"
    );
    assert!(q.contains("frames (first "), "{q}");
    assert!(
        q.ends_with("are also claimed by object \"obj\" (slot 0)"),
        "{q}"
    );
}

#[test]
fn a_batch_stages_as_its_pages_one_by_one_and_a_refused_batch_stages_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = setup(&dir, 64, 64);
    let pool = Pool::open(&path, Access::ReadWrite).unwrap();
    let h = pool.open_object("obj", Perm::Write, Some(KEY)).unwrap();
    let free0 = pool.info().free_frames;
    // A page given twice: the later contents win, the earlier frame goes back.
    let (a, b, c) = (page_of(7, 3), page_of(7, 5), page_of(8, 3));
    h.stage_pages(&[(3, &a), (5, &b), (3, &c)]).unwrap();
    h.psync().unwrap();
    let expect = |i: usize| match i {
        3 => page_of(8, 3),
        5 => page_of(7, 5),
        _ => page_of(1, i),
    };
    let mut buf = vec![0u8; PAGE];
    for i in 0..64 {
        h.read_page(i, &mut buf).unwrap();
        assert!(buf == expect(i), "page {i}");
    }
    assert_eq!(pool.info().free_frames, free0);

    // A page out of range or of the wrong size refuses the whole batch,
    // naming it; what came before it in the batch is not staged.
    let short = vec![0u8; 100];
    let e = h.stage_pages(&[(1, &a), (64, &b)]).unwrap_err();
    assert!(
        matches!(e, PmoError::PageOutOfRange { page: 64, .. }),
        "{e}"
    );
    let e = h.stage_pages(&[(1, &a), (2, &short)]).unwrap_err();
    assert!(matches!(e, PmoError::BadBuffer { page: 2, .. }), "{e}");
    h.psync().unwrap();
    for i in 0..64 {
        h.read_page(i, &mut buf).unwrap();
        assert!(buf == expect(i), "page {i} after refused batches");
    }

    pool.check().unwrap();
}
