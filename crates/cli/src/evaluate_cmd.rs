//! `nvmos evaluate` and `nvmos replay`: real traces through every allocator.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use nvmos_frames::sync::SpinYield;
use nvmos_sim::{
    study_allocator, study_as_recorded, AllocatorKind, Evaluation, StudyOptions, StudyRow,
    TraceStudy, WriteModel,
};
use nvmos_trace::MachineInfo;

use crate::report::{self, format_value};

/// What every trace study takes.
#[derive(clap::Args, Debug, Clone)]
pub struct StudyArgs {
    /// Allocators to replay through, by name (buddy, LBS-1, LBS-31, linux-pcp, iBuddy, LiS-1, LiS-31); all when omitted.
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
            .map(|name| {
                AllocatorKind::parse(name).with_context(|| {
                    let known: Vec<_> = AllocatorKind::ALL.iter().map(|k| k.name()).collect();
                    format!("unknown allocator {name:?}; known: {}", known.join(", "))
                })
            })
            .collect()
    }
}

/// Run `nvmos evaluate`.
pub fn evaluate(args: EvaluateArgs) -> Result<()> {
    let files = trace_files(&args.traces)?;
    let evaluation = study(&files, &args.study)?;
    report::write(&args.out, &evaluation)?;
    if args.study.json {
        println!("{}", serde_json::to_string_pretty(&evaluation)?);
    } else {
        print_tables(&evaluation);
        println!("report: {}", args.out.join("index.html").display());
    }
    Ok(())
}

/// Run `nvmos replay`.
pub fn replay(args: ReplayArgs) -> Result<()> {
    let evaluation = study(&[args.trace], &args.study)?;
    if args.study.json {
        println!("{}", serde_json::to_string_pretty(&evaluation)?);
    } else {
        print_tables(&evaluation);
    }
    Ok(())
}

/// Every trace file in `dir`, by name; README and dot files left out.
/// The trace files in `dir` (not hidden, not Markdown), sorted; possibly
/// none. Subfolders (such as `traces/swap/`) are not descended into.
pub(crate) fn trace_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("reading the trace folder {}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("reading the trace folder {}", dir.display()))?
            .path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_file() && !name.starts_with('.') && !name.ends_with(".md") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

fn trace_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let files = trace_files_in(dir)?;
    if files.is_empty() {
        bail!("no traces in {}", dir.display());
    }
    Ok(files)
}

fn study(files: &[PathBuf], args: &StudyArgs) -> Result<Evaluation> {
    let options = args.options()?;
    let kinds = args.kinds()?;
    let progress = crate::progress_bar((files.len() * (kinds.len() + 1)) as u64);
    let mut traces = Vec::new();
    for path in files {
        let source =
            nvmos_trace::open(path).with_context(|| format!("opening {}", path.display()))?;
        let machine = source
            .header()
            .and_then(|h| h.machine.clone())
            .or_else(|| options.memory_frames.map(|frames| single_zone_machine(frames, args.cpus)))
            .with_context(|| {
                format!(
                    "{} does not say which machine it was recorded on (a text trace?): give --memory",
                    path.display()
                )
            })?;
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .map(|s| s.trim_end_matches(".nvt").to_string())
            .unwrap_or_else(|| path.display().to_string());
        let open =
            || nvmos_trace::open(path).with_context(|| format!("opening {}", path.display()));
        progress.set_message(format!("{name}: {}", nvmos_sim::AS_RECORDED));
        let recorded = study_as_recorded(&machine, open()?, &options)
            .with_context(|| format!("{}: counting the recorded placement", path.display()))?;
        progress.inc(1);
        let mut rows = vec![recorded];
        for &kind in &kinds {
            progress.set_message(format!("{name}: {kind}"));
            let row = study_allocator::<SpinYield, _, _>(kind, &machine, open()?, &options)
                .with_context(|| format!("{}: replaying through {kind}", path.display()))?;
            rows.push(row);
            progress.inc(1);
        }
        traces.push(TraceStudy {
            trace: name,
            source: path.display().to_string(),
            events: rows[0].stats.events,
            duration_ns: rows[0].stats.trace_ns,
            machine,
            rows,
        });
    }
    progress.finish_and_clear();
    Ok(Evaluation { options, traces })
}

/// A machine of one zone, for text traces that do not describe theirs.
fn single_zone_machine(frames: u64, cpus: Option<u32>) -> MachineInfo {
    MachineInfo {
        page_size: 4096,
        memory_bytes: frames * 4096,
        cpus: cpus.unwrap_or(1),
        zones: vec![nvmos_trace::ZoneInfo {
            node: 0,
            name: "Normal".into(),
            start_pfn: 0,
            spanned: frames,
            present: frames,
        }],
        kernel: String::new(),
        ram: Vec::new(),
    }
}

fn print_tables(evaluation: &Evaluation) {
    for trace in &evaluation.traces {
        println!(
            "\n{} — {} events, {:.2} s, {} frames",
            trace.trace,
            trace.events,
            trace.duration_ns as f64 / 1e9,
            trace.rows.first().map_or(0, |r| r.wear.frames)
        );
        println!(
            "{:<20} {:>9} {:>8} {:>9} {:>10} {:>9} {:>7} {:>9} {:>11} {:>9}",
            "allocator",
            "allocs",
            "failures",
            "max",
            "max/mean",
            "max/touch",
            "gini",
            "life %",
            "years@1e7",
            "ns/event"
        );
        for row in &trace.rows {
            print_row(row);
        }
    }
}

fn print_row(row: &StudyRow) {
    println!(
        "{:<20} {:>9} {:>8} {:>9} {:>10} {:>9} {:>7} {:>9} {:>11} {:>9}",
        row.allocator,
        row.stats.allocs,
        row.stats.alloc_failures,
        row.wear.max,
        format_value(row.wear.max_over_mean),
        format_value(row.wear.max_over_touched_mean),
        format_value(row.wear.gini),
        format_value(row.wear.lifetime_pct_of_ideal),
        format_value(row.wear.lifetime_years[1]),
        format_value(row.stats.ns_per_event()),
    );
}
