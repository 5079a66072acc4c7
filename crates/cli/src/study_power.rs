//! `nvmos study power`: seed 004 (Adaptive-Buddy) on this machine.
//!
//! Runs the seed's light and medium workloads on a 32 GB and a 4 GB
//! machine and every trace in `traces/` through Buddy, lazy buddy, the
//! Array- and List-based Bank-Buddy and Adaptive-Buddy, with and without
//! migration, and the seed's synthetic latency benchmark (Table 5).
//! Prints tables (or `--json`) and writes `power.html` and `power.json`
//! into the report folder.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use nvmos_frames::sync::SpinYield;
use nvmos_frames::{MigrateType, Order, Pfn, Request, Zone};
use nvmos_sim::power::{
    run_synthetic, run_trace, PowerModel, PowerRow, SyntheticMachine, TraceMachine, TracePlacement,
    Workload,
};
use nvmos_sim::AllocatorKind;
use serde::Serialize;

use crate::units::{format_frames, parse_memory, FRAME_BYTES};
use nvmos_measure::stats::percentile;
use nvmos_measure::timer::{ticks, Clock};

/// Options of `nvmos study power`.
#[derive(Args, Debug)]
pub struct PowerArgs {
    /// Machine sizes for the synthetic workloads.
    #[arg(long, value_name = "SIZE,...", value_delimiter = ',', value_parser = parse_mem,
          default_value = "32GiB,4GiB")]
    sizes: Vec<u64>,

    /// Bank size (the power-management unit; Linux's 128 MiB memory
    /// section by default: 256 banks on 32 GiB, as the seed's Fig. 3).
    #[arg(long, value_name = "SIZE", value_parser = parse_mem, default_value = "128MiB")]
    bank: u64,

    /// Workloads: light (footprint 10–50%), medium (30–80%), or
    /// NAME:MIN-MAX for another footprint range in percent.
    #[arg(
        long,
        value_name = "NAME,...",
        value_delimiter = ',',
        default_value = "light,medium"
    )]
    workloads: Vec<String>,

    /// Epochs (simulated seconds) per synthetic run [default: 200, 40 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    epochs: Option<u32>,

    /// Share of the footprint that is kernel (unmovable) data, percent.
    #[arg(long, default_value_t = 10.0)]
    kernel_percent: f64,

    /// Share of live blocks freed and replaced every epoch, percent.
    #[arg(long, default_value_t = 5.0)]
    churn_percent: f64,

    /// Seed of the synthetic workloads.
    #[arg(long, default_value_t = 2015)]
    seed: u64,

    /// Allocators of the registry (nvmos evaluate --help lists them); the
    /// bank-aware ones run without and with migration.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = parse_alloc,
          default_value = "buddy,lazy-buddy,array-bank,list-bank,adaptive")]
    alloc: Vec<AllocatorKind>,

    /// Power models: presets (seed004-relative, ddr4-2400-micron,
    /// lpddr4-3200-micron) or TOML files.
    #[arg(
        long,
        value_name = "NAME,...",
        value_delimiter = ',',
        default_value = "seed004-relative,ddr4-2400-micron,lpddr4-3200-micron"
    )]
    power: Vec<String>,

    /// Folder of traces to replay; every file in it.
    #[arg(long, default_value = "traces")]
    traces: PathBuf,

    /// Skip the traces.
    #[arg(long)]
    no_traces: bool,

    /// Trace time between migration passes, ms.
    #[arg(long, default_value_t = 1000)]
    migrate_every_ms: u64,

    /// Page requests of the latency benchmark (seed 004's Table 5)
    /// [default: 10000,100000,1000000,2000000,4000000; up to 100000 with --quick].
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    latency_pages: Option<Vec<u64>>,

    /// Memory of the latency benchmark's machine [default: 32GiB, 1GiB with --quick].
    #[arg(long, value_name = "SIZE", value_parser = parse_mem)]
    latency_memory: Option<u64>,

    /// Rounds of each latency run: the same requests repeated on a fresh
    /// allocator; the per-request minimum over rounds removes preemption.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    latency_rounds: u32,

    /// Skip the latency benchmark.
    #[arg(long)]
    no_latency: bool,

    /// Small and fast: 1 GiB and 256 MiB machines with 16 MiB banks, 40
    /// epochs, latency up to 10^5 pages on 1 GiB (explicit options win).
    #[arg(long)]
    quick: bool,

    /// Report folder: power.html and power.json are written there.
    #[arg(long, default_value = "nvmos-report")]
    out: PathBuf,

    /// Print the results as JSON on stdout instead of the tables.
    #[arg(long)]
    json: bool,
}

fn parse_mem(text: &str) -> Result<u64, String> {
    parse_memory(text)
}

fn parse_alloc(text: &str) -> Result<AllocatorKind, String> {
    text.parse()
}

/// The migration settings `a` runs with: without and with migration for
/// the bank-aware allocators whose registry entry does not migrate, only
/// with for those whose entry does, only without for the others.
fn migration_runs(a: AllocatorKind) -> &'static [bool] {
    let caps = a.caps();
    if caps.migrates {
        &[true]
    } else if caps.banks {
        &[false, true]
    } else {
        &[false]
    }
}

/// Seed 004's own figures, for side-by-side display.
#[derive(Clone, Debug, Serialize)]
pub struct SeedFigures {
    /// Table 2: (workload, machine, max offline %, optimal %, Adaptive-Buddy %).
    pub table2: Vec<(&'static str, &'static str, f64, f64, f64)>,
    /// Table 5: (pages, Buddy mean ns, Adaptive mean ns, Buddy worst ns, Adaptive worst ns).
    pub table5: Vec<(u64, f64, f64, f64, f64)>,
}

impl SeedFigures {
    /// The seed's Table 5 mean and worst ns for a latency row, if the seed
    /// measured that allocator at that number of requests ("-" otherwise).
    fn table5_cell(&self, row: &LatencyRow) -> (String, String) {
        let seed = self.table5.iter().find(|s| s.0 == row.pages);
        match (seed, row.allocator.as_str()) {
            (Some(s), "buddy") => (s.1.to_string(), s.3.to_string()),
            (Some(s), "Adaptive-Buddy") => (s.2.to_string(), s.4.to_string()),
            _ => ("-".into(), "-".into()),
        }
    }
}

fn seed_figures() -> SeedFigures {
    SeedFigures {
        table2: vec![
            ("light", "32 GB", 81.0, 69.0, 59.5),
            ("medium", "32 GB", 56.0, 57.0, 45.7),
            ("light", "4 GB", 64.0, 55.0, 48.0),
            ("medium", "4 GB", 45.0, 35.0, 26.0),
        ],
        table5: vec![
            (10_000, 285.0, 267.0, 755.0, 1305.0),
            (100_000, 266.0, 260.0, 988.0, 2596.0),
            (1_000_000, 260.0, 255.0, 999.0, 20794.0),
            (2_000_000, 250.0, 255.0, 999.0, 20794.0),
            (4_000_000, 249.0, 277.0, 999.0, 21432.0),
        ],
    }
}

/// One synthetic workload on one machine.
#[derive(Clone, Debug, Serialize)]
pub struct SyntheticResult {
    /// The workload.
    pub workload: Workload,
    /// The machine.
    pub machine: SyntheticMachine,
    /// One row per allocator and migration setting.
    pub rows: Vec<PowerRow>,
}

/// One trace.
#[derive(Clone, Debug, Serialize)]
pub struct TraceResult {
    /// Short name.
    pub trace: String,
    /// The machine replayed on.
    pub machine: TraceMachine,
    /// Frames of the recorded pfn span (for "Linux (as recorded)").
    pub recorded_frames: u64,
    /// One row per allocator and migration setting.
    pub rows: Vec<PowerRow>,
}

/// One allocator in the latency benchmark at one request count.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyRow {
    /// Allocator.
    pub allocator: String,
    /// Successive page requests.
    pub pages: u64,
    /// Mean ns per allocation, each request at its fastest over the rounds.
    pub mean_ns: f64,
    /// Mean ns per allocation of the first round, as measured.
    pub raw_mean_ns: f64,
    /// 99th, 99.9th and 99.99th percentiles (fastest over rounds), ns.
    pub p99_ns: f64,
    /// 99.9th percentile.
    pub p999_ns: f64,
    /// 99.99th percentile.
    pub p9999_ns: f64,
    /// Slowest request in any round, ns, preemption and interrupts included.
    pub raw_max_ns: f64,
    /// Slowest request after taking each request's fastest time over the
    /// rounds (the allocator is deterministic: request i does the same
    /// work every round, so the minimum strips the VM's noise).
    pub worst_ns: f64,
    /// The untimed warm-up request on a fresh allocator (every structure
    /// cold), fastest over the rounds, ns.
    pub first_ns: f64,
    /// `raw_max_ns / raw_mean_ns`.
    pub raw_max_over_mean: f64,
    /// `worst_ns / mean_ns`.
    pub worst_over_mean: f64,
}

/// The latency benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyResult {
    /// Frames of the machine.
    pub frames: u64,
    /// Rounds per run.
    pub rounds: u32,
    /// The timer.
    pub clock: Clock,
    /// Rows by request count, then allocator.
    pub rows: Vec<LatencyRow>,
}

/// A target of issue 5, checked against the measurement.
#[derive(Clone, Debug, Serialize)]
pub struct TargetCheck {
    /// What it is.
    pub target: String,
    /// The measured figure.
    pub measured: String,
    /// Whether it is met.
    pub met: bool,
}

/// The whole study.
#[derive(Clone, Debug, Serialize)]
pub struct PowerStudy {
    /// Power models used, by name, with units and sources.
    pub models: Vec<(String, String, String)>,
    /// Synthetic workloads.
    pub synthetic: Vec<SyntheticResult>,
    /// Traces.
    pub traces: Vec<TraceResult>,
    /// Latency benchmark.
    pub latency: Option<LatencyResult>,
    /// The seed's figures.
    pub seed: SeedFigures,
    /// Targets.
    pub targets: Vec<TargetCheck>,
}

fn workload(spec: &str, seed: u64, args: &PowerArgs, epochs: u32) -> Result<Workload> {
    let mut w = match spec.to_ascii_lowercase().as_str() {
        "light" => Workload::light(seed),
        "medium" => Workload::medium(seed),
        other => {
            let (name, range) = other.split_once(':').with_context(|| {
                format!("workload '{spec}': use light, medium or NAME:MIN-MAX (percent)")
            })?;
            let (min, max) = range
                .split_once('-')
                .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
                .with_context(|| format!("workload '{spec}': MIN-MAX must be two numbers"))?;
            Workload::new(name, min, max, seed)
        }
    };
    w.epochs = epochs;
    w.kernel_percent = args.kernel_percent;
    w.churn_percent = args.churn_percent;
    w.validate()?;
    Ok(w)
}

/// Run the study.
pub fn run(args: PowerArgs) -> Result<()> {
    // Checked before anything runs: a benchmark of 0 requests has no
    // latency to report (it used to panic after the other parts ran).
    if let Some(bad) = args
        .latency_pages
        .iter()
        .flatten()
        .find(|&&p| p == 0 || p > 1 << 30)
    {
        anyhow::bail!(
            "--latency-pages {bad}: each count of page requests must be in 1..={}",
            1u64 << 30
        );
    }
    if !args.quick {
        // The default study replays every trace and runs the latency
        // benchmark up to 4 M pages: minutes, not seconds.
        eprintln!(
            "nvmos study power: the full study takes several minutes (over 5 on a 2-core machine); --quick runs a small version in seconds"
        );
    }
    let study = study(&args)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating report folder {}", args.out.display()))?;
    let json = serde_json::to_string_pretty(&study)?;
    let put = |name: &str, text: &str| {
        let path = args.out.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    };
    put("power.json", &json)?;
    put("power.html", &html(&study))?;
    if args.json {
        println!("{json}");
    } else {
        print!("{}", tables(&study));
        println!("\nreport: {}", args.out.join("power.html").display());
    }
    Ok(())
}

fn study(args: &PowerArgs) -> Result<PowerStudy> {
    let quick = args.quick;
    let bank_frames = if quick && args.bank == parse_memory("128MiB").unwrap_or(0) {
        parse_memory("16MiB").unwrap_or(4096)
    } else {
        args.bank
    };
    let sizes: Vec<u64> = if quick && args.sizes == [8 << 20, 1 << 20] {
        vec![1 << 18, 1 << 16]
    } else {
        args.sizes.clone()
    };
    let epochs = args.epochs.unwrap_or(if quick { 40 } else { 200 });
    let models = args
        .power
        .iter()
        .map(|p| PowerModel::load(p).with_context(|| format!("power model '{p}'")))
        .collect::<Result<Vec<_>>>()?;
    let workloads = args
        .workloads
        .iter()
        .map(|w| workload(w, args.seed, args, epochs))
        .collect::<Result<Vec<_>>>()?;
    for &size in &sizes {
        if size % bank_frames != 0 {
            bail!(
                "bank size {} does not divide the machine size {}: give a bank size that divides it",
                format_frames(bank_frames),
                format_frames(size)
            );
        }
    }
    let runs_per = |a: &AllocatorKind| migration_runs(*a).len() as u64;
    let per_input: u64 = args.alloc.iter().map(runs_per).sum();
    let trace_files = if args.no_traces {
        Vec::new()
    } else {
        trace_files(&args.traces)?
    };
    let steps = per_input * (sizes.len() * workloads.len() + trace_files.len()) as u64;
    let bar = crate::progress_bar(steps);

    let mut synthetic = Vec::new();
    for w in &workloads {
        for &frames in &sizes {
            let machine = SyntheticMachine {
                name: format_frames(frames),
                frames,
                bank_frames,
                page_size: FRAME_BYTES,
            };
            let mut rows = Vec::new();
            for &a in &args.alloc {
                for &migrate in migration_runs(a) {
                    bar.set_message(format!(
                        "{} {} {}{}",
                        w.name,
                        machine.name,
                        a.name(),
                        if migrate { " +migration" } else { "" }
                    ));
                    let row =
                        run_synthetic(a, migrate, w, &machine, &models).with_context(|| {
                            format!("{} on {} through {}", w.name, machine.name, a.name())
                        })?;
                    rows.push(row);
                    bar.inc(1);
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
    for path in &trace_files {
        let source =
            nvmos_trace::open(path).with_context(|| format!("opening {}", path.display()))?;
        let info = source.header().and_then(|h| h.machine.clone());
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
            None => (sizes.first().copied().unwrap_or(1 << 20), 1, 0),
        };
        let frames = memory_frames / bank_frames * bank_frames;
        if frames == 0 {
            bail!(
                "{}: the recorded machine is smaller than one bank",
                path.display()
            );
        }
        let machine = TraceMachine {
            frames,
            bank_frames,
            page_size: FRAME_BYTES,
            cpus: cpus.max(1),
            migrate_every_ns: args.migrate_every_ms.max(1) * 1_000_000,
        };
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("trace")
            .to_owned();
        let mut rows = Vec::new();
        // The kernel's own placement over the recorded pfn span (holes
        // included: banks in a hole never hold anything).
        let recorded_frames = span.div_ceil(bank_frames) * bank_frames;
        if recorded_frames > 0 {
            let recorded = TraceMachine {
                frames: recorded_frames,
                ..machine.clone()
            };
            let events =
                nvmos_trace::open(path).with_context(|| format!("opening {}", path.display()))?;
            rows.push(
                run_trace(
                    TracePlacement::AsRecorded,
                    false,
                    events,
                    &recorded,
                    &models,
                )
                .with_context(|| format!("{}: the recorded placement", path.display()))?,
            );
        }
        for &a in &args.alloc {
            for &migrate in migration_runs(a) {
                bar.set_message(format!(
                    "{name} {}{}",
                    a.name(),
                    if migrate { " +migration" } else { "" }
                ));
                let events = nvmos_trace::open(path)
                    .with_context(|| format!("opening {}", path.display()))?;
                let row = run_trace(
                    TracePlacement::Allocator(a),
                    migrate,
                    events,
                    &machine,
                    &models,
                )
                .with_context(|| format!("{}: replaying through {}", path.display(), a.name()))?;
                rows.push(row);
                bar.inc(1);
            }
        }
        traces.push(TraceResult {
            trace: name,
            machine,
            recorded_frames,
            rows,
        });
    }
    bar.finish_and_clear();

    let latency = if args.no_latency {
        None
    } else {
        let frames = args
            .latency_memory
            .unwrap_or(if quick { 1 << 18 } else { 8 << 20 });
        let pages = args.latency_pages.clone().unwrap_or_else(|| {
            if quick {
                vec![10_000, 100_000]
            } else {
                vec![10_000, 100_000, 1_000_000, 2_000_000, 4_000_000]
            }
        });

        Some(latency(
            &args.alloc,
            &pages,
            frames,
            bank_frames,
            args.latency_rounds,
        )?)
    };

    let mut study = PowerStudy {
        models: models
            .iter()
            .map(|m| {
                (
                    m.spec().name.clone(),
                    m.units().energy.to_owned(),
                    m.spec().source.clone(),
                )
            })
            .collect(),
        synthetic,
        traces,
        latency,
        seed: seed_figures(),
        targets: Vec::new(),
    };
    study.targets = targets(&study);
    Ok(study)
}

fn trace_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let files = crate::evaluate_cmd::trace_files_in(dir)?;
    if files.is_empty() {
        bail!(
            "no traces in {} (give --no-traces to skip them)",
            dir.display()
        );
    }
    Ok(files)
}

/// Seed 004's synthetic benchmark: `n` successive single-page (user)
/// requests on a fresh allocator, each timed with the TSC.
fn latency(
    allocators: &[AllocatorKind],
    pages: &[u64],
    frames: u64,
    bank_frames: u64,
    rounds: u32,
) -> Result<LatencyResult> {
    let clock = Clock::calibrate();
    let zone = [Zone::new(0, frames)];
    let bar = crate::progress_bar((pages.len() * allocators.len()) as u64);
    let mut rows = Vec::new();
    for &n in pages {
        if n > frames {
            bail!(
                "latency benchmark: {n} pages do not fit in {} (give a larger --latency-memory)",
                format_frames(frames)
            );
        }
        for &a in allocators {
            bar.set_message(format!("latency {n} {}", a.name()));
            let mut first: Vec<u64> = Vec::new();
            let mut best: Vec<u64> = vec![u64::MAX; n as usize];
            let mut raw_max = 0u64;
            let mut first_call = u64::MAX;
            for round in 0..rounds {
                let setup = nvmos_sim::Setup {
                    bank_frames,
                    ..nvmos_sim::Setup::new(&zone, 1)
                };
                let built = a
                    .build::<SpinYield>(&setup)
                    .with_context(|| format!("building {}", a.name()))?;
                let alloc = &*built;
                let mut held: Vec<Pfn> = Vec::with_capacity(n as usize);
                let mut samples: Vec<u64> = Vec::with_capacity(n as usize);
                let req = Request::new(Order::ZERO, 0, MigrateType::Movable);
                // One untimed request first: the very first call on a
                // freshly built allocator misses the cache on every
                // structure it touches, which no allocator in a running
                // system does (it is reported as `first_ns`).
                let t0 = ticks();
                let warm = alloc
                    .alloc(req)
                    .with_context(|| format!("{}: out of memory", a.name()))?;
                let t1 = ticks();
                first_call = first_call.min(t1.wrapping_sub(t0));
                alloc.free(warm, req).context("freeing the warm-up page")?;
                for _ in 0..n {
                    let t0 = ticks();
                    let got = alloc.alloc(req);
                    let t1 = ticks();
                    let pfn = got.with_context(|| format!("{}: out of memory", a.name()))?;
                    held.push(std::hint::black_box(pfn));
                    samples.push(t1.wrapping_sub(t0).saturating_sub(clock.overhead_ticks));
                }
                for (b, &s) in best.iter_mut().zip(&samples) {
                    *b = (*b).min(s);
                }
                raw_max = raw_max.max(samples.iter().copied().max().unwrap_or(0));
                for pfn in held {
                    alloc.free(pfn, req).context("freeing a benchmark page")?;
                }
                if round == 0 {
                    first = samples;
                }
            }
            let mean = |v: &[u64]| v.iter().map(|&s| s as f64).sum::<f64>() / n.max(1) as f64;
            let ns = |t: f64| clock.ns(t);
            let raw_mean_ns = ns(mean(&first));
            let mean_ns = ns(mean(&best));
            best.sort_unstable();
            let worst = best.last().copied().unwrap_or(0);
            rows.push(LatencyRow {
                allocator: a.name().to_owned(),
                pages: n,
                mean_ns,
                raw_mean_ns,
                p99_ns: ns(percentile(&best, 99.0) as f64),
                p999_ns: ns(percentile(&best, 99.9) as f64),
                p9999_ns: ns(percentile(&best, 99.99) as f64),
                raw_max_ns: ns(raw_max as f64),
                worst_ns: ns(worst as f64),
                raw_max_over_mean: ns(raw_max as f64) / raw_mean_ns,
                first_ns: ns(first_call as f64),
                worst_over_mean: ns(worst as f64) / mean_ns,
            });
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(LatencyResult {
        frames,
        rounds,
        clock,
        rows,
    })
}

/// The row of `kind` with or without migration; Adaptive-Buddy with
/// migration is also the registry's `Adaptive-Buddy+migration`.
fn find(rows: &[PowerRow], kind: AllocatorKind, migration: bool) -> Option<&PowerRow> {
    let is = |r: &&PowerRow, k| r.kind == Some(k) && r.migration == migration;
    rows.iter().find(|r| is(r, kind)).or_else(|| {
        (kind == AllocatorKind::Adaptive && migration)
            .then(|| rows.iter().find(|r| is(r, AllocatorKind::AdaptiveMigrate)))
            .flatten()
    })
}

fn targets(study: &PowerStudy) -> Vec<TargetCheck> {
    let mut out = Vec::new();
    for s in &study.synthetic {
        if let Some(r) = find(&s.rows, AllocatorKind::Adaptive, true) {
            out.push(TargetCheck {
                target: format!(
                    "Adaptive-Buddy with migration within 5 points of the optimum ({}, {})",
                    s.workload.name, s.machine.name
                ),
                measured: format!(
                    "{:.1}% offline vs optimum {:.1}%: {:.2} points off (seed: 9.5-11.3)",
                    r.offline_percent, r.optimum_offline_percent, r.points_off_optimum
                ),
                met: r.points_off_optimum <= 5.0,
            });
        }
        if s.workload.name == "light" {
            if let Some(r) = find(&s.rows, AllocatorKind::Buddy, false) {
                out.push(TargetCheck {
                    target: format!(
                        "Buddy keeps nearly every bank up at low occupancy (light, {})",
                        s.machine.name
                    ),
                    measured: format!(
                        "{:.1}% of banks up at the lowest footprint {:.1}%; mean offline {:.1}% vs optimum {:.1}%; {} of {} banks pinned by kernel pages at the end",
                        r.up_percent_at_low_footprint,
                        r.low_footprint_percent,
                        r.offline_percent,
                        r.optimum_offline_percent,
                        r.pinned_banks,
                        r.banks
                    ),
                    met: r.up_percent_at_low_footprint >= 90.0,
                });
            }
        }
    }
    if let Some(l) = &study.latency {
        for r in l.rows.iter().filter(|r| r.allocator == "Adaptive-Buddy") {
            out.push(TargetCheck {
                target: format!(
                    "Adaptive-Buddy worst-case allocation at most 10x its mean ({} pages)",
                    r.pages
                ),
                measured: format!(
                    "mean {:.1} ns; worst (min over {} rounds) {:.0} ns = {:.1}x; raw max {:.0} ns = {:.1}x; p99.99 {:.0} ns",
                    r.mean_ns, l.rounds, r.worst_ns, r.worst_over_mean, r.raw_max_ns, r.raw_max_over_mean, r.p9999_ns
                ),
                met: r.worst_over_mean <= 10.0,
            });
        }
    }
    out
}

fn energy_of(r: &PowerRow, i: usize) -> f64 {
    r.energy.get(i).map_or(0.0, |e| e.report.total)
}

fn row_name(r: &PowerRow) -> String {
    if r.migration && !r.kind.is_some_and(|k| k.caps().migrates) {
        format!("{} +migration", r.allocator)
    } else {
        r.allocator.clone()
    }
}

fn tables(study: &PowerStudy) -> String {
    let mut out = String::new();
    let model_names: Vec<&str> = study.models.iter().map(|m| m.0.as_str()).collect();
    let table = |title: String, rows: &[PowerRow], out: &mut String| {
        let _ = writeln!(out, "\n{title}");
        let _ = write!(
            out,
            "{:<36} {:>9} {:>9} {:>7} {:>8} {:>10} {:>7}",
            "allocator", "offline%", "optimum%", "off-by", "max-off%", "migrated", "pinned"
        );
        for m in &model_names {
            let _ = write!(
                out,
                " {:>18}",
                format!("E {m}").chars().take(18).collect::<String>()
            );
        }
        let _ = writeln!(out);
        for r in rows {
            let _ = write!(
                out,
                "{:<36} {:>9.1} {:>9.1} {:>7.2} {:>8.1} {:>10} {:>3}/{:<3}",
                row_name(r),
                r.offline_percent,
                r.optimum_offline_percent,
                r.points_off_optimum,
                r.max_offline_percent,
                r.pages_migrated,
                r.pinned_banks,
                r.banks
            );
            for i in 0..model_names.len() {
                let _ = write!(out, " {:>18.4e}", energy_of(r, i));
            }
            let _ = writeln!(out);
        }
    };
    for s in &study.synthetic {
        table(
            format!(
                "{} workload (footprint {}-{}%, {}% kernel), {} machine, {} banks of {}, {} epochs",
                s.workload.name,
                s.workload.footprint_min_percent,
                s.workload.footprint_max_percent,
                s.workload.kernel_percent,
                s.machine.name,
                s.machine.frames / s.machine.bank_frames,
                format_frames(s.machine.bank_frames),
                s.workload.epochs
            ),
            &s.rows,
            &mut out,
        );
    }
    for t in &study.traces {
        table(
            format!(
                "trace {} on {} ({} banks of {})",
                t.trace,
                format_frames(t.machine.frames),
                t.machine.frames / t.machine.bank_frames,
                format_frames(t.machine.bank_frames)
            ),
            &t.rows,
            &mut out,
        );
    }
    let _ = writeln!(
        out,
        "\nseed 004 Table 2 (average offline memory %) beside ours:"
    );
    let _ = writeln!(
        out,
        "{:<8} {:<8} {:>10} {:>10} {:>12} {:>10} {:>12}",
        "workload", "machine", "seed max", "seed opt", "seed A-B", "our opt", "our A-B+mig"
    );
    for &(w, m, max, opt, ab) in &study.seed.table2 {
        let ours = study.synthetic.iter().find(|s| {
            s.workload.name == w && s.machine.name.replace(" GiB", "") == m.replace(" GB", "")
        });
        let (o, a) = ours
            .and_then(|s| find(&s.rows, AllocatorKind::Adaptive, true))
            .map_or(("-".into(), "-".into()), |r| {
                (
                    format!("{:.1}", r.optimum_offline_percent),
                    format!("{:.1}", r.offline_percent),
                )
            });
        let _ = writeln!(
            out,
            "{w:<8} {m:<8} {max:>10} {opt:>10} {ab:>12} {o:>10} {a:>12}"
        );
    }
    if let Some(l) = &study.latency {
        let _ = writeln!(
            out,
            "\nlatency: successive single-page requests on {} ({} rounds; worst = slowest request's fastest round)",
            format_frames(l.frames),
            l.rounds
        );
        let _ = writeln!(
            out,
            "{:<24} {:>9} {:>8} {:>8} {:>9} {:>9} {:>7} {:>9} {:>7} | {:>10} {:>10}",
            "allocator",
            "pages",
            "mean ns",
            "p99",
            "p99.99",
            "worst",
            "w/mean",
            "raw max",
            "r/mean",
            "seed mean",
            "seed worst"
        );
        for r in &l.rows {
            let (sm, sw) = study.seed.table5_cell(r);
            let _ = writeln!(
                out,
                "{:<24} {:>9} {:>8.1} {:>8.0} {:>9.0} {:>9.0} {:>7.1} {:>9.0} {:>7.1} | {:>10} {:>10}",
                r.allocator, r.pages, r.mean_ns, r.p99_ns, r.p9999_ns, r.worst_ns, r.worst_over_mean, r.raw_max_ns, r.raw_max_over_mean, sm, sw
            );
        }
    }
    let _ = writeln!(out, "\ntargets:");
    for t in &study.targets {
        let _ = writeln!(
            out,
            "  [{}] {}: {}",
            if t.met { "met" } else { "MISSED" },
            t.target,
            t.measured
        );
    }
    let _ = writeln!(
        out,
        "\nenergy units: {}",
        study
            .models
            .iter()
            .map(|(n, u, _)| format!("{n} in {u}"))
            .collect::<Vec<_>>()
            .join("; ")
    );
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The bank map (seed 004's Fig. 9) as an SVG grid: black banks are
/// pinned by kernel pages, grey hold only movable pages, white are down.
fn bank_map_svg(r: &PowerRow) -> String {
    let n = r.bank_map.len().max(1);
    let cols = (n as f64).sqrt().ceil() as usize;
    let rows = n.div_ceil(cols);
    let cell = 14;
    let (w, h) = (cols * cell, rows * cell);
    let mut svg = format!(
        r#"<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img"><title>{}: {} pinned, {} up of {} banks</title>"#,
        esc(&row_name(r)),
        r.pinned_banks,
        r.up_banks,
        r.banks
    );
    for (b, &state) in r.bank_map.iter().enumerate() {
        let (x, y) = ((b % cols) * cell, (b / cols) * cell);
        let fill = match state {
            2 => "#000",
            1 => "#999",
            _ => "#fff",
        };
        let _ = write!(
            svg,
            r##"<rect x="{x}" y="{y}" width="{}" height="{}" fill="{fill}" stroke="#bbb"/>"##,
            cell - 1,
            cell - 1
        );
    }
    svg.push_str("</svg>");
    svg
}

fn html_table(rows: &[PowerRow], models: &[(String, String, String)]) -> String {
    let mut t = String::from("<table><tr><th>allocator</th><th>offline %</th><th>optimum %</th><th>points off</th><th>max offline %</th><th>pages migrated</th><th>pinned banks</th>");
    for (name, unit, _) in models {
        let _ = write!(
            t,
            "<th>energy {} ({})</th><th>saving %</th>",
            esc(name),
            esc(unit)
        );
    }
    t.push_str("</tr>");
    for r in rows {
        let _ = write!(
            t,
            "<tr><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.2}</td><td>{:.1}</td><td>{}</td><td>{}/{}</td>",
            esc(&row_name(r)),
            r.offline_percent,
            r.optimum_offline_percent,
            r.points_off_optimum,
            r.max_offline_percent,
            r.pages_migrated,
            r.pinned_banks,
            r.banks
        );
        for e in &r.energy {
            let _ = write!(
                t,
                "<td>{:.4e}</td><td>{:.1}</td>",
                e.report.total, e.report.saving_percent
            );
        }
        t.push_str("</tr>");
    }
    t.push_str("</table>");
    t
}

fn html(study: &PowerStudy) -> String {
    let mut h = String::from(
        r#"<!doctype html><html><head><meta charset="utf-8"><title>nvmos: memory power (seed 004)</title>
<style>body{font-family:sans-serif;max-width:1200px;margin:1em auto}table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child{text-align:left}.maps{display:flex;flex-wrap:wrap;gap:1.5em}.met{color:#060}.missed{color:#a00}</style></head><body>
<h1>Memory power: Adaptive-Buddy and the bank-buddy allocators (seed 004)</h1>
<p>Offline memory: share of banks with no allocated frame (they may be put in self-refresh or deep power-down, partial array self-refresh), time-weighted over the run. Optimum: the fewest banks that can hold what is allocated. Energy: background power of banks up (Active-Idle) and down, plus migration's copies; the workload's own accesses are the same for every allocator and left out.</p>
"#,
    );
    h.push_str("<h2>Targets</h2><ul>");
    for t in &study.targets {
        let _ = write!(
            h,
            "<li class=\"{}\">[{}] {}: {}</li>",
            if t.met { "met" } else { "missed" },
            if t.met { "met" } else { "missed" },
            esc(&t.target),
            esc(&t.measured)
        );
    }
    h.push_str("</ul>");
    for s in &study.synthetic {
        let _ = write!(
            h,
            "<h2>{} workload (footprint {}–{}%), {} machine, {} banks of {}</h2>",
            esc(&s.workload.name),
            s.workload.footprint_min_percent,
            s.workload.footprint_max_percent,
            esc(&s.machine.name),
            s.machine.frames / s.machine.bank_frames,
            format_frames(s.machine.bank_frames)
        );
        h.push_str(&html_table(&s.rows, &study.models));
        h.push_str("<p>Banks at the end of the run (seed 004's Fig. 9): black = pinned by kernel (unmovable) pages, grey = movable pages only, white = down.</p><div class=\"maps\">");
        for r in &s.rows {
            let _ = write!(
                h,
                "<figure>{}<figcaption>{} ({} pinned)</figcaption></figure>",
                bank_map_svg(r),
                esc(&row_name(r)),
                r.pinned_banks
            );
        }
        h.push_str("</div>");
    }
    for t in &study.traces {
        let _ = write!(
            h,
            "<h2>Trace {} on {} ({} banks)</h2>",
            esc(&t.trace),
            format_frames(t.machine.frames),
            t.machine.frames / t.machine.bank_frames
        );
        h.push_str(&html_table(&t.rows, &study.models));
    }
    h.push_str("<h2>Seed 004 Table 2 beside ours (average offline memory %)</h2><table><tr><th>workload</th><th>machine</th><th>seed max</th><th>seed optimal</th><th>seed Adaptive-Buddy</th><th>our optimum</th><th>our Adaptive-Buddy +migration</th></tr>");
    for &(w, m, max, opt, ab) in &study.seed.table2 {
        let ours = study
            .synthetic
            .iter()
            .find(|s| {
                s.workload.name == w && s.machine.name.replace(" GiB", "") == m.replace(" GB", "")
            })
            .and_then(|s| find(&s.rows, AllocatorKind::Adaptive, true));
        let (o, a) = ours.map_or(("-".into(), "-".into()), |r| {
            (
                format!("{:.1}", r.optimum_offline_percent),
                format!("{:.1}", r.offline_percent),
            )
        });
        let _ = write!(
            h,
            "<tr><td>{w}</td><td>{m}</td><td>{max}</td><td>{opt}</td><td>{ab}</td><td>{o}</td><td>{a}</td></tr>"
        );
    }
    h.push_str("</table>");
    if let Some(l) = &study.latency {
        let _ = write!(
            h,
            "<h2>Synthetic latency benchmark (seed 004's Table 5) on {}</h2><p>Successive single-page requests on a fresh allocator, each timed with the TSC. Worst = the slowest request after taking each request's fastest time over {} identical rounds (strips preemption on this shared VM); raw max = the slowest request of any round.</p><table><tr><th>allocator</th><th>pages</th><th>mean ns</th><th>p99</th><th>p99.99</th><th>worst ns</th><th>worst/mean</th><th>raw max ns</th><th>raw/mean</th><th>seed mean</th><th>seed worst</th></tr>",
            format_frames(l.frames),
            l.rounds
        );
        for r in &l.rows {
            let (sm, sw) = study.seed.table5_cell(r);
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.0}</td><td>{:.0}</td><td>{:.0}</td><td>{:.1}</td><td>{:.0}</td><td>{:.1}</td><td>{sm}</td><td>{sw}</td></tr>",
                esc(&r.allocator), r.pages, r.mean_ns, r.p99_ns, r.p9999_ns, r.worst_ns, r.worst_over_mean, r.raw_max_ns, r.raw_max_over_mean
            );
        }
        h.push_str("</table>");
    }
    h.push_str("<h2>Power models</h2><ul>");
    for (name, unit, source) in &study.models {
        let _ = write!(h, "<li>{} ({}): {}</li>", esc(name), esc(unit), esc(source));
    }
    h.push_str("</ul></body></html>\n");
    h
}
