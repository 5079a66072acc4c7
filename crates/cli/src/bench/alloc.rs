//! `nvmos bench alloc`: arguments, progress and rendering for
//! `nvmos_sim::bench_alloc` (seed 000's Table 2 on this machine).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use nvmos_report::TextTable;
use nvmos_sim::bench_alloc::{self, BenchAlloc, BenchAllocator, LockKind, Op, Pattern};
use nvmos_sim::study::Study;
use nvmos_sim::units::{self, format_frames, FRAME_BYTES};

#[derive(Args, Debug)]
pub struct AllocArgs {
    /// Allocators (rows), comma-separated, case-insensitive: any of the
    /// registry's (buddy, LBS-1, LBS-31, linux-pcp, iBuddy, LiS-1, LiS-31,
    /// LiS-31-fair, M3, M3-part, array-bank, list-bank, adaptive,
    /// adaptive-migrate) or the peer, bsa [default: all of them].
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = parse::<BenchAllocator>)]
    alloc: Option<Vec<BenchAllocator>>,

    /// Thread counts (columns); thread t names CPU t, and each allocator is
    /// built for that many CPUs [default: 1,2,4,8,16,32].
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = parse_threads)]
    threads: Option<Vec<u32>>,

    /// Patterns: bulk, repeat, rand, mixed [default: all].
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = parse::<Pattern>)]
    patterns: Option<Vec<Pattern>>,

    /// Memory managed: 4GiB, 512MiB, ... or a number of 4 KiB frames
    /// [default: 4GiB, 1GiB with --quick].
    #[arg(long, value_name = "SIZE", value_parser = units::parse_memory)]
    memory: Option<u64>,

    /// Runs per cell; the run whose mean is the median is kept
    /// [default: 3, 1 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,

    /// `repeat`: alloc/free pairs per thread [default: 200000, 20000 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    repeat: Option<u64>,

    /// `mixed`: random operations per thread [default: 200000, 20000 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    mixed_ops: Option<u64>,

    /// Seed for the `rand` shuffle and the `mixed` choices [default: 42].
    #[arg(long)]
    seed: Option<u64>,

    /// The lock every allocator and the peer are built with: spin or
    /// parking [default: spin].
    #[arg(long, value_parser = parse::<LockKind>)]
    lock: Option<LockKind>,

    /// Smaller and faster: 1 GiB, one round, fewer repeat and mixed
    /// operations (explicit options still win).
    #[arg(long)]
    quick: bool,

    /// Print every result as JSON on stdout instead of the tables.
    #[arg(long)]
    json: bool,

    /// Also write one CSV line per cell and operation to PATH.
    #[arg(long, value_name = "PATH")]
    csv: Option<PathBuf>,
}

fn parse<T: std::str::FromStr<Err = String>>(text: &str) -> Result<T, String> {
    text.parse()
}

fn parse_threads(text: &str) -> Result<u32, String> {
    let max = nvmos_frames::MAX_CPUS;
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "thread count '{text}' is not a number in 1..={max}"
        )),
    }
}

impl AllocArgs {
    /// The study's options at the scale asked for, overridden by what was
    /// given.
    fn options(&self) -> bench_alloc::BenchAllocOptions {
        let mut o = BenchAlloc::options(crate::study::scale(self.quick));
        if let Some(v) = &self.alloc {
            o.allocators = v.clone();
        }
        if let Some(v) = &self.threads {
            o.threads = v.clone();
        }
        if let Some(v) = &self.patterns {
            o.patterns = v.clone();
        }
        if let Some(v) = self.memory {
            o.frames = v;
        }
        if let Some(v) = self.rounds {
            o.rounds = v;
        }
        if let Some(v) = self.repeat {
            o.repeat = v;
        }
        if let Some(v) = self.mixed_ops {
            o.mixed_ops = v;
        }
        if let Some(v) = self.seed {
            o.seed = v;
        }
        if let Some(v) = self.lock {
            o.lock = v;
        }
        o
    }
}

/// Run `nvmos bench alloc`.
pub fn main(args: &AllocArgs) -> Result<()> {
    let options = args.options();
    options.check()?;
    let bar = crate::progress_bar(options.steps());
    let result = bench_alloc::run(&options, &mut |p| crate::show(&bar, &p));
    bar.finish_and_clear();
    let result = result?;
    if let Some(path) = &args.csv {
        nvmos_report::write_atomic(path, csv(&result)?.as_bytes(), &[])
            .with_context(|| format!("writing the CSV to {}", path.display()))?;
    }
    if args.json {
        print!("{}", nvmos_report::json_text(&result)?);
    } else {
        print!("{}", table(&result));
    }
    Ok(())
}

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
fn csv(result: &BenchAlloc) -> Result<String> {
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
    Ok(nvmos_report::csv_text(&CSV_HEADER, rows)?)
}

/// The human report: a table per pattern and operation (rows =
/// allocators, columns = threads), the seed's comparison rows, metadata
/// per frame, the cells not timed, the seed's checks and the timer.
fn table(result: &BenchAlloc) -> String {
    let o = &result.options;
    let clock = &result.clock;
    let mut out = String::new();
    let threads: Vec<String> = o.threads.iter().map(u32::to_string).collect();
    let _ = writeln!(
        out,
        "nvmos bench alloc: {} ({} frames of 4 KiB), threads {}, rounds {}, repeat {}, mixed {} ops, seed {}, lock {}",
        format_frames(o.frames),
        o.frames,
        threads.join(","),
        o.rounds,
        o.repeat,
        o.mixed_ops,
        o.seed,
        o.lock.name()
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
        out.push_str(&crate::study::checks_text(&result.checks));
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
