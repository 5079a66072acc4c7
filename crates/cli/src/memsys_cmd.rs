//! `nvmos memsys run`: a DRAMSim3 or Ramulator 2 request trace through the
//! timing model, printing the statistics DRAMSim3 prints and the latency
//! distribution. The work is `nvmos_memsys::trace`, the text
//! `nvmos_pages::memsys`; this file parses and prints.

use std::fs::File;
use std::io::BufReader;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nvmos_memsys::trace::{self, TraceFormat};
use nvmos_memsys::{ControllerConfig, Machine, PagePolicy, Scheduler};

#[derive(Subcommand, Debug)]
pub enum MemsysCommand {
    /// Run a request trace through the timing model.
    Run(RunArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The trace file.
    #[arg(long)]
    trace: String,
    /// Its format: dramsim3 (`0x<addr> READ|WRITE <cycle>`) or ramulator
    /// (`LD|ST <addr>`, one request offered a cycle).
    #[arg(long, default_value = "dramsim3")]
    format: String,
    /// A machine preset or TOML file.
    #[arg(long, default_value = "ddr4-2400-dramsim3")]
    machine: String,
    /// The basic model: blocking scheduler, no write buffer, refresh,
    /// bank groups or rank switching.
    #[arg(long)]
    basic: bool,
    /// Turn refresh off.
    #[arg(long)]
    no_refresh: bool,
    /// Use one tCCD/tRRD/tWTR for all bank groups (the `_S` values for
    /// tCCD and tRRD, `tWTR_L` for tWTR).
    #[arg(long)]
    no_bank_groups: bool,
    /// Requests the read queue holds per channel.
    #[arg(long, default_value_t = 32)]
    queue_depth: usize,
    /// Writes the write buffer holds per channel (0: none, writes are
    /// queued and scheduled like reads).
    #[arg(long, default_value_t = 32)]
    write_queue: usize,
    /// Closed-page policy instead of open-page.
    #[arg(long)]
    closed_page: bool,
    /// With --format ramulator: offer the requests as Ramulator 2's trace
    /// front end with this clock ratio does: one every N memory cycles, the
    /// next only once the controller took the last (a full queue delays
    /// every later request)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    offer_every: Option<u64>,
    /// Print the statistics as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(command: MemsysCommand) -> Result<()> {
    match command {
        MemsysCommand::Run(args) => run_trace(&args),
    }
}

fn machine(name: &str) -> Result<Machine> {
    if Machine::preset_names().contains(&name) {
        return Ok(Machine::preset(name)?);
    }
    if std::path::Path::new(name).exists() {
        return Machine::load(name).with_context(|| format!("loading machine file {name}"));
    }
    bail!(
        "{name:?} is neither a preset ({}) nor a machine file",
        Machine::preset_names().join(", ")
    )
}

fn config(args: &RunArgs) -> ControllerConfig {
    let mut c = if args.basic {
        ControllerConfig::basic()
    } else {
        ControllerConfig::default()
    };
    c.queue_depth = args.queue_depth;
    if c.scheduler == Scheduler::Ready {
        // Ramulator 2's watermarks: 0.8 and 0.2 of the buffer.
        c.write_queue_depth = args.write_queue;
        c.write_high = args.write_queue * 4 / 5;
        c.write_low = args.write_queue / 5;
    }
    c.refresh &= !args.no_refresh;
    c.bank_groups &= !args.no_bank_groups;
    if args.closed_page {
        c.policy = PagePolicy::Closed;
    }
    c
}

fn run_trace(args: &RunArgs) -> Result<()> {
    let format: TraceFormat = args.format.parse()?;
    let machine = machine(&args.machine)?;
    let config = config(args);
    let file = File::open(&args.trace).with_context(|| format!("opening {}", args.trace))?;
    let t = trace::parse(BufReader::new(file), format)
        .with_context(|| format!("reading {}", args.trace))?;
    let frontend = match args.offer_every {
        None => trace::FrontEnd::Timed,
        Some(_) if format != TraceFormat::Ramulator => {
            bail!("--offer-every: only with --format ramulator (a dramsim3 trace gives each request its cycle)")
        }
        Some(every) => trace::FrontEnd::Offered { every },
    };
    let s = trace::run_with(&machine, config, &t, frontend)
        .with_context(|| format!("running {}", args.trace))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
        return Ok(());
    }
    print!(
        "{}",
        nvmos_pages::memsys::stats_text(&args.trace, &machine, &config, &s)
    );
    Ok(())
}
