//! (iBuddy and lazy iBuddy below; Adaptive-Buddy, then M3, at the end of the file.)
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
fn staged_core_chooses_the_same_frames_as_nvmos_lis31_fair() {
    // The kernel's lis31-fair is one CPU's list per zone: nvmos'
    // LIS_31_FAIR over one space, served for one CPU (a gathering of 31).
    assert_eq!(PcpPolicy::LIS_31_FAIR, PcpPolicy::Staged { batch: 31 });
    for seed in 20..24 {
        let inner = IBuddy::<Lock>::with_spaces(&[Zone::new(START, END)], 1, 1).unwrap();
        let reference = PerCpu::<_, Lock>::new(inner, PcpPolicy::LIS_31_FAIR).unwrap();
        let mut core = CoreSpace::new_staged(START, END, 31).unwrap();
        let n = compare(&reference, &mut core, END - START, seed, 20_000);
        assert!(n > 5_000);
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

/// Free a random live block (first frame, order, kernel) in both the
/// reference and the core; the frames freed.
fn free_random_block(
    rng: &mut SmallRng,
    live: &mut Vec<(u64, u8, bool)>,
    reference: &nvmos_frames::BankBuddy<Lock>,
    core: &mut nvmos_kernel::policy_core::CoreAdaptive,
) -> u64 {
    let (pfn, order, kernel) = live.swap_remove(rng.gen_range(0..live.len()));
    let kind = if kernel {
        MigrateType::Unmovable
    } else {
        MigrateType::Movable
    };
    reference
        .free(
            nvmos_frames::Pfn(pfn),
            Request::new(Order::new(order).unwrap(), 0, kind),
        )
        .unwrap();
    core.free(pfn, order).unwrap();
    1 << order
}

/// Adaptive-Buddy: the kernel's core against nvmos-frames' BankBuddy
/// with `BankPolicy::Adaptive` on the same random mix of kernel and user
/// requests. Same design (a buddy system per bank, pools of merged free
/// lists, offline banks taken from each side's end and parked again when
/// empty), so the same pfn for every allocation, and the same free frames
/// and role for every bank at the end.
#[test]
fn adaptive_core_chooses_the_same_frames_and_banks_as_nvmos_adaptive_buddy() {
    use nvmos_frames::{BankBuddy, BankPolicy, BankRole as RustRole};
    use nvmos_kernel::policy_core::{BankRole, CoreAdaptive};
    const BANK: u64 = 1024;
    const START: u64 = 16 * BANK;
    const END: u64 = START + 12 * BANK;
    let mut pools_used = [false; 2];
    for seed in 20..24 {
        let reference =
            BankBuddy::<Lock>::new(&[Zone::new(START, END)], 1, BANK, BankPolicy::Adaptive)
                .unwrap();
        let mut core = CoreAdaptive::new(START, END, BANK, 0..0).unwrap();
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut live: Vec<(u64, u8, bool)> = Vec::new();
        let mut live_frames = 0u64;
        // Phases: fill up to most of memory (both pools grow, the user
        // side falls back into kernel banks when offline banks run out),
        // then drain (banks go offline), then churn.
        for step in 0..30_000 {
            let high = if step < 10_000 { 0.99 } else { 0.5 };
            let free_p = if (10_000..15_000).contains(&step) {
                0.8
            } else {
                0.45
            };
            let free = !live.is_empty()
                && ((live_frames as f64) > high * (END - START) as f64 || rng.gen_bool(free_p));
            if free {
                live_frames -= free_random_block(&mut rng, &mut live, &reference, &mut core);
            } else {
                let order: u8 = match rng.gen_range(0..100) {
                    0..=84 => 0,
                    85..=94 => rng.gen_range(1..=3),
                    _ => rng.gen_range(4..=10),
                };
                let kernel = rng.gen_bool(0.3);
                let kind = match (kernel, rng.gen_bool(0.5)) {
                    (true, true) => MigrateType::Unmovable,
                    (true, false) => MigrateType::Reclaimable,
                    (false, _) => MigrateType::Movable,
                };
                let want = reference
                    .alloc(Request::new(Order::new(order).unwrap(), 0, kind))
                    .ok()
                    .map(|p| p.0);
                let got = core.alloc(order, kernel).unwrap();
                assert_eq!(
                    got, want,
                    "step {step} (seed {seed}): order-{order} {kind:?}: kernel core {got:x?}, nvmos-frames {want:x?}"
                );
                if let Some(pfn) = got {
                    live.push((pfn, order, kernel));
                    live_frames += 1 << order;
                    pools_used[usize::from(!kernel)] = true;
                }
            }
        }
        reference.validate().unwrap();
        let usage = reference.bank_usage();
        let banks = core.banks();
        assert_eq!(banks.len(), usage.len());
        for (b, ((free, role), u)) in banks.iter().zip(&usage).enumerate() {
            let want = match u.role {
                RustRole::Offline => BankRole::Offline,
                RustRole::Kernel => BankRole::Kernel,
                RustRole::User => BankRole::User,
            };
            assert_eq!((*free, *role), (u.free, want), "seed {seed} bank {b}");
        }
        let s = core.stats();
        assert!(s.bank_adds > 0 && s.bank_releases > 0, "{s:?}");
        assert!(s.fallback_frames > 0, "the fill never fell back: {s:?}");
    }
    assert_eq!(pools_used, [true, true]);
}

/// What the kernel adds to the reference: a zone handed over with frames
/// in use puts their banks in the kernel pool, a bank crossing the zone's
/// edge never goes offline, and banks empty of kernel pages are taken by
/// user requests from the high end.
#[test]
fn adaptive_core_starts_from_a_zone_in_use_as_the_kernel_hands_it_over() {
    use nvmos_kernel::policy_core::{BankRole, CoreAdaptive};
    const BANK: u64 = 1024;
    // A zone from 0x105 (bank 0 partial) to 8 banks; frames of bank 2 in use.
    let used = 2 * BANK + 100..2 * BANK + 300;
    let mut core = CoreAdaptive::new(0x105, 8 * BANK, BANK, used.clone()).unwrap();
    let roles = |c: &CoreAdaptive| c.banks().iter().map(|b| b.1).collect::<Vec<_>>();
    use BankRole::*;
    assert_eq!(
        roles(&core),
        [Kernel, Offline, Kernel, Offline, Offline, Offline, Offline, Offline]
    );
    // Kernel requests fill the kernel pool's banks before taking bank 1.
    let k: Vec<u64> = (0..10)
        .map(|_| core.alloc(0, true).unwrap().unwrap())
        .collect();
    assert!(
        k.iter()
            .all(|&p| p < BANK || (2 * BANK..3 * BANK).contains(&p)),
        "{k:x?}"
    );
    // User requests take the highest bank.
    let u = core.alloc(0, false).unwrap().unwrap();
    assert!((7 * BANK..8 * BANK).contains(&u), "{u:#x}");
    assert_eq!(roles(&core)[7], User);
    core.free(u, 0).unwrap();
    assert_eq!(roles(&core)[7], Offline, "an emptied bank goes offline");
    // Bank 2 empties once its boot-time frames are freed: offline.
    for &p in &k {
        core.free(p, 0).unwrap();
    }
    for pfn in used {
        core.free_seeded(pfn).unwrap();
    }
    assert!(core.free_seeded(2 * BANK + 100).is_err(), "freed twice");
    assert!(core.free_seeded(8 * BANK).is_err(), "outside");
    assert_eq!(roles(&core)[2], Offline);
    // Bank 0 crosses the zone's edge: in use for good, though all free.
    assert_eq!(core.banks()[0], (BANK - 0x105, Kernel));
    assert_eq!(core.max_free_order(), 10);
    assert!(CoreAdaptive::new(0, 4096, 1000, 0..0).is_err());
    assert!(CoreAdaptive::new(0, 4096, 512, 0..0).is_err());
    assert!(core.free(0x105, 0).is_err(), "not handed out");
}

/// Adaptive-Buddy's migration: the kernel's pass (candidates from the
/// core's break point, isolation, targets that never bring a bank up)
/// against nvmos-frames' `BankBuddy::migrate` after the same random
/// requests: the same blocks moved to the same frames in the same order,
/// the same banks emptied, and the same free frames and role for every
/// bank after each pass. Kernel blocks pin their bank in both.
#[test]
fn adaptive_core_migrates_as_nvmos_adaptive_buddy_does() {
    use nvmos_frames::{BankBuddy, BankPolicy, BankRole as RustRole};
    use nvmos_kernel::policy_core::{BankRole, CoreAdaptive};
    const BANK: u64 = 1024;
    const START: u64 = 16 * BANK;
    const END: u64 = START + 12 * BANK;
    let mut moved_blocks = 0usize;
    let mut emptied = 0u32;
    for seed in 40..46 {
        let reference =
            BankBuddy::<Lock>::new(&[Zone::new(START, END)], 1, BANK, BankPolicy::Adaptive)
                .unwrap();
        let mut core = CoreAdaptive::new(START, END, BANK, 0..0).unwrap();
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut live: Vec<(u64, u8, bool)> = Vec::new();
        let mut live_frames = 0u64;
        for step in 0..24_000 {
            // Fill, then free most (sparse banks), then churn; a pass
            // every 3,000 steps from the first drain on.
            if step >= 9_000 && step % 3_000 == 0 {
                let pinned: Vec<bool> = (0..12u64)
                    .map(|b| live.iter().any(|&(p, _, k)| k && (p - START) / BANK == b))
                    .collect();
                let want = reference.migrate();
                let got = core.migrate(&pinned).unwrap();
                let want_moves: Vec<(u64, u64, u8)> = want
                    .moves
                    .iter()
                    .map(|m| (m.old.0, m.new.0, m.order.get()))
                    .collect();
                assert_eq!(
                    got.candidates.len() as u32,
                    want.candidates,
                    "step {step} (seed {seed}): candidates {:?}",
                    got.candidates
                );
                assert_eq!(got.moves, want_moves, "step {step} (seed {seed})");
                assert_eq!(u64::from(got.blocks_left), want.blocks_left);
                assert_eq!(got.banks_emptied, want.banks_emptied);
                moved_blocks += got.moves.len();
                emptied += got.banks_emptied;
                for &(old, new, order) in &got.moves {
                    let i = live
                        .iter()
                        .position(|&(p, o, _)| p == old && o == order)
                        .expect("a moved block was live");
                    live[i].0 = new;
                }
                reference.validate().unwrap();
                let usage = reference.bank_usage();
                for (b, ((free, role), u)) in core.banks().iter().zip(&usage).enumerate() {
                    let want = match u.role {
                        RustRole::Offline => BankRole::Offline,
                        RustRole::Kernel => BankRole::Kernel,
                        RustRole::User => BankRole::User,
                    };
                    assert_eq!(
                        (*free, *role),
                        (u.free, want),
                        "seed {seed} step {step} bank {b}"
                    );
                }
            }
            let high = if step < 6_000 { 0.9 } else { 0.5 };
            let free_p = if (6_000..9_000).contains(&step) {
                0.9
            } else {
                0.45
            };
            let free = !live.is_empty()
                && ((live_frames as f64) > high * (END - START) as f64 || rng.gen_bool(free_p));
            if free {
                live_frames -= free_random_block(&mut rng, &mut live, &reference, &mut core);
            } else {
                let order: u8 = match rng.gen_range(0..100) {
                    0..=89 => 0,
                    _ => rng.gen_range(1..=4),
                };
                let kernel = rng.gen_bool(0.05);
                let kind = if kernel {
                    MigrateType::Unmovable
                } else {
                    MigrateType::Movable
                };
                let want = reference
                    .alloc(Request::new(Order::new(order).unwrap(), 0, kind))
                    .ok()
                    .map(|p| p.0);
                let got = core.alloc(order, kernel).unwrap();
                assert_eq!(got, want, "step {step} (seed {seed})");
                if let Some(pfn) = got {
                    live.push((pfn, order, kernel));
                    live_frames += 1 << order;
                }
            }
        }
    }
    assert!(
        moved_blocks > 100 && emptied > 5,
        "{moved_blocks} blocks moved, {emptied} banks emptied"
    );
}

/// The pass's edge cases, the same in both: banks with equally many free
/// frames are taken in bank order, and a candidate whose frames exactly
/// fill the room left still goes (the break point is inclusive).
#[test]
fn adaptive_migration_breaks_ties_by_bank_and_fills_the_room_exactly() {
    use nvmos_frames::{BankBuddy, BankPolicy};
    use nvmos_kernel::policy_core::CoreAdaptive;
    const BANK: u64 = 1024;
    let reference =
        BankBuddy::<Lock>::new(&[Zone::new(0, 4 * BANK)], 1, BANK, BankPolicy::Adaptive).unwrap();
    let mut core = CoreAdaptive::new(0, 4 * BANK, BANK, 0..0).unwrap();
    let req = Request::new(Order::new(0).unwrap(), 0, MigrateType::Movable);
    // Banks 3 and 2 filled by user pages, then every other frame freed:
    // 512 in use in each.
    let mut pages = Vec::new();
    for _ in 0..2 * BANK {
        let want = reference.alloc(req).unwrap().0;
        assert_eq!(core.alloc(0, false).unwrap(), Some(want));
        pages.push(want);
    }
    for &p in pages.iter().filter(|&&p| p % 2 == 1) {
        reference.free(nvmos_frames::Pfn(p), req).unwrap();
        core.free(p, 0).unwrap();
    }
    let want = reference.migrate();
    let got = core.migrate(&[false; 4]).unwrap();
    assert_eq!(
        got.candidates,
        [2],
        "the tie goes to bank 2, and 512 fill 512 exactly"
    );
    assert_eq!(want.candidates, 1);
    assert_eq!(got.moves.len(), 512);
    assert_eq!(
        got.moves,
        want.moves
            .iter()
            .map(|m| (m.old.0, m.new.0, m.order.get()))
            .collect::<Vec<_>>()
    );
    assert!(got
        .moves
        .iter()
        .all(|&(old, new, _)| old / BANK == 2 && new / BANK == 3));
    assert_eq!((got.banks_emptied, want.banks_emptied), (1, 1));
    // A flag per bank or nothing: refused, the core unchanged.
    let before = core.banks();
    assert!(core.migrate(&[false; 3]).is_err());
    assert_eq!(core.banks(), before);
}

/// M3: the kernel's core against nvmos-frames' M3 over one zone with the
/// same colouring, `(pfn >> shift) & (colours - 1)`, partitioned among
/// the CPUs and shared, on random requests from random CPUs. The core
/// makes the reference's random draws in the same order, so the same pfn
/// for every allocation; then the same free frames and the same free
/// blocks per order. Phases: fill until allocations fail, keep churning
/// at exhaustion, drain, churn below it.
#[test]
fn m3_core_chooses_the_same_frames_as_nvmos_m3() {
    use nvmos_frames::{M3Policy, M3};
    use nvmos_kernel::policy_core::{CoreM3, M3Config};
    let frames = END - START;
    let (mut failed, mut borrowed, mut probed, mut scanned) = (0u64, 0u64, 0u64, 0u64);
    let mut runs = 0;
    for partition in [true, false] {
        for (cpus, colours, shift) in [(1, 8, 0), (2, 32, 1), (4, 16, 1), (4, 2, 3)] {
            for seed in [0x6d33_5f61_6c6c_6f63, 1, 0xdead_beef_u64 + cpus as u64] {
                let mask = u64::from(colours) - 1;
                let reference = M3::<Lock>::new(
                    &[Zone::new(START, END)],
                    cpus,
                    colours,
                    |p| ((p.0 >> shift) & mask) as u32,
                    M3Policy { partition, seed },
                )
                .unwrap();
                let config = M3Config {
                    cpus,
                    colours,
                    shift,
                    partition,
                    seed,
                };
                let mut core = CoreM3::new(START, END, config, 0..0).unwrap();
                assert_eq!(core.max_free_order(), 10);
                for cpu in 0..cpus {
                    assert_eq!(core.colours_of(cpu), reference.colours_of(cpu));
                }
                let mut rng = SmallRng::seed_from_u64(seed ^ u64::from(cpus));
                let mut live: Vec<(u64, u8)> = Vec::new();
                let mut live_frames = 0u64;
                for step in 0..12_000 {
                    let free_p = match step {
                        0..=5_999 => 0.25,
                        6_000..=7_999 => 0.85,
                        _ => 0.45,
                    };
                    let high = if step < 6_000 { 1.0 } else { 0.9 };
                    let free = !live.is_empty()
                        && ((live_frames as f64) > high * frames as f64 || rng.gen_bool(free_p));
                    if free {
                        let (pfn, order) = live.swap_remove(rng.gen_range(0..live.len()));
                        live_frames -= 1 << order;
                        let req = Request::new(Order::new(order).unwrap(), 0, MigrateType::Movable);
                        reference.free(nvmos_frames::Pfn(pfn), req).unwrap();
                        core.free(pfn, order).unwrap();
                        continue;
                    }
                    let order: u8 = match rng.gen_range(0..100) {
                        0..=79 => 0,
                        80..=94 => rng.gen_range(1..=3),
                        _ => rng.gen_range(4..=10),
                    };
                    let cpu = rng.gen_range(0..cpus);
                    let req = Request::new(Order::new(order).unwrap(), cpu, MigrateType::Movable);
                    let want = reference.alloc(req).ok().map(|p| p.0);
                    let got = core.alloc(order, cpu).unwrap();
                    assert_eq!(
                        got, want,
                        "step {step} (seed {seed:#x}, {cpus} CPUs, {colours} colours >> {shift}, partition {partition}): order-{order} on cpu {cpu}: kernel core {got:x?}, nvmos-frames {want:x?}"
                    );
                    match got {
                        Some(pfn) => {
                            live.push((pfn, order));
                            live_frames += 1 << order;
                        }
                        None => failed += 1,
                    }
                }
                reference.validate().unwrap();
                let stats = reference.stats();
                assert_eq!(core.free_frames(), stats.free_frames);
                let blocks: Vec<u64> = (0..=10).map(|o| core.free_blocks(o)).collect();
                assert_eq!(blocks, stats.free_blocks, "free blocks per order");
                let max = (0..=10)
                    .rev()
                    .find(|&o| blocks[o] > 0)
                    .map_or(-1, |o| o as i32);
                assert_eq!(core.max_free_order(), max);
                let by_colour: u64 = (0..colours).map(|c| u64::from(core.colour_free(c))).sum();
                assert_eq!(by_colour, core.free_frames());
                let s = core.stats();
                borrowed += s.alloc_borrowed;
                probed += s.block_probe_hits;
                scanned += s.alloc_blocks - s.block_probe_hits;
                runs += 1;
            }
        }
    }
    assert_eq!(runs, 24);
    // The runs reached exhaustion, partitioned CPUs borrowed, and blocks
    // were found both ways.
    assert!(failed > 100, "{failed} failed allocations");
    assert!(
        borrowed > 0 && probed > 0 && scanned > 0,
        "{borrowed} {probed} {scanned}"
    );
}
