//! `nvmos study levelling`: the OS allocator alone, hardware wear levelling
//! alone (beneath Linux's own placement) and both, on the traces; the study
//! itself is `nvmos_sim::levelling::study`, its text
//! `nvmos_pages::levelling`; this file parses and prints.

use std::path::PathBuf;

use anyhow::{bail, Result};
use nvmos_pages::levelling::render;
use nvmos_sim::levelling::study::{run as run_study, LevellingStudy, Options};
use nvmos_sim::levelling::Granularity;
use nvmos_sim::study::Study;

use crate::evaluate_cmd::StudyArgs;

/// `nvmos study levelling`.
#[derive(clap::Args, Debug)]
pub struct LevellingArgs {
    /// A trace, or a folder of traces: every trace in it is replayed; files that are not traces are skipped and listed.
    #[arg(long, default_value = "traces")]
    pub traces: PathBuf,
    /// Line endurance in writes [default: 1e5; 1e4 with --quick].
    #[arg(long)]
    pub endurance: Option<f64>,
    /// Start-Gap's gap-move interval ψ [default: the paper's 100].
    #[arg(long)]
    pub psi: Option<u64>,
    /// Lines per frame (1: page granularity; 64: 64-byte lines of 4 KiB frames) [default: 1].
    #[arg(long)]
    pub lines_per_frame: Option<u32>,
    /// Security Refresh: lines per region (a power of two) [default: 262144; 16384 with --quick].
    #[arg(long)]
    pub sr_region_lines: Option<u64>,
    /// Security Refresh: sub-regions per region (a power of two) [default: 512; 64 with --quick].
    #[arg(long)]
    pub sr_sub_regions: Option<u64>,
    /// Security Refresh: region writes between outer refresh steps; 0 for single-level [default: 128].
    #[arg(long)]
    pub sr_outer: Option<u64>,
    /// Security Refresh: sub-region writes between inner refresh steps [default: 64].
    #[arg(long)]
    pub sr_inner: Option<u64>,
    /// Leave out the kernel's own placement (as recorded).
    #[arg(long)]
    pub no_recorded: bool,
    /// Hot-page migration (write-weighted part, traces recorded with --writes): sampled writes to a block since it was placed before it is moved [default: 12].
    #[arg(long)]
    pub hot_threshold: Option<u32>,
    /// Hot-page migration: pages copied at most, as a percentage of the sampled writes [default: 5].
    #[arg(long)]
    pub hot_budget: Option<f64>,
    /// Hot-page migration: blocks asked of the allocator per move, the least worn kept [default: 4].
    #[arg(long)]
    pub hot_candidates: Option<u32>,
    /// Hot-page migration: milliseconds of trace time between passes [default: 100].
    #[arg(long)]
    pub hot_epoch_ms: Option<f64>,
    /// Write-weighted part: one pass of each trace only, no steady state (the trace repeated until the wear converges) [default with --quick].
    #[arg(long)]
    pub one_pass: bool,
    /// Write-weighted part: most repetitions of a trace before its steady state is given up (reported as not converged) [default: 256].
    #[arg(long)]
    pub steady_max_reps: Option<u32>,
    /// A small run with the same code paths (seconds): 256 MiB, E = 1e4.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub study: StudyArgs,
}

impl LevellingArgs {
    /// The study's options, and the files of the traces folder that are
    /// not traces (skipped, and listed in the output).
    fn options(&self) -> Result<(Options, Vec<PathBuf>)> {
        if self.study.horizon {
            bail!("--horizon: study levelling levels one pass of each trace, and runs the write-weighted part to its own steady state (--one-pass leaves that out); use evaluate --horizon for long horizons of the allocation wear");
        }
        let scale = crate::study::scale(self.quick);
        let mut o = LevellingStudy::options(scale);
        o.as_recorded = !self.no_recorded;
        if !self.study.allocators.is_empty() {
            o.allocators = self.study.kinds()?;
            o.written.allocators = o.allocators.clone();
        }
        let p = &mut o.written.policy;
        if let Some(v) = self.hot_threshold {
            p.threshold = v;
        }
        if let Some(v) = self.hot_budget {
            p.budget_pct = v;
        }
        if let Some(v) = self.hot_candidates {
            p.candidates = v;
        }
        if let Some(ms) = self.hot_epoch_ms {
            if !(ms.is_finite() && ms > 0.0 && ms * 1e6 <= u64::MAX as f64) {
                bail!("--hot-epoch-ms {ms}: need a positive number of milliseconds");
            }
            p.epoch_ns = ((ms * 1e6) as u64).max(1);
        }
        if let Err(e) = p.check() {
            bail!("{e}");
        }
        if self.one_pass {
            o.written.steady_state = false;
        }
        if let Some(n) = self.steady_max_reps {
            o.written.horizon.max_reps = n;
            o.written.horizon.min_reps = o.written.horizon.min_reps.min(n);
            if let Err(e) = o.written.horizon.check() {
                bail!("--steady-max-reps {n}: {e}");
            }
        }
        // Only what the user named overrides the scaled replay options.
        let replay = self.study.options()?;
        if replay.memory_frames.is_some() {
            o.replay.memory_frames = replay.memory_frames;
            o.written.memory_frames = replay.memory_frames;
        }
        o.replay.cpus = replay.cpus;
        o.replay.model = replay.model;
        if let Some(e) = self.endurance {
            if !(e.is_finite() && e >= 1.0) {
                bail!("--endurance {e}: need at least 1 write");
            }
            o.endurance = e;
        }
        if let Some(psi) = self.psi {
            o.start_gap.psi = psi;
        }
        match self.lines_per_frame {
            None | Some(1) => {}
            Some(0) => bail!("--lines-per-frame 0: a frame has at least one line"),
            Some(n) => o.granularity = Granularity::Line { lines_per_frame: n },
        }
        let sr = &mut o.security_refresh;
        if let Some(v) = self.sr_region_lines {
            sr.region_lines = v;
        }
        if let Some(v) = self.sr_sub_regions {
            sr.sub_regions = v;
        }
        if let Some(v) = self.sr_outer {
            sr.outer_interval = (v > 0).then_some(v);
        }
        if let Some(v) = self.sr_inner {
            sr.inner_interval = v;
        }
        // The folder last, so bad arguments are named before a missing
        // folder is.
        let folder = nvmos_trace::scan_trace_folder(&self.traces)?;
        if folder.traces.is_empty() {
            bail!("no traces in {}", self.traces.display());
        }
        o.traces = folder.traces;
        Ok((o, folder.not_traces))
    }
}

/// Run it.
pub fn run(args: LevellingArgs) -> Result<()> {
    let (options, not_traces) = args.options()?;
    let mut out = crate::with_progress(0, |p| run_study(&options, p))?;
    out.not_traces = not_traces.iter().map(|p| p.display().to_string()).collect();
    if args.study.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", render(&out));
    }
    Ok(())
}
