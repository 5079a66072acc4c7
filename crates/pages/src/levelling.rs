//! `nvmos study levelling` (`nvmos_sim::levelling::study`: the OS
//! allocator alone, hardware wear levelling alone and both): its
//! terminal report ([`render`]).

use nvmos_report::{format_value, TextTable};
use nvmos_sim::levelling::study::Output;
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
    s.push_str("\nchecks\n");
    for c in &out.checks {
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
