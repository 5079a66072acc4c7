//! `nvmos pmo …` (`nvmos_pmo`, persistent memory objects at a shell): the
//! text each subcommand prints from what the pool returns.

use std::fmt::Write as _;
use std::path::Path;

use nvmos_pmo::tools::{HeapReport, InfoRow};
use nvmos_pmo::{AcceptReport, CheckReport, ObjectInfo, PoolInfo, RepairReport, VerifyReport};

/// A line into the text being built (writing to a `String` cannot fail).
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

/// `pool create`: the new pool at `path`.
pub fn pool_created_text(path: &Path, info: &PoolInfo) -> String {
    format!(
        "created pool {} ({} bytes, {} data frames, durability {:?})\n",
        path.display(),
        info.size,
        info.data_frames,
        info.durability
    )
}

/// `pool info`: size, free frames, medium, objects.
pub fn pool_text(info: &PoolInfo) -> String {
    format!(
        "pool {}: {} bytes, {} of {} data frames free, durability {:?}, {} objects\n",
        info.path.display(),
        info.size,
        info.free_frames,
        info.data_frames,
        info.durability,
        info.objects.len()
    )
}

/// `ls`: a line per object; a quarantined one says why.
pub fn ls_text(objects: &[ObjectInfo]) -> String {
    let mut out = String::new();
    outln!(
        out,
        "{:<24} {:>12} {:>9} {:>7} {:>8} {:>16}",
        "NAME",
        "BYTES",
        "ENCRYPTED",
        "EPOCH",
        "WRITTEN",
        "ADDRESS"
    );
    for o in objects {
        if let Some(why) = &o.damaged {
            outln!(out, "{:<24} QUARANTINED (slot {}): {why}", o.name, o.slot);
            continue;
        }
        outln!(
            out,
            "{:<24} {:>12} {:>9} {:>7} {:>8} {:>#16x}",
            o.name,
            o.size,
            if o.encrypted { "yes" } else { "no" },
            o.epoch,
            o.pages_written,
            o.base_address
        );
    }
    out
}

/// `create`: the object created.
pub fn created_text(info: &ObjectInfo) -> String {
    format!(
        "created {} ({} bytes, {}, at {:#x})\n",
        info.name,
        info.size,
        if info.encrypted {
            "encrypted"
        } else {
            "not encrypted"
        },
        info.base_address
    )
}

/// `info [--stats]`: each object, and its heap where asked for.
pub fn info_text(rows: &[InfoRow]) -> String {
    let mut out = String::new();
    for row in rows {
        let o = &row.object;
        outln!(
            out,
            "{}: {} bytes, {}, epoch {}, {} pages written",
            o.name,
            o.size,
            if o.encrypted { "encrypted" } else { "plain" },
            o.epoch,
            o.pages_written
        );
        match &row.heap {
            Some(HeapReport::None { none }) => outln!(out, "  heap: none ({none})"),
            Some(HeapReport::Stats(h)) => outln!(
                out,
                "  heap: {} blocks / {} bytes allocated, {} free blocks / {} bytes free, largest free {}, fragmentation {:.3}, metadata {} bytes",
                h.allocated_blocks,
                h.allocated_bytes,
                h.free_blocks,
                h.free_bytes,
                h.largest_free,
                h.fragmentation,
                h.metadata_bytes
            ),
            None => {}
        }
    }
    out
}

/// `verify NAME`: every page that failed, then the summary.
pub fn verify_text(name: &str, report: &VerifyReport) -> String {
    let mut out = String::new();
    for (page, err) in &report.bad_pages {
        outln!(out, "page {page}: {err}");
    }
    outln!(
        out,
        "{name}: root (epoch {}) and {} page-table pages authentic; {} of {} pages checked ({} written), {} failed",
        report.epoch,
        report.tables,
        report.pages,
        report.pages,
        report.pages_written,
        report.bad_pages.len()
    );
    out
}

/// `check`: every slot, the notes, the state store's disagreements, the
/// summary.
pub fn check_text(report: &CheckReport) -> String {
    let mut out = String::new();
    for o in &report.objects {
        outln!(
            out,
            "slot {:>3} {:<24} {}",
            o.slot,
            o.name,
            if o.ok {
                o.status.clone()
            } else {
                format!("DAMAGED: {}", o.status)
            }
        );
    }
    for n in &report.notes {
        outln!(out, "note: {n}");
    }
    for m in &report.state_mismatches {
        outln!(out, "state store: {m}");
    }
    outln!(
        out,
        "pool {}: {} objects, {} quarantined, {} state-store disagreements; {} data frames in use, {} free",
        report.path.display(),
        report.objects.len(),
        report.objects.iter().filter(|o| !o.ok).count(),
        report.state_mismatches.len(),
        report.frames_in_use,
        report.frames_free
    );
    out
}

/// `repair [--accept-rollback]`: what the restore accepted changed, then
/// what the repair kept, left and cleared.
pub fn repair_text(accepted: Option<&AcceptReport>, r: &RepairReport) -> String {
    let mut out = String::new();
    if let Some(a) = accepted {
        for m in &a.accepted {
            outln!(out, "accepted: {m}");
        }
        for id in &a.forgotten_ids {
            outln!(
                out,
                "state store: dropped pool {id:016x}, which was at this path before"
            );
        }
        for c in &a.rebased {
            outln!(out, "state store: {c}");
        }
        for l in &a.left {
            outln!(out, "state store: {l}");
        }
        if let Some(b) = &a.rebound {
            outln!(out, "state store: {b}");
        }
        outln!(
            out,
            "accepted the restore: {} slots re-based, {} epochs back",
            a.rebased.len(),
            a.epochs_back
        );
    }
    for q in &r.quarantined {
        outln!(out, "left untouched (cannot be verified): {q}");
    }
    for c in &r.records_cleared {
        outln!(out, "cleared {c}");
    }
    if let Some(why) = &r.scrub_skipped {
        outln!(out, "no free frame zeroed: {why}");
    }
    outln!(
        out,
        "repair: {} intact objects kept, {} quarantined left untouched, {} records cleared, {} free frames zeroed",
        r.salvaged.len(),
        r.quarantined.len(),
        r.records_cleared.len(),
        r.frames_scrubbed
    );
    out
}
