//! `nvmos bench alloc`: arguments and progress (tables and CSV in
//! `nvmos_pages::bench::alloc`) for
//! `nvmos_sim::bench_alloc` (seed 000's Table 2 on this machine).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use nvmos_frames::FreeOrder;
use nvmos_pages::bench::alloc::{csv, table};
use nvmos_sim::bench_alloc::{self, BenchAlloc, BenchAllocator, LockKind, Pattern};
use nvmos_sim::study::Study;
use nvmos_sim::units;

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

    /// Memory managed, with its unit: 4GiB, 512MiB, 4GB or 4096frames
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

    /// The order iBuddy (alone and under LiS-1, LiS-31, LiS-31-fair)
    /// applies frees buffered on different CPUs in: accepted (every free
    /// takes a stamp from its buddy space's shared counter; what replay
    /// uses) or per-cpu (no stamp: each CPU's frees in their order, one
    /// CPU after another) [default: accepted].
    #[arg(long, value_parser = parse::<FreeOrder>)]
    free_order: Option<FreeOrder>,

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
        if let Some(v) = self.free_order {
            o.free_order = v;
        }
        o
    }
}

/// Run `nvmos bench alloc`.
pub fn main(args: &AllocArgs) -> Result<()> {
    let options = args.options();
    options.check()?;
    if let Some(path) = &args.csv {
        // Before the run, not after it: a device or FIFO is never replaced.
        nvmos_trace::output::refuse_special_file(path)?;
    }
    let result = crate::with_progress(options.steps(), |p| bench_alloc::run(&options, p));
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
