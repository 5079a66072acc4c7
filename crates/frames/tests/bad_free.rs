//! Every bad free gets its own error and leaves the allocator unchanged.

mod common;

use common::{order, req, Config};
use nvmos_frames::{AllocError, FrameAllocator, Order, Pfn, Request, Stats};

/// Run `bad` and check it fails with `expected` and changes nothing: the
/// counters, the invariants, and whether `keep` (a block the caller holds)
/// is still allocated with its order.
fn refused(
    a: &dyn FrameAllocator,
    config: Config,
    bad: impl FnOnce(&dyn FrameAllocator) -> Result<(), AllocError>,
    expected: AllocError,
    keep: &[(Pfn, Order)],
) {
    let before: Stats = a.stats();
    assert_eq!(bad(a), Err(expected), "{config:?}");
    assert_eq!(
        a.stats(),
        before,
        "{config:?}: a refused call changed the counters"
    );
    a.validate()
        .unwrap_or_else(|e| panic!("{config:?}: after a refused call: {e}"));
    for &(pfn, order) in keep {
        assert_eq!(
            a.check_free(pfn, order),
            Ok(()),
            "{config:?}: {pfn} no longer allocated"
        );
    }
}

#[test]
fn every_bad_free_has_its_own_error_and_changes_nothing() {
    for config in Config::every() {
        let zones = config.test_zones();
        let a = config.build(&zones, 2);
        let a = &*a;
        let big = a.alloc(req(3, 0)).unwrap();
        let single = a.alloc(req(0, 1)).unwrap();
        let keep = [(big, order(3)), (single, order(0))];

        // Outside the managed ranges: past the end, in the hole, and a block
        // that starts inside a zone but runs past its end.
        for pfn in [Pfn(0x5000), Pfn(0xb00), Pfn(0x0)] {
            refused(
                a,
                config,
                |a| a.free(pfn, req(0, 0)),
                AllocError::OutOfRange {
                    pfn,
                    order: order(0),
                },
                &keep,
            );
        }
        let edge = Pfn(0x1c00);
        refused(
            a,
            config,
            |a| a.free(edge, req(1, 0)),
            AllocError::OutOfRange {
                pfn: edge,
                order: order(1),
            },
            &keep,
        );

        // Misaligned for its order.
        let odd = Pfn(big.0 + 1);
        refused(
            a,
            config,
            |a| a.free(odd, req(2, 0)),
            AllocError::Misaligned {
                pfn: odd,
                order: order(2),
            },
            &keep,
        );

        // Wrong order: the block is allocated with another one.
        let wrong = order(2);
        refused(
            a,
            config,
            |a| a.free(big, req(2, 1)),
            AllocError::WrongOrder {
                pfn: big,
                order: wrong,
                allocated: order(3),
            },
            &keep,
        );
        refused(
            a,
            config,
            |a| a.free(big, req(0, 1)),
            AllocError::WrongOrder {
                pfn: big,
                order: order(0),
                allocated: order(3),
            },
            &keep,
        );

        // Inside an allocated block, aligned for its order: not allocated.
        let inner = Pfn(big.0 + 4);
        refused(
            a,
            config,
            |a| a.free(inner, req(2, 0)),
            AllocError::NotAllocated {
                pfn: inner,
                order: order(2),
            },
            &keep,
        );

        // Never allocated: a free frame no one was given.
        let never = (0x103..0x1c01)
            .map(Pfn)
            .find(|&p| {
                zones.iter().any(|z| z.contains(p))
                    && a.check_free(p, order(0)).is_err()
                    && p.0 % 64 == 7
                    && p.0 > 0x900
            })
            .unwrap();
        refused(
            a,
            config,
            |a| a.free(never, req(0, 0)),
            AllocError::NotAllocated {
                pfn: never,
                order: order(0),
            },
            &keep,
        );

        // Double free, of a single frame and of a block; for lazy layers the
        // single frame sits on a per-CPU list when it is freed again.
        let extra = a.alloc(req(0, 0)).unwrap();
        a.free(extra, req(0, 0)).unwrap();
        refused(
            a,
            config,
            |a| a.free(extra, req(0, 1)),
            AllocError::DoubleFree {
                pfn: extra,
                order: order(0),
            },
            &keep,
        );
        let block = a.alloc(req(2, 1)).unwrap();
        a.free(block, req(2, 1)).unwrap();
        refused(
            a,
            config,
            |a| a.free(block, req(2, 0)),
            AllocError::DoubleFree {
                pfn: block,
                order: order(2),
            },
            &keep,
        );

        // A request for a CPU the allocator does not serve.
        refused(
            a,
            config,
            |a| a.alloc(req(0, 2)).map(drop),
            AllocError::InvalidCpu { cpu: 2, cpus: 2 },
            &keep,
        );
        refused(
            a,
            config,
            |a| a.free(single, req(0, 9)),
            AllocError::InvalidCpu { cpu: 9, cpus: 2 },
            &keep,
        );

        // The good frees still work after all that.
        a.free(big, req(3, 1)).unwrap();
        a.free(single, Request::single(0)).unwrap();
        a.drain();
        a.validate().unwrap();
        assert_eq!(a.stats().allocated_frames(), 0, "{config:?}");
    }
}

#[test]
fn a_single_frame_freed_with_a_larger_order_is_refused() {
    for config in Config::every() {
        let zones = config.test_zones();
        let a = config.build(&zones, 1);
        // Find a single frame aligned to order 1.
        let mut held = Vec::new();
        let even = loop {
            let pfn = a.alloc(req(0, 0)).unwrap();
            if pfn.0 % 2 == 0 && zones.iter().any(|z| z.contains_block(pfn, order(1))) {
                break pfn;
            }
            held.push(pfn);
        };
        let keep = [(even, order(0))];
        refused(
            &*a,
            config,
            |a| a.free(even, req(1, 0)),
            AllocError::WrongOrder {
                pfn: even,
                order: order(1),
                allocated: order(0),
            },
            &keep,
        );
        // And once it sits on a list (or is free), a larger free is a double free
        // or not allocated, never accepted.
        a.free(even, req(0, 0)).unwrap();
        let before = a.stats();
        assert!(a.free(even, req(1, 0)).is_err(), "{config:?}");
        assert_eq!(a.stats(), before);
        a.validate().unwrap();
        for pfn in held {
            a.free(pfn, req(0, 0)).unwrap();
        }
    }
}

#[test]
fn bad_configurations_are_refused() {
    use nvmos_frames::{Buddy, ConfigError, IBuddy, PcpPolicy, PerCpu, Zone};
    type Lock = common::Lock;
    assert_eq!(
        Buddy::<Lock>::new(&[], 1).err(),
        Some(ConfigError::NoMemory)
    );
    assert!(matches!(
        Buddy::<Lock>::new(&[Zone::new(5, 5)], 1),
        Err(ConfigError::EmptyZone { .. })
    ));
    assert!(matches!(
        IBuddy::<Lock>::new(&[Zone::new(0, 100), Zone::new(50, 200)], 1),
        Err(ConfigError::Overlap { .. })
    ));
    assert!(matches!(
        IBuddy::<Lock>::new(&[Zone::new(0, 100)], 0),
        Err(ConfigError::Cpus { .. })
    ));
    let inner = Buddy::<Lock>::new(&[Zone::new(0, 100)], 1).unwrap();
    assert!(matches!(
        PerCpu::<_, Lock>::new(inner, PcpPolicy::LinuxBulk { batch: 10, high: 5 }),
        Err(ConfigError::Policy(_))
    ));
}
