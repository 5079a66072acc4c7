//! `nvmos`: the command-line tool, thin. Subcommands parse their arguments
//! (clap) into a study's options, show its progress, and print or write
//! (through `OutputDir` / `nvmos_trace::Output`) what `nvmos-pages` renders
//! from the plain data the study returns; the libraries decide and measure.
//!
//! The tool is a library with one entry, [`main_from`], so that two
//! programs share one build of it: the `nvmos` binary (`src/main.rs`) and
//! the Python package's `nvmos` command (the extension module calls it).

mod bench;
mod evaluate_cmd;
mod horizon_cmd;
mod kernel_cmd;
mod levelling_cmd;
mod memsys_cmd;
mod pmo_cmd;
mod probe_cmd;
mod record_swap;
mod reproduce_cmd;
mod study;
mod study_banks;
mod study_power;
mod study_swap;
mod sweep_cmd;
mod trace_cmd;
use nvmos_sim::units;

use std::ffi::OsString;
use std::io::IsTerminal;

use anyhow::Result;
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug)]
#[command(
    name = "nvmos",
    version,
    about = "Operating-system support for storage-class memory: allocators, benchmarks, studies"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Benchmarks that print figures measured on this machine.
    Bench {
        #[command(subcommand)]
        bench: bench::BenchCommand,
    },
    /// The main job: replay every trace in `traces/` through every
    /// allocator and compare wear, lifetime and speed with what Linux
    /// itself did; prints the table and writes the report folder.
    Evaluate(evaluate_cmd::EvaluateArgs),
    /// Replay one trace through some allocators and print the comparison.
    Replay(evaluate_cmd::ReplayArgs),
    /// Run a command and record the kernel's page-allocation events into a
    /// `.nvt` trace (needs root and tracefs).
    ///
    /// Recording is system-wide: the kernel's kmem tracepoints see every
    /// page allocation and free on the machine while the command runs,
    /// whoever makes it (other processes, the kernel itself), not only the
    /// command's. Run it on a quiet machine, or in a guest (`nvmos kernel
    /// run`) for a trace of one workload. Write sampling (`--writes`) is
    /// per process tree: only the command's writes are sampled.
    Record(trace_cmd::RecordArgs),
    /// Persistent memory objects (seed 001): pools, objects, verify.
    Pmo(pmo_cmd::PmoArgs),
    /// Run a command in a memory cgroup with a swap file of its own and
    /// record the block requests to that swap file (needs root).
    RecordSwap(record_swap::RecordSwapArgs),
    /// Probe this machine: seed 002's analysing program on real hardware.
    Probe {
        #[command(subcommand)]
        probe: probe_cmd::ProbeCommand,
    },
    /// Look at and convert traces.
    Trace {
        #[command(subcommand)]
        trace: TraceCommand,
    },
    /// The memory timing model: run DRAMSim3 / Ramulator 2 traces.
    Memsys {
        #[command(subcommand)]
        memsys: memsys_cmd::MemsysCommand,
    },
    /// The studies of the seeds, each printing its results beside the
    /// seed's.
    Study {
        #[command(subcommand)]
        study: study::Study,
    },
    /// A design-space sweep over a grid (TOML): every cell one task, on
    /// this machine's cores or a Ray cluster (`--ray`); results in one
    /// Parquet file and an HTML summary; resumes. Needs the Python package
    /// (`pip install .`).
    Sweep(sweep_cmd::SweepArgs),
    /// The results pipeline: run every study the book publishes, write
    /// each results page's data and Markdown; `--install` puts them into
    /// the book and README, `--check` holds the committed ones to a fresh
    /// run.
    Reproduce(reproduce_cmd::ReproduceArgs),
    /// The allocators inside a real Linux 6.12 kernel under QEMU: build
    /// the patched kernel, run a workload with a policy, the kernel study.
    Kernel {
        #[command(subcommand)]
        kernel: kernel_cmd::KernelCommand,
    },
}

#[derive(Subcommand, Debug)]
enum TraceCommand {
    /// What a trace holds: events, CPUs, orders, migratetypes, duration,
    /// pfn span, frees of frames allocated before recording.
    Info(trace_cmd::InfoArgs),
    /// Convert a trace (ftrace text, perf script, .nvt) to .nvt.
    Convert(trace_cmd::ConvertArgs),
}

/// Run the tool on `args` (the program's name first, as `std::env::args_os`
/// gives them) and return its exit status: 0 on success, 1 on an error
/// (printed on stderr), 2 on a usage error (clap prints it and exits the
/// process itself, as it does for `--help` and `--version` with 0).
pub fn main_from(args: impl IntoIterator<Item = OsString>) -> u8 {
    let cli = Cli::parse_from(args);
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Bench { bench } => bench::run(bench),
        Command::Evaluate(args) => evaluate_cmd::evaluate(args),
        Command::Replay(args) => evaluate_cmd::replay(args),
        Command::Record(args) => trace_cmd::record(args),
        Command::Pmo(args) => pmo_cmd::run(args),
        Command::RecordSwap(args) => record_swap::run(args),
        Command::Trace {
            trace: TraceCommand::Info(args),
        } => trace_cmd::info(args),
        Command::Trace {
            trace: TraceCommand::Convert(args),
        } => trace_cmd::convert(args),
        Command::Memsys { memsys } => memsys_cmd::run(memsys),
        Command::Study { study } => study::run(study),
        Command::Sweep(args) => sweep_cmd::run(args),
        Command::Kernel { kernel } => kernel_cmd::run(kernel),
        Command::Reproduce(args) => {
            reproduce_cmd::run(args, <Cli as clap::CommandFactory>::command())
        }
        Command::Probe { probe } => probe_cmd::run(probe),
    }
}

/// A progress bar on stderr when a person is watching; a hidden one (which
/// draws nothing) when output goes to a file, a pipe or CI.
pub(crate) fn progress_bar(steps: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(steps);
    let style = ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed_precise} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// Run `work` with a progress bar of `steps` (0: the study sets it) that
/// draws each report `work`'s study makes; the bar is cleared after.
pub(crate) fn with_progress<T>(
    steps: u64,
    work: impl FnOnce(&mut dyn FnMut(nvmos_sim::Progress)) -> T,
) -> T {
    let bar = progress_bar(steps);
    let result = work(&mut |p| show(&bar, &p));
    bar.finish_and_clear();
    result
}

/// Draw a study's progress report on `bar`.
pub(crate) fn show(bar: &ProgressBar, p: &nvmos_sim::Progress) {
    bar.set_length(p.total);
    bar.set_position(p.done);
    bar.set_message(p.step.clone());
}
