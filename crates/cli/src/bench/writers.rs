//! `nvmos bench writers` and `nvmos bench scaling`: arguments and progress
//! (tables in `nvmos_pages::bench::writers`) for `nvmos_pmo_bench::{writers, scaling}` (concurrent
//! writers of one pool; seed 001's Fig. 1, scalability by thread count).

use std::path::PathBuf;

use anyhow::Result;
use nvmos_pages::bench::writers::{scaling_table, writers_table};
use nvmos_pmo_bench::scaling::{self, ScalingBench};
use nvmos_pmo_bench::writers::{self, WritersBench};
use nvmos_sim::study::Study;

/// `nvmos bench writers` options.
#[derive(clap::Args, Debug)]
pub struct WritersArgs {
    /// Writer process counts, the first the baseline [default: 1,2].
    #[arg(long, value_delimiter = ',')]
    processes: Option<Vec<usize>>,
    /// Bytes each writer psyncs per run [default: 256MiB, 64MiB with --quick].
    #[arg(long, value_parser = nvmos_sim::units::parse_memory)]
    per_writer: Option<u64>,
    /// Runs per row; the median is reported [default: 3, 1 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,
    /// Directory of the pool [default: /dev/shm].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Smaller and faster (explicit options still win).
    #[arg(long)]
    quick: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `nvmos bench writers` and print its table (or JSON).
pub fn writers_main(args: &WritersArgs) -> Result<()> {
    let mut o = WritersBench::options(crate::study::scale(args.quick));
    if let Some(p) = &args.processes {
        o.processes = p.clone();
    }
    if let Some(pages) = args.per_writer {
        o.bytes_per_writer = pages * 4096;
    }
    if let Some(r) = args.rounds {
        o.rounds = r;
    }
    if let Some(d) = &args.dir {
        o.dir = d.clone();
    }
    o.check()?;
    let r = crate::with_progress(o.processes.len() as u64 * 2 * o.rounds as u64, |p| {
        writers::run(&o, p)
    });
    let r = r?;
    if args.json {
        print!("{}", nvmos_report::json_text(&r)?);
        return Ok(());
    }
    print!("{}", writers_table(&r));
    Ok(())
}

/// `nvmos bench scaling` options.
#[derive(clap::Args, Debug)]
pub struct ScalingArgs {
    /// Thread counts [default: 1,2,4,8].
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<usize>>,
    /// Write-then-psync iterations per thread [default: 8, 4 with --quick].
    #[arg(long)]
    iterations: Option<usize>,
    /// Runs per cell; the median is reported [default: 3, 1 with --quick].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,
    /// Folder for the report page (scaling.html, Fig. 1 drawn) and its
    /// data (scaling.json).
    #[arg(long, default_value = "nvmos-report")]
    out: std::path::PathBuf,
    /// Smaller and faster (explicit options still win).
    #[arg(long)]
    quick: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Run `nvmos bench scaling` and print its table (or JSON).
pub fn scaling_main(args: &ScalingArgs) -> Result<()> {
    let mut o = ScalingBench::options(crate::study::scale(args.quick));
    if let Some(t) = &args.threads {
        o.threads = t.clone();
    }
    if let Some(i) = args.iterations {
        o.iterations = i;
    }
    if let Some(r) = args.rounds {
        o.rounds = r;
    }
    o.check()?;
    let r = crate::with_progress(
        (o.modes.len() * 2 * o.threads.len()) as u64 * o.rounds as u64,
        |p| scaling::run(&o, p),
    );
    let r = r?;
    let dir = nvmos_report::OutputDir::create(&args.out, &[])?;
    let html = nvmos_pages::bench::writers::scaling_page(&r, &dir.nav("scaling.html"))?;
    dir.write_json("scaling.json", &r)?;
    let path = dir.write("scaling.html", html.as_bytes())?;
    if args.json {
        print!("{}", nvmos_report::json_text(&r)?);
        return Ok(());
    }
    print!("{}", scaling_table(&r));
    println!("report: {}", path.display());
    Ok(())
}
