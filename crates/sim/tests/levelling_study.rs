//! `study levelling` at quick scale on a shipped trace: every placement
//! gets every scheme, the Start-Gap checks are in the output, and the
//! randomising schemes beat no levelling on real placements.

use std::path::PathBuf;

use nvmos_sim::levelling::study::{run, LevellingStudy, Options};
use nvmos_sim::study::{Scale, Study};

fn trace(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../traces")
        .join(name)
}

#[test]
fn quick_run_on_numpy_has_every_cell_and_the_checks() {
    let path = trace("numpy.nvt");
    assert!(path.exists(), "shipped trace {} missing", path.display());
    let options = Options {
        traces: vec![path],
        ..LevellingStudy::options(Scale::Quick)
    };
    let mut reports = 0;
    let out = run(&options, &mut |_| reports += 1).unwrap();
    assert!(reports > 0);
    assert_eq!(out.schemes.len(), 4);
    assert_eq!(out.traces.len(), 1);
    let rows = &out.traces[0].rows;
    // The kernel's placement, buddy, iBuddy, LiS-31.
    assert_eq!(
        rows.len(),
        4,
        "{:?}",
        rows.iter().map(|r| &r.allocator).collect::<Vec<_>>()
    );
    for row in rows {
        assert_eq!(row.levelled.len(), 4);
        let pct: Vec<f64> = row
            .levelled
            .iter()
            .map(|l| l.lifetime_pct_of_ideal)
            .collect();
        eprintln!("{:<24} {:?}", row.allocator, pct);
        for p in &pct {
            assert!(p.is_finite() && *p > 0.0 && *p <= 100.0, "{row:?}");
        }
        // Randomised Start-Gap and Security Refresh both spread the hot
        // frames far beyond where the placement leaves them.
        assert!(pct[2] > pct[0] && pct[3] > pct[0], "{pct:?}");
    }
    assert_eq!(out.checks.len(), 2);
    for c in &out.checks {
        eprintln!("{} = {:.2} (met {})", c.what, c.measured, c.met);
        assert!(c.met, "{c:?}");
    }
    let json = serde_json::to_string(&out).unwrap();
    assert!(json.contains("security-refresh"));
}

/// The write-weighted part on the shipped `memstress_writes` trace, at
/// quick scale (one pass of iBuddy) and with a short steady state: every
/// write is on a frame, the policy's copies are within its budget and
/// are the extra writes, and its lifetime is over iBuddy alone's.
#[test]
fn write_weighted_part_accounts_for_every_write_and_copy() {
    use nvmos_sim::levelling::study::{Column, Regime};
    let numpy = trace("numpy.nvt");
    let path = trace("memstress_writes.nvt");
    let mut options = Options {
        traces: vec![numpy, path],
        allocators: Vec::new(),
        as_recorded: false,
        ..LevellingStudy::options(Scale::Quick)
    };
    options.written.steady_state = true;
    options.written.horizon.max_reps = 12;
    let out = run(&options, &mut |_| {}).unwrap();
    // numpy.nvt has no sampled writes: no write-weighted entry.
    assert_eq!(out.written.len(), 1);
    let t = &out.written[0];
    assert_eq!(t.trace, "memstress_writes");
    assert_eq!(t.write_samples, 225_466);
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.rows[0].regime, Regime::OnePass);
    assert_eq!(t.rows[1].regime, Regime::SteadyState);
    for row in &t.rows {
        assert_eq!(row.allocator, "iBuddy");
        assert_eq!(row.cells.len(), Column::ALL.len());
        assert_eq!(row.alone.row.result.reps, row.reps);
        assert_eq!(row.policy.row.result.reps, row.reps);
        for run in [&row.alone, &row.policy] {
            assert_eq!((run.row.refused, run.row.outside), (0, 0));
            // Every sampled write but the 3 to no live block, each pass.
            assert_eq!(run.demand_writes, (225_466 - 3) * u64::from(row.reps));
            let total: u64 = run.written.iter().map(|&w| u64::from(w)).sum();
            assert_eq!(total, run.demand_writes + run.pages_migrated);
        }
        assert_eq!(row.alone.pages_migrated, 0);
        let p = row.policy.policy.as_ref().unwrap();
        assert_eq!(p.pages_copied, row.policy.pages_migrated);
        assert_eq!(p.writes_seen, row.policy.demand_writes);
        let hm = row.cell(Column::HotMigrate).unwrap();
        assert!(hm.extra_writes_pct <= options.written.policy.budget_pct);
        assert!(
            (hm.extra_writes_pct - 100.0 * p.pages_copied as f64 / row.policy.demand_writes as f64)
                .abs()
                < 1e-9
        );
        let none = row.cell(Column::None).unwrap();
        assert_eq!(none.vs_alone, 1.0);
        assert!(hm.vs_alone > 1.0, "{row:?}");
        // Years are proportional to the endurance.
        assert!((none.years[1] / none.years[0] - 10.0).abs() < 1e-9);
    }
    // The one-pass iBuddy checks are there (4 per regime).
    assert_eq!(out.written_checks.len(), 8);
    let json = serde_json::to_string(&out).unwrap();
    assert!(json.contains("hot_migrate_start_gap"));
}
