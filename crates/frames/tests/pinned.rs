//! Pinned per-CPU slots (`PerCpu::pin`): the contract (one owner per
//! slot, refusals as on the trait path, trait calls and drains while a
//! slot is pinned), a stress run mixing pinned and trait callers, a
//! bounded shuttle model check of the handoff between them, and one of
//! iBuddy's bulk frees (applied at once or buffered) beside single ones.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use common::{req, Lock};
use nvmos_frames::{
    AllocError, FrameAllocator, IBuddy, MigrateType, Order, PcpPolicy, PerCpu, Pfn, PinError, Zone,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const M: MigrateType = MigrateType::Movable;
const LAZY: [PcpPolicy; 4] = [
    PcpPolicy::LIS_1,
    PcpPolicy::LIS_31,
    PcpPolicy::LIS_31_FAIR,
    PcpPolicy::LBS_31,
];

type Pinned<'a> = nvmos_frames::PinnedCpu<'a, IBuddy<Lock>, Lock>;

fn lazy(zones: &[Zone], cpus: u32, policy: PcpPolicy) -> PerCpu<IBuddy<Lock>, Lock> {
    PerCpu::new(IBuddy::<Lock>::new(zones, cpus).unwrap(), policy).unwrap()
}

#[test]
fn one_owner_per_slot_and_bad_frees_are_refused_as_on_the_trait_path() {
    for policy in LAZY {
        let a = lazy(&[Zone::new(0, 4096)], 2, policy);
        let mut p0 = a.pin(0).unwrap();
        assert_eq!(a.pin(0).err(), Some(PinError::Busy { cpu: 0 }));
        assert_eq!(
            a.pin(2).err(),
            Some(PinError::InvalidCpu { cpu: 2, cpus: 2 })
        );
        let frames: Vec<Pfn> = (0..40).map(|_| p0.alloc(Order::ZERO, M).unwrap()).collect();
        for &pfn in &frames {
            p0.free(pfn, Order::ZERO, M).unwrap();
        }
        let before = a.stats();
        for &pfn in &frames {
            assert_eq!(
                p0.free(pfn, Order::ZERO, M),
                Err(AllocError::DoubleFree {
                    pfn,
                    order: Order::ZERO
                }),
                "{policy:?}"
            );
        }
        assert!(matches!(
            p0.free(Pfn(4095), Order::ZERO, M),
            Err(AllocError::NotAllocated { .. })
        ));
        assert!(matches!(
            p0.free(Pfn(9999), Order::ZERO, M),
            Err(AllocError::OutOfRange { .. })
        ));
        assert_eq!(a.stats(), before, "{policy:?}: refusals changed the stats");
        // A block through the pinned handle, and a wrong-order free of it.
        let block = p0.alloc(Order::new(3).unwrap(), M).unwrap();
        assert!(matches!(
            p0.free(block, Order::ZERO, M),
            Err(AllocError::WrongOrder { .. })
        ));
        p0.free(block, Order::new(3).unwrap(), M).unwrap();
        // validate refuses while pinned; a second pin works after drop.
        assert!(a.validate().is_err());
        drop(p0);
        a.validate().unwrap();
        let p0 = a.pin(0).unwrap();
        drop(p0);
        a.drain();
        assert_eq!(a.stats().pcp_frames, 0);
        assert_eq!(a.stats().allocated_frames(), 0);
    }
}

#[test]
fn trait_calls_on_a_pinned_cpu_bypass_its_list_and_drains_wait_for_its_owner() {
    for policy in LAZY {
        let a = lazy(&[Zone::new(0, 4096)], 2, policy);
        let mut p0 = a.pin(0).unwrap();
        let mine: Vec<Pfn> = (0..20).map(|_| p0.alloc(Order::ZERO, M).unwrap()).collect();
        for &pfn in &mine {
            p0.free(pfn, Order::ZERO, M).unwrap();
        }
        let listed = a.stats().pcp_frames;
        assert!(listed > 0, "{policy:?}: nothing listed");
        // The trait path names CPU 0 from another thread: served by the
        // inner allocator, never blocked by the pin, the list untouched.
        std::thread::scope(|s| {
            s.spawn(|| {
                let pfn = a.alloc(req(0, 0)).unwrap();
                a.free(pfn, req(0, 0)).unwrap();
                // A frame the pinned CPU gave back to its list cannot be
                // freed again through the trait path either.
                assert!(a.free(mine[0], req(0, 1)).is_err());
                a.drain();
            });
        });
        // The drain could not empty the pinned list: it asked.
        assert_eq!(a.stats().pcp_frames, listed, "{policy:?}");
        // The owner's next call honours the request: a free of a frame
        // CPU 1 allocated first gives CPU 0's frames back, then lists it.
        let x = a.alloc(req(0, 1)).unwrap();
        let with_x = a.stats().pcp_frames;
        p0.free(x, Order::ZERO, M).unwrap();
        assert_eq!(a.stats().pcp_frames, with_x - listed + 1, "{policy:?}");
        drop(p0);
        a.validate().unwrap();
    }
}

#[test]
fn a_pinned_cpu_that_runs_out_gets_the_other_cpus_frames() {
    for policy in LAZY {
        let frames = 1024u64;
        let a = lazy(&[Zone::new(0, frames)], 2, policy);
        // CPU 1 (trait path) leaves frames on its list.
        let theirs: Vec<Pfn> = (0..10).map(|_| a.alloc(req(0, 1)).unwrap()).collect();
        for &pfn in &theirs {
            a.free(pfn, req(0, 1)).unwrap();
        }
        let mut p0 = a.pin(0).unwrap();
        let mut got = HashSet::new();
        while let Ok(pfn) = p0.alloc(Order::ZERO, M) {
            assert!(got.insert(pfn), "{policy:?}: {pfn} handed out twice");
        }
        assert_eq!(got.len() as u64, frames, "{policy:?}: frames left unused");
        for pfn in got {
            p0.free(pfn, Order::ZERO, M).unwrap();
        }
        drop(p0);
        a.drain();
        a.validate().unwrap();
        assert_eq!(a.stats().allocated_frames(), 0);
    }
}

#[test]
fn pinned_and_trait_callers_under_stress() {
    const THREADS: u32 = 4;
    for policy in LAZY {
        let zones = [Zone::new(0x41, 0x4043), Zone::new(0x5000, 0x5800)];
        let a = lazy(&zones, THREADS, policy);
        let initial = a.stats();
        let owners: Vec<AtomicU64> = (0..0x5800 / 64).map(|_| AtomicU64::new(0)).collect();
        let take = |pfn: Pfn, o: Order| {
            for f in pfn.0..pfn.0 + o.frames() {
                let old = owners[(f / 64) as usize].fetch_or(1 << (f % 64), Ordering::AcqRel);
                assert!(old & (1 << (f % 64)) == 0, "{policy:?}: {f:#x} owned twice");
            }
        };
        let give = |pfn: Pfn, o: Order| {
            for f in pfn.0..pfn.0 + o.frames() {
                owners[(f / 64) as usize].fetch_and(!(1 << (f % 64)), Ordering::AcqRel);
            }
        };
        let exchange: Mutex<Vec<(Pfn, Order)>> = Mutex::new(Vec::new());
        let target = (initial.managed_frames / u64::from(THREADS) / 3) as usize;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (a, exchange, take, give) = (&a, &exchange, &take, &give);
                s.spawn(move || {
                    // Threads 0 and 1 pin their CPUs; 2 and 3 use the trait
                    // path, and now and then name a pinned CPU.
                    let mut pin = (t < 2).then(|| a.pin(t).unwrap());
                    let mut rng = SmallRng::seed_from_u64(0xfeed + u64::from(t));
                    let mut live: Vec<(Pfn, Order)> = Vec::new();
                    let mut held = 0usize;
                    let alloc =
                        |pin: &mut Option<Pinned<'_>>, o: Order, rng: &mut SmallRng| match pin {
                            Some(p) => p.alloc(o, M),
                            None => a.alloc(req(o.get(), if rng.gen_bool(0.1) { 0 } else { t })),
                        };
                    let free = |pin: &mut Option<Pinned<'_>>,
                                pfn: Pfn,
                                o: Order,
                                rng: &mut SmallRng| match pin {
                        Some(p) => p.free(pfn, o, M),
                        None => a.free(pfn, req(o.get(), if rng.gen_bool(0.1) { 1 } else { t })),
                    };
                    for n in 0..150_000 {
                        if held < target && (live.is_empty() || rng.gen_bool(0.55)) {
                            let o = if rng.gen_bool(0.9) {
                                Order::ZERO
                            } else {
                                Order::new(rng.gen_range(1..=4)).unwrap()
                            };
                            match alloc(&mut pin, o, &mut rng) {
                                Ok(pfn) => {
                                    take(pfn, o);
                                    live.push((pfn, o));
                                    held += o.frames() as usize;
                                }
                                Err(AllocError::OutOfMemory { .. }) => {}
                                Err(e) => panic!("{policy:?}: alloc: {e}"),
                            }
                        } else if let Some(i) =
                            (!live.is_empty()).then(|| rng.gen_range(0..live.len()))
                        {
                            let (pfn, o) = live.swap_remove(i);
                            held -= o.frames() as usize;
                            if rng.gen_bool(0.3) {
                                exchange.lock().unwrap().push((pfn, o));
                            } else {
                                give(pfn, o);
                                free(&mut pin, pfn, o, &mut rng)
                                    .unwrap_or_else(|e| panic!("{policy:?}: free: {e}"));
                            }
                        }
                        if n % 32 == 0 {
                            let theirs: Vec<_> = {
                                let mut x = exchange.lock().unwrap();
                                let keep = x.len().saturating_sub(16);
                                x.drain(keep..).collect()
                            };
                            for (pfn, o) in theirs {
                                give(pfn, o);
                                free(&mut pin, pfn, o, &mut rng)
                                    .unwrap_or_else(|e| panic!("{policy:?}: remote free: {e}"));
                            }
                        }
                        if n % 10_000 == 0 && t == 3 {
                            a.drain();
                        }
                    }
                    for (pfn, o) in live {
                        give(pfn, o);
                        free(&mut pin, pfn, o, &mut rng).unwrap();
                    }
                });
            }
        });
        for (pfn, o) in exchange.into_inner().unwrap() {
            a.free(pfn, req(o.get(), 2)).unwrap();
        }
        a.validate().unwrap_or_else(|e| panic!("{policy:?}: {e}"));
        a.drain();
        a.validate().unwrap_or_else(|e| panic!("{policy:?}: {e}"));
        assert_eq!(a.stats(), initial, "{policy:?}: not back to all free");
    }
}

/// A lock built on shuttle's atomics, so shuttle controls every point at
/// which the lazy layer's slot handoff synchronizes (the lock is the
/// layer's type parameter: nothing in the crate is swapped for the test).
/// A failed attempt yields to shuttle's scheduler, so spinning callers do
/// not starve the holder.
mod model {
    use super::*;
    use shuttle::sync::atomic::AtomicBool;

    pub struct ShuttleLock(AtomicBool);

    unsafe impl lock_api::RawMutex for ShuttleLock {
        #[allow(clippy::declare_interior_mutable_const)]
        const INIT: ShuttleLock = ShuttleLock(AtomicBool::new(false));
        type GuardMarker = lock_api::GuardSend;

        fn lock(&self) {
            while !self.try_lock() {}
        }

        fn try_lock(&self) -> bool {
            let got = self
                .0
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
            if !got {
                shuttle::thread::yield_now();
            }
            got
        }

        unsafe fn unlock(&self) {
            self.0.store(false, Ordering::Release);
        }
    }

    /// CPU 0 is pinned by one thread while another thread allocates, frees
    /// and drains through the trait path naming CPU 0, and frees a frame
    /// the pinned thread handed over; a third thread tries to pin CPU 0
    /// too (and the first waits while it has it). The pinner waits, pinned,
    /// until the other thread's allocation is served. Every schedule must hand no frame out twice, refuse the second
    /// pin exactly while the first is alive, and end valid and all free.
    pub fn handoff(policy: PcpPolicy) {
        let a = std::sync::Arc::new(
            PerCpu::<_, ShuttleLock>::new(
                IBuddy::<ShuttleLock>::new(&[Zone::new(0, 2048)], 2).unwrap(),
                policy,
            )
            .unwrap(),
        );
        let handed = std::sync::Arc::new(shuttle::sync::Mutex::new(Vec::<Pfn>::new()));
        let owned = std::sync::Arc::new(shuttle::sync::Mutex::new(HashSet::<Pfn>::new()));
        let claim = |owned: &shuttle::sync::Mutex<HashSet<Pfn>>, pfn: Pfn| {
            assert!(owned.lock().unwrap().insert(pfn), "{pfn} handed out twice");
        };
        // Set once `other` has allocated naming CPU 0: the pinner waits for
        // it while pinned, which deadlocks if trait calls wait for a pin.
        let served = std::sync::Arc::new(AtomicBool::new(false));
        let pinner = {
            let (a, handed, owned, served) =
                (a.clone(), handed.clone(), owned.clone(), served.clone());
            shuttle::thread::spawn(move || {
                // The third thread may hold CPU 0 for a moment.
                let mut p = loop {
                    match a.pin(0) {
                        Ok(p) => break p,
                        Err(PinError::Busy { .. }) => shuttle::thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                };
                let mut mine = Vec::new();
                for _ in 0..3 {
                    let pfn = p.alloc(Order::ZERO, M).unwrap();
                    claim(&owned, pfn);
                    mine.push(pfn);
                }
                while !served.load(Ordering::SeqCst) {
                    shuttle::thread::yield_now();
                }
                let last = mine.pop().unwrap();
                handed.lock().unwrap().push(last);
                for pfn in mine {
                    owned.lock().unwrap().remove(&pfn);
                    p.free(pfn, Order::ZERO, M).unwrap();
                }
                let pfn = p.alloc(Order::ZERO, M).unwrap();
                claim(&owned, pfn);
                owned.lock().unwrap().remove(&pfn);
                p.free(pfn, Order::ZERO, M).unwrap();
            })
        };
        let other = {
            let (a, handed, owned) = (a.clone(), handed.clone(), owned.clone());
            shuttle::thread::spawn(move || {
                let pfn = a.alloc(req(0, 0)).unwrap();
                claim(&owned, pfn);
                served.store(true, Ordering::SeqCst);
                a.drain();
                owned.lock().unwrap().remove(&pfn);
                a.free(pfn, req(0, 0)).unwrap();
                if let Some(theirs) = handed.lock().unwrap().pop() {
                    owned.lock().unwrap().remove(&theirs);
                    a.free(theirs, req(0, 0)).unwrap();
                    assert!(a.free(theirs, req(0, 1)).is_err(), "double free accepted");
                }
            })
        };
        let third = {
            let a = a.clone();
            shuttle::thread::spawn(move || match a.pin(0) {
                Ok(mut p) => {
                    let pfn = p.alloc(Order::ZERO, M).unwrap();
                    p.free(pfn, Order::ZERO, M).unwrap();
                }
                Err(e) => assert_eq!(e, PinError::Busy { cpu: 0 }),
            })
        };
        pinner.join().unwrap();
        other.join().unwrap();
        third.join().unwrap();
        for pfn in handed.lock().unwrap().drain(..) {
            a.free(pfn, req(0, 1)).unwrap();
        }
        a.validate().unwrap();
        a.drain();
        a.validate().unwrap();
        assert_eq!(a.stats().allocated_frames(), 0);
        assert_eq!(a.stats().pcp_frames, 0);
    }

    /// iBuddy alone, one space of 64 frames, all allocated, two CPUs: one
    /// thread gives frames back in bulk (applied at once when nothing is
    /// buffered and the space's lock is free, else buffered) while
    /// another frees single frames (buffered) and allocates again, so
    /// every allocation reuses a freed frame. Every schedule must hand no
    /// frame out twice, accept every free, and end valid, all free.
    pub fn bulk_beside_single_frees(order: nvmos_frames::FreeOrder) {
        let a = std::sync::Arc::new(
            IBuddy::<ShuttleLock>::with_spaces(&[Zone::new(0, 64)], 2, 1)
                .unwrap()
                .with_free_order(order),
        );
        let all: Vec<Pfn> = (0..64).map(|_| a.alloc(req(0, 0)).unwrap()).collect();
        let owned = std::sync::Arc::new(shuttle::sync::Mutex::new(
            all.iter().copied().collect::<HashSet<Pfn>>(),
        ));
        let (bulk, single, rest) = (all[..6].to_vec(), all[6..10].to_vec(), all[10..].to_vec());
        let bulker = {
            let (a, owned) = (a.clone(), owned.clone());
            shuttle::thread::spawn(move || {
                for pair in bulk.chunks(2) {
                    for pfn in pair {
                        owned.lock().unwrap().remove(pfn);
                    }
                    a.free_bulk(pair, req(0, 0)).unwrap();
                }
            })
        };
        let freer = {
            let (a, owned) = (a.clone(), owned.clone());
            shuttle::thread::spawn(move || {
                for pfn in single {
                    owned.lock().unwrap().remove(&pfn);
                    a.free(pfn, req(0, 1)).unwrap();
                    let again = a.alloc(req(0, 1)).unwrap();
                    assert!(
                        owned.lock().unwrap().insert(again),
                        "{again} handed out twice"
                    );
                    owned.lock().unwrap().remove(&again);
                    a.free(again, req(0, 1)).unwrap();
                }
            })
        };
        bulker.join().unwrap();
        freer.join().unwrap();
        a.free_bulk(&rest, req(0, 0)).unwrap();
        a.validate().unwrap();
        assert_eq!(a.stats().allocated_frames(), 0);
    }
}

#[test]
fn shuttle_model_checks_bulk_frees_beside_single_ones() {
    for order in nvmos_frames::FreeOrder::ALL {
        shuttle::check_random(move || model::bulk_beside_single_frees(order), 300);
        shuttle::check_pct(move || model::bulk_beside_single_frees(order), 300, 3);
    }
}

#[test]
fn shuttle_model_checks_the_per_cpu_handoff() {
    for policy in LAZY {
        // Bounded: random schedules and PCT schedules of depth 3.
        shuttle::check_random(move || model::handoff(policy), 300);
        shuttle::check_pct(move || model::handoff(policy), 300, 3);
    }
}
