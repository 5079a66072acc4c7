//! `nvmos record`, `nvmos trace info` and `nvmos trace convert`: recording
//! the kernel's page-allocation events and looking at traces.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use nvmos_pages::trace as pages;
use nvmos_trace::record::RecordOptions;
use nvmos_trace::{nvt, TraceInfo};

/// `nvmos record -o FILE.nvt -- CMD [ARGS...]`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The trace to write; an existing file is refused unless --force.
    #[arg(short, long, value_name = "FILE.nvt")]
    pub output: PathBuf,

    /// Replace an existing output file (when the recording succeeds).
    #[arg(long)]
    pub force: bool,

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
    // Before the command runs: a recording cannot be repeated, and an
    // earlier one is not replaced by accident.
    if !args.force && std::fs::symlink_metadata(&args.output).is_ok() {
        bail!(
            "{} exists; nothing was recorded (pass --force to replace it, or choose another -o)",
            args.output.display()
        );
    }
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
        print!("{}", pages::record_text(&args.output, &summary));
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

/// Prints what a trace holds.
pub fn info(args: InfoArgs) -> Result<()> {
    let mut source = nvmos_trace::open(&args.file)?;
    let info = TraceInfo::from_source(&mut *source)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(());
    }
    let bytes = std::fs::metadata(&args.file).map(|m| m.len()).unwrap_or(0);
    print!("{}", pages::info_text(&args.file, &info, bytes));
    Ok(())
}

/// Converts any trace to `.nvt`.
pub fn convert(args: ConvertArgs) -> Result<()> {
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {human_pos} events {per_sec}")
                .expect("a valid template"),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let done = nvmos_trace::convert::convert(&args.input, &args.output, args.level, &mut |n| {
        bar.set_position(n)
    });
    bar.finish_and_clear();
    let done = done?;
    println!(
        "{} -> {}: {} events, {} bytes, {:.2} bytes/event ({} failed allocs, {} lines of other events skipped)",
        args.input.display(),
        args.output.display(),
        done.summary.events,
        done.summary.bytes,
        done.summary.bytes_per_event(),
        done.counts.failed_allocs,
        done.counts.skipped_total()
    );
    Ok(())
}
