//! The kernel's iBuddy core (`kernel/policy/ibuddy_core.c`, compiled for
//! user space by this crate's build script) against nvmos-frames' IBuddy
//! and PerCpu with the bypass policy, on the same request sequences.
//!
//! By design the two choose the same frames: one buddy space, least
//! recently freed first, the same next-fit exact-fit block search, the
//! same bypass-list discipline. So the test demands the same pfn for every
//! allocation, not just the same wear distribution. (In the kernel the
//! space is per zone, while nvmos' IBuddy cuts memory into one space per
//! CPU; the test builds IBuddy with one space to compare like with like.)

use nvmos_frames::{FrameAllocator, IBuddy, MigrateType, Order, PcpPolicy, PerCpu, Request, Zone};
use nvmos_kernel::policy_core::CoreSpace;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

type Lock = parking_lot::RawMutex;

/// Drive both with `steps` random requests; return how many allocations
/// were compared.
fn compare(
    reference: &dyn FrameAllocator,
    core: &mut CoreSpace,
    frames: u64,
    seed: u64,
    steps: usize,
) -> usize {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut live: Vec<(u64, u8)> = Vec::new();
    let mut live_frames = 0u64;
    let mut compared = 0;
    for step in 0..steps {
        // Stay below half full so neither side runs out (nvmos' PerCpu
        // drains its lists on OOM, the kernel's composition does not).
        let free = !live.is_empty() && (live_frames > frames / 2 || rng.gen_bool(0.45));
        if free {
            let i = rng.gen_range(0..live.len());
            let (pfn, order) = live.swap_remove(i);
            live_frames -= 1 << order;
            let req = Request::new(Order::new(order).unwrap(), 0, MigrateType::Movable);
            reference
                .free(nvmos_frames::Pfn(pfn), req)
                .unwrap_or_else(|e| panic!("step {step}: reference refused free of {pfn:#x}: {e}"));
            core.free(pfn, order).unwrap();
        } else {
            let order: u8 = match rng.gen_range(0..100) {
                0..=79 => 0,
                80..=89 => 1,
                90..=95 => 2,
                96..=98 => 3,
                _ => rng.gen_range(4..=7),
            };
            let req = Request::new(Order::new(order).unwrap(), 0, MigrateType::Movable);
            let want = reference.alloc(req).ok().map(|p| p.0);
            let got = core.alloc(order).unwrap();
            assert_eq!(
                got, want,
                "step {step} (seed {seed}): order-{order} allocation: kernel core chose {got:x?}, nvmos-frames {want:x?}"
            );
            compared += 1;
            if let Some(pfn) = got {
                live.push((pfn, order));
                live_frames += 1 << order;
            }
        }
    }
    reference.validate().unwrap();
    compared
}

/// A zone whose edges are not aligned, so edge blocks are partial.
const START: u64 = 0x105;
const END: u64 = 0x105 + 6000;

#[test]
fn ibuddy_core_chooses_the_same_frames_as_nvmos_ibuddy() {
    for seed in 0..4 {
        let reference = IBuddy::<Lock>::with_spaces(&[Zone::new(START, END)], 1, 1).unwrap();
        assert_eq!(reference.spaces(), 1);
        let mut core = CoreSpace::new(START, END, 0).unwrap();
        let n = compare(&reference, &mut core, END - START, seed, 20_000);
        assert!(n > 5_000);
        assert_eq!(core.nr_free(), reference.stats().free_frames);
    }
}

#[test]
fn lazy_core_chooses_the_same_frames_as_nvmos_lis1_and_lis31() {
    // The kernel lets a free that finds the list full straight through, as
    // the seed's Algorithm 2 does: `Bypass` with batch 1. (nvmos' LIS_31
    // constant gathers 31 such overflow frees per CPU and gives them back
    // sorted, a user-space speed-up the kernel does not copy.)
    assert_eq!(PcpPolicy::LIS_1, PcpPolicy::Bypass { cap: 1, batch: 1 });
    for cap in [1, 31] {
        let policy = PcpPolicy::Bypass { cap, batch: 1 };
        for seed in 10..13 {
            let inner = IBuddy::<Lock>::with_spaces(&[Zone::new(START, END)], 1, 1).unwrap();
            let reference = PerCpu::<_, Lock>::new(inner, policy).unwrap();
            let mut core = CoreSpace::new(START, END, cap).unwrap();
            let n = compare(&reference, &mut core, END - START, seed, 20_000);
            assert!(n > 5_000, "cap {cap}");
        }
    }
}

#[test]
fn a_whole_space_coalesces_back_to_its_largest_blocks() {
    // Allocate every frame singly, free them in a shuffled order: the
    // bitmap must climb back to order 10 blocks, as the Rust model does.
    let mut core = CoreSpace::new(0, 4096, 0).unwrap();
    let mut all: Vec<u64> = (0..4096).map(|_| core.alloc(0).unwrap().unwrap()).collect();
    assert_eq!(core.alloc(0).unwrap(), None);
    assert_eq!(core.next_level(), -1);
    let mut rng = SmallRng::seed_from_u64(7);
    for i in (1..all.len()).rev() {
        all.swap(i, rng.gen_range(0..=i));
    }
    for pfn in all {
        core.free(pfn, 0).unwrap();
    }
    assert_eq!(core.next_level(), 10);
    // 4096 frames: 2048 + 1024 + ... + 4 bits set above order 0.
    assert_eq!(
        core.coalesces(),
        (1..=10).map(|k| 4096u64 >> k).sum::<u64>()
    );
    let blocks: Vec<u64> = (0..4).map(|_| core.alloc(10).unwrap().unwrap()).collect();
    let mut sorted = blocks.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [0, 1024, 2048, 3072]);
    assert_eq!(core.alloc(0).unwrap(), None);
}

#[test]
fn the_wrapper_refuses_what_the_kernel_would_never_pass() {
    assert!(CoreSpace::new(10, 10, 0).is_err());
    assert!(CoreSpace::new(0, 10, 32).is_err());
    let mut core = CoreSpace::new(0, 64, 0).unwrap();
    assert!(core.alloc(11).is_err());
    let pfn = core.alloc(1).unwrap().unwrap();
    assert!(core.free(pfn, 0).is_err(), "wrong order");
    core.free(pfn, 1).unwrap();
    assert!(core.free(pfn, 1).is_err(), "double free");
}
