//! The page of psync beside PMDK: made from `nvmos bench psync --json`'s
//! record by `nvmos reproduce --only psync --psync-from DIR`, refused when
//! the record is missing, is not one, has no rows or lacks a row's
//! figure, and when the option comes without `--only psync`.

use std::process::Output;

mod reproduce_common;
use reproduce_common::nvmos;

/// A record `nvmos bench psync --object 2MiB --pmem-total 8MiB
/// --disk-total 512KiB --rounds 1 --group-objects 2 --json` wrote on this
/// machine (figures rounded to three places).
const RECORD: &str = include_str!("data/psync-record.json");

/// `reproduce --only psync --psync-from runs --out out` in a folder whose
/// `runs/psync.json` is `record` (none when `None`).
fn reproduce(record: Option<&str>, extra: &[&str]) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    if let Some(record) = record {
        std::fs::write(runs.join("psync.json"), record).unwrap();
    }
    let mut args = vec!["reproduce", "--out", "out"];
    args.extend_from_slice(extra);
    (nvmos(dir.path(), &args), dir)
}

#[test]
fn the_psync_page_is_made_from_the_record_with_its_checks() {
    let (o, dir) = reproduce(Some(RECORD), &["--only", "psync", "--psync-from", "runs"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let out = dir.path().join("out");
    let page = std::fs::read_to_string(out.join("psync.md")).unwrap();
    assert!(page.starts_with("# psync beside PMDK"), "{page}");
    // The run's own settings, in the section's text.
    assert!(
        page.contains("an object of 2 MiB swept 64 pages per psync"),
        "{page}"
    );
    // A total under a MiB in KiB, and the disk folder the run used.
    assert!(
        page.contains("512 KiB in the system's temporary directory"),
        "{page}"
    );
    // Every row of the record, PMDK's beside nvmos's.
    assert!(page.contains("PMDK libpmemobj tx (undo log)"), "{page}");
    assert!(page.contains("2.327"), "{page}");
    // 2.327 / 1.641: 1.42x PMDK, met at 1x and missed at 2x.
    assert!(page.contains("1.418"), "{page}");
    assert!(page.contains("MISSED"), "{page}");
    assert!(out.join("data/psync.json").is_file());
    let index = std::fs::read_to_string(out.join("index.md")).unwrap();
    assert!(index.contains("[psync beside PMDK](psync.md)"), "{index}");
}

#[test]
fn a_missing_foreign_or_incomplete_record_is_refused_naming_it() {
    // No record in the folder.
    let (o, _dir) = reproduce(None, &["--only", "psync", "--psync-from", "runs"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("psync.json: missing") && err.contains("nvmos bench psync --json"),
        "{err}"
    );

    // Another tool's JSON.
    let (o, _dir) = reproduce(
        Some(r#"{"tool": "bench-peers", "cells": []}"#),
        &["--only", "psync", "--psync-from", "runs"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not `nvmos bench psync --json` output"),
        "{err}"
    );

    // PMDK's row without a figure (its program could not be built): half
    // a comparison is not published.
    let mut record: serde_json::Value = serde_json::from_str(RECORD).unwrap();
    let row = record["rows"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["system"] == "PMDK libpmemobj tx (undo log)")
        .unwrap();
    row["gib_per_s"] = serde_json::Value::Null;
    row["gib_per_cpu_s"] = serde_json::Value::Null;
    row["rounds"] = serde_json::json!([]);
    row["missing"] = "no C compiler on PATH".into();
    let (o, dir) = reproduce(
        Some(&record.to_string()),
        &["--only", "psync", "--psync-from", "runs"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("psync.json") && err.contains("no C compiler on PATH"),
        "{err}"
    );
    assert!(!dir.path().join("out/psync.md").exists());

    // A record without a row.
    let mut empty: serde_json::Value = serde_json::from_str(RECORD).unwrap();
    empty["rows"] = serde_json::json!([]);
    let (o, _dir) = reproduce(
        Some(&empty.to_string()),
        &["--only", "psync", "--psync-from", "runs"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("psync.json: no rows"), "{err}");

    // The option without the page.
    let (o, _dir) = reproduce(Some(RECORD), &["--only", "pmo", "--psync-from", "runs"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--psync-from: only with --only psync"),
        "{err}"
    );
}
