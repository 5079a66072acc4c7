//! The power study as a whole (`nvmos study power`, `nvmos.power()`):
//! seed 004's light and medium workloads on each machine size and every
//! trace of a folder, through each allocator without and with migration;
//! the latency benchmark of Table 5; and the checks against the seed's
//! figures and nvmos's targets, as data.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::latency::{self, LatencyOptions, LatencyResult};
use super::{
    run_synthetic, run_trace, PowerModel, PowerRow, PowerStudyError, SyntheticMachine,
    TraceMachine, TracePlacement, Workload,
};
use crate::allocators::AllocatorKind;
use crate::study::{Bound, Check, Progress, Scale, Study};
use crate::units::{format_frames, FRAME_BYTES};

/// What the power study runs. `Default` is the study as the seed ran it
/// (minutes); [`PowerStudy::options`]`(Scale::Quick)` a small version.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PowerOptions {
    /// Machine sizes of the synthetic workloads, in 4 KiB frames.
    pub sizes: Vec<u64>,
    /// Bank size (the power-management unit), in frames: Linux's 128 MiB
    /// memory section by default (256 banks on 32 GiB, the seed's Fig. 3).
    pub bank_frames: u64,
    /// Workloads: `light` (footprint 10–50%), `medium` (30–80%), or
    /// `NAME:MIN-MAX` for another footprint range in percent.
    pub workloads: Vec<String>,
    /// Epochs (simulated seconds) per synthetic run.
    pub epochs: u32,
    /// Share of the footprint that is kernel (unmovable) data, percent.
    pub kernel_percent: f64,
    /// Share of live blocks freed and replaced every epoch, percent.
    pub churn_percent: f64,
    /// Seed of the synthetic workloads.
    pub seed: u64,
    /// Allocators of the registry; the bank-aware ones run without and
    /// with migration.
    pub allocators: Vec<AllocatorKind>,
    /// Power models: presets (`seed004-relative`, `ddr4-2400-micron`,
    /// `lpddr4-3200-micron`) or TOML files.
    pub power: Vec<String>,
    /// Traces to replay: a folder (every file in it but `*.md` and hidden
    /// ones) or one file; `None` skips the traces.
    pub traces: Option<PathBuf>,
    /// Trace time between migration passes, ms.
    pub migrate_every_ms: u64,
    /// The latency benchmark (Table 5); `None` skips it.
    pub latency: Option<LatencyOptions>,
}

impl Default for PowerOptions {
    fn default() -> Self {
        PowerOptions {
            sizes: vec![8 << 20, 1 << 20],
            bank_frames: 32768,
            workloads: vec!["light".into(), "medium".into()],
            epochs: 200,
            kernel_percent: 10.0,
            churn_percent: 5.0,
            seed: 2015,
            allocators: vec![
                AllocatorKind::Buddy,
                AllocatorKind::LinuxPcp,
                AllocatorKind::ArrayBank,
                AllocatorKind::ListBank,
                AllocatorKind::Adaptive,
            ],
            power: vec![
                "seed004-relative".into(),
                "ddr4-2400-micron".into(),
                "lpddr4-3200-micron".into(),
            ],
            traces: Some(PathBuf::from("traces")),
            migrate_every_ms: 1000,
            latency: Some(LatencyOptions::default()),
        }
    }
}

impl PowerOptions {
    /// The migration settings `a` runs with: without and with migration
    /// for the bank-aware allocators whose registry entry does not
    /// migrate, only with for those whose entry does, only without for
    /// the others.
    pub fn migration_runs(a: AllocatorKind) -> &'static [bool] {
        let caps = a.caps();
        if caps.migrates {
            &[true]
        } else if caps.banks {
            &[false, true]
        } else {
            &[false]
        }
    }

    /// The workloads, parsed and checked.
    pub fn parsed_workloads(&self) -> Result<Vec<Workload>, PowerStudyError> {
        self.workloads
            .iter()
            .map(|spec| {
                let mut w = parse_workload(spec, self.seed)?;
                w.epochs = self.epochs;
                w.kernel_percent = self.kernel_percent;
                w.churn_percent = self.churn_percent;
                w.validate()?;
                Ok(w)
            })
            .collect()
    }

    /// Refuse impossible options before anything runs, naming the option.
    pub fn validate(&self) -> Result<(), PowerStudyError> {
        let bad = |m: String| Err(PowerStudyError::Options(m));
        if self.bank_frames == 0 {
            return bad("bank_frames: a bank holds at least one frame".into());
        }
        if self.epochs == 0 {
            return bad("epochs: at least one epoch".into());
        }
        if self.allocators.is_empty() {
            return bad("allocators: name at least one".into());
        }
        // Trace time is in ns; a period of 0 ms would mean a migration pass
        // at every event, and one past u64 ns would never run.
        if self.migrate_every_ms == 0 || self.migrate_every_ms > u64::MAX / 1_000_000 {
            return bad(format!(
                "migrate_every_ms {}: the period between migration passes is 1 ms to {} ms",
                self.migrate_every_ms,
                u64::MAX / 1_000_000
            ));
        }
        for &size in &self.sizes {
            if size == 0 || size % self.bank_frames != 0 {
                return bad(format!(
                    "bank size {} does not divide the machine size {}: give a bank size that divides it",
                    format_frames(self.bank_frames),
                    format_frames(size)
                ));
            }
        }
        if let Some(l) = &self.latency {
            l.validate()?;
        }
        self.parsed_workloads()?;
        Ok(())
    }
}

/// `light`, `medium` or `NAME:MIN-MAX` (percent).
fn parse_workload(spec: &str, seed: u64) -> Result<Workload, PowerStudyError> {
    let bad = |problem: &str| PowerStudyError::Workload {
        workload: spec.to_owned(),
        problem: problem.to_owned(),
    };
    Ok(match spec.to_ascii_lowercase().as_str() {
        "light" => Workload::light(seed),
        "medium" => Workload::medium(seed),
        _ => {
            let (name, range) = spec
                .split_once(':')
                .ok_or_else(|| bad("use light, medium or NAME:MIN-MAX (percent)"))?;
            let (min, max) = range
                .split_once('-')
                .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
                .ok_or_else(|| bad("MIN-MAX must be two numbers"))?;
            Workload::new(name, min, max, seed)
        }
    })
}

/// A power model used, by name, with its energy unit and source.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The model's name.
    pub name: String,
    /// Unit of its energy figures.
    pub unit: String,
    /// Where its figures come from.
    pub source: String,
}

/// One synthetic workload on one machine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyntheticResult {
    /// The workload.
    pub workload: Workload,
    /// The machine.
    pub machine: SyntheticMachine,
    /// One row per allocator and migration setting.
    pub rows: Vec<PowerRow>,
}

/// One trace.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TraceResult {
    /// Short name (the file stem).
    pub trace: String,
    /// The machine replayed on.
    pub machine: TraceMachine,
    /// Frames of the recorded pfn span (for "Linux (as recorded)").
    pub recorded_frames: u64,
    /// Whether the trace named its machine (else the first synthetic
    /// size and one CPU were used).
    pub machine_recorded: bool,
    /// One row per allocator and migration setting, the kernel's own
    /// placement first when the trace names its pfn span.
    pub rows: Vec<PowerRow>,
}

/// The whole study: what `nvmos study power` writes to `power.json`.
#[derive(Clone, Debug, Serialize)]
pub struct PowerStudy {
    /// What was run.
    pub options: PowerOptions,
    /// Power models used.
    pub models: Vec<ModelInfo>,
    /// Synthetic workloads × machines.
    pub synthetic: Vec<SyntheticResult>,
    /// Traces.
    pub traces: Vec<TraceResult>,
    /// Files of the traces folder that are not traces, skipped.
    pub not_traces: Vec<String>,
    /// The latency benchmark (timings of this machine; not deterministic).
    pub latency: Option<LatencyResult>,
    /// nvmos's targets and the seed's figures, held against ours.
    pub checks: Vec<Check>,
}

/// One row of seed 004's Table 2 (average offline memory, %).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SeedTable2 {
    /// Workload.
    pub workload: &'static str,
    /// The seed's machine ("32 GB").
    pub machine: &'static str,
    /// Its memory in 4 KiB frames.
    pub frames: u64,
    /// Most memory offline.
    pub max_offline: f64,
    /// Optimal.
    pub optimal: f64,
    /// Adaptive-Buddy.
    pub adaptive: f64,
}

/// Seed 004's Table 2.
pub const SEED_TABLE2: [SeedTable2; 4] = [
    table2("light", "32 GB", 8 << 20, 81.0, 69.0, 59.5),
    table2("medium", "32 GB", 8 << 20, 56.0, 57.0, 45.7),
    table2("light", "4 GB", 1 << 20, 64.0, 55.0, 48.0),
    table2("medium", "4 GB", 1 << 20, 45.0, 35.0, 26.0),
];

const fn table2(
    workload: &'static str,
    machine: &'static str,
    frames: u64,
    max_offline: f64,
    optimal: f64,
    adaptive: f64,
) -> SeedTable2 {
    SeedTable2 {
        workload,
        machine,
        frames,
        max_offline,
        optimal,
        adaptive,
    }
}

/// One row of seed 004's Table 5 (ns per allocation).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SeedTable5 {
    /// Successive page requests.
    pub pages: u64,
    /// Buddy's mean.
    pub buddy_mean: f64,
    /// Adaptive-Buddy's mean.
    pub adaptive_mean: f64,
    /// Buddy's worst.
    pub buddy_worst: f64,
    /// Adaptive-Buddy's worst.
    pub adaptive_worst: f64,
}

/// Seed 004's Table 5.
pub const SEED_TABLE5: [SeedTable5; 5] = [
    table5(10_000, 285.0, 267.0, 755.0, 1305.0),
    table5(100_000, 266.0, 260.0, 988.0, 2596.0),
    table5(1_000_000, 260.0, 255.0, 999.0, 20794.0),
    table5(2_000_000, 250.0, 255.0, 999.0, 20794.0),
    table5(4_000_000, 249.0, 277.0, 999.0, 21432.0),
];

const fn table5(pages: u64, bm: f64, am: f64, bw: f64, aw: f64) -> SeedTable5 {
    SeedTable5 {
        pages,
        buddy_mean: bm,
        adaptive_mean: am,
        buddy_worst: bw,
        adaptive_worst: aw,
    }
}

impl SeedTable2 {
    /// The seed's row for a synthetic result, if the seed ran that
    /// workload on that machine size.
    pub fn of(s: &SyntheticResult) -> Option<&'static SeedTable2> {
        SEED_TABLE2
            .iter()
            .find(|t| t.workload == s.workload.name && t.frames == s.machine.frames)
    }
}

impl SeedTable5 {
    /// The seed's (mean, worst) ns for `kind` at `pages` requests, if it
    /// measured them (Buddy and Adaptive-Buddy only).
    pub fn of(kind: AllocatorKind, pages: u64) -> Option<(f64, f64)> {
        let t = SEED_TABLE5.iter().find(|t| t.pages == pages)?;
        match kind {
            AllocatorKind::Buddy => Some((t.buddy_mean, t.buddy_worst)),
            AllocatorKind::Adaptive => Some((t.adaptive_mean, t.adaptive_worst)),
            _ => None,
        }
    }
}

/// The row of `kind` with or without migration; Adaptive-Buddy with
/// migration is also the registry's `Adaptive-Buddy+migration`.
pub fn find_row(rows: &[PowerRow], kind: AllocatorKind, migration: bool) -> Option<&PowerRow> {
    let is = |r: &&PowerRow, k| r.kind == Some(k) && r.migration == migration;
    rows.iter().find(|r| is(r, kind)).or_else(|| {
        (kind == AllocatorKind::Adaptive && migration)
            .then(|| rows.iter().find(|r| is(r, AllocatorKind::AdaptiveMigrate)))
            .flatten()
    })
}

impl Study for PowerStudy {
    type Options = PowerOptions;
    type Output = PowerStudy;
    type Error = PowerStudyError;
    const NAME: &'static str = "power";

    fn options(scale: Scale) -> PowerOptions {
        match scale {
            Scale::Full => PowerOptions::default(),
            // 1 GiB and 256 MiB machines with 16 MiB banks, 40 epochs,
            // latency up to 10^5 pages on 1 GiB.
            Scale::Quick => PowerOptions {
                sizes: vec![1 << 18, 1 << 16],
                bank_frames: 4096,
                epochs: 40,
                latency: Some(LatencyOptions::quick()),
                ..PowerOptions::default()
            },
        }
    }

    fn run(
        options: &PowerOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<PowerStudy, PowerStudyError> {
        run(options, &mut |p| {
            progress(p);
            true
        })
    }
}

/// The files of a trace folder (or the one file named), sorted: every
/// file but hidden ones and `*.md`.
pub fn trace_files(path: &Path) -> Result<Vec<PathBuf>, PowerStudyError> {
    Ok(scan_traces(path)?.traces)
}

/// [`trace_files`], with the folder's files that are not traces (none of
/// the formats) set apart: the study skips them and lists them.
pub fn scan_traces(path: &Path) -> Result<nvmos_trace::TraceFolder, PowerStudyError> {
    let folder = nvmos_trace::scan_trace_folder(path).map_err(|e| PowerStudyError::Open {
        path: path.to_owned(),
        // The path is in this error's message; keep only the system's word.
        source: match e {
            nvmos_trace::TraceError::Io { source, .. } => Box::new(source),
            e => Box::new(e),
        },
    })?;
    if folder.traces.is_empty() {
        return Err(PowerStudyError::Options(format!(
            "no traces in {} (skip the traces to run without them)",
            path.display()
        )));
    }
    Ok(folder)
}

/// Run the study. `progress` is called before each step; returning
/// `false` stops the study with [`PowerStudyError::Cancelled`].
pub fn run(
    options: &PowerOptions,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<PowerStudy, PowerStudyError> {
    options.validate()?;
    let models = options
        .power
        .iter()
        .map(|p| {
            PowerModel::load(p).map_err(|source| PowerStudyError::Model {
                name: p.clone(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let workloads = options.parsed_workloads()?;
    let folder = match &options.traces {
        Some(path) => scan_traces(path)?,
        None => nvmos_trace::TraceFolder::default(),
    };
    let trace_files = folder.traces;
    let runs: u64 = options
        .allocators
        .iter()
        .map(|&a| PowerOptions::migration_runs(a).len() as u64)
        .sum();
    let latency_steps = options
        .latency
        .as_ref()
        .map_or(0, |l| (l.pages.len() * options.allocators.len()) as u64);
    let total = runs * (options.sizes.len() * workloads.len()) as u64
        + (runs + 1) * trace_files.len() as u64
        + latency_steps;
    let mut done = 0u64;
    let mut step = |step: String| -> Result<(), PowerStudyError> {
        let go = progress(Progress { done, total, step });
        done += 1;
        if go {
            Ok(())
        } else {
            Err(PowerStudyError::Cancelled)
        }
    };
    let context = |what: String| {
        move |e: PowerStudyError| PowerStudyError::Run {
            what,
            source: Box::new(e),
        }
    };
    let plus = |m: bool| if m { " +migration" } else { "" };

    let mut synthetic = Vec::new();
    for w in &workloads {
        for &frames in &options.sizes {
            let machine = SyntheticMachine {
                name: format_frames(frames),
                frames,
                bank_frames: options.bank_frames,
                page_size: FRAME_BYTES,
            };
            let mut rows = Vec::new();
            for &a in &options.allocators {
                for &migrate in PowerOptions::migration_runs(a) {
                    step(format!(
                        "{} {} {}{}",
                        w.name,
                        machine.name,
                        a.name(),
                        plus(migrate)
                    ))?;
                    let what = format!("{} on {} through {}", w.name, machine.name, a.name());
                    rows.push(
                        run_synthetic(a, migrate, w, &machine, &models).map_err(context(what))?,
                    );
                }
            }
            synthetic.push(SyntheticResult {
                workload: w.clone(),
                machine,
                rows,
            });
        }
    }

    let mut traces = Vec::new();
    let names = crate::evaluate::trace_names(&trace_files);
    for (path, name) in trace_files.iter().zip(names) {
        let open = || {
            nvmos_trace::open(path).map_err(|e| PowerStudyError::Open {
                path: path.clone(),
                source: Box::new(e),
            })
        };
        let source = open()?;
        let info = source.header().and_then(|h| h.machine.clone());
        drop(source);
        let (memory_frames, cpus, span) = match &info {
            Some(m) => (
                m.memory_bytes / m.page_size.max(1),
                m.cpus,
                m.zones
                    .iter()
                    .map(|z| z.start_pfn + z.spanned)
                    .max()
                    .unwrap_or(0),
            ),
            None => (options.sizes.first().copied().unwrap_or(1 << 20), 1, 0),
        };
        let bank_frames = options.bank_frames;
        let frames = memory_frames / bank_frames * bank_frames;
        if frames == 0 {
            return Err(PowerStudyError::Options(format!(
                "{}: the recorded machine is smaller than one bank",
                path.display()
            )));
        }
        let machine = TraceMachine {
            frames,
            bank_frames,
            page_size: FRAME_BYTES,
            cpus: cpus.max(1),
            migrate_every_ns: options.migrate_every_ms * 1_000_000,
        };
        let mut rows = Vec::new();
        // The kernel's own placement over the recorded pfn span (holes
        // included: banks in a hole never hold anything).
        let recorded_frames = span.div_ceil(bank_frames) * bank_frames;
        step(format!("{name} {}", TracePlacement::AsRecorded.name()))?;
        if recorded_frames > 0 {
            let recorded = TraceMachine {
                frames: recorded_frames,
                ..machine.clone()
            };
            let what = format!("{}: the recorded placement", path.display());
            rows.push(
                run_trace(
                    TracePlacement::AsRecorded,
                    false,
                    open()?,
                    &recorded,
                    &models,
                )
                .map_err(context(what))?,
            );
        }
        for &a in &options.allocators {
            for &migrate in PowerOptions::migration_runs(a) {
                step(format!("{name} {}{}", a.name(), plus(migrate)))?;
                let what = format!("{}: replaying through {}", path.display(), a.name());
                let placement = TracePlacement::Allocator(a);
                rows.push(
                    run_trace(placement, migrate, open()?, &machine, &models)
                        .map_err(context(what))?,
                );
            }
        }
        traces.push(TraceResult {
            trace: name,
            machine,
            recorded_frames,
            machine_recorded: info.is_some(),
            rows,
        });
    }

    let latency = match &options.latency {
        None => None,
        Some(l) => {
            let clock = nvmos_measure::timer::Clock::calibrate();
            let mut rows = Vec::new();
            for &n in &l.pages {
                for &a in &options.allocators {
                    step(format!("latency {n} {}", a.name()))?;
                    rows.push(latency::run_one(a, n, l, options.bank_frames, &clock)?);
                }
            }
            Some(LatencyResult {
                frames: l.frames,
                bank_frames: options.bank_frames,
                rounds: l.rounds,
                clock,
                rows,
            })
        }
    };

    let mut study = PowerStudy {
        options: options.clone(),
        models: models
            .iter()
            .map(|m| ModelInfo {
                name: m.spec().name.clone(),
                unit: m.units().energy.to_owned(),
                source: m.spec().source.clone(),
            })
            .collect(),
        synthetic,
        traces,
        not_traces: folder
            .not_traces
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        latency,
        checks: Vec::new(),
    };
    study.checks = checks(&study);
    Ok(study)
}

/// nvmos's targets and the seed's figures against ours.
fn checks(study: &PowerStudy) -> Vec<Check> {
    let mut out = Vec::new();
    for s in &study.synthetic {
        let (w, m) = (&s.workload.name, &s.machine.name);
        let seed = SeedTable2::of(s);
        if let Some(r) = find_row(&s.rows, AllocatorKind::Adaptive, true) {
            let mut c = Check::new(
                format!("Adaptive-Buddy with migration within 5 points of the optimum ({w}, {m})"),
                "nvmos target; seed 004 Table 2",
                r.points_off_optimum,
                "points",
                Bound::AtMost(5.0),
            )
            .detail(format!(
                "{:.1}% offline vs optimum {:.1}%",
                r.offline_percent, r.optimum_offline_percent
            ));
            if let Some(t) = seed {
                c = c.seed(t.optimal - t.adaptive);
            }
            out.push(c);
            if let Some(t) = seed {
                out.push(
                    Check::new(
                        format!("Adaptive-Buddy with migration: offline memory at least the seed's ({w}, {m})"),
                        "seed 004 Table 2",
                        r.offline_percent,
                        "%",
                        Bound::AtLeast(t.adaptive),
                    )
                    .seed(t.adaptive)
                    .detail(format!(
                        "seed on {}: max offline {}%, optimal {}%; ours: optimum {:.1}% (the seed's workload is known only by its footprint range)",
                        t.machine, t.max_offline, t.optimal, r.optimum_offline_percent
                    )),
                );
            }
        }
        if s.workload.name == "light" {
            if let Some(r) = find_row(&s.rows, AllocatorKind::Buddy, false) {
                out.push(
                    Check::new(
                        format!("Buddy keeps nearly every bank up at low occupancy (light, {m})"),
                        "seed 004 §2",
                        r.up_percent_at_low_footprint,
                        "% of banks up",
                        Bound::AtLeast(90.0),
                    )
                    .detail(format!(
                        "at the lowest footprint {:.1}%; mean offline {:.1}% vs optimum {:.1}%; {} of {} banks pinned by kernel pages at the end",
                        r.low_footprint_percent,
                        r.offline_percent,
                        r.optimum_offline_percent,
                        r.pinned_banks,
                        r.banks
                    )),
                );
            }
        }
    }
    if let Some(l) = &study.latency {
        for r in &l.rows {
            let seed = SeedTable5::of(r.kind, r.pages);
            if r.kind == AllocatorKind::Adaptive {
                let mut c = Check::new(
                    format!(
                        "Adaptive-Buddy worst-case allocation at most 10x its mean ({} pages)",
                        r.pages
                    ),
                    "nvmos target; seed 004 Table 5",
                    r.worst_over_mean,
                    "x",
                    Bound::AtMost(10.0),
                )
                .detail(format!(
                    "mean {:.1} ns; worst (min over {} rounds) {:.0} ns; raw max {:.0} ns = {:.1}x; p99.99 {:.0} ns",
                    r.mean_ns, l.rounds, r.worst_ns, r.raw_max_ns, r.raw_max_over_mean, r.p9999_ns
                ));
                if let Some((mean, worst)) = seed {
                    c = c.seed(worst / mean);
                }
                out.push(c);
            }
            if let Some((mean, _)) = seed {
                out.push(
                    Check::new(
                        format!("{} mean allocation at most the seed's ({} pages)", r.allocator, r.pages),
                        "seed 004 Table 5",
                        r.mean_ns,
                        "ns",
                        Bound::AtMost(mean),
                    )
                    .seed(mean)
                    .detail("the seed timed a user-space request (kernel entry and page fault included); ours times the allocator alone"),
                );
            }
        }
    }
    out
}
