//! `nvmos study banks`: seed 002's study (`nvmos_sim::banks_study`), and
//! with `--real` the same claim on real programs in the kernel
//! (`nvmos_kernel::banks_real`). This file parses the arguments, draws
//! the progress and prints or writes what `nvmos_pages::banks` and
//! `nvmos_pages::banks_real` render: the text, JSON and the pages.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use nvmos_memsys::PagePolicy;
use nvmos_pages::banks::{html, text};
use nvmos_report::OutputDir;
use nvmos_sim::banks::Kernel;
use nvmos_sim::banks_study::{Banks, BanksOptions};
use nvmos_sim::study::Study;

use crate::study::scale;

#[derive(Args, Debug)]
pub struct BanksArgs {
    /// The machine: a preset name (xeon-3ch, ddr4-2400, coffeelake-xor,
    /// pcm-lee2009) or a TOML file [default: xeon-3ch].
    #[arg(long)]
    machine: Option<String>,

    /// Core counts, comma-separated [default: 1,2,4].
    #[arg(long, value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(1..=64))]
    cores: Option<Vec<u32>>,

    /// The STREAM kernel [default: copy].
    #[arg(long, value_enum)]
    kernel: Option<KernelArg>,

    /// MiB per array per core (STREAM has three arrays) [default: 4, 1
    /// with --quick].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    array_mib: Option<u64>,

    /// Passes over the arrays [default: 1].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100))]
    passes: Option<u64>,

    /// Cache-line misses each core keeps outstanding [default: 10].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    mlp: Option<u32>,

    /// Page policy of the memory controller [default: open].
    #[arg(long, value_enum)]
    policy: Option<PolicyArg>,

    /// Requests each channel's queue holds [default: 32].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
    queue: Option<u32>,

    /// Seed of the random placements and access orders [default: 2012].
    #[arg(long)]
    seed: Option<u64>,

    /// The basic timing model: blocking scheduler, writes
    /// queued with reads (no write buffer), no refresh.
    #[arg(long)]
    basic_model: bool,

    /// Smaller arrays (1 MiB): a quick look (explicit options still win).
    #[arg(long)]
    quick: bool,

    /// Skip the analysing program.
    #[arg(long)]
    no_analyse: bool,

    /// Print the results as JSON instead of tables.
    #[arg(long)]
    json: bool,

    /// Also write banks.html (charts) and banks.json into this folder
    /// (with --real also banks-real.html and banks-real.json).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,

    /// Seed 002 on real programs: boot the patched kernel under each
    /// placement policy, run each program with its memory accesses
    /// recorded through the machine's last-level cache (`nvmos kernel
    /// run --mem-trace`), replay every recording through the timing
    /// model, and draw the figure next to the synthetic one on the same
    /// machine [machine default: ddr4-2400]. Boots a guest per program
    /// and policy under TCG: a long run (the results page gives its time).
    #[arg(long)]
    real: bool,

    /// With --real: programs, comma-separated (sort, xz, sqlite3, numpy)
    /// [default: all].
    #[arg(long, value_delimiter = ',', requires = "real")]
    programs: Option<Vec<String>>,

    /// With --real: placements, comma-separated: kernel policies
    /// (`nvmos_policy=` values) or m3-shared (M³ without its partition);
    /// the first is recorded twice and runs without the plugin [default:
    /// buddy,ibuddy,lis31,adaptive,m3,m3-shared].
    #[arg(long, value_delimiter = ',', requires = "real")]
    placements: Option<Vec<String>>,

    /// With --real: lines of the corpus sort and xz read [default: 200000].
    #[arg(long, requires = "real")]
    corpus_lines: Option<u64>,

    /// With --real: guest vCPUs [default: 2].
    #[arg(long, requires = "real", value_parser = clap::value_parser!(u32).range(1..=8))]
    guest_cpus: Option<u32>,

    /// With --real: skip the runs without the plugin that measure its
    /// overhead.
    #[arg(long, requires = "real")]
    no_overhead: bool,

    /// With --real: where the recordings go [default: the kernel cache's
    /// banks-real folder].
    #[arg(long, value_name = "DIR", requires = "real")]
    traces: Option<PathBuf>,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum KernelArg {
    Copy,
    Scale,
    Add,
    Triad,
}

#[derive(Copy, Clone, Debug, ValueEnum)]
enum PolicyArg {
    Open,
    Closed,
}

impl BanksArgs {
    /// The study's options at the scale asked for, with what was given
    /// explicitly on top.
    fn options(&self) -> BanksOptions {
        let mut o = Banks::options(scale(self.quick));
        if let Some(m) = &self.machine {
            o.machine = m.clone();
        }
        if let Some(c) = &self.cores {
            o.cores = c.clone();
        }
        if let Some(k) = self.kernel {
            o.kernel = match k {
                KernelArg::Copy => Kernel::Copy,
                KernelArg::Scale => Kernel::Scale,
                KernelArg::Add => Kernel::Add,
                KernelArg::Triad => Kernel::Triad,
            };
        }
        if let Some(mib) = self.array_mib {
            o.array_bytes = mib << 20;
        }
        if let Some(p) = self.passes {
            o.passes = p;
        }
        if let Some(m) = self.mlp {
            o.mlp = m;
        }
        if let Some(p) = self.policy {
            o.policy = match p {
                PolicyArg::Open => PagePolicy::Open,
                PolicyArg::Closed => PagePolicy::Closed,
            };
        }
        if let Some(q) = self.queue {
            o.queue_depth = q as usize;
        }
        if let Some(s) = self.seed {
            o.seed = s;
        }
        if self.basic_model {
            o.basic_model = true;
        }
        if self.no_analyse {
            o.analyse = false;
        }
        o
    }
}

/// The real-program study's options from the arguments.
fn real_options(args: &BanksArgs, machine: &str) -> Result<nvmos_kernel::banks_real::Options> {
    use nvmos_kernel::banks_real::{Options, Placement, Program};
    use nvmos_kernel::kbuild::{self, BuildOptions};
    use nvmos_kernel::run::{Policy, RunOptions};
    let build = BuildOptions::new(nvmos_kernel::repo_kernel_dir());
    let traces = args
        .traces
        .clone()
        .unwrap_or_else(|| kbuild::default_cache().join("banks-real"));
    let run = RunOptions::new(
        build,
        nvmos_kernel::repo_workloads_dir(),
        Policy::Buddy,
        Vec::new(),
    );
    let mut o = Options::new(run, traces);
    o.machine = machine.to_owned();
    if let Some(p) = &args.programs {
        o.programs = p
            .iter()
            .map(|s| Program::parse(s))
            .collect::<Result<_, _>>()?;
    }
    if let Some(p) = &args.placements {
        o.placements = p
            .iter()
            .map(|s| Placement::parse(s))
            .collect::<Result<_, _>>()?;
    }
    if let Some(n) = args.corpus_lines {
        o.corpus_lines = n;
    }
    if let Some(c) = args.guest_cpus {
        o.run.cpus = c;
    }
    o.overhead = !args.no_overhead;
    Ok(o)
}

fn run_real(args: &BanksArgs) -> Result<()> {
    let mut options = args.options();
    if args.machine.is_none() {
        options.machine = "ddr4-2400".into();
    }
    let real_options = real_options(args, &options.machine)?;
    let synthetic = Banks::run(&options, &mut |_| {}).context("running the banks study")?;
    let real =
        nvmos_kernel::banks_real::banks_real(&real_options, &mut crate::kernel_cmd::progress)
            .context("running the banks study on real programs")?;
    if let Some(dir) = &args.out {
        let out = OutputDir::create(dir, &[])?;
        out.write_json("banks.json", &synthetic)?;
        out.write_json("banks-real.json", &real)?;
        out.write(
            "banks-real.html",
            nvmos_pages::banks_real::html(&real, &synthetic, &out.nav("banks-real.html"))?
                .as_bytes(),
        )?;
    }
    if args.json {
        print!("{}", nvmos_report::json_text(&real)?);
    } else {
        print!("{}", nvmos_pages::banks_real::text(&real)?);
    }
    Ok(())
}

pub fn run(args: BanksArgs) -> Result<()> {
    if args.real {
        return run_real(&args);
    }
    let options = args.options();
    let output = crate::with_progress(0, |p| Banks::run(&options, p));
    let output = output.context("running the banks study")?;
    if let Some(dir) = &args.out {
        let machine_file = std::path::Path::new(&options.machine);
        let out = OutputDir::create(dir, &[machine_file])?;
        out.write_json("banks.json", &output)?;
        out.write(
            "banks.html",
            html(&output, &out.nav("banks.html"))?.as_bytes(),
        )?;
    }
    if args.json {
        print!("{}", nvmos_report::json_text(&output)?);
    } else {
        print!("{}", text(&output)?);
    }
    Ok(())
}
