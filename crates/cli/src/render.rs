//! Turning a [`Report`] into text: the tables of seed 000's Table 2, a flat
//! CSV, and JSON.

use std::fmt::Write as _;

use anyhow::Result;

use crate::bench::alloc::{Op, Pattern, Report};
use crate::bench::target::AllocatorKind;
use crate::units::{format_frames, FRAME_BYTES};

/// Every result as pretty JSON.
pub fn json(report: &Report) -> Result<String> {
    Ok(serde_json::to_string_pretty(report)? + "\n")
}

/// The columns of [`csv`].
pub const CSV_HEADER: &str = "allocator,pattern,threads,op,requests,failures,mean_ns_amortized,mean_ns,sd_ns,mean_cycles,sd_cycles,p50_ns,p99_ns,max_ns,metadata_bytes,round";

/// One line per cell and operation, after a header.
pub fn csv(report: &Report) -> String {
    let mut out = String::from(CSV_HEADER);
    out.push('\n');
    for cell in &report.cells {
        for op in [Op::Alloc, Op::Free] {
            let r = cell.op(op);
            let metadata = cell
                .metadata_bytes
                .map(|b| b.to_string())
                .unwrap_or_default();
            // Writing to a String cannot fail.
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{},{}",
                cell.allocator,
                cell.pattern,
                cell.threads,
                op.name(),
                r.requests,
                r.failures,
                r.mean_ns_amortized,
                r.mean_ns,
                r.sd_ns,
                r.mean_cycles,
                r.sd_cycles,
                r.p50_ns,
                r.p99_ns,
                r.max_ns,
                metadata,
                cell.round,
            );
        }
    }
    out
}

/// The human report: a table per pattern and operation (rows =
/// allocators, columns = threads), the seed's comparison rows, metadata
/// per frame, and the timer.
pub fn table(report: &Report) -> String {
    let config = &report.config;
    let clock = &report.clock;
    let mut out = String::new();
    let threads: Vec<String> = config.threads.iter().map(u32::to_string).collect();
    let _ = writeln!(
        out,
        "nvmos bench alloc: {} ({} frames of 4 KiB), threads {}, rounds {}, repeat {}, mixed {} ops, seed {}",
        format_frames(config.frames),
        config.frames,
        threads.join(","),
        config.rounds,
        config.repeat,
        config.mixed_ops,
        config.seed
    );
    let _ = writeln!(
        out,
        "timer: {} at {:.3} GHz, {} ticks of read overhead subtracted from every sample",
        clock.source, clock.ticks_per_ns, clock.overhead_ticks
    );
    let _ = writeln!(
        out,
        "cells: mean ±sd ns per request, each request timed [amortized ns per request, untimed run]"
    );
    for &pattern in &config.patterns {
        for op in [Op::Alloc, Op::Free] {
            out.push('\n');
            out.push_str(&op_table(report, pattern, op));
        }
    }
    out.push('\n');
    out.push_str(&metadata_table(report));
    out
}

fn header(report: &Report, first: &str) -> Vec<String> {
    std::iter::once(first.to_string())
        .chain(report.config.threads.iter().map(|t| format!("{t} thr")))
        .collect()
}

fn op_table(report: &Report, pattern: Pattern, op: Op) -> String {
    let what = match pattern {
        Pattern::Mixed => "mixed orders",
        _ => "order 0",
    };
    let mut out = format!("{pattern}: {} ({what})\n", op.name());
    let mut rows = vec![header(report, "allocator")];
    let mut failures = Vec::new();
    for &allocator in &report.config.allocators {
        let mut row = vec![allocator.label().to_string()];
        for &threads in &report.config.threads {
            row.push(match report.cell(allocator, pattern, threads) {
                Some(cell) => {
                    let r = cell.op(op);
                    if r.failures > 0 {
                        failures.push(format!("{allocator} at {threads} thr: {}", r.failures));
                    }
                    format!(
                        "{:.0} ±{:.0} [{:.0}]",
                        r.mean_ns, r.sd_ns, r.mean_ns_amortized
                    )
                }
                None => "-".to_string(),
            });
        }
        rows.push(row);
    }
    rows.extend(comparison_rows(report, pattern, op));
    out.push_str(&align(&rows));
    if !failures.is_empty() {
        let _ = writeln!(
            out,
            "  allocations refused (out of memory): {}",
            failures.join(", ")
        );
    }
    out
}

/// The seed's bottom rows: LiS-1 against LBS-31 as `(c - e) / c`, and
/// LiS-31 against LBS-31 as the ratio `c / f` of the means and of the sds.
fn comparison_rows(report: &Report, pattern: Pattern, op: Op) -> Vec<Vec<String>> {
    let has = |kind| report.config.allocators.contains(&kind);
    let pair = |other, show: &dyn Fn(f64, f64, f64, f64) -> String| {
        report
            .config
            .threads
            .iter()
            .map(|&t| {
                let c = report
                    .cell(
                        AllocatorKind::Nvmos(nvmos_sim::AllocatorKind::Lbs31),
                        pattern,
                        t,
                    )
                    .map(|c| c.op(op));
                let x = report.cell(other, pattern, t).map(|c| c.op(op));
                match (c, x) {
                    (Some(c), Some(x)) => show(c.mean_ns, x.mean_ns, c.sd_ns, x.sd_ns),
                    _ => "-".to_string(),
                }
            })
            .collect::<Vec<_>>()
    };
    let mut rows = Vec::new();
    if has(AllocatorKind::Nvmos(nvmos_sim::AllocatorKind::Lbs31))
        && has(AllocatorKind::Nvmos(nvmos_sim::AllocatorKind::Lis1))
    {
        let cells = pair(
            AllocatorKind::Nvmos(nvmos_sim::AllocatorKind::Lis1),
            &|c, e, _, _| format!("{:.0}%", (c - e) / c * 100.0),
        );
        rows.push(
            std::iter::once("(c-e)/c".to_string())
                .chain(cells)
                .collect(),
        );
    }
    if has(AllocatorKind::Nvmos(nvmos_sim::AllocatorKind::Lbs31))
        && has(AllocatorKind::Nvmos(nvmos_sim::AllocatorKind::Lis31))
    {
        let cells = pair(
            AllocatorKind::Nvmos(nvmos_sim::AllocatorKind::Lis31),
            &|c, f, sc, sf| format!("{:.2}x sd {:.2}x", c / f, sc / sf),
        );
        rows.push(std::iter::once("c/f".to_string()).chain(cells).collect());
    }
    rows
}

fn metadata_table(report: &Report) -> String {
    let mut out = String::from(
        "metadata bytes per 4 KiB frame (metadata_bytes / frames, after the timed run)\n",
    );
    let mut rows = vec![header(report, "allocator")];
    let pattern = report.config.patterns[0];
    for &allocator in &report.config.allocators {
        let mut row = vec![allocator.label().to_string()];
        for &threads in &report.config.threads {
            row.push(
                match report
                    .cell(allocator, pattern, threads)
                    .and_then(|c| c.metadata_bytes)
                {
                    Some(bytes) => format!("{:.2}", bytes as f64 / report.config.frames as f64),
                    None => "n/a".to_string(),
                },
            );
        }
        rows.push(row);
    }
    out.push_str(&align(&rows));
    let _ = writeln!(
        out,
        "  (a frame is {FRAME_BYTES} bytes; Linux's struct page is 64)"
    );
    out
}

/// Lay out rows in columns (the first row is the header): the first
/// column left-aligned, the rest right; through nvmos-report's TextTable.
pub(crate) fn align(rows: &[Vec<String>]) -> String {
    let Some((header, rest)) = rows.split_first() else {
        return String::new();
    };
    let mut t = nvmos_report::TextTable::new(header.clone());
    for r in rest {
        t.row(r.clone());
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec!["a".to_string(), "1".to_string()],
            vec!["long".to_string(), "12345".to_string()],
        ];
        assert_eq!(align(&rows), "a         1\nlong  12345\n");
    }
}
