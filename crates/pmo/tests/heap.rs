//! The heap inside a real PMO: allocations survive detach and re-attach at
//! any mode, are durable exactly when psync commits (a drop without psync
//! is a crash), and iterate by type; blocks are addressed with `POff`.

use nvmos_pmo::heap::{Heap, HeapError};
use nvmos_pmo::{KdfParams, Mode, Perm, Pool};

const KEY: &[u8] = b"a long passphrase";

fn pool() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pool");
    let pool = Pool::create(&path, 8 << 20).unwrap();
    pool.pcreate_with("heap", 256 << 10, Some(KEY), KdfParams::INSECURE_FAST)
        .unwrap();
    (dir, path)
}

#[test]
fn allocations_are_durable_exactly_when_psync_commits() {
    let (_dir, path) = pool();
    let pool = Pool::open(&path, nvmos_pmo::Access::ReadWrite).unwrap();
    let (kept, node_off);
    {
        let mut a = pool
            .attach("heap", Perm::Write, Some(KEY), Mode::DramCache)
            .unwrap();
        let mut heap = Heap::open_or_format(a.as_mut_slice().unwrap()).unwrap();
        let root = heap.root(64).unwrap();
        heap.bytes_mut(root).unwrap()[..8].copy_from_slice(&42u64.to_le_bytes());
        kept = (0..50)
            .map(|i| {
                let off = heap.palloc(64 + i * 10, 1).unwrap();
                heap.bytes_mut(off).unwrap()[0] = i as u8;
                off
            })
            .collect::<Vec<_>>();
        node_off = heap.palloc(4000, 2).unwrap();
        heap.check().unwrap();
        a.psync().unwrap();
        // After the psync: more allocations and a free, then a crash
        // (drop without psync).
        let mut heap = Heap::open(a.as_mut_slice().unwrap()).unwrap();
        for _ in 0..20 {
            heap.palloc(128, 3).unwrap();
        }
        heap.pfree(node_off).unwrap();
        drop(a);
    }
    let a = pool
        .attach("heap", Perm::Read, Some(KEY), Mode::DecryptAtFault)
        .unwrap();
    let heap = Heap::open(a.as_slice()).unwrap();
    let stats = heap.check().unwrap();
    assert_eq!(
        stats.allocated_blocks,
        1 + 50 + 1,
        "root, type 1, the type-2 block"
    );
    let ones: Vec<_> = heap.blocks_of_type(1).map(Result::unwrap).collect();
    assert_eq!(ones.iter().map(|b| b.offset).collect::<Vec<_>>(), kept);
    for (i, b) in ones.iter().enumerate() {
        assert_eq!(heap.bytes(b.offset).unwrap()[0], i as u8);
    }
    assert_eq!(heap.blocks_of_type(3).count(), 0, "never psynced");
    assert_eq!(
        heap.block(node_off).unwrap().type_num,
        2,
        "its free was never psynced"
    );
    let root = heap.root_block().unwrap();
    assert_eq!(&heap.bytes(root.offset).unwrap()[..8], &42u64.to_le_bytes());
    // A POff to a heap block resolves through the attachment.
    let p = a.poff::<u64>(root.offset as usize);
    assert_eq!(a.get_off(p).unwrap(), 42);
}

#[test]
fn a_written_object_is_never_formatted_over() {
    let (_dir, path) = pool();
    let pool = Pool::open(&path, nvmos_pmo::Access::ReadWrite).unwrap();
    let mut a = pool
        .attach("heap", Perm::Write, Some(KEY), Mode::DecryptAtFault)
        .unwrap();
    a.as_mut_slice().unwrap()[10] = 1;
    assert!(matches!(
        Heap::open_or_format(a.as_mut_slice().unwrap()),
        Err(HeapError::NotFormatted)
    ));
    assert_eq!(a.as_slice()[10], 1);
}
