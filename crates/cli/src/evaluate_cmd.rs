//! `nvmos evaluate` and `nvmos replay`: real traces through every allocator.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use nvmos_pages::evaluate as pages;
use nvmos_report::OutputDir;
use nvmos_sim::{AllocatorKind, Evaluation, StudyOptions, WriteModel};

/// What every trace study takes.
#[derive(clap::Args, Debug, Clone)]
pub struct StudyArgs {
    /// Allocators to replay through, by registry name or alias (buddy, LBS-1, LBS-31, linux-pcp, iBuddy, LiS-1, LiS-31, M3, M3-part, array-bank, list-bank, adaptive, adaptive-migrate); all when omitted.
    #[arg(long = "alloc", value_delimiter = ',')]
    pub allocators: Vec<String>,
    /// Memory the allocators manage, as one zone (e.g. 4GiB, 512MiB or a frame count); default: the recorded machine's zones.
    #[arg(long)]
    pub memory: Option<String>,
    /// CPUs the allocators serve; default: the recorded machine's.
    #[arg(long)]
    pub cpus: Option<u32>,
    /// Full-page writes per allocated frame per allocation (the write model).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub writes_per_alloc: u32,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Long-horizon mode: replay each trace again and again, allocator
    /// state carried over, until every allocator's wear converges; report
    /// years to the first failed frame and the fraction of the ideal
    /// lifetime.
    #[arg(long)]
    pub horizon: bool,
    /// With --horizon: most repetitions per allocator before giving up
    /// (reported as not converged).
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub horizon_max_reps: u32,
}

/// `nvmos evaluate`.
#[derive(clap::Args, Debug)]
pub struct EvaluateArgs {
    /// Folder of traces (.nvt, ftrace or perf text); every file in it is replayed.
    #[arg(long, default_value = "traces")]
    pub traces: PathBuf,
    /// Folder the report is written to: results.json, CSV files, index.html.
    #[arg(long, default_value = "nvmos-report")]
    pub out: PathBuf,
    /// Rows replayed at once (threads); default: RAYON_NUM_THREADS, else every core. The results do not depend on it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
    #[command(flatten)]
    pub study: StudyArgs,
}

/// `nvmos replay`.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The trace to replay.
    #[arg(long)]
    pub trace: PathBuf,
    #[command(flatten)]
    pub study: StudyArgs,
}

impl StudyArgs {
    pub(crate) fn options(&self) -> Result<StudyOptions> {
        let memory_frames = self
            .memory
            .as_deref()
            .map(|m| {
                crate::units::parse_memory(m).map_err(|e| anyhow::anyhow!("--memory {m:?}: {e}"))
            })
            .transpose()?;
        if self.cpus == Some(0) {
            bail!("--cpus 0: an allocator serves at least one CPU");
        }
        Ok(StudyOptions {
            memory_frames,
            cpus: self.cpus,
            model: WriteModel {
                writes_per_alloc: self.writes_per_alloc,
            },
            ..StudyOptions::default()
        })
    }

    pub(crate) fn kinds(&self) -> Result<Vec<AllocatorKind>> {
        if self.allocators.is_empty() {
            return Ok(AllocatorKind::ALL.to_vec());
        }
        self.allocators
            .iter()
            .map(|name| name.parse().map_err(anyhow::Error::msg))
            .collect()
    }
}

/// Run `nvmos evaluate`.
pub fn evaluate(args: EvaluateArgs) -> Result<()> {
    let files = trace_files(&args.traces)?;
    if args.study.horizon {
        return crate::horizon_cmd::run(&files, &args.study, Some(&args.out));
    }
    let evaluation = study(&files, &args.study, args.jobs)?;
    let inputs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    // Each file whole or not at all, never over one of the traces.
    let out = OutputDir::create(&args.out, &inputs)?;
    out.write_json("results.json", &evaluation)?;
    out.write("summary.csv", pages::summary_csv(&evaluation)?.as_bytes())?;
    out.write("wear_cdf.csv", pages::cdf_csv(&evaluation)?.as_bytes())?;
    let nav = out.nav("index.html");
    out.write("index.html", pages::html(&evaluation, &nav)?.as_bytes())?;
    if args.study.json {
        println!("{}", serde_json::to_string_pretty(&evaluation)?);
    } else {
        print!("{}", pages::text(&evaluation)?);
        println!("report: {}", args.out.join("index.html").display());
    }
    Ok(())
}

/// Run `nvmos replay`.
pub fn replay(args: ReplayArgs) -> Result<()> {
    if args.study.horizon {
        return crate::horizon_cmd::run(&[args.trace], &args.study, None);
    }
    let evaluation = study(&[args.trace], &args.study, None)?;
    if args.study.json {
        println!("{}", serde_json::to_string_pretty(&evaluation)?);
    } else {
        print!("{}", pages::text(&evaluation)?);
    }
    Ok(())
}

fn trace_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let files = nvmos_trace::trace_files_in(dir)?;
    if files.is_empty() {
        bail!("no traces in {}", dir.display());
    }
    Ok(files)
}

fn study(files: &[PathBuf], args: &StudyArgs, jobs: Option<u32>) -> Result<Evaluation> {
    let options = nvmos_sim::evaluate::Options {
        traces: files.to_vec(),
        allocators: args.kinds()?,
        study: args.options()?,
        jobs: jobs.map(|n| n as usize),
    };
    let evaluation = crate::with_progress(0, |p| nvmos_sim::evaluate(&options, p));
    Ok(evaluation?)
}
