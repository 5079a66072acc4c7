//! The swap study (seed 003): SCM as a fast paging device.
//!
//! Runs the paging model ([`nvmos_swap`]) on the seed's PC scenario
//! (clean and aged), a real program's page references (valgrind lackey)
//! and a memory hog, and analyses real swap traffic recorded from Linux
//! (`nvmos record-swap`). Produces the seed's tables and figures as data:
//! request-size and inter-request-distance distributions (reads and
//! writes, clean and aged), swap-in and swap-out time on SCM-133, SCM-400,
//! SLC and MLC, congestion control on and off as device speed rises, the
//! per-fault breakdown, and the lifetime table.

use std::path::{Path, PathBuf};

use nvmos_swap::analysis::{distributions, replay, Distributions};
use nvmos_swap::lifetime::{lifetime_table, Lifetime, WriteProfile, SEED_TABLE};
use nvmos_swap::system::SEED_FAULT_TABLE;
use nvmos_swap::workload::{hog_write_only, pc_scenario, PcScenario};
use nvmos_swap::{
    lackey, run_workload, DeviceSpec, SwapConfig, SwapError, SwapRequest, SwapTrace, Workload,
};
use serde::{Deserialize, Serialize};

use crate::study::{Bound, Check, Progress, Scale, Study};

/// The devices compared (the seed's four).
pub const DEVICES: [&str; 4] = ["SCM-133", "SCM-400", "SLC", "MLC"];

/// Random-write IOPS of the congestion sweep.
pub const IOPS: [f64; 8] = [
    2_500.0, 5_000.0, 10_000.0, 20_000.0, 40_000.0, 80_000.0, 160_000.0, 320_000.0,
];

/// How to run the study.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SwapStudyOptions {
    /// Recorded swap traces (`*.swt.zst`) and lackey traces
    /// (`*.lackey.zst`) are taken from here.
    pub traces: PathBuf,
    /// PC scenario size relative to the seed's 1 GB machine.
    pub pc_scale: f64,
    /// Aging rounds of the aged PC scenario.
    pub aging_rounds: u32,
    /// A lackey program's memory limit as a fraction of the pages it
    /// touches.
    pub lackey_limit: f64,
    /// Pages of the memory hog's memory limit (it writes 4× that).
    pub hog_memory_pages: u64,
    /// Model settings (memory and swap sizes are set per workload).
    pub config: SwapConfig,
    /// Random seed of the synthetic workloads.
    pub seed: u64,
}

impl Default for SwapStudyOptions {
    fn default() -> Self {
        SwapStudyOptions {
            traces: PathBuf::from("traces/swap"),
            pc_scale: 0.25,
            aging_rounds: 4,
            lackey_limit: 0.5,
            hog_memory_pages: 16_384,
            config: SwapConfig::default(),
            seed: 3,
        }
    }
}

/// Sizes and distances of one stream, reads and writes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Pattern {
    /// Which stream ("PC scenario clean", "recorded: clean", ...).
    pub name: String,
    /// Reads.
    pub reads: Distributions,
    /// Writes.
    pub writes: Distributions,
}

impl Pattern {
    fn of(name: &str, requests: &[SwapRequest]) -> Pattern {
        let (reads, writes) = distributions(requests);
        Pattern {
            name: name.into(),
            reads,
            writes,
        }
    }
}

/// One workload on one device.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceTime {
    /// The device.
    pub device: String,
    /// Time processes spent in swap-in faults, s.
    pub swap_in_s: f64,
    /// Swap-out time, s: for the model, time stalled in direct reclaim
    /// plus the device's write time; for recordings, the device's write
    /// time.
    pub swap_out_s: f64,
    /// Device write time, s.
    pub write_busy_s: f64,
    /// Time in congestion waits, s (model only).
    pub congestion_wait_s: f64,
    /// NAND merges.
    pub merges: u64,
}

/// A modelled workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelRun {
    /// Its name.
    pub workload: String,
    /// Memory limit, pages.
    pub memory_pages: u64,
    /// Pages it touches.
    pub pages: u64,
    /// References in the measured phase.
    pub refs: u64,
    /// Request pattern (on SCM-400).
    pub pattern: Pattern,
    /// Per device.
    pub devices: Vec<DeviceTime>,
    /// Per-fault stages on SCM-400, µs per fault.
    pub breakdown: Vec<(String, f64)>,
    /// Counters on SCM-400.
    pub stats: nvmos_swap::RunStats,
    /// Lifetime from the writes per swap page of the measured phase.
    pub write_profile: WriteProfile,
}

/// One point of the congestion figure.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CongestionPoint {
    /// Device random-write IOPS (4 KiB).
    pub iops: f64,
    /// Model swap-out time with congestion control on, s.
    pub on_s: f64,
    /// Of which congestion waits, s.
    pub on_idle_s: f64,
    /// Model swap-out time with it off, s.
    pub off_s: f64,
    /// Recorded traffic replayed at the OS's pace on this device: span of
    /// the swap-outs, s (per recorded trace, in order).
    pub recorded_span_s: Vec<f64>,
}

/// A recorded trace.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Recorded {
    /// File name.
    pub trace: String,
    /// The recording command and limit (from its header).
    pub command: String,
    /// Memory limit, bytes.
    pub limit_bytes: u64,
    /// Requests.
    pub requests: u64,
    /// Events the kernel lost while recording (its `# lost_events:`
    /// header line): their requests are missing from every figure of
    /// this trace.
    #[serde(default)]
    pub lost_events: u64,
    /// Patterns: whole trace, clean phase, aged phases.
    pub patterns: Vec<Pattern>,
    /// Replay per device (whole trace).
    pub devices: Vec<DeviceTime>,
    /// Span of the writes as recorded, s.
    pub recorded_write_span_s: f64,
    /// Reclaim throttles recorded, and total µs slept.
    pub throttles: u64,
    /// Total throttle sleep, s.
    pub throttle_s: f64,
    /// Writes per page.
    pub write_profile: WriteProfile,
}

/// The seed's two qualitative results, as found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Findings {
    /// Model: swap-out with congestion control on, how many times faster
    /// than on the slowest device, per IOPS point.
    pub model_on_speedup: Vec<f64>,
    /// Model: the same with it off.
    pub model_off_speedup: Vec<f64>,
    /// Model: congestion waits' share of swap-out time with it on, per
    /// IOPS point, percent.
    pub model_idle_percent: Vec<f64>,
    /// Recorded: the lowest IOPS at which replay at the OS's pace is
    /// within 10% of the recorded span (faster devices cannot help).
    pub recorded_os_limited_from_iops: Vec<Option<f64>>,
    /// Writes of 4 KiB, percent: (stream, clean, aged).
    pub small_writes: Vec<(String, f64, f64)>,
    /// Non-sequential writes, percent: (stream, clean, aged).
    pub random_writes: Vec<(String, f64, f64)>,
    /// Mean write size, KiB: (stream, clean, aged).
    pub mean_write_kib: Vec<(String, f64, f64)>,
}

/// Everything the study found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SwapStudy {
    /// Options used.
    pub options: SwapStudyOptions,
    /// Modelled workloads.
    pub model: Vec<ModelRun>,
    /// Recorded traces.
    pub recorded: Vec<Recorded>,
    /// Congestion figure.
    pub congestion: Vec<CongestionPoint>,
    /// The seed's fault table, µs.
    pub seed_breakdown: Vec<(String, f64)>,
    /// Lifetime from the seed's own inputs.
    pub seed_lifetime: Vec<Lifetime>,
    /// The seed's lifetime table as printed (device, w/o WL, with WL).
    pub seed_lifetime_printed: Vec<(String, f64, f64)>,
    /// Lifetime from each workload (name, rows).
    pub lifetimes: Vec<(String, Vec<Lifetime>)>,
    /// The qualitative results.
    pub findings: Findings,
    /// The seed's figures and findings held against the measurement.
    pub checks: Vec<Check>,
}

/// An error of the study.
#[derive(Debug, thiserror::Error)]
pub enum SwapStudyError {
    /// The model or a trace failed.
    #[error("{what}")]
    Swap {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: SwapError,
    },
    /// An option out of range.
    #[error("{0}")]
    Options(String),
    /// Listing the trace folder failed.
    #[error("{}", path.display())]
    Io {
        /// The folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

fn ctx<T>(what: impl Into<String>, r: Result<T, SwapError>) -> Result<T, SwapStudyError> {
    r.map_err(|source| SwapStudyError::Swap {
        what: what.into(),
        source,
    })
}

/// Files in `dir` ending in `suffix`, sorted.
pub fn files(dir: &Path, suffix: &str) -> Result<Vec<PathBuf>, SwapStudyError> {
    let rd = std::fs::read_dir(dir).map_err(|source| SwapStudyError::Io {
        path: dir.to_owned(),
        source,
    })?;
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    Ok(v)
}

fn device(name: &str) -> DeviceSpec {
    DeviceSpec::preset(name).expect("a preset name")
}

fn run_model(
    opts: &SwapStudyOptions,
    w: &Workload,
    memory_pages: u64,
    swap_pages: u32,
    progress: &mut Steps<'_>,
) -> Result<ModelRun, SwapStudyError> {
    let cfg = SwapConfig {
        memory_pages,
        swap_pages,
        ..opts.config.clone()
    };
    let mut devices = Vec::new();
    let mut main = None;
    for name in DEVICES {
        progress.next(format!("{} on {name}", w.name));
        let r = ctx(
            format!("{} on {name}", w.name),
            run_workload(&cfg, &device(name), w),
        )?;
        let s = &r.stats;
        devices.push(DeviceTime {
            device: name.into(),
            swap_in_s: s.swap_in_ns as f64 / 1e9,
            swap_out_s: (s.direct_reclaim_ns + r.device.write_ns) as f64 / 1e9,
            write_busy_s: r.device.write_ns as f64 / 1e9,
            congestion_wait_s: s.congestion_wait_ns as f64 / 1e9,
            merges: r.device.merges,
        });
        if name == "SCM-400" {
            main = Some(r);
        }
    }
    let r = main.expect("SCM-400 is one of the devices");
    let hours = r.stats.run_ns as f64 / 3.6e12;
    Ok(ModelRun {
        workload: w.name.clone(),
        memory_pages,
        pages: u64::from(w.pages),
        refs: r.stats.refs,
        pattern: Pattern::of(&w.name, &r.requests),
        devices,
        breakdown: r.stats.breakdown.mean_us(),
        write_profile: WriteProfile::from_counts(
            &r.writes_per_page,
            4096,
            hours,
            Some(u64::from(swap_pages)),
        ),
        stats: r.stats,
    })
}

/// Counts the study's steps for its progress reports.
struct Steps<'a> {
    done: u64,
    total: u64,
    report: &'a mut dyn FnMut(Progress),
}

impl Steps<'_> {
    /// Report that `step` runs next.
    fn next(&mut self, step: String) {
        (self.report)(Progress {
            done: self.done,
            total: self.total,
            step,
        });
        self.done += 1;
    }
}

/// Runs the study. `progress` is told what runs next.
pub fn run(
    opts: &SwapStudyOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<SwapStudy, SwapStudyError> {
    // Settings first: an unbounded one must not run for minutes (or grow
    // memory without bound) before it is refused.
    if !(opts.pc_scale > 0.0 && opts.pc_scale <= 4.0) {
        return Err(SwapStudyError::Options(format!(
            "pc_scale {} is not in (0, 4]",
            opts.pc_scale
        )));
    }
    ctx(
        "options",
        PcScenario {
            scale: opts.pc_scale,
            aging_rounds: opts.aging_rounds,
            seed: opts.seed,
        }
        .check(),
    )?;
    // Recorded traces next: a bad or empty one fails before the models run.
    let swt = files(&opts.traces, ".swt.zst")?;
    let lackeys = files(&opts.traces, ".lackey.zst")?;
    let (n_swt, n_models) = (swt.len() as u64, 2 + lackeys.len() as u64);
    let mut progress = Steps {
        done: 0,
        total: 2 * n_swt + n_models * (1 + DEVICES.len() as u64) + IOPS.len() as u64,
        report: progress,
    };
    let recorded_traces: Vec<(PathBuf, SwapTrace)> = swt
        .into_iter()
        .map(|p| {
            progress.next(format!("reading {}", p.display()));
            let t = ctx(p.display().to_string(), SwapTrace::read(&p))?;
            if t.requests.is_empty() {
                return ctx(
                    p.display().to_string(),
                    Err(SwapError::Parse {
                        path: p.clone(),
                        line: 1,
                        message: "no swap requests: nothing to draw conclusions from (record with a lower --limit so the command swaps)".into(),
                    }),
                );
            }
            Ok((p, t))
        })
        .collect::<Result<_, SwapStudyError>>()?;
    let mut model = Vec::new();
    // The PC scenario, clean and aged, on a machine with memory and swap of
    // the seed's 1 GB scaled.
    for aging_rounds in [0, opts.aging_rounds] {
        let s = PcScenario {
            scale: opts.pc_scale,
            aging_rounds,
            seed: opts.seed,
        };
        progress.next(format!(
            "generating the PC scenario ({aging_rounds} aging rounds)"
        ));
        let w = pc_scenario(&s);
        let mem = s.memory_pages();
        model.push(run_model(opts, &w, mem, mem as u32, &mut progress)?);
    }
    // Real programs' page references.
    for path in lackeys {
        progress.next(format!("reading {}", path.display()));
        let w = ctx(path.display().to_string(), lackey::read_lackey(&path))?;
        let anon = w.anon_pages().max(1);
        let wm = nvmos_swap::Watermarks::linux(u64::from(w.pages));
        let need = wm.high + u64::from(opts.config.batch) + (1 << opts.config.page_cluster) + 1;
        let mem = ((u64::from(w.pages) as f64 * opts.lackey_limit) as u64).max(need);
        let swap = (anon * 2 + 1024) as u32;
        model.push(run_model(opts, &w, mem, swap, &mut progress)?);
    }

    // Congestion control on and off as the device gets faster: a hog
    // writing 4× its memory limit once.
    let hog = hog_write_only((opts.hog_memory_pages * 4) as u32);
    let mut congestion = Vec::new();
    for &iops in &IOPS {
        progress.next(format!("congestion sweep at {iops} IOPS"));
        let dev = DeviceSpec::scm_with_write_iops(400.0, iops);
        let mut point = CongestionPoint {
            iops,
            on_s: 0.0,
            on_idle_s: 0.0,
            off_s: 0.0,
            recorded_span_s: Vec::new(),
        };
        for on in [true, false] {
            let mut cfg = SwapConfig {
                memory_pages: opts.hog_memory_pages,
                swap_pages: (opts.hog_memory_pages * 5) as u32,
                ..opts.config.clone()
            };
            cfg.congestion.enabled = on;
            let r = ctx(
                format!("hog at {iops} IOPS"),
                run_workload(&cfg, &dev, &hog),
            )?;
            let t = r.stats.run_ns as f64 / 1e9;
            if on {
                point.on_s = t;
                point.on_idle_s = r.stats.congestion_wait_ns as f64 / 1e9;
            } else {
                point.off_s = t;
            }
        }
        for (p, t) in &recorded_traces {
            let rep = ctx(p.display().to_string(), replay(&t.requests, &dev))?;
            point
                .recorded_span_s
                .push(rep.swap_out_span_ns as f64 / 1e9);
        }
        congestion.push(point);
    }

    // Recorded traffic.
    let mut recorded = Vec::new();
    for (path, t) in &recorded_traces {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        progress.next(format!("analysing {name}"));
        let mut patterns = vec![Pattern::of("whole trace", &t.requests)];
        if let Some(clean) = t.phase_requests("clean") {
            patterns.push(Pattern::of("clean", clean));
        }
        let aged: Vec<SwapRequest> = t
            .phases
            .iter()
            .filter(|(_, n)| n.starts_with("aged"))
            .filter_map(|(_, n)| t.phase_requests(n))
            .flatten()
            .copied()
            .collect();
        if !aged.is_empty() {
            patterns.push(Pattern::of("aged", &aged));
        }
        let mut devices = Vec::new();
        let mut span = 0.0;
        for d in DEVICES {
            let rep = ctx(format!("{name} on {d}"), replay(&t.requests, &device(d)))?;
            span = rep.recorded_write_span_ns as f64 / 1e9;
            devices.push(DeviceTime {
                device: d.into(),
                swap_in_s: rep.swap_in_ns as f64 / 1e9,
                swap_out_s: rep.write_busy_ns as f64 / 1e9,
                write_busy_s: rep.write_busy_ns as f64 / 1e9,
                congestion_wait_s: 0.0,
                merges: rep.merges,
            });
        }
        let rep = ctx(name.clone(), replay(&t.requests, &device("SCM-400")))?;
        let duration_h = t.requests.last().map_or(0.0, |r| r.time_ns as f64 / 3.6e12);
        let swap_bytes: u64 = t
            .header
            .get("swap_bytes")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        recorded.push(Recorded {
            trace: name,
            command: t.header.get("command").cloned().unwrap_or_default(),
            limit_bytes: t
                .header
                .get("limit_bytes")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
            requests: t.requests.len() as u64,
            lost_events: t.lost_events(),
            patterns,
            devices,
            recorded_write_span_s: span,
            throttles: t.throttles.len() as u64,
            throttle_s: t.throttles.iter().map(|x| x.delayed_us).sum::<u64>() as f64 / 1e6,
            write_profile: WriteProfile::from_counts(
                &rep.writes_per_page,
                4096,
                duration_h,
                (swap_bytes > 0).then_some(swap_bytes / 4096),
            ),
        });
    }

    // Findings.
    let speedup = |f: fn(&CongestionPoint) -> f64| -> Vec<f64> {
        let first = congestion.first().map_or(0.0, f);
        congestion.iter().map(|p| first / f(p).max(1e-12)).collect()
    };
    let mut small = Vec::new();
    let mut random = Vec::new();
    let mut mean = Vec::new();
    let mut compare = |name: String, clean: &Distributions, aged: &Distributions| {
        small.push((name.clone(), clean.small_percent, aged.small_percent));
        random.push((name.clone(), clean.random_percent, aged.random_percent));
        mean.push((name, clean.mean_size / 1024.0, aged.mean_size / 1024.0));
    };
    if model.len() >= 2 {
        compare(
            "PC scenario (model)".into(),
            &model[0].pattern.writes,
            &model[1].pattern.writes,
        );
    }
    for r in &recorded {
        let c = r.patterns.iter().find(|p| p.name == "clean");
        let a = r.patterns.iter().find(|p| p.name == "aged");
        if let (Some(c), Some(a)) = (c, a) {
            compare(format!("recorded {}", r.trace), &c.writes, &a.writes);
        }
    }
    let recorded_os_limited_from_iops = (0..recorded.len())
        .map(|i| {
            let rec = recorded[i].recorded_write_span_s;
            congestion
                .iter()
                .find(|p| p.recorded_span_s[i] <= rec * 1.1)
                .map(|p| p.iops)
        })
        .collect();
    let findings = Findings {
        model_on_speedup: speedup(|p| p.on_s),
        model_off_speedup: speedup(|p| p.off_s),
        model_idle_percent: congestion
            .iter()
            .map(|p| p.on_idle_s * 100.0 / p.on_s.max(1e-12))
            .collect(),
        recorded_os_limited_from_iops,
        small_writes: small,
        random_writes: random,
        mean_write_kib: mean,
    };
    let mut lifetimes = vec![(
        "seed inputs".to_owned(),
        lifetime_table(&WriteProfile::seed()),
    )];
    for m in &model {
        lifetimes.push((
            format!("{} (model)", m.workload),
            lifetime_table(&m.write_profile),
        ));
    }
    for r in &recorded {
        lifetimes.push((
            format!("recorded {}", r.trace),
            lifetime_table(&r.write_profile),
        ));
    }
    (progress.report)(Progress {
        done: progress.total,
        total: progress.total,
        step: "done".into(),
    });
    let seed_lifetime = lifetime_table(&WriteProfile::seed());
    let checks = checks(&seed_lifetime, &congestion, &findings);
    Ok(SwapStudy {
        checks,
        options: opts.clone(),
        model,
        recorded,
        congestion,
        seed_breakdown: SEED_FAULT_TABLE
            .iter()
            .map(|&(n, v)| (n.to_owned(), v))
            .collect(),
        seed_lifetime,
        seed_lifetime_printed: SEED_TABLE
            .iter()
            .map(|&(n, a, b)| (n.to_owned(), a, b))
            .collect(),
        lifetimes,
        findings,
    })
}

/// How far off a figure printed as `v` may be: half a unit of its last
/// printed digit (57.1: 0.05; 0.57: 0.005).
fn printed_tolerance(v: f64) -> f64 {
    let text = format!("{v}");
    let decimals = text.split('.').nth(1).map_or(0, str::len) as i32;
    0.5 * 10f64.powi(-decimals)
}

/// The seed's figures and findings as checks: its lifetime table without
/// wear levelling recomputed from its own inputs, and its congestion
/// finding (without congestion control, a faster device helps swap-out
/// more than with it) on the model.
fn checks(
    seed_lifetime: &[Lifetime],
    congestion: &[CongestionPoint],
    findings: &Findings,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let seed = WriteProfile::seed();
    for (&(device, without, with), l) in SEED_TABLE.iter().zip(seed_lifetime) {
        checks.push(
            Check::new(
                format!("{device} lifetime without wear levelling, from the seed's inputs"),
                "seed 003, lifetime table",
                l.years_without_wl,
                "years",
                Bound::Within {
                    value: without,
                    tolerance: printed_tolerance(without),
                },
            )
            .seed(without)
            .detail(format!(
                "the seed's inputs: {} bytes written in {} h, at most {} writes per page, endurance {:e}; its with-WL cell ({with} y) is the formula at 2 writes per page, not at its mean of {} ({:.3} y)",
                seed.bytes_written,
                seed.hours,
                seed.max_writes_per_page,
                l.endurance,
                seed.mean_writes_per_page,
                l.years_with_wl
            )),
        );
    }
    if let (Some(first), Some(last), Some(on), Some(off)) = (
        congestion.first(),
        congestion.last(),
        findings.model_on_speedup.last(),
        findings.model_off_speedup.last(),
    ) {
        checks.push(
            Check::new(
                "without congestion control a faster device speeds swap-out up more than with it (write-only hog, model)",
                "seed 003 (congestion control; a direction)",
                off / on.max(1e-12),
                "x (speed-up off / speed-up on)",
                Bound::AtLeast(1.0),
            )
            .detail(format!(
                "from {} to {} write IOPS: {:.2}x faster with congestion control on, {:.2}x with it off",
                first.iops, last.iops, on, off
            )),
        );
    }
    checks
}

/// Seed 003's study in the one shape.
pub struct Swap;

impl Study for Swap {
    type Options = SwapStudyOptions;
    type Output = SwapStudy;
    type Error = SwapStudyError;
    const NAME: &'static str = "swap";

    /// `Scale::Quick`: the PC scenario at 1/16 of the seed's 1 GB, two
    /// aging rounds, a hog of 4096 pages.
    fn options(scale: Scale) -> SwapStudyOptions {
        match scale {
            Scale::Full => SwapStudyOptions::default(),
            Scale::Quick => SwapStudyOptions {
                pc_scale: 1.0 / 16.0,
                aging_rounds: 2,
                hog_memory_pages: 4096,
                ..SwapStudyOptions::default()
            },
        }
    }

    fn run(
        options: &SwapStudyOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<SwapStudy, SwapStudyError> {
        run(options, progress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_figures_bound_their_rounding() {
        assert_eq!(printed_tolerance(57.1), 0.05);
        assert!((printed_tolerance(0.57) - 0.005).abs() < 1e-12);
        assert!((printed_tolerance(1.14) - 0.005).abs() < 1e-12);
    }

    #[test]
    fn quick_options_and_a_bad_scale_is_refused_before_running() {
        let quick = Swap::options(Scale::Quick);
        assert_eq!((quick.aging_rounds, quick.hog_memory_pages), (2, 4096));
        let bad = SwapStudyOptions {
            pc_scale: 0.0,
            traces: "/nonexistent".into(),
            ..quick
        };
        let mut reports = 0;
        let e = Swap::run(&bad, &mut |_| reports += 1).unwrap_err();
        assert!(matches!(e, SwapStudyError::Options(_)), "{e}");
        assert_eq!(reports, 0);
    }

    #[test]
    fn the_seed_lifetime_checks_are_met_without_wear_levelling() {
        let seed = lifetime_table(&WriteProfile::seed());
        let findings = Findings {
            model_on_speedup: vec![1.0, 1.5],
            model_off_speedup: vec![1.0, 6.0],
            model_idle_percent: vec![],
            recorded_os_limited_from_iops: vec![],
            small_writes: vec![],
            random_writes: vec![],
            mean_write_kib: vec![],
        };
        let point = |iops| CongestionPoint {
            iops,
            on_s: 1.0,
            on_idle_s: 0.0,
            off_s: 1.0,
            recorded_span_s: vec![],
        };
        let c = checks(&seed, &[point(2500.0), point(320000.0)], &findings);
        assert_eq!(c.len(), 4);
        assert!(c[..3].iter().all(|c| c.met), "{c:?}");
        assert_eq!(c[0].seed_figure, Some(57.1));
        assert_eq!((c[3].measured, c[3].met), (4.0, true));
    }
}
