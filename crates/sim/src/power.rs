//! The power study (seed 004): how many memory banks each allocator keeps
//! up, against the fewest that could hold what is allocated, and what that
//! costs in energy, on the seed's synthetic workloads and on recorded
//! traces.
//!
//! A bank is up when it holds at least one allocated frame (partial array
//! self-refresh: a bank with nothing allocated may go down). The driver
//! keeps its own count of allocated frames per bank from the blocks it
//! holds, so every allocator is measured the same way; frames parked on a
//! lazy layer's per-CPU lists hold no data and count as free. Kernel
//! (unmovable, reclaimable) blocks *pin* their bank. The optimum is
//! `ceil(allocated / bank_frames)` banks up.
//!
//! Migration ([`nvmos_frames::BankBuddy::migrate`]) runs after every
//! epoch (synthetic) or every `migrate_every_ns` of trace time; every move
//! it reports is applied to the driver's owner tables, so the owner of a
//! page follows it, and its copies are charged to the energy.

use nvmos_frames::sync::SpinYield;
use nvmos_frames::{
    AllocError, BankBuddy, BankPolicy, ConfigError, MigrateType, Move, Order, Pfn, Request, Zone,
};
use nvmos_memsys::power::EnergyMeter;
pub use nvmos_memsys::power::{EnergyReport, PowerModel, PowerState};
use nvmos_trace::Event;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::allocators::{AllocatorKind, Setup, StudyAllocator};
use crate::replay::{self, Hook, Migrating, Recorded, ReplayError};

/// Build `kind` for the power study over `zone` with banks of
/// `bank_frames`.
fn build(
    kind: AllocatorKind,
    zone: Zone,
    cpus: u32,
    bank_frames: u64,
) -> Result<Box<dyn StudyAllocator>, ConfigError> {
    kind.build::<SpinYield>(&Setup {
        bank_frames,
        ..Setup::new(&[zone], cpus)
    })
}

/// Why the power study could not run.
#[derive(Debug, thiserror::Error)]
pub enum PowerStudyError {
    /// A workload's parameters are out of range.
    #[error("workload {workload:?}: {problem}")]
    Workload {
        /// The workload.
        workload: String,
        /// What is wrong.
        problem: String,
    },
    /// The machine or bank size is not usable.
    #[error("machine of {frames} frames with banks of {bank_frames} frames")]
    Layout {
        /// Frames.
        frames: u64,
        /// Bank size.
        bank_frames: u64,
        /// Why.
        #[source]
        source: ConfigError,
    },
    /// The allocator refused to free or move its own block: a bug.
    #[error("{allocator}: refused to free its own block {pfn} (order {order})")]
    Allocator {
        /// The allocator.
        allocator: &'static str,
        /// The block.
        pfn: Pfn,
        /// Its order.
        order: Order,
        /// What it said.
        #[source]
        error: AllocError,
    },
    /// A migration reported a move the driver cannot follow: a bug.
    #[error("{allocator}: migration moved {old} which no owner holds")]
    LostMove {
        /// The allocator.
        allocator: &'static str,
        /// The reported old pfn.
        old: Pfn,
    },
    /// The trace could not be read.
    #[error("reading the trace")]
    Trace(#[source] Box<dyn std::error::Error + Send + Sync>),
}

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

/// One allocator's figures on one workload or trace.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PowerRow {
    /// The registry allocator; `None` for the kernel's own placement.
    pub kind: Option<AllocatorKind>,
    /// Allocator name.
    pub allocator: String,
    /// Whether migration ran.
    pub migration: bool,
    /// Banks in the machine.
    pub banks: usize,
    /// Frames per bank.
    pub bank_frames: u64,
    /// Time-weighted mean share of memory offline (banks down), percent.
    pub offline_percent: f64,
    /// The same for the optimum (fewest banks holding what is allocated).
    pub optimum_offline_percent: f64,
    /// `optimum_offline_percent - offline_percent`: percentage points off.
    pub points_off_optimum: f64,
    /// The most memory offline at one sample, percent.
    pub max_offline_percent: f64,
    /// Time-weighted mean share of memory allocated, percent.
    pub footprint_percent: f64,
    /// The lowest footprint at a sample (after the first tenth of the
    /// run, once memory has been used), percent.
    pub low_footprint_percent: f64,
    /// Share of banks up at that sample, percent: seed 004's observation
    /// is that Linux keeps nearly every bank up even then.
    pub up_percent_at_low_footprint: f64,
    /// Page frames copied by migration.
    pub pages_migrated: u64,
    /// Blocks moved by migration.
    pub blocks_migrated: u64,
    /// Migration passes run.
    pub migration_passes: u64,
    /// Allocations refused (out of memory).
    pub alloc_failures: u64,
    /// Banks holding kernel data at the end (pinned: cannot go down).
    pub pinned_banks: usize,
    /// Banks up at the end.
    pub up_banks: usize,
    /// Each bank at the end: 0 down, 1 up with movable data only, 2
    /// pinned by kernel data (seed 004's Fig. 9).
    pub bank_map: Vec<u8>,
    /// Energy under each power model asked for.
    pub energy: Vec<NamedEnergy>,
}

/// Energy under one power model.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct NamedEnergy {
    /// The model's name.
    pub model: String,
    /// The figures.
    pub report: EnergyReport,
}

/// Per-bank accounting from the blocks the driver holds.
struct Banks {
    start: u64,
    bank_frames: u64,
    kernel: Vec<u64>,
    user: Vec<u64>,
    up: usize,
    allocated: u64,
    // Time-weighted sums.
    seconds: f64,
    offline_s: f64,
    optimum_s: f64,
    footprint_s: f64,
    max_offline: f64,
    /// Samples taken and how many to skip before tracking the low point.
    samples: u64,
    warmup: u64,
    low: Option<(f64, f64)>,
    meters: Vec<(String, EnergyMeter)>,
}

impl Banks {
    fn new(zone: Zone, bank_frames: u64, models: &[PowerModel], page_size: u64) -> Banks {
        let n = (zone.frames() / bank_frames) as usize;
        Banks {
            start: zone.start.0,
            bank_frames,
            kernel: vec![0; n],
            user: vec![0; n],
            up: 0,
            allocated: 0,
            seconds: 0.0,
            offline_s: 0.0,
            optimum_s: 0.0,
            footprint_s: 0.0,
            max_offline: 0.0,
            samples: 0,
            warmup: 0,
            low: None,
            meters: models
                .iter()
                .map(|m| {
                    (
                        m.spec().name.clone(),
                        EnergyMeter::new(m.clone(), bank_frames * page_size, n),
                    )
                })
                .collect(),
        }
    }

    fn bank(&self, pfn: Pfn) -> usize {
        ((pfn.0 - self.start) / self.bank_frames) as usize
    }

    fn add(&mut self, pfn: Pfn, order: Order, kind: MigrateType) {
        let b = self.bank(pfn);
        if self.kernel[b] + self.user[b] == 0 {
            self.up += 1;
        }
        if kind == MigrateType::Movable {
            self.user[b] += order.frames();
        } else {
            self.kernel[b] += order.frames();
        }
        self.allocated += order.frames();
    }

    fn remove(&mut self, pfn: Pfn, order: Order, kind: MigrateType) {
        let b = self.bank(pfn);
        if kind == MigrateType::Movable {
            self.user[b] -= order.frames();
        } else {
            self.kernel[b] -= order.frames();
        }
        if self.kernel[b] + self.user[b] == 0 {
            self.up -= 1;
        }
        self.allocated -= order.frames();
    }

    fn optimum_up(&self) -> usize {
        self.allocated.div_ceil(self.bank_frames) as usize
    }

    /// `seconds` pass in the current state.
    fn advance(&mut self, seconds: f64) {
        let n = self.kernel.len() as f64;
        let offline = 100.0 * (n - self.up as f64) / n;
        self.seconds += seconds;
        self.offline_s += seconds * offline;
        self.optimum_s += seconds * 100.0 * (n - self.optimum_up() as f64) / n;
        self.footprint_s += seconds * 100.0 * self.allocated as f64 / (n * self.bank_frames as f64);
        if seconds > 0.0 {
            self.max_offline = self.max_offline.max(offline);
            self.samples += 1;
            let footprint = 100.0 * self.allocated as f64 / (n * self.bank_frames as f64);
            if self.samples > self.warmup && self.low.is_none_or(|(f, _)| footprint < f) {
                self.low = Some((footprint, 100.0 - offline));
            }
        }
        for (_, meter) in &mut self.meters {
            meter.advance(seconds, self.up);
        }
    }

    fn copied(&mut self, bytes: u64) {
        for (_, meter) in &mut self.meters {
            meter.copy(bytes);
        }
    }

    fn row(
        self,
        kind: Option<AllocatorKind>,
        allocator: &str,
        migration: bool,
        m: &MigrationCount,
        failures: u64,
    ) -> PowerRow {
        let mean = |s: f64| {
            if self.seconds > 0.0 {
                s / self.seconds
            } else {
                0.0
            }
        };
        let offline = mean(self.offline_s);
        let optimum = mean(self.optimum_s);
        let bank_map: Vec<u8> = (0..self.kernel.len())
            .map(|b| {
                if self.kernel[b] > 0 {
                    2
                } else if self.user[b] > 0 {
                    1
                } else {
                    0
                }
            })
            .collect();
        PowerRow {
            kind,
            allocator: allocator.to_owned(),
            migration,
            banks: self.kernel.len(),
            bank_frames: self.bank_frames,
            offline_percent: offline,
            optimum_offline_percent: optimum,
            points_off_optimum: optimum - offline,
            max_offline_percent: self.max_offline,
            low_footprint_percent: self.low.map_or(0.0, |(f, _)| f),
            up_percent_at_low_footprint: self.low.map_or(0.0, |(_, u)| u),
            footprint_percent: mean(self.footprint_s),
            pages_migrated: m.pages,
            blocks_migrated: m.blocks,
            migration_passes: m.passes,
            alloc_failures: failures,
            pinned_banks: bank_map.iter().filter(|&&s| s == 2).count(),
            up_banks: self.up,
            bank_map,
            energy: self
                .meters
                .iter()
                .map(|(name, meter)| NamedEnergy {
                    model: name.clone(),
                    report: meter.report(),
                })
                .collect(),
        }
    }
}

#[derive(Default)]
struct MigrationCount {
    pages: u64,
    blocks: u64,
    passes: u64,
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

/// How to replay a trace for the power study.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct TraceMachine {
    /// Frames of memory (one zone from pfn 0).
    pub frames: u64,
    /// Frames per bank.
    pub bank_frames: u64,
    /// Page size, bytes.
    pub page_size: u64,
    /// CPUs the allocators serve (traced CPUs are taken modulo this).
    pub cpus: u32,
    /// Trace time between migration passes, ns.
    pub migrate_every_ns: u64,
}

/// The power study's view of a replay: allocated frames per bank, time
/// passing between events, migration's copies.
struct BankHook<'a> {
    banks: &'a mut Banks,
    last_ns: Option<u64>,
    page_size: u64,
}

impl Hook for BankHook<'_> {
    fn event(&mut self, event: &Event) {
        if let Some(last) = self.last_ns {
            self.banks
                .advance(event.time_ns.saturating_sub(last) as f64 / 1e9);
        }
        self.last_ns = Some(event.time_ns);
    }

    fn placed(&mut self, ours: Pfn, order: Order, kind: MigrateType) {
        self.banks.add(ours, order, kind);
    }

    fn moved(&mut self, m: &Move) {
        // Only movable (user) blocks move.
        self.banks.remove(m.old, m.order, MigrateType::Movable);
        self.banks.add(m.new, m.order, MigrateType::Movable);
        self.banks.copied(m.order.frames() * self.page_size);
    }

    fn freed(&mut self, ours: Pfn, order: Order, kind: MigrateType) {
        self.banks.remove(ours, order, kind);
    }
}

/// Replay `events` through `placement` on `machine` with the replay engine
/// ([`crate::replay::run`]: frees of blocks allocated before the
/// recording skipped, blocks freed in pieces given back when whole, a
/// traced block allocated again before its free was seen freed first),
/// migrating every `migrate_every_ns` of trace time when `migrate` and the
/// allocator knows banks.
pub fn run_trace<I, E>(
    placement: TracePlacement,
    migrate: bool,
    events: I,
    machine: &TraceMachine,
    models: &[PowerModel],
) -> Result<PowerRow, PowerStudyError>
where
    I: IntoIterator<Item = Result<Event, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    let zone = Zone::new(0, machine.frames);
    let layout = |source| PowerStudyError::Layout {
        frames: machine.frames,
        bank_frames: machine.bank_frames,
        source,
    };
    BankBuddy::<SpinYield>::new(&[zone], 1, machine.bank_frames, BankPolicy::Array)
        .map_err(layout)?;
    let cpus = machine.cpus.max(1);
    let name = placement.name();
    let mut banks = Banks::new(zone, machine.bank_frames, models, machine.page_size);
    let mut hook = BankHook {
        banks: &mut banks,
        last_ns: None,
        page_size: machine.page_size,
    };
    let migration = migrate && placement.migrates();
    let every = migration.then_some(machine.migrate_every_ns.max(1));
    let (kind, result) = match placement {
        TracePlacement::Allocator(kind) => {
            let built = build(kind, zone, cpus, machine.bank_frames).map_err(layout)?;
            let result = replay::run(&mut Migrating(&*built), &mut hook, events, every);
            (Some(kind), result)
        }
        TracePlacement::AsRecorded => {
            let mut recorded = Recorded {
                limit_frames: Some(machine.frames),
            };
            (None, replay::run(&mut recorded, &mut hook, events, None))
        }
    };
    let stats = result.map_err(|e| match e {
        ReplayError::Trace(e) => PowerStudyError::Trace(Box::new(e)),
        ReplayError::Allocator {
            pfn, order, error, ..
        } => PowerStudyError::Allocator {
            allocator: name,
            pfn,
            order,
            error,
        },
        ReplayError::LostMove { old, .. } => PowerStudyError::LostMove {
            allocator: name,
            old,
        },
    })?;
    let migrated = MigrationCount {
        pages: stats.pages_migrated,
        blocks: stats.blocks_migrated,
        passes: stats.migration_passes,
    };
    Ok(banks.row(kind, name, migration, &migrated, stats.alloc_failures))
}

/// Who places a traced block.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TracePlacement {
    /// An allocator under test.
    Allocator(AllocatorKind),
    /// The kernel's own placement: the traced pfn (Linux as recorded).
    AsRecorded,
}

impl TracePlacement {
    /// Display name.
    pub const fn name(self) -> &'static str {
        match self {
            TracePlacement::Allocator(a) => a.name(),
            TracePlacement::AsRecorded => "Linux (as recorded)",
        }
    }

    /// Whether migration can run.
    pub const fn migrates(self) -> bool {
        match self {
            TracePlacement::Allocator(a) => a.caps().banks,
            TracePlacement::AsRecorded => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmos_trace::Op;

    fn machine() -> SyntheticMachine {
        // 64 MiB in 16 banks of 4 MiB.
        SyntheticMachine {
            name: "64 MiB".into(),
            frames: 16384,
            bank_frames: 1024,
            page_size: 4096,
        }
    }

    fn models() -> Vec<PowerModel> {
        vec![PowerModel::preset("seed004-relative").unwrap()]
    }

    fn small(mut w: Workload) -> Workload {
        w.epochs = 40;
        w
    }

    #[test]
    fn same_seed_same_figures_and_migration_helps_adaptive() {
        let w = small(Workload::light(7));
        let a = run_synthetic(AllocatorKind::Adaptive, false, &w, &machine(), &models()).unwrap();
        let b = run_synthetic(AllocatorKind::Adaptive, false, &w, &machine(), &models()).unwrap();
        assert_eq!(a.offline_percent, b.offline_percent);
        assert_eq!(a.bank_map, b.bank_map);
        let m = run_synthetic(AllocatorKind::Adaptive, true, &w, &machine(), &models()).unwrap();
        // Same requests, so the same footprint and optimum.
        assert_eq!(a.optimum_offline_percent, m.optimum_offline_percent);
        assert!(m.pages_migrated > 0 && m.migration_passes == 40);
        assert!(
            m.offline_percent >= a.offline_percent,
            "{} < {}",
            m.offline_percent,
            a.offline_percent
        );
        assert!(m.offline_percent <= m.optimum_offline_percent + 1e-9);
        assert!(m.energy[0].report.migration > 0.0);
        assert_eq!(a.energy[0].report.migration, 0.0);
    }

    #[test]
    fn buddy_cannot_migrate_and_keeps_more_banks_up() {
        let w = small(Workload::light(3));
        let buddy = run_synthetic(AllocatorKind::Buddy, true, &w, &machine(), &models()).unwrap();
        assert!(!buddy.migration && buddy.pages_migrated == 0);
        let adaptive =
            run_synthetic(AllocatorKind::Adaptive, true, &w, &machine(), &models()).unwrap();
        assert!(adaptive.migration);
        assert!(adaptive.offline_percent > buddy.offline_percent);
        assert!(adaptive.pinned_banks <= buddy.pinned_banks);
    }

    #[test]
    fn bad_workloads_and_layouts_are_clear_errors() {
        let mut w = Workload::medium(1);
        w.footprint_max_percent = 120.0;
        let err =
            run_synthetic(AllocatorKind::Buddy, false, &w, &machine(), &models()).unwrap_err();
        assert!(
            err.to_string()
                .contains("footprint_max_percent = 120% is outside 0–100%"),
            "{err}"
        );
        let mut w = Workload::medium(1);
        w.footprint_min_percent = 90.0;
        assert!(run_synthetic(AllocatorKind::Buddy, false, &w, &machine(), &models()).is_err());
        let mut m = machine();
        m.bank_frames = 1000;
        let err = run_synthetic(
            AllocatorKind::Buddy,
            false,
            &Workload::light(1),
            &m,
            &models(),
        )
        .unwrap_err();
        let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(chain.contains("does not divide zone 0"), "{chain}");
    }

    #[test]
    fn trace_replay_follows_migrated_blocks() {
        use std::convert::Infallible;
        let ev = |t: u64, op: Op, pfn: u64| -> Result<Event, Infallible> {
            Ok(Event {
                time_ns: t,
                cpu: 0,
                op,
                pfn: Pfn(pfn),
                order: Order::ZERO,
            })
        };
        // Fill two banks' worth of user pages, free most, migrate, free the rest.
        let mut trace = Vec::new();
        for p in 0..2048u64 {
            trace.push(ev(p, Op::Alloc(MigrateType::Movable), 100_000 + p));
        }
        for p in 0..2048u64 {
            if p % 16 != 0 {
                trace.push(ev(3000 + p, Op::Free, 100_000 + p));
            }
        }
        for p in (0..2048u64).step_by(16) {
            trace.push(ev(2_000_000_000 + p, Op::Free, 100_000 + p));
        }
        let m = TraceMachine {
            frames: 16384,
            bank_frames: 1024,
            page_size: 4096,
            cpus: 1,
            migrate_every_ns: 1_000_000_000,
        };
        let row = run_trace(
            TracePlacement::Allocator(AllocatorKind::Adaptive),
            true,
            trace.clone(),
            &m,
            &models(),
        )
        .unwrap();
        assert!(row.pages_migrated > 0, "{row:?}");
        assert_eq!(row.up_banks, 0, "every block freed through its new place");
        // The kernel's own placement: pfns 100000.. lie in banks 97 and 98
        // of a machine large enough.
        let big = TraceMachine {
            frames: 1 << 17,
            ..m
        };
        let linux = run_trace(TracePlacement::AsRecorded, true, trace, &big, &models()).unwrap();
        assert!(!linux.migration && linux.pages_migrated == 0);
        assert_eq!(linux.up_banks, 0);
        assert!(linux.max_offline_percent < 100.0);
    }
}
