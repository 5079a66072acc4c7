//! `nvmos bench heap`: arguments and progress (the table in
//! `nvmos_pages::bench::heap`) for
//! `nvmos_pmo_bench::heap` (the heap inside an object against PMDK's
//! `pmemobj_alloc`/`pmemobj_free`).

use std::path::PathBuf;

use anyhow::Result;
use nvmos_pages::bench::heap::table;
use nvmos_pmo_bench::heap::{self, HeapBench, HeapOptions};
use nvmos_sim::study::Study;

/// `nvmos bench heap` options.
#[derive(clap::Args, Debug)]
pub struct HeapArgs {
    /// Bytes of the heap (nvmos's object, PMDK's pool) [default: 64MiB].
    #[arg(long, value_parser = nvmos_sim::units::parse_memory)]
    heap: Option<u64>,
    /// Operations per run [default: 1000000, 100000 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    ops: Option<u64>,
    /// Most live blocks [default: 16384].
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    live_max: Option<u64>,
    /// nvmos psync intervals in operations, comma-separated [default: 1,64].
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u64).range(1..))]
    psync_every: Vec<u64>,
    /// Runs per row; the median is reported [default: 3, 1 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,
    /// Directory standing for persistent memory [default: /dev/shm].
    #[arg(long)]
    pmem_dir: Option<PathBuf>,
    /// The nvmos object without encryption (PMDK has none).
    #[arg(long)]
    plain: bool,
    /// Smaller and faster (explicit options still win).
    #[arg(long)]
    quick: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

impl HeapArgs {
    fn options(&self) -> HeapOptions {
        let mut o = HeapBench::options(crate::study::scale(self.quick));
        if let Some(pages) = self.heap {
            o.heap_bytes = pages * 4096;
        }
        if let Some(ops) = self.ops {
            o.ops = ops;
        }
        if let Some(n) = self.live_max {
            o.live_max = n;
        }
        if !self.psync_every.is_empty() {
            o.psync_every = self.psync_every.clone();
        }
        if let Some(r) = self.rounds {
            o.rounds = r;
        }
        if let Some(dir) = &self.pmem_dir {
            o.pmem_dir = dir.clone();
        }
        o.encrypted &= !self.plain;
        o
    }
}

/// Run `nvmos bench heap` and print its table (or JSON).
pub fn main(args: &HeapArgs) -> Result<()> {
    let options = args.options();
    options.check()?;
    let result = crate::with_progress(options.psync_every.len() as u64 + 2, |p| {
        heap::run(&options, p)
    });
    let result = result?;
    if args.json {
        print!("{}", nvmos_report::json_text(&result)?);
    } else {
        print!("{}", table(&result));
    }
    // A row without a figure makes the comparison incomplete: say so
    // with a failing exit, not only in a table cell.
    if let Some(why) = result.incomplete() {
        anyhow::bail!("{why}");
    }
    Ok(())
}
