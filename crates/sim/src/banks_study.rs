//! Seed 002's experiment in the one study shape ([`crate::study`]): N
//! cores running STREAM over frames each placement hands out, on the
//! timing model of [`crate::banks`], the headline (the most cores,
//! sequential access: how much faster than the buddy's sequential frames),
//! the seed's analysing program, and the seed's findings held against
//! the measurement as [`Check`]s.
//!
//! ```no_run
//! use nvmos_sim::banks_study::Banks;
//! use nvmos_sim::study::{Scale, Study};
//!
//! let options = Banks::options(Scale::Quick);
//! let out = Banks::run(&options, &mut |p| eprintln!("{}/{} {}", p.done, p.total, p.step))?;
//! for check in &out.checks {
//!     println!("{}: {} (met: {})", check.what, check.measured, check.met);
//! }
//! # Ok::<(), nvmos_sim::banks::BanksError>(())
//! ```

use std::path::Path;

use nvmos_frames::Zone;
use nvmos_memsys::{ControllerConfig, Machine, PagePolicy};
use serde::{Deserialize, Serialize};

use crate::banks::{
    analyse, run_workload, Access, Analysis, BanksError, Kernel, Placement, WorkloadSpec, LINE,
};
use crate::study::{Bound, Check, Progress, Scale, Study};

/// The study's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BanksOptions {
    /// Core counts.
    pub cores: Vec<u32>,
    /// Placements.
    pub placements: Vec<Placement>,
    /// Access orders.
    pub accesses: Vec<Access>,
    /// The kernel.
    pub kernel: Kernel,
    /// Bytes per array per core.
    pub array_bytes: u64,
    /// Passes over the arrays (sequential access); random access makes as
    /// many steps.
    pub passes: u64,
    /// Outstanding misses per core.
    pub mlp: u32,
    /// Cycles between issues of a core.
    pub gap: u64,
    /// Page policy.
    pub policy: PagePolicy,
    /// Queue per channel.
    pub queue_depth: usize,
    /// Seed.
    pub seed: u64,
    /// Run the basic timing model
    /// ([`ControllerConfig::basic`]: blocking scheduler, writes queued with
    /// reads, no refresh) instead of the full model.
    #[serde(default)]
    pub basic_model: bool,
    /// The machine: a preset name (`Machine::preset_names`) or a machine
    /// TOML file.
    #[serde(default = "default_machine")]
    pub machine: String,
    /// Also run the analysing program ([`analyse`]) on the machine.
    #[serde(default = "yes")]
    pub analyse: bool,
}

fn default_machine() -> String {
    "xeon-3ch".into()
}

fn yes() -> bool {
    true
}

impl Default for BanksOptions {
    fn default() -> Self {
        Self {
            cores: vec![1, 2, 4],
            placements: Placement::ALL.to_vec(),
            accesses: vec![Access::Sequential, Access::Random],
            kernel: Kernel::Copy,
            array_bytes: 4 << 20,
            passes: 1,
            mlp: 10,
            gap: 2,
            policy: PagePolicy::Open,
            queue_depth: 32,
            seed: 2012,
            basic_model: false,
            machine: default_machine(),
            analyse: true,
        }
    }
}

/// One cell of the study.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BanksRow {
    /// Cores.
    pub cores: u32,
    /// Placement.
    pub placement: Placement,
    /// Access order.
    pub access: Access,
    /// Row-buffer hit rate.
    pub hit_rate: f64,
    /// Miss (closed bank) rate.
    pub miss_rate: f64,
    /// Conflict rate.
    pub conflict_rate: f64,
    /// Mean banks busy.
    pub blp: f64,
    /// Run time: until the last core finished, ns.
    pub run_ns: f64,
    /// Bandwidth, GB/s.
    pub bandwidth_gbs: f64,
    /// Mean memory latency over the cores, ns.
    pub latency_ns: f64,
    /// Run time relative to sequential placement with the same cores and
    /// access (below 1: faster).
    pub vs_sequential: f64,
}

/// The whole study.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BanksStudy {
    /// The machine's name.
    pub machine: String,
    /// Settings.
    pub options: BanksOptions,
    /// One row per cores × placement × access.
    pub rows: Vec<BanksRow>,
    /// What seed 002 reports, in its words.
    pub seed_reports: Vec<String>,
}

/// The zone the study allocates from: the machine's last zone, cut to
/// what the arrays need plus room, so building an allocator stays cheap.
fn study_zone(machine: &Machine, options: &BanksOptions) -> Zone {
    let zone = machine.zones().last().expect("a machine has zones");
    let max_cores = u64::from(options.cores.iter().copied().max().unwrap_or(1));
    let need = 3 * options.array_bytes / machine.page_size() * max_cores;
    // Twice what is needed, rounded to the 12 MB round (3072 frames) of
    // the seed's machine, at least 64 MiB.
    let frames = (2 * need).max(16384).next_multiple_of(3072);
    let start = zone.start_pfn.next_multiple_of(3072);
    Zone::new(start, (start + frames).min(zone.end_pfn))
}

/// Run seed 002's experiment on `machine` (`options.machine` only names
/// it); `progress` is told before each cell what runs, `done` counting
/// from `first` of `total`.
pub fn study(
    machine: &Machine,
    options: &BanksOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<BanksStudy, BanksError> {
    check(options)?;
    let total = cells(options) + u64::from(options.analyse);
    let zone = study_zone(machine, options);
    let controller = ControllerConfig {
        policy: options.policy,
        queue_depth: options.queue_depth,
        check: false,
        ..if options.basic_model {
            ControllerConfig::basic()
        } else {
            ControllerConfig::default()
        }
    };
    let mut rows: Vec<BanksRow> = Vec::new();
    for &cores in &options.cores {
        for &access in &options.accesses {
            for &placement in &options.placements {
                progress(Progress {
                    done: rows.len() as u64,
                    total,
                    step: format!("{cores} cores, {access:?} access, {placement:?} placement"),
                });
                let alloc = placement.build(machine, &[zone], cores, options.seed)?;
                let spec = WorkloadSpec {
                    cores,
                    kernel: options.kernel,
                    access,
                    array_bytes: options.array_bytes,
                    steps: options.passes * options.array_bytes / LINE,
                    mlp: options.mlp,
                    gap: options.gap,
                    llc: None,
                    seed: options.seed,
                };
                let r = run_workload(machine, controller, &*alloc, &spec)?;
                let m = &r.memory;
                let latency = if m.cores.is_empty() {
                    0.0
                } else {
                    m.cores.iter().map(|c| c.mean_ns).sum::<f64>() / m.cores.len() as f64
                };
                let baseline = rows
                    .iter()
                    .find(|row| {
                        row.cores == cores
                            && row.access == access
                            && row.placement == Placement::Sequential
                    })
                    .map(|row| row.run_ns);
                let row = BanksRow {
                    cores,
                    placement,
                    access,
                    hit_rate: m.hit_rate,
                    miss_rate: m.miss_rate,
                    conflict_rate: m.conflict_rate,
                    blp: m.blp,
                    run_ns: r.run_ns,
                    bandwidth_gbs: m.bandwidth_gbs,
                    latency_ns: latency,
                    vs_sequential: baseline.map_or(1.0, |b| r.run_ns / b),
                };
                rows.push(row);
            }
        }
    }
    Ok(BanksStudy {
        machine: machine.name().to_owned(),
        options: options.clone(),
        rows,
        seed_reports: SEED_REPORTS.iter().map(|s| (*s).to_owned()).collect(),
    })
}

/// What seed 002 reports (it gives its results as charts; these are its
/// words, and the direction of each finding).
pub const SEED_REPORTS: [&str; 5] = [
    "Stream benchmark on an Intel Xeon (quad-core), 32 GB DRAM: page frame allocation policy affects performance, especially on multicore.",
    "Sequential allocation is slower than random allocation; the difference is due to row-buffer conflicts.",
    "Conflict probability, random and sequential alike: 1/n; but sequential conflicts are correlated: a set of successive conflicts, amplified among multiple cores.",
    "Regularities (such as sequential) considered harmful; allocating three successive frames obtains prefetching effects.",
    "12 MB (or 3 MB) is a good candidate for partitioning to reduce the row-buffer conflicts among cores.",
];

/// Cells of the study: core counts × access orders × placements.
pub fn cells(options: &BanksOptions) -> u64 {
    (options.cores.len() * options.accesses.len() * options.placements.len()) as u64
}

/// Options a run would refuse, refused before anything runs.
fn check(options: &BanksOptions) -> Result<(), BanksError> {
    if options.cores.is_empty() || options.cores.iter().any(|&c| c == 0 || c > 64) {
        return Err(BanksError::Spec(
            "cores: give one or more core counts, each in 1..=64",
        ));
    }
    if options.placements.is_empty() || options.accesses.is_empty() {
        return Err(BanksError::Spec(
            "placements and accesses: give at least one of each",
        ));
    }
    if options.passes == 0 || options.mlp == 0 || options.queue_depth == 0 {
        return Err(BanksError::Spec(
            "passes, mlp and queue_depth must be at least 1",
        ));
    }
    Ok(())
}

/// The machine `name` names: a preset, else a machine TOML file.
pub fn load_machine(name: &str) -> Result<Machine, BanksError> {
    let loaded = if Machine::preset_names().contains(&name) {
        Machine::preset(name)
    } else if Path::new(name).exists() {
        Machine::load(name)
    } else {
        return Err(BanksError::UnknownMachine {
            name: name.to_owned(),
            presets: Machine::preset_names().join(", "),
        });
    };
    loaded.map_err(|source| BanksError::Machine {
        name: name.to_owned(),
        source,
    })
}

/// The headline: one placement against sequential frames with the most
/// cores, sequential access.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    /// Cores.
    pub cores: u32,
    /// The placement compared with sequential frames.
    pub placement: Placement,
    /// Run time relative to sequential placement.
    pub vs_sequential: f64,
    /// Percent faster than sequential placement.
    pub faster_percent: f64,
}

/// Everything the study found: what `nvmos study banks` writes to
/// `banks.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BanksOutput {
    /// The experiment.
    pub study: BanksStudy,
    /// The headline (the most cores, sequential access).
    pub headline: Vec<Headline>,
    /// The analysing program, when asked for.
    pub analysis: Option<Analysis>,
    /// The seed's findings held against the measurement.
    pub checks: Vec<Check>,
}

/// The headline rows of `study`.
pub fn headline(study: &BanksStudy) -> Vec<Headline> {
    let most = study.options.cores.iter().copied().max().unwrap_or(1);
    study
        .rows
        .iter()
        .filter(|r| r.cores == most && r.access == Access::Sequential)
        .filter(|r| r.placement != Placement::Sequential)
        .map(|r| Headline {
            cores: r.cores,
            placement: r.placement,
            vs_sequential: r.vs_sequential,
            faster_percent: (1.0 / r.vs_sequential - 1.0) * 100.0,
        })
        .collect()
}

/// Seed 002's findings as checks: it gives them as charts and words, so
/// the bounds are directions (faster than sequential frames: below 1×),
/// and the analysing program must agree with the mapping everywhere.
pub fn checks(
    study: &BanksStudy,
    headline: &[Headline],
    analysis: Option<&Analysis>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let seq = |cores: u32| {
        study
            .rows
            .iter()
            .find(|r| {
                r.cores == cores
                    && r.access == Access::Sequential
                    && r.placement == Placement::Sequential
            })
            .map_or(f64::NAN, |r| r.run_ns)
    };
    for h in headline {
        let what = match h.placement {
            Placement::Random => "random placement runs faster than the buddy's sequential frames",
            Placement::M3 => {
                "M3's partitioned placement runs faster than the buddy's sequential frames"
            }
            Placement::Sequential => continue,
        };
        let run = study
            .rows
            .iter()
            .find(|r| {
                r.cores == h.cores && r.access == Access::Sequential && r.placement == h.placement
            })
            .map_or(f64::NAN, |r| r.run_ns);
        checks.push(
            Check::new(
                format!(
                    "{what} ({} cores, STREAM {:?}, sequential access)",
                    h.cores, study.options.kernel
                ),
                "seed 002 (a direction: its results are charts)",
                h.vs_sequential,
                "x sequential run time",
                Bound::AtMost(1.0),
            )
            .detail(format!(
                "run time {:.3} ms against {:.3} ms with sequential frames on {}",
                run / 1e6,
                seq(h.cores) / 1e6,
                study.machine
            )),
        );
    }
    if let Some(a) = analysis {
        let strides = a.strides.iter().filter(|s| s.1 != s.2).count() as u64;
        checks.push(
            Check::new(
                "the analysing program recovers the bank interleaving from latencies alone",
                "seed 002 (analysing program)",
                (a.line_mismatches + strides) as f64,
                "mismatches",
                Bound::AtMost(0.0),
            )
            .detail(format!(
                "{} lines and {} strides checked against {}'s mapping; the same bank every {} cache line(s)",
                a.line_latency_ns.len(),
                a.strides.len(),
                a.machine,
                a.unit_lines
            )),
        );
    }
    checks
}

/// Seed 002's study in the one shape.
pub struct Banks;

impl Study for Banks {
    type Options = BanksOptions;
    type Output = BanksOutput;
    type Error = BanksError;
    const NAME: &'static str = "banks";

    /// `Scale::Quick`: arrays of 1 MiB per core instead of 4.
    fn options(scale: Scale) -> BanksOptions {
        match scale {
            Scale::Full => BanksOptions::default(),
            Scale::Quick => BanksOptions {
                array_bytes: 1 << 20,
                ..BanksOptions::default()
            },
        }
    }

    fn run(
        options: &BanksOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<BanksOutput, BanksError> {
        check(options)?;
        let machine = load_machine(&options.machine)?;
        let study = study(&machine, options, progress)?;
        let total = cells(options) + u64::from(options.analyse);
        let analysis = if options.analyse {
            progress(Progress {
                done: cells(options),
                total,
                step: "the analysing program".into(),
            });
            Some(analyse(&machine, 1)?)
        } else {
            None
        };
        progress(Progress {
            done: total,
            total,
            step: "done".into(),
        });
        let headline = headline(&study);
        let checks = checks(&study, &headline, analysis.as_ref());
        Ok(BanksOutput {
            study,
            headline,
            analysis,
            checks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's finding, in direction, on the blocking scheduler it was
    /// first measured on: four concurrent STREAM copies on its Xeon run
    /// faster with random or bank-aware placement than with the buddy's
    /// sequential frames, because more banks work at once. The ready
    /// scheduler removes most of that gap: sequential placement was held
    /// up by the blocking scheduler's oldest miss, not by the banks.
    #[test]
    fn random_and_m3_placement_beat_sequential_for_four_stream_copies() {
        let m = Machine::preset("xeon-3ch").unwrap();
        let options = BanksOptions {
            cores: vec![4],
            accesses: vec![Access::Sequential],
            array_bytes: 1 << 20,
            basic_model: true,
            ..BanksOptions::default()
        };
        let s = study(&m, &options, &mut |_| {}).unwrap();
        let row = |s: &BanksStudy, p| s.rows.iter().find(|r| r.placement == p).unwrap().clone();
        let (seq, random, m3) = (
            row(&s, Placement::Sequential),
            row(&s, Placement::Random),
            row(&s, Placement::M3),
        );
        assert!(random.run_ns < 0.8 * seq.run_ns, "{random:?} vs {seq:?}");
        assert!(m3.run_ns < seq.run_ns, "{m3:?} vs {seq:?}");
        assert!(random.blp > 1.5 * seq.blp, "{random:?} vs {seq:?}");
        assert_eq!(s.seed_reports.len(), SEED_REPORTS.len());

        let ready = BanksOptions {
            basic_model: false,
            ..options.clone()
        };
        let r = study(&m, &ready, &mut |_| {}).unwrap();
        let (ready_seq, ready_random) =
            (row(&r, Placement::Sequential), row(&r, Placement::Random));
        // Sequential frames gain most from not blocking on the oldest
        // miss; random placement stays ahead of them, by far less.
        assert!(
            ready_seq.run_ns < 0.8 * seq.run_ns,
            "{ready_seq:?} vs {seq:?}"
        );
        assert!(
            ready_random.run_ns / ready_seq.run_ns > random.run_ns / seq.run_ns + 0.1,
            "{ready_random:?} vs {ready_seq:?}"
        );
    }

    #[test]
    fn the_study_shape_runs_quick_and_checks_its_findings() {
        let options = BanksOptions {
            cores: vec![2],
            accesses: vec![Access::Sequential],
            array_bytes: 256 << 10,
            ..Banks::options(Scale::Quick)
        };
        assert_eq!(Banks::options(Scale::Quick).array_bytes, 1 << 20);
        assert_eq!(Banks::options(Scale::Full), BanksOptions::default());
        let mut reports = Vec::new();
        let out = Banks::run(&options, &mut |p| reports.push(p)).unwrap();
        assert_eq!(out.study.rows.len(), 3);
        assert_eq!(out.headline.len(), 2);
        // Two placement checks and the analysing program's.
        assert_eq!(out.checks.len(), 3);
        assert!(out.checks[2].met, "{:?}", out.checks[2]);
        for (c, h) in out.checks.iter().zip(&out.headline) {
            assert_eq!(c.measured, h.vs_sequential);
            assert_eq!(c.met, h.vs_sequential <= 1.0);
        }
        let last = reports.last().unwrap();
        assert_eq!((last.done, last.total), (4, 4));
        assert!(reports.windows(2).all(|w| w[0].done <= w[1].done));
    }

    #[test]
    fn bad_options_and_machines_are_refused_by_name() {
        let none = BanksOptions {
            cores: vec![],
            ..BanksOptions::default()
        };
        assert!(matches!(
            Banks::run(&none, &mut |_| {}),
            Err(BanksError::Spec(_))
        ));
        let unknown = BanksOptions {
            machine: "nosuch".into(),
            ..BanksOptions::default()
        };
        let e = Banks::run(&unknown, &mut |_| {}).unwrap_err().to_string();
        assert!(e.contains("nosuch") && e.contains("xeon-3ch"), "{e}");
    }
}
