//! `nvmos study banks` (seed 002, `nvmos_sim::banks_study`): the terminal
//! text ([`text`]) and `banks.html` ([`html`]).

use nvmos_report::chart::{Axis, BarChart, LineChart, Series};
use nvmos_report::columns::{Column, Columns, Key};
use nvmos_report::page::{Html, NavLink, Page};
use nvmos_sim::banks::{Access, Analysis, Placement};
use nvmos_sim::banks_study::{BanksOutput, BanksRow};

use crate::checks::{checks_table, checks_text};
use crate::Result;

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

fn heading(o: &BanksOutput) -> String {
    let s = &o.study;
    format!(
        "Seed 002 on {}: STREAM {:?}, {} MiB per array per core, {:?}-page, queue {}{}",
        s.machine,
        s.options.kernel,
        s.options.array_bytes >> 20,
        s.options.policy,
        s.options.queue_depth,
        if s.options.basic_model {
            ", basic model"
        } else {
            ""
        }
    )
}

/// Every cell of the study (`banks.json`'s `study.rows`), for the
/// terminal and the page (`data-row`, `data-field`).
fn row_columns() -> Columns {
    let fixed = |h: &str, p: &str, d: usize| Column::number(h, p).fixed(d);
    Columns::new([
        Column::figure("cores", "cores"),
        Column::text("access", "access").with(|v| {
            serde_json::from_value(v.clone())
                .map_or("?", access_name)
                .into()
        }),
        Column::text("placement", "placement")
            .with(|v| serde_json::from_value(v.clone()).map_or("?", name).into()),
        fixed("hit rate", "hit_rate", 3),
        fixed("miss rate", "miss_rate", 3),
        fixed("conflict rate", "conflict_rate", 3),
        fixed("BLP", "blp", 2),
        fixed("run ns", "run_ns", 0),
        fixed("GB/s", "bandwidth_gbs", 2),
        fixed("latency ns", "latency_ns", 1),
        fixed("vs sequential", "vs_sequential", 3),
    ])
    .key(Key::index("data-row"))
}

fn headline_lines(o: &BanksOutput) -> String {
    o.headline
        .iter()
        .map(|h| {
            format!(
                "{} cores, sequential access: {} runs in {:.3}x the time of sequential placement ({:+.1}% speed)\n",
                h.cores,
                name(h.placement),
                h.vs_sequential,
                h.faster_percent
            )
        })
        .collect()
}

/// The heading, every cell, the headline, what the seed reports, the
/// analysing program and the checks.
pub fn text(o: &BanksOutput) -> Result<String> {
    let mut out = heading(o) + "\n";
    out.push_str(&row_columns().text(&o.study.rows)?);
    out.push('\n');
    out.push_str(&headline_lines(o));
    out.push_str("\nWhat seed 002 reports (as charts; no numbers in its text):\n");
    for line in &o.study.seed_reports {
        out.push_str(&format!("  - {line}\n"));
    }
    if let Some(a) = &o.analysis {
        out.push_str(&analysis_text(a));
    }
    if !o.checks.is_empty() {
        out.push_str("\nChecks against the seed:\n");
        out.push_str(&checks_text(&o.checks));
    }
    Ok(out)
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
    let leaving: Vec<String> = a
        .strides
        .iter()
        .filter(|s| s.1)
        .map(|s| bytes(s.0))
        .collect();
    format!(
        "\nAnalysing program on {} (latencies only; the mapping checks the result afterwards):\n  \
reference {:#x}; first conflicting frame at {:#x}; threshold {:.1} ns\n  \
the same bank comes back every {} cache line(s){}\n  \
strides that leave the bank: {}\n  \
agrees with the machine's mapping: {} ({} lines and {} strides checked, {} line mismatches)\n",
        a.machine,
        a.reference,
        a.conflicting,
        a.threshold_ns,
        a.unit_lines,
        if a.unit_lines == 3 {
            ": a frame is spread over 3 channels by cache line"
        } else {
            ""
        },
        leaving.join(", "),
        if a.agrees { "yes" } else { "NO" },
        a.line_latency_ns.len(),
        a.strides.len(),
        a.line_mismatches
    )
}

/// The synthetic study's bank-level parallelism: a group per cores ×
/// access, a bar per placement (the page of real programs draws it next
/// to theirs).
pub fn blp_chart(o: &BanksOutput, kind: &str) -> Result<nvmos_report::chart::Chart> {
    bars(
        o,
        kind,
        &format!("Bank-level parallelism, STREAM on {}", o.study.machine),
        "mean banks busy",
        |r| r.blp,
    )
}

/// One grouped bar chart over the rows: a group per cores × access, a bar
/// per placement.
fn bars(
    o: &BanksOutput,
    kind: &str,
    title: &str,
    axis: &str,
    metric: fn(&BanksRow) -> f64,
) -> Result<nvmos_report::chart::Chart> {
    let s = &o.study;
    let mut groups: Vec<(u32, Access)> = Vec::new();
    for r in &s.rows {
        if !groups.contains(&(r.cores, r.access)) {
            groups.push((r.cores, r.access));
        }
    }
    let mut chart = BarChart::new(kind, title)
        .value_axis(Axis::linear(axis))
        .categories(
            groups
                .iter()
                .map(|(c, a)| format!("{c} cores, {} access", access_name(*a))),
        );
    for &p in &s.options.placements {
        let values = groups
            .iter()
            .map(|&(c, a)| {
                s.rows
                    .iter()
                    .find(|r| r.cores == c && r.access == a && r.placement == p)
                    .map(metric)
            })
            .collect();
        chart = chart.series(name(p), values);
    }
    chart.render()
}

/// `banks.html`: the headline, the checks, the charts, every cell and the
/// analysing program.
///
/// `nav`: the study pages beside it in the report folder
/// ([`OutputDir::nav`](nvmos_report::OutputDir::nav)).
pub fn html(o: &BanksOutput, nav: &[NavLink]) -> Result<String> {
    let s = &o.study;
    let mut page = Page::new(
        "banks.html",
        "nvmos study banks",
        "Frame placement and row-buffer conflicts (seed 002)",
    );
    page.nav(nav);
    for (i, h) in o.headline.iter().enumerate() {
        let index = i.to_string();
        page.summary_note(
            &Html::new()
                .text(&format!(
                    "{} cores, sequential access: {} runs in ",
                    h.cores,
                    name(h.placement)
                ))
                .figure(
                    h.vs_sequential,
                    &[
                        ("data-headline", index.as_str()),
                        ("data-field", "vs_sequential"),
                    ],
                )
                .text("× the time of the buddy's sequential frames."),
        );
    }
    page.summary_table(&checks_table(&o.checks));
    page.section("experiment", "The experiment").note(
        &Html::new().text(&heading(o)).text(
            ". Each core runs STREAM over its own three arrays, whose frames the placement hands out in the order STREAM's initialisation loop touches them.",
        ),
    );
    page.chart(&bars(
        o,
        "run-time",
        "Run time until the last core finishes",
        "run time (ms)",
        |r| r.run_ns / 1e6,
    )?);
    page.chart(&bars(
        o,
        "conflicts",
        "Row-buffer conflicts per request",
        "conflicts per request",
        |r| r.conflict_rate,
    )?);
    page.chart(&bars(
        o,
        "blp",
        "Bank-level parallelism",
        "mean banks busy",
        |r| r.blp,
    )?);
    page.section("rows", "Every cell")
        .table(&row_columns().html(&s.rows)?);
    page.section("seed", "What seed 002 reports");
    for line in &s.seed_reports {
        page.note(&Html::new().text(line));
    }
    if let Some(a) = &o.analysis {
        page.section("analysis", "The analysing program");
        let chart = LineChart::new(
            "line-latency",
            "Latency of each cache line of the first frame after the conflict, paired with the reference",
        )
        .x_axis(Axis::linear("offset in the frame (bytes)"))
        .y_axis(Axis::linear("latency (ns)"))
        .markers()
        .reference(a.threshold_ns, "threshold between banks")
        .series(Series::new(
            "line latency",
            a.line_latency_ns
                .iter()
                .map(|&(off, ns)| (off as f64, ns))
                .collect(),
        ))
        .render()?;
        page.chart(&chart).pre(&analysis_text(a));
    }
    Ok(page.render())
}
