//! Converting any trace (ftrace text, perf script, `.nvt`) to `.nvt`:
//! `nvmos trace convert`. The output is written to a temporary and
//! renamed ([`Output`]) only when the whole trace is in it, and never
//! over the input.

use std::path::Path;

use crate::nvt::{NvtWriter, WriteSummary};
use crate::output::Output;
use crate::{SourceCounts, TraceError, TraceHeader};

/// What a conversion wrote and what the source counted (failed
/// allocations, lines of other events skipped).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Converted {
    /// Events and bytes written.
    pub summary: WriteSummary,
    /// What the source counted: failed allocations, lines skipped.
    pub counts: SourceCounts,
}

/// Events between two calls of `progress` (with the events written).
pub const PROGRESS_EVERY: u64 = 65536;

/// Convert `input` to the `.nvt` file `output` at zstd level `level`
/// (1 fast … 19 small). The input's header is kept (a text trace gets
/// one naming its format) with the source's counts. `progress` gets the
/// events written every [`PROGRESS_EVERY`] events.
pub fn convert(
    input: &Path,
    output: &Path,
    level: i32,
    progress: &mut dyn FnMut(u64),
) -> Result<Converted, TraceError> {
    // Refused before anything is opened for writing: converting a file
    // onto itself (or a link to it) would destroy it.
    let out = Output::create(output, &[input])?;
    let mut source = crate::open(input)?;
    let header = source.header().cloned().unwrap_or_else(|| TraceHeader {
        source: source.format().name().to_owned(),
        ..TraceHeader::default()
    });
    let mut writer = NvtWriter::with_level(
        std::io::BufWriter::with_capacity(1 << 20, out),
        output,
        header,
        level,
    )?;
    for event in &mut *source {
        writer.push(event?)?;
        if writer.events() % PROGRESS_EVERY == 0 {
            progress(writer.events());
        }
    }
    writer.header_mut().counts = source.counts();
    let (file, summary) = writer.finish()?;
    // Only a complete trace appears at the output path.
    file.into_inner()
        .map_err(|e| TraceError::io(output, e.into_error()))?
        .commit()?;
    Ok(Converted {
        summary,
        counts: source.counts(),
    })
}
