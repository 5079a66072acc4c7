//! `nvmos study swap` (seed 003, `nvmos_sim::swap_study`): the seed's
//! tables as terminal text ([`tables`]) and `swap.html` ([`html`]).

use std::fmt::Write as _;

use nvmos_report::chart::{Axis, BarChart, Chart, LineChart, Series};
use nvmos_report::format_value;
use nvmos_report::page::{Html, NavLink, Page};
use nvmos_sim::swap_study::{self, Pattern, SwapStudy, DEVICES};

use crate::checks::{checks_table, checks_text};
use crate::{align, Result};

/// Every stream's patterns: (name, pattern).
fn patterns(s: &SwapStudy) -> Vec<(String, &Pattern)> {
    let mut v: Vec<(String, &Pattern)> = s
        .model
        .iter()
        .map(|m| (format!("{} (model)", m.workload), &m.pattern))
        .collect();
    for r in &s.recorded {
        for p in &r.patterns {
            v.push((format!("recorded {} · {}", r.trace, p.name), p));
        }
    }
    v
}

fn histogram_table(
    s: &SwapStudy,
    title: &str,
    pick: fn(&Pattern) -> &nvmos_swap::analysis::Distributions,
    ird: bool,
) -> String {
    let ps = patterns(s);
    let Some((_, first)) = ps.first() else {
        return String::new();
    };
    let labels = if ird {
        &pick(first).ird.labels
    } else {
        &pick(first).size.labels
    };
    let mut rows = vec![std::iter::once(format!("{title} (% of requests)"))
        .chain(std::iter::once("requests".to_owned()))
        .chain(labels.iter().cloned())
        .collect::<Vec<_>>()];
    for (name, p) in &ps {
        let d = pick(p);
        let h = if ird { &d.ird } else { &d.size };
        let mut row = vec![name.clone(), d.requests.to_string()];
        row.extend(h.percent().iter().map(|v| format!("{v:.1}")));
        rows.push(row);
    }
    align(&rows)
}

/// What a recorded trace lost, said the same way in every output.
fn lost_text(r: &swap_study::Recorded) -> String {
    match r.lost_events {
        0 => "0 events lost while recording".to_owned(),
        n => format!(
            "{n} events lost while recording (the kernel dropped them: their requests are missing from every figure of this trace)"
        ),
    }
}

/// The seed's tables, the findings and the checks as terminal text.
pub fn tables(s: &SwapStudy) -> String {
    let mut out = String::new();
    out.push_str("Swap I/O pattern: request size\n");
    out.push_str(&histogram_table(s, "reads: size", |p| &p.reads, false));
    out.push('\n');
    out.push_str(&histogram_table(s, "writes: size", |p| &p.writes, false));
    out.push_str("\nSwap I/O pattern: inter-request distance\n");
    out.push_str(&histogram_table(s, "reads: IRD", |p| &p.reads, true));
    out.push('\n');
    out.push_str(&histogram_table(s, "writes: IRD", |p| &p.writes, true));

    out.push_str("\nSwap-in and swap-out time (s)\n");
    let mut rows = vec![std::iter::once("workload".to_owned())
        .chain(DEVICES.iter().map(|d| format!("in {d}")))
        .chain(DEVICES.iter().map(|d| format!("out {d}")))
        .collect::<Vec<_>>()];
    let mut add = |name: String, devs: &[swap_study::DeviceTime]| {
        let mut row = vec![name];
        row.extend(devs.iter().map(|d| format_value(d.swap_in_s)));
        row.extend(devs.iter().map(|d| format_value(d.swap_out_s)));
        rows.push(row);
    };
    for m in &s.model {
        add(format!("{} (model)", m.workload), &m.devices);
    }
    for r in &s.recorded {
        add(format!("recorded {}", r.trace), &r.devices);
    }
    out.push_str(&align(&rows));

    out.push_str("\nCongestion control as the device gets faster: swap-out of a write-only hog (model), and recorded traffic replayed at the OS's pace\n");
    let mut rows = vec![vec![
        "write IOPS".to_owned(),
        "c: time (s)".into(),
        "c: congestion wait (s)".into(),
        "nc: time (s)".into(),
    ]];
    for r in &s.recorded {
        rows[0].push(format!("recorded {} span (s)", r.trace));
    }
    for p in &s.congestion {
        let mut row = vec![
            format!("{:.0}K", p.iops / 1000.0),
            format_value(p.on_s),
            format_value(p.on_idle_s),
            format_value(p.off_s),
        ];
        row.extend(p.recorded_span_s.iter().map(|&v| format_value(v)));
        rows.push(row);
    }
    out.push_str(&align(&rows));
    for r in &s.recorded {
        writeln!(
            out,
            "  recorded {}: swap-outs issued over {:.3} s as recorded; {} reclaim throttles ({:.3} s); {}",
            r.trace,
            r.recorded_write_span_s,
            r.throttles,
            r.throttle_s,
            lost_text(r)
        )
        .unwrap();
    }

    out.push_str("\nSwap-in fault breakdown (µs per fault; device read on SCM-400)\n");
    let mut rows = vec![std::iter::once("stage".to_owned())
        .chain(std::iter::once("seed".to_owned()))
        .chain(s.model.iter().map(|m| m.workload.clone()))
        .collect::<Vec<_>>()];
    for (i, (stage, seed)) in s.seed_breakdown.iter().enumerate() {
        let mut row = vec![stage.clone(), format!("{seed:.1}")];
        row.extend(s.model.iter().map(|m| format!("{:.1}", m.breakdown[i].1)));
        rows.push(row);
    }
    let mut queue = vec!["(queue wait, not a seed stage)".to_owned(), "-".into()];
    queue.extend(s.model.iter().map(|m| {
        format!(
            "{:.1}",
            m.stats.breakdown.queue_wait_ns as f64 / 1e3 / m.stats.breakdown.faults.max(1) as f64
        )
    }));
    let mut reclaim = vec![
        "(reclaim for the frame, not a seed stage)".to_owned(),
        "-".into(),
    ];
    reclaim.extend(s.model.iter().map(|m| {
        format!(
            "{:.1}",
            m.stats.breakdown.reclaim_ns as f64 / 1e3 / m.stats.breakdown.faults.max(1) as f64
        )
    }));
    let mut total = vec![
        "total".to_owned(),
        format!("{:.1}", s.seed_breakdown.iter().map(|x| x.1).sum::<f64>()),
    ];
    total.extend(
        s.model
            .iter()
            .map(|m| format!("{:.1}", m.breakdown.iter().map(|x| x.1).sum::<f64>())),
    );
    rows.push(total);
    rows.push(queue);
    rows.push(reclaim);
    out.push_str(&align(&rows));

    out.push_str("\nLifetime (years): without wear levelling / with (over the pages written) / ideal (over the whole device)\n");
    let mut rows = vec![vec![
        "writes".to_owned(),
        "hours".into(),
        "pages written".into(),
        "max/page".into(),
        "mean/page".into(),
        "SCM 10^6".into(),
        "SLC 100K".into(),
        "MLC 10K".into(),
    ]];
    let profiles: Vec<(&String, &nvmos_swap::WriteProfile)> = std::iter::empty()
        .chain(s.model.iter().map(|m| (&m.workload, &m.write_profile)))
        .chain(s.recorded.iter().map(|r| (&r.trace, &r.write_profile)))
        .collect();
    let seed_profile = nvmos_swap::WriteProfile::seed();
    let seed_name = "seed inputs".to_owned();
    for (name, p) in std::iter::once((&seed_name, &seed_profile)).chain(profiles) {
        let t = nvmos_swap::lifetime_table(p);
        let mut row = vec![
            name.clone(),
            format!("{:.4}", p.hours),
            p.written_pages.to_string(),
            p.max_writes_per_page.to_string(),
            format!("{:.2}", p.mean_writes_per_page),
        ];
        row.extend(t.iter().map(|l| {
            format!(
                "{} / {} / {}",
                format_value(l.years_without_wl),
                format_value(l.years_with_wl),
                l.years_ideal_wl.map_or("-".into(), format_value)
            )
        }));
        rows.push(row);
    }
    let mut printed = vec![
        "seed's table as printed".to_owned(),
        "2".into(),
        "163177".into(),
        "4".into(),
        "1.32".into(),
    ];
    printed.extend(
        s.seed_lifetime_printed
            .iter()
            .map(|(_, a, b)| format!("{a} / {b} / -")),
    );
    rows.push(printed);
    out.push_str(&align(&rows));
    out.push_str("  The seed's SCM 'with WL' cell reads 1,000,000 h = 11.4 y: 1,000,000 h is 114.2 y; its whole WL row is the formula at 2 writes/page (1.32 gives 173.0 / 17.3 / 1.73 y).\n");

    let f = &s.findings;
    out.push_str("\nFindings\n");
    let list = |v: &[f64], digits: usize| {
        v.iter()
            .map(|x| format!("{x:.digits$}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    writeln!(
        out,
        "  model, write IOPS {}:\n    congestion control on:  {}x as fast as at the slowest (congestion waits {}% of the time)\n    congestion control off: {}x",
        s.congestion.iter().map(|p| format!("{:.1}K", p.iops / 1000.0)).collect::<Vec<_>>().join(" "),
        list(&f.model_on_speedup, 2),
        list(&f.model_idle_percent, 0),
        list(&f.model_off_speedup, 1)
    )
    .unwrap();
    for (r, v) in s.recorded.iter().zip(&f.recorded_os_limited_from_iops) {
        writeln!(
            out,
            "  recorded {}: swap-out is paced by the OS, not the device, from {} IOPS",
            r.trace,
            v.map_or("beyond the sweep".into(), |v| format!("{:.0}K", v / 1000.0))
        )
        .unwrap();
    }
    for ((name, c, a), ((_, rc, ra), (_, mc, ma))) in f
        .small_writes
        .iter()
        .zip(f.random_writes.iter().zip(&f.mean_write_kib))
    {
        writeln!(
            out,
            "  {name}: 4 KiB writes {c:.1}% clean → {a:.1}% aged; non-sequential {rc:.1}% → {ra:.1}%; mean write {mc:.1} → {ma:.1} KiB"
        )
        .unwrap();
    }
    if !s.checks.is_empty() {
        out.push_str("\nChecks against the seed\n");
        out.push_str(&checks_text(&s.checks));
    }
    out
}

/// A value a bar chart can draw: `None` for NaN (nothing measured).
fn drawable(v: f64) -> Option<f64> {
    (!v.is_nan()).then_some(v)
}

/// Grouped bars: one group per category, one bar per series.
fn bars(
    kind: &str,
    title: &str,
    axis: &str,
    unit: &str,
    categories: Vec<String>,
    series: Vec<(String, Vec<f64>)>,
) -> Result<Chart> {
    let mut chart = BarChart::new(kind, title)
        .value_axis(Axis::linear(axis))
        .unit(unit)
        .categories(categories);
    for (name, values) in series {
        chart = chart.series(name, values.into_iter().map(drawable).collect());
    }
    chart.render()
}

/// Lines over the congestion sweep's IOPS (a log2 axis).
fn iops_lines(
    kind: &str,
    title: &str,
    xs: &[f64],
    series: Vec<(String, Vec<f64>)>,
) -> Result<Chart> {
    let mut chart = LineChart::new(kind, title)
        .x_axis(Axis::log2("device random-write IOPS (4 KiB)"))
        .y_axis(Axis::linear("time (s)"))
        .markers();
    for (name, ys) in series {
        chart = chart.series(Series::new(name, xs.iter().copied().zip(ys).collect()));
    }
    chart.render()
}

/// `swap.html`: the findings, the checks, every chart and the tables.
///
/// `nav`: the study pages beside it in the report folder
/// ([`OutputDir::nav`](nvmos_report::OutputDir::nav)).
pub fn html(s: &SwapStudy, nav: &[NavLink]) -> Result<String> {
    let mut page = Page::new(
        "swap.html",
        "nvmos study swap",
        "SCM as a fast paging device (seed 003)",
    );
    page.nav(nav);
    let f = &s.findings;
    if let (Some(on), Some(off), Some(first), Some(last)) = (
        f.model_on_speedup.last(),
        f.model_off_speedup.last(),
        s.congestion.first(),
        s.congestion.last(),
    ) {
        page.summary_note(
            &Html::new()
                .text(&format!(
                    "From {} to {} device write IOPS, a write-only hog's swap-out gets ",
                    format_value(first.iops),
                    format_value(last.iops)
                ))
                .figure(
                    *on,
                    &[("data-finding", "model_on_speedup"), ("data-index", "last")],
                )
                .text("× faster with congestion control on and ")
                .figure(
                    *off,
                    &[
                        ("data-finding", "model_off_speedup"),
                        ("data-index", "last"),
                    ],
                )
                .text("× with it off (model)."),
        );
    }
    page.summary_table(&checks_table(&s.checks));
    let about = page.section("about", "What runs").note(&Html::new().text(
        "Modelled workloads run through the paging model (watermarks, kswapd, direct reclaim, LRU, swap cache, read-ahead, SSD slot policy); recorded traces are real Linux swap traffic from `nvmos record-swap`.",
    ));
    for r in &s.recorded {
        about.note(&Html::new().text(&format!(
            "recorded {}: {} requests; {}.",
            r.trace,
            r.requests,
            lost_text(r)
        )));
    }
    let ps = patterns(s);
    for (dir, pick) in [
        (
            "reads",
            (|p: &Pattern| &p.reads) as fn(&Pattern) -> &nvmos_swap::analysis::Distributions,
        ),
        ("writes", |p: &Pattern| &p.writes),
    ] {
        for ird in [false, true] {
            let Some((_, first)) = ps.first() else { break };
            let labels = if ird {
                &pick(first).ird.labels
            } else {
                &pick(first).size.labels
            };
            let what = if ird {
                "inter-request distance"
            } else {
                "request size"
            };
            let series = ps
                .iter()
                .map(|(n, p)| {
                    let d = pick(p);
                    let h = if ird { &d.ird } else { &d.size };
                    (n.clone(), h.percent())
                })
                .collect();
            page.section(
                &format!("{dir}-{}", if ird { "ird" } else { "size" }),
                &format!("{dir}: {what}"),
            );
            page.chart(&bars(
                &format!("{dir}-{}", if ird { "ird" } else { "size" }),
                &format!("{dir}: {what} (% of requests)"),
                "% of requests",
                "%",
                labels.clone(),
                series,
            )?);
        }
    }
    page.section("devices", "Swap-in and swap-out time per device");
    let mut workloads = Vec::new();
    let mut times: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); DEVICES.len()];
    let mut add = |name: String, devs: &[swap_study::DeviceTime]| {
        workloads.push(name);
        for (i, d) in devs.iter().enumerate().take(DEVICES.len()) {
            times[i].0.push(d.swap_in_s);
            times[i].1.push(d.swap_out_s);
        }
    };
    for m in &s.model {
        add(format!("{} (model)", m.workload), &m.devices);
    }
    for r in &s.recorded {
        add(format!("recorded {}", r.trace), &r.devices);
    }
    if !workloads.is_empty() {
        let series_in = DEVICES
            .iter()
            .zip(&times)
            .map(|(d, t)| (d.to_string(), t.0.clone()))
            .collect();
        let series_out = DEVICES
            .iter()
            .zip(&times)
            .map(|(d, t)| (d.to_string(), t.1.clone()))
            .collect();
        page.chart(&bars(
            "swap-in",
            "swap-in time",
            "time (s)",
            " s",
            workloads.clone(),
            series_in,
        )?);
        page.chart(&bars(
            "swap-out",
            "swap-out time",
            "time (s)",
            " s",
            workloads,
            series_out,
        )?);
    }
    page.section(
        "congestion",
        "Congestion control on (c) and off (nc) as the device gets faster",
    );
    let xs: Vec<f64> = s.congestion.iter().map(|p| p.iops).collect();
    if !xs.is_empty() {
        page.chart(&iops_lines(
            "congestion",
            "Swap-out time of a write-only hog (model)",
            &xs,
            vec![
                (
                    "c (model hog)".to_owned(),
                    s.congestion.iter().map(|p| p.on_s).collect(),
                ),
                (
                    "c: congestion wait".to_owned(),
                    s.congestion.iter().map(|p| p.on_idle_s).collect(),
                ),
                (
                    "nc (model hog)".to_owned(),
                    s.congestion.iter().map(|p| p.off_s).collect(),
                ),
            ],
        )?);
        let recorded: Vec<(String, Vec<f64>)> = s
            .recorded
            .iter()
            .enumerate()
            .map(|(i, r)| {
                (
                    format!("recorded {}", r.trace),
                    s.congestion.iter().map(|p| p.recorded_span_s[i]).collect(),
                )
            })
            .collect();
        if !recorded.is_empty() {
            page.chart(&iops_lines(
                "recorded-pace",
                "Recorded swap-outs replayed at the OS's pace: span",
                &xs,
                recorded,
            )?);
        }
    }
    page.section("tables", "Tables").pre(&tables(s));
    Ok(page.render())
}
