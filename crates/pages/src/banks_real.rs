//! Seed 002 on real programs (`nvmos study banks --real`,
//! `nvmos_kernel::banks_real`): the terminal text ([`text`]), the charts,
//! and `banks-real.html` ([`html`]) with the synthetic study's figure on
//! the same machine beside it.

use std::fmt::Write;

use nvmos_kernel::banks_real::{BanksReal, Cell, Placement, Program};
use nvmos_report::chart::{Axis, BarChart, Chart};
use nvmos_report::page::{Html, NavLink, Page};
use nvmos_sim::banks_study::BanksOutput;

use crate::checks::{checks_table, checks_text};
use crate::{align, Result};

/// The programs of the study, in the order they ran.
pub(crate) fn programs(r: &BanksReal) -> Vec<Program> {
    let mut out: Vec<Program> = Vec::new();
    for c in &r.cells {
        if !out.contains(&c.program) {
            out.push(c.program);
        }
    }
    out
}

fn placements(r: &BanksReal) -> Vec<Placement> {
    let mut out: Vec<Placement> = Vec::new();
    for c in &r.cells {
        if !out.contains(&c.placement) {
            out.push(c.placement.clone());
        }
    }
    out
}

/// The first recording of a program under a placement.
fn cell<'a>(r: &'a BanksReal, program: Program, placement: &Placement) -> Option<&'a Cell> {
    r.cells
        .iter()
        .find(|c| c.program == program && c.placement == *placement && c.run == 1)
}

fn placement_label(placement: &Placement, run: u32) -> String {
    if run == 1 {
        placement.name()
    } else {
        format!("{} (run {run})", placement.name())
    }
}

/// What ran, and the assumptions every figure depends on.
pub fn heading(r: &BanksReal) -> String {
    format!(
        "Seed 002 on real programs: each program in a guest of {} vCPUs and {} MiB under each placement the kernel booted (TCG), its loads and stores recorded through {}'s last-level cache and replayed through its memory ({} corpus lines). Assumed: one guest instruction per ns; the requests arrive when the guest made them (open loop), so placement changes how long they take, not when they come; the runs of one program are different executions.\n",
        r.cpus, r.mem_mib, r.machine, r.corpus_lines
    )
}

/// Every program under every placement: what was recorded and what the
/// memory made of it.
pub fn cells_table(r: &BanksReal) -> String {
    let mut rows = vec![[
        "program",
        "placement",
        "accesses",
        "requests",
        "writebacks",
        "LLC miss %",
        "BLP busy",
        "BLP run",
        "row hit %",
        "conflict %",
        "read ns",
        "read time ms",
        "memory ms",
    ]
    .map(String::from)
    .to_vec()];
    for c in &r.cells {
        rows.push(vec![
            c.program.name().into(),
            placement_label(&c.placement, c.run),
            c.recorded.accesses().to_string(),
            c.recorded.records.to_string(),
            c.recorded.writebacks.to_string(),
            format!("{:.3}", 100.0 * c.recorded.miss_rate()),
            format!("{:.2}", c.memory.busy_blp),
            format!("{:.3}", c.memory.blp),
            format!("{:.1}", 100.0 * c.memory.row_hit_rate),
            format!("{:.1}", 100.0 * c.memory.row_conflict_rate),
            format!("{:.1}", c.read_latency_ns),
            format!("{:.2}", c.read_time_ms),
            format!("{:.1}", c.memory.total_ns / 1e6),
        ]);
    }
    align(&rows)
}

/// Each placement against buddy on the same program.
pub fn versus_table(r: &BanksReal) -> String {
    let mut rows = vec![[
        "program",
        "placement",
        "BLP busy",
        "read latency",
        "read time",
    ]
    .map(String::from)
    .to_vec()];
    for v in &r.versus_buddy {
        rows.push(vec![
            v.program.name().into(),
            placement_label(&v.placement, v.run),
            format!("{:.3}x", v.blp_ratio),
            format!("{:.3}x", v.latency_ratio),
            format!("{:.3}x", v.read_time_ratio),
        ]);
    }
    align(&rows)
}

/// The plugin's cost and the recordings' sizes.
pub fn overhead_table(r: &BanksReal) -> String {
    let mut rows = vec![[
        "program",
        "placement",
        "plain s",
        "recorded s",
        "overhead",
        "accesses",
        "requests",
        "trace MB",
    ]
    .map(String::from)
    .to_vec()];
    for o in &r.overhead {
        rows.push(vec![
            o.program.name().into(),
            o.placement.name(),
            format!("{:.1}", o.plain_s),
            format!("{:.1}", o.traced_s),
            format!("{:.2}x", o.ratio),
            o.accesses.to_string(),
            o.requests.to_string(),
            format!("{:.1}", o.trace_bytes as f64 / 1e6),
        ]);
    }
    align(&rows)
}

/// What the plugin counted but did not record, summed over the runs.
fn uncounted(r: &BanksReal) -> String {
    let sum = |f: fn(&Cell) -> u64| r.cells.iter().map(f).sum::<u64>();
    format!(
        "Over every run: {} I/O accesses counted, not recorded; {} accesses straddled two pages (first line only looked up); {} requests dropped; {} accesses timed at their vCPU's previous one (QEMU gave them another instruction's index).\n",
        sum(|c| c.recorded.io),
        sum(|c| c.recorded.page_cross),
        sum(|c| c.recorded.dropped),
        sum(|c| c.recorded.retimed)
    )
}

/// The heading, every cell, the comparison with buddy, the overhead and
/// the checks.
pub fn text(r: &BanksReal) -> Result<String> {
    let mut out = heading(r);
    out.push('\n');
    out.push_str(&cells_table(r));
    out.push('\n');
    out.push_str("Against buddy's first recording of the same program (read time below 1x: faster; buddy's second run is the noise floor):\n");
    out.push_str(&versus_table(r));
    out.push_str(&uncounted(r));
    if !r.overhead.is_empty() {
        out.push_str("\nThe plugin's overhead (host seconds of the same guest with and without it) and the recordings:\n");
        out.push_str(&overhead_table(r));
    }
    let _ = writeln!(out, "{:.0} host seconds in all.", r.seconds);
    out.push_str(&checks_text(&r.checks));
    Ok(out)
}

fn grouped(
    r: &BanksReal,
    kind: &str,
    title: &str,
    axis: &str,
    metric: impl Fn(&Cell) -> f64,
) -> Result<Chart> {
    let progs = programs(r);
    let mut chart = BarChart::new(kind, title)
        .value_axis(Axis::linear(axis))
        .categories(progs.iter().map(|p| p.name().to_string()));
    for placement in placements(r) {
        let values = progs
            .iter()
            .map(|&p| cell(r, p, &placement).map(&metric))
            .collect();
        chart = chart.series(placement.name(), values);
    }
    chart.render()
}

/// Seed 002's figure from the real programs: bank-level parallelism while
/// the memory works, per program and policy.
pub fn blp_chart(r: &BanksReal) -> Result<Chart> {
    grouped(
        r,
        "real-blp",
        &format!("Bank-level parallelism of real programs on {}", r.machine),
        "mean banks busy while any is",
        |c| c.memory.busy_blp,
    )
}

/// Read time per program and policy, against buddy's.
pub fn read_time_chart(r: &BanksReal) -> Result<Chart> {
    grouped(
        r,
        "real-read-time",
        "Read time against buddy's (below 1: faster)",
        "read time / buddy's",
        |c| {
            cell(
                r,
                c.program,
                &Placement::of(nvmos_kernel::run::Policy::Buddy),
            )
            .map_or(f64::NAN, |b| c.read_time_ms / b.read_time_ms)
        },
    )
}

/// `banks-real.html`: the checks, the real figure beside the synthetic
/// one, every cell, the comparison and the overhead.
pub fn html(r: &BanksReal, synthetic: &BanksOutput, nav: &[NavLink]) -> Result<String> {
    let mut page = Page::new(
        "banks-real.html",
        "nvmos study banks --real",
        "Frame placement and bank-level parallelism on real programs (seed 002)",
    );
    page.nav(nav);
    page.summary_table(&checks_table(&r.checks));
    page.section("experiment", "The experiment")
        .note(&Html::new().text(&heading(r)));
    page.chart(&blp_chart(r)?);
    page.chart(&crate::banks::blp_chart(synthetic, "synthetic-blp")?);
    page.chart(&read_time_chart(r)?);
    page.section("cells", "Every program under every placement")
        .pre(&cells_table(r))
        .pre(&versus_table(r))
        .note(&Html::new().text(&uncounted(r)));
    if !r.overhead.is_empty() {
        page.section("overhead", "The recorder's overhead and the recordings")
            .pre(&overhead_table(r));
    }
    Ok(page.render())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvmos_kernel::memtrace::MemTraceReport;
    use nvmos_kernel::run::Policy;
    use nvmos_memsys::trace::TraceStats;
    use nvmos_sim::banks_study::Banks;
    use nvmos_sim::study::{Scale, Study};

    fn cell(policy: Policy, run: u32, blp: f64, reads: u64) -> Cell {
        Cell {
            program: Program::Sort,
            placement: Placement::of(policy),
            run,
            host_s: 2.0,
            recorded: MemTraceReport {
                loads: 900,
                stores: 100,
                hits: 990,
                misses: 10,
                records: 10,
                ..Default::default()
            },
            memory: TraceStats {
                reads,
                busy_blp: blp,
                ..Default::default()
            },
            read_latency_ns: 50.0,
            read_time_ms: reads as f64 * 50.0 / 1e6,
        }
    }

    #[test]
    fn the_page_names_every_run_and_draws_both_figures() {
        let mut real = BanksReal {
            machine: "ddr4-2400".into(),
            cpus: 2,
            mem_mib: 1024,
            corpus_lines: 10,
            cells: vec![
                cell(Policy::Buddy, 1, 1.5, 100),
                cell(Policy::Buddy, 2, 1.6, 104),
                cell(Policy::M3, 1, 2.0, 90),
            ],
            versus_buddy: Vec::new(),
            overhead: Vec::new(),
            checks: Vec::new(),
            seconds: 3.0,
        };
        real.rederive();
        let t = text(&real).unwrap();
        assert!(t.contains("buddy (run 2)"), "{t}");
        assert!(t.contains("0.900x"), "M³'s read time against buddy's: {t}");
        assert!(t.contains("met"), "{t}");
        let mut options = Banks::options(Scale::Quick);
        options.machine = "ddr4-2400".into();
        options.cores = vec![1];
        options.analyse = false;
        let synthetic = Banks::run(&options, &mut |_| {}).unwrap();
        let page = html(&real, &synthetic, &[]).unwrap();
        assert!(page.contains("real-blp") && page.contains("synthetic-blp"));
    }
}
