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
//!
//! The study as a whole (workloads × machines, traces, the latency
//! benchmark of Table 5, the checks against the seed and nvmos's targets) is
//! [`PowerStudy`]: options in, plain data out, in the one study shape of
//! [`crate::study`].

mod latency;
mod study;
mod synthetic;
mod timeline;

pub use latency::{LatencyOptions, LatencyResult, LatencyRow, MAX_LATENCY_PAGES};
pub use study::{
    find_row, run as run_study, trace_files, ModelInfo, PowerOptions, PowerStudy, SeedTable2,
    SeedTable5, SyntheticResult, TraceResult, SEED_TABLE2, SEED_TABLE5,
};
pub use synthetic::{run_synthetic, SyntheticMachine, Workload};
use timeline::Timeline;
pub use timeline::{Sample, TIMELINE_POINTS};

use nvmos_frames::sync::SpinYield;
use nvmos_frames::{
    AllocError, BankBuddy, BankPolicy, ConfigError, MigrateType, Move, Order, Pfn, Zone,
};
use nvmos_memsys::power::EnergyMeter;
pub use nvmos_memsys::power::{EnergyReport, PowerModel, PowerState};
use nvmos_trace::Event;

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
    /// The study's options ask for something impossible; the message
    /// names the option.
    #[error("{0}")]
    Options(String),
    /// A power model could not be loaded.
    #[error("power model '{name}'")]
    Model {
        /// The preset name or file as given.
        name: String,
        /// Why.
        #[source]
        source: nvmos_memsys::power::PowerError,
    },
    /// A trace (or the trace folder) could not be opened.
    #[error("opening {}", path.display())]
    Open {
        /// The file or folder.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// One run of the study failed: `what` names it (workload, machine,
    /// allocator; or trace and allocator).
    #[error("{what}")]
    Run {
        /// The run.
        what: String,
        /// Why.
        #[source]
        source: Box<PowerStudyError>,
    },
    /// The latency benchmark's allocator ran out of memory.
    #[error("latency benchmark: {allocator} ran out of memory after {allocated} of {pages} pages")]
    LatencyOutOfMemory {
        /// The allocator.
        allocator: &'static str,
        /// Pages it gave.
        allocated: u64,
        /// Pages asked for.
        pages: u64,
    },
    /// The caller's progress callback asked to stop.
    #[error("stopped by the caller")]
    Cancelled,
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
    /// Free, offline and migrated memory over the run, at most
    /// [`TIMELINE_POINTS`] samples and the end (seed 004's Fig. 10).
    #[serde(default)]
    pub timeline: Vec<Sample>,
}

impl PowerRow {
    /// The row's name in tables: the allocator, with " +migration" when
    /// migration ran and the registry entry does not migrate by itself.
    pub fn label(&self) -> String {
        if self.migration && !self.kind.is_some_and(|k| k.caps().migrates) {
            format!("{} +migration", self.allocator)
        } else {
            self.allocator.clone()
        }
    }
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
    page_size: u64,
    migrated_frames: u64,
    timeline: Timeline,
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
            page_size,
            migrated_frames: 0,
            timeline: Timeline::default(),
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
    /// The state now, `t_s` into the run.
    fn sample(&self, t_s: f64) -> Sample {
        let n = self.kernel.len() as f64;
        let frames = n * self.bank_frames as f64;
        Sample {
            t_s,
            free_percent: 100.0 * (frames - self.allocated as f64) / frames,
            offline_percent: 100.0 * (n - self.up as f64) / n,
            optimum_offline_percent: 100.0 * (n - self.optimum_up() as f64) / n,
            migrated_percent: 100.0 * self.migrated_frames as f64 / frames,
        }
    }

    fn advance(&mut self, seconds: f64) {
        if seconds > 0.0 {
            self.timeline.offer(self.sample(self.seconds));
        }
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
        self.migrated_frames += bytes / self.page_size.max(1);
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
            timeline: self.timeline.clone().finish(self.sample(self.seconds)),
        }
    }
}

#[derive(Default)]
struct MigrationCount {
    pages: u64,
    blocks: u64,
    passes: u64,
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
mod tests;
