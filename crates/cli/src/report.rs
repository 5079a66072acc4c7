//! The evaluation report: `results.json`, CSV files, and `index.html`
//! (through nvmos-report: one page style, charts, tables), written into
//! one folder.
//!
//! Every number shown in the HTML carries `data-trace`, `data-alloc` and
//! `data-field` attributes naming where it comes from in `results.json`
//! (the summary across traces at the top too), and every chart is an
//! `<svg class="chart">` that the page's script marks `data-rendered`, so
//! a headless browser can check both (`tests/report_browser.rs`).

use std::path::Path;

use anyhow::Result;
use nvmos_report::chart::{Axis, BarChart, Chart, ColourScale, HeatMap, LineChart, Series};
use nvmos_report::page::{Cell, Html, HtmlTable, Page, STUDY_PAGES};
use nvmos_report::{csv_text, OutputDir};
use nvmos_sim::{Evaluation, StudyRow, TraceStudy};

/// Write `results.json`, `summary.csv`, `wear_cdf.csv` and `index.html`,
/// each whole or not at all, never over one of `inputs` (the traces).
pub fn write(dir: &Path, evaluation: &Evaluation, inputs: &[&Path]) -> Result<()> {
    let out = OutputDir::create(dir, inputs)?;
    out.write_json("results.json", evaluation)?;
    out.write("summary.csv", summary_csv(evaluation)?.as_bytes())?;
    out.write("wear_cdf.csv", cdf_csv(evaluation)?.as_bytes())?;
    out.write("index.html", html(evaluation)?.as_bytes())?;
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

fn summary_csv(evaluation: &Evaluation) -> Result<String> {
    let mut header = vec!["trace", "allocator"];
    header.extend(FIELDS.iter().map(|f| f.0));
    header.extend([
        "lifetime_years_1e6",
        "lifetime_years_1e8",
        "events_per_second",
        "flag",
    ]);
    let rows = evaluation.traces.iter().flat_map(|trace| {
        trace.rows.iter().map(move |row| {
            let mut r = vec![trace.trace.clone(), row.allocator.clone()];
            r.extend(FIELDS.iter().map(|f| (f.2)(row).to_string()));
            r.extend([
                row.wear.lifetime_years[0].to_string(),
                row.wear.lifetime_years[2].to_string(),
                row.stats.events_per_second().to_string(),
                row.stats.flag().unwrap_or_default(),
            ]);
            r
        })
    });
    Ok(csv_text(&header, rows)?)
}

fn cdf_csv(evaluation: &Evaluation) -> Result<String> {
    let mut rows = Vec::new();
    for trace in &evaluation.traces {
        for row in &trace.rows {
            let mut seen = 0;
            for &(writes, frames) in &row.wear.histogram {
                seen += frames;
                let fraction = seen as f64 / row.wear.frames.max(1) as f64;
                rows.push([
                    trace.trace.clone(),
                    row.allocator.clone(),
                    writes.to_string(),
                    frames.to_string(),
                    fraction.to_string(),
                ]);
            }
        }
    }
    Ok(csv_text(
        &[
            "trace",
            "allocator",
            "writes",
            "frames",
            "cumulative_fraction",
        ],
        rows,
    )?)
}

fn html(evaluation: &Evaluation) -> Result<String> {
    let mut page = Page::new(
        "index.html",
        "nvmos evaluate",
        "Wear and lifetime of page-frame allocators on real Linux traces",
    );
    page.nav(&STUDY_PAGES);
    page.summary_note(
        &Html::new()
            .text(&format!(
                "Each trace was recorded from the running kernel with `nvmos record` and replayed through every allocator; \"{}\" is the kernel's own placement. Write model: {} full-page write(s) per allocated frame per allocation. Lifetime is the most written frame's, as a percentage of perfectly even wear; in years at an endurance of ",
                nvmos_sim::AS_RECORDED,
                evaluation.options.model.writes_per_alloc
            ))
            .markup("10<sup>7</sup>")
            .text(" writes with the workload repeated."),
    );
    page.summary_note(&Html::new().text(&format!(
        "Lifetime, % of the ideal, across {} trace(s):",
        evaluation.traces.len()
    )));
    page.summary_table(&summary_table(evaluation));
    for trace in &evaluation.traces {
        trace_section(&mut page, trace)?;
    }
    Ok(page.render())
}

/// Lifetime (% of the ideal) of every allocator on every trace: a row per
/// allocator, a column per trace.
fn summary_table(evaluation: &Evaluation) -> HtmlTable {
    let mut allocators: Vec<&str> = Vec::new();
    for trace in &evaluation.traces {
        for row in &trace.rows {
            if !allocators.contains(&row.allocator.as_str()) {
                allocators.push(&row.allocator);
            }
        }
    }
    let mut table = HtmlTable::new(
        std::iter::once("allocator".to_owned())
            .chain(evaluation.traces.iter().map(|t| t.trace.clone())),
    );
    for a in allocators {
        let mut cells = vec![Cell::text(a)];
        for trace in &evaluation.traces {
            cells.push(match trace.rows.iter().find(|r| r.allocator == a) {
                Some(row) => Cell::number(
                    row.wear.lifetime_pct_of_ideal,
                    &[
                        ("data-trace", trace.trace.as_str()),
                        ("data-alloc", a),
                        ("data-field", "lifetime_pct_of_ideal"),
                    ],
                ),
                None => Cell::figure("-"),
            });
        }
        table.row(cells);
    }
    table
}

fn trace_section(page: &mut Page, trace: &TraceStudy) -> Result<()> {
    let t = trace.trace.as_str();
    page.section(&format!("trace-{t}"), t)
        .note(&Html::new().text(&format!(
            "{} events over {:.2} s; {} frames of {} in {} zone(s), {} CPUs{}; kernel {}.",
            trace.events,
            trace.duration_ns as f64 / 1e9,
            trace.rows.first().map_or(0, |r| r.wear.frames),
            trace.source,
            trace.machine.zones.len(),
            trace.machine.cpus,
            if trace.inferred {
                " (inferred from the trace: highest pfn + block, highest CPU + 1)"
            } else {
                ""
            },
            trace.machine.kernel,
        )));
    let mut table = HtmlTable::new(std::iter::once("allocator").chain(FIELDS.iter().map(|f| f.1)));
    for row in &trace.rows {
        let a = row.allocator.as_str();
        let name = match row.stats.flag() {
            // Flagged: the replay did not follow the trace.
            Some(flag) => Cell::Html(
                Html::new()
                    .text(a)
                    .markup(" <strong class=\"flagged\">!! ")
                    .text(&flag)
                    .markup("</strong>"),
            ),
            None => Cell::text(a),
        };
        let mut cells = vec![name];
        for (field, _, value) in FIELDS {
            cells.push(Cell::number(
                value(row),
                &[("data-trace", t), ("data-alloc", a), ("data-field", field)],
            ));
        }
        table.row(cells);
    }
    page.table(&table);
    page.chart(&cdf_chart(trace)?);
    page.chart(&heat_chart(trace)?);
    page.chart(&bar_chart(
        trace,
        "lifetime",
        "Lifetime, % of the ideal (perfectly even) lifetime",
        "% of the ideal lifetime",
        "%",
        |r| r.wear.lifetime_pct_of_ideal,
    )?);
    page.chart(&bar_chart(
        trace,
        "latency",
        "Replay speed: ns per event (allocation, free and bookkeeping)",
        "ns per event",
        "",
        |r| r.stats.ns_per_event(),
    )?);
    Ok(())
}

/// Cumulative distribution of per-frame write counts over the frames each
/// allocator wrote at least once (over all frames, the never-written ones
/// would flatten every curve at the top), x on a log scale. An allocator
/// that wrote no frame has no curve.
fn cdf_chart(trace: &TraceStudy) -> Result<Chart> {
    let mut chart = LineChart::new(
        "cdf",
        "CDF of writes per frame over the frames each allocator touched",
    )
    .attr("data-trace", &trace.trace)
    .x_axis(Axis::log10("writes per frame"))
    .y_axis(Axis::linear("fraction of the touched frames").range(0.0, 1.0))
    .steps();
    for row in &trace.rows {
        let touched = row.wear.touched.max(1) as f64;
        let mut seen = 0u64;
        let points: Vec<(f64, f64)> = row
            .wear
            .histogram
            .iter()
            .filter(|&&(w, _)| w > 0)
            .map(|&(writes, frames)| {
                seen += frames;
                (f64::from(writes), seen as f64 / touched)
            })
            .collect();
        if !points.is_empty() {
            chart = chart.series(Series::new(&row.allocator, points));
        }
    }
    Ok(chart.render()?)
}

/// Most writes to one frame per slice of the managed frames, a row per
/// allocator, colour on a log scale.
fn heat_chart(trace: &TraceStudy) -> Result<Chart> {
    let frames = trace.rows.first().map_or(1, |r| r.wear.frames.max(1));
    let mut chart = HeatMap::new(
        "heat",
        "Wear over the managed frames (most writes to one frame per slice)",
    )
    .attr("data-trace", &trace.trace)
    .x_axis(Axis::linear("frame, in pfn order over the managed zones").range(0.0, frames as f64))
    .colour_scale(ColourScale::Log, "most writes to one frame");
    for row in &trace.rows {
        chart = chart.row(
            &row.allocator,
            row.heat.iter().map(|&v| f64::from(v)).collect(),
        );
    }
    Ok(chart.render()?)
}

fn bar_chart(
    trace: &TraceStudy,
    kind: &str,
    title: &str,
    axis: &str,
    unit: &str,
    value: fn(&StudyRow) -> f64,
) -> Result<Chart> {
    Ok(BarChart::new(kind, title)
        .attr("data-trace", &trace.trace)
        .value_axis(Axis::linear(axis))
        .unit(unit)
        .categories(trace.rows.iter().map(|r| r.allocator.clone()))
        .series(
            kind,
            trace
                .rows
                .iter()
                .map(|r| Some(value(r)).filter(|v| !v.is_nan()))
                .collect(),
        )
        .render()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_a_column_of_the_summary_csv() {
        let empty = Evaluation {
            options: Default::default(),
            traces: Vec::new(),
        };
        let csv = summary_csv(&empty).unwrap();
        assert!(csv.starts_with("trace,allocator,events_read,"), "{csv}");
        assert_eq!(csv.lines().count(), 1);
        assert_eq!(csv.trim_end().split(',').count(), 2 + FIELDS.len() + 4);
    }
}
