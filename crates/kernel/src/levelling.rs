//! Hot-page migration measured in the kernel: the series' `nvmos_hot_ms=`
//! (a pass that counts dirty PTEs as writes to their frames and moves the
//! pages written in many passes to less worn frames) against the same
//! counting with nothing moved, on the write workloads, under one policy.
//!
//! Write-weighted lifetime comes from the guest's own counts: debugfs
//! `nvmos_wear` gives every frame's writes (one per pass in which its
//! page's PTE was dirty) plus the copies it received, and the lifetime is
//! their mean over every present frame of the guest's zones against the
//! most written frame's, as a percentage (the metric of `evaluate`). The
//! counting-only guest samples writes in exactly the same way, so the two
//! are comparable; a write is counted at most once per pass, so the counts
//! are a lower bound of the real writes. Guest time under TCG is not real
//! time: no years are given.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use nvmos_sim::study::{Bound, Check};

use crate::run::{self, HotMigrate, Policy, RunOptions};
use crate::{KernelError, Progress, Result};

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// How every guest boots; its policy is the one measured, its command
    /// and hot-page settings are set per guest.
    pub run: RunOptions,
    /// The workloads, each a command of the initramfs.
    pub workloads: Vec<Vec<String>>,
    /// Hot-page migration's settings (its `threshold` is set to 0 for the
    /// counting-only guests).
    pub hot: HotMigrate,
    /// Guests per workload and setting.
    pub runs: u32,
}

impl Options {
    /// The shipped write workloads (`memstress 512 2`, `sortjob 32 2`, as
    /// `traces/` recorded them, on one vCPU as they were), a pass every 50
    /// ms moving pages written in 4 passes, 3 runs, on the given guest.
    pub fn new(mut run: RunOptions) -> Options {
        run.cpus = 1;
        let words = |s: &str| s.split_whitespace().map(str::to_owned).collect();
        Options {
            run,
            workloads: vec![words("memstress 512 2"), words("sortjob 32 2")],
            hot: HotMigrate::new(50),
            runs: 3,
        }
    }
}

/// One guest's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// 1-based run.
    pub run: u32,
    /// Writes counted (dirty PTEs, one per page per pass).
    pub writes: u64,
    /// Pages moved: one copy each.
    pub copies: u64,
    /// Present frames of the guest's zones.
    pub frames: u64,
    /// Writes plus copies on the most worn frame.
    pub max: u32,
    /// Write-weighted lifetime, % of ideal: mean over `frames` / `max`.
    pub lifetime_pct: f64,
    /// `copies / writes`, percent.
    pub extra_writes_pct: f64,
    /// Passes run.
    pub passes: u64,
    /// Pages found hot.
    pub hot: u64,
    /// Hot pages left for a later pass by the budget.
    pub deferred: u64,
    /// Hot pages with no less worn frame among the candidates.
    pub no_better: u64,
    /// Isolations or migrations that failed.
    pub failed: u64,
    /// Processes skipped because their mmap lock was held.
    pub busy: u64,
    /// The passes' own CPU time, guest ms.
    pub task_ms: f64,
    /// The guest's clock at the end, s (TCG: not real time).
    pub guest_s: f64,
    /// Host seconds of the guest run.
    pub host_s: f64,
}

impl Measured {
    /// The figures of a run's report, over the present frames of the
    /// guest's zones.
    pub fn of(run: u32, r: &run::Run) -> std::result::Result<Measured, String> {
        let hot = r.hot.as_ref().ok_or("the run has no hot-page report")?;
        let frames: u64 = r.machine.zones.iter().map(|z| z.present).sum();
        let max = hot.wear.iter().map(|&(_, w)| w).max().unwrap_or(0);
        let total: u64 = hot.wear.iter().map(|&(_, w)| u64::from(w)).sum();
        let (writes, copies) = (hot.get("hot_writes"), hot.get("hot_moved"));
        // Every write counted and every copy is on some frame's wear.
        if total != writes + copies {
            return Err(format!(
                "nvmos_wear sums to {total}, but {writes} writes were counted and {copies} pages copied"
            ));
        }
        // A pass every `ms` of guest time since boot: far fewer means the
        // guest's timers starved (QEMU 7.2's -icount round robin with more
        // than one vCPU can run a compute-bound vCPU for seconds without
        // a tick), and the counts are not those of the settings asked for.
        let guest_s = r.counters.get("time_ns") as f64 / 1e9;
        let expected = guest_s * 1e3 / f64::from(hot.settings.ms);
        let passes = hot.get("hot_passes");
        if (passes as f64) < expected / 2.0 {
            return Err(format!(
                "{passes} hot-page passes in {guest_s:.1} s of guest time, where a pass every {} ms makes about {expected:.0}: the guest's timers starved; under -icount run the guest on one vCPU",
                hot.settings.ms
            ));
        }
        if frames == 0 || max == 0 {
            return Err(format!(
                "no writes counted over {frames} frames: nothing to level"
            ));
        }
        Ok(Measured {
            run,
            writes,
            copies,
            frames,
            max,
            lifetime_pct: 100.0 * total as f64 / frames as f64 / f64::from(max),
            extra_writes_pct: 100.0 * copies as f64 / writes.max(1) as f64,
            passes,
            hot: hot.get("hot_found"),
            deferred: hot.get("hot_deferred"),
            no_better: hot.get("hot_no_better"),
            failed: hot.get("hot_failed"),
            busy: hot.get("hot_busy"),
            task_ms: hot.get("hot_task_ns") as f64 / 1e6,
            guest_s,
            host_s: r.total_s,
        })
    }
}

/// A median with the smallest and largest of the runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Median {
    /// Median.
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Median {
    /// Of `v` (empty: all 0).
    pub fn of(v: &[f64]) -> Median {
        match nvmos_measure::stats::median(v) {
            None => Median::default(),
            Some(median) => Median {
                median,
                min: v.iter().copied().fold(f64::INFINITY, f64::min),
                max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            },
        }
    }
}

/// One workload: counting only against hot-page migration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// The command.
    pub workload: String,
    /// The counting-only guests.
    pub counting: Vec<Measured>,
    /// The guests moving hot pages.
    pub moving: Vec<Measured>,
    /// Lifetime, counting only.
    pub counting_lifetime: Median,
    /// Lifetime with hot-page migration.
    pub moving_lifetime: Median,
    /// Median lifetime with migration over the median counting only.
    pub ratio: f64,
    /// Extra writes with migration, percent.
    pub extra_writes: Median,
    /// The passes' CPU time per guest second with migration, percent.
    pub task_pct: Median,
}

/// The study's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Levelling {
    /// The kernel's cache hash.
    pub kernel: String,
    /// The policy under it.
    pub policy: Policy,
    /// Hot-page migration's settings.
    pub hot: HotMigrate,
    /// Guests per workload and setting.
    pub runs: u32,
    /// vCPUs of every guest.
    pub cpus: u32,
    /// Guest memory, MiB.
    pub mem_mib: u64,
    /// One entry per workload.
    pub workloads: Vec<Workload>,
    /// The target: at least 5× the counting-only lifetime.
    pub checks: Vec<Check>,
    /// Host seconds.
    pub seconds: f64,
}

/// Run the study: runs outermost, so that a drift of the host spreads
/// over every workload and setting.
pub fn levelling(opts: &Options, progress: &mut dyn FnMut(Progress)) -> Result<Levelling> {
    if opts.workloads.is_empty() || opts.runs == 0 {
        return Err(KernelError::Option(
            "kernel levelling needs a workload and a run".into(),
        ));
    }
    if opts.hot.threshold == 0 {
        return Err(KernelError::Option(
            "kernel levelling: a threshold of 0 moves nothing; the counting-only guests are the study's own baseline".into(),
        ));
    }
    opts.hot.check().map_err(KernelError::Option)?;
    let started = Instant::now();
    let built = crate::kbuild::build(&opts.run.build, progress)?;
    let mut counting = vec![Vec::new(); opts.workloads.len()];
    let mut moving = vec![Vec::new(); opts.workloads.len()];
    for run_no in 1..=opts.runs {
        for (w, command) in opts.workloads.iter().enumerate() {
            for moves in [false, true] {
                let mut o = opts.run.clone();
                o.command = command.clone();
                o.output = None;
                o.hot = Some(if moves {
                    opts.hot
                } else {
                    HotMigrate {
                        threshold: 0,
                        ..opts.hot
                    }
                });
                let r = run::run(&o, progress)?;
                if r.workload_status != 0 {
                    return Err(KernelError::Guest {
                        what: format!(
                            "{} exited with status {}",
                            command.join(" "),
                            r.workload_status
                        ),
                        log: r.console_log.clone(),
                    });
                }
                let m = Measured::of(run_no, &r).map_err(|what| KernelError::Guest {
                    what,
                    log: r.console_log.clone(),
                })?;
                let side = if moves { &mut moving } else { &mut counting };
                side[w].push(m);
            }
        }
    }
    let workloads: Vec<Workload> = opts
        .workloads
        .iter()
        .zip(counting.into_iter().zip(moving))
        .map(|(command, (counting, moving))| {
            let life =
                |v: &[Measured]| Median::of(&v.iter().map(|m| m.lifetime_pct).collect::<Vec<_>>());
            let (c, m) = (life(&counting), life(&moving));
            Workload {
                workload: command.join(" "),
                ratio: m.median / c.median,
                counting_lifetime: c,
                moving_lifetime: m,
                extra_writes: Median::of(
                    &moving
                        .iter()
                        .map(|m| m.extra_writes_pct)
                        .collect::<Vec<_>>(),
                ),
                task_pct: Median::of(
                    &moving
                        .iter()
                        .map(|m| 100.0 * m.task_ms / 1e3 / m.guest_s.max(1e-9))
                        .collect::<Vec<_>>(),
                ),
                counting,
                moving,
            }
        })
        .collect();
    let checks = workloads
        .iter()
        .map(|w| {
            Check::new(
                format!(
                    "hot-page migration in the kernel at least 5× {} alone's write-weighted lifetime ({})",
                    opts.run.policy.name(),
                    w.workload
                ),
                "nvmos's target for write-aware levelling in the kernel",
                w.ratio,
                "× counting only",
                Bound::AtLeast(5.0),
            )
            .detail(format!(
                "median {:.4} % of ideal against {:.4} %, {} runs each; extra writes {:.2} %",
                w.moving_lifetime.median,
                w.counting_lifetime.median,
                opts.runs,
                w.extra_writes.median
            ))
        })
        .collect();
    Ok(Levelling {
        kernel: built.hash.clone(),
        policy: opts.run.policy,
        hot: opts.hot,
        runs: opts.runs,
        cpus: opts.run.cpus,
        mem_mib: opts.run.mem_mib,
        workloads,
        checks,
        seconds: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_runs() {
        let m = Median::of(&[3.0, 1.0, 2.0]);
        assert_eq!((m.median, m.min, m.max), (2.0, 1.0, 3.0));
        assert_eq!(Median::of(&[]), Median::default());
    }

    #[test]
    fn a_threshold_of_zero_is_refused_before_any_guest() {
        let run = RunOptions::new(
            crate::kbuild::BuildOptions::new(crate::repo_kernel_dir()),
            crate::repo_workloads_dir(),
            Policy::IBuddy,
            Vec::new(),
        );
        let mut o = Options::new(run);
        o.hot.threshold = 0;
        let e = levelling(&o, &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("threshold of 0"), "{e}");
        o.hot.threshold = 4;
        o.hot.candidates = 99;
        let e = levelling(&o, &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("candidates 99"), "{e}");
    }
}
