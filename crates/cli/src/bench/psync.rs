//! `nvmos bench psync`: arguments, progress and the table for
//! `nvmos_pmo_bench::psync` (psync against PMDK's libpmemobj).

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Result;
use nvmos_pmo_bench::psync::{self, Psync, PsyncOptions};
use nvmos_report::TextTable;
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

/// The table people read.
fn table(r: &Psync) -> String {
    let c = &r.options;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "psync throughput, one core (CPU {}), {} KiB pages, {} pages per psync, object {} MiB; median of {} runs",
        c.cpu,
        PAGE / 1024,
        c.pages_per_psync,
        c.object_bytes >> 20,
        c.rounds
    );
    let _ = writeln!(s, "load average at start: {}", r.loadavg);
    let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    let mut t = TextTable::new([
        "system",
        "medium",
        "GiB/s",
        "GiB/cpu-s",
        "runs (GiB/s wall/cpu)",
    ]);
    t.left(1).left(4);
    for row in &r.rows {
        let runs: Vec<String> = row
            .rounds
            .iter()
            .map(|v| format!("{:.3}/{:.3}", v.wall, v.cpu))
            .collect();
        let mut runs = runs.join(" ");
        if let Some(why) = &row.missing {
            let _ = write!(
                runs,
                "{}(missing: {why})",
                if runs.is_empty() { "" } else { "  " }
            );
        }
        t.row([
            row.system.clone(),
            row.medium.clone(),
            fmt(row.gib_per_s),
            fmt(row.gib_per_cpu_s),
            runs,
        ]);
    }
    s.push_str(&t.render());
    for ratio in &r.ratios {
        let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
        let _ = writeln!(
            s,
            "nvmos psync with AES-256-GCM / PMDK undo-log tx on {}: {} by wall time, {} by CPU time; sealing on all CPUs: {} by wall time, {} by CPU time",
            ratio.medium,
            x(ratio.wall),
            x(ratio.cpu),
            x(ratio.all_cpus_wall),
            x(ratio.all_cpus_cpu)
        );
    }
    for g in &r.groups {
        let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1} us"));
        let why = g
            .missing
            .as_ref()
            .map_or(String::new(), |m| format!(" (missing: {m})"));
        let _ = writeln!(s, "psync_many of {} objects on {}: {} per object, {} psyncs {} (speedup {}), {} pages per object, {}{why}", g.objects, g.medium, us(g.many_us_per_object), g.objects, us(g.single_us_per_object), g.speedup().map_or("-".into(), |x| format!("{x:.2}x")), g.pages_per_object, if g.state_store { "state store" } else { "no state store" });
    }
    s.push('\n');
    s.push_str(&crate::study::checks_text(&r.checks));
    s
}

/// Run `nvmos bench psync` and print its table (or JSON).
pub fn main(args: &PsyncArgs) -> Result<()> {
    let options = args.options();
    options.check()?;
    let bar = crate::progress_bar(options.steps());
    let result = psync::run(&options, &mut |p| crate::show(&bar, &p));
    bar.finish_and_clear();
    let result = result?;
    if args.json {
        print!("{}", nvmos_report::json_text(&result)?);
    } else {
        print!("{}", table(&result));
    }
    // A row without a figure (PMDK missing, a medium that failed) makes
    // the comparison incomplete: say so with a failing exit, not only in
    // a table cell.
    let missing: Vec<String> = result
        .missing()
        .map(|r| {
            format!(
                "{} on {}: {}",
                r.system,
                r.medium,
                r.missing.as_deref().unwrap_or("no figure")
            )
        })
        .chain(result.groups.iter().filter_map(|g| {
            g.missing
                .as_ref()
                .map(|m| format!("psync_many of {} on {}: {m}", g.objects, g.medium))
        }))
        .collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "{} of {} rows could not run, so the comparison is incomplete: {}",
            missing.len(),
            result.rows.len() + result.groups.len(),
            missing.join("; ")
        );
    }
    Ok(())
}
