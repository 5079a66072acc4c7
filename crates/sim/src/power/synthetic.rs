//! Seed 004's synthetic workloads ("light", "medium"): a footprint that
//! wanders inside a range, a share of it kernel data, churn every epoch;
//! driven through an allocator with the bank accounting of [`super`].

use nvmos_frames::sync::SpinYield;
use nvmos_frames::{BankBuddy, BankPolicy, MigrateType, Move, Order, Pfn, Request, Zone};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{build, Banks, MigrationCount, PowerModel, PowerRow, PowerStudyError};
use crate::allocators::AllocatorKind;

/// A synthetic workload (seed 004's "light" and "medium"): the footprint
/// (allocated share of memory) wanders inside a range, phase by phase;
/// a share of it is kernel (unmovable) data; every epoch some blocks are
/// freed and replaced (churn), which is what scatters pages over banks.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Workload {
    /// Name.
    pub name: String,
    /// Lowest footprint, percent of memory.
    pub footprint_min_percent: f64,
    /// Highest footprint, percent of memory.
    pub footprint_max_percent: f64,
    /// Share of the footprint that is kernel data, percent.
    pub kernel_percent: f64,
    /// Share of live blocks freed and replaced every epoch, percent.
    pub churn_percent: f64,
    /// Epochs (of one simulated second each).
    pub epochs: u32,
    /// Epochs per phase: the footprint moves to a new random target over
    /// one phase.
    pub phase_epochs: u32,
    /// Random seed: the same seed gives the same requests.
    pub seed: u64,
}

impl Workload {
    /// Seed 004's light workload: footprint between 10% and 50%.
    pub fn light(seed: u64) -> Workload {
        Workload::new("light", 10.0, 50.0, seed)
    }

    /// Seed 004's medium workload: footprint between 30% and 80%.
    pub fn medium(seed: u64) -> Workload {
        Workload::new("medium", 30.0, 80.0, seed)
    }

    /// A workload with the study's defaults: 10% kernel data (the seed
    /// gives no share; slab and page tables of a busy Linux are of that
    /// order), 5% churn per epoch, 200 epochs in phases of 10.
    pub fn new(name: &str, min: f64, max: f64, seed: u64) -> Workload {
        Workload {
            name: name.to_owned(),
            footprint_min_percent: min,
            footprint_max_percent: max,
            kernel_percent: 10.0,
            churn_percent: 5.0,
            epochs: 200,
            phase_epochs: 10,
            seed,
        }
    }

    /// Check the parameters: footprints within 0–100% and ordered, shares
    /// within 0–100%, at least one epoch and phase.
    pub fn validate(&self) -> Result<(), PowerStudyError> {
        let bad = |problem: String| PowerStudyError::Workload {
            workload: self.name.clone(),
            problem,
        };
        let pct = |name: &str, v: f64| {
            if v.is_finite() && (0.0..=100.0).contains(&v) {
                Ok(())
            } else {
                Err(bad(format!("{name} = {v}% is outside 0–100%")))
            }
        };
        pct("footprint_min_percent", self.footprint_min_percent)?;
        pct("footprint_max_percent", self.footprint_max_percent)?;
        pct("kernel_percent", self.kernel_percent)?;
        pct("churn_percent", self.churn_percent)?;
        if self.footprint_min_percent > self.footprint_max_percent {
            return Err(bad(format!(
                "footprint_min_percent = {} is above footprint_max_percent = {}",
                self.footprint_min_percent, self.footprint_max_percent
            )));
        }
        if self.epochs == 0 || self.phase_epochs == 0 {
            return Err(bad("epochs and phase_epochs must be at least 1".into()));
        }
        Ok(())
    }
}

/// A live block of the synthetic workload.
#[derive(Copy, Clone)]
struct Block {
    pfn: Pfn,
    order: Order,
}

/// The synthetic workload's live blocks, per side, in an order that
/// depends only on the request sequence (never on placement), so every
/// allocator sees the same frees; `slot` finds a block by pfn to follow
/// migrations.
struct Live {
    side: [Vec<Block>; 2],
    /// Dense pfn index -> (index in its side's vector + 1), 0 for none.
    slot: Vec<u32>,
    start: u64,
}

impl Live {
    fn side(kind: MigrateType) -> usize {
        usize::from(kind == MigrateType::Movable)
    }

    fn push(&mut self, kind: MigrateType, block: Block) {
        let s = Live::side(kind);
        self.side[s].push(block);
        self.slot[(block.pfn.0 - self.start) as usize] = self.side[s].len() as u32;
    }

    fn swap_remove(&mut self, s: usize, index: usize) -> Block {
        let block = self.side[s].swap_remove(index);
        self.slot[(block.pfn.0 - self.start) as usize] = 0;
        if let Some(moved) = self.side[s].get(index) {
            self.slot[(moved.pfn.0 - self.start) as usize] = index as u32 + 1;
        }
        block
    }

    /// Follow a migration move; false when no block starts at `old`.
    fn follow(&mut self, m: &Move) -> bool {
        let at = self.slot[(m.old.0 - self.start) as usize];
        if at == 0 {
            return false;
        }
        // Only user blocks move.
        let s = 1;
        let Some(block) = self.side[s].get_mut(at as usize - 1) else {
            return false;
        };
        if block.pfn != m.old || block.order != m.order {
            return false;
        }
        block.pfn = m.new;
        self.slot[(m.old.0 - self.start) as usize] = 0;
        self.slot[(m.new.0 - self.start) as usize] = at;
        true
    }
}

/// What to run a synthetic workload on.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SyntheticMachine {
    /// Name ("32 GB").
    pub name: String,
    /// Frames of memory (one zone from pfn 0).
    pub frames: u64,
    /// Frames per bank.
    pub bank_frames: u64,
    /// Page size, bytes.
    pub page_size: u64,
}

/// Run `workload` on `machine` through `allocator`, migrating after every
/// epoch when `migrate` (and the allocator can), metering energy under
/// every model in `models`.
pub fn run_synthetic(
    allocator: AllocatorKind,
    migrate: bool,
    workload: &Workload,
    machine: &SyntheticMachine,
    models: &[PowerModel],
) -> Result<PowerRow, PowerStudyError> {
    workload.validate()?;
    let zone = Zone::new(0, machine.frames);
    let layout = |source| PowerStudyError::Layout {
        frames: machine.frames,
        bank_frames: machine.bank_frames,
        source,
    };
    // Check the bank size for every allocator, the bank-unaware included.
    BankBuddy::<SpinYield>::new(&[zone], 1, machine.bank_frames, BankPolicy::Array)
        .map_err(layout)?;
    let built = build(allocator, zone, 1, machine.bank_frames).map_err(layout)?;
    let a = &*built;
    let name = allocator.name();
    let mut banks = Banks::new(zone, machine.bank_frames, models, machine.page_size);
    banks.warmup = u64::from(workload.epochs / 10);
    let mut live = Live {
        side: [Vec::new(), Vec::new()],
        slot: vec![0; machine.frames as usize],
        start: 0,
    };
    let mut rng = SmallRng::seed_from_u64(workload.seed);
    let mut failures = 0u64;
    let mut migrated = MigrationCount::default();
    let kinds = [MigrateType::Unmovable, MigrateType::Movable];
    let frames = machine.frames as f64;
    let (lo, hi) = (
        workload.footprint_min_percent / 100.0,
        workload.footprint_max_percent / 100.0,
    );
    let mut from = lo + (hi - lo) * rng.gen::<f64>();
    let mut to = lo + (hi - lo) * rng.gen::<f64>();
    // Frames held per side.
    let mut held = [0u64; 2];

    let alloc_one = |s: usize,
                     rng: &mut SmallRng,
                     live: &mut Live,
                     banks: &mut Banks,
                     held: &mut [u64; 2]|
     -> bool {
        let kind = kinds[s];
        // Kernel: slab-like orders 0-3; user: base pages.
        let order = if s == 0 {
            let r: u32 = rng.gen_range(0..10);
            Order::new(match r {
                0..=6 => 0,
                7..=8 => 1,
                _ => 2 + (r & 1) as u8,
            })
            .expect("order <= 3")
        } else {
            Order::ZERO
        };
        match a.alloc(Request::new(order, 0, kind)) {
            Ok(pfn) => {
                live.push(kind, Block { pfn, order });
                banks.add(pfn, order, kind);
                held[s] += order.frames();
                true
            }
            Err(_) => false,
        }
    };
    let free_one = |s: usize,
                    rng: &mut SmallRng,
                    live: &mut Live,
                    banks: &mut Banks,
                    held: &mut [u64; 2]|
     -> Result<(), PowerStudyError> {
        let n = live.side[s].len();
        if n == 0 {
            return Ok(());
        }
        let block = live.swap_remove(s, rng.gen_range(0..n));
        let kind = kinds[s];
        a.free(block.pfn, Request::new(block.order, 0, kind))
            .map_err(|error| PowerStudyError::Allocator {
                allocator: name,
                pfn: block.pfn,
                order: block.order,
                error,
            })?;
        banks.remove(block.pfn, block.order, kind);
        held[s] -= block.order.frames();
        Ok(())
    };

    for epoch in 0..workload.epochs {
        let phase = epoch % workload.phase_epochs;
        if phase == 0 && epoch > 0 {
            from = to;
            to = lo + (hi - lo) * rng.gen::<f64>();
        }
        let t = f64::from(phase + 1) / f64::from(workload.phase_epochs);
        let footprint = from + (to - from) * t;
        let kernel_share = workload.kernel_percent / 100.0;
        let target = [
            (footprint * kernel_share * frames) as u64,
            (footprint * (1.0 - kernel_share) * frames) as u64,
        ];
        for s in 0..2 {
            // Churn: free a share of the blocks, then bring the side to its
            // target (which re-allocates what churn freed).
            let churn =
                (live.side[s].len() as f64 * workload.churn_percent / 100.0).round() as usize;
            for _ in 0..churn {
                free_one(s, &mut rng, &mut live, &mut banks, &mut held)?;
            }
            while held[s] > target[s] {
                free_one(s, &mut rng, &mut live, &mut banks, &mut held)?;
            }
            while held[s] < target[s] {
                if !alloc_one(s, &mut rng, &mut live, &mut banks, &mut held) {
                    failures += 1;
                    break;
                }
            }
        }
        if migrate {
            if let Some(moves) = built.migrate() {
                migrated.passes += 1;
                apply_moves(&moves, &mut banks, &mut migrated, machine.page_size, |m| {
                    live.follow(m)
                })
                .map_err(|old| PowerStudyError::LostMove {
                    allocator: name,
                    old,
                })?;
            }
        }
        banks.advance(1.0);
    }
    let migration = migrate && allocator.caps().banks;
    Ok(banks.row(Some(allocator), name, migration, &migrated, failures))
}

/// Apply a pass's moves to the bank counts (user pages only move); `follow`
/// updates the owner table and says whether an owner held the old block.
fn apply_moves(
    moves: &[Move],
    banks: &mut Banks,
    count: &mut MigrationCount,
    page_size: u64,
    mut follow: impl FnMut(&Move) -> bool,
) -> Result<(), Pfn> {
    for m in moves {
        if !follow(m) {
            return Err(m.old);
        }
        banks.remove(m.old, m.order, MigrateType::Movable);
        banks.add(m.new, m.order, MigrateType::Movable);
        count.pages += m.order.frames();
        count.blocks += 1;
        banks.copied(m.order.frames() * page_size);
    }
    Ok(())
}
