//! `nvmos bench pmo` (`nvmos_pmo_bench::pmo`, seed 001's evaluation): the
//! terminal tables ([`table`]) and `pmo.html` ([`page`]).

use std::fmt::Write as _;

use nvmos_pmo_bench::pmo::{PmoBench, WorkloadReport};
use nvmos_report::chart::{Axis, BarChart, LineChart, Series};
use nvmos_report::columns::{Column, Columns, Key};
use nvmos_report::page::{Html, NavLink, Page};
use serde_json::Value;

use crate::checks::{checks_table, checks_text};
use crate::Result;

/// The attach and first-touch rows (`pmo.json`'s `touch`), both ratios
/// over the baselines measured in the same run.
fn touch_columns(r: &PmoBench) -> Columns {
    let (uffd, kernel) = (r.uffd_round_trip_ns, r.kernel_fault_ns);
    Columns::new([
        Column::text("mode", "what"),
        Column::number("attach µs", "attach_us").fixed(1),
        Column::number("first touch ns/page", "ns_per_page").fixed(0),
        Column::derived("× uffd round trip", move |t| ratio(t, "ns_per_page", uffd)).fixed(2),
        Column::derived("× kernel fault", move |t| ratio(t, "ns_per_page", kernel)).fixed(2),
        Column::number("detach µs", "detach_us").fixed(1),
        Column::figure("faults", "faults"),
        Column::figure("decrypted", "pages_decrypted"),
        Column::figure("predicted", "predicted"),
    ])
    .key(Key::field("data-mode", "what"))
}

/// `row[field] / by` as JSON (null where either is missing).
fn ratio(row: &Value, field: &str, by: f64) -> Value {
    row[field].as_f64().map(|v| v / by).into()
}

/// A workload's cells (`pmo.json`'s `workloads[i].cells`).
fn cell_columns(workload: &str) -> Columns {
    let stat = |h: &str, p: &str| Column::figure(h, format!("session.stats.{p}"));
    Columns::new([
        Column::text("mode", "mode"),
        Column::number("ms", "ms").fixed(2),
        Column::figure("runs min–max", "runs_ms").with(|v| {
            let runs = v.as_array().into_iter().flatten().filter_map(Value::as_f64);
            let (lo, hi) = runs.fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            });
            format!("{lo:.1}–{hi:.1}")
        }),
        Column::number("× decrypt-at-fault", "speedup").fixed(2),
        Column::number("× dram-cache", "vs_cache").fixed(2),
        stat("faults", "faults"),
        stat("write-protect faults", "wp_faults"),
        stat("pages decrypted", "pages_decrypted"),
        stat("cache hits", "cache_hits"),
        stat("predicted", "predicted"),
        Column::figure("used", "session.predicted_used"),
        Column::figure("wasted", "session.predicted_wasted"),
        stat("late", "predicted_late"),
        stat("psync pages", "pages_synced"),
        Column::derived("handler µs/fault", |c| {
            let s = &c["session"]["stats"];
            let faults = s["faults"].as_u64().unwrap_or(0) + s["wp_faults"].as_u64().unwrap_or(0);
            (s["handler_ns"].as_f64().unwrap_or(0.0) / 1e3 / faults.max(1) as f64).into()
        })
        .fixed(2),
        stat("copy ioctls", "copy_ioctls"),
        Column::derived("wake-ups", |c| {
            let s = &c["session"]["stats"];
            (s["handler_wakeups"].as_u64().unwrap_or(0) + s["worker_wakeups"].as_u64().unwrap_or(0))
                .into()
        }),
        Column::derived("decrypt ms", |c| {
            (c["session"]["stats"]["decrypt_ns"].as_f64().unwrap_or(0.0) / 1e6).into()
        })
        .fixed(2),
        Column::derived("compute ms", |c| {
            (c["session"]["compute_ns"].as_f64().unwrap_or(0.0) / 1e6).into()
        })
        .fixed(2),
        Column::derived("sync ms", |c| {
            (c["session"]["sync_ns"].as_f64().unwrap_or(0.0) / 1e6).into()
        })
        .fixed(2),
    ])
    .key(Key::constant("data-workload", workload))
    .key(Key::field("data-mode", "mode"))
}

/// The best prediction per workload against decrypt-at-fault and the seed.
fn best_columns(seed: f64) -> Columns {
    Columns::new([
        Column::text("workload", "name"),
        Column::text("kind", "sequential").with(|v| {
            if v == &Value::Bool(true) {
                "sequential"
            } else {
                "other"
            }
            .into()
        }),
        Column::text("best", "best.mode"),
        Column::number("ms", "best.ms").fixed(2),
        Column::derived("decrypt-at-fault ms", |w| {
            let cells = w["cells"].as_array().into_iter().flatten();
            let c = cells.into_iter().find(|c| c["mode"] == "decrypt-at-fault");
            c.map_or(Value::Null, |c| c["ms"].clone())
        })
        .fixed(2),
        Column::number("speed-up ×", "best.speedup").fixed(2),
        Column::derived("seed 001 ×", move |_| seed.into()).fixed(2),
        Column::text("target", "").with(|w| {
            if w["sequential"] != Value::Bool(true) {
                "—"
            } else if w["best"]["meets_seed"] == Value::Bool(true) {
                "met"
            } else {
                "missed"
            }
            .into()
        }),
    ])
    .key(Key::field("data-workload", "name"))
}

/// Seed 001's other claims per workload: prediction against the DRAM
/// cache alone, the stream predictor's best depth with each round's, IV
/// with prediction against the original design without IV.
fn claims_columns() -> Columns {
    Columns::new([
        Column::text("workload", "name"),
        Column::number("design × dram-cache", "design_vs_cache").fixed(2),
        Column::figure("best stream depth", "best_depth.depth"),
        Column::figure("best depth by round", "best_depth.rounds").with(|v| {
            let d: Vec<String> = v
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_u64)
                .map(|d| d.to_string())
                .collect();
            d.join(", ")
        }),
        Column::number("decrypt-at-fault, no IV ms", "iv.original_no_iv_ms").fixed(2),
        Column::number("design with IV ms", "iv.predict_iv_ms").fixed(2),
        Column::number("IV + prediction × no-IV original", "iv.speedup").fixed(2),
    ])
    .key(Key::field("data-workload", "name"))
}

/// The talk's sizes beside this run's.
fn sizes_columns() -> Columns {
    Columns::new([
        Column::text("kernel", "workload"),
        Column::text("the talk", "talk"),
        Column::text("here", "here"),
    ])
    .key(Key::field("data-workload", "workload"))
}

/// The tables a person reads.
/// The terminal tables: attach and first touch, every workload's cells
/// and best prediction, the file server, the checks.
pub fn table(r: &PmoBench) -> Result<String> {
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
    out.push_str(&indent(&touch_columns(r).text(&r.touch)?));
    for w in &r.workloads {
        let _ = writeln!(out, "\n{}: {}", w.name, w.description);
        out.push_str(&indent(&cell_columns(&w.name).text(&w.cells)?));
        if let (Some(ms), Some(c)) = (w.dram_ms, w.ceiling) {
            let _ = writeln!(
                out,
                "  the computation alone on resident DRAM: {ms:.2} ms; decrypt-at-fault over it: {c:.2}× (the most any fault path could gain)"
            );
        }
    }
    let filebench: Vec<serde_json::Value> = r
        .workloads
        .iter()
        .flat_map(|w| {
            w.cells.iter().filter_map(|c| {
                let t = c.throughput?;
                Some(serde_json::json!({
                    "workload": w.name, "mode": c.mode, "ops_per_s": t.ops_per_s,
                    "mib_per_s": t.mib_per_s, "speedup": c.speedup,
                }))
            })
        })
        .collect();
    if !filebench.is_empty() {
        let _ = writeln!(
            out,
            "\nFilebench personalities (seed 001's Fig. 4 is their bandwidth), median run:"
        );
        let columns = Columns::new([
            Column::text("workload", "workload"),
            Column::text("mode", "mode"),
            Column::number("ops/s", "ops_per_s").fixed(0),
            Column::number("MiB/s", "mib_per_s").fixed(1),
            Column::number("× decrypt-at-fault", "speedup").fixed(2),
        ]);
        out.push_str(&indent(&columns.text(&filebench)?));
    }
    let _ = writeln!(
        out,
        "\nDRAM cache with prediction (best depth) over decrypt-at-fault; seed 001: {:.2}× (best depth {} on average)",
        r.seed_speedup, r.seed_best_depth
    );
    out.push_str(&indent(&best_columns(r.seed_speedup).text(&best(r))?));
    let _ = writeln!(
        out,
        "\nPrediction never hurts (design over the DRAM cache alone, at least {:.2}×), best depth, IV with prediction:",
        nvmos_pmo_bench::pmo::NEVER_HURTS
    );
    out.push_str(&indent(&claims_columns().text(&r.workloads)?));
    if let Some(a) = &r.best_depth_on_average {
        let rounds: Vec<String> = a.rounds.iter().map(|d| d.to_string()).collect();
        let _ = writeln!(
            out,
            "  best {} depth on average over the kernels: {} (each round: {}); seed 001: {}",
            a.predictor,
            a.depth,
            rounds.join(", "),
            r.seed_best_depth
        );
    }
    if !r.talk_sizes.is_empty() {
        out.push_str("\nSizes: the talk's and this run's\n");
        out.push_str(&indent(&sizes_columns().text(&r.talk_sizes)?));
    }
    out.push('\n');
    out.push_str(&checks_text(&r.checks));
    Ok(out)
}

/// The workloads with a best prediction.
fn best(r: &PmoBench) -> Vec<&WorkloadReport> {
    r.workloads.iter().filter(|w| w.best.is_some()).collect()
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

/// `pmo.html`: the summary (best speed-up per workload against the seed's,
/// the checks), attach and first-touch cost, and per workload its table,
/// session times and the speed-up by prediction depth. Numbers carry
/// `data-workload`, `data-mode` and `data-field` naming where they are in
/// `pmo.json`.
///
/// `nav`: the study pages beside it in the report folder
/// ([`OutputDir::nav`](nvmos_report::OutputDir::nav)).
pub fn page(r: &PmoBench, quick: bool, nav: &[NavLink]) -> Result<String> {
    let mut page = Page::new(
        "pmo.html",
        "nvmos bench pmo",
        "nvmos bench pmo: persistent memory objects with DRAM as cache and per-page prediction (seed 001)",
    );
    page.nav(nav);
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
    page.summary_table(&best_columns(r.seed_speedup).html(&best(r))?);
    page.summary_table(&claims_columns().html(&r.workloads)?);
    if !r.talk_sizes.is_empty() {
        page.summary_table(&sizes_columns().html(&r.talk_sizes)?);
    }
    page.summary_table(&checks_table(&r.checks));
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
    page.table(&touch_columns(r).html(&r.touch)?);
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

fn workload(page: &mut Page, w: &WorkloadReport, seed: f64) -> Result<()> {
    let n = w.name.as_str();
    page.section(&format!("w-{n}"), n);
    page.note(&Html::new().text(&w.description));
    page.table(&cell_columns(n).html(&w.cells)?);
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
