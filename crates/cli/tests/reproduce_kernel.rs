//! The kernel results page: made from the kernel tools' JSON by
//! `nvmos reproduce --only kernel --kernel-from DIR`, refused when the
//! JSON is not theirs or is missing, when the option comes without
//! `--only kernel`, and when the measurements would run without a
//! will-it-scale checkout.

mod reproduce_common;
use reproduce_common::nvmos;

/// What `nvmos kernel bench --json` writes, one cell and one comparison.
const BENCH: &str = r#"{
  "kernel": "0123abcd", "icount": true, "runs": 2, "max_spread_pct": 0.5,
  "accel": "tcg", "count": 64, "repeat": 32, "mixed": 32, "seconds": 12.0,
  "cells": [{"policy": "lis31", "cpus": 1, "pattern": "repeat", "kind": "alloc",
    "instructions": {"requests": 32, "mean": 421.0, "sd": 0.0, "median": 421.0, "p99": 421.0, "max": 421.0},
    "run_means": [421.0, 421.0],
    "tsc": {"requests": 32, "refused": 0, "mean": 426.0, "sd": 0.0}}],
  "guests": [{"policy": "lis31", "cpus": 1, "run": 1, "boot_s": 14.0, "host_s": 15.0, "records": 64, "unpaired_markers": 0, "plugin_bytes": 528}],
  "user_space": [{"policy": "lis31", "allocator": "LiS-31", "threads": 1, "pattern": "repeat", "kind": "alloc", "requests": 32, "mean_cycles": 20.0, "sd_cycles": 3.0}],
  "comparisons": [{"cpus": 1, "pattern": "repeat", "buddy_mean": 336.1, "lis31_mean": 356.2, "gain_pct": -6.0,
    "buddy_sd": 77.0, "lis31_sd": 73.5, "user_buddy_cycles": 19.6, "user_lis31_cycles": 0.4, "user_gain_pct": 98.0}]
}"#;

/// What `nvmos kernel systime --json` writes, one row.
const SYSTIME: &str = r#"{
  "kernel": "0123abcd", "runs": 3, "cpus": 2, "mem_mib": 2048, "seconds": 100.0,
  "rows": [{"program": "gzip", "policy": "adaptive",
    "runs": [{"real": 10.0, "user": 9.0, "sys": 0.5}],
    "real": {"mean": 10.0, "sd": 0.1, "min": 9.9, "max": 10.1},
    "user": {"mean": 9.0, "sd": 0.1, "min": 8.9, "max": 9.1},
    "sys": {"mean": 0.5, "sd": 0.01, "min": 0.49, "max": 0.51},
    "sys_overhead_pct": 4.2, "real_overhead_pct": 0.3}]
}"#;

/// What `nvmos kernel study --out` writes as `kernel.json`: two runs
/// with timelines (one of them migrating) and a pinned-banks row.
fn study_json() -> String {
    use nvmos_kernel::run::Policy;
    use nvmos_kernel::study::{Migration, PinnedRow, RunRow, Study, TimelinePoint};
    let point = |t_s: f64, off: f64| TimelinePoint {
        t_s,
        free_percent: 90.0,
        offlinable_percent: off,
        used_banks: 3,
        pinned_banks: 1,
        migrated_frames: 0,
    };
    let row = |policy: Policy, late: f64, migration: Option<Migration>| RunRow {
        policy,
        workload: "sparsejob".into(),
        run: 1,
        accel: "tcg".into(),
        boot_s: 9.0,
        total_s: 80.0,
        events: 1000,
        lost_events: 0,
        frees_before_recording: 0,
        wear: nvmos_sim::WearSummary::of(&[1, 2, 3], 1_000_000_000),
        counters: Default::default(),
        counter_delta: Default::default(),
        used_banks: 3,
        pinned_banks: 2,
        banks: 16,
        pinned_banks_placed: 2,
        pinned_banks_placed_untraced: 2,
        pinned_banks_reserved_only: 0,
        pinned_banks_added: 0,
        pinned_banks_added_untraced: 0,
        reserved_pinned_frames: 0,
        trace_buffer_frames: 0,
        pinned_frames: 10,
        pinned_banks_workload: 0,
        pinned_banks_workload_peak: 1,
        timeline: vec![point(0.0, 80.0), point(2.0, 50.0), point(10.0, late)],
        migration,
        page_flags: Default::default(),
        console_log: "console.log".into(),
        trace: None,
    };
    let s = Study {
        mem_mib: 2048,
        cpus: 1,
        runs: vec![
            row(Policy::Adaptive, 50.0, None),
            row(
                Policy::AdaptiveMigrate,
                77.0,
                Some(Migration {
                    passes: 20,
                    candidate_banks: 6,
                    emptied_banks: 5,
                    moved_frames: 12288,
                    failed_frames: 0,
                    unmovable_frames: 0,
                    task_ns: 123_000_000,
                    ns_per_moved_frame: 123_000_000.0 / 12288.0,
                }),
            ),
        ],
        replay: Vec::new(),
        ibuddy_max_reduction: Vec::new(),
        bank_mib: 128,
        pinned_banks: vec![PinnedRow {
            workload: "sparsejob".into(),
            buddy: 9.0,
            adaptive: 2.0,
            ratio: 2.0 / 9.0,
            buddy_placed: 8.0,
            adaptive_placed: 2.0,
            ratio_placed: 0.25,
            buddy_untraced: 7.0,
            adaptive_untraced: 1.0,
            ratio_untraced: 1.0 / 7.0,
            buddy_added: 5.0,
            adaptive_added: 0.0,
            buddy_added_untraced: 4.0,
            adaptive_added_untraced: 0.0,
            buddy_workload: 6.0,
            adaptive_workload: 0.0,
            ratio_workload: 0.0,
            adaptive_migrate_workload: f64::NAN,
            buddy_workload_peak: 6.0,
            adaptive_workload_peak: 1.0,
            ratio_workload_peak: 1.0 / 6.0,
            adaptive_migrate_workload_peak: 1.0,
            banks: 16,
        }],
        sample_ms: Some(1000),
        icount: true,
        failed: Vec::new(),
        planned: 2,
    };
    serde_json::to_string(&s).unwrap()
}

/// What `nvmos kernel wis --json` writes: page_fault1 at 2 vCPUs under
/// buddy and lis31.
fn wis_json() -> String {
    use nvmos_kernel::run::Policy;
    use nvmos_kernel::wis::{Cell, GuestInfo, Sample, Summary, TestSource, Wis};
    let cell = |policy, ops: u64, vs_buddy| Cell {
        policy,
        cpus: 2,
        test: "page_fault1".into(),
        tasks: 2,
        samples: vec![Sample {
            run: 1,
            ns: 1_000_000_000,
            ops,
            task_ops: vec![ops / 2, ops - ops / 2],
        }],
        ops_per_s: Summary {
            median: ops as f64,
            min: ops as f64,
            max: ops as f64,
            spread_pct: 0.0,
        },
        per_task_ops_per_s: ops as f64 / 2.0,
        vs_buddy,
    };
    let guest = |policy| GuestInfo {
        policy,
        cpus: 2,
        run: 1,
        boot_s: 18.0,
        host_s: 80.0,
    };
    let w = Wis {
        kernel: "0123abcd".into(),
        accel: "tcg".into(),
        icount_options: "shift=0,sleep=off".into(),
        mem_mib: 2048,
        runs: 1,
        warmup_ms: 1000,
        interval_ms: 1000,
        samples: 1,
        tests: vec![TestSource {
            name: "page_fault1".into(),
            description: "Anonymous memory page fault".into(),
            sha256: "def0d20d431b1f26".into(),
        }],
        cells: vec![
            cell(Policy::Buddy, 240_000, None),
            cell(Policy::Lis31, 234_000, Some(0.975)),
        ],
        guests: vec![guest(Policy::Buddy), guest(Policy::Lis31)],
        seconds: 160.0,
    };
    serde_json::to_string(&w).unwrap()
}

#[test]
fn the_kernel_page_is_made_from_the_kernel_tools_json() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    std::fs::write(runs.join("bench.json"), BENCH).unwrap();
    std::fs::write(runs.join("systime.json"), SYSTIME).unwrap();
    std::fs::write(runs.join("kernel.json"), study_json()).unwrap();
    std::fs::write(runs.join("wis.json"), wis_json()).unwrap();
    let out = dir.path().join("out");
    let make = || {
        nvmos(
            dir.path(),
            &[
                "reproduce",
                "--only",
                "kernel",
                "--kernel-from",
                runs.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
        )
    };
    let o = make();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(out.join("kernel.md")).unwrap();
    for want in [
        "Cost per request",
        "seed 000's Table 2 in the kernel",
        "356.2",
        "System time of real programs",
        "+4.2",
        "seed 004's Fig. 10",
        // adaptive-migrate: 80 for 2 s, then 50 for 8 s: 56 over 10 s.
        "56.0",
        "12288",
        "will-it-scale in the guest",
        "not real time",
        "234000",
        "0.975",
    ] {
        assert!(page.contains(want), "{want} missing from:\n{page}");
    }
    assert!(out.join("data/kernel.json").is_file());

    // No wis.json: refused, naming the file and the tool that writes it.
    std::fs::remove_file(runs.join("wis.json")).unwrap();
    let o = make();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("wis.json: missing") && err.contains("nvmos kernel wis --json"),
        "{err}"
    );
    std::fs::write(runs.join("wis.json"), wis_json()).unwrap();

    // Not the tools' JSON: refused, naming the file.
    std::fs::write(runs.join("systime.json"), "{\"rows\": 3}").unwrap();
    let o = make();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("systime.json"), "{err}");

    // Without --only kernel the option means nothing: refused.
    let o = nvmos(
        dir.path(),
        &["reproduce", "--only", "evaluate", "--kernel-from", "runs"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--kernel-from"));
    let o = nvmos(
        dir.path(),
        &["reproduce", "--only", "evaluate", "--wis-source", "wis"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--wis-source: only with --only kernel"));

    // Running the kernel measurements needs a will-it-scale checkout:
    // refused at once, before anything runs, rather than a page without
    // its table.
    let o = nvmos(
        dir.path(),
        &[
            "reproduce",
            "--only",
            "kernel",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("--wis-source DIR"), "{err}");
}

/// What `nvmos kernel levelling --json` writes: one workload, one run of
/// each setting.
fn levelling_json() -> String {
    use nvmos_kernel::levelling::{Levelling, Measured, Median, Workload};
    use nvmos_kernel::run::{HotMigrate, Policy};
    let m = |copies: u64, max: u32, life: f64| Measured {
        run: 1,
        writes: 263_000,
        copies,
        frames: 524_190,
        max,
        lifetime_pct: life,
        extra_writes_pct: 100.0 * copies as f64 / 263_000.0,
        passes: 120,
        hot: copies,
        deferred: 0,
        no_better: 0,
        failed: 0,
        busy: 0,
        task_ms: 60.0,
        guest_s: 6.0,
        host_s: 40.0,
    };
    let med = |x: f64| Median {
        median: x,
        min: x,
        max: x,
    };
    let l = Levelling {
        kernel: "0123abcd".into(),
        policy: Policy::IBuddy,
        hot: HotMigrate::new(50),
        runs: 1,
        cpus: 1,
        mem_mib: 2048,
        workloads: vec![Workload {
            workload: "memstress 512 2".into(),
            counting: vec![m(0, 40, 1.2543)],
            moving: vec![m(24, 5, 10.0371)],
            counting_lifetime: med(1.2543),
            moving_lifetime: med(10.0371),
            ratio: 10.0371 / 1.2543,
            extra_writes: med(0.0091),
            task_pct: med(1.0),
        }],
        checks: Vec::new(),
        seconds: 80.0,
    };
    serde_json::to_string(&l).unwrap()
}

#[test]
fn the_hot_migrate_page_is_made_from_kernel_levellings_json() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let out = dir.path().join("out");
    let make = || {
        nvmos(
            dir.path(),
            &[
                "reproduce",
                "--only",
                "hot-migrate",
                "--hot-from",
                runs.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
        )
    };
    // Missing: refused, naming the file and the tool.
    let o = make();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("levelling.json: missing") && err.contains("nvmos kernel levelling --json"),
        "{err}"
    );
    std::fs::write(runs.join("levelling.json"), levelling_json()).unwrap();
    let o = make();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(out.join("hot-migrate.md")).unwrap();
    for want in [
        "Write-aware levelling in the kernel",
        "memstress 512 2",
        "10.0371",
        "1.2543",
        "8.00",
    ] {
        assert!(page.contains(want), "{want} missing from:\n{page}");
    }
    // Without --only hot-migrate the option means nothing: refused.
    let o = nvmos(
        dir.path(),
        &["reproduce", "--only", "evaluate", "--hot-from", "runs"],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--hot-from: only with --only hot-migrate"));
}
