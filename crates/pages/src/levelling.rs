//! `nvmos study levelling` (`nvmos_sim::levelling::study`: the OS
//! allocator alone, hardware wear levelling alone and both): its
//! terminal report ([`render`]).

use nvmos_report::{format_value, TextTable};
use nvmos_sim::horizon::Stop;
use nvmos_sim::levelling::study::{Column, Output};
use nvmos_sim::levelling::Granularity;

/// The terminal report: one table per trace, the synthetic workloads and
/// the checks.
pub fn render(out: &Output) -> String {
    let o = &out.options;
    let mut s = format!(
        "lifetime, % of ideal (N x E), E = {:e} writes, {}; rows: the placement; columns: the hardware beneath it\n",
        o.endurance,
        match o.granularity {
            Granularity::Page => "page granularity".to_string(),
            Granularity::Line { lines_per_frame } => format!("{lines_per_frame} lines per frame"),
        }
    );
    for (i, name) in out.schemes.iter().enumerate() {
        s.push_str(&format!("  [{}] {name}\n", i + 1));
    }
    if !out.not_traces.is_empty() {
        s.push_str(&format!(
            "skipped {} files that are not traces: {}\n",
            out.not_traces.len(),
            out.not_traces.join(", ")
        ));
    }
    for t in &out.traces {
        s.push_str(&format!("\n{} ({} lines)\n", t.trace, t.lines));
        let mut header = vec!["placement".to_string()];
        header.extend((1..=out.schemes.len()).map(|i| format!("[{i}]")));
        header.extend(["alloc failures".to_string(), "outside".to_string()]);
        let mut table = TextTable::new(header);
        for row in &t.rows {
            let mut cells = vec![row.allocator.clone()];
            cells.extend(
                row.levelled
                    .iter()
                    .map(|l| format_value(l.lifetime_pct_of_ideal)),
            );
            cells.push(row.stats.alloc_failures.to_string());
            cells.push(row.stats.outside.to_string());
            table.row(cells);
        }
        s.push_str(&table.render());
        // As replay says it: a row that refused allocations or wrote
        // outside memory is not the trace's wear, whatever its lifetime.
        for row in &t.rows {
            if let Some(flag) = row.stats.flag() {
                s.push_str(&format!(
                    "  !! {}: {flag}: its lifetimes are not the trace's (give more --memory)\n",
                    row.allocator
                ));
            }
        }
        if let Some(pad) = t
            .rows
            .first()
            .and_then(|r| r.levelled.iter().map(|l| l.padding_lines).max())
            .filter(|&p| p > 0)
        {
            s.push_str(&format!(
                "  (Security Refresh's last region padded with {pad} unaddressed lines)\n"
            ));
        }
    }
    s.push_str(&format!(
        "\nsynthetic workloads ({} lines, E = {:e})\n",
        o.synthetic.lines, o.synthetic.endurance
    ));
    let mut table = TextTable::new(["workload", "scheme", "% of ideal"]);
    table.left(1);
    for r in &out.synthetic {
        table.row([
            r.workload.clone(),
            r.levelled.scheme.clone(),
            format_value(r.levelled.lifetime_pct_of_ideal),
        ]);
    }
    s.push_str(&table.render());
    s.push_str(&written_text(out));
    s.push_str("\nchecks\n");
    for c in out.checks.iter().chain(&out.written_checks) {
        s.push_str(&format!(
            "  [{}] {}: {} {} (paper: {}; {})\n      {}\n",
            if c.met { "met" } else { "MISSED" },
            c.what,
            format_value(c.measured),
            c.unit,
            c.seed_figure.map_or("-".to_string(), format_value),
            c.source,
            c.detail
        ));
    }
    s
}

/// The write-weighted part: per trace, each allocator alone and with
/// hot-page migration, the hardware beneath, in one pass and in the steady
/// state.
pub fn written_text(out: &Output) -> String {
    if out.written.is_empty() {
        return String::new();
    }
    let w = &out.options.written;
    let mut s = format!(
        "\nwrite-weighted lifetime (sampled writes plus migration copies), % of ideal at E = {:e}, with years at 10^7 / 10^8 writes per line; hardware: randomised start-gap (psi = {}) and {}; OS: {}\n",
        out.options.endurance,
        out.options.start_gap.psi,
        out.options.security_refresh.name(),
        w.policy.describe(),
    );
    for t in &out.written {
        s.push_str(&format!(
            "\n{} ({} frames, {} sampled writes in a pass of {:.1} s)\n",
            t.trace, t.frames, t.write_samples, t.period_s
        ));
        let mut header = vec![
            "allocator".to_string(),
            "regime".to_string(),
            "reps".to_string(),
        ];
        for c in Column::ALL {
            header.push(format!("{} %", c.name()));
        }
        header.push("hot-migrate × alone".to_string());
        header.push("extra writes %".to_string());
        header.push("migrations/s".to_string());
        header.push("yrs@1e7 alone".to_string());
        header.push("yrs@1e7 hot-migrate".to_string());
        header.push("unwritten frames alone / hot-migrate".to_string());
        let mut table = TextTable::new(header);
        table.left(1);
        for row in &t.rows {
            let mut cells = vec![
                row.allocator.clone(),
                row.regime.name().to_string(),
                format!(
                    "{}{}",
                    row.reps,
                    if row.stop == Stop::MaxReps {
                        " (not converged)"
                    } else {
                        ""
                    }
                ),
            ];
            for c in Column::ALL {
                cells.push(
                    row.cell(c)
                        .map_or("-".into(), |x| format_value(x.lifetime_pct_of_ideal)),
                );
            }
            let hm = row.cell(Column::HotMigrate);
            cells.push(hm.map_or("-".into(), |x| format_value(x.vs_alone)));
            cells.push(hm.map_or("-".into(), |x| format_value(x.extra_writes_pct)));
            cells.push(hm.map_or("-".into(), |x| format_value(x.migrations_per_s)));
            cells.push(
                row.cell(Column::None)
                    .map_or("-".into(), |x| format_value(x.years[0])),
            );
            cells.push(hm.map_or("-".into(), |x| format_value(x.years[0])));
            cells.push(format!(
                "{} / {}",
                row.alone.unwritten_frames, row.policy.unwritten_frames
            ));
            table.row(cells);
        }
        s.push_str(&table.render());
        for row in &t.rows {
            for (what, run) in [("alone", &row.alone), ("hot-migrate", &row.policy)] {
                if run.row.refused > 0 || run.row.outside > 0 {
                    s.push_str(&format!(
                        "  !! {} {} ({}): {} allocations refused, {} frames written outside memory: not the trace's wear\n",
                        row.allocator,
                        what,
                        row.regime.name(),
                        run.row.refused,
                        run.row.outside
                    ));
                }
            }
            if let Some(p) = &row.policy.policy {
                s.push_str(&format!(
                    "  {} + hot-migrate ({}): {} blocks moved in {} passes; hot blocks left in place: {} pass-deferrals for the budget, {} with no less worn place, {} with no block free{}\n",
                    row.allocator,
                    row.regime.name(),
                    p.blocks_moved,
                    p.passes,
                    p.deferred_for_budget,
                    p.no_better_place,
                    p.no_destination,
                    if p.refused_give_backs > 0 {
                        format!(", {} blocks the allocator refused back", p.refused_give_backs)
                    } else {
                        String::new()
                    }
                ));
            }
        }
        s.push_str(&format!("  {}\n", t.years_assume));
    }
    s
}
