//! Unit tests of the replay: synthetic workloads and traces through the
//! bank accounting.

use super::*;
use nvmos_trace::Op;

fn machine() -> SyntheticMachine {
    // 64 MiB in 16 banks of 4 MiB.
    SyntheticMachine {
        name: "64 MiB".into(),
        frames: 16384,
        bank_frames: 1024,
        page_size: 4096,
    }
}

fn models() -> Vec<PowerModel> {
    vec![PowerModel::preset("seed004-relative").unwrap()]
}

fn small(mut w: Workload) -> Workload {
    w.epochs = 40;
    w
}

#[test]
fn same_seed_same_figures_and_migration_helps_adaptive() {
    let w = small(Workload::light(7));
    let a = run_synthetic(AllocatorKind::Adaptive, false, &w, &machine(), &models()).unwrap();
    let b = run_synthetic(AllocatorKind::Adaptive, false, &w, &machine(), &models()).unwrap();
    assert_eq!(a.offline_percent, b.offline_percent);
    assert_eq!(a.bank_map, b.bank_map);
    let m = run_synthetic(AllocatorKind::Adaptive, true, &w, &machine(), &models()).unwrap();
    // Same requests, so the same footprint and optimum.
    assert_eq!(a.optimum_offline_percent, m.optimum_offline_percent);
    assert!(m.pages_migrated > 0 && m.migration_passes == 40);
    assert!(
        m.offline_percent >= a.offline_percent,
        "{} < {}",
        m.offline_percent,
        a.offline_percent
    );
    assert!(m.offline_percent <= m.optimum_offline_percent + 1e-9);
    assert!(m.energy[0].report.migration > 0.0);
    assert_eq!(a.energy[0].report.migration, 0.0);
}

#[test]
fn buddy_cannot_migrate_and_keeps_more_banks_up() {
    let w = small(Workload::light(3));
    let buddy = run_synthetic(AllocatorKind::Buddy, true, &w, &machine(), &models()).unwrap();
    assert!(!buddy.migration && buddy.pages_migrated == 0);
    let adaptive = run_synthetic(AllocatorKind::Adaptive, true, &w, &machine(), &models()).unwrap();
    assert!(adaptive.migration);
    assert!(adaptive.offline_percent > buddy.offline_percent);
    assert!(adaptive.pinned_banks <= buddy.pinned_banks);
}

#[test]
fn bad_workloads_and_layouts_are_clear_errors() {
    let mut w = Workload::medium(1);
    w.footprint_max_percent = 120.0;
    let err = run_synthetic(AllocatorKind::Buddy, false, &w, &machine(), &models()).unwrap_err();
    assert!(
        err.to_string()
            .contains("footprint_max_percent = 120% is outside 0–100%"),
        "{err}"
    );
    let mut w = Workload::medium(1);
    w.footprint_min_percent = 90.0;
    assert!(run_synthetic(AllocatorKind::Buddy, false, &w, &machine(), &models()).is_err());
    let mut m = machine();
    m.bank_frames = 1000;
    let err = run_synthetic(
        AllocatorKind::Buddy,
        false,
        &Workload::light(1),
        &m,
        &models(),
    )
    .unwrap_err();
    let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(chain.contains("does not divide zone 0"), "{chain}");
}

#[test]
fn trace_replay_follows_migrated_blocks() {
    use std::convert::Infallible;
    let ev = |t: u64, op: Op, pfn: u64| -> Result<Event, Infallible> {
        Ok(Event {
            time_ns: t,
            cpu: 0,
            op,
            pfn: Pfn(pfn),
            order: Order::ZERO,
        })
    };
    // Fill two banks' worth of user pages, free most, migrate, free the rest.
    let mut trace = Vec::new();
    for p in 0..2048u64 {
        trace.push(ev(p, Op::Alloc(MigrateType::Movable), 100_000 + p));
    }
    for p in 0..2048u64 {
        if p % 16 != 0 {
            trace.push(ev(3000 + p, Op::Free, 100_000 + p));
        }
    }
    for p in (0..2048u64).step_by(16) {
        trace.push(ev(2_000_000_000 + p, Op::Free, 100_000 + p));
    }
    let m = TraceMachine {
        frames: 16384,
        bank_frames: 1024,
        page_size: 4096,
        cpus: 1,
        migrate_every_ns: 1_000_000_000,
    };
    let row = run_trace(
        TracePlacement::Allocator(AllocatorKind::Adaptive),
        true,
        trace.clone(),
        &m,
        &models(),
    )
    .unwrap();
    assert!(row.pages_migrated > 0, "{row:?}");
    assert_eq!(row.up_banks, 0, "every block freed through its new place");
    // The kernel's own placement: pfns 100000.. lie in banks 97 and 98
    // of a machine large enough.
    let big = TraceMachine {
        frames: 1 << 17,
        ..m
    };
    let linux = run_trace(TracePlacement::AsRecorded, true, trace, &big, &models()).unwrap();
    assert!(!linux.migration && linux.pages_migrated == 0);
    assert_eq!(linux.up_banks, 0);
    assert!(linux.max_offline_percent < 100.0);
}

fn tiny() -> PowerOptions {
    PowerOptions {
        sizes: vec![16384],
        bank_frames: 1024,
        epochs: 12,
        workloads: vec!["light".into()],
        allocators: vec![AllocatorKind::Buddy, AllocatorKind::Adaptive],
        power: vec!["seed004-relative".into()],
        traces: None,
        latency: Some(LatencyOptions {
            pages: vec![500],
            frames: 16384,
            rounds: 1,
        }),
        ..PowerOptions::default()
    }
}

#[test]
fn the_study_reports_progress_rows_and_checks_as_data() {
    use crate::study::{Scale, Study};
    let mut seen = Vec::new();
    let study = PowerStudy::run(&tiny(), &mut |p| seen.push(p)).unwrap();
    // Buddy; Adaptive without and with migration; then two latency runs.
    assert_eq!(seen.len(), 5);
    assert!(seen
        .iter()
        .enumerate()
        .all(|(i, p)| p.done == i as u64 && p.total == 5));
    assert_eq!(seen[2].step, "light 64 MiB Adaptive-Buddy +migration");
    let rows = &study.synthetic[0].rows;
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2].label(), "Adaptive-Buddy +migration");
    let direct = run_synthetic(
        AllocatorKind::Adaptive,
        true,
        &study.synthetic[0].workload,
        &study.synthetic[0].machine,
        &models(),
    )
    .unwrap();
    assert_eq!(
        direct.offline_percent, rows[2].offline_percent,
        "the study is the replay"
    );
    // Fig. 10: one sample per epoch and the end; migration only adds up.
    let tl = &rows[2].timeline;
    assert_eq!(tl.len(), 13);
    assert!(tl
        .windows(2)
        .all(|w| w[0].migrated_percent <= w[1].migrated_percent));
    let end = tl.last().unwrap();
    let migrated = 100.0 * rows[2].pages_migrated as f64 / 16384.0;
    assert!((end.migrated_percent - migrated).abs() < 1e-9 && migrated > 0.0);
    assert!(rows[1].timeline.iter().all(|s| s.migrated_percent == 0.0));
    // The same requests: the same free memory with and without migration.
    let free = |r: &PowerRow| {
        r.timeline
            .iter()
            .map(|s| s.free_percent)
            .collect::<Vec<_>>()
    };
    assert_eq!(free(&rows[1]), free(&rows[2]));
    assert!(tl
        .iter()
        .all(|s| s.offline_percent <= s.optimum_offline_percent + 1e-9));
    let target = study
        .checks
        .iter()
        .find(|c| {
            c.what
                .starts_with("Adaptive-Buddy with migration within 5 points")
        })
        .unwrap();
    assert_eq!(target.measured, rows[2].points_off_optimum);
    assert_eq!(target.met, rows[2].points_off_optimum <= 5.0);
    assert_eq!(target.seed_figure, None, "the seed ran no 64 MiB machine");
    assert!(study
        .checks
        .iter()
        .any(|c| c.what.starts_with("Buddy keeps nearly")));
    let latency = study.latency.as_ref().unwrap();
    assert_eq!(latency.rows.len(), 2);
    assert!(study.checks.iter().any(|c| c
        .what
        .contains("worst-case allocation at most 10x its mean (500 pages)")));
    // The options round-trip through JSON (Python sends them so).
    let json = serde_json::to_string(&study.options).unwrap();
    assert_eq!(serde_json::from_str::<PowerOptions>(&json).unwrap(), tiny());
    let quick = PowerStudy::options(Scale::Quick);
    assert_eq!(
        (quick.sizes.clone(), quick.bank_frames, quick.epochs),
        (vec![1 << 18, 1 << 16], 4096, 40)
    );
    assert_eq!(PowerStudy::options(Scale::Full), PowerOptions::default());
}

#[test]
fn the_study_stops_when_asked_and_refuses_bad_options_before_running() {
    let mut calls = 0;
    let err = run_study(&tiny(), &mut |_| {
        calls += 1;
        calls < 2
    })
    .unwrap_err();
    assert!(matches!(err, PowerStudyError::Cancelled), "{err}");
    let mut o = tiny();
    o.bank_frames = 1000;
    let err = run_study(&o, &mut |_| panic!("nothing runs")).unwrap_err();
    assert!(
        err.to_string()
            .contains("does not divide the machine size 64 MiB"),
        "{err}"
    );
    let mut o = tiny();
    o.latency.as_mut().unwrap().pages = vec![0];
    assert!(run_study(&o, &mut |_| panic!("nothing runs")).is_err());
    let mut o = tiny();
    o.workloads = vec!["huge:50-120".into()];
    let err = run_study(&o, &mut |_| panic!("nothing runs")).unwrap_err();
    assert!(
        err.to_string().contains("footprint_max_percent = 120%"),
        "{err}"
    );
    let err = serde_json::from_str::<PowerOptions>(r#"{"epoch": 3}"#).unwrap_err();
    assert!(err.to_string().contains("unknown field `epoch`"), "{err}");
}
