//! # nvmos-trace: page-allocation events from the real kernel
//!
//! nvmos drives its allocators with what Linux's page allocator really did.
//! This crate gets those events and stores them:
//!
//! - [`Event`]: one allocation or free of a block of frames. Every source
//!   is an [`EventSource`], an iterator of `Result<Event, TraceError>`, so
//!   replay and analysis do not care where a trace came from.
//! - Importers for ftrace text (`trace`, `trace_pipe`) and `perf script`
//!   output of the `kmem:mm_page_alloc`, `kmem:mm_page_free` and
//!   `kmem:mm_page_free_batched` tracepoints ([`TextReader`]), with what
//!   they skip counted in [`SourceCounts`].
//! - The `.nvt` format ([`nvt`]): a versioned, checksummed header, events
//!   in zstd-compressed columns, written and read a block at a time
//!   ([`NvtWriter`], [`NvtReader`]); 0.8–2.5 bytes per event on the
//!   shipped traces.
//! - [`open`]: any of those by content; [`TraceInfo`]: a summary in one pass;
//!   [`convert::convert`]: any of them to `.nvt`, whole or not at all.
//! - [`Needs`]: the memory and CPUs a trace needs (inferred for text
//!   traces, which have no header); [`Checked`]: refuses an explicit
//!   smaller machine at the first event beyond it, naming pfn/CPU and line.
//! - [`BlockTracker`] and [`Accounting`]: the live traced blocks and every
//!   event that is not a clean allocate-then-free, classified in one place
//!   for `trace info` and the replay engine alike.
//! - [`table::ZeroTable`]: the per-frame tables of a replay (the tracker's,
//!   the wear counter's) in lazily mapped huge pages, zero until written.
//! - The tracefs recorder ([`record::record`], Linux, root), which runs a
//!   command and streams the kernel's events into a `.nvt` file, restoring
//!   the tracing state afterwards; with write sampling
//!   ([`softdirty`]) it also records which frames the command wrote, as
//!   [`Op::Write`] events.
//!
//! ```
//! use nvmos_trace::{Event, EventSource, NvtReader, NvtWriter, TextReader, Format, TraceHeader, TraceInfo};
//!
//! // Two lines of `/sys/kernel/tracing/trace_pipe`.
//! let text = "\
//!   bash-22527 [000] ..... 1194.629002: mm_page_alloc: page=00000000990532c6 pfn=0x1f8a3a order=1 migratetype=2 gfp_flags=GFP_KERNEL
//!   bash-22527 [001] ..... 1194.629010: mm_page_free: page=00000000990532c6 pfn=0x1f8a3a order=1
//! ";
//! let events = TextReader::new(text.as_bytes(), "trace_pipe", Format::Ftrace)
//!     .collect::<Result<Vec<Event>, _>>()?;
//! assert_eq!(events[1].time_ns, 8_000);
//!
//! // Into .nvt and back.
//! let mut writer = NvtWriter::new(Vec::new(), "mem.nvt", TraceHeader::default())?;
//! for e in &events {
//!     writer.push(*e)?;
//! }
//! let (bytes, summary) = writer.finish()?;
//! assert_eq!(summary.events, 2);
//! let mut reader = NvtReader::new(std::io::Cursor::new(bytes), "mem.nvt")?;
//! let info = TraceInfo::from_source(&mut reader)?;
//! assert_eq!((info.allocs, info.frees, info.accounting.frees_before_recording), (1, 1, 0));
//! # Ok::<(), nvmos_trace::TraceError>(())
//! ```
#![warn(missing_docs)]

pub mod accounting;
pub mod check;
pub mod convert;
mod error;
mod event;
pub mod folder;
mod info;
pub mod machine;
pub mod nvt;
pub mod output;
#[cfg(target_os = "linux")]
pub mod record;
#[cfg(target_os = "linux")]
pub mod softdirty;
mod source;
pub mod table;
mod text;

pub use accounting::{Accounting, BlockTracker, Effect, LiveBlock};
pub use check::{Checked, Limits, Needs};
pub use error::TraceError;
pub use event::{Event, MachineInfo, Op, ZoneInfo};
pub use folder::{scan_trace_folder, trace_files_in, TraceFolder};
pub use info::{Accumulator, TraceInfo};
pub use nvt::{NvtReader, NvtWriter, WriteSummary};
pub use output::Output;
pub use source::{
    detect, open, BoxedSource, EventSource, Format, SourceCounts, TraceHeader, WriteSampling,
};
pub use text::{TextReader, RECENT_FREES};

/// One more than the highest CPU number a trace may name (Linux's largest
/// `NR_CPUS`). Bounds per-CPU tables against corrupt input.
pub const MAX_CPUS: u32 = 8192;

/// One past the highest frame number: a 64-bit physical address space in
/// 4 KiB frames. Pfns at or beyond it are impossible.
pub const MAX_PFN: u64 = 1 << 52;
