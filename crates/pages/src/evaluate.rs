//! `nvmos evaluate` and `nvmos replay` (`nvmos_sim::evaluate`): the
//! terminal tables ([`text`]), `summary.csv`, `wear_cdf.csv` and
//! `index.html` (through nvmos-report: one page style, charts, tables);
//! the CLI writes them with `results.json` into one folder.
//!
//! Every number shown in the HTML carries `data-trace`, `data-alloc` and
//! `data-field` attributes naming where it comes from in `results.json`
//! (the summary across traces at the top too), and every chart is an
//! `<svg class="chart">` that the page's script marks `data-rendered`, so
//! a headless browser can check both (`tests/report_browser.rs`).

use std::fmt::Write as _;

use nvmos_report::chart::{Axis, BarChart, Chart, ColourScale, HeatMap, LineChart, Series};
use nvmos_report::columns::{Column, Columns, Key};
use nvmos_report::csv_text;
use nvmos_report::page::{Cell, Html, HtmlTable, NavLink, Page};

use crate::Result;
use nvmos_sim::{Evaluation, StudyRow, TraceStudy};

/// A row of a trace's wear table: the study row with its trace and the
/// figures the JSON does not hold (computed by `ReplayStats`).
#[derive(serde::Serialize)]
pub struct WearRow<'a> {
    trace: &'a str,
    flag: Option<String>,
    ns_per_event: f64,
    events_per_second: f64,
    #[serde(flatten)]
    row: &'a StudyRow,
}

/// The rows of every trace, in order.
fn wear_rows(evaluation: &Evaluation) -> Vec<WearRow<'_>> {
    evaluation.traces.iter().flat_map(wear_rows_of).collect()
}

/// The rows of one trace.
pub fn wear_rows_of(t: &TraceStudy) -> Vec<WearRow<'_>> {
    let rows = t.rows.iter().map(|row| WearRow {
        trace: &t.trace,
        flag: row.stats.flag(),
        ns_per_event: row.stats.ns_per_event(),
        events_per_second: row.stats.events_per_second(),
        row,
    });
    rows.collect()
}

/// The wear comparison, one definition for the terminal, `index.html`
/// (cells named `data-trace`, `data-alloc`, `data-field` for the browser
/// test) and, `csv` given, `summary.csv` (headed by the field names, with
/// the trace and a few more figures).
pub fn wear_columns(csv: bool) -> Columns {
    let stat = |h: &str, f: &str| Column::number(h, format!("stats.{f}")).field(f);
    let count = |h: &str, f: &str| Column::number(h, format!("stats.{f}")).field(f);
    let wear = |h: &str, f: &str| Column::number(h, format!("wear.{f}")).field(f);
    let mut columns = Columns::new(csv.then(|| Column::text("trace", "trace")));
    columns.extend([
        Column::text("allocator", "allocator").markup(|r| {
            let flag = r["flag"].as_str()?;
            Some(
                Html::new()
                    .text(r["allocator"].as_str().unwrap_or(""))
                    .markup(" <strong class=\"flagged\">!! ")
                    .text(flag)
                    .markup("</strong>"),
            )
        }),
        count("events read", "events_read").files_only(),
        count("lost events", "lost_events").files_only(),
        stat("allocations", "allocs"),
        stat("allocations refused", "alloc_failures"),
        stat("frames written outside memory", "outside").files_only(),
        count("frees of pre-recording frames", "frees_before_recording").files_only(),
        count("frees of a mismatched order", "frees_mismatched_order").files_only(),
        count("partial frees", "partial_frees").files_only(),
        count("allocations of a live pfn", "allocs_of_live_pfn").files_only(),
        count("out-of-order timestamps", "time_reversals").files_only(),
        wear("frames touched", "touched").files_only(),
        wear("max writes/frame", "max"),
        wear("max/mean", "max_over_mean"),
        wear("max/mean (touched)", "max_over_touched_mean"),
        wear("CoV", "cov").files_only(),
        wear("Gini", "gini"),
        wear("lifetime % of ideal", "lifetime_pct_of_ideal"),
        Column::number("lifetime years @1e7", "wear.lifetime_years.1").field("lifetime_years_1e7"),
        Column::number("ns/event", "ns_per_event")
            .field("ns_per_event")
            .timing(),
    ]);
    if csv {
        columns.extend([
            Column::number("", "wear.lifetime_years.0").field("lifetime_years_1e6"),
            Column::number("", "wear.lifetime_years.2").field("lifetime_years_1e8"),
            Column::number("", "events_per_second").field("events_per_second"),
            Column::text("flag", "flag").with(|v| v.as_str().unwrap_or("").into()),
        ]);
    }
    // A NaN figure stays a "NaN" cell with its attributes, as before.
    columns
        .key(Key::field("data-trace", "trace"))
        .key(Key::field("data-alloc", "allocator"))
        .keep_nan()
}

/// `summary.csv`: every row of every trace, headed by the field names.
pub fn summary_csv(evaluation: &Evaluation) -> Result<String> {
    wear_columns(true).csv(&wear_rows(evaluation))
}

/// `wear_cdf.csv`: each row's cumulative distribution of writes per frame.
pub fn cdf_csv(evaluation: &Evaluation) -> Result<String> {
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
    csv_text(
        &[
            "trace",
            "allocator",
            "writes",
            "frames",
            "cumulative_fraction",
        ],
        rows,
    )
}

/// `index.html`: the summary across traces, then per trace its table and charts.
///
/// `nav`: the study pages beside it in the report folder
/// ([`OutputDir::nav`](nvmos_report::OutputDir::nav)).
pub fn html(evaluation: &Evaluation, nav: &[NavLink]) -> Result<String> {
    let mut page = Page::new(
        "index.html",
        "nvmos evaluate",
        "Wear and lifetime of page-frame allocators on real Linux traces",
    );
    page.nav(nav);
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
    if !evaluation.not_traces.is_empty() {
        page.summary_note(&Html::new().text(&format!(
            "Skipped {} file(s) of the traces folder that are not traces: {}.",
            evaluation.not_traces.len(),
            evaluation.not_traces.join(", ")
        )));
    }
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
    let rows: Vec<WearRow> = wear_rows_of(trace);
    page.table(&wear_columns(false).html(&rows)?);
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
    chart.render()
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
    chart.render()
}

fn bar_chart(
    trace: &TraceStudy,
    kind: &str,
    title: &str,
    axis: &str,
    unit: &str,
    value: fn(&StudyRow) -> f64,
) -> Result<Chart> {
    BarChart::new(kind, title)
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
        .render()
}

/// The terminal tables of `nvmos evaluate` and `nvmos replay`: per trace
/// its heading, accounting, wear table, flags and write-weighted table.
pub fn text(evaluation: &Evaluation) -> Result<String> {
    let mut out = String::new();
    if !evaluation.not_traces.is_empty() {
        writeln!(
            out,
            "skipped {} files that are not traces: {}",
            evaluation.not_traces.len(),
            evaluation.not_traces.join(", ")
        )
        .unwrap();
    }
    if let Some(frames) = evaluation.options.memory_frames {
        writeln!(
            out,
            "the allocators manage {} ({frames} frames) as one zone (--memory); the kernel's own placement keeps the recorded machine",
            nvmos_sim::units::format_frames(frames)
        )
        .unwrap();
    }
    for trace in &evaluation.traces {
        writeln!(
            out,
            "\n{} — {} events, {:.2} s, {} frames, {} CPUs{}",
            trace.trace,
            trace.events,
            trace.duration_ns as f64 / 1e9,
            trace.rows.first().map_or(0, |r| r.wear.frames),
            trace.machine.cpus,
            if trace.inferred {
                " (inferred from the trace: highest pfn + block, highest CPU + 1)"
            } else {
                ""
            }
        )
        .unwrap();
        if let Some(first) = trace.rows.first() {
            writeln!(out, "{}", crate::events_read(&first.stats.accounting)).unwrap();
        }
        let mut flags = Vec::new();
        for row in &trace.rows {
            if let Some(flag) = row.stats.flag() {
                flags.push(format!(
                    "  !! {}: {flag}: its wear figures are not the trace's",
                    row.allocator
                ));
            }
        }
        out.push_str(&wear_columns(false).text(&wear_rows_of(trace))?);
        for flag in flags {
            writeln!(out, "{flag}").unwrap();
        }
        write_table(trace, &mut out)?;
    }
    Ok(out)
}

/// The write-weighted table's columns, one definition for the terminal
/// and the book's results page: each row's sampled writes under its
/// placement, and their per-frame correlation with its allocations.
pub fn write_columns() -> Columns {
    let w = |h: &str, p: &str| Column::number(h, format!("writes.{p}"));
    Columns::new([
        Column::text("write-weighted", "allocator"),
        Column::number("attributed", "stats.writes.attributed"),
        Column::number("refused", "stats.writes.of_refused"),
        w("max", "wear.max"),
        w("max/mean", "wear.max_over_mean"),
        w("life %", "wear.lifetime_pct_of_ideal"),
        w("years@1e7", "wear.lifetime_years.1"),
        w("pearson", "correlation.pearson"),
        w("spearman", "correlation.spearman"),
        w("frames", "correlation.frames"),
    ])
}

/// Write-weighted wear beside the table above, for traces recorded with
/// `record --writes`: each frame's sampled writes (one per sample in which
/// it was written) under each row's placement, and how they correlate per
/// frame with the allocation-only counts.
fn write_table(trace: &TraceStudy, out: &mut String) -> Result<()> {
    let Some(first) = trace.rows.first().filter(|r| r.writes.is_some()) else {
        return Ok(());
    };
    let a = &first.stats.accounting;
    writeln!(
        out,
        "sampled writes: {} ({} to no live block: frames allocated before the recording)",
        a.write_samples, a.writes_not_live
    )
    .unwrap();
    let table = write_columns();
    let rows: Vec<&StudyRow> = trace.rows.iter().filter(|r| r.writes.is_some()).collect();
    out.push_str(&table.text(&rows)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_a_column_of_the_summary_csv() {
        let empty = Evaluation {
            options: Default::default(),
            traces: Vec::new(),
            not_traces: Vec::new(),
        };
        let csv = summary_csv(&empty).unwrap();
        assert!(csv.starts_with("trace,allocator,events_read,"), "{csv}");
        assert_eq!(csv.lines().count(), 1);
        // trace, allocator, the page's 19 figures, 3 more figures and the flag.
        assert_eq!(csv.trim_end().split(',').count(), 2 + 19 + 4);
    }
}
