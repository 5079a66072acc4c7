//! `nvmos replay --horizon` and `nvmos evaluate --horizon`: wear over a
//! device's lifetime (`nvmos_sim::horizon`). The library runs the study;
//! this parses, shows progress and prints or writes what
//! `nvmos_pages::horizon` renders.

use std::path::{Path, PathBuf};

use anyhow::Result;
use nvmos_pages::horizon::{csv, table};
use nvmos_sim::horizon::{self, HorizonOptions, Progress};

use crate::evaluate_cmd::StudyArgs;

/// Most repetitions `--horizon-max-reps` accepts.
const MAX_REPS: u32 = 1 << 20;

/// Runs the long-horizon study on `files`; `out`, when given, receives
/// `horizon.json` and `horizon.csv` (written whole or not at all).
pub fn run(files: &[PathBuf], args: &StudyArgs, out: Option<&Path>) -> Result<()> {
    // The registry names and the replay options, checked as evaluate checks them.
    let allocators = args.kinds()?;
    let replay = args.options()?;
    anyhow::ensure!(
        (8..=MAX_REPS).contains(&args.horizon_max_reps),
        "--horizon-max-reps {} is not in 8..={MAX_REPS}",
        args.horizon_max_reps
    );
    let opts = horizon::Options {
        traces: files.to_vec(),
        allocators,
        as_recorded: true,
        memory_frames: replay.memory_frames,
        cpus: replay.cpus,
        model: replay.model,
        horizon: HorizonOptions {
            max_reps: args.horizon_max_reps,
            ..HorizonOptions::default()
        },
        threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(8)),
    };
    let bar = crate::progress_bar((files.len() * (opts.allocators.len() + 1)) as u64);
    let started = std::time::Instant::now();
    let study = horizon::run(&opts, &mut |p| match p {
        Progress::Trace { name, events } => bar.set_message(format!("{name}: {events} events")),
        Progress::Row { .. } => bar.inc(1),
    })?;
    bar.finish_and_clear();
    let elapsed = started.elapsed();
    if let Some(dir) = out {
        let dir = nvmos_report::OutputDir::create(dir, &[])?;
        dir.write_json("horizon.json", &study)?;
        dir.write("horizon.csv", csv(&study)?.as_bytes())?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&study)?);
    } else {
        print!("{}", table(&study)?);
        println!("{:.1} s", elapsed.as_secs_f64());
    }
    Ok(())
}
