//! Records a command's page-allocation events into a `.nvt` file, without
//! the CLI: `cargo run --release -p nvmos-trace --example record -- OUT.nvt CMD [ARGS...]`
//! (as root).

use std::ffi::OsString;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args_os().skip(1);
    let out = PathBuf::from(args.next().ok_or("usage: record OUT.nvt CMD [ARGS...]")?);
    let command: Vec<OsString> = args.collect();
    let summary = nvmos_trace::record::record(&command, &out, &Default::default())?;
    println!(
        "{}: {} events, {} lost, {} bytes, {:.2} bytes/event, {:.1} s, exit {:?}{}",
        out.display(),
        summary.events,
        summary.lost_events,
        summary.bytes,
        summary.bytes_per_event(),
        summary.wall_ns as f64 / 1e9,
        summary.exit,
        if summary.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    Ok(())
}
