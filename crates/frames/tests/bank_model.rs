//! Model-based property tests for seed 004's bank-aware allocators: random
//! sequences of kernel and user allocations, frees, migration passes and
//! single-block moves on random whole-bank zones, checked step by step
//! against a model that knows who owns every allocated page.

mod common;

use std::collections::{BTreeMap, HashMap};

use common::{Config, Lock};
use nvmos_frames::{
    AllocError, BankBuddy, BankPolicy, BankRole, ConfigError, FrameAllocator, MigrateError,
    MigrateType, Move, Order, Pfn, Request, Zone,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Alloc {
        order: u8,
        kind: MigrateType,
    },
    /// Free the live block at this position (modulo the live count).
    Free {
        pick: usize,
    },
    /// One migration pass.
    Migrate,
    /// Move the live block at this position into this bank.
    Move {
        pick: usize,
        bank: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let order = prop_oneof![6 => Just(0u8), 2 => 1u8..=3, 1 => 4u8..=10];
    let kind = prop_oneof![
        2 => Just(MigrateType::Unmovable),
        5 => Just(MigrateType::Movable),
        1 => Just(MigrateType::Reclaimable),
    ];
    prop_oneof![
        6 => (order, kind).prop_map(|(order, kind)| Op::Alloc { order, kind }),
        4 => any::<usize>().prop_map(|pick| Op::Free { pick }),
        1 => Just(Op::Migrate),
        1 => (any::<usize>(), 0usize..64).prop_map(|(pick, bank)| Op::Move { pick, bank }),
    ]
}

/// A bank size (powers of two and not) and one to three zones of whole
/// banks, with unaligned starts and holes between.
fn banked() -> impl Strategy<Value = (u64, Vec<Zone>)> {
    prop_oneof![Just(16u64), Just(64), Just(100), Just(256), Just(1024)].prop_flat_map(|bank| {
        prop::collection::vec((0u64..700, 1u64..=12), 1..=3).prop_map(move |parts| {
            let mut zones = Vec::new();
            let mut at = 0;
            for (gap, banks) in parts {
                let start = at + gap;
                zones.push(Zone::new(start, start + banks * bank));
                at = start + banks * bank;
            }
            (bank, zones)
        })
    })
}

/// Who owns what: owner ids for live blocks, the page each owner's block
/// starts at, and every allocated page's owner.
#[derive(Default)]
struct Owners {
    next: u64,
    /// Owner -> (first frame, order, kind).
    blocks: BTreeMap<u64, (u64, Order, MigrateType)>,
    /// Allocated page -> owner; each page at most once.
    pages: HashMap<u64, u64>,
}

impl Owners {
    fn give(&mut self, pfn: Pfn, order: Order, kind: MigrateType) -> Result<(), String> {
        let owner = self.next;
        self.next += 1;
        for f in pfn.0..pfn.0 + order.frames() {
            if let Some(other) = self.pages.insert(f, owner) {
                return Err(format!(
                    "page {f:#x} handed to owner {owner} while owner {other} holds it"
                ));
            }
        }
        self.blocks.insert(owner, (pfn.0, order, kind));
        Ok(())
    }

    fn take(&mut self, owner: u64) -> (u64, Order, MigrateType) {
        let (pfn, order, kind) = self.blocks.remove(&owner).unwrap();
        for f in pfn..pfn + order.frames() {
            self.pages.remove(&f);
        }
        (pfn, order, kind)
    }

    /// Follow a move: the owner of `old` now owns `new`.
    fn follow(&mut self, m: &Move) -> Result<(), String> {
        let owner = *self
            .pages
            .get(&m.old.0)
            .ok_or_else(|| format!("move from {} which no one owns", m.old))?;
        let (pfn, order, kind) = self.blocks[&owner];
        if pfn != m.old.0 || order != m.order {
            return Err(format!(
                "move {m:?} does not match owner {owner}'s block {pfn:#x} order {order}"
            ));
        }
        if kind != MigrateType::Movable {
            return Err(format!("move {m:?} moved {kind:?} data"));
        }
        self.take(owner);
        // Keep the owner id: re-insert under the same id.
        for f in m.new.0..m.new.0 + order.frames() {
            if let Some(other) = self.pages.insert(f, owner) {
                return Err(format!("move {m:?} lands on page {f:#x} owned by {other}"));
            }
        }
        self.blocks.insert(owner, (m.new.0, order, kind));
        Ok(())
    }

    /// Every allocated page is owned exactly once, and the allocator agrees
    /// on every block and on the count.
    fn check(&self, a: &BankBuddy<Lock>) -> Result<(), String> {
        let mut pages = 0;
        for (&owner, &(pfn, order, _)) in &self.blocks {
            for f in pfn..pfn + order.frames() {
                if self.pages.get(&f) != Some(&owner) {
                    return Err(format!(
                        "page {f:#x} of owner {owner} is not recorded as theirs"
                    ));
                }
            }
            pages += order.frames();
            a.check_free(Pfn(pfn), order)
                .map_err(|e| format!("owner {owner}'s block {pfn:#x}: {e}"))?;
        }
        if pages != self.pages.len() as u64 {
            return Err(format!(
                "{} pages recorded, blocks cover {pages}",
                self.pages.len()
            ));
        }
        let allocated = a.stats().allocated_frames();
        if allocated != pages {
            return Err(format!(
                "allocator says {allocated} frames allocated, owners hold {pages}"
            ));
        }
        // Bank counters agree with the owners, kind by kind.
        let usage = a.bank_usage();
        let mut per_bank = vec![(0u64, 0u64); usage.len()];
        for &(pfn, order, kind) in self.blocks.values() {
            let b = a.bank_of(Pfn(pfn)).unwrap();
            if kind == MigrateType::Movable {
                per_bank[b].1 += order.frames();
            } else {
                per_bank[b].0 += order.frames();
            }
        }
        for (b, u) in usage.iter().enumerate() {
            if (u.unmovable, u.movable) != per_bank[b] {
                return Err(format!("bank {b}: {u:?}, owners hold {:?}", per_bank[b]));
            }
            if (u.role == BankRole::Offline) != (u.unmovable + u.movable == 0) {
                return Err(format!("bank {b}: {u:?}"));
            }
        }
        Ok(())
    }
}

/// Whether an aligned block of `order` lies wholly free inside one bank:
/// exactly when a bank-aware allocator must serve the order.
fn free_block_in_a_bank(a: &BankBuddy<Lock>, owners: &Owners, order: Order) -> bool {
    a.bank_usage().iter().any(|bank| {
        let n = order.frames();
        let end = bank.start.0 + bank.frames;
        let mut start = bank.start.0.next_multiple_of(n);
        while start + n <= end {
            if (start..start + n).all(|f| !owners.pages.contains_key(&f)) {
                return true;
            }
            start += n;
        }
        false
    })
}

fn run(policy: BankPolicy, bank: u64, zones: &[Zone], ops: &[Op]) -> Result<(), TestCaseError> {
    let a = BankBuddy::<Lock>::new(zones, 1, bank, policy).unwrap();
    let initial = a.stats();
    let mut owners = Owners::default();
    for op in ops {
        match *op {
            Op::Alloc { order, kind } => {
                let order = Order::new(order).unwrap();
                match a.alloc(Request::new(order, 0, kind)) {
                    Ok(pfn) => owners.give(pfn, order, kind).map_err(TestCaseError::fail)?,
                    Err(AllocError::OutOfMemory { .. }) => prop_assert!(
                        !free_block_in_a_bank(&a, &owners, order),
                        "out of memory for order {order} with a free block in a bank"
                    ),
                    Err(e) => return Err(TestCaseError::fail(format!("alloc: {e}"))),
                }
            }
            Op::Free { pick } => {
                if owners.blocks.is_empty() {
                    continue;
                }
                let owner = *owners
                    .blocks
                    .keys()
                    .nth(pick % owners.blocks.len())
                    .unwrap();
                let (pfn, order, kind) = owners.take(owner);
                let freed = a.free(Pfn(pfn), Request::new(order, 0, kind));
                prop_assert!(freed.is_ok(), "free of {pfn:#x} order {order}: {freed:?}");
            }
            Op::Migrate => {
                let before = a.bank_usage();
                let up_before = before
                    .iter()
                    .filter(|b| b.role != BankRole::Offline)
                    .count();
                let m = a.migrate();
                for mv in &m.moves {
                    owners.follow(mv).map_err(TestCaseError::fail)?;
                }
                let after = a.bank_usage();
                let up_after = after.iter().filter(|b| b.role != BankRole::Offline).count();
                // Migration never brings a bank up, and empties what it says.
                prop_assert!(
                    up_after + m.banks_emptied as usize == up_before,
                    "{up_before} banks up before, {up_after} after, {} emptied",
                    m.banks_emptied
                );
                // Banks pinned by unmovable pages keep every page.
                for (b, (x, y)) in before.iter().zip(&after).enumerate() {
                    prop_assert_eq!(x.unmovable, y.unmovable, "bank {}", b);
                }
            }
            Op::Move { pick, bank } => {
                if owners.blocks.is_empty() {
                    continue;
                }
                let owner = *owners
                    .blocks
                    .keys()
                    .nth(pick % owners.blocks.len())
                    .unwrap();
                let (pfn, order, kind) = owners.blocks[&owner];
                let stats = a.stats();
                let usage = a.bank_usage();
                match a.move_block(Pfn(pfn), order, bank) {
                    Ok(mv) => {
                        prop_assert_eq!(kind, MigrateType::Movable);
                        prop_assert_eq!(a.bank_of(mv.new), Some(bank));
                        owners.follow(&mv).map_err(TestCaseError::fail)?;
                    }
                    Err(e) => {
                        // Refused: nothing changed.
                        prop_assert_eq!(a.stats(), stats);
                        prop_assert_eq!(&a.bank_usage(), &usage);
                        let expected_kind = matches!(e, MigrateError::Unmovable { .. });
                        prop_assert_eq!(expected_kind, kind != MigrateType::Movable, "{}", e);
                        if let MigrateError::TargetFull { .. } = e {
                            prop_assert!(!free_block_in_bank(&usage[bank], &owners, order));
                        }
                    }
                }
            }
        }
        if let Err(e) = a.validate() {
            return Err(TestCaseError::fail(format!("after {op:?}: {e}")));
        }
        owners.check(&a).map_err(TestCaseError::fail)?;
    }
    for (_, (pfn, order, kind)) in std::mem::take(&mut owners.blocks) {
        prop_assert!(a.free(Pfn(pfn), Request::new(order, 0, kind)).is_ok());
    }
    a.validate()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(a.stats(), initial);
    prop_assert!(a.bank_usage().iter().all(|b| b.role == BankRole::Offline));
    Ok(())
}

fn free_block_in_bank(bank: &nvmos_frames::BankUsage, owners: &Owners, order: Order) -> bool {
    let n = order.frames();
    let end = bank.start.0 + bank.frames;
    let mut start = bank.start.0.next_multiple_of(n);
    while start + n <= end {
        if (start..start + n).all(|f| !owners.pages.contains_key(&f)) {
            return true;
        }
        start += n;
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn array_bank_buddy((bank, zones) in banked(), ops in prop::collection::vec(op(), 1..300)) {
        run(BankPolicy::Array, bank, &zones, &ops)?;
    }

    #[test]
    fn list_bank_buddy((bank, zones) in banked(), ops in prop::collection::vec(op(), 1..300)) {
        run(BankPolicy::List, bank, &zones, &ops)?;
    }

    #[test]
    fn adaptive_buddy((bank, zones) in banked(), ops in prop::collection::vec(op(), 1..300)) {
        run(BankPolicy::Adaptive, bank, &zones, &ops)?;
    }
}

#[test]
fn bank_sizes_that_do_not_divide_a_zone_are_refused() {
    for policy in BankPolicy::ALL {
        let err =
            BankBuddy::<Lock>::new(&[Zone::new(0, 1024), Zone::new(2048, 3000)], 1, 256, policy)
                .err()
                .unwrap();
        assert_eq!(
            err,
            ConfigError::BankSize {
                index: 1,
                frames: 952,
                bank_frames: 256
            }
        );
        assert!(err.to_string().contains("does not divide zone 1"), "{err}");
        assert!(matches!(
            BankBuddy::<Lock>::new(&[Zone::new(0, 1024)], 1, 0, policy),
            Err(ConfigError::BankSize { .. })
        ));
    }
}

/// Kernel pages gather on the fewest banks at the low end, user pages at
/// the high end, and migration packs user pages so sparse banks go down.
#[test]
fn kernel_and_user_pages_grow_from_opposite_ends_and_migration_packs_them() {
    for config in Config::BANKED {
        let policy = config.bank_policy().unwrap();
        // 16 banks of 256 frames.
        let a = BankBuddy::<Lock>::new(&[Zone::new(0, 4096)], 1, 256, policy).unwrap();
        let kernel: Vec<Pfn> = (0..300)
            .map(|_| {
                a.alloc(Request::new(Order::ZERO, 0, MigrateType::Unmovable))
                    .unwrap()
            })
            .collect();
        let user: Vec<Pfn> = (0..1000)
            .map(|_| a.alloc(Request::single(0)).unwrap())
            .collect();
        assert!(
            kernel.iter().all(|&p| a.bank_of(p).unwrap() <= 1),
            "{policy:?}"
        );
        assert!(
            user.iter().all(|&p| a.bank_of(p).unwrap() >= 12),
            "{policy:?}"
        );
        // Free most user pages, scattered: four user banks stay up.
        let mut kept = Vec::new();
        for (n, &p) in user.iter().enumerate() {
            if n % 10 == 0 {
                kept.push(p);
            } else {
                a.free(p, Request::single(0)).unwrap();
            }
        }
        let up = |a: &BankBuddy<Lock>| {
            a.bank_usage()
                .iter()
                .filter(|b| b.role != BankRole::Offline)
                .count()
        };
        assert_eq!(up(&a), 2 + 4, "{policy:?}");
        let m = a.migrate();
        a.validate().unwrap();
        // The 100 user pages fit in the free room of the kernel bank that
        // stays up anyway: all four user banks are emptied into it.
        assert_eq!((m.candidates, m.banks_emptied), (4, 4), "{policy:?}: {m:?}");
        assert_eq!(up(&a), 2, "{policy:?}");
        assert!(
            m.moves.iter().all(|mv| a.bank_of(mv.new) == Some(1)),
            "{policy:?}"
        );
        assert_eq!(m.pages_moved(), m.moves.len() as u64);
        let mut now: std::collections::HashSet<Pfn> = kept.iter().copied().collect();
        for mv in &m.moves {
            assert!(
                now.remove(&mv.old) && now.insert(mv.new),
                "{policy:?}: {mv:?}"
            );
        }
        for &p in &now {
            a.check_free(p, Order::ZERO).unwrap();
        }
    }
}

#[test]
fn moving_into_a_full_bank_is_a_clear_error_and_changes_nothing() {
    for policy in BankPolicy::ALL {
        let a = BankBuddy::<Lock>::new(&[Zone::new(0, 1024)], 1, 256, policy).unwrap();
        // Fill bank 3 (user side), put one user page in bank 2.
        let user: Vec<Pfn> = (0..257)
            .map(|_| a.alloc(Request::single(0)).unwrap())
            .collect();
        let lone = *user.last().unwrap();
        assert_eq!(a.bank_of(lone), Some(2), "{policy:?}");
        let kernel = a
            .alloc(Request::new(Order::ZERO, 0, MigrateType::Unmovable))
            .unwrap();
        let before = (a.stats(), a.bank_usage());
        let err = a.move_block(lone, Order::ZERO, 3).unwrap_err();
        assert_eq!(
            err,
            MigrateError::TargetFull {
                bank: 3,
                order: Order::ZERO,
                free: 0
            }
        );
        assert!(err.to_string().contains("bank 3 is full"), "{err}");
        assert_eq!(
            a.move_block(kernel, Order::ZERO, 1).unwrap_err(),
            MigrateError::Unmovable {
                pfn: kernel,
                order: Order::ZERO
            }
        );
        assert_eq!(
            a.move_block(lone, Order::ZERO, 9).unwrap_err(),
            MigrateError::NoSuchBank { bank: 9, banks: 4 }
        );
        assert_eq!(
            a.move_block(lone, Order::ZERO, 2).unwrap_err(),
            MigrateError::SameBank { pfn: lone, bank: 2 }
        );
        assert!(matches!(
            a.move_block(Pfn(lone.0 + 1), Order::ZERO, 1).unwrap_err(),
            MigrateError::Block(AllocError::NotAllocated { .. })
        ));
        assert_eq!((a.stats(), a.bank_usage()), before, "{policy:?}");
        a.validate().unwrap();
        // Into the empty bank 1 it works, and bank 2 goes offline.
        let mv = a.move_block(lone, Order::ZERO, 1).unwrap();
        assert_eq!((mv.old, a.bank_of(mv.new)), (lone, Some(1)));
        assert_eq!(a.bank_usage()[2].role, BankRole::Offline);
        a.validate().unwrap();
    }
}

#[test]
fn zones_each_have_their_own_banks_and_moves_stay_in_a_zone() {
    let a = BankBuddy::<Lock>::new(
        &[Zone::new(0, 512), Zone::new(1000, 1512)],
        1,
        256,
        BankPolicy::Adaptive,
    )
    .unwrap();
    assert_eq!(a.banks(), 4);
    // The highest zone first, user side from its high end.
    let p = a.alloc(Request::single(0)).unwrap();
    assert_eq!(a.bank_of(p), Some(3));
    assert_eq!(
        a.move_block(p, Order::ZERO, 0).unwrap_err(),
        MigrateError::OtherZone { pfn: p, bank: 0 }
    );
    a.validate().unwrap();
}
