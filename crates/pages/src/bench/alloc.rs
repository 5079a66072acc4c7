//! `nvmos bench alloc` (`nvmos_sim::bench_alloc`, seed 000's Table 2 on
//! this machine): the CSV ([`csv`]) and the terminal tables ([`table`]).

use std::fmt::Write as _;

use nvmos_report::TextTable;
use nvmos_sim::bench_alloc::{BenchAlloc, BenchAllocator, Op, Pattern};
use nvmos_sim::units::{format_frames, FRAME_BYTES};

use crate::Result;

/// The columns of [`csv`].
const CSV_HEADER: [&str; 16] = [
    "allocator",
    "pattern",
    "threads",
    "op",
    "requests",
    "failures",
    "mean_ns_amortized",
    "mean_ns",
    "sd_ns",
    "mean_cycles",
    "sd_cycles",
    "p50_ns",
    "p99_ns",
    "max_ns",
    "metadata_bytes",
    "round",
];

/// One line per cell and operation, after a header.
pub fn csv(result: &BenchAlloc) -> Result<String> {
    let mut rows = Vec::new();
    for cell in &result.cells {
        for op in Op::BOTH {
            let r = cell.op(op);
            let f = |v: f64| format!("{v:.3}");
            rows.push(vec![
                cell.allocator.to_string(),
                cell.pattern.to_string(),
                cell.threads.to_string(),
                op.name().to_string(),
                r.requests.to_string(),
                r.failures.to_string(),
                f(r.mean_ns_amortized),
                f(r.mean_ns),
                f(r.sd_ns),
                f(r.mean_cycles),
                f(r.sd_cycles),
                f(r.p50_ns),
                f(r.p99_ns),
                f(r.max_ns),
                cell.metadata_bytes
                    .map(|b| b.to_string())
                    .unwrap_or_default(),
                cell.round.to_string(),
            ]);
        }
    }
    nvmos_report::csv_text(&CSV_HEADER, rows)
}

/// The human report: a table per pattern and operation (rows =
/// allocators, columns = threads), the seed's comparison rows, metadata
/// per frame, the cells not timed, the seed's checks and the timer.
pub fn table(result: &BenchAlloc) -> String {
    let o = &result.options;
    let clock = &result.clock;
    let mut out = String::new();
    let threads: Vec<String> = o.threads.iter().map(u32::to_string).collect();
    let _ = writeln!(
        out,
        "nvmos bench alloc: {} ({} frames of 4 KiB), threads {}, rounds {}, repeat {}, mixed {} ops, seed {}, lock {}, iBuddy free order {}",
        format_frames(o.frames),
        o.frames,
        threads.join(","),
        o.rounds,
        o.repeat,
        o.mixed_ops,
        o.seed,
        o.lock.name(),
        o.free_order.name()
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
    for &pattern in &o.patterns {
        for op in Op::BOTH {
            out.push('\n');
            out.push_str(&op_table(result, pattern, op));
        }
    }
    out.push('\n');
    out.push_str(&metadata_table(result));
    if !result.skipped.is_empty() {
        let mut seen: Vec<(BenchAllocator, Pattern, &str)> = Vec::new();
        for s in &result.skipped {
            if !seen
                .iter()
                .any(|&(a, p, _)| a == s.allocator && p == s.pattern)
            {
                seen.push((s.allocator, s.pattern, &s.reason));
            }
        }
        let _ = writeln!(out, "\nnot timed ({} cells):", result.skipped.len());
        for (a, p, why) in seen {
            let _ = writeln!(out, "  {a} on {p}: {why}");
        }
    }
    if !result.checks.is_empty() {
        out.push('\n');
        out.push_str(&crate::checks::checks_text(&result.checks));
    }
    out
}

fn header(result: &BenchAlloc) -> TextTable {
    TextTable::new(
        std::iter::once("allocator".to_string())
            .chain(result.options.threads.iter().map(|t| format!("{t} thr"))),
    )
}

fn op_table(result: &BenchAlloc, pattern: Pattern, op: Op) -> String {
    let what = match pattern {
        Pattern::Mixed => "mixed orders",
        _ => "order 0",
    };
    let mut out = format!("{pattern}: {} ({what})\n", op.name());
    let mut t = header(result);
    let mut failures = Vec::new();
    for &allocator in &result.options.allocators {
        let mut row = vec![allocator.label().to_string()];
        for &threads in &result.options.threads {
            row.push(match result.cell(allocator, pattern, threads) {
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
                None if result.skipped(allocator, pattern, threads).is_some() => {
                    "not timed".to_string()
                }
                None => "-".to_string(),
            });
        }
        t.row(row);
    }
    let has = |a| result.options.allocators.contains(&a);
    let lbs31 = BenchAllocator::Nvmos(nvmos_sim::AllocatorKind::Lbs31);
    let comparisons: Vec<_> = result
        .comparisons
        .iter()
        .filter(|c| c.pattern == pattern && c.op == op)
        .collect();
    let show = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    if has(lbs31) && has(BenchAllocator::Nvmos(nvmos_sim::AllocatorKind::Lis1)) {
        t.row(
            std::iter::once("(c-e)/c".to_string()).chain(
                comparisons
                    .iter()
                    .map(|c| show(c.lis1_gain_pct.map(|g| format!("{g:.0}%")))),
            ),
        );
    }
    if has(lbs31) && has(BenchAllocator::Nvmos(nvmos_sim::AllocatorKind::Lis31)) {
        t.row(
            std::iter::once("c/f".to_string()).chain(comparisons.iter().map(|c| {
                show(
                    c.lis31_mean_ratio
                        .zip(c.lis31_sd_ratio)
                        .map(|(m, s)| format!("{m:.2}x sd {s:.2}x")),
                )
            })),
        );
    }
    out.push_str(&t.render());
    if !failures.is_empty() {
        let _ = writeln!(
            out,
            "  allocations refused (out of memory): {}",
            failures.join(", ")
        );
    }
    out
}

fn metadata_table(result: &BenchAlloc) -> String {
    let mut out = String::from(
        "metadata bytes per 4 KiB frame (metadata_bytes / frames, after the timed run)\n",
    );
    let mut t = header(result);
    let frames = result.options.frames as f64;
    for &allocator in &result.options.allocators {
        let mut row = vec![allocator.label().to_string()];
        for &threads in &result.options.threads {
            // The first pattern that timed this cell.
            let bytes = result
                .options
                .patterns
                .iter()
                .find_map(|&p| result.cell(allocator, p, threads))
                .and_then(|c| c.metadata_bytes);
            row.push(match bytes {
                Some(bytes) => format!("{:.2}", bytes as f64 / frames),
                None => "n/a".to_string(),
            });
        }
        t.row(row);
    }
    out.push_str(&t.render());
    let _ = writeln!(
        out,
        "  (a frame is {FRAME_BYTES} bytes; Linux's struct page is 64)"
    );
    out
}
