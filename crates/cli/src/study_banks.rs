//! `nvmos study banks`: seed 002's experiment and analysing program,
//! rendered as a table, JSON, or an HTML page with SVG charts.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use nvmos_memsys::{Machine, PagePolicy};
use nvmos_sim::banks::{self, Access, Analysis, BanksOptions, BanksStudy, Kernel, Placement};
use serde::Serialize;

#[derive(Args, Debug)]
pub struct BanksArgs {
    /// The machine: a preset name (xeon-3ch, ddr4-2400, coffeelake-xor,
    /// pcm-lee2009) or a TOML file.
    #[arg(long, default_value = "xeon-3ch")]
    machine: String,

    /// Core counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    cores: Vec<u32>,

    /// The STREAM kernel.
    #[arg(long, value_enum, default_value_t = KernelArg::Copy)]
    kernel: KernelArg,

    /// MiB per array per core (STREAM has three arrays) [default: 4, 1
    /// with --quick].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    array_mib: Option<u64>,

    /// Passes over the arrays.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    passes: u64,

    /// Cache-line misses each core keeps outstanding.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=256))]
    mlp: u32,

    /// Page policy of the memory controller.
    #[arg(long, value_enum, default_value_t = PolicyArg::Open)]
    policy: PolicyArg,

    /// Requests each channel's queue holds.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=4096))]
    queue: u32,

    /// Seed of the random placements and access orders.
    #[arg(long, default_value_t = 2012)]
    seed: u64,

    /// The timing model before issue 18: blocking scheduler, writes
    /// queued with reads (no write buffer), no refresh.
    #[arg(long)]
    basic_model: bool,

    /// Smaller arrays (1 MiB): a quick look.
    #[arg(long)]
    quick: bool,

    /// Skip the analysing program.
    #[arg(long)]
    no_analyse: bool,

    /// Print the results as JSON instead of tables.
    #[arg(long)]
    json: bool,

    /// Also write banks.html (charts) and banks.json into this folder.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum KernelArg {
    Copy,
    Scale,
    Add,
    Triad,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum PolicyArg {
    Open,
    Closed,
}

/// Everything the command found.
#[derive(Serialize)]
struct Output {
    study: BanksStudy,
    /// The headline: 4 (or the most) cores, sequential access.
    headline: Vec<Headline>,
    analysis: Option<Analysis>,
}

#[derive(Serialize)]
struct Headline {
    cores: u32,
    placement: Placement,
    /// Run time relative to sequential placement.
    vs_sequential: f64,
    /// Percent faster than sequential placement.
    faster_percent: f64,
}

fn machine(name: &str) -> Result<Machine> {
    if Machine::preset_names().contains(&name) {
        return Ok(Machine::preset(name)?);
    }
    if std::path::Path::new(name).exists() {
        return Machine::load(name).with_context(|| format!("loading machine file {name}"));
    }
    bail!(
        "{name:?} is neither a preset ({}) nor a machine file",
        Machine::preset_names().join(", ")
    )
}

pub fn run(args: BanksArgs) -> Result<()> {
    let machine = machine(&args.machine)?;
    let options = BanksOptions {
        cores: args.cores.clone(),
        kernel: match args.kernel {
            KernelArg::Copy => Kernel::Copy,
            KernelArg::Scale => Kernel::Scale,
            KernelArg::Add => Kernel::Add,
            KernelArg::Triad => Kernel::Triad,
        },
        array_bytes: args.array_mib.unwrap_or(if args.quick { 1 } else { 4 }) << 20,
        passes: args.passes,
        mlp: args.mlp,
        policy: match args.policy {
            PolicyArg::Open => PagePolicy::Open,
            PolicyArg::Closed => PagePolicy::Closed,
        },
        queue_depth: args.queue as usize,
        seed: args.seed,
        basic_model: args.basic_model,
        ..BanksOptions::default()
    };
    let cells = options.cores.len() * options.accesses.len() * options.placements.len();
    let bar = crate::progress_bar(cells as u64);
    let study = banks::study(&machine, &options, &mut |row| {
        bar.set_message(format!(
            "{} cores {:?} {:?}",
            row.cores, row.access, row.placement
        ));
        bar.inc(1);
    });
    bar.finish_and_clear();
    let study = study.context("running the banks study")?;
    let analysis = if args.no_analyse {
        None
    } else {
        Some(banks::analyse(&machine, 1).context("running the analysing program")?)
    };
    let most = options.cores.iter().copied().max().unwrap_or(1);
    let headline = study
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
        .collect();
    let output = Output {
        study,
        headline,
        analysis,
    };
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let json = serde_json::to_string_pretty(&output)?;
        std::fs::write(dir.join("banks.json"), json + "\n")
            .with_context(|| format!("writing {}", dir.join("banks.json").display()))?;
        std::fs::write(dir.join("banks.html"), html(&output))
            .with_context(|| format!("writing {}", dir.join("banks.html").display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else {
        print!("{}", table(&output));
    }
    Ok(())
}

fn name(p: Placement) -> &'static str {
    match p {
        Placement::Sequential => "sequential (buddy)",
        Placement::Random => "random (M3, shared)",
        Placement::M3 => "M3 (partitioned)",
    }
}

fn access_name(a: Access) -> &'static str {
    match a {
        Access::Sequential => "sequential",
        Access::Random => "random",
    }
}

fn table(o: &Output) -> String {
    let s = &o.study;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Seed 002 on {}: STREAM {:?}, {} MiB per array per core, {:?}-page, queue {}",
        s.machine,
        s.options.kernel,
        s.options.array_bytes >> 20,
        s.options.policy,
        s.options.queue_depth
    );
    let _ = writeln!(
        out,
        "{:>5}  {:<10} {:<20} {:>6} {:>6} {:>9} {:>6} {:>9} {:>6} {:>8} {:>7}",
        "cores",
        "access",
        "placement",
        "hit%",
        "miss%",
        "conflict%",
        "BLP",
        "run ms",
        "GB/s",
        "lat ns",
        "vs seq"
    );
    for r in &s.rows {
        let _ = writeln!(
            out,
            "{:>5}  {:<10} {:<20} {:>6.1} {:>6.1} {:>9.1} {:>6.2} {:>9.3} {:>6.2} {:>8.1} {:>7.3}",
            r.cores,
            access_name(r.access),
            name(r.placement),
            r.hit_rate * 100.0,
            r.miss_rate * 100.0,
            r.conflict_rate * 100.0,
            r.blp,
            r.run_ns / 1e6,
            r.bandwidth_gbs,
            r.latency_ns,
            r.vs_sequential
        );
    }
    out.push('\n');
    for h in &o.headline {
        let _ = writeln!(
            out,
            "{} cores, sequential access: {} runs in {:.3}x the time of sequential placement ({:+.1}% speed)",
            h.cores,
            name(h.placement),
            h.vs_sequential,
            h.faster_percent
        );
    }
    out.push_str("\nWhat seed 002 reports (as charts; no numbers in its text):\n");
    for line in &s.seed_reports {
        let _ = writeln!(out, "  - {line}");
    }
    if let Some(a) = &o.analysis {
        out.push_str(&analysis_text(a));
    }
    out
}

fn bytes(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KB", n >> 10)
    } else {
        format!("{n} B")
    }
}

fn analysis_text(a: &Analysis) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nAnalysing program on {} (latencies only; the mapping checks the result afterwards):",
        a.machine
    );
    let _ = writeln!(
        out,
        "  reference {:#x}; first conflicting frame at {:#x}; threshold {:.1} ns",
        a.reference, a.conflicting, a.threshold_ns
    );
    let _ = writeln!(
        out,
        "  the same bank comes back every {} cache line(s){}",
        a.unit_lines,
        if a.unit_lines == 3 {
            ": a frame is spread over 3 channels by cache line"
        } else {
            ""
        }
    );
    let leaving: Vec<String> = a
        .strides
        .iter()
        .filter(|s| s.1)
        .map(|s| bytes(s.0))
        .collect();
    let _ = writeln!(out, "  strides that leave the bank: {}", leaving.join(", "));
    let _ = writeln!(
        out,
        "  agrees with the machine's mapping: {} ({} of {} lines and {} strides checked, {} line mismatches)",
        if a.agrees { "yes" } else { "NO" },
        a.line_latency_ns.len(),
        a.line_latency_ns.len(),
        a.strides.len(),
        a.line_mismatches
    );
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A grouped bar chart: groups of (label, value) bars.
fn bars(title: &str, unit: &str, groups: &[(String, Vec<(String, f64)>)]) -> String {
    const COLOURS: [&str; 3] = ["#4e79a7", "#f28e2b", "#59a14f"];
    let per = groups.iter().map(|g| g.1.len()).max().unwrap_or(1);
    let (bw, gap, h, top, left) = (22.0, 26.0, 200.0, 30.0, 50.0);
    let width = left + groups.len() as f64 * (per as f64 * bw + gap) + 20.0;
    let max = groups
        .iter()
        .flat_map(|g| g.1.iter().map(|b| b.1))
        .fold(0.0f64, f64::max)
        .max(1e-12);
    let mut svg = format!(
        "<h3>{}</h3>\n<svg width=\"{width:.0}\" height=\"{:.0}\" xmlns=\"http://www.w3.org/2000/svg\" font-family=\"sans-serif\" font-size=\"11\">\n",
        escape(title),
        h + top + 60.0
    );
    let _ = writeln!(
        svg,
        "<text x=\"4\" y=\"14\">{} (max {:.3})</text>",
        escape(unit),
        max
    );
    for (gi, (label, values)) in groups.iter().enumerate() {
        let x0 = left + gi as f64 * (per as f64 * bw + gap);
        for (bi, (name, v)) in values.iter().enumerate() {
            let bh = v / max * h;
            let _ = writeln!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{}: {v:.3}</title></rect>",
                x0 + bi as f64 * bw,
                top + h - bh,
                bw - 2.0,
                COLOURS[bi % COLOURS.len()],
                escape(name)
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{x0:.1}\" y=\"{:.1}\">{}</text>",
            top + h + 16.0,
            escape(label)
        );
    }
    let names = groups.first().map(|g| g.1.clone()).unwrap_or_default();
    for (bi, (name, _)) in names.iter().enumerate() {
        let _ = writeln!(
            svg,
            "<rect x=\"{:.0}\" y=\"{:.0}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.0}\" y=\"{:.0}\">{}</text>",
            left + bi as f64 * 170.0,
            top + h + 30.0,
            COLOURS[bi % COLOURS.len()],
            left + bi as f64 * 170.0 + 14.0,
            top + h + 39.0,
            escape(name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn html(o: &Output) -> String {
    let s = &o.study;
    let group = |metric: &dyn Fn(&banks::BanksRow) -> f64| -> Vec<(String, Vec<(String, f64)>)> {
        let mut groups: Vec<(String, Vec<(String, f64)>)> = Vec::new();
        for r in &s.rows {
            let label = format!("{}c {}", r.cores, access_name(r.access));
            if groups.last().is_none_or(|g| g.0 != label) {
                groups.push((label, Vec::new()));
            }
            let g = groups.last_mut().expect("just pushed");
            g.1.push((name(r.placement).to_owned(), metric(r)));
        }
        groups
    };
    let mut page = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>nvmos: seed 002, banks</title></head><body>\n",
    );
    let _ = writeln!(
        page,
        "<h1>Frame placement and row-buffer conflicts (seed 002)</h1>\n<p>Machine {}; STREAM {:?}, {} MiB per array per core, {:?}-page policy. <a href=\"index.html\">nvmos report</a></p>",
        escape(&s.machine),
        s.options.kernel,
        s.options.array_bytes >> 20,
        s.options.policy
    );
    page.push_str(&bars(
        "Run time",
        "ms until the last core finishes",
        &group(&|r| r.run_ns / 1e6),
    ));
    page.push_str(&bars(
        "Row-buffer conflicts",
        "conflicts per request",
        &group(&|r| r.conflict_rate),
    ));
    page.push_str(&bars(
        "Bank-level parallelism",
        "mean banks busy",
        &group(&|r| r.blp),
    ));
    page.push_str("<h2>Table</h2>\n<pre>");
    page.push_str(&escape(&table(&Output {
        study: o.study.clone(),
        headline: Vec::new(),
        analysis: None,
    })));
    page.push_str("</pre>\n");
    if let Some(a) = &o.analysis {
        page.push_str("<h2>Analysing program</h2>\n");
        let lines: Vec<(String, f64)> = a
            .line_latency_ns
            .iter()
            .map(|&(off, ns)| (format!("+{off}"), ns))
            .collect();
        page.push_str(&bars(
            "Latency of each cache line of the first frame after the conflict, paired with the reference",
            "ns",
            &[("lines".to_owned(), lines)],
        ));
        page.push_str("<pre>");
        page.push_str(&escape(&analysis_text(a)));
        page.push_str("</pre>\n");
    }
    page.push_str("</body></html>\n");
    page
}
