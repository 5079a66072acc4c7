//! `nvmos bench writers` and `nvmos bench scaling`: arguments, progress
//! and tables for `nvmos_pmo_bench::{writers, scaling}` (concurrent
//! writers of one pool; seed 001's Fig. 1, scalability by thread count).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use nvmos_pmo_bench::scaling::{self, ScalingBench};
use nvmos_pmo_bench::writers::{self, WritersBench};
use nvmos_report::TextTable;
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
    let bar = crate::progress_bar(o.processes.len() as u64 * 2 * o.rounds as u64);
    let r = writers::run(&o, &mut |p| crate::show(&bar, &p));
    bar.finish_and_clear();
    let r = r?;
    if args.json {
        print!("{}", nvmos_report::json_text(&r)?);
        return Ok(());
    }
    let mut s = format!(
        "concurrent writers of one pool in {}: each its own object ({} MiB), {} pages per psync, {} MiB per writer, AES-256-GCM: {}; median of {}; {} CPUs, load average {}\n",
        o.dir.display(),
        o.object_bytes >> 20,
        o.pages_per_psync,
        o.bytes_per_writer >> 20,
        o.encrypted,
        o.rounds,
        r.cpus,
        r.loadavg
    );
    let mut t = TextTable::new(["writers", "state store", "GiB/s (all)", "GiB/cpu-s", "runs"]);
    for row in &r.rows {
        let runs: Vec<String> = row
            .rounds
            .iter()
            .map(|x| format!("{:.3}", x.aggregate_gib_per_s))
            .collect();
        t.row([
            row.processes.to_string(),
            if row.state_store { "yes" } else { "no" }.to_string(),
            format!("{:.3}", row.aggregate_gib_per_s),
            format!("{:.3}", row.gib_per_cpu_s),
            runs.join(" "),
        ]);
    }
    s.push_str(&t.render());
    s.push('\n');
    s.push_str(&crate::study::checks_text(&r.checks));
    print!("{s}");
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
    let bar = crate::progress_bar((o.modes.len() * 2 * o.threads.len()) as u64 * o.rounds as u64);
    let r = scaling::run(&o, &mut |p| crate::show(&bar, &p));
    bar.finish_and_clear();
    let r = r?;
    if args.json {
        print!("{}", nvmos_report::json_text(&r)?);
        return Ok(());
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "seed 001 Fig. 1: pages written and psynced per second by thread count ({} pages per thread, {} iterations, median of {}); {} CPUs, load average {}",
        o.pages_per_thread, o.iterations, o.rounds, r.cpus, r.loadavg
    );
    let mut head = vec!["mode".to_string(), "objects".to_string()];
    head.extend(o.threads.iter().map(|t| format!("{t} thr (x)")));
    let mut t = TextTable::new(head);
    t.left(0).left(1);
    for chunk in r.cells.chunks(o.threads.len()) {
        let mut row = vec![
            chunk[0].mode.clone(),
            if chunk[0].shared { "one" } else { "separate" }.to_string(),
        ];
        row.extend(
            chunk
                .iter()
                .map(|c| format!("{:.0} ({:.2})", c.pages_per_s, c.speedup)),
        );
        t.row(row);
    }
    s.push_str(&t.render());
    print!("{s}");
    Ok(())
}
