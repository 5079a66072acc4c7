//! The evaluation report: `results.json`, CSV files, and a self-contained
//! `index.html` with SVG charts, written into one folder.
//!
//! Every number shown in the HTML carries `data-trace`, `data-alloc` and
//! `data-field` attributes naming where it comes from in `results.json`,
//! and every chart is an `<svg class="chart">`; a short script marks each
//! chart `data-rendered="yes"` once the browser has laid it out with a
//! non-empty box, so a headless browser can check both.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use nvmos_sim::{Evaluation, StudyRow, TraceStudy};

/// Write `results.json`, `summary.csv`, `wear_cdf.csv` and `index.html`.
pub fn write(dir: &Path, evaluation: &Evaluation) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating report folder {}", dir.display()))?;
    // Each file whole or not at all.
    let put = |name: &str, text: String| -> Result<()> {
        let path = dir.join(name);
        let mut out = nvmos_trace::Output::create(&path, &[])?;
        std::io::Write::write_all(&mut out, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        out.commit()?;
        Ok(())
    };
    put("results.json", serde_json::to_string_pretty(evaluation)?)?;
    put("summary.csv", summary_csv(evaluation))?;
    put("wear_cdf.csv", cdf_csv(evaluation))?;
    put("index.html", html(evaluation))?;
    Ok(())
}

/// The columns of the comparison: name in `results.json`, heading, value.
type Field = (&'static str, &'static str, fn(&StudyRow) -> f64);

const FIELDS: [Field; 19] = [
    ("events_read", "events read", |r| {
        r.stats.accounting.events_read as f64
    }),
    ("lost_events", "lost events", |r| {
        r.stats.accounting.lost_events as f64
    }),
    ("allocs", "allocations", |r| r.stats.allocs as f64),
    ("alloc_failures", "allocations refused", |r| {
        r.stats.alloc_failures as f64
    }),
    ("outside", "frames written outside memory", |r| {
        r.stats.outside as f64
    }),
    (
        "frees_before_recording",
        "frees of pre-recording frames",
        |r| r.stats.accounting.frees_before_recording as f64,
    ),
    (
        "frees_mismatched_order",
        "frees of a mismatched order",
        |r| r.stats.accounting.frees_mismatched_order as f64,
    ),
    ("partial_frees", "partial frees", |r| {
        r.stats.accounting.partial_frees as f64
    }),
    ("allocs_of_live_pfn", "allocations of a live pfn", |r| {
        r.stats.accounting.allocs_of_live_pfn as f64
    }),
    ("time_reversals", "out-of-order timestamps", |r| {
        r.stats.accounting.time_reversals as f64
    }),
    ("touched", "frames touched", |r| r.wear.touched as f64),
    ("max", "max writes/frame", |r| r.wear.max as f64),
    ("max_over_mean", "max/mean", |r| r.wear.max_over_mean),
    ("max_over_touched_mean", "max/mean (touched)", |r| {
        r.wear.max_over_touched_mean
    }),
    ("cov", "CoV", |r| r.wear.cov),
    ("gini", "Gini", |r| r.wear.gini),
    ("lifetime_pct_of_ideal", "lifetime % of ideal", |r| {
        r.wear.lifetime_pct_of_ideal
    }),
    ("lifetime_years_1e7", "lifetime years @1e7", |r| {
        r.wear.lifetime_years[1]
    }),
    ("ns_per_event", "ns/event", |r| r.stats.ns_per_event()),
];

/// How a figure is printed, the same in every output.
pub fn format_value(v: f64) -> String {
    if !v.is_finite() {
        "inf".into()
    } else if v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.3e}")
    }
}

fn summary_csv(evaluation: &Evaluation) -> String {
    let mut out = String::from("trace,allocator");
    for (name, _, _) in FIELDS {
        write!(out, ",{name}").unwrap();
    }
    out.push_str(",lifetime_years_1e6,lifetime_years_1e8,events_per_second,flag\n");
    for trace in &evaluation.traces {
        for row in &trace.rows {
            write!(
                out,
                "{},{}",
                csv_field(&trace.trace),
                csv_field(&row.allocator)
            )
            .unwrap();
            for (_, _, value) in FIELDS {
                write!(out, ",{}", value(row)).unwrap();
            }
            writeln!(
                out,
                ",{},{},{},{}",
                row.wear.lifetime_years[0],
                row.wear.lifetime_years[2],
                row.stats.events_per_second(),
                csv_field(&row.stats.flag().unwrap_or_default())
            )
            .unwrap();
        }
    }
    out
}

fn cdf_csv(evaluation: &Evaluation) -> String {
    let mut out = String::from("trace,allocator,writes,frames,cumulative_fraction\n");
    for trace in &evaluation.traces {
        for row in &trace.rows {
            let mut seen = 0;
            for &(writes, frames) in &row.wear.histogram {
                seen += frames;
                let fraction = seen as f64 / row.wear.frames.max(1) as f64;
                writeln!(
                    out,
                    "{},{},{writes},{frames},{fraction}",
                    csv_field(&trace.trace),
                    csv_field(&row.allocator)
                )
                .unwrap();
            }
        }
    }
    out
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub(crate) const PALETTE: [&str; 10] = [
    "#222222", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22",
];

pub(crate) const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}\
table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}\
th:first-child,td:first-child{text-align:left}svg.chart{display:block;margin:1em 0;background:#fff;border:1px solid #eee}\
h2{margin-top:2em;border-bottom:1px solid #ddd}.note{color:#555;font-size:13px}.wide{overflow-x:auto}";

/// Marks each chart rendered once it has a laid-out, non-empty box.
pub(crate) const CHECK_SCRIPT: &str = "document.querySelectorAll('svg.chart').forEach(function(s){\
var b=s.getBBox();var marks=s.querySelectorAll('.mark').length;\
s.setAttribute('data-marks',String(marks));\
s.setAttribute('data-rendered',(b.width>0&&b.height>0&&marks>0)?'yes':'no');});\
document.body.setAttribute('data-checked','yes');";

fn html(evaluation: &Evaluation) -> String {
    let mut out = String::new();
    write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>nvmos evaluate</title><style>{STYLE}</style></head><body>\
<h1>nvmos evaluate: wear and lifetime of page-frame allocators on real Linux traces</h1>\
<p class=\"note\">Each trace was recorded from the running kernel with <code>nvmos record</code> and replayed through every allocator; \
<b>{}</b> is the kernel's own placement. Write model: {} full-page write(s) per allocated frame per allocation. \
Lifetime in years is for the most written frame, with the workload repeated, at an endurance of 10<sup>7</sup> writes.</p>",
        escape(nvmos_sim::AS_RECORDED),
        evaluation.options.model.writes_per_alloc
    )
    .unwrap();
    for trace in &evaluation.traces {
        trace_section(&mut out, trace);
    }
    write!(out, "<script>{CHECK_SCRIPT}</script></body></html>").unwrap();
    out
}

fn trace_section(out: &mut String, trace: &TraceStudy) {
    let t = escape(&trace.trace);
    write!(
        out,
        "<h2 id=\"trace-{t}\">{t}</h2><p class=\"note\">{} events over {:.2} s; {} frames of {} in {} zone(s), {} CPUs{}; kernel {}.</p>",
        trace.events,
        trace.duration_ns as f64 / 1e9,
        trace.rows.first().map_or(0, |r| r.wear.frames),
        escape(&trace.source),
        trace.machine.zones.len(),
        trace.machine.cpus,
        if trace.inferred {
            " (inferred from the trace: highest pfn + block, highest CPU + 1)"
        } else {
            ""
        },
        escape(&trace.machine.kernel),
    )
    .unwrap();
    out.push_str("<div class=\"wide\"><table><tr><th>allocator</th>");
    for (_, heading, _) in FIELDS {
        write!(out, "<th>{}</th>", escape(heading)).unwrap();
    }
    out.push_str("</tr>");
    for row in &trace.rows {
        let a = escape(&row.allocator);
        match row.stats.flag() {
            // Flagged: the replay did not follow the trace.
            Some(flag) => write!(
                out,
                "<tr class=\"flagged\" data-flag=\"{}\"><td>{a} <strong title=\"{}\">!! {}</strong></td>",
                escape(&flag),
                escape(&flag),
                escape(&flag)
            )
            .unwrap(),
            None => write!(out, "<tr><td>{a}</td>").unwrap(),
        }
        for (name, _, value) in FIELDS {
            write!(
                out,
                "<td data-trace=\"{t}\" data-alloc=\"{a}\" data-field=\"{name}\">{}</td>",
                format_value(value(row))
            )
            .unwrap();
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></div>");
    cdf_chart(out, trace);
    heat_chart(out, trace);
    bar_chart(
        out,
        trace,
        "lifetime",
        "Lifetime, % of the ideal (perfectly even) lifetime",
        |r| r.wear.lifetime_pct_of_ideal,
    );
    bar_chart(
        out,
        trace,
        "latency",
        "Replay speed, ns per event (allocation, free and bookkeeping)",
        |r| r.stats.ns_per_event(),
    );
}

const W: f64 = 760.0;
const LEFT: f64 = 150.0;
const RIGHT: f64 = 20.0;

fn chart_open(out: &mut String, trace: &TraceStudy, kind: &str, title: &str, height: f64) {
    write!(
        out,
        "<svg class=\"chart\" data-chart=\"{kind}\" data-trace=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{height}\" viewBox=\"0 0 {W} {height}\">\
<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>",
        escape(&trace.trace),
        escape(title)
    )
    .unwrap();
}

/// Cumulative distribution of per-frame write counts over the frames each
/// allocator wrote at least once (over all frames, the never-written ones
/// would flatten every curve at the top), x on a log scale.
fn cdf_chart(out: &mut String, trace: &TraceStudy) {
    let (top, bottom, height) = (30.0, 40.0, 340.0);
    chart_open(
        out,
        trace,
        "cdf",
        "CDF of allocation counts over the frames each allocator touched (x: writes per frame, log)",
        height,
    );
    let max = trace
        .rows
        .iter()
        .map(|r| r.wear.max)
        .max()
        .unwrap_or(1)
        .max(2) as f64;
    let plot_w = W - LEFT - RIGHT;
    let plot_h = height - top - bottom;
    let x = |w: f64| LEFT + plot_w * w.max(1.0).log10() / max.log10();
    let y = |f: f64| top + plot_h * (1.0 - f);
    write!(out, "<rect x=\"{LEFT}\" y=\"{top}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"#999\"/>").unwrap();
    for f in [0.0, 0.5, 1.0] {
        write!(
            out,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{f}</text>",
            LEFT - 4.0,
            y(f) + 4.0
        )
        .unwrap();
    }
    for w in [1.0, max.sqrt().round(), max] {
        write!(
            out,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{w}</text>",
            x(w),
            height - bottom + 14.0
        )
        .unwrap();
    }
    for (i, row) in trace.rows.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let touched = row.wear.touched.max(1) as f64;
        let mut points = format!("{:.1},{:.1} ", x(1.0), y(0.0));
        let mut seen = 0u64;
        let mut last_y = y(0.0);
        for &(writes, frames) in row.wear.histogram.iter().filter(|&&(w, _)| w > 0) {
            seen += frames;
            let fy = y(seen as f64 / touched);
            let fx = x(f64::from(writes));
            write!(points, "{fx:.1},{last_y:.1} {fx:.1},{fy:.1} ").unwrap();
            last_y = fy;
        }
        write!(
            out,
            "<polyline class=\"mark\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{points}\"/>\
<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\" fill=\"{colour}\">{}</text>",
            W - RIGHT - 6.0,
            top + plot_h - 14.0 * (trace.rows.len() - i) as f64,
            escape(&row.allocator)
        )
        .unwrap();
    }
    out.push_str("</svg>");
}

/// Most writes to one frame per slice of the pfn range, a row per
/// allocator, colour on a log scale.
fn heat_chart(out: &mut String, trace: &TraceStudy) {
    let row_h = 18.0;
    let top = 30.0;
    let height = top + row_h * trace.rows.len() as f64 + 30.0;
    chart_open(
        out,
        trace,
        "heat",
        "Wear heat map over the pfn range (most writes to one frame per slice, log colour)",
        height,
    );
    let max = trace
        .rows
        .iter()
        .flat_map(|r| r.heat.iter())
        .copied()
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let plot_w = W - LEFT - RIGHT;
    for (i, row) in trace.rows.iter().enumerate() {
        let y = top + row_h * i as f64;
        write!(
            out,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            LEFT - 4.0,
            y + 13.0,
            escape(&row.allocator)
        )
        .unwrap();
        let cell_w = plot_w / row.heat.len().max(1) as f64;
        for (b, &v) in row.heat.iter().enumerate() {
            let level = (1.0 + f64::from(v)).log10() / (1.0 + max).log10();
            // White (never written) through yellow to dark red (the maximum).
            let (r, g, bl) = (
                255.0 - 100.0 * level,
                255.0 - 235.0 * level,
                255.0 * (1.0 - level).powi(3),
            );
            write!(
                out,
                "<rect class=\"mark\" x=\"{:.2}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"rgb({:.0},{:.0},{:.0})\"><title>{v}</title></rect>",
                LEFT + cell_w * b as f64,
                cell_w + 0.05,
                row_h - 2.0,
                r,
                g,
                bl
            )
            .unwrap();
        }
    }
    write!(out, "<text x=\"{LEFT}\" y=\"{}\" font-size=\"11\">lowest pfn</text><text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">highest pfn (max {max} writes)</text>", height - 10.0, W - RIGHT, height - 10.0).unwrap();
    out.push_str("</svg>");
}

fn bar_chart(
    out: &mut String,
    trace: &TraceStudy,
    kind: &str,
    title: &str,
    value: fn(&StudyRow) -> f64,
) {
    let row_h = 20.0;
    let top = 30.0;
    let height = top + row_h * trace.rows.len() as f64 + 10.0;
    chart_open(out, trace, kind, title, height);
    let max = trace
        .rows
        .iter()
        .map(value)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let plot_w = W - LEFT - RIGHT - 70.0;
    for (i, row) in trace.rows.iter().enumerate() {
        let y = top + row_h * i as f64;
        let v = value(row);
        let w = if v.is_finite() {
            plot_w * v / max
        } else {
            plot_w
        };
        write!(
            out,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text>\
<rect class=\"mark\" x=\"{LEFT}\" y=\"{y}\" width=\"{:.2}\" height=\"{}\" fill=\"{}\"/>\
<text x=\"{:.1}\" y=\"{}\" font-size=\"11\">{}</text>",
            LEFT - 4.0,
            y + 14.0,
            escape(&row.allocator),
            w.max(1.0),
            row_h - 4.0,
            PALETTE[i % PALETTE.len()],
            LEFT + w.max(1.0) + 4.0,
            y + 14.0,
            format_value(v)
        )
        .unwrap();
    }
    out.push_str("</svg>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_the_same_everywhere() {
        assert_eq!(format_value(12.0), "12");
        assert_eq!(format_value(1234.56), "1234.6");
        assert_eq!(format_value(1.23456), "1.235");
        assert_eq!(format_value(0.0001234), "1.234e-4");
        assert_eq!(format_value(f64::INFINITY), "inf");
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("Linux (as recorded)"), "Linux (as recorded)");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
    }
}
