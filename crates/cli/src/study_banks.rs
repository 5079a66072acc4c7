//! `nvmos study banks`: seed 002's study (`nvmos_sim::banks_study`). This
//! file parses the arguments, draws the progress bar and prints or writes
//! what `nvmos_pages::banks` renders: the text, JSON and `banks.html`.

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

    /// Also write banks.html (charts) and banks.json into this folder.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
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

pub fn run(args: BanksArgs) -> Result<()> {
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
