//! `PerCpu` gives its listed and gathered frames back through
//! `free_bulk_vouched`, which in release builds lets iBuddy skip its
//! handed-bit test. That is sound only because a free must first claim
//! the lazy layer's mark: these tests check that repeated and racing
//! frees of one frame are still told apart exactly while give-backs run.
//! (Debug builds keep iBuddy's test on the vouched path, and the lazy
//! layer asserts that the inner allocator never refuses a give-back, so
//! a frame vouched for wrongly here panics.)

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;

use common::{req, Lock};
use nvmos_frames::{AllocError, FrameAllocator, IBuddy, PcpPolicy, PerCpu, Pfn, Zone};

fn lazy(frames: u64, cpus: u32, policy: PcpPolicy) -> PerCpu<IBuddy<Lock>, Lock> {
    PerCpu::new(
        IBuddy::<Lock>::new(&[Zone::new(0, frames)], cpus).unwrap(),
        policy,
    )
    .unwrap()
}

/// Frees beyond the list go back in gatherings (vouched); freeing any
/// frame a second time, listed or given back, is refused and changes
/// nothing.
#[test]
fn a_second_free_after_a_vouched_give_back_is_refused() {
    for policy in [PcpPolicy::LIS_31, PcpPolicy::LBS_31, PcpPolicy::LIS_31_FAIR] {
        let a = lazy(4096, 2, policy);
        let frames: Vec<Pfn> = (0..300).map(|_| a.alloc(req(0, 0)).unwrap()).collect();
        for &pfn in &frames {
            a.free(pfn, req(0, 0)).unwrap();
        }
        let before = a.stats();
        a.validate().unwrap();
        for &pfn in &frames {
            for cpu in 0..2 {
                match a.free(pfn, req(0, cpu)) {
                    Err(AllocError::DoubleFree { .. } | AllocError::NotAllocated { .. }) => {}
                    other => panic!("{policy:?}: second free of {pfn}: {other:?}"),
                }
            }
        }
        assert_eq!(a.stats(), before, "{policy:?}");
        a.validate().unwrap();
        a.drain();
        assert_eq!(a.stats().free_frames, 4096, "{policy:?}");
        a.validate().unwrap();
    }
}

/// Two threads free the same frames at once, on two CPUs, while both
/// CPUs' overflow frees are being given back: exactly one free of each
/// frame succeeds, and the allocator ends whole.
#[test]
fn racing_frees_of_one_frame_succeed_once_while_give_backs_run() {
    const FRAMES: u64 = 1 << 14;
    for round in 0..4u64 {
        let a = lazy(FRAMES, 2, PcpPolicy::LIS_31);
        let frames: Vec<Pfn> = (0..FRAMES - 64)
            .map(|i| a.alloc(req(0, (i % 2) as u32)).unwrap())
            .collect();
        let won = AtomicU64::new(0);
        let start = Barrier::new(2);
        std::thread::scope(|s| {
            for cpu in 0..2u32 {
                let (a, frames, won, start) = (&a, &frames, &won, &start);
                s.spawn(move || {
                    start.wait();
                    // Opposite orders, so the two threads meet mid-way.
                    let mut order: Vec<&Pfn> = frames.iter().collect();
                    if (cpu as u64 + round) % 2 == 1 {
                        order.reverse();
                    }
                    for &pfn in order {
                        match a.free(pfn, req(0, cpu)) {
                            Ok(()) => {
                                won.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(
                                AllocError::DoubleFree { .. } | AllocError::NotAllocated { .. },
                            ) => {}
                            Err(e) => panic!("free of {pfn} on {cpu}: {e}"),
                        }
                    }
                });
            }
        });
        assert_eq!(
            won.load(Ordering::Relaxed),
            frames.len() as u64,
            "round {round}"
        );
        a.validate().unwrap();
        a.drain();
        assert_eq!(a.stats().free_frames, FRAMES, "round {round}");
        a.validate().unwrap();
    }
}
