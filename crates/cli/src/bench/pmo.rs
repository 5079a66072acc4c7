//! `nvmos bench pmo`: arguments, progress, and writing the report page
//! (`pmo.html` from `nvmos_pages::bench::pmo`) and `pmo.json` for
//! `nvmos_pmo_bench::pmo` (seed 001's evaluation).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use nvmos_pages::bench::pmo::{page, table};
use nvmos_pmo::attach::predict::PredictorKind;
use nvmos_pmo_bench::kernels::Workload;
use nvmos_pmo_bench::pmo::{self, PmoBench, PmoBenchOptions};
use nvmos_report::OutputDir;
use nvmos_sim::study::Study;

#[derive(Args, Debug)]
pub struct PmoArgs {
    /// Workloads, comma-separated: conv2d, lu, gauss, matmul, fileserver,
    /// webserver, webproxy, varmail [default: all].
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    workloads: Option<Vec<Workload>>,

    /// Predictors run at every depth: stream, stride, markov, adaptive
    /// [default: all]. The adaptive one at the largest depth is the design
    /// held to "prediction never hurts".
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    predictors: Option<Vec<PredictorKind>>,

    /// Prediction depths (0: DRAM cache, no prediction) [default:
    /// 0,1,2,4,8,16,32,64].
    #[arg(long, value_name = "N,...", value_delimiter = ',',
          value_parser = clap::value_parser!(u16).range(0..=1024))]
    depths: Option<Vec<u16>>,

    /// Runs per cell, taken in rounds over every mode in turn; the median is
    /// kept [default: 3, 1 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,

    /// Pages of the object in the first-touch measurement [default: 4096].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=262_144))]
    touch_pages: Option<u32>,

    /// Smaller problems and one round (sizes are printed).
    #[arg(long)]
    quick: bool,

    /// Leave out the cells without integrity verification (plain objects
    /// without hashes stay: the baseline of every speed-up).
    #[arg(long)]
    no_iv: bool,

    /// Problem sizes, NAME=N,...: conv2d=IMAGES, lu=N, gauss=N, matmul=N,
    /// fileserver=FILES [default: the full or --quick sizes].
    #[arg(long, value_name = "NAME=N,...", value_delimiter = ',')]
    size: Vec<String>,

    /// Fault handler: spin this long before sleeping, µs [default: 0].
    #[arg(long, value_name = "US")]
    spin_us: Option<u32>,
    /// Prediction workers (decrypting threads) [default: 1].
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// Most pages a worker installs per UFFDIO_COPY [default: 16].
    #[arg(long, value_name = "PAGES")]
    run_pages: Option<usize>,
    /// Predicted pages the handler installs with a faulting page [default: 0].
    #[arg(long, value_name = "PAGES")]
    fault_around: Option<usize>,

    /// Seed for the data and the file server's operations [default: 1].
    #[arg(long)]
    seed: Option<u64>,

    /// Print the results as JSON instead of tables.
    #[arg(long)]
    json: bool,

    /// Folder for the report page (pmo.html) and its data (pmo.json).
    #[arg(long, default_value = "nvmos-report")]
    out: PathBuf,
}

impl PmoArgs {
    fn options(&self) -> Result<PmoBenchOptions> {
        let mut o = PmoBench::options(crate::study::scale(self.quick));
        for spec in &self.size {
            o.sizes.set(spec).map_err(anyhow::Error::msg)?;
        }
        let t = &mut o.tuning;
        t.spin_us = self.spin_us.unwrap_or(t.spin_us);
        t.workers = self.workers.unwrap_or(t.workers);
        t.run_pages = self.run_pages.unwrap_or(t.run_pages);
        t.fault_around = self.fault_around.unwrap_or(t.fault_around);
        if let Some(v) = &self.workloads {
            o.workloads = v.clone();
        }
        if let Some(v) = &self.predictors {
            o.predictors = v.clone();
        }
        if let Some(v) = &self.depths {
            o.depths = v.iter().map(|&d| usize::from(d)).collect();
        }
        if let Some(v) = self.rounds {
            o.rounds = v;
        }
        if let Some(v) = self.touch_pages {
            o.touch_pages = v as usize;
        }
        if let Some(v) = self.seed {
            o.seed = v;
        }
        if self.no_iv {
            o.iv = false;
        }
        Ok(o)
    }
}

/// Run, print, and write the report page.
pub fn main(args: &PmoArgs) -> Result<()> {
    let options = args.options()?;
    options.check()?;
    let result = crate::with_progress(options.steps(), |p| pmo::run(&options, p));
    let result = result?;
    let dir = OutputDir::create(&args.out, &[])?;
    let html = page(&result, args.quick, &dir.nav("pmo.html"))?;
    dir.write_json("pmo.json", &result)?;
    let path = dir.write("pmo.html", html.as_bytes())?;
    if args.json {
        print!("{}", nvmos_report::json_text(&result)?);
    } else {
        print!("{}", table(&result)?);
        println!("report: {}", path.display());
    }
    Ok(())
}
