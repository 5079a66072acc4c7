//! `nvmos record` and `nvmos trace info` (`nvmos_trace`): the recording's
//! summary ([`record_text`]) and what a trace holds ([`info_text`]).

use std::fmt::Write as _;
use std::path::Path;

use nvmos_trace::record::RecordSummary;
use nvmos_trace::{TraceInfo, WriteSampling};

/// A line into the text being built (writing to a `String` cannot fail).
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// `nvmos record`'s summary: events, lost events, failed allocations,
/// the write sampling, duration and size of the trace at `output`.
pub fn record_text(output: &Path, s: &RecordSummary) -> String {
    let mut out = String::new();
    outln!(out, "{}", output.display());
    outln!(out, "  events        {}", s.events);
    let lost_share = if s.events + s.lost_events == 0 {
        0.0
    } else {
        100.0 * s.lost_events as f64 / (s.events + s.lost_events) as f64
    };
    outln!(out, "  lost events   {} ({lost_share:.2}%)", s.lost_events);
    if s.lost_events > 0 {
        outln!(out, "                the reader fell behind; a larger --buffer-kb or a slower workload loses fewer");
    }
    outln!(out, "  failed allocs {}", s.header.counts.failed_allocs);
    if let Some(w) = &s.header.writes {
        write_sampling(&mut out, w);
    }
    outln!(out, "  duration      {:.2} s", s.wall_ns as f64 / 1e9);
    outln!(out, "  size          {} bytes", s.bytes);
    outln!(out, "  bytes/event   {:.2}", s.bytes_per_event());
    out
}

/// The write sampling's figures (`record --writes`).
fn write_sampling(out: &mut String, w: &WriteSampling) {
    outln!(out,
        "  writes        {} sampled ({} samples every {} ms, {} late; {} processes, {} exited unsampled)",
        w.writes,
        w.samples,
        w.interval_ns as f64 / 1e6,
        w.late_samples,
        w.processes,
        w.processes_vanished
    );
    outln!(out,
        "                skipped: {} shared duplicates, {} zero-page, {} swapped, {} re-marked by a new or grown mapping",
        w.shared_duplicates, w.zero_page, w.swapped, w.remarked
    );
}

/// `nvmos trace info`'s summary of `file` (`bytes` long): its header
/// (command, machine, zones), events, duration, CPUs, orders,
/// migratetypes, pfn span, what a replay infers, and every event skipped
/// or outside the model, counted.
pub fn info_text(file: &Path, info: &TraceInfo, bytes: u64) -> String {
    let mut out = String::new();
    outln!(out, "{} ({})", file.display(), info.format.name());
    if let Some(h) = &info.header {
        if !h.command.is_empty() {
            outln!(out, "  command       {}", h.command.join(" "));
        }
        if let Some(m) = &h.machine {
            outln!(
                out,
                "  machine       {} CPUs, {:.1} GiB, {} B pages, kernel {}",
                m.cpus,
                m.memory_bytes as f64 / (1u64 << 30) as f64,
                m.page_size,
                if m.kernel.is_empty() { "?" } else { &m.kernel }
            );
            for z in &m.zones {
                outln!(
                    out,
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
                outln!(out, "  RAM           pfn {}", ranges.join(", "));
            }
        }
    }
    if info.writes > 0 {
        outln!(
            out,
            "  events        {} ({} allocs, {} frees, {} sampled writes)",
            info.events,
            info.allocs,
            info.frees,
            info.writes
        );
    } else {
        outln!(
            out,
            "  events        {} ({} allocs, {} frees)",
            info.events,
            info.allocs,
            info.frees
        );
    }
    if let Some(w) = info.header.as_ref().and_then(|h| h.writes.as_ref()) {
        write_sampling(&mut out, w);
    }
    if info.format == nvmos_trace::Format::Nvt && info.events > 0 {
        outln!(
            out,
            "  bytes/event   {:.2}",
            bytes as f64 / info.events as f64
        );
    }
    outln!(
        out,
        "  duration      {:.3} s",
        info.duration_ns as f64 / 1e9
    );
    let cpus: Vec<String> = info.cpus.iter().map(|(c, n)| format!("{c}:{n}")).collect();
    outln!(
        out,
        "  CPUs          {} ({})",
        info.cpus.len(),
        cpus.join(" ")
    );
    let orders: Vec<String> = info
        .alloc_orders
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(o, n)| format!("{o}:{n}"))
        .collect();
    outln!(out, "  alloc orders  {}", orders.join(" "));
    let kinds: Vec<String> = info
        .migratetypes
        .iter()
        .map(|(k, n)| format!("{k}:{n}"))
        .collect();
    outln!(out, "  migratetypes  {}", kinds.join(" "));
    match (info.pfn_min, info.pfn_max) {
        (Some(lo), Some(hi)) => outln!(
            out,
            "  pfn span      {lo:#x}..={hi:#x} ({:.1} GiB with 4 KiB frames)",
            (hi - lo + 1) as f64 * 4096.0 / (1u64 << 30) as f64
        ),
        _ => outln!(out, "  pfn span      -"),
    }
    if info
        .header
        .as_ref()
        .and_then(|h| h.machine.as_ref())
        .is_none()
    {
        // No machine header (text traces): what a replay infers.
        if let Some(n) = nvmos_trace::Needs::of(info) {
            outln!(out,
                "  inferred      {} CPUs (highest CPU + 1), {} frames = {:.2} GiB of memory (highest pfn + block); a replay uses these unless told more",
                n.cpus,
                n.frames,
                n.frames as f64 * 4096.0 / (1u64 << 30) as f64
            );
        }
    }
    outln!(out, "  accounting");
    for (name, n) in info.accounting.rows() {
        outln!(out, "    {name:<30} {n}");
    }
    outln!(
        out,
        "    {:<30} {}",
        "blocks live at the end",
        info.live_at_end
    );
    let c = &info.counts;
    outln!(out, "  failed allocs {}", c.failed_allocs);
    if c.batched_duplicates + c.batched_unmatched > 0 {
        outln!(
            out,
            "  batched frees {} duplicates of mm_page_free dropped, {} kept",
            c.batched_duplicates,
            c.batched_unmatched
        );
    }
    if !c.remapped_migratetypes.is_empty() {
        let r: Vec<String> = c
            .remapped_migratetypes
            .iter()
            .map(|(m, n)| format!("{m}:{n}"))
            .collect();
        outln!(out, "  remapped migratetypes  {}", r.join(" "));
    }
    if !c.skipped.is_empty() {
        let s: Vec<String> = c.skipped.iter().map(|(e, n)| format!("{e}:{n}")).collect();
        outln!(
            out,
            "  skipped lines {} ({})",
            c.skipped_total(),
            s.join(" ")
        );
    }
    out
}

/// `nvmos record-swap`'s summary: requests each way, throttles, what was
/// dropped or lost, the cgroup (`limit` bytes), the swap file's extents.
pub fn record_swap_text(
    output: &Path,
    s: &nvmos_swap::record::RecordSwapSummary,
    limit: u64,
) -> String {
    let mut out = String::new();
    outln!(out, "{}", output.display());
    outln!(
        out,
        "  swap-in requests   {} ({:.1} MiB)",
        s.reads,
        s.read_bytes as f64 / 1048576.0
    );
    outln!(
        out,
        "  swap-out requests  {} ({:.1} MiB)",
        s.writes,
        s.write_bytes as f64 / 1048576.0
    );
    outln!(out, "  reclaim throttles  {}", s.throttles);
    outln!(
        out,
        "  other disk I/O     {} requests (not the swap file, dropped)",
        s.other_requests
    );
    outln!(out, "  lost events        {}", s.lost_events);
    outln!(
        out,
        "  cgroup             {} (limit {} MiB)",
        s.cgroup,
        limit >> 20
    );
    outln!(out, "  swap file extents  {}", s.extents);
    outln!(out, "  wall time          {:.2} s", s.wall_ns as f64 / 1e9);
    out
}
