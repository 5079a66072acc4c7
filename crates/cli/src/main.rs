//! `nvmos`: the command-line tool. Subcommands parse their arguments, call
//! an engine that returns plain data, and render it (tables, JSON, CSV).

mod bench;
mod evaluate_cmd;
mod horizon_cmd;
mod kernel_cmd;
mod levelling_cmd;
mod memsys_cmd;
mod pmo_cmd;
mod probe_cmd;
mod record_swap;
mod render;
mod report;
mod study;
mod study_banks;
mod study_power;
mod study_swap;
mod sweep_cmd;
mod trace_cmd;
use nvmos_sim::units;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use bench::alloc::{Config, Pattern, Step};
use bench::target::{AllocatorKind, LockKind};

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
        bench: BenchCommand,
    },
    /// The main job: replay every trace in `traces/` through every
    /// allocator and compare wear, lifetime and speed with what Linux
    /// itself did; prints the table and writes the report folder.
    Evaluate(evaluate_cmd::EvaluateArgs),
    /// Replay one trace through some allocators and print the comparison.
    Replay(evaluate_cmd::ReplayArgs),
    /// Run a command and record the kernel's page-allocation events into a
    /// `.nvt` trace (needs root and tracefs).
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

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Allocation and free latency of the page-frame allocators: seed 000's
    /// Table 2 (iBuddy) on this machine, one table per pattern and
    /// operation, rows = allocators, columns = thread counts.
    Alloc(AllocArgs),
    /// psync throughput of a persistent memory object (AES-256-GCM, one
    /// core) beside PMDK's libpmemobj on /dev/shm and on disk.
    Psync(bench::psync::PsyncArgs),
    /// Persistent memory objects (seed 001): seed 001's kernels and a file
    /// server in every mode and prediction depth, attach and first-touch
    /// cost; writes pmo.html beside the report.
    Pmo(bench::pmo::PmoArgs),
}

#[derive(Args, Debug)]
struct AllocArgs {
    /// Allocators (rows), comma-separated, case-insensitive: any of the
    /// registry's (buddy, LBS-1, LBS-31, linux-pcp, iBuddy, LiS-1, LiS-31,
    /// M3, M3-part, array-bank, list-bank, adaptive, adaptive-migrate) or
    /// the peer, bsa.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = parse_allocator,
          default_value = "buddy,LBS-1,LBS-31,iBuddy,LiS-1,LiS-31,linux-pcp,bsa")]
    alloc: Vec<AllocatorKind>,

    /// Thread counts (columns); thread t names CPU t, and each allocator is
    /// built for that many CPUs.
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = parse_threads,
          default_value = "1,2,4,8,16,32")]
    threads: Vec<u32>,

    /// Patterns: bulk, repeat, rand, mixed.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = parse_pattern,
          default_value = "bulk,repeat,rand,mixed")]
    patterns: Vec<Pattern>,

    /// Memory managed: 4GiB, 512MiB, ... or a number of 4 KiB frames
    /// [default: 4GiB, 1GiB with --quick].
    #[arg(long, value_name = "SIZE", value_parser = parse_memory)]
    memory: Option<u64>,

    /// Runs per cell; the run whose mean is the median is kept
    /// [default: 3, 1 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,

    /// `repeat`: alloc/free pairs per thread [default: 200000, 20000 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    repeat: Option<u64>,

    /// `mixed`: random operations per thread [default: 200000, 20000 with --quick].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    mixed_ops: Option<u64>,

    /// Seed for the `rand` shuffle and the `mixed` choices.
    #[arg(long, default_value_t = 42)]
    seed: u64,

    /// The lock every allocator and the peer are built with.
    #[arg(long, value_enum, default_value_t = LockKind::Spin)]
    lock: LockKind,

    /// Smaller and faster: 1 GiB, one round, fewer repeat and mixed
    /// operations (explicit options still win).
    #[arg(long)]
    quick: bool,

    /// Print every result as JSON on stdout instead of the tables.
    #[arg(long)]
    json: bool,

    /// Also write one CSV line per cell and operation to PATH.
    #[arg(long, value_name = "PATH")]
    csv: Option<PathBuf>,
}

impl AllocArgs {
    /// The settings, with `--quick` choosing the defaults not given.
    fn config(&self) -> Config {
        let (memory, rounds, ops) = if self.quick {
            (units::parse_memory("1GiB"), 1, 20_000)
        } else {
            (units::parse_memory("4GiB"), 3, 200_000)
        };
        let mut threads = self.threads.clone();
        dedup_in_order(&mut threads);
        let mut allocators = self.alloc.clone();
        dedup_in_order(&mut allocators);
        let mut patterns = self.patterns.clone();
        dedup_in_order(&mut patterns);
        Config {
            frames: self
                .memory
                .unwrap_or_else(|| memory.expect("the default size parses")),
            allocators,
            threads,
            patterns,
            rounds: self.rounds.unwrap_or(rounds),
            repeat: self.repeat.unwrap_or(ops),
            mixed_ops: self.mixed_ops.unwrap_or(ops),
            seed: self.seed,
            lock: self.lock,
        }
    }
}

fn dedup_in_order<T: PartialEq + Copy>(items: &mut Vec<T>) {
    let mut seen = Vec::with_capacity(items.len());
    items.retain(|item| {
        let new = !seen.contains(item);
        seen.push(*item);
        new
    });
}

fn parse_allocator(text: &str) -> Result<AllocatorKind, String> {
    text.parse()
}

fn parse_pattern(text: &str) -> Result<Pattern, String> {
    text.parse()
}

fn parse_memory(text: &str) -> Result<u64, String> {
    units::parse_memory(text)
}

fn parse_threads(text: &str) -> Result<u32, String> {
    let max = nvmos_frames::MAX_CPUS;
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "thread count '{text}' is not a number in 1..={max}"
        )),
    }
}

fn main() -> ExitCode {
    // Usage errors exit with 2 inside `parse`; everything else is ours.
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Bench {
            bench: BenchCommand::Alloc(args),
        } => bench_alloc(&args),
        Command::Bench {
            bench: BenchCommand::Psync(args),
        } => bench::psync::main(&args),
        Command::Bench {
            bench: BenchCommand::Pmo(args),
        } => bench::pmo::main(&args),
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
        Command::Probe { probe } => probe_cmd::run(probe),
    }
}

fn bench_alloc(args: &AllocArgs) -> Result<()> {
    let config = args.config();
    config.check()?;
    let bar = progress_bar(config.steps());
    let report = bench::alloc::run(&config, &mut |step: &Step| {
        bar.set_message(format!(
            "{} {} {} thr round {}",
            step.pattern,
            step.allocator,
            step.threads,
            step.round + 1
        ));
        bar.inc(1);
    });
    bar.finish_and_clear();
    let report = report?;
    if let Some(path) = &args.csv {
        std::fs::write(path, render::csv(&report))
            .with_context(|| format!("writing the CSV to {}", path.display()))?;
    }
    if args.json {
        print!("{}", render::json(&report)?);
    } else {
        print!("{}", render::table(&report));
    }
    Ok(())
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

/// Draw a study's progress report on `bar`.
pub(crate) fn show(bar: &ProgressBar, p: &nvmos_sim::Progress) {
    bar.set_length(p.total);
    bar.set_position(p.done);
    bar.set_message(p.step.clone());
}
