//! `nvmos probe banks`: seed 002's analysing program on this machine (or,
//! with `--simulate`, on a preset's timing model through the same code).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use nvmos_memsys::probe::{probe, HwTimer, SimTimer, Timer};
use nvmos_memsys::Machine;

/// `nvmos probe …`.
#[derive(clap::Subcommand, Debug)]
pub enum ProbeCommand {
    /// Recover the bank address mapping from row-conflict timing (DRAMA).
    Banks(BanksArgs),
}

/// `nvmos probe banks`.
#[derive(clap::Args, Debug)]
pub struct BanksArgs {
    /// Buffer to allocate and probe (e.g. 1GiB, 512MiB).
    #[arg(long, default_value = "1GiB")]
    pub buffer: String,
    /// Addresses timed against the reference in the first step.
    #[arg(long, default_value_t = 3000)]
    pub pool: usize,
    /// Fresh pairs the recovered mapping must predict.
    #[arg(long, default_value_t = 200)]
    pub checks: usize,
    /// Timed repetitions per pair on hardware (the median is used).
    #[arg(long, default_value_t = 200)]
    pub rounds: usize,
    /// Run on this memsys preset's timing model instead of the hardware.
    #[arg(long)]
    pub simulate: Option<String>,
    /// Write the recovered preset TOML here (only when one is recovered).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Run `nvmos probe`.
pub fn run(cmd: ProbeCommand) -> Result<()> {
    let ProbeCommand::Banks(args) = cmd;
    if args.pool < 64 || args.checks == 0 || args.rounds == 0 {
        bail!("--pool must be at least 64, --checks and --rounds at least 1");
    }
    if let Some(path) = &args.out {
        // Before the probe, not after it: a device or FIFO is never replaced.
        nvmos_trace::output::refuse_special_file(path)?;
    }
    let (source, report) = match &args.simulate {
        Some(name) => {
            let machine = Machine::preset(name)
                .with_context(|| format!("--simulate {name:?}: not a preset"))?;
            let mut timer = SimTimer::new(&machine);
            (
                format!("timing model of preset {name}"),
                probe(&mut timer, args.pool, args.checks, args.seed)?,
            )
        }
        None => {
            let frames = crate::units::parse_memory(&args.buffer)
                .map_err(|e| anyhow::anyhow!("--buffer {:?}: {e}", args.buffer))?;
            let bits = physical_address_bits()?;
            let mut timer = HwTimer::new((frames * 4096) as usize, bits)
                .context("setting up the hardware probe (needs root on x86-64 Linux)")?;
            timer.rounds = args.rounds;
            let source = format!(
                "this machine: {} frames of a {} buffer, {bits} physical address bits, rdtsc cycles",
                timer.frames(),
                args.buffer
            );
            let report = probe(
                &mut timer as &mut dyn Timer,
                args.pool,
                args.checks,
                args.seed,
            )?;
            (source, report)
        }
    };
    if let (Some(path), Some(toml)) = (&args.out, &report.preset_toml) {
        write_atomically(path, toml)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!(
            "{}",
            nvmos_pages::probe::text(&source, &report, args.out.as_deref())
        );
    }
    Ok(())
}

/// Physical address bits to analyse: up to the end of the highest
/// "System RAM" range of /proc/iomem (root sees the addresses).
fn physical_address_bits() -> Result<u32> {
    let iomem = std::fs::read_to_string("/proc/iomem").context("reading /proc/iomem")?;
    let mut top = 0u64;
    for line in iomem.lines().filter(|l| l.ends_with(": System RAM")) {
        if let Some(end) = line
            .trim_start()
            .split(['-', ' '])
            .nth(1)
            .and_then(|e| u64::from_str_radix(e, 16).ok())
        {
            top = top.max(end);
        }
    }
    if top == 0 {
        bail!("/proc/iomem shows no System RAM addresses (not root?)");
    }
    Ok(64 - top.leading_zeros())
}

/// The preset whole or not at all (`nvmos_trace::Output`).
fn write_atomically(path: &PathBuf, text: &str) -> Result<()> {
    let mut out = nvmos_trace::Output::create(path, &[])?;
    out.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    out.commit()?;
    Ok(())
}
