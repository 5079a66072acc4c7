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
    /// Memory the allocators manage, as one zone, with its unit: 4GiB, 512MiB (binary), 4GB (decimal, rounded down to whole frames) or 4096frames; default: the recorded machine's zones.
    #[arg(long)]
    pub memory: Option<String>,
    /// CPUs the allocators serve; default: the recorded machine's.
    #[arg(long)]
    pub cpus: Option<u32>,
    /// Full-page writes per allocated frame per allocation (the write model), 1 to 256.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=nvmos_sim::WriteModel::MAX_WRITES_PER_ALLOC as i64))]
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
    /// A trace, or a folder of traces (.nvt, ftrace or perf text): every trace in it is replayed; files in it that are not traces are skipped and listed.
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
    /// The trace to replay (also as `--trace`).
    #[arg(
        value_name = "TRACE",
        required_unless_present = "trace_flag",
        conflicts_with = "trace_flag"
    )]
    pub trace: Option<PathBuf>,
    /// The trace to replay.
    #[arg(long = "trace", value_name = "TRACE")]
    pub trace_flag: Option<PathBuf>,
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
    let folder = trace_files(&args.traces)?;
    let files = folder.traces;
    if args.study.horizon {
        return crate::horizon_cmd::run(&files, &args.study, Some(&args.out));
    }
    let inputs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    // Each file whole or not at all, never over one of the traces; the
    // folder is held from before the run, so a second run into it is
    // refused at once rather than mixing its files with this one's.
    let out = OutputDir::create(&args.out, &inputs)?;
    let mut evaluation = study(&files, &args.study, args.jobs)?;
    evaluation.not_traces = folder
        .not_traces
        .iter()
        .map(|p| p.display().to_string())
        .collect();
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
    let trace = args
        .trace
        .or(args.trace_flag)
        .expect("clap requires a trace");
    if args.study.horizon {
        return crate::horizon_cmd::run(&[trace], &args.study, None);
    }
    let evaluation = study(&[trace], &args.study, None)?;
    if args.study.json {
        println!("{}", serde_json::to_string_pretty(&evaluation)?);
    } else {
        print!("{}", pages::text(&evaluation)?);
    }
    Ok(())
}

/// A single trace, or a folder's traces with its other files set apart.
fn trace_files(path: &Path) -> Result<nvmos_trace::TraceFolder> {
    let folder = nvmos_trace::scan_trace_folder(path)?;
    if folder.traces.is_empty() {
        if folder.not_traces.is_empty() {
            bail!("no traces in {}", path.display());
        }
        bail!(
            "no traces in {}: its {} files are none of the trace formats (.nvt, ftrace or perf text)",
            path.display(),
            folder.not_traces.len()
        );
    }
    Ok(folder)
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
