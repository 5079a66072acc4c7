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
