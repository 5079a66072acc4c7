//! `nvmos bench writers` and `nvmos bench scaling`
//! (`nvmos_pmo_bench::{writers, scaling}`: concurrent writers of one pool;
//! seed 001's Fig. 1, throughput by thread count): their tables.

use std::fmt::Write as _;

use nvmos_pmo_bench::scaling::Scaling;
use nvmos_pmo_bench::writers::Writers;
use nvmos_report::TextTable;

/// The settings, a row per writer count and state store, the checks.
pub fn writers_table(r: &Writers) -> String {
    let o = &r.options;
    let mut s = format!(
        "concurrent writers of one pool in {}: each its own object ({} MiB), {} pages per psync, {} MiB per writer, AES-256-GCM: {}; median of {}; {} CPUs, load average {}\n",
        o.dir.display(),
        o.object_bytes >> 20,
        o.pages_per_psync,
        o.bytes_per_writer >> 20,
        o.encrypted,
        o.rounds,
        r.cpus,
        r.loadavg
    );
    let mut t = TextTable::new(["writers", "state store", "GiB/s (all)", "GiB/cpu-s", "runs"]);
    for row in &r.rows {
        let runs: Vec<String> = row
            .rounds
            .iter()
            .map(|x| format!("{:.3}", x.aggregate_gib_per_s))
            .collect();
        t.row([
            row.processes.to_string(),
            if row.state_store { "yes" } else { "no" }.to_string(),
            format!("{:.3}", row.aggregate_gib_per_s),
            format!("{:.3}", row.gib_per_cpu_s),
            runs.join(" "),
        ]);
    }
    s.push_str(&t.render());
    s.push('\n');
    s.push_str(&crate::checks::checks_text(&r.checks));
    s
}

/// Seed 001's Fig. 1: a row per mode and sharing, a column per thread count.
pub fn scaling_table(r: &Scaling) -> String {
    let o = &r.options;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "seed 001 Fig. 1: pages written and psynced per second by thread count ({} pages per thread, {} iterations, median of {}); {} CPUs, load average {}",
        o.pages_per_thread, o.iterations, o.rounds, r.cpus, r.loadavg
    );
    let mut head = vec!["mode".to_string(), "objects".to_string()];
    head.extend(o.threads.iter().map(|t| format!("{t} thr (x)")));
    let mut t = TextTable::new(head);
    t.left(0).left(1);
    for chunk in r.cells.chunks(o.threads.len()) {
        let mut row = vec![
            chunk[0].mode.clone(),
            if chunk[0].shared { "one" } else { "separate" }.to_string(),
        ];
        row.extend(
            chunk
                .iter()
                .map(|c| format!("{:.0} ({:.2})", c.pages_per_s, c.speedup)),
        );
        t.row(row);
    }
    s.push_str(&t.render());
    if !r.conclusions.is_empty() {
        s.push_str("\nWhat the data supports:\n");
        for c in &r.conclusions {
            let _ = writeln!(s, "- {c}");
        }
    }
    s
}

/// Seed 001's Fig. 1 as the talk draws it: throughput (pages written and
/// psynced per second, all threads) against the thread count, one line
/// per mode and sharing (dashed: an object per thread).
pub fn scaling_chart(r: &Scaling) -> crate::Result<nvmos_report::chart::Chart> {
    let series = nvmos_pmo_bench::scaling::series(&r.cells);
    let mut chart = nvmos_report::chart::LineChart::new(
        "scaling",
        format!(
            "Fig. 1: pages written and psynced per second by thread count ({} CPUs; dashed: an object per thread)",
            r.cpus
        ),
    )
    .attr("data-figure", "scaling")
    .x_axis(nvmos_report::chart::Axis::log2("threads"))
    .y_axis(nvmos_report::chart::Axis::linear("pages per second"))
    .markers();
    for (mode, shared) in series {
        let points: Vec<(f64, f64)> = r
            .cells
            .iter()
            .filter(|c| c.mode == mode && c.shared == shared)
            .map(|c| (c.threads as f64, c.pages_per_s))
            .collect();
        let name = format!(
            "{mode}, {}",
            if shared { "one object" } else { "per thread" }
        );
        let mut line = nvmos_report::chart::Series::new(name, points);
        if !shared {
            line = line.dashed("6 3");
        }
        chart = chart.series(line);
    }
    chart.render()
}

/// `scaling.html`: Fig. 1 drawn, the table and the conclusions.
pub fn scaling_page(r: &Scaling, nav: &[nvmos_report::page::NavLink]) -> crate::Result<String> {
    let mut page = nvmos_report::page::Page::new(
        "scaling.html",
        "nvmos bench scaling",
        "nvmos bench scaling: seed 001's Fig. 1, throughput by thread count",
    );
    page.nav(nav);
    let mut note = nvmos_report::page::Html::new().text(&format!(
        "{} CPUs, load average {} at the start. What the data supports: ",
        r.cpus, r.loadavg
    ));
    for c in &r.conclusions {
        note = note.text(c).text("; ");
    }
    page.summary_note(&note);
    page.chart(&scaling_chart(r)?);
    page.pre(&scaling_table(r));
    Ok(page.render())
}
