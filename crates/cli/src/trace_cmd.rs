//! `nvmos record`, `nvmos trace info` and `nvmos trace convert`: recording
//! the kernel's page-allocation events and looking at traces.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use nvmos_trace::record::{RecordOptions, RecordSummary};
use nvmos_trace::{nvt, NvtWriter, Output, TraceHeader, TraceInfo};

/// `nvmos record -o FILE.nvt -- CMD [ARGS...]`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The trace to write.
    #[arg(short, long, value_name = "FILE.nvt")]
    pub output: PathBuf,

    /// Ring-buffer size per CPU in KiB; bigger loses fewer events when the
    /// command allocates faster than the recorder reads.
    /// At most 1 GiB per CPU: the kernel allocates it on every CPU.
    #[arg(long, value_name = "KIB", default_value_t = 64 * 1024,
          value_parser = clap::value_parser!(u64).range(4..=1 << 20))]
    pub buffer_kb: u64,

    /// zstd level of the trace's blocks (1 fast … 19 small).
    #[arg(long, default_value_t = nvt::DEFAULT_LEVEL, value_parser = clap::value_parser!(i32).range(1..=19))]
    pub level: i32,

    /// Also sample which physical frames the command's process tree writes
    /// (soft-dirty bits of /proc/PID/pagemap, cleared through clear_refs),
    /// as write events beside the allocations. Limits: see
    /// `nvmos_trace::softdirty`.
    #[arg(long)]
    pub writes: bool,

    /// Milliseconds between write samples (with --writes).
    #[arg(long, value_name = "MS", default_value_t = 10, requires = "writes",
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub write_interval: u64,

    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,

    /// The command to run and record, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// `nvmos trace info FILE`.
#[derive(Args, Debug)]
pub struct InfoArgs {
    /// A trace: `.nvt`, ftrace text or `perf script` output.
    pub file: PathBuf,

    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `nvmos trace convert IN OUT`.
#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// A trace: `.nvt`, ftrace text or `perf script` output.
    pub input: PathBuf,

    /// The `.nvt` file to write.
    pub output: PathBuf,

    /// zstd level (1 fast … 19 small).
    #[arg(long, default_value_t = nvt::DEFAULT_LEVEL, value_parser = clap::value_parser!(i32).range(1..=19))]
    pub level: i32,
}

/// Runs the command under the tracefs recorder and prints a summary.
pub fn record(args: RecordArgs) -> Result<()> {
    let opts = RecordOptions {
        buffer_kb_per_cpu: args.buffer_kb,
        zstd_level: args.level,
        write_interval: args
            .writes
            .then(|| std::time::Duration::from_millis(args.write_interval)),
        ..RecordOptions::default()
    };
    let summary = nvmos_trace::record::record(&args.command, &args.output, &opts)
        .with_context(|| format!("recording into {}", args.output.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_record(&args, &summary);
    }
    if summary.interrupted {
        bail!(
            "interrupted; the events up to then are in {}",
            args.output.display()
        );
    }
    if !summary.exit.success() {
        let how = match (summary.exit.code, summary.exit.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(sig)) => format!("signal {sig}"),
            (None, None) => "an unknown status".to_owned(),
        };
        bail!(
            "the command ended with {how}; its events are in {}",
            args.output.display()
        );
    }
    Ok(())
}

fn print_record(args: &RecordArgs, s: &RecordSummary) {
    println!("{}", args.output.display());
    println!("  events        {}", s.events);
    let lost_share = if s.events + s.lost_events == 0 {
        0.0
    } else {
        100.0 * s.lost_events as f64 / (s.events + s.lost_events) as f64
    };
    println!("  lost events   {} ({lost_share:.2}%)", s.lost_events);
    if s.lost_events > 0 {
        println!("                the reader fell behind; a larger --buffer-kb or a slower workload loses fewer");
    }
    println!("  failed allocs {}", s.header.counts.failed_allocs);
    if let Some(w) = &s.header.writes {
        print_write_sampling(w);
    }
    println!("  duration      {:.2} s", s.wall_ns as f64 / 1e9);
    println!("  size          {} bytes", s.bytes);
    println!("  bytes/event   {:.2}", s.bytes_per_event());
}

fn print_write_sampling(w: &nvmos_trace::WriteSampling) {
    println!(
        "  writes        {} sampled ({} samples every {} ms, {} late; {} processes, {} exited unsampled)",
        w.writes,
        w.samples,
        w.interval_ns as f64 / 1e6,
        w.late_samples,
        w.processes,
        w.processes_vanished
    );
    println!(
        "                skipped: {} shared duplicates, {} zero-page, {} swapped, {} re-marked by a new or grown mapping",
        w.shared_duplicates, w.zero_page, w.swapped, w.remarked
    );
}

/// Prints what a trace holds.
pub fn info(args: InfoArgs) -> Result<()> {
    let mut source = nvmos_trace::open(&args.file)?;
    let info = TraceInfo::from_source(&mut *source)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(());
    }
    let bytes = std::fs::metadata(&args.file).map(|m| m.len()).unwrap_or(0);
    println!("{} ({})", args.file.display(), info.format.name());
    if let Some(h) = &info.header {
        if !h.command.is_empty() {
            println!("  command       {}", h.command.join(" "));
        }
        if let Some(m) = &h.machine {
            println!(
                "  machine       {} CPUs, {:.1} GiB, {} B pages, kernel {}",
                m.cpus,
                m.memory_bytes as f64 / (1u64 << 30) as f64,
                m.page_size,
                if m.kernel.is_empty() { "?" } else { &m.kernel }
            );
            for z in &m.zones {
                println!(
                    "  zone          node {} {:<8} pfn {:#x}..{:#x} ({} present)",
                    z.node,
                    z.name,
                    z.start_pfn,
                    z.start_pfn + z.spanned,
                    z.present
                );
            }
            if !m.ram.is_empty() {
                let ranges: Vec<String> = m
                    .ram
                    .iter()
                    .map(|(s, e)| format!("{s:#x}..{e:#x}"))
                    .collect();
                println!("  RAM           pfn {}", ranges.join(", "));
            }
        }
    }
    if info.writes > 0 {
        println!(
            "  events        {} ({} allocs, {} frees, {} sampled writes)",
            info.events, info.allocs, info.frees, info.writes
        );
    } else {
        println!(
            "  events        {} ({} allocs, {} frees)",
            info.events, info.allocs, info.frees
        );
    }
    if let Some(w) = info.header.as_ref().and_then(|h| h.writes.as_ref()) {
        print_write_sampling(w);
    }
    if info.format == nvmos_trace::Format::Nvt && info.events > 0 {
        println!("  bytes/event   {:.2}", bytes as f64 / info.events as f64);
    }
    println!("  duration      {:.3} s", info.duration_ns as f64 / 1e9);
    let cpus: Vec<String> = info.cpus.iter().map(|(c, n)| format!("{c}:{n}")).collect();
    println!("  CPUs          {} ({})", info.cpus.len(), cpus.join(" "));
    let orders: Vec<String> = info
        .alloc_orders
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(o, n)| format!("{o}:{n}"))
        .collect();
    println!("  alloc orders  {}", orders.join(" "));
    let kinds: Vec<String> = info
        .migratetypes
        .iter()
        .map(|(k, n)| format!("{k}:{n}"))
        .collect();
    println!("  migratetypes  {}", kinds.join(" "));
    match (info.pfn_min, info.pfn_max) {
        (Some(lo), Some(hi)) => println!(
            "  pfn span      {lo:#x}..={hi:#x} ({:.1} GiB with 4 KiB frames)",
            (hi - lo + 1) as f64 * 4096.0 / (1u64 << 30) as f64
        ),
        _ => println!("  pfn span      -"),
    }
    if info
        .header
        .as_ref()
        .and_then(|h| h.machine.as_ref())
        .is_none()
    {
        // No machine header (text traces): what a replay infers.
        if let Some(n) = nvmos_trace::Needs::of(&info) {
            println!(
                "  inferred      {} CPUs (highest CPU + 1), {} frames = {:.2} GiB of memory (highest pfn + block); a replay uses these unless told more",
                n.cpus,
                n.frames,
                n.frames as f64 * 4096.0 / (1u64 << 30) as f64
            );
        }
    }
    println!("  accounting");
    for (name, n) in info.accounting.rows() {
        println!("    {name:<30} {n}");
    }
    println!("    {:<30} {}", "blocks live at the end", info.live_at_end);
    let c = &info.counts;
    println!("  failed allocs {}", c.failed_allocs);
    if c.batched_duplicates + c.batched_unmatched > 0 {
        println!(
            "  batched frees {} duplicates of mm_page_free dropped, {} kept",
            c.batched_duplicates, c.batched_unmatched
        );
    }
    if !c.remapped_migratetypes.is_empty() {
        let r: Vec<String> = c
            .remapped_migratetypes
            .iter()
            .map(|(m, n)| format!("{m}:{n}"))
            .collect();
        println!("  remapped migratetypes  {}", r.join(" "));
    }
    if !c.skipped.is_empty() {
        let s: Vec<String> = c.skipped.iter().map(|(e, n)| format!("{e}:{n}")).collect();
        println!("  skipped lines {} ({})", c.skipped_total(), s.join(" "));
    }
    Ok(())
}

/// Converts any trace to `.nvt`.
pub fn convert(args: ConvertArgs) -> Result<()> {
    // Refused before anything is opened for writing: converting a file
    // onto itself (or a link to it) would destroy it.
    let output = Output::create(&args.output, &[&args.input])?;
    let mut source = nvmos_trace::open(&args.input)?;
    let header = source.header().cloned().unwrap_or_else(|| TraceHeader {
        source: source.format().name().to_owned(),
        ..TraceHeader::default()
    });
    let mut writer = NvtWriter::with_level(
        std::io::BufWriter::with_capacity(1 << 20, output),
        &args.output,
        header,
        args.level,
    )?;
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {human_pos} events {per_sec}")
                .expect("a valid template"),
        );
        Some(bar)
    } else {
        None
    };
    for event in &mut *source {
        let event = event?;
        writer.push(event)?;
        if let Some(bar) = &bar {
            if writer.events() % 65536 == 0 {
                bar.set_position(writer.events());
            }
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    writer.header_mut().counts = source.counts();
    let (file, summary) = writer.finish()?;
    // Only a complete trace appears at the output path.
    file.into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("writing {}", args.output.display()))?
        .commit()?;
    println!(
        "{} -> {}: {} events, {} bytes, {:.2} bytes/event ({} failed allocs, {} lines of other events skipped)",
        args.input.display(),
        args.output.display(),
        summary.events,
        summary.bytes,
        summary.bytes_per_event(),
        source.counts().failed_allocs,
        source.counts().skipped_total()
    );
    Ok(())
}
