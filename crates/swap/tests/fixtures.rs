//! The shipped fixtures: the lackey trace of a real program runs through
//! the model under a memory limit, and the recorded swap trace has the
//! phases and traffic the study relies on.

use std::path::PathBuf;

use nvmos_swap::analysis::distributions;
use nvmos_swap::{lackey, run_workload, DeviceSpec, Dir, SwapConfig, SwapTrace};

fn traces() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../traces/swap")
}

#[test]
fn lackey_fixture_swaps_under_a_memory_limit() {
    let w = lackey::read_lackey(&traces().join("lackey_kv.lackey.zst")).unwrap();
    // 12 MiB of records plus program text and stack.
    assert!(w.pages > 3000 && w.pages < 6000, "{} pages", w.pages);
    assert!(w.refs.len() > 10_000_000);
    assert!(w.file.iter().any(|&f| f), "text pages are file-backed");
    let cfg = SwapConfig {
        memory_pages: u64::from(w.pages) / 2,
        swap_pages: w.pages * 2,
        ..SwapConfig::default()
    };
    let r = run_workload(&cfg, &DeviceSpec::preset("SCM-400").unwrap(), &w).unwrap();
    let s = &r.stats;
    assert_eq!(s.refs, w.refs.len() as u64);
    assert!(s.pages_swapped_out > 1000 && s.major_faults > 1000, "{s:?}");
    // Every page written to swap is counted once per write on the device.
    let counted: u64 = r.writes_per_page.iter().map(|&c| u64::from(c)).sum();
    assert_eq!(counted, s.pages_swapped_out);
    // Half the memory: the same program in full memory never swaps.
    let full = SwapConfig {
        memory_pages: u64::from(w.pages) * 2,
        ..cfg
    };
    let r = run_workload(&full, &DeviceSpec::preset("SCM-400").unwrap(), &w).unwrap();
    assert_eq!(r.stats.pages_swapped_out, 0);
}

#[test]
fn recorded_swap_trace_has_clean_and_aged_phases() {
    let t = SwapTrace::read(&traces().join("swap_churn.swt.zst")).unwrap();
    assert!(t.header["command"].contains("swap_churn.py"));
    let clean = t.phase_requests("clean").unwrap();
    let aged = t.phase_requests("aged-8").unwrap();
    assert!(!clean.is_empty() && !aged.is_empty());
    let (_, w) = distributions(&t.requests);
    assert!(w.requests > 1000);
    assert!(t.requests.iter().any(|r| r.dir == Dir::Read));
    // Offsets fall inside the swap file, after its header page.
    let size: u64 = t.header["swap_bytes"].parse().unwrap();
    assert!(t
        .requests
        .iter()
        .all(|r| r.offset >= 4096 && r.offset + r.size <= size));
}
