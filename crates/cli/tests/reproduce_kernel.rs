//! The kernel results page: made from the kernel tools' JSON by
//! `nvmos reproduce --only kernel --kernel-from DIR`, refused when the
//! JSON is not theirs or the option comes without `--only kernel`.

use std::path::Path;
use std::process::{Command, Output};

fn nvmos(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvmos"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("running nvmos")
}

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

#[test]
fn the_kernel_page_is_made_from_the_kernel_tools_json() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    std::fs::write(runs.join("bench.json"), BENCH).unwrap();
    std::fs::write(runs.join("systime.json"), SYSTIME).unwrap();
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
    ] {
        assert!(page.contains(want), "{want} missing from:\n{page}");
    }
    assert!(out.join("data/kernel.json").is_file());

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
}
