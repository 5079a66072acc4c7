//! `nvmos record-swap`: run a command under a memory limit with a swap
//! file of our own and record the block requests to it.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use nvmos_swap::record::{record_swap as record, RecordSwapOptions};

#[derive(Args, Debug)]
pub struct RecordSwapArgs {
    /// Output swap block trace (zstd-compressed text, `.swt.zst`).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,

    /// The memory cgroup's limit: 64MiB, 1GiB, ... (bytes with a binary unit).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub limit: u64,

    /// Size of the swap file created for the recording.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "512MiB")]
    pub swap_size: u64,

    /// Directory for the swap file: on a disk-backed filesystem (not tmpfs)
    /// [default: the output file's directory].
    #[arg(long, value_name = "DIR")]
    pub swap_dir: Option<PathBuf>,

    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,

    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

fn parse_bytes(text: &str) -> Result<u64, String> {
    crate::units::parse_memory(text).and_then(|frames| {
        if text.trim().chars().all(|c| c.is_ascii_digit() || c == '_') {
            Err(format!("'{text}' needs a unit (B, KiB, MiB, GiB)"))
        } else {
            Ok(frames * crate::units::FRAME_BYTES)
        }
    })
}

pub fn run(args: RecordSwapArgs) -> Result<()> {
    let swap_dir = match &args.swap_dir {
        Some(d) => d.clone(),
        None => args
            .output
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), PathBuf::from),
    };
    let opts = RecordSwapOptions {
        limit_bytes: args.limit,
        swap_bytes: args.swap_size,
        swap_dir: std::fs::canonicalize(&swap_dir)
            .with_context(|| format!("swap directory {}", swap_dir.display()))?,
        ..RecordSwapOptions::default()
    };
    let s = record(&args.command, &args.output, &opts)
        .with_context(|| format!("recording swap traffic into {}", args.output.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!(
            "{}",
            nvmos_pages::trace::record_swap_text(&args.output, &s, args.limit)
        );
    }
    if s.interrupted {
        bail!(
            "interrupted; the requests up to then are in {}",
            args.output.display()
        );
    }
    if !s.exit.success() {
        bail!(
            "the command ended with {}; its requests are in {}",
            match (s.exit.code, s.exit.signal) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(sig)) => format!("signal {sig}"),
                _ => "an unknown status".into(),
            },
            args.output.display()
        );
    }
    Ok(())
}
