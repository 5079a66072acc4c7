//! `nvmos evaluate` and `nvmos replay`: real traces through every allocator.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use nvmos_sim::{AllocatorKind, Evaluation, StudyOptions, StudyRow, WriteModel};

use nvmos_report::columns::{Column, Columns};

use crate::report;

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
    report::write(&args.out, &evaluation, &inputs)?;
    if args.study.json {
        println!("{}", serde_json::to_string_pretty(&evaluation)?);
    } else {
        print_tables(&evaluation)?;
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
        print_tables(&evaluation)?;
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
    let bar = crate::progress_bar(0);
    let evaluation = nvmos_sim::evaluate(&options, &mut |p| crate::show(&bar, &p));
    bar.finish_and_clear();
    Ok(evaluation?)
}

fn print_tables(evaluation: &Evaluation) -> Result<()> {
    for trace in &evaluation.traces {
        println!(
            "\n{} — {} events, {:.2} s, {} frames, {} CPUs{}",
            trace.trace,
            trace.events,
            trace.duration_ns as f64 / 1e9,
            trace.rows.first().map_or(0, |r| r.wear.frames),
            trace.machine.cpus,
            if trace.inferred {
                " (inferred from the trace: highest pfn + block, highest CPU + 1)"
            } else {
                ""
            }
        );
        if let Some(first) = trace.rows.first() {
            let a = &first.stats.accounting;
            let unusual: Vec<String> = a
                .rows()
                .iter()
                .skip(1)
                .filter(|(_, n)| *n > 0)
                .map(|(name, n)| format!("{name} {n}"))
                .collect();
            println!(
                "{} events read{}",
                a.events_read,
                if unusual.is_empty() {
                    String::new()
                } else {
                    format!("; {}", unusual.join(", "))
                }
            );
        }
        let mut flags = Vec::new();
        for row in &trace.rows {
            if let Some(flag) = row.stats.flag() {
                flags.push(format!(
                    "  !! {}: {flag}: its wear figures are not the trace's",
                    row.allocator
                ));
            }
        }
        print!(
            "{}",
            report::wear_columns(false).text(&report::wear_rows_of(trace))?
        );
        for flag in flags {
            println!("{flag}");
        }
        print_write_table(trace)?;
    }
    Ok(())
}

/// Write-weighted wear beside the table above, for traces recorded with
/// `record --writes`: each frame's sampled writes (one per sample in which
/// it was written) under each row's placement, and how they correlate per
/// frame with the allocation-only counts.
fn print_write_table(trace: &nvmos_sim::evaluate::TraceStudy) -> Result<()> {
    let Some(first) = trace.rows.first().filter(|r| r.writes.is_some()) else {
        return Ok(());
    };
    let a = &first.stats.accounting;
    println!(
        "sampled writes: {} ({} to no live block: frames allocated before the recording)",
        a.write_samples, a.writes_not_live
    );
    let w = |h: &str, p: &str| Column::number(h, format!("writes.{p}"));
    let table = Columns::new([
        Column::text("write-weighted", "allocator"),
        Column::number("attributed", "stats.writes.attributed"),
        Column::number("refused", "stats.writes.of_refused"),
        w("max", "wear.max"),
        w("max/mean", "wear.max_over_mean"),
        w("life %", "wear.lifetime_pct_of_ideal"),
        w("years@1e7", "wear.lifetime_years.1"),
        w("pearson", "correlation.pearson"),
        w("spearman", "correlation.spearman"),
        w("frames", "correlation.frames"),
    ]);
    let rows: Vec<&StudyRow> = trace.rows.iter().filter(|r| r.writes.is_some()).collect();
    print!("{}", table.text(&rows)?);
    Ok(())
}
