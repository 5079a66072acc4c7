//! What the kernel's policy cores (`kernel/policy/*.c`) add for the kernel's
//! own checks: a free of a block outside the space, misaligned, or with a
//! frame already free is refused and changes nothing; a free frame can be
//! taken out (to hand it back to Linux's buddy lists for isolation,
//! compaction or memory failure); the per-order free-block counts are the
//! ones a buddy free list would hold. M3 also refuses a block freed at
//! another order than it was handed out with, unless the kernel loosened
//! it first, and takes frames it never handed out back at any order.

use nvmos_kernel::policy_core::{BankRole, CoreAdaptive, CoreFree, CoreM3, CoreSpace, M3Config};

/// Every observable of an iBuddy space, to show a refused free left it alone.
fn ib_state(s: &CoreSpace, start: u64, end: u64) -> (u64, i32, Vec<bool>, Vec<u64>) {
    (
        s.nr_free(),
        s.next_level(),
        (start..end).map(|p| s.frame_free(p)).collect(),
        (0..=10).map(|o| s.free_blocks(o)).collect(),
    )
}

#[test]
fn ibuddy_core_refuses_double_and_outside_frees_without_a_change() {
    let (start, end) = (0x1000, 0x1000 + 4096);
    let mut s = CoreSpace::new(start, end, 0).unwrap();
    let a = s.alloc(0).unwrap().unwrap();
    let b = s.alloc(2).unwrap().unwrap();
    let before = ib_state(&s, start, end);
    // A frame that is free already, and a block with one free frame in it.
    let free_one = (start..end).find(|&p| s.frame_free(p)).unwrap();
    assert_eq!(s.free_raw(free_one, 0), CoreFree::Double);
    assert_eq!(
        s.free_raw(b & !7, 3),
        CoreFree::Double,
        "half of it is free"
    );
    // Outside the space, misaligned, past its end, too large.
    assert_eq!(s.free_raw(start - 1, 0), CoreFree::Outside);
    assert_eq!(s.free_raw(end, 0), CoreFree::Outside);
    assert_eq!(s.free_raw(b + 1, 2), CoreFree::Outside);
    assert_eq!(s.free_raw(end - 2, 2), CoreFree::Outside);
    assert_eq!(s.free_raw(start, 11), CoreFree::Outside);
    assert_eq!(
        ib_state(&s, start, end),
        before,
        "a refused free changed the space"
    );
    // The real frees are taken, and a second free of each is refused.
    assert_eq!(s.free_raw(a, 0), CoreFree::Ok);
    assert_eq!(s.free_raw(b, 2), CoreFree::Ok);
    assert_eq!(s.free_raw(a, 0), CoreFree::Double);
    assert_eq!(s.free_raw(b, 2), CoreFree::Double);
    assert_eq!(s.nr_free(), 4096);
    assert_eq!(s.next_level(), 10);
}

#[test]
fn ibuddy_core_hands_out_single_free_frames_and_counts_blocks_as_buddy_would() {
    let (start, end) = (0, 4096);
    let mut s = CoreSpace::new(start, end, 0).unwrap();
    // Whole: four free blocks of order 10, nothing below.
    assert_eq!(s.free_blocks(10), 4);
    assert!((0..10).all(|o| s.free_blocks(o) == 0));
    // Take frame 5 out: the order-10 block at 0 breaks into 0..4 (order 2),
    // 4 (order 0), 6..8 (order 1), 8..16 (order 3), ... up to 512..1024.
    assert!(s.take_frame(5));
    assert!(!s.take_frame(5), "not free any more");
    assert!(!s.take_frame(end), "outside");
    assert!(!s.frame_free(5));
    assert_eq!(s.nr_free(), 4095);
    let blocks: Vec<u64> = (0..=10).map(|o| s.free_blocks(o)).collect();
    assert_eq!(blocks, [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3]);
    let frames: u64 = blocks.iter().enumerate().map(|(o, n)| n << o).sum();
    assert_eq!(frames, s.nr_free());
    // Allocation never hands out the frame taken out; giving it back heals.
    let mut got = Vec::new();
    while let Some(p) = s.alloc(0).unwrap() {
        assert_ne!(p, 5);
        got.push(p);
    }
    assert_eq!(got.len(), 4095);
    assert_eq!(s.free_raw(5, 0), CoreFree::Ok);
    for p in got {
        s.free(p, 0).unwrap();
    }
    assert_eq!(s.free_blocks(10), 4);
    assert_eq!(s.next_level(), 10);
}

#[test]
fn adaptive_core_refuses_double_and_outside_frees_and_hands_blocks_out() {
    const BANK: u64 = 1024;
    let mut c = CoreAdaptive::new(0, 4 * BANK, BANK, 0..0).unwrap();
    let snapshot = |c: &CoreAdaptive| {
        (
            c.banks(),
            c.max_free_order(),
            (0..=10).map(|o| c.free_blocks(o)).collect::<Vec<_>>(),
        )
    };
    let p = c.alloc(0, false).unwrap().unwrap();
    let before = snapshot(&c);
    assert_eq!(c.free_raw(p ^ 1, 0), CoreFree::Double, "its buddy is free");
    assert_eq!(
        c.free_raw(p & !1023, 10),
        CoreFree::Double,
        "most of it is free"
    );
    assert_eq!(c.free_raw(4 * BANK, 0), CoreFree::Outside);
    assert_eq!(c.free_raw(p | 1, 1), CoreFree::Outside, "misaligned");
    assert_eq!(c.free_raw(0, 11), CoreFree::Outside);
    assert_eq!(snapshot(&c), before, "a refused free changed the core");
    assert_eq!(c.free_raw(p, 0), CoreFree::Ok);
    assert_eq!(c.free_raw(p, 0), CoreFree::Double);
    // All offline again; take the block holding frame 5 out of bank 0.
    assert!(c.banks().iter().all(|b| b.1 == BankRole::Offline));
    assert_eq!(c.free_block_of(5), Some((0, 10)));
    assert_eq!(c.take_block_of(5), Some((0, 10)));
    assert_eq!(c.free_block_of(5), None);
    assert_eq!(
        c.banks()[0],
        (0, BankRole::Kernel),
        "its bank is in use now"
    );
    assert_eq!(c.free_blocks(10), 3);
    assert_eq!(c.stats().taken_frames, 1024);
    // Handed back, the bank empties and goes offline.
    c.free(0, 10).unwrap();
    assert_eq!(c.banks()[0], (BANK, BankRole::Offline));
    assert_eq!(c.free_blocks(10), 4);
}

/// Every observable of an M3 core, to show a refused free left it alone.
fn m3_state(c: &CoreM3, start: u64, end: u64) -> (u64, i32, Vec<bool>, Vec<u64>, Vec<u32>) {
    (
        c.free_frames(),
        c.max_free_order(),
        (start..end).map(|p| c.frame_free(p)).collect(),
        (0..=10).map(|o| c.free_blocks(o)).collect(),
        (0..8).map(|col| c.colour_free(col)).collect(),
    )
}

#[test]
fn m3_core_refuses_bad_frees_unchanged_and_takes_loose_frames_at_any_order() {
    let (start, end) = (0x1000, 0x1000 + 4096);
    let config = M3Config {
        cpus: 2,
        colours: 8,
        shift: 1,
        partition: true,
        seed: 5,
    };
    // Frames 0x1800..0x1900 in use when the zone is handed over.
    let mut c = CoreM3::new(start, end, config, 0x1800..0x1900).unwrap();
    assert_eq!(c.free_frames(), 4096 - 256);
    assert_eq!(c.max_free_order(), 10);
    assert_eq!(c.free_blocks(10), 3, "the block at 0x1800 is partly in use");
    let a = c.alloc(0, 1).unwrap().unwrap();
    assert!(c.colours_of(1).contains(&(((a >> 1) & 7) as u32)), "{a:#x}");
    let b = c.alloc(2, 0).unwrap().unwrap();
    assert_eq!(b & 3, 0);
    let before = m3_state(&c, start, end);
    // A free frame, a block with a free frame in it.
    let free_one = (start..end).find(|&p| c.frame_free(p)).unwrap();
    assert_eq!(c.free_raw(free_one, 0), CoreFree::Double);
    assert_eq!(
        c.free_raw(0x1800, 9),
        CoreFree::Double,
        "half of it is free"
    );
    // Outside, misaligned, past the end, too large.
    assert_eq!(c.free_raw(start - 1, 0), CoreFree::Outside);
    assert_eq!(c.free_raw(end, 0), CoreFree::Outside);
    assert_eq!(c.free_raw(0x1801, 1), CoreFree::Outside);
    assert_eq!(c.free_raw(end - 2, 2), CoreFree::Outside);
    assert_eq!(c.free_raw(start, 11), CoreFree::Outside);
    // Handed out at order 2: not at 0 or 1, nor a tail of it.
    assert_eq!(c.free_raw(b, 0), CoreFree::Outside);
    assert_eq!(c.free_raw(b, 1), CoreFree::Outside);
    assert_eq!(c.free_raw(b + 1, 0), CoreFree::Outside);
    // Not taken out while a frame of it is in use.
    assert!(!c.take_block(0x1800, 9));
    assert!(!c.loosen(free_one, 0), "a free frame is not loosened");
    assert_eq!(
        m3_state(&c, start, end),
        before,
        "a refused call changed the core"
    );
    assert!(c.free(b, 1).is_err(), "the wrapper refuses it before C");
    // Frames in use at hand-over: freed at any order, once.
    assert_eq!(c.free_raw(0x1800, 7), CoreFree::Ok);
    assert_eq!(c.free_raw(0x1880, 0), CoreFree::Ok);
    assert_eq!(c.free_raw(0x1880, 0), CoreFree::Double);
    assert_eq!(c.free_raw(0x1882, 1), CoreFree::Ok);
    assert_eq!(c.free_raw(0x1884, 2), CoreFree::Ok);
    assert_eq!(c.free_raw(0x1881, 0), CoreFree::Ok);
    for p in 0x1888..0x1900 {
        assert_eq!(c.free_raw(p, 0), CoreFree::Ok, "{p:#x}");
    }
    // A piece of an allocated block: loosened first, as the kernel frees
    // the pages of a split block one by one.
    assert!(c.loosen(b + 1, 0));
    assert_eq!(c.stats().loosened_blocks, 1);
    for p in b..b + 4 {
        assert_eq!(c.free_raw(p, 0), CoreFree::Ok, "{p:#x}");
    }
    assert_eq!(c.free_raw(a, 0), CoreFree::Ok);
    assert_eq!(c.free_raw(a, 0), CoreFree::Double);
    assert_eq!(c.free_frames(), 4096);
    assert_eq!(c.free_blocks(10), 4);
    assert!((0..10).all(|o| c.free_blocks(o) == 0));
    // An order-10 block freed as two order-9 halves (as Linux frees a
    // block above pageblock_order).
    let big = c.alloc(10, 0).unwrap().unwrap();
    assert_eq!(c.free_raw(big, 9), CoreFree::Outside);
    assert!(c.loosen(big, 9));
    assert_eq!(c.free_raw(big, 9), CoreFree::Ok);
    assert_eq!(c.free_raw(big + 512, 9), CoreFree::Ok);
    assert_eq!(c.free_blocks(10), 4);
    // Taken out for the buddy lists: loose, not free, given back at any order.
    assert!(c.take_block(0x1000, 3));
    assert!(!c.frame_free(0x1004));
    assert_eq!(c.free_frames(), 4088);
    assert_eq!(c.max_free_order(), 10);
    assert_eq!(c.free_blocks(3), 1);
    assert_eq!(c.stats().taken_frames, 8);
    assert_eq!(c.free_raw(0x1000, 2), CoreFree::Ok);
    assert_eq!(c.free_raw(0x1004, 2), CoreFree::Ok);
    assert_eq!(c.free_blocks(10), 4);
    // Everything free: no single frame is left; every frame of every
    // colour goes before an allocation fails.
    let mut got = Vec::new();
    while let Some(p) = c.alloc(0, 0).unwrap() {
        got.push(p);
    }
    assert_eq!(got.len(), 4096);
    assert_eq!(c.max_free_order(), -1);
    assert_eq!(c.alloc(1, 1).unwrap(), None);
}
