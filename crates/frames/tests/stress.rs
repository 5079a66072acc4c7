//! Several threads on both cores, millions of mixed operations with frees
//! on other CPUs than the allocating one; an atomic bitmap catches any
//! frame handed to two owners at once. Then `validate()`.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use common::{order, req, Config};
use nvmos_frames::{AllocError, FrameAllocator, Order, Pfn, Zone};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const THREADS: u32 = 4;
const OPS_PER_THREAD: usize = 400_000;

struct Owners {
    bits: Vec<AtomicU64>,
}

impl Owners {
    fn new(frames: u64) -> Owners {
        Owners {
            bits: (0..frames.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    fn take(&self, pfn: Pfn, order: Order, who: &str) {
        for f in pfn.0..pfn.0 + order.frames() {
            let old = self.bits[(f / 64) as usize].fetch_or(1 << (f % 64), Ordering::AcqRel);
            assert!(
                old & (1 << (f % 64)) == 0,
                "{who}: frame {f:#x} handed out while owned"
            );
        }
    }

    fn give(&self, pfn: Pfn, order: Order) {
        for f in pfn.0..pfn.0 + order.frames() {
            self.bits[(f / 64) as usize].fetch_and(!(1 << (f % 64)), Ordering::AcqRel);
        }
    }
}

fn random_order(rng: &mut SmallRng) -> Order {
    match rng.gen_range(0..100) {
        0..=79 => order(0),
        80..=94 => order(rng.gen_range(1..=3)),
        _ => order(rng.gen_range(4..=10)),
    }
}

fn stress(config: Config) {
    stress_allocator(config, |zones| config.build(zones, THREADS));
}

fn stress_allocator(config: Config, build: impl Fn(&[Zone]) -> Box<dyn FrameAllocator>) {
    // 64 MiB with an unaligned start and end, plus a small second zone.
    let zones = [Zone::new(0x41, 0x4043), Zone::new(0x5000, 0x5800)];
    let a = build(&zones);
    let initial = a.stats();
    let owners = Owners::new(0x5800);
    let exchange: Mutex<Vec<(Pfn, Order)>> = Mutex::new(Vec::new());
    let who = format!("{config:?}");
    let target_live = (initial.managed_frames / u64::from(THREADS) / 3) as usize;

    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (a, owners, exchange, who) = (&*a, &owners, &exchange, &who);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(0x5eed + u64::from(t));
                let mut live: Vec<(Pfn, Order)> = Vec::new();
                let mut frames_live = 0usize;
                for n in 0..OPS_PER_THREAD {
                    if frames_live < target_live && (live.is_empty() || rng.gen_bool(0.55)) {
                        let o = random_order(&mut rng);
                        match a.alloc(req(o.get(), t)) {
                            Ok(pfn) => {
                                owners.take(pfn, o, who);
                                live.push((pfn, o));
                                frames_live += o.frames() as usize;
                            }
                            Err(AllocError::OutOfMemory { .. }) => {}
                            Err(e) => panic!("{who}: alloc: {e}"),
                        }
                    } else if !live.is_empty() {
                        let (pfn, o) = live.swap_remove(rng.gen_range(0..live.len()));
                        frames_live -= o.frames() as usize;
                        if rng.gen_bool(0.2) {
                            exchange.lock().unwrap().push((pfn, o));
                        } else {
                            owners.give(pfn, o);
                            a.free(pfn, req(o.get(), t))
                                .unwrap_or_else(|e| panic!("{who}: free: {e}"));
                        }
                    }
                    // Free blocks other threads allocated, on this CPU.
                    if n % 32 == 0 {
                        let theirs: Vec<_> = {
                            let mut x = exchange.lock().unwrap();
                            let keep = x.len().saturating_sub(16);
                            x.drain(keep..).collect()
                        };
                        for (pfn, o) in theirs {
                            owners.give(pfn, o);
                            a.free(pfn, req(o.get(), t))
                                .unwrap_or_else(|e| panic!("{who}: remote free: {e}"));
                        }
                    }
                }
                for (pfn, o) in live {
                    owners.give(pfn, o);
                    a.free(pfn, req(o.get(), t)).unwrap();
                }
            });
        }
    });
    for (pfn, o) in exchange.into_inner().unwrap() {
        a.free(pfn, req(o.get(), 0)).unwrap();
    }
    a.validate().unwrap_or_else(|e| panic!("{config:?}: {e}"));
    a.drain();
    a.validate().unwrap_or_else(|e| panic!("{config:?}: {e}"));
    assert_eq!(a.stats(), initial, "{config:?}: not back to all free");
}

#[test]
fn buddy_under_stress() {
    stress(Config::Buddy);
}

#[test]
fn lazy_buddy_under_stress() {
    stress(Config::Lbs1);
    stress(Config::Lbs31);
    stress(Config::LinuxDefault);
}

#[test]
fn ibuddy_under_stress() {
    stress(Config::IBuddy);
    stress(Config::IBuddyPerCpu);
}

#[test]
fn lazy_ibuddy_under_stress() {
    stress(Config::Lis1);
    stress(Config::Lis31);
    stress(Config::Lis31PerCpu);
    stress(Config::Lis31Fair);
}

#[test]
fn m3_under_stress() {
    stress(Config::M3Random);
    stress(Config::M3Partitioned);
}

#[test]
fn spin_yield_lock_under_stress() {
    use nvmos_frames::sync::SpinYield;
    for config in [Config::Lbs31, Config::Lis31, Config::IBuddy] {
        stress_allocator(config, |zones| {
            config.build_with::<SpinYield>(zones, THREADS)
        });
    }
}
