//! The terminal tables of `nvmos study power`.

use nvmos_report::{format_value, TextTable};
use nvmos_sim::power::{PowerRow, PowerStudy, SeedTable5};
use nvmos_sim::study::{Bound, Check};
use nvmos_sim::units::format_frames;

/// A figure as every table prints it.
fn f(v: f64) -> String {
    format_value(v)
}

/// How a check's bound reads.
pub(super) fn bound_text(c: &Check) -> String {
    match c.bound {
        Bound::AtMost(b) => format!("≤ {} {}", f(b), c.unit),
        Bound::AtLeast(b) => format!("≥ {} {}", f(b), c.unit),
        Bound::Within { value, tolerance } => {
            format!("{} ± {} {}", f(value), f(tolerance), c.unit)
        }
    }
}

fn rows_text(title: &str, rows: &[PowerRow], out: &mut String) -> Result<(), nvmos_report::Error> {
    let table = super::page::row_columns("", "", rows).text(&super::page::labelled(rows))?;
    out.push_str(&format!("\n{title}\n{table}"));
    Ok(())
}

/// The power study's terminal tables: every workload and trace, the
/// latency benchmark beside seed 004's Table 5, the checks, the energy units.
pub fn tables(study: &PowerStudy) -> Result<String, nvmos_report::Error> {
    let mut out = String::new();
    if !study.not_traces.is_empty() {
        out.push_str(&format!(
            "skipped {} files that are not traces: {}\n",
            study.not_traces.len(),
            study.not_traces.join(", ")
        ));
    }
    for s in &study.synthetic {
        let (w, m) = (&s.workload, &s.machine);
        let title = format!(
            "{} workload (footprint {}-{}%, {}% kernel), {} machine, {} banks of {}, {} epochs",
            w.name,
            w.footprint_min_percent,
            w.footprint_max_percent,
            w.kernel_percent,
            m.name,
            m.frames / m.bank_frames,
            format_frames(m.bank_frames),
            w.epochs
        );
        rows_text(&title, &s.rows, &mut out)?;
    }
    for t in &study.traces {
        let m = &t.machine;
        let title = format!(
            "trace {} on {} ({} banks of {})",
            t.trace,
            format_frames(m.frames),
            m.frames / m.bank_frames,
            format_frames(m.bank_frames)
        );
        rows_text(&title, &t.rows, &mut out)?;
    }
    if let Some(l) = &study.latency {
        out.push_str(&format!(
            "\nlatency: successive single-page requests on {} ({} rounds; worst = slowest request's fastest round)\n",
            format_frames(l.frames),
            l.rounds
        ));
        let mut t = TextTable::new([
            "allocator",
            "pages",
            "mean ns",
            "p99",
            "p99.99",
            "worst",
            "w/mean",
            "raw max",
            "r/mean",
            "seed mean",
            "seed worst",
        ]);
        for r in &l.rows {
            let seed = SeedTable5::of(r.kind, r.pages);
            let s = |v: Option<f64>| v.map_or("-".into(), f);
            t.row([
                r.allocator.clone(),
                r.pages.to_string(),
                f(r.mean_ns),
                f(r.p99_ns),
                f(r.p9999_ns),
                f(r.worst_ns),
                f(r.worst_over_mean),
                f(r.raw_max_ns),
                f(r.raw_max_over_mean),
                s(seed.map(|x| x.0)),
                s(seed.map(|x| x.1)),
            ]);
        }
        out.push_str(&t.render());
    }
    out.push_str("\nchecks (nvmos targets, seed 004's figures):\n");
    let mut t = TextTable::new(["", "check", "measured", "bound", "seed", "source"]);
    t.left(1).left(5);
    for c in &study.checks {
        t.row([
            if c.met { "met" } else { "MISSED" }.to_string(),
            c.what.clone(),
            format!("{} {}", f(c.measured), c.unit),
            bound_text(c),
            c.seed_figure.map_or("-".into(), f),
            c.source.clone(),
        ]);
    }
    out.push_str(&t.render());
    let units: Vec<String> = study
        .models
        .iter()
        .map(|m| format!("{} in {}", m.name, m.unit))
        .collect();
    out.push_str(&format!("\nenergy units: {}\n", units.join("; ")));
    Ok(out)
}
