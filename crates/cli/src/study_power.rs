//! `nvmos study power`: seed 004 (Adaptive-Buddy) on this machine. The
//! study is `nvmos_sim::power::PowerStudy`; this file parses the options,
//! draws its progress, writes `power.json` and `power.html` into the
//! report folder and prints the tables (or `--json`), both rendered by
//! `nvmos_pages::power`.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use nvmos_report::OutputDir;
use nvmos_sim::power::{PowerStudy, MAX_LATENCY_PAGES};
use nvmos_sim::study::{Scale, Study};
use nvmos_sim::units::parse_memory;
use nvmos_sim::AllocatorKind;

/// Options of `nvmos study power`. Unset options take the study's value
/// at its scale (`--quick` or the full study).
#[derive(Args, Debug)]
pub struct PowerArgs {
    /// Machine sizes for the synthetic workloads [default: 32GiB,4GiB;
    /// 1GiB,256MiB with --quick].
    #[arg(long, value_name = "SIZE,...", value_delimiter = ',', value_parser = parse_memory)]
    sizes: Option<Vec<u64>>,

    /// Bank size, the power-management unit [default: 128MiB, Linux's
    /// memory section (256 banks on 32 GiB, as the seed's Fig. 3); 16MiB
    /// with --quick].
    #[arg(long, value_name = "SIZE", value_parser = parse_memory)]
    bank: Option<u64>,

    /// Workloads: light (footprint 10–50%), medium (30–80%), or
    /// NAME:MIN-MAX for another footprint range in percent [default: light,medium].
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    workloads: Option<Vec<String>>,

    /// Epochs (simulated seconds) per synthetic run [default: 200, 40 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    epochs: Option<u32>,

    /// Share of the footprint that is kernel (unmovable) data, percent [default: 10].
    #[arg(long)]
    kernel_percent: Option<f64>,

    /// Share of live blocks freed and replaced every epoch, percent [default: 5].
    #[arg(long)]
    churn_percent: Option<f64>,

    /// Seed of the synthetic workloads [default: 2015].
    #[arg(long)]
    seed: Option<u64>,

    /// Allocators of the registry (nvmos evaluate --help lists them); the
    /// bank-aware ones run without and with migration
    /// [default: buddy,lazy-buddy,array-bank,list-bank,adaptive].
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = parse_alloc)]
    alloc: Option<Vec<AllocatorKind>>,

    /// Power models: presets (seed004-relative, ddr4-2400-micron,
    /// lpddr4-3200-micron) or TOML files [default: all three presets].
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    power: Option<Vec<String>>,

    /// Folder of traces to replay (every file in it), or one trace [default: traces].
    #[arg(long)]
    traces: Option<PathBuf>,

    /// Skip the traces.
    #[arg(long)]
    no_traces: bool,

    /// Trace time between migration passes, ms [default: 1000].
    #[arg(long)]
    migrate_every_ms: Option<u64>,

    /// Page requests of the latency benchmark (seed 004's Table 5)
    /// [default: 10000,100000,1000000,2000000,4000000; up to 100000 with --quick].
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    latency_pages: Option<Vec<u64>>,

    /// Memory of the latency benchmark's machine [default: 32GiB, 1GiB with --quick].
    #[arg(long, value_name = "SIZE", value_parser = parse_memory)]
    latency_memory: Option<u64>,

    /// Rounds of each latency run: the same requests repeated on a fresh
    /// allocator; the per-request minimum over rounds removes preemption [default: 3].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    latency_rounds: Option<u32>,

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

fn parse_alloc(text: &str) -> Result<AllocatorKind, String> {
    text.parse()
}

/// Run the study.
pub fn run(args: PowerArgs) -> Result<()> {
    // Checked before anything runs: a benchmark of 0 requests has no
    // latency to report.
    if let Some(bad) = args
        .latency_pages
        .iter()
        .flatten()
        .find(|&&p| p == 0 || p > MAX_LATENCY_PAGES)
    {
        bail!(
            "--latency-pages {bad}: each count of page requests must be in 1..={MAX_LATENCY_PAGES}"
        );
    }
    let scale = crate::study::scale(args.quick);
    let mut o = PowerStudy::options(scale);
    macro_rules! given {
        ($($arg:ident => $field:ident),*) => {$(if let Some(v) = args.$arg.clone() { o.$field = v; })*};
    }
    given!(sizes => sizes, bank => bank_frames, workloads => workloads, epochs => epochs,
        kernel_percent => kernel_percent, churn_percent => churn_percent, seed => seed,
        alloc => allocators, power => power, migrate_every_ms => migrate_every_ms);
    if let Some(t) = &args.traces {
        o.traces = Some(t.clone());
    }
    if args.no_traces {
        o.traces = None;
    }
    if args.no_latency {
        o.latency = None;
    }
    if let Some(l) = &mut o.latency {
        if let Some(p) = &args.latency_pages {
            l.pages = p.clone();
        }
        l.frames = args.latency_memory.unwrap_or(l.frames);
        l.rounds = args.latency_rounds.unwrap_or(l.rounds);
    }
    if scale == Scale::Full {
        // The full study replays every trace and runs the latency
        // benchmark up to 4 M pages: minutes, not seconds.
        eprintln!(
            "nvmos study power: the full study takes several minutes (over 5 on a 2-core machine); --quick runs a small version in seconds"
        );
    }
    let study = crate::with_progress(0, |p| PowerStudy::run(&o, p));
    let study = study?;
    let inputs: Vec<&std::path::Path> = o.traces.iter().map(PathBuf::as_path).collect();
    let out = OutputDir::create(&args.out, &inputs)?;
    out.write_json("power.json", &study)?;
    let nav = out.nav("power.html");
    out.write(
        "power.html",
        nvmos_pages::power::html(&study, &nav)?.as_bytes(),
    )?;
    if args.json {
        println!("{}", nvmos_report::json_text(&study)?);
    } else {
        print!("{}", nvmos_pages::power::tables(&study)?);
        println!("\nreport: {}", args.out.join("power.html").display());
    }
    Ok(())
}
