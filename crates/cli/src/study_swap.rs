//! `nvmos study swap` (seed 003): SCM as a fast paging device. The study
//! is `nvmos_sim::swap_study`; this file parses the arguments, draws the
//! progress bar, prints the seed's tables and writes `swap.html` (both from
//! `nvmos_pages::swap`) and `swap.json` into the report folder.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use nvmos_pages::swap::{html, tables};
use nvmos_report::OutputDir;
use nvmos_sim::study::Study;
use nvmos_sim::swap_study::{Swap, SwapStudyOptions};

use crate::study::scale;

#[derive(Args, Debug)]
pub struct SwapArgs {
    /// Folder with recorded swap traces (`*.swt.zst`) and lackey traces
    /// (`*.lackey.zst`) [default: traces/swap].
    #[arg(long, value_name = "DIR")]
    pub traces: Option<PathBuf>,

    /// Report folder: `swap.html` and `swap.json` are written there.
    #[arg(long, value_name = "DIR", default_value = "nvmos-report")]
    pub out: PathBuf,

    /// PC scenario size relative to the seed's 1 GB machine [default: 0.25,
    /// 1/16 with --quick].
    #[arg(long, value_name = "X")]
    pub pc_scale: Option<f64>,

    /// Aging rounds of the aged PC scenario [default: 4, 2 with --quick].
    #[arg(long, value_name = "N")]
    pub aging_rounds: Option<u32>,

    /// Congestion control off in the workload runs (the sweep runs both).
    #[arg(long)]
    pub no_congestion: bool,

    /// `congestion_wait` timeout, ms [default: 100].
    #[arg(long, value_name = "MS")]
    pub congestion_timeout_ms: Option<f64>,

    /// Read-ahead of 2^N pages [default: 3].
    #[arg(long, value_name = "N")]
    pub page_cluster: Option<u32>,

    /// VMA-based read-ahead instead of the swap-slot window.
    #[arg(long)]
    pub vma_readahead: bool,

    /// Swap slot policy: ssd or hdd [default: ssd].
    #[arg(long, value_name = "POLICY")]
    pub policy: Option<nvmos_swap::SlotPolicy>,

    /// Smaller and faster (tests); explicit options still win.
    #[arg(long)]
    pub quick: bool,

    /// Print JSON on stdout instead of the tables.
    #[arg(long)]
    pub json: bool,
}

impl SwapArgs {
    /// The study's options at the scale asked for, with what was given
    /// explicitly on top.
    fn options(&self) -> Result<SwapStudyOptions> {
        let mut opts = Swap::options(scale(self.quick));
        if let Some(t) = &self.traces {
            opts.traces = t.clone();
        }
        if let Some(s) = self.pc_scale {
            opts.pc_scale = s;
        }
        if let Some(n) = self.aging_rounds {
            opts.aging_rounds = n;
        }
        if self.no_congestion {
            opts.config.congestion.enabled = false;
        }
        if let Some(ms) = self.congestion_timeout_ms {
            anyhow::ensure!(
                ms.is_finite() && ms >= 0.0,
                "--congestion-timeout-ms must be zero or more"
            );
            opts.config.congestion.timeout_ns = (ms * 1e6) as u64;
        }
        if let Some(n) = self.page_cluster {
            opts.config.page_cluster = n;
        }
        if self.vma_readahead {
            opts.config.vma_readahead = true;
        }
        if let Some(p) = self.policy {
            opts.config.policy = p;
        }
        Ok(opts)
    }
}

pub fn run(args: SwapArgs) -> Result<()> {
    let opts = args.options()?;
    let study = crate::with_progress(0, |p| Swap::run(&opts, p));
    let study = study.context("running the swap study")?;
    let out = OutputDir::create(&args.out, &[])?;
    out.write_json("swap.json", &study)?;
    let page = out.write("swap.html", html(&study, &out.nav("swap.html"))?.as_bytes())?;
    if args.json {
        print!("{}", nvmos_report::json_text(&study)?);
    } else {
        print!("{}", tables(&study));
        println!("\nreport: {}", page.display());
    }
    Ok(())
}
