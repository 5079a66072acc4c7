//! `nvmos bench psync`: arguments and progress (the table in
//! `nvmos_pages::bench::psync`) for
//! `nvmos_pmo_bench::psync` (psync against PMDK's libpmemobj).

use std::path::PathBuf;

use anyhow::Result;
use nvmos_pages::bench::psync::table;
use nvmos_pmo_bench::psync::{self, Psync, PsyncOptions};
use nvmos_sim::study::Study;

const PAGE: u64 = 4096;

/// `nvmos bench psync` options.
#[derive(clap::Args, Debug)]
pub struct PsyncArgs {
    /// Object size: 64MiB, ... or a number of 4 KiB pages [default: 64MiB].
    #[arg(long, value_parser = nvmos_sim::units::parse_memory)]
    object: Option<u64>,
    /// Bytes psynced per timed run on persistent memory [default: 1GiB, 256MiB with --quick].
    #[arg(long, value_parser = nvmos_sim::units::parse_memory)]
    pmem_total: Option<u64>,
    /// Bytes psynced per timed run on disk [default: 64MiB, 8MiB with --quick].
    #[arg(long, value_parser = nvmos_sim::units::parse_memory)]
    disk_total: Option<u64>,
    /// Pages per psync (and per PMDK transaction) [default: 64].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pages: Option<u64>,
    /// Runs per row; the median is reported [default: 3, 1 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,
    /// Directory standing for persistent memory [default: /dev/shm].
    #[arg(long)]
    pmem_dir: Option<PathBuf>,
    /// Directory on a disk file system [default: the system's temporary directory].
    #[arg(long)]
    disk_dir: Option<PathBuf>,
    /// The CPU to run on [default: 0].
    #[arg(long)]
    cpu: Option<usize>,
    /// psync_many group sizes measured against as many single psyncs, comma separated [default: 2,8; none: 0].
    #[arg(long, value_delimiter = ',')]
    group_objects: Option<Vec<usize>>,
    /// Smaller and faster (explicit options still win).
    #[arg(long)]
    quick: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

impl PsyncArgs {
    fn options(&self) -> PsyncOptions {
        let mut o = Psync::options(crate::study::scale(self.quick));
        if let Some(pages) = self.object {
            o.object_bytes = pages * PAGE;
        }
        if let Some(pages) = self.pmem_total {
            o.pmem_bytes = pages * PAGE;
        }
        if let Some(pages) = self.disk_total {
            o.disk_bytes = pages * PAGE;
        }
        if let Some(pages) = self.pages {
            o.pages_per_psync = pages as usize;
        }
        if let Some(rounds) = self.rounds {
            o.rounds = rounds;
        }
        if let Some(dir) = &self.pmem_dir {
            o.pmem_dir = dir.clone();
        }
        if let Some(dir) = &self.disk_dir {
            o.disk_dir = Some(dir.clone());
        }
        if let Some(cpu) = self.cpu {
            o.cpu = cpu;
        }
        if let Some(g) = &self.group_objects {
            o.group_objects = g.iter().copied().filter(|&n| n != 0).collect();
        }
        o
    }
}

/// Run `nvmos bench psync` and print its table (or JSON).
pub fn main(args: &PsyncArgs) -> Result<()> {
    let options = args.options();
    options.check()?;
    let result = crate::with_progress(options.steps(), |p| psync::run(&options, p));
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
