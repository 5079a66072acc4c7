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

/// A run that failed (the study goes on with the others).
#[derive(Clone, Debug, serde::Serialize)]
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
#[derive(Clone, Debug, serde::Serialize)]
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
    pub boot_s: f64,
    /// Host seconds for the run.
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
    /// Per-bank frame flags at the end (`/proc/kpageflags`).
    pub page_flags: crate::run::PageFlagBanks,
    /// The guest's console log (its run folder holds `data.img`).
    pub console_log: std::path::PathBuf,
    /// The run's trace, when the study keeps them.
    pub trace: Option<std::path::PathBuf>,
}

/// Replay of the `buddy` trace through a model against the kernel policy it models.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ReplayRow {
    /// Workload.
    pub workload: String,
    /// The kernel policy measured.
    pub policy: Policy,
    /// The nvmos allocator the buddy trace was replayed through.
    pub model: String,
    /// Replay's most written frame (median over runs).
    pub predicted_max: f64,
    /// Replay's mean writes per frame (median over runs).
    pub predicted_mean: f64,
    /// The kernel's most written frame under the policy (median over runs).
    pub measured_max: f64,
    /// The kernel's mean writes per frame (median over runs).
    pub measured_mean: f64,
    /// predicted / measured max.
    pub ratio_max: f64,
    /// predicted / measured mean.
    pub ratio_mean: f64,
}

/// The study's result.
#[derive(Clone, Debug, serde::Serialize)]
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
    pub ibuddy_max_reduction: Vec<(String, f64)>,
    /// Bank size of every run, MiB.
    pub bank_mib: u64,
    /// Per workload: banks holding kernel pages at the end, `adaptive`
    /// against `buddy` (the target: at most 1/4).
    pub pinned_banks: Vec<PinnedRow>,
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
#[derive(Clone, Debug, serde::Serialize)]
pub struct PinnedRow {
    /// Workload.
    pub workload: String,
    /// Median over the buddy runs.
    pub buddy: f64,
    /// Median over the adaptive runs.
    pub adaptive: f64,
    /// adaptive / buddy (target ≤ 0.25).
    pub ratio: f64,
    /// Banks holding kernel pages the policy placed (not memblock's):
    /// median over the buddy runs.
    pub buddy_placed: f64,
    /// The same over the adaptive runs.
    pub adaptive_placed: f64,
    /// adaptive_placed / buddy_placed.
    pub ratio_placed: f64,
    /// Banks pinned by placed kernel pages other than the trace buffers:
    /// median over the buddy runs.
    pub buddy_untraced: f64,
    /// The same over the adaptive runs.
    pub adaptive_untraced: f64,
    /// adaptive_untraced / buddy_untraced.
    pub ratio_untraced: f64,
    /// Banks pinned with no memblock (`PG_reserved`) frame: median over
    /// the buddy runs.
    pub buddy_added: f64,
    /// The same over the adaptive runs.
    pub adaptive_added: f64,
    /// The same without the trace buffers, buddy.
    pub buddy_added_untraced: f64,
    /// The same without the trace buffers, adaptive.
    pub adaptive_added_untraced: f64,
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
    let counter_delta = run
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
        // placed, 3 of them trace buffer. Bank 4: nothing pinned.
        let before = m(&[(0, 50), (1, 55)]);
        let traced = m(&[(0, 50), (1, 55), (2, 100), (3, 3)]);
        let end = m(&[(0, 50), (1, 60), (2, 100), (3, 5), (4, 0)]);
        let reserved = m(&[(0, 50), (1, 50), (4, 7)]);
        let p = Pins::from_banks(&before, &traced, &end, &reserved);
        assert_eq!(
            p,
            Pins {
                placed_banks: 3,
                untraced_banks: 2,
                reserved_only_banks: 1,
                added_banks: 2,
                added_untraced_banks: 1,
                reserved_frames: 100,
                trace_buffer_frames: 103,
                pinned_frames: 215,
            }
        );
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
