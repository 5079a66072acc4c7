//! `nvmos sweep GRID.toml`: a design-space sweep. The sweep engine is the
//! Python package's (`nvmos._sweep`: a process pool here, or Ray tasks on
//! a cluster, results in Parquet), because Ray and Arrow live in Python;
//! this command runs `python3 -m nvmos sweep ...` with the same arguments
//! and passes its exit status on.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// `nvmos sweep`.
#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// The grid: a TOML file naming the study and its axes (traces or
    /// trace folders, allocators, memory sizes, CPU counts, endurance
    /// values, memsys presets, study options).
    pub grid: PathBuf,
    /// Output folder: sweep.parquet and sweep.html [default: the grid's
    /// `output`, else sweep-out].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Local worker processes [default: every core]; with --ray, cells in
    /// flight at most.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub workers: Option<u32>,
    /// Run each cell as a Ray task on this cluster: `auto` (the cluster
    /// this machine belongs to) or its address (HOST:PORT).
    #[arg(long, value_name = "auto|ADDRESS")]
    pub ray: Option<String>,
    /// Run every cell, even those already in the output.
    #[arg(long)]
    pub no_resume: bool,
    /// Extra attempts for a cell whose worker failed.
    #[arg(long, default_value_t = 2)]
    pub retries: u32,
    /// With --ray: cells of one trace per task (fewer tasks and trace
    /// fetches, a coarser unit of retry).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch: u32,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// The interpreter: `$NVMOS_PYTHON`, else `python3`.
fn python() -> OsString {
    std::env::var_os("NVMOS_PYTHON").unwrap_or_else(|| "python3".into())
}

/// Run `nvmos sweep`.
pub fn run(args: SweepArgs) -> Result<()> {
    let python = python();
    let shown = python.to_string_lossy().into_owned();
    // Tell a missing package apart from a failing sweep.
    let probe = Command::new(&python)
        .args(["-c", "import nvmos._sweep"])
        .output()
        .with_context(|| {
            format!("running {shown} (the sweep runs in Python; set NVMOS_PYTHON to choose the interpreter)")
        })?;
    if !probe.status.success() {
        bail!(
            "the Python package nvmos is not installed for {shown}: install it with `pip install .` \
             in the nvmos checkout (or set NVMOS_PYTHON to an interpreter that has it)\n{}",
            String::from_utf8_lossy(&probe.stderr).trim_end()
        );
    }
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "nvmos", "sweep"]).arg(&args.grid);
    if let Some(out) = &args.out {
        cmd.arg("--out").arg(out);
    }
    if let Some(n) = args.workers {
        cmd.arg("--workers").arg(n.to_string());
    }
    if let Some(address) = &args.ray {
        cmd.arg("--ray").arg(address);
    }
    if args.no_resume {
        cmd.arg("--no-resume");
    }
    if args.quiet {
        cmd.arg("--quiet");
    }
    cmd.arg("--retries").arg(args.retries.to_string());
    cmd.arg("--batch").arg(args.batch.to_string());
    let status = cmd
        .status()
        .with_context(|| format!("running {shown} -m nvmos sweep"))?;
    if !status.success() {
        bail!("the sweep failed ({status}); its messages are above");
    }
    Ok(())
}
