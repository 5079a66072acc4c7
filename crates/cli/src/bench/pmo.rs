//! `nvmos bench pmo`: seed 001's evaluation on this machine. Each workload
//! (see [`super::pmo_kernels`]) runs in every mode: no encryption, decrypt
//! at fault (the prior design), DRAM as cache, and DRAM cache with each
//! predictor at each prediction depth; the median of `rounds` runs is kept.
//! The figure of merit is seed 001's: the speed-up of DRAM cache with
//! prediction (best depth) over decrypt-at-fault, beside the seed's 1.81×.
//! Also measured, in the same run: attach and first-touch cost per page in
//! each mode, against a plain kernel page fault and the bare userfaultfd
//! round trip.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use nvmos_pmo::attach::mem_backing::{MemBacking, PAGE_SIZE};
use nvmos_pmo::attach::predict::PredictorKind;
use nvmos_pmo::attach::{cache, probe, Attachment, Mode, Perm};
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::pmo_kernels::{self, Session, Sizes, Workload};
use nvmos_measure::stats::median_index;

/// Seed 001's result: DRAM cache with prediction over the original design.
pub const SEED_SPEEDUP: f64 = 1.81;
/// Seed 001's best prediction depth on average.
pub const SEED_BEST_DEPTH: usize = 8;

#[derive(Args, Debug)]
pub struct PmoArgs {
    /// Workloads, comma-separated: conv2d, lu, gauss, matmul, fileserver.
    #[arg(
        long,
        value_name = "NAME,...",
        value_delimiter = ',',
        default_value = "conv2d,lu,gauss,matmul,fileserver"
    )]
    workloads: Vec<Workload>,

    /// Predictors run at every depth: stream, stride, markov.
    #[arg(
        long,
        value_name = "NAME,...",
        value_delimiter = ',',
        default_value = "stream,stride,markov"
    )]
    predictors: Vec<PredictorKind>,

    /// Prediction depths (0: DRAM cache, no prediction).
    #[arg(long, value_name = "N,...", value_delimiter = ',', default_value = "0,1,2,4,8,16",
          value_parser = clap::value_parser!(u16).range(0..=1024))]
    depths: Vec<u16>,

    /// Runs per cell, taken in rounds over every mode in turn; the median is
    /// kept [default: 3, 1 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,

    /// Pages of the object in the first-touch measurement.
    #[arg(long, value_name = "N", default_value_t = 4096,
          value_parser = clap::value_parser!(u32).range(1..=262_144))]
    touch_pages: u32,

    /// Smaller problems and one round (sizes are printed).
    #[arg(long)]
    quick: bool,

    /// Seed for the data and the file server's operations.
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// Print the results as JSON instead of tables.
    #[arg(long)]
    json: bool,

    /// Folder for the report page (pmo.html) and its data (pmo.json).
    #[arg(long, default_value = "nvmos-report")]
    out: PathBuf,
}

/// One mode of one workload.
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// `plain`, `decrypt-at-fault`, `dram-cache`, `stream-8`, ...
    pub mode: String,
    pub predictor: Option<String>,
    pub depth: Option<usize>,
    /// Median wall time of the session (attach, compute, psync, detach).
    pub ms: f64,
    /// Every run's time.
    pub runs_ms: Vec<f64>,
    /// The median run's counters.
    pub session: Session,
    /// decrypt-at-fault's time over this one's (> 1: faster).
    pub speedup: f64,
}

/// The best prediction of a workload.
#[derive(Clone, Debug, Serialize)]
pub struct Best {
    pub mode: String,
    pub depth: usize,
    pub ms: f64,
    pub speedup: f64,
    /// At least seed 001's 1.81×.
    pub meets_seed: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct WorkloadReport {
    pub name: String,
    pub description: String,
    pub sequential: bool,
    pub cells: Vec<Cell>,
    pub best: Option<Best>,
}

/// Attach and first-touch cost in one mode.
#[derive(Clone, Debug, Serialize)]
pub struct TouchRow {
    pub what: String,
    /// The attach call alone (map, userfaultfd, threads), µs.
    pub attach_us: f64,
    /// First touch of every page in address order, per page.
    pub ns_per_page: f64,
    /// The detach call (nothing to psync), µs.
    pub detach_us: f64,
    pub faults: u64,
    pub pages_decrypted: u64,
    pub predicted: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PmoReport {
    pub quick: bool,
    pub rounds: u32,
    pub sizes: Sizes,
    pub touch_pages: usize,
    /// A plain anonymous page fault (first write), ns per page.
    pub kernel_fault_ns: f64,
    /// The bare userfaultfd round trip (first read), ns per page.
    pub uffd_round_trip_ns: f64,
    pub touch: Vec<TouchRow>,
    pub workloads: Vec<WorkloadReport>,
    pub seed_speedup: f64,
    pub seed_best_depth: usize,
    /// /proc/loadavg before and after: the machine's other work skews
    /// every timing here (2 cores; the handler and worker threads need one).
    pub loadavg_before: String,
    pub loadavg_after: String,
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

impl PmoArgs {
    fn modes(&self) -> Vec<Mode> {
        let mut modes = vec![Mode::Plain, Mode::DecryptAtFault, Mode::DramCache];
        let mut depths: Vec<usize> = self.depths.iter().map(|&d| d as usize).collect();
        depths.sort_unstable();
        depths.dedup();
        let mut predictors = self.predictors.clone();
        predictors.dedup();
        for (i, &predictor) in predictors.iter().enumerate() {
            for &depth in &depths {
                // Depth 0 predicts nothing: the same for every predictor.
                if depth == 0 && i > 0 {
                    continue;
                }
                modes.push(Mode::Predict { predictor, depth });
            }
        }
        modes
    }
}

fn median(values: &[f64]) -> usize {
    median_index(values).unwrap_or(0)
}

/// Attach, first-touch and detach costs, medians over `rounds`.
fn touch_row(what: &str, mode: Mode, warm: bool, pages: usize, rounds: u32) -> Result<TouchRow> {
    let base = 0x6200_0000_0000;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
    let bytes: Vec<u8> = (0..pages * PAGE_SIZE).map(|_| rng.gen()).collect();
    let mut samples = Vec::new();
    for _ in 0..rounds {
        cache::evict(base);
        let object = Arc::new(MemBacking::with_contents(base, &bytes, mode != Mode::Plain));
        let sweep = |a: &Attachment| {
            let s = a.as_slice();
            let mut sum = 0u64;
            for p in 0..pages {
                sum += s[p * PAGE_SIZE] as u64;
            }
            std::hint::black_box(sum);
        };
        if warm {
            let a = Attachment::attach(object.clone(), Perm::Read, mode)?;
            sweep(&a);
            a.detach()?;
        }
        let t0 = Instant::now();
        let a = Attachment::attach(object.clone(), Perm::Read, mode)?;
        let t1 = Instant::now();
        sweep(&a);
        let t2 = Instant::now();
        let stats = a.detach()?;
        let t3 = Instant::now();
        samples.push(TouchRow {
            what: what.to_string(),
            attach_us: (t1 - t0).as_nanos() as f64 / 1e3,
            ns_per_page: (t2 - t1).as_nanos() as f64 / pages as f64,
            detach_us: (t3 - t2).as_nanos() as f64 / 1e3,
            faults: stats.faults,
            pages_decrypted: stats.pages_decrypted,
            predicted: stats.predicted,
        });
        cache::evict(base);
    }
    let per_page: Vec<f64> = samples.iter().map(|s| s.ns_per_page).collect();
    Ok(samples.swap_remove(median(&per_page)))
}

/// Steps for a progress bar.
pub fn steps(args: &PmoArgs) -> u64 {
    let rounds = args.rounds.unwrap_or(if args.quick { 1 } else { 3 }) as u64;
    (args.workloads.len() * args.modes().len()) as u64 * rounds + 7
}

/// Run everything; `on_step` is called with a label after each run.
pub fn run(args: &PmoArgs, on_step: &mut dyn FnMut(&str)) -> Result<PmoReport> {
    let rounds = args.rounds.unwrap_or(if args.quick { 1 } else { 3 });
    let sizes = if args.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    let pages = args.touch_pages as usize;
    let loadavg_before = loadavg();

    let median_of = |f: &dyn Fn() -> std::io::Result<probe::FirstTouch>| -> Result<f64> {
        let mut v = Vec::new();
        for _ in 0..rounds.max(3) {
            v.push(f().context("measuring a fault baseline")?.ns_per_page());
        }
        Ok(v[median(&v)])
    };
    let kernel_fault_ns = median_of(&|| probe::kernel_first_touch(pages))?;
    on_step("kernel page fault");
    let uffd_round_trip_ns = median_of(&|| probe::uffd_first_touch(pages))?;
    on_step("userfaultfd round trip");
    let stream8 = Mode::Predict {
        predictor: PredictorKind::Stream,
        depth: SEED_BEST_DEPTH,
    };
    let mut touch = Vec::new();
    for (what, mode, warm) in [
        ("plain", Mode::Plain, false),
        ("decrypt-at-fault", Mode::DecryptAtFault, false),
        ("dram-cache (cold)", Mode::DramCache, false),
        ("dram-cache (warm: second attach)", Mode::DramCache, true),
        ("stream-8 (cold)", stream8, false),
    ] {
        touch.push(touch_row(what, mode, warm, pages, rounds.max(3))?);
        on_step(what);
    }

    let modes = args.modes();
    let mut workloads = Vec::new();
    let mut chosen = args.workloads.clone();
    chosen.dedup();
    for w in chosen {
        // Rounds go over all the modes in turn, so a change in the
        // machine's other load falls on every mode alike.
        let mut runs: Vec<Vec<Session>> = vec![Vec::new(); modes.len()];
        for round in 0..rounds {
            for (i, &mode) in modes.iter().enumerate() {
                let s = pmo_kernels::run(w, &sizes, mode, args.seed)
                    .with_context(|| format!("{} in mode {}", w.name(), mode.label()))?;
                on_step(&format!(
                    "{} {} round {}",
                    w.name(),
                    mode.label(),
                    round + 1
                ));
                runs[i].push(s);
            }
        }
        let mut cells: Vec<Cell> = Vec::new();
        for (&mode, mut runs) in modes.iter().zip(runs) {
            let ms: Vec<f64> = runs.iter().map(|s| s.ns as f64 / 1e6).collect();
            let m = median(&ms);
            let (predictor, depth) = match mode {
                Mode::Predict { predictor, depth } => {
                    (Some(predictor.name().to_string()), Some(depth))
                }
                _ => (None, None),
            };
            cells.push(Cell {
                mode: mode.label(),
                predictor,
                depth,
                ms: ms[m],
                runs_ms: ms.clone(),
                session: runs.swap_remove(m),
                speedup: 0.0,
            });
        }
        // Every mode computes the same thing from the same data.
        if let Some(reference) = cells.first().map(|c| (c.mode.clone(), c.session.checksum)) {
            for c in &cells {
                if c.session.checksum.to_bits() != reference.1.to_bits() {
                    bail!(
                        "{}: mode {} computed checksum {} but mode {} computed {}",
                        w.name(),
                        c.mode,
                        c.session.checksum,
                        reference.0,
                        reference.1
                    );
                }
            }
        }
        let decrypt_ms = cells
            .iter()
            .find(|c| c.mode == Mode::DecryptAtFault.label())
            .map(|c| c.ms);
        if let Some(d) = decrypt_ms {
            for c in &mut cells {
                c.speedup = d / c.ms.max(f64::MIN_POSITIVE);
            }
        }
        // Only cells whose predictor installed pages can show what
        // prediction gains; one that predicted nothing (a Markov chain on a
        // single pass) differs from the DRAM cache by noise alone.
        let best = cells
            .iter()
            .filter(|c| c.depth.is_some_and(|d| d > 0) && c.session.stats.predicted > 0)
            .min_by(|a, b| a.ms.total_cmp(&b.ms))
            .filter(|_| decrypt_ms.is_some())
            .map(|c| Best {
                mode: c.mode.clone(),
                depth: c.depth.unwrap_or(0),
                ms: c.ms,
                speedup: c.speedup,
                meets_seed: c.speedup >= SEED_SPEEDUP,
            });
        workloads.push(WorkloadReport {
            name: w.name().to_string(),
            description: sizes.describe(w),
            sequential: w.sequential(),
            cells,
            best,
        });
    }
    Ok(PmoReport {
        quick: args.quick,
        rounds,
        sizes,
        touch_pages: pages,
        kernel_fault_ns,
        uffd_round_trip_ns,
        touch,
        workloads,
        seed_speedup: SEED_SPEEDUP,
        seed_best_depth: SEED_BEST_DEPTH,
        loadavg_before,
        loadavg_after: loadavg(),
    })
}

/// The tables a person reads.
pub fn table(r: &PmoReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "load average (1, 5, 15 min) before: {}, after: {}\n",
        r.loadavg_before, r.loadavg_after
    );
    let _ = writeln!(
        out,
        "Attach and first touch, {} pages (4 KiB) read once each in address order; median of {} runs",
        r.touch_pages,
        r.rounds.max(3)
    );
    let _ = writeln!(
        out,
        "  plain kernel page fault (first write, anonymous memory): {:>8.0} ns/page",
        r.kernel_fault_ns
    );
    let _ = writeln!(
        out,
        "  bare userfaultfd round trip (UFFDIO_COPY of a ready page): {:>6.0} ns/page",
        r.uffd_round_trip_ns
    );
    let _ = writeln!(
        out,
        "  {:<34} {:>10} {:>10} {:>10} {:>8} {:>8} {:>9} {:>9}",
        "mode", "attach µs", "ns/page", "detach µs", "faults", "decrypt", "predicted", "×uffd rt"
    );
    for t in &r.touch {
        let _ = writeln!(
            out,
            "  {:<34} {:>10.1} {:>10.0} {:>10.1} {:>8} {:>8} {:>9} {:>9.2}",
            t.what,
            t.attach_us,
            t.ns_per_page,
            t.detach_us,
            t.faults,
            t.pages_decrypted,
            t.predicted,
            t.ns_per_page / r.uffd_round_trip_ns.max(f64::MIN_POSITIVE)
        );
    }
    for w in &r.workloads {
        let _ = writeln!(out, "\n{}: {}", w.name, w.description);
        let _ = writeln!(
            out,
            "  {:<18} {:>10} {:>17} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8} {:>6} {:>10}",
            "mode",
            "ms",
            "runs min–max",
            "×decrypt",
            "faults",
            "wp",
            "decrypt",
            "predicted",
            "used",
            "wasted",
            "late",
            "µs/fault"
        );
        for c in &w.cells {
            let s = &c.session.stats;
            let _ = writeln!(
                out,
                "  {:<18} {:>10.2} {:>17} {:>9.2} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8} {:>6} {:>10.2}",
                c.mode,
                c.ms,
                format!(
                    "{:.1}–{:.1}",
                    c.runs_ms.iter().copied().fold(f64::INFINITY, f64::min),
                    c.runs_ms.iter().copied().fold(0.0, f64::max)
                ),
                c.speedup,
                s.faults,
                s.wp_faults,
                s.pages_decrypted,
                s.predicted,
                c.session.predicted_used,
                c.session.predicted_wasted,
                s.predicted_late,
                s.handler_ns as f64 / 1e3 / (s.faults + s.wp_faults).max(1) as f64
            );
        }
    }
    let _ = writeln!(
        out,
        "\nDRAM cache with prediction (best depth) over decrypt-at-fault; seed 001: {:.2}× (best depth {} on average)",
        r.seed_speedup, r.seed_best_depth
    );
    for w in &r.workloads {
        if let Some(b) = &w.best {
            let verdict = if !w.sequential {
                "not a sequential kernel"
            } else if b.meets_seed {
                "target met"
            } else {
                "target missed"
            };
            let _ = writeln!(
                out,
                "  {:<11} {:>6.2}×  with {:<10} ({verdict})",
                w.name, b.speedup, b.mode
            );
        }
    }
    out
}

/// Run, print, and write the report page.
pub fn main(args: &PmoArgs) -> Result<()> {
    let bar = crate::progress_bar(steps(args));
    let report = run(args, &mut |label: &str| {
        bar.set_message(label.to_string());
        bar.inc(1);
    });
    bar.finish_and_clear();
    let report = report?;
    super::pmo_report::write(&args.out, &report)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", table(&report));
        println!("report: {}", args.out.join("pmo.html").display());
    }
    Ok(())
}
