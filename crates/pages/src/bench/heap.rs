//! `nvmos bench heap` (`nvmos_pmo_bench::heap`, the heap inside an object
//! against PMDK's `pmemobj_alloc`/`pmemobj_free`): its table.

use std::fmt::Write as _;

use nvmos_pmo_bench::heap::HeapBench;
use nvmos_report::TextTable;

/// The settings, a row per system (median and every run) and the checks.
pub fn table(r: &HeapBench) -> String {
    let c = &r.options;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "heap: {} operations (64-4096 B allocations, random frees, up to {} live), {} MiB heap on {}; median of {} runs\nload average at start: {}",
        c.ops,
        c.live_max,
        c.heap_bytes >> 20,
        c.pmem_dir.display(),
        c.rounds,
        r.loadavg
    );
    let mut t = TextTable::new([
        "system",
        "ns/op",
        "cpu ns/op",
        "allocs",
        "frees",
        "refused",
        "live MiB",
        "largest alloc MiB",
        "fragmentation",
        "faults",
        "wp faults",
        "pages synced",
        "runs (ns/op)",
    ]);
    t.left(1).left(13);
    let mib = |b: u64| format!("{:.2}", b as f64 / (1u64 << 20) as f64);
    for row in &r.rows {
        let runs: Vec<String> = row
            .rounds
            .iter()
            .map(|s| format!("{:.0}", s.ns_per_op))
            .collect();
        let mut runs = runs.join(" ");
        if let Some(why) = &row.missing {
            let _ = write!(runs, " (missing: {why})");
        }
        match row.median {
            Some(m) => t.row([
                row.system.clone(),
                format!("{:.0}", m.ns_per_op),
                format!("{:.0}", m.cpu_ns_per_op),
                m.allocs.to_string(),
                m.frees.to_string(),
                m.failed_allocs.to_string(),
                mib(m.live_bytes),
                mib(m.largest_allocatable),
                m.heap_fragmentation
                    .map_or("-".into(), |f| format!("{f:.3}")),
                m.faults.to_string(),
                m.wp_faults.to_string(),
                m.pages_synced.to_string(),
                runs,
            ]),
            None => t.row([
                row.system.clone(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                runs,
            ]),
        };
    }
    s.push_str(&t.render());
    s.push('\n');
    s.push_str(&crate::checks::checks_text(&r.checks));
    s
}
