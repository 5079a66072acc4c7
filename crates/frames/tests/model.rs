//! Model-based property tests: random sequences of allocations and frees
//! of mixed orders on random zones, for every allocator, checked step by
//! step against a reference model.

mod common;

use common::{model_alloc, req, Config, Model};
use nvmos_frames::{FrameAllocator, Zone};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        order: u8,
        cpu: u32,
    },
    /// Free the live block at this position (modulo the live count).
    Free {
        pick: usize,
        cpu: u32,
    },
}

fn op(cpus: u32) -> impl Strategy<Value = Op> {
    let order = prop_oneof![
        6 => Just(0u8),
        2 => 1u8..=3,
        1 => 4u8..=10,
    ];
    prop_oneof![
        3 => (order, 0..cpus).prop_map(|(order, cpu)| Op::Alloc { order, cpu }),
        2 => (any::<usize>(), 0..cpus).prop_map(|(pick, cpu)| Op::Free { pick, cpu }),
    ]
}

/// One to three zones with unaligned edges and holes (or none) between.
fn zones() -> impl Strategy<Value = Vec<Zone>> {
    prop::collection::vec((0u64..700, 1u64..2500), 1..=3).prop_map(|parts| {
        let mut zones = Vec::new();
        let mut at = 0;
        for (gap, len) in parts {
            let start = at + gap;
            zones.push(Zone::new(start, start + len));
            at = start + len;
        }
        zones
    })
}

fn run(config: Config, zones: &[Zone], cpus: u32, ops: &[Op]) -> Result<(), TestCaseError> {
    let a = config.build(zones, cpus);
    let initial = a.stats();
    prop_assert_eq!(initial.free_frames, initial.managed_frames);
    let mut model = Model::new(zones);
    for op in ops {
        match *op {
            Op::Alloc { order, cpu } => {
                model_alloc(&*a, &mut model, req(order, cpu)).map_err(TestCaseError::fail)?;
            }
            Op::Free { pick, cpu } => {
                if model.live.is_empty() {
                    continue;
                }
                let pfn = *model.live.keys().nth(pick % model.live.len()).unwrap();
                let order = model.record_free(pfn);
                let freed = a.free(nvmos_frames::Pfn(pfn), req(order.get(), cpu));
                prop_assert!(freed.is_ok(), "free of {pfn:#x} order {order}: {freed:?}");
            }
        }
        if let Err(e) = a.validate() {
            return Err(TestCaseError::fail(format!("after {op:?}: {e}")));
        }
        model.check_counts(&*a).map_err(TestCaseError::fail)?;
    }
    // Free everything: the allocator is back to its initial free state.
    for (pfn, order) in std::mem::take(&mut model.live) {
        prop_assert!(a.free(nvmos_frames::Pfn(pfn), req(order.get(), 0)).is_ok());
    }
    a.drain();
    prop_assert!(a.validate().is_ok(), "{:?}", a.validate());
    prop_assert_eq!(a.stats(), initial);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn buddy(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::Buddy, &zones, cpus, &clamp(ops, cpus))?;
    }

    #[test]
    fn lazy_buddy_batch_1(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::Lbs1, &zones, cpus, &clamp(ops, cpus))?;
    }

    #[test]
    fn lazy_buddy_batch_31(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::Lbs31, &zones, cpus, &clamp(ops, cpus))?;
    }

    #[test]
    fn linux_default_pcp(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::LinuxDefault, &zones, cpus, &clamp(ops, cpus))?;
    }

    #[test]
    fn ibuddy(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::IBuddy, &zones, cpus, &clamp(ops, cpus))?;
    }

    #[test]
    fn ibuddy_per_cpu_order(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::IBuddyPerCpu, &zones, cpus, &clamp(ops, cpus))?;
    }

    #[test]
    fn lazy_ibuddy_31_per_cpu_order(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::Lis31PerCpu, &zones, cpus, &clamp(ops, cpus))?;
    }

    #[test]
    fn lazy_ibuddy_1(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::Lis1, &zones, cpus, &clamp(ops, cpus))?;
    }

    #[test]
    fn lazy_ibuddy_31(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::Lis31, &zones, cpus, &clamp(ops, cpus))?;
    }

    #[test]
    fn lazy_ibuddy_31_fair(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::Lis31Fair, &zones, cpus, &clamp(ops, cpus))?;
    }

    #[test]
    fn m3_random(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::M3Random, &zones, cpus, &clamp(ops, cpus))?;
    }

    #[test]
    fn m3_partitioned(zones in zones(), cpus in 1u32..=3, ops in prop::collection::vec(op(3), 1..300)) {
        run(Config::M3Partitioned, &zones, cpus, &clamp(ops, cpus))?;
    }
}

/// Map every op's CPU into `0..cpus`.
fn clamp(ops: Vec<Op>, cpus: u32) -> Vec<Op> {
    ops.into_iter()
        .map(|op| match op {
            Op::Alloc { order, cpu } => Op::Alloc {
                order,
                cpu: cpu % cpus,
            },
            Op::Free { pick, cpu } => Op::Free {
                pick,
                cpu: cpu % cpus,
            },
        })
        .collect()
}

/// Fill memory with single frames until it runs out, on every allocator:
/// the long sequences proptest's short ones do not reach.
#[test]
fn exhaustion_returns_out_of_memory_and_recovers() {
    for config in Config::every() {
        let zones = config.test_zones();
        let total: u64 = zones.iter().map(Zone::frames).sum();
        let a = config.build(&zones, 2);
        let mut model = Model::new(&zones);
        let mut got = Vec::new();
        while let Some(pfn) = model_alloc(&*a, &mut model, req(0, got.len() as u32 % 2)).unwrap() {
            got.push(pfn);
        }
        assert_eq!(
            got.len() as u64,
            total,
            "{config:?}: every frame handed out before OOM"
        );
        assert!(
            matches!(
                a.alloc(req(3, 0)),
                Err(nvmos_frames::AllocError::OutOfMemory { .. })
            ),
            "{config:?}"
        );
        a.validate().unwrap();
        // Free an aligned group of eight: an order-3 request succeeds again.
        let base = got
            .iter()
            .map(|p| p.0)
            .find(|p| {
                p % 8 == 0 && zones[1].contains_block(nvmos_frames::Pfn(*p), common::order(3))
            })
            .unwrap();
        for f in base..base + 8 {
            model.record_free(f);
            a.free(nvmos_frames::Pfn(f), req(0, 1)).unwrap();
        }
        let block = model_alloc(&*a, &mut model, req(3, 0)).unwrap();
        assert_eq!(block, Some(nvmos_frames::Pfn(base)), "{config:?}");
        a.validate().unwrap();
    }
}
