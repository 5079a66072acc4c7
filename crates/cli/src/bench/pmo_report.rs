//! The report page of `nvmos bench pmo`: `pmo.html` (tables and SVG charts)
//! and `pmo.json` (every figure), beside the evaluation's `index.html`.
//! Numbers carry `data-workload`, `data-mode` and `data-field` attributes
//! naming where they come from in `pmo.json`; charts are `<svg
//! class="chart">` checked by the same script as the evaluation's.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::pmo::{PmoReport, WorkloadReport};
use crate::report::{escape, format_value, CHECK_SCRIPT, PALETTE, STYLE};

/// Write `pmo.json` and `pmo.html` into `dir`.
pub fn write(dir: &Path, report: &PmoReport) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating report folder {}", dir.display()))?;
    let json = dir.join("pmo.json");
    std::fs::write(&json, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    let html = dir.join("pmo.html");
    std::fs::write(&html, page(report)).with_context(|| format!("writing {}", html.display()))?;
    Ok(())
}

const W: f64 = 760.0;
const LEFT: f64 = 220.0;
const RIGHT: f64 = 20.0;

fn page(r: &PmoReport) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>nvmos bench pmo</title><style>{STYLE}</style></head><body>\
<h1>nvmos bench pmo: persistent memory objects with DRAM as cache and per-page prediction (seed 001)</h1>\
<p class=\"note\">Every run is one PMO session, timed from attach to detach: attach (map at the object's fixed address, userfaultfd), compute in place, psync the outputs \
(dirty pages sealed with AES-256-GCM and committed), detach. Objects are volatile in-memory backings that seal pages for real; \
the DRAM cache is cold at the start of every run. Median of {} run(s){}. Seed 001 reports DRAM cache with prediction {:.2}× faster than the original design, best depth {} on average. Load average (1, 5, 15 min) before: {}, after: {} (2 cores).</p>",
        r.rounds,
        if r.quick { ", quick sizes" } else { "" },
        r.seed_speedup,
        r.seed_best_depth,
        escape(&r.loadavg_before),
        escape(&r.loadavg_after)
    );
    summary(&mut out, r);
    touch(&mut out, r);
    for w in &r.workloads {
        workload(&mut out, w, r.seed_speedup);
    }
    let _ = write!(out, "<script>{CHECK_SCRIPT}</script></body></html>");
    out
}

fn summary(out: &mut String, r: &PmoReport) {
    out.push_str("<h2 id=\"summary\">Speed-up of prediction over decrypt-at-fault</h2><table><tr><th>workload</th><th>kind</th><th>best</th><th>ms</th><th>decrypt-at-fault ms</th><th>speed-up</th><th>seed 001</th><th>target</th></tr>");
    for w in &r.workloads {
        let Some(b) = &w.best else { continue };
        let decrypt = w
            .cells
            .iter()
            .find(|c| c.mode == "decrypt-at-fault")
            .map_or(f64::NAN, |c| c.ms);
        let n = escape(&w.name);
        let _ = write!(
            out,
            "<tr><td>{n}</td><td>{}</td><td data-workload=\"{n}\" data-field=\"best.mode\">{}</td><td>{}</td><td>{}</td>\
<td data-workload=\"{n}\" data-field=\"best.speedup\">{}×</td><td>{:.2}×</td><td>{}</td></tr>",
            if w.sequential { "sequential" } else { "other" },
            escape(&b.mode),
            format_value(b.ms),
            format_value(decrypt),
            format_value(b.speedup),
            r.seed_speedup,
            if !w.sequential {
                "—"
            } else if b.meets_seed {
                "met"
            } else {
                "missed"
            }
        );
    }
    out.push_str("</table>");
    // One bar per workload: best speed-up, with the seed's as a line.
    let rows: Vec<(String, f64)> = r
        .workloads
        .iter()
        .filter_map(|w| {
            w.best
                .as_ref()
                .map(|b| (format!("{} ({})", w.name, b.mode), b.speedup))
        })
        .collect();
    bars(
        out,
        "summary",
        "best",
        "Speed-up over decrypt-at-fault, best prediction (line: seed 001's 1.81×)",
        &rows,
        Some(r.seed_speedup),
    );
}

fn touch(out: &mut String, r: &PmoReport) {
    let _ = write!(
        out,
        "<h2 id=\"touch\">Attach and first-touch cost</h2><p class=\"note\">An object of {} pages read once per page in address order. \
Baselines measured in the same run: a plain kernel page fault (first write to anonymous memory) <b data-field=\"kernel_fault_ns\">{}</b> ns/page, \
and the bare userfaultfd round trip (a handler thread answering each fault with UFFDIO_COPY of a ready page) <b data-field=\"uffd_round_trip_ns\">{}</b> ns/page.</p>\
<table><tr><th>mode</th><th>attach µs</th><th>first touch ns/page</th><th>× uffd round trip</th><th>× kernel fault</th><th>detach µs</th><th>faults</th><th>decrypted</th><th>predicted</th></tr>",
        r.touch_pages,
        format_value(r.kernel_fault_ns),
        format_value(r.uffd_round_trip_ns)
    );
    for t in &r.touch {
        let m = escape(&t.what);
        let _ = write!(
            out,
            "<tr><td>{m}</td><td>{}</td><td data-mode=\"{m}\" data-field=\"ns_per_page\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            format_value(t.attach_us),
            format_value(t.ns_per_page),
            format_value(t.ns_per_page / r.uffd_round_trip_ns),
            format_value(t.ns_per_page / r.kernel_fault_ns),
            format_value(t.detach_us),
            t.faults,
            t.pages_decrypted,
            t.predicted
        );
    }
    out.push_str("</table>");
    let mut rows = vec![
        ("kernel page fault".to_string(), r.kernel_fault_ns),
        ("userfaultfd round trip".to_string(), r.uffd_round_trip_ns),
    ];
    rows.extend(r.touch.iter().map(|t| (t.what.clone(), t.ns_per_page)));
    bars(
        out,
        "touch",
        "touch",
        "First touch, ns per page",
        &rows,
        None,
    );
}

fn workload(out: &mut String, w: &WorkloadReport, seed: f64) {
    let n = escape(&w.name);
    let _ = write!(
        out,
        "<h2 id=\"w-{n}\">{n}</h2><p class=\"note\">{}</p><div class=\"wide\"><table><tr><th>mode</th><th>ms</th><th>× decrypt-at-fault</th><th>faults</th><th>write-protect faults</th>\
<th>pages decrypted</th><th>cache hits</th><th>predicted</th><th>used</th><th>wasted</th><th>late</th><th>psync pages</th><th>handler µs/fault</th></tr>",
        escape(&w.description)
    );
    for c in &w.cells {
        let s = &c.session.stats;
        let m = escape(&c.mode);
        let _ = write!(
            out,
            "<tr><td>{m}</td><td data-workload=\"{n}\" data-mode=\"{m}\" data-field=\"ms\">{}</td><td data-workload=\"{n}\" data-mode=\"{m}\" data-field=\"speedup\">{}</td>\
<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            format_value(c.ms),
            format_value(c.speedup),
            s.faults,
            s.wp_faults,
            s.pages_decrypted,
            s.cache_hits,
            s.predicted,
            c.session.predicted_used,
            c.session.predicted_wasted,
            s.predicted_late,
            s.pages_synced,
            format_value(s.handler_ns as f64 / 1e3 / (s.faults + s.wp_faults).max(1) as f64)
        );
    }
    out.push_str("</table></div>");
    let rows: Vec<(String, f64)> = w.cells.iter().map(|c| (c.mode.clone(), c.ms)).collect();
    bars(
        out,
        &w.name,
        "time",
        "Session time, ms (shorter is better)",
        &rows,
        None,
    );
    depth_chart(out, w, seed);
}

/// Horizontal bars, one per row, with an optional reference line.
fn bars(
    out: &mut String,
    workload: &str,
    kind: &str,
    title: &str,
    rows: &[(String, f64)],
    line: Option<f64>,
) {
    let row_h = 20.0;
    let top = 30.0;
    let height = top + row_h * rows.len() as f64 + 10.0;
    let _ = write!(
        out,
        "<svg class=\"chart\" data-chart=\"{kind}\" data-workload=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{height}\" viewBox=\"0 0 {W} {height}\">\
<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>",
        escape(workload),
        escape(title)
    );
    let max = rows
        .iter()
        .map(|r| r.1)
        .chain(line)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let plot_w = W - LEFT - RIGHT - 70.0;
    for (i, (label, v)) in rows.iter().enumerate() {
        let y = top + row_h * i as f64;
        let w = if v.is_finite() {
            plot_w * v / max
        } else {
            plot_w
        };
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>\
<rect class=\"mark\" x=\"{LEFT}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"{}\"/>\
<text x=\"{:.1}\" y=\"{}\" font-size=\"11\">{}</text>",
            LEFT - 4.0,
            y + 14.0,
            escape(label),
            w.max(1.0),
            row_h - 4.0,
            PALETTE[(i % (PALETTE.len() - 1)) + 1],
            LEFT + w.max(1.0) + 4.0,
            y + 14.0,
            format_value(*v)
        );
    }
    if let Some(l) = line {
        let x = LEFT + plot_w * l / max;
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{}\" x2=\"{x:.1}\" y2=\"{}\" stroke=\"#d62728\" stroke-dasharray=\"4 3\"/>",
            top - 4.0,
            height - 6.0
        );
    }
    out.push_str("</svg>");
}

/// Speed-up over decrypt-at-fault against prediction depth, one line per
/// predictor, with the seed's 1.81× as a dashed line.
fn depth_chart(out: &mut String, w: &WorkloadReport, seed: f64) {
    let mut predictors: Vec<String> = w.cells.iter().filter_map(|c| c.predictor.clone()).collect();
    predictors.dedup();
    let depths: Vec<usize> = {
        let mut d: Vec<usize> = w.cells.iter().filter_map(|c| c.depth).collect();
        d.sort_unstable();
        d.dedup();
        d
    };
    if depths.len() < 2 {
        return;
    }
    let (top, bottom, left, height) = (30.0, 40.0, 60.0, 280.0);
    let plot_w = W - left - RIGHT - 110.0;
    let plot_h = height - top - bottom;
    let depth0 = w
        .cells
        .iter()
        .find(|c| c.depth == Some(0))
        .map(|c| c.speedup);
    let ymax = w
        .cells
        .iter()
        .map(|c| c.speedup)
        .chain([seed])
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        * 1.1;
    let x_of = |i: usize| left + plot_w * i as f64 / (depths.len() - 1) as f64;
    let y_of = |v: f64| top + plot_h * (1.0 - v / ymax.max(f64::MIN_POSITIVE));
    let _ = write!(
        out,
        "<svg class=\"chart\" data-chart=\"depth\" data-workload=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{height}\" viewBox=\"0 0 {W} {height}\">\
<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">Speed-up over decrypt-at-fault by prediction depth (dashed: seed 001's {seed:.2}×)</text>\
<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/><line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"#888\"/>",
        escape(&w.name),
        top + plot_h,
        left + plot_w,
        top + plot_h,
        top + plot_h
    );
    for (i, d) in depths.iter().enumerate() {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{d}</text>",
            x_of(i),
            top + plot_h + 14.0
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">prediction depth</text>",
        left + plot_w / 2.0,
        height - 6.0
    );
    for k in 0..=4 {
        let v = ymax * k as f64 / 4.0;
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{v:.2}</text>",
            left - 4.0,
            y_of(v) + 3.0
        );
    }
    let _ = write!(
        out,
        "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#d62728\" stroke-dasharray=\"4 3\"/>",
        left + plot_w,
        y = y_of(seed)
    );
    for (pi, p) in predictors.iter().enumerate() {
        let colour = PALETTE[(pi % (PALETTE.len() - 1)) + 1];
        let mut points = Vec::new();
        for (i, &d) in depths.iter().enumerate() {
            let v = if d == 0 {
                depth0
            } else {
                w.cells
                    .iter()
                    .find(|c| c.predictor.as_deref() == Some(p.as_str()) && c.depth == Some(d))
                    .map(|c| c.speedup)
            };
            if let Some(v) = v {
                points.push((x_of(i), y_of(v)));
            }
        }
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = write!(
            out,
            "<polyline class=\"mark\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" ")
        );
        for (x, y) in &points {
            let _ = write!(
                out,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{colour}\"/>"
            );
        }
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"{colour}\">{}</text>",
            left + plot_w + 10.0,
            top + 14.0 + 16.0 * pi as f64,
            escape(p)
        );
    }
    out.push_str("</svg>");
}
