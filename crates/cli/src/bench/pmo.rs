//! `nvmos bench pmo`: arguments, progress, the tables and the report page
//! (`pmo.html`, through nvmos-report, and `pmo.json`) for
//! `nvmos_pmo_bench::pmo` (seed 001's evaluation).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use nvmos_pmo::attach::predict::PredictorKind;
use nvmos_pmo_bench::kernels::Workload;
use nvmos_pmo_bench::pmo::{self, PmoBench, PmoBenchOptions, WorkloadReport};
use nvmos_report::chart::{Axis, BarChart, LineChart, Series};
use nvmos_report::page::{Cell, Html, HtmlTable, Page, STUDY_PAGES};
use nvmos_report::{OutputDir, TextTable};
use nvmos_sim::study::Study;

#[derive(Args, Debug)]
pub struct PmoArgs {
    /// Workloads, comma-separated: conv2d, lu, gauss, matmul, fileserver
    /// [default: all].
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    workloads: Option<Vec<Workload>>,

    /// Predictors run at every depth: stream, stride, markov [default: all].
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    predictors: Option<Vec<PredictorKind>>,

    /// Prediction depths (0: DRAM cache, no prediction) [default: 0,1,2,4,8,16].
    #[arg(long, value_name = "N,...", value_delimiter = ',',
          value_parser = clap::value_parser!(u16).range(0..=1024))]
    depths: Option<Vec<u16>>,

    /// Runs per cell, taken in rounds over every mode in turn; the median is
    /// kept [default: 3, 1 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,

    /// Pages of the object in the first-touch measurement [default: 4096].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=262_144))]
    touch_pages: Option<u32>,

    /// Smaller problems and one round (sizes are printed).
    #[arg(long)]
    quick: bool,

    /// Problem sizes, NAME=N,...: conv2d=IMAGES, lu=N, gauss=N, matmul=N,
    /// fileserver=FILES [default: the full or --quick sizes].
    #[arg(long, value_name = "NAME=N,...", value_delimiter = ',')]
    size: Vec<String>,

    /// Fault handler: spin this long before sleeping, µs [default: 0].
    #[arg(long, value_name = "US")]
    spin_us: Option<u32>,
    /// Prediction workers (decrypting threads) [default: 1].
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// Most pages a worker installs per UFFDIO_COPY [default: 16].
    #[arg(long, value_name = "PAGES")]
    run_pages: Option<usize>,
    /// Predicted pages the handler installs with a faulting page [default: 0].
    #[arg(long, value_name = "PAGES")]
    fault_around: Option<usize>,

    /// Seed for the data and the file server's operations [default: 1].
    #[arg(long)]
    seed: Option<u64>,

    /// Print the results as JSON instead of tables.
    #[arg(long)]
    json: bool,

    /// Folder for the report page (pmo.html) and its data (pmo.json).
    #[arg(long, default_value = "nvmos-report")]
    out: PathBuf,
}

impl PmoArgs {
    fn options(&self) -> Result<PmoBenchOptions> {
        let mut o = PmoBench::options(crate::study::scale(self.quick));
        for spec in &self.size {
            o.sizes.set(spec).map_err(anyhow::Error::msg)?;
        }
        let t = &mut o.tuning;
        t.spin_us = self.spin_us.unwrap_or(t.spin_us);
        t.workers = self.workers.unwrap_or(t.workers);
        t.run_pages = self.run_pages.unwrap_or(t.run_pages);
        t.fault_around = self.fault_around.unwrap_or(t.fault_around);
        if let Some(v) = &self.workloads {
            o.workloads = v.clone();
        }
        if let Some(v) = &self.predictors {
            o.predictors = v.clone();
        }
        if let Some(v) = &self.depths {
            o.depths = v.iter().map(|&d| usize::from(d)).collect();
        }
        if let Some(v) = self.rounds {
            o.rounds = v;
        }
        if let Some(v) = self.touch_pages {
            o.touch_pages = v as usize;
        }
        if let Some(v) = self.seed {
            o.seed = v;
        }
        Ok(o)
    }
}

/// Run, print, and write the report page.
pub fn main(args: &PmoArgs) -> Result<()> {
    let options = args.options()?;
    options.check()?;
    let bar = crate::progress_bar(options.steps());
    let result = pmo::run(&options, &mut |p| crate::show(&bar, &p));
    bar.finish_and_clear();
    let result = result?;
    let html = page(&result, args.quick)?;
    let dir = OutputDir::create(&args.out, &[])?;
    dir.write_json("pmo.json", &result)?;
    let path = dir.write("pmo.html", html.as_bytes())?;
    if args.json {
        print!("{}", nvmos_report::json_text(&result)?);
    } else {
        print!("{}", table(&result));
        println!("report: {}", path.display());
    }
    Ok(())
}

/// The tables a person reads.
fn table(r: &PmoBench) -> String {
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
    let mut t = TextTable::new([
        "mode",
        "attach µs",
        "ns/page",
        "detach µs",
        "faults",
        "decrypt",
        "predicted",
        "×uffd rt",
    ]);
    for row in &r.touch {
        t.row([
            row.what.clone(),
            format!("{:.1}", row.attach_us),
            format!("{:.0}", row.ns_per_page),
            format!("{:.1}", row.detach_us),
            row.faults.to_string(),
            row.pages_decrypted.to_string(),
            row.predicted.to_string(),
            format!(
                "{:.2}",
                row.ns_per_page / r.uffd_round_trip_ns.max(f64::MIN_POSITIVE)
            ),
        ]);
    }
    out.push_str(&indent(&t.render()));
    for w in &r.workloads {
        let _ = writeln!(out, "\n{}: {}", w.name, w.description);
        let mut t = TextTable::new([
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
            "µs/fault",
            "copies",
            "wake-ups",
            "decrypt ms",
            "compute ms",
            "sync ms",
        ]);
        for c in &w.cells {
            let s = &c.session.stats;
            t.row([
                c.mode.clone(),
                format!("{:.2}", c.ms),
                format!(
                    "{:.1}–{:.1}",
                    c.runs_ms.iter().copied().fold(f64::INFINITY, f64::min),
                    c.runs_ms.iter().copied().fold(0.0, f64::max)
                ),
                format!("{:.2}", c.speedup),
                s.faults.to_string(),
                s.wp_faults.to_string(),
                s.pages_decrypted.to_string(),
                s.predicted.to_string(),
                c.session.predicted_used.to_string(),
                c.session.predicted_wasted.to_string(),
                s.predicted_late.to_string(),
                format!(
                    "{:.2}",
                    s.handler_ns as f64 / 1e3 / (s.faults + s.wp_faults).max(1) as f64
                ),
                s.copy_ioctls.to_string(),
                (s.handler_wakeups + s.worker_wakeups).to_string(),
                format!("{:.2}", s.decrypt_ns as f64 / 1e6),
                format!("{:.2}", c.session.compute_ns as f64 / 1e6),
                format!("{:.2}", c.session.sync_ns as f64 / 1e6),
            ]);
        }
        out.push_str(&indent(&t.render()));
        if let (Some(ms), Some(c)) = (w.dram_ms, w.ceiling) {
            let _ = writeln!(
                out,
                "  the computation alone on resident DRAM: {ms:.2} ms; decrypt-at-fault over it: {c:.2}× (the most any fault path could gain)"
            );
        }
    }
    let _ = writeln!(
        out,
        "\nDRAM cache with prediction (best depth) over decrypt-at-fault; seed 001: {:.2}× (best depth {} on average)",
        r.seed_speedup, r.seed_best_depth
    );
    let mut t = TextTable::new(["workload", "speed-up", "with", "verdict"]);
    t.left(2).left(3);
    for w in &r.workloads {
        if let Some(b) = &w.best {
            let verdict = if !w.sequential {
                "not a sequential kernel"
            } else if b.meets_seed {
                "target met"
            } else {
                "target missed"
            };
            t.row([
                w.name.clone(),
                format!("{:.2}×", b.speedup),
                b.mode.clone(),
                verdict.to_string(),
            ]);
        }
    }
    out.push_str(&indent(&t.render()));
    out.push('\n');
    out.push_str(&super::checks_text(&r.checks));
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

/// `pmo.html`: the summary (best speed-up per workload against the seed's,
/// the checks), attach and first-touch cost, and per workload its table,
/// session times and the speed-up by prediction depth. Numbers carry
/// `data-workload`, `data-mode` and `data-field` naming where they are in
/// `pmo.json`.
fn page(r: &PmoBench, quick: bool) -> Result<String> {
    let mut page = Page::new(
        "pmo.html",
        "nvmos bench pmo",
        "nvmos bench pmo: persistent memory objects with DRAM as cache and per-page prediction (seed 001)",
    );
    page.nav(&STUDY_PAGES);
    page.summary_note(
        &Html::new()
            .text(&format!(
                "Every run is one PMO session, timed from attach to detach: attach (map at the object's fixed address, userfaultfd), compute in place, psync the outputs (dirty pages sealed with AES-256-GCM and committed), detach. Objects are volatile in-memory backings that seal pages for real; the DRAM cache is cold at the start of every run. Median of {} run(s){}. Seed 001 reports DRAM cache with prediction ",
                r.rounds,
                if quick { ", quick sizes" } else { "" },
            ))
            .number(r.seed_speedup)
            .text(&format!(
                "× faster than the original design, best depth {} on average. Load average (1, 5, 15 min) before: {}, after: {} (2 cores).",
                r.seed_best_depth, r.loadavg_before, r.loadavg_after
            )),
    );
    let mut summary = HtmlTable::new([
        "workload",
        "kind",
        "best",
        "ms",
        "decrypt-at-fault ms",
        "speed-up ×",
        "seed 001 ×",
        "target",
    ]);
    for w in &r.workloads {
        let Some(b) = &w.best else { continue };
        let decrypt = w
            .cells
            .iter()
            .find(|c| c.mode == "decrypt-at-fault")
            .map_or(f64::NAN, |c| c.ms);
        let n = w.name.as_str();
        summary.row(vec![
            Cell::text(n),
            Cell::text(if w.sequential { "sequential" } else { "other" }),
            Cell::text(&b.mode),
            Cell::number(b.ms, &[("data-workload", n), ("data-field", "best.ms")]),
            Cell::number(decrypt, &[]),
            Cell::number(
                b.speedup,
                &[("data-workload", n), ("data-field", "best.speedup")],
            ),
            Cell::number(r.seed_speedup, &[]),
            Cell::text(if !w.sequential {
                "—"
            } else if b.meets_seed {
                "met"
            } else {
                "missed"
            }),
        ]);
    }
    page.summary_table(&summary);
    page.summary_table(&checks_table(r));
    let best: Vec<(String, f64)> = r
        .workloads
        .iter()
        .filter_map(|w| {
            w.best
                .as_ref()
                .map(|b| (format!("{} ({})", w.name, b.mode), b.speedup))
        })
        .collect();
    if !best.is_empty() {
        page.chart(
            &BarChart::new(
                "best",
                "Speed-up over decrypt-at-fault, best prediction (line: seed 001)",
            )
            .attr("data-workload", "summary")
            .value_axis(Axis::linear("speed-up over decrypt-at-fault (×)"))
            .categories(best.iter().map(|b| b.0.clone()))
            .series("best prediction", best.iter().map(|b| Some(b.1)).collect())
            .unit("×")
            .reference(r.seed_speedup, "seed 001")
            .render()?,
        );
    }

    page.section("touch", "Attach and first-touch cost");
    page.note(
        &Html::new()
            .text(&format!(
                "An object of {} pages read once per page in address order. Baselines measured in the same run: a plain kernel page fault (first write to anonymous memory) ",
                r.touch_pages
            ))
            .figure(r.kernel_fault_ns, &[("data-field", "kernel_fault_ns")])
            .text(" ns/page, and the bare userfaultfd round trip (a handler thread answering each fault with UFFDIO_COPY of a ready page) ")
            .figure(r.uffd_round_trip_ns, &[("data-field", "uffd_round_trip_ns")])
            .text(" ns/page."),
    );
    let mut touch = HtmlTable::new([
        "mode",
        "attach µs",
        "first touch ns/page",
        "× uffd round trip",
        "× kernel fault",
        "detach µs",
        "faults",
        "decrypted",
        "predicted",
    ]);
    for t in &r.touch {
        touch.row(vec![
            Cell::text(&t.what),
            Cell::number(t.attach_us, &[]),
            Cell::number(
                t.ns_per_page,
                &[("data-mode", &t.what), ("data-field", "ns_per_page")],
            ),
            Cell::number(t.ns_per_page / r.uffd_round_trip_ns, &[]),
            Cell::number(t.ns_per_page / r.kernel_fault_ns, &[]),
            Cell::number(t.detach_us, &[]),
            Cell::figure(t.faults.to_string()),
            Cell::figure(t.pages_decrypted.to_string()),
            Cell::figure(t.predicted.to_string()),
        ]);
    }
    page.table(&touch);
    let mut rows = vec![
        ("kernel page fault".to_string(), r.kernel_fault_ns),
        ("userfaultfd round trip".to_string(), r.uffd_round_trip_ns),
    ];
    rows.extend(r.touch.iter().map(|t| (t.what.clone(), t.ns_per_page)));
    page.chart(
        &BarChart::new("touch", "First touch, ns per page")
            .attr("data-workload", "touch")
            .value_axis(Axis::linear("ns per page"))
            .categories(rows.iter().map(|r| r.0.clone()))
            .series("first touch", rows.iter().map(|r| Some(r.1)).collect())
            .render()?,
    );
    for w in &r.workloads {
        workload(&mut page, w, r.seed_speedup)?;
    }
    Ok(page.render())
}

fn checks_table(r: &PmoBench) -> HtmlTable {
    let mut t = HtmlTable::new(["check", "source", "measured", "seed", "met"]);
    for c in &r.checks {
        t.row(vec![
            Cell::text(&c.what),
            Cell::text(&c.source),
            if c.measured.is_finite() {
                Cell::number(c.measured, &[])
            } else {
                Cell::figure("not measured")
            },
            c.seed_figure
                .map_or(Cell::figure("-"), |s| Cell::number(s, &[])),
            Cell::text(if c.met { "met" } else { "missed" }),
        ]);
    }
    t
}

fn workload(page: &mut Page, w: &WorkloadReport, seed: f64) -> Result<()> {
    let n = w.name.as_str();
    page.section(&format!("w-{n}"), n);
    page.note(&Html::new().text(&w.description));
    let mut t = HtmlTable::new([
        "mode",
        "ms",
        "× decrypt-at-fault",
        "faults",
        "write-protect faults",
        "pages decrypted",
        "cache hits",
        "predicted",
        "used",
        "wasted",
        "late",
        "psync pages",
        "handler µs/fault",
    ]);
    for c in &w.cells {
        let s = &c.session.stats;
        let m = c.mode.as_str();
        let count = |v: u64| Cell::figure(v.to_string());
        t.row(vec![
            Cell::text(m),
            Cell::number(
                c.ms,
                &[("data-workload", n), ("data-mode", m), ("data-field", "ms")],
            ),
            Cell::number(
                c.speedup,
                &[
                    ("data-workload", n),
                    ("data-mode", m),
                    ("data-field", "speedup"),
                ],
            ),
            count(s.faults),
            count(s.wp_faults),
            count(s.pages_decrypted),
            count(s.cache_hits),
            count(s.predicted),
            count(c.session.predicted_used),
            count(c.session.predicted_wasted),
            count(s.predicted_late),
            count(s.pages_synced),
            Cell::number(
                s.handler_ns as f64 / 1e3 / (s.faults + s.wp_faults).max(1) as f64,
                &[],
            ),
        ]);
    }
    page.table(&t);
    page.chart(
        &BarChart::new("time", "Session time, ms (shorter is better)")
            .attr("data-workload", n)
            .value_axis(Axis::linear("ms"))
            .categories(w.cells.iter().map(|c| c.mode.clone()))
            .series("session", w.cells.iter().map(|c| Some(c.ms)).collect())
            .render()?,
    );
    // Speed-up against prediction depth, one line per predictor, each
    // starting from the DRAM cache without prediction (depth 0).
    let mut predictors: Vec<String> = w.cells.iter().filter_map(|c| c.predictor.clone()).collect();
    predictors.dedup();
    let depth0 = w
        .cells
        .iter()
        .find(|c| c.depth == Some(0))
        .map(|c| c.speedup);
    let mut chart = LineChart::new(
        "depth",
        "Speed-up over decrypt-at-fault by prediction depth (dashed: seed 001)",
    )
    .attr("data-workload", n)
    .x_axis(Axis::linear("prediction depth"))
    .y_axis(Axis::linear("speed-up over decrypt-at-fault (×)"))
    .markers()
    .reference(seed, "seed 001");
    let mut lines = 0;
    for p in &predictors {
        let mut points: Vec<(f64, f64)> = w
            .cells
            .iter()
            .filter(|c| c.predictor.as_deref() == Some(p.as_str()) && c.depth != Some(0))
            .filter_map(|c| c.depth.map(|d| (d as f64, c.speedup)))
            .collect();
        points.extend(depth0.map(|v| (0.0, v)));
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        if points.len() >= 2 {
            chart = chart.series(Series::new(p.clone(), points));
            lines += 1;
        }
    }
    if lines > 0 {
        page.chart(&chart.render()?);
    }
    Ok(())
}
