//! `nvmos study levelling`: the OS allocator alone, hardware wear levelling
//! alone (beneath Linux's own placement) and both, on the traces.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use nvmos_frames::sync::SpinYield;
use nvmos_sim::levelling::{combine, Combination, Granularity, Scheme, StartGap};
use nvmos_sim::AllocatorKind;

use crate::evaluate_cmd::StudyArgs;

/// `nvmos study levelling`.
#[derive(clap::Args, Debug)]
pub struct LevellingArgs {
    /// Folder of traces; every file in it is replayed.
    #[arg(long, default_value = "traces")]
    pub traces: PathBuf,
    /// Line endurance in writes (PCM: 1e6 to 1e8).
    #[arg(long, default_value_t = 1e7)]
    pub endurance: f64,
    /// Start-Gap's gap-move interval ψ (the paper's 100).
    #[arg(long, default_value_t = 100)]
    pub psi: u64,
    /// Lines per frame (1: page granularity; 64: 64-byte lines of 4 KiB frames).
    #[arg(long, default_value_t = 1)]
    pub lines_per_frame: u32,
    #[command(flatten)]
    pub study: StudyArgs,
}

/// Run it.
pub fn run(args: LevellingArgs) -> Result<()> {
    if !(args.endurance.is_finite() && args.endurance >= 1.0) {
        bail!("--endurance {}: need at least 1 write", args.endurance);
    }
    let granularity = match args.lines_per_frame {
        0 => bail!("--lines-per-frame 0: a frame has at least one line"),
        1 => Granularity::Page,
        n => Granularity::Line { lines_per_frame: n },
    };
    let sg = StartGap {
        psi: args.psi,
        ..StartGap::PAPER
    };
    let schemes = [
        Scheme::None,
        Scheme::StartGap(StartGap {
            randomise: false,
            ..sg
        }),
        Scheme::StartGap(sg),
    ];
    let options = args.study.options()?;
    let mut kinds: Vec<Option<AllocatorKind>> = vec![None];
    kinds.extend(args.study.kinds()?.into_iter().map(Some));
    let files = crate::evaluate_cmd::trace_files_in(&args.traces)?;
    if files.is_empty() {
        bail!("no traces in {}", args.traces.display());
    }
    let mut out: Vec<(String, Vec<Combination>)> = Vec::new();
    for path in &files {
        let machine = nvmos_trace::open(path)
            .with_context(|| format!("opening {}", path.display()))?
            .header()
            .and_then(|h| h.machine.clone())
            .with_context(|| {
                format!(
                    "{} does not say which machine it was recorded on",
                    path.display()
                )
            })?;
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("?")
            .to_string();
        let mut rows = Vec::new();
        for &kind in &kinds {
            let events =
                nvmos_trace::open(path).with_context(|| format!("opening {}", path.display()))?;
            let row = combine::<SpinYield, _, _>(
                kind,
                &machine,
                events,
                &options,
                &schemes,
                granularity,
                args.endurance,
            )
            .with_context(|| {
                format!(
                    "{}: {}",
                    path.display(),
                    kind.map_or(nvmos_sim::AS_RECORDED, |k| k.name())
                )
            })?;
            rows.push(row);
        }
        out.push((name, rows));
    }
    if args.study.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "lifetime, % of ideal (N x E), E = {:e} writes, {}; columns: hardware levelling beneath the placement",
        args.endurance,
        match granularity {
            Granularity::Page => "page granularity".to_string(),
            Granularity::Line { lines_per_frame } => format!("{lines_per_frame} lines per frame"),
        }
    );
    for (trace, rows) in &out {
        println!("\n{trace}");
        println!(
            "  {:<22} {:>10} {:>14} {:>22} {:>10}",
            "placement", "none", "start-gap", "randomised start-gap", "failed"
        );
        for row in rows {
            let pct = |i: usize| row.levelled[i].lifetime_pct_of_ideal;
            println!(
                "  {:<22} {:>10.3} {:>14.3} {:>22.3} {:>10}",
                row.allocator,
                pct(0),
                pct(1),
                pct(2),
                row.stats.alloc_failures
            );
        }
    }
    Ok(())
}
