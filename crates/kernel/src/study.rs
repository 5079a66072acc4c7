//! `nvmos kernel study`: every policy × every workload in the patched
//! kernel, the in-kernel wear of each run, the banks kernel pages pin
//! (`adaptive` against `buddy`, seed 004's target), and replay against
//! reality: the `buddy` run's trace replayed through nvmos' iBuddy,
//! LiS-1, LiS-31 and Adaptive-Buddy against what the kernel running those
//! policies actually did.

use std::convert::Infallible;

use nvmos_sim::{study_allocator, study_as_recorded, AllocatorKind, StudyOptions, WearSummary};

use std::collections::BTreeMap;

use crate::run::{run, Counters, Policy, RunOptions};
use crate::{KernelError, Progress, Result};

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Template for every guest (kernel, memory, CPUs, timeouts); its
    /// policy, command and output are set per run.
    pub run: RunOptions,
    /// Policies booted.
    pub policies: Vec<Policy>,
    /// Workloads (names from [`crate::run::WORKLOADS`]).
    pub workloads: Vec<String>,
    /// Runs of each policy × workload.
    pub runs: u32,
    /// A folder for what finished so far: after every run the study so
    /// far is written there as `kernel.json`, and each run's trace as
    /// `POLICY-WORKLOAD-RUN.nvt`. A study cut short leaves its finished
    /// runs.
    pub keep: Option<std::path::PathBuf>,
}

impl Options {
    /// Seed 004's Fig. 10 and pinned banks in the kernel: `buddy`,
    /// `adaptive` and `adaptive-migrate` on the sparse, pressure and file
    /// jobs, 2 runs each, one vCPU under `-icount shift=0`, banks of
    /// 16 MiB (128 in the 2 GiB guest, so that where kernel pages land
    /// shows), sampled every second of guest time. `run` is the template
    /// (kernel, memory, QEMU).
    pub fn banks(mut run: RunOptions) -> Options {
        run.cpus = 1;
        run.bank_mib = 16;
        run.use_icount();
        run.sample_ms = Some(1000);
        Options {
            run,
            policies: vec![Policy::Buddy, Policy::Adaptive, Policy::AdaptiveMigrate],
            workloads: ["sparsejob", "pressurejob", "filejob"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            runs: 2,
            keep: None,
        }
    }
}

/// One sample of a run's timeline (seed 004's Fig. 10): what the guest's
/// `nvmos_policy` file said at a moment of the workload.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimelinePoint {
    /// Guest seconds since the first sample (under `-icount shift=0`,
    /// 10^9 instructions a second).
    pub t_s: f64,
    /// Frames not in use, percent of the guest's banks.
    pub free_percent: f64,
    /// Frames of banks with no frame in use, which could be powered
    /// down or offlined whole, percent of the guest's banks.
    pub offlinable_percent: f64,
    /// Banks holding a frame in use.
    pub used_banks: usize,
    /// Banks holding a pinned (unmovable) frame.
    pub pinned_banks: usize,
    /// Frames moved by migration so far (`adaptive-migrate`; 0 otherwise).
    pub migrated_frames: u64,
}

impl TimelinePoint {
    /// The point of sample `c`, `t0_ns` being the first sample's time.
    pub fn of(c: &crate::run::Counters, t0_ns: u64, bank_frames: u64) -> TimelinePoint {
        let mut used: BTreeMap<u64, u64> = BTreeMap::new();
        for b in &c.banks {
            *used.entry(b.bank).or_insert(0) += b.used;
        }
        let total = (used.len() as u64 * bank_frames).max(1) as f64;
        let in_use: u64 = used.values().sum();
        let idle = used.values().filter(|&&u| u == 0).count() as u64;
        TimelinePoint {
            t_s: c.get("time_ns").saturating_sub(t0_ns) as f64 / 1e9,
            free_percent: 100.0 * (1.0 - in_use as f64 / total),
            offlinable_percent: 100.0 * (idle * bank_frames) as f64 / total,
            used_banks: c.used_banks(),
            pinned_banks: c.pinned_banks(),
            migrated_frames: c.get("migrate_moved_frames"),
        }
    }
}

/// What `adaptive-migrate`'s passes did during a workload.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Migration {
    /// Passes run.
    pub passes: u64,
    /// Banks chosen as candidates (a bank chosen in two passes counts twice).
    pub candidate_banks: u64,
    /// Of those, banks offline when their pass ended.
    pub emptied_banks: u64,
    /// Frames moved.
    pub moved_frames: u64,
    /// Frames taken off the LRU lists but put back (no room, or busy).
    pub failed_frames: u64,
    /// Frames in use in candidate banks that could not be taken off.
    pub unmovable_frames: u64,
    /// The passes' own CPU time in guest nanoseconds (bank walks
    /// included): instructions under `-icount shift=0` on one vCPU.
    pub task_ns: u64,
    /// `task_ns` per moved frame (NaN when none moved).
    #[serde(deserialize_with = "nan")]
    pub ns_per_moved_frame: f64,
}

impl Migration {
    /// From the counters' increase over the workload; `None` when the
    /// guest ran no migration.
    fn of(delta: &BTreeMap<String, u64>, end: &crate::run::Counters) -> Option<Migration> {
        end.values.get("migrate_passes")?;
        let d = |k: &str| delta.get(k).copied().unwrap_or(0);
        let moved = d("migrate_moved_frames");
        Some(Migration {
            passes: d("migrate_passes"),
            candidate_banks: d("migrate_candidate_banks"),
            emptied_banks: d("migrate_emptied_banks"),
            moved_frames: moved,
            failed_frames: d("migrate_failed_frames"),
            unmovable_frames: d("migrate_unmovable_frames"),
            task_ns: d("migrate_task_ns"),
            ns_per_moved_frame: if moved == 0 {
                f64::NAN
            } else {
                d("migrate_task_ns") as f64 / moved as f64
            },
        })
    }
}

/// A run that failed (the study goes on with the others).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct FailedRun {
    /// Policy booted.
    pub policy: Policy,
    /// Workload.
    pub workload: String,
    /// Run number, from 1.
    pub run: u32,
    /// Why.
    pub error: String,
}

/// One guest run, summarised.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct RunRow {
    /// Policy booted.
    pub policy: Policy,
    /// Workload.
    pub workload: String,
    /// Run number, from 1.
    pub run: u32,
    /// `kvm` or `tcg`.
    pub accel: String,
    /// Host seconds to the guest's init.
    #[serde(deserialize_with = "nan")]
    pub boot_s: f64,
    /// Host seconds for the run.
    #[serde(deserialize_with = "nan")]
    pub total_s: f64,
    /// Events traced.
    pub events: u64,
    /// Events the kernel lost.
    pub lost_events: u64,
    /// Frees the replay could not match (frames allocated before tracing).
    pub frees_before_recording: u64,
    /// Wear of the kernel's own placement during the workload.
    pub wear: WearSummary,
    /// Counters after the workload.
    pub counters: Counters,
    /// Counter increase over the workload (after − before).
    pub counter_delta: std::collections::BTreeMap<String, u64>,
    /// Banks holding frames in use at the end.
    pub used_banks: usize,
    /// Banks holding kernel (pinned) frames at the end.
    pub pinned_banks: usize,
    /// Banks in the guest.
    pub banks: usize,
    /// Banks holding kernel pages the page-frame policy placed: pinned
    /// frames beyond the bank's `PG_reserved` ones (memblock's, placed
    /// before the page allocator existed).
    pub pinned_banks_placed: usize,
    /// Of those, banks still pinned without the pinned frames the trace
    /// buffers added (the bank's pinned increase while they were sized):
    /// the workload's and the boot's kernel pages, not the recorder's.
    pub pinned_banks_placed_untraced: usize,
    /// Banks whose pinned frames are all `PG_reserved`.
    pub pinned_banks_reserved_only: usize,
    /// Pinned banks holding no `PG_reserved` frame: the banks the
    /// policy's placement added to the ones memblock pinned.
    pub pinned_banks_added: usize,
    /// Of those, banks still pinned without the trace buffers' frames.
    pub pinned_banks_added_untraced: usize,
    /// Frames pinned at the end that are `PG_reserved` (memblock's).
    pub reserved_pinned_frames: u64,
    /// Frames the trace buffers pinned (sum over banks of the pinned
    /// increase while they were sized).
    pub trace_buffer_frames: u64,
    /// Frames pinned at the end.
    pub pinned_frames: u64,
    /// Banks pinned at the end that held no pinned frame when the
    /// workload started (after boot and the trace buffers): the banks
    /// the workload's kernel pages pinned.
    pub pinned_banks_workload: usize,
    /// The most banks pinned at any sample of the timeline that held no
    /// pinned frame when the workload started: the banks the workload's
    /// kernel pages pinned while it ran (0 without a timeline).
    #[serde(default)]
    pub pinned_banks_workload_peak: usize,
    /// The workload's timeline, one point per sample (empty when the
    /// study took no samples).
    pub timeline: Vec<TimelinePoint>,
    /// What migration did (`adaptive-migrate` only).
    pub migration: Option<Migration>,
    /// Per-bank frame flags at the end (`/proc/kpageflags`).
    pub page_flags: crate::run::PageFlagBanks,
    /// The guest's console log (its run folder holds `data.img`).
    pub console_log: std::path::PathBuf,
    /// The run's trace, when the study keeps them.
    pub trace: Option<std::path::PathBuf>,
}

/// Replay of the `buddy` trace through a model against the kernel policy it models.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ReplayRow {
    /// Workload.
    pub workload: String,
    /// The kernel policy measured.
    pub policy: Policy,
    /// The nvmos allocator the buddy trace was replayed through.
    pub model: String,
    /// Replay's most written frame (median over runs).
    #[serde(deserialize_with = "nan")]
    pub predicted_max: f64,
    /// Replay's mean writes per frame (median over runs).
    #[serde(deserialize_with = "nan")]
    pub predicted_mean: f64,
    /// The kernel's most written frame under the policy (median over runs).
    #[serde(deserialize_with = "nan")]
    pub measured_max: f64,
    /// The kernel's mean writes per frame (median over runs).
    #[serde(deserialize_with = "nan")]
    pub measured_mean: f64,
    /// predicted / measured max.
    #[serde(deserialize_with = "nan")]
    pub ratio_max: f64,
    /// predicted / measured mean.
    #[serde(deserialize_with = "nan")]
    pub ratio_mean: f64,
}

/// The study's result.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Study {
    /// Guest memory, MiB.
    pub mem_mib: u64,
    /// Guest CPUs.
    pub cpus: u32,
    /// Every run.
    pub runs: Vec<RunRow>,
    /// Replay against reality.
    pub replay: Vec<ReplayRow>,
    /// Per workload: median buddy max over median iBuddy max (the
    /// target is at least 10).
    #[serde(deserialize_with = "nan_pairs")]
    pub ibuddy_max_reduction: Vec<(String, f64)>,
    /// Bank size of every run, MiB.
    pub bank_mib: u64,
    /// Per workload: banks holding kernel pages at the end, `adaptive`
    /// against `buddy` (the target: at most 1/4).
    pub pinned_banks: Vec<PinnedRow>,
    /// Milliseconds of guest time between the timeline's samples; `None`
    /// when the study took none.
    #[serde(default)]
    pub sample_ms: Option<u64>,
    /// Whether the guests ran under `-icount shift=0` (guest time is then
    /// instructions, one nanosecond each).
    #[serde(default)]
    pub icount: bool,
    /// Runs that failed; the study went on without them.
    pub failed: Vec<FailedRun>,
    /// Runs planned (policies × workloads × runs).
    pub planned: usize,
}

/// Why a finished study is incomplete: some runs failed (the study went
/// on without them; a run whose kernel reported a problem fails), or
/// some runs lost trace events (their figures are not the workload's).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Incomplete {
    /// Runs that failed, `policy workload run N: why` each.
    #[error("{} of {planned} runs failed: {}", runs.len(), runs.join("; "))]
    Failed {
        /// The failed runs.
        runs: Vec<String>,
        /// Runs planned.
        planned: usize,
    },
    /// Runs that lost trace events, `policy workload run N` each.
    #[error("{} runs lost trace events: {}", runs.len(), runs.join(", "))]
    Unclean {
        /// The runs.
        runs: Vec<String>,
    },
}

impl Study {
    /// `None` when every planned run finished (a kernel problem fails the
    /// run) with no lost event; else what is missing or suspect (failed
    /// runs first).
    pub fn incomplete(&self) -> Option<Incomplete> {
        if !self.failed.is_empty() {
            let runs = self.failed.iter().map(|f| {
                format!(
                    "{} {} run {}: {}",
                    f.policy.name(),
                    f.workload,
                    f.run,
                    f.error
                )
            });
            return Some(Incomplete::Failed {
                runs: runs.collect(),
                planned: self.planned,
            });
        }
        let unclean: Vec<String> = self
            .runs
            .iter()
            .filter(|r| r.lost_events > 0)
            .map(|r| format!("{} {} run {}", r.policy.name(), r.workload, r.run))
            .collect();
        (!unclean.is_empty()).then_some(Incomplete::Unclean { runs: unclean })
    }
}

/// Banks kernel pages pin at the end of a workload, `adaptive` against `buddy`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PinnedRow {
    /// Workload.
    pub workload: String,
    /// Median over the buddy runs.
    #[serde(deserialize_with = "nan")]
    pub buddy: f64,
    /// Median over the adaptive runs.
    #[serde(deserialize_with = "nan")]
    pub adaptive: f64,
    /// adaptive / buddy (target ≤ 0.25).
    #[serde(deserialize_with = "nan")]
    pub ratio: f64,
    /// Banks holding kernel pages the policy placed (not memblock's):
    /// median over the buddy runs.
    #[serde(deserialize_with = "nan")]
    pub buddy_placed: f64,
    /// The same over the adaptive runs.
    #[serde(deserialize_with = "nan")]
    pub adaptive_placed: f64,
    /// adaptive_placed / buddy_placed.
    #[serde(deserialize_with = "nan")]
    pub ratio_placed: f64,
    /// Banks pinned by placed kernel pages other than the trace buffers:
    /// median over the buddy runs.
    #[serde(deserialize_with = "nan")]
    pub buddy_untraced: f64,
    /// The same over the adaptive runs.
    #[serde(deserialize_with = "nan")]
    pub adaptive_untraced: f64,
    /// adaptive_untraced / buddy_untraced.
    #[serde(deserialize_with = "nan")]
    pub ratio_untraced: f64,
    /// Banks pinned with no memblock (`PG_reserved`) frame: median over
    /// the buddy runs.
    #[serde(deserialize_with = "nan")]
    pub buddy_added: f64,
    /// The same over the adaptive runs.
    #[serde(deserialize_with = "nan")]
    pub adaptive_added: f64,
    /// The same without the trace buffers, buddy.
    #[serde(deserialize_with = "nan")]
    pub buddy_added_untraced: f64,
    /// The same without the trace buffers, adaptive.
    #[serde(deserialize_with = "nan")]
    pub adaptive_added_untraced: f64,
    /// Banks pinned by the workload's kernel pages alone (pinned at the
    /// end, none at its start): median over the buddy runs.
    #[serde(deserialize_with = "nan")]
    pub buddy_workload: f64,
    /// The same over the adaptive runs.
    #[serde(deserialize_with = "nan")]
    pub adaptive_workload: f64,
    /// adaptive_workload / buddy_workload (target ≤ 0.25; NaN when
    /// buddy's is 0).
    #[serde(deserialize_with = "nan")]
    pub ratio_workload: f64,
    /// The same over the adaptive-migrate runs (NaN when none ran).
    #[serde(deserialize_with = "nan")]
    pub adaptive_migrate_workload: f64,
    /// The most banks the workload's kernel pages pinned at once while it
    /// ran (from the timeline): median over the buddy runs.
    #[serde(default = "not_measured", deserialize_with = "nan")]
    pub buddy_workload_peak: f64,
    /// The same over the adaptive runs.
    #[serde(default = "not_measured", deserialize_with = "nan")]
    pub adaptive_workload_peak: f64,
    /// adaptive_workload_peak / buddy_workload_peak (target ≤ 0.25; NaN
    /// when buddy's is 0).
    #[serde(default = "not_measured", deserialize_with = "nan")]
    pub ratio_workload_peak: f64,
    /// The same over the adaptive-migrate runs (NaN when none ran).
    #[serde(default = "not_measured", deserialize_with = "nan")]
    pub adaptive_migrate_workload_peak: f64,
    /// Banks in the guest.
    pub banks: usize,
}

/// One replay of a buddy run through a model.
struct Prediction {
    workload: String,
    kind: AllocatorKind,
    max: f64,
    mean: f64,
}

/// A figure JSON wrote as `null` (serde_json writes NaN and the
/// infinities so) read back as NaN: "not measured".
fn nan<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    use serde::Deserialize;
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// `a / b`, NaN when `b` is not positive (nothing to compare with).
fn ratio_of_some(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// A figure an older `kernel.json` lacks.
fn not_measured() -> f64 {
    f64::NAN
}

/// [`nan`] for `(name, figure)` pairs.
fn nan_pairs<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<(String, f64)>, D::Error> {
    use serde::Deserialize;
    Ok(Vec::<(String, Option<f64>)>::deserialize(d)?
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or(f64::NAN)))
        .collect())
}

fn median(v: Vec<f64>) -> f64 {
    nvmos_measure::stats::median(&v).unwrap_or(f64::NAN)
}

/// The model nvmos replays for a kernel policy.
fn model_of(policy: Policy) -> Option<AllocatorKind> {
    match policy {
        Policy::Buddy => None,
        Policy::IBuddy => Some(AllocatorKind::IBuddy),
        Policy::Lis1 => Some(AllocatorKind::Lis1),
        Policy::Lis31 => Some(AllocatorKind::Lis31),
        Policy::Lis31Fair => Some(AllocatorKind::Lis31Fair),
        Policy::Adaptive => Some(AllocatorKind::Adaptive),
        // The replay has no clock of the guest's passes to migrate by.
        Policy::AdaptiveMigrate => None,
        // The simulated M³ colours frames by the simulated machine's
        // banks, not by the guest's boot parameters: not the same frames.
        Policy::M3 => None,
    }
}

/// Run the study.
pub fn run_study(opts: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Study> {
    if opts.runs == 0 || opts.policies.is_empty() || opts.workloads.is_empty() {
        return Err(KernelError::Option(
            "the study needs at least one policy, one workload and one run".to_owned(),
        ));
    }
    let commands = opts
        .workloads
        .iter()
        .map(|w| crate::run::workload_command(w).map(|c| (w.clone(), c)))
        .collect::<Result<Vec<_>>>()?;
    let total = opts.policies.len() * commands.len() * opts.runs as usize;
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    // Predicted (max, mean) per (workload, model) over the buddy runs.
    let mut predicted: Vec<Prediction> = Vec::new();
    let sim = StudyOptions {
        heat_buckets: 0,
        // Adaptive-Buddy's replay cuts memory into the guest's banks.
        bank_frames: opts.run.bank_mib << (20 - 12),
        ..StudyOptions::default()
    };
    if let Some(dir) = &opts.keep {
        std::fs::create_dir_all(dir).map_err(|e| KernelError::io("creating", dir, e))?;
    }
    for (workload, command) in &commands {
        for &policy in &opts.policies {
            for r in 1..=opts.runs {
                let what = format!("{} {workload} run {r}", policy.name());
                progress(Progress::Run {
                    done: rows.len() + failed.len(),
                    total,
                    label: what.clone(),
                });
                let mut ro = opts.run.clone();
                ro.policy = policy;
                ro.command = command.clone();
                ro.output = opts
                    .keep
                    .as_ref()
                    .map(|d| d.join(format!("{}-{workload}-{r}.nvt", policy.name())));
                match one_run(&ro, &opts.policies, workload, r, &what, &sim, progress) {
                    Ok((row, mut preds)) => {
                        rows.push(row);
                        predicted.append(&mut preds);
                    }
                    Err(e) => failed.push(FailedRun {
                        policy,
                        workload: workload.clone(),
                        run: r,
                        error: e.to_string(),
                    }),
                }
                if let Some(dir) = &opts.keep {
                    let so_far = summarise(opts, &commands, &rows, &predicted, &failed, total);
                    let json =
                        serde_json::to_vec_pretty(&so_far).map_err(|e| KernelError::Study {
                            what: "the study so far".to_owned(),
                            detail: e.to_string(),
                        })?;
                    crate::kbuild::write_atomic(&dir.join("kernel.json"), &json)?;
                }
            }
        }
    }
    progress(Progress::Run {
        done: total,
        total,
        label: "done".to_owned(),
    });
    Ok(summarise(
        opts, &commands, &rows, &predicted, &failed, total,
    ))
}

/// Boot one guest and summarise it; a `buddy` run is also replayed
/// through the model of every policy studied.
fn one_run(
    ro: &RunOptions,
    policies: &[Policy],
    workload: &str,
    r: u32,
    what: &str,
    sim: &StudyOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<(RunRow, Vec<Prediction>)> {
    let policy = ro.policy;
    let run = run(ro, progress)?;
    let study_err = |e: String| KernelError::Study {
        what: what.to_owned(),
        detail: e,
    };
    let events = || run.events.iter().map(|e| Ok::<_, Infallible>(*e));
    let recorded =
        study_as_recorded(&run.machine, events(), sim).map_err(|e| study_err(e.to_string()))?;
    let mut predicted = Vec::new();
    if policy == Policy::Buddy {
        for p in policies {
            if let Some(kind) = model_of(*p) {
                let row = study_allocator::<parking_lot::RawMutex, _, _>(
                    kind,
                    &run.machine,
                    events(),
                    &StudyOptions {
                        cpus: Some(run.machine.cpus),
                        ..sim.clone()
                    },
                )
                .map_err(|e| study_err(e.to_string()))?;
                predicted.push(Prediction {
                    workload: workload.to_owned(),
                    kind,
                    max: row.wear.max as f64,
                    mean: row.wear.mean,
                });
            }
        }
    }
    let counter_delta: BTreeMap<String, u64> = run
        .counters
        .values
        .iter()
        .map(|(k, v)| (k.clone(), v.saturating_sub(run.counters_before.get(k))))
        .collect();
    let pins = Pins::of(&run);
    Ok((
        RunRow {
            policy,
            workload: workload.to_owned(),
            run: r,
            accel: run.accel.clone(),
            boot_s: run.boot_s,
            total_s: run.total_s,
            events: run.event_count,
            lost_events: run.counts.lost_events,
            frees_before_recording: recorded.stats.accounting.frees_before_recording,
            wear: recorded.wear,
            used_banks: run.counters.used_banks(),
            pinned_banks: run.counters.pinned_banks(),
            banks: run.counters.bank_count(),
            pinned_banks_placed: pins.placed_banks,
            pinned_banks_placed_untraced: pins.untraced_banks,
            pinned_banks_reserved_only: pins.reserved_only_banks,
            pinned_banks_added: pins.added_banks,
            pinned_banks_added_untraced: pins.added_untraced_banks,
            reserved_pinned_frames: pins.reserved_frames,
            trace_buffer_frames: pins.trace_buffer_frames,
            pinned_frames: pins.pinned_frames,
            pinned_banks_workload: pins.workload_banks,
            pinned_banks_workload_peak: {
                let start = run.counters_traced.pinned_by_bank();
                run.timeline
                    .iter()
                    .map(|c| {
                        c.pinned_by_bank()
                            .iter()
                            .filter(|&(b, &n)| n > 0 && start.get(b).copied().unwrap_or(0) == 0)
                            .count()
                    })
                    .max()
                    .unwrap_or(0)
            },
            timeline: {
                let bank_frames = ro.bank_mib << (20 - 12);
                let t0 = run.timeline.first().map_or(0, |c| c.get("time_ns"));
                run.timeline
                    .iter()
                    .map(|c| TimelinePoint::of(c, t0, bank_frames))
                    .collect()
            },
            migration: Migration::of(&counter_delta, &run.counters),
            page_flags: run.page_flags.clone(),
            console_log: run.console_log.clone(),
            trace: run.output.clone(),
            counter_delta,
            counters: run.counters,
        },
        predicted,
    ))
}

/// Who pins the banks at the end of a run (the fields of [`RunRow`]
/// of the same meaning).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Pins {
    /// Banks holding kernel pages the policy placed.
    pub placed_banks: usize,
    /// Of those, banks pinned beyond the trace buffers' frames.
    pub untraced_banks: usize,
    /// Banks whose pinned frames are all memblock's.
    pub reserved_only_banks: usize,
    /// Pinned banks with no memblock frame.
    pub added_banks: usize,
    /// Of those, banks pinned beyond the trace buffers' frames.
    pub added_untraced_banks: usize,
    /// Pinned frames that are memblock's.
    pub reserved_frames: u64,
    /// Frames the trace buffers pinned.
    pub trace_buffer_frames: u64,
    /// Pinned frames.
    pub pinned_frames: u64,
    /// Banks pinned at the end with no pinned frame when the workload
    /// started.
    pub workload_banks: usize,
}

impl Pins {
    fn of(run: &crate::run::Run) -> Pins {
        Pins::from_banks(
            &run.counters_before.pinned_by_bank(),
            &run.counters_traced.pinned_by_bank(),
            &run.counters.pinned_by_bank(),
            &run.page_flags.reserved,
        )
    }

    /// From the counters a guest left (see [`crate::run::read_guest_counters`]).
    pub fn of_guest(g: &crate::run::GuestCounters) -> Pins {
        Pins::from_banks(
            &g.before.pinned_by_bank(),
            &g.traced.pinned_by_bank(),
            &g.end.pinned_by_bank(),
            &g.page_flags.reserved,
        )
    }

    /// Per bank: pinned frames before and after the trace buffers were
    /// sized and at the end, and `PG_reserved` frames at the end.
    fn from_banks(
        before: &BTreeMap<u64, u64>,
        traced: &BTreeMap<u64, u64>,
        end: &BTreeMap<u64, u64>,
        reserved: &BTreeMap<u64, u64>,
    ) -> Pins {
        let at = |m: &BTreeMap<u64, u64>, b: u64| m.get(&b).copied().unwrap_or(0);
        let mut p = Pins::default();
        for (&bank, &pinned) in end {
            if pinned == 0 {
                continue;
            }
            if at(traced, bank) == 0 {
                p.workload_banks += 1;
            }
            let res = at(reserved, bank).min(pinned);
            let buffer = at(traced, bank).saturating_sub(at(before, bank));
            let placed = pinned - res;
            p.pinned_frames += pinned;
            p.reserved_frames += res;
            p.trace_buffer_frames += buffer;
            if placed > 0 {
                p.placed_banks += 1;
            } else {
                p.reserved_only_banks += 1;
            }
            if placed > buffer {
                p.untraced_banks += 1;
            }
            if res == 0 {
                p.added_banks += 1;
                if placed > buffer {
                    p.added_untraced_banks += 1;
                }
            }
        }
        p
    }
}

/// The study over the runs so far.
fn summarise(
    opts: &Options,
    commands: &[(String, Vec<String>)],
    rows: &[RunRow],
    predicted: &[Prediction],
    failed: &[FailedRun],
    planned: usize,
) -> Study {
    let measured = |workload: &str, policy: Policy, f: &dyn Fn(&RunRow) -> f64| {
        median(
            rows.iter()
                .filter(|r| r.workload == workload && r.policy == policy)
                .map(f)
                .collect(),
        )
    };
    let mut replay = Vec::new();
    let mut reduction = Vec::new();
    let mut pinned = Vec::new();
    for (workload, _) in commands {
        for &policy in &opts.policies {
            let Some(kind) = model_of(policy) else {
                continue;
            };
            let pick = |f: &dyn Fn(&Prediction) -> f64| {
                median(
                    predicted
                        .iter()
                        .filter(|p| &p.workload == workload && p.kind == kind)
                        .map(f)
                        .collect(),
                )
            };
            let (pmax, pmean) = (pick(&|p| p.max), pick(&|p| p.mean));
            if pmax.is_nan() {
                // No buddy run to replay: nothing predicted.
                continue;
            }
            let mmax = measured(workload, policy, &|r| r.wear.max as f64);
            let mmean = measured(workload, policy, &|r| r.wear.mean);
            replay.push(ReplayRow {
                workload: workload.clone(),
                policy,
                model: kind.name().to_owned(),
                predicted_max: pmax,
                predicted_mean: pmean,
                measured_max: mmax,
                measured_mean: mmean,
                ratio_max: pmax / mmax,
                ratio_mean: pmean / mmean,
            });
        }
        let buddy = measured(workload, Policy::Buddy, &|r| r.wear.max as f64);
        let ib = measured(workload, Policy::IBuddy, &|r| r.wear.max as f64);
        if !buddy.is_nan() && !ib.is_nan() {
            reduction.push((workload.clone(), buddy / ib));
        }
        let buddy = measured(workload, Policy::Buddy, &|r| r.pinned_banks as f64);
        let ad = measured(workload, Policy::Adaptive, &|r| r.pinned_banks as f64);
        if !buddy.is_nan() && !ad.is_nan() {
            let bp = measured(workload, Policy::Buddy, &|r| r.pinned_banks_placed as f64);
            let ap = measured(workload, Policy::Adaptive, &|r| {
                r.pinned_banks_placed as f64
            });
            let bu = measured(workload, Policy::Buddy, &|r| {
                r.pinned_banks_placed_untraced as f64
            });
            let au = measured(workload, Policy::Adaptive, &|r| {
                r.pinned_banks_placed_untraced as f64
            });
            // Banks the workload's own kernel pages pinned: at its end, or
            // at the timeline's peak.
            let workload_banks = |policy: Policy, peak: bool| {
                measured(workload, policy, &|r| {
                    if peak {
                        r.pinned_banks_workload_peak as f64
                    } else {
                        r.pinned_banks_workload as f64
                    }
                })
            };
            pinned.push(PinnedRow {
                workload: workload.clone(),
                buddy,
                adaptive: ad,
                ratio: ad / buddy,
                buddy_placed: bp,
                adaptive_placed: ap,
                ratio_placed: ap / bp,
                buddy_untraced: bu,
                adaptive_untraced: au,
                ratio_untraced: au / bu,
                buddy_added: measured(workload, Policy::Buddy, &|r| r.pinned_banks_added as f64),
                adaptive_added: measured(workload, Policy::Adaptive, &|r| {
                    r.pinned_banks_added as f64
                }),
                buddy_added_untraced: measured(workload, Policy::Buddy, &|r| {
                    r.pinned_banks_added_untraced as f64
                }),
                adaptive_added_untraced: measured(workload, Policy::Adaptive, &|r| {
                    r.pinned_banks_added_untraced as f64
                }),
                buddy_workload: workload_banks(Policy::Buddy, false),
                adaptive_workload: workload_banks(Policy::Adaptive, false),
                ratio_workload: ratio_of_some(
                    workload_banks(Policy::Adaptive, false),
                    workload_banks(Policy::Buddy, false),
                ),
                adaptive_migrate_workload: workload_banks(Policy::AdaptiveMigrate, false),
                buddy_workload_peak: workload_banks(Policy::Buddy, true),
                adaptive_workload_peak: workload_banks(Policy::Adaptive, true),
                ratio_workload_peak: ratio_of_some(
                    workload_banks(Policy::Adaptive, true),
                    workload_banks(Policy::Buddy, true),
                ),
                adaptive_migrate_workload_peak: workload_banks(Policy::AdaptiveMigrate, true),
                banks: rows
                    .iter()
                    .find(|r| &r.workload == workload)
                    .map_or(0, |r| r.banks),
            });
        }
    }
    Study {
        mem_mib: opts.run.mem_mib,
        cpus: opts.run.cpus,
        runs: rows.to_vec(),
        replay,
        ibuddy_max_reduction: reduction,
        bank_mib: opts.run.bank_mib,
        pinned_banks: pinned,
        sample_ms: opts.run.sample_ms,
        icount: opts.run.uses_icount(),
        failed: failed.to_vec(),
        planned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_banks_split_into_memblock_trace_buffer_and_placed() {
        let m = |v: &[(u64, u64)]| v.iter().copied().collect::<BTreeMap<u64, u64>>();
        // Bank 0: memblock's only. Bank 1: memblock's and 10 placed.
        // Bank 2: filled by the trace buffers (100 frames). Bank 3: 5
        // placed, 3 of them trace buffer. Bank 4: nothing pinned. Bank 5:
        // pinned by the workload alone.
        let before = m(&[(0, 50), (1, 55)]);
        let traced = m(&[(0, 50), (1, 55), (2, 100), (3, 3)]);
        let end = m(&[(0, 50), (1, 60), (2, 100), (3, 5), (4, 0), (5, 2)]);
        let reserved = m(&[(0, 50), (1, 50), (4, 7)]);
        let p = Pins::from_banks(&before, &traced, &end, &reserved);
        assert_eq!(
            p,
            Pins {
                placed_banks: 4,
                untraced_banks: 3,
                reserved_only_banks: 1,
                added_banks: 3,
                added_untraced_banks: 2,
                reserved_frames: 100,
                trace_buffer_frames: 103,
                pinned_frames: 217,
                workload_banks: 1,
            }
        );
    }

    #[test]
    fn a_timeline_point_counts_idle_banks_across_zones_and_migration_its_delta() {
        let c = crate::run::Counters::parse(
            "policy adaptive-migrate\ntime_ns 3500000000\nmigrate_passes 3\nmigrate_moved_frames 40\n\
             bank 0 DMA 10 10 kernel\nbank 0 DMA32 0 0 kernel\nbank 1 DMA32 0 0 offline\n\
             bank 2 DMA32 512 0 user\nbank 3 DMA32 0 0 offline\n",
        )
        .unwrap();
        let p = TimelinePoint::of(&c, 1_500_000_000, 1024);
        assert_eq!(p.t_s, 2.0);
        // 4 banks of 1024: 522 in use; banks 1 and 3 idle.
        assert!((p.free_percent - 100.0 * (1.0 - 522.0 / 4096.0)).abs() < 1e-9);
        assert_eq!(p.offlinable_percent, 50.0);
        assert_eq!(
            (p.used_banks, p.pinned_banks, p.migrated_frames),
            (2, 1, 40)
        );
        let delta: BTreeMap<String, u64> = [
            ("migrate_passes", 3),
            ("migrate_moved_frames", 0),
            ("migrate_task_ns", 900),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let m = Migration::of(&delta, &c).unwrap();
        assert_eq!(m.passes, 3);
        assert!(
            m.ns_per_moved_frame.is_nan(),
            "nothing moved: no cost per frame"
        );
        let plain = crate::run::Counters::parse("policy adaptive\n").unwrap();
        assert_eq!(Migration::of(&delta, &plain), None);
    }

    #[test]
    fn a_failed_run_makes_the_study_incomplete_and_says_which() {
        let mut s = Study {
            mem_mib: 512,
            cpus: 2,
            runs: Vec::new(),
            replay: Vec::new(),
            ibuddy_max_reduction: Vec::new(),
            bank_mib: 16,
            pinned_banks: Vec::new(),
            sample_ms: None,
            icount: false,
            failed: Vec::new(),
            planned: 4,
        };
        assert_eq!(s.incomplete(), None);
        s.failed.push(FailedRun {
            policy: Policy::IBuddy,
            workload: "memstress".into(),
            run: 2,
            error: "the guest stalled".into(),
        });
        assert_eq!(
            s.incomplete().unwrap().to_string(),
            format!(
                "1 of 4 runs failed: {} memstress run 2: the guest stalled",
                Policy::IBuddy.name()
            )
        );
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }
}
